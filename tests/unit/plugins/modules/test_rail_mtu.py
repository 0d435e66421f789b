# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rail_mtu in-process on a simulated HGX tree, its commands answered by the MTU kernel stand-in (mtu_kernel)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shutil

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim import runtime as sim_runtime
from modrunner import run_module
from mtu_kernel import Kernel

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import task as mtu_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import rail_mtu


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("rail-mtu") / "root")
    return root, sim_tree.build_tree(root, sim_topology.load("hgx-h200"))


@pytest.fixture
def node(template, tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    shutil.copytree(template[0], root, symlinks=True)
    manifest = template[1]
    rails = [r["netdev"] for r in manifest["rails"]]
    ports = dict(((r["ibdev"], 1), (r["netdev"], 4096)) for r in manifest["rails"])
    k = Kernel(dict((r, {}) for r in rails), ports=ports)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setattr(mtu_task, "make_runner", lambda module: k)
    return {"root": root, "rails": rails, "kernel": k}


def test_real_run_then_unchanged(node, monkeypatch):
    res = run_module(rail_mtu, {"rails": node["rails"]}, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] and set(res["mtu"].values()) == {9000}
    assert res["concerns"]["mtu"]["status"] == "ok" and res["concerns"]["mtu"]["corrected"]
    assert [o["owner"] for o in res["owners"]] == ["applier"] * len(node["rails"])
    assert all(p["active_mtu"] == 4096 for p in res["rdma_ports"]) and res["warnings_mtu"] == []
    assert "ip link (live)" in [d["before_header"] for d in res["diff"]]
    assert state.load(Sysroot(node["root"]))["mtu"]["mtu"] == 9000
    again = run_module(rail_mtu, {"rails": node["rails"]}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["concerns"]["mtu"] == {"status": "ok", "reason": None, "items": []}


def test_check_mode_reports_drift_and_writes_nothing(node, monkeypatch):
    before = sim_runtime.tree_hash(node["root"])
    res = run_module(rail_mtu, {"rails": node["rails"]}, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] and res["concerns"]["mtu"]["status"] == "drift"
    assert sim_runtime.tree_hash(node["root"]) == before
    assert all(link["mtu"] == 1500 for link in node["kernel"].links.values())


@pytest.mark.parametrize("args, msg", [
    ({"mtu": 1500}, "rail_network_mtu"),
    ({"mtu": 70000}, "above 65535"),
    ({"rails": ["ens1np0", "ens1np0"]}, "twice"),
    ({"rails": ["nope0"]}, "rail nope0 does not exist"),
])
def test_bad_input_fails_before_anything_is_touched(node, monkeypatch, args, msg):
    args = dict({"rails": node["rails"]}, **args)
    res = run_module(rail_mtu, args, monkeypatch=monkeypatch)
    assert res["failed"] and msg in res["msg"], res["msg"]
    assert res["concerns"]["mtu"]["status"] == "error"
    assert not [c for c in node["kernel"].calls if c[:3] == ["ip", "link", "set"]]


def test_a_port_held_low_warns_and_is_drift(node, monkeypatch):
    k = node["kernel"]
    first = sorted(k.ports)[0]
    k.ports[first] = (k.ports[first][0], 1024)
    res = run_module(rail_mtu, {"rails": node["rails"]}, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["concerns"]["mtu"]["status"] == "drift"
    assert len(res["warnings_mtu"]) == 1 and "%s/1" % first[0] in res["concerns"]["mtu"]["reason"]
