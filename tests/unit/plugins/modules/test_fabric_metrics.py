# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_metrics run in-process against a simulated HGX H200 node (gpufabric_sim.tree) with the dcb emulator on
PATH; the written file is read back with prometheus_client's text parser."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import stat
import sys

import pytest
from ansible.module_utils import basic
from prometheus_client.parser import text_string_to_metric_families

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fabric_metrics

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.abspath(os.path.join(HERE, "..", "..", "..", "lab"))
PROM = "var/lib/prometheus/node-exporter/gpufabric.prom"
REDIRECT = pci.ACS_BIT["RR"] | pci.ACS_BIT["CR"] | pci.ACS_BIT["EC"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"), 1)
    return root, manifest


@pytest.fixture
def node(template, tmp_path, monkeypatch):
    src, manifest = template
    root = str(tmp_path / "root")
    shutil.copytree(src, root, symlinks=True)
    rails = [r["netdev"] for r in manifest["rails"]]
    dcb_emu.init_node(root, "6.1.0")
    for r in rails:
        dcb_emu.init_device(root, r)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "dcb"
    wrapper.write_text("#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom gpufabric_sim.emulators import dcb\n"
                       "sys.exit(dcb.main(sys.argv[1:]))\n" % (sys.executable, LAB))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    return root, manifest


def metrics(root, rel=PROM):
    """{sample name: {frozenset(labels): value}} of the written file, through the real parser; the label every
    series carries (writer="fabric_metrics") left out."""
    with open(os.path.join(root, rel)) as f:
        text = f.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = dict(s.labels)
            assert labels.pop("writer") == "fabric_metrics", s
            out.setdefault(s.name, {})[frozenset(labels.items())] = s.value
    return out


def by(samples, *keys):
    """{(label values of keys): value}."""
    return dict((tuple(dict(k)[x] for x in keys), v) for k, v in samples.items())


def path_bridges(root):
    return topology.discover(Sysroot(root), ["pci"])["path_bridges"]


def clear_acs(root, bdfs=None):
    """What pcie_acs does: clear RR/CR/EC in the ACS control register through sysfs config."""
    sr = Sysroot(root)
    for b in path_bridges(root):
        if b["acs"].get("present") and (bdfs is None or b["bdf"] in bdfs):
            pci.write_acs_ctrl(sr, b["bdf"], b["acs"]["ctrl"] & ~REDIRECT)


def configure_dcb(root, rails, pfc="3:on"):
    for r in rails:
        assert dcb_emu.run(["app", "add", "dev", r, "dscp-prio", "26:3"], root=root)[0] == 0
        assert dcb_emu.run(["pfc", "set", "dev", r, "prio-pfc", "all:off", pfc], root=root)[0] == 0


def write_tos(root, ibdev, port, tos):
    d = os.path.join(root, "sys/kernel/config/rdma_cm", ibdev, "ports", str(port))
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(os.path.join(d, "default_roce_tos"), "w") as f:
        f.write("%d\n" % tos)


def write_nvfs(root, rw_stats, counters=None):
    with open(os.path.join(root, "proc/driver/nvidia-fs/stats"), "w") as f:
        f.write(sim_tree.nvfs_stats_text("2.22.3", "1.11.1.6", rw_stats, counters))
    with open(os.path.join(root, "sys/module/nvidia_fs/parameters/rw_stats_enabled"), "w") as f:
        f.write("%d\n" % int(rw_stats))


def test_fresh_node_then_configured_then_idempotent(node, monkeypatch):
    root, manifest = node
    rails = [r["netdev"] for r in manifest["rails"]]
    res = run_module(fabric_metrics, {}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] and res["path"] == "/" + PROM and res["dcb_version"] == "6.1.0"
    assert [r["rail"] for r in res["rails"]] == sorted(rails) and all(r["dcb_up"] for r in res["rails"])
    m = metrics(root)
    assert res["samples"] == sum(len(v) for v in m.values())
    pairs = topology.discover(Sysroot(root), ["pci"])["pairing"]
    assert len(pairs) == 8
    with_acs = set(b["bdf"] for b in path_bridges(root) if b["acs"]["present"])
    assert len(with_acs) == 16
    # fresh node: the kernel enabled ACS redirection on every bridge that has the capability
    assert by(m["gpufabric_pair_acs_redirect_clear"], "gpu", "nic") == dict(
        ((p["gpu"], p["nic"]), 0.0) for p in pairs)
    assert set(b for (b,) in by(m["gpufabric_acs_ctrl"], "bridge")) == with_acs
    assert set(by(m["gpufabric_pair_relation_info"], "relation").keys()) <= {("PIX",), ("PXB",)}
    assert by(m["gpufabric_rail_dcb_info"], "rail", "trust", "pfc_priorities") == dict(
        ((r, "pcp", ""), 1.0) for r in rails)
    # no concern statuses given: no rail is known to be in drift, so no per-priority PFC and no DSCP map
    assert "gpufabric_rail_pfc_enabled" not in m and "gpufabric_rail_dscp_priority" not in m
    # no configfs group yet: the kernel default 0 is in effect
    assert set(by(m["gpufabric_rdma_cm_tos"], "device", "port", "rail").values()) == {0.0}
    assert "gpufabric_nvfs_reads_total" not in m             # rw_stats_enabled=0 in this topology
    assert m["gpufabric_nvfs_read_errors_total"] == {frozenset(): 0.0}
    assert m["gpufabric_nvfs_loaded"] == {frozenset(): 1.0}
    assert "gpufabric_gds_active" not in m
    assert m["gpufabric_gpu_driver_open"] == {frozenset(): 1.0}
    assert m["gpufabric_fabric_manager_running"] == {frozenset(): 1.0}
    assert m["gpufabric_last_check_timestamp_seconds"][frozenset()] > 1.7e9
    assert "gpufabric_check_interval_seconds" not in m and "gpufabric_evidence_desired_state" not in m

    # configure: ACS redirects cleared, DSCP 26 -> prio 3 with PFC on 3, ToS 106, counted GDS I/O; the play found
    # one rail's DCB in drift
    clear_acs(root)
    configure_dcb(root, rails)
    write_tos(root, "mlx5_0", 1, 106)
    write_nvfs(root, True, {"reads": 12, "reads_ok": 12, "read_mib": 256, "writes": 4, "writes_ok": 4,
                            "write_mib": 64})
    args = {"checked_at": 1767225600.5, "concerns": {"dcb": {"status": "drift", "reason": "map", "items": [
        {"concern": "dcb", "object": rails[0], "key": "dscp_prio:46", "current": 5, "desired": None}]}}}
    res = run_module(fabric_metrics, args, monkeypatch=monkeypatch)
    assert res["changed"], res
    m = metrics(root)
    assert set(m["gpufabric_pair_acs_redirect_clear"].values()) == {1.0} and "gpufabric_acs_ctrl" not in m
    assert by(m["gpufabric_rail_dcb_info"], "rail", "trust", "pfc_priorities") == dict(
        ((r, "dscp", "3"), 1.0) for r in rails)
    pfc = by(m["gpufabric_rail_pfc_enabled"], "rail", "priority")
    assert pfc == dict(((rails[0], str(prio)), 1.0 if prio == 3 else 0.0) for prio in range(8))
    dscp = by(m["gpufabric_rail_dscp_priority"], "rail", "dscp")
    assert len(dscp) == 64 and set(r for r, _d in dscp) == {rails[0]}
    assert dscp[(rails[0], "26")] == 3.0 and dscp[(rails[0], "46")] == 5.0     # mlx5 default DSCP >> 3
    assert by(m["gpufabric_concern_drift_items"], "concern")[("dcb",)] == 1.0
    tos = by(m["gpufabric_rdma_cm_tos"], "device", "port", "rail")
    assert tos.pop(("mlx5_0", "1", "ens1np0")) == 106.0 and set(tos.values()) == {0.0}    # the rest: no group
    assert m["gpufabric_nvfs_reads_total"] == {frozenset(): 12.0}
    assert m["gpufabric_nvfs_read_bytes_total"] == {frozenset(): 256.0 * 1048576}
    assert m["gpufabric_nvfs_writes_total"] == {frozenset(): 4.0}
    assert m["gpufabric_nvfs_written_bytes_total"] == {frozenset(): 64.0 * 1048576}
    assert m["gpufabric_last_check_timestamp_seconds"] == {frozenset(): 1767225600.5}

    path = os.path.join(root, PROM)
    st = os.stat(path)
    res = run_module(fabric_metrics, args, monkeypatch=monkeypatch)
    assert not res["changed"], res
    assert os.stat(path).st_ino == st.st_ino and os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert stat.S_IMODE(st.st_mode) == 0o644
    # a later check is a new file
    assert run_module(fabric_metrics, dict(args, checked_at=1767225660.5), monkeypatch=monkeypatch)["changed"]


def test_one_bridge_cleared(node, monkeypatch):
    root, _manifest = node
    bridge = next(b["bdf"] for b in path_bridges(root) if b["acs"]["present"])
    clear_acs(root, [bridge])
    res = run_module(fabric_metrics, {"dcb": False}, monkeypatch=monkeypatch)
    assert res["changed"] and res["rails"] == [] and res["dcb_version"] is None
    m = metrics(root)
    ctrl = by(m["gpufabric_acs_ctrl"], "bridge")
    assert (bridge,) not in ctrl
    assert sorted(b for (b,) in ctrl) == sorted(
        b["bdf"] for b in path_bridges(root) if b["acs"]["present"] and b["bdf"] != bridge)
    assert all(int(v) & REDIRECT for v in ctrl.values())
    assert "gpufabric_rail_dcb_up" not in m


def test_check_mode_writes_nothing(node, monkeypatch):
    root, manifest = node
    args = {"rails": ["ens1np0"], "checked_at": 1000.0}
    res = run_module(fabric_metrics, args, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert res["changed"] and not os.path.exists(os.path.join(root, PROM))
    assert not os.path.exists(os.path.join(root, os.path.dirname(PROM)))
    assert res["diff"]["before"] == "" and "gpufabric_rail_dcb_info" in res["diff"]["after"]
    assert dcb_emu.state(root, "ens1np0")["counters"]["pfc_set_calls"] == 0
    run_module(fabric_metrics, args, monkeypatch=monkeypatch)
    with open(os.path.join(root, PROM)) as f:
        written = f.read()
    assert not run_module(fabric_metrics, args, check_mode=True, monkeypatch=monkeypatch)["changed"]
    configure_dcb(root, ["ens1np0"])
    res = run_module(fabric_metrics, args, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert res["changed"] and res["diff"]["before"] == written and res["diff"]["after"] != written
    with open(os.path.join(root, PROM)) as f:
        assert f.read() == written
    assert os.listdir(os.path.join(root, os.path.dirname(PROM))) == ["gpufabric.prom"]


def test_only_listed_rails_and_mode(node, monkeypatch):
    root, _manifest = node
    args = {"rails": ["ens2np0"], "textfile_dir": "/srv/textfile", "filename": "fabric.prom", "mode": "0640"}
    res = run_module(fabric_metrics, args, monkeypatch=monkeypatch)
    assert res["path"] == "/srv/textfile/fabric.prom"
    m = metrics(root, "srv/textfile/fabric.prom")
    assert list(by(m["gpufabric_rail_dcb_up"], "rail")) == [("ens2np0",)]
    assert stat.S_IMODE(os.stat(os.path.join(root, "srv/textfile/fabric.prom")).st_mode) == 0o640
    args["mode"] = "0644"
    assert run_module(fabric_metrics, args, monkeypatch=monkeypatch)["changed"]
    assert stat.S_IMODE(os.stat(os.path.join(root, "srv/textfile/fabric.prom")).st_mode) == 0o644


GDS_CASES = [
    ({"gds_active": True, "compat_fallback_suspected": False, "transfer": {"ok": True}, "reasons": []}, 1.0, 0.0),
    ({"gds_active": False, "compat_fallback_suspected": True, "transfer": {"ok": True}}, 0.0, 1.0),
    ({"gds_active": True}, 1.0, None),
    ({"gds_active": False, "compat_fallback_suspected": False, "transfer": None}, None, None),
]


@pytest.mark.parametrize("gds,active,fallback", GDS_CASES)
def test_gds_verdict(node, monkeypatch, gds, active, fallback):
    root, _manifest = node
    res = run_module(fabric_metrics, {"dcb": False, "gds": gds}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    m = metrics(root)
    if active is None:
        assert "gpufabric_gds_active" not in m
    else:
        assert m["gpufabric_gds_active"] == {frozenset(): active}
    if fallback is None:
        assert "gpufabric_gds_compat_fallback_detected" not in m
    else:
        assert m["gpufabric_gds_compat_fallback_detected"] == {frozenset(): fallback}


@pytest.mark.parametrize("how", ["missing", "broken"])
def test_without_working_dcb_rails_are_down(node, monkeypatch, tmp_path, how):
    root, manifest = node
    if how == "missing":
        real = basic.AnsibleModule.get_bin_path
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda self, name, *a, **kw: None if name == "dcb" else real(self, name, *a, **kw))
    else:
        wrapper = tmp_path / "bin" / "dcb"
        wrapper.write_text("#!/bin/sh\necho 'dcb: something is wrong' >&2\nexit 1\n")
    res = run_module(fabric_metrics, {}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["dcb_version"] is None and not any(r["dcb_up"] for r in res["rails"])
    assert ("not found in PATH" if how == "missing" else "something is wrong") in res["rails"][0]["error"]
    m = metrics(root)
    assert set(m["gpufabric_rail_dcb_up"].values()) == {0.0}
    assert len(m["gpufabric_rail_dcb_up"]) == len(manifest["rails"])
    assert "gpufabric_rail_dcb_info" not in m and "gpufabric_pair_acs_redirect_clear" in m


def test_nvidia_fs_absent_means_no_counters(node, monkeypatch):
    root, _manifest = node
    shutil.rmtree(os.path.join(root, "proc/driver/nvidia-fs"))
    shutil.rmtree(os.path.join(root, "sys/module/nvidia_fs"))
    run_module(fabric_metrics, {"dcb": False}, monkeypatch=monkeypatch)
    m = metrics(root)
    assert m["gpufabric_nvfs_loaded"] == {frozenset(): 0.0}
    assert not [n for n in m if n.startswith("gpufabric_nvfs_") and n != "gpufabric_nvfs_loaded"]


CORE = cm.CORE
ALL_OK = dict((n, {"status": "ok", "reason": None, "items": []}) for n in CORE)


def statuses_of(m):
    """{concern: the status whose series is 1}, after checking every concern has exactly one."""
    out = {}
    for labels, value in m["gpufabric_concern_status"].items():
        lab = dict(labels)
        if value == 1.0:
            assert lab["concern"] not in out, "two current statuses for %s" % lab["concern"]
            out[lab["concern"]] = lab["status"]
    assert len(m["gpufabric_concern_status"]) == 5 * len(out)
    return out


@pytest.mark.parametrize("args,current,node_ok", [
    ({}, dict((n, "not_checked") for n in CORE), 0),
    ({"concerns": ALL_OK}, dict((n, "ok") for n in CORE), 0),  # the simulated HGX node translates: never ok
    ({"concerns": dict(ALL_OK, dcb={"status": "drift", "reason": "pfc"}), "managed_concerns": ["dcb", "gds"]},
     dict(dict((n, "ok") for n in CORE), dcb="drift", gds="not_checked"), 0),
])
def test_concern_status_and_node_verdict(node, monkeypatch, args, current, node_ok):
    root, _manifest = node
    res = run_module(fabric_metrics, dict(args, dcb=False), monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    m = metrics(root)
    assert statuses_of(m) == current
    assert m["gpufabric_node_ok"] == {frozenset(): float(node_ok)}
    assert res["verdict"]["status"] == "attention"
    assert any("IOMMU is translated" in r for r in res["verdict"]["reasons"])
    assert dict((k, v["status"]) for k, v in res["concerns"].items()) == current


def test_node_ok_needs_identity_iommu_and_no_pending_reboot(node, monkeypatch):
    root, _manifest = node
    for group in os.listdir(os.path.join(root, "sys/kernel/iommu_groups")):
        with open(os.path.join(root, "sys/kernel/iommu_groups", group, "type"), "w") as f:
            f.write("identity\n")
    res = run_module(fabric_metrics, {"concerns": ALL_OK, "dcb": False}, monkeypatch=monkeypatch)
    assert res["verdict"] == {"status": "ok", "reasons": []}, res["verdict"]
    assert metrics(root)["gpufabric_node_ok"] == {frozenset(): 1.0}
    res = run_module(fabric_metrics, {"concerns": ALL_OK, "dcb": False, "reboot_required": True},
                     monkeypatch=monkeypatch)
    assert res["changed"] and metrics(root)["gpufabric_node_ok"] == {frozenset(): 0.0}
    res = run_module(fabric_metrics, {"concerns": ALL_OK, "dcb": False, "gds_wanted": True},
                     monkeypatch=monkeypatch)
    assert metrics(root)["gpufabric_node_ok"] == {frozenset(): 1.0}, "nvidia-fs is loaded on this node"


@pytest.mark.parametrize("args,match", [
    ({"concerns": {"dcb": {"status": "fine"}}}, "concern dcb has status 'fine'"),
    ({"concerns": {"ib": {"status": "ok"}}}, "unknown concern 'ib'"),
    ({"filename": "gpufabric.txt"}, "ending in .prom"),
    ({"filename": "sub/gpufabric.prom"}, "ending in .prom"),
    ({"filename": ".prom"}, "ending in .prom"),
    ({"filename": "gpufabric-evidence.prom"}, "the evidence timer's file"),
    ({"checked_at": float("nan")}, "checked_at must be a Unix time"),
    ({"mode": "0999"}, "octal permission"),
    ({"textfile_dir": "relative/dir"}, "absolute path"),
    ({"gds": {"ok": True}}, "gds_active"),
    ({"rails": ["nope0"]}, "unknown rail"),
])
def test_bad_input(node, monkeypatch, args, match):
    root, _manifest = node
    res = run_module(fabric_metrics, args, monkeypatch=monkeypatch)
    assert res.get("failed") and match in res["msg"], res
    assert not os.path.exists(os.path.join(root, os.path.dirname(PROM)))


def test_links_rdma_counters_and_the_recorded_gds_verdict(node, monkeypatch):
    """Without a gds parameter the record the last proof left on the node is used (its time; the age is
    time() - it in PromQL); PCIe links and RDMA counters come from sysfs."""
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
    root, manifest = node
    sr = Sysroot(root)
    evidence.record_gds_verdict(sr, {"transfer": {"bytes": 1 << 24}, "gds_active": True,
                                     "compat_fallback_suspected": False}, now=1700000000.0)
    ibdev = manifest["rails"][0]["ibdev"]
    hw = os.path.join(root, "sys/class/infiniband", ibdev, "ports/1/hw_counters")
    os.makedirs(hw, exist_ok=True)  # the simulator gives mlx5 ports hw_counters/
    with open(os.path.join(hw, "np_cnp_sent"), "w") as f:
        f.write("17\n")
    res = run_module(fabric_metrics, {"checked_at": 1700000600.0}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    m = metrics(root)
    assert m["gpufabric_gds_active"] == {frozenset(): 1.0}
    assert m["gpufabric_gds_verdict_timestamp_seconds"] == {frozenset(): 1700000000.0}
    assert "gpufabric_gds_verdict_age_seconds" not in m
    assert by(m["gpufabric_rdma_port_cnp_sent_total"], "device")[(ibdev,)] == 17.0
    links = by(m["gpufabric_pcie_links"], "state")
    assert links[("degraded",)] == 0.0 and links[("slot_limited",)] == 0.0 and sum(links.values()) >= 16
    assert run_module(fabric_metrics, {"checked_at": 1700000600.0}, monkeypatch=monkeypatch)["changed"] is False
