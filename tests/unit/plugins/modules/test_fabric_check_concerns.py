# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_check's evaluators of ecn, mtu, nfs_mounts, pcie_link and gpudirect_rdma on the simulated drifted HGX node:
the status, items and reason their roles record; a failing body is its own concern's error (named after the
role's task, as the concern_error filter records it) and the other concerns still report."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from test_check_mode_all import template  # noqa: F401 pylint: disable=unused-import
from test_fabric_check import DRIFTED, _check, node  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry as S
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

NEW = ("ecn", "mtu", "nfs_mounts", "pcie_link", "gpudirect_rdma")


def _statuses(res, names=None):
    return dict((n, d["status"]) for n, d in res["concerns"].items() if names is None or n in names)


def test_the_new_concerns_read_the_roles_variables():
    for n in NEW:
        assert node_check.REGISTRY[n]["keys"] == nd.KEYS[n]
    assert node_check.REGISTRY["pcie_link"]["evaluate"] is node_check.REGISTRY["gpudirect_rdma"]["evaluate"]
    keys = node_check.desired_keys(NEW)
    for k in ("roce_qos_dcqcn", "roce_qos_cnp_dscp", "rail_network_mtu", "rail_network_mtu_persist",
              "storage_mounts_volumes", "fabric_health_gpudirect_mechanism", "__roce_qos_ecn_off_reason"):
        assert k in keys
    # the evidence timer evaluates the same concerns: its desired document carries their keys
    assert "rail_network_mtu" in nd.evidence_desired(dict((k, None) for k in node_check.desired_keys()))


@pytest.mark.parametrize("params,want", [
    ({}, {"pcie_link": {"gpu_idle_speed": "ignore", "slot_limited": "drift"}, "gpudirect_rdma": {"mechanism": "any"}}),
    ({"fabric_health_nccl_log": "/var/log/nccl.log"},
     {"pcie_link": {"gpu_idle_speed": "ignore", "slot_limited": "drift"}, "gpudirect_rdma": {"mechanism": "any"},
      "nccl_log": "/var/log/nccl.log"}),
])
def test_fabric_health_params_mirror_the_role(params, want):
    d = {"fabric_health_gpu_idle_speed": "ignore", "fabric_health_slot_limited": "drift",
         "fabric_health_gpudirect_mechanism": "any", "fabric_health_nccl_log": None}
    d.update(params)
    assert S.pcie_link.params(d) == want


@pytest.mark.parametrize("value,on", [(True, True), ("yes", True), ("True", True), (False, False), ("no", False),
                                      ("false", False), (0, False)])
def test_dcqcn_switch_reads_as_the_bool_filter(value, on):
    assert common.truthy(value) is on


def test_drift_of_the_new_concerns_on_the_drifted_node(node):  # noqa: F811
    res = _check(node, concerns=list(NEW))
    assert _statuses(res) == dict((n, DRIFTED[n]) for n in NEW)
    ecn = res["concerns"]["ecn"]
    # the knobs, and the record the boot-time applier re-applies them from (state.json's ecn section)
    assert set(i["key"] for i in ecn["items"]) == {"np_enable:3", "rp_enable:3", "ecn"}
    rails = [r["netdev"] for r in node["manifest"]["rails"]]
    mtu = dict((i["object"], (i["current"], i["desired"])) for i in res["concerns"]["mtu"]["items"])
    assert dict((r, mtu.get(r)) for r in rails) == dict((r, (1500, 9000)) for r in rails)
    assert res["concerns"]["nfs_mounts"]["reason"]


def test_ecn_off_one_rail_only(node):  # noqa: F811
    """After DCQCN is enabled on every rail, one rail's NP knob turned off is the only ECN item."""
    base = os.path.join(node["root"], "sys/class/net")
    rails = sorted(r for r in os.listdir(base) if os.path.isdir(os.path.join(base, r, "ecn")))
    assert rails
    for r in rails:
        for point in ("roce_np", "roce_rp"):
            with open(os.path.join(base, r, "ecn", point, "enable", "3"), "w") as f:
                f.write("1\n")
    d = node["desired"]
    _rails, dcb_rails = S.dcb.roce_qos_rails(d, _check(node, concerns=["ecn"])["facts"]["pairing"])
    state_store.record_with_drift(Sysroot(node["root"]), "ecn", dict(S.ecn.params(d, dcb_rails)), False)
    assert _check(node, concerns=["ecn"])["concerns"]["ecn"]["status"] == model.OK
    with open(os.path.join(base, rails[1], "ecn", "roce_np", "enable", "3"), "w") as f:
        f.write("0\n")
    doc = _check(node, concerns=["ecn"])["concerns"]["ecn"]
    assert doc["status"] == model.DRIFT
    assert [(i["object"], i["key"]) for i in doc["items"]] == [(rails[1], "np_enable:3")]


