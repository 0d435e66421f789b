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
* the network devices (net_ib/init.cc): ``NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ...``;
  what the environment forced: ``NCCL_NET_GDR_LEVEL set by environment to LOC``, ``NCCL_IB_DISABLE set by
  environment to 1.`` (paths.cc, param.cc); ``Connected all rings, use ring PXN 0 GDR 1`` (generic.cc, 2.19+);
  NVLS: ``NVLS multicast support is not available on dev 0``, ``... 0 nvls channels, ...`` (nvls.cc, init.cc;
  read in NCCL 2.30.7);
* the NIC's GDR decision: ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)``,
  ``GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 4 <= 4), read 1 mode Default`` (graph/paths.cc; a TRACE
  line since 2.2x, so only trace builds print it: the per-channel ``/GDRDMA`` is the signal that stays);
  ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`` (graph/topo.cc, INFO: the NIC cannot do GDR at all);
  ``DMA-BUF is available on GPU device 0`` (init.cc).

Public API: ``parse(text) -> dict`` (see ``parse``) and ``verdict(parsed) -> {gpudirect_rdma, summary}``.
Plain Python, no Ansible imports; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read

MARK = "NCCL INFO "
# debug.cc prints a warning as "<host>:<pid>:<tid> [<dev>] <file>:<line> NCCL WARN <message>" at NCCL_DEBUG=WARN and
# above, e.g. plugin/net.cc's "Failed to initialize any NET plugin" when no network (or not the one NCCL_NET names)
# can be used: the run fails instead of falling back
WARN_MARK = "NCCL WARN "
MAX_WARNINGS = 50
# NCCL formats every debug line into a 1024-byte buffer (src/debug.cc ncclDebugLog): the real log's "Trees" line
# (tests/fixtures/nccl/nccl-1rank-h200.log) is cut at 1023 characters. A longer line is not NCCL's and is skipped.
MAX_LINE = 4096
MAX_LOG = 16 * 1024 * 1024

# Every pattern below is applied with ``match``/``fullmatch`` to one stripped message of at most MAX_LINE characters.
# No repetition is nested in another, and each repetition is followed by a character its class cannot match, so a
# match attempt is linear in the line (tests/unit/.../test_nccl_log.py checks the patterns' structure).
_VERSION = re.compile(r"NCCL version (?P<v>\S+)")
_NETWORK = re.compile(r"Using network (?P<net>\S.*)")
_ASSIGNED = re.compile(r"Assigned NET plugin (?P<net>\S.*) to comm")
# "Channel 02/0 : 0[0] -> 8[0]", "Channel 02 : 0[1a000] -> 8[1a000]", "Ring 02 : 0 -> 8"
_CHANNEL = re.compile(
    r"(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<rank>\d+)(?:\[[0-9a-fA-F]+\])? -> "
    r"(?P<peer>\d+)(?:\[[0-9a-fA-F]+\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*)")
_NET_DEV = re.compile(r"(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?")
_NET_FLAG = re.compile(r"[A-Za-z]+(?:\([A-Za-z]+\))?")
_GDR = re.compile(r"(?:NET/[^ ]+ : )?GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU (?P<gpu>\d+) / )?"
                  r"HCA (?P<hca>\d+)(?: '(?P<name>[^']*)')?(?P<rest>.*)")
