# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the NVIDIA GPU Operator is ready on a node after a reboot, from the objects the Kubernetes API returns.

The operator runs, in its namespace (``gpu-operator`` by default), one driver pod per GPU node (DaemonSet
``nvidia-driver-daemonset``, pod label ``app=nvidia-driver-daemonset``; init container ``k8s-driver-manager``, then
``nvidia-driver-ctr``, with ``nvidia-fs-ctr`` when the ClusterPolicy enables GDS) and one validator pod
(``app=nvidia-operator-validator``; init containers driver-, toolkit-, cuda- and plugin-validation, then the
validator container). The pod is Ready when all its containers are ready, which for the driver means the modules are
loaded (its startup probe), and for the validator that every validation init container exited 0.

"Ready for the new kernel" is decided like this (documented in playbooks/kernel_upgrade.yml):

* the node's kubelet reports the target kernel (``status.nodeInfo.kernelVersion``), so it runs since the reboot;
* the pod is not the pre-reboot one as recorded before the reboot (``identity``): either its uid differs (the
  operator replaced it, as for precompiled per-kernel driver DaemonSets) or, same pod, every container recorded then
  has a new containerID (the kubelet recreates the containers of a surviving pod after a reboot). A pod status still
  showing a recorded containerID is the status from before the reboot, whatever it says about readiness;
* its ``Ready`` condition is ``True``; with GDS, its ``nvidia-fs-ctr`` container exists and is ready.

A pod being deleted (``metadata.deletionTimestamp``) does not count.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DRIVER_LABEL = ("app", "nvidia-driver-daemonset")
VALIDATOR_LABEL = ("app", "nvidia-operator-validator")
NVFS_CONTAINER = "nvidia-fs-ctr"
ROLES = (("driver", DRIVER_LABEL), ("validator", VALIDATOR_LABEL))


class OperatorError(Exception):
    """Input that is not what the Kubernetes API returns."""


def _dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OperatorError("%s is not an object: %r" % (what, value))
    return value


def _pods(pods):
    if isinstance(pods, dict):  # a registered k8s_info result or a PodList
        pods = pods.get("resources", pods.get("items", []))
    if not isinstance(pods, list):
        raise OperatorError("pods must be a list of Pod objects, not %r" % (pods,))
    for p in pods:
        _dict(p, "a pod")
    return pods


def pod_ref(pod):
    meta = _dict(pod.get("metadata"), "metadata of a pod")
    return "%s/%s" % (meta.get("namespace", "?"), meta.get("name", "?"))


def pods_of(pods, node, label):
    """The pods with ``label`` (key, value) on ``node`` that are not being deleted, by name."""
    key, value = label
    out = []
    for p in _pods(pods):
        meta = _dict(p.get("metadata"), "metadata of a pod")
        if meta.get("deletionTimestamp"):
            continue
        if _dict(p.get("spec"), "spec of a pod").get("nodeName") != node:
            continue
        if _dict(meta.get("labels"), "labels of a pod").get(key) != value:
            continue
        out.append(p)
    return sorted(out, key=pod_ref)


def _statuses(pod, key="containerStatuses"):
    return [s for s in (_dict(pod.get("status"), "status of a pod").get(key) or []) if isinstance(s, dict)]


def identity(pod):
    """What tells this pod's current containers from later ones: uid and containerID per container."""
    if pod is None:
        return None
    return {"pod": pod_ref(pod), "uid": _dict(pod.get("metadata"), "metadata").get("uid", ""),
            "containers": dict((s.get("name", ""), s["containerID"]) for s in _statuses(pod) if s.get("containerID"))}


def identities(pods, node):
    """{driver: identity or None, validator: identity or None} of the operator's pods on ``node`` now."""
    out = {}
    for role, label in ROLES:
        found = pods_of(pods, node, label)
        out[role] = identity(found[0]) if len(found) == 1 else None
    return out


def _condition(pod, kind):
    for c in _dict(pod.get("status"), "status of a pod").get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return c.get("status") == "True"
    return False


def _state(s):
    state = s.get("state") or {}
    if "waiting" in state:
        return "waiting (%s)" % ((state["waiting"] or {}).get("reason") or "no reason")
    if "terminated" in state:
        t = state["terminated"] or {}
        return "terminated (%s, exit code %s)" % (t.get("reason") or "no reason", t.get("exitCode", "?"))
    if "running" in state:
        return "running, not ready"
    return "not started"


