# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/kernel_upgrade.yml against a simulated node (SSH) and the fake Kubernetes API.

The vendor client for the target kernel comes from the build cache (pre-filled here through kmod_build with a
recording stand-in for podman and synthetic modules), so the role installs it into the node's sysroot with the real
depmod; the reboot is the collection-wide hook ``gpufabric_reboot_command``: a script that "boots" the target kernel
in the sysroot (osrelease, /sys/module/<m>/srcversion of the installed vendor modules,
nfs_bundle_version, whether the loaded rpcrdma registers with nvidia-fs) and changes the boot id that
``gpufabric_boot_time_command`` prints. The node boots idle: its /proc/driver/nvidia-fs/modules (served by the
simulator with the driver's lifetime) lists rpcrdma only while a /dev/nvidia-fs* is held open, which the post-boot
proof does.

Asserted from the fake API's recorded requests (each with the code it was answered with): skip label, cordon,
eviction of the node's pod only (not its mirror pod nor the GPU Operator's DaemonSet pods), label restored, uncordon
only when the node was not cordoned before; the record on the node says what failed; a second run resumes and keeps
the initial cordon state from the record. The fake answers evictions as the real API does (tests/fakes/k8s_pods.py):
429 while the pod's PodDisruptionBudget allows no disruption, so the drain retries every poll until its timeout and
then fails naming the budget, returning the node to its initial scheduling state (nothing on it had changed yet);
a failure after the drain keeps the node cordoned.

The GPU Operator is modelled on the fake API (tests/fakes/gpu_operator.py), its "kubelet" reading the node's boot id
and kernel from the sysroot: after the reboot the driver pod is replaced (Pending, then Running not Ready, Ready some
polls later, or never) and the validator's stale pre-reboot status gives way to its validations. The playbook
uncordons only once both are Ready for the new kernel; a driver pod that never becomes Ready, a failing validation
or GDS without nvidia-fs keeps the node cordoned with a reason that names the pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab"), os.path.join(REPO, "tests", "fakes"),
          os.path.join(REPO, "tests", "fixtures", "vendor_nfs")):
    if p not in sys.path:
        sys.path.insert(0, p)

import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position
from gpu_operator import GpuOperator  # noqa: E402 pylint: disable=wrong-import-position
from fleet import created  # noqa: E402 pylint: disable=wrong-import-position
from k8s_api import FakeK8s  # noqa: E402 pylint: disable=wrong-import-position

VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, "playbooks", "kernel_upgrade.yml")
TARGET = "6.1.0-99-amd64"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"


def _have_kubernetes():
    try:
        import kubernetes  # noqa: F401 pylint: disable=unused-import
        return True
    except ImportError:
        return False


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the simulated node (netns + sshd) needs root"),
    pytest.mark.skipif(shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"),
                       reason="openssh-server is not installed"),
    pytest.mark.skipif(not _have_kubernetes(), reason="the kubernetes Python client is not installed "
                       "(pip install kubernetes; kubernetes.core needs it)"),
]

