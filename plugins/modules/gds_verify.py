#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gds_verify
short_description: Prove that GPUDirect Storage moves data on a node, by counters and by the data itself
version_added: 0.1.0
description:
  - Reports the GDS preconditions one by one (each V(ok), V(fail) or V(skip) with a reason) - the open NVIDIA kernel
    module, nvidia-fs loaded and its version, the storage module (C(rpcrdma)) listed in
    C(/proc/driver/nvidia-fs/modules) while the module holds C(/dev/nvidia-fs<N>) open (nvidia-fs registers storage
    modules only while one of its devices is open, so an idle healthy node lists none), the IOMMU in identity mode or off, the vendor NFS client loaded
    (C(/sys/module/sunrpc/parameters/nfs_bundle_version), the loaded C(rpcrdma) srcversion equal to
    C(modinfo -F srcversion rpcrdma)), the mount holding O(path) using C(proto=rdma), and C(/etc/cufile.json) valid.
  - Then makes a test transfer with cuFile compatibility mode B(off) (a generated cufile.json through
    C(CUFILE_ENV_PATH_JSON) with C(properties.allow_compat_mode=false), plus C(CUFILE_ALLOW_COMPAT_MODE=false)) -
    writes a random pattern from GPU memory to a file in O(path), verifies the file's bytes, reads it back into the
    GPU and verifies every byte. Short writes are continued and reported. C(rw_stats_enabled) of nvidia-fs is
    switched on for the transfer and restored afterwards, also when the transfer fails.
  - The transfer runs in a separate process (the node's Python with the collection's small ctypes program over
    libcufile and libcudart, or C(gdsio) when present), so a crash inside libcufile cannot kill the module.
  - RV(gds_active) is true only when the data matched B(and) the nvidia-fs read and write counters moved by at
    least the transfer's size. A completed transfer with compat mode allowed proves nothing (cuFile falls back to
    POSIX I/O without telling), and the cuFile control path succeeds even when every real transfer fails.
  - A negative verdict is not a module failure; use C(failed_when) on RV(gds_active). The module fails only on bad
    input.
  - Every proof that made its test transfer is recorded on the node in C(/var/lib/gpufabric/gds_verdict.json)
    (verdict, compat fallback, time, path, size; written atomically, root, 0644), from which the evidence timer and
    M(gpufabric.node.fabric_metrics) export the verdict and its age (docs/metrics.md). Check mode and a proof that
    stopped at its preconditions leave the last record as it is. The record is evidence, not configuration, so the
    module still reports C(changed) false.
author:
  - gpufabric developers (@gpufabric)
options:
  path:
    description: Directory on the file system to test (normally on the NFS over RDMA mount). A private
      subdirectory and test file are created and removed there.
    type: path
    required: true
  size_mib:
    description: Size of the test transfer in MiB (1 to 4096). nvidia-fs counts whole MiB.
    type: int
    default: 16
  gpu:
    description: CUDA index of the GPU to transfer from and to.
    type: int
    default: 0
  method:
    description: V(auto) uses C(gdsio) when it is found, else the collection's cuFile program; V(probe) always
      uses the program; V(gdsio) requires C(gdsio).
    type: str
    choices: [auto, probe, gdsio]
    default: probe
  gdsio_path:
    description: Path of C(gdsio); looked up on C(PATH) and in C(/usr/local/cuda/gds/tools) when omitted.
    type: path
  python:
    description: Python interpreter that runs the cuFile program; the module's own interpreter when omitted.
    type: path
  storage_module:
    description: The module name nvidia-fs must list in C(/proc/driver/nvidia-fs/modules).
    type: str
    default: rpcrdma
  nfs_rdma:
    description: Check the NFS over RDMA preconditions (vendor client, C(proto=rdma) mount). V(false) reports them
      as skipped (for local NVMe tests).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports the preconditions only - no transfer, no parameter write.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux with an NVIDIA GPU; nvidia-fs, libcufile and libcudart for a positive verdict.
notes:
  - Needs a CUDA-capable GPU, libcufile and libcudart on the node for the transfer.
"""

EXAMPLES = r"""
- name: Prove GDS on the RDMA mount (fail the play when it is not active)
  gpufabric.node.gds_verify:
    path: /mnt/datasets-rdma/gds-check
    size_mib: 64
  register: gds
  failed_when: not gds.gds_active

- name: Preconditions only
  gpufabric.node.gds_verify:
    path: /mnt/datasets-rdma
  check_mode: true
  register: gds_pre
"""

RETURN = r"""
gds_active:
  description: True when the data matched and the nvidia-fs read/write counters moved by at least the expected amount.
  returned: always
  type: bool
reasons:
  description: Plain sentences saying why GDS is not proven (empty when it is).
  returned: always
  type: list
  elements: str
warnings:
  description: Findings that did not decide the verdict (short writes that were completed, restore problems).
  returned: always
  type: list
  elements: str
preconditions:
  description: One entry per precondition - C(name), C(status) (ok/fail/skip), C(ok), C(reason), C(value).
  returned: always
  type: list
  elements: dict
preconditions_ok:
  description: No precondition failed.
  returned: always
  type: bool
compat_fallback_suspected:
  description: The data matched although nvidia-fs did not carry it (cuFile fell back to POSIX I/O).
  returned: always
  type: bool
