# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""evidence.py: PCIe link and RDMA counter readers on a simulated HGX node's sysfs, the GDS verdict record, the
desired-state document and the atomic textfile write; the rendered families go through prometheus_client."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


@pytest.fixture(scope="module")
def hgx(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"), 1)
    return root, manifest, topology.discover(Sysroot(root))


def write(root, rel, text, mode=0o644):
    path = os.path.join(root, rel.lstrip("/"))
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


@pytest.mark.parametrize("text,gts", [
    ("32.0 GT/s PCIe", 32.0), ("2.5 GT/s PCIe", 2.5), ("64.0 GT/s PCIe", 64.0), ("8.0 GT/s", 8.0),
    ("16.0 GT/s PCIe\n", 16.0), ("Unknown", None), ("Unknown speed", None), ("", None), (None, None),
    ("32 GT/s PCIe x", None), ("fast", None)])
def test_parse_speed(text, gts):
    assert evidence.parse_speed(text) == gts


@pytest.mark.parametrize("text,width", [("16", 16), ("8\n", 8), ("0", 0), ("x16", None), ("", None), (None, None),
                                        ("123", None)])
def test_parse_width(text, width):
    assert evidence.parse_width(text) == width


def test_path_devices_every_gpu_nic_and_bridge_once(hgx):
    _root, _manifest, facts = hgx
    devs = evidence.path_devices(facts)
    bdfs = [d[0] for d in devs]
    assert len(bdfs) == len(set(bdfs))
    pairs = facts["pairing"]
    assert set(p["gpu"] for p in pairs) == set(d[0] for d in devs if d[1] == "gpu")
    assert set(p["nic"] for p in pairs) == set(d[0] for d in devs if d[1] == "nic")
    assert set(b for p in pairs for b in p["bridges"]) == set(d[0] for d in devs if d[1] == "bridge")
    assert all(d[2] in ("upstream", "downstream") for d in devs if d[1] == "bridge")


def test_pcie_link_metrics_come_from_the_facts_judgement(hgx):
    """The textfile's PCIe link metrics are the pcie_link concern's links (facts["pcie_links"]): no second reader."""
    src, _manifest, facts = hgx
    links = facts["pcie_links"]
    assert links
    gpu = facts["pairing"][0]["gpu"]
    judged = [dict(x, state="degraded", current_width=8) if x["device"] == gpu else x for x in links]
    m = samples(prom.render(prom.families_from_evidence({"facts": dict(facts, pcie_links=judged)})))
    states = dict((dict(k)["state"], v) for k, v in m["gpufabric_pcie_links"].items())
    assert states["degraded"] == 1.0 and sum(states.values()) == len(links)
    assert dict((dict(k)["device"], v) for k, v in m["gpufabric_pcie_link_width"].items()) == {gpu: 8.0}
    assert not hasattr(evidence, "pcie_links")


def test_rdma_port_counters_known_names_only(hgx, tmp_path):
    _src, manifest, facts = hgx
    root = str(tmp_path)
    rail = manifest["rails"][0]
    base = "sys/class/infiniband/%s/ports/1" % rail["ibdev"]
    write(root, base + "/hw_counters/np_cnp_sent", "42\n", 0o444)
    write(root, base + "/hw_counters/rp_cnp_handled", "7\n", 0o444)
    write(root, base + "/hw_counters/out_of_sequence", "3\n", 0o444)
    write(root, base + "/hw_counters/req_cqe_error", "1\n", 0o444)
    write(root, base + "/hw_counters/lifespan", "10\n")               # the cache lifetime, not a counter
    write(root, base + "/hw_counters/rx_write_requests", "999\n", 0o444)  # traffic: not exported
    write(root, base + "/hw_counters/local_ack_timeout_err", "N/A\n", 0o444)
    write(root, base + "/counters/symbol_error", "5\n", 0o444)
    write(root, base + "/counters/port_rcv_data", "123456\n", 0o444)
    write(root, "sys/class/infiniband/rxe0/ports/1/hw_counters/retry_exceeded_err", "2\n", 0o444)
    write(root, "sys/class/infiniband/rxe0/ports/bogus/hw_counters/send_err", "2\n", 0o444)
    write(root, "sys/class/infiniband/mlx5_9/ports/1/state", "4: ACTIVE\n")
    ports = evidence.rdma_port_counters(Sysroot(root), facts)
    by = dict(((p["device"], p["port"]), p) for p in ports)
    assert sorted(by) == [(rail["ibdev"], "1"), ("mlx5_9", "1"), ("rxe0", "1")]
    mine = by[(rail["ibdev"], "1")]
    assert mine["rail"] == rail["netdev"] and mine["unreadable"] == ["hw_counters/local_ack_timeout_err"]
    assert sorted((c["dir"], c["name"], c["category"], c["value"]) for c in mine["counters"]) == [
        ("counters", "symbol_error", "error", 5), ("hw_counters", "np_cnp_sent", "congestion", 42),
        ("hw_counters", "out_of_sequence", "retry", 3), ("hw_counters", "req_cqe_error", "error", 1),
        ("hw_counters", "rp_cnp_handled", "congestion", 7)]
    m = samples(prom.render(prom.families_from_evidence({"rdma_ports": ports})))
    assert dict((dict(k)["device"], v) for k, v in m["gpufabric_rdma_port_cnp_sent_total"].items()) == \
        {rail["ibdev"]: 42.0}
    assert dict((dict(k)["rail"], v) for k, v in m["gpufabric_rdma_port_cnp_handled_total"].items()) == \
        {rail["netdev"]: 7.0}
    assert dict((dict(k)["device"], v) for k, v in m["gpufabric_rdma_port_retries_total"].items()) == \
        {rail["ibdev"]: 3.0}
    # the port's error counters summed (symbol_error + req_cqe_error); a port without readable ones has none
    assert dict((dict(k)["device"], v) for k, v in m["gpufabric_rdma_port_errors_total"].items()) == \
        {rail["ibdev"]: 6.0, "rxe0": 2.0}


def test_every_counter_category_has_a_family():
    # errors and retries are summed per port; of the congestion counters, CNPs sent and handled are exported
    assert set(evidence.RDMA_COUNTERS.values()) == set(prom.RDMA_SUMS) | {evidence.CONGESTION}
    assert all(evidence.RDMA_COUNTERS[name] == evidence.CONGESTION for name in prom.RDMA_OWN)
    for short in list(prom.RDMA_SUMS.values()) + list(prom.RDMA_OWN.values()):
        assert prom.METRICS[short][0] == "counter"


@pytest.mark.parametrize("result,recorded", [
    ({"transfer": {"bytes": 1}, "gds_active": True, "compat_fallback_suspected": False, "path": "/mnt/x",
      "size_mib": 16}, True),
    ({"transfer": {"bytes": 1}, "gds_active": False, "compat_fallback_suspected": None}, True),
    ({"transfer": None, "gds_active": False}, False),      # check mode: no transfer, proves nothing
    ({"gds_active": False}, False),                        # stopped at the preconditions
])
def test_gds_verdict_record(tmp_path, result, recorded):
    sr = Sysroot(str(tmp_path))
    doc = evidence.record_gds_verdict(sr, result, now=1000.5)
    got, warning = evidence.read_gds_verdict(sr)
    assert warning is None
    if not recorded:
        assert doc is None and got is None and not sr.exists(evidence.GDS_VERDICT_FILE)
        return
    assert got == doc and got["time"] == 1000.5 and got["gds_active"] is result["gds_active"]
    st = os.stat(sr.path(evidence.GDS_VERDICT_FILE))
    assert stat.S_IMODE(st.st_mode) == 0o644 and (st.st_uid, st.st_gid) == (0, 0)
    m = samples(prom.render(prom.families_from_evidence({"gds": got, "now": 1100.5})))
    assert "gpufabric_gds_verdict_age_seconds" not in m      # time() - the timestamp, in PromQL
    assert m["gpufabric_gds_verdict_timestamp_seconds"] == {frozenset(): 1000.5}
    assert m["gpufabric_gds_active"] == {frozenset(): float(result["gds_active"])}


@pytest.mark.parametrize("content", [
    "not json", "[]", json.dumps({"schema": "other", "time": 1, "gds_active": True}),
    json.dumps({"schema": evidence.GDS_VERDICT_SCHEMA, "time": "yesterday", "gds_active": True}),
    json.dumps({"schema": evidence.GDS_VERDICT_SCHEMA, "time": True, "gds_active": True}),
    json.dumps({"schema": evidence.GDS_VERDICT_SCHEMA, "time": 1, "gds_active": "yes"}),
    '{"schema": "%s", "time": NaN, "gds_active": true}' % evidence.GDS_VERDICT_SCHEMA])
def test_gds_verdict_bad_record_is_a_warning(tmp_path, content):
    write(str(tmp_path), evidence.GDS_VERDICT_FILE, content)
    doc, warning = evidence.read_gds_verdict(Sysroot(str(tmp_path)))
    assert doc is None and evidence.GDS_VERDICT_FILE in warning


def test_desired_document_round_trip(tmp_path):
    desired = {"dcb": {"priority": 3, "rails": ["ens1np0"]}, "nccl": {"ib_hca": "=mlx5_0"}}
    text = evidence.desired_document(desired)
    write(str(tmp_path), evidence.DESIRED_FILE, text)
    assert evidence.load_desired(Sysroot(str(tmp_path))) == desired
    assert evidence.load_desired(Sysroot(str(tmp_path / "none"))) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), {1: {2}}])
