# -*- coding: utf-8 -*-
"""dcb_qos main() against the dcb emulator through a generated `dcb` wrapper on PATH."""
from __future__ import absolute_import, division, print_function

import json
import os
import stat
import sys

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import dcb_qos
from gpufabric_sim.emulators import dcb as dcb_emu

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.abspath(os.path.join(HERE, "..", "..", "..", "lab"))
RAILS = ["ens1np0", "ens2np0"]


@pytest.fixture
def node(tmp_path, monkeypatch):
    def make(version="6.1.0", driver="mlx5_core", rails=None, with_dcb=True):
        rails = RAILS if rails is None else rails
        root = tmp_path / "root"
        for r in rails:
            d = root / "sys" / "class" / "net" / r
            d.mkdir(parents=True)
            drv = root / "sys" / "bus" / "pci" / "drivers" / (driver if driver == "mlx5_core" else "sparx5")
            drv.mkdir(parents=True, exist_ok=True)
            (d / "device").mkdir()
            os.symlink(str(drv), str(d / "device" / "driver"))
        dcb_emu.init_node(str(root), version)
        for r in rails:
            dcb_emu.init_device(str(root), r, driver=driver)
        bindir = tmp_path / "bin"
        bindir.mkdir()
        if with_dcb:
            wrapper = bindir / "dcb"
            wrapper.write_text(
                "#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom gpufabric_sim.emulators import dcb\n"
                "sys.exit(dcb.main(sys.argv[1:]))\n" % (sys.executable, LAB))
            wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
        monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
        return str(root)
    return make


def counters(root, rail):
    return dcb_emu.state(root, rail)["counters"]


@pytest.mark.parametrize("version", ["6.1.0", "6.5.0"])
def test_apply_then_idempotent(node, monkeypatch, version):
    root = node(version)
    res = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    # mlx5 rails read in one batch: dcb -V is not needed, the version is not reported
    assert res["changed"] and res["dcb_version"] is None
    # PCP -> DSCP switch: the whole table (firmware default, 26 -> 3, the other DSCPs of priority 3 parked on 0),
    # then their delete, then PFC
    table = ["%d:%d" % (d, 3 if d == 26 else 0 if d >> 3 == 3 else d >> 3) for d in range(64)]
    parked = ["%d:0" % d for d in range(24, 32) if d != 26]
    assert res["commands"] == [
        ["dcb", "app", "add", "dev", "ens1np0", "dscp-prio"] + table,
        ["dcb", "app", "del", "dev", "ens1np0", "dscp-prio"] + parked,
        ["dcb", "pfc", "set", "dev", "ens1np0", "prio-pfc", "all:off", "3:on"],
        ["dcb", "app", "add", "dev", "ens2np0", "dscp-prio"] + table,
        ["dcb", "app", "del", "dev", "ens2np0", "dscp-prio"] + parked,
        ["dcb", "pfc", "set", "dev", "ens2np0", "prio-pfc", "all:off", "3:on"]]
    keys = [(d["object"], d["key"]) for d in res["drift"]]
    assert keys == [(r, k) for r in RAILS for k in ("trust", "dscp_prio:26", "pfc")] + [
        ("/etc/gpufabric/state.json", "dcb")]
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        recorded = json.load(f)["dcb"]
    assert recorded["rails"] == RAILS and recorded["pfc_priorities"] == [3]
    assert res["rails"][0]["after"] == {"trust": "dscp", "dscp_prio": {"26": 3}, "dscp_entries": 57, "pfc": [3],
                                        "dcbx": "host cee ieee"}
    for r in RAILS:
        assert dcb_emu.state(root, r)["trust"] == "dscp"
        assert counters(root, r)["link_toggles"] == 1
    res2 = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert not res2["changed"] and res2["commands"] == [] and res2["drift"] == []
    for r in RAILS:
        c = counters(root, r)
        assert (c["pfc_set_calls"], c["app_set_calls"], c["link_toggles"]) == (1, 1, 1)


