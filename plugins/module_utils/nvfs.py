# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-fs and cuFile: parsers, GDS preconditions, a counted test transfer and its verdict.

Public API (plain Python; every kernel path through a ``Sysroot``; commands through a runner
``run(argv, env=None) -> (rc, out, err)``):

``parse_stats(text) -> dict``
    ``/proc/driver/nvidia-fs/stats`` (format of nvidia-fs ``nvfs-stat.c``): header facts, one dict per counter line
    (``reads``, ``writes``, ``batches``, ``sparse_reads``, ``mmap``, ``bar1_map``, ``error``, ``ops``; the second
    ``Reads``/``Writes`` line goes to ``read_perf``/``write_perf``) and ``gpus``. With ``rw_stats_enabled=0`` nvidia-fs
    prints no ``n=``/``ok=``/``readMiB=``: those keys are then absent and ``counters(...)`` gives ``None`` for them.
``parse_modules(text) -> {name: version}``, ``parse_version(text) -> 'major.minor' | None``.
``counters(stats)``, ``counter_delta(before, after)``: the read/write counters a transfer moves.
``parse_mountinfo(text)``, ``parse_proc_mounts(text)``, ``mount_for(mounts, path)``, ``mount_proto(entry)``.
``strip_json_comments(text)``, ``cufile_config(base, allow_compat_mode, properties, log_dir)``,
``render_cufile_json(config)``: cufile.json as JSON (NVIDIA's sample carries ``//`` comments; we write clean JSON).
``preconditions(sysroot, path, run=None, modinfo=None, storage_module='rpcrdma', nfs_rdma=True) -> list``
    One ``{name, status: ok|fail|skip, ok, reason, value}`` per precondition.
``verify(...) -> dict``: preconditions, then (unless ``check_mode``) the counted test transfer with compat mode
    off and the verdict ``gds_active`` with ``reasons`` (plain sentences).
``verdict(transfer, before, after, expected, nvfs_loaded) -> (active, reasons, warnings, compat_suspected)``.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils import topology
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

NVFS_PROC = "/proc/driver/nvidia-fs"
STATS = NVFS_PROC + "/stats"
MODULES = NVFS_PROC + "/modules"
VERSION = NVFS_PROC + "/version"
RW_STATS_PARAM = "/sys/module/nvidia_fs/parameters/rw_stats_enabled"
BUNDLE_PARAM = "/sys/module/sunrpc/parameters/nfs_bundle_version"
CUFILE_JSON = "/etc/cufile.json"
MIB = 1 << 20
MAX_SIZE_MIB = 4096
PROBE_FILE = "cufile_probe.py"


class GdsError(ValueError):
    """Bad input to the GDS verification (the module turns it into fail_json)."""


# ------------------------------------------------------------------------------------------------
# parsers

_KV = re.compile(r"([A-Za-z0-9_\-]+(?:\([^)]*\))?)=(-?\d+)")
_GPU_LINE = re.compile(r"^GPU\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+uuid:\s*([0-9a-fA-F-]+)\s*:"
                       r"\s*(.*)$")
_LINE_KEYS = {"reads": "reads", "writes": "writes", "batches": "batches", "sparse reads": "sparse_reads",
              "mmap": "mmap", "bar1-map": "bar1_map", "error": "error", "ops": "ops"}


def _kv(text):
    out = {}
    for key, val in _KV.findall(text):
        out[key.replace("-", "_")] = int(val)
    return out


def parse_stats(text):
    """Parse /proc/driver/nvidia-fs/stats; ``{}`` for empty or missing text."""
    out = {"gpus": []}
    if not text:
        return {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _GPU_LINE.match(line)
        if m:
            entry = {"bdf": m.group(1).lower(), "uuid": m.group(2).lower()}
            for k, v in _kv(m.group(3)).items():
                entry[{"Registered_MiB": "registered_mib", "Cache_MiB": "cache_mib",
                       "max_pinned_MiB": "max_pinned_mib", "cross_root_port(%)": "cross_root_port_pct"}.get(k, k)] = v
            out["gpus"].append(entry)
            continue
        if line.startswith("GDS Version:"):
            out["gds_version"] = line.split(":", 1)[1].strip()
            continue
        m = re.match(r"^NVFS statistics\(ver:\s*([^)]+)\)", line)
        if m:
            out["stats_version"] = m.group(1).strip()
            continue
        m = re.match(r"^NVFS Driver\(version:\s*([^)]+)\)", line)
        if m:
            out["driver_version"] = m.group(1).strip()
            continue
        m = re.match(r"^Mellanox PeerDirect Supported:\s*(\S+)", line)
        if m:
            out["peerdirect_supported"] = m.group(1) == "True"
            continue
        m = re.match(r"^IO stats:\s*(\w+),\s*peer IO stats:\s*(\w+)", line)
        if m:
            out["io_stats_enabled"] = m.group(1) == "Enabled"
            out["peer_io_stats_enabled"] = m.group(2) == "Enabled"
            continue
        m = re.match(r"^Logging level:\s*(\S+)", line)
        if m:
            out["logging_level"] = m.group(1)
            continue
        m = re.match(r"^Active Shadow-Buffer \(MiB\):\s*(\d+)", line)
        if m:
            out["active_shadow_buffer_mib"] = int(m.group(1))
            continue
        m = re.match(r"^Active Process:\s*(\d+)", line)
        if m:
            out["active_process"] = int(m.group(1))
            continue
        name, sep, rest = line.partition(":")
        key = _LINE_KEYS.get(name.strip().lower())
        if not sep or key is None:
            continue
        values = _kv(rest)
        if key in ("reads", "writes") and ("Bandwidth(MiB/s)" in values or "Avg_Latency(usec)" in values):
            out[key[:-1] + "_perf"] = values
        else:
            out.setdefault(key, {}).update(values)
    return out


def parse_modules(text):
    """``rpcrdma: 4.0.35`` lines of /proc/driver/nvidia-fs/modules -> {name: version}."""
    out = {}
    for line in (text or "").splitlines():
        name, sep, ver = line.partition(":")
        if sep and name.strip():
            out[name.strip()] = ver.strip()
    return out


def parse_version(text):
    """``version: 2.22`` (/proc/driver/nvidia-fs/version) -> '2.22'."""
    m = re.search(r"version:\s*(\S+)", text or "")
    return m.group(1) if m else None


COUNTER_KEYS = (("reads", "n", "reads"), ("reads", "ok", "reads_ok"), ("reads", "err", "read_err"),
                ("reads", "readMiB", "read_mib"), ("reads", "io_state_err", "read_io_state_err"),
                ("writes", "n", "writes"), ("writes", "ok", "writes_ok"), ("writes", "err", "write_err"),
                ("writes", "writeMiB", "write_mib"), ("writes", "io_state_err", "write_io_state_err"))


def counters(stats):
    """Flat read/write counters of parsed stats; ``None`` for those nvidia-fs did not print."""
    out = {}
    for line, key, name in COUNTER_KEYS:
        out[name] = (stats.get(line) or {}).get(key)
    return out


def counter_delta(before, after):
    """after - before per counter; ``None`` where either side lacks it. Counters are reset by a write to stats:
    a negative difference (reset during the transfer) is reported as the after value."""
    out = {}
    for name in before:
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            out[name] = None
        else:
            out[name] = b - a if b >= a else b
    return out


def _unescape_mount(text):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text):
    """/proc/self/mountinfo -> [{mount_id, mountpoint, root, fstype, source, options: {k: v}}] in file order."""
    out = []
    for line in (text or "").splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 2:
            continue
        opts = _options(lf[5])
        opts.update(_options(rf[2] if len(rf) > 2 else ""))
        out.append({"mount_id": int(lf[0]) if lf[0].isdigit() else lf[0], "root": _unescape_mount(lf[3]),
                    "mountpoint": _unescape_mount(lf[4]), "fstype": rf[0], "source": _unescape_mount(rf[1]),
                    "options": opts})
    return out


def parse_proc_mounts(text):
    """/proc/mounts -> the same shape as parse_mountinfo (without ids)."""
    out = []
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        out.append({"mount_id": None, "root": "/", "mountpoint": _unescape_mount(f[1]), "fstype": f[2],
                    "source": _unescape_mount(f[0]), "options": _options(f[3])})
    return out


def _options(text):
    out = {}
    for item in text.split(","):
        if not item:
            continue
        k, sep, v = item.partition("=")
        out[k] = v if sep else True
    return out


def mount_for(mounts, path):
    """The mount that holds ``path`` (host-absolute, symlinks resolved): longest mount point, last one wins."""
    best = None
    path = path.rstrip("/") or "/"
    for m in mounts:
        mp = m["mountpoint"].rstrip("/") or "/"
        if path == mp or mp == "/" or path.startswith(mp + "/"):
            if best is None or len(mp) >= len(best["mountpoint"].rstrip("/") or "/"):
                best = m
    return best


def mount_proto(entry):
    """``proto=`` of a mount (``rdma``, ``tcp``...); ``None`` for file systems without one."""
    if not entry:
        return None
    proto = entry["options"].get("proto")
    return proto if isinstance(proto, str) else None


# ------------------------------------------------------------------------------------------------
# cufile.json


def strip_json_comments(text):
    """Remove // and /* */ comments outside strings (NVIDIA's sample cufile.json has them)."""
    out, i, n = [], 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_cufile_json(text):
    """Parse cufile.json text (comments allowed, trailing commas not); GdsError when it is not an object."""
    try:
        data = json.loads(strip_json_comments(text))
    except ValueError as e:
        raise GdsError("cufile.json is not valid JSON: %s" % e)
    if not isinstance(data, dict):
        raise GdsError("cufile.json must hold a JSON object")
    return data


def _merge(base, extra):
    out = dict(base)
    for k, v in (extra or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def cufile_config(base=None, allow_compat_mode=None, properties=None, log_dir=None):
    """A cufile.json document: ``base`` (dict) with ``properties`` merged in and the compat policy forced."""
    cfg = _merge(base or {}, {"properties": dict(properties or {})} if properties else {})
    if allow_compat_mode is not None:
        cfg = _merge(cfg, {"properties": {"allow_compat_mode": bool(allow_compat_mode)}})
    if log_dir:
        cfg = _merge(cfg, {"logging": {"dir": log_dir}})
    return cfg


def render_cufile_json(config):
    return json.dumps(config, indent=4, sort_keys=True) + "\n"


# ------------------------------------------------------------------------------------------------
# preconditions


def _pc(name, ok, reason, value=None):
    status = "skip" if ok is None else ("ok" if ok else "fail")
    return {"name": name, "status": status, "ok": ok, "reason": reason, "value": value}


def validate(path_real, size_mib, gpu):
    if not isinstance(size_mib, int) or size_mib < 1:
        raise GdsError("size_mib must be at least 1 (nvidia-fs counts MiB: a smaller transfer cannot move them)")
    if size_mib > MAX_SIZE_MIB:
        raise GdsError("size_mib %d is too large (at most %d MiB for a verification transfer)"
                       % (size_mib, MAX_SIZE_MIB))
    if gpu < 0:
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
        out.append(_pc("gpu_driver_open", True, "the NVIDIA open kernel module %s is loaded" % (drv["version"] or ""),
                       drv["flavour"]))
    elif drv["flavour"] == "proprietary":
        out.append(_pc("gpu_driver_open", False, "the proprietary NVIDIA kernel module is loaded: GDS 2.17.5 and "
                       "later need the open kernel module", drv["flavour"]))
    else:
        out.append(_pc("gpu_driver_open", False, "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is "
                       "missing)", drv["flavour"]))
    nv = facts["nvidia_fs"]
    if nv["loaded"]:
        out.append(_pc("nvidia_fs_loaded", True, "nvidia-fs %s is loaded" % (nv["version"] or nv["module_version"]),
                       nv["version"] or nv["module_version"]))
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
    mods = nv["modules"]
    if not nv["loaded"]:
        out.append(_pc("nvidia_fs_storage_module", False, "nvidia-fs is not loaded, so no storage module is hooked "
                       "into it"))
    elif storage_module in mods:
        out.append(_pc("nvidia_fs_storage_module", True, "%s is listed in %s (%s)" % (storage_module, MODULES,
                       mods[storage_module]), mods[storage_module]))
    else:
        out.append(_pc("nvidia_fs_storage_module", False, "%s is not listed in %s (listed: %s): the loaded module does "
                       "not export the nvidia-fs registration hook (in-tree NFS stack, or the vendor client is not "
                       "loaded)" % (storage_module, MODULES, ", ".join(sorted(mods)) or "none")))
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
    if m["fstype"] in ("nfs", "nfs4") and proto == "rdma":
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
    from ansible_collections.gpufabric.node.plugins.module_utils import cufile_probe
    loader = getattr(cufile_probe, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        src = loader.get_source(cufile_probe.__name__)
        if src:
            return src
    with open(cufile_probe.__file__) as f:
        return f.read()


def probe_env(config_path, log_path):
    """Environment for the test transfer: compat mode off through the config file and the variables."""
    return {"CUFILE_ENV_PATH_JSON": config_path, "CUFILE_ALLOW_COMPAT_MODE": "false",
            "CUFILE_FORCE_COMPAT_MODE": "false", "CUFILE_LOGFILE_PATH": log_path, "LC_ALL": "C", "LANG": "C"}


def _run_probe(run, python, workdir, directory, size, gpu, env):
    script = os.path.join(workdir, PROBE_FILE)
    with open(script, "w") as f:
        f.write(probe_source())
    argv = [python, script, "--dir", directory, "--size", str(size), "--gpu", str(gpu)]
    rc, out, err = run(argv, env)
    return parse_probe_output(rc, out, err)


def parse_probe_output(rc, out, err):
    """The probe's JSON report, or a report that says why there is none (crash, no JSON)."""
    doc = None
    for line in reversed((out or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            break
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


_GDSIO_LINE = re.compile(r"IoType:\s*(\S+)\s+XferType:\s*(\S+).*?DataSetSize:\s*(\d+)/(\d+)\(KiB\)")


def parse_gdsio(rc, out, err, size):
    """One gdsio run -> {requested, done, xfer_type, error}."""
    m = _GDSIO_LINE.search(out or "")
    res = {"requested": size, "done": 0, "calls": [], "short": False, "xfer_type": None, "error": None}
    if m:
        res["xfer_type"] = m.group(2)
        res["done"] = min(int(m.group(3)) * 1024, size)
        res["short"] = int(m.group(3)) < int(m.group(4))
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
            reasons.append("nvidia-fs counted %d read/write errors during the test transfer (see dmesg)." % errs)
    active = bool(data_ok and counters_ok and not t.get("error"))
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
