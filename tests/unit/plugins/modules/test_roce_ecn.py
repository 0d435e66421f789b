# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roce_ecn run in-process against simulated node trees (gpufabric_sim.tree): MLNX_OFED sysfs (hgx-h200), inbox
debugfs cc_params (hgx-h200-sriov), no controls (pcie-4gpu-crossnuma)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys

import pytest

import lockdown_kernel as lk
from gpufabric_sim import runtime as sim_runtime
from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import roce_ecn


def _node(tmp_path, monkeypatch, topology):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, topology)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    return root, [r["netdev"] for r in manifest["rails"]], manifest


def _read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read().strip()


def test_sysfs_check_fix_idempotent_and_drift_on_one_rail(tmp_path, monkeypatch):
    root, rails, _m = _node(tmp_path, monkeypatch, "hgx-h200")
    before = sim_runtime.tree_hash(root)
    check = run_module(roce_ecn, {"rails": rails}, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert not check.get("failed"), check
    assert check["changed"] is True and check["concerns"]["ecn"]["status"] == "drift"
    assert sorted(set(d["key"] for d in check["drift"])) == ["ecn", "np_enable:3", "rp_enable:3"]
    assert len(check["drift"]) == 2 * len(rails) + 1, "one item per rail and control, one for the state file"
    assert sim_runtime.tree_hash(root) == before
    assert "ens1np0 np_enable:3 = False" in check["diff"][0]["before"]
    assert "ens1np0 np_enable:3 = True" in check["diff"][0]["after"]
    assert '"cnp_dscp": 48' in check["diff"][1]["after"] and check["diff"][1]["before"] == ""

    fix = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert fix["changed"] is True and fix["concerns"]["ecn"]["status"] == "ok" and fix["concerns"]["ecn"]["corrected"]
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        assert json.load(f)["ecn"] == {"rails": sorted(rails), "priority": 3, "cnp_dscp": 48, "cnp_priority": 6}
    for r in rails:
        assert _read(root, "sys/class/net/%s/ecn/roce_np/enable/3" % r) == "1"
        assert _read(root, "sys/class/net/%s/ecn/roce_rp/enable/3" % r) == "1"
        assert _read(root, "sys/class/net/%s/ecn/roce_np/enable/2" % r) == "0"
    again = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["drift"] == [] and again["concerns"]["ecn"]["status"] == "ok"

    # drift on one rail: the CNP class and the RP of priority 3
    with open(os.path.join(root, "sys/class/net/ens2np0/ecn/roce_rp/enable/3"), "w") as f:
        f.write("0\n")
    with open(os.path.join(root, "sys/class/net/ens2np0/ecn/roce_np/cnp_dscp"), "w") as f:
        f.write("26\n")
    check = run_module(roce_ecn, {"rails": rails}, check_mode=True, monkeypatch=monkeypatch)
    assert check["concerns"]["ecn"]["status"] == "drift"
    assert sorted((d["object"], d["key"], d["current"]) for d in check["drift"]) == [
        ("ens2np0", "cnp_dscp", 26), ("ens2np0", "rp_enable:3", False)]
    fix = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert fix["changed"] is True and [r["object"] for r in fix["results"] if r["result"] == "changed"] == ["ens2np0"]
    assert run_module(roce_ecn, {"rails": rails}, check_mode=True, monkeypatch=monkeypatch)["changed"] is False


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "mlxconfig")


def fake_mlxconfig(tmp_path, monkeypatch, masks=None, default=255):
    """An ``mlxconfig`` on PATH answering ``-d BDF query KEY`` in the layout of fixtures/mlxconfig (None: no tool)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    if masks is None and default is None:
        return
    with open(os.path.join(FIXTURES, "query_prio_mask_p1_255.txt")) as f:
        layout = f.read()
    script = bindir / "mlxconfig"
    script.write_text(
        "#!%s\nimport sys\nargs = sys.argv[1:]\nassert args[0] == '-d' and args[2] == 'query', args\n"
        "masks = %r\nmask = masks.get(args[1], %r)\n"
        "sys.stdout.write(%r.replace('0000:11:00.0', args[1]).replace('ROCE_CC_PRIO_MASK_P1', args[3])"
        ".replace(' 255 ', ' %%d ' %% mask))\n" % (sys.executable, masks or {}, default, layout))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("tool", ["mlxconfig", None])
def test_inbox_debugfs_sets_the_cnp_class(tmp_path, monkeypatch, tool):
    """Issue 21 item 6: ok needs the firmware's enable of the priority, read with mlxconfig; without it not_checked."""
    root, rails, m = _node(tmp_path, monkeypatch, "hgx-h200-sriov")
    fake_mlxconfig(tmp_path, monkeypatch, default=255 if tool else None)
    check = run_module(roce_ecn, {"rails": rails}, check_mode=True, monkeypatch=monkeypatch)
    assert check["concerns"]["ecn"]["status"] == "drift"
    assert sorted(set(d["key"] for d in check["drift"])) == ["cnp_dscp", "cnp_priority", "cnp_priority_mode", "ecn"]
    assert check["rails"][0]["source"] == "debugfs" and check["rails"][0]["before"]["np_enable:3"] is None
    fix = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    if tool:
        assert fix["concerns"]["ecn"]["status"] == "ok"
        assert fix["rails"][0]["firmware"]["mask"] == 255 and fix["rails"][0]["after"]["firmware_cc_prio:3"] is True
    else:
        doc = fix["concerns"]["ecn"]
        assert doc["status"] == "not_checked" and doc["corrected"]
        assert "neither mlxconfig" in doc["reason"] and "check: mlxconfig -d 0000:19:00.0 query" in doc["reason"]
    bdf = m["rails"][0]["bdf"]
    base = "sys/kernel/debug/mlx5/%s/cc_params/" % bdf
    assert [_read(root, base + n) for n in ("np_cnp_dscp", "np_cnp_prio", "np_cnp_prio_mode")] == ["48", "6", "0"]
    assert run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)["changed"] is False


