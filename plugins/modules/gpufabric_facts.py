#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpufabric_facts
short_description: Discover the GPU fabric of a node (GPUs, RoCE rails, PCIe relations, IOMMU, driver, nvidia-fs)
version_added: 0.1.0
description:
  - Reads sysfs and procfs only and returns C(ansible_facts.gpufabric).
  - GPUs are NVIDIA PCI functions of class 0x0300/0x0302, NVSwitches NVIDIA functions of class 0x0680, NICs PCI
    functions of class 0x02. Rails are the ports of the RDMA devices (C(/sys/class/infiniband)) with their network
    interface, link layer and the GID index of the RoCE v2 IPv4 GID.
  - For every GPU and RDMA NIC the PCIe relation is computed from the sysfs tree with nvidia-smi topology semantics
    (PIX through at most one PCIe switch, PXB through several switches or bridges, PHB through the host bridge,
    NODE between host bridges of one NUMA node, SYS across NUMA nodes). Each GPU is paired with its closest NIC,
    one-to-one while NICs last, ties broken by PCI address order.
  - The bridges on each paired path are listed with their ACS capability and control bits and their kernel path
    form (as used by C(pci=disable_acs_redir=)); reading ACS needs root (the full 4096-byte config space).
  - Warns about GPU/NIC pairs across NUMA nodes, an IOMMU in translated mode, the proprietary NVIDIA kernel module
    together with nvidia-fs, and NVSwitches without a running Fabric Manager.
author:
  - gpufabric developers (@gpufabric)
options:
  gather_subset:
    description:
      - What to discover. C(all) is everything; C(pci) GPUs, NVSwitches, NICs, the relation matrix, the pairing and
        the path bridges; C(rails) the RDMA ports; C(numa) the NUMA nodes; C(gpu_driver) the NVIDIA kernel module
        flavour; C(fabric_manager) whether Fabric Manager is needed and running; C(iommu) the IOMMU mode in force;
        C(nvidia_fs) the nvidia-fs module.
      - Prefix a name with C(!) to leave it out (C(['all', '!pci'])).
    type: list
    elements: str
    default: [all]
attributes:
  check_mode:
    support: full
    description: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  facts:
    support: full
    description: Returns C(ansible_facts.gpufabric).
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs and procfs.
notes:
  - Run with C(become) to read ACS registers; without root the kernel exposes only 64 bytes of config space and
    the bridges carry an C(acs.error) instead of the bits.
  - C(/proc/<pid>/comm) holds 15 characters, so Fabric Manager is found as C(nv-fabricmanage).
"""

EXAMPLES = r"""
- name: Gather everything about the GPU fabric
  gpufabric.node.gpufabric_facts:
  become: true

- name: Show the GPU to rail pairing
  ansible.builtin.debug:
    msg: "{{ ansible_facts['gpufabric']['pairing'] | map(attribute='netdev') | list }}"

- name: Only the rails and the IOMMU mode
  gpufabric.node.gpufabric_facts:
    gather_subset: [rails, iommu]

