# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/upgrade/gpu_operator.py against the GPU Operator model of the fake API (tests/fakes/gpu_operator.py),
driven without HTTP: every poll is a dispatched request, as kubernetes.core would send it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.upgrade import gpu_operator as op

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fakes")
if FAKES not in sys.path:
    sys.path.insert(0, FAKES)

from gpu_operator import GpuOperator  # noqa: E402 pylint: disable=wrong-import-position,import-error
from k8s_api import FakeK8s  # noqa: E402 pylint: disable=wrong-import-position,import-error

NODE = "gpu-1"
OLD, NEW = "6.1.0-50-amd64", "6.1.0-99-amd64"


class Kubelet(object):
    def __init__(self):
        self.boot, self.kernel = "boot-1", OLD

    def __call__(self):
        return self.boot, self.kernel

    def reboot(self, kernel):
        self.boot, self.kernel = "boot-%d" % (int(self.boot.split("-")[1]) + 1), kernel


def cluster(**kw):
    api = FakeK8s(nodes={NODE: {}, "gpu-2": {}})
    kubelet = Kubelet()
    model = GpuOperator(NODE, kubelet, **kw).install(api)
    return api, kubelet, model


def read(api):
    _code, node = api.dispatch("GET", "/api/v1/nodes/" + NODE, {}, None, "")
    _code, pods = api.dispatch("GET", "/api/v1/namespaces/gpu-operator/pods",
                               {"fieldSelector": ["spec.nodeName=" + NODE]}, None, "")
    return node, pods["items"]


def poll_until_ready(api, before, gds=False, polls=20):
    """[state after each poll] until ready or ``polls`` polls."""
    states = []
    for _i in range(polls):
        node, pods = read(api)
        states.append(op.node_state(node, pods, NODE, NEW, before, gds, True))
        if states[-1]["ready"]:
            break
    return states


@pytest.mark.parametrize("replace", [True, False], ids=["pod-replaced", "same-pod-restarted"])
def test_ready_later(replace):
    api, kubelet, model = cluster(replace_driver=replace, driver_ready_after=3)
    node, pods = read(api)
    before = op.identities(pods, NODE)
    assert before["driver"]["pod"].startswith("gpu-operator/nvidia-driver-daemonset-")
    assert before["validator"]["pod"] == "gpu-operator/nvidia-operator-validator-gpu-1"
    # before the reboot: the node reports the old kernel
    assert "reports kernel %s, not %s" % (OLD, NEW) in op.node_state(node, pods, NODE, NEW, before)["reason"]
    kubelet.reboot(NEW)
    states = poll_until_ready(api, before)
    assert states[-1]["ready"], states
    reasons = [s["reason"] for s in states]
    assert any("driver pod" in r and "is not Ready" in r for r in reasons), reasons
    # the validator's pre-reboot status (Ready, old containers) is not taken for readiness
    assert any("validator pod gpu-operator/nvidia-operator-validator-gpu-1" in r and "from before the reboot" in r
               for r in reasons), reasons
    assert any("init container cuda-validation running, not ready" in r for r in reasons), reasons
    _node, pods = read(api)
    new = op.identities(pods, NODE)["driver"]
    assert (new["uid"] != before["driver"]["uid"]) is replace
    assert set(new["containers"].values()).isdisjoint(before["driver"]["containers"].values())
    if replace:
        assert "deleted driver pod %s" % before["driver"]["pod"].split("/")[1] in model.events


def test_driver_never_ready_names_the_pod():
    api, kubelet, model = cluster(driver_ready_after=None)
    before = op.identities(read(api)[1], NODE)
    kubelet.reboot(NEW)
    states = poll_until_ready(api, before, polls=8)
    last = states[-1]
    assert not last["ready"]
    assert last["pod"] == "gpu-operator/" + model.driver_name != before["driver"]["pod"]
    assert last["reason"] == ("driver pod gpu-operator/%s on node gpu-1 is not Ready: phase Running; container "
                              "nvidia-driver-ctr running, not ready" % model.driver_name)


