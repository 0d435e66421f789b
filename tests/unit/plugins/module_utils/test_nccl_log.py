# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL_DEBUG=INFO log parser on the real log of the device host and on logs built from NCCL's formats."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nccl")


def _load(name):
    with open(os.path.join(FIX, name)) as f:
        return nccl_log.parse(f.read())


REAL_ONE_RANK = ("not exercised: one rank, nothing crossed a network (no channel connection); network plugin Socket "
                 "(NET/IB : No device found.; Failed to initialize NET plugin IB)")


def test_real_one_gpu_run_is_not_exercised_with_the_ib_plugins_reason():
    """The real 1-GPU log (nranks 1, nNodes 1, NET/IB found no device, socket plugin, no channel connection):
    nothing crossed a network, so GPUDirect RDMA was not exercised; the IB plugin's reason is in the verdict."""
    p = _load("nccl-1rank-h200.log")
    assert p["nccl_version"] == "2.28.9+cuda13.0"
    assert p["network"] == "Socket"
    assert (p["nranks"], p["nnodes"]) == (1, 1)
    assert p["channels"] == []          # one rank: the 64 "Channel NN/64 : 0" ring lines name no peer
    assert p["net_plugin_notes"] == ["NET/IB : No device found.", "Failed to initialize NET plugin IB"]
    assert p["verdict"] == {"gpudirect_rdma": "not_exercised", "summary": REAL_ONE_RANK}
    assert {"hca": 0, "name": "eth0", "gpu": None, "enabled": False, "note": None} in p["gdr_hcas"]


@pytest.mark.parametrize("comm_line,expect", [
    ("comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0", "not_exercised"),
    ("comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0", "no"),
    ("ncclCommInitRank comm 0x1 rank 0 nranks 1 cudaDev 0 busId 60 - Init START", "not_exercised"),
    ("ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 60 - Init START", "no"),
    ("cudaDriverVersion 13000", "no"),
])
def test_socket_without_channels_depends_on_the_node_count(comm_line, expect):
    """Socket chosen and no channel line: one node sent nothing over a network; several (or unknown) did over
    sockets."""
    text = "h:1:1 [0] NCCL INFO Using network Socket\nh:1:1 [0] NCCL INFO %s\n" % comm_line
    assert nccl_log.parse(text)["verdict"]["gpudirect_rdma"] == expect


@pytest.mark.parametrize("name,network,kinds,gdr,summary", [
    ("built-ib-gdrdma-2.21.log", "IB", {"p2p": 2, "net_gdrdma": 4}, "yes", "GPUDirect RDMA on every network"),
    ("built-ib-no-gdr-2.21.log", "IB", {"net_no_gdr": 3}, "no", "no GPUDirect RDMA (IB without GDR"),
    ("built-ib-gdrdma-2.8.log", "IB", {"p2p": 1, "net_gdrdma": 2}, "yes", "GPUDirect RDMA on every network"),
    ("built-ring-2.4.log", "IB", {"net_gdrdma": 1, "net_no_gdr": 1}, "partial", "GPUDirect RDMA on 1 of 2"),
    ("built-socket-2-nodes-2.21.log", "Socket", {"net_socket": 2}, "no", "no GPUDirect RDMA (socket transport)"),
    ("built-intra-node-2.21.log", "IB", {"p2p": 2, "shm": 1}, "not_exercised", "no network channel"),
])
def test_built_logs(name, network, kinds, gdr, summary):
    p = _load(name)
    assert p["network"] == network
    assert p["kinds"] == kinds
    assert p["verdict"]["gpudirect_rdma"] == gdr
    assert p["verdict"]["summary"].startswith(summary)


def test_channel_fields_pxn_shared_and_direction():
    p = _load("built-ib-gdrdma-2.21.log")
    proxied = [c for c in p["channels"] if c["proxy"] is not None]
    assert len(proxied) == 1
    c = proxied[0]
    assert (c["channel"], c["conn"], c["rank"], c["peer"], c["direction"]) == (1, 0, 0, 8, "send")
    assert (c["net"], c["net_dev"], c["proxy"], c["gdr"]) == ("IB", 0, 1, True)
    assert [c["direction"] for c in p["channels"] if c["kind"] == "p2p"] == [None, None]
    assert {"hca": 0, "name": None, "gpu": 0, "enabled": True,
            "note": "(distance 4 <= 4), read 1 mode Default"} in p["gdr_hcas"]


@pytest.mark.parametrize("text,expect", [
    ("", "unknown"),
    ("random text\nwithout nccl\n", "unknown"),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n", "unknown"),
    ("h:1:1 [0] NCCL INFO Using network IB\n", "not_exercised"),
    ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IBext_v8/0/GDRDMA(PCI)\n", "yes"),
    ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0/GDRDMA\r\n", "yes"),
])
def test_edge_cases(text, expect):
    assert nccl_log.parse(text)["verdict"]["gpudirect_rdma"] == expect


def test_bytes_and_dmabuf_line():
    p = nccl_log.parse(b"h:1:1 [0] NCCL INFO DMA-BUF is available on GPU device 0\n\xff\n")
    assert p["dmabuf_gpus"] == [0]


@given(st.text(max_size=400))
def test_any_text_parses_to_a_verdict(text):
    p = nccl_log.parse(text)
    assert p["verdict"]["gpudirect_rdma"] in ("yes", "partial", "no", "not_exercised", "unknown")
    assert sum(p["kinds"].values()) == len(p["channels"])


# --- item 16: the log is written by the user's job and parsed by root -------------------------------------------

