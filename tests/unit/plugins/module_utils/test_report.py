# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift report: concern statuses per node, drifted_nodes, per-status counts, fix runs, Markdown wording."""
from __future__ import absolute_import, division, print_function

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as rpt

__metaclass__ = type

GOOD_FACTS = {"iommu": {"mode": "identity"}, "pairing": []}


def item(concern, obj, key, cur, des):
    return {"concern": concern, "object": obj, "key": key, "current": cur, "desired": des}


FIVE = [
    item("acs", "0000:17:01.0", "acs_ctrl", "0x001d", "0x0011"),
    item("dcb", "ens3np0", "dscp_prio:26", None, 3),
    item("rdma_cm", "mlx5_4/1", "default_roce_tos", 0, 106),
    item("sysctl", "ens6np0", "arp_ignore", 0, 1),
    item("dcb", "ens8np0", "pfc", [], [3]),
]


def statuses(items=(), check_mode=True, **over):
    """gpufabric_concerns as the roles record them: every core concern from its items (concerns.from_items)."""
    out = dict((n, cm.from_items(n, list(items), check_mode)) for n in cm.CORE)
    out.update(over)
    return out


def node(items=(), check_mode=True, **over):
    """A node's data; keyword arguments named after a concern replace its status, the others the data's keys."""
    data = {"concerns": statuses(items, check_mode, **dict((k, v) for k, v in over.items() if k in cm.NAMES)),
            "facts": GOOD_FACTS}
    data.update((k, v) for k, v in over.items() if k not in cm.NAMES)
    return data


# (name, nodes, drifted_nodes, drift_items, attention, statuses over the fleet); N core concerns per node
N = len(cm.CORE)
CASES = [
    ("clean fleet", {"a": node(), "b": node()}, [], 0, [], {"ok": 2 * N}),
    ("one node five items", {"a": node(FIVE), "b": node()}, ["a"], 5, ["a"], {"ok": 2 * N - 4, "drift": 4}),
    ("an error concern", {"a": node(nccl=cm.error("nccl", "cannot write"))}, ["a"], 0, ["a"],
     {"ok": N - 1, "error": 1}),
    ("a concern not checked", {"a": {"concerns": dict(statuses(), acs=None), "facts": GOOD_FACTS}}, ["a"], 0, ["a"],
     {"ok": N - 1, "not_checked": 1}),
    ("not_applicable is not drift", {"a": node(routing=cm.status("not_applicable", "routing off"))}, [], 0, [],
     {"ok": N - 1, "not_applicable": 1}),
    ("play-level errors make a node drifted", {"a": node(errors=["dcb missing"])}, ["a"], 0, ["a"], {"ok": N}),
    ("unreachable node: every concern not_checked", {"a": {"unreachable": True}}, ["a"], 0, ["a"],
     {"not_checked": N}),
    ("nothing reported: every concern not_checked", {"a": {"facts": GOOD_FACTS}}, ["a"], 0, ["a"],
     {"not_checked": N}),
    ("reboot pending is not drift, but attention", {"a": node(reboot_required=True)}, [], 0, ["a"], {"ok": N}),
    ("translated IOMMU is not drift, but attention", {"a": node(facts={"iommu": {"mode": "translated"}})}, [], 0,
     ["a"], {"ok": N}),
    ("fix run: corrected concerns are ok", {"a": node(FIVE, check_mode=False)}, [], 5, [], {"ok": N}),
    ("old caller: items drift, the rest not checked", {"a": {"drift": FIVE}}, ["a"], 5, ["a"],
     {"drift": 4, "not_checked": N - 4}),
]


@pytest.mark.parametrize("name,nodes,drifted,items,attention,counts", CASES, ids=[c[0] for c in CASES])
def test_build(name, nodes, drifted, items, attention, counts):
    r = rpt.build(nodes)
    s = r["summary"]
    assert r["schema"] == "gpufabric.drift/v2"
    assert s["drifted_nodes"] == drifted
    assert s["drift_items"] == items
    assert s["attention"] == attention
    assert s["statuses"] == dict((k, counts.get(k, 0)) for k in cm.STATUSES)
    for host, n in r["nodes"].items():
        assert set(n["concerns"]) >= set(cm.CORE)
        assert n["verdict"]["status"] in ("ok", "attention", "unreachable")
        assert (n["verdict"]["status"] == "ok") == (host not in attention)
    json.loads(rpt.to_json(r))
    md = rpt.to_markdown(r)
    for host in drifted:
        assert "| %s |" % host in md


