# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_cm: what its own tests left unseen (make mutation's survivors): every refusal's message word for word, the
bounds of a ToS, a DSCP and the wait for the ports, how /proc/mounts is read, the rails a node resolves to, and the
whole result of apply_tos when configfs is loaded, when nothing is to do, and when a device or a port fails."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from consumers import write

RDMA = "sys/kernel/config/rdma_cm"
ATTR = "/sys/kernel/config/rdma_cm/%s/ports/%d/default_roce_tos"


def build(root, devices=None, configfs=True, groups=None, mounts="sysfs /sys sysfs rw 0 0\n"):
    """devices: {ibdev: nports}; groups: {ibdev: {port: tos text}} already created in configfs."""
    root = str(root)
    for ibdev, n in (devices or {"mlx5_0": 1}).items():
        for port in range(1, n + 1):
            write(root, os.path.join("sys/class/infiniband", ibdev, "ports", str(port), "link_layer"), "Ethernet\n")
    if mounts is not None:
        write(root, "proc/mounts", mounts)
    if configfs:
        os.makedirs(os.path.join(root, RDMA))
    for ibdev, ports in (groups or {}).items():
        os.makedirs(os.path.join(root, RDMA, ibdev), exist_ok=True)
        for port, tos in ports.items():
            write(root, os.path.join(RDMA, ibdev, "ports", str(port), "default_roce_tos"), "%s\n" % tos)
    return Sysroot(root)


def kernel(root, devices):
    """The kernel's side of a new configfs group: on a poll, ports/<n>/default_roce_tos (0) of ``devices``."""
    def sleep(_seconds):
        for ibdev in devices:
            for port in os.listdir(os.path.join(str(root), "sys/class/infiniband", ibdev, "ports")):
                attr = os.path.join(str(root), RDMA, ibdev, "ports", port, "default_roce_tos")
                if os.path.isdir(os.path.join(str(root), RDMA, ibdev)) and not os.path.exists(attr):
                    write("/", attr, "0\n")
    return sleep


class Runner(object):
    """modprobe and mount: ``answers`` {tool: (rc, out, err)}; ``create_on`` the tool that makes rdma_cm appear."""

    def __init__(self, root, answers=None, create_on=None):
        self.root, self.answers, self.create_on, self.calls = str(root), answers or {}, create_on, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[0] == self.create_on:
            os.makedirs(os.path.join(self.root, RDMA))
        return self.answers.get(argv[0], (0, "", ""))


def raised(exc, fn, *args, **kwargs):
    with pytest.raises(exc) as e:
        fn(*args, **kwargs)
    return str(e.value)


# ------------------------------------------------------------------------------------------------ validators

def test_tos_and_dscp_bounds_are_accepted():
    assert [rdma_cm.validate_tos(v) for v in (0, 255, "106")] == [0, 255, 106]
    assert [rdma_cm.validate_dscp(v) for v in (0, 63, "26")] == [0, 63, 26]


@pytest.mark.parametrize("fn,value,message", [
    (rdma_cm.validate_tos, 256, "tos must be 0..255 (got 256); e.g. 106 = DSCP 26 << 2 | ECT(0)"),
    (rdma_cm.validate_tos, -1, "tos must be 0..255 (got -1); e.g. 106 = DSCP 26 << 2 | ECT(0)"),
    (rdma_cm.validate_tos, "af31", "tos must be an integer 0..255 (got 'af31')"),
    (rdma_cm.validate_tos, None, "tos must be an integer 0..255 (got None)"),
    (rdma_cm.validate_tos, True, "tos must be an integer 0..255 (got True)"),
    (rdma_cm.validate_tos, 106.0, "tos must be an integer 0..255 (got 106.0)"),
    (rdma_cm.validate_dscp, 64, "expected_dscp must be 0..63 (got 64)"),
    (rdma_cm.validate_dscp, "64", "expected_dscp must be 0..63 (got '64')"),
    (rdma_cm.validate_dscp, "af31", "expected_dscp must be an integer 0..63 (got 'af31')"),
    (rdma_cm.validate_dscp, False, "expected_dscp must be an integer 0..63 (got False)"),
])
def test_validator_messages(fn, value, message):
    assert raised(ValueError, fn, value) == message


DSCP_WARNING = ("tos %s carries DSCP %d but the fabric expects DSCP %d (tos %d, or %d with ECN): RDMA CM traffic will "
                "not land in the lossless priority")
