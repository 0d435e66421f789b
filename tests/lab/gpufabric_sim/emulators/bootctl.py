# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Emulated ``bootctl`` of a simulated node booting through systemd-boot (a read-only subset).

The node's root comes from ``GPUFABRIC_SYSROOT``. Like bootctl, the ESP is looked for at ``/efi``, ``/boot``,
``/boot/efi`` (the first that holds ``EFI/systemd`` or ``loader/``); the XBOOTLDR partition is not modelled
(``--print-boot-path`` prints the ESP, as bootctl does without one).

* ``bootctl --print-esp-path`` / ``-p``, ``--print-boot-path`` / ``-x``: the path, or "Couldn't find EFI system
  partition." and rc 1;
* ``bootctl is-installed``: ``yes`` (rc 0) when ``EFI/systemd/systemd-boot*.efi`` is there, else ``no`` (rc 1);
* ``bootctl list``: the Type #1 entries (``loader/entries/*.conf``) and the UKIs (``EFI/Linux/*.efi``) with
  their title, id, source, linux/initrd and options (a UKI's built-in command line);
* ``bootctl status``: the firmware and the current boot loader from the EFI variables (``LoaderInfo``,
  ``StubInfo``, ``LoaderEntrySelected``).

``next_boot_cmdline(root)`` is what ``/proc/cmdline`` shows after a reboot: the options of the entry systemd-boot
boots (``default`` of loader.conf, else the newest version), for a UKI its built-in command line; '' without any.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re
import sys

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
ESP_CANDIDATES = ("/efi", "/boot", "/boot/efi")
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
UKI_MARK = b"gpufabric-sim UKI; section .cmdline:\n"


def _p(root, path):
    return os.path.join(root, path.lstrip("/"))


def _read(path, default=None):
    try:
        with open(path, "rb") as f:
            return f.read()
    except (IOError, OSError):
        return default


def find_esp(root):
    for esp in ESP_CANDIDATES:
        if os.path.isdir(_p(root, esp + "/EFI/systemd")) or os.path.isdir(_p(root, esp + "/loader")):
            return esp
    return None


def efi_var(root, name):
    data = _read(_p(root, "/sys/firmware/efi/efivars/%s-%s" % (name, LOADER_GUID)))
    if data is None:
        return None
    return data[4:].decode("utf-16-le", "replace").split("\0")[0]


def _version_key(v):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.\-_+~]", v or "")]


def entries(root, esp):
    """Boot entries as systemd-boot sees them: Type #1 .conf files and UKIs, newest version first."""
    out = []
    d = _p(root, esp + "/loader/entries")
    for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not n.endswith(".conf"):
            continue
        ent = {"type": "Boot Loader Specification Type #1 (.conf)", "id": n, "source": "%s/loader/entries/%s"
               % (esp, n), "initrd": []}
        for line in (_read(os.path.join(d, n), b"") or b"").decode("utf-8", "replace").splitlines():
            parts = line.strip().split(None, 1)
            if len(parts) != 2 or parts[0].startswith("#"):
                continue
            if parts[0] == "initrd":
                ent["initrd"].append(parts[1])
            elif parts[0] == "options":
                ent["options"] = (ent.get("options", "") + " " + parts[1]).strip()
            else:
                ent.setdefault(parts[0], parts[1])
        out.append(ent)
    d = _p(root, esp + "/EFI/Linux")
    for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not n.lower().endswith(".efi"):
            continue
        data = _read(os.path.join(d, n), b"") or b""
        i = data.find(UKI_MARK)
        cmdline = data[i + len(UKI_MARK):].decode("utf-8", "replace").strip() if i >= 0 else ""
        m = re.match(r"^[0-9a-f]{32}-(.+)\.efi$", n)
        out.append({"type": "Boot Loader Specification Type #2 (.efi)", "id": n, "source": "%s/EFI/Linux/%s"
                    % (esp, n), "title": n, "version": m.group(1) if m else n, "options": cmdline, "initrd": []})
    out.sort(key=lambda e: _version_key(e.get("version")), reverse=True)
    return out


def default_entry(root, esp):
    ents = entries(root, esp)
    conf = (_read(_p(root, esp + "/loader/loader.conf"), b"") or b"").decode("utf-8", "replace")
    for line in conf.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0] == "default":
            for e in ents:
                if fnmatch.fnmatch(e["id"], parts[1]):
                    return e
    return ents[0] if ents else None


def next_boot_cmdline(root):
    esp = find_esp(root)
    ent = default_entry(root, esp) if esp else None
    return ent.get("options", "") if ent else ""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    root = os.environ.get(SYSROOT_ENV)
    if not root:
        sys.stderr.write("bootctl emulator: %s is not set\n" % SYSROOT_ENV)
        return 2
    esp = find_esp(root)
    verb = next((a for a in argv if not a.startswith("-")), "status")
    flags = [a for a in argv if a.startswith("-")]
    if any(f in ("-p", "--print-esp-path", "-x", "--print-boot-path") for f in flags):
        if not esp:
            sys.stderr.write("Couldn't find EFI system partition. It is recommended to mount it to /boot or /efi.\n"
                             "Alternatively, use --esp-path= to specify path to mount point.\n")
            return 1
        sys.stdout.write(esp + "\n")
        return 0
    if verb == "is-installed":
        ok = bool(esp) and any(n.lower().startswith("systemd-boot") for n in
                               os.listdir(_p(root, esp + "/EFI/systemd")) if os.path.isdir(
                                   _p(root, esp + "/EFI/systemd")))
        sys.stdout.write("yes\n" if ok else "no\n")
        return 0 if ok else 1
    if verb == "list":
        if not esp:
            sys.stderr.write("Couldn't find EFI system partition.\n")
            return 1
        for e in entries(root, esp):
            sys.stdout.write("         type: %s\n        title: %s\n           id: %s\n       source: %s\n"
                             % (e["type"], e.get("title", e["id"]), e["id"], e["source"]))
            if e.get("version"):
                sys.stdout.write("      version: %s\n" % e["version"])
            if e.get("linux"):
                sys.stdout.write("        linux: %s\n" % e["linux"])
            for i in e["initrd"]:
                sys.stdout.write("       initrd: %s\n" % i)
            sys.stdout.write("      options: %s\n\n" % e.get("options", ""))
        return 0
    if verb == "status":
        efi = os.path.isdir(_p(root, "/sys/firmware/efi"))
        sys.stdout.write("System:\n     Firmware: %s\n" % ("UEFI" if efi else "n/a (BIOS boot)"))
        loader = efi_var(root, "LoaderInfo")
        sys.stdout.write("\nCurrent Boot Loader:\n      Product: %s\n" % (loader or "n/a"))
        stub = efi_var(root, "StubInfo")
        if stub:
            sys.stdout.write("         Stub: %s\n" % stub)
        selected = efi_var(root, "LoaderEntrySelected")
        if selected:
            sys.stdout.write(" Current Entry: %s\n" % selected)
        sys.stdout.write("\nAvailable Boot Loaders on ESP:\n          ESP: %s\n" % (esp or "n/a"))
        return 0
    sys.stderr.write("Unknown command verb '%s'.\n" % verb)
    return 1


if __name__ == "__main__":
    sys.exit(main())
