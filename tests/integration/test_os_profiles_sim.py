# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ubuntu 24.04 and Rocky 9 simulated nodes over SSH: provision (the second run changed=0), drift.yml with injected
drift, the kernel hold against a simulated unattended upgrade, and kernel_upgrade.yml (Kubernetes off, kubernetes.core
not installed) with the fixture vendor client packaged as .ko.zst (Ubuntu) and .ko.xz (EL), the hold moving to the
target; on EL the entry of a kernel installed later carries the collection's arguments (kernel-install reads
/etc/kernel/cmdline, kept in step).

The node's package managers are the simulator's (tests/lab/gpufabric_sim/emulators/pkg.py); the playbook's own
kernel package step is off here (ansible.builtin.apt/dnf need the real package libraries), so the test installs the
target kernel through the node's emulated apt-get/dnf after the playbook moved the hold.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (HERE, os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab"),
          os.path.join(REPO, "tests", "fixtures", "vendor_nfs")):
    if p not in sys.path:
        sys.path.insert(0, p)

from fleet import Fleet, recap, why_not  # noqa: E402 pylint: disable=wrong-import-position
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

VERSION = "4.0.35-gf1"
TARGET = {"u": "6.8.0-50-generic", "r": "5.14.0-432.13.1.el9_4.x86_64"}
RUNNING = {"u": "6.8.0-45-generic", "r": "5.14.0-427.13.1.el9_4.x86_64"}
COMPRESSION = {"u": "zstd", "r": "xz"}
SUFFIX = {"zstd": ".ko.zst", "xz": ".ko.xz"}

BOOT = r'''
import json, os, sys
root = os.environ["GPUFABRIC_SYSROOT"]
kver = sys.argv[1]
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
w("/run/gpufabric-sim/nvfs-hooks.json", json.dumps({"rpcrdma": 0}) + "\n")
bid = os.path.join(root, "var/lib/gpufabric-sim/fake-boot-id")
n = int(open(bid).read()) + 1 if os.path.exists(bid) else 1
w("/var/lib/gpufabric-sim/fake-boot-id", "%d\n" % n)
'''


class Podman(object):
    """Stand-in for podman: a package of synthetic modules for the target kernel, compressed like the release's."""

    def __init__(self, kver, kind):
        self.kver, self.kind = kver, kind

    def __call__(self, argv, env=None):
        if os.path.basename(argv[0]) != "podman":
            # the build's other tools (zstd to read the modules back) run for real
            p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                               universal_newlines=True)
            return p.returncode, p.stdout, p.stderr
        answer = vf.builder_image_answer(argv)  # the builder image's identity and packages
        if answer:
            return answer
        if argv[1] == "run":
            out = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")][0]
            os.makedirs(os.path.join(out, "dist"))
            base = "/lib/modules/%s/updates/bundle/" % self.kver
            sfx = SUFFIX[self.kind]
            vf.make_deb(os.path.join(out, "dist", "vastnfs-modules_1_amd64.deb"), {
                base + "sunrpc" + sfx: vf.compress_module(vf.make_module_elf(
                    "sunrpc", self.kver + " SMP", srcversion="5A1B2C3D4E5F60718293A4B",
                    params=["nfs_bundle_version"]), self.kind),
                base + "rpcrdma" + sfx: vf.compress_module(vf.make_module_elf(
                    "rpcrdma", self.kver + " SMP", srcversion="RDMA0123456789ABCDEF012",
                    exports=["rpcrdma_register_nvfs_dma_ops"]), self.kind),
            })
        return 0, "", ""


