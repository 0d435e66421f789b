# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-fs and cuFile, the proof: GDS preconditions, a counted test transfer and its verdict.

Public API (plain Python; every kernel path through a ``Sysroot``; commands through a runner
``run(argv, env=None) -> (rc, out, err)``):

``preconditions(sysroot, path, run=None, modinfo=None, storage_module='rpcrdma', nfs_rdma=True) -> list``
    One ``{name, status: ok|fail|skip, ok, reason, value}`` per precondition. The storage module check reads
    ``/proc/driver/nvidia-fs/modules`` while it holds ``/dev/nvidia-fs<N>`` open (``nvfs_modules.read_held``):
    nvidia-fs lists the storage modules only while a device is open, so an idle healthy node shows none.
``verify(...) -> dict``: preconditions, then (unless ``check_mode``) the counted test transfer with compat mode
    off and the verdict ``gds_active`` with ``reasons`` (plain sentences).
``verdict(transfer, before, after, expected, nvfs_loaded) -> (active, reasons, warnings, compat_suspected)``.

The parsers (stats, version, mounts, cufile.json) live in ``nvfs_parse`` and the modules file in ``nvfs_modules``;
their names are re-exported here (``nvfs.parse_stats``, ``nvfs.parse_modules``, ``nvfs.STATS``...).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.discovery.nvfs_modules import parse_modules  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import (  # noqa: F401  # pylint: disable=unused-import
    BUNDLE_PARAM, COUNTER_KEYS, CUFILE_JSON, MIB, MODULES, NVFS_PROC, RW_STATS_PARAM, STATS, VERSION, GdsError,
    counter_delta, counters, cufile_config, load_cufile_json, mount_for, mount_proto, parse_mountinfo,
    parse_proc_mounts, parse_stats, parse_version, render_cufile_json, strip_json_comments)
from ansible_collections.gpufabric.node.plugins.module_utils.host import files
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.validate import gds as gds_out
from ansible_collections.gpufabric.node.plugins.module_utils.validate import runs as validate_runs

MAX_SIZE_MIB = 4096
PROBE_FILE = "cufile_probe.py"


# ------------------------------------------------------------------------------------------------
# preconditions


def _pc(name, ok, reason, value=None):
    status = "skip" if ok is None else ("ok" if ok else "fail")
    return {"name": name, "status": status, "ok": ok, "reason": reason, "value": value}


def validate(path_real, size_mib, gpu):
    if not isinstance(size_mib, int) or isinstance(size_mib, bool) or size_mib < 1:
        raise GdsError("size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)")
    if size_mib > MAX_SIZE_MIB:
        raise GdsError("size_mib %d is too large (at most %d MiB for a verification transfer)"
                       % (size_mib, MAX_SIZE_MIB))
    if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
        raise GdsError("gpu must be a GPU index (0 or more)")
    if not os.path.isdir(path_real):
        raise GdsError("path %s is not a directory" % path_real)


def read_mounts(sr):
    text = sr.read_raw("/proc/self/mountinfo")
    if text:
        return parse_mountinfo(text), "/proc/self/mountinfo"
    text = sr.read_raw("/proc/mounts")
    return parse_proc_mounts(text), "/proc/mounts"