CE_WARNING = "tos %s sets ECN CE (congestion experienced) on every packet; use ECT(0) (| 2)"


@pytest.mark.parametrize("tos,dscp,expected", [
    (96, 26, [DSCP_WARNING % ("96 (DSCP 24, Not-ECT)", 24, 26, 104, 106)]),
    (107, 24, [DSCP_WARNING % ("107 (DSCP 26, CE)", 26, 24, 96, 98), CE_WARNING % "107 (DSCP 26, CE)"]),
    (105, 1, [DSCP_WARNING % ("105 (DSCP 26, ECT(1))", 26, 1, 4, 6)]),
    (107, 26, [CE_WARNING % "107 (DSCP 26, CE)"]),
    (106, 26, []),
])
def test_tos_warnings_word_for_word(tos, dscp, expected):
    assert rdma_cm.tos_warnings(tos, dscp) == expected


def test_tos_warnings_without_an_expected_dscp():
    assert rdma_cm.tos_warnings(96) == []
    assert rdma_cm.tos_warnings(3) == [CE_WARNING % "3 (DSCP 0, CE)"]


# ------------------------------------------------------------------------------------------------ devices and ports

@pytest.mark.parametrize("request_,message", [
    ([("", 1)], "invalid RDMA device name ''"),
    ([(".", 1)], "invalid RDMA device name '.'"),
    ([("..", 1)], "invalid RDMA device name '..'"),
    ([("../x", 1)], "invalid RDMA device name '../x'"),
    ([("mlx5_9", 1)], "RDMA device mlx5_9 does not exist (no /sys/class/infiniband/mlx5_9)"),
    ([("mlx5_2", None)], "RDMA device mlx5_2 has no ports under /sys/class/infiniband/mlx5_2/ports"),
    ([("mlx5_0", "x")], "invalid port 'x' for RDMA device mlx5_0"),
    ([("mlx5_0", [1])], "invalid port [1] for RDMA device mlx5_0"),
    ([("mlx5_0", 1.5)], "invalid port 1.5 for RDMA device mlx5_0"),     # not taken as port 1
    ([("mlx5_0", True)], "invalid port True for RDMA device mlx5_0"),
    ([("mlx5_0", 3)], "RDMA device mlx5_0 has no port 3 (ports: 1, 2)"),
])
def test_validate_devices_ports_messages(tmp_path, request_, message):
    sr = build(tmp_path, {"mlx5_0": 2, "mlx5_1": 1})
    os.makedirs(os.path.join(str(tmp_path), "sys/class/infiniband/mlx5_2/ports"))
    assert raised(rdma_cm.RdmaCmError, rdma_cm.validate_devices_ports, sr, request_) == message


def test_validate_devices_ports_sorts_and_collapses(tmp_path):
    sr = build(tmp_path, {"mlx5_0": 2, "mlx5_1": 1})
    got = rdma_cm.validate_devices_ports(sr, [("mlx5_1", None), ("mlx5_0", "2"), ("mlx5_0", 2), ("mlx5_0", 1)])
    assert got == [("mlx5_0", 1), ("mlx5_0", 2), ("mlx5_1", 1)]


@pytest.mark.parametrize("content,message", [
    (None, "cannot read " + ATTR % ("mlx5_0", 1)),
    ("af31", "unexpected content 'af31' in " + ATTR % ("mlx5_0", 1)),
    ("", "unexpected content '' in " + ATTR % ("mlx5_0", 1)),
])
def test_unreadable_tos_is_named(tmp_path, content, message):
    sr = build(tmp_path, groups={"mlx5_0": {} if content is None else {1: content}})
    assert raised(rdma_cm.RdmaCmError, rdma_cm.current_tos, sr, "mlx5_0", 1) == message


# ------------------------------------------------------------------------------------------------ configfs

@pytest.mark.parametrize("mounts,mounted", [
    ("configfs /sys/kernel/config configfs\n", True),
    ("sysfs /sys sysfs rw 0 0\nconfigfs /sys/kernel/config configfs rw,relatime 0 0\n", True),
    ("none /mnt/cfg configfs rw 0 0\n", False),
    ("configfs /sys/kernel/config tmpfs rw 0 0\n", False),
    ("/sys/kernel/config configfs\nconfigfs\n\n", False),
    ("", False),
    (None, False),
])
def test_configfs_mounted_reads_proc_mounts(tmp_path, mounts, mounted):
    assert rdma_cm._configfs_mounted(build(tmp_path, configfs=False, mounts=mounts)) is mounted


