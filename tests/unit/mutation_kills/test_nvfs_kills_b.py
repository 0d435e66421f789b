# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs, second half of make mutation's survivors: verify's result whole on a small tree (probe and gdsio, the
arguments each gets, the facts discovered once, rw_stats_enabled not restored, check mode), the cuFile log tail,
the probe source from a loader, the gdsio outputs kept, and the verdict on sparse transfer reports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import cufile_probe
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

from test_nvfs_kills import (EXP, FELL_BACK, HEALTHY, NOT_INIT, OK, SIZE, SRCVERSION, UNVERIFIED, C0, FakeRun,
                             gdsio, gdsio_line, gerr, io, pc, put, rm, xfer)

MIB = nvfs.MIB
SUBSET = ["gpu_driver", "iommu", "nvidia_fs"]
NV_VERSION = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
MOUNTINFO = ("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
             "40 22 0:50 / /mnt/data rw,relatime - nfs4 10.100.0.50:/export rw,vers=4.2,proto=rdma,port=20049\n")


def stats(c):
    return ("NVFS statistics(ver: 4.0)\n"
            "Reads\t\t\t\t: n=%(reads)d ok=%(reads_ok)d err=%(read_err)d readMiB=%(read_mib)d io_state_err=0\n"
            "Writes\t\t\t\t: n=%(writes)d ok=%(writes_ok)d err=%(write_err)d writeMiB=%(write_mib)d io_state_err=0\n"
            % c)


@pytest.fixture
def node(tmp_path):
    """A small healthy node that topology.discover reads: open driver, nvidia-fs with counters, identity IOMMU."""
    r = str(tmp_path)
    put(r, "/proc/driver/nvidia/version", NV_VERSION)
    put(r, "/proc/driver/nvidia-fs/version", "version: 2.22\n")
    put(r, nvfs.STATS, stats(C0))
    put(r, nvfs.RW_STATS_PARAM, "0\n")
    put(r, "/dev/nvidia-fs0", "")
    put(r, nvfs.MODULES, "rpcrdma: (null)\nwekafsio: 1\n")
    put(r, nvfs.BUNDLE_PARAM, "4.0.35\n")
    put(r, "/sys/module/rpcrdma/srcversion", SRCVERSION + "\n")
    put(r, "/sys/kernel/iommu_groups/0/type", "identity\n")
    put(r, "/proc/self/mountinfo", MOUNTINFO)
    os.makedirs(os.path.join(r, "mnt/data"))
    return r


class Node(object):
    """Runner for verify: modinfo answers the srcversion; the transfer moves the counters, writes a cuFile log and
    prints the report (or the gdsio lines); what it saw is recorded."""

    def __init__(self, root, after=None, report=None, gdsio_out=None, raise_exc=None, drop_workdir=False):
        self.root, self.after, self.report, self.gdsio_out = root, after, report, list(gdsio_out or [])
        self.raise_exc, self.drop_workdir = raise_exc, drop_workdir
        self.calls, self.workdir = [], None

    def __call__(self, argv, env=None):
        self.calls.append((list(argv), env))
        if argv[0] == "/sbin/modinfo":
            return 0, SRCVERSION + "\n", ""
        self.workdir = os.path.dirname(env["CUFILE_ENV_PATH_JSON"])
        with open(env["CUFILE_LOGFILE_PATH"], "w") as f:
            f.write("line 1\nline 2\n")
        if self.drop_workdir:
            shutil.rmtree(self.workdir)
        if self.raise_exc:
            raise self.raise_exc
        if self.after is not None:
            put(self.root, nvfs.STATS, stats(self.after))
        if self.gdsio_out:
            return self.gdsio_out.pop(0)
        return 0, json.dumps(self.report) + "\n", "warn"


def env_of(workdir):
    return nvfs.probe_env(os.path.join(workdir, "cufile.json"), os.path.join(workdir, "cufile.log"))


DELTA = {"reads": 1, "reads_ok": 0, "read_err": 0, "read_mib": 16, "read_io_state_err": 0,
         "writes": 1, "writes_ok": 0, "write_err": 0, "write_mib": 16, "write_io_state_err": 0}
MODINFO_CALL = (["/sbin/modinfo", "-F", "srcversion", "rpcrdma"], None)


def facts_of(root):
    return topology.discover(Sysroot(root), SUBSET)


