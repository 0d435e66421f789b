# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discover the GPU fabric of a host from sysfs/procfs: GPUs, NICs and rails, NUMA, PCIe relations.

Public API (plain Python, every path through a ``Sysroot``):

``discover(sysroot=None, gather_subset=None) -> dict``
    One sysfs walk per call. ``gather_subset`` is a list of ``all`` (default), ``pci``, ``rails``,
    ``numa``, ``gpu_driver``, ``fabric_manager``, ``iommu``, ``nvidia_fs``; ``!name`` removes one.
    Keys (present per subset):

    * ``gpus``: ``[{index, bdf, vendor, device, class, model, numa, driver, root_bus}]`` in PCI order
      (vendor 0x10de, class 0x0300xx/0x0302xx). ``numa`` is ``None`` when the kernel says -1.
    * ``nvswitches``: ``[{bdf, device, numa, driver}]`` (vendor 0x10de, class 0x0680xx).
    * ``nics``: ``[{bdf, vendor, device, class, numa, driver, netdevs, ibdevs, rdma, root_bus}]``
      (class 0x02xxxx).
    * ``rails``: ``[{netdev, ibdev, port, bdf, numa, driver, link_layer, state, roce_v2_ipv4_gid_index,
      roce_v2_ipv4_gid, ipv4}]`` one per RDMA port, ordered by ibdev name.
    * ``matrix``: ``{gpu_bdf: {nic_bdf: relation}}`` with nvidia-smi semantics PIX / PXB / PHB /
      NODE / SYS, over RDMA-capable NICs.
    * ``pairing``: ``[{gpu, gpu_index, nic, netdev, ibdev, port, relation, gpu_numa, nic_numa,
      cross_numa, bridges}]``: the closest NIC of each GPU, one-to-one while NICs last (ties broken
      by PCI order), ``bridges`` the path bridges (see ``path_bridges``).
    * ``path_bridges``: ``[{bdf, role, kernel_path, acs: {...}, pairs: [gpu_bdf, ...]}]`` the union of
      the bridges on the paired paths, in PCI order.
    * ``numa_nodes``: ``[{node, cpulist}]``.
    * ``iommu``: ``{mode: identity|translated|off|mixed, groups, types: {type: count}, cmdline: [...]}``.
    * ``gpu_driver``: ``{flavour: open|proprietary|none, version, taint}``.
    * ``fabric_manager``: ``{needed, running, pids}``.
    * ``nvidia_fs``: ``{loaded, version, module_version, modules: {name: version}, rw_stats_enabled}``.
    * ``kernel_release``.

