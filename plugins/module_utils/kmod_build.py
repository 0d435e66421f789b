# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinned source tarball -> container build for one target kernel -> verified, cached, installed artifacts.

The vendor NFS client (VAST ``vastnfs`` as the reference) replaces the node's NFS stack and is built for one
exact kernel. This file holds the whole chain as plain Python so the module, the tests and the kernel-upgrade
gate use one implementation:

* source: mandatory sha256, safe extraction on a case-sensitive directory, case-colliding names reported
  (the tarball ships ``Makefile`` *and* ``makefile``; on a case-insensitive mount the build produces nothing);
* build: ``podman run`` (never privileged, ``--network none``, ``--cap-drop all``, read-only source mount,
  separate output directory) in a builder image holding the target kernel's headers;
* verification: every ``.ko`` has the target kernel as first vermagic field, ``rpcrdma`` exports
  ``rpcrdma_register_nvfs_dma_ops``, the package lists the modules, optional signature present;
* cache keyed by (source sha256, profile, kernel, signing certificate);
* install for the target kernel without loading anything (package or copy, ``depmod``, initramfs), recorded in
  ``/etc/gpufabric/vendor_nfs.json`` for the pre-reboot gate.

Commands go through a runner ``run(argv, env=None) -> (rc, out, err)``; ``tools`` maps a tool name to its
resolved path or None (then the pure-Python fallback is used). This file is private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import struct
import tarfile
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

STATE_FILE = "/etc/gpufabric/vendor_nfs.json"
RDMA_MODULE = "rpcrdma"
NVFS_SYMBOL = "rpcrdma_register_nvfs_dma_ops"
BUNDLE_PARAM = "nfs_bundle_version"
SIGNATURE_MAGIC = b"~Module signature appended~\n"
BUILDER_IMAGE = "localhost/gpufabric-kbuild"
BUILDER_PACKAGES = ["build-essential", "kmod", "ca-certificates", "libssl3"]
CACHE_FORMAT = 1
MANIFEST_MODULE_KEYS = ("name", "installed_path", "package", "vermagic", "srcversion", "sha256", "signed", "signer",
                        "parameters")

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

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_KVER_RE = re.compile(r"^[0-9]+\.[0-9]+[A-Za-z0-9._+~-]*$")
MODULE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,55}$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$")


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
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def cache_key(source_sha256, profile, kver, cert_fingerprint=None):
    """Stable key of one build: same source, profile, kernel and signing certificate = same artifacts."""
    doc = {"format": CACHE_FORMAT, "source_sha256": validate_sha256(source_sha256), "profile": profile,
           "kver": kver, "cert": cert_fingerprint or ""}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


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


# --------------------------------------------------------------------------- ELF / kernel module inspection

class ElfFile(object):
    """Just enough ELF (32/64 bit, both endians) for kernel modules: sections, .modinfo, symbol names."""

    def __init__(self, data):
        if data[:4] != b"\x7fELF":
            raise KmodBuildError("not an ELF file")
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


def read_module_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    return data


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


