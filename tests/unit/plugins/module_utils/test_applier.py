# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time applier against a simulated HGX node tree and the dcb emulator."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu

from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RDMA = "sys/kernel/config/rdma_cm"
NVFS = "sys/module/nvidia_fs/parameters/rw_stats_enabled"


class Clock(object):
    """Fake time: sleeping advances it, and ``on_sleep`` plays the kernel/udev meanwhile."""

    def __init__(self, on_sleep=None):
        self.now = 0.0
        self.on_sleep = on_sleep
        self.sleeps = 0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps += 1
        self.now += seconds
        if self.on_sleep:
            self.on_sleep()


class Runner(object):
    """Commands of the node: dcb through the emulator; nothing else is expected."""

    def __init__(self, root):
        self.root = root
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[0] == "dcb":
            return dcb_emu.run(argv[1:], root=self.root)
        return 127, "", "%s: not available in this test" % argv[0]

    def dcb_writes(self):
        return [c for c in self.calls if c[0] == "dcb" and len(c) > 2 and c[2] in ("add", "del", "replace", "set")]


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    dcb_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"])

    def kernel_sleep(_s):
        """The kernel creates ports/<n>/ of a new configfs group (here on the first poll)."""
        populate_groups(root)

    monkeypatch.setattr(rdma_cm, "_sleep", kernel_sleep)
    return root, manifest


def populate_groups(root):
    base = os.path.join(root, RDMA)
    for ibdev in os.listdir(base):
        for port in os.listdir(os.path.join(root, "sys/class/infiniband", ibdev, "ports")):
            attr = os.path.join(base, ibdev, "ports", port, "default_roce_tos")
            if not os.path.exists(attr):
                os.makedirs(os.path.dirname(attr))
                with open(attr, "w") as f:
                    f.write("0\n")