verdict_record:
  description: The record written to C(/var/lib/gpufabric/gds_verdict.json); null when none was written (check mode,
    no transfer, or the write failed - then a warning says why).
  returned: always
  type: dict
  sample: {schema: gpufabric.gds-verdict/v1, time: 1764600000.0, gds_active: true, compat_fallback_suspected: false,
           path: /mnt/gds, size_mib: 16}
transfer:
  description: The report of the cuFile program or gdsio (return codes of every call, bytes moved, data checks,
    the tail of the cuFile log).
  returned: when not in check mode
  type: dict
counters:
  description: nvidia-fs read/write counters C(before), C(after) and C(delta) (values null when not printed).
  returned: when not in check mode
  type: dict
expected:
  description: The least counter movement that proves the transfer (C(writes), C(write_mib), C(reads), C(read_mib)).
  returned: always
  type: dict
rw_stats_enabled:
  description: C(before), C(during), C(restored) of the nvidia-fs parameter.
  returned: when not in check mode
  type: dict
method:
  description: C(probe) or C(gdsio).
  returned: when not in check mode
  type: str
drift:
  description: One entry (concern C(gds)) per failed precondition, and one for an inactive verdict.
  returned: always
  type: list
  elements: dict
concerns:
  description:
    - The status of concern C(gds) (see C(docs/concerns.md)) - C(status), C(reason), C(items).
    - V(ok) when the counted transfer proved GDS; V(drift) when it did not or (check mode) a precondition fails,
      C(items) being the RV(drift) entries; V(not_checked) in check mode when every precondition holds (no transfer
      was made); V(error) when the module fails (bad input, the transfer could not be prepared).
  returned: always
  type: dict
  sample: {"gds": {"status": "drift", "reason": "check mode: 1 precondition(s) fail: nvidia_fs_storage_module: ...",
                   "items": [{"concern": "gds", "object": "nvidia_fs_storage_module", "key": "precondition",
                              "current": "rpcrdma is not listed ...", "desired": "ok"}]}}
"""

import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import MODULE_NAME_RE
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proofs as proof_concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner


def make_runner(module):
    return CommandRunner(module)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            size_mib=dict(type="int", default=16),
            gpu=dict(type="int", default=0),
            method=dict(type="str", default="probe", choices=["auto", "probe", "gdsio"]),
            gdsio_path=dict(type="path"),
            python=dict(type="path"),
            storage_module=dict(type="str", default="rpcrdma"),
            nfs_rdma=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    try:
        # the test file's directory: a path of portable characters (it names where the module writes)
        inputs.safe_path(p["path"].rstrip("/") or "/", "path")
        if p["gdsio_path"] is not None:
            inputs.safe_path(p["gdsio_path"], "gdsio_path")
        if p["python"] is not None:
            inputs.safe_path(p["python"], "python")
    except inputs.InputError as e:
        module.fail_json(msg=str(e))
    if not MODULE_NAME_RE.match(p["storage_module"]):
        module.fail_json(msg="storage_module: %r is not a kernel module name" % p["storage_module"])
    gdsio = p["gdsio_path"]
    if gdsio is None and p["method"] in ("auto", "gdsio"):
        gdsio = module.get_bin_path("gdsio", opt_dirs=["/usr/local/cuda/gds/tools"])
    if p["method"] == "gdsio" and not gdsio:
        module.fail_json(msg="method=gdsio but gdsio was found neither on PATH nor in /usr/local/cuda/gds/tools")
    modinfo = module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"])
    # one writer of node state at a time (nodelock.py): the test transfer sets rw_stats_enabled and restores it
    with nodelock.for_module(module, Sysroot(), "gds_verify", fail=lambda msg: module.fail_json(
            msg=msg, concerns={"gds": proof_concerns.failed("gds", msg)})):
        try:
            res = nvfs.verify(Sysroot(), p["path"], size_mib=p["size_mib"], gpu=p["gpu"], run=make_runner(module),
                              python=p["python"] or sys.executable, modinfo=modinfo, method=p["method"], gdsio=gdsio,
                              storage_module=p["storage_module"], nfs_rdma=p["nfs_rdma"], check_mode=module.check_mode)
        except nvfs.GdsError as e:
            msg = "gds_verify: %s" % e
            module.fail_json(msg=msg, concerns={"gds": proof_concerns.failed("gds", msg)})
        except (IOError, OSError) as e:
            msg = "gds_verify could not prepare the test transfer in %s: %s" % (p["path"], e)
            module.fail_json(msg=msg, concerns={"gds": proof_concerns.failed("gds", msg)})
    res.pop("facts", None)
    drift = [{"concern": "gds", "object": pc["name"], "key": "precondition", "current": pc["reason"],
              "desired": "ok"} for pc in res["preconditions"] if pc["status"] == "fail"]
    if not module.check_mode and not res["gds_active"]:
        drift.append({"concern": "gds", "object": p["path"], "key": "gds_active", "current": False, "desired": True})
    res["drift"] = drift
    res["concerns"] = {"gds": proof_concerns.gds_status(res, drift, module.check_mode)}
    res["changed"] = False
    res["verdict_record"] = None
    if not module.check_mode:
        try:
            res["verdict_record"] = evidence.record_gds_verdict(Sysroot(), dict(res, path=p["path"],
                                                                                size_mib=p["size_mib"]))
        except (IOError, OSError) as e:
            module.warn("the GDS verdict could not be recorded in %s: %s" % (evidence.GDS_VERDICT_FILE, e))
    module.exit_json(**res)


if __name__ == "__main__":
    main()