def test_items_sorted_grouped_and_derived_from_the_concerns():
    r = rpt.build({"a": node(FIVE + FIVE[:2])})
    n = r["nodes"]["a"]
    assert [i["concern"] for i in n["items"]] == ["acs", "dcb", "dcb", "rdma_cm", "sysctl"]
    assert n["by_concern"] == {"acs": 1, "dcb": 2, "rdma_cm": 1, "sysctl": 1}
    assert n["concerns"]["dcb"]["status"] == "drift"
    assert n["counts"] == {"ok": N - 4, "drift": 4, "error": 0, "not_checked": 0, "not_applicable": 0}
    md = rpt.to_markdown(r)
    assert "| dcb | ens3np0 | dscp_prio:26 | - | 3 | drift |" in md
    assert "| dcb | ens8np0 | pfc | \\[] | \\[3] | drift |" in md


def test_as_desired_only_for_ok():
    concerns = statuses(
        acs=cm.status("drift", "1 item(s) differ", [item("acs", "0000:17:01.0", "acs_ctrl", 29, 17)]),
        dcb=cm.error("dcb", "dcb: rc=1"), rdma_cm=cm.status("not_checked", "play stopped before it"),
        routing=cm.status("not_applicable", "routing is turned off"))
    md = rpt.to_markdown(rpt.build({"a": {"concerns": concerns, "facts": GOOD_FACTS}}))
    rows = dict((line.split(" | ")[0][2:], line) for line in md.splitlines() if line.startswith("| ") and
                line.split(" | ")[0][2:] in cm.TITLES.values())
    for name, title in cm.TITLES.items():
        if name not in concerns:
            continue
        if concerns[name]["status"] == "ok":
            assert rows[title].endswith("| ok | as desired |"), rows[title]
        else:
            assert "as desired" not in rows[title], rows[title]
    assert rows["PCIe ACS"] == "| PCIe ACS | DRIFT | 1 item(s) differ |"
    assert rows["DCB (trust, DSCP map, PFC)"] == "| DCB (trust, DSCP map, PFC) | ERROR | dcb: rc=1 |"
    assert rows["rdma_cm ToS"] == "| rdma_cm ToS | NOT CHECKED | play stopped before it |"
    assert rows["Rail routing"] == "| Rail routing | NOT APPLICABLE | routing is turned off |"
    assert md.count("as desired") == N - 4


@pytest.mark.parametrize("data,state", [
    (node(), "ok"),
    (node(reboot_required=True), "ATTENTION"),
    (node(facts={"iommu": {"mode": "translated"}}), "ATTENTION"),
    (node(routing=cm.status("not_applicable", "off")), "ok"),
    (node(acs=cm.status("not_checked", "play stopped")), "NOT CHECKED"),
    (node(FIVE[:1], check_mode=False, reboot_required=True), "CORRECTED"),
])
def test_node_state_says_ok_only_for_an_ok_verdict(data, state):
    r = rpt.build({"a": data})
    assert rpt.node_state(r["nodes"]["a"]) == state
    assert ("| a | %s |" % state) in rpt.to_markdown(r)


def test_unreachable_markdown_says_nothing_is_fine():
    md = rpt.to_markdown(rpt.build({"gone": {"unreachable": True}}))
    assert "| gone | UNREACHABLE | 0 | - | unreachable |" in md
    assert "as desired" not in md and md.count("| NOT CHECKED | the node was unreachable |") == N