MODPROBE = ["modprobe", "-a", "configfs", "rdma_cm"]
STILL_MISSING = ("/sys/kernel/config/rdma_cm still missing after loading rdma_cm and mounting configfs: the "
                 "kernel may be built without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS")


@pytest.mark.parametrize("mounts,answers,message", [
    ("", {"modprobe": (1, "", "modprobe: FATAL: Module rdma_cm not found\n")},
     "modprobe -a configfs rdma_cm failed (rc=1): modprobe: FATAL: Module rdma_cm not found"),
    ("", {"modprobe": (2, " said on stdout \n", "")}, "modprobe -a configfs rdma_cm failed (rc=2): said on stdout"),
    ("", {"mount": (32, "", "mount: permission denied\n")},
     "mounting configfs on /sys/kernel/config failed (rc=32): mount: permission denied"),
    ("", {"mount": (1, "mount: stdout\n", "")}, "mounting configfs on /sys/kernel/config failed (rc=1): mount: stdout"),
    ("", {}, STILL_MISSING),
    ("configfs /sys/kernel/config configfs\n", {"mount": (1, "", "not called")}, STILL_MISSING),
])
def test_ensure_configfs_failures_word_for_word(tmp_path, mounts, answers, message):
    sr = build(tmp_path, configfs=False, mounts=mounts)
    run = Runner(tmp_path, answers)
    assert raised(rdma_cm.RdmaCmError, rdma_cm.ensure_configfs, sr, False, run) == message
    mount = ["mount", "-t", "configfs", "none", os.path.join(str(tmp_path), "sys/kernel/config")]
    assert run.calls == [MODPROBE] + ([mount] if "modprobe" not in answers and not mounts else [])


def test_ensure_configfs_without_a_runner(tmp_path):
    sr = build(tmp_path, configfs=False)
    assert raised(rdma_cm.RdmaCmError, rdma_cm.ensure_configfs, sr, False) == (
        "/sys/kernel/config/rdma_cm is missing and no command runner was given to load configfs/rdma_cm")


# ------------------------------------------------------------------------------------------------ waiting for ports

def ticking(start=10.0):
    now = [start - 1.0]

    def clock():
        now[0] += 1.0
        return now[0]
    return clock


def test_wait_gives_up_when_the_deadline_is_reached_not_passed(tmp_path):
    sr = build(tmp_path, {"mlx5_0": 2}, groups={"mlx5_0": {}})
    polls = []
    # the clock reads 10 for the deadline (10 + 1) and 11 at the first check: the deadline is reached, no poll
    assert raised(rdma_cm.RdmaCmError, rdma_cm.wait_for_ports, sr, "mlx5_0", [1, 2], timeout=1.0,
                  sleep=polls.append, clock=ticking()) == (
        "port(s) 1, 2 did not appear under /sys/kernel/config/rdma_cm/mlx5_0/ports/ within 1.0 s: is mlx5_0 a "
        "registered RDMA device (rdma link show)?")
    assert polls == []


def test_wait_names_only_the_missing_ports(tmp_path):
    sr = build(tmp_path, {"mlx5_0": 3}, groups={"mlx5_0": {2: 0}})
    polls = []
    assert raised(rdma_cm.RdmaCmError, rdma_cm.wait_for_ports, sr, "mlx5_0", [1, 2, 3], timeout=2.0,
                  sleep=polls.append, clock=ticking()) == (
        "port(s) 1, 3 did not appear under /sys/kernel/config/rdma_cm/mlx5_0/ports/ within 2.0 s: is mlx5_0 a "
        "registered RDMA device (rdma link show)?")
    assert polls == [rdma_cm.PORTS_POLL_S]
    assert rdma_cm.wait_for_ports(sr, "mlx5_0", [2], timeout=0.0, sleep=polls.append, clock=ticking()) is None


# ------------------------------------------------------------------------------------------------ rails

@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx"))
    build_tree(root, "hgx-h200")
    return Sysroot(root)


def test_rail_devices_in_the_order_given(node):
    assert rdma_cm.rail_devices(node, ["ens2np0", "ens1np0"]) == [("ens2np0", "mlx5_1", 1), ("ens1np0", "mlx5_0", 1)]
    assert rdma_cm.rail_devices(node, ["ens8np0", "ens1np0"], with_gid_index=True) == [
        ("ens8np0", "mlx5_7", 1, 3), ("ens1np0", "mlx5_0", 1, 3)]