def rocky_topology(d):
    with open(os.path.join(REPO, "tests", "lab", "topologies", "pcie-4gpu-crossnuma.yml")) as f:
        raw = yaml.safe_load(f)
    # a GDS node like the Ubuntu one: the upgrade's proof holds a /dev/nvidia-fs* open to see rpcrdma registered
    raw.update(name="pcie-4gpu-rocky9", os="rocky", os_version="9.4",
               nvidia_fs={"loaded": True, "version": "2.22", "modules": {}, "rw_stats_enabled": 0})
    path = os.path.join(d, "pcie-4gpu-rocky9.yml")
    with open(path, "w") as f:
        yaml.safe_dump(raw, f)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("osprof"))
    f = Fleet(os.path.join(d, "fleet"), {"u": "hgx-h200", "r": rocky_topology(d)})
    f.create()
    try:
        yield f
    finally:
        f.destroy()


def db(fleet, node):
    with open(os.path.join(fleet.root(node), "var/lib/gpufabric-sim/packages.json")) as f:
        return json.load(f)


def kernels(fleet, node):
    d = db(fleet, node)
    if d["manager"] == "dnf":
        return sorted(d["installed"].get("kernel-core", []))
    return sorted(n[len("linux-image-"):] for n in d["installed"] if n.startswith("linux-image-") and n[12].isdigit())


def test_profiles_in_facts(fleet):
    rc, res = fleet.ansible("u,r", "gpufabric.node.gpufabric_facts", {"gather_subset": ["pci"]})
    assert rc == 0, res
    prof = dict((h, res[h]["ansible_facts"]["gpufabric"]["os_profile"]) for h in ("u", "r"))
    assert prof["u"]["name"] == "ubuntu2404" and prof["u"]["module_compression"] == "zstd"
    assert prof["r"]["name"] == "el9" and prof["r"]["hold"] == "versionlock"


def test_provision_twice_then_drift(fleet, tmp_path):
    rc, out = fleet.playbook("provision.yml", "-l", "u,r,localhost")
    assert rc == 0, out[-6000:]
    rc, out = fleet.playbook("provision.yml", "-l", "u,r,localhost")
    assert rc == 0, out[-6000:]
    rec = recap(out)
    assert rec["u"]["changed"] == 0 and rec["r"]["changed"] == 0, out[-6000:]
    # EL: the grubby backend kept /etc/kernel/cmdline in step
    with open(os.path.join(fleet.root("r"), "etc/kernel/cmdline")) as f:
        assert "iommu=pt" in f.read().split()
    rails = {}
    for n in ("u", "r"):
        rc, res = fleet.ansible(n, "gpufabric.node.gpufabric_facts", {})
        rails[n] = [p["netdev"] for p in res[n]["ansible_facts"]["gpufabric"]["pairing"]]
        fleet.sh(n, "dcb app del dev %s dscp-prio 26:3" % rails[n][0])
        fleet.sh(n, "sysctl -qw net.ipv4.conf.%s.arp_ignore=0" % rails[n][1])
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "u,r,localhost")
    assert rc != 0, out[-6000:]
    report = json.loads((tmp_path / "drift-report.json").read_text())
    for n in ("u", "r"):
        st = dict((c, v["status"]) for c, v in report["nodes"][n]["concerns"].items())
        assert st["dcb"] == "drift" and st["sysctl"] == "drift" and st["cmdline"] in ("ok", "drift"), (n, st)
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-e", "gpufabric_fix=true",
                             "-l", "u,r,localhost")
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "u,r,localhost")
    report = json.loads((tmp_path / "drift-report.json").read_text())
    for n in ("u", "r"):
        st = dict((c, v["status"]) for c, v in report["nodes"][n]["concerns"].items())
        assert st["dcb"] == "ok" and st["sysctl"] == "ok", (n, st)


def test_hold_stops_unattended_upgrade(fleet):
    for n in ("u", "r"):
        args = {"kernel_releases": [RUNNING[n]]}
        rc, res = fleet.ansible(n, "gpufabric.node.kernel_hold", args)
        assert rc == 0 and res[n]["changed"] is True, res
        rc, res = fleet.ansible(n, "gpufabric.node.kernel_hold", args)
        assert rc == 0 and res[n]["changed"] is False, res
        before = kernels(fleet, n)
        fleet.sh(n, "unattended-upgrade" if n == "u" else "dnf -y upgrade")
        assert kernels(fleet, n) == before == [RUNNING[n]], "a kernel came in while the hold was in place"


