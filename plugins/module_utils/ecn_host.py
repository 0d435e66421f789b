# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host can tell about ECN/DCQCN beyond the driver's own controls (``ecn.py``): whether kernel lockdown
keeps debugfs (the inbox mlx5 ``cc_params``) closed.

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
