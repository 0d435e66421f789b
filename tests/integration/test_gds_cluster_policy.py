# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gds role's ClusterPolicy rollout (``gds_cluster_policy: true``) against the fake Kubernetes API.

Two simulated HGX H200 nodes (SSH) and the fake API (tests/fakes/k8s_api.py). The GPU Operator is modelled by a hook
on the fake API: when ``spec.gds.enabled`` of the ClusterPolicy becomes true, every node without the skip label
``nvidia.com/gpu-driver-upgrade.skip=true`` gets a new driver pod at once; a node whose skip label is removed while
GDS is enabled gets one then. A new driver pod "loads" nvidia-fs: the hook writes ``/proc/driver/nvidia-fs/*`` into
that node's sysroot (removed from both nodes before the run), which is what the role waits for.

Asserted from the recorded requests and the operator's events: the skip label is put on every node of the play before
the ClusterPolicy changes, ``spec.gds.enabled`` is patched to true exactly once, no driver pod is replaced by the
ClusterPolicy change itself, the labels are removed one node at a time (the second node only after the first node's
nvidia-fs came up and the proof ran there), and a second run changes nothing in the cluster.
The Kubernetes node names differ from the inventory names (``gds_node_name`` as a host variable) so both the
labelling loop and the per-node removal must use the mapping.

The operator's driver pods (label app=nvidia-driver-daemonset, namespace gpu-operator) run on both nodes; the role
reads them and the cluster's nodes before the change and refuses, with the reason, a ClusterPolicy whose driver
upgrade controller would not roll one node at a time: autoUpgrade off, or a driver node outside the play without the
skip label while maxParallelUpgrades is not 1 (then nothing in the cluster changes).

Also: a node name the labelling cannot resolve (``gds_node_name`` given with the role, which hostvars do not show
for the other hosts, or a node the cluster does not have) stops the role before the ClusterPolicy changes; a driver
pod that never loads nvidia-fs stops the rollout on that node with the next node still labelled, and a rerun
continues from there without relabelling or patching the ClusterPolicy again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab"), os.path.join(REPO, "tests", "fakes"),
          HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import fleet as fleetmod  # noqa: E402 pylint: disable=wrong-import-position
from k8s_api import CLUSTER_POLICIES, FakeK8s  # noqa: E402 pylint: disable=wrong-import-position

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
NODES = {"sim1": "hgx-h200", "sim2": "hgx-h200"}
K8S_NAME = {"sim1": "gpu-sim1.cluster.local", "sim2": "gpu-sim2.cluster.local"}
CP_PATH = CLUSTER_POLICIES + "/cluster-policy"
NVFS = os.path.join("proc", "driver", "nvidia-fs")


def _have_kubernetes():
    try:
        import kubernetes  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
        return True
    except ImportError:
        return False


WHY = fleetmod.why_not() or (None if _have_kubernetes() else
                             "the kubernetes Python client is not installed (kubernetes.core needs it)")
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

PLAYBOOK = """\
- name: Roll gds.enabled out one node at a time
  hosts: gpufabric_sim
  serial: 1
  gather_facts: false
  roles:
    - role: gpufabric.node.gds
      vars: {role_vars}
"""
ROLE_VARS = {
    "gds_cluster_policy": True, "gds_driver_wait_timeout": 60, "gds_verify": True, "gds_verify_path": "/mnt/gds-check",
    "gds_verify_nfs_rdma": False, "gds_verify_failed_when": "never",
}


class Operator(object):
    """The GPU Operator's driver rollout as far as the role depends on it (a hook of the fake API).

    A replaced driver pod loads nvidia-fs on its node unless the node is in ``broken`` (the pod never comes up)."""

    def __init__(self, fleet, nvfs_saved, broken=()):
        self.fleet = fleet
        self.nvfs_saved = nvfs_saved
        self.broken = set(broken)
        self.by_k8s = dict((v, k) for k, v in K8S_NAME.items())
        self.events = []  # (request index, inventory name, cause)
        self.gds_nodes = set()

    def __call__(self, api, kind, name, before, after):
        cp = api.cluster_policies["cluster-policy"]
        if not cp["spec"].get("gds", {}).get("enabled"):
            return
        if kind == "ClusterPolicy" and not before["spec"].get("gds", {}).get("enabled"):
            for node_name, node in sorted(api.nodes.items()):
                if node["metadata"]["labels"].get(SKIP) != "true":
                    self._replace(api, node_name, "ClusterPolicy change")
        elif kind == "Node" and after["metadata"]["labels"].get(SKIP) != "true" and name not in self.gds_nodes:
            self._replace(api, name, "skip label removed")

    def _replace(self, api, node_name, cause):
        host = self.by_k8s[node_name]
        self.gds_nodes.add(node_name)
        self.events.append((len(api.requests) - 1, host, cause))
        if host not in self.broken:
            load_nvfs(self.fleet, host, self.nvfs_saved)


def load_nvfs(fleet, host, saved):
    """nvidia-fs comes up: its proc files appear; the fleet's server takes the modules file over (nvfs_proc.py)."""
    dest = os.path.join(fleet.root(host), NVFS)
    if not os.path.exists(dest):
        shutil.copytree(saved, dest)


def not_regular(directory, names):
    """copytree ignore: the modules file of a served node is a FIFO (nvfs_proc.py), which cannot be copied."""
    import stat
    return [n for n in names if not stat.S_ISREG(os.lstat(os.path.join(directory, n)).st_mode)
            and not os.path.isdir(os.path.join(directory, n))]


def write_inventory(path, names):
    hosts = dict((h, {"gds_node_name": names[h]} if names else {}) for h in NODES)
    hosts["localhost"] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    with open(path, "w") as f:
        json.dump({"all": {"hosts": hosts}}, f)
    return path


def run_play(fleet, tmp, api, role_vars=None, names=None):
    """Run the rollout play; the Kubernetes node names are host variables (``names``, K8S_NAME when None; {} for
    none, then they come from the role's vars or its default)."""
    kubeconfig = api.write_kubeconfig(os.path.join(tmp, "kubeconfig"))
    rv = dict(ROLE_VARS, gds_kubeconfig=kubeconfig)
    rv.update(role_vars or {})
    play = os.path.join(tmp, "gds_rollout.yml")
    with open(play, "w") as f:
        f.write(PLAYBOOK.format(role_vars=json.dumps(rv)))
    extra_inv = write_inventory(os.path.join(tmp, "k8s_names.json"), K8S_NAME if names is None else names)
    env = fleetmod.env()
    env.update(ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False", K8S_AUTH_KUBECONFIG=kubeconfig)
    argv = [os.path.join(fleetmod.BIN, "ansible-playbook"), "-i", fleet.inventory, "-i", extra_inv, play]
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=900, check=False)
    return p.returncode, p.stdout


TASK = re.compile(r"^TASK \[(?:[\w.]+ : )?(.*?)\]")
RESULT = re.compile(r"^(ok|changed|skipping|fatal|failed): \[(\w+)")


def task_log(output):
    """[(task name, host, status)] in the order the default callback printed them."""
    out, task = [], None
    for line in output.splitlines():
        m = TASK.match(line)
        if m:
            task = m.group(1)
            continue
        m = RESULT.match(line)
        if m and task:
            out.append((task, m.group(2), m.group(1)))
    return out


def first(log, task_prefix, host, statuses=("ok", "changed")):
    for i, (task, h, status) in enumerate(log):
        if task.startswith(task_prefix) and h == host and status in statuses:
            return i
    raise AssertionError("no %s result of %r for %s in %r" % (statuses, task_prefix, host, log))


def label_patches(api):
    """[(request index, inventory name, label value)] of node PATCHes that mention the skip label."""
    by_path = dict(("/api/v1/nodes/" + v, k) for k, v in K8S_NAME.items())
    out = []
    for i, r in enumerate(api.requests):
        if r["method"] == "PATCH" and r["path"] in by_path:
            labels = ((r["body"] or {}).get("metadata") or {}).get("labels") or {}
            if SKIP in labels:
                out.append((i, by_path[r["path"]], labels[SKIP]))
    return out


def cp_patches(api):
    return [(i, r) for i, r in enumerate(api.requests) if r["method"] in ("PATCH", "PUT") and r["path"] == CP_PATH]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gdscp") / "fleet")
    fl = fleetmod.Fleet(path, NODES)
    try:
        fl.create()
        fl.nvfs_saved = str(tmp_path_factory.mktemp("gdscp-nvfs") / "nvidia-fs")
        shutil.copytree(os.path.join(fl.root("sim1"), NVFS), fl.nvfs_saved, ignore=not_regular)
        yield fl
    finally:
        fl.destroy()


@pytest.fixture
def cluster(fleet):
    """Both nodes on their old driver pods (no nvidia-fs), the fake API with the ClusterPolicy and the operator."""
    for host in NODES:
        shutil.rmtree(os.path.join(fleet.root(host), NVFS), ignore_errors=True)
        gds_dir = os.path.join(fleet.root(host), "mnt", "gds-check")
        if not os.path.isdir(gds_dir):
            os.makedirs(gds_dir)
    api = FakeK8s(nodes=dict((K8S_NAME[h], {"unschedulable": False}) for h in NODES))
    add_driver_pods(api, [K8S_NAME[h] for h in sorted(NODES)])
    operator = Operator(fleet, fleet.nvfs_saved)
    api.hooks.append(operator)
    api.start()
    try:
        yield api, operator
    finally:
        api.stop()


def add_driver_pods(api, nodes):
    """The GPU Operator's driver DaemonSet pods on ``nodes`` (Kubernetes names)."""
    for i, node in enumerate(nodes):
        name = "nvidia-driver-daemonset-%d" % i
        api.pods[("gpu-operator", name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "gpu-operator", "uid": "uid-driver-%d" % i,
                         "labels": {"app": "nvidia-driver-daemonset",
                                    "app.kubernetes.io/component": "nvidia-driver"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "controller": True,
                                              "name": "nvidia-driver-daemonset", "uid": "ds-driver"}]},
            "spec": {"nodeName": node, "containers": [{"name": "nvidia-driver-ctr", "image": "driver"}]},
            "status": {"phase": "Running"},
        }


def assert_one_node_at_a_time(fleet, api, operator, log):
    labels = label_patches(api)
    cps = cp_patches(api)
    # exactly one change of the ClusterPolicy, and it enables GDS
    assert len(cps) == 1, cps
    cp_index, cp_req = cps[0]
    assert cp_req["content_type"].startswith("application/json-patch+json")
    assert cp_req["body"] == [{"op": "add", "path": "/spec/gds/enabled", "value": True}]
    cp = api.cluster_policy()
    assert cp["spec"]["gds"]["enabled"] is True
    assert cp["metadata"]["generation"] == 2
    assert cp["spec"]["driver"]["version"] == "570.124.06", "the driver section was touched"

    # every node of the play carries the skip label before the ClusterPolicy changes ...
    before = [(host, value) for i, host, value in labels if i < cp_index]
    assert sorted(before) == [("sim1", "true"), ("sim2", "true")], labels
    # ... so the ClusterPolicy change itself replaces no driver pod
    assert [e for e in operator.events if e[2] == "ClusterPolicy change"] == [], operator.events

    # then the labels come off one node at a time, in play order, each once
    after = [(host, value) for i, host, value in labels if i > cp_index]
    assert after == [("sim1", None), ("sim2", None)], labels
    assert [(host, cause) for _i, host, cause in operator.events] == [
        ("sim1", "skip label removed"), ("sim2", "skip label removed")]
    # sim2's driver is replaced only after sim1 waited for nvidia-fs and ran the proof
    assert first(log, "Wait for nvidia-fs", "sim1") < first(log, "Let the operator replace", "sim2")
    assert first(log, "Run the GDS proof", "sim1") < first(log, "Let the operator replace", "sim2")
    assert first(log, "Wait for nvidia-fs", "sim2") > first(log, "Let the operator replace", "sim2")
    for host in NODES:
        assert SKIP not in api.node(K8S_NAME[host])["metadata"]["labels"]
        assert os.path.exists(os.path.join(fleet.root(host), NVFS, "version"))


def test_rollout_one_node_at_a_time(fleet, cluster, tmp_path):
    api, operator = cluster
    rc, out = run_play(fleet, str(tmp_path), api)
    assert rc == 0, out[-8000:]
    assert_one_node_at_a_time(fleet, api, operator, task_log(out))

    # a second run finds GDS enabled: no label goes back on, the ClusterPolicy is not patched, nothing changes
    rvs = dict((n, api.node(n)["metadata"]["resourceVersion"]) for n in K8S_NAME.values())
    rvs["cp"] = api.cluster_policy()["metadata"]["resourceVersion"]
    seen = len(api.requests)
    rc, out = run_play(fleet, str(tmp_path), api)
    assert rc == 0, out[-8000:]
    assert [x for x in label_patches(api) if x[0] >= seen and x[2] == "true"] == []
    assert [x for x in cp_patches(api) if x[0] >= seen] == []
    now = dict((n, api.node(n)["metadata"]["resourceVersion"]) for n in K8S_NAME.values())
    now["cp"] = api.cluster_policy()["metadata"]["resourceVersion"]
    assert now == rvs
    assert len(operator.events) == 2


@pytest.mark.parametrize("case", ["role_vars", "unknown_node"])
def test_unresolvable_node_name_stops_before_the_change(fleet, cluster, tmp_path, case):
    """The skip label cannot be put on a node: the role fails before the ClusterPolicy changes.

    role_vars: gds_node_name given with the role. The labelling reads other hosts' names from hostvars (no role vars
    there) and used to patch the inventory names (nonexistent nodes: kubernetes.core only warns), then enabled GDS,
    which replaced both driver pods at once. unknown_node: a host variable names a node the cluster does not have."""
    api, operator = cluster
    if case == "role_vars":
        rc, out = run_play(fleet, str(tmp_path), api, names={},
                           role_vars={"gds_node_name": "gpu-{{ inventory_hostname }}.cluster.local"})
        assert "Set gds_node_name as a host or group variable" in out, out[-8000:]
    else:
        rc, out = run_play(fleet, str(tmp_path), api, names=dict(K8S_NAME, sim2="gpu-sim2.typo.local"))
        assert "gpu-sim2.typo.local" in out and "was not found" in out, out[-8000:]
    assert rc != 0
    assert cp_patches(api) == []
    assert api.cluster_policy()["spec"]["gds"]["enabled"] is False
    assert operator.events == []
    assert [x for x in label_patches(api) if x[2] is None] == []
    for host in NODES:
        assert not os.path.exists(os.path.join(fleet.root(host), NVFS))


def test_driver_never_comes_up_stops_the_rollout_then_resumes(fleet, cluster, tmp_path):
    api, operator = cluster
    operator.broken.add("sim1")
    rc, out = run_play(fleet, str(tmp_path), api, role_vars={"gds_driver_wait_timeout": 5})
    assert rc != 0
    assert "Wait for nvidia-fs" in out
    # sim1 failed its wait: the play stops there; sim2 keeps its skip label and its old driver pod
    assert api.cluster_policy()["spec"]["gds"]["enabled"] is True
    assert api.node(K8S_NAME["sim2"])["metadata"]["labels"].get(SKIP) == "true"
    assert [(host, cause) for _i, host, cause in operator.events] == [("sim1", "skip label removed")]
    assert not os.path.exists(os.path.join(fleet.root("sim2"), NVFS))

    # sim1's driver pod comes up late; the next run continues with sim2 and does not relabel or repatch anything
    load_nvfs(fleet, "sim1", fleet.nvfs_saved)
    sim1_rv = api.node(K8S_NAME["sim1"])["metadata"]["resourceVersion"]
    seen = len(api.requests)
    rc, out = run_play(fleet, str(tmp_path), api)
    assert rc == 0, out[-8000:]
    assert [x for x in label_patches(api) if x[0] >= seen and x[2] is not None] == []
    assert [x[1] for x in label_patches(api) if x[0] >= seen][-1] == "sim2"
    assert [x for x in cp_patches(api) if x[0] >= seen] == []
    assert [(host, cause) for _i, host, cause in operator.events] == [
        ("sim1", "skip label removed"), ("sim2", "skip label removed")]
    assert SKIP not in api.node(K8S_NAME["sim2"])["metadata"]["labels"]
    assert api.node(K8S_NAME["sim1"])["metadata"]["resourceVersion"] == sim1_rv
    assert os.path.exists(os.path.join(fleet.root("sim2"), NVFS, "version"))


@pytest.mark.parametrize("case", ["outside_parallel_2", "auto_upgrade_off"])
def test_rollout_that_is_not_one_node_at_a_time_is_refused(fleet, cluster, tmp_path, case):
    """A driver node outside the play (no skip label) with maxParallelUpgrades 2 would be upgraded alongside the
    play's node; with autoUpgrade off nothing would replace the driver pods. Both are refused before any change."""
    api, operator = cluster
    policy = api.cluster_policies["cluster-policy"]["spec"]["driver"]["upgradePolicy"]
    if case == "outside_parallel_2":
        api.nodes["gpu-other.cluster.local"] = dict(api.node(K8S_NAME["sim1"]), metadata={
            "name": "gpu-other.cluster.local", "uid": "uid-other", "resourceVersion": "100", "labels": {}})
        add_driver_pods(api, [K8S_NAME[h] for h in sorted(NODES)] + ["gpu-other.cluster.local"])
        policy["maxParallelUpgrades"] = 2
        want = ("node(s) gpu-other.cluster.local outside the play run the driver without "
                "nvidia.com/gpu-driver-upgrade.skip=true, and ClusterPolicy cluster-policy has "
                "spec.driver.upgradePolicy.maxParallelUpgrades 2")
    else:
        policy["autoUpgrade"] = False
        want = "ClusterPolicy cluster-policy has spec.driver.upgradePolicy.autoUpgrade false"
    rc, out = run_play(fleet, str(tmp_path), api)
    assert rc != 0
    assert "Not enabling GDS in ClusterPolicy cluster-policy: " + want in out, out[-8000:]
    assert cp_patches(api) == []
    assert api.cluster_policy()["spec"]["gds"]["enabled"] is False
    assert label_patches(api) == []
    assert operator.events == []