BOOT_SCRIPT = r'''
import json, os, sys
root = os.environ.get("GPUFABRIC_SYSROOT", "/")
if root == "/":
    sys.exit("refusing to fake a boot on a real root")
kver, mode = sys.argv[1], sys.argv[2]
def w(p, text):
    p = os.path.join(root, p.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
w("/proc/sys/kernel/osrelease", kver + "\n")
rec = json.load(open(os.path.join(root, "etc/gpufabric/vendor_nfs.json")))["kernels"].get(kver, {})
for name, m in rec.get("modules", {}).items():
    w("/sys/module/%s/srcversion" % name, m["srcversion"] + "\n")
w("/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35-gf1\n")
os.makedirs(os.path.join(root, "sys/module/nvidia_fs"), exist_ok=True)
# how the loaded storage modules answer nvidia-fs's probe (tests/lab/gpufabric_sim/nvfs_proc.py): the vendor's
# rpcrdma registers; in "nohook" it is the vendor's file but refuses nvidia-fs's ops (-EOPNOTSUPP). nvidia-fs lists
# rpcrdma only while a /dev/nvidia-fs* is held open: the node boots idle.
hooks = {"vendor": {"rpcrdma": 0}, "nohook": {"rpcrdma": -95}}.get(mode, {})
w("/run/gpufabric-sim/nvfs-hooks.json", json.dumps(hooks) + "\n")
bid = os.path.join(root, "var/lib/gpufabric-sim/fake-boot-id")
n = int(open(bid).read()) + 1 if os.path.exists(bid) else 1
w("/var/lib/gpufabric-sim/fake-boot-id", "%d\n" % n)
# the all_reduce_perf emulator's fault knob for the booted kernel (test_kernel_upgrade_canary_sim: a kernel that slows
# NCCL down): the factor every bandwidth is scaled by
if len(sys.argv) > 3:
    w("/var/lib/gpufabric-sim/nccl/state.json", json.dumps({"gdr": True, "bandwidth_factor": float(sys.argv[3])}))
'''


class Podman(object):
    """Stand-in for podman that writes a package of synthetic modules for the target kernel into /out."""

    def __call__(self, argv, env=None):
        answer = vf.builder_image_answer(argv)
        if answer:
            return answer
        if argv[1] == "run":
            out = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")][0]
            os.makedirs(os.path.join(out, "dist"))
            base = "/lib/modules/%s/updates/bundle/" % TARGET
            vf.make_deb(os.path.join(out, "dist", "vastnfs-modules_1_amd64.deb"), {
                base + "sunrpc.ko": vf.make_module_elf("sunrpc", TARGET + " SMP", srcversion="5A1B2C3D4E5F60718293A4B",
                                                       params=["nfs_bundle_version"]),
                base + "rpcrdma.ko": vf.make_module_elf("rpcrdma", TARGET + " SMP", srcversion="RDMA0123456789ABCDEF012",
                                                        exports=["rpcrdma_register_nvfs_dma_ops"]),
            })
            return 0, "", ""
        return 0, "", ""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ku") / "fleet")
    with created(d, 1, 42310):
        yield d


@pytest.fixture(scope="module")
def prebuilt(fleet):
    from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
    src, digest = vf.make_source_tarball(fleet)
    cache = os.path.join(fleet, "vendor-cache")
    kb.build(Podman(), {"podman": "podman"}, src, digest, TARGET, "4.0.35-gf1", "vastnfs", cache, "img")
    with open(os.path.join(fleet, "boot.py"), "w") as f:
        f.write(BOOT_SCRIPT)
    return {"src": src, "sha256": digest, "cache": cache}


def node_root(fleet):
    import yaml
    with open(os.path.join(fleet, "inventory.yml")) as f:
        inv = yaml.safe_load(f)
    hosts = inv["all"]["children"]["gpufabric_sim"]["hosts"]
    name = sorted(hosts)[0]
    return name, hosts[name]["gpufabric_sim_root"]


def reset_node(root):
    for p in ("etc/gpufabric/upgrade.json", "etc/gpufabric/vendor_nfs.json", "run/gpufabric-sim/nvfs-hooks.json"):
        if os.path.exists(os.path.join(root, p)):
            os.unlink(os.path.join(root, p))
    shutil.rmtree(os.path.join(root, "lib", "modules", TARGET), ignore_errors=True)
    for m in ("sunrpc", "rpcrdma", "nvidia_fs"):
        shutil.rmtree(os.path.join(root, "sys", "module", m), ignore_errors=True)
    with open(os.path.join(root, "proc", "sys", "kernel", "osrelease"), "w") as f:
        f.write("6.1.0-50-amd64\n")


