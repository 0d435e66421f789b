#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pcie_acs
short_description: Clear PCIe ACS redirection on the bridges between GPUs and NICs
version_added: 0.1.0
description:
  - Selects exactly the PCI bridges a GPU<->NIC peer-to-peer transfer crosses (GPUDirect RDMA) and clears the
    configured ACS control bits on them, so the transfer stays inside the PCIe switch instead of being redirected
    to the root complex. Following NVIDIA's guidance it never touches bridges that are not on such a path.
  - Path bridges of a pair are the bridges from each endpoint up to their lowest common bridge (for a PCIe switch
    both downstream ports and the switch's upstream port), or up to and including the root ports on both sides when
    the pair only meets at the root complex. Bridges without an ACS capability are reported (C(status=no_acs)),
    not treated as errors.
  - Without O(endpoints) or O(bridges) the GPU<->NIC pairs are discovered from sysfs (GPUs are NVIDIA display/3D
    controllers, NICs the RDMA-capable network functions).
  - Writes the 16-bit ACS control register (extended capability C(0x000d), offset C(+0x6)) through sysfs C(config) as a
    read-modify-write of the managed bits only, then read back; the task fails when the read-back differs.
    Only bits that the ACS capability register says are implemented are cleared.
  - Every bridge is resolved and read before anything is written; when one cannot be read, nothing is written.
    A write that fails (or does not read back) fails that bridge only; the others are still written, and the task
    fails at the end naming every failed bridge, with C(changed) and RV(results) saying what was cleared.
  - The runtime write takes effect at once and is lost at reboot (the kernel sets ACS again during enumeration
    when an IOMMU is on). O(persist) decides how it is kept.
author:
  - gpufabric developers (@gpufabric)
options:
  clear:
    description:
      - ACS control bits to clear, by their lspci names C(ReqRedir), C(CmpltRedir), C(EgressCtrl), C(SrcValid),
        C(UpstreamFwd) (case-insensitive; C(RR), C(CR), C(EC), C(SV), C(UF) are accepted too).
      - C(TransBlk) and C(DirectTrans) are refused, they do not decide peer-to-peer routing.
    type: list
    elements: str
    default: [ReqRedir, CmpltRedir, EgressCtrl]
  pairs:
    description:
      - Which discovered GPU<->NIC pairs define the paths when neither O(endpoints) nor O(bridges) is given.
      - V(paired) is the GPU<->rail pairing (each GPU with its closest RDMA NIC, one to one while NICs last).
      - V(all) is every GPU with every RDMA NIC (more bridges, typically root ports too).
    type: str
    choices: [paired, all]
    default: paired
  endpoints:
    description:
      - Explicit pairs instead of discovery. Any PCI function is accepted as C(gpu) (the VM lab uses an NVMe device as
        the GPU stand-in). Addresses as C(0000:1a:00.0) or C(1a:00.0).
      - Fails before touching anything when an address is malformed or missing, when C(gpu) equals C(nic), when a
        pair is listed twice, or when one endpoint is a bridge above the other.
    type: list
    elements: dict
    suboptions:
      gpu:
        description: PCI address of the GPU (or the device standing in for it).
        type: str
        required: true
      nic:
        description: PCI address of the NIC function.
        type: str
        required: true
  bridges:
    description:
      - Additional bridges to manage, by PCI address. Each must exist and be a bridge (type 1 header or a PCI Express
        port). Combined with the path bridges of O(endpoints); when given alone, no discovery takes place.
    type: list
    elements: str
  persist:
    description:
      - V(kernel_cmdline) returns RV(kernel_arg), C(pci=disable_acs_redir=<dev>;<dev>...) with the selected bridges
        in the kernel's path form (survives bus renumbering), for the M(gpufabric.node.kernel_cmdline) module.
        That parameter only clears C(ReqRedir), C(CmpltRedir) and C(EgressCtrl); the module warns when O(clear)
        holds other bits.
      - V(applier) records the selection in C(/etc/gpufabric/acs.json) (atomic write) for the boot-time applier,
        which re-applies it with the same code. A bridge whose write failed keeps the record (and the bits) it had.
      - V(none) keeps the runtime change only.
      - With V(kernel_cmdline) or V(none) a C(/etc/gpufabric/acs.json) left from an earlier run is removed, so one
        mechanism owns ACS at boot.
    type: str
    choices: [kernel_cmdline, applier, none]
    default: kernel_cmdline
attributes:
  check_mode:
    support: full
    description: Reads the registers and reports what would change; writes no register and no state file.
  diff_mode:
    support: full
    description: The ACS control register of every selected bridge with an ACS capability, before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs; reading the extended config space (ACS) needs root.
notes:
  - The kernel parameter takes effect at the next boot only; the runtime write already took effect.
  - All paths go through C(GPUFABRIC_SYSROOT) when it is set (the simulated node).
seealso:
  - module: gpufabric.node.kernel_cmdline
  - name: NVIDIA GPUDirect RDMA and PCIe ACS
    description: Why ACS redirection must be off on the GPU-NIC path.
    link: https://docs.nvidia.com/cuda/gpudirect-rdma/
"""

EXAMPLES = r"""
- name: Clear ACS redirection on the GPU<->rail paths and get the kernel parameter
  gpufabric.node.pcie_acs:
  register: acs

- name: Persist through the kernel command line
  gpufabric.node.kernel_cmdline:
    present:
      - "{{ acs.kernel_arg }}"
  when: acs.kernel_arg is not none

- name: Explicit endpoints (VM lab, NVMe standing in for the GPU), kept by the boot-time applier
  gpufabric.node.pcie_acs:
    endpoints:
      - gpu: "0000:01:00.0"
        nic: "0000:02:00.0"
    clear: [ReqRedir, CmpltRedir, EgressCtrl, SrcValid]
    persist: applier

- name: Report only
  gpufabric.node.pcie_acs:
    pairs: all
  check_mode: true
  register: acs_report
"""

RETURN = r"""
bridges:
  description: One entry per selected bridge, in PCI order.
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address.
      type: str
      sample: "0000:17:00.0"
    kernel_path:
      description: The kernel's path form of the bridge (C(<domain>:<bus>:<dev>.<fn>/<dev>.<fn>/...)).
      type: str
      sample: "0000:15:01.0/00.0/00.0"
    role:
      description: C(downstream), C(upstream), C(root_port) or C(bridge) (PCI/PCI-X bridge).
      type: str
      sample: downstream
    acs:
      description: Whether the bridge has an ACS capability.
      type: bool
    acs_cap:
      description: ACS capability register (hex), null without ACS.
      type: str
      sample: "0x005f"
    acs_cap_bits:
      description: Managed bits the capability implements.
      type: list
      elements: str
    ctrl_before:
      description: ACS control register before (hex).
      type: str
      sample: "0x001d"
    ctrl_after:
      description: ACS control register after, as read back (in check mode, the value that would be written).
      type: str
      sample: "0x0011"
    bits_cleared:
      description: Bits cleared (or that would be).
      type: list
      elements: str
      sample: [ReqRedir, CmpltRedir]
    setpci:
      description: The equivalent setpci command.
      type: str
      sample: "setpci -s 0000:17:00.0 ECAP_ACS+0x6.w=0011"
    status:
      description: C(cleared), C(would_clear) (check mode), C(ok) (nothing to clear), C(no_acs), C(error) (with
        C(error)) or C(not_written) (another bridge could not be read).
      type: str
    error:
      description: Why the bridge failed; only with C(status) C(error) or C(not_written).
      type: str
    pairs:
      description: The C([gpu, nic]) pairs whose path crosses this bridge (empty for explicit O(bridges)).
      type: list
      elements: list
pairs:
  description: The GPU<->NIC pairs the selection was made from, as C([gpu, nic]).
  returned: always
  type: list
  elements: list
  sample: [["0000:18:00.0", "0000:19:00.0"]]
kernel_arg:
  description: C(pci=disable_acs_redir=...) for the bridges with an ACS capability, sorted; null unless
    O(persist=kernel_cmdline) or when no selected bridge implements the redirect bits.
  returned: always
  type: str
  sample: "pci=disable_acs_redir=0000:15:01.0/00.0/00.0;0000:15:01.0/00.0/01.0"
state_file:
  description: The applier state file and what happened to it (C(written), C(unchanged), C(removed), C(absent);
    C(would be written) / C(would be removed) in check mode).
  returned: always
  type: dict
  sample: {"path": "/etc/gpufabric/acs.json", "action": "unchanged"}
off_path_clear:
  description: Information only, nothing is changed. Bridges NOT on any selected path whose ACS lacks bits the
    kernel sets when an IOMMU is on (C(SrcValid|ReqRedir|CmpltRedir|UpstreamFwd) as implemented).
  returned: always
  type: list
  elements: dict
results:
  description: One entry per selected bridge, also when the module fails; C(object) the BDF, C(result)
    C(changed) (in check mode, would change), C(unchanged) or C(failed), C(error), C(changes)
    (C(key) C(acs_ctrl), C(before), C(after)).
  returned: always
  type: list
  elements: dict
  sample: [{"object": "0000:17:00.0", "result": "changed", "error": null,
            "changes": [{"key": "acs_ctrl", "before": "0x001d", "after": "0x0011"}]}]
concerns:
  description: The status of concern C(acs) (see C(docs/concerns.md)), keyed by C(acs), with C(status), C(reason) and C(items);
    C(error) when the module fails, its items then carrying each bridge's C(result) and C(error).
  returned: always
  type: dict
drift:
  description: Deviations found before applying (concern C(acs), object C(<bdf>), key C(acs_ctrl); object
    C(/etc/gpufabric/acs.json), key C(acs) when the record is written or removed).
  returned: always
  type: list
  elements: dict
  sample: [{"concern": "acs", "object": "0000:17:00.0", "key": "acs_ctrl", "current": "0x001d", "desired": "0x0011"}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import task as acs_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=acs_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**acs_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
