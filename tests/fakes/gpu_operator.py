# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA GPU Operator's pods on one node of the fake Kubernetes API (k8s_api.FakeK8s), across a reboot.

Before the reboot the node runs a Ready driver pod (DaemonSet ``nvidia-driver-daemonset``, label
``app=nvidia-driver-daemonset``, init container ``k8s-driver-manager``, containers ``nvidia-driver-ctr`` and, with
GDS, ``nvidia-fs-ctr``) and a Ready validator pod (``app=nvidia-operator-validator``, init containers
driver-/toolkit-/cuda-/plugin-validation, container ``nvidia-operator-validator``) in namespace ``gpu-operator``.

The model is an observer of the fake API: on every request it asks ``kubelet()`` for the node's (boot id, kernel)
as its kubelet sees them. When the boot id changes (the node rebooted), the Node's ``status.nodeInfo`` gets the new
kernel and boot id and the pods go through what the operator does for a new kernel:

* driver: with ``replace_driver`` (precompiled, per-kernel DaemonSets) the old pod is deleted and a new one with a
  new name and uid appears, Pending (init container k8s-driver-manager running); otherwise the same pod object keeps
  its stale pre-reboot status (Ready, old containerIDs) for one poll, then its containers are recreated. On the
  following polls of the node's pods it is Running with the driver container not ready (building/loading modules),
  and Ready ``driver_ready_after`` polls after the reboot; never with ``driver_ready_after=None``. With GDS its
  nvidia-fs-ctr container becomes ready with it unless ``nvfs_ready`` is false.
* validator: the same pod object, its stale pre-reboot status (Ready, old containerIDs) kept until one poll after
  the driver is Ready; then new containers, init containers running one after the other (one per poll), Ready
  after the last; with ``failing_validation`` that init container exits 1 and restarts (CrashLoopBackOff), never Ready.

A "poll" is a GET of a pod list or a pod. ``events`` records what the model did.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

NS = "gpu-operator"
VALIDATIONS = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
_ids = itertools.count(1)


def _cid():
    return "containerd://%064x" % next(_ids)


def _image(name):
    return {"image": "registry.invalid/nvidia/%s:1" % name, "imageID": "registry.invalid/nvidia/%s@sha256:%064x" % (name, len(name))}


def _running(name, ready, cid=None):
    return dict(_image(name), name=name, ready=ready, restartCount=0, started=True, containerID=cid or _cid(),
                state={"running": {"startedAt": "2026-01-01T00:00:00Z"}})


def _waiting(name, reason="PodInitializing"):
    return dict(_image(name), name=name, ready=False, restartCount=0, started=False,
                state={"waiting": {"reason": reason}})