def _repeats(tree, inside=False):
    """(nested, lazy): whether a repetition sits inside another one, whether any repetition is lazy. An optional
    part (``?``, at most once) is not a repetition."""
    nested = lazy = False
    for op, av in tree:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            repeats = av[1] > 1
            nested = nested or (inside and repeats)
            lazy = lazy or name == "MIN_REPEAT"
            n, z = _repeats(av[2], inside or repeats)
        elif name == "SUBPATTERN":
            n, z = _repeats(av[-1], inside)
        elif name == "BRANCH":
            n = z = False
            for alt in av[1]:
                a, b = _repeats(alt, inside)
                n, z = n or a, z or b
        else:
            continue
        nested, lazy = nested or n, lazy or z
    return nested, lazy


def _patterns():
    return dict((k, v) for k, v in vars(nccl_log).items() if hasattr(v, "pattern") and hasattr(v, "fullmatch"))


def test_patterns_are_linear_by_construction():
    """No repetition inside another and no lazy one (the 40k-space channel line took 7.5 s with ``\\S.*?\\s*\\Z``):
    each pattern is matched once per line, anchored, so a line costs time linear in its length."""
    try:
        from re import _parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse
    pats = _patterns()
    assert {"_CHANNEL", "_GDR", "_NETWORK", "_ASSIGNED"} <= set(pats)
    for name, pat in pats.items():
        assert _repeats(sre_parse.parse(pat.pattern)) == (False, False), name


@pytest.mark.parametrize("line", [
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" + " " * 40000 + "x",
    "h:1:1 [0] NCCL INFO Using network IB" + " " * 40000 + "x",
])
def test_an_over_long_line_is_skipped_and_counted(line):
    """NCCL's lines are at most 1023 characters (its 1024-byte buffer; the real log's Trees line is cut there)."""
    p = nccl_log.parse(line + "\nh:1:1 [0] NCCL INFO Using network Socket\n")
    assert (p["long_lines"], p["info_lines"], p["channels"], p["network"]) == (1, 1, [], "Socket")
    long_ok = "h:1:1 [0] NCCL INFO Using network " + "I" * (nccl_log.MAX_LINE - 40)
    assert nccl_log.parse(long_ok)["network"].startswith("III")


def test_read_is_bounded_regular_file_only_and_never_follows_a_link(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_bytes(b"h:1:1 [0] NCCL INFO Using network IB\n" + b"x" * 100)
    data, truncated = nccl_log.read(str(log), max_bytes=20)
    assert (data, truncated) == (b"h:1:1 [0] NCCL INFO ", True)
    assert nccl_log.read(str(log)) == (log.read_bytes(), False)
    link = tmp_path / "link.log"
    link.symlink_to(log)
    with pytest.raises(nccl_log.LogError, match="symlink is not followed"):
        nccl_log.read(str(link))
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    with pytest.raises(nccl_log.LogError, match="not a regular file"):
        nccl_log.read(str(fifo))
    with pytest.raises(nccl_log.LogError, match="not a regular file"):
        nccl_log.read(str(tmp_path))
    with pytest.raises(nccl_log.LogError, match="cannot open"):
        nccl_log.read(str(tmp_path / "missing"))
    # a job's directory the user swapped for a link to a root-only place: the link is not followed
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "run1").symlink_to(tmp_path)
    os.chmod(str(jobs), 0o1777)
    with pytest.raises(nccl_log.LogError, match="run1 is a symbolic link in a directory others can write"):
        nccl_log.read(str(jobs / "run1" / "nccl.log"))


def test_parse_bounds_text_it_is_given():
    text = "h:1:1 [0] NCCL INFO Using network IB\n" * (nccl_log.MAX_LOG // 30)
    p = nccl_log.parse(text)
    assert p["truncated"] and p["info_lines"] <= nccl_log.MAX_LOG // 37 + 1


# --- item 24: what the mutants of the parser survived ------------------------------------------------------------

def test_an_application_banner_before_and_between_the_nccl_lines_stops_nothing():
    """The application's own output comes first (and between): every NCCL INFO line after it is still read."""
    with open(os.path.join(FIX, "built-ib-gdrdma-2.21.log")) as f:
        lines = f.read().splitlines()
    banner = ["=== training job 42 ===", "", "torch 2.11 | world size 16", "h:1:1 [0] NCCL WARN something"]
    mixed = banner + [x for line in lines for x in (line, "step 1 loss 0.5")]
    # the banner's WARN line is kept as a warning; nothing else changes
    assert nccl_log.parse("\n".join(mixed)) == dict(_load("built-ib-gdrdma-2.21.log"), warnings=["something"])
    p = nccl_log.parse("\n".join(mixed))
    assert p["info_lines"] == len(lines) and p["verdict"]["gpudirect_rdma"] == "yes"


@pytest.mark.parametrize("vias,verdict,summary", [
    (["IB/0/GDRDMA", "Socket/0"], "partial",
     "GPUDirect RDMA on 1 of 2 network channels; 1 over the socket transport"),
    (["IB/0/GDRDMA", "IB/1/GDRDMA", "Socket/0", "IB/2"], "partial",
     "GPUDirect RDMA on 2 of 4 network channels; 1 staged through host memory (IB without GDR), "
     "1 over the socket transport"),
    (["IB/0", "Socket/0"], "no",
     "no GPUDirect RDMA (IB without GDR: 1 network channels stage GPU data through host memory)"),
    (["Socket/0", "Socket/1"], "no", "no GPUDirect RDMA (socket transport)"),
])
def test_logs_mixing_gdrdma_and_socket_channels(vias, verdict, summary):
    text = "\n".join("h:1:1 [0] NCCL INFO Channel %02d/0 : 0[0] -> 8[0] [send] via NET/%s" % (i, via)
                     for i, via in enumerate(vias))
    p = nccl_log.parse(text)
    assert p["verdict"] == {"gpudirect_rdma": verdict, "summary": summary}
    assert sum(p["kinds"].values()) == len(vias)
