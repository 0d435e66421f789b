# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel hold (apt-mark, dnf versionlock) against the simulator's package managers (tests/lab emulators/pkg.py):
the hold stops an unattended upgrade from installing a new kernel, moves with the kernel, is idempotent."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import hold as kh
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles as op
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim.emulators import pkg

UB = "6.8.0-45-generic"
UB_NEW = "6.8.0-50-generic"
DEB = "6.1.0-50-amd64"
EL = "5.14.0-427.13.1.el9_4.x86_64"
EL_NEW = "5.14.0-432.13.1.el9_4.x86_64"
CASES = [("ubuntu", "ubuntu2404", UB, UB_NEW), ("debian", "debian12", DEB, "6.1.0-55-amd64"),
         ("rocky", "el9", EL, EL_NEW)]


def node(tmp_path, os_id, kver):
    root = str(tmp_path)
    pkg.seed(root, os_id, kver)
    calls = []

    def run(argv):
        calls.append(list(argv))
        return pkg.run(root, argv)
    return root, run, calls


def kernels(root):
    """The installed kernels: linux-image-<k> names (apt), kernel-core versions (dnf)."""
    db = pkg.load(root)
    if db["manager"] == "dnf":
        return sorted(db["installed"].get("kernel-core", []))
    return sorted(n for n in db["installed"] if n.startswith("linux-image-") and n[12:13].isdigit())


def unattended(root, os_id):
    return pkg.run(root, ["unattended-upgrade"] if os_id != "rocky" else ["dnf", "-y", "upgrade"])


@pytest.mark.parametrize("os_id,prof,kver,new", CASES)
def test_unattended_upgrade_without_hold_installs_new_kernel(tmp_path, os_id, prof, kver, new):
    root, _run, _calls = node(tmp_path, os_id, kver)
    assert unattended(root, os_id)[0] == 0
    db = pkg.load(root)
    name = "kernel-core" if os_id == "rocky" else "linux-image-" + new
    assert name in db["installed"] and len(kernels(root)) == 2, "the simulation must be able to fail the hold test"


@pytest.mark.parametrize("os_id,prof,kver,new", CASES)
def test_hold_stops_unattended_upgrade_and_is_idempotent(tmp_path, os_id, prof, kver, new):
    root, run, calls = node(tmp_path, os_id, kver)
    profile = op.get(prof)
    p = kh.plan(profile, [kver], "held", run)
    assert p["hold"] and not p["release"]
    assert not any(c[1:2] in (["hold"], ["versionlock", "add"]) or c[2:3] == ["add"] for c in calls), "plan writes"
    res = kh.apply(profile, [kver], "held", run)
    # dnf lists an added NVRA spec as its entry (name-epoch:version-release.*)
    assert len(res["after"]) == len(res["hold"]) and (os_id == "rocky" or res["after"] == res["hold"])
    if os_id == "rocky":
        assert "kernel-core-0:5.14.0-427.13.1.el9_4.*" in res["after"]
    else:
        meta = "linux-generic" if os_id == "ubuntu" else "linux-image-amd64"
        assert meta in res["after"] and "linux-image-" + kver in res["after"]
    again = kh.plan(profile, [kver], "held", run)
    assert again["hold"] == [] and again["release"] == []
    before = kernels(root)
    out = unattended(root, os_id)
    assert out[0] == 0
    assert kernels(root) == before, "an unattended upgrade installed a kernel while the hold was in place: %s" % (
        out,)


@pytest.mark.parametrize("os_id,prof,kver,new", CASES)
def test_hold_moves_to_target(tmp_path, os_id, prof, kver, new):
    root, run, _calls = node(tmp_path, os_id, kver)
    profile = op.get(prof)
    kh.apply(profile, [kver], "held", run)
    moved = kh.apply(profile, [new], "held", run)
    if os_id == "rocky":
        # EL: the lock moves before the kernel is installed, then only the target may be installed
        assert moved["release"] == [e for e in moved["release"] if "427" in e] and moved["release"]
        assert all("432" in e for e in moved["after"])
        assert pkg.run(root, ["dnf", "-y", "install", "kernel-core-" + new])[0] == 0
    else:
        # apt: the old ABI's packages are released, the meta packages stay held; the target is held once installed
        assert "linux-image-" + kver in moved["release"] and moved["not_installed"] == [new]
        assert pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + new])[0] == 0
        held = kh.apply(profile, [new], "held", run)
        assert "linux-image-" + new in held["hold"]
    assert new in " ".join(kernels(root))