_DMABUF = re.compile(r"DMA-BUF is available on GPU device (?P<gpu>\d+)")
# init.cc: "comm 0x.. rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0" (2.19+) and
# "ncclCommInitRank... comm 0x.. rank 0 nranks 1 cudaDev 0 ..." (every release)
_NNODES = re.compile(r"comm \S+ rank \d+ nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)")
_NRANKS = re.compile(r"ncclCommInitRank\w* comm \S+ rank \d+ nranks (?P<nranks>\d+)")
# net.cc / net_ib.cc: "NET/IB : No device found." and init.cc "Failed to initialize NET plugin IB"
_NO_DEVICE = re.compile(r"NET/(?P<net>[^ ]+) : No device found\.")
_PLUGIN_FAILED = re.compile(r"Failed to initialize NET plugin (?P<net>\S+)")
# net_ib/init.cc: "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>" (one entry per
# device: "[<d>]<name>:<port>[:<rail>][:<plane>]/<IB|RoCE>"; plugins add "/SHARP"; a merged device prints
# "[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE}"); net_socket.cc: "NET/Socket : Using [0]eth0:10.0.0.1<0>"
_NET_USING = re.compile(r"NET/(?P<net>IB|Socket) : Using (?P<rest>.*)")
_IB_DEV = re.compile(r"\[(?P<idx>\d+)\] ?(?P<name>[A-Za-z0-9_.-]+):(?P<port>\d+)(?::[:0-9]*)?/(?P<link>IB|RoCE)")
# param.cc: "NCCL_IB_DISABLE set by environment to 1." and graph/paths.cc: "NCCL_NET_GDR_LEVEL set by environment
# to LOC": what the user forced, so a forced fallback is told apart from a silent one
_ENV = re.compile(r"(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+)")
# transport/generic.cc (2.19+): "Connected all rings, use ring PXN 0 GDR 1": whether the communicator uses GDR
_RING_GDR = re.compile(r"Connected all rings, use ring PXN (?P<pxn>\d) GDR (?P<gdr>\d)")
# transport/nvls.cc: "NVLS multicast support is not available on dev 0"; init.cc: "4 coll channels, 4 collnet
# channels, 0 nvls channels, 4 p2p channels, 2 p2p channels per peer"
_NVLS_SUPPORT = re.compile(r"NVLS multicast support is (?P<not>not )?available on dev (?P<dev>\d+)")
_NVLS_CHANNELS = re.compile(r"(?P<coll>\d+) coll channels, (?P<collnet>\d+) collnet channels, "
                            r"(?P<nvls>\d+) nvls channels")

SOCKET = "Socket"


class LogError(Exception):
    """The NCCL log cannot be read: not a regular file, a symlink, unreadable."""


def read(path, max_bytes=MAX_LOG):
    """``(data, truncated)``: at most ``max_bytes`` of the log at ``path``. The log is written by the user's job
    and read by root: opened without following a symlink and without blocking on a FIFO, and only a regular file is
    read."""
    try:
        fd = bounded_read.open_walked(path)   # no link followed where others could have put it, no FIFO blocking
    except OSError as e:
        raise LogError("cannot open %s: %s%s" % (path, e.strerror or e,
                                                 " (a symlink is not followed)" if os.path.islink(path) else ""))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogError("%s is not a regular file" % path)
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise LogError("cannot read %s: %s" % (path, e.strerror or e))
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:max_bytes], len(data) > max_bytes


def _channel(m):
    via = m.group("via")
    ch = {"channel": int(m.group("ch")), "conn": int(m.group("conn")) if m.group("conn") else 0,
          "rank": int(m.group("rank")), "peer": int(m.group("peer")), "direction": m.group("dir"), "via": via,
          "transport": via.split("/", 1)[0], "net": None, "net_dev": None, "proxy": None, "gdr": False}
    net = _net(via)
    if net:
        ch.update(net)
        if ch["net"] == SOCKET:
            ch["kind"] = "net_socket"
        else:
            ch["kind"] = "net_gdrdma" if ch["gdr"] else "net_no_gdr"
    elif ch["transport"] in ("P2P", "SHM"):
        ch["kind"] = ch["transport"].lower()
    else:
        ch["kind"] = "other"
    return ch


def _net(via):
    """``NET/<plugin>/<dev>[(<proxy>)][/GDRDMA[(PCI)]][/Shared]`` split at its slashes; None for another via."""
    parts = via.split("/")
    if len(parts) < 3 or parts[0] != "NET" or not parts[1]:
        return None
    dev = _NET_DEV.fullmatch(parts[2])
    if not dev or not all(_NET_FLAG.fullmatch(f) for f in parts[3:]):
        return None
    return {"transport": "NET", "net": parts[1], "net_dev": int(dev.group("dev")),
            "proxy": int(dev.group("proxy")) if dev.group("proxy") else None,
            "gdr": any(f.split("(", 1)[0] == "GDRDMA" for f in parts[3:])}


