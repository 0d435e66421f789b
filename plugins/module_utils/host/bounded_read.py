# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader for files root reads from a place others can write (a textfile directory, a job's log).

:func:`read_regular` opens the path with ``O_NOFOLLOW`` (a symlink as the last component is refused, so a link to
``/dev/zero`` or to a root-only file is never followed) and ``O_NONBLOCK`` (opening a FIFO nobody writes does not
hang), then ``fstat``\\ s the open file: anything but a regular file (FIFO, socket, device node, directory) is refused
before a byte is read. A file larger than ``limit`` is refused from its size, and the read itself stops after
``limit + 1`` bytes, so a file that grows while it is read cannot take more memory than that either. Every refusal is a
:class:`BoundedReadError`, an ``OSError`` with an errno (``ELOOP``, ``EINVAL`` for a file that is not regular, ``EFBIG``), so callers
that already treat an unreadable file as absent keep doing so.

Every component of the path is opened in turn, each relative to the one before (``openat`` with ``O_NOFOLLOW``),
so no component can be swapped while it is walked. A symbolic link on the way is followed only where it sits in a
directory that no one but root (or the reader itself) can write: ``/var/run -> /run`` is followed; a link in
``/tmp`` or in a user's directory is refused (``ELOOP``), as the kernel's ``protected_symlinks`` would for a sticky
directory, but for every directory others can write. At most 40 links are followed, as the kernel does.
Plain Python, no Ansible: part of the node payload.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

# no root-run reader takes more than this from a file others can write (issue 21: 64 MiB at most)
MAX_LIMIT = 64 << 20
# the collection's own records under /etc/gpufabric (acs.json, routing.json, vendor_nfs.json) are a few KiB; one
# larger than this is not one the collection wrote
RECORD_LIMIT = 4 << 20
_CHUNK = 1 << 16
_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
          | getattr(os, "O_NOCTTY", 0))
_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_PATH", 0) | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
# the kernel's own limit on the links one lookup follows (MAXSYMLINKS, include/linux/namei.h, since 4.2)
MAX_LINKS = 40
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class BoundedReadError(OSError):
    """A file refused by :func:`read_regular` (not a regular file, a symlink, or too large)."""


def _kind(mode):
    for test, word in _KINDS:
        if test(mode):
            return word
    return "not a regular file"


def _safe_dir(fd):
    """True when only root (or this process's user) can change the entries of the directory ``fd``."""
    st = os.fstat(fd)
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _reopen(fd, name, flags, path):
    """``name`` opened relative to the directory ``fd``; an OSError names the whole ``path``."""
    try:
        return os.open(name, flags, dir_fd=fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path)


def open_walked(path):
    """A file descriptor of ``path`` (opened with the flags of :func:`read_regular`), its components walked one by
    one from ``/`` (see the module's text). BoundedReadError (``ELOOP``) for a link that is not followed."""
    parts = os.path.abspath(path).split("/")
    fd = os.open("/", _DIR_FLAGS)
    links = 0
    try:
        while parts:
            name = parts.pop(0)
            if name in ("", "."):
                continue
            last = not [p for p in parts if p not in ("", ".")]
            try:
                new = os.open(name, _FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise OSError(e.errno, e.strerror, path)
                try:
                    target = os.readlink(name, dir_fd=fd)
                except OSError:
                    raise OSError(e.errno, e.strerror, path)
                if last:
                    raise BoundedReadError(errno.ELOOP, "%s is a symbolic link: not followed" % path)
                if not _safe_dir(fd):
                    raise BoundedReadError(errno.ELOOP, "%s: %s is a symbolic link in a directory others can write: "
                                                        "not followed" % (path, name))
                links += 1
                if links > MAX_LINKS:
                    raise BoundedReadError(errno.ELOOP, "%s: more than %d symbolic links" % (path, MAX_LINKS))
                if target.startswith("/"):
                    os.close(fd)
                    fd = -1
                    fd = os.open("/", _DIR_FLAGS)
                parts = target.split("/") + parts
                continue
            os.close(fd)
            fd = new
        if fd >= 0 and not path.strip("/"):
            new = _reopen(fd, ".", _FLAGS, path)
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def read_regular(path, limit, with_stat=False):
    """The bytes of the regular file ``path`` (at most ``limit`` bytes), or ``(bytes, os.stat_result)`` with
    ``with_stat``. Raises :class:`BoundedReadError` for a symlink, a non-regular file or one over ``limit``, and the
    usual ``OSError`` (``ENOENT``, ``EACCES``...) otherwise."""
    if not 0 <= limit <= MAX_LIMIT:
        raise ValueError("read limit %r is outside 0..%d" % (limit, MAX_LIMIT))
    fd = open_walked(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BoundedReadError(errno.EINVAL, "%s is %s, not a regular file: not read" % (path, _kind(st.st_mode)))
        if st.st_size > limit:
            raise BoundedReadError(errno.EFBIG, "%s is %d bytes, over the %d bytes read from it" % (
                path, st.st_size, limit))
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise BoundedReadError(errno.EFBIG, "%s grew over the %d bytes read from it" % (path, limit))
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return (data, st) if with_stat else data


def read_text(path, limit=RECORD_LIMIT):
    """The UTF-8 text of the regular file ``path`` (see :func:`read_regular`), None when it does not exist.
    Raises :class:`BoundedReadError` or ``OSError`` when it cannot be read, ``UnicodeDecodeError`` (a
    ``ValueError``) when it is not UTF-8."""
    try:
        data = read_regular(path, limit)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        raise
    return data.decode("utf-8")