@pytest.mark.parametrize("os_id,prof,kver,new", CASES)
def test_unheld_releases(tmp_path, os_id, prof, kver, new):
    root, run, _calls = node(tmp_path, os_id, kver)
    profile = op.get(prof)
    kh.apply(profile, [kver], "held", run)
    res = kh.apply(profile, [], "unheld", run)
    assert res["release"] and res["after"] == []
    assert kh.plan(profile, [], "unheld", run)["release"] == []


@pytest.mark.parametrize("kvers,state,msg", [
    ([], "held", "needs the kernel release"),
    (["6.8.0-45-generic\n"], "held", "is no kernel release"),
    ([UB], "locked", "state must be held or unheld"),
])
def test_bad_input_touches_nothing(tmp_path, kvers, state, msg):
    root, run, calls = node(tmp_path, "ubuntu", UB)
    with pytest.raises((kh.HoldError, op.ProfileError)) as e:
        kh.apply(op.get("ubuntu2404"), kvers, state, run)
    assert msg in str(e.value) and calls == []


def test_failed_command_is_named(tmp_path):
    root, run, _calls = node(tmp_path, "rocky", EL)

    def failing(argv):
        if argv[2:4] == ["versionlock", "add"]:
            return 1, "", "Error: No package found for: x"
        return run(argv)
    with pytest.raises(kh.HoldError) as e:
        kh.apply(op.get("el9"), [EL], "held", failing)
    assert "adding the versionlock entries kernel-" in str(e.value) and "No package found" in str(e.value)


@pytest.mark.parametrize("text,entries", [
    ("Last metadata expiration check: 0:01:02 ago.\nkernel-core-0:5.14.0-427.13.1.el9_4.*\n",
     [("kernel-core-0:5.14.0-427.13.1.el9_4.*", "kernel-core", "5.14.0-427.13.1.el9_4")]),
    ("kernel-5.14.0-427.13.1.el9_4.x86_64\n!kernel-0:5.14.0-500.el9.*\n",
     [("kernel-5.14.0-427.13.1.el9_4.x86_64", "kernel", "5.14.0-427.13.1.el9_4")]),
    ("", []),
])
def test_parse_versionlock(text, entries):
    assert kh.parse_versionlock(text) == entries


# --------------------------------------------------------------------------- the hold's status (issue 21 item 23)

def _release(root, os_id, kver):
    """An admin releasing the hold by hand: apt-mark unhold of the kernel image, dnf versionlock delete of the
    kernel-core entry."""
    if os_id == "rocky":
        entry = [e for e in pkg.locks(root) if e.startswith("kernel-core-")][0]
        return pkg.run(root, ["dnf", "-q", "versionlock", "delete", entry])
    return pkg.run(root, ["apt-mark", "unhold", "linux-image-" + kver])


def _install_around(root, os_id, new):
    """A newer kernel installed around the hold: apt-get install by name (an explicit install is no upgrade, the
    hold does not stop it); on EL ``rpm -ivh kernel-core-<new>.rpm``, which dnf's versionlock never sees (the
    simulator emulates only ``rpm -q``, so the package database gets the package as rpm would record it)."""
    if os_id == "rocky":
        db = pkg.load(root)
        db["installed"]["kernel-core"].append(new)
        pkg.save(root, db)
        return 0, "", ""
    return pkg.run(root, ["apt-get", "install", "-y", "linux-image-" + new])


