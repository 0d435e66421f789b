#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_health
short_description: Read-only health of the GPU<->NIC data path (PCIe links, GPUDirect RDMA mechanism)
version_added: 0.2.0
description:
  - Checks, without changing anything, the concerns C(pcie_link) and C(gpudirect_rdma) of a node (see
    C(docs/concerns.md)) and returns their status.
  - C(pcie_link) reads C(current_link_speed/width) against C(max_link_speed/width) of every link on the GPU<->NIC
    paths (the GPU, the NIC functions, the switches and bridges between them), with the link's capability the
    lower of both ends' maxima, and MaxPayload/MaxReadReq from config space. A link trained below its capability
    is C(drift) with a reason that says software cannot fix it. An idle GPU's lower link speed at full width is
    power management and not judged unless O(pcie_link.gpu_idle_speed=check).
  - C(gpudirect_rdma) says which GPUDirect RDMA mechanism the RDMA NICs can use - DMA-BUF (open NVIDIA kernel
    module 515 or later, kernel 5.12 or later, rdma-core 34 or later) or a loaded nvidia-peermem - and is C(drift)
    when none can.
  - With O(nccl_log), also parses an C(NCCL_DEBUG=INFO) log and says which transport each channel used and whether
    GPUDirect RDMA carried the network channels.
  - Check mode and a real run behave the same; C(changed) is always false.
author:
  - gpufabric developers (@gpufabric)
options:
  pcie_link:
    description: Desired state of the C(pcie_link) concern.
    type: dict
    default: {}
    suboptions:
      gpu_idle_speed:
        description:
          - C(ignore) treats a GPU link below its speed at full width as idle power management (GPUs train down
            to 2.5 GT/s when idle); C(check) judges the speed too (run it while the GPUs are busy).
        type: str
        choices: [ignore, check]
        default: ignore
      slot_limited:
        description: C(drift) reports a device whose port (slot) can do less than the device; C(ok) only notes it.
        type: str
        choices: [drift, ok]
        default: drift
  gpudirect_rdma:
    description: Desired state of the C(gpudirect_rdma) concern.
    type: dict
    default: {}
    suboptions:
      mechanism:
        description: C(any) accepts either mechanism; C(dmabuf) or C(nvidia_peermem) requires that one.
        type: str
        choices: [any, dmabuf, nvidia_peermem]
        default: any
  nccl_log:
    description: Path of an C(NCCL_DEBUG=INFO) log on the node to parse (its first 16 MiB).
    type: path
attributes:
  check_mode:
    support: full
    description: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs and procfs; root reads the config space beyond 64 bytes.
"""

EXAMPLES = r"""
- name: Check the PCIe links and the GPUDirect RDMA mechanism
  gpufabric.node.fabric_health:
  register: health

- name: Judge the GPUs' link speed too (run while the GPUs are busy) and parse an NCCL log
  gpufabric.node.fabric_health:
    pcie_link:
      gpu_idle_speed: check
    nccl_log: /var/log/nccl/allreduce.log
"""

RETURN = r"""
concerns:
  description: The status of the concerns C(pcie_link) and C(gpudirect_rdma) - C(status), C(reason), C(items).
  returned: always
  type: dict
  sample: {"pcie_link": {"status": "drift", "reason": "1 PCIe link(s) below capability: GPU 0000:39:00.0 trained
           at x8 of x16; software cannot retrain a PCIe link for good ...", "items": []},
           "gpudirect_rdma": {"status": "ok", "reason": "DMA-BUF (usable: dmabuf)", "items": []}}
links:
  description: Every link on the GPU<->NIC paths with its speeds (GT/s), widths, MaxPayload/MaxReadReq and state.
  returned: always
  type: list
  elements: dict
gpudirect:
  description: The mechanism facts - C(mechanism), C(usable), C(dmabuf), C(peermem), C(warning).
  returned: always
  type: dict
nccl:
  description: The parsed NCCL log - C(network), C(nranks), C(nnodes), C(net_plugin_notes), C(channels), C(kinds),
    C(net_devices), C(env) (the C(NCCL_*) settings NCCL says the environment gave it), C(ring_gdr), C(nvls),
    C(long_lines), C(truncated), C(verdict) (C(gpudirect_rdma) yes, partial, no, not_exercised or unknown, C(summary)).
    The log is read without following a symlink, regular files only, at most 16 MiB.
  returned: when O(nccl_log) is given
  type: dict
warnings_found:
  description: The warnings also emitted as Ansible warnings.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import task as health_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=health_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**health_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
