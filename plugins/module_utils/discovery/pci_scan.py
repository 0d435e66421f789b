# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery stage 1: the PCI scan (functions, SR-IOV, NUMA, bridge roles, relations, path bridges).

Private to the collection; the public names are re-exported by ``topology``.

What the kernel shows and this stage relies on (no simulator shape):

* ``/sys/bus/pci/devices/<bdf>`` links to the function's directory below ``/sys/devices/pci<dom>:<bus>``;
  the directory nesting is the bridge hierarchy (``pci.device_chain``).
* SR-IOV (drivers/pci/iov.c ``pci_iov_sysfs_link`` / ``pci_iov_add_virtfn``): a VF has a ``physfn`` link to
  its PF, the PF ``virtfn<N>`` links to each VF; the VF's sysfs parent is the PF's parent
  (``virtfn->dev.parent = dev->dev.parent``) even when the VF sits on a bus number of its own.
* ``numa_node`` (drivers/pci/pci-sysfs.c, ``dev_to_node``) is -1 (``NUMA_NO_NODE``) when firmware gave the
  function no proximity domain: common on single-socket hosts and VMs. With exactly one NUMA node online it
  can only be that node; with several it is unknown (never 0 by accident). The file is absent on kernels
  without CONFIG_NUMA.
* A function can vanish between the listing and the reads (hot unplug, VF teardown, driver reset): reads then
  fail with ENOENT/ENODEV. Such a function is skipped with a note.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

NVIDIA = 0x10DE
RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
RANK = dict((r, i) for i, r in enumerate(RELATIONS))

NODE_DIR = "/sys/devices/system/node"
PCI_DEVICES = "/sys/bus/pci/devices"


def _hex(text):
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        return None


