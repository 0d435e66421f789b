# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel hold: keep unattended upgrades from bringing a kernel the vendor NFS client was not built for.

* apt (Debian, Ubuntu): ``apt-mark hold`` on the installed kernel meta packages (they pull new ABIs in: see
  :mod:`os_profiles`) and on the installed packages of the held kernel releases; the packages of other kernel
  releases that are held are released (``apt-mark unhold``), so the hold moves with the kernel. Read with
  ``apt-mark showhold`` and ``dpkg-query -W``.
* dnf (EL): ``dnf versionlock add <name>-<kver>`` for each kernel package name that is installed (any version),
  ``dnf versionlock delete`` for the kernel entries of other releases. A versionlock entry limits its name to the
  listed versions, so ``dnf upgrade`` installs no other kernel. Read with ``dnf versionlock list``.

``state=unheld`` releases the kernel holds of the given releases (all kernel holds when none is given) and the meta
packages. Commands are lists, run in the C locale by the caller's runner; a runner is ``run(argv) -> (rc, out, err)``.

The hold belongs to the ``vendor_client`` concern (the vendor_nfs_client role sets it for the kernel the client is
installed for). :func:`record` keeps the held releases in that concern's record (``/etc/gpufabric/vendor_nfs.json``,
key ``hold``), and :func:`hold_status` reads the hold back for the one-call drift check: a hold released by hand
(``apt-mark unhold``, ``dnf versionlock delete``) or a kernel installed around it that is newer than the held one
(a newer kernel is what boots next by default, without the client) is drift.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import STATE_FILE, read_record as _read

CONCERN = "vendor_client"

_ARCH_RE = re.compile(r"(?P<vr>.+)\.(?:x86_64|aarch64|ppc64le|s390x|noarch)\Z")
_LOCK_RE = re.compile(r"(?P<name>[A-Za-z0-9._+-]+?)-(?:(?P<epoch>[0-9]+):)?(?P<ver>[^-:\s]+)-(?P<rel>[^-:\s]+)"
                      r"\.(?P<arch>\*|[A-Za-z0-9_]+)\Z")
_PKG_RE = re.compile(r"[a-z0-9][a-z0-9+.-]*\Z")


class HoldError(Exception):
    """A hold command failed or its output cannot be read."""


def _run(run, argv, what):
    rc, out, err = run(argv)
    if rc != 0:
        raise HoldError("%s failed (%s, rc=%d): %s"
                        % (what, " ".join(argv), rc, (err or out or "").strip() or "no output"))
    return out


def _vr(kver):
    """EL kernel release ``5.14.0-427.13.1.el9_4.x86_64`` -> ``5.14.0-427.13.1.el9_4``."""
    m = _ARCH_RE.match(kver)
    return m.group("vr") if m else kver


def parse_versionlock(text):
    """``dnf versionlock list`` -> [(entry, name, "ver-rel")]; exclusions (``!``) and other lines are skipped."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        m = _LOCK_RE.match(line)
        if m and not line.startswith("!"):
            out.append((line, m.group("name"), "%s-%s" % (m.group("ver"), m.group("rel"))))
    return out


def parse_dpkg_installed(text):
    """``dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\n'`` -> set of installed package names."""
    out = set()
    for line in (text or "").splitlines():
        if "\t" not in line:
            continue
        abbrev, name = line.split("\t", 1)
        if len(abbrev) >= 2 and abbrev[1] == "i" and _PKG_RE.match(name.strip()):
            out.add(name.strip())
    return out


def parse_rpm_installed(text):
    """``rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\\n' names...`` -> {name: [kver...]}."""
    out = {}
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) == 2 and not line.startswith("package "):
            out.setdefault(words[0], []).append(words[1])
    return out


def check(profile, kvers, state):
    """Refuse a bad state or kernel release (HoldError, os_profiles.ProfileError) before anything is touched."""
    _check(profile, list(kvers or []), state)


def _check(profile, kvers, state):
    if state not in ("held", "unheld"):
        raise HoldError("state must be held or unheld, not %r" % (state,))
    if state == "held" and not kvers:
        raise HoldError("a kernel hold needs the kernel release(s) to hold")
    for k in kvers:
        os_profiles.kernel_packages(profile, k)  # validates the release