@pytest.mark.parametrize("rails,message", [
    ([], "rails must list at least one network interface"),
    (None, "rails must list at least one network interface"),
    (["ens1np0", "ens2np0", "ens1np0"], "rail ens1np0 is listed twice"),
    (["ens1np0", "ens9np0"], "rail ens9np0 does not exist (no /sys/class/net/ens9np0)"),
    (["a/b"], "interface name 'a/b' is not a legal Linux interface name"),
    (["ens1np0", "eno8303"], "rail eno8303 has no RDMA device behind it (no /sys/class/infiniband/*/ports/* names "
                             "it): is it a RoCE port and is mlx5_ib loaded?"),
])
def test_rail_devices_refusals(node, rails, message):
    assert raised(rdma_cm.RailError, rdma_cm.rail_devices, node, rails) == message


# ------------------------------------------------------------------------------------------------ apply_tos


def port(device, number, before, after, source, error=None):
    return {"device": device, "port": number, "before": before, "after": after, "error": error, "source": source}


def drift(obj, current, desired=106):
    return {"concern": "rdma_cm", "object": obj, "key": "default_roce_tos", "current": current, "desired": desired}


def outcome(obj, result, before=None, after=None, error=None):
    changes = [] if before == after else [{"key": "default_roce_tos", "before": before, "after": after}]
    return {"object": obj, "result": result, "error": error, "changes": changes}


WHOLE_RESULTS = [
    ("configfs loaded, group created, value set", False, {"configfs": False}, {
        "changed": True, "configfs": "loaded", "ports": [port("mlx5_0", 1, 0, 106, rdma_cm.SOURCE_CONFIGFS)],
        "drift": [drift("mlx5_0/1", 0)],
        "actions": ["loaded configfs/rdma_cm", "created /sys/kernel/config/rdma_cm/mlx5_0",
                    "mlx5_0/1 default_roce_tos 0 -> 106"],
        "results": [outcome("mlx5_0/1", "changed", 0, 106)], "errors": []}),
    ("check mode, configfs not loaded", True, {"configfs": False}, {
        "changed": True, "configfs": "would load", "ports": [port("mlx5_0", 1, 0, 106, rdma_cm.SOURCE_NOT_LOADED)],
        "drift": [drift("mlx5_0/1", 0)], "actions": ["would load configfs/rdma_cm"],
        "results": [outcome("mlx5_0/1", "changed", 0, 106)], "errors": []}),
    ("check mode, no group", True, {}, {
        "changed": True, "configfs": "present", "ports": [port("mlx5_0", 1, 0, 106, rdma_cm.SOURCE_NO_GROUP)],
        "drift": [drift("mlx5_0/1", 0)], "actions": [],
        "results": [outcome("mlx5_0/1", "changed", 0, 106)], "errors": []}),
    ("already set", False, {"groups": {"mlx5_0": {1: 106}}}, {
        "changed": False, "configfs": "present", "ports": [port("mlx5_0", 1, 106, 106, rdma_cm.SOURCE_CONFIGFS)],
        "drift": [], "actions": [], "results": [outcome("mlx5_0/1", "unchanged")], "errors": []}),
    ("check mode, already set", True, {"groups": {"mlx5_0": {1: 106}}}, {
        "changed": False, "configfs": "present", "ports": [port("mlx5_0", 1, 106, 106, rdma_cm.SOURCE_CONFIGFS)],
        "drift": [], "actions": [], "results": [outcome("mlx5_0/1", "unchanged")], "errors": []}),
]


@pytest.mark.parametrize("check,tree,expected", [c[1:] for c in WHOLE_RESULTS], ids=[c[0] for c in WHOLE_RESULTS])
def test_apply_tos_whole_result(tmp_path, check, tree, expected):
    sr = build(tmp_path, **tree)
    run = Runner(tmp_path, create_on="modprobe")
    assert rdma_cm.apply_tos(sr, [("mlx5_0", 1)], 106, check, run=run, sleep=kernel(tmp_path, ["mlx5_0"])) == expected
    assert run.calls == ([MODPROBE] if expected["configfs"] == "loaded" else [])


