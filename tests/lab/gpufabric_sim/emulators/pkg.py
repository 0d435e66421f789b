# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Emulated package managers of a simulated node, enough for the kernel: dpkg-query, apt-mark, apt-get,
unattended-upgrade (Debian/Ubuntu) and rpm, dnf with its versionlock plugin (EL).

The node's package database is ``var/lib/gpufabric-sim/packages.json`` under ``GPUFABRIC_SYSROOT``::

    {"manager": "apt"|"dnf", "installed": {name: [version...]}, "repo": {name: [{"version", "depends"}]},
     "holds": [name...]}

dnf's versionlock entries live where the plugin keeps them, ``etc/dnf/plugins/versionlock.list``
(``name-epoch:version-release.*``). What is modelled:

* apt: ``apt-mark hold|unhold|showhold`` (a held package is neither upgraded nor removed; holding an unknown package
  fails as apt does); ``apt-get install`` installs the newest version with its dependencies; ``apt-get upgrade``
  upgrades what needs no new package (a new kernel ABI is kept back, as apt does); ``apt-get dist-upgrade`` and
  ``unattended-upgrade`` upgrade and install the new dependencies (that is how a new meta package version brings a
  new ABI); held packages are skipped by all of them.
* dnf: kernel packages are install-only (a newer one is installed beside the old); ``dnf install``/``dnf upgrade``
  only take versions the versionlock entries allow (no entry for a name: any version); ``dnf versionlock add`` of a
  name locks its installed versions, of ``name-version`` that version (installed or in the repo), unknown specs fail.
* ``rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\\n' names``;
  ``dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\n'``.

``seed(root, os_id, kver)`` writes the database of a fresh node: the running kernel's packages and meta packages
installed, and a newer kernel ABI in the repo that the meta packages' newer version pulls in.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

DB = "var/lib/gpufabric-sim/packages.json"
VERSIONLOCK = "etc/dnf/plugins/versionlock.list"
TOOLS = ("dpkg-query", "apt-mark", "apt-get", "unattended-upgrade", "rpm", "dnf")


def _root():
    root = os.environ.get("GPUFABRIC_SYSROOT", "")
    if not root or root == "/":
        raise SystemExit("pkg emulator: GPUFABRIC_SYSROOT must name a simulated node's root")
    return root


def _p(root, rel):
    return os.path.join(root, rel)


def load(root):
    with open(_p(root, DB)) as f:
        return json.load(f)


def save(root, db):
    path = _p(root, DB)
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path + ".new", "w") as f:
        json.dump(db, f, indent=1, sort_keys=True)
    os.rename(path + ".new", path)


def vkey(v):
    return [(0, int(x)) if x.isdigit() else (1, x) for x in re.findall(r"\d+|[a-z]+", v)]


def _installonly(db, name):
    return db["manager"] == "dnf" and (name == "kernel" or name.startswith("kernel-"))


def _newest(db, name):
    cands = db["repo"].get(name, [])
    return max(cands, key=lambda c: vkey(c["version"])) if cands else None


# ---------------------------------------------------------------------------------------------- dnf versionlock

def _vr(version):
    m = re.match(r"(.+)\.(?:x86_64|aarch64|noarch)\Z", version)
    return m.group(1) if m else version


def locks(root):
    try:
        with open(_p(root, VERSIONLOCK)) as f:
            lines = [line.strip() for line in f]
    except (IOError, OSError):
        return []
    return [line for line in lines if line and not line.startswith("#")]


def _write_locks(root, entries):
    path = _p(root, VERSIONLOCK)
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("".join(e + "\n" for e in entries))


def _lock_entry(name, version):
    return "%s-0:%s.*" % (name, _vr(version))


def _lock_name(entry):
    m = re.match(r"(?P<name>.+?)-(?:\d+:)?\d[^:]*\.(?:\*|[a-z0-9_]+)\Z", entry)
    return m.group("name") if m else None


def allowed(root, name, version):
    mine = [e for e in locks(root) if _lock_name(e) == name]
    return not mine or _lock_entry(name, version) in mine


# ---------------------------------------------------------------------------------------------- installing

def _install(db, root, name, version, out, held_check=True):
    """Install ``name`` at ``version`` with its dependencies (newest versions); returns False when refused."""
    have = db["installed"].get(name, [])
    if version in have:
        return True
    if db["manager"] == "dnf" and not allowed(root, name, version):
        out.append("skipping %s-%s: excluded by versionlock" % (name, version))
        return False
    if held_check and db["manager"] == "apt" and name in db["holds"] and have:
        out.append("%s is held back" % name)
        return False
    entry = next((c for c in db["repo"].get(name, []) if c["version"] == version), None)
    for dep in (entry or {}).get("depends", []):
        if dep not in db["installed"]:
            best = _newest(db, dep)
            if best is None or not _install(db, root, dep, best["version"], out):
                out.append("unmet dependency %s of %s" % (dep, name))
                return False
    db["installed"][name] = (have + [version]) if _installonly(db, name) else [version]
    out.append("installed %s %s" % (name, version))
    if db["manager"] == "dnf" and name == "kernel-core":
        kernel_install(root, version)
    return True