@pytest.mark.parametrize("n", ["u", "r"])
def test_kernel_upgrade_with_fixture_client(fleet, n, tmp_path):
    from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
    target = TARGET[n]
    src, digest = vf.make_source_tarball(str(tmp_path))
    cache = str(tmp_path / "cache")
    kb.build(Podman(target, COMPRESSION[n]), {"podman": "podman"}, src, digest, target, VERSION, "vastnfs", cache,
             "img")
    boot = str(tmp_path / "boot.py")
    with open(boot, "w") as f:
        f.write(BOOT)
    ev = {
        "gpufabric_hosts": n, "kernel_upgrade_kernel_release": target, "kernel_upgrade_install_kernel_package": False,
        "kernel_upgrade_recheck_roles": [], "vendor_nfs_client_src": src, "vendor_nfs_client_sha256": digest,
        "vendor_nfs_client_version": VERSION, "vendor_nfs_client_cache_dir": cache,
        "vendor_nfs_client_builder_create": False,
        "gpufabric_reboot_command": "python3 %s %s" % (boot, target),
        "gpufabric_boot_time_command": "cat \"$GPUFABRIC_SYSROOT/var/lib/gpufabric-sim/fake-boot-id\" 2>/dev/null "
                                       "|| echo 0",
        "kernel_upgrade_reboot_timeout": 120, "kernel_upgrade_canary": False,
    }
    evf = str(tmp_path / "ev.json")
    with open(evf, "w") as f:
        json.dump(ev, f)
    # Kubernetes off: the playbook runs without kubernetes.core (the collections of the `ansible` package in
    # site-packages hidden, .build holds this collection alone)
    rc, out = fleet.playbook("kernel_upgrade.yml", "-e", "@" + evf, env={"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"})
    assert rc == 0, out[-8000:]
    root = fleet.root(n)
    mods = os.listdir(os.path.join(root, "lib/modules", target, "updates/bundle"))
    assert sorted(mods) == ["rpcrdma" + SUFFIX[COMPRESSION[n]], "sunrpc" + SUFFIX[COMPRESSION[n]]]
    with open(os.path.join(root, "proc/sys/kernel/osrelease")) as f:
        assert f.read().strip() == target
    # the hold moved to the target: an unattended upgrade still brings nothing, the target can be installed
    d = db(fleet, n)
    if n == "r":
        with open(os.path.join(root, "etc/dnf/plugins/versionlock.list")) as f:
            locks = f.read()
        assert "427.13.1" not in locks and "kernel-core-0:5.14.0-432.13.1.el9_4.*" in locks, locks
        fleet.sh(n, "dnf -y install kernel-core-%s" % target)
        entries = os.path.join(root, "boot/loader/entries")
        new = [e for e in os.listdir(entries) if target in e]
        assert new, os.listdir(entries)
        with open(os.path.join(entries, new[0])) as f:
            options = [ln for ln in f.read().splitlines() if ln.startswith("options ")][0].split()
        assert "iommu=pt" in options, options
    else:
        assert "linux-generic" in d["holds"] and "linux-image-" + RUNNING[n] not in d["holds"], d["holds"]
        fleet.sh(n, "apt-get install -y linux-image-%s" % target)
        rc, res = fleet.ansible(n, "gpufabric.node.kernel_hold", {"kernel_releases": [target]})
        assert rc == 0 and "linux-image-" + target in res[n]["held"], res
    before = kernels(fleet, n)
    fleet.sh(n, "unattended-upgrade" if n == "u" else "dnf -y upgrade")
    assert kernels(fleet, n) == before and target in before
