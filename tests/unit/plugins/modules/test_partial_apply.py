# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A partial apply on a simulated HGX node, end to end: dcb_qos fails on rail 5 of 8 (the dcb emulator's injected
EBUSY on ``dcb pfc set``), says so honestly, records what each rail has, and the boot-time applier then re-applies
to every rail what it has: the new settings to the rails that got them, the earlier ones to rail 5."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from gpufabric_sim import runtime as sim_runtime
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import dcb_qos

OLD = {"dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3]}
NEW = {"dscp_map": [{"dscp": 26, "priority": 4}], "pfc_priorities": [4]}


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, "hgx-h200")
    # iproute2 6.5: whole batches answer (6.1's batch defect would only add single reads and time)
    dcb_emu.init_node(root, "6.5.0")
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"], r["driver"])
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "dcb"), "w") as f:
        f.write(sim_runtime.render_wrapper(sys.executable, "gpufabric_sim.emulators.dcb", "main", False))
    os.chmod(os.path.join(bindir, "dcb"), 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
    rails = [r["netdev"] for r in manifest["rails"]]
    ibdev = dict((r["netdev"], r["ibdev"]) for r in manifest["rails"])
    return root, rails, ibdev


def has(root, rail, settings):
    """Whether the rail's DCB is the one ``settings`` asks for (DSCP 26's priority, the PFC priorities)."""
    st = dcb_emu.state(root, rail)
    return (st["trust"] == "dscp" and dcb_emu.dscp_priority(st, 26) == settings["dscp_map"][0]["priority"]
            and dcb_emu.pfc_enabled(st) == settings["pfc_priorities"])


def run_applier(root, **kw):
    lines = []

    def runner(argv):
        assert argv[0] == "dcb", argv
        return dcb_emu.run(argv[1:], root=root)
    rc, summary = applier.run_applier(Sysroot(root), runner, log=lines.append, wait_timeout=0, **kw)
    return rc, summary, lines


def test_rail_5_of_8_fails(node, monkeypatch):
    root, rails, ibdev = node
    assert not run_module(dcb_qos, dict(OLD, rails=rails), monkeypatch=monkeypatch).get("failed")
    bad = rails[4]
    dcb_emu.inject_fault(root, bad, "pfc", "EBUSY")

    res = run_module(dcb_qos, dict(NEW, rails=rails), monkeypatch=monkeypatch)
    assert res["failed"] is True and res["changed"] is True
    assert res["msg"].startswith("DCB configuration failed on rail(s) %s: %s: dcb pfc set dev %s" % (bad, bad, bad))
    assert "Device or resource busy" in res["msg"]
    assert [(r["object"], r["result"]) for r in res["results"]] == [
        (r, "failed" if r == bad else "changed") for r in rails]
    # rail 5 took the DSCP entry (and lost mlx5's default 32..39 -> 4, which would be extra DSCPs in the new lossless
    # priority) before its PFC was refused: it changed in part, and says so
    assert sorted(c["key"] for c in res["results"][4]["changes"]) == sorted(
        ["dscp_prio:26"] + ["dscp_prio:%d" % d for d in range(32, 40)])
    assert res["concerns"]["dcb"]["status"] == "error"
    assert set(i["result"] for i in res["concerns"]["dcb"]["items"] if i["object"] == bad) == {"failed"}
    assert all(has(root, r, NEW) for r in rails if r != bad)

    # state.json: the new settings for the rails that have them, rail 5 keeps its earlier record
    recorded = state.load(Sysroot(root))["dcb"]
    assert [(g["rails"], g["pfc_priorities"]) for g in recorded["groups"]] == [
        ([r for r in rails if r != bad], [4]), ([bad], [3])]

    # a driver reload of rail 1's device resets its DCB; the applier run for that device applies the new settings
    dcb_emu.reset_device(root, rails[0])
    rc, summary, lines = run_applier(root, only_device=ibdev[rails[0]])
    assert rc == 0, lines
    assert has(root, rails[0], NEW)
    assert "dcb: %s pfc [] -> [4]" % rails[0] in lines and "dcb: %s dscp_prio:26 unset -> 4" % rails[0] in lines
    assert all(ln.startswith("dcb: %s " % rails[0]) for ln in lines)

    # rail 5's device re-registers with the fault still there: it gets its earlier settings as far as the device
    # lets it, the applier says what it changed and fails naming the rail
    dcb_emu.reset_device(root, bad)
    rc, summary, lines = run_applier(root, only_device=ibdev[bad])
    assert rc == 1
    assert "dcb: %s dscp_prio:26 unset -> 3" % bad in lines
    assert [ln for ln in lines if ln.startswith("error:")] == [
        "error: dcb: dcb pfc set dev %s prio-pfc all:off 3:on failed on rail %s (rc=1): Attribute write: "
        "Device or resource busy" % (bad, bad)]

    # a reboot with the fault gone: every rail gets what it has, nothing older
    dcb_emu.clear_fault(root, bad)
    for r in rails:
        dcb_emu.reset_device(root, r)
    rc, summary, lines = run_applier(root)
    assert rc == 0, lines
    assert all(has(root, r, NEW) for r in rails if r != bad) and has(root, bad, OLD)
    assert summary["concerns"]["dcb"]["rails"] == [r for r in rails if r != bad] + [bad]

    # the next run of the module fixes rail 5 too; the record is one group again
    res = run_module(dcb_qos, dict(NEW, rails=rails), monkeypatch=monkeypatch)
    assert not res.get("failed"), res["msg"]
    assert [r["object"] for r in res["results"] if r["result"] == "changed"] == [bad]
    assert state.load(Sysroot(root))["dcb"]["rails"] == rails


def test_boot_run_applies_every_rail_it_can(node, monkeypatch):
    root, rails, _ibdev = node
    assert not run_module(dcb_qos, dict(NEW, rails=rails), monkeypatch=monkeypatch).get("failed")
    for r in rails:
        dcb_emu.reset_device(root, r)
    for r in (rails[1], rails[6]):
        dcb_emu.inject_fault(root, r, "app", "EOPNOTSUPP")
    rc, summary, lines = run_applier(root)
    assert rc == 1
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 2 and rails[1] in errors[0] and rails[6] in errors[1]
    assert all("Operation not supported" in e for e in errors)
    assert all(has(root, r, NEW) for r in rails if r not in (rails[1], rails[6]))
    # one line per rail and key that changed; nothing for the rails whose first command was refused
    changed = sorted(set(ln.split()[1] for ln in lines if ln.startswith("dcb: ")))
    assert changed == sorted(r for r in rails if r not in (rails[1], rails[6]))
    assert [r["result"] for r in summary["concerns"]["dcb"]["results"]] == [
        "failed" if r in (rails[1], rails[6]) else "changed" for r in rails]
    with open(os.path.join(root, "etc/gpufabric/state.json")) as f:
        assert json.load(f)["dcb"]["rails"] == rails     # the applier records nothing


RDMA = "sys/kernel/config/rdma_cm"


def tos_of(root, ibdev):
    with open(os.path.join(root, RDMA, ibdev, "ports", "1", "default_roce_tos")) as f:
        return int(f.read())


def test_tos_port_refused(node, monkeypatch):
    """rdma_cm_tos: one device port refuses the write; the other ports get the new ToS, the rail keeps its earlier
    record, and the applier run after a re-registration sets each port to what it has."""
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
    from ansible_collections.gpufabric.node.plugins.modules import rdma_cm_tos
    root, rails, ibdev = node

    def kernel_sleep(_s):
        """The kernel creates ports/1/ of a new configfs group."""
        for dev in os.listdir(os.path.join(root, RDMA)):
            attr = os.path.join(root, RDMA, dev, "ports", "1", "default_roce_tos")
            if not os.path.exists(attr):
                os.makedirs(os.path.dirname(attr))
                with open(attr, "w") as f:
                    f.write("0\n")
    monkeypatch.setattr(rdma_cm, "_sleep", kernel_sleep)
    assert not run_module(rdma_cm_tos, {"rails": rails, "tos": 104}, monkeypatch=monkeypatch).get("failed")
    bad = rails[4]

    class Refusing(Sysroot):
        def write_attr(self, p, value):
            if "/%s/ports/1/default_roce_tos" % ibdev[bad] in p:
                raise IOError(16, "Device or resource busy")
            Sysroot.write_attr(self, p, value)

    monkeypatch.setattr(rdma_cm_tos, "Sysroot", Refusing)
    res = run_module(rdma_cm_tos, {"rails": rails, "tos": 106}, monkeypatch=monkeypatch)
    assert res["failed"] is True and res["changed"] is True
    assert res["msg"].startswith("setting default_roce_tos failed on port(s) %s/1" % ibdev[bad])
    assert [r["result"] for r in res["results"]] == ["failed" if r == bad else "changed" for r in rails]
    assert [tos_of(root, ibdev[r]) for r in rails] == [104 if r == bad else 106 for r in rails]
    recorded = state.load(Sysroot(root))["rdma_cm"]
    assert recorded == {"groups": [{"rails": [r for r in rails if r != bad], "tos": 106},
                                   {"rails": [bad], "tos": 104}]}

    for r in (rails[0], bad):   # re-registrations: ToS back to 0
        with open(os.path.join(root, RDMA, ibdev[r], "ports", "1", "default_roce_tos"), "w") as f:
            f.write("0\n")
    for r in (rails[0], bad):
        rc, _summary, lines = run_applier(root, only_device=ibdev[r])
        assert rc == 0, lines
        assert lines == ["rdma_cm: %s/1 default_roce_tos 0 -> %d" % (ibdev[r], 104 if r == bad else 106)]
    assert tos_of(root, ibdev[rails[0]]) == 106 and tos_of(root, ibdev[bad]) == 104
