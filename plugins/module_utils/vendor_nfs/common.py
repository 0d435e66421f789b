# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared pieces of the vendor NFS client build chain (``kmod_build``): constants, the error type,
input validation, file digests.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles


STATE_FILE = "/etc/gpufabric/vendor_nfs.json"
RDMA_MODULE = "rpcrdma"
NVFS_SYMBOL = "rpcrdma_register_nvfs_dma_ops"
BUNDLE_PARAM = "nfs_bundle_version"
SIGNATURE_MAGIC = b"~Module signature appended~\n"
BUILDER_IMAGE = "localhost/gpufabric-kbuild"
# xz-utils and zstd: signing compressed modules (decompress, sign, compress again); fakeroot: a vendor build that
# packages with dpkg-buildpackage runs as a non-root user in the container. No libssl: the headers' sign-file pulls
# the release's own (libssl3 on bookworm and 22.04, libssl3t64 on trixie and 24.04, where libssl3 is only a virtual
# package that debootstrap --include refuses).
# The Debian profile's list (os_profiles holds the one list for every release).
BUILDER_PACKAGES = list(os_profiles.PROFILES["debian12"]["builder_base_packages"])
CACHE_FORMAT = 1
MANIFEST_MODULE_KEYS = ("name", "installed_path", "package", "vermagic", "srcversion", "sha256", "signed", "signer",
                        "parameters", "compression", "file_sha256")

# Build profiles: the command run in the unpacked source tree inside the container, and where outputs land.
PROFILES = {
    "vastnfs": {
        "argv": ["./build.sh", "bin"],
        "outputs": ["dist/*.deb", "dist/*.rpm"],
        "package": True,
    },
    "kbuild": {
        "argv": ["make", "-C", "/lib/modules/{kver}/build", "M=/tmp/gpufabric-build", "modules"],
        "outputs": ["**/*.ko"],
        "package": False,
    },
}

_SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
_KVER_RE = re.compile(r"^[0-9]+\.[0-9]+[A-Za-z0-9._+~-]*\Z")
MODULE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,55}\Z")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*\Z")


class KmodBuildError(Exception):
    """A step of the build chain failed; the message says which and why, ``details`` carries the evidence."""

    def __init__(self, msg, **details):
        Exception.__init__(self, msg)
        self.details = details


# --------------------------------------------------------------------------- validation

def validate_sha256(value):
    v = (value or "").strip().lower()
    if v.startswith("sha256:"):
        v = v[len("sha256:"):]
    if not _SHA256_RE.match(v):
        raise ValueError("sha256 must be 64 hexadecimal characters, got %r" % (value,))
    return v


def validate_kver(value):
    if not value or not _KVER_RE.match(value) or "/" in value:
        raise ValueError("kernel release %r does not look like a kernel release (e.g. 6.1.0-50-amd64)" % (value,))
    return value


def validate_version(value):
    if not value or not _VERSION_RE.match(value):
        raise ValueError("version %r: use letters, digits and . _ + ~ - only" % (value,))
    return value


def validate_profile(value):
    if value not in PROFILES:
        raise ValueError("unknown build profile %r (known: %s)" % (value, ", ".join(sorted(PROFILES))))
    return value


def sha256_file(path):
    import hashlib   # not imported by the node-side runs that only read the vendor client's record
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_record(sysroot):
    """``(doc, problem)``: the vendor client's record (``STATE_FILE``) as a dict, ``{}`` when there is none; when it
    cannot be used (not a regular file, a symlink, over ``bounded_read.RECORD_LIMIT``, not UTF-8 JSON, nested beyond
    the parser's limit, not an object) ``({}, why)``: the recording functions then write a new one."""
    try:
        raw = bounded_read.read_text(sysroot.path(STATE_FILE))
        doc = json.loads(raw) if raw else {}
    except (OSError, ValueError, RecursionError) as e:
        return {}, "%s cannot be used (%s: %s)" % (STATE_FILE, type(e).__name__, str(e)[:200])
    if not isinstance(doc, dict):
        return {}, "%s is not a JSON object" % STATE_FILE
    return doc, None