def test_fix_run_shows_fixed_and_not_fixed():
    still = cm.status("drift", "pfc still differs", [item("dcb", "ens8np0", "pfc", [], [3])])
    fixed = rpt.build({"a": node(FIVE[:1], check_mode=False), "b": node(FIVE[:1], check_mode=False, concerns=dict(
        statuses(FIVE[:1], check_mode=False), dcb=still))}, fixed=True)
    assert fixed["fixed"] is True
    assert fixed["summary"]["drifted_nodes"] == ["b"] and fixed["summary"]["corrected_items"] == 2
    md = rpt.to_markdown(fixed)
    assert "| a | FIXED | 1 |" in md and "| b | NOT FIXED | 2 |" in md
    assert "| acs | 0000:17:01.0 | acs_ctrl | 0x001d | 0x0011 | fixed |" in md
    assert "| dcb | ens8np0 | pfc | \\[] | \\[3] | NOT FIXED |" in md
    assert "| DCB (trust, DSCP map, PFC) | NOT FIXED | pfc still differs |" in md
    assert "| PCIe ACS | fixed | corrected 1 item(s) |" in md
    # the same data out of a check run: drift stays drift, nothing reads as fixed
    check = rpt.to_markdown(rpt.build({"b": node(FIVE[:1], concerns=dict(statuses(FIVE[:1]), dcb=still))}))
    assert "fixed" not in check.lower().replace("not fixed", "")


def test_old_callers_fix_run():
    r = rpt.build({"a": {"drift": FIVE}}, fixed=True)
    n = r["nodes"]["a"]
    assert n["concerns"]["dcb"]["status"] == "ok" and n["concerns"]["dcb"]["corrected"] is True
    assert n["concerns"]["cmdline"]["status"] == "not_checked"
    assert r["summary"]["drifted_nodes"] == ["a"], "what the old list does not mention was not checked"
    assert "| a | NOT CHECKED | 5 |" in rpt.to_markdown(r)


def test_error_items_are_listed():
    err = cm.error("dcb", "failed on one rail", items=[{"concern": "dcb", "object": "ens3np0", "key": "result",
                                                        "current": "failed", "desired": None, "result": "failed",
                                                        "error": "dcb: rc=1"}])
    md = rpt.to_markdown(rpt.build({"a": node(dcb=err)}))
    assert "DCB (trust, DSCP map, PFC) failed; per object:" in md and "- ens3np0: failed (dcb: rc=1)" in md


def test_managed_concerns():
    r = rpt.build({"a": node(gds=cm.status("ok"))}, managed=["cmdline", "gds"])
    assert list(r["managed"]) == ["cmdline", "gds"]
    assert set(r["nodes"]["a"]["concerns"]) == set(cm.CORE) | {"gds"}, "reported beyond the managed ones: included"
    r = rpt.build({"a": {}}, managed=["cmdline", "vendor_client"])
    assert set(r["nodes"]["a"]["concerns"]) == {"cmdline", "vendor_client"}


BAD = [
    ("not a mapping", ["a"], None, "mapping"),
    ("bad managed", {"a": {}}, ["dbc"], "unknown concern(s) 'dbc'"),
]


@pytest.mark.parametrize("name,nodes,managed,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, nodes, managed, match):
    with pytest.raises(rpt.ReportError) as e:
        rpt.build(nodes, managed)
    assert match in str(e.value)


BAD_NODE = [
    ("node results not a mapping", {"a": "oops"}, "node a"),
    ("old item not a mapping", {"a": {"drift": ["x"]}}, "node a: a drift item must be a mapping"),
    ("old item lacks key", {"a": {"drift": [{"concern": "dcb", "object": "x"}]}}, "lacks key"),
    ("unknown concern", {"a": {"concerns": {"dbc": {"status": "ok"}}}}, "a: unknown concern 'dbc'"),
    ("bad status", {"a": {"concerns": {"dcb": {"status": "good"}}}}, "a: concern dcb has status 'good'"),
]


@pytest.mark.parametrize("name,nodes,match", BAD_NODE, ids=[b[0] for b in BAD_NODE])
def test_a_bad_node_is_an_error_of_its_own(name, nodes, match):
    report = rpt.build(dict(nodes, b=node()))
    assert report["nodes"]["b"]["verdict"]["status"] == cm.OK
    assert report["summary"]["drifted_nodes"] == ["a"]
    assert match in rpt.unusable_nodes(report["nodes"])["a"]