def kernel_install(root, kver, machine_id=None):
    """What the kernel-core scriptlet's ``kernel-install add`` does on EL9 with GRUB + BLS: the kernel's files and a
    BLS entry whose options are ``/etc/kernel/cmdline`` (else ``/proc/cmdline`` without ``BOOT_IMAGE=``)."""
    text = None
    for rel in ("etc/kernel/cmdline", "usr/lib/kernel/cmdline"):
        try:
            with open(_p(root, rel)) as f:
                text = f.read()
            break
        except (IOError, OSError):
            continue
    if text is None:
        try:
            with open(_p(root, "proc/cmdline")) as f:
                text = " ".join(w for w in f.read().split() if not w.startswith("BOOT_IMAGE="))
        except (IOError, OSError):
            text = ""
    if machine_id is None:
        try:
            with open(_p(root, "etc/machine-id")) as f:
                machine_id = f.read().strip()
        except (IOError, OSError):
            return  # a bare package database without a boot setup (unit tests of the package manager)
    entries = _p(root, "boot/loader/entries")
    if not os.path.isdir(entries):
        os.makedirs(entries)
    for rel in ("boot/vmlinuz-" + kver, "boot/initramfs-%s.img" % kver):
        with open(_p(root, rel), "wb"):
            pass
    with open(os.path.join(entries, "%s-%s.conf" % (machine_id, kver)), "w") as f:
        f.write("title Linux (%s)\nversion %s\nlinux /vmlinuz-%s\ninitrd /initramfs-%s.img $tuned_initrd\n"
                "options %s $tuned_params\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class kernel\n"
                % (kver, kver, kver, kver, " ".join(text.split())))


def _upgrade(db, root, new_packages):
    out = []
    for name in sorted(db["installed"]):
        best = _newest(db, name)
        have = db["installed"][name]
        if best is None or vkey(best["version"]) <= max(vkey(v) for v in have):
            continue
        if db["manager"] == "apt" and name in db["holds"]:
            out.append("%s is held back" % name)
            continue
        missing = [d for d in best.get("depends", []) if d not in db["installed"]]
        if missing and not new_packages:
            out.append("%s is kept back (needs %s)" % (name, ", ".join(missing)))
            continue
        _install(db, root, name, best["version"], out)
    return out


def _resolve(db, spec):
    """``name``, ``name=version`` (apt), ``name-version`` (dnf) -> (name, version) or None."""
    if "=" in spec:
        name, version = spec.split("=", 1)
        return (name, version) if any(c["version"] == version for c in db["repo"].get(name, [])) else None
    if spec in db["repo"]:
        return spec, _newest(db, spec)["version"]
    for name, cands in db["repo"].items():
        for c in cands:
            if spec == "%s-%s" % (name, c["version"]):
                return name, c["version"]
    return None


# ---------------------------------------------------------------------------------------------- tools

