# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the GPUDirect Storage tools measured: gdsio's summary lines and KvikIO's roundtrip benchmark.

gdsio (closed source, shipped in ``/usr/local/cuda/gds/tools``) prints one summary line per run; the format is the
one NVIDIA's GDS documentation quotes (Getting Started, "Demonstrating GDS with GDSIO"; the NVMe guide's "Test GDS")::

    IoType: READ XferType: GPUD Threads: 4 DataSetSize: 104837120/104857600(KiB) IOSize: 1024(KiB)
    Throughput: 6.622534 GiB/sec, Avg_Latency: 589.436984 usecs ops: 102380 total_time 15.097011 secs

``DataSetSize`` is done/requested KiB, ``Throughput`` GiB (2^30 bytes) per second. ``-V`` prints ``Verifying data``
before the read back. ``XferType`` follows ``-x``: 0 ``GPUD`` (storage -> GPU through cuFile/nvidia-fs), 1
``CPUONLY`` (storage -> host memory, no GPU), 2 ``CPU_GPU`` (storage -> host bounce buffer -> GPU); 3 to 7 (async,
page-cache, batch variants) are told apart by name: a type starting ``GPU`` targets GPU memory through cuFile, one
starting ``CPU`` and naming ``GPU`` stages through host memory.

KvikIO's ``python -m kvikio.benchmarks.single_node_io`` (kvikio/benchmarks/single_node_io.py and utils.py, read at
26.10) prints ``Roundtrip benchmark``, a ``key | value`` block (``GDS driver | v2.23`` or ``N/A (Compatibility
Mode)``), a banner ``WARNING - KvikIO compat mode`` / ``WARNING - cuFile compat mode`` when GDS is not used, then
one row per API and direction: ``cufile read       | 901.62 MiB/s`` (dask's ``format_bytes``: binary units ``B``,
``kiB``, ``MiB``, ``GiB``, ``TiB``), with `` ± 1.23 % (...)`` after it when ``nruns`` > 1.

Public API: ``parse_gdsio(text)``, ``gdsio_verdict(run, nvfs_delta=None, nvfs_loaded=None)``,
``parse_kvikio(text)``, ``kvikio_verdict(parsed)``. The nvidia-fs counter delta is ``concerns.gds.parse``'s
``counter_delta`` (``{reads, writes, read_mib, write_mib, ...}``). Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

MAX_TEXT = 4 * 1024 * 1024
GIB = 1 << 30
KIB = 1 << 10
BINARY = {"B": 1, "kiB": 1 << 10, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}

# the whole summary line; what follows DataSetSize is optional, so a line cut there still gives type and amount
_GDSIO = re.compile(
    r"IoType:\s*(?P<io>[A-Z_]+)\s+XferType:\s*(?P<xfer>[A-Z_]+)\s+Threads:\s*(?P<threads>\d+)\s+"
    r"DataSetSize:\s*(?P<done>\d+)/(?P<total>\d+)\(KiB\)(?:\s+IOSize:\s*(?P<iosize>\d+)\(KiB\))?"
    r"(?:\s+Throughput:\s*(?P<tp>\d+(?:\.\d+)?) GiB/sec,\s*Avg_Latency:\s*(?P<lat>\d+(?:\.\d+)?) usecs"
    r"(?:\s+ops:\s*(?P<ops>\d+)\s+total_time\s+(?P<time>\d+(?:\.\d+)?) secs)?)?")
_VERIFY_FAILED = re.compile(r"(?i)verif\w*\s+(?:failed|error|mismatch)|data mismatch")
_KV_ROW = re.compile(r"(?P<api>[a-z_]+) (?P<dir>read|write)\s*\| +(?P<v>\d+(?:\.\d+)?) (?P<unit>[kKMGTP]?i?B)/s"
                     r"(?: \u00b1 +(?P<sd>\d+(?:\.\d+)?) %.*)?")
_KV_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .\-]*")


