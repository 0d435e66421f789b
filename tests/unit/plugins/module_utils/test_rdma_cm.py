# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RDMA = "sys/kernel/config/rdma_cm"


def _w(path, text):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "w") as f:
        f.write(text)


def build(root, devices=None, configfs=True, groups=None):
    """devices: {ibdev: nports}; groups: {ibdev: {port: tos}} already created in configfs."""
    devices = {"mlx5_0": 1, "mlx5_1": 1} if devices is None else devices
    for ibdev, n in devices.items():
        for port in range(1, n + 1):
            _w(os.path.join(root, "sys/class/infiniband", ibdev, "ports", str(port), "link_layer"), "Ethernet\n")
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    _w(os.path.join(root, "proc/mounts"), "sysfs /sys sysfs rw 0 0\n")
    if configfs:
        os.makedirs(os.path.join(root, RDMA))
    for ibdev, ports in (groups or {}).items():
        for port, tos in ports.items():
            _w(os.path.join(root, RDMA, ibdev, "ports", str(port), "default_roce_tos"), "%d\n" % tos)
    return Sysroot(str(root))


class Kernel(object):
    """Plays the kernel: on each poll (the wait's sleep) it populates ports/ of new configfs groups."""

    def __init__(self, root, working=True):
        self.root = str(root)
        self.working = working
        self.polls = 0

    def sleep(self, _seconds):
        self.polls += 1
        if not self.working:
            return
        base = os.path.join(self.root, RDMA)
        for ibdev in os.listdir(base):
            ports_dir = os.path.join(self.root, "sys/class/infiniband", ibdev, "ports")
            for port in os.listdir(ports_dir):
                attr = os.path.join(base, ibdev, "ports", port, "default_roce_tos")
                if not os.path.exists(attr):
                    _w(attr, "0\n")


def read_tos(root, ibdev, port):
    with open(os.path.join(str(root), RDMA, ibdev, "ports", str(port), "default_roce_tos")) as f:
        return int(f.read())


APPLY_CASES = [
    # id, devices, groups, request, tos, check, changed, befores, afters-on-disk (None: no group)
    ("fresh groups are created and set", {"mlx5_0": 1, "mlx5_1": 1}, {},
     [("mlx5_0", 1), ("mlx5_1", 1)], 106, False, True, [0, 0], {"mlx5_0": 106, "mlx5_1": 106}),
    ("already set: no change", {"mlx5_0": 1}, {"mlx5_0": {1: 106}},
     [("mlx5_0", 1)], 106, False, False, [106], {"mlx5_0": 106}),
    ("existing group with reset value", {"mlx5_0": 1}, {"mlx5_0": {1: 0}},
     [("mlx5_0", 1)], 104, False, True, [0], {"mlx5_0": 104}),
    ("check mode, no group: nothing created, kernel default read", {"mlx5_0": 1}, {},
     [("mlx5_0", 1)], 106, True, True, [0], {"mlx5_0": None}),
    ("check mode, no group, ToS 0 wanted: nothing to do", {"mlx5_0": 1}, {},
     [("mlx5_0", 1)], 0, True, False, [0], {"mlx5_0": None}),
    ("no group, ToS 0 wanted: group created, not a change", {"mlx5_0": 1}, {},
     [("mlx5_0", 1)], 0, False, False, [0], {"mlx5_0": 0}),
    ("check mode, group at 0: nothing written", {"mlx5_0": 1}, {"mlx5_0": {1: 0}},
     [("mlx5_0", 1)], 106, True, True, [0], {"mlx5_0": 0}),
    ("port None means every port", {"mlx5_0": 2}, {},
     [("mlx5_0", None)], 106, False, True, [0, 0], {"mlx5_0": 106}),
    ("duplicates collapse", {"mlx5_0": 1}, {"mlx5_0": {1: 106}},
     [("mlx5_0", 1), ("mlx5_0", None)], 106, False, False, [106], {"mlx5_0": 106}),
]


