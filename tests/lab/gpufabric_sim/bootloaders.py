# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a simulated node boots when it is not GRUB: the layouts of systemd-boot and UKIs, the tools a node gets,
and where its next command line comes from.

* ``write_efi_boot(root, topology, kver, machine_id, uki)``: systemd-boot as ``bootctl install`` and
  kernel-install leave it, ESP at ``/boot/efi``: ``EFI/systemd/systemd-bootx64.efi``, ``EFI/BOOT/BOOTX64.EFI``,
  ``loader/loader.conf``, ``loader/entries.srel`` (``type1``), ``/etc/kernel/cmdline``; a Type #1 entry
  (90-loaderentry.install's format) with the kernel copied below ``<machine-id>/<kver>/``, or with ``uki`` a
  stand-in UKI ``EFI/Linux/<machine-id>-<kver>.efi`` carrying its built-in command line (90-uki-copy.install) and
  ``/etc/kernel/install.conf`` ``layout=uki``; the EFI variables ``LoaderInfo``, ``LoaderEntrySelected`` and, for
  a UKI, ``StubInfo`` as efivarfs shows them.
* ``node_tools(topology, wrappers)``: the emulated tools of a node (GRUB's only where GRUB boots it, bootctl only
  with systemd-boot).
* ``next_boot(root, topology)``: the next ``/proc/cmdline`` and notes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim.emulators import bootctl as bootctl_emu

GRUB_TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")
KINDS = ("grub", "grubby", "systemd-boot", "uki", "none")
# systemd-boot/systemd-stub of the distributions' systemd packages (the text of LoaderInfo/StubInfo)
SYSTEMD_VERSION = {"ubuntu": "255.4-1ubuntu8", "debian": "252.38-1~deb12u1", "rhel": "252-32.el9_4",
                   "rocky": "252-32.el9_4"}
INITRD = {"ubuntu": "initrd.img-%s", "debian": "initrd.img-%s", "rhel": "initramfs-%s.img",
          "rocky": "initramfs-%s.img"}
OS_RELEASE_PRETTY = {"ubuntu": "Ubuntu {v} LTS", "debian": "Debian GNU/Linux {v} (bookworm)",
                     "rhel": "Red Hat Enterprise Linux {v} (Plow)", "rocky": "Rocky Linux {v} (Blue Onyx)"}
EFIVARS = "sys/firmware/efi/efivars"
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
UKI_MARK = bootctl_emu.UKI_MARK


def efivar(efivars, name, text, guid=LOADER_GUID):
    """An EFI variable of the boot loader interface as efivarfs shows it (attributes BS|RT)."""
    _write(os.path.join(efivars, "%s-%s" % (name, guid)),
           b"\x06\x00\x00\x00" + (text + "\0").encode("utf-16-le"), 0o644)


def uki_image(cmdline):
    """A stand-in for a Unified Kernel Image: a PE signature and the built-in command line (.cmdline)."""
    return b"MZ" + b"\0" * 62 + UKI_MARK + cmdline.encode("utf-8") + b"\n"


def kind_of(topo):
    return topo.get("bootloader", "grubby" if topo.get("os") in ("rhel", "rocky") else "grub")


def p(root, *parts):
    return os.path.join(root, *[x.lstrip("/") for x in parts])


def _write(path, content, mode=0o644):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    os.chmod(path, mode)


def _mkdir(path):
    if not os.path.isdir(path):
        os.makedirs(path)


def write_efi_boot(root, t, kver, machine_id, uki=False):
    """systemd-boot as ``bootctl install`` and kernel-install leave it, ESP at /boot/efi: Type #1 entries
    (90-loaderentry.install) or, with ``layout=uki``, a UKI below EFI/Linux (90-uki-copy.install)."""
    esp = "boot/efi"
    words = t["cmdline"].split()
    options = " ".join(words)
    systemd = SYSTEMD_VERSION[t["os"]]
    vmlinuz = "boot/vmlinuz-%s" % kver
    _write(p(root, vmlinuz), b"")
    _write(p(root, "boot/%s" % (INITRD[t["os"]] % kver)), b"")
    for rel in ("EFI/systemd/systemd-bootx64.efi", "EFI/BOOT/BOOTX64.EFI"):
        _write(p(root, esp, rel), b"MZ" + b"\0" * 62)
    _write(p(root, esp, "loader/loader.conf"), "timeout 3\n#console-mode keep\n")
    _write(p(root, esp, "loader/entries.srel"), "type1\n")
    _write(p(root, "etc/kernel/cmdline"), options + "\n")
    title = OS_RELEASE_PRETTY[t["os"]].format(v=t["os_version"])
    selected = "%s-%s.conf" % (machine_id, kver)
    if uki:
        _write(p(root, "etc/kernel/install.conf"), "layout=uki\n")
        selected = "%s-%s.efi" % (machine_id, kver)
        _write(p(root, esp, "EFI/Linux", selected), uki_image(options))
    else:
        _mkdir(p(root, esp, "loader/entries"))
        _write(p(root, esp, machine_id, kver, "linux"), b"")
        _write(p(root, esp, machine_id, kver, INITRD[t["os"]] % kver), b"")
        _write(p(root, esp, "loader/entries", selected), "".join([
            "# Boot Loader Specification type#1 entry\n",
            "# File created by /usr/lib/kernel/install.d/90-loaderentry.install (systemd %s)\n" % systemd,
            "title      %s\n" % title,
            "version    %s\n" % kver,
            "machine-id %s\n" % machine_id,
            "sort-key   %s\n" % t["os"],
            "options    %s\n" % options,
            "linux      /%s/%s/linux\n" % (machine_id, kver),
            "initrd     /%s/%s/%s\n" % (machine_id, kver, INITRD[t["os"]] % kver),
        ]))
    # what the boot loader interface leaves in efivarfs: 4 bytes of attributes, UTF-16LE text with its NUL
    efivar(p(root, EFIVARS), "LoaderInfo", "systemd-boot %s" % systemd)
    efivar(p(root, EFIVARS), "LoaderEntrySelected", selected)
    if uki:
        efivar(p(root, EFIVARS), "StubInfo", "systemd-stub %s" % systemd)


def node_tools(topo, wrappers):
    """The emulated tools in a node's bin/: the GRUB ones only where GRUB boots it (grub: Debian/Ubuntu; grubby:
    EL, whose grub2-tools also ship grub2-mkconfig), bootctl only with systemd-boot (and the UKIs it loads)."""
    bl = kind_of(topo)
    out = {}
    for tool, spec in wrappers.items():
        if tool in GRUB_TOOLS and bl not in ("grub", "grubby"):
            continue
        if tool == "bootctl" and bl not in ("systemd-boot", "uki"):
            continue
        out[tool] = spec
    return out


def next_boot(root, topo):
    """(command line, notes) of the node's next boot, from what its boot loader reads."""
    from gpufabric_sim.emulators import grub
    bl = kind_of(topo)
    notes = []
    if bl == "none":
        # a microVM: the hypervisor passes the same command line again, whatever the guest wrote
        cmdline = ""
        notes.append("bootloader none: the hypervisor passed the previous command line")
    elif bl in ("systemd-boot", "uki"):
        cmdline = bootctl_emu.next_boot_cmdline(root)
    else:
        cmdline = grub.next_boot_cmdline(root)
    if not cmdline:
        with open(os.path.join(root, "proc", "cmdline")) as f:
            cmdline = f.read()
        if bl != "none":
            # no grub.cfg / BLS entry / loader entry (never configured in this tree): the firmware boots what
            # it booted before
            notes.append("no boot entry below the sysroot: booted the previous command line")
    return cmdline, notes