def test_desired_document_refuses_what_json_cannot_hold(bad):
    with pytest.raises(ValueError):
        evidence.desired_document({"x": bad})
    with pytest.raises(ValueError):
        evidence.desired_document([1])


@pytest.mark.parametrize("content", ["{", "[]", json.dumps({"schema": "x", "desired": {}}),
                                     json.dumps({"schema": evidence.DESIRED_SCHEMA, "desired": []})])
def test_load_desired_unusable(tmp_path, content):
    write(str(tmp_path), evidence.DESIRED_FILE, content)
    with pytest.raises(evidence.EvidenceError, match=evidence.DESIRED_FILE):
        evidence.load_desired(Sysroot(str(tmp_path)))


@pytest.mark.parametrize("directory,name,ok", [
    ("/var/lib/node_exporter/textfile_collector", "gpufabric.prom", True),
    ("/var/lib/node_exporter", "gpu-fabric_1.prom", True),
    ("/var/lib/node_exporter", "gpufabric.txt", False), ("/var/lib/node_exporter", ".prom", False),
    ("/var/lib/node_exporter", ".hidden.prom", False), ("/var/lib/node_exporter", "a/b.prom", False),
    ("/var/lib/node_exporter", "a b.prom", False), ("/var/lib/node_exporter", "a\n.prom", False),
    ("relative/dir", "gpufabric.prom", False), ("/var/lib/../x", "gpufabric.prom", False),
    ("/var/lib/x y", "gpufabric.prom", False)])
