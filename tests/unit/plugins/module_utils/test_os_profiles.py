# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OS profiles: detection from os-release, kernel packages per release, module compression, meta packages."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles as op
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

UBUNTU2404 = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'


@pytest.mark.parametrize("text,name", [
    (UBUNTU2404, "ubuntu2404"),
    ('ID=ubuntu\nVERSION_ID="22.04"\n', "ubuntu2204"),
    ('ID=debian\nVERSION_ID="12"\n', "debian12"),
    ('ID=debian\nVERSION_ID="13"\n', "debian13"),
    ('ID="rhel"\nVERSION_ID="9.4"\n', "el9"),
    (ROCKY, "el9"),
    ('ID="almalinux"\nVERSION_ID="9.5"\n', "el9"),
    ('ID="centos"\nVERSION_ID="9"\n', "el9"),
    # an unknown rebuild falls back on ID_LIKE
    ('ID="navy"\nID_LIKE="rhel fedora"\nVERSION_ID="9.2"\n', "el9"),
    ('ID=pop\nID_LIKE="ubuntu debian"\nVERSION_ID="24.04"\n', "ubuntu2404"),
    ("# comment\nID='debian'\nVERSION_ID='12'\nbad line\n", "debian12"),
])
def test_profile_name(text, name):
    assert op.profile_name(op.parse_os_release(text)) == name


@pytest.mark.parametrize("text,msg", [
    ('ID=ubuntu\nVERSION_ID="20.04"\n', "unsupported release ubuntu 20.04: no OS profile ubuntu2004"),
    ('ID="rhel"\nVERSION_ID="8.10"\n', "no OS profile el8"),
    ('ID=arch\n', "unsupported release arch (no VERSION_ID)"),
    ('ID=debian\nVERSION_ID="trixie"\n', "no usable VERSION_ID"),
    ('', "unsupported release (no ID)"),
])
def test_unsupported(text, msg):
    with pytest.raises(op.ProfileError) as e:
        op.profile_name(op.parse_os_release(text))
    assert msg in str(e.value)


