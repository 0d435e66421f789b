# -*- coding: utf-8 -*-
"""concern_check: a read-only concern's check by name, the same body and result as its own module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.check import concern_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import SYSROOT_ENV
from ansible_collections.gpufabric.node.plugins.modules import concern_check, fabric_health


@pytest.fixture
def tree(tmp_path):
    root = str(tmp_path / "node")
    sim_tree.build_tree(root, "pcie-4gpu-downtrained")
    return root


def test_the_read_only_concerns_are_those_with_a_read_only_body():
    assert concern_task.read_only()[:2] == ["pcie_link", "gpudirect_rdma"]


@pytest.mark.parametrize("concern", ["pcie_link", "gpudirect_rdma"])
def test_same_status_as_the_concerns_own_module(tree, monkeypatch, concern):
    monkeypatch.setenv(SYSROOT_ENV, tree)
    own = run_module(fabric_health, {}, monkeypatch=monkeypatch)
    by_name = run_module(concern_check, {"concern": concern}, monkeypatch=monkeypatch)
    assert not by_name.get("failed") and by_name["changed"] is False
    assert by_name["concerns"] == own["concerns"]
    assert by_name["concerns"]["pcie_link"]["status"] == "drift"
    checked = run_module(concern_check, {"concern": concern}, check_mode=True, monkeypatch=monkeypatch)
    assert checked["concerns"] == by_name["concerns"] and checked["changed"] is False


@pytest.mark.parametrize("concern", ["dcb", "no_such_concern", ""])
def test_a_concern_that_is_not_read_only_is_refused_by_name(tree, monkeypatch, concern):
    monkeypatch.setenv(SYSROOT_ENV, tree)
    res = run_module(concern_check, {"concern": concern}, monkeypatch=monkeypatch)
    assert res["failed"] and repr(concern) in res["msg"] and "pcie_link" in res["msg"]


def test_the_bodys_options_are_validated_before_it_runs(tree, monkeypatch):
    monkeypatch.setenv(SYSROOT_ENV, tree)
    res = run_module(concern_check, {"concern": "pcie_link", "options": {"pcie_link": {"gpu_idle_speed": "often"}}},
                     monkeypatch=monkeypatch)
    assert res["failed"] and "gpu_idle_speed" in res["msg"] and "often" in res["msg"]
    res = run_module(concern_check, {"concern": "pcie_link", "options": {"no_such_option": 1}},
                     monkeypatch=monkeypatch)
    assert res["failed"] and "no_such_option" in res["msg"]
