# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pcie_acs run in-process against simulated trees (gpufabric_sim.tree): both shipped topologies,
check mode, idempotence, persistence modes and bad input."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil

import pytest
from ansible.module_utils import basic

from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import pcie_acs

TOPOLOGIES = ("hgx-h200", "pcie-4gpu-crossnuma")
# hand-derived from the topology files: bridges with ACS on the paired paths
EXPECTED_CLEARED = {
    "hgx-h200": ["0000:%02x:%02x.0" % (bus, d) for bus in (0x17, 0x39, 0x99, 0xB9) for d in range(4)],
    "pcie-4gpu-crossnuma": ["0000:18:00.0", "0000:18:01.0", "0000:38:01.0", "0000:38:02.0", "0000:38:03.0",
                            "0000:4a:01.0", "0000:98:01.0", "0000:98:02.0"],
}
EXPECTED_NO_ACS = {
    "hgx-h200": ["0000:16:00.0", "0000:38:00.0", "0000:98:00.0", "0000:b8:00.0"],
    "pcie-4gpu-crossnuma": ["0000:17:00.0", "0000:3a:00.0"],
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    out = {}
    for name in TOPOLOGIES:
        root = str(tmp_path_factory.mktemp(name) / "root")
        sim_tree.build_tree(root, name)
        out[name] = root
    return out


@pytest.fixture
def node(templates, tmp_path, monkeypatch):
    def make(name):
        root = str(tmp_path / name)
        shutil.copytree(templates[name], root, symlinks=True)
        monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
        return root
    return make


@pytest.fixture
def warned(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg))
    return seen


def tree_hash(root):
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            h.update(p.encode())
            if not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def configs(root):
    sr = Sysroot(root)
    return dict((b, sr.read_bytes("/sys/bus/pci/devices/%s/config" % b)) for b in sr.listdir("/sys/bus/pci/devices"))


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_default_run(node, warned, name):
    root = node(name)
    h0 = tree_hash(root)
    before = configs(root)

    dry = run_module(pcie_acs, {}, check_mode=True, diff=True)
    assert not dry.get("failed"), dry
    assert tree_hash(root) == h0
    # check mode says what a real run does: it would clear the bridges
    assert dry["changed"] is True
    assert dry["concerns"]["acs"]["status"] == "drift"
    assert sorted(d["object"] for d in dry["drift"]) == EXPECTED_CLEARED[name]
    assert [b["status"] for b in dry["bridges"] if b["acs"]] == ["would_clear"] * len(EXPECTED_CLEARED[name])
    assert "0x001d" in dry["diff"]["before"] and "0x0011" in dry["diff"]["after"]

    res = run_module(pcie_acs, {}, diff=True)
    assert not res.get("failed"), res
    assert res["changed"] is True
    assert res["drift"] == dry["drift"]
    cleared = sorted(b["bdf"] for b in res["bridges"] if b["status"] == "cleared")
    assert cleared == EXPECTED_CLEARED[name]
    assert sorted(b["bdf"] for b in res["bridges"] if b["status"] == "no_acs") == EXPECTED_NO_ACS[name]
    after = configs(root)
    assert sorted(b for b in before if before[b] != after[b]) == cleared
    sr = Sysroot(root)
    for bdf in cleared:
        assert pci.acs_info(sr, bdf)["ctrl"] == 0x0011
    paths = sorted(b["kernel_path"] for b in res["bridges"] if b["acs"])
    assert res["kernel_arg"] == "pci=disable_acs_redir=" + ";".join(paths)
    assert res["state_file"] == {"path": "/etc/gpufabric/acs.json", "action": "absent"}
    assert all(b["pairs"] for b in res["bridges"])

    again = run_module(pcie_acs, {})
    assert again["changed"] is False and again["drift"] == []
    assert again["kernel_arg"] == res["kernel_arg"]
    assert configs(root) == after
    assert warned == []


def test_check_mode_on_changed_tree_reports_no_drift(node):
    root = node("hgx-h200")
    run_module(pcie_acs, {})
    h = tree_hash(root)
    dry = run_module(pcie_acs, {}, check_mode=True)
    assert dry["drift"] == [] and dry["changed"] is False and tree_hash(root) == h


