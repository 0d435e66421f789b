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
    NODE between host bridges of one NUMA node, SYS across NUMA nodes or when a NUMA node is unknown). Each GPU
    is paired with its closest RDMA rail, one-to-one while rails last, ties broken by PCI address order, then
    rail name and port. Only rails of physical functions take part (a RoCE LAG bond counts once, through the PF
    nearest the GPU); SR-IOV virtual functions and software RDMA devices (rxe, siw) are reported but never
    paired, and C(unpaired) / C(pairing_reason) say why a GPU or a rail has no partner.
  - C(numa_node) -1 (no proximity information) is the host's only NUMA node on a one-node host or VM, and
    unknown (null) on a host with several nodes; C(discovery_notes) says so, and lists functions or RDMA
    devices that vanished while discovery ran (they are skipped).
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
        C(nvidia_fs) the nvidia-fs module; C(qos) adds to each rail (of a PF, bond or subfunction) its ECN/DCQCN
        state per priority (C(ecn)), who owns DCB (C(dcbx), from C(dcb -j dcbx show)) and the NIC firmware's
        LLDP/DCBX settings (C(firmware_dcbx), from C(mlxconfig) where installed); C(qos) implies C(rails).
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
            C(driver), C(root_bus), C(numa_source)). When the kernel reports C(numa_node) -1, C(numa) is the
            host's only node on a one-node host (C(numa_source=single_node)) and null on a multi-node host
            (C(numa_source=unknown)); otherwise C(numa_source=sysfs).
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
          description:
            - Network functions (C(bdf), C(vendor), C(device), C(class), C(numa), C(driver), C(netdevs),
              C(ibdevs), C(rdma), C(root_bus), C(numa_source), C(physfn), C(vfs), C(bond), C(card_bridges),
              C(soft_ibdevs)), SR-IOV VFs included.
            - C(netdevs) are the interfaces below the function (C(net/) or, for virtio-net, C(virtioN/net/)).
              C(ibdevs) its hardware RDMA devices. C(rdma) is true for a physical function carrying a pairable
              rail (a VF never). C(physfn) is the PF of a VF (null for a PF), C(vfs) the VFs of a PF.
              C(bond) is the RoCE LAG bond netdev over the function. C(card_bridges) are the bridges of the
              NIC card's own on-board switch (ConnectX/BlueField), top down. C(soft_ibdevs) are software RDMA
              devices (rxe, siw) over its netdevs.
          returned: when C(pci) gathered
          type: list
          elements: dict
          sample: [{"bdf": "0000:19:00.0", "netdevs": ["ens1np0"], "ibdevs": ["mlx5_0"], "rdma": true,
                    "physfn": null, "vfs": ["0000:19:00.2"], "bond": null, "card_bridges": []}]
        matrix:
          description: Relation of every GPU to every RDMA NIC (C(nics[].rdma)), C(matrix[gpu_bdf][nic_bdf]).
          returned: when C(pci) gathered
          type: dict
          sample: {"0000:18:00.0": {"0000:19:00.0": "PIX", "0000:9b:00.0": "SYS"}}
        pairing:
          description:
            - One entry per GPU with its closest rail (C(gpu), C(gpu_index), C(nic), C(netdev), C(ibdev), C(port),
              C(relation), C(gpu_numa), C(nic_numa), C(cross_numa), C(bridges) as a list of BDFs, C(nic_functions),
              C(bond), C(phys_netdevs), C(switch), C(shared)). Never an SR-IOV VF or a software RDMA device.
            - C(nic) is the rail's PCI function nearest the GPU (for a RoCE LAG bond one of C(nic_functions), the
              bond's PFs); C(switch) the upstream port of the switch where the two paths meet (null when they only
              meet at the root complex; a NIC card's own switch is not the GPU's); C(shared) true when GPUs
              outnumber rails and this GPU shares its rail; C(cross_numa) true only for NUMA nodes known to differ.
          returned: when C(pci) gathered
          type: list
          elements: dict
          sample: [{"gpu": "0000:18:00.0", "nic": "0000:19:00.0", "netdev": "ens1np0", "ibdev": "mlx5_0",
                    "relation": "PIX", "cross_numa": false,
                    "bridges": ["0000:17:00.0", "0000:16:00.0", "0000:17:01.0"], "nic_functions": ["0000:19:00.0"],
                    "bond": null, "phys_netdevs": ["ens1np0"], "switch": "0000:16:00.0", "shared": false}]
        unpaired:
          description: What has no partner and why, C(gpus) (C(gpu), C(gpu_index), C(reason)) and C(rails)
            (C(ibdev), C(port), C(netdev), C(nic), C(kind), C(reason)).
          returned: when C(pci) gathered
          type: dict
          sample: {"gpus": [], "rails": [{"ibdev": "mlx5_8", "port": 1, "netdev": "ens1np0v0", "nic": "0000:19:00.2",
                   "kind": "vf", "reason": "SR-IOV virtual function of 0000:19:00.0: VFs never take part in GPU
                   pairing, DCB or NCCL"}]}
        pairing_reason:
          description: Why the pairing is empty or incomplete (no GPU, no RDMA NIC and what the NICs are instead,
            more GPUs than rails), null when every GPU has a rail of its own.
          returned: when C(pci) gathered
          type: str
          sample: "no RDMA NIC to pair with: no RDMA device in /sys/class/infiniband; NICs without RDMA:
            0000:00:03.0 (virtio-pci, eth0)"
        discovery_notes:
          description: C(device) and C(note) for what discovery skipped (functions or RDMA devices removed while it
            ran) or inferred (a NUMA node from a one-node host, an unknown one).
          returned: when C(pci) or C(rails) gathered
          type: list
          elements: dict
          sample: [{"device": "0000:00:06.0", "note": "numa_node is -1; the host has one NUMA node (0), so it is
                    that node"}]
        path_bridges:
          description: The bridges on the paired paths in PCI order (C(bdf), C(role) root_port/upstream/
            downstream/bridge, C(kernel_path), C(acs) with C(present), C(offset), C(cap), C(ctrl), C(cap_bits),
            C(ctrl_bits) or C(error), C(pairs) the GPUs whose path crosses it, C(nic_card) the NIC function whose
            card's own switch the bridge belongs to, else null).
          returned: when C(pci) gathered
          type: list
          elements: dict
        rails:
          description:
            - RDMA device ports (C(netdev), C(ibdev), C(port), C(bdf), C(numa), C(driver), C(link_layer), C(state),
              C(roce_v2_ipv4_gid_index), C(roce_v2_ipv4_gid), C(ipv4), C(kind), C(physfn), C(bond),
              C(pci_functions), C(dev_port), C(mtu), C(phys_netdevs), C(numa_source), C(pairable), C(reason)).
            - C(mtu) is the netdev's live MTU (C(/sys/class/net/<netdev>/mtu)), null without a netdev;
              M(gpufabric.node.rail_mtu) sets and persists it.
            - C(kind) is C(pf), C(vf) (SR-IOV virtual function, C(physfn) its PF), C(bond) (RoCE LAG such as
              C(mlx5_bond_0), with C(netdev) the bond and C(pci_functions) its PFs), C(subfunction) (the RDMA device
              of a device below the function, e.g. an mlx5 scalable function), C(software) (rxe, siw; no PCI function
              of its own, C(bdf) null, C(pci_functions) and C(numa) those of the netdev's lower device) or
              C(unknown). C(pairable) is true for C(pf) and C(bond) only; otherwise C(reason) says why.
              C(dev_port) is the netdev's port number on its function (dual-port functions). C(phys_netdevs) are the
              netdevs of PCI functions the rail's netdev stands for (itself, or a bond's slaves); per-port settings
              such as DCB/PFC belong on them, not on a bond.
            - With C(qos) gathered, C(ecn) (C(source) sysfs (MLNX_OFED/DOCA), debugfs (inbox mlx5 cc_params) or null
              with C(reason); C(priorities) (for each priority C(0) to C(7), C(np) and C(rp)) with null where the driver does not expose it;
              C(np_enabled), C(rp_enabled), C(cnp_dscp), C(cnp_priority), C(cnp_priority_mode); C(error) when
              unreadable), C(dcbx) (C(owner) host or lld-managed, C(flags) as C(dcb dcbx show) prints them,
              C(versions), C(error) when not read) and C(firmware_dcbx) (C(status) ok, or not_checked with the
              C(reason) when C(mlxconfig) is missing or fails, so the settings could not be read; C(settings) such as
              C(LLDP_NB_DCBX_P1)).
          returned: when C(rails) or C(qos) gathered
          type: list
          elements: dict
          sample: [{"netdev": "ens1np0", "ibdev": "mlx5_0", "port": 1, "link_layer": "Ethernet",
                    "roce_v2_ipv4_gid_index": 3, "ipv4": "10.100.0.1", "mtu": 9000}]
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
            C(modules) (the storage modules C(/proc/driver/nvidia-fs/modules) lists, name to version as printed, the
            always-listed C(wekafsio) pseudo entry left out), C(modules_read_held), C(modules_note), C(rw_stats_enabled).
            nvidia-fs lists storage modules only while one of its devices is open (C(nvfs_open)/C(nvfs_close)), so the
            facts read the file holding the lowest C(/dev/nvidia-fs<N>) open, as M(gpufabric.node.gds_verify) and
            M(gpufabric.node.vendor_nfs_proof) do; C(modules_read_held) false (with C(modules_note) saying why) means
            the list was read idle and proves nothing.
          returned: when C(nvidia_fs) gathered
          type: dict
          sample: {"loaded": true, "version": "2.22", "modules": {"rpcrdma": "(null)"}, "modules_read_held": true,
                   "modules_note": null, "rw_stats_enabled": 0}
        os_profile:
          description:
            - The node's OS profile from C(/etc/os-release) (C(name) such as C(ubuntu2404), C(debian12), C(el9);
              C(family), C(pkg_mgr), C(bootloader), C(kernel_cmdline_file), C(kernel_packages) templates with
              C({kver}), C(module_compression), C(builder_base_packages), C(hold)); null on an unsupported release,
              with C(os_profile_reason) saying why.
          returned: always
          type: dict
          sample: {"name": "ubuntu2404", "pkg_mgr": "apt", "bootloader": "grub", "module_compression": "zstd",
                   "hold": "apt-mark"}
        os_profile_reason:
          description: Why there is no OS profile (null when there is one).
          returned: always
          type: str
warnings_found:
  description: The warnings also emitted as Ansible warnings, for reports.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.check import facts as facts_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=facts_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**facts_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
