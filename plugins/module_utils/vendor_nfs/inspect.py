# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel module inspection: just enough ELF for ``.modinfo`` and exported symbols, vermagic,
signature, and the verification of a build's modules for one kernel.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import shutil
import struct
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (
    NVFS_SYMBOL, RDMA_MODULE, SIGNATURE_MAGIC, KmodBuildError)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import Codecs, module_stem, sniff


# --------------------------------------------------------------------------- ELF / kernel module inspection

class ElfFile(object):
    """Just enough ELF (32/64 bit, both endians) for kernel modules: sections, .modinfo, symbol names."""

    def __init__(self, data, what="module"):
        if data[:4] != b"\x7fELF":
            kind = sniff(data)
            raise KmodBuildError("%s is not an ELF file%s" % (what, " (it is %s-compressed: decompress it first)" % kind
                                                              if kind not in (None, "none") else ""))
        self.data = data
        self.is64 = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"
        if self.is64:
            (self.shoff,) = struct.unpack_from(self.end + "Q", data, 0x28)
            self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(self.end + "HHH", data, 0x3A)
        else:
            (self.shoff,) = struct.unpack_from(self.end + "I", data, 0x20)
            self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(self.end + "HHH", data, 0x2E)
        self.sections = []
        raw = []
        for i in range(self.shnum):
            off = self.shoff + i * self.shentsize
            if self.is64:
                name, typ, _fl, _ad, offset, size, link, _info, _al, entsize = struct.unpack_from(
                    self.end + "IIQQQQIIQQ", data, off)
            else:
                name, typ, _fl, _ad, offset, size, link, _info, _al, entsize = struct.unpack_from(
                    self.end + "IIIIIIIIII", data, off)
            raw.append((name, typ, offset, size, link, entsize))
        if not raw:
            return
        strtab = raw[self.shstrndx]
        for name, typ, offset, size, link, entsize in raw:
            self.sections.append({"name": self._cstr(strtab[2] + name), "type": typ, "offset": offset,
                                  "size": size, "link": link, "entsize": entsize})

    def _cstr(self, off):
        end = self.data.find(b"\0", off)
        return self.data[off:end if end >= 0 else len(self.data)].decode("utf-8", "replace")

    def section(self, name):
        for s in self.sections:
            if s["name"] == name:
                return self.data[s["offset"]:s["offset"] + s["size"]] if s["type"] != 8 else b""
        return None

    def symbol_names(self):
        names = []
        for s in self.sections:
            if s["type"] != 2:  # SHT_SYMTAB
                continue
            strsec = self.sections[s["link"]]
            ent = s["entsize"] or (24 if self.is64 else 16)
            for i in range(s["size"] // ent):
                (st_name,) = struct.unpack_from(self.end + "I", self.data, s["offset"] + i * ent)
                if st_name:
                    names.append(self._cstr(strsec["offset"] + st_name))
        return names


def read_module(path, codecs=None):
    """(ELF bytes, compression, sha256 of the file as stored) of a module file, compressed or not."""
    with open(path, "rb") as f:
        raw = f.read()
    kind = sniff(raw) or "none"
    data = (codecs or Codecs()).decompress(raw, what=path, kind=kind)
    if data[:4] != b"\x7fELF":
        raise KmodBuildError("%s is not a kernel module: neither ELF nor gzip/xz/zstd-compressed ELF" % path)
    return data, kind, hashlib.sha256(raw).hexdigest()


def read_module_bytes(path, codecs=None):
    """The ELF bytes of a module file (``.ko``, ``.ko.gz``, ``.ko.xz``, ``.ko.zst``)."""
    return read_module(path, codecs)[0]


def modinfo_fields(data):
    """``.modinfo`` key=value strings as {key: [values]}."""
    sec = ElfFile(data).section(".modinfo") or b""
    out = {}
    for item in sec.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            out.setdefault(k.decode("utf-8", "replace"), []).append(v.decode("utf-8", "replace"))
    return out


def exported_symbols(data):
    """Symbols the module exports: ``__ksymtab_<sym>`` symbols plus the ``__ksymtab_strings`` names."""
    elf = ElfFile(data)
    syms = set()
    for n in elf.symbol_names():
        if n.startswith("__ksymtab_") and n != "__ksymtab_strings":
            syms.add(n[len("__ksymtab_"):])
        elif n.startswith("__kstrtab_"):
            syms.add(n[len("__kstrtab_"):])
    for s in elf.sections:
        for prefix in ("___ksymtab+", "___ksymtab_gpl+"):
            if s["name"].startswith(prefix):
                syms.add(s["name"][len(prefix):])
    strings = elf.section("__ksymtab_strings")
    if strings:
        syms.update(x.decode("utf-8", "replace") for x in strings.split(b"\0") if x)
    return syms


def parse_vermagic(text):
    """``6.1.0-50-amd64 SMP preempt mod_unload modversions`` -> {"release", "flags"}."""
    parts = (text or "").split()
    if not parts:
        raise ValueError("empty vermagic")
    return {"release": parts[0], "flags": parts[1:]}


def parse_nm_exports(out):
    syms = set()
    for line in out.splitlines():
        f = line.split()
        if not f:
            continue
        name = f[-1]
        if name.startswith("__ksymtab_") and name != "__ksymtab_strings":
            syms.add(name[len("__ksymtab_"):])
        elif name.startswith("__kstrtab_"):
            syms.add(name[len("__kstrtab_"):])
    return syms


def inspect_module(path, run=None, tools=None, codecs=None):
    """Facts of one module file (``.ko`` or compressed): name, vermagic, srcversion, exports, signature
    (modinfo/nm when given, else ELF), ``compression``, ``sha256`` of the ELF content and ``file_sha256`` of the
    file as stored. modinfo and nm read a decompressed copy (nm cannot read compressed modules, and the host's
    kmod may lack the format)."""
    tools = tools or {}
    data, kind, file_sha = read_module(path, codecs or Codecs(run, tools))
    info = modinfo_fields(data)
    facts = {
        "path": path,
        "name": (info.get("name") or [module_stem(path) or os.path.basename(path)])[0],
        "vermagic": (info.get("vermagic") or [""])[0],
        "srcversion": (info.get("srcversion") or [""])[0],
        "parameters": sorted(set(p.split(":", 1)[0] for p in info.get("parm", []) + info.get("parmtype", []))),
        "exports": sorted(exported_symbols(data)),
        "signed": data.endswith(SIGNATURE_MAGIC),
        "signer": None,
        "sha256": hashlib.sha256(data).hexdigest(),
        "file_sha256": file_sha,
        "compression": kind,
    }
    if not (run and (tools.get("modinfo") or tools.get("nm"))):
        return facts
    scratch = None
    target = path
    if kind != "none":
        scratch = tempfile.mkdtemp(prefix=".gpufabric-ko-")
        target = os.path.join(scratch, (module_stem(path) or "module") + ".ko")
        with open(target, "wb") as f:
            f.write(data)
    try:
        if tools.get("modinfo"):
            for field in ("vermagic", "srcversion", "signer"):
                rc, out, _err = run([tools["modinfo"], "-F", field, target])
                if rc == 0 and (out.strip() or field == "signer"):
                    facts[field] = (out.strip().splitlines() or [""])[0]
        if tools.get("nm"):
            rc, out, _err = run([tools["nm"], target])
            if rc == 0:
                facts["exports"] = sorted(set(facts["exports"]) | parse_nm_exports(out))
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return facts


# --------------------------------------------------------------------------- verification

def verify_modules(modules, kver, require_symbol=True, require_signature=False, required=None):
    """Problems (list of sentences) with a list of ``inspect_module`` facts for kernel ``kver``."""
    problems = []
    if not modules:
        return ["the build produced no kernel modules (.ko): a case-insensitive source tree or a failed kbuild"]
    names = {}
    for m in modules:
        if m["name"] in names:
            problems.append("module %s is in the build twice (%s and %s): depmod would pick one of them"
                            % (m["name"], names[m["name"]]["path"], m["path"]))
        names.setdefault(m["name"], m)
    for m in modules:
        try:
            rel = parse_vermagic(m["vermagic"])["release"]
        except ValueError:
            rel = ""
        if rel != kver:
            problems.append("%s: vermagic %r is not for kernel %s" % (m["path"], m["vermagic"], kver))
        if require_signature and not m.get("signed"):
            problems.append("%s: no module signature appended" % m["path"])
        elif require_signature and m.get("signer") == "":
            problems.append("%s: modinfo reports no signer" % m["path"])
    if require_symbol:
        rdma = names.get(RDMA_MODULE)
        if rdma is None:
            problems.append("no %s module in the build: GDS needs the vendor RDMA transport" % RDMA_MODULE)
        elif NVFS_SYMBOL not in rdma["exports"]:
            problems.append("%s does not export %s: nvidia-fs cannot hook into this NFS client"
                            % (rdma["path"], NVFS_SYMBOL))
    for r in required or []:
        if r not in names:
            problems.append("required module %s is not in the build" % r)
    return problems