@pytest.mark.parametrize("name,kver,pkgs", [
    ("ubuntu2404", "6.8.0-45-generic", ["linux-image-6.8.0-45-generic", "linux-modules-6.8.0-45-generic",
                                        "linux-modules-extra-6.8.0-45-generic", "linux-headers-6.8.0-45-generic"]),
    ("debian12", "6.1.0-26-amd64", ["linux-image-6.1.0-26-amd64", "linux-headers-6.1.0-26-amd64"]),
    ("el9", "5.14.0-427.13.1.el9_4.x86_64", [
        "kernel-5.14.0-427.13.1.el9_4.x86_64", "kernel-core-5.14.0-427.13.1.el9_4.x86_64",
        "kernel-modules-5.14.0-427.13.1.el9_4.x86_64", "kernel-modules-core-5.14.0-427.13.1.el9_4.x86_64",
        "kernel-modules-extra-5.14.0-427.13.1.el9_4.x86_64", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64"]),
])
def test_kernel_packages(name, kver, pkgs):
    assert op.kernel_packages(op.get(name), kver) == pkgs


@pytest.mark.parametrize("kver", ["", "6.8.0-45-generic\n", "../x", "6.8.0 45", "generic"])
def test_kernel_packages_rejects(kver):
    with pytest.raises(op.ProfileError):
        op.kernel_packages(op.get("ubuntu2404"), kver)


@pytest.mark.parametrize("name,suffix,mgr,boot,hold", [
    ("debian12", ".ko", "apt", "grub", "apt-mark"),
    ("debian13", ".ko.xz", "apt", "grub", "apt-mark"),
    ("ubuntu2204", ".ko", "apt", "grub", "apt-mark"),
    ("ubuntu2404", ".ko.zst", "apt", "grub", "apt-mark"),
    ("el9", ".ko.xz", "dnf", "grubby", "versionlock"),
])
def test_profile_data(name, suffix, mgr, boot, hold):
    prof = op.get(name)
    assert (op.module_suffix(prof), prof["pkg_mgr"], prof["bootloader"], prof["hold"]) == (suffix, mgr, boot, hold)
    assert prof["builder_base_packages"] and "kernel_meta_re" not in op.facts(prof)
    assert (prof["kernel_cmdline_file"] == "/etc/kernel/cmdline") == (name == "el9")


@pytest.mark.parametrize("name,pkg,abi,meta", [
    ("ubuntu2404", "linux-image-6.8.0-45-generic", "6.8.0-45-generic", False),
    ("ubuntu2404", "linux-modules-extra-6.8.0-45-generic", "6.8.0-45-generic", False),
    ("ubuntu2404", "linux-generic", None, True),
    ("ubuntu2404", "linux-image-generic-hwe-24.04", None, True),
    ("ubuntu2404", "linux-nvidia", None, True),
    ("ubuntu2404", "linux-headers-generic", None, True),
    ("ubuntu2404", "linux-firmware", None, False),
    ("ubuntu2404", "linux-base", None, False),
    ("ubuntu2404", "linux-libc-dev", None, False),
    ("ubuntu2404", "linux-image-unsigned-6.8.0-45-generic", None, False),
    ("debian12", "linux-image-amd64", None, True),
    ("debian12", "linux-image-cloud-amd64", None, True),
    ("debian12", "linux-image-6.1.0-26-amd64", "6.1.0-26-amd64", False),
    ("debian12", "linux-headers-6.1.0-26-common", "6.1.0-26-common", False),
])
def test_package_classes(name, pkg, abi, meta):
    prof = op.get(name)
    assert op.abi_of_package(prof, pkg) == abi
    assert op.is_meta_package(prof, pkg) is meta


def test_detect(tmp_path):
    (tmp_path / "etc").mkdir()
    assert op.detect(Sysroot(str(tmp_path))) == (None, "neither /etc/os-release nor /usr/lib/os-release exists")
    (tmp_path / "etc" / "os-release").write_text(ROCKY)
    prof, why = op.detect(Sysroot(str(tmp_path)))
    assert why is None and prof["name"] == "el9" and prof["pkg_mgr"] == "dnf"
    (tmp_path / "etc" / "os-release").write_text('ID=ubuntu\nVERSION_ID="18.04"\n')
    prof, why = op.detect(Sysroot(str(tmp_path)))
    assert prof is None and "unsupported release ubuntu 18.04" in why


@pytest.mark.parametrize("topo,over,name,tools", [
    ("hgx-h200", {}, "ubuntu2404", ("apt-mark", "dpkg-query", "unattended-upgrade", "update-grub")),
    ("hgx-h200", {"os_version": "22.04", "kernel_release": "5.15.0-125-generic"}, "ubuntu2204", ("apt-mark",)),
    ("hgx-h200", {"os": "debian", "os_version": "12", "kernel_release": "6.1.0-26-amd64"}, "debian12", ("apt-get",)),
    ("hgx-h200", {"os": "debian", "os_version": "13", "kernel_release": "6.12.9-amd64"}, "debian13", ("apt-get",)),
    ("pcie-4gpu-crossnuma", {"os": "rocky"}, "el9", ("dnf", "rpm", "grubby")),
    ("pcie-4gpu-crossnuma", {}, "el9", ("dnf", "rpm", "grubby")),
])
def test_simulated_node_per_profile(tmp_path, topo, over, name, tools):
    """A simulated node of each profile: its os-release gives the profile, it has the profile's package tools."""
    from gpufabric_sim import runtime, topology, tree
    t = topology.load(topo, **over)
    tree.build_tree(str(tmp_path), t)
    prof, why = op.detect(Sysroot(str(tmp_path)))
    assert why is None and prof["name"] == name
    have = runtime.node_tools(t)
    assert all(tool in have for tool in tools)
    other = ("dnf", "rpm") if prof["pkg_mgr"] == "apt" else ("apt-mark", "apt-get", "dpkg-query")
    assert not any(tool in have for tool in other)
