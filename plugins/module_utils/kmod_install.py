# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install stage of the vendor NFS client: install a verified build for its kernel without loading
anything (package or copy, ``depmod``, initramfs) and record it for the pre-reboot gate.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import tempfile
import time

from ansible_collections.gpufabric.node.plugins.module_utils.kmod_builder import artifact_path
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_common import STATE_FILE, KmodBuildError, sha256_file
from ansible_collections.gpufabric.node.plugins.module_utils.kmod_package import extract_package


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
