# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs.verify: what its own tests left unseen (make mutation's survivors, first half): the check mode result
whole with its defaults, the method chosen for each method/gdsio pair, the work directory (its name and where),
the cufile.json and environment the transfer gets, and rw_stats_enabled turned on, kept or left alone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

from test_nvfs_kills import (  # noqa: F401  pylint: disable=unused-import
    FACTS, HEALTHY, IOMMU_FAIL, READ_OK, SRCVERSION, WRITE_OK, gdsio, gdsio_argv, put, rm, root)

MIB = nvfs.MIB
SIZE = 16 * MIB
EXP = {"writes": 1, "write_mib": 16, "reads": 1, "read_mib": 16}
MODINFO = "/sbin/modinfo"
PYTHON = "/usr/bin/python3"
GDSIO = "/usr/bin/gdsio"
CHECK_MODE = "Check mode: no test transfer was made; GDS is not proven."


def stats(reads=100, read_mib=50, writes=10, write_mib=5):
    return ("NVFS statistics(ver: 4.0)\n"
            "Reads\t\t\t\t: n=%d ok=%d err=0 readMiB=%d io_state_err=0\n"
            "Writes\t\t\t\t: n=%d ok=%d err=0 writeMiB=%d io_state_err=0\n"
            % (reads, reads, read_mib, writes, writes, write_mib))


def snap(reads=100, read_mib=50, writes=10, write_mib=5):
    return {"reads": reads, "reads_ok": reads, "read_err": 0, "read_mib": read_mib, "read_io_state_err": 0,
            "writes": writes, "writes_ok": writes, "write_err": 0, "write_mib": write_mib, "write_io_state_err": 0}


BEFORE, AFTER = snap(), snap(101, 66, 11, 21)
DELTA = {"reads": 1, "reads_ok": 1, "read_err": 0, "read_mib": 16, "read_io_state_err": 0,
         "writes": 1, "writes_ok": 1, "write_err": 0, "write_mib": 16, "write_io_state_err": 0}
REPORT = '{"ok": true, "data_matched": true}\n'


class Transfer(object):
    """The runner: modinfo answers the srcversion, the transfer (probe or gdsio) records its argv, env, work
    directory and cufile.json, writes a cuFile log and moves the counters by one 16 MiB write and read."""

    def __init__(self, root_dir):
        self.root = root_dir
        self.calls, self.workdirs, self.configs, self.rw_during = [], [], [], []

    def __call__(self, argv, env=None):
        argv = list(argv)
        if argv[0] == MODINFO:
            return 0, SRCVERSION + "\n", ""
        self.calls.append((argv, env))
        workdir = os.path.dirname(argv[1] if argv[0] == PYTHON else argv[2])
        self.workdirs.append(workdir)
        self.rw_during.append(Sysroot(self.root).read(nvfs.RW_STATS_PARAM))
        with open(env["CUFILE_ENV_PATH_JSON"]) as f:
            self.configs.append(f.read())
        with open(os.path.join(workdir, "cufile.log"), "w") as f:
            f.write("first\nsecond\n")
        put(self.root, nvfs.STATS, stats(101, 66, 11, 21))
        if argv[0] == PYTHON:
            return 0, REPORT, ""
        return 0, WRITE_OK if argv[-1] == "1" else READ_OK, ""


@pytest.fixture
def node(root, monkeypatch):
    """The healthy tree of test_nvfs_kills with counters printed, facts given (no simulated node)."""
    put(root, nvfs.STATS, stats())
    monkeypatch.setattr(nvfs.topology, "discover", lambda sr, subset: copy.deepcopy(FACTS))
    monkeypatch.chdir(root)
    return root


def checked(pcs=None, reasons=None):
    failed = [p for p in (pcs or HEALTHY) if p["status"] == "fail"]
    return {"path": "/mnt/data", "size": SIZE, "gpu": 0, "preconditions": pcs or HEALTHY,
            "preconditions_ok": not failed, "gds_active": False, "reasons": [CHECK_MODE] + (reasons or []),
            "warnings": [], "compat_fallback_suspected": False, "transfer": None, "counters": None,
            "expected": EXP, "rw_stats_enabled": None, "facts": FACTS}


# ------------------------------------------------------------------------------------------------ check mode