def test_inbox_debugfs_under_lockdown_is_not_checked_and_does_not_fail(tmp_path, monkeypatch):
    """Issue 21 item 7: Secure Boot's lockdown must not make roce_ecn (and with it roce_qos) fail on every node."""
    root, rails, m = _node(tmp_path, monkeypatch, "hgx-h200-sriov")
    lk.write_lockdown(root, "integrity")
    fake_mlxconfig(tmp_path, monkeypatch)
    monkeypatch.setattr(roce_ecn, "Sysroot", lk.LockedDownSysroot)
    base = "sys/kernel/debug/mlx5/%s/cc_params/" % m["rails"][0]["bdf"]
    before = [_read(root, base + n) for n in ("np_cnp_dscp", "np_cnp_prio", "np_cnp_prio_mode")]
    res = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] is True and [d["key"] for d in res["drift"]] == ["ecn"], "only the record for boot"
    doc = res["concerns"]["ecn"]
    assert doc["status"] == "not_checked" and "kernel lockdown [integrity]" in doc["reason"]
    assert all(r["not_checked"] and r["error"] is None for r in res["rails"])
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        assert json.load(f)["ecn"]["rails"] == sorted(rails)
    assert [_read(root, base + n) for n in ("np_cnp_dscp", "np_cnp_prio", "np_cnp_prio_mode")] == before


def test_inbox_firmware_with_dcqcn_off_is_drift_the_module_cannot_fix(tmp_path, monkeypatch):
    _root, rails, m = _node(tmp_path, monkeypatch, "hgx-h200-sriov")
    fake_mlxconfig(tmp_path, monkeypatch, masks={m["rails"][1]["bdf"]: 247})
    fix = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert not fix.get("failed"), fix
    doc = fix["concerns"]["ecn"]
    assert doc["status"] == "drift" and "rail ens2np0: DCQCN is off for priority 3" in doc["reason"]
    assert "set ROCE_CC_PRIO_MASK_P1=255" in doc["reason"]
    again = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["concerns"]["ecn"]["status"] == "drift"
    assert [(d["object"], d["key"]) for d in again["drift"]] == [("ens2np0", "firmware_cc_prio:3")]


def test_no_controls_is_not_applicable(tmp_path, monkeypatch):
    root, rails, _m = _node(tmp_path, monkeypatch, "pcie-4gpu-crossnuma")
    res = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["changed"] is False
    doc = res["concerns"]["ecn"]
    assert doc["status"] == "not_applicable" and "mlx5 without ECN controls" in doc["reason"]
    assert not os.path.exists(os.path.join(root, "etc/gpufabric/state.json")), "nothing to re-apply at boot"


@pytest.mark.parametrize("args, needle", [
    ({"rails": ["ens1np0"], "priority": 9}, "priority must be 0..7"),
    ({"rails": ["ens1np0"], "cnp_dscp": 64}, "cnp_dscp must be 0..63"),
    ({"rails": ["nope0"]}, "rail nope0 does not exist"),
    ({"rails": ["ens1np0", "ens1np0"]}, "listed twice"),
])
def test_bad_input_fails_before_anything(tmp_path, monkeypatch, args, needle):
    root, _rails, _m = _node(tmp_path, monkeypatch, "hgx-h200")
    before = sim_runtime.tree_hash(root)
    res = run_module(roce_ecn, args, monkeypatch=monkeypatch)
    assert res["failed"] and needle in res["msg"]
    assert res["concerns"]["ecn"]["status"] == "error"
    assert sim_runtime.tree_hash(root) == before


def test_a_failed_rail_fails_the_module_naming_it(tmp_path, monkeypatch):
    root, rails, _m = _node(tmp_path, monkeypatch, "hgx-h200")
    with open(os.path.join(root, "sys/class/net/ens3np0/ecn/roce_np/cnp_dscp"), "w") as f:
        f.write("garbage\n")
    res = run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch)
    assert res["failed"] and "ens3np0" in res["msg"]
    assert res["concerns"]["ecn"]["status"] == "error"
    assert _read(root, "sys/class/net/ens1np0/ecn/roce_np/enable/3") == "1"


def test_a_run_on_two_rails_keeps_the_other_rails_boot_record(tmp_path, monkeypatch):
    """Before, the record was replaced by the run's rails: the other rails lost ECN at the next boot."""
    root, rails, _m = _node(tmp_path, monkeypatch, "hgx-h200")
    assert not run_module(roce_ecn, {"rails": rails}, monkeypatch=monkeypatch).get("failed")
    two = run_module(roce_ecn, {"rails": rails[:2], "priority": 4}, monkeypatch=monkeypatch)
    assert not two.get("failed") and two["changed"] is True, two
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        groups = json.load(f)["ecn"]["groups"]
    base = {"cnp_dscp": 48, "cnp_priority": 6}
    assert groups == [dict(base, priority=4, rails=rails[:2]), dict(base, priority=3, rails=rails[2:])], groups
