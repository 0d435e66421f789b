# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host can tell about ECN/DCQCN beyond the driver's own controls (``ecn.py``): whether kernel lockdown
keeps debugfs (the inbox mlx5 ``cc_params``) closed, and the firmware's per-priority DCQCN enable.

Firmware: the inbox (upstream) mlx5 driver has no per-priority NP/RP enable (nothing in
``drivers/infiniband/hw/mlx5/cong.c`` or ``en_dcbnl.c``); DCQCN runs on the priorities whose bit is set in the
firmware's ``ROCE_CC_PRIO_MASK_P<port>`` (NVIDIA firmware configuration, default 255: every priority). It can be
read only with NVIDIA MFT's ``mlxconfig`` or mstflint's ``mstconfig``: ``mlxconfig -d <bdf> query
ROCE_CC_PRIO_MASK_P1`` prints, below ``Configurations:``, the key and its value (the configuration the firmware
uses from its next reset on; a change needs ``mlxfwreset`` or a cold reboot). :func:`firmware_prio` reads it;
without either tool, or when the query fails, the host cannot tell and says how to check. Port ``<n>`` is the PCI
function of the rail plus one (an mlx5 NIC has one physical function per port).

Kernel capability table (``KERNEL_CAPS``), read in the upstream source (torvalds/linux):

* Linux 5.4 (commit 5496197f9b08, "debugfs: Restrict debugfs when the kernel is locked down", merged with the
  lockdown LSM): ``fs/debugfs/file.c`` ``debugfs_locked_down()`` lets an open through only when the file's mode has
  no bit outside 0444, it is not opened for write and the real fops have no ioctl or mmap; anything else gets
  ``-EPERM`` when ``security_locked_down(LOCKDOWN_DEBUGFS)`` says so. ``fs/debugfs/inode.c`` ``debugfs_setattr()``
  refuses mode and owner changes under lockdown, so the mode cannot be relaxed. ``include/linux/security.h`` lists
  ``LOCKDOWN_DEBUGFS`` below ``LOCKDOWN_INTEGRITY_MAX``: both the ``integrity`` and the ``confidentiality`` mode
  refuse it. ``security/lockdown/lockdown.c`` shows the modes in ``/sys/kernel/security/lockdown``, the current one
  in brackets (``none [integrity] confidentiality``); distributions switch to ``integrity`` under UEFI Secure Boot.
* 2022 (Michal Suchanek, "debugfs: lockdown: Allow reading debugfs files that are not world readable"; stable
  backports; release not verified here): the check became ``(i_mode & 07777 & ~0444) == 0``, so read-only 0400
  files open. The mlx5 ``cc_params`` files are 0600 (``drivers/infiniband/hw/mlx5/cong.c``), so they stay refused on
  every kernel with lockdown.

Every kernel of the OS profiles (Debian 12: 6.1, Debian 13: 6.12, Ubuntu 22.04: 5.15, Ubuntu 24.04: 6.8, EL 9:
5.14) is 5.4 or later. A kernel before 5.4 has no upstream lockdown; when the lockdown file is present there all the
same (a distribution backport), the files are tried and a refused read is put down to lockdown.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx

PRIO_MASK_KEY = "ROCE_CC_PRIO_MASK_P%d"
FIRMWARE_TOOLS = ("mlxconfig", "mstconfig")
LOCKDOWN_FILE = "/sys/kernel/security/lockdown"
OSRELEASE_FILE = "/proc/sys/kernel/osrelease"
LOCKDOWN_MODES = ("none", "integrity", "confidentiality")
# modes that refuse LOCKDOWN_DEBUGFS (include/linux/security.h: below LOCKDOWN_INTEGRITY_MAX)
DEBUGFS_REFUSED_IN = ("integrity", "confidentiality")

KERNEL_CAPS = (
    {"since": (5, 4), "name": "lockdown_debugfs",
     "what": "under lockdown integrity/confidentiality, debugfs refuses to open any file that is writable or not "
             "read-only (cc_params: 0600) and refuses mode changes",
     "source": "fs/debugfs/file.c debugfs_locked_down(), fs/debugfs/inode.c debugfs_setattr(), "
               "include/linux/security.h LOCKDOWN_DEBUGFS, security/lockdown/lockdown.c; commit 5496197f9b08, "
               "Linux 5.4"},
)

_LOCKDOWN_RE = re.compile(r"(?:(?:\[[a-z]+\]|[a-z]+)\s+)*(?:\[[a-z]+\]|[a-z]+)")
_BDF_RE = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.([0-7])")
_MASK_RE = re.compile(r"(?:0x[0-9a-fA-F]{1,2}|[0-9]{1,3})")
_RELEASE_RE = re.compile(r"(\d+)\.(\d+)(?:[.\-+~_].*)?")
HOW_TO_CHECK = ("check: cat %s, mokutil --sb-state; manage the CNP class with lockdown none, or in the firmware "
                "(mlxconfig)" % LOCKDOWN_FILE)


