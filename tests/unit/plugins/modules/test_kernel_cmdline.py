# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel_cmdline module run as Ansible runs it (a subprocess reading ANSIBLE_MODULE_ARGS),
against a tmp sysroot and the grub emulator behind generated wrapper scripts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LAB = os.path.join(REPO, "tests", "lab")
BUILD = os.path.join(REPO, ".build")
MODULE = os.path.join(REPO, "plugins", "modules", "kernel_cmdline.py")
TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")


def _w(root, rel, text):
    p = os.path.join(root, rel)
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    with open(p, "w") as f:
        f.write(text)


def debian(root):
    _w(root, "etc/os-release", "NAME=Debian GNU/Linux\nID=debian\n")
    _w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=off"\nGRUB_CMDLINE_LINUX=""\n')
    os.makedirs(os.path.join(root, "etc/default/grub.d"))
    _w(root, "proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=UUID=1 ro quiet iommu=off\n")
    _w(root, "proc/sys/kernel/osrelease", "6.1.0-26-amd64\n")


def rocky(root):
    k = "5.14.0-427.13.1.el9_4.x86_64"
    _w(root, "etc/os-release", 'ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    _w(root, "boot/loader/entries/m-%s.conf" % k,
       "title Rocky Linux (%s)\nversion %s\nlinux /vmlinuz-%s\noptions root=/dev/sda2 ro iommu=off quiet\n" % (k, k, k))
    _w(root, "proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s root=/dev/sda2 ro iommu=off quiet\n" % k)
    _w(root, "proc/sys/kernel/osrelease", k + "\n")


def tree_hash(root):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(files):
            h.update(os.path.join(d, n).encode())
            with open(os.path.join(d, n), "rb") as f:
                h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def env(tmp_path):
    root = str(tmp_path / "root")
    bindir = str(tmp_path / "bin")
    os.makedirs(root)
    os.makedirs(bindir)
    for tool in TOOLS:
        p = os.path.join(bindir, tool)
        with open(p, "w") as f:
            f.write("#!/bin/sh\nPYTHONPATH=%s exec %s -c 'import sys; from gpufabric_sim.emulators import grub; "
                    "sys.exit(grub.main([\"%s\"] + sys.argv[1:]))' \"$@\"\n" % (LAB, sys.executable, tool))
        os.chmod(p, 0o755)
    e = dict(os.environ)
    e.update({"GPUFABRIC_SYSROOT": root, "PATH": bindir + os.pathsep + e["PATH"], "PYTHONPATH": BUILD})
    return {"root": root, "bin": bindir, "env": e, "tmp": str(tmp_path)}


