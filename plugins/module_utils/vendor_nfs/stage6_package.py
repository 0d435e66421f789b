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
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import KmodBuildError
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import Codecs
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage1_source import check_tree, safe_extract


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


def _deb_data_tar(path, codecs=None):
    """The package's data.tar as an open TarFile: gzip, xz, bzip2 or none through tarfile, zstd (dpkg's default on
    Ubuntu since 21.10) through :class:`kmod_compress.Codecs`."""
    with open(path, "rb") as f:
        members = _ar_members(f.read())
    for name, blob in members.items():
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                blob = (codecs or Codecs()).decompress(blob, what="%s %s" % (path, name), kind="zstd")
            try:
                return tarfile.open(fileobj=io.BytesIO(blob), mode="r:*")
            except tarfile.TarError as e:
                raise KmodBuildError("%s: %s is not readable: %s" % (path, name, e))
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


def package_contents(pkg, run=None, tools=None, codecs=None):
    tools = tools or {}
    if pkg.endswith(".deb"):
        if run and tools.get("dpkg-deb"):
            rc, out, err = run([tools["dpkg-deb"], "-c", pkg])
            if rc != 0:
                raise KmodBuildError("dpkg-deb -c %s failed: %s" % (pkg, err.strip()))
            return parse_dpkg_contents(out)
        with _deb_data_tar(pkg, codecs or Codecs(run, tools)) as tf:
            return [_norm_pkg_path(m.name) for m in tf.getmembers()]
    if pkg.endswith(".rpm"):
        if not (run and tools.get("rpm")):
            raise KmodBuildError("listing %s needs the rpm tool" % pkg)
        rc, out, err = run([tools["rpm"], "-qlp", pkg])
        if rc != 0:
            raise KmodBuildError("rpm -qlp %s failed: %s" % (pkg, err.strip()))
        return [_norm_pkg_path(x) for x in out.splitlines() if x.startswith("/")]
    raise KmodBuildError("unknown package type: %s" % pkg)


def extract_package(pkg, dest, run=None, tools=None, use_filter=None, codecs=None):
    """Unpack the files of a package into ``dest`` (must not exist) for inspection, through the same safe
    extraction as the source (:func:`kmod_source.safe_extract`); links and special files are not unpacked
    (a module is a regular file). Debian packages are read in Python; ``dpkg-deb -x`` (into a private directory,
    checked like an extraction) only when Python cannot read the data member."""
    tools = tools or {}
    what = "package %s" % os.path.basename(pkg)
    if pkg.endswith(".deb"):
        try:
            tf = _deb_data_tar(pkg, codecs or Codecs(run, tools))
        except KmodBuildError:
            if not (run and tools.get("dpkg-deb")):
                raise
            return _dpkg_deb_extract(run, tools, pkg, dest, what)
        with tf:
            safe_extract(tf, dest, what, use_filter=use_filter, files_only=True)
        return dest
    if pkg.endswith(".rpm"):
        if not (run and tools.get("rpm2archive")):
            raise KmodBuildError("unpacking %s needs rpm2archive" % pkg)
        parent = os.path.dirname(os.path.abspath(dest))
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        scratch = tempfile.mkdtemp(prefix=".rpm-", dir=parent)
        try:
            tmp = os.path.join(scratch, "pkg.rpm")
            shutil.copy2(pkg, tmp)
            rc, _out, err = run([tools["rpm2archive"], tmp])
            if rc != 0:
                raise KmodBuildError("rpm2archive %s failed: %s" % (pkg, err.strip()))
            safe_extract(tmp + ".tgz", dest, what, use_filter=use_filter, files_only=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return dest
    raise KmodBuildError("unknown package type: %s" % pkg)


def _dpkg_deb_extract(run, tools, pkg, dest, what):
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        raise KmodBuildError("extraction directory %s already exists" % dest)
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    tmp = tempfile.mkdtemp(prefix=".extract-", dir=parent)
    try:
        rc, _out, err = run([tools["dpkg-deb"], "-x", pkg, tmp])
        if rc != 0:
            raise KmodBuildError("dpkg-deb -x %s failed: %s" % (pkg, err.strip()))
        check_tree(tmp, what)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


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