@pytest.mark.parametrize("case", APPLY_CASES, ids=[c[0] for c in APPLY_CASES])
def test_apply_tos(tmp_path, case):
    _id, devices, groups, request, tos, check, changed, befores, disk = case
    sr = build(tmp_path, devices, groups=groups)
    kernel = Kernel(tmp_path)
    res = rdma_cm.apply_tos(sr, request, tos, check, sleep=kernel.sleep)
    assert res["changed"] is changed
    assert [p["before"] for p in res["ports"]] == befores
    assert all(p["after"] == tos for p in res["ports"])
    assert res["configfs"] == "present"
    expected_drift = [{"concern": "rdma_cm", "object": "%s/%d" % (p["device"], p["port"]),
                       "key": "default_roce_tos", "current": p["before"], "desired": tos}
                      for p in res["ports"] if p["before"] != tos]
    assert res["drift"] == expected_drift
    for ibdev, want in disk.items():
        group = os.path.join(str(tmp_path), RDMA, ibdev)
        if want is None:
            assert not os.path.exists(group)
            continue
        for port in range(1, devices[ibdev] + 1):
            assert read_tos(tmp_path, ibdev, port) == want


@pytest.mark.parametrize("case", APPLY_CASES, ids=[c[0] for c in APPLY_CASES])
def test_check_mode_predicts_the_real_run(tmp_path, case):
    """Check mode on a copy of the node gives the real run's changed, drift, befores and results."""
    _id, devices, groups, request, tos, _check, _changed, _befores, _disk = case
    check_root, real_root = tmp_path / "check", tmp_path / "real"
    outcomes = []
    for root, check in ((check_root, True), (real_root, False)):
        sr = build(root, devices, groups=groups)
        outcomes.append(rdma_cm.apply_tos(sr, request, tos, check, sleep=Kernel(root).sleep))
    predicted, real = outcomes
    assert predicted["changed"] is real["changed"]
    assert predicted["drift"] == real["drift"]
    assert [p["before"] for p in predicted["ports"]] == [p["before"] for p in real["ports"]]
    assert [r["result"] for r in predicted["results"]] == [r["result"] for r in real["results"]]


@pytest.mark.parametrize("configfs,groups,want", [
    (True, {"mlx5_0": {1: 106}}, (106, rdma_cm.SOURCE_CONFIGFS)),
    (True, {}, (0, rdma_cm.SOURCE_NO_GROUP)),
    (False, {}, (0, rdma_cm.SOURCE_NOT_LOADED)),
])
def test_current_tos(tmp_path, configfs, groups, want):
    sr = build(tmp_path, {"mlx5_0": 1}, configfs=configfs, groups=groups)
    assert rdma_cm.current_tos(sr, "mlx5_0", 1) == want


def test_current_tos_group_without_port_attribute(tmp_path):
    sr = build(tmp_path, {"mlx5_0": 1})
    os.makedirs(os.path.join(str(tmp_path), RDMA, "mlx5_0"))
    with pytest.raises(rdma_cm.RdmaCmError, match="cannot read"):
        rdma_cm.current_tos(sr, "mlx5_0", 1)


def test_removed_group_value_is_read_when_the_group_is_recreated(tmp_path):
    """The kernel keeps a value after rmdir: the real run reads it from the recreated group, not the default."""
    sr = build(tmp_path, {"mlx5_0": 1})

    def sleep(_s):
        _w(os.path.join(str(tmp_path), RDMA, "mlx5_0", "ports", "1", "default_roce_tos"), "106\n")

    res = rdma_cm.apply_tos(sr, [("mlx5_0", 1)], 106, False, sleep=sleep)
    assert res["changed"] is False and res["drift"] == []
    assert res["ports"][0]["source"] == rdma_cm.SOURCE_CONFIGFS
    assert res["actions"] == ["created /sys/kernel/config/rdma_cm/mlx5_0"]


def test_second_run_is_idempotent(tmp_path):
    sr = build(tmp_path)
    kernel = Kernel(tmp_path)
    first = rdma_cm.apply_tos(sr, [("mlx5_0", None), ("mlx5_1", None)], 106, False, sleep=kernel.sleep)
    second = rdma_cm.apply_tos(sr, [("mlx5_0", None), ("mlx5_1", None)], 106, False, sleep=kernel.sleep)
    assert first["changed"] and not second["changed"]
    assert second["drift"] == []


def test_ports_never_appear_times_out(tmp_path):
    sr = build(tmp_path)
    kernel = Kernel(tmp_path, working=False)
    now = [0.0]

    def clock():
        now[0] += 0.5
        return now[0]

    with pytest.raises(rdma_cm.RdmaCmError, match=r"did not appear under \S+/mlx5_0/ports/ within 2\.0 s"):
        rdma_cm.wait_for_ports(sr, "mlx5_0", [1], timeout=2.0, sleep=kernel.sleep, clock=clock)
    assert kernel.polls >= 1