def test_verify_check_mode_whole_with_defaults(node):
    run = Transfer(node)
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=run, python=PYTHON, modinfo=MODINFO, check_mode=True)
    assert res == checked()
    assert run.calls == []
    assert Sysroot(node).read(nvfs.RW_STATS_PARAM) == "0"


def test_verify_check_mode_lists_the_failed_preconditions(node, monkeypatch):
    facts = copy.deepcopy(FACTS)
    facts["iommu"]["mode"] = "translated"
    facts["gpu_driver"]["flavour"] = "proprietary"
    monkeypatch.setattr(nvfs.topology, "discover", lambda sr, subset: copy.deepcopy(facts))
    drv = ("the proprietary NVIDIA kernel module is loaded: GDS 2.17.5 and later need the open kernel module")
    pcs = copy.deepcopy(HEALTHY)
    pcs[0].update(status="fail", ok=False, reason=drv, value="proprietary")
    pcs[4].update(status="fail", ok=False, reason=IOMMU_FAIL % "translated", value="translated")
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=Transfer(node), python=PYTHON, modinfo=MODINFO,
                      check_mode=True)
    want = checked(pcs, ["Precondition gpu_driver_open failed: %s." % drv,
                         "Precondition iommu_mode failed: %s." % (IOMMU_FAIL % "translated")])
    want["facts"] = facts
    assert res == want


def test_verify_default_sysroot_from_the_environment(node, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", node)
    res = nvfs.verify(None, "/mnt/data", run=Transfer(node), python=PYTHON, modinfo=MODINFO, check_mode=True)
    assert res == checked()


# ------------------------------------------------------------------------------------------------ the transfer

def test_verify_probe_whole_with_defaults(node):
    run = Transfer(node)
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=run, python=PYTHON, modinfo=MODINFO)
    real = Sysroot(node).path("/mnt/data")
    workdir = run.workdirs[0]
    script = os.path.join(workdir, "cufile_probe.py")
    assert run.calls == [([PYTHON, script, "--dir", real, "--size", str(SIZE), "--gpu", "0"],
                          nvfs.probe_env(os.path.join(workdir, "cufile.json"), os.path.join(workdir, "cufile.log")))]
    assert res == {"path": "/mnt/data", "size": SIZE, "gpu": 0, "preconditions": HEALTHY, "preconditions_ok": True,
                   "gds_active": True, "reasons": [], "warnings": [], "compat_fallback_suspected": False,
                   "method": "probe",
                   "transfer": {"ok": True, "data_matched": True, "method": "probe", "rc": 0,
                                "cufile_log_tail": ["first", "second"]},
                   "counters": {"before": BEFORE, "after": AFTER, "delta": DELTA}, "expected": EXP,
                   "rw_stats_enabled": {"before": "0", "during": "1", "restored": True, "error": None},
                   "facts": FACTS}
    assert run.rw_during == ["1"]
    assert not os.path.exists(workdir)


METHOD_CASES = [
    ("auto", None, "probe"),
    ("probe", GDSIO, "probe"),
    ("auto", GDSIO, "gdsio"),
    ("gdsio", GDSIO, "gdsio"),
]


@pytest.mark.parametrize("method,gdsio_path,chosen", METHOD_CASES)
def test_verify_method_chosen(node, method, gdsio_path, chosen):
    run = Transfer(node)
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, 2, run=run, python=PYTHON, modinfo=MODINFO, method=method,
                      gdsio=gdsio_path)
    workdir = run.workdirs[0]
    env = nvfs.probe_env(os.path.join(workdir, "cufile.json"), os.path.join(workdir, "cufile.log"))
    if chosen == "probe":
        script = os.path.join(workdir, "cufile_probe.py")
        want = [([PYTHON, script, "--dir", Sysroot(node).path("/mnt/data"), "--size", str(SIZE), "--gpu", "2"],
                 env)]
        transfer = {"ok": True, "data_matched": True, "method": "probe", "rc": 0}
    else:
        want = [(gdsio_argv(workdir, "1"), env), (gdsio_argv(workdir, "0"), env)]
        check = {"matches": True, "first_mismatch": None, "mismatched_bytes": None}
        transfer = {"method": "gdsio", "ok": True, "error": None, "write": gdsio(), "write_output": WRITE_OK,
                    "read": gdsio(), "read_output": READ_OK, "data_matched": True, "file_check": check,
                    "gpu_check": check}
    transfer["cufile_log_tail"] = ["first", "second"]
    assert run.calls == want
    assert (res["method"], res["transfer"], res["gds_active"], res["reasons"]) == (chosen, transfer, True, [])


