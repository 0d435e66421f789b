# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proofs of the vendor NFS client: the gate before rebooting into a kernel (installed, what
modprobe would load) and the proof after the boot (running, srcversion, nvidia-fs registration).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import (
    BUNDLE_PARAM, NVFS_SYMBOL, RDMA_MODULE, SIGNATURE_MAGIC, STATE_FILE, KmodBuildError)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.compress import CodecUnavailable
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.inspect import (
    exported_symbols, modinfo_fields, parse_vermagic, read_module)
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.stage7_install import modules_dep_paths, read_state


# --------------------------------------------------------------------------- proofs (pre-reboot gate, post-boot)

def _installed_module_facts(sysroot, path, codecs=None):
    """Facts of an installed module file, compressed or not (``sha256`` of the ELF content); None when it is
    missing; {"error": why} when it is no readable module (a missing decompressor raises: nothing was proven)."""
    real = sysroot.path(path)
    if not os.path.isfile(real):
        return None
    try:
        data, kind, _file_sha = read_module(real, codecs)
    except CodecUnavailable:
        raise
    except KmodBuildError as e:
        return {"error": str(e)}
    info = modinfo_fields(data)
    return {"vermagic": (info.get("vermagic") or [""])[0], "srcversion": (info.get("srcversion") or [""])[0],
            "exports": exported_symbols(data), "sha256": hashlib.sha256(data).hexdigest(),
            "signed": data.endswith(SIGNATURE_MAGIC), "compression": kind}


def other_modules_problems(sysroot, kver, names, dep=None, codecs=None):
    """Other out-of-tree modules the node needs after booting ``kver`` (the NVIDIA driver, nvidia-fs, a site's
    drivers built by DKMS): modules.dep of ``kver`` must resolve each name to a file whose vermagic names ``kver``.

    Returns ({name: {"path", "vermagic", "compression"}}, [problems]).
    """
    dep = modules_dep_paths(sysroot, kver) if dep is None else dep
    facts, problems = {}, []
    for name in names:
        path = dep.get(name.replace("-", "_"))
        entry = {"path": path, "vermagic": None, "compression": None}
        facts[name] = entry
        if not path:
            problems.append("modprobe %s on kernel %s finds no module: build and install it for %s (DKMS, the "
                            "vendor's package) before rebooting" % (name, kver, kver))
            continue
        info = _installed_module_facts(sysroot, path, codecs)
        if info is None:
            problems.append("modules.dep of %s lists %s for %s but the file is missing (run depmod %s)"
                            % (kver, path, name, kver))
            continue
        if "error" in info:
            problems.append("modules.dep of %s resolves %s to a file that is no kernel module: %s"
                            % (kver, name, info["error"]))
            continue
        entry["vermagic"], entry["compression"] = info["vermagic"], info["compression"]
        try:
            release = parse_vermagic(info["vermagic"])["release"]
        except ValueError:
            release = ""
        if release != kver:
            problems.append("%s (for %s) has vermagic %r, not for kernel %s" % (path, name, info["vermagic"], kver))
    return facts, problems


def prove_installed(sysroot, kver, require_symbol=True, version=None, other_modules=(), codecs=None):
    """Gate before rebooting into ``kver``: the verified client is installed and modprobe would pick it; every
    name in ``other_modules`` resolves to a module built for ``kver``.

    Returns {"proven": bool, "problems": [...], "modules": {name: {...}}, "other_modules": {...}, "record": {...}}.
    """
    problems = []
    rec = read_state(sysroot)["kernels"].get(kver)
    out = {"kernel_release": kver, "stage": "installed", "modules": {}, "record": rec or {}, "other_modules": {}}
    if other_modules:
        out["other_modules"], problems = other_modules_problems(sysroot, kver, other_modules, codecs=codecs)
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
        facts = _installed_module_facts(sysroot, m["path"], codecs)
        entry = {"path": m["path"], "resolved": dep.get(name.replace("-", "_"))}
        out["modules"][name] = entry
        if facts is None:
            problems.append("%s is missing" % m["path"])
            continue
        if "error" in facts:
            problems.append("%s differs from the verified build: %s" % (m["path"], facts["error"]))
            continue
        entry.update(vermagic=facts["vermagic"], srcversion=facts["srcversion"], signed=facts["signed"],
                     compression=facts["compression"])
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


def prove_running(sysroot, kver, require_loaded=("sunrpc",), nvidia_fs="auto", codecs=None):
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
        facts = _installed_module_facts(sysroot, m["path"], codecs)
        want = facts["srcversion"] if facts and "error" not in facts else m.get("srcversion")
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