def test_apply_times_out_with_real_clock(tmp_path):
    sr = build(tmp_path)
    res = rdma_cm.apply_tos(sr, [("mlx5_0", 1)], 106, False, wait_timeout=0.1)
    assert [r["result"] for r in res["results"]] == ["failed"]
    assert "mlx5_0/1" in res["errors"][0] and "/ports/ within" in res["errors"][0]
    # the group was created (it only exposes the value: not a change) but no value was written
    assert not res["changed"] and os.path.isdir(os.path.join(str(tmp_path), RDMA, "mlx5_0"))
    assert res["results"][0]["changes"] == []


class FlakySysroot(Sysroot):
    """Writes to the ports listed in ``clamp`` land as 0, those in ``refuse`` fail (EIO); the rest work."""

    def __init__(self, root, clamp=(), refuse=()):
        Sysroot.__init__(self, root)
        self.clamp, self.refuse = clamp, refuse

    def write_attr(self, p, value):
        if any("/%s/ports/1/" % d in p for d in self.refuse):
            raise IOError(5, "Input/output error")
        Sysroot.write_attr(self, p, "0\n" if any("/%s/ports/1/" % d in p for d in self.clamp) else value)


# id, clamp, refuse, results per device, changed
PORT_FAILURE_CASES = [
    ("read-back mismatch", ["mlx5_0"], [], ["failed", "changed", "changed"], True, "reads back 0"),
    ("write refused", [], ["mlx5_1"], ["changed", "failed", "changed"], True, "Input/output error"),
    ("all refused", [], ["mlx5_0", "mlx5_1", "mlx5_2"], ["failed", "failed", "failed"], False, "Input/output"),
]


@pytest.mark.parametrize("clamp,refuse,outcomes,changed,needle", [c[1:] for c in PORT_FAILURE_CASES],
                         ids=[c[0] for c in PORT_FAILURE_CASES])
def test_port_failures_leave_the_other_ports_set(tmp_path, clamp, refuse, outcomes, changed, needle):
    devices = {"mlx5_0": 1, "mlx5_1": 1, "mlx5_2": 1}
    build(tmp_path, devices, groups=dict((d, {1: 0}) for d in devices))
    sr = FlakySysroot(str(tmp_path), clamp, refuse)
    res = rdma_cm.apply_tos(sr, [(d, 1) for d in sorted(devices)], 106, False)
    assert [r["result"] for r in res["results"]] == outcomes
    assert res["changed"] is changed
    for d, outcome in zip(sorted(devices), outcomes):
        assert read_tos(tmp_path, d, 1) == (106 if outcome == "changed" else 0)
    bad = [r for r in res["results"] if r["result"] == "failed"]
    assert all(needle in r["error"] and r["object"] in r["error"] for r in bad)
    assert res["errors"] == [r["error"] for r in bad]


class Runner(object):
    def __init__(self, root, create_on=None, fail=None):
        self.root = str(root)
        self.calls = []
        self.create_on = create_on
        self.fail = fail

    def __call__(self, argv):
        self.calls.append(list(argv))
        if self.fail == argv[0]:
            return 1, "", "%s: boom\n" % argv[0]
        if self.create_on == argv[0]:
            os.makedirs(os.path.join(self.root, RDMA), exist_ok=True)
        return 0, "", ""


CONFIGFS_CASES = [
    # id, check, create_on, fail, expected state, expected commands, error
    ("check mode reports would load", True, "modprobe", None, "would load", [], None),
    ("modprobe is enough", False, "modprobe", None, "loaded", [["modprobe", "-a", "configfs", "rdma_cm"]], None),
    ("mount needed", False, "mount", None, "loaded",
     [["modprobe", "-a", "configfs", "rdma_cm"], ["mount", "-t", "configfs", "none", "<root>/sys/kernel/config"]],
     None),
    ("modprobe fails", False, None, "modprobe", None, [["modprobe", "-a", "configfs", "rdma_cm"]],
     "modprobe -a configfs rdma_cm failed"),
    ("still missing", False, None, None, None,
     [["modprobe", "-a", "configfs", "rdma_cm"], ["mount", "-t", "configfs", "none", "<root>/sys/kernel/config"]],
     "CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS"),
]


@pytest.mark.parametrize("case", CONFIGFS_CASES, ids=[c[0] for c in CONFIGFS_CASES])
def test_ensure_configfs(tmp_path, case):
    _id, check, create_on, fail, state, commands, error = case
    sr = build(tmp_path, configfs=False)
    run = Runner(tmp_path, create_on, fail)
    commands = [[a.replace("<root>", str(tmp_path)) for a in c] for c in commands]
    if error:
        with pytest.raises(rdma_cm.RdmaCmError, match=error):
            rdma_cm.ensure_configfs(sr, check, run)
    else:
        assert rdma_cm.ensure_configfs(sr, check, run) == state
    assert run.calls == commands