def raw_numa(text):
    """The integer in a ``numa_node`` file, or None when absent or unreadable (-1 stays -1)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def sort_bdf(bdfs):
    return sorted(bdfs, key=pci.parse_bdf)


def host_nodes(sr):
    """Online NUMA node numbers (``/sys/devices/system/node/nodeN``), sorted."""
    out = []
    for name in sr.listdir(NODE_DIR):
        m = re.match(r"^node(\d+)\Z", name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def resolve_numa(raw, nodes):
    """(node, source, note) for a raw ``numa_node`` value on a host with ``nodes``.

    ``source`` is ``sysfs`` (the kernel's value), ``single_node`` (-1 or absent on a host with one node:
    that node) or ``unknown`` (-1 or absent with several nodes, or no node information at all).
    """
    if raw is not None and raw >= 0:
        return raw, "sysfs", None
    said = "numa_node is -1" if raw is not None else "numa_node is not readable"
    if len(nodes) == 1:
        return nodes[0], "single_node", "%s; the host has one NUMA node (%d), so it is that node" % (said, nodes[0])
    if not nodes:
        return None, "unknown", "%s and the host shows no NUMA nodes" % said
    return None, "unknown", "%s on a host with %d NUMA nodes: the node is unknown" % (said, len(nodes))


class PciDevice(object):
    """One PCI function as sysfs shows it."""

    __slots__ = ("bdf", "vendor", "device", "klass", "numa", "numa_raw", "numa_source", "driver",
                 "iommu_group", "root_bus", "chain", "path", "physfn", "virtfns")

    def __init__(self, bdf, vendor, device, klass, numa, driver, iommu_group, root_bus, chain,
                 numa_raw=None, numa_source="sysfs", path=None, physfn=None, virtfns=None):
        self.bdf = bdf
        self.vendor = vendor
        self.device = device
        self.klass = klass
        self.numa = numa
        self.numa_raw = numa_raw
        self.numa_source = numa_source
        self.driver = driver
        self.iommu_group = iommu_group
        self.root_bus = root_bus
        self.chain = chain
        self.path = path
        self.physfn = physfn
        self.virtfns = list(virtfns or [])

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

    @property
    def is_vf(self):
        return self.physfn is not None


def _link_bdf(sr, path):
    """BDF named by a sysfs link (``physfn``, ``virtfn0``), or None."""
    name = sr.readlink_name(path)
    if name and pci.is_bdf(name):
        return pci.normalize_bdf(name)
    return None


class PciScan(object):
    """One walk of /sys/bus/pci/devices plus cached config-space reads.

    ``notes`` collects ``{device, note}`` for what discovery had to skip or guess (vanished functions,
    NUMA nodes inferred or unknown).
    """

    def __init__(self, sysroot=None):
        self.sysroot = sysroot if sysroot is not None else Sysroot()
        self.net = None   # the NetScan over this walk (rails.NetScan.of)
        self._devices = None
        self._configs = {}
        self._roles = {}
        self._nodes = None
        self.notes = []

    @classmethod
    def of(cls, sysroot=None):
        """The walk of ``sysroot``: one per read-only view (``SnapshotSysroot.shared``), else a new one."""
        sr = sysroot if sysroot is not None else Sysroot()
        shared = getattr(sr, "shared", None)
        return shared("pci_scan", lambda: cls(sr)) if shared is not None else cls(sr)

    def note(self, device, text):
        entry = {"device": device, "note": text}
        if entry not in self.notes:
            self.notes.append(entry)

    @property
    def nodes(self):
        if self._nodes is None:
            self._nodes = host_nodes(self.sysroot)
        return self._nodes

    @property
    def devices(self):
        if self._devices is None:
            found = {}
            for entry in self.sysroot.listdir(PCI_DEVICES):
                if not pci.is_bdf(entry):
                    continue
                dev = self._read(pci.normalize_bdf(entry), entry)
                if dev is not None:
                    found[dev.bdf] = dev
            self._devices = found
        return self._devices

    def _read(self, bdf, entry):
        sr = self.sysroot
        base = PCI_DEVICES + "/" + entry
        if not sr.exists(base):
            self.note(bdf, "listed in %s but gone (removed while discovery ran): skipped" % PCI_DEVICES)
            return None
        vendor, device, klass = _hex(sr.read(base + "/vendor")), _hex(sr.read(base + "/device")), \
            _hex(sr.read(base + "/class"))
        if vendor is None or device is None or klass is None:
            self.note(bdf, "vendor, device or class unreadable (removed while discovery ran?): skipped")
            return None
        try:
            root_bus, chain = pci.device_chain(sr, bdf)
        except pci.PciError:
            root_bus, chain = None, [bdf]
        raw = raw_numa(sr.read(base + "/numa_node"))
        node, source, text = resolve_numa(raw, self.nodes)
        virtfns = []
        for name in sr.listdir(base):
            m = re.match(r"^virtfn(\d+)\Z", name)
            if m:
                vf = _link_bdf(sr, base + "/" + name)
                if vf:
                    virtfns.append((int(m.group(1)), vf))
        dev = PciDevice(
            bdf=bdf, vendor=vendor, device=device, klass=klass, numa=node, numa_raw=raw, numa_source=source,
            driver=sr.readlink_name(base + "/driver"), iommu_group=sr.readlink_name(base + "/iommu_group"),
            root_bus=root_bus, chain=chain, path=sr.realpath(base), physfn=_link_bdf(sr, base + "/physfn"),
            virtfns=[vf for _n, vf in sorted(virtfns)])
        if text and (dev.is_gpu or dev.is_nic or dev.is_nvswitch):      # the functions the facts report
            self.note(bdf, text)
        return dev

    def get(self, bdf):
        try:
            return self.devices.get(pci.normalize_bdf(bdf))
        except ValueError:
            return None

    def function_at(self, path):
        """The PCI function whose directory is ``path`` or its nearest ancestor (host-absolute), or None.

        Only the nearest function counts: a device below a function that vanished is not given to the
        bridge above it.
        """
        parts = [p for p in (path or "").split("/") if p]
        for p in reversed(parts):
            if pci.is_bdf(p) and p.count(":") == 2:
                bdf = pci.normalize_bdf(p)
                return bdf if bdf in self.devices else None
        return None

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
        """Identity of the switch (or lone bridge) a bridge belongs to: a downstream port's upstream port."""
        role = self.role(bdf)
        dev = self.devices.get(bdf)
        if role == "downstream" and dev is not None and len(dev.chain) >= 2 \
                and self.role(dev.chain[-2]) == "upstream":
            return dev.chain[-2]
        return bdf

    def card_bridges(self, bdf):
        """Bridges of a NIC card's own on-board switch, from the top down (ConnectX/BlueField cards).

        Walking up from the function, the bridges made by the function's own vendor (not root ports)
        are part of the card; the first bridge of another vendor is the host's. A host switch is never
        counted as the card's, so the GPU's switch is never mistaken for the card's one.
        """
        dev = self.devices.get(bdf)
        if dev is None:
            return []
        out = []
        for up in reversed(dev.chain[:-1]):
            b = self.devices.get(up)
            if b is None or b.vendor != dev.vendor or self.role(up) == "root_port":
                break
            out.append(up)
        return list(reversed(out))

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