def test_failing_validation_names_the_validator():
    api, kubelet, _model = cluster(failing_validation="cuda-validation", driver_ready_after=2)
    before = op.identities(read(api)[1], NODE)
    kubelet.reboot(NEW)
    last = poll_until_ready(api, before, polls=12)[-1]
    assert not last["ready"]
    assert last["pod"] == "gpu-operator/nvidia-operator-validator-gpu-1"
    assert "init container cuda-validation waiting (CrashLoopBackOff)" in last["reason"]
    assert "init container plugin-validation waiting (PodInitializing)" in last["reason"]


@pytest.mark.parametrize("nvfs_ready,loaded,expect", [
    (False, True, "container nvidia-fs-ctr running, not ready"),
    (True, False, "nvidia-fs is not loaded on node gpu-1 (no /sys/module/nvidia_fs)"),
    (True, None, "nvidia-fs is not loaded on node gpu-1 (not checked)"),
    (True, True, None),
])
def test_gds(nvfs_ready, loaded, expect):
    api, kubelet, _model = cluster(gds=True, nvfs_ready=nvfs_ready, driver_ready_after=2)
    before = op.identities(read(api)[1], NODE)
    kubelet.reboot(NEW)
    poll_until_ready(api, before, gds=True, polls=12)
    node, pods = read(api)
    state = op.node_state(node, pods, NODE, NEW, before, True, loaded)
    if expect is None:
        assert state["ready"], state
    else:
        assert not state["ready"] and expect in state["reason"], state


def test_gds_without_nvfs_container():
    api, kubelet, _model = cluster(gds=False, driver_ready_after=2)
    before = op.identities(read(api)[1], NODE)
    kubelet.reboot(NEW)
    assert poll_until_ready(api, before)[-1]["ready"]
    node, pods = read(api)
    state = op.node_state(node, pods, NODE, NEW, before, True, True)
    assert "has no nvidia-fs-ctr container, but GDS is enabled" in state["reason"]


def pod(name, app="nvidia-driver-daemonset", node=NODE, uid="u1", ready=True, deleting=False, cids=None):
    meta = {"name": name, "namespace": "gpu-operator", "uid": uid, "labels": {"app": app}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}],
                       "containerStatuses": [{"name": c, "ready": ready, "containerID": i,
                                              "state": {"running": {}}} for c, i in (cids or {"c": "id1"}).items()]}}


VALIDATOR = pod("val", app="nvidia-operator-validator", uid="v1", cids={"v": "vid2"})
CASES = [
    ("no driver", [VALIDATOR], {}, "no driver pod (app=nvidia-driver-daemonset) on node gpu-1"),
    ("other node only", [pod("d", node="gpu-2"), VALIDATOR], {}, "no driver pod"),
    ("terminating old + new", [pod("old", deleting=True, ready=False), pod("new", uid="u2"), VALIDATOR], {}, None),
    ("two drivers", [pod("a"), pod("b", uid="u2"), VALIDATOR], {}, "2 driver pod (app=nvidia-driver-daemonset)s"),
    ("stale same uid", [pod("d"), VALIDATOR], {"driver": {"uid": "u1", "containers": {"c": "id1"}}},
     "driver pod gpu-operator/d on node gpu-1 is still the one from before the reboot (uid u1"),
    ("same uid restarted", [pod("d", cids={"c": "id9"}), VALIDATOR],
     {"driver": {"uid": "u1", "containers": {"c": "id1"}}}, None),
    ("new uid", [pod("d", uid="u3"), VALIDATOR], {"driver": {"uid": "u1", "containers": {"c": "id1"}}}, None),
    ("no validator", [pod("d")], {}, "no validator pod (app=nvidia-operator-validator) on node gpu-1"),
]


@pytest.mark.parametrize("name,pods,before,expect", CASES, ids=[c[0] for c in CASES])
def test_table(name, pods, before, expect):
    node = {"status": {"nodeInfo": {"kernelVersion": NEW}}}
    state = op.node_state(node, copy.deepcopy(pods), NODE, NEW, before)
    if expect is None:
        assert state["ready"], (name, state)
    else:
        assert not state["ready"] and expect in state["reason"], (name, state)


