# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ecn: what its own tests left unseen (make mutation's survivors): every refusal of the input word for word with
its bounds and defaults, the integer reader and the 0/1 flag, the PCI function behind a rail, the facts and the
plan item by item, and the status document whole in each of its branches (not applicable, without controls, not
checked, firmware drift) and as the one-call check returns it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

import sysfs_host as sh

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

BDF = "0000:11:00.0"
FW_OFF = "DCQCN is off for priority 3 in the firmware of 0000:12:00.0"


def _host(tmp_path, sfs=()):
    nics = [sh.rp("0000:10:0%d.0" % i, sh.nic("0000:1%d:00.0" % i, "ens%dnp0" % i, "mlx5_%d" % i,
                                              sfs=list(sfs) if i == 1 else []))
            for i in (1, 2, 3)]
    return sh.build(str(tmp_path), sh.host(sh.rbus("0000:10", 0, *nics)))


def _write(sr, path, value):
    real = sr.path(path)
    if not os.path.isdir(os.path.dirname(real)):
        os.makedirs(os.path.dirname(real))
    with open(real, "w") as f:
        f.write("%s\n" % value)


def ofed(sr, netdev, np=tuple(range(8)), rp=tuple(range(8)), dscp=48, prio=6):
    base = "/sys/class/net/%s/ecn" % netdev
    for p in range(8):
        _write(sr, "%s/roce_np/enable/%d" % (base, p), int(p in np))
        _write(sr, "%s/roce_rp/enable/%d" % (base, p), int(p in rp))
    _write(sr, base + "/roce_np/cnp_dscp", dscp)
    _write(sr, base + "/roce_np/cnp_802p_prio", prio)


def inbox(sr, bdf, dscp=48, prio=6, mode=0):
    base = "/sys/kernel/debug/mlx5/%s/cc_params" % bdf
    for name, v in (("np_cnp_dscp", dscp), ("np_cnp_prio", prio), ("np_cnp_prio_mode", mode)):
        _write(sr, "%s/%s" % (base, name), v)


def item(obj, key, cur=False, want=True):
    return {"concern": "ecn", "object": obj, "key": key, "current": cur, "desired": want}


# ------------------------------------------------------------------------------------------------ input

@pytest.mark.parametrize("value,message", [
    (True, "priority must be an integer 0..7, not True"),
    (1.0, "priority must be an integer 0..7, not 1.0"),
    ("x", "priority must be an integer 0..7, not 'x'"),
    (None, "priority must be an integer 0..7, not None"),
    (8, "priority must be 0..7 (got 8)"),
    (-1, "priority must be 0..7 (got -1)"),
])
def test_as_int_refusals_word_for_word(value, message):
    with pytest.raises(ValueError) as e:
        ecn._as_int(value, "priority", 0, 7)
    assert str(e.value) == message


@pytest.mark.parametrize("value,out", [(0, 0), (7, 7), ("5", 5)])
def test_as_int_takes_both_bounds(value, out):
    assert ecn._as_int(value, "priority", 0, 7) == out


@pytest.mark.parametrize("desired,out", [
    (None, {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}),
    ({}, {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}),
    ({"priority": 5}, {"priority": 5, "cnp_dscp": 48, "cnp_priority": 6}),
    ({"cnp_dscp": None, "cnp_priority": None}, {"priority": 3, "cnp_dscp": None, "cnp_priority": None}),
    ({"priority": 0, "cnp_dscp": 0, "cnp_priority": 0, "rails": ["ens1np0", "ens2np0"]},
     {"priority": 0, "cnp_dscp": 0, "cnp_priority": 0, "rails": ["ens1np0", "ens2np0"]}),
    ({"priority": 7, "cnp_dscp": 63, "cnp_priority": 7, "rails": ("ens1np0",)},
     {"priority": 7, "cnp_dscp": 63, "cnp_priority": 7, "rails": ["ens1np0"]}),
])
def test_normalize_desired_whole(desired, out):
    assert ecn.normalize_desired(desired) == out


@pytest.mark.parametrize("desired,message", [
    ({"zeta": 1, "bogus": 2}, "unknown ECN settings: bogus, zeta"),
    ({"cnp_priority": 8}, "cnp_priority must be 0..7 (got 8)"),
    ({"cnp_priority": -1}, "cnp_priority must be 0..7 (got -1)"),
    ({"cnp_dscp": 64}, "cnp_dscp must be 0..63 (got 64)"),
    ({"cnp_dscp": "high"}, "cnp_dscp must be an integer 0..63, not 'high'"),
    ({"rails": []}, "rails must list at least one network interface"),
    ({"rails": ["ens1np0", "ens2np0", "ens1np0"]}, "rail ens1np0 is listed twice"),
])
def test_normalize_desired_refusals_word_for_word(desired, message):
    with pytest.raises(ValueError) as e:
        ecn.normalize_desired(desired)
    assert str(e.value) == message


