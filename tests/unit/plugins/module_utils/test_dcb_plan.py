# -*- coding: utf-8 -*-
"""dcb_plan: what is drift and which commands fix it, from ``dcb -j`` output of both JSON shapes."""
from __future__ import absolute_import, division, print_function

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb, plan as dcb_plan

__metaclass__ = type

SHAPES = ("6.1", "6.5")   # [pid, prio] before iproute2 6.5, [pid, prio, " "] from 6.5


def app_json(dscp=(), other=None, shape="6.1"):
    """``dcb -j app show`` text in the given shape: dscp [(dscp, prio)], other {json_key: [(pid, prio)]}."""
    tail = [" "] if shape == "6.5" else []
    data = {}
    for key, entries in sorted((other or {}).items()):
        if key == "default_prio":
            data[key] = list(entries)
        else:
            data[key] = [[pid, p] + tail for pid, p in entries]
    if dscp:
        data["dscp_prio"] = [[d, p] + tail for d, p in sorted(dscp)]
    return json.dumps(data)


def current(dscp=(), pfc=(), other=None, apptrust=None, ets=None, shape="6.1"):
    app = dcb.parse_app(app_json(dscp, other, shape))
    pfc_text = json.dumps({"pfc_cap": 8, "macsec_bypass": False, "delay": 7,
                           "prio_pfc": [p in pfc for p in range(8)]})
    return {"app": app, "pfc": dcb.parse_pfc(pfc_text), "ets": ets, "apptrust": apptrust,
            "trust": dcb.trust_of(app, apptrust)}


def want(**kw):
    return dcb.normalize_desired(kw)


