# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's small cuFile program: ctypes over libcufile and libcudart, standard library only.

``gds_verify`` writes this file into a private temporary directory and runs it as a separate process with the
node's Python, so a crash inside libcufile cannot take the module down. The program prints exactly one JSON
document on stdout (see ``run_probe``) and exits 0 whenever it could describe what happened (the JSON says whether
the transfer worked); 2 on bad arguments.

Usage::

    python cufile_probe.py --dir DIR [--size BYTES] [--gpu N] [--mode transfer|open] [--keep]
                           [--libcufile PATH] [--libcudart PATH]

``--mode open`` only opens and closes the cuFile driver (and reads its properties); ``--mode transfer`` (default)
writes a random pattern from GPU memory to a new file in DIR through cuFileWrite, checks the file's bytes with
plain reads, poisons the GPU buffer, reads the file back through cuFileRead and compares the buffer with the
pattern. Short writes and reads are continued from where they stopped; every call's return value is recorded.
The compat-mode policy comes from the environment (``CUFILE_ENV_PATH_JSON``, ``CUFILE_ALLOW_COMPAT_MODE``), which the
caller sets; the program only reports what libcufile says it uses.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import ctypes
import ctypes.util
import errno
import glob
import json
import os
import random
import sys
import time

PROBE_VERSION = 1
CUFILEOP_BASE_ERR = 5000
MAX_IO_CALLS = 256

# cufile.h CUfileOpError (5000 + n)
CUFILE_ERRORS = {
    0: "CU_FILE_SUCCESS",
    5001: "CU_FILE_DRIVER_NOT_INITIALIZED",
    5002: "CU_FILE_DRIVER_INVALID_PROPS",
    5003: "CU_FILE_DRIVER_UNSUPPORTED_LIMIT",
    5004: "CU_FILE_DRIVER_VERSION_MISMATCH",
    5005: "CU_FILE_DRIVER_VERSION_READ_ERROR",
    5006: "CU_FILE_DRIVER_CLOSING",
    5007: "CU_FILE_PLATFORM_NOT_SUPPORTED",
    5008: "CU_FILE_IO_NOT_SUPPORTED",
    5009: "CU_FILE_DEVICE_NOT_SUPPORTED",
    5010: "CU_FILE_NVFS_DRIVER_ERROR",
    5011: "CU_FILE_CUDA_DRIVER_ERROR",
    5012: "CU_FILE_CUDA_POINTER_INVALID",
    5013: "CU_FILE_CUDA_MEMORY_TYPE_INVALID",
    5014: "CU_FILE_CUDA_POINTER_RANGE_ERROR",
    5015: "CU_FILE_CUDA_CONTEXT_MISMATCH",
    5016: "CU_FILE_INVALID_MAPPING_SIZE",
    5017: "CU_FILE_INVALID_MAPPING_RANGE",
    5018: "CU_FILE_INVALID_FILE_TYPE",
    5019: "CU_FILE_INVALID_FILE_OPEN_FLAG",
    5020: "CU_FILE_DIO_NOT_SET",
    5022: "CU_FILE_INVALID_VALUE",
    5023: "CU_FILE_MEMORY_ALREADY_REGISTERED",
    5024: "CU_FILE_MEMORY_NOT_REGISTERED",
    5025: "CU_FILE_PERMISSION_DENIED",
    5026: "CU_FILE_DRIVER_ALREADY_OPEN",
    5027: "CU_FILE_HANDLE_NOT_REGISTERED",
    5028: "CU_FILE_HANDLE_ALREADY_REGISTERED",
    5029: "CU_FILE_DEVICE_NOT_FOUND",
    5030: "CU_FILE_INTERNAL_ERROR",
    5031: "CU_FILE_GETNEWFD_FAILED",
    5033: "CU_FILE_NVFS_SETUP_ERROR",
    5034: "CU_FILE_IO_DISABLED",
    5035: "CU_FILE_BATCH_SUBMIT_FAILED",
    5036: "CU_FILE_GPU_MEMORY_PINNING_FAILED",
    5037: "CU_FILE_BATCH_FULL",
    5038: "CU_FILE_ASYNC_NOT_SUPPORTED",
    5039: "CU_FILE_INTERNAL_BATCH_SETUP_ERROR",
    5040: "CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR",
    5041: "CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR",
    5042: "CU_FILE_INTERNAL_BATCH_CANCEL_ERROR",
    5043: "CU_FILE_NOMEM_ERROR",
    5044: "CU_FILE_IO_ERROR",
    5045: "CU_FILE_INTERNAL_BUF_REGISTER_ERROR",
    5046: "CU_FILE_HASH_OPR_ERROR",
    5047: "CU_FILE_INVALID_CONTEXT_ERROR",
    5048: "CU_FILE_NVFS_INTERNAL_DRIVER_ERROR",
    5049: "CU_FILE_BATCH_NOCOMPAT_ERROR",
}

