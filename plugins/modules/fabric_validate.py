#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_validate
short_description: Prove a node's direct data paths by moving data, with forced-fallback runs beside them
version_added: 0.1.0
description:
  - Runs the validation suite of one node (docs/validate.md, "The validation playbook") and returns the
    RV(validation) document the controller judges against the node's baseline profile.
  - C(nccl) - C(all_reduce_perf) of nccl-tests (on C(PATH), at O(nccl_tests_path), or inside O(image) through podman
    or docker), or, when nccl-tests is absent and the node's Python has PyTorch with CUDA, the collection's
    single-node all-reduce over C(torch.distributed), run as a separate process. Always with C(NCCL_DEBUG=INFO) and
    C(NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV,P2P). V(configured) pins C(NCCL_NET=IB) where the node has an RDMA device
    (a fallback to sockets then fails instead of passing slowly); the negative variants are V(gdr_loc)
    (C(NCCL_NET_GDR_LEVEL=LOC)) and V(socket) (C(NCCL_IB_DISABLE=1)). With several GPUs the ranks are made to talk
    through the NICs (C(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)); one GPU is one rank, whose network verdict is
    "not exercised".
  - C(nccl_intra) - with several GPUs, the all-reduce as configured (P2P/NVLS channels expected) and with P2P and
    NVLS disabled (V(host_memory), SHM expected).
  - C(perftest) - C(ib_write_bw --use_cuda=<gpu>) for each GPU of the node's pairing, on its own NIC (V(local_nic))
    and on a NIC across the CPU (V(remote_nic)); server and client both on this node through two NICs, or the client
    only against a server at O(peer).
  - C(gds) - C(gdsio -x 0) against C(-x 2) with C(-V); else KvikIO's C(cufile) API in its own compatibility mode
    (V(compat_on), POSIX through host memory) and with both compatibility modes off (V(compat_off)); else the
    collection's cuFile program with compatibility mode allowed and forced (V(compat_on), cuFile's POSIX path through
    host memory) and forbidden (V(compat_off), GDS or nothing). The test data is verified (C(gdsio -V); the cuFile
    program compares every byte of the file and of the GPU buffer read back).
  - Around every run - the children's CPU time, the wall time, the per-priority C(ethtool -S) counters of the rails
    with the RDMA ports' CNP/ECN counters, and the nvidia-fs read/write counters where nvidia-fs is loaded. Every
    run is bounded by O(timeout).
  - A run that is not possible on the node (a tool missing, one GPU, no RDMA device) is V(not_checked) with the
    reason and what to install; the module fails only on bad input. It changes no configuration (C(changed) is
    always false). Check mode runs nothing and returns the plan.
author:
  - gpufabric developers (@gpufabric)
options:
  tests:
    description: The tests to run.
    type: list
    elements: str
    choices: [nccl, nccl_intra, perftest, gds]
    default: [nccl, nccl_intra, perftest, gds]
  negative:
    description: Also run the forced-fallback variants (V(gdr_loc), V(socket), V(host_memory), V(host_buffer)).
    type: bool
    default: true
  node:
    description: The name the document carries (default the host name).
    type: str
  nccl_tests_path:
    description: C(all_reduce_perf), or the directory holding it, when it is not on C(PATH). Exclusive with
      O(image).
    type: path
  image:
    description: A container image that has C(all_reduce_perf) on its C(PATH); run with the host's network, IPC,
      GPUs and C(/dev/infiniband).
    type: str
  container_runtime:
    description: The runtime for O(image); V(auto) takes podman, then docker.
    type: str
    choices: [auto, podman, docker]
    default: auto
  gpus:
    description: CUDA indexes of the GPUs to use (default every GPU of the node).
    type: list
    elements: int
  size:
    description: Message size in bytes of the all-reduce (perftest uses at most 8 MiB of it, the GDS runs this
      many MiB, at most 4096).
    type: int
    default: 67108864
  iters:
    description: Timed iterations of the all-reduce.
    type: int
    default: 20
  timeout:
    description: Seconds one run may take (C(timeout -k 10)); a run past it is an V(error).
    type: int
    default: 300
  gds_dir:
    description: Directory under which a private work directory is made (the shipped programs, the GDS test files);
      removed at the end.
    type: path
    default: /var/tmp
  python:
    description: The node's Python that runs the shipped programs (PyTorch for the all-reduce); default the
      module's interpreter.
    type: path
  peer:
    description: Address of a host that runs the perftest server; default both ends on this node.
    type: str
notes:
  - Supports check mode (the plan only). The runs move data and change nothing, so C(changed) is false.
seealso:
  - module: gpufabric.node.gds_verify
"""

EXAMPLES = r"""
- name: Validate the node's data paths
  gpufabric.node.fabric_validate:
    tests: [nccl, gds]
    timeout: 600
  register: gpufabric_validate

- name: nccl-tests from a container image
  gpufabric.node.fabric_validate:
    tests: [nccl, nccl_intra]
    image: localhost/nccl-tests:2.19
    container_runtime: podman
"""

RETURN = r"""
validation:
  description:
    - C(schema), C(node), C(at), C(profile) and C(profile_key) (baseline profile), C(versions), C(tools) and
      C(runs). Each run - C(id) (C(<test>.<variant>), perftest C(perftest.gpu<N>.<variant>)), C(test), C(variant),
      C(expect) (V(direct) or V(fallback)), C(status) (V(ok), V(not_checked), V(error)), C(reason), C(tool),
      C(command), C(env) (what the suite set), C(rc), C(metric), C(bandwidth) (bytes/s), C(cpu_s), C(wall_s),
      C(verdict) (C(tool), C(state), C(fallback), C(reason), C(evidence), C(bandwidth)), C(counters) (per rail and
      C(nvidia_fs), the counters that moved), C(details), C(output_tail).
  returned: always
  type: dict
failures:
  description: What the play fails the node on - a V(configured) run that could take the direct path and did not,
    and a forced-fallback run that did not flip while its direct run was direct.
  returned: always
  type: list
  elements: str
lines:
  description: One line per run - its id, tool, expectation, verdict in words and reason, bandwidth.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.validate import suite
from ansible_collections.gpufabric.node.plugins.module_utils.check import validation


def main():
    module = AnsibleModule(
        argument_spec=dict(
            tests=dict(type="list", elements="str", choices=list(suite.TESTS), default=list(suite.TESTS)),
            negative=dict(type="bool", default=True),
            node=dict(type="str"),
            nccl_tests_path=dict(type="path"),
            image=dict(type="str"),
            container_runtime=dict(type="str", choices=["auto", "podman", "docker"], default="auto"),
            gpus=dict(type="list", elements="int"),
            size=dict(type="int", default=64 << 20),
            iters=dict(type="int", default=20),
            timeout=dict(type="int", default=300),
            gds_dir=dict(type="path", default="/var/tmp"),
            python=dict(type="path"),
            peer=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    try:
        doc, failures = validation.validate(Sysroot(), CommandRunner(module), module.params,
                                            check_mode=module.check_mode)
    except suite.SuiteError as e:
        module.fail_json(msg="fabric_validate: %s" % e)
    except (IOError, OSError) as e:
        module.fail_json(msg="fabric_validate could not prepare its work directory under %s: %s"
                         % (module.params["gds_dir"], e))
    module.exit_json(changed=False, validation=doc, failures=failures,
                     lines=[suite.verdict_line(r) for r in doc["runs"]])


if __name__ == "__main__":
    main()
