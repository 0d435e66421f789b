# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Source stage of the vendor NFS client build: verify the pinned tarball, extract it safely on a
case-sensitive directory, report case-colliding names.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tarfile
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.kmod_common import (
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


def _safe_member(member, dest):
    name = member.name
    if name.startswith("/") or ".." in name.split("/"):
        raise KmodBuildError("source tarball member %r escapes the extraction directory" % name)
    if member.isdev() or member.isfifo():
        raise KmodBuildError("source tarball member %r is a device or fifo" % name)
    if member.issym() or member.islnk():
        target = member.linkname
        base = os.path.dirname(name) if member.issym() else ""
        resolved = os.path.normpath(os.path.join(dest, base, target))
        if target.startswith("/") or not (resolved == dest or resolved.startswith(dest + os.sep)):
            raise KmodBuildError("source tarball link %r -> %r points outside the tree" % (name, target))


def extract_source(tarball, dest):
    """Extract on a case-sensitive directory; returns (top directory, collisions).

    Fails when ``dest`` is case-insensitive: the vendor tarball's ``Makefile``/``makefile`` pair would collapse into
    one file and the build would silently produce nothing.
    """
    if not os.path.isdir(dest):
        os.makedirs(dest, 0o755)
    dest = os.path.abspath(dest)
    if not is_case_sensitive(dest):
        raise KmodBuildError("extraction directory %s is on a case-insensitive filesystem: the source's "
                             "case-colliding names would be merged; use a case-sensitive scratch directory" % dest)
    try:
        tf = tarfile.open(tarball, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise KmodBuildError("cannot read source tarball %s: %s" % (tarball, e))
    with tf:
        members = tf.getmembers()
        for m in members:
            _safe_member(m, dest)
        collisions = case_collisions(m.name for m in members)
        for m in members:
            m.mode = (m.mode | 0o600) & 0o7755
            m.uid = m.gid = 0
            m.uname = m.gname = "root"
            tf.extract(m, dest, set_attrs=not m.issym())
    entries = [e for e in os.listdir(dest) if not e.startswith(".gpufabric-case-")]
    top = dest
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0])):
        top = os.path.join(dest, entries[0])
    return top, collisions
