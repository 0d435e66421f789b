# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the output of an nccl-tests binary (``all_reduce_perf``, ``all_gather_perf``, ...).

The formats are nccl-tests' own (src/util.cu ``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``,
``writeResultFooter``; read at 2.19.6):

* a row per size: ``%12li  %12li  %8s  %6s  %6s`` (size in bytes, count in elements, type, redop, root) then, for
  out-of-place and in-place, ``  %7s  %6s  %6s  %6g`` (time in us, algbw and busbw in GB/s, #wrong; ``N/A`` with
  ``-c 0``). A number too wide for its column is printed with fewer decimals or in ``%e`` form. Releases before
  2.x-era root columns print no redop/root (broadcast and reduce print a root) and an ``error`` column as a
  float (``0e+00``); trace replay prints only in-place; ``-I 1`` adds 4 per-iteration columns per half;
  ``-T``-style timestamps may end the row. GB/s is 10^9 bytes per second (all_reduce.cu: ``/ 1.0E9``).
* the footer: ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 33.3227 `` (the mean busbw over the
  sizes, in GB/s; ``OK``/``FAILED`` after it with ``-a``/check_avg_bw);
* ``# nccl-tests version 2.19.6 ...``, ``# Collective test starting: all_reduce_perf``, the device lines
  ``#  Rank  0 Group  0 Pid   3101 on    gpu-a01 device  0 [0000:19:00] NVIDIA H200``.

NCCL's own INFO lines may be interleaved (``NCCL_DEBUG=INFO`` writes to the same stdout): parse them with
``nccl_log``. Public API: ``parse(text) -> dict``. Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MAX_TEXT = 16 * 1024 * 1024
GB = 1e9

_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*: (?P<bw>\S+)(?:\s+(?P<check>OK|FAILED))?\s*")
_OOB = re.compile(r"#\s*Out of bounds values\s*: (?P<n>\d+)(?:\s+(?P<check>OK|FAILED))?\s*")
_VERSION = re.compile(r"# nccl-tests version (?P<v>\S+).*")
_TEST = re.compile(r"# Collective test starting: (?P<name>\S+)\s*")
_RANK = re.compile(r"#\s+Rank\s+(?P<rank>\d+)(?: Group\s+\d+)?(?: Pid\s+\d+)? on\s+(?P<host>\S+) device\s+"
                   r"(?P<dev>\d+) \[(?P<bus>[^\]]*)\] (?P<name>\S.*)")


def _num(tok):
    return _NUM.fullmatch(tok) is not None


def parse(text):
    """``{version, test, devices: [{rank, host, device, bus, name}], rows: [{size, count, type, redop, root,
    out_of_place: {time_us, algbw, busbw, wrong}|None, in_place: {...}}], avg_busbw, avg_busbw_check,
    out_of_bounds, out_of_bounds_check, max_busbw, max_busbw_size}``.

    Bandwidths are bytes per second (``algbw``, ``busbw``, ``avg_busbw``); ``wrong`` is the #wrong count (or the
    old error value), None for ``N/A``. ``max_busbw`` is the best busbw of any row (out-of-place or in-place).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = (text or "")[:MAX_TEXT]
    out = {"version": None, "test": None, "devices": [], "rows": [], "avg_busbw": None, "avg_busbw_check": None,
           "out_of_bounds": None, "out_of_bounds_check": None, "max_busbw": None, "max_busbw_size": None}
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            _comment(s, out)
            continue
        row = _row(s.split())
        if row:
            out["rows"].append(row)
    for r in out["rows"]:
        for half in (r["out_of_place"], r["in_place"]):
            if half and half["busbw"] is not None and (out["max_busbw"] is None or half["busbw"] > out["max_busbw"]):
                out["max_busbw"], out["max_busbw_size"] = half["busbw"], r["size"]
    return out


def _comment(s, out):
    m = _AVG.fullmatch(s)
    if m:
        out["avg_busbw"] = round(float(m.group("bw")) * GB, 3) if _num(m.group("bw")) else None
        out["avg_busbw_check"] = m.group("check")
        return
    m = _OOB.fullmatch(s)
    if m:
        out["out_of_bounds"], out["out_of_bounds_check"] = int(m.group("n")), m.group("check")
        return
    m = _VERSION.fullmatch(s)
    if m:
        out["version"] = m.group("v")
        return
    m = _TEST.fullmatch(s)
    if m:
        out["test"] = m.group("name")
        return
    m = _RANK.fullmatch(s)
    if m:
        out["devices"].append({"rank": int(m.group("rank")), "host": m.group("host"), "device": int(m.group("dev")),
                               "bus": m.group("bus"), "name": m.group("name").strip()})


def _row(tok):
    """One result row from its tokens, or None. The head is size, count, type and the optional redop and root;
    the rest is one or two halves of 4 (or 8 with per-iteration columns) values, time stamps dropped."""
    if len(tok) < 7 or not tok[0].isdigit() or not tok[1].isdigit() or not _TYPE.fullmatch(tok[2]):
        return None
    i, redop, root = 3, None, None
    if _TYPE.fullmatch(tok[i]):
        redop, i = tok[i], i + 1
    body = []
    for t in tok[i:]:
        if _num(t) or t == "N/A":
            body.append(t)
        else:
            break           # a time stamp (-T) or anything after the numbers
    if len(body) in (5, 9, 17) and body[0].lstrip("-").isdigit():
        root, body = int(body[0]), body[1:]
    halves = _halves(body)
    if halves is None:
        return None
    oop, inp = halves
    return {"size": int(tok[0]), "count": int(tok[1]), "type": tok[2], "redop": redop, "root": root,
            "out_of_place": oop, "in_place": inp}


def _halves(body):
    if len(body) in (8, 16):
        w = len(body) // 2
        return _half(body[:4]), _half(body[w:w + 4])
    if len(body) == 4:          # trace replay: in-place only
        return None, _half(body)
    return None


def _half(vals):
    if "N/A" in vals[:3]:
        return None
    wrong = None if vals[3] == "N/A" else float(vals[3])
    return {"time_us": float(vals[0]), "algbw": round(float(vals[1]) * GB, 3),
            "busbw": round(float(vals[2]) * GB, 3),
            "wrong": int(wrong) if wrong is not None and wrong == int(wrong) else wrong}
