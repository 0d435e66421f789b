# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capture what discovery reads from a node into one tarball that replays as a sysroot.

The list of what to keep is not kept by hand: :func:`capture` runs one discovery pass
(``topology.discover``) over a :class:`RecordingSysroot`, which notes every host path discovery
touches (every Sysroot method resolves its path through ``path()``) and every directory it lists.
Then each noted path is copied into the tarball:

* the symlinks on the way to it are kept as symlinks, with their targets as the kernel gives them
  (sysfs links are relative; an absolute target or one climbing above ``/`` is rewritten to the
  equivalent relative one, so the tarball never points outside its root);
* directories as directories; a directory discovery listed gets all its entries (a link as the link,
  a directory as an empty directory, anything else as an empty file unless discovery read it);
* regular files with their bytes as read (PCI ``config`` files are binary: 64 bytes when not root,
  the kernel's limit for unprivileged readers, else the whole space); device nodes (``/dev/nvidia-fs0``,
  which discovery opens) become empty regular files. Files that cannot be read are left out and listed
  in the manifest.

Discovery runs no tools (sysfs, procfs and a few files only), so a capture holds no command output.
The tarball holds regular files, directories and symlinks only, is built deterministically (sorted
names, mtime 0, uid/gid 0 ``root``, fixed modes, gzip without name or time) and carries
``gpufabric-capture.json`` (format, what was masked, what was left out) at its root; discovery never
reads that name. The facts of the same discovery pass come with it, masked the same way, so
replaying the tarball (:func:`unpack`, then ``GPUFABRIC_SYSROOT``) must give exactly those facts.

Masking (``mask=True``) replaces, consistently within one capture (numbered in order of first
appearance in sorted path order, so the same node gives the same capture), in every text file and
in the facts: link-layer addresses written as colon-separated bytes (MACs, 20-byte IPoIB addresses),
GUIDs (``xxxx:xxxx:xxxx:xxxx``), GIDs (the IPv4 of an IPv4-mapped GID, else the prefix unless link-local,
and the interface id), dotted IPv4 addresses already seen in a GID, and the host name; and the serial
number of the PCIe Device Serial Number capability in config spaces. All-zero and broadcast values
stay. ``/proc/cmdline`` is masked by an allow-list instead (:meth:`Masker.cmdline`): the values of the
parameters discovery reads (``topology.CMDLINE_KEYS``, the IOMMU ones) and of ``pci=`` stay; every other
``key=value`` keeps its key only (``key=masked``), and every bare word and everything after ``--`` (the init's
arguments) becomes ``masked``: addresses, NFS roots, iSCSI names, UUIDs, tokens and domains never leave the node.
Process names (``/proc/<pid>/comm``, which the Fabric Manager check reads) are kept.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import errno
import gzip
import io
import json
import os
import platform
import posixpath
import re
import stat
import struct
import sys
import tarfile

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.discovery.rails import guid_to_mac
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

FORMAT = 1
MANIFEST = "gpufabric-capture.json"
MAX_LINKS = 40
MAX_FILE = 1 << 20


class CaptureError(Exception):
    """A capture that cannot be made or a tarball that is not a safe capture."""


def _norm(p):
    return posixpath.normpath("/" + (p or "/").lstrip("/"))


class RecordingSysroot(Sysroot):
    """A Sysroot that notes every host path resolved through it and every directory listed."""

    def __init__(self, root=None):
        Sysroot.__init__(self, root)
        self.touched = set()
        self.listed = set()

    def path(self, *parts):
        joined = posixpath.join(*parts) if parts else "/"
        self.touched.add(_norm(joined))
        return Sysroot.path(self, *parts)

    def listdir(self, p):
        self.listed.add(_norm(p))
        return Sysroot.listdir(self, p)


