# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one validation run showed: its outputs read with the collection's parsers, turned into the run's fields.

Each ``*_result`` function takes a planned run (``suite.plan``) and what its tool printed, and returns the fields the
run fills in: ``status`` (``ok`` the run happened and its output was read; ``error`` it did not complete in a way its
variant does not explain), ``reason``, ``bandwidth`` (bytes/s or None), ``verdict`` (``paths.verdict``) and
``details`` (what the parsers found that a reader needs: the NCCL version, the transport counts, the cuFile calls).
No command is run here (``suite`` runs them through the one command runner); plain Python, private to the
collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufabric.node.plugins.module_utils.validate import gds as gds_out
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_paths
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_tests
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths
from ansible_collections.gpufabric.node.plugins.module_utils.validate import perftest

TORCH_MARK = "GPUFABRIC_ALLREDUCE "
RC_TIMEOUT = 124           # coreutils timeout(1) when the command ran past its limit
RC_KILLED = 137            # timeout -k: killed after the grace period
GDS_UNAVAILABLE = "GDS unavailable: nvidia-fs not loaded"


def _timed_out(rc):
    return rc in (RC_TIMEOUT, RC_KILLED)


def _tail(out, err, n=3):
    lines = [x.strip() for x in ((out or "") + "\n" + (err or "")).splitlines() if x.strip()]
    return "; ".join(lines[-n:])[-400:]


def result(status, reason, verdict=None, bandwidth=None, details=None):
    return {"status": status, "reason": reason, "verdict": verdict, "bandwidth": bandwidth, "details": details or {}}


# ---------------------------------------------------------------------------------------------
# NCCL


def torch_line(text):
    """The torch program's result line (the last one naming ``ranks``, else the last one), or None."""
    found = None
    for line in (text or "").splitlines():
        s = line.strip()
        if not s.startswith(TORCH_MARK):
            continue
        try:
            doc = json.loads(s[len(TORCH_MARK):])
        except ValueError:
            continue
        if isinstance(doc, dict) and (found is None or "ranks" in doc or "ranks" not in found):
            found = doc
    return found


def nccl_result(run, rc, out, err):
    """A run of ``all_reduce_perf`` or of the torch program, with NCCL's INFO log on its output."""
    text = (out or "") + "\n" + (err or "")
    log = nccl_log.parse(text)
    intra = run["test"] == "nccl_intra"
    details = {"nccl_version": log.get("version"), "network": log.get("network"), "kinds": log.get("kinds") or {},
               "nranks": log.get("nranks")}
    bw, what = None, None
    if run["tool"] == "torch.distributed":
        line = torch_line(text) or {}
        details["program"] = line
        details["nccl_version"] = details["nccl_version"] or line.get("nccl")
        ranks = line.get("ranks")
        if ranks and ranks > 1:
            bw = line.get("busbw")
        elif ranks == 1:
            what = "one rank: algbw %s, busbw 0 (nothing moved between GPUs)" % paths.rate(line.get("algbw"))
        failed = rc != 0 or line.get("error") or not line.get("correct")
        why = line.get("error") or "the program printed no result line"
    else:
        table = nccl_tests.parse(text)
        details["avg_busbw"], details["max_busbw"] = table["avg_busbw"], table["max_busbw"]
        details["out_of_bounds"] = table["out_of_bounds"]
        ranks = len(table["devices"]) or log.get("nranks")
        if ranks and ranks > 1:
            bw = table["avg_busbw"] if table["avg_busbw"] is not None else table["max_busbw"]
        elif ranks == 1:
            what = "one rank: busbw 0 (nothing moved between GPUs)"
        wrong = table["out_of_bounds"] or table["out_of_bounds_check"] == "FAILED" or any(
            (h or {}).get("wrong") not in (None, 0) for r in table["rows"] for h in (r["out_of_place"], r["in_place"]))
        failed = rc != 0 or not table["rows"] or wrong
        why = "#wrong or out-of-bounds values in the table" if (wrong and table["rows"]) else \
            "all_reduce_perf printed no result row"
    details["ranks"] = ranks
    v = (nccl_paths.intra_node_verdict if intra else nccl_paths.network_verdict)(log, bandwidth=bw)
    if what:
        v["evidence"].append(what)
    if _timed_out(rc):
        return result("error", "timed out (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    if failed:
        # a run pinned to IB that cannot use it fails instead of falling back: the pin did its job, and the
        # verdict (not exercised, "the run failed instead of falling back") says it; the run is still an error
        return result("error", "%s (rc %d): %s" % (why, rc, _tail(out, err)), v, None, details)
    return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, bw, details)


# ---------------------------------------------------------------------------------------------
# perftest