def test_persist_applier_then_kernel_cmdline(node):
    root = node("pcie-4gpu-crossnuma")
    clear = ["ReqRedir", "CmpltRedir", "EgressCtrl", "SrcValid"]
    res = run_module(pcie_acs, {"persist": "applier", "clear": clear})
    assert not res.get("failed"), res
    assert res["kernel_arg"] is None
    assert res["state_file"]["action"] == "written"
    with open(os.path.join(root, "etc/gpufabric/acs.json")) as f:
        doc = json.load(f)
    assert doc["clear"] == ["SrcValid", "ReqRedir", "CmpltRedir", "EgressCtrl"]
    assert [b["bdf"] for b in doc["bridges"]] == EXPECTED_CLEARED["pcie-4gpu-crossnuma"]
    assert all(b["ctrl_after"] == "0x0010" for b in res["bridges"] if b["acs"])

    again = run_module(pcie_acs, {"persist": "applier", "clear": clear})
    assert again["changed"] is False and again["state_file"]["action"] == "unchanged"

    # the boot-time applier after a reboot: the kernel set 0x1d again
    sr = Sysroot(root)
    for bdf in EXPECTED_CLEARED["pcie-4gpu-crossnuma"]:
        pci.write_acs_ctrl(sr, bdf, 0x1D)
    out = acs.apply_state(sr)
    assert out["changed"] and not out["errors"]
    assert all(pci.acs_info(sr, b)["ctrl"] == 0x10 for b in EXPECTED_CLEARED["pcie-4gpu-crossnuma"])

    # switching to the kernel parameter removes the applier's file (one mechanism owns ACS at boot)
    dry = run_module(pcie_acs, {"persist": "kernel_cmdline"}, check_mode=True)
    assert dry["state_file"]["action"] == "would be removed" and os.path.exists(os.path.join(root, acs.STATE_FILE[1:]))
    res = run_module(pcie_acs, {"persist": "kernel_cmdline"})
    assert res["changed"] is True and res["state_file"]["action"] == "removed"
    assert not os.path.exists(os.path.join(root, acs.STATE_FILE[1:]))
    assert res["kernel_arg"].startswith("pci=disable_acs_redir=0000:16:01.0/00.0/00.0;")


def test_extra_bits_warn_with_kernel_cmdline(node, warned):
    node("hgx-h200")
    res = run_module(pcie_acs, {"clear": ["ReqRedir", "UpstreamFwd"]})
    assert len(warned) == 1 and "UpstreamFwd" in warned[0] and "applier" in warned[0]
    assert all(b["ctrl_after"] == "0x0009" for b in res["bridges"] if b["acs"])


def test_explicit_endpoints(node, warned):
    node("pcie-4gpu-crossnuma")
    res = run_module(pcie_acs, {"endpoints": [{"gpu": "0000:39:00.0", "nic": "3c:00.0"}], "persist": "none"})
    assert not res.get("failed"), res
    assert [b["bdf"] for b in res["bridges"]] == ["0000:38:01.0", "0000:38:03.0"]
    assert res["pairs"] == [["0000:39:00.0", "0000:3c:00.0"]]
    assert res["kernel_arg"] is None
    assert len(warned) == 1 and "next boot" in warned[0]


def test_off_path_reported_not_changed(node):
    root = node("hgx-h200")
    sr = Sysroot(root)
    pci.write_acs_ctrl(sr, "0000:05:02.0", 0x0000)     # an NVSwitch root port someone cleared by hand
    h = configs(root)["0000:05:02.0"]
    res = run_module(pcie_acs, {})
    assert [i["bdf"] for i in res["off_path_clear"]] == ["0000:05:02.0"]
    assert configs(root)["0000:05:02.0"] == h


BAD = [
    ("unknown bit", {"clear": ["ReqRedir", "Bogus"]}, "unknown ACS bit name 'Bogus'"),
    ("unmanaged bit", {"clear": ["TransBlk"]}, "TransBlk is not managed"),
    ("malformed bdf", {"endpoints": [{"gpu": "0000:18:00", "nic": "0000:19:00.0"}]}, "is not a PCI address"),
    ("gpu not found", {"endpoints": [{"gpu": "0000:01:00.0", "nic": "0000:19:00.0"}]}, "not found"),
    ("gpu equals nic", {"endpoints": [{"gpu": "0000:19:00.0", "nic": "0000:19:00.0"}]}, "the same device"),
    ("duplicate endpoints", {"endpoints": [{"gpu": "0000:18:00.0", "nic": "0000:19:00.0"},
                                           {"gpu": "0000:18:00.0", "nic": "0000:19:00.0"}]}, "repeats"),
    ("not a bridge", {"bridges": ["0000:18:00.0"]}, "is not a bridge"),
    ("bridge not found", {"bridges": ["0000:16:07.0"]}, "not found"),
    ("bad persist", {"persist": "grub"}, "persist"),
    ("bad pairs", {"pairs": "some"}, "pairs"),
    ("endpoint lacks nic", {"endpoints": [{"gpu": "0000:18:00.0"}]}, "nic"),
]