def run_playbook(fleet, prebuilt, api, boot_mode="vendor", extra=None):
    name, _root = node_root(fleet)
    kubeconfig = api.write_kubeconfig(os.path.join(fleet, "kubeconfig"))
    local_inv = os.path.join(fleet, "local.yml")
    with open(local_inv, "w") as f:
        local = {"ansible_connection": "local", "ansible_python_interpreter": VENV_PY}
        json.dump({"all": {"hosts": {"localhost": local}}}, f)
    ev = {
        "gpufabric_hosts": name, "kernel_upgrade_kernel_release": TARGET, "kernel_upgrade_k8s": True,
        "kernel_upgrade_kubeconfig": kubeconfig, "kernel_upgrade_install_kernel_package": False,
        "kernel_upgrade_recheck_roles": [], "kernel_upgrade_drain_timeout": 300, "kernel_upgrade_drain_poll": 1,
        "vendor_nfs_client_src": prebuilt["src"], "vendor_nfs_client_sha256": prebuilt["sha256"],
        "vendor_nfs_client_version": "4.0.35-gf1", "vendor_nfs_client_cache_dir": prebuilt["cache"],
        "vendor_nfs_client_builder_create": False,
        "gpufabric_reboot_command": "python3 %s %s %s" % (os.path.join(fleet, "boot.py"), TARGET, boot_mode),
        "gpufabric_boot_time_command": "cat \"$GPUFABRIC_SYSROOT/var/lib/gpufabric-sim/fake-boot-id\" 2>/dev/null "
                                       "|| echo 0",
        "kernel_upgrade_reboot_timeout": 120,
        "kernel_upgrade_gpu_operator_poll": 1, "kernel_upgrade_gpu_operator_timeout": 60,
        "kernel_upgrade_canary": False,   # the canary has its own tests (test_canary_*)
    }
    ev.update(extra or {})
    evf = os.path.join(fleet, "ev.json")
    with open(evf, "w") as f:
        json.dump(ev, f)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_PIPELINING="True",
               K8S_AUTH_KUBECONFIG=kubeconfig)
    argv = [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", os.path.join(fleet, "inventory.yml"),
            "-i", local_inv, PLAYBOOK, "-e", "@" + evf]
    p = subprocess.run(argv, check=False, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=900)
    return p.returncode, p.stdout


def operator(api, name, root, **kw):
    """The GPU Operator's pods on the node, following the node's boot id and kernel in its sysroot."""
    def kubelet():
        try:
            with open(os.path.join(root, "var", "lib", "gpufabric-sim", "fake-boot-id")) as f:
                boot = f.read().strip()
        except IOError:
            boot = "0"
        with open(os.path.join(root, "proc", "sys", "kernel", "osrelease")) as f:
            return boot, f.read().strip()
    return GpuOperator(name, kubelet, **kw).install(api)


def node_patches(api, name):
    return [r["body"] for r in api.mutations() if r["method"] == "PATCH" and r["path"] == "/api/v1/nodes/" + name]


def evictions(api):
    return [r["path"] for r in api.mutations() if r["path"].endswith("/eviction")]


def record(root):
    with open(os.path.join(root, "etc", "gpufabric", "upgrade.json")) as f:
        return json.load(f)


def train_pods(name, mirror=True):
    """train-0 on the node with its replica elsewhere (app=train), infer-0 elsewhere, and a mirror pod (static
    kube-proxy) on the node, which a drain leaves alone like the GPU Operator's DaemonSet pods."""
    pods = [("default", "train-0", name, {"labels": {"app": "train"}}),
            ("default", "train-1", "elsewhere", {"labels": {"app": "train"}}), ("other", "infer-0", "elsewhere")]
    if mirror:
        pods.append(("kube-system", "kube-proxy-" + name, name,
                     {"owner": None, "annotations": {"kubernetes.io/config.mirror": "0f3a"}}))
    return pods


TRAIN_PDB = {"namespace": "default", "name": "train-pdb", "match_labels": {"app": "train"}, "min_available": 2}
TRAIN_0 = "default/train-0"


def answers(api, pod=TRAIN_0):
    return [(t, code) for t, p, code in api.eviction_answers() if p == pod]