# CUfileDrvProps_t.nvfs.dstatusflags bit positions
DSTATUS_FLAGS = {
    0: "lustre", 1: "wekafs", 2: "nfs", 3: "gpfs", 4: "nvme", 5: "nvmeof", 6: "scsi",
    7: "scaleflux_csd", 8: "nvmesh", 9: "beegfs", 11: "nvme_p2p", 12: "scatefs",
}
# CUfileDrvProps_t.nvfs.dcontrolflags bit positions
DCONTROL_USE_POLL_MODE = 0
DCONTROL_ALLOW_COMPAT_MODE = 1
# CUFileBoolConfigParameter_t
PARAM_ALLOW_COMPAT_MODE = 1
PARAM_FORCE_COMPAT_MODE = 2

CUDA_MEMCPY_HOST_TO_DEVICE = 1
CUDA_MEMCPY_DEVICE_TO_HOST = 2
CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1

ENV_KEYS = ("CUFILE_ENV_PATH_JSON", "CUFILE_ALLOW_COMPAT_MODE", "CUFILE_FORCE_COMPAT_MODE", "CUFILE_LOGFILE_PATH",
            "CUFILE_LOGGING_LEVEL")


def error_name(code):
    """Name of a cuFile status code (absolute value), e.g. 5001 -> CU_FILE_DRIVER_NOT_INITIALIZED."""
    code = abs(int(code))
    return CUFILE_ERRORS.get(code, "CU_FILE_ERROR_%d" % code)


class CUfileError(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("cu_err", ctypes.c_int)]


class _NvfsProps(ctypes.Structure):
    _fields_ = [("major_version", ctypes.c_uint), ("minor_version", ctypes.c_uint),
                ("poll_thresh_size", ctypes.c_size_t), ("max_direct_io_size", ctypes.c_size_t),
                ("dstatusflags", ctypes.c_uint), ("dcontrolflags", ctypes.c_uint)]


class CUfileDrvProps(ctypes.Structure):
    _fields_ = [("nvfs", _NvfsProps), ("fflags", ctypes.c_uint), ("max_device_cache_size", ctypes.c_uint),
                ("per_buffer_cache_size", ctypes.c_uint), ("max_device_pinned_mem_size", ctypes.c_uint),
                ("max_batch_io_size", ctypes.c_uint), ("max_batch_io_timeout_msecs", ctypes.c_uint),
                ("_reserved", ctypes.c_ubyte * 256)]


class _HandleUnion(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("handle", ctypes.c_void_p)]


class CUfileDescr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _HandleUnion), ("fs_ops", ctypes.c_void_p)]


def _site_dirs():
    out = []
    for p in sys.path:
        if p and os.path.isdir(p):
            out.append(p)
    return out


def library_candidates(name):
    """Paths to try for libcufile / libcudart: the loader's own answer, CUDA toolkit dirs, pip wheels."""
    found = []
    soname = ctypes.util.find_library(name)
    if soname:
        found.append(soname)
    patterns = ["/usr/local/cuda/lib64/lib%s.so*" % name,
                "/usr/local/cuda/targets/*/lib/lib%s.so*" % name,
                "/usr/local/cuda-*/lib64/lib%s.so*" % name,
                "/usr/lib/x86_64-linux-gnu/lib%s.so*" % name,
                "/usr/lib/aarch64-linux-gnu/lib%s.so*" % name,
                "/usr/lib64/lib%s.so*" % name]
    sub = {"cufile": "cufile", "cudart": "cuda_runtime"}.get(name, name)
    for d in _site_dirs():
        patterns.append(os.path.join(d, "nvidia", sub, "lib", "lib%s.so*" % name))
        patterns.append(os.path.join(d, "nvidia", "cu*", "lib", "lib%s.so*" % name))
    for pat in patterns:
        for p in sorted(glob.glob(pat), key=lambda x: (len(x), x)):
            if p not in found:
                found.append(p)
    if "lib%s.so" % name not in found:
        found.append("lib%s.so" % name)
    return found


def load_library(name, explicit=None):
    """(CDLL, path, tried) for the first candidate that loads; (None, None, tried) when none does."""
    tried = []
    for cand in ([explicit] if explicit else library_candidates(name)):
        try:
            return ctypes.CDLL(cand, use_errno=True), cand, tried
        except OSError as e:
            tried.append("%s: %s" % (cand, e))
    return None, None, tried


