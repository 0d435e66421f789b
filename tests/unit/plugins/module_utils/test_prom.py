# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""prom: exposition-format rendering and escaping, checked against prometheus_client's text parser."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom


def parse(text):
    """{sample name: {frozenset(labels): value}} plus {family name: type} through the real parser."""
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return samples, types


@pytest.mark.parametrize("raw,escaped", [
    ("plain", "plain"),
    ('say "hi"', 'say \\"hi\\"'),
    ("back\\slash", "back\\\\slash"),
    ("two\nlines", "two\\nlines"),
    ('all \\ " \n', 'all \\\\ \\" \\n'),
    ("ünïcode", "ünïcode"),
    (3, "3"),
])
def test_escape_label_value_round_trips(raw, escaped):
    assert prom.escape_label_value(raw) == escaped
    fam = prom.Family("x_info", "gauge", "h").add(1, v=raw)
    samples, _types = parse(prom.render([fam]))
    assert samples["x_info"] == {frozenset({("v", str(raw))}): 1.0}


@pytest.mark.parametrize("raw,escaped", [
    ("plain help", "plain help"),
    ("a\\b", "a\\\\b"),
    ("one\ntwo", "one\\ntwo"),
    ('quotes "stay"', 'quotes "stay"'),
])
def test_escape_help(raw, escaped):
    assert prom.escape_help(raw) == escaped
    fam = prom.Family("x", "gauge", raw).add(1)
    text = prom.render([fam])
    assert text.splitlines()[0] == "# HELP x %s" % escaped
    assert list(text_string_to_metric_families(text))[0].documentation == raw


@pytest.mark.parametrize("value,text", [
    (True, "1"), (False, "0"), (0, "0"), (42, "42"), (-3, "-3"), (1.5, "1.5"),
    (float("nan"), "NaN"), (float("inf"), "+Inf"), (float("-inf"), "-Inf"),
])
def test_format_value(value, text):
    assert prom.format_value(value) == text
    samples, _types = parse(prom.render([prom.Family("v", "gauge", "h").add(value)]))
    got = samples["v"][frozenset()]
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(got)
    else:
        assert got == float(value)


