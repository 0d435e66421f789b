# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/upgrade/k8s_drain.py: what a drain waits for, which budget refused it, from the API's objects."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.upgrade import k8s_drain as kd

REFUSED = ("Failed to delete pod default/web-0 due to: Cannot evict pod as it would violate the pod's disruption "
           "budget.")


def pod(name, node="n1", ns="default", owner="ReplicaSet", labels=None, mirror=False):
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": name + "-owner"}]
    if mirror:
        meta["annotations"] = {kd.MIRROR_ANNOTATION: "hash"}
    return {"metadata": meta, "spec": {"nodeName": node}}


def pdb(name, selector, ns="default", allowed=0, desired=2, current=2):
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "desiredHealthy": desired, "currentHealthy": current}}


def test_remaining_pods_skip_daemonset_and_mirror_pods():
    pods = [pod("web-1"), pod("agent", owner="DaemonSet"), pod("etcd", owner=None, mirror=True),
            pod("bare", owner=None), pod("web-0"), pod("far", node="n2")]
    assert kd.remaining_pods(pods, "n1") == ["default/bare", "default/web-0", "default/web-1"]
    assert kd.skip_reason(pods[1]) == "DaemonSet-owned" and kd.skip_reason(pods[2]) == "mirror pod"
    assert kd.remaining_pods([], "n1") == []


@pytest.mark.parametrize("bad", ["pods", [None], [{"metadata": {"name": "x"}, "spec": {"nodeName": "n1"}}]])
def test_remaining_pods_refuses_what_the_api_does_not_return(bad):
    with pytest.raises(kd.DrainError):
        kd.remaining_pods(bad, "n1")


@pytest.mark.parametrize("message,expect", [
    (REFUSED, "default/web-0"),
    (REFUSED.replace("default/web-0", "team-a/train-7f9c"), "team-a/train-7f9c"),
    ("Failed to delete pod default/web-0 due to: eviction of default/web-0 refused by the fake", None),
    ("Pod deletion errors: cannot delete Pods with local storage: default/x.", None),
    ("", None), (None, None),
    ("prefix " + REFUSED, None),
])
def test_refused_pod(message, expect):
    assert kd.refused_pod(message) == expect


@pytest.mark.parametrize("selector,labels,match", [
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "1"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({}, {"app": "web"}, False),
    (None, {"app": "web"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, {"app": "api"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fe"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fe"]}]}, {"tier": "fe"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False),
])
def test_selector_matches(selector, labels, match):
    assert kd.selector_matches(selector, labels) is match


def test_selector_with_an_unknown_operator_is_an_error():
    with pytest.raises(kd.DrainError, match="'Gt' is not one of In, NotIn"):
        kd.selector_matches({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"})


def test_describe_blockers_names_the_budget_of_the_pod():
    web = pod("web-0", labels={"app": "web"})
    pdbs = [pdb("web-pdb", {"matchLabels": {"app": "web"}}), pdb("db-pdb", {"matchLabels": {"app": "db"}}),
            pdb("web-pdb", {"matchLabels": {"app": "web"}}, ns="other"), pdb("empty", {})]
    assert kd.describe_blockers(pdbs, web) == (
        "PodDisruptionBudget default/web-pdb (disruptionsAllowed 0: it needs 2 healthy pods and has 2) protects pod "
        "default/web-0")
    assert kd.describe_blockers(pdbs[1:], web) == "no PodDisruptionBudget selects pod default/web-0 any more"
    with pytest.raises(kd.DrainError):
        kd.blocking_budgets("pdbs", web)
    # a budget whose spec the disruption controller has not observed yet: the API refuses on that alone
    lagging = pdb("web-pdb", {"matchLabels": {"app": "web"}}, allowed=1, current=3)
    lagging["metadata"]["generation"] = 3
    lagging["status"]["observedGeneration"] = 2
    assert kd.describe_blockers([lagging], web) == (
        "PodDisruptionBudget default/web-pdb (disruptionsAllowed 1: it needs 2 healthy pods and has 3; its new spec "
        "is still being processed by the server, observedGeneration 2 of generation 3) protects pod default/web-0")
