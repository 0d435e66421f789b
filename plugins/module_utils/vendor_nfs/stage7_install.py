# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install stage of the vendor NFS client: install a verified build for its kernel without loading
anything (package or copy, ``depmod``, initramfs) and record it for the pre-reboot gate.

Compressed modules: a kernel built with ``CONFIG_MODULE_COMPRESS_{GZIP,XZ,ZSTD}`` installs its modules as
``.ko.gz``/``.ko.xz``/``.ko.zst`` (``scripts/Makefile.modinst``), and so does DKMS for it. :func:`target_compression`
tells which from the target's ``/lib/modules/<k>/kernel/**`` files, else from its config. Modules of a package land
as the package has them (what dpkg/rpm would install); bare modules (profile ``kbuild``) are copied in the target's
compression. Installed files are compared by their decompressed content, so a module compressed by another zstd
build is the same module; another variant of the same module next to it (``x.ko`` beside ``x.ko.zst``, which
depmod could pick instead) is removed.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage5_builder import artifact_path
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import STATE_FILE, KmodBuildError, read_record
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import (
    KINDS, CodecUnavailable, Codecs, module_kind, module_name, sibling_paths, sniff, with_kind)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.inspect import read_module
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage6_package import extract_package


# --------------------------------------------------------------------------- install + record

def read_state(sysroot):
    """The record to update: the one on the node, or a new one when there is none or it cannot be used
    (kmod_common.read_record), which the next write replaces."""
    doc, _problem = read_record(sysroot)
    if not doc:
        return {"version": 1, "kernels": {}}
    if not isinstance(doc.get("kernels"), dict):
        doc["kernels"] = {}
    return doc


# Kernel configs that name the module compression: the installed config, then the headers' copy.
CONFIG_PATHS = ("/boot/config-{k}", "/lib/modules/{k}/config", "/usr/src/linux-headers-{k}/.config")
_CONFIG_KINDS = (("CONFIG_MODULE_COMPRESS_ZSTD", "zstd"), ("CONFIG_MODULE_COMPRESS_XZ", "xz"),
                 ("CONFIG_MODULE_COMPRESS_GZIP", "gzip"))
SAMPLE_MODULES = 64


def target_compression(sysroot, kver):
    """How kernel ``kver`` stores its modules: {"compression": KIND, "source": where that was seen}.

    The kernel's own modules (``/lib/modules/<k>/kernel/**``, the most common suffix of the first 64) win; else its
    config (``CONFIG_MODULE_COMPRESS_ZSTD=y`` ...; before 5.13 with ``CONFIG_MODULE_COMPRESS=y``); else ``none``.
    """
    base = "/lib/modules/%s/kernel" % kver
    counts, seen = {}, 0
    for _dirpath, dirnames, filenames in os.walk(sysroot.path(base)):
        dirnames.sort()
        for fn in sorted(filenames):
            kind = module_kind(fn)
            if kind:
                counts[kind] = counts.get(kind, 0) + 1
                seen += 1
        if seen >= SAMPLE_MODULES:
            break
    if counts:
        kind = sorted(counts, key=lambda k: (-counts[k], KINDS.index(k)))[0]
        return {"compression": kind, "source": "%s (%d of %d modules)" % (base, counts[kind], seen)}
    for pattern in CONFIG_PATHS:
        path = pattern.format(k=kver)
        text = sysroot.read_raw(path)
        if not text:
            continue
        for option, kind in _CONFIG_KINDS:
            if re.search(r"^%s=y[ \t]*$" % option, text, re.M):
                return {"compression": kind, "source": "%s=y in %s" % (option, path)}
        return {"compression": "none", "source": "%s (no CONFIG_MODULE_COMPRESS_*=y)" % path}
    return {"compression": "none", "source": "default (no module of %s and no config found)" % kver}


def placements(manifest, method, compression="none"):
    """[(module of the manifest, path on the node, compression there)]: a package's modules as the package has
    them; bare modules (``kind: ko`` artifacts) copied in ``compression``, the target kernel's."""
    bare = set()
    for a in manifest["artifacts"]:
        if a["kind"] == "ko":
            bare.update(a["modules"])
    out = []
    for m in manifest["modules"]:
        path = m["installed_path"]
        if method != "package" and path in bare:
            path = with_kind(path, compression)
        out.append((m, path, module_kind(path)))
    return out


def _stale_siblings(sysroot, path):
    return [p for p in sibling_paths(path) if p != path and os.path.lexists(sysroot.path(p))]


def installed_problems(sysroot, manifest, places=None, codecs=None):
    """What differs between the manifest's modules and the node's files for its kernel (empty = installed).
    Files are compared by their decompressed content (``sha256`` of the manifest)."""
    problems = []
    if places is None:
        places = placements(manifest, "copy", target_compression(sysroot, manifest["kver"])["compression"])
    for m, p, kind in places:
        if not sysroot.exists(p):
            problems.append("%s is missing" % p)
            continue
        try:
            data, stored, _fsha = read_module(sysroot.path(p), codecs)
        except CodecUnavailable:
            raise
        except KmodBuildError as e:
            problems.append("%s differs from the verified build (%s)" % (p, e))
            continue
        if hashlib.sha256(data).hexdigest() != m["sha256"]:
            problems.append("%s differs from the verified build" % p)
        elif stored != kind:
            problems.append("%s is stored %s, its name says %s" % (p, stored, kind))
        for sib in _stale_siblings(sysroot, p):
            problems.append("%s is also there: depmod could pick it instead of %s" % (sib, p))
    return problems