class _Collector(object):
    def __init__(self, sysroot):
        self.sr = sysroot
        self.entries = {}          # host path -> ("dir",) | ("link", target) | ("file", bytes)
        self.skipped = {}          # host path -> why
        self.devices = []

    def real(self, hp):
        return Sysroot.path(self.sr, hp)

    def _dir(self, hp):
        while hp != "/" and self.entries.get(hp, ("",))[0] != "dir":
            self.entries[hp] = ("dir",)
            hp = posixpath.dirname(hp)

    def _link(self, hp, target, cur):
        """Record link ``hp`` (in directory ``cur``, already resolved); returns the target's host path."""
        resolved = posixpath.normpath(posixpath.join(cur, target))     # an absolute target replaces cur
        if target.startswith("/") or _climbs_out(cur, target):
            target = posixpath.relpath(resolved, cur)
        self._dir(cur)
        self.entries[hp] = ("link", target)
        return resolved

    def resolve(self, hp, depth=0):
        """Record the dirs and links on the way to ``hp``; its resolved host path, or None when missing."""
        if depth > MAX_LINKS:
            raise CaptureError("too many levels of symbolic links resolving %s" % hp)
        cur = "/"
        for comp in [c for c in hp.split("/") if c and c != "."]:
            if comp == "..":
                cur = posixpath.dirname(cur)
                continue
            nxt = posixpath.join(cur, comp)
            try:
                st = os.lstat(self.real(nxt))
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                resolved = self._link(nxt, os.readlink(self.real(nxt)), cur)
                cur = self.resolve(resolved, depth + 1)
                if cur is None:
                    return None
            else:
                if stat.S_ISDIR(st.st_mode):
                    self._dir(nxt)
                cur = nxt
        return cur

    def leaf(self, hp, content=True):
        try:
            st = os.stat(self.real(hp))
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            self._dir(hp)
            return
        self._dir(posixpath.dirname(hp))
        if not stat.S_ISREG(st.st_mode):
            self.entries[hp] = ("file", b"")
            self.devices.append(hp)
            return
        if not content:
            self.entries.setdefault(hp, ("file", b""))
            return
        try:
            with open(self.real(hp), "rb") as f:
                data = f.read(MAX_FILE)
        except (IOError, OSError) as e:
            self.skipped[hp] = e.strerror or str(e)
            self.entries.pop(hp, None)
            return
        self.entries[hp] = ("file", data)

    def listing(self, hp):
        real = self.resolve(hp)
        if real is None or not os.path.isdir(self.real(real)):
            return
        self._dir(real)
        for name in sorted(os.listdir(self.real(real))):
            child = posixpath.join(real, name)
            try:
                st = os.lstat(self.real(child))
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                if child not in self.entries:
                    self._link(child, os.readlink(self.real(child)), real)
            elif stat.S_ISDIR(st.st_mode):
                self._dir(child)
            elif child not in self.entries:
                self.entries[child] = ("file", b"")


def _climbs_out(cur, target):
    depth = len([c for c in cur.split("/") if c])
    for comp in target.split("/"):
        if comp == "..":
            depth -= 1
            if depth < 0:
                return True
        elif comp and comp != ".":
            depth += 1
    return False


# -- masking -------------------------------------------------------------------------------------------------------

_BYTES = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5,19}(?![0-9A-Fa-f:])")
_GID = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){7}(?![0-9A-Fa-f:])")
_GUID = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3}(?![0-9A-Fa-f:])")
_IPV4 = re.compile(r"(?<![0-9.])(?:\d{1,3}\.){3}\d{1,3}(?![0-9.])")
_V4_MAPPED = "0000:0000:0000:0000:0000:ffff:"
CMDLINE = "/proc/cmdline"
MASKED = "masked"
# a /proc/cmdline word: unquoted characters and double-quoted runs (the kernel's own quoting, lib/cmdline.c)
_CMDLINE_WORD = re.compile(r'(?:[^\s"]|"[^"]*"?)+')
_PARAM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# kept beside discovery's keys: pci= (realloc, noaer, BDF lists) explains the PCIe facts and names no one
_CMDLINE_ALSO_KEPT = frozenset(["pci"])


