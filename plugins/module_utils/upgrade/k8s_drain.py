# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node drain waits for and what blocked it, judged from the objects the Kubernetes API returns.

playbooks/tasks/k8s_drain.yml drains like ``kubectl drain --ignore-daemonsets --delete-emptydir-data
--timeout=<t>``: ``kubernetes.core.k8s_drain`` evicts the pods; an eviction that a PodDisruptionBudget refuses
(429, "Cannot evict pod as it would violate the pod's disruption budget.") is retried until the timeout, as kubectl
does; then the drain waits, within the same timeout, until the evicted pods are gone. Helpers here:

* ``remaining_pods``: the pods still on the node that the drain evicts and waits for: every pod bound to it but
  mirror pods (annotation ``kubernetes.io/config.mirror``: the API cannot delete them) and DaemonSet-owned pods
  (``--ignore-daemonsets``: the DaemonSet would put them back). Terminating pods count until they are gone.
* ``refused_pod``: the pod named by k8s_drain's failure message when a budget refused its eviction, else None.
* ``blocking_budgets`` / ``describe_blockers``: the budgets of the pod's namespace whose selector matches the pod
  (the eviction subresource's rule: an empty selector matches nothing), with their status.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
BUDGET_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."
_REFUSED = re.compile(r"Failed to delete pod ([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([^/\s]+) due to: (.*)", re.DOTALL)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class DrainError(ValueError):
    """Input that is not what the Kubernetes API (or k8s_drain) returns."""


def _dict(value, what):
    if not isinstance(value, dict):
        raise DrainError("%s is not an object: %r" % (what, value))
    return value


def _pod_name(pod):
    meta = _dict(_dict(pod, "a pod").get("metadata"), "a pod's metadata")
    if not meta.get("name") or not meta.get("namespace"):
        raise DrainError("a pod without namespace and name: %r" % (meta,))
    return "%s/%s" % (meta["namespace"], meta["name"])


def skip_reason(pod):
    """Why a drain leaves the pod alone ('mirror pod', 'DaemonSet-owned'), or None when it evicts it."""
    meta = _dict(_dict(pod, "a pod").get("metadata"), "a pod's metadata")
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "mirror pod"
    if any(_dict(o, "an ownerReference").get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return "DaemonSet-owned"
    return None


def remaining_pods(pods, node):
    """Sorted namespace/name of the pods bound to ``node`` that the drain evicts and must see gone."""
    if not isinstance(pods, list):
        raise DrainError("the pods are not a list: %r" % (pods,))
    out = []
    for pod in pods:
        if (_dict(pod, "a pod").get("spec") or {}).get("nodeName") != node:
            continue
        if skip_reason(pod) is None:
            out.append(_pod_name(pod))
    return sorted(out)


def refused_pod(message):
    """namespace/name of the pod whose eviction a budget refused, from k8s_drain's failure message, else None."""
    if not isinstance(message, str):
        return None
    m = _REFUSED.fullmatch(message.strip())
    if not m or BUDGET_REFUSAL not in m.group(4):
        return None
    return "%s/%s" % (m.group(1), m.group(3))


def selector_matches(selector, labels):
    """metav1.LabelSelector semantics (matchLabels and matchExpressions); an empty selector matches nothing."""
    if selector is None:
        return False
    _dict(selector, "a label selector")
    match_labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not match_labels and not exprs:
        return False
    if any(labels.get(k) != v for k, v in _dict(match_labels, "matchLabels").items()):
        return False
    for expr in exprs:
        key, op = _dict(expr, "a matchExpression").get("key"), expr.get("operator")
        values = expr.get("values") or []
        if op not in _OPERATORS:
            raise DrainError("label selector operator %r is not one of %s" % (op, ", ".join(_OPERATORS)))
        present = key in labels
        if (op == "In" and (not present or labels[key] not in values)) \
                or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def blocking_budgets(pdbs, pod):
    """The budgets that select the pod: [{name (namespace/name), disruptionsAllowed, currentHealthy,
    desiredHealthy, processing}], sorted by name. ``processing``: "observedGeneration O of generation G" while the
    disruption controller has not observed the budget's spec (the API refuses every eviction it guards then), else
    None."""
    if not isinstance(pdbs, list):
        raise DrainError("the PodDisruptionBudgets are not a list: %r" % (pdbs,))
    ns = _pod_name(pod).split("/", 1)[0]
    labels = pod["metadata"].get("labels") or {}
    out = []
    for pdb in pdbs:
        meta = _dict(_dict(pdb, "a PodDisruptionBudget").get("metadata"), "a PodDisruptionBudget's metadata")
        if meta.get("namespace") != ns or not selector_matches((pdb.get("spec") or {}).get("selector"), labels):
            continue
        st = pdb.get("status") or {}
        gen, seen = meta.get("generation"), st.get("observedGeneration")
        lag = isinstance(gen, int) and isinstance(seen, int) and seen < gen
        out.append({"name": "%s/%s" % (ns, meta.get("name")), "disruptionsAllowed": st.get("disruptionsAllowed"),
                    "currentHealthy": st.get("currentHealthy"), "desiredHealthy": st.get("desiredHealthy"),
                    "processing": "observedGeneration %d of generation %d" % (seen, gen) if lag else None})
    return sorted(out, key=lambda b: b["name"])


def describe_blockers(pdbs, pod):
    """One sentence naming the budgets that protect the pod, for the drain's failure message."""
    budgets = blocking_budgets(pdbs, pod)
    if not budgets:
        return "no PodDisruptionBudget selects pod %s any more" % _pod_name(pod)
    parts = ["PodDisruptionBudget %s (disruptionsAllowed %s: it needs %s healthy pods and has %s%s)"
             % (b["name"], b["disruptionsAllowed"], b["desiredHealthy"], b["currentHealthy"],
                "; its new spec is still being processed by the server, %s" % b["processing"] if b["processing"]
                else "") for b in budgets]
    return "%s protects pod %s" % ("; ".join(parts), _pod_name(pod))
