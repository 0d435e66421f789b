# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compressed kernel modules: ``.ko.gz``, ``.ko.xz``, ``.ko.zst`` (kernel ``CONFIG_MODULE_COMPRESS_{GZIP,XZ,ZSTD}``;
DKMS compresses like the kernel it builds for: Ubuntu 24.04 ``.ko.zst``, RHEL 9 ``.ko.xz``).

* The format is told by the magic bytes, as libkmod does (``libkmod/libkmod-file.c``: zstd ``28 b5 2f fd``,
  xz ``fd '7zXZ' 00``, gzip ``1f 8b``; anything else is read as is); the file name only names the module.
* gzip and xz decompress with the standard library (``gzip``, ``lzma``). zstd with, in this order, the standard
  library's ``compression.zstd`` (Python 3.14+), the ``zstandard`` package, or the ``zstd``/``unzstd`` tool found
  the way Ansible's ``get_bin_path`` finds tools (``PATH`` plus the sbin directories); without any of them the error
  says what to install. :attr:`Codecs.used` tells which served each format (for the modules' results).
* Compression for installation follows the kernel's ``scripts/Makefile.modinst``: ``gzip -n`` (no name, no time
  stamp), ``xz --check=crc32 --lzma2=dict=1MiB`` (the settings of the kernels before 6.2; CRC32 is what every
  in-kernel xz decompressor checks), ``zstd`` at its default level. The module is signed before it is compressed
  there too, so the signature is at the end of the decompressed data.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import io
import lzma
import os
import re
import shutil
import tempfile
import zlib

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import KmodBuildError
from ansible_collections.gpufabric.node.plugins.module_utils.host import runner