def parse_gdsio(text):
    """``{runs: [{io_type, xfer_type, xfer_class, threads, done_bytes, requested_bytes, io_size, throughput,
    avg_latency_us, ops, total_time_s, verified}], verify_failed}``; ``throughput`` in bytes per second (None,
    like the other values after ``DataSetSize``, when the line stops before it).

    ``verified`` is true for a run printed after ``Verifying data`` (gdsio ``-V`` reads back what it wrote);
    ``verify_failed`` is true when a line after it reports a failed verification or a mismatch."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = (text or "")[:MAX_TEXT]
    out = {"runs": [], "verify_failed": False}
    verifying = False
    for line in text.splitlines():
        s = line.strip()
        if s == "Verifying data":
            verifying = True
            continue
        m = _GDSIO.search(s)
        if m:
            out["runs"].append(_gdsio_run(m, verifying))
            continue
        if verifying and _VERIFY_FAILED.search(s):
            out["verify_failed"] = True
    return out


def _gdsio_run(m, verified):
    xfer = m.group("xfer")

    def num(name, kind, factor=1):
        return kind(m.group(name)) * factor if m.group(name) is not None else None
    return {"io_type": m.group("io"), "xfer_type": xfer, "xfer_class": xfer_class(xfer),
            "threads": int(m.group("threads")), "done_bytes": int(m.group("done")) * KIB,
            "requested_bytes": int(m.group("total")) * KIB, "io_size": num("iosize", int, KIB),
            "throughput": num("tp", float, GIB), "avg_latency_us": num("lat", float), "ops": num("ops", int),
            "total_time_s": num("time", float), "verified": verified}


def xfer_class(xfer):
    """``gpu_direct`` (cuFile into GPU memory), ``host_bounce`` (through a host buffer into the GPU), ``host_only``
    (no GPU) or ``unknown``."""
    if xfer == "CPUONLY":
        return "host_only"
    if xfer.startswith("GPU"):
        return "gpu_direct"
    if xfer.startswith("CPU") and "GPU" in xfer:
        return "host_bounce"
    return "unknown"


def gdsio_verdict(run, nvfs_delta=None, nvfs_loaded=None, compat_mode=None):
    """The path verdict of one gdsio run (an entry of ``parse_gdsio(...)["runs"]``, or None when gdsio printed no
    summary).

    A ``gpu_direct`` run is ``direct`` only when nvidia-fs counted it (``nvfs_delta``: the counter delta around the
    run moved for its direction): cuFile in compat mode runs the same command through host memory and prints the
    same line. Without counters it is ``unknown``. No summary line (the run failed) with nvidia-fs not loaded and
    compat mode off is ``not_exercised``: GDS unavailable."""
    if run is None:
        if nvfs_loaded is False and compat_mode is False:
            return paths.verdict("gdsio", paths.NOT_EXERCISED, "GDS unavailable: nvidia-fs not loaded")
        return paths.verdict("gdsio", paths.NOT_EXERCISED, "gdsio printed no summary line: the run failed")
    ev = ["IoType: %s XferType: %s Threads: %d Throughput: %s (%d of %d bytes)"
          % (run["io_type"], run["xfer_type"], run["threads"], paths.rate(run["throughput"]), run["done_bytes"],
             run["requested_bytes"])]
    bw = run["throughput"]
    cls = run["xfer_class"]
    if not run["done_bytes"]:
        return paths.verdict("gdsio", paths.NOT_EXERCISED, "gdsio moved no data", evidence=ev)
    if cls == "host_only":
        return paths.verdict("gdsio", paths.FALLBACK, "CPUONLY (-x 1): storage to host memory, no GPU buffer",
                             fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    if cls == "host_bounce":
        return paths.verdict("gdsio", paths.FALLBACK, "%s: staged through a host bounce buffer" % run["xfer_type"],
                             fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    if cls != "gpu_direct":
        return paths.verdict("gdsio", paths.UNKNOWN, "XferType %s is not one gdsio documents" % run["xfer_type"],
                             evidence=ev, bandwidth=bw)
    if nvfs_loaded is False:
        return paths.verdict("gdsio", paths.FALLBACK, "cuFile compat mode: nvidia-fs is not loaded, the data went "
                             "through host memory", fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    return _counted("gdsio", "reads" if "READ" in run["io_type"] else "writes", nvfs_delta, ev, bw)


def _counted(tool, key, nvfs_delta, ev, bw):
    """A cuFile transfer into GPU memory is direct only when nvidia-fs counted it: in compat mode cuFile runs the
    same call through host memory and reports the same result."""
    if nvfs_delta is None:
        return paths.verdict(tool, paths.UNKNOWN, "cuFile ran, but without the nvidia-fs counters around it its "
                             "compat mode cannot be excluded (read /proc/driver/nvidia-fs/stats before and after)",
                             evidence=ev, bandwidth=bw)
    moved = nvfs_delta.get(key) or 0
    ev.append("nvidia-fs %s moved by %d" % (key, moved))
    if moved > 0:
        return paths.verdict(tool, paths.DIRECT, "nvidia-fs counted the transfer (%s +%d)" % (key, moved),
                             evidence=ev, bandwidth=bw)
    return paths.verdict(tool, paths.FALLBACK, "the nvidia-fs %s counter did not move: cuFile used its compat mode "
                         "(POSIX through host memory)" % key, fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)


def parse_kvikio(text):
    """``{info: {key: value}, compat: None|"kvikio"|"cufile", gds_driver, results: [{api, direction, throughput,
    stdev_pct}]}`` of KvikIO's roundtrip benchmark; ``throughput`` in bytes per second."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = (text or "")[:MAX_TEXT]
    out = {"info": {}, "compat": None, "gds_driver": None, "results": []}
    for line in text.splitlines():
        s = line.strip()
        if "WARNING - KvikIO compat mode" in s:
            out["compat"] = "kvikio"
            continue
        if "WARNING - cuFile compat mode" in s and out["compat"] is None:
            out["compat"] = "cufile"
            continue
        r = _KV_ROW.fullmatch(s)
        if r and r.group("unit") in BINARY:
            out["results"].append({"api": r.group("api"), "direction": r.group("dir"),
                                   "throughput": float(r.group("v")) * BINARY[r.group("unit")],
                                   "stdev_pct": float(r.group("sd")) if r.group("sd") else None})
            continue
        key, sep, value = s.partition("|")
        if sep and _KV_KEY.fullmatch(key.strip()):
            out["info"][" ".join(key.split())] = value.strip()
    out["gds_driver"] = out["info"].get("GDS driver")
    return out


