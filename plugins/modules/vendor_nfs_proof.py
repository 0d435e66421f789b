#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vendor_nfs_proof
short_description: Prove that the vendor NFS client is installed for a kernel, or running after the boot
version_added: 0.1.0
description:
  - Read-only checks of the storage vendor's NFS client, for the kernel-upgrade journey.
  - O(stage=installed) is the gate before a reboot. The verified build for O(kernel_release) is recorded in
    C(/etc/gpufabric/vendor_nfs.json) (written by M(gpufabric.node.vendor_nfs_build)), every module file is present
    with the recorded sha256, its vermagic names that kernel, C(rpcrdma) exports C(rpcrdma_register_nvfs_dma_ops),
    and C(modules.dep) of that kernel resolves every module name to the vendor's file (what modprobe loads at boot).
  - O(stage=running) is the proof after the boot. C(uname -r) (C(/proc/sys/kernel/osrelease)) is the target. Every
    loaded client module has C(/sys/module/<m>/srcversion) equal to the installed file's srcversion.
    C(/sys/module/sunrpc/parameters/nfs_bundle_version) exists. When nvidia-fs is loaded,
    C(/proc/driver/nvidia-fs/modules) lists C(rpcrdma) while the module holds C(/dev/nvidia-fs<N>) open (nvidia-fs
    registers storage modules only while one of its devices is open - an idle healthy node lists none - so the
    file is never read idle). A node that booted the in-tree NFS stack, or a client whose rpcrdma does not register with
    nvidia-fs, keeps working storage with GDS off and no error anywhere; this is the check that notices.
  - Modules may be compressed (C(.ko.gz), C(.ko.xz), C(.ko.zst); Ubuntu 24.04's DKMS installs C(.ko.zst)); vermagic,
    exports and srcversion are read from the decompressed module, and C(modules.dep) entries name the compressed
    files. zstd needs the C(zstd) or C(unzstd) tool or the C(zstandard) Python package (or, from Python 3.14, its
    standard library); without one the module fails saying what to install. RV(compression) tells which was used.
  - Fails with every problem listed when the proof does not hold (unless O(fail_on_problems=false)).
author:
  - gpufabric developers (@gpufabric)
options:
  stage:
    description: C(installed) before rebooting into the kernel, C(running) after the boot.
    type: str
    choices: [installed, running]
    required: true
  kernel_release:
    description: The target kernel release.
    type: str
    required: true
  version:
    description: The expected vendor client version (O(stage=installed)); not compared when omitted.
    type: str
  require_loaded:
    description: Modules that must be loaded at O(stage=running) (others are checked only when loaded).
    type: list
    elements: str
    default: [sunrpc]
  other_modules:
    description:
      - O(stage=installed) only. Other out-of-tree modules the node needs after booting O(kernel_release), such as
        C(nvidia), C(nvidia-fs) or a site's drivers built by DKMS. C(modules.dep) of that kernel must resolve each
        name to a file whose vermagic names that kernel, or the gate fails.
    type: list
    elements: str
    default: []
  nvidia_fs:
    description: C(auto) checks C(/proc/driver/nvidia-fs/modules) when nvidia-fs is loaded, C(required) fails when it
      is not loaded, C(ignore) skips it.
    type: str
    choices: [auto, required, ignore]
    default: auto
  fail_on_problems:
    description: Fail when the proof does not hold; otherwise return RV(proven=false) with the problems.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same checks in check mode.
  diff_mode:
    support: none
    description: No diff is produced; RV(drift) lists the deviations.
  platform:
    support: full
    platforms: posix
    description: Linux; reads /proc, /sys and /lib/modules of the node.
"""

EXAMPLES = r"""
- name: Refuse to reboot unless the vendor client for the new kernel is installed
  gpufabric.node.vendor_nfs_proof:
    stage: installed
    kernel_release: 6.1.0-56-amd64
    version: "4.0.35"
    other_modules: [nvidia, nvidia-fs]

- name: After the boot, prove the vendor client (and its nvidia-fs hook) is what runs
  gpufabric.node.vendor_nfs_proof:
    stage: running
    kernel_release: 6.1.0-56-amd64
    require_loaded: [sunrpc, rpcrdma]
"""

RETURN = r"""
proven:
  description: Whether every check held.
  returned: always
  type: bool
problems:
  description: One sentence per failed check.
  returned: always
  type: list
  elements: str
stage:
  description: The stage checked.
  returned: always
  type: str
kernel_release:
  description: The target kernel.
  returned: always
  type: str
running_release:
  description: The running kernel (O(stage=running)).
  returned: when O(stage=running)
  type: str
modules:
  description: Per module the installed path, resolved path, vermagic and srcversion (installed), or loaded state and
    both srcversions (running).
  returned: always
  type: dict
other_modules:
  description: Per name in O(other_modules) the file modules.dep resolves it to, its vermagic and its C(compression).
  returned: when O(stage=installed)
  type: dict
nfs_bundle_version:
  description: Value of C(/sys/module/sunrpc/parameters/nfs_bundle_version).
  returned: when O(stage=running)
  type: str
nvidia_fs:
  description:
    - Whether nvidia-fs is C(loaded); when it was checked, the C(device) held open during the read, C(held),
      C(modules) (what C(/proc/driver/nvidia-fs/modules) listed then, version as printed, e.g. C(rpcrdma) V((null)))
      and C(error) (why the read proves nothing, else null).
  returned: when O(stage=running)
  type: dict
  sample: {"loaded": true, "device": "/dev/nvidia-fs0", "held": true, "error": null,
           "modules": {"wekafsio": "1", "rpcrdma": "(null)"}}
compression:
  description: C(codecs) maps each compression that had to be read to what read it (V(python:gzip), V(python:lzma),
    V(python:compression.zstd), V(python:zstandard), V(binary:/usr/bin/zstd)).
  returned: always
  type: dict
  sample: {"codecs": {"zstd": "binary:/usr/bin/zstd"}}
drift:
  description: One entry per failed check (concern C(vendor_nfs)).
  returned: always
  type: list
  elements: dict
concerns:
  description:
    - The status of concern C(vendor_client) (see C(docs/concerns.md)) - C(status), C(reason), C(items).
    - V(ok) when every check of the stage held; V(drift) when one did not (C(reason) lists the problems, C(items) one
      per problem); V(error) when the proof could not be made (bad input, state unreadable).
  returned: always
  type: dict
  sample: {"vendor_client": {"status": "drift", "reason": "the vendor NFS client is not proven running on ...",
                             "items": [{"concern": "vendor_client", "object": "6.1.0-56-amd64", "key": "running",
                                        "current": "rpcrdma is not listed in ...", "desired": "proven"}]}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proofs as proof_concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner


def make_runner(module):
    return CommandRunner(module)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            stage=dict(type="str", required=True, choices=["installed", "running"]),
            kernel_release=dict(type="str", required=True),
            version=dict(type="str"),
            require_loaded=dict(type="list", elements="str", default=["sunrpc"]),
            other_modules=dict(type="list", elements="str", default=[]),
            nvidia_fs=dict(type="str", default="auto", choices=["auto", "required", "ignore"]),
            fail_on_problems=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params

    def fail(msg):
        module.fail_json(msg=msg, concerns={"vendor_client": proof_concerns.failed("vendor_client", msg)})

    try:
        kver = kb.validate_kver(p["kernel_release"])
    except ValueError as e:
        fail(str(e))
    for key in ("other_modules", "require_loaded"):
        bad = [n for n in p[key] if not kb.MODULE_NAME_RE.match(n)]
        if bad:
            fail("%s: %s is not a kernel module name" % (key, ", ".join(repr(n) for n in bad)))
    if p["version"] is not None:
        try:
            kb.validate_version(p["version"])
        except ValueError as e:
            fail("version: %s" % e)
    if p["other_modules"] and p["stage"] != "installed":
        fail("other_modules is checked at stage=installed (the gate before the reboot)")
    sysroot = Sysroot()
    codecs = kb.Codecs(make_runner(module), dict((t, module.get_bin_path(t)) for t in ("zstd", "unzstd")))
    try:
        if p["stage"] == "installed":
            res = kb.prove_installed(sysroot, kver, version=p["version"], other_modules=p["other_modules"],
                                     codecs=codecs)
        else:
            res = kb.prove_running(sysroot, kver, require_loaded=p["require_loaded"], nvidia_fs=p["nvidia_fs"],
                                   codecs=codecs)
    except (kb.KmodBuildError, OSError, IOError) as e:
        fail("vendor NFS client proof for %s could not be read: %s" % (kver, e))
    res.pop("record", None)
    res["compression"] = {"codecs": dict(codecs.used)}
    res["changed"] = False
    res["drift"] = [{"concern": "vendor_nfs", "object": kver, "key": p["stage"], "current": prob,
                     "desired": "proven"} for prob in res["problems"]]
    items = [dict(d, concern="vendor_client") for d in res["drift"]]
    res["concerns"] = {"vendor_client": proof_concerns.vendor_client_status(res, items)}
    if p["fail_on_problems"] and not res["proven"]:
        module.fail_json(msg="vendor NFS client %s for kernel %s not proven: %s" % (
            "installation" if p["stage"] == "installed" else "runtime", kver, "; ".join(res["problems"])), **res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