def test_check_mode_and_diff(node, monkeypatch):
    root = node()
    res = run_module(dcb_qos, {"rails": RAILS}, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert res["changed"] and len(res["commands"]) == 6
    assert "ens1np0 trust=pcp pfc=none dscp26->None" in res["diff"][0]["before"]
    assert "ens1np0 trust=dscp pfc=3 dscp26->3" in res["diff"][0]["after"]
    assert not os.path.exists(os.path.join(root, "etc/gpufabric/state.json"))
    for r in RAILS:
        c = counters(root, r)
        assert c["pfc_set_calls"] == 0 and c["app_set_calls"] == 0
        assert dcb_emu.state(root, r)["trust"] == "pcp"


def test_only_drifted_rail(node, monkeypatch):
    root = node()
    run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    dcb_emu.run(["pfc", "set", "dev", "ens2np0", "prio-pfc", "all:off"], root=root)
    res = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert res["commands"] == [["dcb", "pfc", "set", "dev", "ens2np0", "prio-pfc", "all:off", "3:on"]]
    assert [r["changed"] for r in res["rails"]] == [False, True]
    assert counters(root, "ens1np0")["pfc_set_calls"] == 1


def test_two_of_four_rails_keep_the_others_in_the_boot_record(node, monkeypatch):
    """Issue 21 item 9: a run on 2 of 4 rails must not shrink the record the boot-time applier re-applies."""
    four = ["ens1np0", "ens2np0", "ens3np0", "ens4np0"]
    root = node(rails=four)
    assert not run_module(dcb_qos, {"rails": four}, monkeypatch=monkeypatch).get("failed")
    res = run_module(dcb_qos, {"rails": four[:2], "pfc_priorities": [3, 6],
                               "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 48, "priority": 6}]},
                     monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        recorded = json.load(f)["dcb"]
    assert [(g["rails"], g["pfc_priorities"]) for g in recorded["groups"]] == [
        (four[:2], [3, 6]), (four[2:], [3])]
    # explicit removal: state=absent drops the named rails from the record and runs no dcb command
    before = [counters(root, r)["app_set_calls"] for r in four]
    res = run_module(dcb_qos, {"rails": ["ens4np0"], "state": "absent"}, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] and res["concerns"]["dcb"]["status"] == "drift"
    res = run_module(dcb_qos, {"rails": ["ens4np0"], "state": "absent"}, monkeypatch=monkeypatch)
    assert res["changed"] and res["commands"] == []
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        recorded = json.load(f)["dcb"]
    assert [(g["rails"], g["pfc_priorities"]) for g in recorded["groups"]] == [(four[:2], [3, 6]), (["ens3np0"], [3])]
    assert [counters(root, r)["app_set_calls"] for r in four] == before
    assert not run_module(dcb_qos, {"rails": ["ens4np0"], "state": "absent"}, monkeypatch=monkeypatch)["changed"]


def test_a_running_lldpad_is_reported_not_fought_silently(node, monkeypatch):
    """Issue 21 item 8: a host lldpad can rewrite DCB; the dcb concern says so (drift, also after a fix run)."""
    root = node()
    os.makedirs(os.path.join(root, "proc", "812"))
    with open(os.path.join(root, "proc", "812", "comm"), "w") as f:
        f.write("lldpad\n")
    res = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    doc = res["concerns"]["dcb"]
    assert doc["status"] == "drift" and doc["reason"].startswith("lldpad is running (pid 812)")
    assert res["lldpad"] == {"pids": [812], "enabled": []}
    assert ("lldpad", "lldpad") in [(d["object"], d["key"]) for d in res["drift"]]
    again = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["concerns"]["dcb"]["status"] == "drift"
    os.remove(os.path.join(root, "proc", "812", "comm"))
    assert run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)["concerns"]["dcb"]["status"] == "ok"


def test_custom_map_pfc_and_ets(node, monkeypatch):
    root = node()
    args = {"rails": ["ens1np0"], "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 48, "priority": 6}],
            "pfc_priorities": [3, 6],
            "ets": {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
                    "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]}}
    res = run_module(dcb_qos, args, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    after = res["rails"][0]["after"]
    assert after["dscp_prio"] == {"26": 3, "48": 6} and after["pfc"] == [3, 6]
    assert after["ets"]["prio_tc"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert not run_module(dcb_qos, args, monkeypatch=monkeypatch)["changed"]
    assert counters(root, "ens1np0")["ets_set_calls"] == 1


def test_generic_driver_apptrust(node, monkeypatch):
    root = node("6.5.0", driver="other", rails=["eth0"])
    res = run_module(dcb_qos, {"rails": ["eth0"]}, monkeypatch=monkeypatch)
    assert ["dcb", "apptrust", "set", "dev", "eth0", "order", "dscp"] in res["commands"]
    assert dcb_emu.state(root, "eth0")["apptrust"] == ["dscp"]


def test_trust_pcp(node, monkeypatch):
    root = node()
    run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    res = run_module(dcb_qos, {"rails": RAILS, "trust": "pcp", "pfc_priorities": []}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert all(r["after"]["trust"] == "pcp" and r["after"]["pfc"] == [] for r in res["rails"])
    assert dcb_emu.state(root, "ens1np0")["apps"] == []


@pytest.mark.parametrize("args,needle", [
    ({"rails": ["ens1np0", "nope0"]}, "unknown rail(s) nope0"),
    ({"rails": []}, "at least one"),
    ({"rails": RAILS, "dscp_map": [{"dscp": 64, "priority": 3}]}, "DSCP 64 is out of range"),
    ({"rails": RAILS, "dscp_map": [{"dscp": 26, "priority": 9}]}, "priority 9"),
    ({"rails": RAILS, "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 26, "priority": 5}]}, "two priorities"),
    ({"rails": RAILS, "pfc_priorities": [3, 3]}, "twice"),
    ({"rails": RAILS, "ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [20] * 8, "prio_tc": [0] * 8}}, "sum to 100"),
    ({"rails": RAILS, "trust": "pcp", "dscp_map": [{"dscp": 26, "priority": 3}]}, "cannot be combined"),
    ({"rails": RAILS, "other_app_entries": "drop"}, "other_app_entries"),
    # contradictions: both settings named, by role variable and module option
    ({"rails": RAILS, "pfc_priorities": [4]},
     "roce_qos_pfc_priorities (dcb_qos pfc_priorities) and roce_qos_dscp_map (dcb_qos dscp_map) contradict"),
    ({"rails": RAILS, "pfc_priorities": [0, 3]},
     "roce_qos_pfc_priorities (dcb_qos pfc_priorities) and roce_qos_trust (dcb_qos trust) contradict"),
    ({"rails": RAILS, "trust": "pcp", "dscp_map": [{"dscp": 26, "priority": 3}]},
     "roce_qos_trust (dcb_qos trust) and roce_qos_dscp_map (dcb_qos dscp_map) contradict"),
])
def test_validation_errors_touch_nothing(node, monkeypatch, args, needle):
    root = node()
    res = run_module(dcb_qos, args, monkeypatch=monkeypatch)
    assert res.get("failed") and needle in res["msg"], res
    for r in RAILS:
        c = counters(root, r)
        assert c["app_set_calls"] == c["pfc_set_calls"] == c["ets_set_calls"] == 0


def test_dcb_missing(node, monkeypatch):
    node(with_dcb=False)
    monkeypatch.setattr(dcb_qos.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    res = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert res.get("failed") and "dcb command" in res["msg"]


def test_dcb_too_old(node, monkeypatch):
    node("5.10.0")
    res = run_module(dcb_qos, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert res.get("failed") and "too old" in res["msg"]


def test_rail_without_dcb(node, monkeypatch, tmp_path):
    root = node()
    (tmp_path / "root" / "sys" / "class" / "net" / "veth0").mkdir()
    res = run_module(dcb_qos, {"rails": ["veth0"]}, monkeypatch=monkeypatch)
    assert res.get("failed") and "Operation not supported" in res["msg"]
    assert os.path.isdir(root)


@pytest.mark.parametrize("mode,kept", [("keep", True), ("remove", False)])
def test_extra_dscps_and_other_app_entries(node, monkeypatch, mode, kept):
    root = node(rails=["ens1np0"])
    args = {"rails": ["ens1np0"], "other_app_entries": mode}
    assert not run_module(dcb_qos, args, monkeypatch=monkeypatch).get("failed")
    dcb_emu.run(["app", "add", "dev", "ens1np0", "dscp-prio", "10:3"], root=root)
    res = run_module(dcb_qos, args, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] and res["commands"] == [["dcb", "app", "del", "dev", "ens1np0", "dscp-prio", "10:3"]]
    assert {"concern": "dcb", "object": "ens1np0", "key": "dscp_prio:10", "current": 3, "desired": None} in res["drift"]
    res = run_module(dcb_qos, args, monkeypatch=monkeypatch)
    assert res["changed"] and not run_module(dcb_qos, args, monkeypatch=monkeypatch)["changed"]
    st = dcb_emu.state(root, "ens1np0")
    assert dcb_emu.dscp_priority(st, 10) == 0
    # a DSCP on a lossy priority (48 -> 6, the firmware default) stays only with keep
    assert ([dcb_emu.SEL_DSCP, 48, 6] in st["apps"]) == kept
    assert len(st["apps"]) == (56 if kept else 1)   # keep: 57 after the first run, minus DSCP 10