def preconditions(sysroot, path, run=None, modinfo=None, storage_module="rpcrdma", nfs_rdma=True, facts=None):
    """Each GDS precondition with its status and a reason a platform engineer understands."""
    sr = sysroot if sysroot is not None else Sysroot()
    facts = facts or topology.discover(sr, ["gpu_driver", "iommu", "nvidia_fs"])
    out = []
    drv = facts["gpu_driver"]
    if drv["flavour"] == "open":
        out.append(_pc("gpu_driver_open", True, "the NVIDIA open kernel module%s is loaded"
                       % (" %s" % drv["version"] if drv["version"] else ""), drv["flavour"]))
    elif drv["flavour"] == "proprietary":
        out.append(_pc("gpu_driver_open", False, "the proprietary NVIDIA kernel module is loaded: GDS 2.17.5 and "
                       "later need the open kernel module", drv["flavour"]))
    else:
        out.append(_pc("gpu_driver_open", False, "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is "
                       "missing)", drv["flavour"]))
    nv = facts["nvidia_fs"]
    if nv["loaded"]:
        ver = nv["version"] or nv["module_version"]
        out.append(_pc("nvidia_fs_loaded", True, "nvidia-fs%s is loaded" % (" %s" % ver if ver else ""), ver))
    else:
        out.append(_pc("nvidia_fs_loaded", False, "nvidia-fs is not loaded (%s is missing): with the GPU Operator "
                       "set gds.enabled in the ClusterPolicy" % NVFS_PROC))
    stats_text = sr.read_raw(STATS)
    if not nv["loaded"]:
        out.append(_pc("nvidia_fs_stats", False, "nvidia-fs is not loaded, so there are no counters to read"))
    elif stats_text is None:
        out.append(_pc("nvidia_fs_stats", False, "%s cannot be read (nvidia-fs built without CONFIG_NVFS_STATS?)"
                       % STATS))
    elif sr.read(RW_STATS_PARAM) is None:
        out.append(_pc("nvidia_fs_stats", False, "%s is missing: the read/write counters cannot be turned on"
                       % RW_STATS_PARAM))
    else:
        out.append(_pc("nvidia_fs_stats", True, "%s is readable and rw_stats_enabled=%s" %
                       (STATS, sr.read(RW_STATS_PARAM)), sr.read(RW_STATS_PARAM)))
    if not nv["loaded"]:
        out.append(_pc("nvidia_fs_storage_module", False, "nvidia-fs is not loaded, so no storage module is hooked "
                       "into it"))
    else:
        # nvidia-fs lists the storage modules only while a device is open (nvfs_open/nvfs_close): hold one
        held = nvfs_modules.read_held(sr)
        ok, reason = nvfs_modules.storage_check(held, storage_module)
        out.append(_pc("nvidia_fs_storage_module", ok, reason,
                       {"device": held["device"], "held": held["held"], "listed": held["modules"],
                        "version": held["modules"].get(storage_module)}))
    mode = facts["iommu"]["mode"]
    if mode in ("identity", "off"):
        what = "in passthrough (identity) mode" if mode == "identity" else "off"
        out.append(_pc("iommu_mode", True, "the IOMMU is %s" % what, mode))
    else:
        out.append(_pc("iommu_mode", False, "the IOMMU is in %s mode: nvidia-fs rejects transfers (DMA address "
                       "chunks 4096 != GPU physical address chunks) and writes fail with EIO; boot with iommu=pt"
                       % mode, mode))
    out.extend(_vendor_checks(sr, run, modinfo, nfs_rdma))
    out.append(_mount_check(sr, path, nfs_rdma))
    out.append(_cufile_json_check(sr))
    return out


