# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary of playbooks/kernel_upgrade.yml on two simulated nodes (SSH), Kubernetes off.

The vendor client, the reboot hook and the boot script are test_kernel_upgrade_k8s.py's (the client from the
build cache, the "boot" of the target kernel in the sysroot). The suite is validate.yml's NCCL test, run by
fabric_validate on the node through the simulator's all_reduce_perf emulator (NCCL INFO channel lines and
nccl-tests' table for the node's state); the boot script sets the emulator's fault knob for the booted kernel.

One test, two runs of the playbook, serial 1 and max_fail_percentage 0 (the defaults):

1. the target kernel halves NCCL's bandwidth: the canary (the first node) runs the suite before its drain and
   after its reboot, the judge finds the regression against its own pre-upgrade run, the canary fails and the
   rollout stops there - the second node is not touched;
2. the fault is gone (the kernel was fixed) and the playbook runs again: the canary, already on the target kernel,
   compares its new run with the run it kept before the reboot, passes, and the rollout goes on to the second node,
   which runs no suite.

On the same fleet, validate.yml's judge play: the node whose NCCL bandwidth fell is drift against its profile's
fleet median and fails the play; its record on the node is what the one-call check reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (HERE, os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab"), os.path.join(REPO, "tests", "fakes"),
          os.path.join(REPO, "tests", "fixtures", "vendor_nfs")):
    if p not in sys.path:
        sys.path.insert(0, p)

import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position
from fleet import created, why_not  # noqa: E402 pylint: disable=wrong-import-position
from gpufabric_sim.emulators import nccl_tests as nccl_emu  # noqa: E402 pylint: disable=wrong-import-position
from test_kernel_upgrade_k8s import BOOT_SCRIPT, TARGET, Podman, reset_node  # noqa: E402 pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
KEPT = "var/lib/gpufabric/canary-before.json"
VERDICT = "var/lib/gpufabric/performance_verdict.json"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("canary") / "fleet")
    with created(d, 2, 42330):
        from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
        src, digest = vf.make_source_tarball(d)
        cache = os.path.join(d, "vendor-cache")
        kb.build(Podman(), {"podman": "podman"}, src, digest, TARGET, "4.0.35-gf1", "vastnfs", cache, "img")
        with open(os.path.join(d, "boot.py"), "w") as f:
            f.write(BOOT_SCRIPT)
        yield {"path": d, "src": src, "sha256": digest, "cache": cache}


def nodes(fleet):
    """[(name, root)] in inventory order: the first is the canary."""
    import yaml
    with open(os.path.join(fleet["path"], "inventory.yml")) as f:
        hosts = yaml.safe_load(f)["all"]["children"]["gpufabric_sim"]["hosts"]
    return [(n, hosts[n]["gpufabric_sim_root"]) for n in hosts]


def suite_vars(d):
    """validate.yml's NCCL test; the baseline store and the reports beside the fleet."""
    return {"validate_tests": ["nccl"], "validate_iters": 5, "validate_timeout": 60,
            "validate_baseline_dir": os.path.join(d, "baselines"), "validate_report_dir": os.path.join(d, "reports")}


def playbook(fleet, book, ev):
    d = fleet["path"]
    local_inv = os.path.join(d, "local.yml")
    with open(local_inv, "w") as f:
        json.dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                   "ansible_python_interpreter": VENV_PY}}}}, f)
    evf = os.path.join(d, "ev.json")
    with open(evf, "w") as f:
        json.dump(ev, f)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_PIPELINING="True",
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    argv = [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", os.path.join(d, "inventory.yml"),
            "-i", local_inv, os.path.join(REPO, "playbooks", book), "-e", "@" + evf]
    p = subprocess.run(argv, check=False, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=900)
    return p.returncode, p.stdout


def run_playbook(fleet, factor=None):
    d = fleet["path"]
    boot = "python3 %s %s vendor%s" % (os.path.join(d, "boot.py"), TARGET, " %s" % factor if factor else "")
    ev = {
        "gpufabric_hosts": "gpufabric_sim", "kernel_upgrade_kernel_release": TARGET,
        "kernel_upgrade_install_kernel_package": False, "kernel_upgrade_recheck_roles": [],
        "vendor_nfs_client_src": fleet["src"], "vendor_nfs_client_sha256": fleet["sha256"],
        "vendor_nfs_client_version": "4.0.35-gf1", "vendor_nfs_client_cache_dir": fleet["cache"],
        "vendor_nfs_client_builder_create": False, "gpufabric_reboot_command": boot,
        "gpufabric_boot_time_command": "cat \"$GPUFABRIC_SYSROOT/var/lib/gpufabric-sim/fake-boot-id\" 2>/dev/null "
                                       "|| echo 0",
        "kernel_upgrade_reboot_timeout": 120,
    }
    ev.update(suite_vars(d))      # the canary (on by default) with validate.yml's NCCL test
    return playbook(fleet, "kernel_upgrade.yml", ev)


