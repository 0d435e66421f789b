# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_config run in-process against a simulated HGX node tree (gpufabric_sim.tree)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.modules import nccl_config


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    os.makedirs(os.path.join(root, "sys/class/net/eno1"))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    return root, manifest


def port_dir(root, ibdev):
    return os.path.join(root, "sys/class/infiniband", ibdev, "ports", "1")


def move_v4_gid(root, ibdev, to_index):
    """Put the RoCE v2 IPv4 GID of ibdev at another index (as after a GID table reshuffle)."""
    p = port_dir(root, ibdev)
    with open(os.path.join(p, "gids", "3")) as f:
        gid = f.read()
    os.unlink(os.path.join(p, "gid_attrs", "types", "3"))
    for sub, text in (("gids", gid), ("gid_attrs/types", "RoCE v2\n"), ("gid_attrs/ndevs", "ens2np0\n")):
        path = os.path.join(p, sub, str(to_index))
        if os.path.exists(path):
            os.chmod(path, 0o644)
        with open(path, "w") as f:
            f.write(text)


def drop_v4_gid(root, ibdev):
    os.unlink(os.path.join(port_dir(root, ibdev), "gid_attrs", "types", "3"))


def conf(root, path="etc/nccl.conf"):
    p = os.path.join(root, path)
    return open(p).read() if os.path.exists(p) else None


def test_render_all_rails_then_idempotent(node, monkeypatch):
    root, manifest = node
    rails = [r["netdev"] for r in manifest["rails"]]
    res = run_module(nccl_config, {"rails": rails, "fifo_tc": 192}, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] is True
    assert res["variables"]["NCCL_IB_HCA"] == "=" + ",".join("mlx5_%d:1" % i for i in range(8))
    assert res["variables"]["NCCL_IB_GID_INDEX"] == "3"
    assert res["variables"]["NCCL_IB_TC"] == "106"
    assert res["variables"]["NCCL_IB_FIFO_TC"] == "192"
    assert res["rails"][0] == {"rail": "ens1np0", "device": "mlx5_0", "port": 1, "gid_index": 3}
    assert res["diff"]["before"] == "" and res["diff"]["after"] == conf(root)
    assert nccl.parse(conf(root)) == res["variables"]
    again = run_module(nccl_config, {"rails": rails, "fifo_tc": 192}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["drift"] == []


def test_expected_tos_agrees(node, monkeypatch):
    root, _m = node
    res = run_module(nccl_config, {"rails": ["ens1np0"], "tc": 106, "expected_tos": 106}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["variables"]["NCCL_IB_TC"] == "106" and "expected_tos" not in conf(root).lower()


def test_check_mode_and_custom_path(node, monkeypatch):
    root, _m = node
    res = run_module(nccl_config, {"rails": ["ens1np0"], "path": "/opt/job/nccl.conf"}, check_mode=True,
                     monkeypatch=monkeypatch)
    assert res["changed"] is True and res["path"] == "/opt/job/nccl.conf"
    assert conf(root, "opt/job/nccl.conf") is None
    assert {d["key"] for d in res["drift"]} == {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC"}


def test_explicit_gid_index_overrides_disagreement(node, monkeypatch):
    root, _m = node
    move_v4_gid(root, "mlx5_1", 5)
    res = run_module(nccl_config, {"rails": ["ens1np0", "ens2np0"], "gid_index": 3}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["variables"]["NCCL_IB_GID_INDEX"] == "3"


BAD = [
    ("tc 256", {"rails": ["ens1np0"], "tc": 256}, None, "tc must be 0..255"),
    ("unknown rail", {"rails": ["ens9np0"]}, None, "rail ens9np0 does not exist"),
    ("rail without RDMA device", {"rails": ["eno1"]}, None, "rail eno1 has no RDMA device"),
    ("duplicate rails", {"rails": ["ens1np0", "ens1np0"]}, None, "listed twice"),
    ("rails disagree", {"rails": ["ens1np0", "ens2np0"]}, "move", "rails disagree"),
    ("no IPv4 GID", {"rails": ["ens2np0"]}, "drop", "no rail has a RoCE v2 GID with an IPv4 address"),
    ("managed var in extra_vars", {"rails": ["ens1np0"], "extra_vars": {"NCCL_IB_HCA": "mlx5"}}, None,
     "must not set NCCL_IB_HCA"),
    ("bad extra var name", {"rails": ["ens1np0"], "extra_vars": {"nccl-debug": "INFO"}}, None,
     "not an environment variable name"),
    # NCCL_IB_TC against the rdma_cm ToS: the DSCP, then the ECN bits; both settings named
    ("tc DSCP against expected_tos", {"rails": ["ens1np0"], "tc": 96, "expected_tos": 106}, None,
     "nccl_ib_tc (nccl_config tc) and roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos) contradict each "
     "other: NCCL_IB_TC is the full traffic class byte"),
    ("tc ECN against expected_tos", {"rails": ["ens1np0"], "tc": 104, "expected_tos": 106}, None,
     "both carry DSCP 26 (same priority), but NCCL_IB_TC is the full traffic class byte and its ECN bits differ"),
    ("expected_tos 300", {"rails": ["ens1np0"], "expected_tos": 300}, None,
     "roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos): 300 is out of range 0..255"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input(node, monkeypatch, case):
    root, _m = node
    _id, args, mutate, msg = case
    if mutate == "move":
        move_v4_gid(root, "mlx5_1", 5)
    elif mutate == "drop":
        drop_v4_gid(root, "mlx5_1")
    res = run_module(nccl_config, args, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert msg in res["msg"]
    assert conf(root) is None
