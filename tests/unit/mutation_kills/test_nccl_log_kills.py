# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_log: the whole parse and verdict on logs the judge's own tests leave out (make mutation's survivors): every
field of a channel, a banner before the first INFO line, GDRDMA mixed with socket channels, channels without a
"Using network" line, and the exact verdict texts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log

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
        # and since issue 24 (validate/): the NET/IB devices, the environment, the rings' GDR flag, NVLS
        "net_devices": [], "env": {}, "ring_gdr": None, "nvls": {"supported": None, "channels": None},
        # and the NCCL WARN messages (a pinned network that failed to initialize)
        "warnings": [],
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


# --- the second run's survivors: the lines parse() keeps or skips, _net's refusals, read()'s bounds and messages,
# and the verdicts of one node and of the socket plugin -------------------------------------------------------------

def test_nodes_line_sets_ranks_and_nodes():
    p = nccl_log.parse(_log("comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"))
    assert (p["nranks"], p["nnodes"], p["info_lines"]) == (16, 2, 1)
    assert "XXnranksXX" not in p and "NRANKS" not in p
    assert sorted(p) == sorted(nccl_log.parse("").keys())


def test_a_line_of_exactly_max_line_characters_is_read():
    line = P + "Using network " + "I" * (nccl_log.MAX_LINE - len(P) - len("Using network "))
    assert len(line) == nccl_log.MAX_LINE
    p = nccl_log.parse(line + "\n")
    assert (p["long_lines"], p["info_lines"], p["network"]) == (0, 1, "I" * (nccl_log.MAX_LINE - len(P) - 14))


def test_every_long_line_is_counted():
    long_line = P + "Using network IB" + " " * nccl_log.MAX_LINE + "x"
    p = nccl_log.parse("\n".join([long_line, long_line, long_line, P + "Using network Socket"]))
    assert (p["long_lines"], p["info_lines"], p["network"]) == (3, 1, "Socket")


@pytest.mark.parametrize("text,network,info_lines", [
    # the message starts after the first marker: a second one belongs to the message
    (P + "Using network NCCL INFO IB\n", "NCCL INFO IB", 1),
    # a line that starts with the marker (no prefix) is an INFO line too
    ("NCCL INFO Using network IB\n", "IB", 1),
    ("NCCL INFO Using network IB\nX NCCL INFO Using network Socket\nNCCL INFO Using network IB\n", "IB", 3),
])
def test_where_the_message_starts(text, network, info_lines):
    p = nccl_log.parse(text)
    assert (p["network"], p["info_lines"]) == (network, info_lines)


@pytest.mark.parametrize("via,transport", [
    ("NET//0", "NET"),              # no plugin name
    ("NET//0/GDRDMA", "NET"),
    ("NET/IB", "NET"),              # no device
    ("FOO/IB/0", "FOO"),            # not a NET transport
    ("FOO/IB/0/GDRDMA", "FOO"),
    ("NET/IB/x/GDRDMA", "NET"),     # a device that is not a number
    ("NET/IB/x", "NET"),
    ("NET/IB/0/GDR-DMA", "NET"),    # a flag that is not a word
    ("NET/IB/0/GDRDMA/Sha red", "NET"),
    ("NET/IB/0/Shared/(PCI)", "NET"),
])
def test_a_via_that_is_not_a_network_connection_is_other(via, transport):
    p = nccl_log.parse(_log("Channel 00/0 : 0[0] -> 1[0] [send] via " + via))
    assert p["channels"] == [_ch(via=via, transport=transport, kind="other")]
    assert p["kinds"] == {"other": 1}


def test_network_flags_after_the_device_are_all_read():
    p = nccl_log.parse(_log("Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/Shared/GDRDMA(PCI)"))
    assert p["channels"] == [_ch(via="NET/IB/0/Shared/GDRDMA(PCI)", net="IB", net_dev=0, gdr=True,
                                 kind="net_gdrdma")]


def test_text_of_exactly_max_log_characters_is_not_truncated():
    text = "x" * nccl_log.MAX_LOG
    p = nccl_log.parse(text)
    assert (p["truncated"], p["long_lines"], p["info_lines"]) == (False, 1, 0)
    p = nccl_log.parse(text + "y")
    assert (p["truncated"], p["long_lines"], p["info_lines"]) == (True, 1, 0)


def test_parse_of_nothing():
    for text in ("", None, b""):
        p = nccl_log.parse(text)
        assert (p["info_lines"], p["long_lines"], p["truncated"], p["verdict"]["gpudirect_rdma"]) == (
            0, 0, False, "unknown")