``path_bridges(sysroot, bdf_a, bdf_b, scan=None) -> list``
    The bridges a peer-to-peer transfer between two devices crosses: from each endpoint up to the
    lowest common bridge (for a switch: both downstream ports and the switch's upstream port), or up
    to and including the root ports when the devices only meet at the root complex or beyond.
    Each: ``{bdf, role, kernel_path, acs: {present, offset, cap, ctrl, cap_bits, ctrl_bits} | error}``.

``pci_relation(sysroot, bdf_a, bdf_b, scan=None) -> 'PIX'|'PXB'|'PHB'|'NODE'|'SYS'``.

``list_rails(sysroot)``, ``rail_by_netdev(sysroot, netdev)``, ``rail_by_ibdev(sysroot, ibdev, port=None)``
    Rail lookups (``None`` when absent); ``netdev_to_ibdev`` -> ``(ibdev, port)`` and
    ``ibdev_to_netdev(sysroot, ibdev, port=1)`` -> netdev are shortcuts.

``PciScan(sysroot)`` is the cache behind one discovery; pass it as ``scan=`` to reuse a walk.
Never raises on a host without GPUs, NICs, IOMMU or NVIDIA driver: lists are empty and modes say so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import platform
import re

from ansible_collections.gpufabric.node.plugins.module_utils import pci
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

NVIDIA = 0x10DE
RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
RANK = dict((r, i) for i, r in enumerate(RELATIONS))
SUBSETS = ("pci", "rails", "numa", "gpu_driver", "fabric_manager", "iommu", "nvidia_fs")

GPU_MODELS = {
    0x2335: "H200 SXM",
    0x233B: "H200 NVL",
    0x2330: "H100 SXM5 80GB",
    0x2331: "H100 PCIe",
    0x2321: "H100 NVL",
    0x20B5: "A100 SXM4 80GB",
    0x20B2: "A100 SXM4 80GB",
    0x20F1: "A100 PCIe 40GB",
}

_FM_COMM = "nv-fabricmanage"   # /proc/<pid>/comm holds 15 characters of "nv-fabricmanager"
_IOMMU_CMDLINE = re.compile(r"^(iommu|intel_iommu|amd_iommu|iommu\.[a-z_]+)=")


def _hex(text):
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        return None


def _numa(text):
    try:
        n = int(text)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def _sort_bdf(bdfs):
    return sorted(bdfs, key=pci.parse_bdf)


class PciDevice(object):
    """One PCI function as sysfs shows it."""

    __slots__ = ("bdf", "vendor", "device", "klass", "numa", "driver", "iommu_group", "root_bus", "chain")

    def __init__(self, bdf, vendor, device, klass, numa, driver, iommu_group, root_bus, chain):
        self.bdf = bdf
        self.vendor = vendor
        self.device = device
        self.klass = klass
        self.numa = numa
        self.driver = driver
        self.iommu_group = iommu_group
        self.root_bus = root_bus
        self.chain = chain

    @property
    def is_gpu(self):
        return self.vendor == NVIDIA and self.klass is not None and (self.klass >> 8) in (0x0300, 0x0302)

    @property
    def is_nvswitch(self):
        return self.vendor == NVIDIA and self.klass is not None and (self.klass >> 8) == 0x0680

    @property
    def is_nic(self):
        return self.klass is not None and (self.klass >> 16) == 0x02

    @property
    def is_bridge_class(self):
        return self.klass is not None and (self.klass >> 8) in (0x0604, 0x0609)


class PciScan(object):
    """One walk of /sys/bus/pci/devices plus cached config-space reads."""

    def __init__(self, sysroot=None):
        self.sysroot = sysroot if sysroot is not None else Sysroot()
        self._devices = None
        self._configs = {}
        self._roles = {}

    @property
    def devices(self):
        if self._devices is None:
            self._devices = {}
            sr = self.sysroot
            for bdf in sr.listdir("/sys/bus/pci/devices"):
                if not pci.is_bdf(bdf):
                    continue
                base = "/sys/bus/pci/devices/" + bdf
                try:
                    root_bus, chain = pci.device_chain(sr, bdf)
                except pci.PciError:
                    root_bus, chain = None, [bdf]
                self._devices[bdf] = PciDevice(
                    bdf=bdf,
                    vendor=_hex(sr.read(base + "/vendor")),
                    device=_hex(sr.read(base + "/device")),
                    klass=_hex(sr.read(base + "/class")),
                    numa=_numa(sr.read(base + "/numa_node")),
                    driver=sr.readlink_name(base + "/driver"),
                    iommu_group=sr.readlink_name(base + "/iommu_group"),
                    root_bus=root_bus,
                    chain=chain,
                )
        return self._devices

    def get(self, bdf):
        return self.devices.get(pci.normalize_bdf(bdf))

    def config(self, bdf):
        """ConfigSpace or the PciError met reading it (cached)."""
        if bdf not in self._configs:
            try:
                self._configs[bdf] = pci.read_config(self.sysroot, bdf)
            except pci.PciError as e:
                self._configs[bdf] = e
        return self._configs[bdf]

    def children(self, bdf):
        return [d for d in self.devices.values() if len(d.chain) >= 2 and d.chain[-2] == bdf]

    def role(self, bdf):
        """root_port | upstream | downstream | bridge | endpoint, from the PCIe capability.

        When the capability cannot be read (a non-root reader sees 64 bytes) the role is inferred
        from the tree: a bridge on a root bus is a root port, a bridge below an upstream port is a
        downstream port, a bridge whose children are all bridges is an upstream port.
        """
        if bdf in self._roles:
            return self._roles[bdf]
        cfg = self.config(bdf)
        role = None
        if isinstance(cfg, pci.ConfigSpace) and len(cfg) >= pci.PCI_CFG_SPACE_SIZE:
            role = {"root_port": "root_port", "upstream": "upstream", "downstream": "downstream",
                    "endpoint": "endpoint", "legacy_endpoint": "endpoint",
                    "rc_integrated_endpoint": "endpoint"}.get(cfg.port_type_name)
            if role is None:
                role = "bridge" if cfg.is_bridge else "endpoint"
        if role is None:
            dev = self.devices.get(bdf)
            if dev is None or not dev.is_bridge_class:
                role = "endpoint"
            elif len(dev.chain) == 1:
                role = "root_port"
            elif self.role(dev.chain[-2]) == "upstream":
                role = "downstream"
            else:
                kids = self.children(bdf)
                role = "upstream" if kids and all(k.is_bridge_class for k in kids) else "bridge"
        self._roles[bdf] = role
        return role

    def switch_of(self, bdf):
        """Identity of the switch (or lone bridge) a bridge belongs to."""
        role = self.role(bdf)
        dev = self.devices.get(bdf)
        if role == "downstream" and dev is not None and len(dev.chain) >= 2 \
                and self.role(dev.chain[-2]) == "upstream":
            return dev.chain[-2]
        return bdf

    def acs(self, bdf):
        cfg = self.config(bdf)
        if isinstance(cfg, pci.PciError):
            return {"error": str(cfg)}
        try:
            return pci.acs_info(self.sysroot, bdf, cfg)
        except pci.PciError as e:
            return {"error": str(e)}


def _common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _relation(scan, a, b):
    if a.root_bus is None or b.root_bus is None or a.root_bus != b.root_bus:
        return "NODE" if a.numa == b.numa else "SYS"
    n = _common_prefix(a.chain[:-1], b.chain[:-1])
    if n == 0:
        return "PHB"
    common = a.chain[n - 1]
    bridges = a.chain[n:-1] + b.chain[n:-1] + [common]
    switches = set(scan.switch_of(x) for x in bridges if scan.role(x) != "root_port")
    return "PIX" if len(switches) <= 1 else "PXB"


def pci_relation(sysroot, bdf_a, bdf_b, scan=None):
    """nvidia-smi style relation of two PCI devices: PIX, PXB, PHB, NODE or SYS."""
    scan = scan or PciScan(sysroot)
    a, b = scan.get(bdf_a), scan.get(bdf_b)
    if a is None or b is None:
        raise pci.PciError("PCI device %s not found" % (bdf_a if a is None else bdf_b))
    return _relation(scan, a, b)


def _path_bdfs(a, b):
    if a.root_bus is not None and a.root_bus == b.root_bus:
        n = _common_prefix(a.chain[:-1], b.chain[:-1])
        if n:
            return list(reversed(a.chain[n:-1])) + [a.chain[n - 1]] + b.chain[n:-1]
    return list(reversed(a.chain[:-1])) + b.chain[:-1]


def _bridge_entry(scan, bdf):
    try:
        kpath = pci.kernel_path(scan.sysroot, bdf)
    except pci.PciError:
        kpath = None
    return {"bdf": bdf, "role": scan.role(bdf), "kernel_path": kpath, "acs": scan.acs(bdf)}


def path_bridges(sysroot, bdf_a, bdf_b, scan=None):
    """Bridges on the peer-to-peer path between two devices, from ``bdf_a``'s side to ``bdf_b``'s."""
    scan = scan or PciScan(sysroot)
    a, b = scan.get(bdf_a), scan.get(bdf_b)
    if a is None or b is None:
        raise pci.PciError("PCI device %s not found" % (bdf_a if a is None else bdf_b))
    return [_bridge_entry(scan, x) for x in _path_bdfs(a, b)]


# ------------------------------------------------------------------------------------------------
# rails


def _port_netdev(sr, ibdir, port, pci_dir):
    for n in range(0, 4):
        nd = sr.read("%s/ports/%s/gid_attrs/ndevs/%d" % (ibdir, port, n))
        if nd:
            return nd
    netdevs = sr.listdir(pci_dir + "/net") if pci_dir else []
    if len(netdevs) == 1:
        return netdevs[0]
    for nd in netdevs:
        if sr.read("%s/net/%s/dev_port" % (pci_dir, nd)) == str(int(port) - 1):
            return nd
    return None


def _roce_v2_ipv4(sr, ibdir, port):
    base = "%s/ports/%s" % (ibdir, port)
    for n in sorted((int(x) for x in sr.listdir(base + "/gids") if x.isdigit())):
        if sr.read("%s/gid_attrs/types/%d" % (base, n)) != "RoCE v2":
            continue
        gid = sr.read("%s/gids/%d" % (base, n)) or ""
        words = gid.split(":")
        if len(words) == 8 and all(w == "0000" for w in words[:5]) and words[5] == "ffff":
            raw = int(words[6] + words[7], 16)
            ipv4 = ".".join(str((raw >> s) & 0xFF) for s in (24, 16, 8, 0))
            return n, gid, ipv4
    return None, None, None


def list_rails(sysroot=None, scan=None):
    """One entry per RDMA device port (see the module docstring)."""
    sr = sysroot if sysroot is not None else (scan.sysroot if scan else Sysroot())
    rails = []
    for ibdev in sr.listdir("/sys/class/infiniband"):
        ibdir = "/sys/class/infiniband/" + ibdev
        pci_dir = sr.realpath(ibdir + "/device")
        bdf = pci_dir.rstrip("/").split("/")[-1]
        if not pci.is_bdf(bdf):
            bdf, pci_dir = None, None
        else:
            bdf = pci.normalize_bdf(bdf)
        numa = _numa(sr.read(pci_dir + "/numa_node")) if pci_dir else None
        driver = sr.readlink_name(pci_dir + "/driver") if pci_dir else None
        ports = sorted((p for p in sr.listdir(ibdir + "/ports") if p.isdigit()), key=int)
        for port in ports:
            idx, gid, ipv4 = _roce_v2_ipv4(sr, ibdir, port)
            rails.append({
                "netdev": _port_netdev(sr, ibdir, port, pci_dir),
                "ibdev": ibdev,
                "port": int(port),
                "bdf": bdf,
                "numa": numa,
                "driver": driver,
                "link_layer": sr.read("%s/ports/%s/link_layer" % (ibdir, port)),
                "state": sr.read("%s/ports/%s/state" % (ibdir, port)),
                "roce_v2_ipv4_gid_index": idx,
                "roce_v2_ipv4_gid": gid,
                "ipv4": ipv4,
            })
    return sorted(rails, key=lambda r: (_natural(r["ibdev"]), r["port"]))


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def rail_by_netdev(sysroot, netdev):
    for r in list_rails(sysroot):
        if r["netdev"] == netdev:
            return r
    return None


def rail_by_ibdev(sysroot, ibdev, port=None):
    for r in list_rails(sysroot):
        if r["ibdev"] == ibdev and (port is None or r["port"] == int(port)):
            return r
    return None


def netdev_to_ibdev(sysroot, netdev):
    r = rail_by_netdev(sysroot, netdev)
    return (r["ibdev"], r["port"]) if r else (None, None)


def ibdev_to_netdev(sysroot, ibdev, port=1):
    r = rail_by_ibdev(sysroot, ibdev, port)
    return r["netdev"] if r else None


# ------------------------------------------------------------------------------------------------
# host facts


def numa_nodes(sr):
    out = []
    for name in sr.listdir("/sys/devices/system/node"):
        m = re.match(r"^node(\d+)$", name)
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
            "cmdline": [w for w in cmdline if _IOMMU_CMDLINE.match(w)]}


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
    modules = {}
    for line in (sr.read_raw(base + "/modules") or "").splitlines():
        if ":" in line:
            name, _sep, ver = line.partition(":")
            if name.strip():
                modules[name.strip()] = ver.strip()
    rw = sr.read("/sys/module/nvidia_fs/parameters/rw_stats_enabled")
    return {"loaded": bool(loaded), "version": version, "module_version": sr.read("/sys/module/nvidia_fs/version"),
            "modules": modules, "rw_stats_enabled": int(rw) if rw and rw.isdigit() else None}