def _messages(text, out):
    """The messages of the NCCL INFO lines (the first MAX_WARNINGS WARN messages go to ``warnings``); a line longer
    than MAX_LINE is counted in ``long_lines``."""
    for line in text.splitlines():
        if len(line) > MAX_LINE:
            out["long_lines"] += 1
            continue
        at = line.find(MARK)
        if at < 0:
            warn = line.find(WARN_MARK)
            if warn >= 0 and len(out["warnings"]) < MAX_WARNINGS:
                out["warnings"].append(line[warn + len(WARN_MARK):].strip())
            continue
        yield line[at + len(MARK):].strip()


def parse(text, truncated=False):
    """The facts of one log: ``{nccl_version, network, nranks, nnodes, net_plugin_notes, info_lines, long_lines,
    truncated, channels: [{channel, conn, rank, peer, direction, via, transport, kind, net, net_dev, proxy, gdr}],
    kinds: {kind: count}, gdr_hcas: [{hca, name, gpu, enabled, note}], dmabuf_gpus: [int], net_devices: [{net, index,
    name, port, link}], env: {NCCL_*: value}, ring_gdr: bool|None, nvls: {supported, channels}, warnings: [str],
    verdict: {gpudirect_rdma, summary}}``.

    ``env`` holds what NCCL says the environment set (``NCCL_NET_GDR_LEVEL``, ``NCCL_IB_DISABLE``, ...): a forced
    fallback names its cause. ``ring_gdr`` is the communicator's ``GDR`` flag (2.19+), false when any communicator
    of the log said 0.

    ``kind`` is ``net_gdrdma`` (a network channel with GPUDirect RDMA), ``net_no_gdr`` (a network channel staged
    through host memory), ``net_socket`` (NCCL's socket transport), ``p2p``, ``shm`` or ``other``. At most MAX_LOG
    characters are read (``truncated`` says the log was longer).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text or ""
    if len(text) > MAX_LOG:
        text, truncated = text[:MAX_LOG], True
    out = {"nccl_version": None, "network": None, "nranks": None, "nnodes": None, "net_plugin_notes": [],
           "info_lines": 0, "long_lines": 0, "truncated": bool(truncated), "channels": [], "kinds": {},
           "gdr_hcas": [], "dmabuf_gpus": [], "net_devices": [], "env": {}, "ring_gdr": None,
           "nvls": {"supported": None, "channels": None}, "warnings": []}
    for msg in _messages(text, out):
        out["info_lines"] += 1
        _message(msg, out)
    out["verdict"] = verdict(out)
    return out


def _message(msg, out):
    v = _VERSION.fullmatch(msg)
    if v:
        if out["nccl_version"] is None:
            out["nccl_version"] = v.group("v")
        return
    n = _NETWORK.fullmatch(msg) or _ASSIGNED.fullmatch(msg)
    if n:
        out["network"] = n.group("net")
        return
    c = _CHANNEL.fullmatch(msg)
    if c:
        ch = _channel(c)
        out["channels"].append(ch)
        out["kinds"][ch["kind"]] = out["kinds"].get(ch["kind"], 0) + 1
        return
    g = _GDR.fullmatch(msg)
    if g:
        entry = {"hca": int(g.group("hca")), "name": g.group("name"),
                 "gpu": int(g.group("gpu")) if g.group("gpu") else None,
                 "enabled": g.group("state") == "Enabled", "note": g.group("rest").strip() or None}
        if entry not in out["gdr_hcas"]:
            out["gdr_hcas"].append(entry)
        return
    d = _DMABUF.fullmatch(msg)
    if d:
        if int(d.group("gpu")) not in out["dmabuf_gpus"]:
            out["dmabuf_gpus"].append(int(d.group("gpu")))
        return
    r = _NNODES.match(msg)
    if r:
        out["nranks"], out["nnodes"] = int(r.group("nranks")), int(r.group("nnodes"))
        return
    r = _NRANKS.match(msg)
    if r:
        if out["nranks"] is None:
            out["nranks"] = int(r.group("nranks"))
        return
    if _more(msg, out):
        return
    p = _NO_DEVICE.fullmatch(msg) or _PLUGIN_FAILED.fullmatch(msg)
    if p and msg not in out["net_plugin_notes"]:
        out["net_plugin_notes"].append(msg)


def _more(msg, out):
    """The lines the validation reads besides the channels: the network devices, the environment NCCL was given,
    the communicator's GDR flag and NVLS. True when ``msg`` was one of them."""
    u = _NET_USING.fullmatch(msg)
    if u:
        for d in _IB_DEV.finditer(u.group("rest")) if u.group("net") == "IB" else ():
            dev = {"net": "IB", "index": int(d.group("idx")), "name": d.group("name"), "port": int(d.group("port")),
                   "link": d.group("link")}
            if dev not in out["net_devices"]:
                out["net_devices"].append(dev)
        return True
    e = _ENV.fullmatch(msg)
    if e:
        out["env"][e.group("name")] = e.group("value").rstrip(".")
        return True
    r = _RING_GDR.fullmatch(msg)
    if r:
        gdr = r.group("gdr") == "1"
        out["ring_gdr"] = gdr if out["ring_gdr"] is None else out["ring_gdr"] and gdr
        return True
    n = _NVLS_SUPPORT.fullmatch(msg)
    if n:
        out["nvls"]["supported"] = not n.group("not")
        return True
    n = _NVLS_CHANNELS.match(msg)
    if n:
        out["nvls"]["channels"] = max(out["nvls"]["channels"] or 0, int(n.group("nvls")))
        return True
    return False


