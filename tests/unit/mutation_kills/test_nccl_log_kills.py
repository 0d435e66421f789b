# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_log: the whole parse and verdict on logs the judge's own tests leave out (make mutation's survivors): every
field of a channel, a banner before the first INFO line, GDRDMA mixed with socket channels, channels without a
"Using network" line, and the exact verdict texts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import nccl_log

P = "h1:101:202 [0] NCCL INFO "


def _log(*msgs):
    return "".join(P + m + "\n" for m in msgs)


def _ch(**kw):
    base = {"channel": 0, "conn": 0, "rank": 0, "peer": 1, "direction": "send", "via": None, "transport": "NET",
            "net": None, "net_dev": None, "proxy": None, "gdr": False, "kind": None}
    base.update(kw)
    return base


@pytest.mark.parametrize("msg,channel", [
    ("Channel 03/1 : 2[0] -> 9[0] [receive] via NET/IB/5/GDRDMA",
     _ch(channel=3, conn=1, rank=2, peer=9, direction="receive", via="NET/IB/5/GDRDMA", net="IB", net_dev=5,
         gdr=True, kind="net_gdrdma")),
    ("Channel 02 : 0[1a000] -> 8[1a000] [send] via NET/IB/3(4)/Shared",
     _ch(channel=2, peer=8, via="NET/IB/3(4)/Shared", net="IB", net_dev=3, proxy=4, kind="net_no_gdr")),
    ("Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
     _ch(channel=1, via="NET/Socket/0", net="Socket", net_dev=0, kind="net_socket")),
    ("Channel 00/0 : 0[0] -> 1[0] via P2P/CUMEM/read",
     _ch(direction=None, via="P2P/CUMEM/read", transport="P2P", kind="p2p")),
    ("Ring 04 : 1 -> 2 via SHM/direct/direct",
     _ch(channel=4, rank=1, peer=2, direction=None, via="SHM/direct/direct", transport="SHM", kind="shm")),
    ("Channel 00/0 : 0[0] -> 1[0] via COLLNET/x/y",
     _ch(direction=None, via="COLLNET/x/y", transport="COLLNET", kind="other")),
])
def test_every_channel_field(msg, channel):
    assert nccl_log.parse(_log(msg))["channels"] == [channel]


def test_whole_parse_of_a_log_with_a_banner_first():
    text = ("my-training-app v3 starting\n" + _log("NCCL version 2.21.5+cuda12.4", "Using network IB")
            + "epoch 1\n" + _log("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
                                 "Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
                                 "NET/IB : GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 4 <= 4)",
                                 "DMA-BUF is available on GPU device 0"))
    p = nccl_log.parse(text)
    assert p == {
        "nccl_version": "2.21.5+cuda12.4", "network": "IB", "info_lines": 6,
        "channels": [_ch(peer=8, via="NET/IB/0/GDRDMA", net="IB", net_dev=0, gdr=True, kind="net_gdrdma"),
                     _ch(rank=8, peer=0, direction="receive", via="NET/IB/0/GDRDMA", net="IB", net_dev=0, gdr=True,
                         kind="net_gdrdma")],
        "kinds": {"net_gdrdma": 2},
        "gdr_hcas": [{"hca": 0, "name": None, "gpu": 0, "enabled": True, "note": "(distance 4 <= 4)"}],
        "dmabuf_gpus": [0],
        "verdict": {"gpudirect_rdma": "yes", "summary": "GPUDirect RDMA on every network channel (2 NET/IB/GDRDMA)"},
        # what the parser reads since issue 21's items 10 and 16: ranks and nodes (none in this log), the IB
        # plugin's notes, and the bounds it keeps
        "nranks": None, "nnodes": None, "net_plugin_notes": [], "long_lines": 0, "truncated": False,
    }


def test_info_lines_count_only_info_lines():
    # a bare "NCCL INFO " (trailing blank) is still an INFO line; a network name may end in any letter
    p = nccl_log.parse("noise\n" + P + "\n" + P + "Using network IBX\n")
    assert (p["info_lines"], p["network"]) == (2, "IBX")
    assert nccl_log.parse("")["info_lines"] == 0


def test_gdrdma_mixed_with_socket_channels_is_partial():
    p = nccl_log.parse(_log("Using network IB",
                            "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
                            "Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
                            "Channel 02/0 : 0[0] -> 8[0] [send] via NET/Socket/1"))
    assert p["verdict"] == {"gpudirect_rdma": "partial",
                            "summary": "GPUDirect RDMA on 1 of 3 network channels; 2 over the socket transport"}


def test_no_gdr_summary_names_each_network_once():
    p = nccl_log.parse(_log("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0",
                            "Channel 01/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/1",
                            "Channel 02/0 : 0[0] -> 8[0] [send] via NET/IB/1"))
    assert p["verdict"] == {"gpudirect_rdma": "no",
                            "summary": "no GPUDirect RDMA (IB/AWS Libfabric without GDR: 3 network channels stage "
                                       "GPU data through host memory)"}


@pytest.mark.parametrize("text,summary", [
    (_log("Channel 00/0 : 0[0] -> 1[0] via P2P/IPC", "Channel 01/0 : 0[0] -> 1[0] via P2P/IPC",
          "Channel 02/0 : 0[0] -> 2[0] via SHM/direct/direct"),
     "no network channel (p2p 2, shm 1): the run stayed inside the node, GPUDirect RDMA was not exercised"),
    (_log("Using network IB"),
     "no network channel (no channel lines): the run stayed inside the node, GPUDirect RDMA was not exercised"),
])
def test_not_exercised_with_or_without_a_network_line(text, summary):
    assert nccl_log.parse(text)["verdict"] == {"gpudirect_rdma": "not_exercised", "summary": summary}


@pytest.mark.parametrize("text,summary", [
    ("", "unknown: no NCCL INFO lines (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)"),
    (_log("NCCL version 2.21.5+cuda12.4"),
     "unknown: the log names no network and no channel (NCCL_DEBUG_SUBSYS must include INIT and NET)"),
])
def test_unknown_verdicts(text, summary):
    assert nccl_log.parse(text)["verdict"] == {"gpudirect_rdma": "unknown", "summary": summary}


def test_verdict_of_counts_without_channel_lines():
    # verdict() is public: a parsed document that kept only the counts still names the transport
    assert nccl_log.verdict({"kinds": {"net_gdrdma": 2}}) == {
        "gpudirect_rdma": "yes", "summary": "GPUDirect RDMA on every network channel (2 NET/NET/GDRDMA)"}
    assert nccl_log.verdict({"kinds": {"net_gdrdma": 1, "net_socket": 1}})["summary"].startswith(
        "GPUDirect RDMA on 1 of 2 ")