def plan_apt(profile, kvers, state, run):
    installed = parse_dpkg_installed(_run(run, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}\t${Package}\n"],
                                          "reading the installed packages"))
    held = set(_run(run, ["apt-mark", "showhold"], "reading the held packages").split())
    kernel = dict((p, os_profiles.abi_of_package(profile, p)) for p in installed | held)
    meta = set(p for p in installed | held if os_profiles.is_meta_package(profile, p))
    if state == "held":
        want = set(p for p in installed if p in meta or kernel.get(p) in kvers)
        release = set(p for p in held if kernel.get(p) is not None and kernel[p] not in kvers)
        hold = want - held
    else:
        hold = set()
        release = set(p for p in held
                      if p in meta or (kernel.get(p) is not None and (not kvers or kernel[p] in kvers)))
    missing = [k for k in kvers if not any(kernel.get(p) == k for p in installed)]
    before = sorted(p for p in held if p in meta or kernel.get(p))
    return dict(hold=sorted(hold), release=sorted(release), before=before,
                after=sorted((held - release | hold) & (meta | set(p for p in kernel if kernel[p]))),
                not_installed=missing, kernels=sorted(set(kernel[p] for p in installed if kernel.get(p))))


def plan_dnf(profile, kvers, state, run):
    names = os_profiles.kernel_package_names(profile)
    locks = [e for e in parse_versionlock(_run(run, ["dnf", "-q", "versionlock", "list"], "reading the versionlock"))
             if e[1] in names]
    rc, out, _err = run(["rpm", "-q", "--qf", "%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\n"] + names)
    installed = parse_rpm_installed(out)  # rc 1 when some name is not installed: that is no error
    if not installed and rc not in (0, 1):
        raise HoldError("reading the installed kernel packages failed (rpm -q, rc=%d)" % rc)
    vrs = set(_vr(k) for k in kvers)
    have = set((e[1], e[2]) for e in locks)
    if state == "held":
        want = ["%s-%s" % (n, k) for k in kvers for n in names if n in installed and (n, _vr(k)) not in have]
        release = [e[0] for e in locks if e[2] not in vrs]
    else:
        want = []
        release = [e[0] for e in locks if not kvers or e[2] in vrs]
    after = sorted([e[0] for e in locks if e[0] not in release] + want)
    missing = [k for k in kvers if not any(k in v for v in installed.values())]
    return dict(hold=sorted(want), release=sorted(release), before=sorted(e[0] for e in locks), after=after,
                not_installed=missing, kernels=sorted(set(k for v in installed.values() for k in v)))


def plan(profile, kvers, state, run):
    kvers = list(kvers or [])
    _check(profile, kvers, state)
    if profile["hold"] == "apt-mark":
        return plan_apt(profile, kvers, state, run)
    if profile["hold"] == "versionlock":
        return plan_dnf(profile, kvers, state, run)
    raise HoldError("OS profile %s has no kernel hold mechanism %r" % (profile.get("name"), profile["hold"]))


def apply(profile, kvers, state, run):
    """Change the holds; returns the plan that was applied (its ``hold``/``release`` empty when nothing changed).
    The holds are read again afterwards: a change that did not take is an error."""
    p = plan(profile, kvers, state, run)
    if profile["hold"] == "apt-mark":
        if p["release"]:
            _run(run, ["apt-mark", "unhold"] + p["release"], "releasing the hold of %s" % ", ".join(p["release"]))
        if p["hold"]:
            _run(run, ["apt-mark", "hold"] + p["hold"], "holding %s" % ", ".join(p["hold"]))
    else:
        if p["release"]:
            _run(run, ["dnf", "-q", "versionlock", "delete"] + p["release"],
                 "deleting the versionlock entries %s" % ", ".join(p["release"]))
        if p["hold"]:
            _run(run, ["dnf", "-q", "versionlock", "add"] + p["hold"],
                 "adding the versionlock entries %s" % ", ".join(p["hold"]))
    again = plan(profile, kvers, state, run)
    if again["hold"] or again["release"]:
        raise HoldError("the kernel hold did not take: still to hold %s, to release %s"
                        % (again["hold"] or "-", again["release"] or "-"))
    p["after"] = again["before"]
    return p


