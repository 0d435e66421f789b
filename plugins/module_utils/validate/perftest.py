# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the output of a perftest bandwidth test (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``), with or without
``--use_cuda``.

The formats are perftest's own (src/perftest_parameters.h and .c, src/cuda_memory.c; read at tag 26.04.17):

* the test banner ``RDMA_Write BW Test`` and the parameter block (``ctx_print_test_info``):
  `` Dual-port       : OFF\\t\\tDevice         : mlx5_0``, `` Link type       : Ethernet`` (``IB`` or ``Ethernet``,
  ``link_layer_str``), `` GID index       : 3``, `` Mtu             : 4096[B]``;
* the address exchange: `` local address: LID 0000 QPN 0x0108 PSN ...`` and `` GID: 00:00:...:10:00:21:03``;
* with ``--use_cuda``: ``Picking device No. 0`` (by index) or ``Picking GPU number 0`` (``--use_cuda_bus_id``),
  ``[pid = 3669, dev = 0] device name = [NVIDIA A30]``, ``using DMA-BUF for GPU buffer address at ...``
  (``--use_cuda_dmabuf``);
* the result table: the header ``#bytes #iterations BW peak[<unit>] BW average[<unit>] MsgRate[Mpps]`` and one row
  per size (``REPORT_FMT``). ``<unit>`` is ``MiB/sec`` (since 24.07; ``MB/sec`` before, the same 2^20 bytes: the
  divisor is ``0x100000``) or ``Gb/sec`` with ``--report_gbits`` (10^9 bits: the divisor is 125,000,000 bytes).

Public API: ``parse(text) -> dict`` and ``verdict(parsed, expect_cuda=True) -> path verdict`` (see ``paths``).
Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

MAX_TEXT = 4 * 1024 * 1024
# bytes per second of one unit of the table's header (perftest_parameters.c: format_factor)
UNITS = {"MB/sec": 0x100000, "MiB/sec": 0x100000, "Gb/sec": 125000000}

BANNER = " BW Test"
FIELDS = {"Device": "device", "Link type": "link_type", "Transport type": "transport", "GID index": "gid_index",
          "Mtu": "mtu"}
_HEADER = re.compile(r"\s*#bytes\s+#iterations\s+BW peak\[(?P<unit>[A-Za-z/]+)\]\s+BW average\[(?P=unit)\]"
                     r"\s+MsgRate\[Mpps\]")
_ROW = re.compile(r"\s*(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>\d+\.\d+)\s+(?P<avg>\d+\.\d+)\s+"
                  r"(?P<rate>\d+\.\d+)\s*")
_PICK = re.compile(r"Picking (?:device No\.|GPU number) (?P<dev>\d+)")
_NAME = re.compile(r"\[pid = \d+, dev = (?P<dev>\d+)\] device name = \[(?P<name>[^\]]*)\]")
_DMABUF = re.compile(r"using DMA-BUF for GPU buffer address")
_GID = re.compile(r"\s*GID: (?P<gid>[0-9a-fA-F:]+)")
_ADDR = re.compile(r"\s*(?P<side>local|remote) address: ")