def test_read_error_messages_word_for_word(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_bytes(b"x")
    link = tmp_path / "link.log"
    link.symlink_to(log)
    with pytest.raises(nccl_log.LogError) as e:
        nccl_log.read(str(link))
    assert str(e.value) == "cannot open %s: %s is a symbolic link: not followed (a symlink is not followed)" % (
        link, link)
    missing = tmp_path / "missing"
    with pytest.raises(nccl_log.LogError) as e:
        nccl_log.read(str(missing))
    assert str(e.value) == "cannot open %s: No such file or directory" % missing
    with pytest.raises(nccl_log.LogError) as e:
        nccl_log.read(str(tmp_path))
    assert str(e.value) == "%s is not a regular file" % tmp_path


@pytest.mark.parametrize("error,message", [
    (OSError(errno.EIO, "Input/output error"), "cannot read {}: Input/output error"),
    (OSError("disk gone"), "cannot read {}: disk gone"),
])
def test_read_failure_message(tmp_path, monkeypatch, error, message):
    log = tmp_path / "nccl.log"
    log.write_bytes(b"x" * 10)

    def fail(*_args):
        raise error
    monkeypatch.setattr(nccl_log.os, "read", fail)
    with pytest.raises(nccl_log.LogError) as e:
        nccl_log.read(str(log))
    assert str(e.value) == message.format(log)


@pytest.mark.parametrize("size,max_bytes,truncated", [
    (5, 5, False),
    (6, 5, True),
    (1, 0, True),
    (0, 0, False),
    (1024 * 1024 + 1, 1024 * 1024, True),
    (1024 * 1024, 1024 * 1024, False),
])
def test_read_bounds(tmp_path, size, max_bytes, truncated):
    log = tmp_path / "nccl.log"
    data = bytes(bytearray(i % 251 for i in range(size)))
    log.write_bytes(data)
    assert nccl_log.read(str(log), max_bytes=max_bytes) == (data[:max_bytes], truncated)


def test_read_joins_chunks_and_reads_at_most_one_byte_past_the_bound(tmp_path, monkeypatch):
    log = tmp_path / "nccl.log"
    data = bytes(bytearray(i % 251 for i in range(3 * 1024 * 1024 + 7)))
    log.write_bytes(data)
    assert nccl_log.read(str(log)) == (data, False)
    got = []
    real_read = os.read

    def counting(fd, n):
        chunk = real_read(fd, n)
        got.append(len(chunk))
        return chunk
    monkeypatch.setattr(nccl_log.os, "read", counting)
    assert nccl_log.read(str(log), max_bytes=10) == (data[:10], True)
    assert sum(got) == 11
    del got[:]
    assert nccl_log.read(str(log), max_bytes=2 * 1024 * 1024) == (data[:2 * 1024 * 1024], True)
    assert sum(got) == 2 * 1024 * 1024 + 1


def test_verdict_trusts_the_node_count_over_the_rank_count():
    assert nccl_log.verdict({"nnodes": 2, "nranks": 1, "network": "IB", "info_lines": 2}) == {
        "gpudirect_rdma": "not_exercised",
        "summary": "no network channel (no channel lines): the run stayed inside the node, GPUDirect RDMA was not "
                   "exercised"}
    assert nccl_log.verdict({"nranks": 1, "info_lines": 1}) == {
        "gpudirect_rdma": "not_exercised",
        "summary": "not exercised: one rank, nothing crossed a network (no channel connection)"}


def test_one_node_verdict_lists_the_local_channels():
    p = nccl_log.parse(_log("comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
                            "Channel 00/0 : 0[0] -> 1[0] via P2P/IPC", "Channel 01/0 : 0[0] -> 1[0] via P2P/IPC",
                            "Channel 02/0 : 0[0] -> 2[0] via SHM/direct/direct"))
    assert p["verdict"] == {"gpudirect_rdma": "not_exercised",
                            "summary": "not exercised: one node, nothing crossed a network (p2p 2, shm 1)"}


@pytest.mark.parametrize("msgs,summary", [
    (["Using network Socket"], "no GPUDirect RDMA (socket transport)"),
    (["NET/IB : No device found.", "Using network Socket"],
     "no GPUDirect RDMA (socket transport) (NET/IB : No device found.)"),
    (["comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0", "Using network Socket"],
     "no GPUDirect RDMA (socket transport)"),
])
def test_socket_plugin_without_channels_on_several_nodes(msgs, summary):
    assert nccl_log.parse(_log(*msgs))["verdict"] == {"gpudirect_rdma": "no", "summary": summary}
