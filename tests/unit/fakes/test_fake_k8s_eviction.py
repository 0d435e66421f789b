# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake Kubernetes API (tests/fakes/k8s_api.py, k8s_pods.py) against the real API's eviction contract.

Over its HTTP server with the kubernetes Python client (what kubernetes.core uses), or through ``dispatch``: an
eviction answers 429 with the real Status (message, DisruptionBudget cause naming the budget) while a budget that
selects the pod allows no disruption, 201 once it allows one; budgets' status is computed as the disruption
controller does; deleted pods terminate over their grace period on the fake's clock; a drain (kubernetes.core's
own pod filter, the kubectl rules) leaves DaemonSet and mirror pods alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import kubernetes  # in requirements.txt: kubernetes.core needs it
import pytest
from ansible_collections.kubernetes.core.plugins.modules import k8s_drain as drain
from kubernetes.client.rest import ApiException

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
for p in (os.path.join(REPO, "tests", "fakes"),):
    if p not in sys.path:
        sys.path.insert(0, p)

from k8s_api import FakeK8s  # noqa: E402 pylint: disable=wrong-import-position,import-error

REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def web_api(clock=None, **pdb):
    pdb = pdb or {"min_available": 2}
    kw = {"clock": clock} if clock else {}
    return FakeK8s(nodes={"n1": {}, "n2": {}}, pods=[
        ("default", "web-0", "n1", {"labels": {"app": "web"}}),
        ("default", "web-1", "n2", {"labels": {"app": "web"}}),
        ("default", "other", "n1", {"labels": {"app": "other"}}),
    ], pdbs=[dict({"namespace": "default", "name": "web-pdb", "match_labels": {"app": "web"}}, **pdb)], **kw)


def evict(api, ns, name, grace=None):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    return api.dispatch("POST", "/api/v1/namespaces/%s/pods/%s/eviction" % (ns, name), {}, body, "application/json")


def api_client(api):
    """A kubernetes client of the fake's HTTP server."""
    cfg = kubernetes.client.Configuration()
    cfg.host = api.url
    return kubernetes.client.ApiClient(cfg)


def refused_over_http(client, ns, name):
    """The kubernetes client's eviction of ns/name, which must raise; the ApiException it raised."""
    body = kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=ns))
    with pytest.raises(ApiException) as exc:
        kubernetes.client.CoreV1Api(client).create_namespaced_pod_eviction(name, ns, body)
    return exc


def test_budget_refuses_with_the_real_status_over_http():
    """429 TooManyRequests over the wire, as the kubernetes client sees it, with the budget named in the cause."""
    api = web_api().start()
    try:
        client = api_client(api)
        core = kubernetes.client.CoreV1Api(client)
        exc = refused_over_http(client, "default", "web-0")
        assert exc.value.status == 429 and exc.value.reason == "Too Many Requests"
        status = json.loads(exc.value.body)
        assert status["kind"] == "Status" and status["status"] == "Failure"
        assert status["reason"] == "TooManyRequests" and status["code"] == 429
        assert status["message"] == REFUSAL
        assert status["details"]["causes"] == [
            {"reason": "DisruptionBudget",
             "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}]
        assert exc.value.headers["Content-Type"] == "application/json"
        # the pod is untouched; a pod no budget selects is evicted (201)
        assert core.read_namespaced_pod("web-0", "default").metadata.deletion_timestamp is None
        other = kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name="other", namespace="default"))
        core.create_namespaced_pod_eviction("other", "default", other)
        assert [a[1:] for a in api.eviction_answers()] == [("default/web-0", 429), ("default/other", 201)]
        pdb = kubernetes.client.PolicyV1Api(client).read_namespaced_pod_disruption_budget(
            "web-pdb", "default")
        assert pdb.status.disruptions_allowed == 0 and pdb.status.current_healthy == 2
    finally:
        api.stop()