def verdict(parsed):
    """``{gpudirect_rdma: yes|partial|no|not_exercised|unknown, summary}`` of a parsed log.

    Only a network channel (``via NET/...``) says how data crossed a network. Without one, a communicator of one
    node (``nNodes 1``, or ``nranks 1``) sent nothing over any network: GPUDirect RDMA was not exercised, whatever
    plugin NCCL picked, and why the IB plugin was not used (``NET/IB : No device found.``) is told.
    """
    kinds = parsed.get("kinds") or {}
    gdr, nogdr, sock = kinds.get("net_gdrdma", 0), kinds.get("net_no_gdr", 0), kinds.get("net_socket", 0)
    net = parsed.get("network")
    notes = parsed.get("net_plugin_notes") or []
    plugin = " (%s)" % "; ".join(notes) if notes else ""
    if gdr and not nogdr and not sock:
        return {"gpudirect_rdma": "yes", "summary": "GPUDirect RDMA on every network channel (%d NET/%s/GDRDMA)"
                % (gdr, _nets(parsed, "net_gdrdma"))}
    if gdr:
        others = []
        if nogdr:
            others.append("%d staged through host memory (%s without GDR)" % (nogdr, _nets(parsed, "net_no_gdr")))
        if sock:
            others.append("%d over the socket transport" % sock)
        return {"gpudirect_rdma": "partial",
                "summary": "GPUDirect RDMA on %d of %d network channels; %s"
                           % (gdr, gdr + nogdr + sock, ", ".join(others))}
    if nogdr:
        return {"gpudirect_rdma": "no",
                "summary": "no GPUDirect RDMA (%s without GDR: %d network channels stage GPU data through host "
                           "memory)" % (_nets(parsed, "net_no_gdr"), nogdr)}
    if sock:
        return {"gpudirect_rdma": "no", "summary": "no GPUDirect RDMA (socket transport)%s" % plugin}
    one_node = parsed.get("nnodes") == 1 or (parsed.get("nnodes") is None and parsed.get("nranks") == 1)
    if one_node:
        local = ", ".join("%s %d" % (k, kinds[k]) for k in sorted(kinds))
        what = "one rank" if parsed.get("nranks") == 1 else "one node"
        return {"gpudirect_rdma": "not_exercised",
                "summary": "not exercised: %s, nothing crossed a network (%s)%s%s"
                           % (what, local or "no channel connection",
                              "; network plugin %s" % net if net else "", plugin)}
    if net == SOCKET:
        return {"gpudirect_rdma": "no", "summary": "no GPUDirect RDMA (socket transport)%s" % plugin}
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