def test_textfile_path(directory, name, ok):
    if ok:
        assert evidence.textfile_path(directory, name) == directory + "/" + name
    else:
        with pytest.raises(inputs.InputError):
            evidence.textfile_path(directory, name)


def test_write_textfile_atomic_and_only_on_change(tmp_path):
    sr = Sysroot(str(tmp_path))
    path = "/var/lib/node_exporter/textfile_collector/gpufabric.prom"
    assert evidence.write_textfile(sr, path, "a 1\n")
    d = sr.path(os.path.dirname(path))
    assert os.listdir(d) == ["gpufabric.prom"]      # no temp file left behind
    st = os.stat(sr.path(path))
    assert stat.S_IMODE(st.st_mode) == 0o644 and (st.st_uid, st.st_gid) == (0, 0)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o755
    assert not evidence.write_textfile(sr, path, "a 1\n")
    os.chmod(sr.path(path), 0o600)
    assert evidence.write_textfile(sr, path, "a 1\n")
    assert stat.S_IMODE(os.stat(sr.path(path)).st_mode) == 0o644
    ino = os.stat(sr.path(path)).st_ino
    assert evidence.write_textfile(sr, path, "a 2\n")
    assert os.stat(sr.path(path)).st_ino != ino     # renamed over, never rewritten in place
    with open(sr.path(path)) as f:
        assert f.read() == "a 2\n"


def test_every_metric_is_documented():
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "metrics.md")).read()
    for short, (mtype, help_text) in prom.METRICS.items():
        assert "`%s%s`" % (prom.PREFIX, short) in doc, short
        assert help_text and mtype in prom.TYPES


def _secret(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret\n")
    return str(secret)


TEXTFILE_TRAPS = [
    # id, how the name in node_exporter's directory is laid out by its (non-root) owner
    ("symlink to a root-only file", lambda p, tmp: os.symlink(_secret(tmp), p)),
    ("symlink to /dev/zero", lambda p, tmp: os.symlink("/dev/zero", p)),
    ("FIFO", lambda p, tmp: os.mkfifo(p)),
    ("file over the read limit", lambda p, tmp: open(p, "wb").truncate(evidence.MAX_TEXTFILE + 1)),
]


@pytest.mark.parametrize("case", TEXTFILE_TRAPS, ids=[c[0] for c in TEXTFILE_TRAPS])
def test_existing_textfile_is_read_bounded_and_replaced(tmp_path, case):
    sr = Sysroot(str(tmp_path / "root"))
    path = "/var/lib/node_exporter/textfile_collector/gpufabric.prom"
    os.makedirs(sr.path(os.path.dirname(path)))
    case[1](sr.path(path), tmp_path)
    assert evidence.current_file(sr, path) == (None, None)
    assert evidence.write_textfile(sr, path, "a 1\n")
    assert not os.path.islink(sr.path(path)) and os.path.isfile(sr.path(path))
    with open(sr.path(path)) as f:
        assert f.read() == "a 1\n"
    if case[0].startswith("symlink to a root"):
        assert (tmp_path / "shadow").read_text() == "root:$6$secret\n"