def assert_spaced(times, poll):
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps and min(gaps) >= poll, gaps


@pytest.mark.parametrize("initially_cordoned,label,budget", [(False, None, True), (True, "false", False)],
                         ids=["budget-frees-up-mid-drain", "initially-cordoned"])
def test_upgrade_success(fleet, prebuilt, initially_cordoned, label, budget):
    """With a budget: the PodDisruptionBudget of train-0 allows no disruption (2 needed, 2 healthy) and frees up
    after two refused evictions (the workload got a replacement ready elsewhere): the drain retries every poll and
    goes on once the eviction is accepted."""
    name, root = node_root(fleet)
    reset_node(root)
    labels = {SKIP: label} if label is not None else {}
    api = FakeK8s(nodes={name: {"unschedulable": initially_cordoned, "labels": labels}}, pods=train_pods(name),
                  pdbs=[TRAIN_PDB] if budget else [])
    if budget:
        api.release_pdb_after("default", "train-pdb", refusals=2)
    model = operator(api, name, root, replace_driver=not initially_cordoned)
    api.start()
    try:
        rc, out = run_playbook(fleet, prebuilt, api, extra={"kernel_upgrade_drain_poll": 2})
        assert rc == 0, out[-6000:]
        patches = node_patches(api, name)
        assert patches[0]["metadata"]["labels"] == {SKIP: "true"}
        # k8s_drain only patches a node that is not cordoned yet.
        assert ({"spec": {"unschedulable": True}} in patches) is not initially_cordoned
        # only train-0 is evicted: not the mirror pod, not the GPU Operator's DaemonSet pods
        assert set(evictions(api)) == {"/api/v1/namespaces/default/pods/train-0/eviction"}
        assert [code for _t, code in answers(api)] == ([429, 429, 201] if budget else [201])
        if budget:
            assert_spaced([t for t, _c in answers(api)], 2)
            assert "Ignoring DaemonSet-managed Pods" in out and "cannot delete mirror Pods" in out
        uncordons = [b for b in patches if b == {"spec": {"unschedulable": False}}]
        final = api.node(name)
        if initially_cordoned:
            assert uncordons == []
            assert final["spec"].get("unschedulable") is True
        else:
            assert len(uncordons) == 1
            assert patches.index(uncordons[0]) == len(patches) - 1
            assert not final["spec"].get("unschedulable")
        assert final["metadata"]["labels"].get(SKIP) == label
        rec = record(root)
        assert rec["phase"] == "done" and rec["initially_cordoned"] is initially_cordoned
        with open(os.path.join(root, "proc", "sys", "kernel", "osrelease")) as f:
            assert f.read().strip() == TARGET
        assert os.path.exists(os.path.join(root, "lib", "modules", TARGET, "updates", "bundle", "rpcrdma.ko"))
        with open(os.path.join(root, "lib", "modules", TARGET, "modules.dep")) as f:
            assert "updates/bundle/rpcrdma.ko:" in f.read()
        # the proof held on an idle node: nothing holds a device now, and the file lists no rpcrdma
        assert read_modules(root) == "wekafsio: 1\n"
        # the operator's pods went through their lifecycle before the uncordon
        assert model.events[:2] == ["created driver pod nvidia-driver-daemonset-1" + name[:5],
                                    "node %s booted %s" % (name, TARGET)]
        assert ("deleted driver pod nvidia-driver-daemonset-1" + name[:5] in model.events) is not initially_cordoned
        rec = record(root)
        assert rec["gpu_operator_before"]["driver"]["pod"] == "gpu-operator/nvidia-driver-daemonset-1" + name[:5]
    finally:
        api.stop()


def read_modules(root):
    """/proc/driver/nvidia-fs/modules of the node (a FIFO the simulator serves: read with a timeout)."""
    return subprocess.run(["cat", os.path.join(root, "proc", "driver", "nvidia-fs", "modules")], check=True,
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=20).stdout