@pytest.mark.parametrize("rails,message", [
    ([], "rails must list at least one network interface"),
    (None, "rails must list at least one network interface"),
    ("ens1np0", "rails must list at least one network interface"),
    (["ens1np0", "ens1np0"], "rail ens1np0 is listed twice"),
])
def test_validate_rails_refusals_word_for_word(rails, message):
    with pytest.raises(ValueError) as e:
        ecn.validate_rails(rails)
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ reading

@pytest.mark.parametrize("content,value", [("48", 48), ("0x30", 48), ("0", 0), (" 7 ", 7)])
def test_read_int_reads_what_kstrtou32_base_0_takes(tmp_path, content, value):
    sr = Sysroot(str(tmp_path))
    _write(sr, "/x/np_cnp_dscp", content)
    assert ecn._read_int(sr, "/x/np_cnp_dscp", "ens1np0") == value


@pytest.mark.parametrize("content,error,message", [
    (None, ecn.EcnUnreadable, "rail ens1np0: cannot read /x/f"),
    ("yes", ecn.EcnError, "rail ens1np0: unexpected content 'yes' in /x/f"),
])
def test_read_int_errors_word_for_word(tmp_path, content, error, message):
    sr = Sysroot(str(tmp_path))
    if content is not None:
        _write(sr, "/x/f", content)
    with pytest.raises(error) as e:
        ecn._read_int(sr, "/x/f", "ens1np0")
    assert str(e.value) == message


@pytest.mark.parametrize("content,out", [
    ("0", False),
    ("1", True),
    (None, "rail ens1np0: cannot read /x/f"),
    ("2", "rail ens1np0: /x/f holds 2, expected 0 or 1"),
    ("-1", "rail ens1np0: /x/f holds -1, expected 0 or 1"),
])
def test_flag_value_or_message(tmp_path, content, out):
    sr = Sysroot(str(tmp_path))
    if content is not None:
        _write(sr, "/x/f", content)
    if isinstance(out, bool):
        assert ecn._flag(sr, "/x/f", "ens1np0") is out
        return
    with pytest.raises(ecn.EcnError) as e:
        ecn._flag(sr, "/x/f", "ens1np0")
    assert str(e.value) == out


class SlashRoot(Sysroot):
    """A sysroot whose realpath keeps a trailing slash (a directory named as such)."""

    def realpath(self, p):
        return Sysroot.realpath(self, p) + "/"


# an auxiliary device (mlx5 scalable function) below the PCI function is not the function: its own name is what
# counts, even one that ends in what a careless strip would take away
@pytest.mark.parametrize("sf,netdev,out", [
    (None, "ens1np0", BDF),
    (None, "ens9np0", None),
    ("mlx5_core.sf.2", "ens1f0s2", None),
    ("XX", "ens1f0sx", None),
])
def test_rail_function(tmp_path, sf, netdev, out):
    sfs = [{"name": sf, "netdev": netdev, "ibdev": "mlx5_9"}] if sf else []
    sr = _host(tmp_path, sfs=sfs)
    assert ecn.rail_function(sr, netdev) == out


def test_rail_function_of_a_path_with_a_trailing_slash(tmp_path):
    _host(tmp_path)
    assert ecn.rail_function(SlashRoot(str(tmp_path)), "ens1np0") == BDF


def test_facts_whole_and_the_error_form(tmp_path):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=(3,), rp=(3, 4), dscp=26, prio=2)
    ofed(sr, "ens2np0")
    _write(sr, "/sys/class/net/ens2np0/ecn/roce_np/enable/5", "yes")
    prios = dict((str(p), {"np": p == 3, "rp": p in (3, 4)}) for p in range(8))
    assert ecn.facts(sr, "ens1np0") == {
        "source": "sysfs", "reason": None, "priorities": prios, "np_enabled": [3], "rp_enabled": [3, 4],
        "cnp_dscp": 26, "cnp_priority": 2, "cnp_priority_mode": None, "not_checked": None}
    assert ecn.facts(sr, "ens2np0") == {
        "source": None,
        "error": "rail ens2np0: unexpected content 'yes' in /sys/class/net/ens2np0/ecn/roce_np/enable/5"}