def _vendor_checks(sr, run, modinfo, nfs_rdma):
    if not nfs_rdma:
        return [_pc("vendor_client_bundle", None, "not an NFS over RDMA check (nfs_rdma=false)"),
                _pc("vendor_client_srcversion", None, "not an NFS over RDMA check (nfs_rdma=false)")]
    out = []
    bundle = sr.read(BUNDLE_PARAM)
    if bundle is not None:
        out.append(_pc("vendor_client_bundle", True, "the vendor NFS client is loaded (nfs_bundle_version %s)" % bundle,
                       bundle))
    else:
        out.append(_pc("vendor_client_bundle", False, "%s is missing: the in-tree NFS stack is running, not the "
                       "vendor client" % BUNDLE_PARAM))
    live = sr.read("/sys/module/rpcrdma/srcversion")
    if not sr.isdir("/sys/module/rpcrdma"):
        out.append(_pc("vendor_client_srcversion", False, "rpcrdma is not loaded (no NFS over RDMA mount is active)"))
    elif live is None:
        out.append(_pc("vendor_client_srcversion", False, "the loaded rpcrdma has no srcversion (built into the "
                       "kernel): not the vendor's module"))
    elif modinfo is None or run is None:
        out.append(_pc("vendor_client_srcversion", True, "rpcrdma is loaded (srcversion %s); modinfo is not available, "
                       "so it is not compared with the installed file" % live, live))
    else:
        rc, so, se = run([modinfo, "-F", "srcversion", "rpcrdma"])
        want = (so or "").strip().splitlines()[0].strip() if rc == 0 and (so or "").strip() else None
        if want is None:
            out.append(_pc("vendor_client_srcversion", False, "modinfo finds no rpcrdma module file for the running "
                           "kernel (%s)" % ((se or "").strip() or "rc=%d" % rc), live))
        elif want == live:
            out.append(_pc("vendor_client_srcversion", True, "the loaded rpcrdma is the installed file (srcversion %s)"
                           % live, live))
        else:
            out.append(_pc("vendor_client_srcversion", False, "the loaded rpcrdma has srcversion %s, the installed "
                           "file %s: the module in memory is not the one installed (reboot pending, or in-tree module "
                           "loaded)" % (live, want), live))
    return out


def _mount_check(sr, path, nfs_rdma):
    mounts, source = read_mounts(sr)
    real = sr.realpath(path)
    m = mount_for(mounts, real)
    if m is None:
        return _pc("mount_proto_rdma", False if nfs_rdma else None, "no mount found for %s in %s" % (real, source))
    proto = mount_proto(m)
    value = {"mountpoint": m["mountpoint"], "fstype": m["fstype"], "source": m["source"], "proto": proto}
    desc = "%s is on %s (%s %s%s)" % (real, m["mountpoint"], m["fstype"], m["source"],
                                      ", proto=%s" % proto if proto else "")
    if not nfs_rdma:
        return _pc("mount_proto_rdma", None, desc + "; not an NFS over RDMA check (nfs_rdma=false)", value)
    if m["fstype"] in ("nfs", "nfs4") and proto in ("rdma", "rdma6"):   # rdma6: NFS over RDMA to an IPv6 server
        return _pc("mount_proto_rdma", True, desc, value)
    return _pc("mount_proto_rdma", False, desc + ": GDS to NFS needs a mount with proto=rdma", value)


def _cufile_json_check(sr):
    text = sr.read_raw(CUFILE_JSON)
    if text is None:
        return _pc("cufile_json", True, "%s is absent: cuFile uses its defaults" % CUFILE_JSON)
    try:
        cfg = load_cufile_json(text)
    except GdsError as e:
        return _pc("cufile_json", False, "%s: %s" % (CUFILE_JSON, e))
    compat = (cfg.get("properties") or {}).get("allow_compat_mode")
    return _pc("cufile_json", True, "%s is valid (allow_compat_mode=%s; the test transfer forces false)"
               % (CUFILE_JSON, "unset" if compat is None else str(compat).lower()), compat)


# ------------------------------------------------------------------------------------------------
# transfer


def probe_source():
    """Source text of the cuFile program (works from a file and from the AnsiballZ zip)."""
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery import cufile_probe
    return files.module_source(cufile_probe)


def probe_env(config_path, log_path):
    """Environment for the test transfer: compat mode off through the config file and the variables."""
    return {"CUFILE_ENV_PATH_JSON": config_path, "CUFILE_ALLOW_COMPAT_MODE": "false",
            "CUFILE_FORCE_COMPAT_MODE": "false", "CUFILE_LOGFILE_PATH": log_path}


def _run_probe(run, python, workdir, directory, size, gpu, env):
    script = os.path.join(workdir, PROBE_FILE)
    with open(script, "w") as f:
        f.write(probe_source())
    argv = [python, script, "--dir", directory, "--size", str(size), "--gpu", str(gpu)]
    rc, out, err = run(argv, env)
    return parse_probe_output(rc, out, err)


