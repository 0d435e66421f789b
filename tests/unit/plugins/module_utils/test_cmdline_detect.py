# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot loader detection from the host's layout (cmdline_detect) and the kernel command line concern on hosts
whose boot loader the collection does not drive: microVMs, systemd-boot, UKIs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from cmdline_nodes import (ACS, KVER, Node, efivar, make_debian, make_el, make_microvm, make_systemd_boot,
                           remove_tools, w)

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as c
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import detect as d
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

GRUB_ONLY = ("update-grub", "grub-mkconfig", "grub2-mkconfig")
EL_RELEASE = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'


@pytest.fixture
def node(tmp_path, monkeypatch):
    return Node(tmp_path, monkeypatch, tools=GRUB_ONLY + ("grubby", "bootctl"))


def _grub_cfg(root):
    w(root, "boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux\t/boot/vmlinuz root=/dev/vda1 ro\n}\n")


def setup_microvm(root):
    make_microvm(root)


def setup_grub_common_only(root):
    # grub-common ships grub-mkconfig; without grub-pc/grub-efi there is no /etc/default/grub and no grub.cfg
    make_microvm(root)


def setup_leftover_default(root):
    make_microvm(root)
    w(root, "etc/default/grub", 'GRUB_CMDLINE_LINUX=""\n')


def setup_debian(root):
    make_debian(root)


def setup_grub_cfg_only(root):
    make_microvm(root)
    _grub_cfg(root)


def setup_el(root):
    make_el(root)


def setup_el_microvm(root):
    make_microvm(root, os_release=EL_RELEASE)


def setup_sdboot(root):
    make_systemd_boot(root)


def setup_sdboot_files_only(root):
    make_systemd_boot(root, efivars=False)


def setup_sdboot_efi_mount(root):
    make_systemd_boot(root, efivars=False, esp="efi")


def setup_uki(root):
    make_systemd_boot(root, uki=True)


def setup_uki_files_only(root):
    make_systemd_boot(root, uki=True, efivars=False)


def setup_install_conf_uki_with_type1(root):
    make_systemd_boot(root, efivars=False)
    w(root, "etc/kernel/install.conf", "# kernel-install\nlayout=uki\n")


def setup_grub_booted_by_sdboot(root):
    # GRUB's packages still installed, but the firmware started systemd-boot
    make_debian(root)
    _grub_cfg(root)
    w(root, "boot/efi/EFI/systemd/systemd-bootx64.efi", b"MZ")
    efivar(root, "LoaderInfo", "systemd-boot 255.4-1ubuntu8")


def setup_grub_bli(root):
    # GRUB 2.12's bli module also sets LoaderInfo
    make_debian(root)
    efivar(root, "LoaderInfo", "GRUB 2.12")


def setup_grub_and_sdboot_files(root):
    make_debian(root)
    _grub_cfg(root)
    w(root, "boot/efi/EFI/systemd/systemd-bootx64.efi", b"MZ")


def setup_fedora_sdboot_xbootldr(root):
    # systemd-boot with XBOOTLDR at /boot: /boot/loader/entries as with GRUB's BLS, but no grub.cfg
    make_microvm(root, os_release='ID=fedora\n')
    w(root, "boot/loader/entries/abc-6.9.fc40.x86_64.conf", "title Fedora\noptions root=/dev/vda2 ro\n")
    w(root, "boot/efi/loader/loader.conf", "timeout 3\n")
    w(root, "boot/efi/EFI/systemd/systemd-bootx64.efi", b"MZ")


def setup_unknown_with_grub(root):
    make_debian(root, os_release="ID=plan9\n")
    _grub_cfg(root)


def setup_unknown_bare(root):
    make_microvm(root, os_release="ID=plan9\n")