def test_dcqcn_off_is_not_applicable_with_the_roles_reason(node):  # noqa: F811
    node["desired"]["roce_qos_dcqcn"] = False
    doc = _check(node, concerns=["ecn"])["concerns"]["ecn"]
    assert doc == model.status(model.NOT_APPLICABLE, node["desired"]["__roce_qos_ecn_off_reason"])


def test_no_rails_leaves_ecn_and_mtu_not_checked(node, monkeypatch):  # noqa: F811
    monkeypatch.setattr(node_check.Context, "pairing", lambda self: [])
    res = _check(node, concerns=["ecn", "mtu"])
    assert _statuses(res) == {"ecn": model.NOT_CHECKED, "mtu": model.NOT_CHECKED}
    assert res["concerns"]["ecn"]["reason"] == model.one_line(node["desired"]["__roce_qos_no_rails"])
    assert res["concerns"]["mtu"]["reason"] == model.one_line(node["desired"]["__rail_network_no_rails"])


@pytest.mark.parametrize("over,name,task,text", [
    # the module's own error status (the role's export step records the failed result's concerns)
    ({"rail_network_mtu": 1500}, "mtu", None, "4200"),
    ({"storage_mounts_volumes": [{"path": "relative/mnt", "server": "10.0.0.1", "export": "/x"}]}, "nfs_mounts",
     None, "relative/mnt"),
    ({"roce_qos_cnp_priority": 9}, "ecn", None, "cnp_priority"),
    # a failure without a status of the module's own (its options): what the role's rescue records, naming the task
    ({"roce_qos_cnp_dscp": "high"}, "ecn", S.ecn.TASK, "cnp_dscp"),
    ({"rail_network_mtu_persist": "maybe"}, "mtu", "MTU of the rails, live and where their owner keeps it",
     "persist"),
])
def test_a_failing_body_is_its_own_concerns_error(node, over, name, task, text):  # noqa: F811
    node["desired"].update(over)
    res = _check(node)
    doc = res["concerns"][name]
    assert doc["status"] == model.ERROR and text in doc["reason"], doc
    named = doc["reason"].startswith(("MTU of", "Mount", "ECN"))
    assert doc["reason"].startswith(task + ": ") if task else not named, doc
    assert dict((n, s) for n, s in _statuses(res).items() if n != name) == dict(
        (n, s) for n, s in DRIFTED.items() if n != name)


def test_fabric_health_failure_is_the_error_of_its_own_concern_only(node, monkeypatch):  # noqa: F811
    """pcie_link's check cannot read a config space: pcie_link is error; gpudirect_rdma, checked on its own, keeps
    its status (issue 21 item 11: one try around both marked both error)."""
    def unreadable(*_a, **_kw):
        raise OSError(5, "Input/output error", "/sys/bus/pci/devices/0000:17:00.0/config")
    monkeypatch.setattr(pcie_link, "check", unreadable)
    res = _check(node)
    doc = res["concerns"]["pcie_link"]
    assert doc["status"] == model.ERROR, doc
    assert doc["reason"].startswith("pcie_link check failed: "), doc
    assert "Input/output error" in doc["reason"]
    assert dict((n, s) for n, s in _statuses(res).items() if n != "pcie_link") == dict(
        (n, s) for n, s in DRIFTED.items() if n != "pcie_link")


def test_fabric_health_uses_the_plays_discovery(node, monkeypatch):  # noqa: F811
    """One discovery for the whole check: the fabric_health body gets the play's facts and discovers nothing."""
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
    calls = []
    real = topology.discover

    def counting(sysroot=None, gather_subset=None):
        calls.append(sorted(gather_subset or []))
        return real(sysroot, gather_subset)
    monkeypatch.setattr(topology, "discover", counting)
    res = _check(node, concerns=["pcie_link", "gpudirect_rdma"])
    assert _statuses(res) == {"pcie_link": model.OK, "gpudirect_rdma": model.OK}
    assert len(calls) == 1, calls