def test_verify_probe_whole(node):
    report = {"ok": True, "data_matched": True}
    run = Node(node, after=OK, report=report)
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=run, python="/usr/bin/python3", modinfo="/sbin/modinfo",
                      method="probe")
    w = run.workdir
    real = os.path.join(node, "mnt/data")
    assert run.calls == [MODINFO_CALL, (["/usr/bin/python3", os.path.join(w, "cufile_probe.py"), "--dir", real,
                                        "--size", "16777216", "--gpu", "0"], env_of(w))]
    assert not os.path.exists(w)
    pcs = [dict(p) for p in HEALTHY]
    assert res == {
        "path": "/mnt/data", "size": SIZE, "gpu": 0, "preconditions": pcs, "preconditions_ok": True,
        "gds_active": True, "reasons": [], "warnings": [], "compat_fallback_suspected": False,
        "transfer": dict(report, method="probe", rc=0, stderr="warn", cufile_log_tail=["line 1", "line 2"]),
        "counters": {"before": C0, "after": OK, "delta": DELTA}, "expected": EXP,
        "rw_stats_enabled": {"before": "0", "during": "1", "restored": True, "error": None},
        "facts": facts_of(node), "method": "probe"}


def test_verify_gdsio_whole(node):
    run = Node(node, after=OK, gdsio_out=[(0, gdsio_line("WRITE", 16384, 16384), ""),
                                          (0, gdsio_line("READ", 16384, 16384), "")])
    res = nvfs.verify(Sysroot(node), "/mnt/data", gpu=3, run=run, modinfo="/sbin/modinfo", gdsio="/usr/bin/gdsio")
    w = run.workdir
    base = ["/usr/bin/gdsio", "-D", os.path.join(w, "data"), "-d", "3", "-w", "1", "-s", "16M", "-i", "1M", "-x",
            "0", "-V"]
    assert run.calls == [MODINFO_CALL, (base + ["-I", "1"], env_of(w)), (base + ["-I", "0"], env_of(w))]
    assert (res["method"], res["gpu"], res["gds_active"], res["reasons"]) == ("gdsio", 3, True, [])
    assert res["transfer"]["write"] == gdsio() and res["transfer"]["read"] == gdsio()
    assert res["transfer"]["cufile_log_tail"] == ["line 1", "line 2"]


def test_verify_check_mode_whole(node):
    run = Node(node)
    res = nvfs.verify(Sysroot(node), "/mnt/data", 1, run=run, python="py", modinfo="/sbin/modinfo", check_mode=True)
    assert res == {
        "path": "/mnt/data", "size": MIB, "gpu": 0, "preconditions": HEALTHY, "preconditions_ok": True,
        "gds_active": False, "reasons": ["Check mode: no test transfer was made; GDS is not proven."],
        "warnings": [], "compat_fallback_suspected": False, "transfer": None, "counters": None,
        "expected": {"writes": 1, "write_mib": 1, "reads": 1, "read_mib": 1}, "rw_stats_enabled": None,
        "facts": facts_of(node)}


def test_verify_discovers_the_facts_once(node, monkeypatch):
    seen = []
    discover = topology.discover

    def spy(sr, subset=None):
        seen.append(subset)
        return discover(sr, subset)
    monkeypatch.setattr(topology, "discover", spy)
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=Node(node), modinfo="/sbin/modinfo", check_mode=True)
    assert seen == [SUBSET]
    assert res["preconditions"] == HEALTHY
    del seen[:]
    assert nvfs.preconditions(Sysroot(node), "/mnt/data") == [pc(
        "vendor_client_srcversion", True, "rpcrdma is loaded (srcversion %s); modinfo is not available, so it is not "
        "compared with the installed file" % SRCVERSION, SRCVERSION) if p["name"] == "vendor_client_srcversion"
        else p for p in HEALTHY]
    assert seen == [SUBSET]


NO_BUNDLE = ("/sys/module/sunrpc/parameters/nfs_bundle_version is missing: the in-tree NFS stack is running, not the "
             "vendor client")