def remove(path):
    """sysfs class entries are symlinks, module directories are directories."""
    if os.path.islink(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


def tos_of(root, ibdev, port=1):
    try:
        with open(os.path.join(root, RDMA, ibdev, "ports", str(port), "default_roce_tos")) as f:
            return int(f.read())
    except IOError:
        return None


def reregister(root, ibdev):
    """What a device registration does: ToS back to 0 (the configfs group keeps existing)."""
    with open(os.path.join(root, RDMA, ibdev, "ports", "1", "default_roce_tos"), "w") as f:
        f.write("0\n")


def record_all(root, manifest, tos_section=None):
    sr = Sysroot(root)
    rails = [r["netdev"] for r in manifest["rails"]]
    state.record(sr, "dcb", {"rails": rails, "pfc_priorities": [3]}, False)
    state.record(sr, "rdma_cm", tos_section or {"rails": rails, "tos": 106}, False)
    return sr, rails


def apply(sr, run, **kw):
    lines = []
    clock = kw.pop("clock", None) or Clock()
    rc, summary = applier.run_applier(sr, run, log=lines.append, sleep=clock.sleep, clock=clock, **kw)
    return rc, summary, lines


def test_full_run_applies_all_then_idempotent(node):
    root, manifest = node
    sr, rails = record_all(root, manifest)
    run = Runner(root)
    rc, summary, lines = apply(sr, run)
    assert rc == 0, lines
    assert summary["errors"] == [] and summary["changed"] is True
    assert all(tos_of(root, r["ibdev"]) == 106 for r in manifest["rails"])
    for rail in rails:
        st = dcb_emu.state(root, rail)
        assert st["trust"] == "dscp" and dcb_emu.pfc_enabled(st) == [3] and dcb_emu.dscp_priority(st, 26) == 3
    # one line per change, journald-friendly
    assert "rdma_cm: mlx5_0/1 default_roce_tos 0 -> 106" in lines
    assert len([ln for ln in lines if ln.startswith("rdma_cm: ")]) == 8
    assert any(ln.startswith("dcb: ens1np0 ") for ln in lines)
    assert summary["concerns"]["rdma_cm"]["ports"][0] == "mlx5_0/1"
    # second run: nothing changed, no dcb write, no log line
    run.calls = []
    rc, summary, lines = apply(sr, run)
    assert rc == 0 and summary["changed"] is False and summary["changes"] == [] and lines == []
    assert run.dcb_writes() == []


def test_device_run_touches_only_that_device(node):
    root, manifest = node
    sr, rails = record_all(root, manifest)
    assert apply(sr, Runner(root))[0] == 0
    # driver reload of mlx5_3: its netdev's DCB and its ToS are back to the boot defaults
    dev = manifest["rails"][3]
    reregister(root, dev["ibdev"])
    dcb_emu.reset_device(root, dev["netdev"])
    reregister(root, "mlx5_5")  # another device also drifted: a device run must leave it alone
    run = Runner(root)
    rc, summary, lines = apply(sr, run, only_device=dev["ibdev"])
    assert rc == 0, lines
    assert tos_of(root, dev["ibdev"]) == 106
    assert tos_of(root, "mlx5_5") == 0
    assert dcb_emu.pfc_enabled(dcb_emu.state(root, dev["netdev"])) == [3]
    assert set(c[c.index("dev") + 1] for c in run.dcb_writes()) == {dev["netdev"]}
    assert lines and all(dev["ibdev"] in ln or dev["netdev"] in ln for ln in lines)
    assert summary["device"] == dev["ibdev"]


def test_device_run_with_device_list(node):
    root, manifest = node
    sr = Sysroot(root)
    state.record(sr, "rdma_cm", {"devices": ["mlx5_0", "mlx5_1"], "tos": 104}, False)
    rc, _s, lines = apply(sr, Runner(root), only_device="mlx5_1")
    assert rc == 0 and tos_of(root, "mlx5_1") == 104 and tos_of(root, "mlx5_0") is None
    # a device that is not in the recorded set: skipped, not an error
    rc, summary, lines = apply(sr, Runner(root), only_device="mlx5_4")
    assert rc == 0 and summary["changes"] == [] and tos_of(root, "mlx5_4") is None
    assert any("mlx5_4 is not in the recorded ToS set" in s for s in summary["skipped"])


def test_check_mode_changes_nothing(node):
    root, manifest = node
    sr, rails = record_all(root, manifest)
    with open(os.path.join(root, NVFS), "w") as f:
        f.write("0\n")
    state.record(sr, "nvidia_fs", {"rw_stats_enabled": 1}, False)
    run = Runner(root)
    before = dict((r, json.dumps(dcb_emu.state(root, r), sort_keys=True)) for r in rails)
    rc, summary, lines = apply(sr, run, check_mode=True)
    assert rc == 0 and summary["changed"] is True
    assert all(ln.startswith("would change ") for ln in lines)
    assert "would change nvidia_fs: rw_stats_enabled 0 -> 1" in lines
    assert os.listdir(os.path.join(root, RDMA)) == []
    assert run.dcb_writes() == []
    assert dict((r, json.dumps(dcb_emu.state(root, r), sort_keys=True)) for r in rails) == before
    with open(os.path.join(root, NVFS)) as f:
        assert f.read().strip() == "0"


def test_missing_device_fails_after_bounded_wait(node):
    root, manifest = node
    sr, rails = record_all(root, manifest)
    # mlx5_7 / ens8np0 never appear
    remove(os.path.join(root, "sys/class/infiniband/mlx5_7"))
    os.unlink(os.path.join(root, "sys/class/net/ens8np0"))
    clock = Clock()
    rc, summary, lines = apply(sr, Runner(root), wait_timeout=5.0, clock=clock)
    assert rc == 1
    assert 5.0 <= clock.now < 6.0
    assert any("error: dcb: rail ens8np0 did not appear" in e for e in summary["errors"])
    assert any("error: rdma_cm: rail ens8np0 has no registered RDMA device" in e for e in summary["errors"])
    # everything else was applied
    assert all(tos_of(root, "mlx5_%d" % i) == 106 for i in range(7))


def test_late_device_is_waited_for(node):
    root, manifest = node
    sr, rails = record_all(root, manifest)
    ib = os.path.join(root, "sys/class/infiniband/mlx5_2")
    hidden = os.path.join(root, "sys/class/hidden/mlx5_2")  # same depth: a relative link stays valid
    os.makedirs(os.path.dirname(hidden))
    os.rename(ib, hidden)

    def appear():
        if clock.sleeps == 3 and os.path.exists(hidden):
            os.rename(hidden, ib)

    clock = Clock(appear)
    rc, summary, lines = apply(sr, Runner(root), clock=clock)
    assert rc == 0, summary["errors"]
    assert tos_of(root, "mlx5_2") == 106 and clock.sleeps == 3


def test_device_run_for_vanished_device_fails(node):
    root, manifest = node
    sr, _r = record_all(root, manifest)
    remove(os.path.join(root, "sys/class/infiniband/mlx5_0"))
    rc, summary, _l = apply(sr, Runner(root), only_device="mlx5_0")
    assert rc == 1 and "RDMA device mlx5_0 does not exist" in summary["errors"][0]


def test_nothing_recorded(node):
    root, _m = node
    rc, summary, _l = apply(Sysroot(root), Runner(root))
    assert rc == 0 and summary["changes"] == [] and "nothing recorded" in summary["skipped"][0]


def test_corrupt_state_exits_2(node):
    root, _m = node
    p = os.path.join(root, "etc/gpufabric/state.json")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("{")
    rc, summary, lines = apply(Sysroot(root), Runner(root))
    assert rc == 2 and "not valid JSON" in summary["errors"][0] and lines[0].startswith("error: state:")


def test_deeply_nested_state_exits_2(node):
    root, _m = node
    p = os.path.join(root, "etc/gpufabric/state.json")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("[" * 100000 + "]" * 100000)
    rc, summary, lines = apply(Sysroot(root), Runner(root))
    assert rc == 2 and "nested too deeply" in summary["errors"][0] and lines[0].startswith("error: state:")


def test_dcb_failure_is_reported(node):
    root, manifest = node
    sr, _r = record_all(root, manifest)

    def failing(argv):
        if argv[0] == "dcb" and len(argv) > 2 and argv[2] in ("add", "set", "replace"):
            return 2, "", "RTNETLINK answers: Operation not supported"
        return Runner(root)(argv)

    rc, summary, _l = apply(sr, failing)
    assert rc == 1 and any(e.startswith("error: dcb:") and "Operation not supported" in e
                           for e in summary["errors"])
    # ToS is still applied: one concern failing does not stop the others
    assert tos_of(root, "mlx5_0") == 106


NVFS_CASES = [
    # id, file content (None: module not loaded), recorded, rc, content after, change line
    ("set", "0\n", 1, 0, "1", "nvidia_fs: rw_stats_enabled 0 -> 1"),
    ("already", "1\n", 1, 0, "1", None),
    ("not loaded", None, 1, 0, None, None),
    ("garbage", "x\n", 0, 1, "x", None),
]


@pytest.mark.parametrize("content,recorded,rc,after,line", [c[1:] for c in NVFS_CASES],
                         ids=[c[0] for c in NVFS_CASES])
def test_nvidia_fs(node, content, recorded, rc, after, line):
    root, _m = node
    path = os.path.join(root, NVFS)
    if content is None:
        remove(os.path.join(root, "sys/module/nvidia_fs"))
    else:
        with open(path, "w") as f:
            f.write(content)
    sr = Sysroot(root)
    state.record(sr, "nvidia_fs", {"rw_stats_enabled": recorded}, False)
    got_rc, summary, lines = apply(sr, Runner(root))
    assert got_rc == rc
    if after is not None:
        with open(path) as f:
            assert f.read().strip() == after
    assert lines.count(line) == 1 if line else not summary["changes"]


def _acs_bridge(root):
    """The first bridge with an ACS capability whose redirect bits are set (the tree sets 0x1d)."""
    sr = Sysroot(root)
    for bdf in sr.listdir("/sys/bus/pci/devices"):
        info = pci.acs_info(sr, bdf)
        if info["present"] and info["ctrl"] & 0x0C:
            return bdf, pci.kernel_path(sr, bdf), info["ctrl"]
    pytest.skip("the simulated tree has no bridge with ACS redirect bits set")


def test_acs_from_state_and_fallback(node):
    root, _m = node
    sr = Sysroot(root)
    bdf, kpath, ctrl = _acs_bridge(root)
    state.record(sr, "acs", {"bridges": [{"kernel_path": kpath, "bdf": bdf}], "clear": ["ReqRedir", "CmpltRedir"]},
                 False)
    rc, summary, lines = apply(sr, Runner(root))
    assert rc == 0, summary["errors"]
    assert pci.acs_info(sr, bdf)["ctrl"] == ctrl & ~0x0C
    assert len([ln for ln in lines if ln.startswith("acs: %s acs_ctrl" % bdf)]) == 1
    assert apply(sr, Runner(root))[1]["changes"] == []
    # without a state.json section, the pcie_acs module's own acs.json is applied
    state.forget(sr, "acs", False)
    pci.write_acs_ctrl(sr, bdf, ctrl)
    doc = {"schema": "gpufabric.acs/v1", "clear": ["EgressCtrl", "ReqRedir"],
           "bridges": [{"bdf": bdf, "kernel_path": kpath}]}
    sr.write_file_atomic("/etc/gpufabric/acs.json", json.dumps(doc))
    rc, summary, lines = apply(sr, Runner(root))
    assert rc == 0 and pci.acs_info(sr, bdf)["ctrl"] == ctrl & ~0x04 & ~0x20


class FakeIPRoute(object):
    """Enough of pyroute2.IPRoute for routing.apply: links, addresses, routes, rules in memory."""

    class Msg(dict):
        def __init__(self, attrs, **fields):
            dict.__init__(self, **fields)
            self.attrs = attrs

        def get_attr(self, name):
            return self.attrs.get(name)

    def __init__(self, addrs):
        self.links = dict((name, i + 2) for i, name in enumerate(sorted(addrs)))
        self.addrs = addrs
        self.routes = []
        self.rules = []
        self.closed = False

    def get_links(self):
        return [self.Msg({"IFLA_IFNAME": n}, index=i) for n, i in self.links.items()]

    def get_addr(self, index=None, family=None):
        name = [n for n, i in self.links.items() if i == index][0]
        a, plen = self.addrs[name]
        return [self.Msg({"IFA_ADDRESS": a, "IFA_FLAGS": 0}, prefixlen=plen, flags=0)] if a else []

    def get_routes(self, family=None):
        return [self.Msg({"RTA_TABLE": r["table"], "RTA_DST": r["dst"].split("/")[0], "RTA_OIF": r.get("oif"),
                          "RTA_GATEWAY": r.get("gateway"), "RTA_PREFSRC": r.get("prefsrc")},
                         table=252, dst_len=int(r["dst"].split("/")[1]), scope=r["scope"]) for r in self.routes]

    def get_rules(self, family=None):
        return [self.Msg({"FRA_TABLE": r["table"], "FRA_SRC": r["src"], "FRA_PRIORITY": r["priority"]},
                         table=252, src_len=r["src_len"], action=1) for r in self.rules]

    def route(self, op, **kw):
        if op == "add":
            self.routes.append(kw)

    def rule(self, op, **kw):
        if op == "add":
            self.rules.append(kw)

    def close(self):
        self.closed = True


def test_routing_from_routing_json(node):
    root, _m = node
    sr = Sysroot(root)
    doc = {"version": 1, "table_base": 100, "rule_priority": 1000,
           "rails": [{"rail": "ens1np0", "table": 100, "address": "10.100.0.1", "prefixlen": 16, "gateway": None},
                     {"rail": "ens2np0", "table": 101, "address": "10.100.1.1", "prefixlen": 16, "gateway": None}]}
    sr.write_file_atomic("/etc/gpufabric/routing.json", json.dumps(doc))
    state.record(sr, "routing", {}, False)
    ipr = FakeIPRoute({"ens1np0": ("10.100.0.1", 16), "ens2np0": ("10.100.1.1", 16)})
    rc, summary, lines = apply(sr, Runner(root), ipr_factory=lambda: ipr)
    assert rc == 0, summary["errors"]
    assert len(ipr.routes) == 2 and len(ipr.rules) == 2 and ipr.closed
    assert len([ln for ln in lines if ln.startswith("routing: ")]) == 4
    rc, summary, lines = apply(sr, Runner(root), ipr_factory=lambda: ipr)
    assert rc == 0 and lines == []


def test_routing_address_missing_fails_after_wait(node):
    root, _m = node
    sr = Sysroot(root)
    doc = {"version": 1, "table_base": 100, "rule_priority": 1000,
           "rails": [{"rail": "ens1np0", "table": 100, "address": "10.100.0.1", "prefixlen": 16, "gateway": None}]}
    sr.write_file_atomic("/etc/gpufabric/routing.json", json.dumps(doc))
    ipr = FakeIPRoute({"ens1np0": (None, 0)})
    clock = Clock()
    rc, summary, _l = apply(sr, Runner(root), ipr_factory=lambda: ipr, wait_timeout=2.0, clock=clock)
    assert rc == 1 and "rail ens1np0 has no IPv4 address" in summary["errors"][0]
    assert clock.now >= 2.0 and ipr.routes == []


def test_cli_json_and_exit_code(node, monkeypatch, capsys):
    root, manifest = node
    record_all(root, manifest, {"devices": ["mlx5_0"], "tos": 106})
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    bindir = os.path.join(os.path.dirname(root), "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "dcb"), "w") as f:
        f.write("#!/bin/sh\nexit 3\n")
    os.chmod(os.path.join(bindir, "dcb"), 0o755)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ["PATH"])
    rc = applier.main(["--check", "--json", "--wait", "0"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "error: dcb:" in err
    summary = json.loads(out[out.index("{"):])
    assert summary["check_mode"] is True and summary["errors"]
    assert "would change rdma_cm: mlx5_0/1 default_roce_tos 0 -> 106" in out
    assert "gpufabric-apply (all recorded state, check mode): 1 change(s), 1 error(s)" in out
