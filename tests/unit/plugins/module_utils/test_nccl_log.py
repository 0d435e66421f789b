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

from ansible_collections.gpufabric.node.plugins.module_utils import nccl_log

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nccl")


def _load(name):
    with open(os.path.join(FIX, name)) as f:
        return nccl_log.parse(f.read())


def test_real_one_gpu_run_is_socket_without_gdr():
    p = _load("nccl-1rank-h200.log")
    assert p["nccl_version"] == "2.28.9+cuda13.0"
    assert p["network"] == "Socket"
    assert p["channels"] == []          # one rank: the 64 "Channel NN/64 : 0" ring lines name no peer
    assert p["verdict"] == {"gpudirect_rdma": "no", "summary": "no GPUDirect RDMA (socket transport)"}
    assert {"hca": 0, "name": "eth0", "gpu": None, "enabled": False, "note": None} in p["gdr_hcas"]


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