def make_pattern(size, seed):
    """Random bytes, reproducible from the seed (no run of zeros a lost write could fake)."""
    rnd = random.Random(seed)
    return rnd.getrandbits(8 * size).to_bytes(size, "little")


def compare(expected, actual):
    """{matches, first_mismatch, mismatched_bytes} of two byte strings (a length difference counts)."""
    if expected == actual:
        return {"matches": True, "first_mismatch": None, "mismatched_bytes": 0}
    n = min(len(expected), len(actual))
    first = None
    bad = abs(len(expected) - len(actual))
    step = 1 << 16
    for off in range(0, n, step):
        end = min(off + step, n)
        a, b = expected[off:end], actual[off:end]
        if a != b:
            for i in range(len(a)):
                if a[i] != b[i]:
                    bad += 1
                    if first is None:
                        first = off + i
    if first is None:
        first = n
    return {"matches": False, "first_mismatch": first, "mismatched_bytes": bad}


class Probe(object):
    def __init__(self, cufile, cudart):
        self.cf = cufile
        self.rt = cudart
        self.steps = []
        self._declare()

    def _declare(self):
        cf, rt = self.cf, self.rt
        for fn in ("cuFileDriverOpen", "cuFileDriverClose"):
            getattr(cf, fn).restype = CUfileError
            getattr(cf, fn).argtypes = []
        cf.cuFileHandleRegister.restype = CUfileError
        cf.cuFileHandleRegister.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(CUfileDescr)]
        cf.cuFileHandleDeregister.restype = None
        cf.cuFileHandleDeregister.argtypes = [ctypes.c_void_p]
        cf.cuFileBufRegister.restype = CUfileError
        cf.cuFileBufRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        cf.cuFileBufDeregister.restype = CUfileError
        cf.cuFileBufDeregister.argtypes = [ctypes.c_void_p]
        for fn in ("cuFileWrite", "cuFileRead"):
            getattr(cf, fn).restype = ctypes.c_ssize_t
            getattr(cf, fn).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong,
                                        ctypes.c_longlong]
        if hasattr(cf, "cuFileDriverGetProperties"):
            cf.cuFileDriverGetProperties.restype = CUfileError
            cf.cuFileDriverGetProperties.argtypes = [ctypes.POINTER(CUfileDrvProps)]
        if hasattr(cf, "cuFileGetVersion"):
            cf.cuFileGetVersion.restype = CUfileError
            cf.cuFileGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        if hasattr(cf, "cuFileGetParameterBool"):
            cf.cuFileGetParameterBool.restype = CUfileError
            cf.cuFileGetParameterBool.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_bool)]
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        rt.cudaGetErrorString.argtypes = [ctypes.c_int]
        rt.cudaSetDevice.argtypes = [ctypes.c_int]
        rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        rt.cudaFree.argtypes = [ctypes.c_void_p]
        rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        rt.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
        rt.cudaRuntimeGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        rt.cudaDriverGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        rt.cudaDeviceSynchronize.argtypes = []

    # -- recording ----------------------------------------------------------------------------
    def cufile_status(self, call, status):
        entry = {"call": call, "err": int(status.err), "name": error_name(status.err), "cu_err": int(status.cu_err)}
        self.steps.append(entry)
        return entry

    def cuda(self, call, rc):
        rc = int(rc)
        entry = {"call": call, "cuda_err": rc}
        if rc:
            entry["message"] = (self.rt.cudaGetErrorString(rc) or b"").decode("utf-8", "replace")
        self.steps.append(entry)
        return rc == 0

    # -- facts --------------------------------------------------------------------------------
    def versions(self):
        out = {}
        v = ctypes.c_int(0)
        if self.rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0:
            out["cuda_runtime"] = v.value
        if self.rt.cudaDriverGetVersion(ctypes.byref(v)) == 0:
            out["cuda_driver"] = v.value
        if hasattr(self.cf, "cuFileGetVersion"):
            st = self.cf.cuFileGetVersion(ctypes.byref(v))
            if st.err == 0:
                out["cufile"] = v.value
        return out

    def driver_properties(self):
        if not hasattr(self.cf, "cuFileDriverGetProperties"):
            return None
        props = CUfileDrvProps()
        st = self.cf.cuFileDriverGetProperties(ctypes.byref(props))
        entry = self.cufile_status("cuFileDriverGetProperties", st)
        if entry["err"]:
            return None
        flags = props.nvfs.dstatusflags
        ctl = props.nvfs.dcontrolflags
        return {
            "nvfs_version": "%d.%d" % (props.nvfs.major_version, props.nvfs.minor_version),
            "dstatusflags": flags,
            "supported": sorted(name for bit, name in DSTATUS_FLAGS.items() if flags & (1 << bit)),
            "dcontrolflags": ctl,
            "use_poll_mode": bool(ctl & (1 << DCONTROL_USE_POLL_MODE)),
            "allow_compat_mode": bool(ctl & (1 << DCONTROL_ALLOW_COMPAT_MODE)),
            "max_direct_io_size_kb": int(props.nvfs.max_direct_io_size),
            "max_device_pinned_mem_size_kb": int(props.max_device_pinned_mem_size),
        }

    def parameters(self):
        if not hasattr(self.cf, "cuFileGetParameterBool"):
            return None
        out = {}
        for key, pid in (("allow_compat_mode", PARAM_ALLOW_COMPAT_MODE),
                         ("force_compat_mode", PARAM_FORCE_COMPAT_MODE)):
            val = ctypes.c_bool(False)
            st = self.cf.cuFileGetParameterBool(pid, ctypes.byref(val))
            out[key] = bool(val.value) if st.err == 0 else None
        return out

    # -- I/O ----------------------------------------------------------------------------------
    def io_loop(self, fn, name, fh, dev, size):
        """Call cuFileWrite/cuFileRead until ``size`` bytes are done, recording every return value."""
        done, calls, error, short = 0, [], None, False
        start = time.time()
        while done < size and len(calls) < MAX_IO_CALLS:
            ctypes.set_errno(0)
            asked = size - done
            ret = int(fn(fh, dev, asked, done, done))
            calls.append(ret)
            if ret < 0:
                if ret == -1:
                    err = ctypes.get_errno()
                    error = {"errno": err, "name": errno.errorcode.get(err, str(err)), "message": os.strerror(err)}
                else:
                    error = {"err": -ret, "name": error_name(-ret)}
                break
            if ret == 0:
                error = {"name": "NO_PROGRESS", "message": "%s returned 0 with %d bytes left" % (name, size - done)}
                break
            if ret < asked:
                short = True
            done += ret
        # the wall time of the calls: a bandwidth for the validation suite (fabric_validate), not a benchmark
        return {"requested": size, "done": done, "calls": calls, "short": short, "error": error,
                "elapsed_s": time.time() - start}