# --------------------------------------------------------------------------- the hold's status

def release_key(kver):
    """Order of kernel releases: the numbers in them compared as numbers (``6.1.0-9`` < ``6.1.0-25``,
    ``5.14.0-427.13.1.el9_4`` < ``5.14.0-503.el9``), letters as text, and a number newer than letters in the same
    place (``5.14.0-427.el9`` < ``5.14.0-427.13.1.el9_4``), as rpm's ``rpmvercmp`` (rpmio/rpmvercmp.c: "numeric
    segments are always newer than alpha segments"). An approximation of dpkg's and rpm's version order that holds
    for the releases the distributions' kernel packages carry; equal keys are not "newer"."""
    return [(1, int(t), "") if t.isdigit() else (0, 0, t) for t in re.findall(r"\d+|[A-Za-z]+", _vr(kver))]


def read_record(sysroot):
    """The held releases the last ``state=held`` recorded, [] without one; HoldError when the record is unreadable."""
    doc, problem = _read(sysroot)
    if problem:
        raise HoldError("%s; rerun the vendor_nfs_client role" % problem)
    hold = doc.get("hold")
    kvers = hold.get("kernel_releases") if isinstance(hold, dict) else []
    if not isinstance(kvers, list) or not all(isinstance(k, str) for k in kvers):
        raise HoldError("%s: hold.kernel_releases is not a list of kernel releases" % STATE_FILE)
    return kvers


def record(sysroot, kvers, state, check_mode=False):
    """Keep the held releases (``state=held``) in the vendor client's record, or drop them (``unheld``); True when
    the record changed (would change, in check mode, which writes nothing). The caller holds the node lock."""
    doc, _problem = _read(sysroot)
    if not doc:
        doc = {"version": 1, "kernels": {}}
    want = {"kernel_releases": sorted(kvers)} if state == "held" else None
    if doc.get("hold") == want:
        return False
    if check_mode:
        return True
    if want is None:
        doc.pop("hold", None)
    else:
        doc["hold"] = want
    sysroot.write_file_atomic(STATE_FILE, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return True


def hold_status(sysroot, run, profile):
    """The hold's part of the vendor_client status in the drift check: None when no hold is recorded, else a
    status document: ``drift`` (items: packages whose hold was released, kernels installed newer than the held
    one), ``not_checked`` when the hold holds (the client's proof needs a mount the check does not make), ``error``
    when the hold cannot be read."""
    try:
        kvers = read_record(sysroot)
        if not kvers:
            return None
        if profile is None:
            raise HoldError("the node has no supported OS profile to read the hold with")
        p = plan(profile, kvers, "held", run)
    except (HoldError, os_profiles.ProfileError) as e:
        return concerns.error(CONCERN, "kernel hold: %s" % e)
    items = [{"concern": CONCERN, "object": name, "key": "kernel hold", "current": "released", "desired": "held"}
             for name in p["hold"]]
    top = max(release_key(k) for k in kvers)
    newer = [k for k in p["kernels"] if release_key(k) > top]
    items += [{"concern": CONCERN, "object": k, "key": "kernel installed around the hold", "current": "installed",
               "desired": "absent (held: %s)" % ", ".join(kvers)} for k in newer]
    if items:
        why = []
        if p["hold"]:
            why.append("the hold of %s was released (%s)" % (", ".join(kvers), ", ".join(p["hold"])))
        if newer:
            why.append("kernel %s is installed, newer than the held %s, and boots next by default without the "
                       "client" % (", ".join(newer), ", ".join(kvers)))
        return concerns.status(concerns.DRIFT, "%s; rerun the vendor_nfs_client role (or kernel_upgrade.yml for the "
                               "new kernel)" % "; ".join(why), items)
    return concerns.status(concerns.NOT_CHECKED, "the kernel hold of %s holds (%s); the one-call check makes no "
                           "vendor NFS client proof: run the vendor_nfs_client role (verify.yml)"
                           % (", ".join(kvers), profile["hold"]))
