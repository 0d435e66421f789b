# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel hold (apt-mark, dnf versionlock) against the simulator's package managers (tests/lab emulators/pkg.py):
the hold stops an unattended upgrade from installing a new kernel, moves with the kernel, is idempotent."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import kernel_hold as kh
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles as op
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