def _open_file(path):
    flags = os.O_CREAT | os.O_RDWR | os.O_TRUNC
    direct = getattr(os, "O_DIRECT", 0)
    try:
        return os.open(path, flags | direct, 0o600), bool(direct), None
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        return os.open(path, flags, 0o600), False, "O_DIRECT refused by the file system (%s)" % e.strerror


def _read_plain(path, size):
    with open(path, "rb") as f:
        return f.read(size + 1)


def run_probe(directory, size=16 << 20, gpu=0, mode="transfer", keep=False, libcufile=None, libcudart=None,
              seed=None):
    """Run the probe in this process and return its report (a dict; see the module docstring)."""
    report = {"probe_version": PROBE_VERSION, "mode": mode, "size": size, "gpu": gpu,
              "env": dict((k, os.environ[k]) for k in ENV_KEYS if k in os.environ),
              "steps": [], "ok": False, "error": None}
    cf, cf_path, cf_tried = load_library("cufile", libcufile)
    rt, rt_path, rt_tried = load_library("cudart", libcudart)
    report["libcufile"], report["libcudart"] = cf_path, rt_path
    if cf is None or rt is None:
        report["error"] = "cannot load %s" % ("libcufile" if cf is None else "libcudart")
        report["load_errors"] = cf_tried if cf is None else rt_tried
        return report
    probe = Probe(cf, rt)
    report["steps"] = probe.steps
    report["versions"] = probe.versions()
    count = ctypes.c_int(0)
    if not probe.cuda("cudaGetDeviceCount", rt.cudaGetDeviceCount(ctypes.byref(count))):
        report["error"] = "no usable CUDA device"
        return report
    report["gpu_count"] = count.value
    if gpu >= count.value:
        report["error"] = "GPU index %d out of range (%d GPUs)" % (gpu, count.value)
        return report
    if not probe.cuda("cudaSetDevice", rt.cudaSetDevice(gpu)):
        report["error"] = "cudaSetDevice(%d) failed" % gpu
        return report
    opened = probe.cufile_status("cuFileDriverOpen", cf.cuFileDriverOpen())
    report["driver_open"] = opened
    report["parameters"] = probe.parameters()
    if opened["err"] == 0:
        report["driver_properties"] = probe.driver_properties()
    if mode == "open":
        if opened["err"] == 0:
            probe.cufile_status("cuFileDriverClose", cf.cuFileDriverClose())
        report["ok"] = opened["err"] == 0
        return report
    try:
        _transfer(probe, report, directory, size, keep, seed)
    finally:
        if opened["err"] == 0:
            probe.cufile_status("cuFileDriverClose", cf.cuFileDriverClose())
    return report