@pytest.mark.parametrize("name,args,msg", BAD, ids=[c[0] for c in BAD])
def test_bad_input_fails_before_touching(node, name, args, msg):
    root = node("hgx-h200")
    h0 = tree_hash(root)
    res = run_module(pcie_acs, args)
    assert res.get("failed") is True
    assert msg in res["msg"]
    assert tree_hash(root) == h0


def test_unreadable_config_fails_without_writing(node, monkeypatch):
    root = node("hgx-h200")
    h0 = tree_hash(root)
    real = Sysroot.read_bytes

    def short(self, p, size=-1):
        data = real(self, p, size)
        return data[:256] if p.endswith("/0000:17:02.0/config") else data   # what a non-root reader sees

    monkeypatch.setattr(Sysroot, "read_bytes", short)
    res = run_module(pcie_acs, {})
    assert res["failed"] and "become" in res["msg"]
    assert res["changed"] is False
    assert tree_hash(root) == h0


def test_host_without_gpus_changes_nothing(tmp_path, monkeypatch, warned):
    root = str(tmp_path / "root")
    sim_tree.build_tree(root, {"name": "nics-only", "root_buses": [{"bus": "0000:80", "devices": [
        {"bdf": "0000:80:01.0", "kind": "root_port", "acs": {"cap": 0x5F, "ctrl": 0x1D}, "children": [
            {"bdf": "0000:81:00.0", "kind": "nic", "netdev": "ens1np0", "ibdev": "mlx5_0"}]}]}]})
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    h0 = tree_hash(root)
    res = run_module(pcie_acs, {})
    assert not res.get("failed"), res
    assert res["changed"] is False and res["bridges"] == [] and res["kernel_arg"] is None
    assert len(warned) == 1 and "nothing to do" in warned[0]
    assert tree_hash(root) == h0


def test_partial_write_failure_goes_on_and_keeps_the_failed_bridge_record(node, monkeypatch):
    """One bridge refuses the write: the others are cleared, the result says changed with one result per bridge,
    and acs.json records the new bits for the bridges that got them while the failed one keeps its old record."""
    root = node("hgx-h200")
    sr = Sysroot(root)
    assert not run_module(pcie_acs, {"persist": "applier"}).get("failed")
    for bdf in EXPECTED_CLEARED["hgx-h200"]:
        pci.write_acs_ctrl(sr, bdf, 0x1D)                 # a reboot: the kernel set its defaults again
    bad = "0000:39:02.0"
    real = pci.write_acs_ctrl

    def refusing(sysroot, bdf, value):
        if bdf == bad:
            raise pci.PciError("ACS control of %s reads back 0x001d after writing 0x0010" % bdf)
        return real(sysroot, bdf, value)

    monkeypatch.setattr(pci, "write_acs_ctrl", refusing)
    more = ["ReqRedir", "CmpltRedir", "EgressCtrl", "SrcValid"]
    res = run_module(pcie_acs, {"persist": "applier", "clear": more})
    assert res["failed"] is True and res["changed"] is True
    assert res["msg"].startswith("clearing ACS failed on bridge(s) %s: %s: ACS control" % (bad, bad))
    by = dict((r["object"], r) for r in res["results"])
    assert by[bad]["result"] == "failed" and by[bad]["changes"] == []
    others = [b for b in EXPECTED_CLEARED["hgx-h200"] if b != bad]
    assert all(by[b]["result"] == "changed" and by[b]["changes"] == [
        {"key": "acs_ctrl", "before": "0x001d", "after": "0x0010"}] for b in others)
    assert res["concerns"]["acs"]["status"] == "error"
    assert [i["result"] for i in res["concerns"]["acs"]["items"] if i["object"] == bad] == ["failed"]
    doc = acs.read_state(sr)
    assert doc["clear"] == ["SrcValid", "ReqRedir", "CmpltRedir", "EgressCtrl"]
    kept = [b for b in doc["bridges"] if "clear" in b]
    assert kept == [{"bdf": bad, "kernel_path": kept[0]["kernel_path"], "clear": acs.DEFAULT_CLEAR}]
    assert sorted(b["bdf"] for b in doc["bridges"]) == EXPECTED_CLEARED["hgx-h200"]

    # the boot-time applier after the next reboot: each bridge gets what it has now
    monkeypatch.setattr(pci, "write_acs_ctrl", real)
    for bdf in EXPECTED_CLEARED["hgx-h200"]:
        pci.write_acs_ctrl(sr, bdf, 0x1D)
    out = acs.apply_state(sr)
    assert out["changed"] and not out["errors"]
    assert pci.acs_info(sr, bad)["ctrl"] == 0x0011
    assert all(pci.acs_info(sr, b)["ctrl"] == 0x0010 for b in others)
