# -*- coding: utf-8 -*-
"""Replay of the real H200 microVM (tests/device/results/h200-after): the modules run in-process on its recorded
sysfs (tests/unit/fixtures/hosts/h200-microvm.json, laid out by hostsnap) must give each concern the status the
playbooks gave it on the host itself."""
from __future__ import absolute_import, division, print_function

import json
import os

import pytest

import hostsnap
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fabric_persist, kernel_cmdline, pcie_acs

__metaclass__ = type

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "device", "results",
                       "h200-after")


def recorded(name="drift-after-provision.json"):
    with open(os.path.join(RESULTS, name)) as f:
        return json.load(f)["nodes"]["gpuhost"]


@pytest.fixture
def h200(tmp_path, monkeypatch):
    root = hostsnap.materialize(hostsnap.load("h200-microvm"), str(tmp_path / "root"))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    # the host had no boot-loader, systemd or network tools: nothing of this machine's may answer for it
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return root


@pytest.mark.parametrize("module,args,concern", [
    (kernel_cmdline, {"present": ["iommu=pt"]}, "cmdline"),
    (pcie_acs, {}, "acs"),
    (fabric_persist, {}, "persistence"),
])
def test_replayed_status_is_the_hosts(h200, monkeypatch, module, args, concern):
    want = recorded()["concerns"][concern]
    res = run_module(module, args, check_mode=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    got = res["concerns"][concern]
    assert got["status"] == want["status"], (got, want)
    assert res["changed"] is False


def test_the_microvm_has_no_boot_loader_to_drive(h200, monkeypatch):
    res = run_module(kernel_cmdline, {"present": ["iommu=pt"]}, check_mode=False, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["bootloader"] == "none" and res["changed"] is False
    assert "hypervisor" in res["concerns"]["cmdline"]["reason"]


def test_discovery_sees_the_virtio_netdev_one_numa_node_and_no_rail(h200):
    facts = topology.discover(Sysroot(h200))
    assert [n["netdevs"] for n in facts["nics"]] == [["eth0"]]
    assert [g["numa"] for g in facts["gpus"]] == [0]
    assert facts["rails"] == [] and facts["pairing"] == [] and facts["pairing_reason"]
    # the roles turn an empty pairing into not_checked for every rail concern, as the host's report says
    rep = recorded()
    assert all(rep["concerns"][c]["status"] == "not_checked" for c in ("dcb", "rdma_cm", "sysctl", "nccl"))
    assert rep["verdict"]["status"] == "attention"