def _transfer(probe, report, directory, size, keep, seed):
    cf, rt = probe.cf, probe.rt
    seed = seed if seed is not None else random.SystemRandom().getrandbits(32)
    pattern = make_pattern(size, seed)
    report["seed"] = seed
    path = os.path.join(directory, ".gpufabric-gds-verify-%d-%d.bin" % (os.getpid(), seed))
    report["file"] = path
    dev = ctypes.c_void_p()
    if not probe.cuda("cudaMalloc", rt.cudaMalloc(ctypes.byref(dev), size)):
        report["error"] = "cudaMalloc of %d bytes failed" % size
        return
    fd = None
    fh = ctypes.c_void_p()
    handle_ok = buf_ok = False
    try:
        host = ctypes.create_string_buffer(pattern, size)
        if not probe.cuda("cudaMemcpy(H2D)", rt.cudaMemcpy(dev, host, size, CUDA_MEMCPY_HOST_TO_DEVICE)):
            report["error"] = "cannot copy the pattern to the GPU"
            return
        fd, direct, note = _open_file(path)
        report["o_direct"] = direct
        if note:
            report["o_direct_note"] = note
        descr = CUfileDescr()
        descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD
        descr.handle.fd = fd
        reg = probe.cufile_status("cuFileHandleRegister",
                                  cf.cuFileHandleRegister(ctypes.byref(fh), ctypes.byref(descr)))
        report["handle_register"] = reg
        if reg["err"]:
            report["error"] = "cuFileHandleRegister failed: %s" % reg["name"]
            return
        handle_ok = True
        buf = probe.cufile_status("cuFileBufRegister", cf.cuFileBufRegister(dev, size, 0))
        report["buf_register"] = buf
        buf_ok = buf["err"] == 0
        report["write"] = probe.io_loop(cf.cuFileWrite, "cuFileWrite", fh, dev, size)
        os.fsync(fd)
        report["file_check"] = compare(pattern, _read_plain(path, size))
        probe.cuda("cudaMemset", rt.cudaMemset(dev, 0x5A, size))
        probe.cuda("cudaDeviceSynchronize", rt.cudaDeviceSynchronize())
        report["read"] = probe.io_loop(cf.cuFileRead, "cuFileRead", fh, dev, size)
        back = ctypes.create_string_buffer(size)
        if probe.cuda("cudaMemcpy(D2H)", rt.cudaMemcpy(back, dev, size, CUDA_MEMCPY_DEVICE_TO_HOST)):
            report["gpu_check"] = compare(pattern, back.raw)
        else:
            report["gpu_check"] = {"matches": False, "first_mismatch": None, "mismatched_bytes": None}
        report["data_matched"] = bool(report["file_check"]["matches"] and report["gpu_check"]["matches"])
        report["ok"] = bool(report["data_matched"] and report["write"]["error"] is None
                            and report["read"]["error"] is None)
    finally:
        if buf_ok:
            probe.cufile_status("cuFileBufDeregister", cf.cuFileBufDeregister(dev))
        if handle_ok:
            cf.cuFileHandleDeregister(fh)
        if fd is not None:
            os.close(fd)
            if not keep:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        rt.cudaFree(dev)


def main(argv=None):
    parser = argparse.ArgumentParser(description="cuFile write/read-back probe (prints JSON)")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--size", type=int, default=16 << 20)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--mode", choices=("transfer", "open"), default="transfer")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--libcufile")
    parser.add_argument("--libcudart")
    args = parser.parse_args(argv)
    if args.size <= 0 or args.gpu < 0 or not os.path.isdir(args.dir):
        sys.stderr.write("bad arguments: --size must be > 0, --gpu >= 0, --dir an existing directory\n")
        return 2
    try:
        report = run_probe(args.dir, args.size, args.gpu, args.mode, args.keep, args.libcufile, args.libcudart,
                           args.seed)
    except Exception as e:  # report, never a traceback instead of JSON
        report = {"probe_version": PROBE_VERSION, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
