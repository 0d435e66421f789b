# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Packages of the vendor NFS client build: Debian (ar + data.tar) and RPM contents, extraction,
and the check that a package lists its modules below ``/lib/modules/<kernel>/``.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import shutil
import tarfile

from ansible_collections.gpufabric.node.plugins.module_utils.kmod_common import KmodBuildError
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_source import _safe_member


# --------------------------------------------------------------------------- packages

def _ar_members(data):
    if data[:8] != b"!<arch>\n":
        raise KmodBuildError("not a Debian package (ar archive)")
    pos, out = 8, {}
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        name = hdr[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(hdr[48:58].decode("ascii").strip())
        out[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
    return out


def _deb_data_tar(path):
    with open(path, "rb") as f:
        members = _ar_members(f.read())
    for name, blob in members.items():
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise KmodBuildError("%s: zstd-compressed data needs dpkg-deb" % path)
            return tarfile.open(fileobj=io.BytesIO(blob), mode="r:*")
    raise KmodBuildError("%s has no data.tar member" % path)


def _norm_pkg_path(p):
    p = p.strip()
    if p.startswith("./"):
        p = p[1:]
    if not p.startswith("/"):
        p = "/" + p
    return p


def parse_dpkg_contents(out):
    """Paths from ``dpkg-deb -c`` (tar -tv lines); links as ``path -> target`` keep the path."""
    paths = []
    for line in out.splitlines():
        f = line.split(None, 5)
        if len(f) < 6:
            continue
        p = f[5].split(" -> ")[0].split(" link to ")[0]
        paths.append(_norm_pkg_path(p))
    return paths


def package_contents(pkg, run=None, tools=None):
    tools = tools or {}
    if pkg.endswith(".deb"):
        if run and tools.get("dpkg-deb"):
            rc, out, err = run([tools["dpkg-deb"], "-c", pkg])
            if rc != 0:
                raise KmodBuildError("dpkg-deb -c %s failed: %s" % (pkg, err.strip()))
            return parse_dpkg_contents(out)
        with _deb_data_tar(pkg) as tf:
            return [_norm_pkg_path(m.name) for m in tf.getmembers()]
    if pkg.endswith(".rpm"):
        if not (run and tools.get("rpm")):
            raise KmodBuildError("listing %s needs the rpm tool" % pkg)
        rc, out, err = run([tools["rpm"], "-qlp", pkg])
        if rc != 0:
            raise KmodBuildError("rpm -qlp %s failed: %s" % (pkg, err.strip()))
        return [_norm_pkg_path(x) for x in out.splitlines() if x.startswith("/")]
    raise KmodBuildError("unknown package type: %s" % pkg)


def extract_package(pkg, dest, run=None, tools=None):
    tools = tools or {}
    os.makedirs(dest, exist_ok=True)
    if pkg.endswith(".deb"):
        if run and tools.get("dpkg-deb"):
            rc, _out, err = run([tools["dpkg-deb"], "-x", pkg, dest])
            if rc != 0:
                raise KmodBuildError("dpkg-deb -x %s failed: %s" % (pkg, err.strip()))
            return dest
        with _deb_data_tar(pkg) as tf:
            for m in tf.getmembers():
                _safe_member(m, os.path.abspath(dest))
                if m.isfile() or m.isdir():
                    tf.extract(m, dest, set_attrs=False)
        return dest
    if pkg.endswith(".rpm"):
        if not (run and tools.get("rpm2archive")):
            raise KmodBuildError("unpacking %s needs rpm2archive" % pkg)
        tmp = os.path.join(dest, ".pkg.rpm")
        shutil.copy2(pkg, tmp)
        rc, _out, err = run([tools["rpm2archive"], tmp])
        if rc != 0:
            raise KmodBuildError("rpm2archive %s failed: %s" % (pkg, err.strip()))
        with tarfile.open(tmp + ".tgz") as tf:
            for m in tf.getmembers():
                _safe_member(m, os.path.abspath(dest))
                if m.isfile() or m.isdir():
                    tf.extract(m, dest, set_attrs=False)
        os.unlink(tmp)
        os.unlink(tmp + ".tgz")
        return dest
    raise KmodBuildError("unknown package type: %s" % pkg)


def verify_package_lists(pkg_paths, modules_rel, kver):
    """Problems when the package does not list every module below /lib/modules/<kver>/."""
    problems = []
    listed = set(pkg_paths)
    for rel in modules_rel:
        if rel not in listed:
            problems.append("package does not list %s" % rel)
        if not rel.startswith("/lib/modules/%s/" % kver):
            problems.append("%s is not installed below /lib/modules/%s/" % (rel, kver))
    return problems