def inspect_module(path, run=None, tools=None):
    """Facts of one ``.ko``: name, vermagic, srcversion, exports, signature (modinfo/nm when given, else ELF)."""
    tools = tools or {}
    data = read_module_bytes(path)
    info = modinfo_fields(data)
    facts = {
        "path": path,
        "name": (info.get("name") or [os.path.basename(path).split(".ko")[0]])[0],
        "vermagic": (info.get("vermagic") or [""])[0],
        "srcversion": (info.get("srcversion") or [""])[0],
        "parameters": sorted(set(p.split(":", 1)[0] for p in info.get("parm", []) + info.get("parmtype", []))),
        "exports": sorted(exported_symbols(data)),
        "signed": data.endswith(SIGNATURE_MAGIC),
        "signer": None,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    if run and tools.get("modinfo"):
        for field in ("vermagic", "srcversion", "signer"):
            rc, out, _err = run([tools["modinfo"], "-F", field, path])
            if rc == 0 and (out.strip() or field == "signer"):
                facts[field] = (out.strip().splitlines() or [""])[0]
    if run and tools.get("nm"):
        rc, out, _err = run([tools["nm"], path])
        if rc == 0:
            facts["exports"] = sorted(set(facts["exports"]) | parse_nm_exports(out))
    return facts


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


# --------------------------------------------------------------------------- verification

def verify_modules(modules, kver, require_symbol=True, require_signature=False, required=None):
    """Problems (list of sentences) with a list of ``inspect_module`` facts for kernel ``kver``."""
    problems = []
    if not modules:
        return ["the build produced no kernel modules (.ko): a case-insensitive source tree or a failed kbuild"]
    names = dict((m["name"], m) for m in modules)
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


# --------------------------------------------------------------------------- podman

def containers_conf_text():
    """containers.conf with the quirks of these hosts (runc, explicit ulimits, cgroupfs, no network)."""
    return "\n".join([
        "[containers]",
        'default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]',
        'netns = "none"',
        "",
        "[engine]",
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        "",
    ])


def storage_conf_text(base):
    return "\n".join([
        "[storage]",
        'driver = "overlay"',
        'graphroot = "%s"' % os.path.join(base, "graph"),
        'runroot = "%s"' % os.path.join(base, "run"),
        "",
    ])


def podman_env(conf_dir, write_storage=True):
    """Write containers.conf (+ storage.conf) into ``conf_dir``; returns the environment to pass to podman.

    An existing storage.conf there is kept (another tool may own that storage, e.g. the VM lab's).
    """
    if not conf_dir:
        return {}
    os.makedirs(conf_dir, exist_ok=True)
    env = {}
    conf = os.path.join(conf_dir, "containers.conf")
    if not os.path.exists(conf):
        with open(conf, "w") as f:
            f.write(containers_conf_text())
    env["CONTAINERS_CONF"] = conf
    storage = os.path.join(conf_dir, "storage.conf")
    if write_storage and not os.path.exists(storage):
        with open(storage, "w") as f:
            f.write(storage_conf_text(conf_dir))
    if os.path.exists(storage):
        env["CONTAINERS_STORAGE_CONF"] = storage
    return env


def builder_image_name(kver, base=BUILDER_IMAGE):
    return "%s:%s" % (base, kver)


def container_script(profile, sign=False):
    """The POSIX shell script run *inside* the builder container (inputs through environment variables)."""
    p = PROFILES[profile]
    cmd = " ".join('"%s"' % a.replace("{kver}", "$KVER") if "{kver}" in a else "'%s'" % a for a in p["argv"])
    lines = [
        "set -eu",
        "B=/tmp/gpufabric-build",
        'rm -rf "$B"; mkdir -p "$B"',
        'cp -R /src/. "$B/"',
        'cd "$B"',
        'echo "gpufabric: building profile %s for $KVER"' % profile,
        cmd,
        "mkdir -p /out/dist",
        "found=0",
    ]
    if p["package"]:
        lines += [
            "for f in dist/*.deb dist/*.rpm; do [ -f \"$f\" ] || continue; cp \"$f\" /out/dist/; found=1; done",
        ]
    else:
        lines += [
            "for f in $(find . -name '*.ko' -type f); do cp \"$f\" /out/dist/; found=1; done",
        ]
    lines.append('[ "$found" = 1 ] || { echo "gpufabric: the build left no outputs" >&2; exit 3; }')
    if sign:
        lines += [
            'S=/usr/src/linux-headers-$KVER/scripts/sign-file',
            '[ -x "$S" ] || S=$(ls /usr/lib/linux-kbuild-*/scripts/sign-file 2>/dev/null | head -n 1)',
            '[ -n "$S" ] && [ -x "$S" ] || { echo "gpufabric: sign-file not found in the builder image" >&2; exit 4; }',
            "cd /out/dist",
            "for ko in *.ko; do [ -f \"$ko\" ] || continue; \"$S\" sha256 /keys/signing.key /keys/signing.crt \"$ko\"; done",
            "for deb in *.deb; do [ -f \"$deb\" ] || continue; rm -rf /tmp/gpufabric-pkg;",
            "  dpkg-deb -R \"$deb\" /tmp/gpufabric-pkg;",
            "  for ko in $(find /tmp/gpufabric-pkg -name '*.ko' -type f); do \"$S\" sha256 /keys/signing.key "
            "/keys/signing.crt \"$ko\"; done;",
            "  dpkg-deb --root-owner-group -b /tmp/gpufabric-pkg \"$deb\" >/dev/null; done",
            "for rpm in *.rpm; do [ -f \"$rpm\" ] || continue; echo \"gpufabric: signing inside rpm packages is not "
            "supported, sign in the vendor build\" >&2; exit 5; done",
        ]
    return "\n".join(lines) + "\n"


def podman_run_argv(podman, image, src_dir, out_dir, kver, profile, sign_dir=None, name=None):
    """``podman run`` of one build: not privileged, no network, no capabilities, read-only source."""
    argv = [podman, "run", "--rm", "--network", "none", "--cap-drop", "all",
            "--security-opt", "no-new-privileges", "--pids-limit", "4096",
            "-v", "%s:/src:ro" % src_dir, "-v", "%s:/out:rw" % out_dir,
            "-e", "KVER=%s" % kver, "-w", "/"]
    if name:
        argv += ["--name", name]
    if sign_dir:
        argv += ["-v", "%s:/keys:ro" % sign_dir]
    argv += [image, "/bin/sh", "-c", container_script(profile, sign=bool(sign_dir))]
    return argv


# --------------------------------------------------------------------------- builder image

def parse_apt_sources(files_text):
    """[(uri, suite, components)] from deb822 ``.sources`` and one-line ``sources.list`` texts."""
    entries = []
    for text in files_text:
        if re.search(r"^\s*Types:", text, re.M):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if "deb" not in fields.get("types", "").split():
                    continue
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        entries.append((uri, suite, fields.get("components", "").split()))
        else:
            for line in text.splitlines():
                line = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(line) >= 3 and line[0] == "deb":
                    entries.append((line[1], line[2], line[3:]))
    return entries


def _host_apt_texts(sysroot):
    texts = []
    for pattern in ("/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list"):
        for p in sorted(glob.glob(sysroot.path(pattern))):
            try:
                with open(p) as f:
                    texts.append(f.read())
            except (OSError, IOError):
                continue
    return texts


def host_mirror(sysroot, suite):
    """The mirror URI the host's apt already uses for ``suite`` ``main`` (never a hard-coded host)."""
    for uri, s, comps in parse_apt_sources(_host_apt_texts(sysroot)):
        if s == suite and "main" in comps:
            return uri
    raise KmodBuildError("no apt source of the host serves %s main: pass the builder mirror explicitly" % suite)


# Debian publishes new kernel ABIs (linux-headers-6.1.0-<abi>-amd64) in <suite>-security and <suite>-updates long
# before a point release moves them to <suite>: a builder for a target kernel needs those suites too.
COMPANION_SUITES = ("-updates", "-security")


def builder_sources(sysroot, suite, mirror=None):
    """apt source lines of the builder image: ``suite`` main (from ``mirror`` or the host's apt) and the host's
    ``<suite>-updates`` / ``<suite>-security`` main sources when it has them. Returns a list of
    ``deb URI SUITE main`` lines, the base suite first."""
    entries = parse_apt_sources(_host_apt_texts(sysroot))
    lines = ["deb %s %s main" % (mirror or host_mirror(sysroot, suite), suite)]
    for tail in COMPANION_SUITES:
        for uri, s, comps in entries:
            if s == suite + tail and "main" in comps:
                line = "deb %s %s main" % (uri, s)
                if line not in lines:
                    lines.append(line)
                break
    return lines


def validate_source_line(line):
    """One-line apt source ``deb URI SUITE COMPONENT...`` (options in brackets allowed); raises ValueError."""
    words = re.sub(r"\[[^\]]*\]", "", line).split()
    if len(words) < 4 or words[0] != "deb" or not re.match(r"^(https?|file):", words[1]):
        raise ValueError("builder source %r is not an apt line 'deb URI SUITE COMPONENT...'" % line)
    return line.strip()


def debootstrap_argv(debootstrap, root, suite, mirror, extra_packages=None, cache_dir=None):
    """debootstrap of the builder's base system (compiler, kmod); the kernel headers come afterwards through apt
    from every builder source, so a target kernel of ``<suite>-security`` works too."""
    pkgs = list(BUILDER_PACKAGES) + list(extra_packages or [])
    argv = [debootstrap, "--variant=minbase", "--include=%s" % ",".join(pkgs)]
    if cache_dir:
        argv.append("--cache-dir=%s" % cache_dir)
    return argv + [suite, root, mirror]


def headers_install_argvs(chroot, root, kver):
    """The apt commands run in the builder rootfs (chroot) to add the target kernel's headers."""
    apt = [chroot, root, "/usr/bin/apt-get", "-q", "-o", "Acquire::Retries=3", "-o", "APT::Sandbox::User=root"]
    return [
        apt + ["update"],
        apt + ["install", "-y", "--no-install-recommends", "linux-headers-%s" % kver],
        apt + ["clean"],
    ]


def ensure_builder_image(run, tools, kver, env, scratch, suite=None, mirror=None, sysroot=None,
                         image=None, extra_packages=None, deb_cache=None, sources=None):
    """Make sure the builder image exists; create it from Debian packages when missing.

    The base system is debootstrapped from ``suite``; ``linux-headers-<kver>`` is then installed with apt from
    ``sources`` (default: :func:`builder_sources`, i.e. the suite plus the host's -updates and -security).
    Returns (image name, created: bool, seconds spent).
    """
    image = image or builder_image_name(kver)
    podman = tools["podman"]
    rc, _o, _e = run([podman, "image", "exists", image], env=env)
    if rc == 0:
        return image, False, 0.0
    if not suite:
        raise KmodBuildError("builder image %s does not exist and no Debian suite was given to create it" % image)
    for tool in ("debootstrap", "chroot"):
        if not tools.get(tool):
            raise KmodBuildError("builder image %s does not exist and %s is not installed to create it"
                                 % (image, tool))
    sysroot = sysroot or Sysroot()
    if sources:
        lines = [validate_source_line(s) for s in sources]
        base_mirror = mirror or host_mirror(sysroot, suite)
    else:
        lines = builder_sources(sysroot, suite, mirror)
        base_mirror = lines[0].split()[1]
    start = time.time()
    work = tempfile.mkdtemp(prefix="gpufabric-kbuild-", dir=scratch)
    try:
        root = os.path.join(work, "root")
        if deb_cache:
            os.makedirs(deb_cache, exist_ok=True)
        rc, out, err = run(debootstrap_argv(tools["debootstrap"], root, suite, base_mirror, extra_packages,
                                            deb_cache))
        if rc != 0:
            raise KmodBuildError("debootstrap of the builder image's base system (%s from %s) failed"
                                 % (suite, base_mirror), rc=rc, stdout=out[-3000:], stderr=err[-3000:])
        apt_dir = os.path.join(root, "etc", "apt")
        with open(os.path.join(apt_dir, "sources.list"), "w") as f:
            f.write("# gpufabric builder image for %s\n%s\n" % (kver, "\n".join(lines)))
        for argv in headers_install_argvs(tools["chroot"], root, kver):
            rc, out, err = run(argv)
            if rc != 0:
                raise KmodBuildError("installing linux-headers-%s in the builder image failed (%s): is that kernel "
                                     "in one of these apt sources? %s" % (kver, " ".join(argv[2:4]), "; ".join(lines)),
                                     rc=rc, stdout=out[-3000:], stderr=err[-3000:])
        shutil.rmtree(os.path.join(root, "var", "lib", "apt", "lists"), ignore_errors=True)
        if not os.path.isdir(os.path.join(root, "usr", "src", "linux-headers-%s" % kver)):
            raise KmodBuildError("apt installed no /usr/src/linux-headers-%s in the builder image" % kver)
        tarball = os.path.join(work, "rootfs.tar")
        rc, out, err = run([tools["tar"], "-C", root, "--numeric-owner", "-cf", tarball, "."])
        if rc != 0:
            raise KmodBuildError("packing the builder rootfs failed", rc=rc, stderr=err[-3000:])
        rc, out, err = run([podman, "import", "-q", tarball, image], env=env)
        if rc != 0:
            raise KmodBuildError("podman import of %s failed" % image, rc=rc, stderr=err[-3000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image, True, time.time() - start


# --------------------------------------------------------------------------- build with cache

def _manifest_path(cache_dir, key):
    return os.path.join(cache_dir, key, "manifest.json")


def load_cached(cache_dir, key):
    """The cached manifest when every artifact is still there with its recorded sha256, else None."""
    p = _manifest_path(cache_dir, key)
    try:
        with open(p) as f:
            man = json.load(f)
    except (OSError, IOError, ValueError):
        return None
    for a in man.get("artifacts", []):
        ap = os.path.join(cache_dir, key, a["file"])
        if not os.path.isfile(ap) or sha256_file(ap) != a["sha256"]:
            return None
    return man


def artifact_path(cache_dir, manifest, artifact):
    return os.path.join(cache_dir, manifest["key"], artifact["file"])


def verify_outputs(dist_dir, kver, profile, run=None, tools=None, require_signature=False, required=None):
    """Inspect what the build left in ``dist_dir``: packages, their modules, vermagic, symbol, signature.

    Returns (artifacts, modules, problems).
    """
    artifacts, modules, problems = [], [], []
    files = sorted(os.listdir(dist_dir)) if os.path.isdir(dist_dir) else []
    pkgs = [f for f in files if f.endswith((".deb", ".rpm"))]
    kos = [f for f in files if f.endswith(".ko")]
    if PROFILES[profile]["package"] and not pkgs:
        return [], [], ["the build produced no package (dist/*.deb or dist/*.rpm)"]
    unpack = tempfile.mkdtemp(prefix=".unpack-", dir=dist_dir)
    try:
        for pkg in pkgs:
            path = os.path.join(dist_dir, pkg)
            listed = package_contents(path, run, tools)
            rels = [p for p in listed if p.endswith(".ko") or p.endswith(".ko.xz")]
            problems += verify_package_lists(listed, rels, kver)
            sub = os.path.join(unpack, pkg)
            extract_package(path, sub, run, tools)
            pkg_mods = []
            for rel in rels:
                facts = inspect_module(os.path.join(sub, rel.lstrip("/")), run, tools)
                facts["installed_path"] = rel
                facts["package"] = pkg
                facts["path"] = "%s:%s" % (pkg, rel)
                pkg_mods.append(facts)
            if not pkg_mods:
                problems.append("package %s contains no kernel modules" % pkg)
            modules += pkg_mods
            artifacts.append({"file": "dist/" + pkg, "kind": pkg.rsplit(".", 1)[1], "sha256": sha256_file(path),
                              "modules": [m["installed_path"] for m in pkg_mods]})
        for ko in kos:
            path = os.path.join(dist_dir, ko)
            facts = inspect_module(path, run, tools)
            facts["installed_path"] = "/lib/modules/%s/updates/bundle/%s" % (kver, ko)
            facts["package"] = None
            facts["path"] = ko
            modules.append(facts)
            artifacts.append({"file": "dist/" + ko, "kind": "ko", "sha256": facts["sha256"],
                              "modules": [facts["installed_path"]]})
    finally:
        shutil.rmtree(unpack, ignore_errors=True)
    problems += verify_modules(modules, kver, require_signature=require_signature, required=required)
    return artifacts, modules, problems


def build(run, tools, source, source_sha256, kver, version, profile, cache_dir, image, env=None,
          signing=None, required_modules=None, keep_failed=False):
    """Build (or find in the cache) the vendor client for ``kver``.

    ``signing`` is None or {"key": path, "cert": path}. Returns the manifest plus ``cache_hit`` and ``timings``.
    Raises KmodBuildError with the evidence when any check fails; nothing lands in the cache then.
    """
    t0 = time.time()
    source_sha256 = verify_source(source, source_sha256)
    cert_fp = sha256_file(signing["cert"]) if signing else None
    key = cache_key(source_sha256, profile, kver, cert_fp)
    cached = load_cached(cache_dir, key)
    if cached is not None:
        cached["cache_hit"] = True
        cached["timings"] = {"total": round(time.time() - t0, 3)}
        return cached
    os.makedirs(cache_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".build-%s-" % key[:12], dir=cache_dir)
    try:
        src_root = os.path.join(work, "src")
        top, collisions = extract_source(source, src_root)
        out_dir = os.path.join(work, "out")
        os.makedirs(out_dir)
        sign_dir = None
        if signing:
            sign_dir = os.path.join(work, "keys")
            os.makedirs(sign_dir, 0o700)
            shutil.copy2(signing["key"], os.path.join(sign_dir, "signing.key"))
            shutil.copy2(signing["cert"], os.path.join(sign_dir, "signing.crt"))
        t1 = time.time()
        argv = podman_run_argv(tools["podman"], image, top, out_dir, kver, profile, sign_dir=sign_dir)
        rc, out, err = run(argv, env=env)
        build_s = time.time() - t1
        log = "$ podman run ... %s\n%s\n--- stderr ---\n%s" % (image, out, err)
        with open(os.path.join(work, "build.log"), "w") as f:
            f.write(log)
        if rc != 0:
            first = first_error_line(err) or first_error_line(out)
            # the case-collision hint unless the compiler names an error of its own ("make: *** No rule to make
            # target" is what a lost Makefile looks like, so make's errors keep the hint)
            hint = "" if re.search(r"\berror:", first) else collisions_hint(collisions)
            raise KmodBuildError("the container build failed (rc=%d) for kernel %s%s%s" % (
                rc, kver, ": " + first if first else "", hint), rc=rc, stdout=out[-4000:], stderr=err[-4000:],
                collisions=collisions)
        dist = os.path.join(out_dir, "dist")
        artifacts, modules, problems = verify_outputs(dist, kver, profile, run, tools,
                                                      require_signature=bool(signing), required=required_modules)
        if problems:
            raise KmodBuildError("the build for kernel %s is not usable: %s%s" % (
                kver, "; ".join(problems), collisions_hint(collisions)), problems=problems,
                collisions=collisions, stdout=out[-4000:], stderr=err[-4000:])
        final = os.path.join(cache_dir, key)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.makedirs(final)
        shutil.move(dist, os.path.join(final, "dist"))
        shutil.move(os.path.join(work, "build.log"), os.path.join(final, "build.log"))
        manifest = {
            "format": CACHE_FORMAT, "key": key, "source_sha256": source_sha256, "profile": profile,
            "kver": kver, "version": version, "image": image, "signed": bool(signing),
            "cert_sha256": cert_fp, "collisions": collisions, "artifacts": artifacts,
            "modules": [dict((k, m[k]) for k in MANIFEST_MODULE_KEYS) for m in modules],
            "rdma_exports_nvfs": True, "built_at": int(time.time()), "build_seconds": round(build_s, 2),
        }
        with open(os.path.join(final, "manifest.json.tmp"), "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
        os.rename(os.path.join(final, "manifest.json.tmp"), os.path.join(final, "manifest.json"))
    finally:
        if not keep_failed:
            shutil.rmtree(work, ignore_errors=True)
    manifest["cache_hit"] = False
    manifest["timings"] = {"build": round(build_s, 2), "total": round(time.time() - t0, 2)}
    return manifest


def first_error_line(text):
    """The first compiler/make error of a build log (``file:line:col: error: ...`` or ``make: *** ...``)."""
    lines = (text or "").splitlines()
    for pattern in (r"\berror:", r"\*\*\*"):
        for line in lines:
            if re.search(pattern, line):
                return line.strip()[:300]
    return ""


def collisions_hint(collisions):
    if not collisions:
        return ""
    return " (the source has case-colliding names %s: a case-insensitive mount keeps only one of each)" % (
        ", ".join("/".join(g) for g in collisions))


# --------------------------------------------------------------------------- install + record

def read_state(sysroot):
    raw = sysroot.read_raw(STATE_FILE)
    if not raw:
        return {"version": 1, "kernels": {}}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {"version": 1, "kernels": {}}
    doc.setdefault("kernels", {})
    return doc


def installed_problems(sysroot, manifest):
    """What differs between the manifest's modules and the node's files for its kernel (empty = installed)."""
    problems = []
    for m in manifest["modules"]:
        p = m["installed_path"]
        if not sysroot.exists(p):
            problems.append("%s is missing" % p)
            continue
        if sha256_file(sysroot.path(p)) != m["sha256"]:
            problems.append("%s differs from the verified build" % p)
    return problems


def modules_dep_paths(sysroot, kver):
    """{module name: path} as modules.dep resolves them (what modprobe would load)."""
    raw = sysroot.read_raw("/lib/modules/%s/modules.dep" % kver) or ""
    out = {}
    for line in raw.splitlines():
        if ":" not in line:
            continue
        path = line.split(":", 1)[0].strip()
        name = os.path.basename(path).split(".ko")[0].replace("-", "_")
        if not path.startswith("/"):
            path = "/lib/modules/%s/%s" % (kver, path)
        out.setdefault(name, path)
    return out


def install_plan(sysroot, manifest, method):
    """(actions, problems): what installing the manifest would do on this node."""
    problems = installed_problems(sysroot, manifest)
    actions = []
    if problems:
        actions.append("package" if method == "package" else "copy")
        actions.append("depmod")
    else:
        dep = modules_dep_paths(sysroot, manifest["kver"])
        stale = [m["name"] for m in manifest["modules"]
                 if dep.get(m["name"].replace("-", "_")) != m["installed_path"]]
        if stale:
            actions.append("depmod")
    rec = read_state(sysroot)["kernels"].get(manifest["kver"], {})
    if rec.get("key") != manifest["key"] or actions:
        actions.append("record")
    return actions, problems


def install(run, tools, sysroot, cache_dir, manifest, method="auto", initramfs="auto", check_mode=False):
    """Install the verified build for its kernel without loading anything. Returns a result dict."""
    kver = manifest["kver"]
    if method == "auto":
        method = "package" if sysroot.is_host and any(a["kind"] in ("deb", "rpm") for a in manifest["artifacts"]) \
            else "copy"
    if method == "package" and not sysroot.is_host:
        raise KmodBuildError("install_method=package needs the node's real root; use copy for a sysroot")
    actions, before = install_plan(sysroot, manifest, method)
    result = {"method": method, "actions": actions, "problems_before": before, "initramfs": False}
    if not actions:
        return result
    if check_mode:
        return result
    if before:
        if method == "package":
            for a in manifest["artifacts"]:
                path = artifact_path(cache_dir, manifest, a)
                if a["kind"] == "deb":
                    argv = [tools["dpkg"], "-i", path]
                elif a["kind"] == "rpm":
                    argv = [tools["rpm"], "-Uvh", "--replacepkgs", "--replacefiles", path]
                else:
                    continue
                rc, out, err = run(argv)
                if rc != 0:
                    raise KmodBuildError("installing %s failed" % a["file"], rc=rc, stdout=out, stderr=err)
        else:
            _copy_install(run, tools, sysroot, cache_dir, manifest)
        left = installed_problems(sysroot, manifest)
        if left:
            raise KmodBuildError("after installing, the node's files still differ: %s" % "; ".join(left))
    if "depmod" in actions or before:
        argv = [tools["depmod"]]
        if not sysroot.is_host:
            argv += ["-b", sysroot.root]
        rc, out, err = run(argv + [kver])
        if rc != 0:
            raise KmodBuildError("depmod %s failed" % kver, rc=rc, stdout=out, stderr=err)
    if before:
        result["initramfs"] = update_initramfs(run, tools, sysroot, manifest, initramfs)
    rec = read_state(sysroot)
    rec["kernels"][kver] = {
        "key": manifest["key"], "version": manifest["version"], "source_sha256": manifest["source_sha256"],
        "profile": manifest["profile"], "signed": manifest["signed"],
        "modules": dict((m["name"], {"path": m["installed_path"], "sha256": m["sha256"],
                                     "srcversion": m["srcversion"]}) for m in manifest["modules"]),
        "installed_at": int(time.time()),
    }
    sysroot.write_file_atomic(STATE_FILE, json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return result


def _copy_install(run, tools, sysroot, cache_dir, manifest):
    tmp = tempfile.mkdtemp(prefix=".install-", dir=os.path.join(cache_dir, manifest["key"]))
    try:
        for a in manifest["artifacts"]:
            path = artifact_path(cache_dir, manifest, a)
            if a["kind"] == "ko":
                srcs = {a["modules"][0]: path}
            else:
                sub = os.path.join(tmp, os.path.basename(a["file"]))
                extract_package(path, sub, run, tools)
                srcs = dict((rel, os.path.join(sub, rel.lstrip("/"))) for rel in a["modules"])
            for rel, src in srcs.items():
                with open(src, "rb") as f:
                    sysroot.write_file_atomic(rel, f.read(), mode=0o644)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def initramfs_has_modules(run, tools, initrd, names):
    if not tools.get("lsinitramfs"):
        return True
    rc, out, _err = run([tools["lsinitramfs"], initrd])
    if rc != 0:
        return True
    base = set(n + ".ko" for n in names) | set(n + ".ko.xz" for n in names) | set(n + ".ko.zst" for n in names)
    return any(os.path.basename(line.strip()) in base for line in out.splitlines())


def update_initramfs(run, tools, sysroot, manifest, mode):
    """Regenerate the target kernel's initramfs when the NFS stack is in it (``auto``), always, or never."""
    if mode == "never" or not sysroot.is_host:
        return False
    kver = manifest["kver"]
    if tools.get("update-initramfs"):
        initrd = "/boot/initrd.img-%s" % kver
        argv = [tools["update-initramfs"], "-u", "-k", kver]
    elif tools.get("dracut"):
        initrd = "/boot/initramfs-%s.img" % kver
        argv = [tools["dracut"], "-f", "--kver", kver]
    else:
        if mode == "always":
            raise KmodBuildError("neither update-initramfs nor dracut is installed")
        return False
    if mode == "auto":
        if not sysroot.exists(initrd):
            return False
        if not initramfs_has_modules(run, tools, sysroot.path(initrd), [m["name"] for m in manifest["modules"]]):
            return False
    rc, out, err = run(argv)
    if rc != 0:
        raise KmodBuildError("regenerating the initramfs of %s failed" % kver, rc=rc, stdout=out, stderr=err)
    return True


# --------------------------------------------------------------------------- proofs (pre-reboot gate, post-boot)

def _installed_module_facts(sysroot, path):
    real = sysroot.path(path)
    if not os.path.isfile(real):
        return None
    data = read_module_bytes(real)
    info = modinfo_fields(data)
    return {"vermagic": (info.get("vermagic") or [""])[0], "srcversion": (info.get("srcversion") or [""])[0],
            "exports": exported_symbols(data), "sha256": hashlib.sha256(data).hexdigest(),
            "signed": data.endswith(SIGNATURE_MAGIC)}


def other_modules_problems(sysroot, kver, names, dep=None):
    """Other out-of-tree modules the node needs after booting ``kver`` (the NVIDIA driver, nvidia-fs, a site's
    drivers built by DKMS): modules.dep of ``kver`` must resolve each name to a file whose vermagic names ``kver``.

    Returns ({name: {"path", "vermagic"}}, [problems]).
    """
    dep = modules_dep_paths(sysroot, kver) if dep is None else dep
    facts, problems = {}, []
    for name in names:
        path = dep.get(name.replace("-", "_"))
        entry = {"path": path, "vermagic": None}
        facts[name] = entry
        if not path:
            problems.append("modprobe %s on kernel %s finds no module: build and install it for %s (DKMS, the "
                            "vendor's package) before rebooting" % (name, kver, kver))
            continue
        info = _installed_module_facts(sysroot, path)
        if info is None:
            problems.append("modules.dep of %s lists %s for %s but the file is missing (run depmod %s)"
                            % (kver, path, name, kver))
            continue
        entry["vermagic"] = info["vermagic"]
        try:
            release = parse_vermagic(info["vermagic"])["release"]
        except ValueError:
            release = ""
        if release != kver:
            problems.append("%s (for %s) has vermagic %r, not for kernel %s" % (path, name, info["vermagic"], kver))
    return facts, problems


def prove_installed(sysroot, kver, require_symbol=True, version=None, other_modules=()):
    """Gate before rebooting into ``kver``: the verified client is installed and modprobe would pick it; every
    name in ``other_modules`` resolves to a module built for ``kver``.

    Returns {"proven": bool, "problems": [...], "modules": {name: {...}}, "other_modules": {...}, "record": {...}}.
    """
    problems = []
    rec = read_state(sysroot)["kernels"].get(kver)
    out = {"kernel_release": kver, "stage": "installed", "modules": {}, "record": rec or {}, "other_modules": {}}
    if other_modules:
        out["other_modules"], problems = other_modules_problems(sysroot, kver, other_modules)
    if not rec:
        problems.append("no verified vendor NFS client is recorded for kernel %s in %s: build and install it "
                        "before rebooting" % (kver, STATE_FILE))
        out.update(proven=False, problems=problems)
        return out
    if version and rec.get("version") != version:
        problems.append("kernel %s has vendor NFS client %s installed, expected %s"
                        % (kver, rec.get("version"), version))
    dep = modules_dep_paths(sysroot, kver)
    if not dep:
        problems.append("/lib/modules/%s/modules.dep is missing or empty: depmod %s has not run" % (kver, kver))
    for name, m in sorted(rec.get("modules", {}).items()):
        facts = _installed_module_facts(sysroot, m["path"])
        entry = {"path": m["path"], "resolved": dep.get(name.replace("-", "_"))}
        out["modules"][name] = entry
        if facts is None:
            problems.append("%s is missing" % m["path"])
            continue
        entry.update(vermagic=facts["vermagic"], srcversion=facts["srcversion"], signed=facts["signed"])
        if facts["sha256"] != m["sha256"]:
            problems.append("%s differs from the verified build (sha256 %s, recorded %s)"
                            % (m["path"], facts["sha256"], m["sha256"]))
        try:
            release = parse_vermagic(facts["vermagic"])["release"]
        except ValueError:
            release = ""
        if release != kver:
            problems.append("%s has vermagic %r, not for kernel %s" % (m["path"], facts["vermagic"], kver))
        if dep and entry["resolved"] != m["path"]:
            problems.append("modprobe %s on kernel %s would load %s, not the vendor's %s (run depmod %s)"
                            % (name, kver, entry["resolved"] or "nothing", m["path"], kver))
        if require_symbol and name == RDMA_MODULE and NVFS_SYMBOL not in facts["exports"]:
            problems.append("%s does not export %s" % (m["path"], NVFS_SYMBOL))
    if require_symbol and RDMA_MODULE not in rec.get("modules", {}):
        problems.append("the recorded client for %s has no %s module" % (kver, RDMA_MODULE))
    out.update(proven=not problems, problems=problems)
    return out


# ``/proc/driver/nvidia-fs/modules`` lines ``<name>: <version>`` -> {name: version}
parse_nvfs_modules = nvfs_modules.parse_modules


def prove_running(sysroot, kver, require_loaded=("sunrpc",), nvidia_fs="auto"):
    """Post-boot proof: the target kernel runs and the loaded NFS/RDMA modules are the vendor's.

    * ``/proc/sys/kernel/osrelease`` (what ``uname -r`` prints) is ``kver``;
    * every recorded module that is loaded has ``/sys/module/<m>/srcversion`` equal to the installed file's;
      modules in ``require_loaded`` must be loaded;
    * ``/sys/module/sunrpc/parameters/nfs_bundle_version`` exists (only the vendor's sunrpc has it);
    * with nvidia-fs loaded (or ``nvidia_fs="required"``) ``/proc/driver/nvidia-fs/modules`` lists rpcrdma while
      ``/dev/nvidia-fs<N>`` is held open (nvidia-fs registers storage modules only then: ``nvfs_modules``; an idle
      healthy node lists none). A node without nvidia-fs (``/sys/module/nvidia_fs`` absent) skips it in ``auto``.
    """
    problems = []
    running = sysroot.read("/proc/sys/kernel/osrelease", "")
    out = {"kernel_release": kver, "stage": "running", "running_release": running, "modules": {},
           "nfs_bundle_version": None, "nvidia_fs": {}}
    if running != kver:
        problems.append("the running kernel is %s, not the target %s (the boot loader may have booted another "
                        "entry)" % (running or "unknown", kver))
    rec = read_state(sysroot)["kernels"].get(kver) or {}
    if not rec:
        problems.append("no vendor NFS client is recorded for kernel %s" % kver)
    for name, m in sorted(rec.get("modules", {}).items()):
        sysname = name.replace("-", "_")
        loaded = sysroot.isdir("/sys/module/%s" % sysname)
        live = sysroot.read("/sys/module/%s/srcversion" % sysname) if loaded else None
        facts = _installed_module_facts(sysroot, m["path"])
        want = facts["srcversion"] if facts else m.get("srcversion")
        entry = {"loaded": loaded, "srcversion_loaded": live, "srcversion_installed": want}
        out["modules"][name] = entry
        if not loaded:
            if name in require_loaded:
                problems.append("%s is not loaded" % name)
            continue
        if live is None:
            problems.append("%s is loaded without a srcversion: the in-kernel module, not the vendor's" % name)
        elif live != want:
            problems.append("loaded %s has srcversion %s, the installed vendor module %s has %s: the in-tree "
                            "NFS stack is running" % (name, live, m["path"], want))
    param = "/sys/module/sunrpc/parameters/%s" % BUNDLE_PARAM
    if sysroot.exists(param):
        out["nfs_bundle_version"] = sysroot.read(param, "")
    elif "sunrpc" in rec.get("modules", {}) or "sunrpc" in require_loaded:
        problems.append("%s is missing: the loaded sunrpc is not the vendor's bundle" % param)
    nvfs_loaded = sysroot.isdir("/sys/module/nvidia_fs")
    out["nvidia_fs"]["loaded"] = nvfs_loaded
    if nvidia_fs == "required" and not nvfs_loaded:
        problems.append("nvidia-fs is not loaded")
    if nvfs_loaded and nvidia_fs != "ignore":
        held = nvfs_modules.read_held(sysroot)
        out["nvidia_fs"].update(modules=held["modules"], device=held["device"], held=held["held"],
                                error=held["error"])
        ok, reason = nvfs_modules.storage_check(held, RDMA_MODULE)
        if not ok:
            problems.append(reason)
    out.update(proven=not problems, problems=problems)
    return out
