# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""concerns.assess / node_warnings / from_drift / describe: the one status per concern and the node verdict that the
drift report, the fleet report and the metrics all show."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm

GOOD_FACTS = {"iommu": {"mode": "identity"}, "nvidia_fs": {"loaded": True},
              "fabric_manager": {"needed": True, "running": True},
              "pairing": [{"gpu": "0000:18:00.0", "netdev": "ens1np0", "cross_numa": False}]}


def facts(**over):
    out = dict(GOOD_FACTS)
    out.update(over)
    return out


def all_ok(**over):
    out = dict((n, {"status": "ok"}) for n in cm.CORE)
    out.update(over)
    return out


def item(concern, obj="ens1np0", key="pfc", current=None, desired=3):
    return {"concern": concern, "object": obj, "key": key, "current": current, "desired": desired}


# (name, node data, managed, fixed, {concern: status} expected, source)
STATUS_CASES = [
    ("reported statuses are kept", {"concerns": all_ok(dcb={"status": "drift", "reason": "pfc", "items": [item("dcb")]},
                                                       routing={"status": "not_applicable", "reason": "off"})},
     None, False, dict(all_ok(), dcb="drift", routing="not_applicable"), "concerns"),
    ("a core concern not reported is not_checked", {"concerns": {"cmdline": {"status": "ok"}}}, None, False,
     dict(dict((n, "not_checked") for n in cm.CORE), cmdline="ok"), "concerns"),
    ("nothing reported: every core concern not_checked", {"facts": GOOD_FACTS}, None, False,
     dict((n, "not_checked") for n in cm.CORE), "none"),
    ("unreachable: every concern not_checked, even reported ones", {"unreachable": True, "concerns": all_ok()}, None,
     False, dict((n, "not_checked") for n in cm.CORE), "concerns"),
    ("a reported concern beyond the managed ones is included", {"concerns": {"gds": {"status": "ok"}}}, ["cmdline"],
     False, {"cmdline": "not_checked", "gds": "ok"}, "concerns"),
    ("managed non-core concern not reported", {"concerns": {}}, ["cmdline", "vendor_client"], False,
     {"cmdline": "not_checked", "vendor_client": "not_checked"}, "concerns"),
    ("old caller: items are drift, the rest not_checked", {"drift": [item("dcb"), item("sysctl", key="arp_ignore")]},
     None, False, dict(dict((n, "not_checked") for n in cm.CORE), dcb="drift", sysctl="drift"), "drift"),
    ("old caller, empty list: nothing was said, all not_checked", {"drift": []}, None, False,
     dict((n, "not_checked") for n in cm.CORE), "drift"),
    ("old caller in a fix run: items are ok, corrected", {"drift": [item("dcb")]}, None, True,
     dict(dict((n, "not_checked") for n in cm.CORE), dcb="ok"), "drift"),
    ("concerns win over an old drift list", {"concerns": all_ok(), "drift": [item("dcb")]}, None, False, all_ok(),
     "concerns"),
    ("old GDS verdict failing stands for the gds concern", {"concerns": all_ok(), "gds": {"ok": False}}, None, False,
     dict(all_ok(), gds="drift"), "concerns"),
    ("old GDS verdict ok", {"concerns": all_ok(), "gds": {"ok": True, "reasons": []}}, None, False,
     dict(all_ok(), gds="ok"), "concerns"),
    ("a reported gds status wins over the old verdict",
     {"concerns": all_ok(gds={"status": "error", "reason": "probe crashed"}), "gds": {"ok": True}}, None, False,
     dict(all_ok(), gds="error"), "concerns"),
]


@pytest.mark.parametrize("name,data,managed,fixed,expected,source", STATUS_CASES, ids=[c[0] for c in STATUS_CASES])
def test_status_mapping(name, data, managed, fixed, expected, source):
    a = cm.assess(data, managed, "n1", fixed)
    got = dict((k, v["status"] if isinstance(v, dict) else v) for k, v in a["concerns"].items())
    want = dict((k, v["status"] if isinstance(v, dict) else v) for k, v in expected.items())
    assert got == want
    assert a["source"] == source
    for c in a["concerns"].values():
        assert c["status"] == "ok" or c["reason"], "every status but ok has a reason"


