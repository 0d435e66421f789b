# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated nodes without GRUB (microVM, systemd-boot, UKI): their layout, tools, next boot and the bootctl
emulator; and the grub emulator sourcing the collection's additive drop-in as grub-mkconfig does."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim import bootloaders, runtime, topology
from gpufabric_sim.emulators import bootctl, grub
from gpufabric_sim.tree import MACHINE_ID, build_tree

KVER = "6.8.0-45-generic"
CMDLINE = "root=UUID=3f1a2c9e-5b7d-4e21-9a0c-6d8e2f4b1c70 ro"


def _exists(root, rel):
    return os.path.lexists(os.path.join(root, rel))


@pytest.fixture(scope="module", params=["none", "systemd-boot", "uki"])
def built(request, tmp_path_factory):
    root = str(tmp_path_factory.mktemp(request.param.replace("-", "")))
    topo = topology.load("hgx-h200", bootloader=request.param)
    build_tree(root, topo, 1)
    return request.param, root, topo


def test_no_grub_anywhere(built):
    kind, root, topo = built
    assert topo["bootloader"] == kind and topo["cmdline"] == CMDLINE, "BOOT_IMAGE= is GRUB's"
    for rel in ("etc/default/grub", "etc/default/grub.d", "boot/grub", "boot/grub2", "boot/loader/entries"):
        assert not _exists(root, rel), rel
    assert os.path.isdir(os.path.join(root, "boot"))
    with open(os.path.join(root, "proc/cmdline")) as f:
        assert f.read() == CMDLINE + "\n"
    tools = runtime.node_tools(topo)
    assert not set(tools) & set(runtime.GRUB_TOOLS)
    assert ("bootctl" in tools) is (kind != "none")
    assert {"dcb", "ethtool", "systemctl", "udevadm"} <= set(tools)


def test_microvm_is_bare(built):
    kind, root, _topo = built
    if kind != "none":
        pytest.skip("microVM only")
    assert os.listdir(os.path.join(root, "boot")) == []
    assert not _exists(root, "sys/firmware/efi"), "a microVM boots without UEFI"
    assert not _exists(root, "etc/kernel")


def test_efi_layout(built):
    kind, root, _topo = built
    if kind == "none":
        pytest.skip("UEFI only")
    esp = os.path.join(root, "boot/efi")
    for rel in ("EFI/systemd/systemd-bootx64.efi", "EFI/BOOT/BOOTX64.EFI", "loader/loader.conf"):
        assert os.path.isfile(os.path.join(esp, rel)), rel
    with open(os.path.join(esp, "loader/entries.srel")) as f:
        assert f.read() == "type1\n"
    with open(os.path.join(root, "etc/kernel/cmdline")) as f:
        assert f.read() == CMDLINE + "\n"
    assert bootctl.efi_var(root, "LoaderInfo") == "systemd-boot 255.4-1ubuntu8"
    if kind == "uki":
        assert bootctl.efi_var(root, "StubInfo") == "systemd-stub 255.4-1ubuntu8"
        assert bootctl.efi_var(root, "LoaderEntrySelected") == "%s-%s.efi" % (MACHINE_ID, KVER)
        with open(os.path.join(root, "etc/kernel/install.conf")) as f:
            assert f.read() == "layout=uki\n"
        assert not _exists(root, "boot/efi/loader/entries")
    else:
        assert bootctl.efi_var(root, "StubInfo") is None
        entry = os.path.join(esp, "loader/entries/%s-%s.conf" % (MACHINE_ID, KVER))
        with open(entry) as f:
            text = f.read()
        assert "options    %s\n" % CMDLINE in text and "linux      /%s/%s/linux\n" % (MACHINE_ID, KVER) in text
        assert os.path.isfile(os.path.join(esp, MACHINE_ID, KVER, "linux"))


def test_next_boot_is_the_running_command_line(built):
    kind, root, topo = built
    cmdline, notes = bootloaders.next_boot(root, topo)
    assert cmdline.strip() == CMDLINE
    assert bool(notes) is (kind == "none")


def test_next_boot_follows_the_loader_entry(tmp_path):
    root = str(tmp_path)
    topo = topology.load("hgx-h200", bootloader="systemd-boot")
    build_tree(root, topo, 1)
    entry = os.path.join(root, "boot/efi/loader/entries/%s-%s.conf" % (MACHINE_ID, KVER))
    with open(entry) as f:
        text = f.read().replace("options    %s" % CMDLINE, "options    %s iommu=pt" % CMDLINE)
    with open(entry, "w") as f:
        f.write(text)
    assert bootloaders.next_boot(root, topo) == (CMDLINE + " iommu=pt", [])
    # a microVM's guest cannot change what the hypervisor passes
    topo_none = topology.load("hgx-h200", bootloader="none")
    assert bootloaders.next_boot(root, topo_none)[0].strip() == CMDLINE


