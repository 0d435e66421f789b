# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read an ``NCCL_DEBUG=INFO`` log: which transport each channel used and whether GPUDirect RDMA carried it.

The formats are NCCL's own INFO strings (read from its source, src/transport/*.cc, src/init.cc); every line has
the prefix ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO `` (``NCCL_DEBUG_FILE`` writes the same lines):

* the network plugin the communicator uses: ``Using network IB`` / ``Using network Socket`` (init.cc), also
  ``Assigned NET plugin <name> to comm`` in 2.2x;
* a network connection (net.cc ``sendSetup``/``recvSetup``), since 2.12:
  ``Channel 02/0 : 0[0] -> 8[0] [send] via NET/IB/3/GDRDMA`` with the optional ``(<proxyRank>)`` after the
  device (PXN), ``(PCI)`` after ``/GDRDMA`` (GDR through PCI BAR) and ``/Shared``; 2.7-2.11 print
  ``Channel 02 : 0[1a000] -> 8[1a000] [send] via NET/IB/3/GDRDMA`` (bus ids in hex), 2.4-2.6
  ``Ring 02 : 0 -> 8 [send] via NET/IB/3/GDRDMA``. No ``/GDRDMA``: the NIC reads and writes host memory and
  the GPU's data is staged through it;
* peer to peer (p2p.cc): ``via P2P/CUMEM/read``, ``via P2P/IPC``, ``via P2P/direct pointer``, ``via P2P/MNNVL``;
  shared memory (shm.cc): ``via SHM/direct/direct``, ``via SHM/CE/direct``;
* the NIC's GDR decision: ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)``,
  ``GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 4 <= 4), read 1 mode Default`` (graph/paths.cc);
  ``DMA-BUF is available on GPU device 0`` (init.cc).

Public API: ``parse(text) -> dict`` (see ``parse``) and ``verdict(parsed) -> {gpudirect_rdma, summary}``.
Plain Python, no Ansible imports; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_INFO = re.compile(r"NCCL INFO (?P<msg>.*)\Z")
_VERSION = re.compile(r"NCCL version (?P<v>\S+)")
_NETWORK = re.compile(r"Using network (?P<net>\S.*?)\s*\Z")
_ASSIGNED = re.compile(r"Assigned NET plugin (?P<net>\S.*?) to comm\Z")
# "Channel 02/0 : 0[0] -> 8[0]", "Channel 02 : 0[1a000] -> 8[1a000]", "Ring 02 : 0 -> 8"
_CHANNEL = re.compile(
    r"(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<rank>\d+)(?:\[[0-9a-fA-F]+\])? -> "
    r"(?P<peer>\d+)(?:\[[0-9a-fA-F]+\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*\Z")
_NET = re.compile(r"NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?"
                  r"(?P<flags>(?:/[A-Za-z]+(?:\([A-Za-z]+\))?)*)\Z")
_GDR = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU (?P<gpu>\d+) / )?HCA (?P<hca>\d+)"
                  r"(?: '(?P<name>[^']*)')?(?P<rest>.*)\Z")
_DMABUF = re.compile(r"DMA-BUF is available on GPU device (?P<gpu>\d+)")

SOCKET = "Socket"


def _channel(m):
    via = m.group("via")
    ch = {"channel": int(m.group("ch")), "conn": int(m.group("conn")) if m.group("conn") else 0,
          "rank": int(m.group("rank")), "peer": int(m.group("peer")), "direction": m.group("dir"), "via": via,
          "transport": via.split("/", 1)[0], "net": None, "net_dev": None, "proxy": None, "gdr": False}
    n = _NET.match(via)
    if n:
        flags = n.group("flags") or ""
        ch.update(transport="NET", net=n.group("net"), net_dev=int(n.group("dev")),
                  proxy=int(n.group("proxy")) if n.group("proxy") else None, gdr="/GDRDMA" in flags)
        if ch["net"] == SOCKET:
            ch["kind"] = "net_socket"
        else:
            ch["kind"] = "net_gdrdma" if ch["gdr"] else "net_no_gdr"
    elif ch["transport"] in ("P2P", "SHM"):
        ch["kind"] = ch["transport"].lower()
    else:
        ch["kind"] = "other"
    return ch


