# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric_health module on simulated nodes: read-only concerns pcie_link and gpudirect_rdma, the NCCL log."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

import pytest

from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import SYSROOT_ENV
from ansible_collections.gpufabric.node.plugins.modules import fabric_health

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NCCL = os.path.join(REPO, "tests", "fixtures", "nccl")


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    built = {}

    def get(name):
        if name not in built:
            root = str(tmp_path_factory.mktemp(name) / "root")
            sim_tree.build_tree(root, name)
            built[name] = root
        return built[name]
    return get


def _digest(root):
    h = hashlib.sha256()
    for d, _dirs, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = os.path.join(d, f)
            if not os.path.islink(p):
                h.update(p.encode())
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


@pytest.mark.parametrize("topology,check_mode,link,gdr", [
    ("hgx-h200", False, "ok", "ok"),
    ("hgx-h200", True, "ok", "ok"),
    ("pcie-4gpu-crossnuma", False, "ok", "ok"),
    ("pcie-4gpu-downtrained", False, "drift", "ok"),
    ("pcie-4gpu-downtrained", True, "drift", "ok"),
])
def test_concerns_same_in_check_mode_and_real_run(trees, monkeypatch, topology, check_mode, link, gdr):
    root = trees(topology)
    monkeypatch.setenv(SYSROOT_ENV, root)
    before = _digest(root)
    r = run_module(fabric_health, {}, check_mode=check_mode, monkeypatch=monkeypatch)
    assert not r.get("failed"), r
    assert r["changed"] is False
    assert r["concerns"]["pcie_link"]["status"] == link
    assert r["concerns"]["gpudirect_rdma"]["status"] == gdr
    assert r["gpudirect"]["mechanism"] == "dmabuf"
    assert _digest(root) == before, "a read-only check wrote to the node"
    if link == "drift":
        assert r["concerns"]["pcie_link"]["items"][0]["key"] == "width"
        assert any("trained at x8 of x16" in w for w in r["warnings_found"])


def test_idle_speed_checked_makes_idle_gpus_drift(trees, monkeypatch):
    monkeypatch.setenv(SYSROOT_ENV, trees("hgx-h200"))
    r = run_module(fabric_health, {"pcie_link": {"gpu_idle_speed": "check"}}, monkeypatch=monkeypatch)
    assert r["concerns"]["pcie_link"]["status"] == "drift"
    assert set(i["key"] for i in r["concerns"]["pcie_link"]["items"]) == {"speed"}


def test_required_mechanism(trees, monkeypatch):
    monkeypatch.setenv(SYSROOT_ENV, trees("hgx-h200"))
    r = run_module(fabric_health, {"gpudirect_rdma": {"mechanism": "nvidia_peermem"}}, monkeypatch=monkeypatch)
    assert r["concerns"]["gpudirect_rdma"]["status"] == "drift"


@pytest.mark.parametrize("log,verdict,warned", [
    ("nccl-1rank-h200.log", "not exercised: one rank, nothing crossed a network (no channel connection); network "
     "plugin Socket (NET/IB : No device found.; Failed to initialize NET plugin IB)", False),
    ("built-ib-gdrdma-2.21.log", "GPUDirect RDMA on every network channel (4 NET/IB/GDRDMA)", False),
])
def test_nccl_log(trees, monkeypatch, log, verdict, warned):
    monkeypatch.setenv(SYSROOT_ENV, trees("hgx-h200"))
    path = os.path.join(NCCL, log)
    r = run_module(fabric_health, {"nccl_log": path}, monkeypatch=monkeypatch)
    assert r["nccl"]["verdict"]["summary"] == verdict
    assert any(path in w for w in r["warnings_found"]) == warned


def test_bad_input_and_unreadable_log(trees, monkeypatch, tmp_path):
    monkeypatch.setenv(SYSROOT_ENV, trees("hgx-h200"))
    r = run_module(fabric_health, {"pcie_link": {"gpu_idle_speed": "sometimes"}}, monkeypatch=monkeypatch)
    assert r["failed"] and "gpu_idle_speed" in r["msg"]
    r = run_module(fabric_health, {"nccl_log": str(tmp_path / "missing.log")}, monkeypatch=monkeypatch)
    assert r["failed"] and "missing.log" in r["msg"]


@pytest.mark.parametrize("broken,other,other_status", [
    ("gdr_check", "pcie_link", "drift"),
    ("pcie_link", "gpudirect_rdma", "ok"),
])
def test_an_error_in_one_check_is_that_concerns_error_only(trees, monkeypatch, broken, other, other_status):
    """Each check is isolated: a read error in one marks that concern error; the other keeps its own status."""
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import task as health_task

    def boom(*_a, **_k):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(getattr(health_task, broken), "check", boom)
    monkeypatch.setenv(SYSROOT_ENV, trees("pcie-4gpu-downtrained"))
    r = run_module(fabric_health, {}, monkeypatch=monkeypatch)
    name = "gpudirect_rdma" if broken == "gdr_check" else "pcie_link"
    assert r["failed"] and name in r["msg"] and "Input/output error" in r["msg"]
    assert r["concerns"][name]["status"] == "error"
    assert "Input/output error" in r["concerns"][name]["reason"]
    assert r["concerns"][other]["status"] == other_status