def test_drain_blocked_by_budget_restores_the_node_then_resumes(fleet, prebuilt):
    """A PodDisruptionBudget that never allows the eviction: the drain retries it every poll (2 s) until its timeout
    (12 s), no try after it, then fails naming the budget. Nothing on the node had changed, so the node is back in
    its initial scheduling state (uncordoned, no skip label). An eviction refused another way (500) is not retried.
    Then the budget frees up and the resumed run upgrades the node."""
    name, root = node_root(fleet)
    reset_node(root)
    api = FakeK8s(nodes={name: {"unschedulable": False}}, pods=train_pods(name), pdbs=[TRAIN_PDB])
    operator(api, name, root)
    api.start()
    try:
        rc, out = run_playbook(fleet, prebuilt, api, extra={"kernel_upgrade_drain_timeout": 12,
                                                            "kernel_upgrade_drain_poll": 2})
        assert rc != 0
        want = ("the drain of node %s did not finish within 12 s: PodDisruptionBudget default/train-pdb "
                "(disruptionsAllowed 0: it needs 2 healthy pods and has 2) protects pod default/train-0" % name)
        assert want in out, out[-6000:]
        tries = answers(api)
        assert len(tries) >= 2 and all(code == 429 for _t, code in tries), tries
        assert_spaced([t for t, _c in tries], 2)
        assert "; %d tries, the last refused with 429 TooManyRequests" % len(tries) in out
        # No try starts after the deadline (12 s from just after the cordon); a try reaches its eviction request some
        # seconds after it starts (module start-up), at most twice what the first one took, however loaded the host.
        cordoned_at = [r["time"] for r in api.mutations() if r["body"] == {"spec": {"unschedulable": True}}][0]
        lead = tries[0][0] - cordoned_at
        assert tries[-1][0] - cordoned_at < 12 + 2 * lead, (lead, [t - cordoned_at for t, _c in tries])
        assert len(tries) <= 12 // 2 + 1
        assert "Nothing on the node had changed: it is back in its scheduling state from before the upgrade " \
               "(uncordoned, driver upgrade skip label as it was)" in out
        node = api.node(name)
        assert not node["spec"].get("unschedulable") and SKIP not in node["metadata"]["labels"]
        assert node_patches(api, name)[-1] == {"spec": {"unschedulable": False}}
        rec = record(root)
        assert rec["phase"] == "failed" and "drain" in rec["failed_task"] and want in rec["error"]
        assert rec["initially_cordoned"] is False and rec["nothing_changed"] is True
        with open(os.path.join(root, "proc", "sys", "kernel", "osrelease")) as f:
            assert f.read().strip() != TARGET
        # Another refusal (500) stops the drain at its first try; the record still says nothing changed.
        api.fail_evictions = True
        before = len(api.eviction_answers())
        rc, out = run_playbook(fleet, prebuilt, api)
        assert rc != 0 and "refused by the fake" in out
        assert [a[2] for a in api.eviction_answers()[before:]] == [500]
        assert not api.node(name)["spec"].get("unschedulable") and record(root)["nothing_changed"] is True
        # Resume once the budget allows the eviction: the record keeps "not cordoned before", so it is uncordoned.
        api.fail_evictions = False
        api.set_disruptions_allowed("default", "train-pdb", 1)
        rc, out = run_playbook(fleet, prebuilt, api)
        assert rc == 0, out[-6000:]
        assert record(root)["phase"] == "done"
        assert not api.node(name)["spec"].get("unschedulable")
    finally:
        api.stop()