@pytest.mark.parametrize("make,match", [
    (lambda: prom.Family("bad-name", "gauge", "h"), "invalid metric name"),
    (lambda: prom.Family("1x", "gauge", "h"), "invalid metric name"),
    (lambda: prom.Family("x", "histogram", "h"), "metric type"),
    (lambda: prom.Family("x_count", "counter", "h"), "must end in _total"),
    (lambda: prom.Family("x", "gauge", "h").add(1, **{"bad-label": "v"}), "invalid label name"),
    (lambda: prom.Family("x", "gauge", "h").add(1, __reserved="v"), "invalid label name"),
    (lambda: prom.Family("x", "gauge", "h").add("1"), "not a number"),
    (lambda: prom.Family("x", "gauge", "h").add(None), "not a number"),
    (lambda: prom.Family("x", "gauge", "h").add(1, a=1).add(2, a="1"), "two samples"),
    (lambda: prom.render([prom.Family("x", "gauge", "h"), prom.Family("x", "gauge", "h")]), "given twice"),
])
def test_invalid(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_order_is_deterministic_and_natural():
    a = prom.Family("b_metric", "gauge", "h")
    for rail in ("ens10np0", "ens2np0", "ens1np0"):
        for prio in (7, 10, 0):
            a.add(prio, rail=rail, priority=prio)
    b = prom.Family("a_metric_total", "counter", "h").add(5)
    empty = prom.Family("c_empty", "gauge", "h")
    text = prom.render([a, empty, b])
    assert text == prom.render([b, a, empty])
    lines = text.splitlines()
    assert lines[:3] == ["# HELP a_metric_total h", "# TYPE a_metric_total counter", "a_metric_total 5"]
    body = [ln for ln in lines if ln.startswith("b_metric{")]
    # labels in name order; samples by label values, numbers inside values in numeric order
    assert body[:4] == ['b_metric{priority="0",rail="ens1np0"} 0', 'b_metric{priority="0",rail="ens2np0"} 0',
                        'b_metric{priority="0",rail="ens10np0"} 0', 'b_metric{priority="7",rail="ens1np0"} 7']
    assert body[-1] == 'b_metric{priority="10",rail="ens10np0"} 10'
    assert "c_empty" not in text
    samples, types = parse(text)
    assert types == {"a_metric": "counter", "b_metric": "gauge"}
    assert samples["a_metric_total"] == {frozenset(): 5.0}
    assert len(samples["b_metric"]) == 9


def test_nothing_renders_empty():
    assert prom.render([]) == ""
    assert prom.render_evidence({}) == ""


def _rail(trust_dscp=True, pfc=(3,), multi=False):
    dscp = dict((d, [d >> 3]) for d in range(64)) if trust_dscp else {}
    if trust_dscp:
        dscp[26] = [3]
        if multi:
            dscp[48] = [6, 2]
    return {"app": {"dscp": dscp, "pcp": {}, "count": sum(len(v) for v in dscp.values())},
            "pfc": {"prio_pfc": [p in pfc for p in range(8)], "enabled": list(pfc)},
            "trust": "dscp" if trust_dscp else "pcp"}


FACTS = {
    "path_bridges": [
        {"bdf": "0000:16:00.0", "role": "upstream", "acs": {"present": False, "ctrl": None}},
        {"bdf": "0000:17:00.0", "role": "downstream", "acs": {"present": True, "ctrl": 0x1d}},
        {"bdf": "0000:17:01.0", "role": "downstream", "acs": {"present": True, "ctrl": 0x11}},
        {"bdf": "0000:17:02.0", "role": "downstream", "acs": {"error": "config space is 64 bytes"}},
    ],
    "pairing": [
        {"gpu": "0000:18:00.0", "nic": "0000:19:00.0", "netdev": "ens1np0", "relation": "PIX", "cross_numa": False,
         "bridges": ["0000:17:00.0", "0000:16:00.0", "0000:17:01.0"]},
        {"gpu": "0000:1a:00.0", "nic": "0000:1b:00.0", "netdev": None, "relation": "SYS", "cross_numa": True,
         "bridges": ["0000:17:02.0"]},
    ],
    "iommu": {"mode": "identity"},
    "gpu_driver": {"flavour": "open", "version": "560.35.03"},
    "fabric_manager": {"needed": True, "running": False},
    "nvidia_fs": {"loaded": True, "rw_stats_enabled": 1},
}

# (evidence, {sample name: {labels tuple: value}} that must be present, sample names that must be absent)
EVIDENCE_CASES = [
    ({"facts": FACTS},
     {"gpufabric_pair_acs_redirect_clear": {(("gpu", "0000:18:00.0"), ("nic", "0000:19:00.0")): 0},
      # only the bridge that redirects has its register; 17:01.0 (0x11) and 16:00.0 (no capability) are clear
      "gpufabric_acs_ctrl": {(("bridge", "0000:17:00.0"), ("role", "downstream")): 0x1d},
      "gpufabric_pair_relation_info": {
          (("cross_numa", "false"), ("gpu", "0000:18:00.0"), ("netdev", "ens1np0"), ("nic", "0000:19:00.0"),
           ("relation", "PIX")): 1,
          (("cross_numa", "true"), ("gpu", "0000:1a:00.0"), ("netdev", ""), ("nic", "0000:1b:00.0"),
           ("relation", "SYS")): 1},
      "gpufabric_iommu_identity": {(): 1},
      "gpufabric_iommu_mode_info": {(("mode", "identity"),): 1},
      "gpufabric_gpu_driver_open": {(): 1},
      "gpufabric_gpu_driver_info": {(("flavour", "open"), ("version", "560.35.03")): 1},
      "gpufabric_fabric_manager_needed": {(): 1},
      "gpufabric_fabric_manager_running": {(): 0},
      "gpufabric_nvfs_loaded": {(): 1},
      "gpufabric_nvfs_rw_stats_enabled": {(): 1}},
     ["gpufabric_gds_active", "gpufabric_nvfs_reads_total", "gpufabric_rail_dcb_up", "gpufabric_rdma_cm_tos",
      "gpufabric_acs_redirect_clear", "gpufabric_acs_capability_present", "gpufabric_pair_cross_numa"]),
    # no drift items: the summary of each rail only
    ({"dcb": {"ens1np0": _rail(), "ens2np0": _rail(trust_dscp=False, pfc=()), "ens3np0": {"error": "rc=1"}}},
     {"gpufabric_rail_dcb_up": {(("rail", "ens1np0"),): 1, (("rail", "ens2np0"),): 1, (("rail", "ens3np0"),): 0},
      "gpufabric_rail_dcb_info": {(("pfc_priorities", "3"), ("rail", "ens1np0"), ("trust", "dscp")): 1,
                                  (("pfc_priorities", ""), ("rail", "ens2np0"), ("trust", "pcp")): 1}},
     ["gpufabric_pair_acs_redirect_clear", "gpufabric_iommu_identity", "gpufabric_rail_pfc_enabled",
      "gpufabric_rail_dscp_priority", "gpufabric_rail_trust_dscp", "gpufabric_rail_dscp_app_entries"]),
    # dcb in drift on ens1np0: its full map and PFC state; ens2np0's summary only
    ({"dcb": {"ens1np0": _rail(multi=True, pfc=(3, 4)), "ens2np0": _rail()},
      "node": {"concerns": {"dcb": {"status": "drift", "items": [
          {"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [3, 4], "desired": [3]}]}}}},
     {"gpufabric_rail_dscp_priority": {(("dscp", "48"), ("rail", "ens1np0")): 2,
                                       (("dscp", "26"), ("rail", "ens1np0")): 3,
                                       (("dscp", "46"), ("rail", "ens1np0")): 5},
      "gpufabric_rail_pfc_enabled": {(("priority", "3"), ("rail", "ens1np0")): 1,
                                     (("priority", "4"), ("rail", "ens1np0")): 1,
                                     (("priority", "5"), ("rail", "ens1np0")): 0},
      "gpufabric_rail_dcb_info": {(("pfc_priorities", "3,4"), ("rail", "ens1np0"), ("trust", "dscp")): 1},
      "gpufabric_concern_drift_items": {(("concern", "dcb"),): 1, (("concern", "acs"),): 0}}, []),
    ({"rdma_cm": [{"device": "mlx5_0", "port": 1, "rail": "ens1np0", "tos": 106},
                  {"device": "mlx5_1", "port": 1, "rail": "ens2np0", "tos": None}]},
     {"gpufabric_rdma_cm_tos": {(("device", "mlx5_0"), ("port", "1"), ("rail", "ens1np0")): 106}}, []),
    ({"nvfs": {"reads": 7, "reads_ok": 7, "read_err": 0, "read_mib": 64, "read_io_state_err": 0,
               "writes": 3, "writes_ok": 3, "write_err": 1, "write_mib": 32, "write_io_state_err": 0},
      "gds": {"gds_active": True, "compat_fallback_suspected": False}},
     {"gpufabric_nvfs_reads_total": {(): 7}, "gpufabric_nvfs_read_bytes_total": {(): 64 << 20},
      "gpufabric_nvfs_writes_total": {(): 3}, "gpufabric_nvfs_written_bytes_total": {(): 32 << 20},
      "gpufabric_nvfs_write_errors_total": {(): 1}, "gpufabric_nvfs_read_ok_total": {(): 7},
      "gpufabric_gds_active": {(): 1}, "gpufabric_gds_compat_fallback_detected": {(): 0}},
     ["gpufabric_nvfs_read_mib_total", "gpufabric_nvfs_write_mib_total"]),
    # rw_stats_enabled=0: nvidia-fs prints only the error counters; the others are absent, not zero
    ({"nvfs": {"reads": None, "reads_ok": None, "read_err": 2, "read_mib": None, "read_io_state_err": 0,
               "writes": None, "writes_ok": None, "write_err": 0, "write_mib": None, "write_io_state_err": 0},
      "gds": {"gds_active": False, "compat_fallback_suspected": True}},
     {"gpufabric_nvfs_read_errors_total": {(): 2}, "gpufabric_gds_active": {(): 0},
      "gpufabric_gds_compat_fallback_detected": {(): 1}},
     ["gpufabric_nvfs_reads_total", "gpufabric_nvfs_read_bytes_total", "gpufabric_nvfs_writes_total"]),
    ({"nvfs": None, "gds": {"gds_active": True, "compat_fallback_suspected": None, "time": 1000.0}, "now": 1600.5,
      "interval": 60},
     {"gpufabric_gds_active": {(): 1}, "gpufabric_gds_verdict_timestamp_seconds": {(): 1000.0},
      "gpufabric_last_check_timestamp_seconds": {(): 1600.5}, "gpufabric_check_interval_seconds": {(): 60}},
     ["gpufabric_gds_compat_fallback_detected", "gpufabric_nvfs_reads_total", "gpufabric_gds_verdict_age_seconds",
      "gpufabric_evidence_timestamp_seconds"]),
]


@pytest.mark.parametrize("evidence,present,absent", EVIDENCE_CASES)
def test_evidence(evidence, present, absent):
    text = prom.render_evidence(evidence)
    assert text == prom.render_evidence(evidence)
    samples, types = parse(text)
    for name, want in present.items():
        got = dict((tuple(sorted(k)), v) for k, v in samples[name].items())
        for labels, value in want.items():
            assert got[labels] == value, (name, labels)
    for name in absent:
        assert name not in samples
    for fam, mtype in types.items():
        assert mtype == ("counter" if fam.startswith("gpufabric_nvfs_") and fam not in (
            "gpufabric_nvfs_loaded", "gpufabric_nvfs_rw_stats_enabled") else "gauge"), fam
    assert "# TYPE" in text and "\n\n" not in text


def test_unreadable_bridge_makes_its_pair_absent():
    samples, _types = parse(prom.render_evidence({"facts": FACTS}))
    pairs = set(dict(k)["gpu"] for k in samples["gpufabric_pair_acs_redirect_clear"])
    assert pairs == {"0000:18:00.0"}      # 1a:00.0's path has a bridge whose ACS state could not be read
    assert "0000:17:02.0" not in set(dict(k)["bridge"] for k in samples["gpufabric_acs_ctrl"])


@pytest.mark.parametrize("writer", ["evidence_timer", "fabric_metrics"])
def test_every_series_carries_its_writer(writer):
    ev = dict(EVIDENCE_CASES[0][0], writer=writer, node={"concerns": ALL_OK}, now=1.0)
    samples, _types = parse(prom.render_evidence(ev))
    assert samples and all(dict(k)["writer"] == writer for series in samples.values() for k in series)


def test_unknown_writer_is_refused():
    with pytest.raises(ValueError, match="writer must be one of"):
        prom.render_evidence({"writer": "cron"})


def test_every_metric_is_declared_once_with_a_valid_name():
    for short, (mtype, help_text) in prom.METRICS.items():
        fam = prom.Family(prom.PREFIX + short, mtype, help_text)
        assert fam.name.startswith("gpufabric_") and help_text
        # base units: no MiB, GT/s or ages; counters end in _total, info series are gauges
        assert not any(bad in short for bad in ("_mib", "_gts", "_age_")), short
        assert (mtype == "counter") == short.endswith("_total") and (mtype == "gauge" or not short.endswith("_info"))
    assert all(short in prom.METRICS for _key, short, _factor in prom.NVFS_COUNTERS)


GOOD = {"iommu": {"mode": "identity"}, "fabric_manager": {"needed": True, "running": True},
        "nvidia_fs": {"loaded": True}, "pairing": []}
ALL_OK = dict((n, {"status": "ok"}) for n in cm.CORE)
STATUSES = ("ok", "drift", "error", "not_checked", "not_applicable")

# (name, evidence, {concern: status with 1}, gpufabric_node_ok)
NODE_CASES = [
    ("no concerns given: every core concern not_checked, never ok", {"facts": GOOD, "node": {}},
     dict((n, "not_checked") for n in ALL_OK), 0),
    ("all ok", {"facts": GOOD, "node": {"concerns": ALL_OK}}, dict((n, "ok") for n in ALL_OK), 1),
    ("not_applicable is fine", {"facts": GOOD, "node": {"concerns": dict(
        ALL_OK, routing={"status": "not_applicable", "reason": "off"})}},
     dict(dict((n, "ok") for n in ALL_OK), routing="not_applicable"), 1),
    ("one drift", {"facts": GOOD, "node": {"concerns": dict(ALL_OK, dcb={"status": "drift", "reason": "pfc"})}},
     dict(dict((n, "ok") for n in ALL_OK), dcb="drift"), 0),
    ("one error", {"facts": GOOD, "node": {"concerns": dict(ALL_OK, acs={"status": "error", "reason": "setpci"})}},
     dict(dict((n, "ok") for n in ALL_OK), acs="error"), 0),
    ("reboot pending", {"facts": GOOD, "node": {"concerns": ALL_OK, "reboot_required": True}},
     dict((n, "ok") for n in ALL_OK), 0),
    ("translated IOMMU", {"facts": dict(GOOD, iommu={"mode": "translated"}), "node": {"concerns": ALL_OK}},
     dict((n, "ok") for n in ALL_OK), 0),
    ("cross-NUMA pair", {"facts": dict(GOOD, pairing=[{"gpu": "g", "nic": "n", "netdev": "ens3np0", "relation": "SYS",
                                                       "cross_numa": True}]),
                         "node": {"concerns": ALL_OK}}, dict((n, "ok") for n in ALL_OK), 0),
    ("nvidia-fs missing, GDS wanted", {"facts": dict(GOOD, nvidia_fs={"loaded": False}),
                                       "node": {"concerns": ALL_OK, "gds_wanted": True}},
     dict((n, "ok") for n in ALL_OK), 0),
    ("nvidia-fs missing, GDS not wanted", {"facts": dict(GOOD, nvidia_fs={"loaded": False}),
                                           "node": {"concerns": ALL_OK}}, dict((n, "ok") for n in ALL_OK), 1),
    ("managed beyond the core", {"facts": GOOD, "node": {"concerns": ALL_OK, "managed": ["cmdline", "gds"]}},
     dict(dict((n, "ok") for n in ALL_OK), gds="not_checked"), 0),
    ("a failed GDS proof is the gds concern", {"facts": GOOD, "node": {"concerns": ALL_OK},
                                               "gds": {"gds_active": False}},
     dict(dict((n, "ok") for n in ALL_OK), gds="drift"), 0),
]


@pytest.mark.parametrize("name,evidence,current,node_ok", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_concern_status_and_node_ok(name, evidence, current, node_ok):
    samples, types = parse(prom.render_evidence(evidence))
    got = dict(((dict(k)["concern"], dict(k)["status"]), v) for k, v in samples["gpufabric_concern_status"].items())
    assert got == dict(((c, s), 1.0 if s == current[c] else 0.0) for c in current for s in STATUSES)
    assert samples["gpufabric_node_ok"] == {frozenset(): float(node_ok)}
    assert types["gpufabric_concern_status"] == "gauge" and types["gpufabric_node_ok"] == "gauge"
    assert samples["gpufabric_reboot_required"] == {
        frozenset(): float(bool(evidence["node"].get("reboot_required")))}
    # a concern in drift without items (a hand-made status) counts 0 items; every other status counts none
    assert set(samples["gpufabric_concern_drift_items"].values()) == {0.0}
    assert set(dict(k)["concern"] for k in samples["gpufabric_concern_drift_items"]) == set(current)


def test_without_node_no_concern_series():
    samples, _types = parse(prom.render_evidence({"facts": GOOD}))
    assert "gpufabric_concern_status" not in samples and "gpufabric_node_ok" not in samples


def test_bad_concern_status_is_refused():
    with pytest.raises(ValueError, match="concern dcb has status 'fine'"):
        prom.render_evidence({"facts": GOOD, "node": {"concerns": {"dcb": {"status": "fine"}}}})


def test_pcie_link_and_gpudirect_metrics():
    facts = {"pcie_links": [
        {"device": "0000:39:00.0", "kind": "gpu", "port": "0000:38:01.0", "current_width": 8, "max_width": 16,
         "current_speed": 32.0, "max_speed": 32.0, "state": "degraded"},
        {"device": "0000:19:00.0", "kind": "gpu", "port": "0000:18:00.0", "current_width": 16, "max_width": 16,
         "current_speed": 2.5, "max_speed": 32.0, "state": "idle"},
        {"device": "0000:1a:00.0", "kind": "nic", "port": None, "current_width": None, "max_width": None,
         "current_speed": None, "max_speed": None, "state": "unknown"}],
        "gpudirect_rdma": {"mechanism": "dmabuf", "dmabuf": {"usable": True}, "peermem": {"loaded": False}}}
    samples, types = parse(prom.render_evidence({"facts": facts}))
    x8 = frozenset({"device": "0000:39:00.0", "kind": "gpu", "port": "0000:38:01.0"}.items())
    # the count per state always; width and speed of the link below its capability only
    assert dict((dict(k)["state"], v) for k, v in samples["gpufabric_pcie_links"].items()) == {
        "ok": 0, "idle": 1, "degraded": 1, "slot_limited": 0, "unknown": 1}
    assert samples["gpufabric_pcie_link_width"] == {x8: 8.0} and samples["gpufabric_pcie_link_max_width"] == {x8: 16}
    assert samples["gpufabric_pcie_link_speed_transfers_per_second"] == {x8: 32e9}
    assert samples["gpufabric_pcie_link_max_speed_transfers_per_second"] == {x8: 32e9}
    assert "gpufabric_pcie_link_below_capability" not in samples and "gpufabric_pcie_link_speed_gts" not in samples
    assert samples["gpufabric_gpudirect_rdma_mechanism_info"] == {frozenset({"mechanism": "dmabuf"}.items()): 1.0}
    assert samples["gpufabric_gpudirect_rdma_dmabuf_usable"] == {frozenset(): 1.0}
    assert samples["gpufabric_gpudirect_rdma_peermem_loaded"] == {frozenset(): 0.0}
    assert types["gpufabric_pcie_links"] == "gauge"