def test_a_device_whose_ports_never_appear_fails_alone(tmp_path):
    """mlx5_0's new group never shows its ports (the wait's own timeout, 0 s, is what the message says); mlx5_1,
    after it, is set all the same."""
    sr = build(tmp_path, {"mlx5_0": 2, "mlx5_1": 1}, groups={"mlx5_1": {1: 0}})
    error = ("port(s) 1, 2 did not appear under /sys/kernel/config/rdma_cm/mlx5_0/ports/ within 0.0 s: is mlx5_0 a "
             "registered RDMA device (rdma link show)?")
    errors = ["mlx5_0/1: " + error, "mlx5_0/2: " + error]
    res = rdma_cm.apply_tos(sr, [("mlx5_1", 1), ("mlx5_0", None)], 106, False, wait_timeout=0, sleep=lambda _s: None)
    assert res == {
        "changed": True, "configfs": "present",
        "ports": [port("mlx5_0", 1, None, None, None, errors[0]), port("mlx5_0", 2, None, None, None, errors[1]),
                  port("mlx5_1", 1, 0, 106, rdma_cm.SOURCE_CONFIGFS)],
        "drift": [drift("mlx5_1/1", 0)],
        "actions": ["created /sys/kernel/config/rdma_cm/mlx5_0", "mlx5_1/1 default_roce_tos 0 -> 106"],
        "results": [outcome("mlx5_0/1", "failed", error=errors[0]), outcome("mlx5_0/2", "failed", error=errors[1]),
                    outcome("mlx5_1/1", "changed", 0, 106)],
        "errors": errors}


class SkewedSysroot(Sysroot):
    """A write to port 1 of mlx5_0 lands as 104 (the device took another value than the one written)."""

    def write_attr(self, p, value):
        Sysroot.write_attr(self, p, "104\n" if p == ATTR % ("mlx5_0", 1) else value)


def test_a_port_that_reads_back_another_value_fails_alone(tmp_path):
    """Port 1 changed (0 -> 104) but not to the ToS wanted: failed, with what did change; port 2 after it is set."""
    build(tmp_path, {"mlx5_0": 2}, groups={"mlx5_0": {1: 0, 2: 0}})
    sr = SkewedSysroot(str(tmp_path))
    error = "mlx5_0/1: wrote 106 to %s but it reads back 104" % (ATTR % ("mlx5_0", 1))
    assert rdma_cm.apply_tos(sr, [("mlx5_0", None)], 106, False) == {
        "changed": True, "configfs": "present",
        "ports": [port("mlx5_0", 1, 0, 104, rdma_cm.SOURCE_CONFIGFS, error),
                  port("mlx5_0", 2, 0, 106, rdma_cm.SOURCE_CONFIGFS)],
        "drift": [drift("mlx5_0/1", 0), drift("mlx5_0/2", 0)],
        "actions": ["mlx5_0/2 default_roce_tos 0 -> 106"],
        "results": [outcome("mlx5_0/1", "failed", 0, 104, error), outcome("mlx5_0/2", "changed", 0, 106)],
        "errors": [error]}


def test_a_failed_port_without_an_after_value_lists_no_change():
    entry = {"device": "mlx5_0", "port": 1, "before": 0, "after": None}
    assert rdma_cm._port_result(entry, 106, "mlx5_0/1: boom") == outcome(
        "mlx5_0/1", "failed", error="mlx5_0/1: boom")


class LoadedMeanwhile(Sysroot):
    """rdma_cm is missing when check mode looks for it and loaded (with a group at 106) right after."""

    def __init__(self, root):
        Sysroot.__init__(self, root)
        self.looked = False

    def isdir(self, p):
        if p == rdma_cm.RDMA_CM and not self.looked:
            self.looked = True
            return False
        return Sysroot.isdir(self, p)


def test_check_mode_that_saw_no_configfs_reports_the_unloaded_state(tmp_path):
    """Once configfs 'would load', every port reads as the default of an unloaded rdma_cm, whatever appears later."""
    build(tmp_path, groups={"mlx5_0": {1: 106}})
    res = rdma_cm.apply_tos(LoadedMeanwhile(str(tmp_path)), [("mlx5_0", 1)], 106, True)
    assert res["configfs"] == "would load" and res["drift"] == [drift("mlx5_0/1", 0)]
    assert res["ports"] == [port("mlx5_0", 1, 0, 106, rdma_cm.SOURCE_NOT_LOADED)]