def test_budget_allows_once_it_has_room():
    """A third healthy pod elsewhere gives the budget one disruption: the eviction is 201, and uses it up."""
    api = web_api()
    code, doc = evict(api, "default", "web-0")
    assert code == 429 and doc["details"]["causes"][0]["message"].startswith("The disruption budget web-pdb ")
    api.add_pod("default", "web-2", "n2", labels={"app": "web"})
    assert api.pdb("default", "web-pdb")["status"]["disruptionsAllowed"] == 1
    code, doc = evict(api, "default", "web-0")
    assert (code, doc["status"]) == (201, "Success")
    # web-0 terminates: no longer healthy, so the budget is back at 0 and refuses web-1
    st = api.pdb("default", "web-pdb")["status"]
    assert (st["currentHealthy"], st["desiredHealthy"], st["disruptionsAllowed"]) == (2, 2, 0)
    assert evict(api, "default", "web-1")[0] == 429


@pytest.mark.parametrize("pdb,allowed", [
    ({"min_available": 1}, 1), ({"min_available": "50%"}, 1), ({"min_available": "51%"}, 0),
    ({"max_unavailable": 1}, 1), ({"max_unavailable": 0}, 0), ({"max_unavailable": "50%"}, 1),
    ({"min_available": 2, "disruptions_allowed": 1}, 1),
])
def test_budget_status_as_the_disruption_controller_computes_it(pdb, allowed):
    api = web_api(**pdb)
    assert api.pdb("default", "web-pdb")["status"]["disruptionsAllowed"] == allowed
    assert evict(api, "default", "web-0")[0] == (201 if allowed else 429)


def test_explicit_budget_is_used_up_and_released_after_refusals():
    api = web_api(min_available=2, disruptions_allowed=0)
    api.release_pdb_after("default", "web-pdb", refusals=2)
    assert [evict(api, "default", "web-0")[0] for _try in range(3)] == [429, 429, 201]
    assert api.pdb("default", "web-pdb")["status"]["disruptionsAllowed"] == 0
    assert evict(api, "default", "web-1")[0] == 429


def test_two_budgets_on_one_pod_is_a_500():
    api = web_api()
    api.add_pdb("default", "web-pdb-2", match_labels={"app": "web"}, max_unavailable=1)
    code, doc = evict(api, "default", "web-0")
    assert code == 500
    assert doc["message"] == "This pod has more than one PodDisruptionBudget, which the eviction subresource " \
                             "does not support."


def test_pods_the_budget_does_not_guard():
    """Pending, finished, not-Ready (with enough healthy pods) and terminating pods are evicted without the budget;
    an empty selector guards nothing; an eviction needs the pod's name in its body."""
    api = web_api(min_available=1)
    api.add_pod("default", "pending", "n1", labels={"app": "web"}, phase="Pending", ready=False)
    api.add_pod("default", "done", "n1", labels={"app": "web"}, phase="Succeeded", ready=False)
    api.add_pod("default", "sick", "n1", labels={"app": "web"}, ready=False)
    api.set_disruptions_allowed("default", "web-pdb", 0)
    for name in ("pending", "done", "sick"):
        assert evict(api, "default", name)[0] == 201, name
    api.set_disruptions_allowed("default", "web-pdb", None)
    assert evict(api, "default", "web-0")[0] == 201  # 2 healthy, 1 needed
    assert evict(api, "default", "web-0")[0] == 201  # already terminating: deleted again, no budget asked
    assert evict(api, "default", "web-1")[0] == 429
    api.add_pdb("default", "nothing", selector={}, min_available=5)
    assert evict(api, "default", "other")[0] == 201
    code, doc = api.dispatch("POST", "/api/v1/namespaces/default/pods/web-1/eviction", {},
                             {"metadata": {"name": "web-0"}}, "application/json")
    assert code == 400 and "does not match" in doc["message"]
    assert evict(api, "default", "gone")[0] == 404


