# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small sysroots for the kernel command line tests: Debian/Ubuntu with GRUB, EL with grubby/BLS, a microVM
without a boot loader, systemd-boot and UKI layouts; wrappers of the grub emulator; a tree hash."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.abspath(os.path.join(HERE, "..", "lab"))
GRUB_TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")
ACS = "pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0"
KVER = "6.8.0-45-generic"
GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
UBUNTU = 'PRETTY_NAME="Ubuntu 24.04 LTS"\nNAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n'


def w(root, rel, text, mode=None):
    p = os.path.join(root, rel)
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    with open(p, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(p, mode)


def make_wrappers(bindir, tools=GRUB_TOOLS):
    if not os.path.isdir(bindir):
        os.makedirs(bindir)
    for tool in tools:
        module = "bootctl" if tool == "bootctl" else "grub"
        args = '["%s"] + sys.argv[1:]' % tool if module == "grub" else "sys.argv[1:]"
        w(bindir, tool, "#!/bin/sh\nPYTHONPATH=%s exec %s -c 'import sys; from gpufabric_sim.emulators import %s; "
          "sys.exit(%s.main(%s))' \"$@\"\n" % (LAB, sys.executable, module, module, args), 0o755)


def remove_tools(bindir, tools=GRUB_TOOLS):
    for t in tools:
        p = os.path.join(bindir, t)
        if os.path.exists(p):
            os.unlink(p)


def make_debian(root, grub_linux="", grub_default="quiet splash", proc="ro quiet splash", dropins=None,
                os_release=UBUNTU):
    w(root, "etc/os-release", os_release)
    w(root, "etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="%s"\n'
      'GRUB_CMDLINE_LINUX="%s"\n' % (grub_default, grub_linux))
    for name, text in (dropins or {}).items():
        w(root, "etc/default/grub.d/" + name, text)
    if not os.path.isdir(os.path.join(root, "etc/default/grub.d")):
        os.makedirs(os.path.join(root, "etc/default/grub.d"))
    w(root, "proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-%s root=UUID=3f1a ro %s\n" % (KVER, proc))
    w(root, "proc/sys/kernel/osrelease", KVER + "\n")
    w(root, "boot/vmlinuz-" + KVER, "")


def make_el(root, options="root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb quiet", proc=None,
            kvers=("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.8.1.el9_3.x86_64")):
    w(root, "etc/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')
    for k in kvers:
        w(root, "boot/loader/entries/abc-%s.conf" % k,
          "title Rocky Linux (%s) 9.4 (Blue Onyx)\nversion %s\nlinux /vmlinuz-%s\n"
          "initrd /initramfs-%s.img $tuned_initrd\noptions %s $tuned_params\ngrub_class rocky\n"
          % (k, k, k, k, options))
    w(root, "proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s %s\n" % (kvers[0], proc if proc is not None else options))
    w(root, "proc/sys/kernel/osrelease", kvers[0] + "\n")


def make_microvm(root, proc="console=ttyS0 reboot=k panic=1 root=/dev/vda rw", os_release=UBUNTU):
    """A microVM guest: the hypervisor loads the kernel and passes the command line; no boot loader, /boot empty."""
    w(root, "etc/os-release", os_release)
    os.makedirs(os.path.join(root, "boot"))
    w(root, "proc/cmdline", proc + "\n")
    w(root, "proc/sys/kernel/osrelease", KVER + "\n")


def efivar(root, name, text):
    w(root, "sys/firmware/efi/efivars/%s-%s" % (name, GUID), b"\x06\x00\x00\x00" + (text + "\0").encode("utf-16-le"))


def make_systemd_boot(root, proc="root=UUID=3f1a ro quiet", uki=False, efivars=True, esp="boot/efi"):
    """Ubuntu with systemd-boot as bootctl install + kernel-install leave it (ESP at /boot/efi)."""
    make_microvm(root, proc=proc)
    w(root, "boot/vmlinuz-" + KVER, "")
    w(root, esp + "/EFI/systemd/systemd-bootx64.efi", b"MZ")
    w(root, esp + "/loader/loader.conf", "timeout 3\n")
    w(root, esp + "/loader/entries.srel", "type1\n")
    w(root, "etc/kernel/cmdline", proc + "\n")
    if uki:
        w(root, "etc/kernel/install.conf", "layout=uki\n")
        w(root, esp + "/EFI/Linux/abc-%s.efi" % KVER, b"MZ")
    else:
        w(root, esp + "/loader/entries/abc-%s.conf" % KVER, "title Ubuntu\nversion %s\noptions %s\nlinux /abc/%s/linux\n"
          % (KVER, proc, KVER))
    if efivars:
        efivar(root, "LoaderInfo", "systemd-boot 255.4-1ubuntu8")
        if uki:
            efivar(root, "StubInfo", "systemd-stub 255.4-1ubuntu8")


def tree_hash(root):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            h.update(p.encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def subprocess_run(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    out, err = p.communicate()
    return p.returncode, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape")


def which_in(bindir):
    """A bin_path that finds the node's tools in ``bindir`` only (never the test host's own update-grub or
    bootctl), and ``env`` where the host has it (the GRUB backend sources the defaults through it)."""
    def which(name):
        if name == "env":
            return shutil.which("env")
        p = os.path.join(bindir, name)
        return p if os.path.isfile(p) and os.access(p, os.X_OK) else None
    return which


def next_boot(root):
    if LAB not in sys.path:
        sys.path.insert(0, LAB)
    from gpufabric_sim.emulators import grub
    return grub.next_boot_cmdline(root)


class Node(object):
    """A tmp sysroot with the grub emulator's tools in its own bin directory (first on PATH)."""

    def __init__(self, tmp_path, monkeypatch, tools=GRUB_TOOLS):
        self.root = str(tmp_path / "root")
        self.bin = str(tmp_path / "bin")
        os.makedirs(self.root)
        make_wrappers(self.bin, tools)
        monkeypatch.setenv("GPUFABRIC_SYSROOT", self.root)
        monkeypatch.setenv("PATH", self.bin + os.pathsep + os.environ["PATH"])
        self.which = which_in(self.bin)

    def ensure(self, present, absent=(), check=False, **kw):
        from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as cmdline
        from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
        return cmdline.ensure(list(present), list(absent), subprocess_run, self.which, check_mode=check,
                              sysroot=Sysroot(self.root), arch="x86_64", **kw)

    def hash(self):
        return tree_hash(self.root)

    def read(self, rel):
        with open(os.path.join(self.root, rel)) as f:
            return f.read()

    def reboot_into(self, cmdline):
        os.chmod(os.path.join(self.root, "proc/cmdline"), 0o644)
        w(self.root, "proc/cmdline", cmdline.strip() + "\n")