# ------------------------------------------------------------------------------------------------ plan

def test_plan_rail_sysfs_items_and_writes_whole():
    st = {"rail": "ens1np0", "base": "/b", "source": "sysfs", "not_checked": None,
          "priorities": {"3": {"np": False, "rp": True}}, "cnp_dscp": 26, "cnp_priority": 3}
    want = {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}
    assert ecn.plan_rail(st, want) == (
        [("/b/roce_np/enable/3", 1), ("/b/roce_np/cnp_dscp", 48), ("/b/roce_np/cnp_802p_prio", 6)],
        [item("ens1np0", "np_enable:3"), item("ens1np0", "cnp_dscp", 26, 48), item("ens1np0", "cnp_priority", 3, 6)])


def test_plan_rail_debugfs_items_and_writes_whole():
    st = {"rail": "ens2np0", "base": "/c", "source": "debugfs", "not_checked": None, "priorities": {},
          "cnp_dscp": 26, "cnp_priority": 3, "cnp_priority_mode": 1}
    want = {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}
    assert ecn.plan_rail(st, want) == (
        [("/c/np_cnp_dscp", 48), ("/c/np_cnp_prio_mode", 0), ("/c/np_cnp_prio", 6)],
        [item("ens2np0", "cnp_dscp", 26, 48), item("ens2np0", "cnp_priority_mode", 1, 0),
         item("ens2np0", "cnp_priority", 3, 6)])


def test_predicted():
    before = {"source": "sysfs", "np_enable:3": False, "rp_enable:3": True, "cnp_dscp": 26}
    drift = [item("ens1np0", "np_enable:3"), item("ens1np0", "cnp_dscp", 26, 48)]
    assert ecn._predicted(before, drift) == {"source": "sysfs", "np_enable:3": True, "rp_enable:3": True,
                                             "cnp_dscp": 48}
    assert before["np_enable:3"] is False
    assert ecn._predicted(None, drift) is None


# ------------------------------------------------------------------------------------------------ status

def rail(name, source="sysfs", reason=None, not_checked=None, firmware=None):
    return {"rail": name, "source": source, "reason": reason, "not_checked": not_checked, "firmware": firmware}


def test_rail_status_joins_every_reason():
    assert ecn._rail_status([rail("a", None, "rail a: r1"), rail("b", None, "rail b: r2")]) == {
        "status": "not_applicable", "reason": "rail a: r1; rail b: r2", "items": []}
    assert ecn._rail_status([rail("a", None, "rail a: r1"), rail("b")]) is None


NP_A = item("A", "np_enable:3")
FW_B = item("B", "firmware_cc_prio:3")
NO_CONCERN = {"object": "A", "key": "firmware_cc_prio:3", "current": False, "desired": True}
OTHER_CONCERN = {"concern": "dcb", "object": "A", "key": "firmware_x", "current": 1, "desired": 2}
SKIPPED = [rail("A"), rail("B", None, "rail B: r1")]
UNCHECKED = [rail("A"), rail("B", "debugfs", not_checked="lockdown"), rail("C", "debugfs", not_checked="no tool")]
FIRMWARE = [rail("A"), rail("B", "debugfs", firmware={"reason": FW_OFF}),
            rail("C", "debugfs", not_checked="lockdown"), rail("D", "debugfs", not_checked="no tool")]