def parse_probe_output(rc, out, err):
    """The probe's JSON report (its last JSON line, ``validate.runs.probe_report``), or a report that says why
    there is none (crash, no JSON)."""
    doc = validate_runs.probe_report(rc, out)
    if rc != 0 or doc is None:
        why = "the cuFile test program exited with rc=%d" % rc
        if rc < 0:
            why += " (killed by signal %d)" % -rc
        elif doc is None:
            why += " and printed no report"
        return {"method": "probe", "ok": False, "error": why, "rc": rc, "stderr": (err or "")[-2000:],
                "data_matched": False}
    doc["method"] = "probe"
    doc["rc"] = rc
    if err:
        doc["stderr"] = err[-2000:]
    return doc


def parse_gdsio(rc, out, err, size):
    """One gdsio run -> {requested, done, xfer_type, error}; the summary line is read by ``validate.gds``."""
    runs = gds_out.parse_gdsio(out or "")["runs"]
    m = runs[0] if runs else None
    res = {"requested": size, "done": 0, "calls": [], "short": False, "xfer_type": None, "error": None}
    if m:
        res["xfer_type"] = m["xfer_type"]
        res["done"] = min(m["done_bytes"], size)
        res["short"] = m["done_bytes"] < m["requested_bytes"]
    text = (out or "") + (err or "")
    if rc != 0 or not m or re.search(r"(?i)verif\w*\s+(failed|error|mismatch)|data mismatch", text):
        res["error"] = {"name": "GDSIO", "message": (text.strip().splitlines() or ["rc=%d" % rc])[-1], "rc": rc}
    return res