MLX5_INIT = [(d, d >> 3) for d in range(64)]                      # driver init / mlnx_qos: 24..31 -> 3
CLEAN = [(d, p) for d, p in MLX5_INIT if p != 3 or d == 26]       # 57 entries: only 26 in priority 3
EXTRA3 = [24, 25, 27, 28, 29, 30, 31]
DEFAULT = want()
REMOVE = want(other_app_entries="remove")
ETS = {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
       "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]}
ETS_ARGV = ["tc-tsa", "0:ets", "1:strict", "2:strict", "3:ets", "4:strict", "5:strict", "6:strict", "7:strict",
            "tc-bw", "0:50", "1:0", "2:0", "3:50", "4:0", "5:0", "6:0", "7:0",
            "prio-tc", "0:0", "1:1", "2:2", "3:3", "4:4", "5:5", "6:6", "7:7"]
PFC3 = ["dcb", "pfc", "set", "dev", "r0", "prio-pfc", "all:off", "3:on"]


def add(*pairs, **kw):
    return ["dcb", "app", kw.get("verb", "add"), "dev", "r0", "dscp-prio"] + ["%d:%d" % p for p in pairs]


def delete(*pairs):
    return ["dcb", "app", "del", "dev", "r0", "dscp-prio"] + ["%d:%d" % p for p in pairs]


def switch_table(wanted, lossless, remove=False):
    """The table the plan writes when it switches an mlx5 port from PCP to DSCP trust (see dcb_plan)."""
    return [(d, wanted[d] if d in wanted else 0 if remove or (d >> 3) in lossless else d >> 3) for d in range(64)]


BOOT_ADD = switch_table({26: 3}, {3})
BOOT_DEL = [(d, 0) for d in EXTRA3]
ETS_VENDOR = {"tc_tsa": ["vendor"] * 8, "tc_bw": [100] * 8, "prio_tc": [1, 0, 2, 3, 4, 5, 6, 7]}

# id, current (kwargs of current()), desired, driver, apptrust, commands, drift [(key, current, desired)]
PLAN_CASES = [
    ("compliant-57", dict(dscp=CLEAN, pfc=[3]), DEFAULT, "mlx5_core", False, [], []),
    ("compliant-single-entry", dict(dscp=[(26, 3)], pfc=[3]), DEFAULT, "mlx5_core", False, [], []),
    # (a) DSCPs nobody wanted in the lossless priority: mlx5 driver init lists 24..31 -> 3
    ("mlx5-init-table-extras", dict(dscp=MLX5_INIT, pfc=[3]), DEFAULT, "mlx5_core", False,
     [delete(*[(d, 3) for d in EXTRA3])], [("dscp_prio:%d" % d, 3, None) for d in EXTRA3]),
    ("extra-dscp-10", dict(dscp=[(d, 3 if d == 10 else p) for d, p in CLEAN], pfc=[3]), DEFAULT, "mlx5_core", False,
     [delete((10, 3))], [("dscp_prio:10", 3, None)]),
    ("extra-dscp-10-pfc-also-off", dict(dscp=[(26, 3), (10, 3)], pfc=[]), DEFAULT, "mlx5_core", False,
     [delete((10, 3)), PFC3], [("dscp_prio:10", 3, None), ("pfc", [], [3])]),
    ("extra-into-second-lossless", dict(dscp=[(26, 3), (48, 6), (50, 6)], pfc=[3, 6]),
     want(dscp_map=[{"dscp": 26, "priority": 3}, {"dscp": 48, "priority": 6}], pfc_priorities=[3, 6]),
     "mlx5_core", False, [delete((50, 6))], [("dscp_prio:50", 6, None)]),
    ("lossy-extras-kept", dict(dscp=[(26, 3), (10, 1), (48, 6)], pfc=[3]), DEFAULT, "mlx5_core", False, [], []),
    ("lossy-extras-removed", dict(dscp=[(26, 3), (10, 1), (48, 6)], pfc=[3]), REMOVE, "mlx5_core", False,
     [delete((10, 1), (48, 6))], [("dscp_prio:10", 1, None), ("dscp_prio:48", 6, None)]),
    ("no-pfc-no-lossless-class", dict(dscp=MLX5_INIT, pfc=[]), want(pfc_priorities=[]), "mlx5_core", False,
     [], []),
    # (b) PFC on a priority that should be lossy: set to exactly the wanted set, once
    ("pfc-extra-prio", dict(dscp=CLEAN, pfc=[3, 4]), DEFAULT, "mlx5_core", False, [PFC3], [("pfc", [3, 4], [3])]),
    ("pfc-off-only", dict(dscp=CLEAN, pfc=[]), DEFAULT, "mlx5_core", False, [PFC3], [("pfc", [], [3])]),
    ("pfc-disable-all", dict(dscp=CLEAN, pfc=[3]), want(pfc_priorities=[]), "mlx5_core", False,
     [["dcb", "pfc", "set", "dev", "r0", "prio-pfc", "all:off"]], [("pfc", [3], [])]),
    ("pfc-two-equal", dict(dscp=[(26, 3), (48, 6)], pfc=[3, 6]),
     want(dscp_map=[{"dscp": 26, "priority": 3}, {"dscp": 48, "priority": 6}], pfc_priorities=[6, 3]),
     "mlx5_core", False, [], []),
    # the PCP -> DSCP switch on mlx5 writes the whole table, then deletes what must not stay
    ("boot-state", dict(), DEFAULT, "mlx5_core", False, [add(*BOOT_ADD), delete(*BOOT_DEL), PFC3],
     [("trust", "pcp", "dscp"), ("dscp_prio:26", None, 3), ("pfc", [], [3])]),
    ("boot-state-remove", dict(), REMOVE, "mlx5_core", False,
     [add(*switch_table({26: 3}, {3}, remove=True)), delete(*[(d, 0) for d in range(64) if d != 26]), PFC3],
     [("trust", "pcp", "dscp"), ("dscp_prio:26", None, 3), ("pfc", [], [3])]),
    # PFC on priority 0 too: the lowest lossy priority (1) holds the DSCPs that are deleted again
    ("boot-state-pfc-on-0", dict(pfc=[0, 3]),
     want(dscp_map=[{"dscp": 26, "priority": 3}, {"dscp": 2, "priority": 0}], pfc_priorities=[0, 3]),
     "mlx5_core", False,
     [add(*[(d, {2: 0, 26: 3}[d]) if d in (2, 26) else (d, 1) if d >> 3 in (0, 3) else (d, d >> 3)
            for d in range(64)]),
      delete(*[(d, 1) for d in range(64) if d >> 3 in (0, 3) and d not in (2, 26)])],
     [("trust", "pcp", "dscp"), ("dscp_prio:2", None, 0), ("dscp_prio:26", None, 3)]),
    ("unknown-driver-no-apptrust-pins", dict(), DEFAULT, None, False, [add(*BOOT_ADD), delete(*BOOT_DEL), PFC3],
     [("trust", "pcp", "dscp"), ("dscp_prio:26", None, 3), ("pfc", [], [3])]),
    ("two-dscps-one-command", dict(dscp=[(10, 1)], pfc=[3]),
     want(dscp_map=[{"dscp": 48, "priority": 6}, {"dscp": 26, "priority": 3}]), "mlx5_core", False,
     [add((26, 3), (48, 6))], [("dscp_prio:26", None, 3), ("dscp_prio:48", None, 6)]),
    ("remap-mlx5-uses-add", dict(dscp=[(d, p) for d, p in CLEAN if d != 26] + [(26, 5)], pfc=[3]), DEFAULT,
     "mlx5_core", False, [add((26, 3))], [("dscp_prio:26", 5, 3)]),
    ("remap-and-extra-add-before-del", dict(dscp=[(26, 5), (10, 3)], pfc=[3]), DEFAULT, "mlx5_core", False,
     [add((26, 3)), delete((10, 3))], [("dscp_prio:26", 5, 3), ("dscp_prio:10", 3, None)]),
    ("to-pcp", dict(dscp=MLX5_INIT, pfc=[3]), want(trust="pcp"), "mlx5_core", False,
     [["dcb", "app", "flush", "dev", "r0", "dscp-prio"]], [("trust", "dscp", "pcp")]),
    ("pcp-already", dict(pfc=[3]), want(trust="pcp"), "mlx5_core", False, [], []),
    ("ets-given", dict(dscp=CLEAN, pfc=[3], ets=ETS_VENDOR), want(ets=ETS), "mlx5_core", False,
     [["dcb", "ets", "set", "dev", "r0"] + ETS_ARGV], [("ets", ETS_VENDOR, ETS)]),
    ("ets-matches-mlx5-readback", dict(dscp=CLEAN, pfc=[3], ets={"tc_tsa": ETS["tc_tsa"],
                                                                 "tc_bw": [50, 100, 100, 50, 100, 100, 100, 100],
                                                                 "prio_tc": list(range(8))}),
     want(ets=ETS), "mlx5_core", False, [], []),
    # drift in one ETS field alone is drift (each of tc_tsa, prio_tc, tc_bw on its own)
    ("ets-only-tsa-differs", dict(dscp=CLEAN, pfc=[3], ets=dict(ETS, tc_tsa=[
        "ets", "strict", "strict", "ets", "strict", "strict", "strict", "vendor"])),
     want(ets=ETS), "mlx5_core", False, [["dcb", "ets", "set", "dev", "r0"] + ETS_ARGV],
     [("ets", dict(ETS, tc_tsa=["ets", "strict", "strict", "ets", "strict", "strict", "strict", "vendor"]), ETS)]),
    ("ets-only-prio-tc-differs", dict(dscp=CLEAN, pfc=[3], ets=dict(ETS, prio_tc=[0, 1, 2, 3, 4, 5, 7, 6])),
     want(ets=ETS), "mlx5_core", False, [["dcb", "ets", "set", "dev", "r0"] + ETS_ARGV],
     [("ets", dict(ETS, prio_tc=[0, 1, 2, 3, 4, 5, 7, 6]), ETS)]),
    ("ets-only-bw-of-an-ets-class-differs", dict(dscp=CLEAN, pfc=[3], ets=dict(ETS, tc_bw=[60, 0, 0, 40, 0, 0, 0, 0])),
     want(ets=ETS), "mlx5_core", False, [["dcb", "ets", "set", "dev", "r0"] + ETS_ARGV],
     [("ets", dict(ETS, tc_bw=[60, 0, 0, 40, 0, 0, 0, 0]), ETS)]),
    ("ets-unread-is-drift", dict(dscp=CLEAN, pfc=[3]), want(ets=ETS), "mlx5_core", False,
     [["dcb", "ets", "set", "dev", "r0"] + ETS_ARGV], [("ets", None, ETS)]),
    # a port that already trusts PCP (apptrust) but keeps DSCP entries: each entry is drift, one flush removes them
    ("pcp-trusted-with-dscp-entries", dict(dscp=[(10, 1), (26, 3), (63, 7)], pfc=[3], apptrust=["pcp"]),
     want(trust="pcp"), "other", True, [["dcb", "app", "flush", "dev", "r0", "dscp-prio"]],
     [("dscp_prio:10", [1], None), ("dscp_prio:26", [3], None), ("dscp_prio:63", [7], None)]),
    # DSCP 63, the last code point: wanted, extra in the lossless priority, and a remap
    ("dscp-63-wanted", dict(dscp=[(26, 3)], pfc=[3, 7]),
     want(dscp_map=[{"dscp": 26, "priority": 3}, {"dscp": 63, "priority": 7}], pfc_priorities=[3, 7]),
     "mlx5_core", False, [add((63, 7))], [("dscp_prio:63", None, 7)]),
    ("dscp-63-extra-in-lossless", dict(dscp=[(26, 3), (63, 3)], pfc=[3]), DEFAULT, "mlx5_core", False,
     [delete((63, 3))], [("dscp_prio:63", 3, None)]),
    ("dscp-63-remap", dict(dscp=[(26, 3), (63, 2)], pfc=[3]),
     want(dscp_map=[{"dscp": 26, "priority": 3}, {"dscp": 63, "priority": 5}]), "mlx5_core", False,
     [add((63, 5))], [("dscp_prio:63", 2, 5)]),
    # generic dcbnl drivers: several priorities per DSCP, apptrust, other selectors
    ("generic-remap-uses-replace", dict(dscp=[(26, 3), (26, 5)], pfc=[3], apptrust=["dscp"]), DEFAULT, "other",
     True, [add((26, 3), verb="replace")], [("dscp_prio:26", [3, 5], 3)]),
    ("unknown-driver-remap-replace", dict(dscp=[(26, 5)], pfc=[3]), DEFAULT, None, False,
     [add((26, 3), verb="replace")], [("dscp_prio:26", 5, 3)]),
    ("generic-apptrust", dict(pfc=[3], apptrust=["pcp"]), DEFAULT, "other", True,
     [add((26, 3)), ["dcb", "apptrust", "set", "dev", "r0", "order", "dscp"]],
     [("trust", "pcp", "dscp"), ("dscp_prio:26", None, 3)]),
    ("generic-no-pin", dict(pfc=[3], apptrust=["dscp"]), DEFAULT, "other", True, [add((26, 3))],
     [("dscp_prio:26", None, 3)]),
    ("generic-several-dscps-one-prio", dict(dscp=[(26, 3), (10, 3), (12, 3), (14, 1)], pfc=[3], apptrust=["dscp"]),
     DEFAULT, "other", True, [delete((10, 3), (12, 3))], [("dscp_prio:10", 3, None), ("dscp_prio:12", 3, None)]),
    ("generic-extra-two-prios-keep-lossy", dict(dscp=[(26, 3), (10, 1), (10, 3)], pfc=[3], apptrust=["dscp"]),
     DEFAULT, "other", True, [delete((10, 3))], [("dscp_prio:10", [1, 3], 1)]),
    ("generic-others-kept", dict(dscp=[(26, 3)], pfc=[3], apptrust=["dscp"],
                                 other={"ethtype_prio": [(0x8915, 3)], "port_prio": [(4791, 3)]}),
     DEFAULT, "other", True, [], []),
    ("generic-others-removed", dict(dscp=[(26, 3), (48, 6)], pfc=[3], apptrust=["dscp"],
                                    other={"ethtype_prio": [(0x8915, 3)], "default_prio": [5],
                                           "stream_port_prio": [(4420, 3)], "dgram_port_prio": [(4791, 3)],
                                           "port_prio": [(80, 1)], "pcp_prio": [("3nd", 3), ("1de", 1)]}),
     REMOVE, "other", True,
     [["dcb", "app", "del", "dev", "r0", "dscp-prio", "48:6", "ethtype-prio", "0x8915:3",
       "stream-port-prio", "4420:3", "dgram-port-prio", "4791:3", "port-prio", "80:1",
       "pcp-prio", "1de:1", "3nd:3", "default-prio", "5"]],
     [("dscp_prio:48", 6, None), ("ethtype_prio:0x8915", 3, None),
      ("stream_port_prio:4420", 3, None), ("dgram_port_prio:4791", 3, None), ("port_prio:80", 1, None),
      ("pcp_prio:1de", 1, None), ("pcp_prio:3nd", 3, None), ("default_prio", 5, None)]),
    ("generic-to-pcp-removes-others", dict(dscp=[(26, 3)], pfc=[], apptrust=["dscp"],
                                           other={"pcp_prio": [("3nd", 3)]}),
     want(trust="pcp", pfc_priorities=[], other_app_entries="remove"), "other", True,
     [["dcb", "app", "del", "dev", "r0", "pcp-prio", "3nd:3"], ["dcb", "app", "flush", "dev", "r0", "dscp-prio"],
      ["dcb", "apptrust", "set", "dev", "r0", "order", "pcp"]],
     [("trust", "dscp", "pcp"), ("pcp_prio:3nd", 3, None)]),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan_rail(case, shape):
    _id, cur, desired, driver, apptrust, cmds, drift = case
    got_cmds, got_drift = dcb.plan_rail("r0", current(shape=shape, **cur), desired, driver=driver,
                                        apptrust=apptrust)
    assert got_cmds == cmds
    assert [(d["key"], d["current"], d["desired"]) for d in got_drift] == drift
    for d in got_drift:
        assert d["concern"] == "dcb" and d["object"] == "r0"
    # PFC is never set when the enabled set already matches (mlx5 toggles the link)
    assert any(c[1] == "pfc" for c in got_cmds) == (current(**cur)["pfc"]["enabled"] != desired["pfc"])


def test_plan_is_reexported():
    assert dcb.plan_rail is dcb_plan.plan_rail and dcb.normalize_desired is dcb_plan.normalize_desired
    assert dcb.DcbValidationError is dcb_plan.DcbValidationError


@pytest.mark.parametrize("value,needle", [("drop", "other_app_entries must be one of keep, remove, not 'drop'")])
def test_other_app_entries_choice(value, needle):
    with pytest.raises(dcb.DcbValidationError) as e:
        dcb.normalize_desired({"other_app_entries": value})
    assert needle in str(e.value)


@pytest.mark.parametrize("lossless,fallback", [(set(), 0), ({3}, 0), ({0, 3}, 1), ({0, 1, 2}, 3), (set(range(8)), 0)])
def test_lossy_fallback(lossless, fallback):
    assert dcb_plan.lossy_fallback(lossless) == fallback


@pytest.mark.parametrize("shape", SHAPES)
def test_parse_other_selectors(shape):
    text = app_json([(26, 3)], {"ethtype_prio": [(0x8915, 3)], "default_prio": [5, 2], "port_prio": [(4791, 3)],
                                "pcp_prio": [("3nd", 3)]}, shape)
    app = dcb.parse_app(text)
    assert app["dscp"] == {26: [3]} and app["count"] == 1
    assert app["other"] == {"ethtype_prio": {0x8915: [3]}, "default_prio": {None: [2, 5]},
                            "port_prio": {4791: [3]}, "pcp_prio": {"3nd": [3]}}
    assert app["pcp"] == {"3nd": [3]}


@pytest.mark.parametrize("text", ['{"default_prio":[[3]]}', '{"default_prio":[true]}', '{"port_prio":[80]}'])
def test_parse_other_selectors_garbage(text):
    with pytest.raises(dcb.DcbError):
        dcb.parse_app(text)


# ------------------------------------------------------------------------------------------------
# against the emulator: the fix run, the hidden mlx5 table, other selectors
# ------------------------------------------------------------------------------------------------

import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot  # noqa: E402
from gpufabric_sim.emulators import dcb as dcb_emu  # noqa: E402


class Runner(object):
    def __init__(self, root):
        self.root = root
        self.writes = []

    def __call__(self, argv):
        assert argv[0] == "dcb"
        if argv[1] in ("app", "pfc", "ets", "apptrust") and argv[2] != "show":
            self.writes.append(list(argv))
        return dcb_emu.run(argv[1:], root=self.root)


def make_node(root, version="6.5.0", driver="mlx5_core", lists_table=True, rail="r0"):
    dev_dir = os.path.join(root, "sys", "class", "net", rail, "device")
    drv = os.path.join(root, "sys", "bus", "pci", "drivers", "mlx5_core" if driver == "mlx5_core" else "other_drv")
    os.makedirs(dev_dir)
    if not os.path.isdir(drv):
        os.makedirs(drv)
    os.symlink(drv, os.path.join(dev_dir, "driver"))
    dcb_emu.init_node(root, version)
    dcb_emu.init_device(root, rail, driver=driver, first_app_lists_table=lists_table)
    return Sysroot(root), Runner(root)


def emu(root, cmd):
    rc, out, err = dcb_emu.run(cmd.split(), root=root)
    assert rc == 0, err


@pytest.mark.parametrize("version", ["6.1.0", "6.5.0"])
def test_fix_run_removes_extra_dscp_and_extra_pfc(tmp_path, version):
    root = str(tmp_path)
    sr, run = make_node(root, version)
    dcb.apply_dcb(run, ["r0"], {}, False, sysroot=sr)
    toggles = dcb_emu.state(root, "r0")["counters"]["link_toggles"]
    emu(root, "app add dev r0 dscp-prio 10:3")
    emu(root, "pfc set dev r0 prio-pfc 3:on 4:on")
    expected = [["dcb", "app", "del", "dev", "r0", "dscp-prio", "10:3"],
                ["dcb", "pfc", "set", "dev", "r0", "prio-pfc", "all:off", "3:on"]]
    check = dcb.apply_dcb(run, ["r0"], {}, True, sysroot=sr)
    assert check["changed"] and check["commands"] == expected
    assert [(d["object"], d["key"], d["current"], d["desired"]) for d in check["drift"]] == [
        ("r0", "dscp_prio:10", 3, None), ("r0", "pfc", [3, 4], [3])]
    run.writes = []
    res = dcb.apply_dcb(run, ["r0"], {}, False, sysroot=sr)
    assert res["commands"] == expected and run.writes == expected
    st_ = dcb_emu.state(root, "r0")
    assert dcb_emu.dscp_priority(st_, 10) == 0 and dcb_emu.pfc_enabled(st_) == [3]
    assert st_["counters"]["link_toggles"] == toggles + 2       # the injected set and the fix: one each
    run.writes = []
    again = dcb.apply_dcb(run, ["r0"], {}, False, sysroot=sr)
    assert not again["changed"] and again["drift"] == [] and run.writes == []


def test_upstream_setapp_leaves_no_hidden_lossless_dscp(tmp_path):
    """Upstream mlx5 lists only the entry added on the trust switch; the firmware keeps 24..31 -> 3 unlisted."""
    root = str(tmp_path)
    sr, run = make_node(root, "6.5.0", lists_table=False)
    emu(root, "app add dev r0 dscp-prio 26:3")        # what a plain `dcb app add` leaves behind
    st_ = dcb_emu.state(root, "r0")
    assert len(st_["apps"]) == 1 and [d for d in range(64) if dcb_emu.dscp_priority(st_, d) == 3] == list(range(24, 32))
    emu(root, "app flush dev r0 dscp-prio")           # back to PCP trust, the firmware table stays
    dcb.apply_dcb(run, ["r0"], {}, False, sysroot=sr)
    st_ = dcb_emu.state(root, "r0")
    assert [d for d in range(64) if dcb_emu.dscp_priority(st_, d) == 3] == [26]
    assert len(st_["apps"]) == 57
    assert not dcb.apply_dcb(run, ["r0"], {}, False, sysroot=sr)["changed"]


@pytest.mark.parametrize("mode,left", [("keep", 2 + 6), ("remove", 1)])
def test_other_app_entries_on_generic_driver(tmp_path, mode, left):
    root = str(tmp_path)
    sr, run = make_node(root, "6.5.0", driver="other")
    emu(root, "apptrust set dev r0 order dscp")
    emu(root, "app add dev r0 dscp-prio 26:3 10:3 48:6 ethtype-prio 0x8915:3 port-prio 4791:3 "
              "stream-port-prio 4420:1 dgram-port-prio 4791:2 pcp-prio 3nd:3 default-prio 5")
    res = dcb.apply_dcb(run, ["r0"], {"other_app_entries": mode}, False, sysroot=sr)
    keys = [d["key"] for d in res["drift"]]
    assert "dscp_prio:10" in keys and ("dscp_prio:48" in keys) == (mode == "remove")
    apps = dcb_emu.state(root, "r0")["apps"]
    assert len(apps) == left and [5, 26, 3] in apps and [5, 10, 3] not in apps
    assert not dcb.apply_dcb(run, ["r0"], {"other_app_entries": mode}, False, sysroot=sr)["changed"]


# ------------------------------------------------------------------------------------------------
# property: whatever the rail holds, one plan makes it read back as desired, and a second plan is empty
# ------------------------------------------------------------------------------------------------

MODELS = ("mlx5-lists-table", "mlx5-upstream", "generic")


@st.composite
def rail_states(draw):
    model = draw(st.sampled_from(MODELS))
    version = draw(st.sampled_from(["6.1.0", "6.5.0"]))
    pfc_en = draw(st.integers(0, 255))
    if model.startswith("mlx5"):
        table = draw(st.lists(st.integers(0, 7), min_size=64, max_size=64))
        listed = draw(st.sets(st.integers(0, 63), max_size=64)) if draw(st.booleans()) else set()
        if model == "mlx5-lists-table":
            # a DSCP the table does not list was deleted through dcb: the driver reset it to 0
            table = [p if d in listed else 0 for d, p in enumerate(table)]
        apps = [[dcb_emu.SEL_DSCP, d, table[d]] for d in sorted(listed)]
        return model, version, {"trust": "dscp" if apps else "pcp", "dscp2prio": table, "apps": apps,
                                "pfc_en": pfc_en}
    triples = st.one_of(
        st.tuples(st.just(dcb_emu.SEL_DSCP), st.integers(0, 63), st.integers(0, 7)),
        st.tuples(st.just(dcb_emu.SEL_ETHERTYPE), st.sampled_from([0, 0x8915, 0x8906]), st.integers(0, 7)),
        st.tuples(st.sampled_from([dcb_emu.SEL_STREAM, dcb_emu.SEL_DGRAM, dcb_emu.SEL_ANY]),
                  st.sampled_from([80, 4420, 4791]), st.integers(0, 7)),
        st.tuples(st.just(dcb_emu.SEL_PCP), st.integers(0, 15), st.integers(0, 7)))
    apps = sorted(draw(st.sets(triples, max_size=12)))
    if version < "6.2":
        apps = [a for a in apps if a[0] != dcb_emu.SEL_PCP]   # 6.1 neither shows nor takes pcp-prio
    order = draw(st.sampled_from([["pcp"], ["dscp"], ["dscp", "pcp"], []]))
    return model, version, {"apps": [list(a) for a in apps], "apptrust": order, "pfc_en": pfc_en}


@st.composite
def desired_states(draw):
    trust = draw(st.sampled_from(["dscp", "dscp", "pcp"]))
    dmap = draw(st.dictionaries(st.integers(0, 63), st.integers(0, 7), min_size=1, max_size=4)) \
        if trust == "dscp" else {}
    # no PFC on priority 0 in DSCP trust: every DSCP without an entry lands there (desired.contradictions)
    pfc = draw(st.sets(st.integers(1 if trust == "dscp" else 0, 7), max_size=3))
    return dcb.normalize_desired({"trust": trust, "pfc_priorities": sorted(pfc),
                                  "dscp_map": [{"dscp": d, "priority": p} for d, p in sorted(dmap.items())],
                                  "other_app_entries": draw(st.sampled_from(["keep", "remove"]))})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=rail_states(), want=desired_states())
def test_plan_converges_in_one_run(start, want):
    model, version, cfg = start
    root = tempfile.mkdtemp(prefix="gpufabric-dcb-prop-")
    try:
        driver = "other" if model == "generic" else "mlx5_core"
        sr, run = make_node(root, version, driver=driver, lists_table=(model != "mlx5-upstream"))
        dev = dcb_emu.state(root, "r0")
        dev["pfc"]["pfc_en"] = cfg.pop("pfc_en")
        dev.update(cfg)
        dcb_emu.write_state(root, "r0", dev)
        before_pfc = dcb_emu.pfc_enabled(dev)
        drv = dcb.driver_of(sr, "r0")
        apptrust = dcb.probe_apptrust(run, "r0", drv, dcb.parse_version("iproute2-" + version))
        cur = dcb.read_rail(run, "r0", apptrust=apptrust)
        cmds, drift = dcb.plan_rail("r0", cur, want, driver=drv, apptrust=apptrust)
        assert bool(cmds) == bool(drift)
        for argv in cmds:
            rc, out, err = run(argv)
            assert rc == 0, (argv, err)
        after = dcb.read_rail(run, "r0", apptrust=apptrust)
        assert dcb.plan_rail("r0", after, want, driver=drv, apptrust=apptrust) == ([], [])
        # reads back as desired
        lossless = set(want["pfc"])
        assert after["trust"] == want["trust"] and after["pfc"]["enabled"] == want["pfc"]
        dscp = after["app"]["dscp"]
        if want["trust"] == "dscp":
            assert all(dscp.get(d) == [p] for d, p in want["dscp_map"].items())
            for d in set(dscp) - set(want["dscp_map"]):
                assert not lossless & set(dscp[d]) and want["other_app_entries"] == "keep"
        if want["other_app_entries"] == "remove":
            assert after["app"]["other"] == {} or version < "6.2"
        # PFC set at most once, and only when it differed
        counters = dcb_emu.state(root, "r0")["counters"]
        assert counters["pfc_set_calls"] == (0 if before_pfc == want["pfc"] else 1)
        # what the hardware does with each DSCP, where dcb can know it (not: an mlx5 port that was already in
        # DSCP trust with unlisted firmware mappings, upstream semantics; a generic driver without apptrust)
        hw = dcb_emu.state(root, "r0")
        knowable = (model == "mlx5-lists-table" or (model == "mlx5-upstream" and cur["trust"] == "pcp")
                    or (model == "generic" and apptrust))
        if want["trust"] == "dscp" and knowable:
            for d in range(64):
                prio = dcb_emu.dscp_priority(hw, d)
                assert prio == want["dscp_map"][d] if d in want["dscp_map"] else prio not in lossless, (d, prio)
    finally:
        shutil.rmtree(root)