def test_old_callers_items_and_reasons():
    a = cm.assess({"drift": [item("dcb", obj="ens2np0"), item("dcb", obj="ens1np0"), item("dcb", obj="ens1np0")]},
                  host="n1")
    dcb = a["concerns"]["dcb"]
    assert [i["object"] for i in dcb["items"]] == ["ens1np0", "ens2np0"], "sorted, the duplicate once"
    assert "ens1np0 pfc" in dcb["reason"]
    assert "drift list" in a["concerns"]["acs"]["reason"]
    fixed = cm.assess({"drift": [item("dcb")]}, host="n1", fixed=True)["concerns"]["dcb"]
    assert fixed["corrected"] is True and fixed["items"]


# (name, node data, verdict status, a reason that must be listed, or None for an ok node)
VERDICT_CASES = [
    ("all ok", {"concerns": all_ok(), "facts": GOOD_FACTS}, "ok", None),
    ("not_applicable counts as fine",
     {"concerns": all_ok(routing={"status": "not_applicable", "reason": "routing off"},
                         cmdline={"status": "not_applicable", "reason": "no boot loader"}), "facts": GOOD_FACTS},
     "ok", None),
    ("not_checked is never fine", {"concerns": all_ok(nccl={"status": "not_checked", "reason": "play stopped"}),
                                   "facts": GOOD_FACTS}, "attention", "NCCL defaults: not_checked (play stopped)"),
    ("nothing reported is never fine", {"facts": GOOD_FACTS}, "attention", "PCIe ACS: not_checked"),
    ("drift", {"concerns": all_ok(acs={"status": "drift", "reason": "2 bridges"}), "facts": GOOD_FACTS}, "attention",
     "PCIe ACS: drift (2 bridges)"),
    ("error", {"concerns": all_ok(dcb={"status": "error", "reason": "dcb: rc=1"}), "facts": GOOD_FACTS}, "attention",
     "dcb: rc=1"),
    ("pending reboot", {"concerns": all_ok(), "facts": GOOD_FACTS, "reboot_required": True}, "attention",
     "reboot pending"),
    ("translated IOMMU", {"concerns": all_ok(), "facts": facts(iommu={"mode": "translated"})}, "attention",
     "IOMMU is translated"),
    ("mixed IOMMU", {"concerns": all_ok(), "facts": facts(iommu={"mode": "mixed"})}, "attention", "IOMMU is mixed"),
    ("cross-NUMA pair", {"concerns": all_ok(), "facts": facts(pairing=[
        {"gpu": "0000:3b:00.0", "netdev": "ens3np0", "cross_numa": True}])}, "attention",
     "GPU 0000:3b:00.0 and its NIC ens3np0 are on different NUMA nodes"),
    ("nvidia-fs missing where GDS is wanted", {"concerns": all_ok(), "gds_wanted": True,
                                               "facts": facts(nvidia_fs={"loaded": False})}, "attention",
     "nvidia-fs is not loaded"),
    ("nvidia-fs missing where GDS is not wanted", {"concerns": all_ok(), "facts": facts(nvidia_fs={"loaded": False})},
     "ok", None),
    ("Fabric Manager needed, not running", {"concerns": all_ok(), "facts": facts(
        fabric_manager={"needed": True, "running": False})}, "attention", "nvidia-fabricmanager is not running"),
    ("play-level error", {"concerns": all_ok(), "facts": GOOD_FACTS, "errors": ["Discover the node: boom"]},
     "attention", "play error: Discover the node: boom"),
    ("failed GDS proof", {"concerns": all_ok(), "facts": GOOD_FACTS, "gds": {"ok": False, "reasons": ["EIO"]}},
     "attention", "GPUDirect Storage: drift (the GDS proof failed: EIO)"),
    ("unreachable", {"unreachable": True}, "unreachable", "unreachable: no concern was checked"),
]


@pytest.mark.parametrize("name,data,status,reason", VERDICT_CASES, ids=[c[0] for c in VERDICT_CASES])
def test_node_verdict(name, data, status, reason):
    v = cm.assess(data, host="n1")["verdict"]
    assert v["status"] == status
    if reason is None:
        assert v["reasons"] == []
    else:
        assert any(reason in r for r in v["reasons"]), v["reasons"]


