# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's package managers: how a new kernel ABI comes in, and what holds and versionlock stop."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim.emulators import pkg

UB = "6.8.0-45-generic"
UB_META = ["apt-mark", "hold", "linux-generic", "linux-image-generic", "linux-headers-generic"]
EL = "5.14.0-427.13.1.el9_4.x86_64"


def images(root):
    db = pkg.load(root)
    if db["manager"] == "dnf":
        return db["installed"].get("kernel-core", [])
    return sorted(n for n in db["installed"] if n.startswith("linux-image-6"))


@pytest.mark.parametrize("os_id,kver,argv,hold,new", [
    ("ubuntu", UB, ["apt-get", "-y", "upgrade"], None, False),  # needs new packages: kept back
    ("ubuntu", UB, ["apt-get", "-y", "dist-upgrade"], None, True),
    ("ubuntu", UB, ["unattended-upgrade"], None, True),
    ("ubuntu", UB, ["unattended-upgrade"], UB_META, False),
    # holding only the running ABI's packages does not stop the meta packages from pulling the new ABI in
    ("ubuntu", UB, ["unattended-upgrade"], ["apt-mark", "hold", "linux-image-" + UB], True),
    ("debian", "6.1.0-50-amd64", ["unattended-upgrade"], ["apt-mark", "hold", "linux-image-amd64",
                                                          "linux-headers-amd64"], False),
    ("rocky", EL, ["dnf", "-y", "upgrade"], None, True),
    ("rocky", EL, ["dnf", "-y", "upgrade"], ["dnf", "versionlock", "add", "kernel-core"], False),
])
def test_new_kernel(tmp_path, os_id, kver, argv, hold, new):
    root = str(tmp_path)
    pkg.seed(root, os_id, kver)
    before = images(root)
    if hold:
        assert pkg.run(root, hold)[0] == 0
    rc, out, err = pkg.run(root, argv)
    assert rc == 0, err
    assert (images(root) != before) is new, out


def test_apt_mark_unknown_package(tmp_path):
    pkg.seed(str(tmp_path), "ubuntu", UB)
    assert pkg.run(str(tmp_path), ["apt-mark", "hold", "linux-nope"])[:2] == (100, "")


def test_versionlock_unknown_spec_and_list(tmp_path):
    root = str(tmp_path)
    pkg.seed(root, "rocky", EL)
    assert pkg.run(root, ["dnf", "versionlock", "add", "kernel-core-9.9.9-1.el9.x86_64"])[0] == 1
    assert pkg.run(root, ["dnf", "versionlock", "add", "kernel-core-" + EL])[0] == 0
    assert pkg.run(root, ["dnf", "-q", "versionlock", "list"])[1] == "kernel-core-0:5.14.0-427.13.1.el9_4.*\n"
    assert os.path.exists(os.path.join(root, pkg.VERSIONLOCK))
    rc, out, _err = pkg.run(root, ["rpm", "-q", "--qf", "%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\n", "kernel-core",
                                   "kernel-devel"])
    assert rc == 1 and out == "kernel-core %s\npackage kernel-devel is not installed\n" % EL