class Masker(object):
    """Consistent replacement of addresses and the host name (same input, same mask, within one capture)."""

    def __init__(self, hostname=None):
        self.maps = {"bytes": {}, "guid": {}, "prefix": {}, "v4": {}, "serial": {}}
        self.hostnames = sorted(set(h for h in (hostname, (hostname or "").split(".")[0]) if h and len(h) > 2),
                                key=len, reverse=True)

    def _num(self, kind, value):
        m = self.maps[kind]
        if value not in m:
            m[value] = len(m) + 1
        return m[value]

    def _bytes(self, match):
        return self.bytes_value(match.group(0))

    def bytes_value(self, text):
        raw = text.lower()
        digits = set(raw.replace(":", ""))
        if digits <= {"0"} or digits <= {"f"}:
            return text
        n = self._num("bytes", raw)
        tail = bytearray(len(raw.split(":")) - 1)
        for i in range(len(tail)):
            tail[-1 - i] = n >> (8 * i) & 0xff
        return ":".join(["02"] + ["%02x" % b for b in tail])

    def _guid64(self, raw):
        """A 64-bit id; one made from a MAC (EUI-64) is made from the masked MAC, so the pair still matches."""
        if set(raw.replace(":", "")) <= {"0"}:
            return raw
        mac = guid_to_mac(raw)
        if mac:
            b = bytearray.fromhex(self.bytes_value(mac).replace(":", ""))
            h = "%02x%02x%02xfffe%02x%02x%02x" % (b[0] ^ 0x02, b[1], b[2], b[3], b[4], b[5])
            return ":".join(h[i:i + 4] for i in range(0, 16, 4))
        n = self._num("guid", raw)
        return "0200:0000:%04x:%04x" % (n >> 16 & 0xffff, n & 0xffff)

    def _guid(self, match):
        return self._guid64(match.group(0).lower())

    def v4(self, dotted):
        octets = dotted.split(".")
        if any(int(o) > 255 for o in octets) or octets[0] in ("0", "127", "255"):
            return dotted
        n = self._num("v4", dotted)
        return "10.%d.%d.%d" % (n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff)

    def _gid(self, match):
        raw = match.group(0).lower()
        if set(raw.replace(":", "")) <= {"0"}:
            return raw
        if raw.startswith(_V4_MAPPED):
            word = int(raw[len(_V4_MAPPED):].replace(":", ""), 16)
            masked = self.v4("%d.%d.%d.%d" % (word >> 24, word >> 16 & 0xff, word >> 8 & 0xff, word & 0xff))
            a, b, c, d = (int(o) for o in masked.split("."))
            return _V4_MAPPED + "%02x%02x:%02x%02x" % (a, b, c, d)
        prefix, iid = raw[:19], raw[20:]
        if prefix != "fe80:0000:0000:0000":
            n = self._num("prefix", prefix)
            prefix = "fd00:0000:%04x:%04x" % (n >> 16 & 0xffff, n & 0xffff)
        return prefix + ":" + self._guid64(iid)

    def _known_v4(self, match):
        return self.v4(match.group(0)) if match.group(0) in self.maps["v4"] else match.group(0)

    def text(self, s):
        s = _GID.sub(self._gid, s)
        s = _BYTES.sub(self._bytes, s)
        s = _GUID.sub(self._guid, s)
        s = _IPV4.sub(self._known_v4, s)
        for h in self.hostnames:
            s = re.sub(r"(?<![A-Za-z0-9-])%s(?![A-Za-z0-9-])" % re.escape(h), "node-0", s)
        return s

    def cmdline(self, text):
        """``/proc/cmdline`` with only the allow-listed parameters' values kept (see the module docstring)."""
        out, init = [], False
        for word in _CMDLINE_WORD.findall(text):
            key, eq, _value = word.partition("=")
            if init:
                out.append(MASKED)
            elif word == "--":
                init = True
                out.append(word)
            elif eq and (topology.cmdline_discovery_arg(word) or key in _CMDLINE_ALSO_KEPT):
                out.append(word)
            elif eq and _PARAM_NAME.fullmatch(key):
                out.append(key + "=" + MASKED)
            else:
                out.append(MASKED)
        return " ".join(out) + ("\n" if text.endswith("\n") else "")

    def config(self, data):
        """Config space with the Device Serial Number capability's serial replaced."""
        off, seen = 0x100, set()
        buf = bytearray(data)
        while 0x100 <= off <= len(buf) - 12 and off not in seen:
            seen.add(off)
            header = struct.unpack_from("<I", buf, off)[0]
            if header in (0, 0xffffffff):
                break
            if header & 0xffff == 0x0003:
                serial = bytes(buf[off + 4:off + 12])
                if serial.strip(b"\0"):
                    buf[off + 4:off + 12] = struct.pack("<Q", self._num("serial", serial))
            off = header >> 20 & 0xffc
        return bytes(buf)

    def facts(self, obj):
        if isinstance(obj, dict):
            return dict((k, self.facts(v)) for k, v in obj.items())
        if isinstance(obj, list):
            return [self.facts(v) for v in obj]
        if isinstance(obj, str):
            return self.text(obj)
        return obj

    def counts(self):
        return dict((k, len(v)) for k, v in sorted(self.maps.items()))


def _mask_entries(entries, masker):
    out = {}
    # GIDs first so that their IPv4 addresses are known before dotted ones are met
    order = sorted(entries, key=lambda p: (0 if "/gids/" in p else 1, p))
    for hp in order:
        e = entries[hp]
        if e[0] == "file" and e[1]:
            if posixpath.basename(hp) == "config" and hp.startswith("/sys/"):
                out[hp] = ("file", masker.config(e[1]))
                continue
            try:
                text = e[1].decode("utf-8")
            except UnicodeDecodeError:
                out[hp] = e
                continue
            if hp == CMDLINE:
                text = masker.cmdline(text)
            out[hp] = ("file", masker.text(text).encode("utf-8"))
        else:
            out[hp] = e
    return out


# -- capture, tarball, unpack --------------------------------------------------------------------------------------

