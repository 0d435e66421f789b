# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

GID_CASES = [
    # id, per rail, explicit, expected index or error text
    ("all agree", [("a", 3), ("b", 3)], None, 3),
    ("explicit wins over disagreement", [("a", 3), ("b", 5)], 1, 1),
    ("explicit without discovery", [("a", None)], 0, 0),
    ("disagree", [("a", 3), ("b", 5)], None, "rails disagree on the RoCE v2 IPv4 GID index (a=3, b=5)"),
    ("none has one", [("a", None), ("b", None)], None, "no rail has a RoCE v2 GID with an IPv4 address"),
    ("one lacks it", [("a", 3), ("b", None)], None, "rail(s) b have no RoCE v2 GID"),
    ("explicit out of range", [("a", 3)], 256, "gid_index must be 0..255"),
]


@pytest.mark.parametrize("case", GID_CASES, ids=[c[0] for c in GID_CASES])
def test_choose_gid_index(case):
    _id, per_rail, explicit, expected = case
    if isinstance(expected, int):
        assert nccl.choose_gid_index(per_rail, explicit) == expected
    else:
        with pytest.raises((nccl.NcclError, ValueError)) as e:
            nccl.choose_gid_index(per_rail, explicit)
        assert expected in str(e.value)


def test_hca_exact_match_form():
    assert nccl.hca_value([("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_0", 1)]) == "=mlx5_0:1,mlx5_1:1"
    with pytest.raises(nccl.NcclError):
        nccl.hca_value([])


VARS_CASES = [
    ("minimal", {}, [("NCCL_IB_HCA", "=mlx5_0:1"), ("NCCL_IB_GID_INDEX", "3"), ("NCCL_IB_TC", "106")]),
    ("everything", {"tc": 104, "fifo_tc": 192, "socket_ifname": "=bond0",
                    "extra": {"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_IB_QPS_PER_CONNECTION": 4, "NCCL_DEBUG": True}},
     [("NCCL_IB_HCA", "=mlx5_0:1"), ("NCCL_IB_GID_INDEX", "3"), ("NCCL_IB_TC", "104"), ("NCCL_IB_FIFO_TC", "192"),
      ("NCCL_SOCKET_IFNAME", "=bond0"), ("NCCL_DEBUG", "1"), ("NCCL_IB_QPS_PER_CONNECTION", "4"),
      ("NCCL_NET_GDR_LEVEL", "PHB")]),
]


@pytest.mark.parametrize("case", VARS_CASES, ids=[c[0] for c in VARS_CASES])
def test_desired_vars(case):
    _id, kw, expected = case
    assert nccl.desired_vars("=mlx5_0:1", 3, kw.get("tc", 106), kw.get("fifo_tc"), kw.get("socket_ifname"),
                             kw.get("extra")) == expected


BAD = [
    ("tc 256", {"tc": 256}, "tc must be 0..255"),
    ("tc negative", {"tc": -1}, "tc must be 0..255"),
    ("fifo_tc text", {"fifo_tc": "high"}, "fifo_tc must be an integer"),
    ("extra lower-case", {"extra": {"nccl_debug": "INFO"}}, "not an environment variable name"),
    ("extra managed name", {"extra": {"NCCL_IB_TC": "104"}}, "must not set NCCL_IB_TC"),
    ("extra multi-line", {"extra": {"NCCL_DEBUG": "INFO\nNCCL_IB_TC=0"}}, "single line"),
    ("socket ifname space", {"socket_ifname": "eth 0"}, "white space"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_vars(case):
    _id, kw, msg = case
    with pytest.raises(ValueError, match=msg):
        nccl.desired_vars("=mlx5_0:1", 3, kw.get("tc", 106), kw.get("fifo_tc"), kw.get("socket_ifname"),
                          kw.get("extra"))


def test_write_conf_check_diff_idempotent(tmp_path):
    sr = Sysroot(str(tmp_path))
    path = "/etc/nccl.conf"
    real = os.path.join(str(tmp_path), "etc/nccl.conf")
    os.makedirs(os.path.dirname(real))
    with open(real, "w") as f:
        f.write("NCCL_IB_TC=0\nNCCL_DEBUG=INFO\n")
    variables = nccl.desired_vars("=mlx5_0:1,mlx5_1:1", 3)
    check = nccl.write_conf(sr, variables, True, path)
    assert check["changed"] and open(real).read() == "NCCL_IB_TC=0\nNCCL_DEBUG=INFO\n"
    assert check["drift"] == [
        {"concern": "nccl", "object": path, "key": "NCCL_IB_HCA", "current": None, "desired": "=mlx5_0:1,mlx5_1:1"},
        {"concern": "nccl", "object": path, "key": "NCCL_IB_GID_INDEX", "current": None, "desired": "3"},
        {"concern": "nccl", "object": path, "key": "NCCL_IB_TC", "current": "0", "desired": "106"},
        {"concern": "nccl", "object": path, "key": "NCCL_DEBUG", "current": "INFO", "desired": None},
    ]
    assert check["before"] == "NCCL_IB_TC=0\nNCCL_DEBUG=INFO\n"
    done = nccl.write_conf(sr, variables, False, path)
    assert done["changed"] and open(real).read() == done["after"]
    assert nccl.parse(done["after"]) == dict(variables)
    assert "setenv" in done["after"] and "~/.nccl.conf" in done["after"] and "mounted" in done["after"]
    again = nccl.write_conf(sr, variables, False, path)
    assert not again["changed"] and again["drift"] == []


def test_comment_only_change_is_drift(tmp_path):
    sr = Sysroot(str(tmp_path))
    variables = nccl.desired_vars("=mlx5_0:1", 3)
    sr.write_file_atomic("/etc/nccl.conf", "".join("%s=%s\n" % kv for kv in variables))
    res = nccl.write_conf(sr, variables, True)
    assert res["changed"]
    assert res["drift"] == [{"concern": "nccl", "object": "/etc/nccl.conf", "key": "content", "current": "differs",
                             "desired": "managed"}]


@pytest.mark.parametrize("text,expected", [
    ("A=1\n#B=2\nC==x:1,y:1\n", {"A": "1", "C": "=x:1,y:1"}),
    ("A=1\nA=2\n", {"A": "1"}),
    ("A = 1\n", {"A ": " 1"}),
    ("no equals\n\n", {}),
])
def test_parse_like_nccl(text, expected):
    assert nccl.parse(text) == expected