KINDS = ("none", "gzip", "xz", "zstd")
SUFFIX = {"none": "", "gzip": ".gz", "xz": ".xz", "zstd": ".zst"}
_EXT_KIND = {"": "none", ".gz": "gzip", ".xz": "xz", ".zst": "zstd"}
MAGIC = ((b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b", "gzip"))
ELF_MAGIC = b"\x7fELF"
_MODULE_RE = re.compile(r"(?P<stem>[^/]+)\.ko(?P<ext>\.gz|\.xz|\.zst)?\Z")
SBIN_DIRS = ("/sbin", "/usr/sbin", "/usr/local/sbin")
ZSTD_HINT = ("install the zstd tool (Debian/Ubuntu package zstd, EL zstd) or the Python package zstandard "
             "(python3-zstandard)")


def is_module_path(path):
    """True for ``x.ko``, ``x.ko.gz``, ``x.ko.xz``, ``x.ko.zst``."""
    return bool(_MODULE_RE.search(path or ""))


def module_kind(path):
    """The compression a module's file name announces (``none`` for ``.ko``), or None when it is no module."""
    m = _MODULE_RE.search(path or "")
    return _EXT_KIND[m.group("ext") or ""] if m else None


def module_stem(path):
    """``/x/rpc-rdma.ko.zst`` -> ``rpc-rdma``; None when it is no module."""
    m = _MODULE_RE.search(path or "")
    return m.group("stem") if m else None


def module_name(path):
    """The name modprobe uses (``-`` and ``_`` are the same to it): ``rpc-rdma.ko.zst`` -> ``rpc_rdma``."""
    stem = module_stem(path)
    return stem.replace("-", "_") if stem else None


def with_kind(path, kind):
    """The module path with the suffix of ``kind``: ``a/x.ko`` + zstd -> ``a/x.ko.zst``."""
    m = _MODULE_RE.search(path)
    if not m:
        raise ValueError("%r is not a kernel module path" % path)
    return path[:m.start("stem")] + m.group("stem") + ".ko" + SUFFIX[kind]


def sibling_paths(path):
    """The paths of the same module with every compression (what depmod would see twice in one directory)."""
    return [with_kind(path, k) for k in KINDS]


def sniff(data):
    """The compression of ``data`` by its magic bytes: a KIND, ``none`` for ELF, None for anything else."""
    for magic, kind in MAGIC:
        if data[:len(magic)] == magic:
            return kind
    return "none" if data[:4] == ELF_MAGIC else None


def find_tool(name, extra_dirs=SBIN_DIRS):
    """Absolute path of an executable like AnsibleModule.get_bin_path: ``PATH`` then the sbin directories."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + list(extra_dirs)
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _import_zstd():
    """(label, module) of the first importable Python zstd binding, or (None, None)."""
    try:
        from compression import zstd as stdlib_zstd  # Python 3.14+ (PEP 784)
        return "python:compression.zstd", stdlib_zstd
    except ImportError:
        pass
    try:
        import zstandard
        return "python:zstandard", zstandard
    except ImportError:
        return None, None


class CodecUnavailable(KmodBuildError):
    """No decompressor (or compressor) for a format on this host: the check cannot be made, it did not fail."""


class Codecs(object):
    """Decompress and compress module data. ``run`` is the command runner (``run(argv, env=None) -> (rc, out,
    err)``; default: ``runner.local()``), ``tools`` maps ``zstd``/``unzstd`` to resolved paths (missing
    keys are looked up with :func:`find_tool`, None means not installed)."""

    def __init__(self, run=None, tools=None, importer=None):
        self.run = run or runner.local()
        self.tools = dict(tools or {})
        self.used = {}
        self._importer = importer

    def _tool(self, name):
        if name not in self.tools:
            self.tools[name] = find_tool(name)
        return self.tools[name]

    def zstd_backend(self, compress=False):
        """(label, binding or tool path) that handles zstd here, or (None, None)."""
        label, mod = (self._importer or _import_zstd)()
        if mod is not None:
            return label, mod
        for name in ("zstd",) if compress else ("zstd", "unzstd"):
            path = self._tool(name)
            if path:
                return "binary:%s" % path, path
        return None, None

    def decompress(self, data, what="module", kind=None):
        """The ELF bytes of a module file's ``data``; uncompressed data is returned as is."""
        kind = kind or sniff(data) or "none"
        if kind == "none":
            return data
        try:
            if kind == "gzip":
                out, label = gzip.decompress(data), "python:gzip"
            elif kind == "xz":
                out, label = lzma.decompress(data), "python:lzma"
            else:
                out, label = self._zstd(data, what, decompress=True)
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
            raise KmodBuildError("%s is %s-compressed but does not decompress: %s" % (what, kind, e))
        self.used[kind] = label
        return out

    def compress(self, data, kind, what="module"):
        """``data`` compressed the way the kernel's modules_install does it for ``kind``."""
        if kind == "none":
            return data
        if kind == "gzip":
            out, label = gzip.compress(data, compresslevel=6, mtime=0), "python:gzip"
        elif kind == "xz":
            out = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32,
                                filters=[{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 20}])
            label = "python:lzma"
        elif kind == "zstd":
            out, label = self._zstd(data, what, decompress=False)
        else:
            raise ValueError("unknown module compression %r" % (kind,))
        self.used[kind] = label
        return out

    def _zstd(self, data, what, decompress):
        label, backend = self.zstd_backend(compress=not decompress)
        if backend is None:
            raise CodecUnavailable("%s %s zstd and this host has no zstd: %s" % (
                what, "is compressed with" if decompress else "must be compressed with", ZSTD_HINT))
        if label == "python:compression.zstd":
            return (backend.decompress(data) if decompress else backend.compress(data, level=3)), label
        if label == "python:zstandard":
            try:
                if not decompress:
                    return backend.ZstdCompressor(level=3).compress(data), label
                # stream_reader copes with frames that do not record their size (streaming compressors)
                reader = backend.ZstdDecompressor().stream_reader(io.BytesIO(data))
                chunks = []
                while True:
                    chunk = reader.read(1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
                return b"".join(chunks), label
            except backend.ZstdError as e:
                raise KmodBuildError("%s: zstd %s failed: %s" % (
                    what, "decompression" if decompress else "compression", e))
        return self._zstd_binary(backend, data, what, decompress), label

    def _zstd_binary(self, tool, data, what, decompress):
        scratch = tempfile.mkdtemp(prefix=".gpufabric-zstd-")
        try:
            src, dst = os.path.join(scratch, "in"), os.path.join(scratch, "out")
            with open(src, "wb") as f:
                f.write(data)
            argv = [tool] + (["-d"] if decompress and not tool.endswith("unzstd") else []) + \
                ([] if decompress else ["-3"]) + ["-q", "-f", "-o", dst, src]
            rc, _out, err = self.run(argv)
            if rc != 0 or not os.path.isfile(dst):
                raise KmodBuildError("%s: %s failed (rc=%s): %s" % (what, " ".join(argv[:2]), rc, err.strip()[:300]))
            with open(dst, "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
