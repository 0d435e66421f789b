# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_cm_tos run in-process against a simulated HGX node tree (gpufabric_sim.tree)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
from ansible.module_utils import basic

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import rdma_cm_tos

RDMA = "sys/kernel/config/rdma_cm"


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    # a NIC port without RDMA: a plain netdev
    os.makedirs(os.path.join(root, "sys/class/net/eno1"))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)

    def kernel_sleep(_s):
        """The kernel creates ports/<n>/ of a new configfs group; here on the module's first poll."""
        base = os.path.join(root, RDMA)
        for ibdev in os.listdir(base):
            for port in os.listdir(os.path.join(root, "sys/class/infiniband", ibdev, "ports")):
                attr = os.path.join(base, ibdev, "ports", port, "default_roce_tos")
                if not os.path.exists(attr):
                    os.makedirs(os.path.dirname(attr))
                    with open(attr, "w") as f:
                        f.write("0\n")

    monkeypatch.setattr(rdma_cm, "_sleep", kernel_sleep)
    return root, manifest


def tos_of(root, ibdev, port=1):
    with open(os.path.join(root, RDMA, ibdev, "ports", str(port), "default_roce_tos")) as f:
        return int(f.read())


def test_rails_apply_then_idempotent(node, monkeypatch):
    root, manifest = node
    rails = [r["netdev"] for r in manifest["rails"]]
    first = run_module(rdma_cm_tos, {"rails": rails}, diff=True, monkeypatch=monkeypatch)
    assert not first.get("failed"), first
    assert first["changed"] is True
    assert len(first["ports"]) == 8 and len(first["drift"]) == 9  # 8 ports + the state file
    assert first["ports"][0] == {"device": "mlx5_0", "port": 1, "rail": "ens1np0", "before": 0, "after": 106,
                                 "error": None, "source": "configfs"}
    assert first["results"][0] == {"object": "mlx5_0/1", "result": "changed", "error": None,
                                   "changes": [{"key": "default_roce_tos", "before": 0, "after": 106}]}
    assert first["concerns"]["rdma_cm"]["status"] == "ok" and first["concerns"]["rdma_cm"]["corrected"]
    assert "mlx5_0/1 default_roce_tos = 0" in first["diff"][0]["before"]
    assert "mlx5_7/1 default_roce_tos = 106" in first["diff"][0]["after"]
    assert all(tos_of(root, r["ibdev"]) == 106 for r in manifest["rails"])
    assert state.load(Sysroot(root))["rdma_cm"] == {"rails": sorted(rails), "tos": 106}
    second = run_module(rdma_cm_tos, {"rails": rails}, monkeypatch=monkeypatch)
    assert second["changed"] is False and second["drift"] == []


def test_check_mode_creates_nothing(node, monkeypatch):
    root, _m = node
    res = run_module(rdma_cm_tos, {"devices": ["mlx5_0", "mlx5_1"], "tos": 104}, check_mode=True,
                     monkeypatch=monkeypatch)
    assert res["changed"] is True
    assert [d["current"] for d in res["drift"]] == [0, 0, "missing"]
    assert os.listdir(os.path.join(root, RDMA)) == []
    assert not os.path.exists(os.path.join(root, "etc/gpufabric/state.json"))


def test_state_records_devices_and_keeps_other_sections(node, monkeypatch):
    root, _m = node
    sr = Sysroot(root)
    state.record(sr, "nvidia_fs", {"rw_stats_enabled": 1}, False)
    run_module(rdma_cm_tos, {"devices": ["mlx5_1", "mlx5_0"], "tos": 104}, monkeypatch=monkeypatch)
    doc = state.load(sr)
    assert doc["rdma_cm"] == {"devices": ["mlx5_0", "mlx5_1"], "tos": 104}
    assert doc["nvidia_fs"] == {"rw_stats_enabled": 1}
    again = run_module(rdma_cm_tos, {"devices": ["mlx5_1", "mlx5_0"], "tos": 104}, monkeypatch=monkeypatch)
    assert again["changed"] is False


def test_ce_warning_and_matching_dscp(node, monkeypatch):
    root, _m = node
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, w: warned.append(w))
    res = run_module(rdma_cm_tos, {"devices": ["mlx5_3"], "tos": 107, "expected_dscp": 26}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert tos_of(root, "mlx5_3") == 107
    assert len(warned) == 1 and "ECN CE" in warned[0]


BAD = [
    ("tos 256", {"rails": ["ens1np0"], "tos": 256}, "0..255"),
    ("expected_dscp 64", {"rails": ["ens1np0"], "expected_dscp": 64}, "0..63"),
    ("unknown rail", {"rails": ["ens9np0"]}, "rail ens9np0 does not exist"),
    ("rail without RDMA device", {"rails": ["eno1"]}, "rail eno1 has no RDMA device behind it"),
    ("duplicate rail", {"rails": ["ens1np0", "ens1np0"]}, "listed twice"),
    ("illegal rail name", {"rails": ["ens1/np0"]}, "not a legal Linux interface name"),
    ("unknown device", {"devices": ["mlx5_9"]}, "mlx5_9 does not exist"),
    ("duplicate device", {"devices": ["mlx5_0", "mlx5_0"]}, "twice"),
    ("both selectors", {"rails": ["ens1np0"], "devices": ["mlx5_0"]}, "mutually exclusive"),
    ("no selector", {}, "one of the following is required"),
    # a ToS whose DSCP (tos >> 2) is not the lossless DSCP: both settings named, nothing touched
    ("tos against expected_dscp", {"devices": ["mlx5_3"], "tos": 96, "expected_dscp": 26},
     "roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos) and roce_qos_dscp (rdma_cm_tos expected_dscp) "
     "contradict each other: ToS 96 (DSCP 24, Not-ECT) carries DSCP 24 (tos >> 2) but the lossless DSCP is 26"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input(node, monkeypatch, case):
    root, _m = node
    _id, args, msg = case
    res = run_module(rdma_cm_tos, args, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert msg in res["msg"]
    assert os.listdir(os.path.join(root, RDMA)) == []


def test_ports_timeout_is_reported(node, monkeypatch):
    root, _m = node
    monkeypatch.setattr(rdma_cm, "_sleep", lambda s: None)
    t = [0.0]

    def clock():
        t[0] += 1.0
        return t[0]

    monkeypatch.setattr(rdma_cm, "_clock", clock)
    res = run_module(rdma_cm_tos, {"devices": ["mlx5_0"]}, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert "/ports/ within" in res["msg"] and "mlx5_0/1" in res["msg"]
    # the group was created (not a change by itself); the device keeps what was recorded for it (nothing)
    assert res["changed"] is False and res["results"][0]["result"] == "failed"
    assert res["concerns"]["rdma_cm"]["status"] == "error"
    assert not os.path.exists(os.path.join(root, "etc/gpufabric/state.json"))