def capture(sysroot=None, gather_subset=None, mask=True):
    """One discovery pass recorded: ({"entries", "facts", "manifest"}). Reads only."""
    base = sysroot if sysroot is not None else Sysroot()
    rec = RecordingSysroot(base.root)
    facts = topology.discover(rec, gather_subset or ["all"])
    col = _Collector(rec)
    for hp in sorted(rec.listed):
        col.listing(hp)
    for hp in sorted(rec.touched):
        real = col.resolve(hp)
        if real is not None:
            col.leaf(real)
    entries = col.entries
    manifest = {"format": FORMAT, "architecture": platform.machine(), "gather_subset": list(gather_subset or ["all"]),
                "masked": bool(mask), "unreadable": dict(sorted(col.skipped.items())),
                "device_nodes_as_files": sorted(set(col.devices))}
    if mask:
        hostname = base.read("/proc/sys/kernel/hostname")
        masker = Masker(hostname)
        entries = _mask_entries(entries, masker)
        facts = masker.facts(facts)
        manifest["mask_counts"] = dict(masker.counts(), hostname=1 if masker.hostnames else 0)
    return {"entries": entries, "facts": facts, "manifest": manifest}


def _info(name, kind, size=0, target=None):
    ti = tarfile.TarInfo(name)
    ti.mtime = 0
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    if kind == "dir":
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
    elif kind == "link":
        ti.type, ti.mode, ti.linkname = tarfile.SYMTYPE, 0o777, target
    else:
        ti.type, ti.mode, ti.size = tarfile.REGTYPE, 0o644, size
    return ti


def tarball(cap):
    """The capture as gzip-compressed tar bytes, deterministic for the same capture."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        manifest = (json.dumps(cap["manifest"], indent=1, sort_keys=True) + "\n").encode("utf-8")
        tar.addfile(_info(MANIFEST, "file", len(manifest)), io.BytesIO(manifest))
        for hp in sorted(cap["entries"]):
            e = cap["entries"][hp]
            name = hp.lstrip("/")
            if e[0] == "file":
                tar.addfile(_info(name, "file", len(e[1])), io.BytesIO(e[1]))
            elif e[0] == "link":
                tar.addfile(_info(name, "link", target=e[1]))
            else:
                tar.addfile(_info(name, "dir"))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def facts_json(cap):
    return json.dumps(cap["facts"], indent=1, sort_keys=True) + "\n"


def check_members(tar):
    """CaptureError unless every member is a file, directory or relative symlink that stays inside the root."""
    for m in tar.getmembers():
        name = m.name
        if name.startswith("/") or ".." in name.split("/") or not (m.isfile() or m.isdir() or m.issym()):
            raise CaptureError("unsafe member %r in capture (only relative files, directories and symlinks)" % name)
        if m.issym():
            if m.linkname.startswith("/") or _climbs_out(posixpath.dirname("/" + name), m.linkname):
                raise CaptureError("symlink %s -> %s points outside the capture" % (name, m.linkname))


def unpack(path, dest):
    """Unpack a capture tarball below ``dest`` (checked first; the tarfile data filter when Python has it)."""
    with tarfile.open(path, "r:*") as tar:
        check_members(tar)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)
    return dest


def write_capture(out_prefix, cap):
    """Write ``<out_prefix>.tar.gz`` and ``<out_prefix>.facts.json`` atomically; [(path, changed)]."""
    host = Sysroot("/")
    written = []
    for path, data in ((out_prefix + ".tar.gz", tarball(cap)), (out_prefix + ".facts.json",
                                                                facts_json(cap).encode("utf-8"))):
        path = os.path.abspath(path)
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except (IOError, OSError) as e:
            if e.errno != errno.ENOENT:
                raise
            same = False
        if not same:
            host.write_file_atomic(path, data)
        written.append((path, not same))
    return written


def main(argv=None):
    """Command line: ``python3 -m ansible_collections.gpufabric.node.plugins.module_utils.report.capture --out PREFIX``."""
    p = argparse.ArgumentParser(prog="gpufabric-capture", description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--out", required=True, help="output prefix: writes OUT.tar.gz and OUT.facts.json")
    p.add_argument("--no-mask", action="store_true", help="keep addresses and the host name as they are")
    p.add_argument("--subset", action="append", help="gather_subset entry (repeatable; default all)")
    args = p.parse_args(argv)
    cap = capture(Sysroot(), args.subset, mask=not args.no_mask)
    lines = ["%s %s\n" % ("wrote" if changed else "unchanged", path) for path, changed in write_capture(args.out, cap)]
    sys.stdout.write("".join(lines))
    if cap["manifest"]["unreadable"]:
        sys.stderr.write("unreadable (left out): %s\n" % ", ".join(sorted(cap["manifest"]["unreadable"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
