# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict on one data path, the same for every tool: did the data take the direct path?

``verdict(tool, state, reason, ...)`` builds it::

    {"tool": "nccl", "state": "direct" | "fallback" | "not_exercised" | "unknown",
     "fallback": None | "host_memory" | "no_gdr" | "socket" | "gds_unavailable",
     "reason": "...", "evidence": ["<what the output said>", ...], "bandwidth": <bytes/s> | None}

- ``direct``: the output proves the direct path (a NET channel ``/GDRDMA``, a GPU buffer registered with the NIC,
  a GDS transfer whose nvidia-fs counters moved, P2P between GPUs);
- ``fallback``: the data moved, on another path; ``fallback`` says which: ``host_memory`` (staged through a host
  bounce buffer: gdsio ``-x 2``, cuFile or KvikIO compat mode, NCCL's SHM), ``no_gdr`` (a network channel without
  GPUDirect RDMA: the NIC reads and writes host memory), ``socket`` (NCCL's socket transport), ``gds_unavailable``
  (a GDS run with compat mode off that could not use GDS);
- ``not_exercised``: nothing crossed the path (an NCCL run on one rank, a run without a result row);
- ``unknown``: the output does not tell (a log without channel lines, GDS without its counters).

A verdict is a fact about one run; whether it is the wanted one is the caller's (a forced-fallback run must say
``fallback``). ``rate`` formats bytes per second for evidence lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DIRECT = "direct"
FALLBACK = "fallback"
NOT_EXERCISED = "not_exercised"
UNKNOWN = "unknown"
STATES = (DIRECT, FALLBACK, NOT_EXERCISED, UNKNOWN)

HOST_MEMORY = "host_memory"
NO_GDR = "no_gdr"
SOCKET = "socket"
GDS_UNAVAILABLE = "gds_unavailable"
FALLBACKS = (HOST_MEMORY, NO_GDR, SOCKET, GDS_UNAVAILABLE)
MAX_EVIDENCE = 12


def verdict(tool, state, reason, fallback=None, evidence=(), bandwidth=None):
    """One path verdict; ``fallback`` is required for (and only allowed with) ``state == fallback``."""
    if state not in STATES:
        raise ValueError("verdict state %r is not one of %s" % (state, ", ".join(STATES)))
    if (state == FALLBACK) != (fallback is not None):
        raise ValueError("a fallback verdict names its fallback (%s), and only a fallback does"
                         % ", ".join(FALLBACKS))
    if fallback is not None and fallback not in FALLBACKS:
        raise ValueError("fallback %r is not one of %s" % (fallback, ", ".join(FALLBACKS)))
    ev = [str(e) for e in evidence or ()]
    if len(ev) > MAX_EVIDENCE:
        ev = ev[:MAX_EVIDENCE - 1] + ["... and %d more" % (len(ev) - MAX_EVIDENCE + 1)]
    return {"tool": tool, "state": state, "fallback": fallback, "reason": reason, "evidence": ev,
            "bandwidth": bandwidth}


def label(v):
    """``direct``, ``fallback: host memory``, ``not exercised``: a verdict in words."""
    if v["state"] == FALLBACK:
        return "fallback: %s" % v["fallback"].replace("_", " ")
    return v["state"].replace("_", " ")


def rate(bps):
    """Bytes per second in decimal units (``12.34 GB/s``), the unit the reports use."""
    if bps is None:
        return "n/a"
    for unit, f in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bps) >= f:
            return "%.2f %s" % (bps / f, unit)
    return "%.0f B/s" % bps