# ------------------------------------------------------------------------------------------------
# pairing


def pair_gpus(gpu_bdfs, nic_bdfs, relation):
    """Closest NIC per GPU; one-to-one while NICs last; ties broken by PCI order.

    ``relation(gpu, nic)`` returns one of RELATIONS. Returns ``{gpu: nic}``.
    """
    gpu_bdfs, nic_bdfs = _sort_bdf(gpu_bdfs), _sort_bdf(nic_bdfs)
    cand = []
    for gi, g in enumerate(gpu_bdfs):
        for ni, n in enumerate(nic_bdfs):
            cand.append((RANK[relation(g, n)], gi, ni))
    cand.sort()
    out, used = {}, set()
    for _rank, gi, ni in cand:
        g, n = gpu_bdfs[gi], nic_bdfs[ni]
        if g in out or n in used:
            continue
        out[g] = n
        used.add(n)
    for _rank, gi, ni in cand:              # more GPUs than NICs: share the closest
        g = gpu_bdfs[gi]
        if g not in out:
            out[g] = nic_bdfs[ni]
    return out


def _pci_facts(scan, rails):
    devs = scan.devices
    gpus, nvswitches, nics = [], [], []
    for bdf in _sort_bdf(devs):
        d = devs[bdf]
        if d.is_gpu:
            gpus.append({"index": len(gpus), "bdf": bdf, "vendor": "0x%04x" % d.vendor,
                         "device": "0x%04x" % d.device, "class": "0x%06x" % d.klass,
                         "model": GPU_MODELS.get(d.device), "numa": d.numa, "driver": d.driver,
                         "root_bus": d.root_bus})
        elif d.is_nvswitch:
            nvswitches.append({"bdf": bdf, "device": "0x%04x" % d.device, "numa": d.numa, "driver": d.driver})
        elif d.is_nic:
            ib = [r for r in rails if r["bdf"] == bdf]
            nics.append({"bdf": bdf, "vendor": "0x%04x" % d.vendor, "device": "0x%04x" % d.device,
                         "class": "0x%06x" % d.klass, "numa": d.numa, "driver": d.driver,
                         "netdevs": scan.sysroot.listdir("/sys/bus/pci/devices/%s/net" % bdf),
                         "ibdevs": sorted(set(r["ibdev"] for r in ib)), "rdma": bool(ib),
                         "root_bus": d.root_bus})
    rdma_nics = [n["bdf"] for n in nics if n["rdma"]]
    matrix = {}
    for g in gpus:
        matrix[g["bdf"]] = dict((n, _relation(scan, devs[g["bdf"]], devs[n])) for n in rdma_nics)
    pairs = pair_gpus([g["bdf"] for g in gpus], rdma_nics, lambda g, n: matrix[g][n])
    pairing, bridges = [], {}
    for g in gpus:
        nic = pairs.get(g["bdf"])
        if nic is None:
            continue
        rail = next((r for r in rails if r["bdf"] == nic), {})
        path = _path_bdfs(devs[g["bdf"]], devs[nic])
        for b in path:
            bridges.setdefault(b, []).append(g["bdf"])
        nd = devs[nic]
        pairing.append({
            "gpu": g["bdf"], "gpu_index": g["index"], "nic": nic, "netdev": rail.get("netdev"),
            "ibdev": rail.get("ibdev"), "port": rail.get("port"), "relation": matrix[g["bdf"]][nic],
            "gpu_numa": g["numa"], "nic_numa": nd.numa,
            "cross_numa": matrix[g["bdf"]][nic] == "SYS",
            "bridges": path,
        })
    path_list = []
    for b in _sort_bdf(bridges):
        entry = _bridge_entry(scan, b)
        entry["pairs"] = bridges[b]
        path_list.append(entry)
    return {"gpus": gpus, "nvswitches": nvswitches, "nics": nics, "matrix": matrix,
            "pairing": pairing, "path_bridges": path_list}


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
    scan = PciScan(sr)
    # architecture: what setup's ansible_architecture reports (platform.machine()), so roles need no setup call
    facts = {"kernel_release": sr.read("/proc/sys/kernel/osrelease"), "architecture": platform.machine(),
             "gather_subset": sorted(subset)}
    rails = None
    if "rails" in subset or "pci" in subset:
        rails = list_rails(sr)
    if "rails" in subset:
        facts["rails"] = rails
    if "pci" in subset:
        facts.update(_pci_facts(scan, rails))
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
    return facts


def warnings(facts):
    """Operator warnings derived from discovered facts."""
    out = []
    for p in facts.get("pairing", []):
        if p["cross_numa"]:
            out.append("GPU %s is paired with NIC %s (%s) across NUMA nodes (SYS): GPUDirect RDMA traffic "
                       "crosses the socket interconnect" % (p["gpu"], p["nic"], p["netdev"] or p["ibdev"]))
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
    return out