DETECT_CASES = [
    # name, layout, tools in PATH, expected kind, an evidence substring
    ("microVM", setup_microvm, (), "none", "no GRUB, grubby, systemd-boot or UKI layout"),
    ("grub-common only", setup_grub_common_only, ("grub-mkconfig",), "none", "grub-mkconfig in PATH without"),
    ("leftover /etc/default/grub", setup_leftover_default, (), "none",
     "/etc/default/grub without update-grub/grub-mkconfig"),
    ("host tools seen from a microVM", setup_microvm, GRUB_ONLY + ("grubby",), "none", "update-grub"),
    ("Debian GRUB", setup_debian, GRUB_ONLY, "grub", "/etc/default/grub"),
    ("grub.cfg without defaults", setup_grub_cfg_only, ("update-grub",), "grub", "/boot/grub/grub.cfg"),
    ("EL grubby", setup_el, ("grubby", "grub2-mkconfig"), "grubby", "/boot/loader/entries/"),
    ("EL microVM", setup_el_microvm, (), "none", "no GRUB"),
    ("systemd-boot by LoaderInfo", setup_sdboot, ("bootctl",), "systemd-boot", "EFI variable LoaderInfo"),
    ("systemd-boot by its files", setup_sdboot_files_only, (), "systemd-boot", "/boot/efi/loader/loader.conf"),
    ("systemd-boot ESP at /efi", setup_sdboot_efi_mount, (), "systemd-boot", "/efi/EFI/systemd/systemd-bootx64.efi"),
    ("UKI by StubInfo", setup_uki, ("bootctl",), "uki", "EFI variable StubInfo: systemd-stub"),
    ("UKI by its files", setup_uki_files_only, (), "uki", "/boot/efi/EFI/Linux/abc-%s.efi" % KVER),
    ("layout=uki with Type #1 entries left", setup_install_conf_uki_with_type1, (), "systemd-boot",
     "loader.conf"),
    ("GRUB installed, systemd-boot booted", setup_grub_booted_by_sdboot, GRUB_ONLY, "systemd-boot",
     "LoaderInfo: systemd-boot"),
    ("GRUB's own LoaderInfo", setup_grub_bli, GRUB_ONLY, "grub", "update-grub"),
    ("GRUB and stray systemd-boot files", setup_grub_and_sdboot_files, GRUB_ONLY, "grub", "grub.cfg"),
    ("Fedora systemd-boot with XBOOTLDR", setup_fedora_sdboot_xbootldr, ("grubby",), "systemd-boot",
     "EFI/systemd"),
    ("unknown distribution with GRUB", setup_unknown_with_grub, GRUB_ONLY, "grub", "update-grub"),
    ("unknown distribution bare", setup_unknown_bare, (), "none", "no GRUB"),
]


@pytest.mark.parametrize("name,setup,tools,kind,evidence", DETECT_CASES, ids=[x[0] for x in DETECT_CASES])
def test_detect(node, name, setup, tools, kind, evidence):
    setup(node.root)
    remove_tools(node.bin, [t for t in GRUB_ONLY + ("grubby", "bootctl") if t not in tools])
    found = d.detect(Sysroot(node.root), node.which)
    assert found.kind == kind, found
    assert any(evidence in e for e in found.evidence), found.evidence
    assert found.driven is (kind in ("grub", "grubby"))


REQUESTED_CASES = [
    # name, layout, tools, requested, update_bootloader, kind or error
    ("none on a GRUB host", setup_debian, GRUB_ONLY, "none", True, "none"),
    ("grub on a microVM", setup_microvm, (), "grub", True, "update-grub, grub-mkconfig and grub2-mkconfig"),
    ("grub without update on a microVM", setup_microvm, (), "grub", False, "this host has no GRUB"),
    ("grub without update where the defaults are", setup_leftover_default, (), "grub", False, "grub"),
    ("grub with tools", setup_debian, GRUB_ONLY, "grub", True, "grub"),
    ("grubby missing", setup_debian, GRUB_ONLY, "grubby", True, "grubby was not found"),
    ("grubby", setup_el, ("grubby",), "grubby", True, "grubby"),
    ("systemd-boot absent", setup_microvm, (), "systemd-boot", True, "bootloader=systemd-boot: no systemd-boot"),
    ("systemd-boot only bootctl", setup_microvm, ("bootctl",), "systemd-boot", True, "no systemd-boot found"),
    ("systemd-boot", setup_sdboot, ("bootctl",), "systemd-boot", True, "systemd-boot"),
    ("uki absent", setup_sdboot, ("bootctl",), "uki", True, "bootloader=uki: no UKI found"),
    ("uki", setup_uki_files_only, (), "uki", True, "uki"),
    ("bad name", setup_debian, GRUB_ONLY, "lilo", True, "bootloader must be one of"),
]


@pytest.mark.parametrize("name,setup,tools,requested,update,expected", REQUESTED_CASES,
                         ids=[x[0] for x in REQUESTED_CASES])
def test_detect_requested(node, name, setup, tools, requested, update, expected):
    setup(node.root)
    remove_tools(node.bin, [t for t in GRUB_ONLY + ("grubby", "bootctl") if t not in tools])
    if expected in d.KINDS:
        found = d.detect(Sysroot(node.root), node.which, requested, update)
        assert found.kind == expected and found.requested
    else:
        with pytest.raises(c.CmdlineError, match=expected):
            d.detect(Sysroot(node.root), node.which, requested, update)


def test_efi_var_reads_efivarfs_format(tmp_path):
    efivar(str(tmp_path), "LoaderInfo", "systemd-boot 255.4-1ubuntu8")
    sr = Sysroot(str(tmp_path))
    assert d.efi_var(sr, "LoaderInfo") == "systemd-boot 255.4-1ubuntu8"
    assert d.efi_var(sr, "StubInfo") is None


# --------------------------------------------------------------------------- the concern where nothing is driven