def _run_gdsio(run, gdsio, workdir, size, gpu, env):
    data_dir = os.path.join(workdir, "data")
    os.mkdir(data_dir)
    base = [gdsio, "-D", data_dir, "-d", str(gpu), "-w", "1", "-s", "%dM" % (size // MIB), "-i", "1M", "-x", "0",
            "-V"]
    rep = {"method": "gdsio", "ok": False, "error": None}
    rc, out, err = run(base + ["-I", "1"], env)
    rep["write"] = parse_gdsio(rc, out, err, size)
    rep["write_output"] = ((out or "") + (err or ""))[-2000:]
    if rep["write"]["error"] is None:
        rc, out, err = run(base + ["-I", "0"], env)
        rep["read"] = parse_gdsio(rc, out, err, size)
        rep["read_output"] = ((out or "") + (err or ""))[-2000:]
    else:
        rep["read"] = {"requested": size, "done": 0, "calls": [], "short": False, "error": {"name": "SKIPPED"}}
    ok = (rep["write"]["error"] is None and rep["read"]["error"] is None and rep["write"]["done"] == size
          and rep["read"]["done"] == size)
    rep["data_matched"] = ok
    rep["file_check"] = rep["gpu_check"] = {"matches": ok, "first_mismatch": None, "mismatched_bytes": None}
    rep["ok"] = ok
    return rep


def expected_movement(size):
    """The least nvidia-fs must count for one write and one read of ``size`` bytes."""
    return {"writes": 1, "write_mib": size // MIB, "reads": 1, "read_mib": size // MIB}


def _fmt_cf(step):
    return "%s (%d)" % (step.get("name"), step.get("err", 0))


def verdict(transfer, before, after, expected, nvfs_loaded):
    """(gds_active, reasons, warnings, compat_fallback_suspected) from the transfer and the counter snapshots."""
    reasons, warns = [], []
    t = transfer or {}
    data_ok = bool(t.get("data_matched"))
    opened = t.get("driver_open")
    if opened and opened.get("err"):
        reasons.append("cuFileDriverOpen failed with compat mode off: %s." % _fmt_cf(opened))
    reg = t.get("handle_register")
    if reg and reg.get("err"):
        reasons.append("cuFileHandleRegister failed for the test file: %s." % _fmt_cf(reg))
    if t.get("error") and not (opened and opened.get("err")) and not (reg and reg.get("err")):
        reasons.append("The cuFile test transfer did not complete: %s." % t["error"])
    for op, call in (("write", "cuFileWrite"), ("read", "cuFileRead")):
        io = t.get(op)
        if not io:
            continue
        if io.get("done", 0) < io.get("requested", 0):
            e = io.get("error") or {}
            why = e.get("name") or ""
            if e.get("message"):
                why = "%s: %s" % (why, e["message"]) if why else e["message"]
            reasons.append("%s moved %d of %d bytes%s." % (call, io.get("done", 0), io["requested"],
                                                           " (%s)" % why if why else ""))
        elif io.get("short"):
            warns.append("%s returned short counts %s; the remaining bytes were moved by further calls."
                         % (call, io.get("calls")))
    for check, op, what in (("file_check", "write", "file written by cuFileWrite"),
                            ("gpu_check", "read", "GPU buffer read back by cuFileRead")):
        c, io = t.get(check), t.get(op) or {}
        if c and not c.get("matches") and io.get("done", 0) >= io.get("requested", 1):
            if c.get("mismatched_bytes"):
                reasons.append("The %s differs from the pattern: %d bytes differ, the first at offset %d."
                               % (what, c["mismatched_bytes"], c["first_mismatch"] or 0))
            else:
                reasons.append("The %s does not match the pattern." % what)
    delta = counter_delta(before, after) if before and after else None
    counters_ok = False
    compat = False
    io_errors = None
    if not nvfs_loaded:
        if data_ok:
            compat = True
            reasons.append("The data matched although nvidia-fs is not loaded: cuFile moved it with POSIX I/O "
                           "(compatibility mode) despite allow_compat_mode=false; check CUFILE_FORCE_COMPAT_MODE and "
                           "the cufile.json in use.")
        else:
            reasons.append("nvidia-fs is not loaded, so no transfer can bypass host memory.")
    elif delta is None or delta.get("writes") is None or delta.get("reads") is None:
        reasons.append("The nvidia-fs read/write counters are not available (%s prints none: rw_stats_enabled is "
                       "off or could not be turned on): the transfer cannot be attributed to nvidia-fs." % STATS)
    else:
        short_of = []
        for key, label in (("writes", "writes n"), ("write_mib", "writeMiB"), ("reads", "reads n"),
                           ("read_mib", "readMiB")):
            if (delta.get(key) or 0) < expected[key]:
                short_of.append("%s moved by %d, at least %d expected" % (label, delta.get(key) or 0, expected[key]))
        counters_ok = not short_of
        if short_of:
            reasons.append("The nvidia-fs counters did not move enough: %s." % "; ".join(short_of))
            moved = any((delta.get(k) or 0) > 0 for k in ("writes", "reads", "write_mib", "read_mib"))
            if data_ok and not moved:
                compat = True
                reasons.append("The data matched while nvidia-fs counted none of it: cuFile fell back to POSIX I/O "
                               "(compatibility mode) although allow_compat_mode=false.")
        errs = (delta.get("read_err") or 0) + (delta.get("write_err") or 0)
        if errs:
            io_errors = "nvidia-fs counted %d read/write errors during the test transfer (see dmesg)." % errs
    active = bool(data_ok and counters_ok and not t.get("error"))
    if io_errors:
        # a warning when the transfer is proven anyway (the counters are the whole device's)
        (warns if active else reasons).append(io_errors)
    if not active and not reasons:
        reasons.append("The test transfer did not verify its data.")
    return active, (reasons if not active else []), warns, compat


def verify(sysroot, path, size_mib=16, gpu=0, run=None, python=None, modinfo=None, method="auto", gdsio=None,
           storage_module="rpcrdma", nfs_rdma=True, check_mode=False, tmp_root=None):
    """Preconditions, then (unless check mode) the counted transfer with compat mode off, and the verdict."""
    sr = sysroot if sysroot is not None else Sysroot()
    real = sr.path(path)
    validate(real, size_mib, gpu)
    if method not in ("auto", "probe", "gdsio"):
        raise GdsError("method must be auto, probe or gdsio")
    if method == "gdsio" and not gdsio:
        raise GdsError("method=gdsio but gdsio was not found")
    facts = topology.discover(sr, ["gpu_driver", "iommu", "nvidia_fs"])
    pcs = preconditions(sr, path, run, modinfo, storage_module, nfs_rdma, facts)
    failed = [p for p in pcs if p["status"] == "fail"]
    size = size_mib * MIB
    result = {"path": path, "size": size, "gpu": gpu, "preconditions": pcs, "preconditions_ok": not failed,
              "gds_active": False, "reasons": [], "warnings": [], "compat_fallback_suspected": False,
              "transfer": None, "counters": None, "expected": expected_movement(size),
              "rw_stats_enabled": None, "facts": facts}
    if check_mode:
        result["reasons"] = ["Check mode: no test transfer was made; GDS is not proven."] + \
            ["Precondition %s failed: %s." % (p["name"], p["reason"]) for p in failed]
        return result
    chosen = "gdsio" if (method == "gdsio" or (method == "auto" and gdsio)) else "probe"
    result["method"] = chosen
    nvfs_loaded = facts["nvidia_fs"]["loaded"]
    prev = sr.read(RW_STATS_PARAM)
    rw = {"before": prev, "during": prev, "restored": None, "error": None}
    result["rw_stats_enabled"] = rw
    workdir = tempfile.mkdtemp(prefix=".gpufabric-gds-", dir=tmp_root or real)
    before = after = None
    try:
        if prev is not None and prev != "1":
            try:
                sr.write_attr(RW_STATS_PARAM, "1")
                rw["during"] = sr.read(RW_STATS_PARAM)
            except (IOError, OSError) as e:
                rw["error"] = "cannot enable rw_stats_enabled: %s" % e
        before = counters(parse_stats(sr.read_raw(STATS)))
        base = {}
        text = sr.read_raw(CUFILE_JSON)
        if text is not None:
            try:
                base = load_cufile_json(text)
            except GdsError:
                base = {}
        cfg_path = os.path.join(workdir, "cufile.json")
        with open(cfg_path, "w") as f:
            f.write(render_cufile_json(cufile_config(base, allow_compat_mode=False, log_dir=workdir)))
        log_path = os.path.join(workdir, "cufile.log")
        env = probe_env(cfg_path, log_path)
        if chosen == "gdsio":
            transfer = _run_gdsio(run, gdsio, workdir, size, gpu, env)
        else:
            transfer = _run_probe(run, python, workdir, real, size, gpu, env)
        after = counters(parse_stats(sr.read_raw(STATS)))
        transfer["cufile_log_tail"] = _log_tail(workdir)
        result["transfer"] = transfer
    finally:
        if prev is not None and rw["during"] != prev:
            try:
                sr.write_attr(RW_STATS_PARAM, prev)
                rw["restored"] = sr.read(RW_STATS_PARAM) == prev
            except (IOError, OSError) as e:
                rw["restored"] = False
                rw["error"] = "cannot restore rw_stats_enabled=%s: %s" % (prev, e)
        shutil.rmtree(workdir, ignore_errors=True)
    result["counters"] = {"before": before, "after": after,
                          "delta": counter_delta(before, after) if before and after else None}
    active, reasons, warns, compat = verdict(result["transfer"], before, after, result["expected"], nvfs_loaded)
    if rw["error"]:
        warns.append(rw["error"])
    if not active:
        reasons.extend("Precondition %s failed: %s." % (p["name"], p["reason"]) for p in failed)
    result.update(gds_active=active, reasons=reasons, warnings=warns, compat_fallback_suspected=compat)
    return result


def _log_tail(workdir, limit=40):
    lines = []
    for name in sorted(os.listdir(workdir)):
        if name.endswith(".log"):
            try:
                with open(os.path.join(workdir, name), "r") as f:
                    lines.extend(f.read().splitlines())
            except (IOError, OSError, UnicodeDecodeError):
                continue
    return lines[-limit:]
