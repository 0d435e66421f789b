# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Source stage of the vendor NFS client build: verify the pinned tarball, extract it safely on a
case-sensitive directory, report case-colliding names.

Safe extraction (:func:`safe_extract`, used for the source tarball and for the packages the build produced):

* every member name and link target is checked before anything is written: no absolute path, no ``..``, no
  control character, no device node or FIFO;
* where the Python has PEP 706 extraction filters (3.12+, and the backports in 3.8.17+, 3.9.17+, 3.10.12+,
  3.11.4+: ``hasattr(tarfile, "data_filter")``) the ``data`` filter runs on every member (it strips setuid, setgid
  and sticky bits and group/other write, drops ownership, refuses links that leave the tree, judged with
  ``os.path.realpath`` against what is already on disk: CPython ``Lib/tarfile.py`` ``_get_filtered_attrs``);
* on both paths, right before a member is written, its path and link target are resolved component by component
  against what is already on disk below the real path of the destination (``lstat``/``readlink``, at most 40
  symbolic links like the kernel's ``MAXSYMLINKS``): a chain of symbolic links (``a/l -> ..``, ``a/l/e0 -> ..``,
  ... then a file) cannot lead out. This also covers Pythons whose ``realpath`` gave up on over-long paths and
  answered lexically (CVE-2025-4517, fixed in 3.11.13/3.12.11/3.13.4 with ``strict=os.path.ALLOW_MISSING``).
  A member never replaces an existing entry (only a directory may repeat), so a link checked once cannot be
  re-pointed later. A hard link must name a regular file already extracted (a dangling one is an error naming
  the member, not tarfile's ``KeyError``);
* without the filter the same policy is applied by hand: mode ``& 0o755`` (owner read/write kept), ownership
  to the extracting user (numeric, never the archive's names), links created only after the check above;
* everything lands in a fresh private directory (``mkdtemp``, mode 0700) next to the destination, is checked
  again as a whole (no link resolving outside, no setuid/setgid/sticky bit, only files, directories and links),
  and is renamed into place only when the whole extraction succeeded: a failed extraction leaves nothing behind.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import errno
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (
    KmodBuildError, sha256_file, validate_sha256)


def verify_source(path, expected):
    """Raise unless the file's sha256 equals ``expected``; returns the digest."""
    expected = validate_sha256(expected)
    if not os.path.isfile(path):
        raise KmodBuildError("source tarball %s does not exist" % path)
    actual = sha256_file(path)
    if actual != expected:
        raise KmodBuildError("source tarball %s has sha256 %s, expected %s: refusing to build it"
                             % (path, actual, expected), actual=actual, expected=expected)
    return actual


# --------------------------------------------------------------------------- source extraction

def case_collisions(names):
    """Groups of member paths that are one path on a case-insensitive filesystem (``Makefile``/``makefile``)."""
    groups = {}
    for n in names:
        norm = n.strip("/")
        if norm.startswith("./"):
            norm = norm[2:]
        if not norm or norm == ".":
            continue
        groups.setdefault(norm.lower(), set()).add(norm)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def is_case_sensitive(directory):
    """True when ``directory`` tells ``probe`` and ``PROBE`` apart."""
    d = tempfile.mkdtemp(prefix=".gpufabric-case-", dir=directory)
    try:
        with open(os.path.join(d, "probe"), "w") as f:
            f.write("lower")
        return not os.path.exists(os.path.join(d, "PROBE"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# PEP 706 filters (3.12+ and the security backports): https://peps.python.org/pep-0706/
HAS_DATA_FILTER = hasattr(tarfile, "data_filter")
MAX_SYMLINK_HOPS = 40  # the kernel's MAXSYMLINKS (include/linux/namei.h)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class _Refused(Exception):
    """A member breaks the extraction policy; the message completes "<what> member <name> ..."."""

    def __init__(self, reason, name=None):
        Exception.__init__(self, reason)
        self.name = name


def _member_policy(member):
    """Lexical checks, before anything is written: raises _Refused."""
    for label, value in (("name", member.name), ("link target", member.linkname or "")):
        if _CONTROL_RE.search(value):
            raise _Refused("has a control character in its %s" % label)
    if member.name.startswith("/"):
        raise _Refused("is an absolute path")
    if ".." in member.name.split("/"):
        raise _Refused("climbs out of the extraction directory with '..'")
    if member.isdev() or member.isfifo():
        raise _Refused("is a %s: a source tree has no special files" % (
            "FIFO" if member.isfifo() else "device node"))
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise _Refused("has tar type %r, which is not a file, directory or link" % member.type)
    if member.issym() or member.islnk():
        if not member.linkname:
            raise _Refused("is a link without a target")
        if member.linkname.startswith("/"):
            raise _Refused("links to the absolute path %r" % member.linkname)


def _resolve(root, rel, follow_last=True):
    """Components below ``root`` (a real path) that ``rel`` names, following the symbolic links on disk one by
    one; raises _Refused when the walk leaves ``root``. Components that do not exist yet are taken literally
    (extraction creates them as directories)."""
    parts = []
    pending = [c for c in rel.split("/") if c not in ("", ".")]
    hops = 0
    while pending:
        c = pending.pop(0)
        if c == "..":
            if not parts:
                raise _Refused("resolves outside the extraction directory")
            parts.pop()
            continue
        candidate = parts + [c]
        try:
            st = os.lstat(os.path.join(root, *candidate))
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                parts = candidate
                continue
            raise _Refused("cannot be resolved: %s" % e.strerror)
        if stat.S_ISLNK(st.st_mode) and (pending or follow_last):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise _Refused("goes through more than %d symbolic links" % MAX_SYMLINK_HOPS)
            target = os.readlink(os.path.join(root, *candidate))
            if target.startswith("/"):
                raise _Refused("goes through %s, an absolute symbolic link" % "/".join(candidate))
            pending = [x for x in target.split("/") if x not in ("", ".")] + pending
            continue
        parts = candidate
    return parts


def _check_on_disk(member, root):
    """Checks against what is already extracted below ``root``, right before ``member`` is written."""
    try:
        _check_member_on_disk(member, root)
    except _Refused as e:
        raise _Refused(str(e), member.name)


def _check_member_on_disk(member, root):
    name = member.name.strip("/")
    here = os.path.join(root, name) if name not in ("", ".") else root
    if os.path.lexists(here) and not (member.isdir() and os.path.isdir(here) and not os.path.islink(here)):
        raise _Refused("would replace %s already extracted (only a directory may appear twice)" % (
            "a symbolic link" if os.path.islink(here) else "an entry"))
    parent = _resolve(root, os.path.dirname(name))
    if member.issym():
        _resolve(root, "/".join(parent + [member.linkname]))
    elif member.islnk():
        target = os.path.join(root, *_resolve(root, member.linkname))
        if not os.path.lexists(target):
            raise _Refused("is a hard link to %r, which is not in the extracted tree" % member.linkname)
        if not stat.S_ISREG(os.lstat(target).st_mode):
            raise _Refused("is a hard link to %r, which is not a regular file" % member.linkname)


def _sanitized(member):
    """What the fallback extracts: no setuid/setgid/sticky, no group/other write, owner can read and write
    (and enter directories), owned by the extracting user."""
    m = copy.copy(member)
    mode = member.mode & 0o755
    if m.isdir():
        mode |= 0o700
    elif m.isfile() or m.islnk():
        if not mode & 0o100:
            mode &= ~0o111
        mode |= 0o600
    m.mode = mode
    m.uid, m.gid = os.geteuid(), os.getegid()
    m.uname = m.gname = ""
    return m


def _check_tree(root):
    """The finished tree: links resolve inside it, no special file, no setuid/setgid/sticky bit."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                try:
                    _resolve(root, rel)
                except _Refused as e:
                    raise _Refused("is a symbolic link that %s" % e, rel)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise _Refused("is not a file, directory or link", rel)
            elif st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
                raise _Refused("kept a setuid, setgid or sticky bit", rel)


def _extract_members(tf, members, root, use_filter):
    if use_filter:
        def strict_data_filter(member, path):
            filtered = tarfile.data_filter(member, path)
            if filtered is not None:
                _check_on_disk(filtered, root)
            return filtered
        tf.extractall(root, members=members, numeric_owner=True, filter=strict_data_filter)
        return
    kwargs = {"filter": "fully_trusted"} if HAS_DATA_FILTER else {}  # the checks are ours: no other default
    for m in members:
        _check_on_disk(m, root)
        safe = _sanitized(m)
        tf.extract(safe, root, set_attrs=not safe.issym(), numeric_owner=True, **kwargs)


def safe_extract(tarball, dest, what="source tarball", use_filter=None, case_sensitive=False, files_only=False):
    """Extract every member of ``tarball`` (a path or an open TarFile) into ``dest``, which must not exist yet
    (an empty directory is replaced). ``use_filter`` None picks the PEP 706 ``data`` filter when the Python has it;
    False forces the hand-written policy. ``case_sensitive`` refuses a case-insensitive destination.
    ``files_only`` unpacks regular files and directories only (links and special files are skipped, for the
    inspection of a package). Returns the member names. Raises KmodBuildError naming the member; nothing is left
    behind then."""
    use_filter = HAS_DATA_FILTER if use_filter is None else bool(use_filter)
    if use_filter and not HAS_DATA_FILTER:
        raise KmodBuildError("this Python (%s) has no tarfile extraction filters" % sys.version.split()[0])
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    if os.path.isdir(dest) and not os.path.islink(dest) and not os.listdir(dest):
        os.rmdir(dest)
    elif os.path.lexists(dest):
        raise KmodBuildError("extraction directory %s already exists" % dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    own = not isinstance(tarball, tarfile.TarFile)
    try:
        tf = tarfile.open(tarball, "r:*") if own else tarball
    except (tarfile.TarError, OSError, EOFError) as e:
        raise KmodBuildError("cannot read %s %s: %s" % (what, tarball, e))
    tmp = tempfile.mkdtemp(prefix=".extract-", dir=parent)
    try:
        if case_sensitive and not is_case_sensitive(tmp):
            raise KmodBuildError("extraction directory %s is on a case-insensitive filesystem: the source's "
                                 "case-colliding names would be merged; use a case-sensitive scratch directory"
                                 % parent)
        try:
            members = tf.getmembers()
        except (tarfile.TarError, OSError, EOFError) as e:
            raise KmodBuildError("cannot read %s: %s" % (what, e))
        names = [m.name for m in members]
        try:
            if files_only:
                members = [m for m in members if m.isfile() or m.isdir()]
            for m in members:
                try:
                    _member_policy(m)
                except _Refused as e:
                    raise _Refused(str(e), m.name)
            root = os.path.realpath(tmp)
            tf.errorlevel = 2  # chmod/utime failures are errors too
            _extract_members(tf, members, root, use_filter)
            _check_tree(root)
        except _Refused as e:
            raise KmodBuildError("%s member %r %s: refusing to extract it" % (what, e.name, e), member=e.name)
        except tarfile.FilterError as e:
            raise KmodBuildError("%s member %r refused by the tarfile data filter: %s" % (
                what, e.tarinfo.name, e), member=e.tarinfo.name)
        except KeyError as e:
            raise KmodBuildError("%s has a hard link whose target is missing: %s" % (what, e.args[0]))
        except (tarfile.TarError, OSError, EOFError) as e:
            raise KmodBuildError("extracting %s failed: %s" % (what, e))
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if own:
            tf.close()
    return names


def check_tree(root, what):
    """Raise KmodBuildError unless the tree below ``root`` only holds files, directories and links that stay
    inside it, without setuid/setgid/sticky bits (for trees another tool unpacked)."""
    try:
        _check_tree(os.path.realpath(root))
    except _Refused as e:
        raise KmodBuildError("%s member %r %s: refusing to use it" % (what, e.name, e), member=e.name)


def extract_source(tarball, dest, use_filter=None):
    """Extract the source tarball into ``dest`` (created; must not exist or be empty) on a case-sensitive
    filesystem; returns (top directory, collisions).

    Fails when ``dest`` is case-insensitive: the vendor tarball's ``Makefile``/``makefile`` pair would collapse into
    one file and the build would silently produce nothing.
    """
    dest = os.path.abspath(dest)
    names = safe_extract(tarball, dest, "source tarball", use_filter=use_filter, case_sensitive=True)
    collisions = case_collisions(names)
    entries = os.listdir(dest)
    top = dest
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0])) \
            and not os.path.islink(os.path.join(dest, entries[0])):
        top = os.path.join(dest, entries[0])
    return top, collisions