def test_verify_not_restored_warns_and_lists_failed_preconditions(node):
    class NoRestore(Sysroot):
        """rw_stats_enabled can be turned on, not back off."""

        def write_attr(self, p, value):
            if value != "1":
                raise OSError("read-only")
            Sysroot.write_attr(self, p, value)

    rm(node, nvfs.BUNDLE_PARAM)
    run = Node(node, after=C0, report={"data_matched": True})
    res = nvfs.verify(NoRestore(node), "/mnt/data", run=run, python="py", modinfo="/sbin/modinfo")
    err = "cannot restore rw_stats_enabled=0: read-only"
    assert res["rw_stats_enabled"] == {"before": "0", "during": "1", "restored": False, "error": err}
    assert res["warnings"] == [err]
    assert res["preconditions_ok"] is False and res["compat_fallback_suspected"] is True
    assert res["reasons"] == [
        "The nvidia-fs counters did not move enough: writes n moved by 0, at least 1 expected; writeMiB moved by 0, "
        "at least 16 expected; reads n moved by 0, at least 1 expected; readMiB moved by 0, at least 16 expected.",
        FELL_BACK, "Precondition vendor_client_bundle failed: %s." % NO_BUNDLE]


def test_verify_propagates_the_transfer_error_when_the_workdir_is_gone(node):
    run = Node(node, raise_exc=RuntimeError("boom"), drop_workdir=True)
    with pytest.raises(RuntimeError):
        nvfs.verify(Sysroot(node), "/mnt/data", run=run, python="py", modinfo="/sbin/modinfo")
    assert Sysroot(node).read(nvfs.RW_STATS_PARAM) == "0"


@pytest.mark.parametrize("method,gdsio_path,message", [
    ("PROBE", None, "method must be auto, probe or gdsio"),
    ("dd", "/usr/bin/gdsio", "method must be auto, probe or gdsio"),
    ("gdsio", None, "method=gdsio but gdsio was not found"),
    ("gdsio", "", "method=gdsio but gdsio was not found"),
])
def test_verify_method_messages(node, method, gdsio_path, message):
    with pytest.raises(nvfs.GdsError) as e:
        nvfs.verify(Sysroot(node), "/mnt/data", run=Node(node), method=method, gdsio=gdsio_path)
    assert str(e.value) == message


def test_verify_default_nfs_rdma_checks_the_mount(node):
    put(node, "/proc/self/mountinfo", MOUNTINFO.replace("proto=rdma", "proto=tcp"))
    res = nvfs.verify(Sysroot(node), "/mnt/data", run=Node(node), modinfo="/sbin/modinfo", check_mode=True)
    assert res["preconditions"][-2] == pc(
        "mount_proto_rdma", False, "/mnt/data is on /mnt/data (nfs4 10.100.0.50:/export, proto=tcp): GDS to NFS needs "
        "a mount with proto=rdma", {"mountpoint": "/mnt/data", "fstype": "nfs4", "source": "10.100.0.50:/export",
                                    "proto": "tcp"})
    assert res["reasons"][1:] == ["Precondition mount_proto_rdma failed: %s." % res["preconditions"][-2]["reason"]]


# ------------------------------------------------------------------------------------------------ log tail

def test_log_tail_keeps_the_last_40_lines_of_each_log(tmp_path):
    os.mkdir(str(tmp_path / "a.log"))                                   # unreadable: skipped, the next one read
    (tmp_path / "b.log").write_text(u"".join(u"b%d\n" % i for i in range(30)))
    (tmp_path / "c.log").write_text(u"".join(u"c%d\n" % i for i in range(15)))
    (tmp_path / "d.txt").write_text(u"not a log\n")
    want = ["b%d" % i for i in range(5, 30)] + ["c%d" % i for i in range(15)]
    assert nvfs._log_tail(str(tmp_path)) == want
    assert nvfs._log_tail(str(tmp_path), 3) == ["c12", "c13", "c14"]


def test_log_tail_of_a_short_log(tmp_path):
    (tmp_path / "cufile.log").write_text(u"one\ntwo\n")
    assert nvfs._log_tail(str(tmp_path)) == ["one", "two"]
    assert nvfs._log_tail(str(tmp_path), 1) == ["two"]


# ------------------------------------------------------------------------------------------------ probe source

class Loader(object):
    """A module loader as in the AnsiballZ zip: the source by module name."""

    def __init__(self, src):
        self.src, self.names = src, []

    def get_source(self, name):
        self.names.append(name)
        return self.src if name == cufile_probe.__name__ else None


def file_source():
    with open(cufile_probe.__file__) as f:
        return f.read()


@pytest.mark.parametrize("loader,want", [
    (Loader("print('zip')\n"), "print('zip')\n"),
    (Loader(""), None),
    (Loader(None), None),
    (object(), None),
    (None, None),
])
def test_probe_source_from_the_loader_or_the_file(monkeypatch, loader, want):
    monkeypatch.setattr(cufile_probe, "__loader__", loader)
    assert nvfs.probe_source() == (file_source() if want is None else want)


