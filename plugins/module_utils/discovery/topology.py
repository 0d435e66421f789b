# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discover the GPU fabric of a host from sysfs/procfs: GPUs, NICs and rails, NUMA, PCIe relations.

The work is split by stage: ``topology_pci`` (the PCI scan: functions, SR-IOV, NUMA, bridge roles,
relations, path bridges), ``topology_rails`` (netdevs, RDMA devices, rails) and ``topology_pairing``
(GPU<->rail pairing and the facts built from it). This module is the public face: import ``topology``.

Public API (plain Python, every path through a ``Sysroot``):

``discover(sysroot=None, gather_subset=None) -> dict``
    One sysfs walk per call. ``gather_subset`` is a list of ``all`` (default), ``pci``, ``rails``,
    ``numa``, ``gpu_driver``, ``fabric_manager``, ``iommu``, ``nvidia_fs``; ``!name`` removes one.
    Keys (present per subset):

    * ``gpus``: ``[{index, bdf, vendor, device, class, model, numa, driver, root_bus, numa_source}]`` in PCI
      order (vendor 0x10de, class 0x0300xx/0x0302xx). ``numa`` is the NUMA node; when the kernel says -1 it
      is the host's only node on a one-node host (``numa_source: single_node``), else None (``unknown``).
    * ``nvswitches``: ``[{bdf, device, numa, driver}]`` (vendor 0x10de, class 0x0680xx).
    * ``nics``: ``[{bdf, vendor, device, class, numa, driver, netdevs, ibdevs, rdma, root_bus, numa_source,
      physfn, vfs, bond, card_bridges, soft_ibdevs}]`` (class 0x02xxxx). ``netdevs`` are the interfaces below
      the function (``net/`` or ``virtioN/net/``); ``rdma`` is true for a physical function carrying a
      pairable rail (an SR-IOV VF never: it has ``physfn``, its PF lists it in ``vfs``); ``bond`` the RoCE LAG
      netdev over it; ``card_bridges`` the bridges of the card's own on-board switch; ``soft_ibdevs`` the
      software RDMA devices (rxe, siw) over its netdevs.
    * ``rails``: ``[{netdev, ibdev, port, bdf, numa, driver, link_layer, state, roce_v2_ipv4_gid_index,
      roce_v2_ipv4_gid, ipv4, kind, physfn, bond, pci_functions, dev_port, phys_netdevs, numa_source, pairable,
      reason}]``
      one per RDMA port, ordered by ibdev name. ``kind`` is pf, vf, bond (RoCE LAG: ``pci_functions`` are
      the bond's PFs), subfunction (the RDMA device of a device below the function, e.g. an mlx5 scalable
      function), software (no PCI function of its own: ``bdf`` None, ``pci_functions`` and ``numa`` those
      of the netdev's lower devices) or unknown; ``pairable`` only for pf and bond, else ``reason``.
      ``phys_netdevs`` are the netdevs of PCI functions the rail's netdev stands for (itself, a bond's
      slaves): per-port settings such as DCB belong there.
    * ``matrix``: ``{gpu_bdf: {nic_bdf: relation}}`` with nvidia-smi semantics PIX / PXB / PHB /
      NODE / SYS, over RDMA NICs (``nics[].rdma``). Across host bridges NODE needs both NUMA nodes known
      and equal; otherwise SYS.
    * ``pairing``: ``[{gpu, gpu_index, nic, netdev, ibdev, port, relation, gpu_numa, nic_numa,
      cross_numa, bridges, nic_functions, bond, phys_netdevs, switch, shared, ports}]``: the closest pairable rail of each GPU,
      one-to-one while rails last (ties broken by PCI order, then rail name and port); more GPUs than rails
      share the closest (``shared``). ``nic`` is the rail's PCI function nearest the GPU (for a bond one of
      ``nic_functions``), ``bridges`` the path bridges (see ``path_bridges``), ``switch`` the upstream port of
      the switch where the two paths meet (None at the root complex), ``cross_numa`` true only for nodes
      known to differ. ``ports`` (``[{ibdev, port, netdev, nic}]``): the pair's rail first, then the rails left
      over on the same card (a dual-port NIC's second port): the GPU owns them too, they are not unpaired.
    * ``unpaired``: ``{gpus: [{gpu, gpu_index, reason}], rails: [{ibdev, port, netdev, nic, kind, reason}]}``
      and ``pairing_reason`` (a sentence or None): why a GPU or a rail has no partner.
    * ``path_bridges``: ``[{bdf, role, kernel_path, acs: {...}, pairs: [gpu_bdf, ...], nic_card}]`` the union
      of the bridges on the paired paths, in PCI order; ``nic_card`` the NIC function whose card the bridge
      belongs to, else None.
    * ``discovery_notes``: ``[{device, note}]`` what was skipped (functions or RDMA devices removed while
      discovery ran) or inferred (NUMA nodes).
    * ``numa_nodes``: ``[{node, cpulist}]``.
    * ``iommu``: ``{mode: identity|translated|off|mixed, groups, types: {type: count}, cmdline: [...]}``.
    * ``gpu_driver``: ``{flavour: open|proprietary|none, version, taint}``.
    * ``fabric_manager``: ``{needed, running, pids}``.
    * ``nvidia_fs``: ``{loaded, version, module_version, modules: {name: version}, rw_stats_enabled}``.
    * ``kernel_release``.
    * ``pcie_links`` (with ``pci``): ``[{device, kind, port, pairs, current_speed, current_width, max_speed,
      max_width, device_max_*, port_max_*, generation, source, max_payload, port_max_payload, max_read_request,
      max_payload_supported, state: ok|idle|degraded|slot_limited|unknown, reason, notes}]``, every link on the
      GPU<->NIC paths (``pcie_link.path_links``; speeds in GT/s).
    * ``gpudirect_rdma`` (with ``gpu_driver`` and ``rails``): ``{mechanism: dmabuf|nvidia_peermem|none|unknown,
      usable, dmabuf: {usable (null: cannot tell), reasons, unknown, driver_flavour, driver_version,
      kernel_release, rdma_core, libibverbs}, peermem: {loaded, module, installed}, rdma_rails, warning}`` (``gpudirect.facts``).

``path_bridges(sysroot, bdf_a, bdf_b, scan=None) -> list``
    The bridges a peer-to-peer transfer between two devices crosses: from each endpoint up to the
    lowest common bridge (for a switch: both downstream ports and the switch's upstream port), or up
    to and including the root ports when the devices only meet at the root complex or beyond.
    Each: ``{bdf, role, kernel_path, acs: {present, offset, cap, ctrl, cap_bits, ctrl_bits} | error}``.

``pci_relation(sysroot, bdf_a, bdf_b, scan=None) -> 'PIX'|'PXB'|'PHB'|'NODE'|'SYS'``.

``list_rails(sysroot, scan=None)``, ``rail_by_netdev(sysroot, netdev)``, ``rail_by_ibdev(sysroot, ibdev,
port=None)``
    Rail lookups (``None`` when absent); ``netdev_to_ibdev`` -> ``(ibdev, port)`` and
    ``ibdev_to_netdev(sysroot, ibdev, port=1)`` -> netdev are shortcuts.

``PciScan.of(sysroot)`` is the cache behind one discovery (one per read-only ``SnapshotSysroot``); pass it as
``scan=`` to reuse a walk.
Never raises on a host without GPUs, NICs, IOMMU or NVIDIA driver: lists are empty and modes say so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import gpudirect
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pairing as topology_pairing
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci_scan as topology_pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import rails as topology_rails
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

# the public names of the stages, kept importable from here
NVIDIA = topology_pci.NVIDIA
RELATIONS = topology_pci.RELATIONS
RANK = topology_pci.RANK
PciDevice = topology_pci.PciDevice
PciScan = topology_pci.PciScan
pci_relation = topology_pci.pci_relation
path_bridges = topology_pci.path_bridges
resolve_numa = topology_pci.resolve_numa
list_rails = topology_rails.list_rails
rail_by_netdev = topology_rails.rail_by_netdev
rail_by_ibdev = topology_rails.rail_by_ibdev
netdev_to_ibdev = topology_rails.netdev_to_ibdev
ibdev_to_netdev = topology_rails.ibdev_to_netdev
GPU_MODELS = topology_pairing.GPU_MODELS
pair_gpus = topology_pairing.pair_gpus

# qos: the rails' ECN/DCBX/firmware LLDP facts, which need commands: gpufabric_facts adds them (qos_facts.py)
SUBSETS = ("pci", "rails", "numa", "gpu_driver", "fabric_manager", "iommu", "nvidia_fs", "qos")

_FM_COMM = "nv-fabricmanage"   # /proc/<pid>/comm holds 15 characters of "nv-fabricmanager"
# the kernel parameters discovery reads from /proc/cmdline (the iommu facts); a capture keeps the values of these
# and of no other parameter (capture.Masker.cmdline)
CMDLINE_KEYS = re.compile(r"iommu|intel_iommu|amd_iommu|iommu\.[a-z_]+")


def cmdline_discovery_arg(token):
    """True for a ``key=value`` word of /proc/cmdline that discovery reads."""
    key, eq, _value = token.partition("=")
    return bool(eq) and CMDLINE_KEYS.fullmatch(key) is not None


# ------------------------------------------------------------------------------------------------
# host facts


def numa_nodes(sr):
    out = []
    for name in sr.listdir("/sys/devices/system/node"):
        m = re.match(r"^node(\d+)\Z", name)
        if m:
            out.append({"node": int(m.group(1)),
                        "cpulist": sr.read("/sys/devices/system/node/%s/cpulist" % name, "")})
    return sorted(out, key=lambda n: n["node"])


def iommu_facts(sr):
    types = {}
    groups = [g for g in sr.listdir("/sys/kernel/iommu_groups") if g.isdigit()]
    for g in groups:
        t = sr.read("/sys/kernel/iommu_groups/%s/type" % g) or "unknown"
        types[t] = types.get(t, 0) + 1
    translated = sum(v for k, v in types.items() if k in ("DMA", "DMA-FQ"))
    identity = types.get("identity", 0)
    if not groups:
        mode = "off"
    elif translated and not identity:
        mode = "translated"
    elif identity and not translated:
        mode = "identity"
    else:
        mode = "mixed"
    cmdline = (sr.read("/proc/cmdline") or "").split()
    return {"mode": mode, "groups": len(groups), "types": types,
            "cmdline": [w for w in cmdline if cmdline_discovery_arg(w)]}


def gpu_driver_facts(sr):
    text = sr.read("/proc/driver/nvidia/version")
    taint = sr.read("/sys/module/nvidia/taint")
    version = sr.read("/sys/module/nvidia/version")
    if text:
        flavour = "open" if "Open Kernel Module" in text else "proprietary"
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
        if m and not version:
            version = m.group(1)
    elif taint is not None or sr.isdir("/sys/module/nvidia"):
        flavour = "proprietary" if taint and "P" in taint else "open"
    else:
        flavour = "none"
    return {"flavour": flavour, "version": version, "taint": taint}


def fabric_manager_facts(sr, needed):
    pids = []
    for pid in sr.listdir("/proc"):
        if pid.isdigit() and (sr.read("/proc/%s/comm" % pid) or "").startswith(_FM_COMM):
            pids.append(int(pid))
    return {"needed": bool(needed), "running": bool(pids), "pids": sorted(pids)}


def nvidia_fs_facts(sr):
    base = "/proc/driver/nvidia-fs"
    loaded = sr.isdir(base) or sr.isdir("/sys/module/nvidia_fs")
    version = None
    text = sr.read(base + "/version")
    if text:
        m = re.search(r"version:\s*(\S+)", text)
        version = m.group(1) if m else text
    # nvidia-fs lists the storage modules it hooked only while some process holds a /dev/nvidia-fs* open
    # (nvfs_open/nvfs_close in the driver), so the facts read it holding one, as the proofs do
    held = nvfs_modules.read_held(sr) if loaded else {"held": False, "error": None, "modules": {}}
    if loaded and not held["held"]:
        held["modules"] = nvfs_modules.parse_modules(sr.read_raw(base + "/modules"))
    modules = nvfs_modules.storage(held["modules"])
    rw = sr.read("/sys/module/nvidia_fs/parameters/rw_stats_enabled")
    return {"loaded": bool(loaded), "version": version, "module_version": sr.read("/sys/module/nvidia_fs/version"),
            "modules": modules, "modules_read_held": bool(held["held"]),
            "modules_note": held["error"] if loaded and not held["held"] else None,
            "rw_stats_enabled": int(rw) if rw and rw.isdigit() else None}


def normalize_subset(gather_subset):
    """['all'] / ['pci', '!iommu'] -> set of subset names; ValueError on unknown names."""
    wanted = set()
    removed = set()
    for item in gather_subset or ["all"]:
        name = str(item).strip()
        neg = name.startswith("!")
        name = name.lstrip("!")
        if name == "all":
            (removed if neg else wanted).update(SUBSETS)
        elif name in SUBSETS:
            (removed if neg else wanted).add(name)
        else:
            raise ValueError("unknown gather_subset %r (choose from all, %s)" % (item, ", ".join(SUBSETS)))
    if not wanted and removed:
        wanted = set(SUBSETS)
    return wanted - removed


def discover(sysroot=None, gather_subset=None):
    """Discover the host's GPU fabric; see the module docstring for the shape."""
    sr = sysroot if sysroot is not None else Sysroot()
    subset = normalize_subset(gather_subset)
    scan = PciScan.of(sr)
    # architecture: what setup's ansible_architecture reports (platform.machine(), which is os.uname().machine), so
    # roles need no setup call
    facts = {"kernel_release": sr.read("/proc/sys/kernel/osrelease"), "architecture": os.uname().machine,
             "gather_subset": sorted(subset)}
    if "rails" in subset or "pci" in subset:
        net = topology_rails.NetScan.of(scan)
        rails = topology_rails.rails_of(topology_rails.rdma_devices(scan, net))
        if "rails" in subset:
            facts["rails"] = rails
        if "pci" in subset:
            facts.update(topology_pairing.pci_facts(scan, rails, net))
        facts["discovery_notes"] = sorted(scan.notes, key=lambda n: (n["device"] or "", n["note"]))
    if "numa" in subset:
        facts["numa_nodes"] = numa_nodes(sr)
    if "iommu" in subset:
        facts["iommu"] = iommu_facts(sr)
    if "gpu_driver" in subset:
        facts["gpu_driver"] = gpu_driver_facts(sr)
    if "fabric_manager" in subset:
        needed = any(d.is_nvswitch for d in scan.devices.values())
        facts["fabric_manager"] = fabric_manager_facts(sr, needed)
    if "nvidia_fs" in subset:
        facts["nvidia_fs"] = nvidia_fs_facts(sr)
    if "pci" in subset:
        facts["pcie_links"] = pcie_link.path_links(scan, facts)
    if "gpu_driver" in subset and "rails" in subset:
        facts["gpudirect_rdma"] = gpudirect.facts(sr, facts)
    return facts


def warnings(facts):
    """Operator warnings derived from discovered facts."""
    out = []
    for p in facts.get("pairing", []):
        if p["cross_numa"]:
            out.append("GPU %s is paired with NIC %s (%s) across NUMA nodes (SYS): GPUDirect RDMA traffic "
                       "crosses the socket interconnect" % (p["gpu"], p["nic"], p["netdev"] or p["ibdev"]))
        elif p["relation"] == "SYS" and (p["gpu_numa"] is None or p["nic_numa"] is None):
            out.append("GPU %s and NIC %s (%s) sit below different host bridges and the NUMA node of %s is unknown "
                       "(numa_node -1 on a host with several nodes): the pair is treated as SYS"
                       % (p["gpu"], p["nic"], p["netdev"] or p["ibdev"],
                          "both" if p["gpu_numa"] is None and p["nic_numa"] is None
                          else ("the GPU" if p["gpu_numa"] is None else "the NIC")))
    mode = facts.get("iommu", {}).get("mode")
    if mode in ("translated", "mixed"):
        out.append("IOMMU is in %s mode: GPUDirect Storage fails with EIO (add iommu=pt to the kernel command "
                   "line)" % mode)
    drv = facts.get("gpu_driver", {})
    if drv.get("flavour") == "proprietary" and facts.get("nvidia_fs", {}).get("loaded"):
        out.append("nvidia-fs is loaded with the proprietary NVIDIA kernel module: GDS 2.17.5 and later need the "
                   "open kernel module")
    fm = facts.get("fabric_manager", {})
    if fm.get("needed") and not fm.get("running"):
        out.append("NVSwitches are present but nvidia-fabricmanager is not running: CUDA fails with error 802")
    out.extend(pcie_link.warnings(facts.get("pcie_links")))
    gdr = (facts.get("gpudirect_rdma") or {}).get("warning")
    if gdr and facts.get("gpus"):
        out.append(gdr)
    return out