- name: Everything except the PCIe walk
  gpufabric.node.gpufabric_facts:
    gather_subset: [all, "!pci"]
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpufabric:
      description: The discovered fabric; keys depend on O(gather_subset).
      returned: always
      type: dict
      contains:
        kernel_release:
          description: Running kernel release.
          type: str
          sample: 6.8.0-45-generic
        architecture:
          description: Machine architecture (C(platform.machine()), the value of C(ansible_facts.architecture) from
            C(setup)), e.g. for the C(iommu) role's kernel arguments.
          type: str
          sample: x86_64
        gather_subset:
          description: The subsets gathered.
          type: list
          elements: str
        gpus:
          description: GPUs in PCI order (C(index), C(bdf), C(vendor), C(device), C(class), C(model), C(numa),
            C(driver), C(root_bus)); C(numa) is null when the kernel reports -1.
          returned: when C(pci) gathered
          type: list
          elements: dict
          sample: [{"index": 0, "bdf": "0000:18:00.0", "device": "0x2335", "model": "H200 SXM", "numa": 0}]
        nvswitches:
          description: NVSwitch functions (C(bdf), C(device), C(numa), C(driver)).
          returned: when C(pci) gathered
          type: list
          elements: dict
        nics:
          description: Network functions (C(bdf), C(vendor), C(device), C(class), C(numa), C(driver), C(netdevs),
            C(ibdevs), C(rdma), C(root_bus)).
          returned: when C(pci) gathered
          type: list
          elements: dict
        matrix:
          description: Relation of every GPU to every RDMA NIC, C(matrix[gpu_bdf][nic_bdf]).
          returned: when C(pci) gathered
          type: dict
          sample: {"0000:18:00.0": {"0000:19:00.0": "PIX", "0000:9b:00.0": "SYS"}}
        pairing:
          description: One entry per GPU with its closest NIC (C(gpu), C(gpu_index), C(nic), C(netdev), C(ibdev),
            C(port), C(relation), C(gpu_numa), C(nic_numa), C(cross_numa), C(bridges) as a list of BDFs).
          returned: when C(pci) gathered
          type: list
          elements: dict
          sample: [{"gpu": "0000:18:00.0", "nic": "0000:19:00.0", "netdev": "ens1np0", "ibdev": "mlx5_0",
                    "relation": "PIX", "cross_numa": false,
                    "bridges": ["0000:17:00.0", "0000:16:00.0", "0000:17:01.0"]}]
        path_bridges:
          description: The bridges on the paired paths in PCI order (C(bdf), C(role) root_port/upstream/
            downstream/bridge, C(kernel_path), C(acs) with C(present), C(offset), C(cap), C(ctrl), C(cap_bits),
            C(ctrl_bits) or C(error), C(pairs) the GPUs whose path crosses it).
          returned: when C(pci) gathered
          type: list
          elements: dict
        rails:
          description: RDMA device ports (C(netdev), C(ibdev), C(port), C(bdf), C(numa), C(driver), C(link_layer),
            C(state), C(roce_v2_ipv4_gid_index), C(roce_v2_ipv4_gid), C(ipv4)).
          returned: when C(rails) gathered
          type: list
          elements: dict
          sample: [{"netdev": "ens1np0", "ibdev": "mlx5_0", "port": 1, "link_layer": "Ethernet",
                    "roce_v2_ipv4_gid_index": 3, "ipv4": "10.100.0.1"}]
        numa_nodes:
          description: NUMA nodes with their CPU lists.
          returned: when C(numa) gathered
          type: list
          elements: dict
        iommu:
          description: C(mode) (identity, translated, off or mixed, from the IOMMU group types), C(groups),
            C(types) (count per group type), C(cmdline) (IOMMU words of the running kernel command line).
          returned: when C(iommu) gathered
          type: dict
          sample: {"mode": "translated", "groups": 50, "types": {"DMA-FQ": 50}, "cmdline": []}
        gpu_driver:
          description: C(flavour) (open, proprietary or none), C(version), C(taint).
          returned: when C(gpu_driver) gathered
          type: dict
          sample: {"flavour": "open", "version": "550.127.05", "taint": "OE"}
        fabric_manager:
          description: C(needed) (NVSwitches present), C(running), C(pids).
          returned: when C(fabric_manager) gathered
          type: dict
          sample: {"needed": true, "running": true, "pids": [2817]}
        nvidia_fs:
          description: C(loaded), C(version) (from C(/proc/driver/nvidia-fs/version)), C(module_version),
            C(modules) (C(/proc/driver/nvidia-fs/modules) as read, name to version as printed), C(rw_stats_enabled).
            The facts do not hold a device open, and nvidia-fs lists storage modules only while one of its devices
            is open, so an idle node shows only C(wekafsio) (always listed); M(gpufabric.node.gds_verify) and
            M(gpufabric.node.vendor_nfs_proof) read it while holding C(/dev/nvidia-fs<N>).
          returned: when C(nvidia_fs) gathered
          type: dict
          sample: {"loaded": true, "version": "2.22", "modules": {"wekafsio": "1"}, "rw_stats_enabled": 0}
warnings_found:
  description: The warnings also emitted as Ansible warnings, for reports.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils import topology


def main():
    module = AnsibleModule(
        argument_spec=dict(gather_subset=dict(type="list", elements="str", default=["all"])),
        supports_check_mode=True,
    )
    try:
        topology.normalize_subset(module.params["gather_subset"])
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        facts = topology.discover(Sysroot(), module.params["gather_subset"])
    except (OSError, IOError, ValueError) as e:
        module.fail_json(msg="GPU fabric discovery failed: %s" % e)
    found = topology.warnings(facts)
    for w in found:
        module.warn(w)
    module.exit_json(changed=False, ansible_facts={"gpufabric": facts}, warnings_found=found)


if __name__ == "__main__":
    main()
