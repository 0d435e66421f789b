# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs: what its own tests left unseen (make mutation's survivors): the verdict's reasons, warnings and compat
suspicion word for word on every branch, the probe and gdsio reports whole, validate at its bounds, and each
precondition's status document whole on a small tree (facts given, no simulated node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

MIB = nvfs.MIB
SIZE = 16 * MIB
EXP = {"writes": 1, "write_mib": 16, "reads": 1, "read_mib": 16}
C0 = {"reads": 100, "reads_ok": 100, "read_err": 0, "read_mib": 50, "read_io_state_err": 0,
      "writes": 10, "writes_ok": 10, "write_err": 0, "write_mib": 5, "write_io_state_err": 0}


def moved(base=None, **d):
    out = dict(base or C0)
    for k, v in d.items():
        out[k] += v
    return out


OK = moved(writes=1, write_mib=16, reads=1, read_mib=16)          # exactly what one write and one read must count
GOOD_CHECK = {"matches": True, "first_mismatch": None, "mismatched_bytes": 0}
BAD_CHECK = {"matches": False, "first_mismatch": 4096, "mismatched_bytes": 512}


def io(done=SIZE, short=False, calls=None, error=None):
    return {"requested": SIZE, "done": done, "calls": [done] if calls is None else calls, "short": short,
            "error": error}


def xfer(**kw):
    t = {"error": None, "driver_open": {"err": 0, "name": "CU_FILE_SUCCESS"},
         "handle_register": {"err": 0, "name": "CU_FILE_SUCCESS"}, "write": io(), "read": io(),
         "file_check": GOOD_CHECK, "gpu_check": GOOD_CHECK, "data_matched": True}
    t.update(kw)
    return t


def short_of(*parts):
    return "The nvidia-fs counters did not move enough: %s." % "; ".join(parts)


W0, WM0 = "writes n moved by 0, at least 1 expected", "writeMiB moved by 0, at least 16 expected"
R0, RM0 = "reads n moved by 0, at least 1 expected", "readMiB moved by 0, at least 16 expected"
FELL_BACK = ("The data matched while nvidia-fs counted none of it: cuFile fell back to POSIX I/O (compatibility mode) "
             "although allow_compat_mode=false.")
NO_NVFS = "nvidia-fs is not loaded, so no transfer can bypass host memory."
NO_NVFS_DATA = ("The data matched although nvidia-fs is not loaded: cuFile moved it with POSIX I/O (compatibility "
                "mode) despite allow_compat_mode=false; check CUFILE_FORCE_COMPAT_MODE and the cufile.json in use.")
NO_COUNTERS = ("The nvidia-fs read/write counters are not available (/proc/driver/nvidia-fs/stats prints none: "
               "rw_stats_enabled is off or could not be turned on): the transfer cannot be attributed to nvidia-fs.")
UNVERIFIED = "The test transfer did not verify its data."
NOT_INIT = {"err": 5001, "name": "CU_FILE_DRIVER_NOT_INITIALIZED"}
BAD = dict(data_matched=False)