def kvikio_verdict(parsed, api="cufile", direction="read", nvfs_delta=None):
    """The path verdict of KvikIO's ``api`` (``cufile``) in ``direction``: a fallback to host memory when KvikIO
    or cuFile ran in compat mode (the banner, or ``GDS driver | N/A (Compatibility Mode)``); with a GDS driver
    shown, ``direct`` when the nvidia-fs counters moved (``nvfs_delta``), a fallback when they did not, ``unknown``
    without them. The ``posix`` rows are the host path the comparison needs."""
    res = [r for r in parsed.get("results") or [] if r["api"] == api and r["direction"] == direction]
    if not res:
        return paths.verdict("kvikio", paths.NOT_EXERCISED, "no %s %s result" % (api, direction))
    bw = res[-1]["throughput"]
    ev = ["%s %s | %s" % (api, direction, paths.rate(bw)), "GDS driver | %s" % parsed.get("gds_driver")]
    if api == "posix":
        return paths.verdict("kvikio", paths.FALLBACK, "POSIX reads and writes through host memory (the host path)",
                             fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    if parsed.get("compat") == "kvikio":
        return paths.verdict("kvikio", paths.FALLBACK, "KvikIO compat mode: libcufile not used, POSIX through host "
                             "memory", fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    driver = parsed.get("gds_driver") or ""
    if parsed.get("compat") == "cufile" or "Compatibility Mode" in driver:
        return paths.verdict("kvikio", paths.FALLBACK, "cuFile compat mode: GDS not enabled, the data went through "
                             "host memory", fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bw)
    if driver.startswith("v"):
        return _counted("kvikio", "reads" if direction == "read" else "writes", nvfs_delta, ev, bw)
    return paths.verdict("kvikio", paths.UNKNOWN, "the output names no GDS driver", evidence=ev, bandwidth=bw)