@pytest.mark.parametrize("change, keys", [
    (None, []),
    ("release", ["kernel hold"]),
    ("install", ["kernel installed around the hold"]),
])
@pytest.mark.parametrize("os_id,prof,kver,new", CASES)
def test_hold_status(tmp_path, os_id, prof, kver, new, change, keys):
    root, run, _calls = node(tmp_path, os_id, kver)
    sr = Sysroot(root)
    profile = op.get(prof)
    assert kh.hold_status(sr, run, profile) is None  # no hold recorded: the check says nothing about it
    kh.apply(profile, [kver], "held", run)
    assert kh.record(sr, [kver], "held") and not kh.record(sr, [kver], "held")
    if change == "release":
        assert _release(root, os_id, kver)[0] == 0
    elif change == "install":
        assert _install_around(root, os_id, new)[0] == 0
    st = kh.hold_status(sr, run, profile)
    if not keys:
        assert st["status"] == "not_checked" and kver in st["reason"] and "holds" in st["reason"], st
        return
    assert st["status"] == "drift", st
    assert sorted(set(i["key"] for i in st["items"])) == keys
    if change == "release":
        assert "was released" in st["reason"]
    else:
        assert [i["object"] for i in st["items"]] == [k for k in kernels_releases(root, profile, run) if k != kver]
        assert "newer than the held %s" % kver in st["reason"]
    # the hold moved to the new kernel by the role: the record follows, the old kernel is no newer one
    if change == "install":
        target = [i["object"] for i in st["items"]][0]
        kh.apply(profile, [target], "held", run)
        kh.record(sr, [target], "held")
        assert kh.hold_status(sr, run, profile)["status"] == "not_checked"


def kernels_releases(root, profile, run):
    return kh.plan(profile, [], "unheld", run)["kernels"]


@pytest.mark.parametrize("older, newer", [
    ("6.1.0-9-amd64", "6.1.0-25-amd64"), ("6.8.0-45-generic", "6.8.0-50-generic"),
    ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.el9.x86_64"), ("5.15.0-9-generic", "6.1.0-1-amd64"),
])
def test_release_order(older, newer):
    assert kh.release_key(older) < kh.release_key(newer)


def test_hold_record_keeps_the_client_record_and_refuses_a_bad_one(tmp_path):
    sr = Sysroot(str(tmp_path))
    sr.makedirs("/etc/gpufabric")
    sr.write_file_atomic(kh.STATE_FILE, '{"version": 1, "kernels": {"%s": {"version": "4.0.35"}}}' % DEB)
    assert kh.record(sr, [DEB], "held")
    doc = json.loads(sr.read_raw(kh.STATE_FILE))
    assert doc["kernels"][DEB] == {"version": "4.0.35"} and doc["hold"] == {"kernel_releases": [DEB]}
    assert kh.record(sr, [], "unheld") and "hold" not in json.loads(sr.read_raw(kh.STATE_FILE))
    sr.write_file_atomic(kh.STATE_FILE, '{"hold": {"kernel_releases": "6.1.0-50-amd64"}}')
    st = kh.hold_status(sr, lambda argv: (0, "", ""), op.get("debian12"))
    assert st["status"] == "error" and "not a list" in st["reason"]


class PkgRunner(object):
    """The drift check's runner over the simulator's package managers."""

    def __init__(self, root):
        self.root = root

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if name in pkg.TOOLS else None

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        return pkg.run(self.root, list(args))


@pytest.mark.parametrize("os_release, os_id, kver", [
    ('ID=debian\nVERSION_ID="12"\n', "debian", DEB),
    ('ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n', "rocky", EL),
])
def test_the_drift_check_reads_the_hold(tmp_path, os_release, os_id, kver):
    """The one-call check's vendor_client evaluator: the proof is not made, the hold is read."""
    root, run, _calls = node(tmp_path, os_id, kver)
    sr = Sysroot(root)
    sr.makedirs("/etc")
    sr.write_file_atomic("/etc/os-release", os_release)
    profile, why = op.detect(sr)
    assert profile is not None, why

    def vendor_client():
        ctx = node_check.Context({}, sr, PkgRunner(root))
        return node_check.REGISTRY["vendor_client"]["evaluate"](ctx)["vendor_client"]
    assert vendor_client()["status"] == "not_checked" and "no vendor NFS client proof" in vendor_client()["reason"]
    kh.apply(profile, [kver], "held", run)
    kh.record(sr, [kver], "held")
    assert vendor_client()["status"] == "not_checked" and "holds" in vendor_client()["reason"]
    assert _release(root, os_id, kver)[0] == 0
    doc = vendor_client()
    assert doc["status"] == "drift" and "was released" in doc["reason"], doc