def parse_release(text):
    """``uname -r`` text -> (major, minor), or None when it is not a kernel release."""
    m = _RELEASE_RE.fullmatch((text or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def has(cap, release):
    """True when the kernel ``release`` ((major, minor) or None: unknown) has capability ``cap`` of KERNEL_CAPS; an
    unknown release is believed to have it (the lockdown file, when present, is what decides)."""
    for c in KERNEL_CAPS:
        if c["name"] == cap:
            return release is None or tuple(release) >= c["since"]
    raise ValueError("unknown kernel capability %r" % cap)


def parse_lockdown(text):
    """``/sys/kernel/security/lockdown`` -> the current mode (the bracketed word); ValueError for anything else."""
    text = (text or "").strip()
    if not _LOCKDOWN_RE.fullmatch(text):
        raise ValueError("unexpected content %r in %s" % (text[:80], LOCKDOWN_FILE))
    current = [w[1:-1] for w in text.split() if w.startswith("[")]
    words = [w.strip("[]") for w in text.split()]
    if len(current) != 1 or any(w not in LOCKDOWN_MODES for w in words):
        raise ValueError("unexpected content %r in %s" % (text[:80], LOCKDOWN_FILE))
    return current[0]


def lockdown(sysroot):
    """(mode or None, note): the kernel's lockdown mode; None when the file is absent or unreadable (no lockdown LSM,
    securityfs not mounted), with the note saying which."""
    raw = sysroot.read(LOCKDOWN_FILE)
    if raw is None:
        return None, "%s cannot be read (no lockdown LSM, or securityfs not mounted)" % LOCKDOWN_FILE
    try:
        return parse_lockdown(raw), None
    except ValueError as e:
        return None, str(e)


def debugfs_refused(sysroot, read_failed=False):
    """The reason the kernel refuses the 0600 debugfs files (lockdown), or None when it does not. On a kernel without
    the upstream restriction (before 5.4) lockdown is the reason only for a read that failed (``read_failed``)."""
    mode, _note = lockdown(sysroot)
    if mode not in DEBUGFS_REFUSED_IN:
        return None
    release = parse_release(sysroot.read(OSRELEASE_FILE))
    if not (read_failed or has("lockdown_debugfs", release)):
        return None
    return ("kernel lockdown [%s] (%s; Secure Boot): debugfs refuses the 0600 mlx5 cc_params files "
            "(fs/debugfs/file.c, Linux 5.4+); %s" % (mode, LOCKDOWN_FILE, HOW_TO_CHECK))


# ----------------------------------------------------------------------------------------------
# firmware: DCQCN's per-priority enable (ROCE_CC_PRIO_MASK_P<port>)

def port_of(bdf):
    """The NIC port (1, 2) of a PCI function, or None when it is not function 0 or 1."""
    m = _BDF_RE.fullmatch(bdf or "")
    if not m or int(m.group(1)) > 1:
        return None
    return int(m.group(1)) + 1


def parse_prio_mask(text, key):
    """``mlxconfig -d <bdf> query <key>`` output -> the mask 0..255; ValueError when the key is missing or its value
    is not a mask."""
    raw = dcbx.parse_mlxconfig(text, keys=(key,)).get(key)
    if raw is None:
        raise ValueError("%s is not in the output of the query" % key)
    if not _MASK_RE.fullmatch(raw) or int(raw, 0) > 255:
        raise ValueError("%s has the value %r, expected a priority bit mask 0..255" % (key, raw))
    return int(raw, 0)


def how_to_check(bdf, key, priority):
    return ("check: mlxconfig -d %s query %s (bit %d must be set; mstconfig of mstflint works the same)"
            % (bdf or "<pci function>", key, priority))


def firmware_prio(run, which, bdf, priority):
    """Whether DCQCN is enabled on ``priority`` in the firmware of the rail's PCI function ``bdf``.

    ``run(argv) -> (rc, out, err)``, ``which(name) -> path or None``. Returns {"status": ok|not_checked, "enabled":
    bool or None, "mask", "key", "tool", "reason"} (reason: why not read and how to check; for a cleared bit, how
    to set it)."""
    port = port_of(bdf)
    key = PRIO_MASK_KEY % (port or 1)
    out = {"status": "not_checked", "enabled": None, "mask": None, "key": key, "tool": None, "reason": None}
    if port is None:
        out["reason"] = ("DCQCN's per-priority enable is firmware state the inbox driver does not show, and the NIC "
                         "port of %s is not known; %s" % (bdf or "the rail", how_to_check(bdf, "ROCE_CC_PRIO_MASK_P<port>",
                                                                                          priority)))
        return out
    tools = [(t, which(t)) for t in FIRMWARE_TOOLS]
    tools = [(t, path) for t, path in tools if path]
    if not tools:
        out["reason"] = ("DCQCN's per-priority enable is firmware state (%s) the inbox driver does not show, and "
                         "neither mlxconfig (NVIDIA MFT) nor mstconfig (mstflint) is installed; %s"
                         % (key, how_to_check(bdf, key, priority)))
        return out
    out["tool"], path = tools[0]
    try:
        rc, text, err = run([path, "-d", bdf, "query", key])
    except OSError as e:
        rc, text, err = None, "", str(e)
    if rc != 0:
        out["reason"] = ("%s -d %s query %s failed (rc=%s): %s; %s" % (
            out["tool"], bdf, key, rc, " ".join((err or text or "").split())[:160], how_to_check(bdf, key, priority)))
        return out
    try:
        mask = parse_prio_mask(text, key)
    except ValueError as e:
        out["reason"] = "%s: %s; %s" % (out["tool"], e, how_to_check(bdf, key, priority))
        return out
    out["mask"] = mask
    out["status"] = "ok"
    out["enabled"] = bool(mask >> priority & 1)
    if not out["enabled"]:
        out["reason"] = ("DCQCN is off for priority %d in the firmware (%s=%d): set it with %s -d %s set %s=%d, then "
                         "reset the firmware (mlxfwreset) or power-cycle" % (
                             priority, key, mask, out["tool"], bdf, key, mask | 1 << priority))
    return out