def run(root, argv):
    """One emulated command -> (rc, stdout, stderr)."""
    prog = os.path.basename(argv[0])
    args = list(argv[1:]) if prog == "rpm" else [a for a in argv[1:] if a not in ("-y", "-q", "--yes", "--assumeyes")]
    db = load(root)
    if prog == "dpkg-query":
        if db["manager"] != "apt":
            return 127, "", "dpkg-query: not found\n"
        names = sorted(set(db["installed"]) | set(db["holds"]))
        return 0, "".join("%s%s \t%s\n" % ("h" if n in db["holds"] else "i", "i" if n in db["installed"] else "n", n)
                          for n in names), ""
    if prog == "apt-mark":
        if not args:
            return 100, "", "E: No command given\n"
        if args[0] == "showhold":
            return 0, "".join(n + "\n" for n in sorted(db["holds"])), ""
        if args[0] in ("hold", "unhold"):
            msgs = []
            for n in args[1:]:
                if n not in db["installed"] and n not in db["repo"]:
                    return 100, "", "E: Unable to locate package %s\n" % n
                if args[0] == "hold":
                    msgs.append("%s %s on hold.\n" % (n, "was already set" if n in db["holds"] else "set"))
                    db["holds"] = sorted(set(db["holds"]) | {n})
                else:
                    msgs.append("Canceled hold on %s.\n" % n if n in db["holds"] else "%s was already not on hold.\n"
                                % n)
                    db["holds"] = sorted(set(db["holds"]) - {n})
            save(root, db)
            return 0, "".join(msgs), ""
        return 100, "", "E: Invalid operation %s\n" % args[0]
    if prog in ("apt-get", "unattended-upgrade") or (prog == "dnf" and args[:1] != ["versionlock"]):
        cmd = "unattended-upgrade" if prog == "unattended-upgrade" else (args[0] if args else "")
        if cmd in ("upgrade", "dist-upgrade", "unattended-upgrade", "update"):
            out = [] if cmd == "update" else _upgrade(db, root, new_packages=cmd != "upgrade" or prog == "dnf")
            save(root, db)
            return 0, "".join(line + "\n" for line in out), ""
        if cmd == "install":
            out = []
            for spec in [a for a in args[1:] if not a.startswith("-")]:
                got = _resolve(db, spec)
                if got is None:
                    return 100 if prog == "apt-get" else 1, "", "E: Unable to locate package %s\n" % spec
                if not _install(db, root, got[0], got[1], out, held_check=False):
                    return 100 if prog == "apt-get" else 1, "", "".join(line + "\n" for line in out)
            save(root, db)
            return 0, "".join(line + "\n" for line in out), ""
        return 100, "", "E: unsupported %s command %r in the simulator\n" % (prog, cmd)
    if prog == "dnf":
        sub, specs = (args[1] if len(args) > 1 else "list"), args[2:]
        entries = locks(root)
        if sub == "list":
            return 0, "".join(e + "\n" for e in entries), ""
        if sub == "add":
            for spec in specs:
                if spec in db["installed"]:
                    new = [_lock_entry(spec, v) for v in db["installed"][spec]]
                else:
                    found = [(n, v) for n, vs in db["installed"].items() for v in vs if spec == "%s-%s" % (n, v)]
                    found = found or ([_resolve(db, spec)] if _resolve(db, spec) else [])
                    if not found:
                        return 1, "", "Error: No package found for: %s\n" % spec
                    new = [_lock_entry(n, v) for n, v in found]
                entries += [e for e in new if e not in entries]
            _write_locks(root, entries)
            return 0, "".join("Adding versionlock on: %s\n" % e for e in entries), ""
        if sub == "delete":
            gone = [e for e in entries if e in specs]
            if not gone:
                return 1, "", "Error: package %s is not locked\n" % " ".join(specs)
            _write_locks(root, [e for e in entries if e not in specs])
            return 0, "".join("Deleting versionlock for: %s\n" % e for e in gone), ""
        return 1, "", "No such command: versionlock %s\n" % sub
    if prog == "rpm":
        if db["manager"] != "dnf" or args[:1] != ["-q"]:
            return 1, "", "rpm: only 'rpm -q --qf FMT names' is emulated\n"
        names = args[3:] if args[1:2] == ["--qf"] else args[1:]
        out, err, rc = [], [], 0
        for n in names:
            if n in db["installed"]:
                out += ["%s %s\n" % (n, v) for v in db["installed"][n]]
            else:
                err.append("package %s is not installed\n" % n)
                rc = 1
        return rc, "".join(out) + "".join(err), ""
    return 127, "", "pkg emulator: unknown tool %s\n" % prog


# ---------------------------------------------------------------------------------------------- seeding

def _bump(kver):
    """The next kernel ABI: 6.8.0-45-generic -> 6.8.0-50-generic, 5.14.0-427.13.1.el9_4.x86_64 -> 5.14.0-432..."""
    m = re.match(r"(\d+\.\d+\.\d+-)(\d+)(.*)\Z", kver)
    if not m:
        return None
    return "%s%d%s" % (m.group(1), int(m.group(2)) + 5, m.group(3))


def abi_packages(os_id, kver):
    if os_id == "ubuntu":
        return ["linux-image-" + kver, "linux-modules-" + kver, "linux-modules-extra-" + kver, "linux-headers-" + kver]
    if os_id == "debian":
        return ["linux-image-" + kver, "linux-headers-" + kver]
    return ["kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra"]


def _deb_version(kver):
    m = re.match(r"(\d+\.\d+\.\d+)-(\d+)", kver)
    if not m:
        return kver
    return "%s-%s.%s" % (m.group(1), m.group(2), m.group(2))


def add_kernel(db, os_id, kver, meta=False):
    """Put kernel ``kver``'s packages into the repo (and, with ``meta``, the meta packages' version depending on it)."""
    if db["manager"] == "dnf":
        for n in abi_packages(os_id, kver):
            db["repo"].setdefault(n, []).append({"version": kver, "depends": []})
        return
    v = _deb_version(kver)
    pkgs = abi_packages(os_id, kver)
    for n in pkgs:
        db["repo"].setdefault(n, []).append({"version": v, "depends": []})
    if meta:
        metas = (["linux-generic", "linux-image-generic", "linux-headers-generic"] if os_id == "ubuntu"
                 else ["linux-image-amd64", "linux-headers-amd64"])
        for n in metas:
            db["repo"].setdefault(n, []).append({"version": v.replace("-", ".", 1), "depends": pkgs})


def seed(root, os_id, kver):
    family = "apt" if os_id in ("ubuntu", "debian") else "dnf"
    db = {"manager": family, "installed": {}, "repo": {}, "holds": []}
    add_kernel(db, os_id, kver, meta=True)
    for name, cands in db["repo"].items():
        db["installed"][name] = [cands[0]["version"]]
    if _bump(kver):
        add_kernel(db, os_id, _bump(kver), meta=True)
    save(root, db)
    if family == "dnf":
        _write_locks(root, [])


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else ""
    if prog not in TOOLS and len(argv) > 1 and argv[1] in TOOLS:
        argv = argv[1:]
    rc, out, err = run(_root(), argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