VERDICT_CASES = [
    ("good", xfer(), C0, OK, True, (True, [], [], False)),
    ("open-and-register-fail", xfer(driver_open=NOT_INIT, handle_register=NOT_INIT, write=None, read=None,
                                    error="cuFileHandleRegister failed", **BAD), None, None, False,
     (False, ["cuFileDriverOpen failed with compat mode off: CU_FILE_DRIVER_NOT_INITIALIZED (5001).",
              "cuFileHandleRegister failed for the test file: CU_FILE_DRIVER_NOT_INITIALIZED (5001).", NO_NVFS],
      [], False)),
    ("register-fails", xfer(handle_register={"err": 5030, "name": "CU_FILE_IO_NOT_SUPPORTED"}, write=None, read=None,
                            error="x", **BAD), C0, dict(C0), True,
     (False, ["cuFileHandleRegister failed for the test file: CU_FILE_IO_NOT_SUPPORTED (5030).",
              short_of(W0, WM0, R0, RM0)], [], False)),
    ("error-after-good-steps", xfer(error="cuFileBufRegister failed", **BAD), C0, OK, True,
     (False, ["The cuFile test transfer did not complete: cuFileBufRegister failed."], [], False)),
    ("error-alone-blocks-active", xfer(error="late"), C0, OK, True,
     (False, ["The cuFile test transfer did not complete: late."], [], False)),
    ("error-without-steps", {"error": "crash"}, C0, OK, True,
     (False, ["The cuFile test transfer did not complete: crash."], [], False)),
    ("write-incomplete-name-message", xfer(write=io(4 * MIB, True, [4 * MIB, 0], {"name": "NO_PROGRESS",
                                                                                  "message": "no progress"}), **BAD),
     C0, moved(OK, write_mib=-12), True,
     (False, ["cuFileWrite moved 4194304 of 16777216 bytes (NO_PROGRESS: no progress).",
              short_of("writeMiB moved by 4, at least 16 expected")], [], False)),
    ("read-incomplete-message", xfer(read=io(0, calls=[], error={"message": "EIO"}), **BAD), C0, OK, True,
     (False, ["cuFileRead moved 0 of 16777216 bytes (EIO)."], [], False)),
    ("read-incomplete-name", xfer(read=io(MIB, error={"name": "CU_FILE_NVFS_DRIVER_ERROR"}), **BAD), C0, OK, True,
     (False, ["cuFileRead moved 1048576 of 16777216 bytes (CU_FILE_NVFS_DRIVER_ERROR)."], [], False)),
    ("write-one-byte-short-mismatch-unsaid", xfer(write=io(SIZE - 1), file_check=BAD_CHECK, **BAD), C0, OK, True,
     (False, ["cuFileWrite moved 16777215 of 16777216 bytes."], [], False)),
    ("short-calls-completed", xfer(write=io(short=True, calls=[4 * MIB, 12 * MIB]),
                                   read=io(short=True, calls=[SIZE - 1, 1])), C0, OK, True,
     (True, [], ["cuFileWrite returned short counts [4194304, 12582912]; the remaining bytes were moved by further "
                 "calls.", "cuFileRead returned short counts [16777215, 1]; the remaining bytes were moved by "
                 "further calls."], False)),
    ("short-warning-when-not-active", xfer(write=io(short=True, calls=[1, SIZE - 1]), **BAD), C0, OK, True,
     (False, [UNVERIFIED], ["cuFileWrite returned short counts [1, 16777215]; the remaining bytes were moved by "
                            "further calls."], False)),
    ("file-mismatch-counted", xfer(file_check=BAD_CHECK, **BAD), C0, OK, True,
     (False, ["The file written by cuFileWrite differs from the pattern: 512 bytes differ, the first at offset "
              "4096."], [], False)),
    ("gpu-mismatch-first-none", xfer(gpu_check={"matches": False, "first_mismatch": None, "mismatched_bytes": 3},
                                     **BAD), C0, OK, True,
     (False, ["The GPU buffer read back by cuFileRead differs from the pattern: 3 bytes differ, the first at "
              "offset 0."], [], False)),
    ("both-mismatch-uncounted", xfer(file_check={"matches": False, "mismatched_bytes": 0},
                                     gpu_check={"matches": False}, **BAD), C0, OK, True,
     (False, ["The file written by cuFileWrite does not match the pattern.",
              "The GPU buffer read back by cuFileRead does not match the pattern."], [], False)),
    ("mismatch-without-io", xfer(write=None, read=None, file_check=BAD_CHECK, gpu_check=BAD_CHECK, **BAD), C0, OK,
     True, (False, [UNVERIFIED], [], False)),
    ("no-nvfs-data-matched", xfer(), C0, OK, False, (False, [NO_NVFS_DATA], [], True)),
    ("no-nvfs-no-data", xfer(**BAD), C0, OK, False, (False, [NO_NVFS], [], False)),
    ("no-snapshots", xfer(), None, None, True, (False, [NO_COUNTERS], [], False)),
    ("no-after", xfer(), C0, None, True, (False, [NO_COUNTERS], [], False)),
    ("empty-before", xfer(), {}, OK, True, (False, [NO_COUNTERS], [], False)),
    ("writes-missing", xfer(), dict(C0, writes=None), OK, True, (False, [NO_COUNTERS], [], False)),
    ("reads-missing", xfer(), C0, dict(OK, reads=None), True, (False, [NO_COUNTERS], [], False)),
    ("write-mib-missing", xfer(), dict(C0, write_mib=None), OK, True, (False, [short_of(WM0)], [], False)),
    ("only-writes", xfer(), C0, moved(writes=1), True, (False, [short_of(WM0, R0, RM0)], [], False)),
    ("only-write-mib", xfer(), C0, moved(write_mib=16), True, (False, [short_of(W0, R0, RM0)], [], False)),
    ("only-reads", xfer(), C0, moved(reads=1), True, (False, [short_of(W0, WM0, RM0)], [], False)),
    ("only-read-mib", xfer(), C0, moved(read_mib=16), True, (False, [short_of(W0, WM0, R0)], [], False)),
    ("nothing-moved-data-matched", xfer(), C0, dict(C0), True, (False, [short_of(W0, WM0, R0, RM0), FELL_BACK],
                                                                [], True)),
    ("nothing-moved-data-bad", xfer(**BAD), C0, dict(C0), True, (False, [short_of(W0, WM0, R0, RM0)], [], False)),
    ("errors-counted", xfer(), C0, moved(OK, write_mib=-8, read_err=2, write_err=1), True,
     (False, [short_of("writeMiB moved by 8, at least 16 expected"),
              "nvidia-fs counted 3 read/write errors during the test transfer (see dmesg)."], [], False)),
    ("read-errors-write-err-unknown", xfer(**BAD), dict(C0, write_err=None), moved(OK, read_err=2), True,
     (False, ["nvidia-fs counted 2 read/write errors during the test transfer (see dmesg)."], [], False)),
    ("write-errors-read-err-unknown", xfer(**BAD), C0, dict(moved(OK, write_err=4), read_err=None), True,
     (False, ["nvidia-fs counted 4 read/write errors during the test transfer (see dmesg)."], [], False)),
    ("no-transfer", None, C0, OK, True, (False, [UNVERIFIED], [], False)),
    # a proven transfer keeps the errors nvidia-fs counted meanwhile as a warning (its counters are the device's)
    ("proven-with-errors-counted", xfer(), C0, moved(OK, write_err=2), True,
     (True, [], ["nvidia-fs counted 2 read/write errors during the test transfer (see dmesg)."], False)),
]