@pytest.mark.parametrize("scratch", [False, True])
def test_verify_work_directory(node, tmp_path, scratch):
    tmp_root = str(tmp_path / "scratch") if scratch else None
    if scratch:
        os.makedirs(tmp_root)
    run = Transfer(node)
    nvfs.verify(Sysroot(node), "/mnt/data", run=run, python=PYTHON, modinfo=MODINFO, tmp_root=tmp_root)
    workdir = run.workdirs[0]
    assert os.path.dirname(workdir) == (tmp_root or Sysroot(node).path("/mnt/data"))
    assert os.path.basename(workdir).startswith(".gpufabric-gds-")
    assert not os.path.exists(workdir)
    assert os.listdir(os.path.dirname(workdir)) == ([] if scratch else ["sub"])


CONFIG_CASES = [
    ("absent", None, {"properties": {"allow_compat_mode": False}}),
    ("broken", "{broken", {"properties": {"allow_compat_mode": False}}),
    ("kept-and-forced", '{"properties": {"allow_compat_mode": true, "max_direct_io_size_kb": 16384}, // c\n'
     ' "logging": {"level": "ERROR", "dir": "/var/log"}}',
     {"properties": {"allow_compat_mode": False, "max_direct_io_size_kb": 16384}, "logging": {"level": "ERROR"}}),
]


@pytest.mark.parametrize("text,want", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_verify_cufile_json_of_the_transfer(node, text, want):
    if text is not None:
        put(node, nvfs.CUFILE_JSON, text)
    run = Transfer(node)
    nvfs.verify(Sysroot(node), "/mnt/data", run=run, python=PYTHON, modinfo=MODINFO)
    workdir = run.workdirs[0]
    want = copy.deepcopy(want)
    want.setdefault("logging", {})["dir"] = workdir
    assert run.configs == [nvfs.render_cufile_json(want)]
    assert run.calls[0][1] == {"CUFILE_ENV_PATH_JSON": os.path.join(workdir, "cufile.json"),
                               "CUFILE_ALLOW_COMPAT_MODE": "false", "CUFILE_FORCE_COMPAT_MODE": "false",
                               "CUFILE_LOGFILE_PATH": os.path.join(workdir, "cufile.log")}


# ------------------------------------------------------------------------------------------------ rw_stats_enabled

class Node(Sysroot):
    """A Sysroot that records its attribute writes and can refuse those of one value."""

    def __init__(self, root_dir, refuse=None):
        Sysroot.__init__(self, root_dir)
        self.refuse = refuse
        self.writes = []

    def write_attr(self, p, value):
        self.writes.append((p, value))
        if value == self.refuse:
            raise IOError("Permission denied")
        Sysroot.write_attr(self, p, value)


RW = nvfs.RW_STATS_PARAM
DENIED = "cannot enable rw_stats_enabled: Permission denied"
RW_CASES = [
    ("off-turned-on-and-back", "0\n", None, [(RW, "1"), (RW, "0")],
     {"before": "0", "during": "1", "restored": True, "error": None}, [], "0"),
    ("already-on", "1\n", None, [], {"before": "1", "during": "1", "restored": None, "error": None}, [], "1"),
    ("missing", None, None, [], {"before": None, "during": None, "restored": None, "error": None}, [], None),
    ("cannot-enable", "0\n", "1", [(RW, "1")],
     {"before": "0", "during": "0", "restored": None, "error": DENIED}, [DENIED], "0"),
]


@pytest.mark.parametrize("text,refuse,writes,rw,warnings,left", [c[1:] for c in RW_CASES],
                         ids=[c[0] for c in RW_CASES])
def test_verify_rw_stats_enabled(node, text, refuse, writes, rw, warnings, left):
    if text is None:
        rm(node, RW)
    else:
        put(node, RW, text)
    sr = Node(node, refuse)
    res = nvfs.verify(sr, "/mnt/data", run=Transfer(node), python=PYTHON, modinfo=MODINFO, nfs_rdma=False)
    assert sr.writes == writes
    assert res["rw_stats_enabled"] == rw
    assert res["warnings"] == warnings
    assert Sysroot(node).read(RW) == left
