# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pods, PodDisruptionBudgets and evictions of the fake Kubernetes API (k8s_api.FakeK8s), held to the real contract.

The contract is the Eviction API (``POST /api/v1/namespaces/<ns>/pods/<name>/eviction`` with a ``policy/v1``
Eviction) as kubernetes' ``pkg/registry/core/pod/storage/eviction.go`` serves it, the disruption controller's status
of a budget, and graceful deletion:

* A pod that is Pending, Succeeded, Failed or already terminating is deleted without looking at any budget.
* Otherwise the budgets of the pod's namespace whose selector matches the pod's labels count (an empty selector
  matches nothing). More than one: 500, "This pod has more than one PodDisruptionBudget, which the eviction
  subresource does not support.". One whose ``status.disruptionsAllowed`` is 0: 429 TooManyRequests, "Cannot evict
  pod as it would violate the pod's disruption budget.", with a ``DisruptionBudget`` cause "The disruption budget
  <name> needs <desiredHealthy> healthy pods and has <currentHealthy> currently". A pod that is not Ready while the
  budget has ``currentHealthy >= desiredHealthy > 0`` is deleted without using the budget up. Else one disruption
  is used up and the pod deleted: 201 with a Success Status.
* A budget's status is computed as the disruption controller does: ``expectedPods`` the pods it selects,
  ``currentHealthy`` those Running, Ready and not terminating, ``desiredHealthy`` ``minAvailable`` or
  ``expectedPods - maxUnavailable`` (percentages rounded up), ``disruptionsAllowed`` ``currentHealthy -
  desiredHealthy``, never below 0 (0 without pods). ``set_disruptions_allowed`` holds it explicitly instead (each
  eviction it allows takes one off); ``release_pdb_after`` sets it after a number of refused evictions (the
  workload got a replacement ready elsewhere, the way a budget frees up during a real drain).
* A budget whose spec changed (``update_pdb``: ``metadata.generation`` + 1) keeps the status the controller last
  computed, with the old ``observedGeneration``, until ``observe_after`` seconds of ``clock`` have passed. Meanwhile
  an eviction it guards answers 429 "Cannot evict pod as it would violate the pod's disruption budget." with the
  cause "The disruption budget <name> is still being processed by the server." and ``retryAfterSeconds`` 10 (the
  ``Retry-After`` header), as ``checkAndDecrement``/``createTooManyRequestsError`` do, whatever it would allow.
* Deletion (eviction or DELETE) is graceful: ``metadata.deletionTimestamp`` (when the grace period ends) and
  ``deletionGracePeriodSeconds`` are set, from the request's ``deleteOptions.gracePeriodSeconds``, else the pod's
  ``spec.terminationGracePeriodSeconds`` (default 30). The pod stays listed while it terminates and is gone once
  ``grace * grace_scale`` seconds of ``clock`` have passed (``grace_scale`` 0.05: a 30-s grace ends after 1.5 s);
  a grace of 0 deletes at once. A second deletion can only shorten the grace.

DaemonSet-owned pods (``owner="DaemonSet"``) and mirror pods (annotation ``kubernetes.io/config.mirror``, owned by
their Node) are served like any pod: skipping them is the draining client's business, as in the real API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import math
import time

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TOO_MANY_REQUESTS = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_BUDGETS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
DEFAULT_GRACE = 30


def selector_matches(selector, labels):
    """A metav1.LabelSelector (matchLabels, matchExpressions) against a labels dict; empty matches nothing."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError("label selector operator %r is not one of In, NotIn, Exists, DoesNotExist" % op)
    return True


def scaled(value, total):
    """An IntOrString of a budget (3 or "50%") against ``total`` pods, rounded up as the controller does."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    raise ValueError("%r is neither a non-negative integer nor a percentage" % (value,))


