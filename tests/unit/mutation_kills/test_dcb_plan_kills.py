# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcb_plan: the boundaries and messages of validation and the drift its own tests leave unseen (make mutation's
survivors): ETS drift in one field only, a PCP-trusting port that keeps DSCP entries, DSCP 63, remaps."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import plan as dp

ETS = {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
       "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]}


def rail(dscp=None, pfc=(), trust=None, ets=None, other=None, apptrust=None):
    dscp = dict((d, list(p) if isinstance(p, list) else [p]) for d, p in (dscp or {}).items())
    return {"app": {"dscp": dscp, "other": other or {}}, "pfc": {"enabled": list(pfc)}, "ets": ets,
            "apptrust": apptrust, "trust": trust or ("dscp" if dscp else "pcp")}


def want(**kw):
    return dp.normalize_desired(kw)


@pytest.mark.parametrize("desired,message", [
    ([], "desired DCB configuration must be a dict"),
    ({"bogus": 1, "also": 2}, "unknown DCB settings: also, bogus"),
    ({"trust": "vlan"}, "trust must be one of dscp, pcp, not 'vlan'"),
    ({"other_app_entries": "drop"}, "other_app_entries must be one of keep, remove, not 'drop'"),
    ({"dcbx": "fw"}, "dcbx must be one of host, keep, not 'fw'"),
    ({"dscp_map": {"dscp": 26}}, "dscp_map must be a list of {dscp, priority} items"),
    ({"dscp_map": [{"dscp": 26}]},
     "dscp_map item 0 must have exactly the keys dscp and priority, got {'dscp': 26}"),
    ({"dscp_map": [{"dscp": 26, "priority": 3}, "x"]},
     "dscp_map item 1 must have exactly the keys dscp and priority, got 'x'"),
    ({"dscp_map": [{"dscp": True, "priority": 3}]}, "dscp_map item 0 dscp must be an integer, not True"),
    ({"dscp_map": [{"dscp": "x", "priority": 3}]}, "dscp_map item 0 dscp must be an integer, not 'x'"),
    ({"dscp_map": [{"dscp": None, "priority": 3}]}, "dscp_map item 0 dscp must be an integer, not None"),
    ({"dscp_map": [{"dscp": 1, "priority": "p"}]}, "dscp_map item 0 priority must be an integer, not 'p'"),
    ({"dscp_map": [{"dscp": 64, "priority": 3}]}, "DSCP 64 is out of range: DSCP values are 0..63"),
    ({"dscp_map": [{"dscp": -1, "priority": 3}]}, "DSCP -1 is out of range: DSCP values are 0..63"),
    ({"dscp_map": [{"dscp": 26, "priority": 8}]},
     "priority 8 for DSCP 26 is out of range: priorities are 0..7"),
    ({"dscp_map": [{"dscp": 26, "priority": -1}]},
     "priority -1 for DSCP 26 is out of range: priorities are 0..7"),
    ({"dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 26, "priority": 4}]},
     "DSCP 26 is mapped to two priorities (3 and 4): a DSCP can carry one priority"),
    ({"pfc_priorities": [8]}, "PFC priority 8 is out of range: priorities are 0..7"),
    ({"pfc_priorities": [-1]}, "PFC priority -1 is out of range: priorities are 0..7"),
    ({"pfc_priorities": [3, 3]}, "pfc_priorities lists priority 3 twice"),
    ({"pfc_priorities": ["x"]}, "pfc_priorities item must be an integer, not 'x'"),
    ({"trust": "dscp", "dscp_map": []},
     "trust dscp needs at least one dscp_map entry (on mlx5 the DSCP entries are what switches the port to "
     "DSCP trust)"),
    ({"trust": "pcp", "dscp_map": [{"dscp": 26, "priority": 3}]},
     "trust pcp cannot be combined with dscp_map entries: PCP trust means the port ignores DSCP; give an empty "
     "dscp_map"),
    ({"ets": [1]}, "ets must be a dict with tc_tsa, tc_bw and prio_tc"),
    ({"ets": dict(ETS, zz=1, aa=2)}, "ets has unknown keys: aa, zz"),
    ({"ets": {"tc_bw": ETS["tc_bw"]}}, "ets needs tc_tsa, tc_bw and prio_tc; missing: prio_tc, tc_tsa"),
    ({"ets": dict(ETS, tc_bw=[100] * 7)},
     "ets.tc_bw must list 8 values (one per traffic class or priority), got [100, 100, 100, 100, 100, 100, 100]"),
    ({"ets": dict(ETS, prio_tc="01234567")},
     "ets.prio_tc must list 8 values (one per traffic class or priority), got '01234567'"),
    ({"ets": dict(ETS, tc_tsa=["ets"] * 7 + ["wfq"])}, "ets.tc_tsa value 'wfq' is not one of strict, cbs, ets, vendor"),
    ({"ets": dict(ETS, tc_bw=[101, 0, 0, 0, 0, 0, 0, 0])}, "ets.tc_bw for TC 0 is 101%: percentages are 0..100"),
    ({"ets": dict(ETS, tc_bw=[50, 0, 0, 50, 0, 0, 0, -1])}, "ets.tc_bw for TC 7 is -1%: percentages are 0..100"),
    ({"ets": dict(ETS, tc_bw=[50, 0, 0, 40, 0, 0, 0, 0])}, "ets.tc_bw sums to 90%; the bandwidths must sum to 100"),
    ({"ets": dict(ETS, tc_tsa=["strict"] * 8, tc_bw=[50, 0, 0, 0, 0, 0, 0, 0])},
     "ets.tc_bw sums to 50%; with no ETS traffic class the bandwidths must sum to 0 or 100"),
    ({"ets": dict(ETS, prio_tc=[0, 1, 2, 3, 4, 5, 6, 8])}, "ets.prio_tc maps priority 7 to TC 8: TCs are 0..7"),
    ({"ets": dict(ETS, prio_tc=[-1, 1, 2, 3, 4, 5, 6, 7])}, "ets.prio_tc maps priority 0 to TC -1: TCs are 0..7"),
    ({"ets": dict(ETS, tc_bw=[50, 0, 0, "x", 0, 0, 0, 0])}, "ets.tc_bw item must be an integer, not 'x'"),
    ({"ets": dict(ETS, prio_tc=[0, 1, 2, 3, 4, 5, 6, None])}, "ets.prio_tc item must be an integer, not None"),
])
def test_bad_input_is_refused_with_its_message(desired, message):
    with pytest.raises(dp.DcbValidationError) as e:
        dp.normalize_desired(desired)
    assert str(e.value) == message


@pytest.mark.parametrize("desired,expect", [
    (None, {"dscp_map": {26: 3}, "pfc": [3], "trust": "dscp", "ets": None, "other_app_entries": "keep",
            "dcbx": "host"}),
    ({"trust": "pcp", "pfc_priorities": [7, 0], "other_app_entries": "remove", "dcbx": "keep"},
     {"dscp_map": {}, "pfc": [0, 7], "trust": "pcp", "ets": None, "other_app_entries": "remove", "dcbx": "keep"}),
    ({"dscp_map": [{"dscp": 63, "priority": 7}, {"dscp": 0, "priority": 0}, {"dscp": 63, "priority": 7}],
      "pfc_priorities": ["7"]},
     {"dscp_map": {63: 7, 0: 0}, "pfc": [7], "trust": "dscp", "ets": None, "other_app_entries": "keep",
      "dcbx": "host"}),
    ({"ets": {"tc_tsa": ("strict",) * 8, "tc_bw": ["0"] * 8, "prio_tc": [7] * 8}},
     {"dscp_map": {26: 3}, "pfc": [3], "trust": "dscp", "other_app_entries": "keep", "dcbx": "host",
      "ets": {"tc_tsa": ["strict"] * 8, "tc_bw": [0] * 8, "prio_tc": [7] * 8}}),
    ({"ets": {"tc_tsa": ["vendor"] * 8, "tc_bw": [100, 0, 0, 0, 0, 0, 0, 0], "prio_tc": [0] * 8}},
     {"dscp_map": {26: 3}, "pfc": [3], "trust": "dscp", "other_app_entries": "keep", "dcbx": "host",
      "ets": {"tc_tsa": ["vendor"] * 8, "tc_bw": [100, 0, 0, 0, 0, 0, 0, 0], "prio_tc": [0] * 8}}),
])
def test_good_input_normalised(desired, expect):
    assert dp.normalize_desired(desired) == expect


@pytest.mark.parametrize("field,value", [
    ("tc_tsa", ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "ets"]),
    ("prio_tc", [0, 1, 2, 3, 4, 5, 7, 6]),
    ("tc_bw", [40, 0, 0, 60, 0, 0, 0, 0]),
])
def test_ets_drift_in_one_field_only(field, value):
    cur = dict(ETS, willing=False)
    cur[field] = value
    cmds, drift = dp.plan_rail("r0", rail({26: 3}, pfc=[3], ets=cur), want(ets=ETS), driver="mlx5_core")
    assert drift == [{"concern": "dcb", "object": "r0", "key": "ets",
                      "current": {k: cur[k] for k in ("tc_tsa", "tc_bw", "prio_tc")}, "desired": ETS}]
    assert cmds == [["dcb", "ets", "set", "dev", "r0",
                     "tc-tsa", "0:ets", "1:strict", "2:strict", "3:ets", "4:strict", "5:strict", "6:strict",
                     "7:strict", "tc-bw", "0:50", "1:0", "2:0", "3:50", "4:0", "5:0", "6:0", "7:0",
                     "prio-tc", "0:0", "1:1", "2:2", "3:3", "4:4", "5:5", "6:6", "7:7"]]


def test_ets_bandwidth_of_non_ets_classes_is_not_compared():
    cur = dict(ETS, tc_bw=[50, 100, 100, 50, 100, 100, 100, 100])
    assert dp.plan_rail("r0", rail({26: 3}, pfc=[3], ets=cur), want(ets=ETS), driver="mlx5_core") == ([], [])
    assert dp.plan_rail("r0", rail({26: 3}, pfc=[3], ets=None), want(ets=ETS), driver="mlx5_core")[1][0]["current"] \
        is None


def test_pcp_trusting_port_with_dscp_entries():
    cur = rail({10: 1, 26: 3}, pfc=[3], trust="pcp", apptrust=["pcp"])
    cmds, drift = dp.plan_rail("r0", cur, want(trust="pcp"), apptrust=True)
    assert drift == [{"concern": "dcb", "object": "r0", "key": "dscp_prio:10", "current": [1], "desired": None},
                     {"concern": "dcb", "object": "r0", "key": "dscp_prio:26", "current": [3], "desired": None}]
    assert cmds == [["dcb", "app", "flush", "dev", "r0", "dscp-prio"]]


def test_dscp_to_pcp_switch_with_apptrust():
    cur = rail({26: 3}, pfc=[3], trust="dscp", apptrust=["dscp", "pcp"])
    cmds, drift = dp.plan_rail("r0", cur, want(trust="pcp"), apptrust=True)
    assert drift == [{"concern": "dcb", "object": "r0", "key": "trust", "current": "dscp", "desired": "pcp"}]
    assert cmds == [["dcb", "app", "flush", "dev", "r0", "dscp-prio"],
                    ["dcb", "apptrust", "set", "dev", "r0", "order", "pcp"]]


def test_dscp_63_and_0_are_planned_like_any_other():
    w = want(dscp_map=[{"dscp": 63, "priority": 7}, {"dscp": 0, "priority": 0}], pfc_priorities=[7])
    cmds, drift = dp.plan_rail("r0", rail({0: 0, 63: 1, 26: 3}, pfc=[7]), w, driver="mlx5_core")
    assert drift == [{"concern": "dcb", "object": "r0", "key": "dscp_prio:63", "current": 1, "desired": 7}]
    assert cmds == [["dcb", "app", "add", "dev", "r0", "dscp-prio", "63:7"]]


@pytest.mark.parametrize("driver,verb", [("mlx5_core", "add"), ("ice", "replace")])
def test_remap_needs_replace_on_generic_tables(driver, verb):
    cmds, drift = dp.plan_rail("r0", rail({26: 2, 27: 3}, pfc=[3]), want(), driver=driver)
    assert cmds[0] == ["dcb", "app", verb, "dev", "r0", "dscp-prio", "26:3"]
    assert drift[0] == {"concern": "dcb", "object": "r0", "key": "dscp_prio:26", "current": 2, "desired": 3}


def test_new_entry_on_generic_table_is_added():
    cmds, _drift = dp.plan_rail("r0", rail({10: 1}, pfc=[3], trust="dscp"), want(), driver="ice")
    assert cmds[0] == ["dcb", "app", "add", "dev", "r0", "dscp-prio", "26:3"]


def test_several_priorities_on_one_dscp():
    cur = rail({26: [3, 5], 40: [3, 5]}, pfc=[3])
    cmds, drift = dp.plan_rail("r0", cur, want(), driver="ice")
    assert [(d["key"], d["current"], d["desired"]) for d in drift] == [
        ("dscp_prio:26", [3, 5], 3), ("dscp_prio:40", [3, 5], 5)]
    assert cmds == [["dcb", "app", "replace", "dev", "r0", "dscp-prio", "26:3"],
                    ["dcb", "app", "del", "dev", "r0", "dscp-prio", "40:3"]]


def test_other_selectors_removed_with_their_words():
    other = {"ethtype_prio": {0x8906: [3]}, "default_prio": {None: [0, 1]}, "pcp_prio": {"1de": [2]}}
    cmds, drift = dp.plan_rail("r0", rail({26: 3}, pfc=[3], other=other), want(other_app_entries="remove"),
                               driver="ice")
    assert cmds == [["dcb", "app", "del", "dev", "r0", "ethtype-prio", "0x8906:3", "pcp-prio", "1de:2",
                     "default-prio", "0", "1"]]
    assert [(d["key"], d["current"], d["desired"]) for d in drift] == [
        ("ethtype_prio:0x8906", 3, None), ("pcp_prio:1de", 2, None), ("default_prio", [0, 1], None)]


@pytest.mark.parametrize("prios,value", [([], None), ([4], 4), ([1, 2], [1, 2])])
def test_dscp_value(prios, value):
    assert dp.dscp_value(prios) == value


@pytest.mark.parametrize("lossless,fallback", [(set(), 0), ({0}, 1), ({0, 1, 2}, 3), (set(range(8)), 0)])
def test_lossy_fallback_boundaries(lossless, fallback):
    assert dp.lossy_fallback(lossless) == fallback


def _dscp_writes(cmds):
    return [c for c in cmds if c[:3] == ["dcb", "app", "add"] or c[:3] == ["dcb", "app", "replace"]]


def test_unknown_driver_without_apptrust_pins_the_whole_table_by_default():
    # a rail whose driver is not known and that has no apptrust: trust follows the DSCP entries (as on mlx5), so
    # the switch from PCP writes all 64 entries; the default of plan_rail is that rail
    cmds, _drift = dp.plan_rail("eth0", rail(), want(trust="dscp", pfc_priorities=[3],
                                                     dscp_map=[{"dscp": 26, "priority": 3}]))
    (write,) = _dscp_writes(cmds)
    assert len(write) == 6 + 64 and "26:3" in write and "24:0" in write


def test_a_known_generic_driver_without_apptrust_writes_only_the_wanted_entries():
    cmds, _drift = dp.plan_rail("eth0", rail(), want(trust="dscp", pfc_priorities=[3],
                                                     dscp_map=[{"dscp": 26, "priority": 3}]),
                                driver="ice", apptrust=False)
    assert _dscp_writes(cmds) == [["dcb", "app", "add", "dev", "eth0", "dscp-prio", "26:3"]]
