# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_counters against the simulated node's ethtool emulator (real subprocess through PATH)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import fabric_counters
from gpufabric_sim import runtime
from gpufabric_sim.emulators import dcb as dcb_emu
from gpufabric_sim.emulators import ethtool as ethtool_emu

RAILS = ["ens1np0", "ens2np0"]
MIB = 1 << 20


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    os.makedirs(root)
    dcb_emu.init_node(root)
    for r in RAILS:
        dcb_emu.init_device(root, r)
        ethtool_emu.init_device(root, r)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ethtool").write_text(runtime.render_wrapper(sys.executable, "gpufabric_sim.emulators.ethtool", "main",
                                                           False))
    os.chmod(str(bindir / "ethtool"), 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    return root


def lossless(root, rails=None):
    for r in rails or RAILS:
        for argv in (["app", "add", "dev", r, "dscp-prio", "26:3"], ["pfc", "set", "dev", r, "prio-pfc", "3:on"]):
            assert dcb_emu.run(argv, root=root)[0] == 0


def test_snapshot_delta_and_sender_verdict(node, monkeypatch):
    lossless(node)
    before = run_module(fabric_counters, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert not before.get("failed") and before["changed"] is False
    assert before["snapshot"]["rails"]["ens1np0"]["pfc_counters"] == [3]
    ethtool_emu.inject_traffic(node, "ens1np0", "tx", 26, 8 * MIB, 2048, congested=True)
    ethtool_emu.inject_traffic(node, "ens2np0", "tx", 0, 8 * MIB, 2048)
    after = run_module(fabric_counters, {"rails": RAILS, "previous": before["snapshot"], "role": "sender"},
                       monkeypatch=monkeypatch)
    d = after["delta"]["rails"]
    assert d["ens1np0"]["prio"]["3"]["tx_bytes"] == 8 * MIB and d["ens1np0"]["prio"]["3"]["rx_pause"] > 0
    assert after["verdict"]["ens1np0"] == []
    assert [f["reason"] for f in after["verdict"]["ens2np0"]] == ["no_traffic_in_priority", "priority0_not_flat"]


def test_pfc_off_shows_in_verdict(node, monkeypatch):
    before = run_module(fabric_counters, {"rails": ["ens1np0"]}, monkeypatch=monkeypatch)
    ethtool_emu.inject_traffic(node, "ens1np0", "rx", 26, 8 * MIB, 2048)
    after = run_module(fabric_counters, {"rails": ["ens1np0"], "previous": before["snapshot"], "role": "receiver"},
                       monkeypatch=monkeypatch)
    assert "pfc_off" in [f["reason"] for f in after["verdict"]["ens1np0"]]
    assert "no_traffic_in_priority" in [f["reason"] for f in after["verdict"]["ens1np0"]], "PCP trust: prio 0"


def test_reset_between_snapshots(node, monkeypatch):
    lossless(node, ["ens1np0"])
    ethtool_emu.inject_traffic(node, "ens1np0", "tx", 26, 8 * MIB, 2048)
    before = run_module(fabric_counters, {"rails": ["ens1np0"]}, monkeypatch=monkeypatch)
    ethtool_emu.reset_device(node, "ens1np0")
    after = run_module(fabric_counters, {"rails": ["ens1np0"], "previous": before["snapshot"], "role": "sender"},
                       monkeypatch=monkeypatch)
    assert after["delta"]["rails"]["ens1np0"]["reset"] is True
    assert [f["reason"] for f in after["verdict"]["ens1np0"]] == ["counters_reset"]


@pytest.mark.parametrize("args,match", [
    ({"rails": ["ens9np0"]}, "ethtool -S ens9np0 failed"),
    ({"rails": ["a/b"]}, "not a network interface"),
    ({"rails": ["ens1np0"], "priority": 9}, "priority must be 0..7"),
    ({"rails": ["ens1np0"], "previous": {"nope": 1}}, "previous is not a snapshot"),
    ({"plan": [{"rail": "x", "participants": []}], "deltas": {}}, "no participants"),
    ({"rails": ["ens1np0"], "plan": []}, "mutually exclusive"),
    ({}, "one of the following is required"),
])
def test_bad_input(node, monkeypatch, args, match):
    r = run_module(fabric_counters, args, monkeypatch=monkeypatch)
    assert r.get("failed") and pytest.importorskip("re").search(match, r["msg"]), r


def test_evaluate_mode_runs_no_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    rd = {"prio": dict((str(p), {"rx_bytes": 0, "tx_bytes": 0, "rx_discards": 0, "rx_pause": 0, "tx_pause": 0})
                       for p in range(8)), "pfc_counters": [3], "reset": False}
    rd["prio"]["3"]["rx_bytes"] = 5 * MIB
    args = {"plan": [{"rail": "rail0", "participants": [{"host": "r", "netdev": "ens1np0", "role": "receiver"}]}],
            "deltas": {"r": {"rails": {"ens1np0": rd}}}}
    r = run_module(fabric_counters, args, monkeypatch=monkeypatch)
    assert r["acceptance"]["ok"] is True and "PASS" in r["markdown"]