DRIFT_106 = [{"concern": "rdma_cm", "object": "mlx5_0/1", "key": "default_roce_tos", "current": 0, "desired": 106}]


@pytest.mark.parametrize("tos,drift", [(106, DRIFT_106), (0, [])])
def test_check_mode_without_configfs_reads_the_default_after_loading(tmp_path, tos, drift):
    sr = build(tmp_path, configfs=False)
    run = Runner(tmp_path, "modprobe")
    res = rdma_cm.apply_tos(sr, [("mlx5_0", 1)], tos, True, run=run)
    assert run.calls == []
    assert res["configfs"] == "would load"
    assert res["changed"] is True                      # loading rdma_cm is a change even when ToS 0 is wanted
    assert res["ports"][0]["source"] == rdma_cm.SOURCE_NOT_LOADED
    assert res["drift"] == drift


def test_configfs_mounted_skips_mount(tmp_path):
    sr = build(tmp_path, configfs=False)
    _w(os.path.join(str(tmp_path), "proc/mounts"), "configfs /sys/kernel/config configfs rw 0 0\n")
    run = Runner(tmp_path, None)
    with pytest.raises(rdma_cm.RdmaCmError):
        rdma_cm.ensure_configfs(sr, False, run)
    assert run.calls == [["modprobe", "-a", "configfs", "rdma_cm"]]


def test_no_runner_and_no_configfs(tmp_path):
    sr = build(tmp_path, configfs=False)
    with pytest.raises(rdma_cm.RdmaCmError, match="no command runner"):
        rdma_cm.apply_tos(sr, [("mlx5_0", 1)], 106, False)


BAD_INPUT = [
    ("tos 256", [("mlx5_0", 1)], 256, ValueError, "0..255"),
    ("tos -1", [("mlx5_0", 1)], -1, ValueError, "0..255"),
    ("tos text", [("mlx5_0", 1)], "af31", ValueError, "integer"),
    ("tos bool", [("mlx5_0", 1)], True, ValueError, "integer"),
    ("tos float", [("mlx5_0", 1)], 106.5, ValueError, "integer"),
    ("unknown device", [("mlx5_9", 1)], 106, rdma_cm.RdmaCmError, "mlx5_9 does not exist"),
    ("unknown port", [("mlx5_0", 2)], 106, rdma_cm.RdmaCmError, "no port 2"),
    ("bad device name", [("../x", 1)], 106, rdma_cm.RdmaCmError, "invalid RDMA device name"),
    ("device without ports", [("mlx5_2", 1)], 106, rdma_cm.RdmaCmError, "has no ports"),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_touches_nothing(tmp_path, case):
    _id, request, tos, exc, msg = case
    sr = build(tmp_path, configfs=False)
    os.makedirs(os.path.join(str(tmp_path), "sys/class/infiniband/mlx5_2"))
    run = Runner(tmp_path, "modprobe")
    with pytest.raises(exc, match=msg):
        rdma_cm.apply_tos(sr, request, tos, False, run=run)
    assert run.calls == []
    assert not os.path.exists(os.path.join(str(tmp_path), RDMA))


WARNINGS = [
    (106, 26, []),
    (104, 26, []),
    (106, None, []),
    (96, 26, ["DSCP 24 but the fabric expects DSCP 26"]),
    (107, 26, ["ECN CE"]),
    (107, 24, ["DSCP 26 but the fabric expects DSCP 24", "ECN CE"]),
]


@pytest.mark.parametrize("tos,dscp,expected", WARNINGS)
def test_tos_warnings(tos, dscp, expected):
    got = rdma_cm.tos_warnings(tos, dscp)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert e in g


@pytest.mark.parametrize("value,ok", [(0, True), (63, True), (64, False), (-1, False), ("26", True), (None, False)])
def test_validate_dscp(value, ok):
    if ok:
        assert rdma_cm.validate_dscp(value) == int(value)
    else:
        with pytest.raises(ValueError):
            rdma_cm.validate_dscp(value)


def test_describe_tos():
    assert rdma_cm.describe_tos(106) == "106 (DSCP 26, ECT(0))"
    assert rdma_cm.describe_tos(104) == "104 (DSCP 26, Not-ECT)"