def run_module(env, check=False, diff=False, **params):
    args = dict(params)
    args["_ansible_check_mode"] = check
    args["_ansible_diff"] = diff
    path = os.path.join(env["tmp"], "args.json")
    with open(path, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    p = subprocess.Popen([sys.executable, MODULE, path], env=env["env"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = p.communicate()
    try:
        return json.loads(out.decode())
    except ValueError:
        raise AssertionError("module printed no JSON: %r %r" % (out, err))


def debian_admin_iommu_off(root):
    debian(root)
    _w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=off"\n'
       'GRUB_CMDLINE_LINUX=""\n')


def debian_clean(root):
    debian(root)
    _w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n')


SETUPS = {"debian": debian_clean, "rocky": rocky}
FLOW_CASES = [
    # the drop-in before (absent) and after; the admin's /etc/default/grub has no conflict
    ("debian", "grub", "", 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"', [],
     ["quiet"]),
    ("rocky", "grubby", 'args="ro iommu=off quiet"', 'args="ro iommu=pt quiet"', ["iommu=off"], []),
]


@pytest.mark.parametrize("distro,bootloader,diff_before,diff_after,removed,kept", FLOW_CASES,
                         ids=[x[0] for x in FLOW_CASES])
def test_flow(env, distro, bootloader, diff_before, diff_after, removed, kept):
    SETUPS[distro](env["root"])
    before = tree_hash(env["root"])
    r = run_module(env, check=True, diff=True, present=["iommu=pt"])
    assert r.get("failed") is not True, r
    assert r["changed"] is True and r["bootloader"] == bootloader
    assert tree_hash(env["root"]) == before
    assert diff_before in r["diff"]["before"] and diff_after in r["diff"]["after"]
    assert r["diff"]["before_header"].endswith("(before)")
    assert {"concern": "cmdline", "object": "running", "key": "iommu",
            "current": "iommu=off", "desired": "iommu=pt"} in r["drift"]
    assert r["concerns"]["cmdline"]["status"] == "drift"

    r1 = run_module(env, present=["iommu=pt"])
    assert r1["changed"] is True and r1["reboot_required"] is True
    assert r1["args_added"] == ["iommu=pt"] and r1["args_removed"] == removed
    assert "iommu=pt" in r1["cmdline_next"].split() and "iommu=off" not in r1["cmdline_next"]
    assert all(k in r1["cmdline_next"].split() for k in kept)
    assert "iommu=off" in r1["cmdline_current"].split()
    assert "diff" not in r1
    assert r1["concerns"]["cmdline"]["status"] == "ok" and r1["concerns"]["cmdline"]["corrected"] is True

    r2 = run_module(env, present=["iommu=pt"])
    assert r2["changed"] is False and r2["reboot_required"] is True
    assert [d for d in r2["drift"] if d["object"] == "bootloader"] == []
    assert r2["concerns"]["cmdline"] == {"status": "ok", "reason": None, "items": []}


def test_admin_conflict_is_drift_not_failure(env):
    debian_admin_iommu_off(env["root"])
    admin = open(os.path.join(env["root"], "etc/default/grub")).read()
    for check in (True, False):
        r = run_module(env, check=check, present=["iommu=pt"])
        assert r.get("failed") is not True, r
        doc = r["concerns"]["cmdline"]
        assert doc["status"] == "drift"
        assert {"concern": "cmdline", "object": "/etc/default/grub", "key": "iommu", "current": "iommu=off",
                "desired": "iommu=pt"} in doc["items"]
        assert "remove it there" in doc["reason"]
        assert r["reboot_required"] is False
    assert open(os.path.join(env["root"], "etc/default/grub")).read() == admin


def microvm(root):
    """The field host: an Ubuntu 24.04 microVM whose kernel and command line come from the hypervisor."""
    _w(root, "etc/os-release", 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n'
       'ID_LIKE=debian\n')
    os.makedirs(os.path.join(root, "boot"))
    _w(root, "proc/cmdline", "console=ttyS0 reboot=k panic=1 pci=realloc root=/dev/vda rw\n")
    _w(root, "proc/sys/kernel/osrelease", "6.8.0-45-generic\n")


MICROVM_CASES = [
    # present, status, reason part, running items
    (["pci=realloc"], "not_applicable", "already has the wanted arguments", []),
    (["iommu=pt"], "drift", "/proc/cmdline lacks iommu=pt",
     [{"concern": "cmdline", "object": "running", "key": "iommu", "current": None, "desired": "iommu=pt"}]),
]


@pytest.mark.parametrize("present,status,reason,items", MICROVM_CASES, ids=[c[1] for c in MICROVM_CASES])
def test_no_boot_loader_check_and_real(env, present, status, reason, items):
    microvm(env["root"])
    for t in ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby"):
        os.unlink(os.path.join(env["bin"], t))
    before = tree_hash(env["root"])
    for check in (True, False):
        r = run_module(env, check=check, diff=True, present=present)
        assert r.get("failed") is not True, r
        assert r["changed"] is False and r["reboot_required"] is False
        assert r["bootloader"] == "none" and r["cmdline_next"] is None
        doc = r["concerns"]["cmdline"]
        assert doc["status"] == status and reason in doc["reason"] and "hypervisor" in doc["reason"]
        assert doc["items"] == items and r["drift"] == items
        assert r["diff"]["before"] == r["diff"]["after"] == ""
    assert tree_hash(env["root"]) == before


def test_explicit_grub_on_a_microvm_fails(env):
    microvm(env["root"])
    for t in ("update-grub", "grub-mkconfig", "grub2-mkconfig"):
        os.unlink(os.path.join(env["bin"], t))
    r = run_module(env, present=["iommu=pt"], bootloader="grub")
    assert r.get("failed") is True and "bootloader=grub" in r["msg"], r


@pytest.mark.parametrize("params,match", [
    ({"present": [""]}, "empty kernel argument"),
    ({"present": ["iommu=on"]}, "iommu= accepts"),
    ({"present": ["iommu=pt"], "absent": ["iommu"]}, "both in present"),
    ({"present": ["a b"]}, "whitespace"),
    ({"present": ["iommu=pt\u0000"]}, "control character"),
    ({"absent": ["quiet\u0000"]}, "control character"),
    ({"present": ["iommu=pt"], "bootloader": "systemd-boot"}, "bootloader=systemd-boot: no systemd-boot found"),
    ({"present": ["iommu=pt"], "bootloader": "grubby"}, "grubby was not found"),
    ({"present": ["iommu=pt"], "bootloader": "lilo"}, "value of bootloader must be one of"),
])
def test_failures_change_nothing(env, params, match):
    debian(env["root"])
    os.unlink(os.path.join(env["bin"], "grubby"))
    before = tree_hash(env["root"])
    r = run_module(env, **params)
    assert r.get("failed") is True and match in r["msg"], r
    assert tree_hash(env["root"]) == before