def parse(text):
    """``{test, device, link_type, transport, gid_index, mtu, gids: {local, remote}, cuda: {used, device, name,
    dmabuf}, unit, rows: [{bytes, iterations, bw_peak, bw_average, msg_rate}], bw_average, bw_peak, size}``.

    Bandwidths are bytes per second (``bw_*``), the message rate packets per second. ``bw_average`` and
    ``bw_peak`` at the top are those of the largest message size (the table's last row); None without a row.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = (text or "")[:MAX_TEXT]
    out = {"test": None, "device": None, "link_type": None, "transport": None, "gid_index": None, "mtu": None,
           "gids": {"local": None, "remote": None},
           "cuda": {"used": False, "device": None, "name": None, "dmabuf": False},
           "unit": None, "rows": [], "bw_average": None, "bw_peak": None, "size": None}
    side = None
    for line in text.splitlines():
        if out["unit"]:
            r = _ROW.fullmatch(line)
            if r:
                out["rows"].append(_row(r, UNITS[out["unit"]]))
                continue
        h = _HEADER.match(line)
        if h and h.group("unit") in UNITS:
            out["unit"] = h.group("unit")
            continue
        side = _header_line(line, out, side)
    if out["rows"]:
        last = max(out["rows"], key=lambda r: r["bytes"])
        out["bw_average"], out["bw_peak"], out["size"] = last["bw_average"], last["bw_peak"], last["bytes"]
    return out


def _row(m, factor):
    return {"bytes": int(m.group("bytes")), "iterations": int(m.group("iters")),
            "bw_peak": float(m.group("peak")) * factor, "bw_average": float(m.group("avg")) * factor,
            "msg_rate": float(m.group("rate")) * 1e6}


def _header_line(line, out, side):
    """One line before the table; returns the side (local/remote) the next ``GID:`` line belongs to."""
    if line.strip().endswith(BANNER) and out["test"] is None:
        out["test"] = " ".join(line.strip()[:-len(BANNER)].split())
        return side
    a = _ADDR.match(line)
    if a:
        return a.group("side")
    g = _GID.fullmatch(line)
    if g and side:
        out["gids"][side] = g.group("gid")
        return None
    p = _PICK.search(line)
    if p:
        out["cuda"]["used"], out["cuda"]["device"] = True, int(p.group("dev"))
        return side
    n = _NAME.search(line)
    if n:
        out["cuda"]["used"], out["cuda"]["name"] = True, n.group("name")
        return side
    if _DMABUF.match(line):
        out["cuda"]["dmabuf"] = True
        return side
    for part in line.split("\t"):
        key, sep, value = part.partition(":")
        name = FIELDS.get(" ".join(key.split()))
        if sep and name and out[name] is None:
            _field(name, value.strip(), out)
    return side


def _field(name, value, out):
    if name == "gid_index":
        out[name] = int(value) if value.isdigit() else None
    elif name == "mtu":
        out[name] = int(value[:-3]) if value.endswith("[B]") and value[:-3].isdigit() else None
    else:
        out[name] = value or None


def verdict(parsed, expect_cuda=True):
    """The path verdict of one run: ``direct`` when the buffer was GPU memory (``--use_cuda``) and the table has a
    result, ``fallback`` (host memory) when the buffer was host memory (the reason says whether a GPU run was
    asked for: ``expect_cuda``), ``not_exercised`` without a result row. perftest itself cannot fall back silently: a run asked for
    ``--use_cuda`` that cannot register GPU memory fails. A pass here proves the NIC can reach the GPU; it proves
    nothing about what NCCL chose (issue NVIDIA/nccl#1939): judge NCCL from its own log."""
    evidence = []
    if parsed.get("test"):
        evidence.append("%s BW Test on %s (link %s)" % (parsed["test"], parsed.get("device") or "?",
                                                        parsed.get("link_type") or "?"))
    cuda = parsed.get("cuda") or {}
    if cuda.get("used"):
        evidence.append("GPU buffer: device %s%s%s" % (cuda.get("device"), " [%s]" % cuda["name"] if cuda.get("name")
                                                       else "", ", DMA-BUF" if cuda.get("dmabuf") else ""))
    if not parsed.get("rows"):
        return paths.verdict("perftest", paths.NOT_EXERCISED, "no result row: the test did not complete",
                             evidence=evidence)
    evidence.append("%d B: %s average" % (parsed["size"], paths.rate(parsed["bw_average"])))
    if cuda.get("used"):
        return paths.verdict("perftest", paths.DIRECT, "GPU memory registered with the NIC (GPUDirect RDMA)",
                             evidence=evidence, bandwidth=parsed["bw_average"])
    if expect_cuda:
        return paths.verdict("perftest", paths.FALLBACK, "the buffer was host memory (no --use_cuda lines)",
                             fallback=paths.HOST_MEMORY, evidence=evidence, bandwidth=parsed["bw_average"])
    return paths.verdict("perftest", paths.FALLBACK, "host memory run, as asked (the comparison's host path)",
                         fallback=paths.HOST_MEMORY, evidence=evidence, bandwidth=parsed["bw_average"])
