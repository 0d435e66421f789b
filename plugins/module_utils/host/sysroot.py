# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every kernel-interface and configuration path of gpufabric goes through a Sysroot.

On a real host the root is ``/``. Tests and the simulated node point it at a tree that
looks like a host (``sys/``, ``proc/``, ``etc/``...). The root comes from the caller or,
when none is given, from the environment variable ``GPUFABRIC_SYSROOT`` (the simulated
node's login sets it), so modules and the boot-time applier need no test-only option.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import stat
import tempfile
import time

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
# the collection's atomic writers' temp files: mkstemp(prefix=TEMP_PREFIX) adds 8 of [a-z0-9_]
TEMP_PREFIX = ".gpufabric."
_TEMP_NAME = re.compile(r"\.gpufabric\.[a-z0-9_]{8}")
# a temp file this old belongs to no live writer (a write takes milliseconds): a kill between fsync and rename
# left it, and the next atomic write into the directory removes it
STALE_TEMP_S = 60


def remove_stale_temps(directory, now=None):
    """Remove the collection's own temp files (name ``.gpufabric.`` + 8 characters, a regular file of this user,
    older than ``STALE_TEMP_S``) from ``directory``; the names removed. Nothing else is touched."""
    now = time.time() if now is None else now
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in sorted(names):
        if not _TEMP_NAME.fullmatch(name):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > STALE_TEMP_S:
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue
    return removed


class Sysroot(object):
    """Resolve absolute host paths (``/sys/...``) below an injectable root."""

    def __init__(self, root=None):
        if root is None:
            root = os.environ.get(SYSROOT_ENV) or "/"
        self.root = os.path.abspath(root)

    def __repr__(self):
        return "Sysroot(%r)" % self.root

    @property
    def is_host(self):
        return self.root == "/"

    def shared(self, key, make):
        """What ``make()`` derives from this tree; a live tree may change between two calls, so nothing is kept
        (``SnapshotSysroot`` keeps one per ``key``)."""
        return make()

    def path(self, *parts):
        """Join host-absolute path parts below the root: path('/sys', 'bus') -> <root>/sys/bus."""
        joined = os.path.join(*parts) if parts else "/"
        rel = joined.lstrip("/")
        if not rel:
            return self.root
        return os.path.join(self.root, rel)

    def unroot(self, real):
        """Turn a real path below the root back into the host-absolute form."""
        real = os.path.abspath(real)
        if self.root == "/":
            return real
        if real == self.root:
            return "/"
        if real.startswith(self.root + os.sep):
            return real[len(self.root):]
        return real

    def exists(self, p):
        return os.path.exists(self.path(p))

    def isdir(self, p):
        return os.path.isdir(self.path(p))

    def islink(self, p):
        return os.path.islink(self.path(p))

    def listdir(self, p):
        """Sorted entries of a directory; [] when it does not exist or cannot be read."""
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def realpath(self, p):
        """Host-absolute canonical path (symlinks resolved inside the root)."""
        return self.unroot(os.path.realpath(self.path(p)))

    def readlink_name(self, p):
        """Basename of a symlink's target (e.g. the driver name from .../driver), or None."""
        try:
            return os.path.basename(os.readlink(self.path(p)).rstrip("/"))
        except OSError:
            return None

    def read_bytes(self, p, size=-1):
        with open(self.path(p), "rb") as f:
            return f.read(size)

    def read(self, p, default=None):
        """Text content stripped of surrounding whitespace; ``default`` when unreadable."""
        try:
            with open(self.path(p), "r") as f:
                return f.read().strip()
        except (OSError, IOError, UnicodeDecodeError):
            return default

    def read_raw(self, p, default=None):
        """Text content as is; ``default`` when unreadable."""
        try:
            with open(self.path(p), "r") as f:
                return f.read()
        except (OSError, IOError, UnicodeDecodeError):
            return default

    def write_attr(self, p, value):
        """Write a kernel attribute (sysfs/procfs/configfs): one write, no temp file."""
        data = value if isinstance(value, bytes) else str(value).encode("ascii")
        with open(self.path(p), "wb", 0) as f:
            f.write(data)

    def write_at(self, p, offset, data):
        """Write bytes at an offset of an existing file (PCI config space)."""
        fd = os.open(self.path(p), os.O_WRONLY)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            os.write(fd, data)
        finally:
            os.close(fd)

    def mkdir(self, p, mode=0o755):
        try:
            os.mkdir(self.path(p), mode)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise

    def makedirs(self, p, mode=0o755):
        real = self.path(p)
        if not os.path.isdir(real):
            os.makedirs(real, mode)

    def write_file_atomic(self, p, content, mode=0o644):
        """Write a regular file atomically: temp file in the same directory, fsync, rename."""
        real = self.path(p)
        d = os.path.dirname(real)
        if not os.path.isdir(d):
            os.makedirs(d, 0o755)
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        remove_stale_temps(d)
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.rename(tmp, real)
        except Exception:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def remove(self, p):
        try:
            os.unlink(self.path(p))
            return True
        except OSError as e:
            if e.errno == errno.ENOENT:
                return False
            raise


class SnapshotSysroot(Sysroot):
    """``inner`` with its read-only answers kept: the view of one read-only check (``node_check.evaluate``), which
    walks the same sysfs paths from several concerns (discovery, then the rails of ``dcb``, ``mtu``, ``nccl``,
    ``rdma_cm``, the PCIe paths of ``acs`` and ``pcie_link``) while nothing it reads changes.

    ``exists``, ``isdir``, ``islink``, ``listdir``, ``realpath``, ``readlink_name``, ``read`` and ``read_raw`` ask
    ``inner`` once per path; everything else goes to ``inner`` as it is, and any write through this view forgets
    every kept answer."""

    def __init__(self, inner):
        Sysroot.__init__(self, inner.root)
        self.inner = inner
        self._kept = {}

    def __getattr__(self, name):   # only for what Sysroot lacks: the attributes of an inner subclass
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def shared(self, key, make):
        """One ``make()`` per ``key`` for this read-only view (a walk of the PCI tree that discovery, the ``acs``
        plan and the PCIe link check each need): a write through the view forgets them with every kept answer."""
        key = ("shared", key)
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    def _ask(self, method, p):
        key = (method, p)
        if key not in self._kept:
            self._kept[key] = getattr(self.inner, method)(p)
        return self._kept[key]

    def path(self, *parts):
        return self.inner.path(*parts)

    def unroot(self, real):
        return self.inner.unroot(real)

    def exists(self, p):
        return self._ask("exists", p)

    def isdir(self, p):
        return self._ask("isdir", p)

    def islink(self, p):
        return self._ask("islink", p)

    def listdir(self, p):
        return list(self._ask("listdir", p))

    def realpath(self, p):
        return self._ask("realpath", p)

    def readlink_name(self, p):
        return self._ask("readlink_name", p)

    def read(self, p, default=None):
        value = self._ask("read", p)
        return default if value is None else value

    def read_raw(self, p, default=None):
        value = self._ask("read_raw", p)
        return default if value is None else value

    def read_bytes(self, p, size=-1):
        return self.inner.read_bytes(p, size)

    def _write(self, method, *args):
        self._kept.clear()
        return getattr(self.inner, method)(*args)

    def write_attr(self, p, value):
        return self._write("write_attr", p, value)

    def write_at(self, p, offset, data):
        return self._write("write_at", p, offset, data)

    def mkdir(self, p, mode=0o755):
        return self._write("mkdir", p, mode)

    def makedirs(self, p, mode=0o755):
        return self._write("makedirs", p, mode)

    def write_file_atomic(self, p, content, mode=0o644):
        return self._write("write_file_atomic", p, content, mode)

    def remove(self, p):
        return self._write("remove", p)