def same_node(a, b):
    """True only when both NUMA nodes are known and equal (an unknown node is never assumed local)."""
    return a.numa is not None and b.numa is not None and a.numa == b.numa


def relation(scan, a, b):
    """nvidia-smi relation of two PciDevices.

    Different host bridges: NODE when both are provably on one NUMA node, else SYS. Below one host bridge:
    PHB when the paths only meet at the host bridge, else PIX when the bridges between them belong to at
    most one switch (or lone bridge), PXB when to several (a NIC card's own switch counts: the transfer
    crosses it).
    """
    if a.root_bus is None or b.root_bus is None or a.root_bus != b.root_bus:
        return "NODE" if same_node(a, b) else "SYS"
    n = _common_prefix(a.chain[:-1], b.chain[:-1])
    if n == 0:
        return "PHB"
    common = a.chain[n - 1]
    bridges = a.chain[n:-1] + b.chain[n:-1] + [common]
    switches = set(scan.switch_of(x) for x in bridges if scan.role(x) != "root_port")
    return "PIX" if len(switches) <= 1 else "PXB"


def meeting_switch(scan, a, b):
    """The switch (upstream port, or lone bridge) where the paths of two devices meet, or None (root complex)."""
    if a.root_bus is None or a.root_bus != b.root_bus:
        return None
    n = _common_prefix(a.chain[:-1], b.chain[:-1])
    if n == 0:
        return None
    common = a.chain[n - 1]
    if scan.role(common) == "root_port":
        return None
    return scan.switch_of(common)


def pci_relation(sysroot, bdf_a, bdf_b, scan=None):
    """nvidia-smi style relation of two PCI devices: PIX, PXB, PHB, NODE or SYS."""
    scan = scan or PciScan.of(sysroot)
    a, b = scan.get(bdf_a), scan.get(bdf_b)
    if a is None or b is None:
        raise pci.PciError("PCI device %s not found" % (bdf_a if a is None else bdf_b))
    return relation(scan, a, b)


def path_bdfs(a, b):
    """Bridges on the tree path between two devices, from ``a``'s side to ``b``'s (lowest common one included)."""
    if a.root_bus is not None and a.root_bus == b.root_bus:
        n = _common_prefix(a.chain[:-1], b.chain[:-1])
        if n:
            return list(reversed(a.chain[n:-1])) + [a.chain[n - 1]] + b.chain[n:-1]
    return list(reversed(a.chain[:-1])) + b.chain[:-1]


def bridge_entry(scan, bdf):
    try:
        kpath = pci.kernel_path(scan.sysroot, bdf)
    except pci.PciError:
        kpath = None
    return {"bdf": bdf, "role": scan.role(bdf), "kernel_path": kpath, "acs": scan.acs(bdf)}


def path_bridges(sysroot, bdf_a, bdf_b, scan=None):
    """Bridges on the peer-to-peer path between two devices, from ``bdf_a``'s side to ``bdf_b``'s."""
    scan = scan or PciScan.of(sysroot)
    a, b = scan.get(bdf_a), scan.get(bdf_b)
    if a is None or b is None:
        raise pci.PciError("PCI device %s not found" % (bdf_a if a is None else bdf_b))
    return [bridge_entry(scan, x) for x in path_bdfs(a, b)]