def test_probe_source_without_a_loader(monkeypatch):
    monkeypatch.delattr(cufile_probe, "__loader__")
    assert nvfs.probe_source() == file_source()


# ------------------------------------------------------------------------------------------------ gdsio, probe

def test_run_gdsio_keeps_the_outputs(tmp_path):
    long_out = "x" * 2500 + "\n" + gdsio_line("READ", 16384, 16384)
    run = FakeRun((0, gdsio_line("WRITE", 16384, 16384), None), (0, long_out, "tail\n"))
    rep = nvfs._run_gdsio(run, "g", str(tmp_path), SIZE, 0, {})
    assert (rep["write_output"], rep["read_output"]) == (gdsio_line("WRITE", 16384, 16384),
                                                         (long_out + "tail\n")[-2000:])
    assert rep["ok"] is True


@pytest.mark.parametrize("read,want,output", [
    ((1, None, "boom\n"), gdsio(0, xfer_type=None, error=gerr("boom", 1)), "boom\n"),
    ((0, gdsio_line("READ", 16384, 16384), "Verification Failed at 0\n"),
     gdsio(error=gerr("Verification Failed at 0", 0)), gdsio_line("READ", 16384, 16384) + "Verification Failed at 0\n"),
])
def test_run_gdsio_read_error_from_stderr(tmp_path, read, want, output):
    run = FakeRun((0, gdsio_line("WRITE", 16384, 16384), ""), read)
    rep = nvfs._run_gdsio(run, "g", str(tmp_path), SIZE, 0, {})
    assert (rep["read"], rep["read_output"], rep["ok"]) == (want, output, False)


def test_run_gdsio_write_output_without_stdout(tmp_path):
    rep = nvfs._run_gdsio(FakeRun((1, None, "no GPU\n")), "g", str(tmp_path), SIZE, 0, {})
    assert rep["write_output"] == "no GPU\n"


def test_run_gdsio_size_is_whole_mib(tmp_path):
    size = (2 ** 53 + 1) * MIB
    run = FakeRun((1, "", ""))
    nvfs._run_gdsio(run, "g", str(tmp_path), size, 0, {})
    assert run.calls[0][0][8] == "9007199254740993M"


def test_run_probe_keeps_stderr(tmp_path):
    run = FakeRun((0, '{"ok": true}\n', "note"))
    assert nvfs._run_probe(run, "py", str(tmp_path), "/mnt/data", SIZE, 0, {}) == {
        "ok": True, "method": "probe", "rc": 0, "stderr": "note"}


# ------------------------------------------------------------------------------------------------ verdict

def sparse(write=None, read=None, **kw):
    t = xfer(write=write, read=read, data_matched=False)
    t.update(kw)
    return t


SPARSE_CASES = [
    ("done-unknown", sparse({"requested": SIZE}), ["cuFileWrite moved 0 of 16777216 bytes."]),
    ("done-unknown-one-byte", sparse({"requested": 1}), ["cuFileWrite moved 0 of 1 bytes."]),
    ("requested-unknown", sparse({"done": 0}), [UNVERIFIED]),
    ("requested-unknown-done", sparse({"done": 5}), [UNVERIFIED]),
    ("write-missing-read-short", sparse(None, io(MIB)), ["cuFileRead moved 1048576 of 16777216 bytes."]),
    ("mismatch-one-byte-done", sparse({"done": 1}, file_check={"matches": False}),
     ["The file written by cuFileWrite does not match the pattern."]),
    ("open-failed-with-error", sparse(driver_open=NOT_INIT, error="cuFileDriverOpen failed"),
     ["cuFileDriverOpen failed with compat mode off: CU_FILE_DRIVER_NOT_INITIALIZED (5001)."]),
]


@pytest.mark.parametrize("t,reasons", [c[1:] for c in SPARSE_CASES], ids=[c[0] for c in SPARSE_CASES])
def test_verdict_sparse_reports(t, reasons):
    assert nvfs.verdict(t, C0, OK, EXP, True) == (False, reasons, [], False)


def test_verdict_active_has_no_reasons():
    # the counters and the data prove the transfer: a step's stale error code is not a reason
    assert nvfs.verdict(xfer(driver_open=NOT_INIT), C0, OK, EXP, True) == (True, [], [], False)
