# -*- coding: utf-8 -*-
"""The status model: one status per concern, a reason for anything but ok, the node verdict."""
from __future__ import absolute_import, division, print_function

import pytest
from hypothesis import given, strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as c
from ansible_collections.gpufabric.node.plugins.filter import concerns as f

__metaclass__ = type

ITEM = {"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}


@pytest.mark.parametrize("value,reason,ok", [
    ("ok", None, True),
    ("ok", "corrected 1 item(s)", True),
    ("drift", "1 item differs", True),
    ("drift", None, False),
    ("error", "", False),
    ("not_checked", "unreachable", True),
    ("not_applicable", "routing is off", True),
    ("fine", "x", False),
])
def test_status_requires_a_known_value_and_a_reason(value, reason, ok):
    if ok:
        assert c.status(value, reason)["status"] == value
    else:
        with pytest.raises(c.ConcernError):
            c.status(value, reason)


@pytest.mark.parametrize("items,check_mode,want,corrected", [
    ([], True, "ok", False),
    ([], False, "ok", False),
    ([ITEM], True, "drift", False),
    ([ITEM], False, "ok", True),
    # items of another concern are not this concern's
    ([dict(ITEM, concern="rdma_cm")], True, "ok", False),
])
def test_from_items(items, check_mode, want, corrected):
    doc = c.from_items("dcb", items, check_mode)
    assert doc["status"] == want
    assert bool(doc.get("corrected")) == corrected
    if want != "ok":
        assert "ens1np0 pfc" in doc["reason"]


def test_reason_is_one_line_and_bounded():
    doc = c.status("error", "line one\nline two\x00\t" + "x" * 1000)
    assert "\n" not in doc["reason"] and "\x00" not in doc["reason"]
    assert len(doc["reason"]) <= 400


def test_complete_marks_what_the_node_did_not_report_not_checked():
    out = c.complete({"dcb": c.status("ok")})
    assert set(out) == set(c.CORE)
    assert out["dcb"]["status"] == "ok"
    assert all(out[n]["status"] == "not_checked" and out[n]["reason"] for n in c.CORE if n != "dcb")


def test_complete_adds_optional_concerns_a_node_reported_and_refuses_unknown_ones():
    out = c.complete({"gds": c.status("drift", "compat mode used")})
    assert out["gds"]["status"] == "drift"
    assert "vendor_client" not in out
    with pytest.raises(c.ConcernError):
        c.complete({"dns": c.status("ok")})
    with pytest.raises(c.ConcernError):
        c.complete({"dcb": {"status": "fine"}})


def test_unreachable_node_has_every_concern_not_checked():
    out = c.complete({"dcb": c.status("ok")}, unreachable=True)
    assert all(v["status"] == "not_checked" for v in out.values())
    verdict = c.node_verdict(out, unreachable=True)
    assert verdict["status"] == "unreachable"


def _all(value, reason="r"):
    return dict((n, c.status(value, None if value == "ok" else reason)) for n in c.CORE)


@pytest.mark.parametrize("concerns,reboot,warnings,want", [
    (_all("ok"), False, [], "ok"),
    (_all("not_applicable"), False, [], "ok"),
    (_all("ok"), True, [], "attention"),
    (_all("ok"), False, ["IOMMU is translated"], "attention"),
    (dict(_all("ok"), dcb=c.status("not_checked", "no rails")), False, [], "attention"),
    (dict(_all("ok"), acs=c.status("error", "boom")), False, [], "attention"),
    (dict(_all("ok"), nccl=c.status("drift", "x")), False, [], "attention"),
])
def test_node_verdict(concerns, reboot, warnings, want):
    v = c.node_verdict(concerns, reboot, warnings)
    assert v["status"] == want
    assert bool(v["reasons"]) == (want != "ok")


@pytest.mark.parametrize("facts,gds_wanted,count", [
    ({"iommu": {"mode": "identity"}}, False, 0),
    ({"iommu": {"mode": "translated"}}, False, 1),
    ({"iommu": {"mode": "mixed"}}, False, 1),
    ({"pairing": [{"gpu": "0000:18:00.0", "netdev": "ens1", "cross_numa": True}]}, False, 1),
    ({"nvidia_fs": {"loaded": False}}, True, 1),
    ({"nvidia_fs": {"loaded": False}}, False, 0),
    ({"nvidia_fs": {"loaded": True}}, True, 0),
])
def test_data_path_warnings(facts, gds_wanted, count):
    assert len(c.data_path_warnings(facts, gds_wanted)) == count


EIO = "IOMMU is translated: GPUDirect Storage fails with EIO and peer-to-peer DMA goes through the IOMMU"
NO_NVFS = "nvidia-fs is not loaded although GPUDirect Storage is wanted"
CROSS = {"pairing": [{"gpu": "0000:18:00.0", "netdev": "ens1", "cross_numa": True}]}


@pytest.mark.parametrize("facts,gds_wanted,want", [
    # GDS wanted by the play
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": True}}, True, [EIO]),
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": False}}, True, [EIO, NO_NVFS]),
    ({"iommu": {"mode": "mixed"}}, True, [EIO.replace("translated", "mixed")]),
    ({"iommu": {"mode": "identity"}, "nvidia_fs": {"loaded": True}}, True, []),
    # not wanted: a translated IOMMU is a warning, not a failed proof
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": True}}, False, []),
    # left unset: wanted where nvidia-fs is loaded (the lab's hgx-h200: translated IOMMU, nvidia-fs loaded)
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": True}}, None, [EIO]),
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": False}}, None, []),
    # a cross-NUMA pair slows RDMA: never a failed proof
    (dict(CROSS, iommu={"mode": "identity"}), True, []),
    ({}, None, []),
])
def test_data_path_failures_fail_a_wanted_proof_only(facts, gds_wanted, want):
    """verify.yml fails the node on these (issue 21 item 13: it printed "fails with EIO" and exited 0)."""
    assert c.data_path_failures(facts, gds_wanted) == want
    assert set(want) <= set(c.data_path_warnings(facts, c.gds_wanted_on(facts, gds_wanted)))


@pytest.mark.parametrize("parts,want", [
    (["ok", "ok"], "ok"),
    (["ok", "not_applicable"], "ok"),
    (["not_applicable", "not_applicable"], "not_applicable"),
    (["ok", "drift"], "drift"),
    (["drift", "error"], "error"),
    (["ok", "not_checked"], "not_checked"),
])
def test_merge_worst_wins(parts, want):
    docs = [c.status(p, None if p == "ok" else "part %d" % i, [dict(ITEM, concern="cmdline")])
            for i, p in enumerate(parts)]
    out = c.merge("acs", docs + [None])
    assert out["status"] == want
    assert all(i["concern"] == "acs" for i in out["items"])


@given(st.lists(st.sampled_from(c.STATUSES), min_size=1, max_size=6))
def test_merge_is_never_better_than_its_worst_part(parts):
    docs = [c.status(p, None if p == "ok" else "why") for p in parts]
    out = c.merge("acs", docs)["status"]
    rank = {"error": 0, "drift": 1, "not_checked": 2, "ok": 3, "not_applicable": 4}
    assert rank[out] == min(rank[p] for p in parts)


@given(st.dictionaries(st.sampled_from(c.CORE), st.sampled_from(c.STATUSES)), st.booleans())
def test_a_node_is_ok_exactly_when_every_concern_is_fine_and_nothing_else_stands(reported, reboot):
    docs = dict((n, c.status(s, None if s == "ok" else "why")) for n, s in reported.items())
    full = c.complete(docs)
    fine = all(v["status"] in ("ok", "not_applicable") for v in full.values())
    assert (c.node_verdict(full, reboot)["status"] == "ok") == (fine and not reboot)


def test_filter_concern_error_keeps_per_object_results():
    res = {"failed": True, "changed": True, "msg": "dcb pfc set failed on ens5np0",
           "rails": [{"rail": "ens1np0", "changed": True}, {"rail": "ens5np0", "error": "EBUSY"}]}
    doc = f.concern_error(res, "dcb", {"name": "DCB on every rail"})
    assert doc["status"] == "error"
    assert doc["reason"].startswith("DCB on every rail: dcb pfc set failed")
    assert [(i["object"], i["result"]) for i in doc["items"]] == [("ens1np0", "changed"), ("ens5np0", "failed")]


def test_filter_concern_failed_only_fills_what_the_role_did_not_record():
    recorded = {"dcb": c.status("ok")}
    out = f.concern_failed(recorded, "roce_qos", {"name": "Discover the rails"}, {"msg": "no sysfs"})
    assert out["dcb"]["status"] == "ok"
    assert out["rdma_cm"]["status"] == "error" and "no sysfs" in out["rdma_cm"]["reason"]


def test_filter_concern_open_lists_everything_not_fine_and_a_pending_reboot():
    recorded = {"dcb": c.status("ok"), "cmdline": c.status("not_applicable", "microVM"),
                "nccl": c.status("drift", "NCCL_IB_TC differs")}
    lines = f.concern_open(recorded, True)
    assert len(lines) == 2 and lines[0].startswith("NCCL defaults: drift") and lines[1].startswith("Reboot pending")
    assert f.concern_errors(dict(recorded, acs=c.status("error", "x"))) == ["PCIe ACS: x"]


def test_filter_concern_error_takes_the_modules_own_error_status():
    own = c.status("error", "1 of 8 rails failed: ens5np0 (EBUSY)",
                   [dict(ITEM, object="ens5np0", result="failed", error="EBUSY")])
    res = {"failed": True, "changed": True, "msg": "DCB failed on ens5np0", "concerns": {"dcb": own},
           "results": [{"rail": "ens1np0", "result": "changed"}, {"rail": "ens5np0", "result": "failed"}]}
    doc = f.concern_error(res, "dcb", {"name": "DCB on every rail"})
    assert doc["reason"] == "DCB on every rail: 1 of 8 rails failed: ens5np0 (EBUSY)"
    assert doc["items"][0]["result"] == "failed" and doc["items"][0]["error"] == "EBUSY"


def test_filter_items_count_each_object_once():
    res = {"msg": "x", "results": [{"rail": "a", "result": "changed"}], "rails": [{"rail": "a", "changed": True}]}
    assert len(f.concern_error(res, "dcb")["items"]) == 1


def test_filter_contradictions_fail_every_core_concern_naming_both_settings():
    out = f.concern_contradictions(["roce_qos_pfc_priorities (dcb_qos pfc_priorities) and roce_qos_dscp_map contradict"])
    assert set(out) == set(c.CORE)
    assert all(v["status"] == "error" and "roce_qos_pfc_priorities" in v["reason"] for v in out.values())
    assert f.concern_contradictions([]) == {}