def perftest_result(run, rc, out, err, server=None):
    """One ``ib_write_bw`` client run (``server``: the server's (rc, out, err) when it ran on this node)."""
    parsed = perftest.parse((out or "") + "\n" + (err or ""))
    if server is not None:
        # the GPU buffer is the server's (it receives the writes): its --use_cuda lines say where the data landed
        parsed["cuda"] = perftest.parse((server[1] or "") + "\n" + (server[2] or "")).get("cuda")
    v = perftest.verdict(parsed, expect_cuda=True)
    details = {"device": parsed.get("device"), "link_type": parsed.get("link_type"), "cuda": parsed.get("cuda")}
    if server is not None:
        details["server_rc"] = server[0]
    if _timed_out(rc):
        return result("error", "timed out (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    if rc != 0 or not parsed.get("rows"):
        return result("error", "ib_write_bw failed (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, v["bandwidth"], details)


# ---------------------------------------------------------------------------------------------
# GDS


def gdsio_result(run, rc, out, err, nvfs_delta, nvfs_loaded):
    """One gdsio run (``-x 0`` or ``-x 2``, with ``-V``): the summary line and the nvidia-fs counters."""
    parsed = gds_out.parse_gdsio((out or "") + "\n" + (err or ""))
    summary = parsed["runs"][-1] if parsed["runs"] else None
    v = gds_out.gdsio_verdict(summary, nvfs_delta=nvfs_delta, nvfs_loaded=nvfs_loaded, compat_mode=False)
    details = {"summary": summary, "verify_failed": parsed["verify_failed"]}
    if _timed_out(rc):
        return result("error", "timed out (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    if parsed["verify_failed"]:
        return result("error", "gdsio -V: the data read back differs from what was written", v, None, details)
    if rc != 0 or summary is None:
        if v["reason"] == GDS_UNAVAILABLE:
            return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, None, details)
        return result("error", "gdsio failed (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, v["bandwidth"], details)


def kvikio_result(run, rc, out, err, nvfs_delta, nvfs_loaded=None, log_tail=None):
    """KvikIO's roundtrip benchmark with ``--api cufile``: ``compat_on`` in KvikIO's own compat mode (the host
    path), ``compat_off`` with both compat modes off (GDS or nothing: without nvidia-fs KvikIO cannot open cuFile's
    driver, and that run says "GDS unavailable"); an older plan's ``host_memory`` run reads the ``posix`` rows.
    ``log_tail``: cuFile's log of the run."""
    parsed = gds_out.parse_kvikio((out or "") + "\n" + (err or ""))
    api = "posix" if run["variant"] == "host_memory" else "cufile"
    v = gds_out.kvikio_verdict(parsed, api=api, direction="read", nvfs_delta=nvfs_delta)
    details = {"gds_driver": parsed["gds_driver"], "compat": parsed["compat"],
               "cufile_log_tail": list(log_tail or ())}
    if _timed_out(rc):
        return result("error", "timed out (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    if rc != 0 or not parsed["results"]:
        if run["variant"] == "compat_off" and nvfs_loaded is False:
            hint = _log_hint(log_tail)
            v = paths.verdict("kvikio", paths.NOT_EXERCISED, "%s (KvikIO with compat mode off failed, rc %d: %s)"
                              % (GDS_UNAVAILABLE, rc, _tail(out, err)),
                              evidence=["nvidia-fs not loaded"] + ([hint] if hint else []))
            return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, None, details)
        return result("error", "kvikio failed (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, v["bandwidth"], details)


def probe_report(rc, out):
    """The cuFile program's JSON report (its last JSON line), or None."""
    for line in reversed((out or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                return None
            return doc if isinstance(doc, dict) else None
    return None


def _probe_failure(rep):
    """The first failing cuFile step, as ``cuFileDriverOpen: CU_FILE_...``, else the program's error."""
    for key, call in (("driver_open", "cuFileDriverOpen"), ("handle_register", "cuFileHandleRegister")):
        step = rep.get(key) or {}
        if step.get("err"):
            return "%s: %s" % (call, step.get("name"))
    for op, call in (("write", "cuFileWrite"), ("read", "cuFileRead")):
        io = rep.get(op) or {}
        if io.get("error"):
            return "%s: %s" % (call, (io["error"] or {}).get("name"))
    return rep.get("error") or "no report"


# cuFile's log when it cannot tell the file's block device (cufio-fs / cufio-obj): it asks udev, and a host without a
# udev database (/run/udev/data; a container or microVM) refuses every file, in compat mode too (recorded on the
# H200 host: tests/fixtures/validate/h200-microvm/cufile-compat-matrix.txt)
NO_VOLUME = "unable to get volume attributes"


def _log_hint(log_tail):
    lines = list(log_tail or ())
    if not any(NO_VOLUME in x for x in lines):
        return None
    udev = [x.split("ERROR", 1)[-1].strip() for x in lines if "udev" in x and "ERROR" in x]
    return ("cuFile could not read the file's volume attributes%s: it identifies the block device through udev, "
            "and without a udev database (/run/udev/data) it refuses the file even in compat mode"
            % (" (%s)" % udev[0] if udev else ""))


def probe_verdict(rep, compat, nvfs_loaded, nvfs_delta, log_tail=None):
    """The path verdict of one cuFile program run (``compat``: whether compat mode was allowed).

    - the data matched, nvidia-fs not loaded: ``fallback`` host memory (cuFile's compat mode moved it with POSIX
      I/O; with compat mode off that is against the policy and the reason says so);
    - the data matched, nvidia-fs loaded: ``direct`` when its read and write counters moved, else ``fallback`` (compat
      mode), ``unknown`` without counters;
    - no data moved, nvidia-fs not loaded and compat mode off: ``not_exercised``, "GDS unavailable: nvidia-fs not
      loaded" - the truth: no byte crossed any path, and the reason is the missing driver;
    - otherwise ``not_exercised`` naming the failing call."""
    rep = rep or {}
    ev = []
    opened = rep.get("driver_open") or {}
    if opened:
        ev.append("cuFileDriverOpen: %s" % opened.get("name"))
    for op, call in (("write", "cuFileWrite"), ("read", "cuFileRead")):
        io = rep.get(op)
        if io:
            why = " (%s)" % io["error"].get("name") if io.get("error") else ""
            ev.append("%s: %d of %d bytes%s" % (call, io.get("done", 0), io.get("requested", 0), why))
    rd = rep.get("read") or {}
    bw = None
    if rd.get("elapsed_s") and rd.get("done"):
        bw = rd["done"] / rd["elapsed_s"]
    matched = bool(rep.get("data_matched"))
    if matched:
        ev.append("data verified: file and GPU buffer match the pattern")
    ev.append("nvidia-fs %s" % ("loaded" if nvfs_loaded else "not loaded"))
    if matched and not nvfs_loaded:
        why = "cuFile compat mode: nvidia-fs is not loaded, the data went through host memory"
        if not compat:
            why += " although allow_compat_mode was false (check CUFILE_FORCE_COMPAT_MODE and the cufile.json)"
        return paths.verdict("cufile_probe", paths.FALLBACK, why, fallback=paths.HOST_MEMORY, evidence=ev,
                             bandwidth=bw)
    if matched:
        if nvfs_delta is None or nvfs_delta.get("reads") is None:
            return paths.verdict("cufile_probe", paths.UNKNOWN, "the data matched, but without the nvidia-fs counters "
                                 "cuFile's compat mode cannot be excluded", evidence=ev, bandwidth=bw)
        moved = [k for k in ("reads", "writes") if (nvfs_delta.get(k) or 0) > 0]
        ev.append("nvidia-fs reads +%d, writes +%d" % (nvfs_delta.get("reads") or 0, nvfs_delta.get("writes") or 0))
        if len(moved) == 2:
            return paths.verdict("cufile_probe", paths.DIRECT, "nvidia-fs counted the transfer", evidence=ev,
                                 bandwidth=bw)
        return paths.verdict("cufile_probe", paths.FALLBACK, "the nvidia-fs counters did not move: cuFile used its "
                             "compat mode (POSIX through host memory)", fallback=paths.HOST_MEMORY, evidence=ev,
                             bandwidth=bw)
    failure = _probe_failure(rep)
    hint = _log_hint(log_tail)
    if hint:
        ev.append(hint)
    if not nvfs_loaded and not compat:
        return paths.verdict("cufile_probe", paths.NOT_EXERCISED, "%s (%s)" % (GDS_UNAVAILABLE, failure), evidence=ev)
    return paths.verdict("cufile_probe", paths.NOT_EXERCISED, "the cuFile transfer did not complete: %s%s"
                         % (failure, "; %s" % hint if hint else ""), evidence=ev)


def probe_result(run, rc, out, err, nvfs_loaded, nvfs_delta, log_tail=None):
    """One run of the collection's cuFile program (``variant`` compat_on or compat_off); ``log_tail``: the last
    lines of cuFile's log of the run (they say why a call failed)."""
    rep = probe_report(rc, out)
    compat = run["variant"] == "compat_on"
    details = {}
    if rep is not None:
        details = {"driver_open": rep.get("driver_open"), "data_matched": rep.get("data_matched"),
                   "error": rep.get("error"), "versions": rep.get("versions"), "libcufile": rep.get("libcufile"),
                   "o_direct": rep.get("o_direct")}
    details["cufile_log_tail"] = list(log_tail or ())
    v = probe_verdict(rep, compat, nvfs_loaded, nvfs_delta, log_tail)
    if _timed_out(rc):
        return result("error", "timed out (rc %d): %s" % (rc, _tail(out, err)), v, None, details)
    if rep is None or rc != 0:
        return result("error", "the cuFile program exited with rc %d and %s: %s"
                      % (rc, "printed no report" if rep is None else "a report", _tail(out, err)), v, None, details)
    if rep.get("error") and "cannot load" in rep["error"]:
        return result("not_checked", "%s: install the cuFile library (libcufile, part of the CUDA toolkit's GDS "
                      "packages)" % rep["error"], None, None, details)
    if v["state"] == paths.NOT_EXERCISED and not v["reason"].startswith(GDS_UNAVAILABLE):
        return result("error", v["reason"], v, None, details)
    return result("ok", "%s: %s" % (paths.label(v), v["reason"]), v, v["bandwidth"], details)