def test_bootctl_emulator(built, monkeypatch, capsys):
    kind, root, _topo = built
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    if kind == "none":
        assert bootctl.main(["--print-esp-path"]) == 1
        assert "Couldn't find EFI system partition" in capsys.readouterr().err
        assert bootctl.main(["is-installed"]) == 1
        return
    assert bootctl.main(["--print-esp-path"]) == 0 and capsys.readouterr().out == "/boot/efi\n"
    assert bootctl.main(["is-installed"]) == 0 and capsys.readouterr().out == "yes\n"
    assert bootctl.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "options: %s\n" % CMDLINE in out
    assert ("Type #2 (.efi)" in out) is (kind == "uki")
    assert bootctl.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "Firmware: UEFI" in out and "Product: systemd-boot 255.4-1ubuntu8" in out
    assert ("Stub: systemd-stub" in out) is (kind == "uki")
    assert bootctl.main(["bogus"]) == 1


@pytest.mark.parametrize("topo,message", [
    ({"bootloader": "lilo"}, "bootloader must be one of"),
    ({"os": "rhel", "bootloader": "grub"}, "does not fit os rhel"),
    ({"os": "ubuntu", "bootloader": "grubby"}, "does not fit os ubuntu"),
])
def test_bad_bootloader(topo, message):
    with pytest.raises(topology.TopologyError, match=message):
        topology.expand(topo)


def test_defaults_keep_grub():
    assert topology.load("hgx-h200")["bootloader"] == "grub"
    assert topology.load("pcie-4gpu-crossnuma")["bootloader"] == "grubby"
    assert topology.load("hgx-h200")["cmdline"].startswith("BOOT_IMAGE=")
    assert set(runtime.GRUB_TOOLS) <= set(runtime.node_tools(topology.load("hgx-h200")))


@pytest.mark.parametrize("items,expected", [
    ([], {}),
    (["a=none", "b=systemd-boot"], {"a": "none", "b": "systemd-boot"}),
])
def test_parse_bootloaders(items, expected):
    assert runtime.parse_bootloaders(items, [("a", "hgx-h200"), ("b", "hgx-h200")]) == expected


@pytest.mark.parametrize("items,needle", [(["c=none"], "for a node of this fleet"), (["a"], "NAME=KIND"),
                                          (["a=lilo"], "KIND is one of")])
def test_parse_bootloaders_errors(items, needle):
    with pytest.raises(runtime.SimError, match=needle):
        runtime.parse_bootloaders(items, [("a", "hgx-h200")])


def test_cli_takes_bootloader():
    args = runtime.build_parser().parse_args(["create", "--fleet", "/f", "--node", "cl1=hgx-h200",
                                              "--bootloader", "cl1=none"])
    assert args.bootloader == ["cl1=none"]


# --------------------------------------------------------------------------- the grub emulator and the drop-in

def _w(root, rel, text):
    p = os.path.join(root, rel)
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    with open(p, "w") as f:
        f.write(text)


ADDITIVE = ("GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt "
            "'pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0'\"\n")


@pytest.mark.parametrize("linux,later,expected", [
    ("", None, ["iommu=pt", "pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0", "quiet"]),
    ("mitigations=off", None,
     ["mitigations=off", "iommu=pt", "pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0", "quiet"]),
    # a drop-in sorting after ours that assigns the variable drops ours, as with grub-mkconfig
    ("", 'GRUB_CMDLINE_LINUX="nomodeset"\n', ["nomodeset", "quiet"]),
    ("", 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX nomodeset"\n',
     ["iommu=pt", "pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0", "nomodeset", "quiet"]),
])
def test_additive_dropin_is_sourced_as_shell(tmp_path, linux, later, expected):
    root = str(tmp_path)
    _w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="%s"\n'
       % linux)
    _w(root, "etc/default/grub.d/99-gpufabric.cfg", ADDITIVE)
    if later:
        _w(root, "etc/default/grub.d/99-zz-local.cfg", later)
    _w(root, "proc/sys/kernel/osrelease", KVER + "\n")
    words = grub.grub_cfg_default_args(grub.generate_grub_cfg(root))
    assert words[3:] == expected