def test_not_read_and_bad_input():
    assert "was not read" in op.node_state(None, [], NODE, NEW)["reason"]
    assert "were not listed" in op.node_state({"status": {"nodeInfo": {"kernelVersion": NEW}}}, None, NODE,
                                              NEW)["reason"]
    with pytest.raises(op.OperatorError):
        op.node_state({"status": []}, [], NODE, NEW)
    with pytest.raises(op.OperatorError):
        op.identities("pods", NODE)


def policy(auto=True, parallel=1, enabled=True):
    up = {"maxParallelUpgrades": parallel}
    if auto is not None:
        up["autoUpgrade"] = auto
    return {"metadata": {"name": "cluster-policy"}, "spec": {"driver": {"enabled": enabled, "upgradePolicy": up}}}


def nodes(**labels):
    return [{"metadata": {"name": n, "labels": lab}} for n, lab in sorted(labels.items())]


DRIVERS = [pod("d1", node="a"), pod("d2", node="b"), pod("d3", node="c")]
ROLLOUT = [
    ("all in play", policy(), DRIVERS, ["a", "b", "c"], {}, ""),
    ("outside, parallel 1", policy(), DRIVERS, ["a"], {}, ""),
    ("outside, parallel 2", policy(parallel=2), DRIVERS, ["a"], {},
     "node(s) b, c outside the play run the driver without nvidia.com/gpu-driver-upgrade.skip=true"),
    ("outside, no limit", policy(parallel=0), DRIVERS, ["a", "b"], {}, "maxParallelUpgrades 0 (no limit)"),
    ("outside labelled", policy(parallel=0), DRIVERS, ["a"],
     {"b": {"nvidia.com/gpu-driver-upgrade.skip": "true"}, "c": {"nvidia.com/gpu-driver-upgrade.skip": "true"}}, ""),
    ("one outside labelled", policy(parallel=0), DRIVERS, ["a"], {"b": {"nvidia.com/gpu-driver-upgrade.skip": "true"}},
     "node(s) c outside"),
    ("autoUpgrade off", policy(auto=False), DRIVERS, ["a", "b", "c"], {}, "autoUpgrade false"),
    ("autoUpgrade unset", policy(auto=None), DRIVERS, ["a", "b", "c"], {}, "autoUpgrade unset"),
    ("driver disabled", policy(enabled=False), DRIVERS, ["a"], {}, "spec.driver.enabled false"),
    ("no driver pods", policy(), [], ["a"], {}, "no driver pod (app=nvidia-driver-daemonset)"),
    ("play node not in the cluster", policy(), DRIVERS, ["a", "x"], {}, "node(s) x of the play was not found"),
    ("play node without driver", policy(), DRIVERS[:2], ["a", "c"], {}, "node(s) c of the play run no driver pod"),
]


@pytest.mark.parametrize("name,cp,pods,play,labels,expect", ROLLOUT, ids=[c[0] for c in ROLLOUT])
def test_rollout_refusal(name, cp, pods, play, labels, expect):
    all_nodes = nodes(**dict((n, labels.get(n, {})) for n in ("a", "b", "c")))
    reason = op.rollout_refusal(cp, pods, all_nodes, play)
    if expect:
        assert expect in reason, (name, reason)
    else:
        assert reason == "", (name, reason)


def test_filters_take_registered_results():
    from ansible_collections.gpufabric.node.plugins.filter import gpu_operator as flt
    cp = {"resources": [policy(parallel=2)]}
    pods = {"resources": DRIVERS}
    all_nodes = {"resources": nodes(a={}, b={}, c={})}
    # [inventory host, node name] pairs: an empty name is the host's own name
    assert flt.gpu_operator_rollout_refusal(cp, pods, all_nodes, [["a", ""], ["h2", "b"], ["c", "c"]]) == ""
    assert "node(s) c outside" in flt.gpu_operator_rollout_refusal(cp, pods, all_nodes, [["a", ""], ["h2", "b"]])
    assert flt.gpu_operator_node_state({"skipped": True}, None, NODE, NEW)["reason"] == \
        "node gpu-1 was not read from the API"
    assert flt.gpu_operator_pod_identities({"resources": []}, NODE) == {"driver": None, "validator": None}