def prepare(roots):
    for root in roots:
        nccl_emu.write_state(root, gdr=True, bandwidth_factor=1.0)
        if not os.path.isdir(os.path.join(root, "var", "tmp")):    # fabric_validate's work directory (gds_dir)
            os.makedirs(os.path.join(root, "var", "tmp"))


def read(root, rel):
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f) if rel.endswith(".json") else f.read()


def test_canary_stops_the_rollout_on_a_regression_then_proceeds(fleet):
    (canary, croot), (other, oroot) = nodes(fleet)
    for root in (croot, oroot):
        reset_node(root)
        for rel in (KEPT, VERDICT):
            if os.path.exists(os.path.join(root, rel)):
                os.unlink(os.path.join(root, rel))
    prepare((croot, oroot))
    old = read(oroot, "proc/sys/kernel/osrelease")

    rc, out = run_playbook(fleet, factor=0.5)      # the target kernel halves NCCL's bandwidth
    assert rc != 0, out[-6000:]
    assert "The canary %s regressed on %s against its own pre-upgrade run" % (canary, TARGET) in out, out[-6000:]
    assert "below its earlier run" in out
    # the rollout stopped at the canary: the second node was not touched
    assert read(oroot, "proc/sys/kernel/osrelease") == old and read(oroot, "etc/gpufabric/upgrade.json") is None
    rec = read(croot, "etc/gpufabric/upgrade.json")
    assert rec["phase"] == "failed" and rec["failed_task"].startswith("Canary - stop the rollout"), rec
    kept = read(croot, KEPT)
    assert kept["target"] == TARGET and kept["kernel"] != TARGET
    assert read(croot, VERDICT)["status"] == "drift"
    report = read(fleet["path"], "reports/canary-%s.md" % canary)
    assert "Against the run before the upgrade: drift" in report and "nccl.configured.busbw" in report, report

    nccl_emu.write_state(croot, gdr=True, bandwidth_factor=1.0)   # the kernel's fault fixed
    rc, out = run_playbook(fleet)
    assert rc == 0, out[-6000:]
    assert "WARNING: the canary" not in out      # judged, not "NOT JUDGED"
    for root in (croot, oroot):
        assert read(root, "proc/sys/kernel/osrelease").strip() == TARGET
        assert read(root, "etc/gpufabric/upgrade.json")["phase"] == "done"
    report = read(fleet["path"], "reports/canary-%s.md" % canary)
    assert "Against the run before the upgrade: ok" in report and "as fast as before" in report, report
    # the canary compared with the run it kept before its reboot; the second node ran no suite
    assert read(croot, KEPT) == kept and read(oroot, KEPT) is None and read(oroot, VERDICT) is None


def test_validate_judges_every_node_and_fails_the_one_that_regressed(fleet):
    """validate.yml: the node play's suite, then the judge play - every node judged once against the store, the
    report, the record on each node (which the one-call check reports), and the node that regressed failed."""
    (a, aroot), (b, broot) = nodes(fleet)
    prepare((aroot, broot))
    ev = dict(suite_vars(fleet["path"]), validate_hosts="gpufabric_sim")
    nccl_emu.write_state(broot, bandwidth_factor=0.6)
    rc, out = playbook(fleet, "validate.yml", ev)
    assert rc != 0 and "performance drift" in out, out[-6000:]
    report = read(fleet["path"], "reports/validate-report.json")
    # the first node is ok against the canary's runs of this profile, or starts the baseline when this test runs
    # alone; the second is judged against it either way
    assert report["failed"] == [b] and report["nodes"][a]["status"]["status"] in ("ok", "not_checked"), report
    reason = report["nodes"][b]["status"]["reason"]
    assert "nccl.configured.busbw" in reason and "below the fleet median" in reason, reason
    assert [n["status"] for n in report["nodes"][b]["negative"]] == ["ok", "ok"]
    assert read(broot, VERDICT)["status"] == "drift" and read(aroot, VERDICT)["status"] in ("ok", "not_checked")
    # the one-call check, asked for the concern, reports the record with its age
    d = fleet["path"]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    p = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible"), "-i", os.path.join(d, "inventory.yml"), b,
                        "-m", "gpufabric.node.fabric_check", "-a", json.dumps({"concerns": ["performance"]})],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                       check=False)
    res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][b]
    perf = res["concerns"]["performance"]
    assert perf["status"] == "drift" and "judged by validate.yml" in perf["reason"], res