def pod_ready(pod):
    conds = pod.get("status", {}).get("conditions") or []
    return pod.get("status", {}).get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _rfc3339(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class PodsMixin(object):
    """Pods and budgets of FakeK8s; the caller holds ``self.lock`` around every method but the public setters."""

    def _init_pods(self, pods, pdbs, grace_scale, clock):
        self.pods = {}
        self.pdbs = {}
        self.pdb_allowed = {}  # (ns, name) -> explicit disruptionsAllowed, or absent: computed
        self.pdb_release = {}  # (ns, name) -> (refusals, allowed)
        self.pdb_refusals = {}
        self.pdb_stale = {}  # (ns, name) -> (clock() at which the controller observes the new spec, status before)
        self.terminating = {}  # (ns, name) -> clock() at which the pod is gone
        self.grace_scale = grace_scale
        self.clock = clock
        for entry in pods or []:
            ns, name, node = entry[:3]
            self._put_pod(ns, name, node, **(entry[3] if len(entry) > 3 else {}))
        for spec in pdbs or []:
            spec = dict(spec)
            self._put_pdb(spec.pop("namespace"), spec.pop("name"), **spec)

    # ------------------------------------------------------------------ setup and views (take the lock)
    def add_pod(self, ns, name, node, **kw):
        with self.lock:
            return self._put_pod(ns, name, node, **kw)

    def add_pdb(self, ns, name, **kw):
        with self.lock:
            return self._put_pdb(ns, name, **kw)

    def update_pdb(self, ns, name, observe_after=0.0, **spec):
        """Change the budget's spec (``min_available``, ``max_unavailable``, ``match_labels`` or ``selector``, as for
        add_pdb): its generation goes up and its status stays the old one for ``observe_after`` seconds."""
        with self.lock:
            key = (ns, name)
            old = self.pdbs[key]
            before = self._pdb_status(key)
            if "match_labels" not in spec and "selector" not in spec:
                spec["selector"] = old["spec"]["selector"]
            generation = old["metadata"]["generation"] + 1
            self._put_pdb(ns, name, **spec)
            self.pdbs[key]["metadata"]["generation"] = generation
            if observe_after > 0:
                self.pdb_stale[key] = (self.clock() + observe_after, before)
            return self._pdb_view(key)

    def set_disruptions_allowed(self, ns, name, allowed):
        """Hold the budget's disruptionsAllowed at ``allowed`` (None: computed again from its pods)."""
        with self.lock:
            if allowed is None:
                self.pdb_allowed.pop((ns, name), None)
            else:
                self.pdb_allowed[(ns, name)] = int(allowed)

    def release_pdb_after(self, ns, name, refusals, allowed=1):
        """After ``refusals`` evictions refused by the budget, its disruptionsAllowed becomes ``allowed``."""
        with self.lock:
            self.pdb_release[(ns, name)] = (int(refusals), int(allowed))

    def pod(self, ns, name):
        """The pod as the API serves it now, or None when it is gone."""
        with self.lock:
            self._reap()
            pod = self.pods.get((ns, name))
            return copy.deepcopy(pod)

    def pdb(self, ns, name):
        with self.lock:
            self._reap()
            return self._pdb_view((ns, name))

    def eviction_answers(self):
        """(time, "ns/name", code) of every eviction request, in order."""
        out = []
        for r in self.requests:
            parts = r["path"].strip("/").split("/")
            if r["method"] == "POST" and len(parts) == 7 and parts[6] == "eviction":
                out.append((r["time"], "%s/%s" % (parts[3], parts[5]), r.get("code")))
        return out

    # ------------------------------------------------------------------ model
    def _put_pod(self, ns, name, node, labels=None, owner="ReplicaSet", annotations=None, ready=True,
                 phase="Running", grace=None):
        meta = {"name": name, "namespace": ns, "uid": "uid-%s-%s" % (ns, name), "resourceVersion": str(self.rv),
                "labels": dict(labels or {}), "annotations": dict(annotations or {})}
        if MIRROR_ANNOTATION in meta["annotations"]:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "uid-" + node,
                                        "controller": True}]
        elif owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": name + "-" + owner.lower(),
                                        "uid": "%s-%s" % (owner.lower(), name), "controller": True}]
        spec = {"nodeName": node, "containers": [{"name": "c", "image": "x"}],
                "terminationGracePeriodSeconds": DEFAULT_GRACE if grace is None else int(grace)}
        status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        self.pods[(ns, name)] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
        return copy.deepcopy(self.pods[(ns, name)])

    def _put_pdb(self, ns, name, match_labels=None, selector=None, min_available=None, max_unavailable=None,
                 disruptions_allowed=None):
        if (min_available is None) == (max_unavailable is None):
            raise ValueError("a PodDisruptionBudget has exactly one of minAvailable and maxUnavailable")
        spec = {"selector": copy.deepcopy(selector) if selector is not None else {"matchLabels": dict(match_labels)}}
        if min_available is not None:
            scaled(min_available, 0)
            spec["minAvailable"] = min_available
        else:
            scaled(max_unavailable, 0)
            spec["maxUnavailable"] = max_unavailable
        self.pdbs[(ns, name)] = {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": ns, "uid": "uid-pdb-%s-%s" % (ns, name),
                         "resourceVersion": str(self.rv), "generation": 1, "creationTimestamp": _rfc3339(time.time())},
            "spec": spec}
        if disruptions_allowed is not None:
            self.pdb_allowed[(ns, name)] = int(disruptions_allowed)
        return self._pdb_view((ns, name))

    def _pdb_status(self, key):
        pdb = self.pdbs[key]
        stale = self.pdb_stale.get(key)
        if stale and self.clock() < stale[0]:
            return copy.deepcopy(stale[1])
        self.pdb_stale.pop(key, None)
        generation = pdb["metadata"]["generation"]
        pods = [p for (pns, _n), p in sorted(self.pods.items())
                if pns == key[0] and selector_matches(pdb["spec"]["selector"], p["metadata"].get("labels") or {})]
        expected = len(pods)
        healthy = sum(1 for p in pods if pod_ready(p) and "deletionTimestamp" not in p["metadata"])
        if "minAvailable" in pdb["spec"]:
            desired = scaled(pdb["spec"]["minAvailable"], expected)
        else:
            desired = max(0, expected - scaled(pdb["spec"]["maxUnavailable"], expected))
        allowed = max(0, healthy - desired) if expected > 0 else 0
        if key in self.pdb_allowed:
            allowed = self.pdb_allowed[key]
        return {"observedGeneration": generation, "expectedPods": expected, "currentHealthy": healthy,
                "desiredHealthy": desired, "disruptionsAllowed": allowed,
                "conditions": [{"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                                "observedGeneration": generation,
                                "lastTransitionTime": pdb["metadata"]["creationTimestamp"]}]}

    def _pdb_view(self, key):
        if key not in self.pdbs:
            return None
        doc = copy.deepcopy(self.pdbs[key])
        doc["status"] = self._pdb_status(key)
        return doc

    def _reap(self):
        now = self.clock()
        for key, gone_at in sorted(self.terminating.items()):
            if gone_at <= now:
                self.pods.pop(key, None)
                del self.terminating[key]
        for key in [k for k in self.terminating if k not in self.pods]:  # removed directly by a test's model
            del self.terminating[key]

    def _delete_pod(self, key, options):
        """Graceful deletion: (code, body)."""
        pod = self.pods[key]
        grace = (options or {}).get("gracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        if not isinstance(grace, int) or isinstance(grace, bool) or grace < 0:
            return self.status(422, "Invalid", "gracePeriodSeconds must be a non-negative integer, not %r" % (grace,))
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        if grace == 0:
            self.terminating.pop(key, None)
            return 200, self.pods.pop(key)
        gone_at = self.clock() + grace * self.grace_scale
        if key in self.terminating and self.terminating[key] <= gone_at:
            return 200, copy.deepcopy(pod)
        self.terminating[key] = gone_at
        pod["metadata"]["deletionTimestamp"] = _rfc3339(time.time() + grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        return 200, copy.deepcopy(pod)

    def _evict(self, key, body):
        pod = self.pods.get(key)
        if pod is None:
            return self.status(404, "NotFound", 'pods "%s" not found' % key[1])
        if not isinstance(body, dict) or (body.get("metadata") or {}).get("name") != key[1]:
            return self.status(400, "BadRequest", "name in URL does not match name in Eviction object")
        if self.fail_evictions:
            return self.status(500, "InternalError", "eviction of %s/%s refused by the fake" % key)
        options = body.get("deleteOptions") or {}
        phase = pod["status"].get("phase")
        if phase in ("Pending", "Succeeded", "Failed") or "deletionTimestamp" in pod["metadata"]:
            return self._evicted(key, options)
        labels = pod["metadata"].get("labels") or {}
        budgets = [k for k in sorted(self.pdbs)
                   if k[0] == key[0] and selector_matches(self.pdbs[k]["spec"]["selector"], labels)]
        if len(budgets) > 1:
            return 500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": MANY_BUDGETS, "code": 500}
        if budgets:
            bkey = budgets[0]
            st = self._pdb_status(bkey)
            if not pod_ready(pod) and st["currentHealthy"] >= st["desiredHealthy"] > 0:
                return self._evicted(key, options)
            if st["observedGeneration"] < self.pdbs[bkey]["metadata"]["generation"]:
                return self._refuse(bkey, st, processing=True)
            if st["disruptionsAllowed"] <= 0:
                return self._refuse(bkey, st)
            if bkey in self.pdb_allowed:
                self.pdb_allowed[bkey] -= 1
        return self._evicted(key, options)

    def _evicted(self, key, options):
        code, doc = self._delete_pod(key, options)
        if code != 200:
            return code, doc
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _refuse(self, bkey, st, processing=False):
        details = {}
        if processing:
            # createTooManyRequestsError: the controller has not observed the budget's spec yet
            cause = "The disruption budget %s is still being processed by the server." % bkey[1]
            details["retryAfterSeconds"] = 10
        else:
            self.pdb_refusals[bkey] = self.pdb_refusals.get(bkey, 0) + 1
            release = self.pdb_release.get(bkey)
            if release and self.pdb_refusals[bkey] >= release[0]:
                self.pdb_allowed[bkey] = release[1]
                del self.pdb_release[bkey]
            cause = "The disruption budget %s needs %d healthy pods and has %d currently" % (
                bkey[1], st["desiredHealthy"], st["currentHealthy"])
        details["causes"] = [{"reason": "DisruptionBudget", "message": cause}]
        return 429, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": TOO_MANY_REQUESTS, "reason": "TooManyRequests", "details": details, "code": 429}

    # ------------------------------------------------------------------ routes
    def _pod_route(self, method, ns, rest, body):
        """/api/v1/namespaces/<ns>/pods/<rest...> (rest non-empty)."""
        key = (ns, rest[0])
        if len(rest) == 2 and rest[1] == "eviction" and method == "POST":
            return self._evict(key, body)
        if len(rest) == 1 and method in ("GET", "DELETE"):
            if key not in self.pods:
                return self.status(404, "NotFound", 'pods "%s" not found' % key[1])
            if method == "GET":
                return 200, copy.deepcopy(self.pods[key])
            return self._delete_pod(key, body if isinstance(body, dict) else {})
        return None

    def _pdb_route(self, method, ns, rest):
        """/apis/policy/v1[/namespaces/<ns>]/poddisruptionbudgets[/<name>]."""
        if method != "GET":
            return self.status(405, "MethodNotAllowed", "the fake serves PodDisruptionBudgets read-only")
        if rest:
            doc = self._pdb_view((ns, rest[0]))
            if doc is None:
                return self.status(404, "NotFound", 'poddisruptionbudgets.policy "%s" not found' % rest[0])
            return 200, doc
        items = [self._pdb_view(k) for k in sorted(self.pdbs) if ns is None or k[0] == ns]
        return 200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1",
                     "metadata": {"resourceVersion": str(self.rv)}, "items": items}