def not_ready_parts(pod):
    """Why a pod is not Ready: its phase, the init containers that have not exited 0, the containers not ready."""
    parts = ["phase %s" % (_dict(pod.get("status"), "status").get("phase") or "unknown")]
    for s in _statuses(pod, "initContainerStatuses"):
        term = (s.get("state") or {}).get("terminated") or {}
        if not ("terminated" in (s.get("state") or {}) and term.get("exitCode") == 0):
            parts.append("init container %s %s" % (s.get("name", "?"), _state(s)))
    for s in _statuses(pod):
        if not s.get("ready"):
            parts.append("container %s %s" % (s.get("name", "?"), _state(s)))
    return parts


def stale(pod, before):
    """True when the pod status is the one from before the reboot (see the module docstring)."""
    if not before:
        return False
    meta = _dict(pod.get("metadata"), "metadata of a pod")
    if meta.get("uid") != before.get("uid"):
        return False
    now = dict((s.get("name"), s.get("containerID")) for s in _statuses(pod))
    old = _dict(before.get("containers"), "containers of a recorded pod")
    return not old or any(now.get(name) == cid for name, cid in old.items())


def check_pod(role, pods, node, before=None, gds=False):
    """(ok, reason) of the operator's ``role`` pod (driver or validator) on ``node``."""
    label = dict(ROLES)[role]
    found = pods_of(pods, node, label)
    what = "%s pod (%s=%s)" % (role, label[0], label[1])
    if not found:
        return False, "no %s on node %s" % (what, node)
    if len(found) > 1:
        return False, "%d %ss on node %s: %s" % (len(found), what, node, ", ".join(pod_ref(p) for p in found))
    pod = found[0]
    ref = pod_ref(pod)
    if stale(pod, before):
        return False, ("%s pod %s on node %s is still the one from before the reboot (uid %s, containers not "
                       "restarted)" % (role, ref, node, before.get("uid")))
    if not _condition(pod, "Ready"):
        return False, "%s pod %s on node %s is not Ready: %s" % (role, ref, node, "; ".join(not_ready_parts(pod)))
    if role == "driver" and gds:
        nvfs = [s for s in _statuses(pod) if s.get("name") == NVFS_CONTAINER]
        if not nvfs:
            return False, ("driver pod %s on node %s has no %s container, but GDS is enabled in the ClusterPolicy"
                           % (ref, node, NVFS_CONTAINER))
        if not nvfs[0].get("ready"):
            return False, "driver pod %s on node %s: container %s %s" % (ref, node, NVFS_CONTAINER, _state(nvfs[0]))
    return True, "%s pod %s on node %s is Ready" % (role, ref, node)


def node_kernel(node_obj):
    node_obj = _dict(node_obj, "the node")
    return ((_dict(node_obj.get("status"), "status of the node").get("nodeInfo") or {}).get("kernelVersion") or "")


def node_state(node_obj, pods, node, kernel, before=None, gds=False, nvfs_loaded=None):
    """{ready, reason, pod}: the first unmet condition in the order kernel, driver pod, validator pod, nvidia-fs.

    ``node_obj`` None: the node was not read (yet); ``pods`` None: not listed (yet); ``nvfs_loaded`` None: not
    checked (yet). Anything not known yet is unmet."""
    before = _dict(before, "the recorded pods")
    if node_obj is None:
        return {"ready": False, "reason": "node %s was not read from the API" % node, "pod": ""}
    running = node_kernel(node_obj)
    if running != kernel:
        return {"ready": False, "pod": "",
                "reason": "node %s reports kernel %s, not %s (the kubelet has not come back on the target kernel)"
                          % (node, running or "(none)", kernel)}
    if pods is None:
        return {"ready": False, "reason": "the GPU Operator's pods on node %s were not listed" % node, "pod": ""}
    for role, label in ROLES:
        ok, reason = check_pod(role, pods, node, before.get(role), gds)
        if not ok:
            found = pods_of(pods, node, label)
            return {"ready": False, "reason": reason, "pod": pod_ref(found[0]) if len(found) == 1 else ""}
    if gds and not nvfs_loaded:
        return {"ready": False, "pod": "",
                "reason": "nvidia-fs is not loaded on node %s (%s), but GDS is enabled in the ClusterPolicy"
                          % (node, "not checked" if nvfs_loaded is None else "no /sys/module/nvidia_fs")}
    return {"ready": True, "pod": "", "reason": "the GPU Operator's driver%s and validator are ready on node %s"
                                                % (" (with nvidia-fs)" if gds else "", node)}


