# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The path verdicts of one NCCL run, from its parsed ``NCCL_DEBUG=INFO`` log (``nccl_log.parse``).

Two paths:

- ``network_verdict``: how the data crossed the network. In current NCCL the per-channel ``via NET/<plugin>/<dev>``
  line is the signal that stays: ``/GDRDMA`` after it means the NIC read and wrote GPU memory (direct); without it
  the data was staged through host memory (``no_gdr``); ``NET/Socket`` is the socket transport (``socket``). A run
  of one rank or one node crossed no network (``not_exercised``). The share of network channels with ``/GDRDMA`` is
  in the reason: a pass needs all of them.
- ``intra_node_verdict``: how GPUs of one node reached each other: ``P2P/...`` (NVLink or PCIe peer to peer,
  ``P2P/CUMEM``, ``P2P/IPC``, ``P2P/direct pointer``) or NVLS is direct, ``SHM/...`` goes through host memory.

Evidence lines are rebuilt from the parsed fields in NCCL's own format (``Channel 00/0 : 0[0] -> 8[0] [send] via
NET/IB/0``; the ``[nvmlDev]`` after each rank is not kept by the parser and left out), with the environment NCCL
said it was given (``NCCL_NET_GDR_LEVEL``, ``NCCL_IB_DISABLE``: a forced fallback names its cause) and the NIC's
``GPU Direct RDMA Disabled`` lines. Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

NET_KINDS = ("net_gdrdma", "net_no_gdr", "net_socket")
FORCING = ("NCCL_NET_GDR_LEVEL", "NCCL_IB_DISABLE", "NCCL_NET_GDR_READ", "NCCL_NET", "NCCL_P2P_DISABLE",
           "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE")


# plugin/net.cc's warning when no network plugin (or not the one NCCL_NET names) initializes
NO_NET = "Failed to initialize any NET plugin"


def channel_line(c):
    """A channel in NCCL's INFO form."""
    direction = " [%s]" % c["direction"] if c.get("direction") else ""
    return "Channel %02d/%d : %d -> %d%s via %s" % (c["channel"], c["conn"], c["rank"], c["peer"], direction, c["via"])


def _common_evidence(parsed):
    ev = ["%s set by environment to %s" % (k, parsed["env"][k]) for k in FORCING if k in (parsed.get("env") or {})]
    if parsed.get("network"):
        ev.append("Using network %s" % parsed["network"])
    for h in parsed.get("gdr_hcas") or []:
        if not h["enabled"] and h.get("gpu") is None:
            ev.append("GPU Direct RDMA Disabled for HCA %d%s" % (h["hca"], " '%s'" % h["name"] if h["name"] else ""))
    if parsed.get("ring_gdr") is not None:
        ev.append("Connected all rings ... GDR %d" % (1 if parsed["ring_gdr"] else 0))
    return ev


def _sample(channels, kinds, n=4):
    return [channel_line(c) for c in channels if c["kind"] in kinds][:n]


def network_verdict(parsed, bandwidth=None):
    """The network path verdict of a parsed log; ``bandwidth`` (bytes/s, e.g. nccl-tests' busbw) is carried."""
    kinds = parsed.get("kinds") or {}
    chans = parsed.get("channels") or []
    gdr, nogdr, sock = (kinds.get(k, 0) for k in NET_KINDS)
    net = gdr + nogdr + sock
    ev = _common_evidence(parsed)
    if net:
        ev += _sample(chans, ("net_no_gdr", "net_socket")) + _sample(chans, ("net_gdrdma",), 2)
        share = "%d of %d network channels with /GDRDMA" % (gdr, net)
        if gdr == net:
            return paths.verdict("nccl", paths.DIRECT, "GPUDirect RDMA: %s" % share, evidence=ev, bandwidth=bandwidth)
        if sock >= nogdr:
            return paths.verdict("nccl", paths.FALLBACK, "socket transport: %s, %d over NET/Socket" % (share, sock),
                                 fallback=paths.SOCKET, evidence=ev, bandwidth=bandwidth)
        return paths.verdict("nccl", paths.FALLBACK, "no GPUDirect RDMA: %s, %d staged through host memory"
                             % (share, nogdr), fallback=paths.NO_GDR, evidence=ev, bandwidth=bandwidth)
    failed = [w for w in parsed.get("warnings") or [] if w.startswith(NO_NET)]
    if failed:
        # the network NCCL was given (NCCL_NET pins it) could not be used: the run failed, nothing moved
        pinned = (parsed.get("env") or {}).get("NCCL_NET")
        return paths.verdict("nccl", paths.NOT_EXERCISED, "NCCL could not initialize %s: %s; the run failed instead of "
                             "falling back" % ("the pinned network NCCL_NET=%s" % pinned if pinned else "any network",
                                               "; ".join(parsed.get("net_plugin_notes") or failed)),
                             evidence=ev + failed, bandwidth=bandwidth)
    v = parsed.get("verdict") or {}
    state = v.get("gpudirect_rdma")
    if state == "no":            # sockets between nodes without a channel line
        return paths.verdict("nccl", paths.FALLBACK, v["summary"], fallback=paths.SOCKET, evidence=ev,
                             bandwidth=bandwidth)
    if state == "not_exercised":
        return paths.verdict("nccl", paths.NOT_EXERCISED, v["summary"], evidence=ev, bandwidth=bandwidth)
    return paths.verdict("nccl", paths.UNKNOWN, v.get("summary") or "no network channel in the log", evidence=ev,
                         bandwidth=bandwidth)


def intra_node_verdict(parsed, bandwidth=None):
    """The path between the GPUs of one node: P2P or NVLS direct, SHM a fallback through host memory."""
    kinds = parsed.get("kinds") or {}
    chans = parsed.get("channels") or []
    p2p, shm = kinds.get("p2p", 0), kinds.get("shm", 0)
    nvls = (parsed.get("nvls") or {}).get("channels") or 0
    ev = _common_evidence(parsed)
    if nvls:
        ev.append("%d nvls channels" % nvls)
    ev += _sample(chans, ("shm",)) + _sample(chans, ("p2p",), 2)
    if shm:
        return paths.verdict("nccl", paths.FALLBACK, "%d of %d intra-node channels through shared host memory (SHM)"
                             % (shm, shm + p2p), fallback=paths.HOST_MEMORY, evidence=ev, bandwidth=bandwidth)
    if p2p or nvls:
        return paths.verdict("nccl", paths.DIRECT, "GPU to GPU: %d P2P channels%s" % (p2p, ", NVLS" if nvls else ""),
                             evidence=ev, bandwidth=bandwidth)
    return paths.verdict("nccl", paths.NOT_EXERCISED, "no intra-node channel (one GPU per node, or the log lacks "
                         "NCCL_DEBUG_SUBSYS=INIT,P2P,SHM)", evidence=ev, bandwidth=bandwidth)
