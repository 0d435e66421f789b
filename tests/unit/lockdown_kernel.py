# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for kernel lockdown's rule on debugfs, at the Sysroot boundary the collection reads through.

Modelled on fs/debugfs/file.c ``debugfs_locked_down()`` (Linux 5.4+): while ``/sys/kernel/security/lockdown``
shows ``[integrity]`` or ``[confidentiality]``, opening a debugfs file fails with EPERM unless its mode has no bit
outside 0444 and it is opened read-only. Running the tests as root cannot make a plain file refuse an open, so the
tree's file modes decide here as the inode's do in the kernel.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DEBUGFS = "/sys/kernel/debug/"
LOCKDOWN = "/sys/kernel/security/lockdown"


def write_lockdown(root, mode):
    """The lockdown file of a tree with ``mode`` the current one (None: no lockdown LSM, no file)."""
    path = os.path.join(root, LOCKDOWN.lstrip("/"))
    if mode is None:
        if os.path.exists(path):
            os.remove(path)
        return
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write(" ".join("[%s]" % m if m == mode else m for m in ("none", "integrity", "confidentiality")) + "\n")


class LockedDownSysroot(Sysroot):
    """A Sysroot whose debugfs behaves as the kernel's under the tree's lockdown mode."""

    def _refused(self, p, write):
        if not p.startswith(DEBUGFS):
            return False
        text = Sysroot.read(self, LOCKDOWN) or ""
        if "[integrity]" not in text and "[confidentiality]" not in text:
            return False
        try:
            mode = os.stat(self.path(p)).st_mode & 0o7777
        except OSError:
            return False
        return write or (mode & ~0o444) != 0

    def read(self, p, default=None):
        if self._refused(p, False):
            return default
        return Sysroot.read(self, p, default)

    def read_raw(self, p, default=None):
        if self._refused(p, False):
            return default
        return Sysroot.read_raw(self, p, default)

    def write_attr(self, p, value):
        if self._refused(p, True):
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), self.path(p))
        return Sysroot.write_attr(self, p, value)