@pytest.mark.parametrize("t,before,after,loaded,want", [c[1:] for c in VERDICT_CASES],
                         ids=[c[0] for c in VERDICT_CASES])
def test_verdict_whole(t, before, after, loaded, want):
    assert nvfs.verdict(t, before, after, EXP, loaded) == want


def test_verdict_uses_the_expectation_given():
    want = dict(EXP, writes=3, read_mib=17)
    assert nvfs.verdict(xfer(), C0, OK, want, True) == (False, [short_of(
        "writes n moved by 1, at least 3 expected", "readMiB moved by 16, at least 17 expected")], [], False)


@pytest.mark.parametrize("size,want", [
    (SIZE, EXP),
    (4 * MIB - 1, {"writes": 1, "write_mib": 3, "reads": 1, "read_mib": 3}),
])
def test_expected_movement(size, want):
    assert nvfs.expected_movement(size) == want


@pytest.mark.parametrize("step,want", [({"name": "X", "err": 7}, "X (7)"), ({"name": "Y"}, "Y (0)")])
def test_fmt_cf(step, want):
    assert nvfs._fmt_cf(step) == want


# ------------------------------------------------------------------------------------------------ probe, gdsio

def failed(rc, error, stderr=""):
    return {"method": "probe", "ok": False, "error": error, "rc": rc, "stderr": stderr, "data_matched": False}


EXITED = "the cuFile test program exited with rc=%d"
PROBE_CASES = [
    (0, 'noise\n  {"ok": true}  \n', "", {"ok": True, "method": "probe", "rc": 0}),
    (0, '{"n": 1}\n{"n": 2}\ntrailer\n', "warn", {"n": 2, "method": "probe", "rc": 0, "stderr": "warn"}),
    (0, '{"n": 1}\n{broken\n', None, failed(0, EXITED % 0 + " and printed no report")),
    (0, None, None, failed(0, EXITED % 0 + " and printed no report")),
    (3, '{"ok": true}\n', "boom", failed(3, EXITED % 3, "boom")),
    (3, "", "", failed(3, EXITED % 3 + " and printed no report")),
    (-11, "", "segv", failed(-11, EXITED % -11 + " (killed by signal 11)", "segv")),
    (-9, '{"ok": true}\n', "", failed(-9, EXITED % -9 + " (killed by signal 9)")),
]


@pytest.mark.parametrize("rc,out,err,want", PROBE_CASES)
def test_parse_probe_output_whole(rc, out, err, want):
    assert nvfs.parse_probe_output(rc, out, err) == want


def test_parse_probe_output_keeps_the_last_2000_characters_of_stderr():
    err = "a" * 500 + "b" * 2000
    assert nvfs.parse_probe_output(0, "{}", err)["stderr"] == "b" * 2000
    assert nvfs.parse_probe_output(1, "", err)["stderr"] == "b" * 2000


def gdsio_line(io_type, done_kib, total_kib, xfer_type="GPUD", sep=" "):
    return "IoType:%s%s XferType:%s%s Threads: 1 DataSetSize:%s%d/%d(KiB) IOSize: 1024(KiB)\n" % (
        sep, io_type, sep, xfer_type, sep, done_kib, total_kib)


def gdsio(done=SIZE, short=False, xfer_type="GPUD", error=None):
    return {"requested": SIZE, "done": done, "calls": [], "short": short, "xfer_type": xfer_type, "error": error}


def gerr(message, rc):
    return {"name": "GDSIO", "message": message, "rc": rc}