def _done(name, code=0, restarts=0):
    return dict(_image(name), name=name, ready=code == 0, restartCount=restarts, containerID=_cid(),
                state={"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}})


def _conditions(ready, initialized=True):
    return [{"type": "Initialized", "status": "True" if initialized else "False"},
            {"type": "ContainersReady", "status": "True" if ready else "False"},
            {"type": "Ready", "status": "True" if ready else "False"}]


class GpuOperator(object):
    def __init__(self, node, kubelet, gds=False, replace_driver=True, driver_ready_after=3, nvfs_ready=True,
                 failing_validation=None, namespace=NS):
        self.node = node
        self.kubelet = kubelet
        self.gds = gds
        self.replace_driver = replace_driver
        self.driver_ready_after = driver_ready_after
        self.nvfs_ready = nvfs_ready
        self.failing_validation = failing_validation
        self.ns = namespace
        self.boot = None
        self.polls = None  # polls since the reboot, None before any reboot
        self.generation = 0
        self.driver_name = None
        self.validator_name = "nvidia-operator-validator-%s" % node[:5]
        self.validator_started = None  # poll at which the validator's containers were recreated
        self.events = []

    # ------------------------------------------------------------------ setup
    def install(self, api):
        """Put the pre-reboot pods into the API and follow it."""
        self.boot, kernel = self.kubelet()
        api.nodes[self.node]["status"]["nodeInfo"].update(kernelVersion=kernel, bootID=self.boot)
        self._new_driver(api, ready=True)
        self._put(api, self.validator_name, "nvidia-operator-validator", "uid-validator-0",
                  [_done(v) for v in VALIDATIONS], [_running("nvidia-operator-validator", True)], True)
        api.observers.append(self)
        return self

    def _driver_containers(self, ready):
        names = ["nvidia-driver-ctr"] + (["nvidia-fs-ctr"] if self.gds else [])
        return [_running(n, ready and (n != "nvidia-fs-ctr" or self.nvfs_ready or self.polls is None))
                for n in names]

    def _new_driver(self, api, ready):
        self.generation += 1
        if self.driver_name:
            api.pods.pop((self.ns, self.driver_name), None)
            self.events.append("deleted driver pod %s" % self.driver_name)
        self.driver_name = "nvidia-driver-daemonset-%d%s" % (self.generation, self.node[:5])
        if ready:
            self._put(api, self.driver_name, "nvidia-driver-daemonset", "uid-driver-%d" % self.generation,
                      [_done("k8s-driver-manager")], self._driver_containers(True), True)
        else:
            init = [dict(_running("k8s-driver-manager", False), ready=False)]
            self._put(api, self.driver_name, "nvidia-driver-daemonset", "uid-driver-%d" % self.generation, init,
                      [_waiting(n) for n in ["nvidia-driver-ctr"] + (["nvidia-fs-ctr"] if self.gds else [])], False,
                      phase="Pending", initialized=False)
        self.events.append("created driver pod %s" % self.driver_name)

    def _put(self, api, name, app, uid, init, containers, ready, phase="Running", initialized=True):
        api.pods[(self.ns, name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "uid": uid, "resourceVersion": str(api.rv),
                         "labels": {"app": app, "app.kubernetes.io/component": app.replace("-daemonset", "")},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app,
                                              "uid": "ds-" + app, "controller": True}]},
            "spec": {"nodeName": self.node,
                     "containers": [{"name": c["name"], "image": c["image"]} for c in containers],
                     "initContainers": [{"name": c["name"], "image": c["image"]} for c in init]},
            "status": {"phase": phase, "conditions": _conditions(ready, initialized),
                       "initContainerStatuses": init, "containerStatuses": containers},
        }

    # ------------------------------------------------------------------ the observer
    def __call__(self, api, method, path, query):
        boot, kernel = self.kubelet()
        if boot != self.boot:
            self.boot = boot
            api.nodes[self.node]["status"]["nodeInfo"].update(kernelVersion=kernel, bootID=boot)
            self.events.append("node %s booted %s" % (self.node, kernel))
            self.polls = 0
            self.validator_started = None
            if self.replace_driver:
                self._new_driver(api, ready=False)
            return
        if self.polls is None or method != "GET" or "/pods" not in path:
            return
        self.polls += 1
        self._driver(api)
        self._validator(api)

    def _driver_ready(self):
        return self.driver_ready_after is not None and self.polls >= self.driver_ready_after

    def _driver(self, api):
        pod = api.pods.get((self.ns, self.driver_name))
        if pod is None:
            return
        st = pod["status"]
        if self._driver_ready():
            st["containerStatuses"] = [dict(s, ready=True) if s["name"] != "nvidia-fs-ctr" or self.nvfs_ready
                                       else dict(s, ready=False) for s in st["containerStatuses"]]
            ready = all(s["ready"] for s in st["containerStatuses"])
            st.update(phase="Running", conditions=_conditions(ready))
        elif self.polls >= 1 and (st["phase"] == "Pending" or self.polls == 1):
            # init done (or, same pod, its containers recreated after the boot); the driver is loading
            st["initContainerStatuses"] = [_done("k8s-driver-manager")]
            st["containerStatuses"] = [_running(s["name"], False) for s in st["containerStatuses"]]
            st.update(phase="Running", conditions=_conditions(False))

    def _validator(self, api):
        pod = api.pods[(self.ns, self.validator_name)]
        if not self._driver_ready():
            return  # the kubelet has not synced the validator yet: its status is still the pre-reboot one
        if self.validator_started is None:
            self.validator_started = self.polls + 1  # the kubelet syncs the validator a poll after the driver
        if self.polls < self.validator_started:
            return
        step = self.polls - self.validator_started  # validations finished so far
        init = []
        for i, name in enumerate(VALIDATIONS):
            if name == self.failing_validation and i <= step:
                init.append(dict(_done(name, 1, restarts=step - i),
                                 state={"waiting": {"reason": "CrashLoopBackOff"}}, ready=False))
                init.extend(_waiting(n) for n in VALIDATIONS[i + 1:])
                break
            if i < step:
                init.append(_done(name))
            elif i == step:
                init.append(dict(_running(name, False)))
            else:
                init.append(_waiting(name))
        ready = len(init) == len(VALIDATIONS) and all("terminated" in s["state"] for s in init)
        pod["status"] = {"phase": "Running" if ready else "Pending", "conditions": _conditions(ready, ready),
                         "initContainerStatuses": init,
                         "containerStatuses": [_running("nvidia-operator-validator", True) if ready
                                               else _waiting("nvidia-operator-validator")]}
