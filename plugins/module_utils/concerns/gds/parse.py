# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-fs and cuFile, the reading part: the nvidia-fs proc paths, parsers of its stats and version, mount tables,
and cufile.json.

``parse_stats(text) -> dict``
    ``/proc/driver/nvidia-fs/stats`` (format of nvidia-fs ``nvfs-stat.c``): header facts, one dict per counter line
    (``reads``, ``writes``, ``batches``, ``sparse_reads``, ``mmap``, ``bar1_map``, ``error``, ``ops``; the second
    ``Reads``/``Writes`` line goes to ``read_perf``/``write_perf``) and ``gpus``. With ``rw_stats_enabled=0`` nvidia-fs
    prints no ``n=``/``ok=``/``readMiB=``: those keys are then absent and ``counters(...)`` gives ``None`` for them.
``parse_version(text) -> 'major.minor' | None``.
``counters(stats)``, ``counter_delta(before, after)``: the read/write counters a transfer moves.
``parse_mountinfo(text)``, ``parse_proc_mounts(text)``, ``mount_for(mounts, path)``, ``mount_proto(entry)``.
``strip_json_comments(text)``, ``load_cufile_json(text)``, ``cufile_config(base, allow_compat_mode, properties,
log_dir)``, ``render_cufile_json(config)``: cufile.json as JSON (NVIDIA's sample carries ``//`` comments; we write
clean JSON).

The modules file (``parse_modules``, read while a device is held open) is in ``nvfs_modules``; the preconditions and
the counted transfer in ``nvfs``, which re-exports every name here. This file is private to the collection: no
stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

NVFS_PROC = "/proc/driver/nvidia-fs"
STATS = NVFS_PROC + "/stats"
MODULES = NVFS_PROC + "/modules"
VERSION = NVFS_PROC + "/version"
RW_STATS_PARAM = "/sys/module/nvidia_fs/parameters/rw_stats_enabled"
BUNDLE_PARAM = "/sys/module/sunrpc/parameters/nfs_bundle_version"
CUFILE_JSON = "/etc/cufile.json"
MIB = 1 << 20


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
    """/proc/self/mountinfo -> [{mount_id, mountpoint, root, fstype, source, options: {k: v}, mount_options}] in
    file order: ``options`` are the mount's own (field 6) and the superblock's together, ``mount_options`` the
    mount's own."""
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
                    "options": opts, "mount_options": _options(lf[5])})
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