def test_rpcrdma_not_registering_with_nvidia_fs_fails_proof(fleet, prebuilt):
    """The vendor's modules run (srcversions match, bundle version present) but its rpcrdma does not register with
    nvidia-fs: the proof, holding a device open, finds rpcrdma missing and names it; the node stays cordoned, the record
    says the proof failed. A boot into the in-tree stack fails in the same proof task; its reason ("in-tree NFS stack
    is running") is proven by tests/unit/plugins/modules/test_vendor_nfs_proof.py and test_kmod_build.py."""
    name, root = node_root(fleet)
    reset_node(root)
    api = FakeK8s(nodes={name: {"unschedulable": False}}, pods=[])
    operator(api, name, root)
    api.start()
    try:
        rc, out = run_playbook(fleet, prebuilt, api, boot_mode="nohook")
        assert rc != 0
        assert "rpcrdma is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open" in out
        assert "in-tree NFS stack is running" not in out
        assert api.node(name)["spec"]["unschedulable"] is True
        rec = record(root)
        assert rec["phase"] == "failed" and "Proof" in rec["failed_task"]
    finally:
        api.stop()


def test_gate_refuses_reboot_without_client(fleet, prebuilt):
    name, root = node_root(fleet)
    reset_node(root)
    api = FakeK8s(nodes={name: {"unschedulable": False}}, pods=[])
    operator(api, name, root)
    api.start()
    try:
        rc, out = run_playbook(fleet, prebuilt, api, extra={"vendor_nfs_client_install": False})
        assert rc != 0
        assert "no verified vendor NFS client is recorded" in out
        with open(os.path.join(root, "proc", "sys", "kernel", "osrelease")) as f:
            assert f.read().strip() != TARGET, "rebooted although the gate failed"
        assert api.node(name)["spec"]["unschedulable"] is True
    finally:
        api.stop()


# model options, GDS in the ClusterPolicy, expected reason (after "within 12 s: "), pod the reason names. One case
# runs the playbook: the GDS one, whose wait also reads the ClusterPolicy and waits for the nvidia-fs container. The
# other reasons (a driver pod that never becomes Ready, a failing validation) take the same path through the playbook
# and the same module; their wording is proven by tests/unit/plugins/module_utils/test_gpu_operator.py
# (test_driver_never_ready_names_the_pod, test_failing_validation_names_the_validator). Each kernel_upgrade.yml run
# here costs minutes of CI.
GPU_FAILURES = [
    ({"gds": True, "nvfs_ready": False}, True,
     "driver pod gpu-operator/{driver} on node {node} is not Ready: phase Running; container nvidia-fs-ctr running, "
     "not ready", "driver"),
]


@pytest.mark.parametrize("options,gds,reason,which", GPU_FAILURES, ids=["gds-nvidia-fs-not-ready"])
def test_gpu_operator_not_ready_keeps_the_node_cordoned(fleet, prebuilt, options, gds, reason, which):
    name, root = node_root(fleet)
    reset_node(root)
    policies = None
    if gds:
        from k8s_api import DEFAULT_CLUSTER_POLICY_SPEC
        spec = json.loads(json.dumps(DEFAULT_CLUSTER_POLICY_SPEC))
        spec["gds"]["enabled"] = True
        policies = {"cluster-policy": spec}
    api = FakeK8s(nodes={name: {"unschedulable": False}}, pods=[], cluster_policies=policies)
    model = operator(api, name, root, **options)
    api.start()
    try:
        rc, out = run_playbook(fleet, prebuilt, api, extra={"kernel_upgrade_gpu_operator_timeout": 12})
        assert rc != 0
        want = reason.format(driver=model.driver_name, validator=model.validator_name, node=name)
        assert "was not ready on node %s for kernel %s within 12 s: %s" % (name, TARGET, want) in out, out[-6000:]
        assert "The node stays cordoned" in out
        assert api.node(name)["spec"]["unschedulable"] is True
        assert {"spec": {"unschedulable": False}} not in node_patches(api, name)
        rec = record(root)
        assert rec["phase"] == "failed" and want in rec["error"]
        assert "gpu-operator/%s" % (model.driver_name if which == "driver" else model.validator_name) in rec["error"]
        # the wait ran before the proof: nothing that needs the driver was tried
        assert "Proof - the target kernel runs" not in out
    finally:
        api.stop()