NOT_DRIVEN_CASES = [
    # name, layout, /proc/cmdline, present, absent, kind, status, reason substrings, running items (key, cur, want)
    ("microVM already right", setup_microvm, "console=ttyS0 root=/dev/vda rw iommu=pt", ["iommu=pt"], [],
     "none", "not_applicable",
     ["it comes from the hypervisor", "already has the wanted arguments", "set it in the VM definition"], []),
    ("microVM lacking", setup_microvm, "console=ttyS0 root=/dev/vda rw", ["iommu=pt", ACS], [], "none", "drift",
     ["/proc/cmdline lacks iommu=pt, lacks " + ACS, "microVM kernel args, libvirt <cmdline>, QEMU -append",
      "restart the VM", "nothing in this guest sets the kernel command line"],
     [("iommu", None, "iommu=pt"), ("pci", None, ACS)]),
    ("microVM other value and unwanted", setup_microvm, "root=/dev/vda iommu=off splash", ["iommu=pt"], ["splash"],
     "none", "drift", ["has iommu=off instead of iommu=pt, has splash"],
     [("iommu", "iommu=off", "iommu=pt"), ("splash", "splash", None)]),
    ("systemd-boot lacking", setup_sdboot, "root=UUID=3f1a ro quiet", ["iommu=pt"], [], "systemd-boot", "drift",
     ["systemd-boot entries set the kernel command line", "/etc/kernel/cmdline",
      "kernel-install add %s /boot/vmlinuz-%s" % (KVER, KVER), "loader entry"],
     [("iommu", None, "iommu=pt")]),
    ("systemd-boot right", setup_sdboot, "root=UUID=3f1a ro iommu=pt", ["iommu=pt"], [], "systemd-boot",
     "not_applicable", ["/etc/kernel/cmdline", "already has"], []),
    ("UKI lacking", setup_uki, "root=UUID=3f1a ro quiet", ["iommu=pt"], [], "uki", "drift",
     ["a UKI with a built-in command line", "rebuild the UKI with 'kernel-install add %s" % KVER, "layout=uki"],
     [("iommu", None, "iommu=pt")]),
    ("leftover GRUB defaults", setup_leftover_default, "root=/dev/vda iommu=pt", ["iommu=pt"], [], "none",
     "not_applicable", ["nothing in this guest sets"], []),
]


@pytest.mark.parametrize("name,setup,proc,present,absent,kind,status,reasons,running", NOT_DRIVEN_CASES,
                         ids=[x[0] for x in NOT_DRIVEN_CASES])
def test_not_driven_never_fails(node, name, setup, proc, present, absent, kind, status, reasons, running):
    setup(node.root)
    if os.path.exists(os.path.join(node.root, "proc/cmdline")):
        node.reboot_into(proc)
    # the field host: no grub tools at all (a microVM image), bootctl only with systemd-boot
    remove_tools(node.bin, GRUB_ONLY + ("grubby",))
    before = node.hash()
    results = [node.ensure(present, absent, check=check) for check in (True, False)]
    assert node.hash() == before, "nothing is written where the collection does not drive the boot loader"
    assert results[0] == results[1], "check mode and a real run agree"
    r = results[0]
    assert r["bootloader"] == kind
    assert r["changed"] is False and r["reboot_required"] is False
    assert r["cmdline_next"] is None and r["actions"] == [] and r["args_added"] == [] == r["args_removed"]
    doc = r["concerns"]["cmdline"]
    assert doc["status"] == status
    for part in reasons:
        assert part in doc["reason"], (part, doc["reason"])
    assert not doc["reason"].endswith("..."), "the reason fits one line without being cut"
    assert [(i["key"], i["current"], i["desired"]) for i in doc["items"]] == running
    assert all(i["object"] == "running" and i["concern"] == "cmdline" for i in doc["items"])
    assert r["drift"] == doc["items"]


def test_explicit_none_on_a_grub_host_writes_nothing(node):
    make_debian(node.root, proc="quiet iommu=pt")
    before = node.hash()
    r = node.ensure(["iommu=pt"], bootloader="none")
    assert r["bootloader"] == "none" and r["changed"] is False and node.hash() == before
    assert r["concerns"]["cmdline"]["status"] == "not_applicable"
    assert r["concerns"]["cmdline"]["reason"].startswith("bootloader=none: nothing in this guest")


def test_bad_input_still_fails_where_nothing_is_driven(node):
    make_microvm(node.root)
    with pytest.raises(c.CmdlineError, match="iommu= accepts"):
        node.ensure(["iommu=on"], check=True)


def test_systemd_boot_on_el_names_the_el_kernel_image(node):
    make_systemd_boot(node.root)
    w(node.root, "etc/os-release", EL_RELEASE)
    w(node.root, "proc/sys/kernel/osrelease", "5.14.0-427.13.1.el9_4.x86_64\n")
    r = node.ensure(["iommu=pt"], check=True)
    assert r["bootloader"] == "systemd-boot"
    assert ("kernel-install add 5.14.0-427.13.1.el9_4.x86_64 /usr/lib/modules/5.14.0-427.13.1.el9_4.x86_64/vmlinuz"
            in r["concerns"]["cmdline"]["reason"])