def test_pods_terminate_after_their_grace_period():
    clock = Clock()
    api = web_api(clock=clock, min_available=1)
    api.add_pod("default", "slow", "n1", grace=60)
    assert evict(api, "default", "web-0")[0] == 201  # grace 30 s of the pod spec: 1.5 s at grace_scale 0.05
    assert evict(api, "default", "slow", grace=10)[0] == 201  # the request's grace wins: 0.5 s
    pod = api.pod("default", "web-0")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30 and pod["metadata"]["deletionTimestamp"]
    listed = api.dispatch("GET", "/api/v1/pods", {"fieldSelector": ["spec.nodeName=n1"]}, None, "")[1]["items"]
    assert sorted(p["metadata"]["name"] for p in listed) == ["other", "slow", "web-0"]  # terminating pods listed
    clock.now += 0.6
    assert api.pod("default", "slow") is None and api.pod("default", "web-0") is not None
    # a second deletion may only shorten the grace
    code, _doc = api.dispatch("DELETE", "/api/v1/namespaces/default/pods/web-0", {}, {"gracePeriodSeconds": 300}, "")
    assert code == 200
    clock.now += 0.95
    code, doc = api.dispatch("GET", "/api/v1/namespaces/default/pods/web-0", {}, None, "")
    assert code == 404 and doc["reason"] == "NotFound"
    # grace 0 deletes at once
    assert api.dispatch("DELETE", "/api/v1/namespaces/default/pods/other", {}, {"gracePeriodSeconds": 0}, "")[0] == 200
    assert api.pod("default", "other") is None


def test_a_drain_leaves_daemonset_and_mirror_pods_alone():
    """kubernetes.core.k8s_drain's own pod filter (kubectl's rules) over what the fake lists for the node."""
    api = FakeK8s(nodes={"n1": {}}, pods=[
        ("default", "web-0", "n1", {"labels": {"app": "web"}}),
        ("kube-system", "agent-x", "n1", {"owner": "DaemonSet"}),
        ("kube-system", "etcd-n1", "n1", {"owner": None, "annotations": {"kubernetes.io/config.mirror": "abc"}}),
        ("default", "elsewhere", "n2", {}),
    ]).start()
    try:
        core = kubernetes.client.CoreV1Api(api_client(api))
        pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items
        to_delete, warnings, errors = drain.filter_pods(pods, False, True, True)
        assert to_delete == [("default", "web-0")] and errors == []
        assert "Ignoring DaemonSet-managed Pods: kube-system/agent-x." in warnings
        assert "cannot delete mirror Pods using API server: kube-system/etcd-n1." in warnings
        for ns, name in to_delete:
            core.create_namespaced_pod_eviction(name, ns, kubernetes.client.V1Eviction(
                metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=ns)))
        assert [a[1:] for a in api.eviction_answers()] == [("default/web-0", 201)]
        assert api.pod("kube-system", "agent-x")["metadata"].get("deletionTimestamp") is None
        # without ignore_daemonsets the same drain refuses to start
        assert drain.filter_pods(pods, False, False, True)[2]
    finally:
        api.stop()


def test_a_budget_the_controller_has_not_observed_refuses_until_it_has():
    """eviction.go checkAndDecrement: status.observedGeneration < metadata.generation answers 429 with the cause
    "... is still being processed by the server." and Retry-After 10 (createTooManyRequestsError), even where the
    new spec would allow the eviction; once the controller has observed the spec, the eviction goes through."""
    clock = Clock()
    api = web_api(clock=clock, min_available=2).start()
    try:
        pdb = api.update_pdb("default", "web-pdb", observe_after=30, max_unavailable=1)
        assert pdb["metadata"]["generation"] == 2 and pdb["status"]["observedGeneration"] == 1
        assert pdb["status"]["disruptionsAllowed"] == 0       # the status the controller computed for min_available 2
        exc = refused_over_http(api_client(api), "default", "web-0")
        status = json.loads(exc.value.body)
        assert (exc.value.status, status["message"], exc.value.headers["Retry-After"]) == (429, REFUSAL, "10")
        assert status["details"] == {"retryAfterSeconds": 10, "causes": [
            {"reason": "DisruptionBudget", "message": "The disruption budget web-pdb is still being processed by the "
                                                      "server."}]}
        clock.now += 29
        assert evict(api, "default", "web-0")[0] == 429
        clock.now += 1
        st = api.pdb("default", "web-pdb")["status"]
        assert (st["observedGeneration"], st["disruptionsAllowed"]) == (2, 1)
        assert evict(api, "default", "web-0")[0] == 201
    finally:
        api.stop()