def test_the_simulated_hgx_node_of_the_field_report_is_not_ok():
    """make demo's node: every concern ok, but the IOMMU translates and a reboot is pending."""
    v = cm.assess({"concerns": all_ok(), "reboot_required": True, "gds_wanted": True,
                   "facts": facts(iommu={"mode": "translated"})}, host="sim1")["verdict"]
    assert v["status"] == "attention" and len(v["reasons"]) == 2


BAD = [
    ("data not a mapping", "oops", "node n1: its data must be a mapping"),
    ("concerns not a mapping", {"concerns": ["ok"]}, "node n1: concerns must be a mapping"),
    ("unknown concern", {"concerns": {"dbc": {"status": "ok"}}}, "n1: unknown concern 'dbc'"),
    ("unknown status", {"concerns": {"dcb": {"status": "fine"}}}, "n1: concern dcb has status 'fine'"),
    ("status not a mapping", {"concerns": {"dcb": "ok"}}, "n1: concern dcb must be a mapping"),
    ("item not a mapping", {"concerns": {"dcb": {"status": "drift", "reason": "x", "items": ["pfc"]}}},
     "n1: concern dcb: an item must be a mapping"),
    ("facts not a mapping", {"facts": []}, "node n1: facts must be"),
    ("reboot_required not a bool", {"reboot_required": "yes"}, "node n1: reboot_required must be true or false"),
    ("errors not a list", {"errors": "boom"}, "node n1: errors must be a list"),
    ("old drift item lacks keys", {"drift": [{"concern": "dcb"}]}, "node n1: drift item"),
    ("old drift item of an unknown concern", {"drift": [item("x")]}, "node n1: drift item of unknown concern 'x'"),
    ("gds verdict without ok", {"gds": {"reasons": []}}, "node n1: gds must be"),
]


@pytest.mark.parametrize("name,data,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_host_and_the_concern(name, data, match):
    with pytest.raises(cm.ConcernError) as e:
        cm.assess(data, host="n1")
    assert match in str(e.value)


@pytest.mark.parametrize("names,expected", [
    (None, cm.CORE), (["gds", "cmdline"], ("cmdline", "gds")), ([], ()),
])
def test_managed_names(names, expected):
    assert cm.managed_names(names) == expected


@pytest.mark.parametrize("names,match", [(["cmdline", "dbc"], "unknown concern(s) 'dbc'"), ("cmdline", "a list")])
def test_managed_names_bad(names, match):
    with pytest.raises(cm.ConcernError, match=r".*" + match.replace("(", r"\(").replace(")", r"\)")):
        cm.managed_names(names)


# (status document, fixed, label, detail): "as desired" is said of ok alone
DESCRIBE = [
    ({"status": "ok", "items": []}, False, "ok", "as desired"),
    ({"status": "ok", "items": []}, True, "ok", "as desired"),
    ({"status": "ok", "items": [item("dcb")], "corrected": True}, True, "fixed", "corrected 1 item(s)"),
    ({"status": "ok", "items": [item("dcb")], "corrected": True}, False, "corrected", "corrected 1 item(s)"),
    ({"status": "drift", "reason": "pfc differs", "items": [item("dcb")]}, False, "drift", "pfc differs"),
    ({"status": "drift", "reason": "pfc differs", "items": [item("dcb")]}, True, "not fixed", "pfc differs"),
    ({"status": "error", "reason": "dcb: rc=1", "items": []}, False, "error", "dcb: rc=1"),
    ({"status": "not_checked", "reason": "unreachable", "items": []}, False, "not checked", "unreachable"),
    ({"status": "not_applicable", "reason": "no boot loader", "items": []}, False, "not applicable", "no boot loader"),
]


@pytest.mark.parametrize("doc,fixed,label,detail", DESCRIBE)
def test_describe(doc, fixed, label, detail):
    assert cm.describe(doc, fixed) == (label, detail)
    if doc["status"] != "ok":
        assert "desired" not in cm.describe(doc, fixed)[1]