# id, rails, drift, check mode, the whole status document
STATUS_CASES = [
    ("all-ok", [rail("A")], [], True, {"status": "ok", "reason": None, "items": []}),
    ("drift-beside-skipped", SKIPPED, [NP_A], True,
     {"status": "drift", "reason": "1 item(s) differ from the desired state: A np_enable:3", "items": [NP_A]}),
    ("corrected-beside-skipped", SKIPPED, [NP_A], False,
     {"status": "ok", "reason": "corrected 1 item(s)", "items": [NP_A], "corrected": True}),
    ("ok-beside-two-skipped", SKIPPED + [rail("C", None, "rail C: r2")], [], True,
     {"status": "ok", "reason": "without ECN controls: rail B: r1; rail C: r2", "items": []}),
    ("corrected-and-unchecked", UNCHECKED, [NP_A], False,
     {"status": "not_checked", "reason": "corrected 1 item(s); not checked: rail B: lockdown; rail C: no tool",
      "items": [NP_A], "corrected": True}),
    ("unchecked-only", UNCHECKED, [], True,
     {"status": "not_checked", "reason": "not checked: rail B: lockdown; rail C: no tool", "items": []}),
    ("drift-and-unchecked", UNCHECKED, [NP_A], True,
     {"status": "drift", "reason": "1 item(s) differ from the desired state: A np_enable:3; not checked: rail B: "
      "lockdown; rail C: no tool", "items": [NP_A]}),
    ("firmware-corrected-unchecked", FIRMWARE, [NP_A, FW_B], False,
     {"status": "drift", "reason": "rail B: %s; corrected 1 item(s); not checked: rail C: lockdown; rail D: no tool"
      % FW_OFF, "items": [NP_A, FW_B], "corrected": True}),
    ("firmware-drift-unchecked", FIRMWARE, [NP_A, FW_B], True,
     {"status": "drift", "reason": "rail B: %s; 1 item(s) differ from the desired state: A np_enable:3; not checked: "
      "rail C: lockdown; rail D: no tool" % FW_OFF, "items": [NP_A, FW_B]}),
    ("firmware-alone", FIRMWARE[:2], [FW_B], True,
     {"status": "drift", "reason": "rail B: %s" % FW_OFF, "items": [FW_B]}),
    ("firmware-item-without-concern", [rail("A", "debugfs", firmware={"reason": "off"})], [NO_CONCERN], False,
     {"status": "drift", "reason": "rail A: off", "items": [NO_CONCERN]}),
    ("another-concerns-item", [rail("A")], [OTHER_CONCERN], True, {"status": "ok", "reason": None, "items": []}),
]


@pytest.mark.parametrize("case", STATUS_CASES, ids=[c[0] for c in STATUS_CASES])
def test_status_of_whole(case):
    _id, rails, drift, check_mode, doc = case
    assert ecn.status_of({"rails": rails, "drift": drift}, check_mode) == doc


# ------------------------------------------------------------------------------------------------ the one-call check

@pytest.mark.parametrize("desired,message", [
    ({"priority": 3}, "rails must list at least one network interface"),
    ({"rails": ["ens1np0", "ens1np0"]}, "rail ens1np0 is listed twice"),
    ({"rails": ["ens1np0"], "priority": 9}, "priority must be 0..7 (got 9)"),
])
def test_concern_status_bad_input_word_for_word(tmp_path, desired, message):
    sr = _host(tmp_path)
    assert ecn.concern_status(sr, desired) == {"status": "error", "reason": message, "items": []}


def test_concern_status_checks_the_desired_values_not_the_defaults(tmp_path):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=(5,), rp=(5,), dscp=26, prio=2)
    want = {"rails": ["ens1np0"], "priority": 5, "cnp_dscp": 26, "cnp_priority": 2}
    assert ecn.concern_status(sr, want) == {"status": "ok", "reason": None, "items": []}
    assert ecn.concern_status(sr, dict(want, cnp_dscp=48)) == {
        "status": "drift", "reason": "1 item(s) differ from the desired state: ens1np0 cnp_dscp",
        "items": [item("ens1np0", "cnp_dscp", 26, 48)]}


def test_concern_status_asks_the_firmware_reader(tmp_path):
    sr = _host(tmp_path)
    inbox(sr, BDF)
    calls = []

    def firmware(bdf, priority):
        calls.append((bdf, priority))
        return {"status": "ok", "enabled": True, "mask": 255, "key": "K", "tool": "mlxconfig", "reason": None}

    assert ecn.concern_status(sr, {"rails": ["ens1np0"]}, firmware) == {"status": "ok", "reason": None, "items": []}
    assert calls == [(BDF, 3)]
    assert ecn.concern_status(sr, {"rails": ["ens1np0"]}) == {
        "status": "not_checked", "reason": "not checked: rail ens1np0: %s" % ecn.NOT_QUERIED, "items": []}


def test_concern_status_errors_of_two_rails_beside_drift(tmp_path):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=())
    ofed(sr, "ens2np0")
    ofed(sr, "ens3np0")
    _write(sr, "/sys/class/net/ens2np0/ecn/roce_np/enable/5", "yes")
    _write(sr, "/sys/class/net/ens3np0/ecn/roce_rp/enable/0", "2")
    doc = ecn.concern_status(sr, {"rails": ["ens1np0", "ens2np0", "ens3np0"]})
    assert doc == {
        "status": "error",
        "reason": "rail ens2np0: unexpected content 'yes' in /sys/class/net/ens2np0/ecn/roce_np/enable/5; rail "
                  "ens3np0: /sys/class/net/ens3np0/ecn/roce_rp/enable/0 holds 2, expected 0 or 1",
        "items": [dict(item("ens1np0", "np_enable:3"), result="changed")]}