GDSIO_CASES = [
    (0, gdsio_line("WRITE", 16384, 16384), "", gdsio()),
    (0, gdsio_line("READ", 8192, 16384, "CPU_GPU", ""), "", gdsio(8 * MIB, True, "CPU_GPU")),
    (0, gdsio_line("READ", 16383, 16384), "", gdsio(SIZE - 1024, True)),
    (0, gdsio_line("READ", 32768, 32768), "", gdsio()),
    (1, "file register error: not supported\nbye\n", "", gdsio(0, xfer_type=None, error=gerr("bye", 1))),
    (0, "", "", gdsio(0, xfer_type=None, error=gerr("rc=0", 0))),
    (2, gdsio_line("WRITE", 16384, 16384), "cuFile error\n", gdsio(error=gerr("cuFile error", 2))),
    (0, gdsio_line("READ", 16384, 16384), "Verification Failed at 0\n",
     gdsio(error=gerr("Verification Failed at 0", 0))),
    (0, gdsio_line("READ", 16384, 16384) + "verify  ERROR\n", "", gdsio(error=gerr("verify  ERROR", 0))),
    (0, gdsio_line("READ", 16384, 16384) + "verification mismatch\n", "",
     gdsio(error=gerr("verification mismatch", 0))),
    (0, gdsio_line("READ", 16384, 16384) + "Data Mismatch here\n", "", gdsio(error=gerr("Data Mismatch here", 0))),
    (0, gdsio_line("READ", 16384, 16384) + "verified ok\n", "", gdsio()),
    (1, None, None, gdsio(0, xfer_type=None, error=gerr("rc=1", 1))),
]


@pytest.mark.parametrize("rc,out,err,want", GDSIO_CASES)
def test_parse_gdsio_whole(rc, out, err, want):
    assert nvfs.parse_gdsio(rc, out, err, SIZE) == want