def install_drift(sysroot, manifest, places, codecs=None):
    """Drift entries (concern vendor_nfs) of the modules whose installed content is not the verified build's."""
    out = []
    for m, p, _kind in places:
        real = sysroot.path(p)
        current = None
        if os.path.isfile(real):
            try:
                current = hashlib.sha256(read_module(real, codecs)[0]).hexdigest()
            except CodecUnavailable:
                raise
            except KmodBuildError:
                current = "unreadable"
        stale = _stale_siblings(sysroot, p)
        if current != m["sha256"] or stale:
            out.append({"concern": "vendor_nfs", "object": "%s/%s" % (manifest["kver"], m["name"]), "key": "sha256",
                        "current": current, "desired": m["sha256"], "path": p, "stale": stale})
    return out


def modules_dep_paths(sysroot, kver):
    """{module name: path} as modules.dep resolves them (what modprobe would load); entries name the file as
    installed (``kernel/net/sunrpc/sunrpc.ko.zst``)."""
    raw = sysroot.read_raw("/lib/modules/%s/modules.dep" % kver) or ""
    out = {}
    for line in raw.splitlines():
        if ":" not in line:
            continue
        path = line.split(":", 1)[0].strip()
        name = module_name(path)
        if not name:
            continue
        if not path.startswith("/"):
            path = "/lib/modules/%s/%s" % (kver, path)
        out.setdefault(name, path)
    return out


def install_plan(sysroot, manifest, method, places=None, codecs=None):
    """(actions, problems): what installing the manifest would do on this node."""
    if places is None:
        places = placements(manifest, method, target_compression(sysroot, manifest["kver"])["compression"])
    problems = installed_problems(sysroot, manifest, places, codecs)
    actions = []
    if problems:
        actions.append("package" if method == "package" else "copy")
        actions.append("depmod")
    else:
        dep = modules_dep_paths(sysroot, manifest["kver"])
        if [m["name"] for m, p, _k in places if dep.get(m["name"].replace("-", "_")) != p]:
            actions.append("depmod")
    rec = read_state(sysroot)["kernels"].get(manifest["kver"], {})
    recorded = dict((n, v.get("path")) for n, v in rec.get("modules", {}).items())
    if rec.get("key") != manifest["key"] or recorded != dict((m["name"], p) for m, p, _k in places) or actions:
        actions.append("record")
    return actions, problems


def resolve_method(sysroot, manifest, method):
    """``auto`` -> ``package`` on the node's real root with a package build, else ``copy``."""
    if method == "auto":
        return "package" if sysroot.is_host and any(a["kind"] in ("deb", "rpm") for a in manifest["artifacts"]) \
            else "copy"
    return method


def install(run, tools, sysroot, cache_dir, manifest, method="auto", initramfs="auto", check_mode=False,
            codecs=None, compression=None):
    """Install the verified build for its kernel without loading anything. Returns a result dict.

    ``compression`` forces the compression of bare modules (default: :func:`target_compression`)."""
    kver = manifest["kver"]
    method = resolve_method(sysroot, manifest, method)
    if method == "package" and not sysroot.is_host:
        raise KmodBuildError("install_method=package needs the node's real root; use copy for a sysroot")
    codecs = codecs or Codecs(run, tools)
    target = {"compression": compression, "source": "given"} if compression else target_compression(sysroot, kver)
    places = placements(manifest, method, target["compression"])
    actions, before = install_plan(sysroot, manifest, method, places, codecs)
    result = {"method": method, "actions": actions, "problems_before": before, "initramfs": False,
              "compression": target, "paths": dict((m["name"], p) for m, p, _k in places)}
    if not actions or check_mode:
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
            _copy_install(run, tools, sysroot, cache_dir, manifest, places, codecs)
        for _m, p, _k in places:
            for sib in _stale_siblings(sysroot, p):
                sysroot.remove(sib)
        left = installed_problems(sysroot, manifest, places, codecs)
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
        "modules": dict((m["name"], {"path": p, "sha256": m["sha256"], "srcversion": m["srcversion"],
                                     "compression": kind}) for m, p, kind in places),
        "installed_at": int(time.time()),
    }
    sysroot.write_file_atomic(STATE_FILE, json.dumps(rec, indent=2, sort_keys=True) + "\n")
    result["codecs"] = dict(codecs.used)
    return result


def _copy_install(run, tools, sysroot, cache_dir, manifest, places, codecs):
    tmp = tempfile.mkdtemp(prefix=".install-", dir=os.path.join(cache_dir, manifest["key"]))
    try:
        srcs = {}
        for a in manifest["artifacts"]:
            path = artifact_path(cache_dir, manifest, a)
            if a["kind"] == "ko":
                srcs[a["modules"][0]] = path
            else:
                sub = os.path.join(tmp, os.path.basename(a["file"]))
                extract_package(path, sub, run, tools, codecs=codecs)
                srcs.update((rel, os.path.join(sub, rel.lstrip("/"))) for rel in a["modules"])
        for m, dest, kind in places:
            with open(srcs[m["installed_path"]], "rb") as f:
                raw = f.read()
            if (sniff(raw) or "none") != kind:
                raw = codecs.compress(codecs.decompress(raw, what=m["installed_path"]), kind, what=dest)
            sysroot.write_file_atomic(dest, raw, mode=0o644)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def initramfs_has_modules(run, tools, initrd, names):
    """Whether the initramfs holds one of ``names`` (``x.ko``, ``x.ko.gz``, ``x.ko.xz``, ``x.ko.zst``)."""
    if not tools.get("lsinitramfs"):
        return True
    rc, out, _err = run([tools["lsinitramfs"], initrd])
    if rc != 0:
        return True
    wanted = set(n.replace("-", "_") for n in names)
    return any(module_name(os.path.basename(line.strip())) in wanted for line in out.splitlines())


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