def parse(text):
    """The facts of one log: ``{nccl_version, network, info_lines, channels: [{channel, conn, rank, peer,
    direction, via, transport, kind, net, net_dev, proxy, gdr}], kinds: {kind: count}, gdr_hcas: [{hca, name,
    gpu, enabled, note}], dmabuf_gpus: [int], verdict: {gpudirect_rdma, summary}}``.

    ``kind`` is ``net_gdrdma`` (a network channel with GPUDirect RDMA), ``net_no_gdr`` (a network channel staged
    through host memory), ``net_socket`` (NCCL's socket transport), ``p2p``, ``shm`` or ``other``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = {"nccl_version": None, "network": None, "info_lines": 0, "channels": [], "kinds": {}, "gdr_hcas": [],
           "dmabuf_gpus": []}
    for line in (text or "").splitlines():
        m = _INFO.search(line.rstrip("\r"))
        if not m:
            continue
        out["info_lines"] += 1
        msg = m.group("msg")
        v = _VERSION.match(msg)
        if v and out["nccl_version"] is None:
            out["nccl_version"] = v.group("v")
            continue
        n = _NETWORK.match(msg) or _ASSIGNED.match(msg)
        if n:
            out["network"] = n.group("net")
            continue
        c = _CHANNEL.match(msg)
        if c:
            ch = _channel(c)
            out["channels"].append(ch)
            out["kinds"][ch["kind"]] = out["kinds"].get(ch["kind"], 0) + 1
            continue
        g = _GDR.search(msg)
        if g:
            entry = {"hca": int(g.group("hca")), "name": g.group("name"),
                     "gpu": int(g.group("gpu")) if g.group("gpu") else None,
                     "enabled": g.group("state") == "Enabled", "note": g.group("rest").strip() or None}
            if entry not in out["gdr_hcas"]:
                out["gdr_hcas"].append(entry)
            continue
        d = _DMABUF.search(msg)
        if d and int(d.group("gpu")) not in out["dmabuf_gpus"]:
            out["dmabuf_gpus"].append(int(d.group("gpu")))
    out["verdict"] = verdict(out)
    return out


def verdict(parsed):
    """``{gpudirect_rdma: yes|partial|no|not_exercised|unknown, summary}`` of a parsed log."""
    kinds = parsed.get("kinds") or {}
    gdr, nogdr, sock = kinds.get("net_gdrdma", 0), kinds.get("net_no_gdr", 0), kinds.get("net_socket", 0)
    net = parsed.get("network")
    if gdr and not nogdr and not sock:
        return {"gpudirect_rdma": "yes", "summary": "GPUDirect RDMA on every network channel (%d NET/%s/GDRDMA)"
                % (gdr, _nets(parsed, "net_gdrdma"))}
    if gdr:
        return {"gpudirect_rdma": "partial",
                "summary": "GPUDirect RDMA on %d of %d network channels; the others are staged through host "
                           "memory" % (gdr, gdr + nogdr + sock)}
    if nogdr:
        return {"gpudirect_rdma": "no",
                "summary": "no GPUDirect RDMA (%s without GDR: %d network channels stage GPU data through host "
                           "memory)" % (_nets(parsed, "net_no_gdr"), nogdr)}
    if sock or net == SOCKET:
        return {"gpudirect_rdma": "no", "summary": "no GPUDirect RDMA (socket transport)"}
    if parsed.get("channels") or net:
        local = ", ".join("%s %d" % (k, kinds[k]) for k in sorted(kinds))
        return {"gpudirect_rdma": "not_exercised",
                "summary": "no network channel (%s): the run stayed inside the node, GPUDirect RDMA was not "
                           "exercised" % (local or "no channel lines")}
    if not parsed.get("info_lines"):
        return {"gpudirect_rdma": "unknown",
                "summary": "unknown: no NCCL INFO lines (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)"}
    return {"gpudirect_rdma": "unknown",
            "summary": "unknown: the log names no network and no channel (NCCL_DEBUG_SUBSYS must include INIT "
                       "and NET)"}


def _nets(parsed, kind):
    names = []
    for c in parsed.get("channels") or []:
        if c["kind"] == kind and c["net"] not in names:
            names.append(c["net"])
    return "/".join(names) or "NET"