class FakeRun(object):
    """Stands in for the runner: the (rc, out, err) of each call in turn, argv and env recorded."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = []

    def __call__(self, argv, env=None):
        self.calls.append((list(argv), env))
        return self.results.pop(0)


ENV = {"X": "1"}
WRITE_OK, READ_OK = gdsio_line("WRITE", 16384, 16384), gdsio_line("READ", 16384, 16384)


def gdsio_argv(workdir, io_flag):
    return ["/usr/bin/gdsio", "-D", os.path.join(workdir, "data"), "-d", "2", "-w", "1", "-s", "16M", "-i", "1M",
            "-x", "0", "-V", "-I", io_flag]


def test_run_gdsio_write_then_read(tmp_path):
    run = FakeRun((0, WRITE_OK, "w"), (0, READ_OK, ""))
    rep = nvfs._run_gdsio(run, "/usr/bin/gdsio", str(tmp_path), SIZE, 2, ENV)
    assert run.calls == [(gdsio_argv(str(tmp_path), "1"), ENV), (gdsio_argv(str(tmp_path), "0"), ENV)]
    assert os.path.isdir(str(tmp_path / "data"))
    check = {"matches": True, "first_mismatch": None, "mismatched_bytes": None}
    assert rep == {"method": "gdsio", "ok": True, "error": None, "write": gdsio(), "write_output": WRITE_OK + "w",
                   "read": gdsio(), "read_output": READ_OK, "data_matched": True, "file_check": check,
                   "gpu_check": check}


def test_run_gdsio_failed_write_skips_the_read(tmp_path):
    run = FakeRun((1, "x" * 2500 + "\n", "no GPU\n"))
    rep = nvfs._run_gdsio(run, "/usr/bin/gdsio", str(tmp_path), SIZE, 2, ENV)
    assert len(run.calls) == 1
    check = {"matches": False, "first_mismatch": None, "mismatched_bytes": None}
    assert rep == {"method": "gdsio", "ok": False, "error": None,
                   "write": gdsio(0, xfer_type=None, error=gerr("no GPU", 1)),
                   "write_output": ("x" * 2500 + "\nno GPU\n")[-2000:],
                   "read": {"requested": SIZE, "done": 0, "calls": [], "short": False, "error": {"name": "SKIPPED"}},
                   "data_matched": False, "file_check": check, "gpu_check": check}


@pytest.mark.parametrize("write,read", [
    ((0, WRITE_OK, ""), (0, gdsio_line("READ", 8192, 16384), "")),
    ((0, gdsio_line("WRITE", 8192, 16384), ""), (0, READ_OK, "")),
    ((0, WRITE_OK, ""), (1, READ_OK, "")),
])
def test_run_gdsio_short_or_failed_is_not_ok(tmp_path, write, read):
    rep = nvfs._run_gdsio(FakeRun(write, read), "g", str(tmp_path), SIZE, 0, ENV)
    assert (rep["ok"], rep["data_matched"], rep["file_check"]["matches"], rep["gpu_check"]["matches"]) == (
        False, False, False, False)


def test_run_probe_writes_the_program_and_passes_its_arguments(tmp_path):
    run = FakeRun((0, '{"ok": true, "data_matched": true}\n', ""))
    rep = nvfs._run_probe(run, "/usr/bin/python3", str(tmp_path), "/mnt/data", SIZE, 3, ENV)
    script = str(tmp_path / "cufile_probe.py")
    assert run.calls == [(["/usr/bin/python3", script, "--dir", "/mnt/data", "--size", "16777216", "--gpu", "3"],
                          ENV)]
    with open(script) as f:
        assert f.read() == nvfs.probe_source()
    assert rep == {"ok": True, "data_matched": True, "method": "probe", "rc": 0}


def test_probe_env_turns_compat_mode_off():
    assert nvfs.probe_env("/w/cufile.json", "/w/cufile.log") == {
        "CUFILE_ENV_PATH_JSON": "/w/cufile.json", "CUFILE_ALLOW_COMPAT_MODE": "false",
        "CUFILE_FORCE_COMPAT_MODE": "false", "CUFILE_LOGFILE_PATH": "/w/cufile.log"}  # the runner adds the C locale


# ------------------------------------------------------------------------------------------------ validate

@pytest.mark.parametrize("size,gpu", [(1, 0), (nvfs.MAX_SIZE_MIB, 7)])
def test_validate_accepts_the_bounds(tmp_path, size, gpu):
    assert nvfs.validate(str(tmp_path), size, gpu) is None


@pytest.mark.parametrize("size,gpu,where,message", [
    (0, 0, "", "size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)"),
    ("16", 0, "", "size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)"),
    (0, -1, "nowhere", "size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)"),
    (4097, 0, "", "size_mib 4097 is too large (at most 4096 MiB for a verification transfer)"),
    (16, -1, "nowhere", "gpu must be a GPU index (0 or more)"),
    (True, 0, "", "size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)"),
    (16, None, "", "gpu must be a GPU index (0 or more)"),
    (16, True, "", "gpu must be a GPU index (0 or more)"),
    (16, 0, "nowhere", "path %s is not a directory"),
    (16, 0, "file", "path %s is not a directory"),
])
def test_validate_messages(tmp_path, size, gpu, where, message):
    (tmp_path / "file").write_text(u"x")
    path = str(tmp_path / where) if where else str(tmp_path)
    with pytest.raises(nvfs.GdsError) as e:
        nvfs.validate(path, size, gpu)
    assert str(e.value) == (message % path if "%s" in message else message)


# ------------------------------------------------------------------------------------------------ preconditions

MOUNTINFO = (
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "40 22 0:50 / /mnt/data rw,relatime - nfs4 10.100.0.50:/export rw,vers=4.2,proto=rdma,port=20049\n"
    "41 22 0:51 / /mnt/tcp rw - nfs 10.100.0.50:/tcp rw,vers=3,proto=tcp\n"
    "42 22 0:52 / /mnt/rd rw - nfs 10.0.0.9:/rd rw,vers=3,proto=rdma\n"
    "43 22 0:53 / /mnt/lus rw - lustre 10.0.0.7@o2ib:/fs rw,proto=rdma\n"
    "44 22 0:54 / /mnt/v6 rw - nfs4 [fd00::50]:/export rw,vers=4.2,proto=rdma6\n"
)
SRCVERSION = "ABCDEF0123456789ABCDEF0"
FACTS = {"gpu_driver": {"flavour": "open", "version": "570.86.15"}, "iommu": {"mode": "identity"},
         "nvidia_fs": {"loaded": True, "version": "2.22", "module_version": "2.22.3"}}


def put(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    with open(p, "w") as f:
        f.write(text)


def rm(root, path):
    os.unlink(os.path.join(root, path.lstrip("/")))


@pytest.fixture
def root(tmp_path):
    """A healthy node: every precondition holds (the device and modules file are plain files)."""
    r = str(tmp_path)
    put(r, nvfs.STATS, "NVFS statistics(ver: 4.0)\n")
    put(r, nvfs.RW_STATS_PARAM, "0\n")
    put(r, "/dev/nvidia-fs0", "")
    put(r, nvfs.MODULES, "rpcrdma: (null)\nwekafsio: 1\n")
    put(r, nvfs.BUNDLE_PARAM, "4.0.35\n")
    put(r, "/sys/module/rpcrdma/srcversion", SRCVERSION + "\n")
    put(r, "/proc/self/mountinfo", MOUNTINFO)
    for d in ("mnt/data/sub", "mnt/tcp", "mnt/rd", "mnt/lus", "srv"):
        os.makedirs(os.path.join(r, d))
    os.symlink("mnt/data", os.path.join(r, "link"))
    return r


def pc(name, ok, reason, value=None):
    return {"name": name, "status": {True: "ok", False: "fail", None: "skip"}[ok], "ok": ok, "reason": reason,
            "value": value}


def mount_value(mountpoint, fstype, source, proto):
    return {"mountpoint": mountpoint, "fstype": fstype, "source": source, "proto": proto}


DATA_MOUNT = mount_value("/mnt/data", "nfs4", "10.100.0.50:/export", "rdma")
HELD = {"device": "/dev/nvidia-fs0", "held": True, "listed": {"rpcrdma": "(null)", "wekafsio": "1"},
        "version": "(null)"}
HEALTHY = [
    pc("gpu_driver_open", True, "the NVIDIA open kernel module 570.86.15 is loaded", "open"),
    pc("nvidia_fs_loaded", True, "nvidia-fs 2.22 is loaded", "2.22"),
    pc("nvidia_fs_stats", True, "/proc/driver/nvidia-fs/stats is readable and rw_stats_enabled=0", "0"),
    pc("nvidia_fs_storage_module", True, "rpcrdma is listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 "
       "is held open (rpcrdma: (null))", HELD),
    pc("iommu_mode", True, "the IOMMU is in passthrough (identity) mode", "identity"),
    pc("vendor_client_bundle", True, "the vendor NFS client is loaded (nfs_bundle_version 4.0.35)", "4.0.35"),
    pc("vendor_client_srcversion", True, "the loaded rpcrdma is the installed file (srcversion %s)" % SRCVERSION,
       SRCVERSION),
    pc("mount_proto_rdma", True, "/mnt/data is on /mnt/data (nfs4 10.100.0.50:/export, proto=rdma)", DATA_MOUNT),
    pc("cufile_json", True, "/etc/cufile.json is absent: cuFile uses its defaults"),
]
NOT_LOADED = "nvidia-fs is not loaded"
IOMMU_FAIL = ("the IOMMU is in %s mode: nvidia-fs rejects transfers (DMA address chunks 4096 != GPU physical address "
              "chunks) and writes fail with EIO; boot with iommu=pt")
NO_NFS = "not an NFS over RDMA check (nfs_rdma=false)"
PRE_CASES = [
    ("healthy", None, {}, {}, []),
    ("proprietary", None, {}, {"gpu_driver": {"flavour": "proprietary"}},
     [pc("gpu_driver_open", False, "the proprietary NVIDIA kernel module is loaded: GDS 2.17.5 and later need the "
         "open kernel module", "proprietary")]),
    ("no-driver", None, {}, {"gpu_driver": {"flavour": "none", "version": None}},
     [pc("gpu_driver_open", False, "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing)",
         "none")]),
    ("module-version-only", None, {}, {"nvidia_fs": {"version": None}},
     [pc("nvidia_fs_loaded", True, "nvidia-fs 2.22.3 is loaded", "2.22.3")]),
    ("no-versions", None, {}, {"nvidia_fs": {"version": None, "module_version": None},
                               "gpu_driver": {"flavour": "open", "version": None}},
     [pc("gpu_driver_open", True, "the NVIDIA open kernel module is loaded", "open"),
      pc("nvidia_fs_loaded", True, "nvidia-fs is loaded", None)]),
    ("nvfs-not-loaded", None, {}, {"nvidia_fs": {"loaded": False}},
     [pc("nvidia_fs_loaded", False, NOT_LOADED + " (/proc/driver/nvidia-fs is missing): with the GPU Operator set "
         "gds.enabled in the ClusterPolicy"),
      pc("nvidia_fs_stats", False, NOT_LOADED + ", so there are no counters to read"),
      pc("nvidia_fs_storage_module", False, NOT_LOADED + ", so no storage module is hooked into it")]),
    ("no-stats", lambda r: rm(r, nvfs.STATS), {}, {},
     [pc("nvidia_fs_stats", False, "/proc/driver/nvidia-fs/stats cannot be read (nvidia-fs built without "
         "CONFIG_NVFS_STATS?)")]),
    ("no-rw-param", lambda r: rm(r, nvfs.RW_STATS_PARAM), {}, {},
     [pc("nvidia_fs_stats", False, "/sys/module/nvidia_fs/parameters/rw_stats_enabled is missing: the read/write "
         "counters cannot be turned on")]),
    ("rw-on", lambda r: put(r, nvfs.RW_STATS_PARAM, "1\n"), {}, {},
     [pc("nvidia_fs_stats", True, "/proc/driver/nvidia-fs/stats is readable and rw_stats_enabled=1", "1")]),
    ("other-storage-module", None, {"storage_module": "nvme"}, {},
     [pc("nvidia_fs_storage_module", False, "nvme is not listed in /proc/driver/nvidia-fs/modules while "
         "/dev/nvidia-fs0 is held open (listed: rpcrdma, wekafsio): the loaded nvme does not register with "
         "nvidia-fs (it does not export nvme_v1_register_nvfs_dma_ops (nvme_v2_register_nvfs_dma_ops on kernels "
         "with blk_rq_dma_map_iter_start) - in-tree module or a client built without the nvidia-fs hook - or the "
         "registration failed, see dmesg 'nvfs registration failed'), so GDS cannot use it",
         dict(HELD, version=None))]),
    ("no-device", lambda r: rm(r, "/dev/nvidia-fs0"), {}, {},
     [pc("nvidia_fs_storage_module", False, "no /dev/nvidia-fs<N> device exists to hold open (nvidia-fs creates them "
         "when it loads): whether nvidia-fs registers rpcrdma is unknown (it lists storage modules only while one "
         "of its devices is held open)", {"device": None, "held": False, "listed": {}, "version": None})]),
    ("iommu-off", None, {}, {"iommu": {"mode": "off"}}, [pc("iommu_mode", True, "the IOMMU is off", "off")]),
    ("iommu-translated", None, {}, {"iommu": {"mode": "translated"}},
     [pc("iommu_mode", False, IOMMU_FAIL % "translated", "translated")]),
    ("iommu-mixed", None, {}, {"iommu": {"mode": "mixed"}}, [pc("iommu_mode", False, IOMMU_FAIL % "mixed", "mixed")]),
    ("nfs-rdma-off", None, {"nfs_rdma": False}, {},
     [pc("vendor_client_bundle", None, NO_NFS), pc("vendor_client_srcversion", None, NO_NFS),
      pc("mount_proto_rdma", None, "/mnt/data is on /mnt/data (nfs4 10.100.0.50:/export, proto=rdma); " + NO_NFS,
         DATA_MOUNT)]),
    ("cufile-json", lambda r: put(r, nvfs.CUFILE_JSON, '{"properties": {"allow_compat_mode": true}}'), {}, {},
     [pc("cufile_json", True, "/etc/cufile.json is valid (allow_compat_mode=true; the test transfer forces false)",
         True)]),
]


@pytest.mark.parametrize("mutate,kwargs,facts,changed", [c[1:] for c in PRE_CASES], ids=[c[0] for c in PRE_CASES])
def test_preconditions_whole(root, mutate, kwargs, facts, changed):
    if mutate:
        mutate(root)
    f = json.loads(json.dumps(FACTS))
    for k, v in facts.items():
        f[k].update(v)
    run = FakeRun((0, SRCVERSION + "\n", ""))
    got = nvfs.preconditions(Sysroot(root), "/mnt/data", run=run, modinfo="/sbin/modinfo", facts=f, **kwargs)
    repl = dict((d["name"], d) for d in changed)
    assert got == [repl.get(d["name"], d) for d in HEALTHY]


def test_preconditions_default_sysroot_from_the_environment(root, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    run = FakeRun((0, SRCVERSION + "\n", ""))
    assert nvfs.preconditions(None, "/mnt/data", run, "/sbin/modinfo", facts=FACTS) == HEALTHY
    assert run.calls == [(["/sbin/modinfo", "-F", "srcversion", "rpcrdma"], None)]


LOADED = "rpcrdma is loaded (srcversion %s); modinfo is not available, so it is not compared with the installed " \
    "file" % SRCVERSION
NO_FILE = "modinfo finds no rpcrdma module file for the running kernel (%s)"
VENDOR_CASES = [
    ("no-modinfo", None, None, True, [pc("vendor_client_srcversion", True, LOADED, SRCVERSION)]),
    ("no-run", None, "", False, [pc("vendor_client_srcversion", True, LOADED, SRCVERSION)]),
    ("first-line", None, (0, " %s \nother\n" % SRCVERSION, ""), True,
     [pc("vendor_client_srcversion", True, "the loaded rpcrdma is the installed file (srcversion %s)" % SRCVERSION,
         SRCVERSION)]),
    ("differs", None, (0, "0000\n", ""), True,
     [pc("vendor_client_srcversion", False, "the loaded rpcrdma has srcversion %s, the installed file 0000: the "
         "module in memory is not the one installed (reboot pending, or in-tree module loaded)" % SRCVERSION,
         SRCVERSION)]),
    ("not-found", None, (1, "", " modinfo: ERROR: Module rpcrdma not found.\n"), True,
     [pc("vendor_client_srcversion", False, NO_FILE % "modinfo: ERROR: Module rpcrdma not found.", SRCVERSION)]),
    ("rc-without-stderr", None, (1, "%s\n" % SRCVERSION, None), True,
     [pc("vendor_client_srcversion", False, NO_FILE % "rc=1", SRCVERSION)]),
    ("empty-output", None, (0, " \n", ""), True, [pc("vendor_client_srcversion", False, NO_FILE % "rc=0",
                                                     SRCVERSION)]),
    ("none-output", None, (0, None, None), True, [pc("vendor_client_srcversion", False, NO_FILE % "rc=0",
                                                     SRCVERSION)]),
    ("in-tree-sunrpc", lambda r: rm(r, nvfs.BUNDLE_PARAM), None, True,
     [pc("vendor_client_bundle", False, "/sys/module/sunrpc/parameters/nfs_bundle_version is missing: the in-tree "
         "NFS stack is running, not the vendor client"), pc("vendor_client_srcversion", True, LOADED, SRCVERSION)]),
    ("builtin", lambda r: rm(r, "/sys/module/rpcrdma/srcversion"), (0, SRCVERSION, ""), True,
     [pc("vendor_client_srcversion", False, "the loaded rpcrdma has no srcversion (built into the kernel): not the "
         "vendor's module")]),
    ("not-loaded", lambda r: os.rename(os.path.join(r, "sys/module/rpcrdma"), os.path.join(r, "sys/module/x")),
     (0, SRCVERSION, ""), True,
     [pc("vendor_client_srcversion", False, "rpcrdma is not loaded (no NFS over RDMA mount is active)")]),
]


@pytest.mark.parametrize("mutate,result,modinfo,want", [c[1:] for c in VENDOR_CASES],
                         ids=[c[0] for c in VENDOR_CASES])
def test_vendor_checks_whole(root, mutate, result, modinfo, want):
    if mutate:
        mutate(root)
    run = FakeRun(result) if result else None
    got = nvfs._vendor_checks(Sysroot(root), run, "/sbin/modinfo" if modinfo else None, True)
    repl = dict((d["name"], d) for d in want)
    assert got == [repl.get(d["name"], d) for d in HEALTHY[5:7]]


NEEDS_RDMA = ": GDS to NFS needs a mount with proto=rdma"
MOUNT_CASES = [
    ("/mnt/data/sub", True, True, "/mnt/data/sub is on /mnt/data (nfs4 10.100.0.50:/export, proto=rdma)",
     DATA_MOUNT),
    ("/link", True, True, "/mnt/data is on /mnt/data (nfs4 10.100.0.50:/export, proto=rdma)", DATA_MOUNT),
    ("/mnt/rd", True, True, "/mnt/rd is on /mnt/rd (nfs 10.0.0.9:/rd, proto=rdma)",
     mount_value("/mnt/rd", "nfs", "10.0.0.9:/rd", "rdma")),
    ("/mnt/v6", True, True, "/mnt/v6 is on /mnt/v6 (nfs4 [fd00::50]:/export, proto=rdma6)",   # an IPv6 server
     mount_value("/mnt/v6", "nfs4", "[fd00::50]:/export", "rdma6")),
    ("/mnt/tcp", True, False, "/mnt/tcp is on /mnt/tcp (nfs 10.100.0.50:/tcp, proto=tcp)" + NEEDS_RDMA,
     mount_value("/mnt/tcp", "nfs", "10.100.0.50:/tcp", "tcp")),
    ("/mnt/lus", True, False, "/mnt/lus is on /mnt/lus (lustre 10.0.0.7@o2ib:/fs, proto=rdma)" + NEEDS_RDMA,
     mount_value("/mnt/lus", "lustre", "10.0.0.7@o2ib:/fs", "rdma")),
    ("/srv", True, False, "/srv is on / (ext4 /dev/vda)" + NEEDS_RDMA, mount_value("/", "ext4", "/dev/vda", None)),
    ("/srv", False, None, "/srv is on / (ext4 /dev/vda); " + NO_NFS, mount_value("/", "ext4", "/dev/vda", None)),
]


@pytest.mark.parametrize("path,nfs_rdma,ok,reason,value", MOUNT_CASES)
def test_mount_check_whole(root, path, nfs_rdma, ok, reason, value):
    assert nvfs._mount_check(Sysroot(root), path, nfs_rdma) == pc("mount_proto_rdma", ok, reason, value)


@pytest.mark.parametrize("mountinfo,source", [("22 1 254:0 / /boot rw - ext4 /dev/vda1 rw\n", "/proc/self/mountinfo"),
                                              ("", "/proc/mounts")])
@pytest.mark.parametrize("nfs_rdma", [True, False])
def test_mount_check_without_a_mount(root, mountinfo, source, nfs_rdma):
    put(root, "/proc/self/mountinfo", mountinfo)
    put(root, "/proc/mounts", "/dev/vda1 /boot ext4 rw 0 0\n")
    reason = "no mount found for /mnt/data in %s" % source
    want = pc("mount_proto_rdma", False if nfs_rdma else None, reason)
    assert nvfs._mount_check(Sysroot(root), "/mnt/data", nfs_rdma) == want


def test_read_mounts_falls_back_to_proc_mounts(root):
    rm(root, "/proc/self/mountinfo")
    put(root, "/proc/mounts", "10.0.0.1:/e /mnt/e nfs rw,proto=rdma 0 0\n")
    assert nvfs.read_mounts(Sysroot(root)) == ([{"mount_id": None, "root": "/", "mountpoint": "/mnt/e",
                                                 "fstype": "nfs", "source": "10.0.0.1:/e",
                                                 "options": {"rw": True, "proto": "rdma"}}], "/proc/mounts")
    assert nvfs.read_mounts(Sysroot(os.path.join(root, "srv"))) == ([], "/proc/mounts")


@pytest.mark.parametrize("text,want", [
    ('{"properties": {"allow_compat_mode": false}}',
     pc("cufile_json", True, "/etc/cufile.json is valid (allow_compat_mode=false; the test transfer forces false)",
        False)),
    ('{"properties": {"allow_compat_mode": true}} // on',
     pc("cufile_json", True, "/etc/cufile.json is valid (allow_compat_mode=true; the test transfer forces false)",
        True)),
    ('{"properties": null}', pc("cufile_json", True, "/etc/cufile.json is valid (allow_compat_mode=unset; the test "
                                "transfer forces false)")),
    ("{}", pc("cufile_json", True, "/etc/cufile.json is valid (allow_compat_mode=unset; the test transfer forces "
              "false)")),
    ("[1]", pc("cufile_json", False, "/etc/cufile.json: cufile.json must hold a JSON object")),
])
def test_cufile_json_check_whole(root, text, want):
    put(root, nvfs.CUFILE_JSON, text)
    assert nvfs._cufile_json_check(Sysroot(root)) == want
