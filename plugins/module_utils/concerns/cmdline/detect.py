# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which boot loader sets the kernel command line of this host, from its real layout.

The collection drives two: ``grub`` (Debian/Ubuntu: ``update-grub``/``grub-mkconfig`` and ``/etc/default/grub``)
and ``grubby`` (EL: ``grubby`` and Boot Loader Spec entries in ``/boot/loader/entries``). It recognises three
it does not drive:

* ``uki``: the kernel boots as a Unified Kernel Image, its command line built into the image: the running
  kernel came through systemd-stub (EFI variable ``StubInfo``), or the boot partition holds ``EFI/Linux/*.efi``,
  or kernel-install builds UKIs (``layout=uki`` in ``/etc/kernel/install.conf``).
* ``systemd-boot``: systemd-boot booted the running kernel (EFI variable ``LoaderInfo`` ``systemd-boot ...``),
  or the ESP has ``EFI/systemd/systemd-boot*.efi``, ``loader/loader.conf`` or ``loader/entries.srel``
  (``bootctl install`` writes them); kernel-install writes its Type #1 entries from ``/etc/kernel/cmdline``.
* ``none``: nothing in the guest sets the command line (a microVM or cloud VM booted by the hypervisor with a
  kernel and command line from outside: no GRUB, grubby, systemd-boot or UKI layout).

ESP and XBOOTLDR are looked for where bootctl and kernel-install look: ``/efi``, ``/boot``, ``/boot/efi``.
EFI variables are read from efivarfs (4 bytes of attributes, then UTF-16LE text).

The variables of the running boot decide first (systemd-boot and UKIs need UEFI, and set them); then a
complete GRUB or grubby layout; then the files of systemd-boot and UKIs; else ``none``. Tools in ``PATH`` alone
never make a boot loader (``grub-common`` in a microVM image, a host tool seen from a simulated node).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.args import (
    CmdlineError,
    os_family,
    read_os_release,
)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.grub import GRUB_DEFAULT, GRUB_TOOLS

KINDS = ("grub", "grubby", "systemd-boot", "uki", "none")
DRIVEN = ("grub", "grubby")
EFIVARS = "/sys/firmware/efi/efivars"
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
BOOT_ROOTS = ("/efi", "/boot", "/boot/efi")
GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
BLS_DIR = "/boot/loader/entries"
INSTALL_CONFS = ("/etc/kernel/install.conf", "/usr/lib/kernel/install.conf")
KERNEL_CMDLINE = "/etc/kernel/cmdline"


class Found(object):
    """A detected boot loader: ``kind`` (one of KINDS) and the evidence (paths, variables, tools)."""

    def __init__(self, kind, evidence, requested=False):
        self.kind = kind
        self.evidence = list(evidence)
        self.requested = requested

    @property
    def driven(self):
        return self.kind in DRIVEN

    def __repr__(self):
        return "Found(%r, %r)" % (self.kind, self.evidence)


def efi_var(sysroot, name):
    """The text of an EFI variable of the boot loader interface (``LoaderInfo``, ``StubInfo``), or None."""
    path = "%s/%s-%s" % (EFIVARS, name, LOADER_GUID)
    if not sysroot.exists(path):
        return None
    try:
        data = sysroot.read_bytes(path)
    except (IOError, OSError):
        return None
    return data[4:].decode("utf-16-le", "replace").split("\0")[0].strip()


def _install_layout(sysroot):
    """(path, layout) of the first install.conf kernel-install reads (it sources it as shell), or (None, None)."""
    for path in INSTALL_CONFS:
        text = sysroot.read_raw(path)
        if text is None:
            continue
        layout = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("layout="):
                layout = line[len("layout="):].strip().strip("\"'")
        return path, layout
    return None, None


def esp_layout(sysroot):
    """Evidence of systemd-boot and of UKIs below the boot partitions: {"systemd-boot": [...], "uki": [...]}."""
    out = {"systemd-boot": [], "uki": []}
    for base in BOOT_ROOTS:
        for n in sysroot.listdir(base + "/EFI/systemd"):
            if n.lower().startswith("systemd-boot") and n.lower().endswith(".efi"):
                out["systemd-boot"].append("%s/EFI/systemd/%s" % (base, n))
        for rel in ("/loader/loader.conf", "/loader/entries.srel"):
            if sysroot.exists(base + rel):
                out["systemd-boot"].append(base + rel)
        for n in sysroot.listdir(base + "/EFI/Linux"):
            if n.lower().endswith(".efi"):
                out["uki"].append("%s/EFI/Linux/%s" % (base, n))
    path, layout = _install_layout(sysroot)
    if layout == "uki":
        out["uki"].append("%s layout=uki" % path)
    return out


def grub_layout(sysroot, bin_path):
    """(tools in PATH, GRUB configuration files present)."""
    tools = [t for t in GRUB_TOOLS if bin_path(t)]
    files = [p for p in (GRUB_DEFAULT,) + GRUB_CFGS if sysroot.exists(p)]
    return tools, files


def bls_entries(sysroot):
    return ["%s/%s" % (BLS_DIR, n) for n in sysroot.listdir(BLS_DIR) if n.endswith(".conf")]


def detect(sysroot, bin_path, requested="auto", update_bootloader=True):
    """The boot loader of this host as a Found; CmdlineError when an explicitly requested one is absent."""
    if requested not in ("auto",) + KINDS:
        raise CmdlineError("bootloader must be one of auto, %s; got %r" % (", ".join(KINDS), requested))
    if requested == "none":
        return Found("none", ["bootloader=none was requested"], requested=True)
    stub = efi_var(sysroot, "StubInfo")
    loader = efi_var(sysroot, "LoaderInfo")
    esp = esp_layout(sysroot)
    tools, grub_files = grub_layout(sysroot, bin_path)
    grubby = bin_path("grubby")
    bls = bls_entries(sysroot)
    uki_ev = (["EFI variable StubInfo: %s" % stub] if stub else []) + esp["uki"]
    sdb_ev = (["EFI variable LoaderInfo: %s" % loader] if loader and loader.startswith("systemd-boot") else [])
    sdb_ev += esp["systemd-boot"] + (["bootctl in PATH"] if bin_path("bootctl") else [])
    if requested == "grub":
        if not tools and update_bootloader:
            raise CmdlineError("bootloader=grub: update-grub, grub-mkconfig and grub2-mkconfig are all missing; "
                               "install grub2-common or set update_bootloader=false")
        if not tools and not grub_files and not sysroot.isdir("/etc/default/grub.d"):
            raise CmdlineError("bootloader=grub: this host has no GRUB (no grub-mkconfig in PATH, no %s, no "
                               "/etc/default/grub.d)" % GRUB_DEFAULT)
        return Found("grub", tools + grub_files, requested=True)
    if requested == "grubby":
        if not grubby:
            raise CmdlineError("grubby was not found in PATH; install the grubby package")
        return Found("grubby", [grubby] + bls, requested=True)
    if requested == "uki":
        if not uki_ev:
            raise CmdlineError("bootloader=uki: no UKI found (no StubInfo EFI variable, no EFI/Linux/*.efi below "
                               "%s, no layout=uki in %s)" % (", ".join(BOOT_ROOTS), INSTALL_CONFS[0]))
        return Found("uki", uki_ev, requested=True)
    if requested == "systemd-boot":
        if not (sdb_ev and (loader or esp["systemd-boot"])):
            raise CmdlineError("bootloader=systemd-boot: no systemd-boot found (no LoaderInfo EFI variable, no "
                               "EFI/systemd/, loader/loader.conf or loader/entries.srel below %s)"
                               % ", ".join(BOOT_ROOTS))
        return Found("systemd-boot", sdb_ev, requested=True)

    # auto: the running boot's own record first
    if stub:
        return Found("uki", uki_ev)
    if loader and loader.startswith("systemd-boot"):
        return Found("systemd-boot", sdb_ev)
    fam = os_family(read_os_release(sysroot))
    if fam == "el" or (fam is None and grubby and bls):
        # GRUB 2 with BLS entries (an XBOOTLDR /boot of systemd-boot has loader/entries too)
        if grub_files or (bls and not esp["systemd-boot"]):
            if grubby:
                return Found("grubby", [grubby] + bls + grub_files)
            raise CmdlineError("grubby was not found in PATH; install the grubby package (this host boots "
                               "through GRUB: %s)" % ", ".join((bls + grub_files)[:3]))
    if fam != "el" and tools and grub_files:
        return Found("grub", tools + grub_files)
    if esp["uki"] and not bls_type1(sysroot):
        return Found("uki", uki_ev)
    if esp["systemd-boot"]:
        return Found("systemd-boot", sdb_ev)
    if esp["uki"]:
        return Found("uki", uki_ev)
    ev = []
    if grub_files:
        ev.append("%s without update-grub/grub-mkconfig in PATH" % ", ".join(grub_files))
    if tools:
        ev.append("%s in PATH without %s or a grub.cfg" % (", ".join(tools), GRUB_DEFAULT))
    return Found("none", ev or ["no GRUB, grubby, systemd-boot or UKI layout"])


def bls_type1(sysroot):
    """Type #1 entries systemd-boot reads (loader/entries/*.conf of an ESP or XBOOTLDR that has systemd-boot)."""
    out = []
    for root in BOOT_ROOTS:
        if sysroot.exists(root + "/loader/loader.conf") or sysroot.exists(root + "/loader/entries.srel"):
            out += ["%s/loader/entries/%s" % (root, n) for n in sysroot.listdir(root + "/loader/entries")
                    if n.endswith(".conf")]
    return out


def kernel_image(sysroot, kver):
    """Where the distribution keeps the kernel image kernel-install is given (EL: below /usr/lib/modules)."""
    if os_family(read_os_release(sysroot)) == "el":
        return "/usr/lib/modules/%s/vmlinuz" % kver
    return "/boot/vmlinuz-%s" % kver


def advice(found, sysroot):
    """What the operator does instead, for a boot loader the collection does not drive (one clause)."""
    kver = (sysroot.read("/proc/sys/kernel/osrelease") or "").strip() or "$(uname -r)"
    image = kernel_image(sysroot, kver)
    if found.kind == "systemd-boot":
        return ("put the whole command line in %s, run 'kernel-install add %s %s' for each installed kernel "
                "(it rewrites the options of its loader entry) and reboot" % (KERNEL_CMDLINE, kver, image))
    if found.kind == "uki":
        return ("put the whole command line in %s, rebuild the UKI with 'kernel-install add %s %s' (layout=uki) "
                "and reboot; a signed vendor UKI needs a cmdline addon" % (KERNEL_CMDLINE, kver, image))
    return "set it in the VM definition (microVM kernel args, libvirt <cmdline>, QEMU -append) and restart the VM"


def why(found):
    """Why the collection does not drive this host's boot loader (one clause)."""
    if found.kind == "systemd-boot":
        return "systemd-boot entries set the kernel command line; the collection does not manage them yet"
    if found.kind == "uki":
        return "the kernel is a UKI with a built-in command line; the collection does not manage UKIs yet"
    if found.requested:
        return "bootloader=none: nothing in this guest sets the kernel command line"
    return ("nothing in this guest sets the kernel command line (no GRUB, grubby, systemd-boot or UKI): it comes "
            "from the hypervisor")