def _labels(node_obj):
    return _dict(_dict(node_obj.get("metadata"), "metadata of a node").get("labels"), "labels of a node")


def rollout_refusal(cluster_policy, pods, nodes, play_nodes, skip_label="nvidia.com/gpu-driver-upgrade.skip"):
    """Why enabling GDS in ``cluster_policy`` would not roll the driver one node at a time ("" when it would).

    The driver DaemonSet's update strategy is OnDelete (the operator does not allow RollingUpdate for the driver):
    after the ClusterPolicy change, driver pods are replaced only by the driver upgrade controller, which runs when
    ``spec.driver.upgradePolicy.autoUpgrade`` is true, skips nodes labelled ``skip_label=true`` and upgrades at most
    ``maxParallelUpgrades`` nodes at a time (0: all at once). The play labels its own nodes and releases them one at
    a time; a node outside the play that runs a driver pod (``pods``, the driver pods of the cluster) and is not
    labelled is upgraded by the controller on its own, one at a time only with maxParallelUpgrades 1."""
    cp = _dict(cluster_policy, "the ClusterPolicy")
    name = _dict(cp.get("metadata"), "metadata of the ClusterPolicy").get("name", "?")
    driver = _dict(_dict(cp.get("spec"), "spec of the ClusterPolicy").get("driver"), "spec.driver")
    policy = _dict(driver.get("upgradePolicy"), "spec.driver.upgradePolicy")
    if driver.get("enabled", True) is False:
        return ("ClusterPolicy %s has spec.driver.enabled false: the operator runs no driver pod that could load "
                "nvidia-fs" % name)
    if policy.get("autoUpgrade") is not True:
        return ("ClusterPolicy %s has spec.driver.upgradePolicy.autoUpgrade %s: the driver DaemonSet is OnDelete and "
                "nothing would replace the driver pods after the change (the skip label that keeps nodes waiting is "
                "read only by the driver upgrade controller). Set autoUpgrade true with maxParallelUpgrades 1"
                % (name, str(policy.get("autoUpgrade", "unset")).lower()))
    by_name = dict((_dict(_dict(n, "a node").get("metadata"), "metadata").get("name"), n) for n in nodes or [])
    driver_nodes = sorted(set(_dict(p.get("spec"), "spec").get("nodeName") for p in _pods(pods)
                              if _dict(_dict(p.get("metadata"), "metadata").get("labels"), "labels")
                              .get(DRIVER_LABEL[0]) == DRIVER_LABEL[1]) - set([None]))
    if not driver_nodes:
        return ("no driver pod (%s=%s) of the GPU Operator was found: the namespace is wrong or the operator runs "
                "no driver; nothing would load nvidia-fs" % DRIVER_LABEL)
    unknown = sorted(set(play_nodes) - set(by_name))
    if unknown:
        return "node(s) %s of the play was not found in the cluster" % ", ".join(unknown)
    missing = sorted(set(play_nodes) - set(driver_nodes))
    if missing:
        return "node(s) %s of the play run no driver pod of the GPU Operator" % ", ".join(missing)
    outside = [n for n in driver_nodes if n not in set(play_nodes)
               and _labels(by_name.get(n, {})).get(skip_label) != "true"]
    parallel = policy.get("maxParallelUpgrades", 1)
    if outside and parallel != 1:
        return ("node(s) %s outside the play run the driver without %s=true, and ClusterPolicy %s has "
                "spec.driver.upgradePolicy.maxParallelUpgrades %s%s: the driver upgrade controller would replace "
                "their driver pods several at a time. Set maxParallelUpgrades to 1, add those nodes to the play, or "
                "label them %s=true" % (", ".join(outside), skip_label, name, parallel,
                                        " (no limit)" if parallel == 0 else "", skip_label))
    return ""
