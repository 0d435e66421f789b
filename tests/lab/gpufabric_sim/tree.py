# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a faithful host tree (sysfs, procfs, /etc, /boot) for a topology.

``build_tree(root, topology, node_index=1) -> manifest`` writes below ``root``:

* ``sys/devices/pci<seg>:<bus>/<bdf>/.../<bdf>`` nested like Linux, ``sys/bus/pci/devices/<bdf>``
  and ``sys/bus/pci/drivers/<drv>/<bdf>`` links, per device ``vendor device class subsystem_vendor
  subsystem_device numa_node local_cpulist driver iommu_group config`` (``config`` a 4096-byte
  config space: type 0/1 header, capability list, extended capability chain with AER first and
  ACS where the topology gives one);
* NICs: ``net/<netdev>/`` and ``infiniband/<ibdev>/ports/<n>/`` (GID table: fe80 link-local at
  0/1, the rail's IPv4-mapped address at 2/3 as RoCE v1/v2), ``sys/class/{net,infiniband}`` links,
  ``sys/kernel/config/rdma_cm/``;
* ``sys/kernel/iommu_groups/N/{type,devices/}``, ``sys/devices/system/node/nodeN/cpulist``;
* NVIDIA driver (``/proc/driver/nvidia/version``, ``/sys/module/nvidia/{version,taint}``), Fabric
  Manager process (``/proc/<pid>/comm``), nvidia-fs (``/proc/driver/nvidia-fs/*``,
  ``/sys/module/nvidia_fs/parameters/rw_stats_enabled``);
* ``proc/cmdline``, ``proc/sys/kernel/osrelease``, ``proc/sys/net`` (absolute link to the real
  ``/proc/sys/net``), ``etc/os-release``, ``etc/default/grub`` (and BLS entries on rhel);
* the manifest, also at ``var/lib/gpufabric-sim/manifest.json``.

Every symlink except ``proc/sys/net`` is relative and resolves inside ``root``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

from gpufabric_sim import topology as topomod

CFG_SIZE = 4096

# PCI Express capability: device/port types
PORT_TYPE = {"endpoint": 0x0, "root_port": 0x4, "upstream": 0x5, "downstream": 0x6, "pcie_to_pci": 0x7}
KIND_PORT_TYPE = {
    "root_port": PORT_TYPE["root_port"],
    "switch_up": PORT_TYPE["upstream"],
    "switch_down": PORT_TYPE["downstream"],
    "bridge": PORT_TYPE["pcie_to_pci"],
}

GPU_NAMES = {
    0x2335: "NVIDIA H200",
    0x2330: "NVIDIA H100 80GB HBM3",
    0x2331: "NVIDIA H100 PCIe",
    0x2321: "NVIDIA H100 NVL",
    0x20B5: "NVIDIA A100-SXM4-80GB",
}

OS_RELEASE = {
    "ubuntu": (
        'PRETTY_NAME="Ubuntu {v}.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="{v}"\nVERSION="{v}.1 LTS (Noble Numbat)"\n'
        'VERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\nHOME_URL="https://www.ubuntu.com/"\n'
        'SUPPORT_URL="https://help.ubuntu.com/"\nBUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
        'UBUNTU_CODENAME=noble\nLOGO=ubuntu-logo\n'),
    "debian": (
        'PRETTY_NAME="Debian GNU/Linux {v} (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="{v}"\n'
        'VERSION="{v} (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\nHOME_URL="https://www.debian.org/"\n'
        'SUPPORT_URL="https://www.debian.org/support"\nBUG_REPORT_URL="https://bugs.debian.org/"\n'),
    "rhel": (
        'NAME="Red Hat Enterprise Linux"\nVERSION="{v} (Plow)"\nID="rhel"\nID_LIKE="fedora"\n'
        'VERSION_ID="{v}"\nPLATFORM_ID="platform:el9"\nPRETTY_NAME="Red Hat Enterprise Linux {v} (Plow)"\n'
        'ANSI_COLOR="0;31"\nLOGO="fedora-logo-icon"\nCPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
        'HOME_URL="https://www.redhat.com/"\n'),
}

MACHINE_ID = "4c1f0e6a9b2d4f3e8a7c5b6d1e2f3a4b"


# ----------------------------------------------------------------------------------------------
# small file helpers


def _write(path, content, mode=0o644):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    data = content if isinstance(content, bytes) else content.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _link(target, link):
    """Create ``link`` pointing at ``target`` (both real paths) with a relative target."""
    d = os.path.dirname(link)
    if not os.path.isdir(d):
        os.makedirs(d)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(target, d), link)


def _mkdir(path):
    if not os.path.isdir(path):
        os.makedirs(path)


# ----------------------------------------------------------------------------------------------
# config space


class _Cfg(object):
    def __init__(self):
        self.b = bytearray(CFG_SIZE)

    def u8(self, off, v):
        self.b[off] = v & 0xFF

    def u16(self, off, v):
        struct.pack_into("<H", self.b, off, v & 0xFFFF)

    def u32(self, off, v):
        struct.pack_into("<I", self.b, off, v & 0xFFFFFFFF)


def _ext_caps(dev):
    """(id, version, size) of the extended capabilities of a device, in chain order."""
    kind = dev["kind"]
    acs = [(0x000D, 1, 8)] if dev.get("acs") else []
    aer = [(0x0001, 2, 0x48)]
    sec = [(0x0019, 1, 0x20)]
    if kind == "root_port":
        return aer + acs + sec + [(0x001D, 1, 0x20)]                # ACS followed by SecPCIe, DPC
    if kind == "switch_down":
        return aer + sec + [(0x0004, 1, 0x10)] + acs + [(0x001D, 1, 0x20)]   # PwrBudget, ACS, DPC
    if kind == "switch_up":
        return aer + sec + [(0x0004, 1, 0x10)] + acs
    if kind == "nic":
        return aer + [(0x0003, 1, 0x0C), (0x000E, 1, 0x08)] + sec + acs  # DSN, ARI, SecPCIe
    if kind in ("gpu", "nvswitch"):
        return aer + sec + [(0x0015, 1, 0x0C)] + acs                     # Resizable BAR
    return aer + [(0x0003, 1, 0x0C)] + acs


def config_space(dev, primary=0, secondary=0, subordinate=0):
    """A 4096-byte config space for a topology device."""
    c = _Cfg()
    kind = dev["kind"]
    bridge = kind in topomod.BRIDGE_KINDS
    c.u16(0x00, dev["vendor"])
    c.u16(0x02, dev["device"])
    c.u16(0x04, 0x0547 if bridge else 0x0546)         # IO/MEM/master/parity/SERR
    c.u16(0x06, 0x0010)                               # capability list present
    c.u8(0x08, dev.get("revision", 0xA1 if kind == "gpu" else 0x00))
    klass = dev["class"]
    c.u8(0x09, klass & 0xFF)
    c.u8(0x0A, (klass >> 8) & 0xFF)
    c.u8(0x0B, (klass >> 16) & 0xFF)
    c.u8(0x0C, 0x10)                                  # cache line 64 bytes
    c.u8(0x0E, 0x01 if bridge else 0x00)
    c.u8(0x34, 0x40)
    if bridge:
        c.u8(0x18, primary)
        c.u8(0x19, secondary)
        c.u8(0x1A, subordinate)
        c.u16(0x1C, 0x01F1)
        c.u32(0x20, 0x9FF09000)
        c.u32(0x24, 0x0001FFF1)
        c.u16(0x3E, 0x0012)
        c.u8(0x3D, 0x01)
    else:
        c.u32(0x10, 0x94000000 if kind != "gpu" else 0x9A000000)
        c.u32(0x14, 0x0000000C)
        c.u16(0x2C, dev["subsystem_vendor"])
        c.u16(0x2E, dev["subsystem_device"])
        c.u8(0x3C, 0xFF)
        c.u8(0x3D, 0x01)

    # capability list: PM @0x40 -> MSI @0x48 -> PCIe @0x60 -> MSI-X or SSVID @0xA0
    c.u8(0x40, 0x01)
    c.u8(0x41, 0x48)
    c.u16(0x42, 0x0003)
    c.u16(0x44, 0x0008)
    c.u8(0x48, 0x05)
    c.u8(0x49, 0x60)
    c.u16(0x4A, 0x0180)
    ptype = dev.get("port_type", KIND_PORT_TYPE.get(kind, PORT_TYPE["endpoint"]))
    pcie = 0x60
    c.u8(pcie, 0x10)
    c.u8(pcie + 1, 0xA0)
    slot = 0x0100 if ptype in (PORT_TYPE["root_port"], PORT_TYPE["downstream"]) else 0
    c.u16(pcie + 0x02, 0x0002 | (ptype << 4) | slot)
    c.u32(pcie + 0x04, 0x00008002 if bridge else 0x10008FC2)
    c.u16(pcie + 0x08, 0x2950)
    speed, width = dev.get("link", (5, 16))
    port_no = int(dev["bdf"].split(":")[2].split(".")[0], 16)
    c.u32(pcie + 0x0C, speed | (width << 4) | 0x00400C00 | (port_no << 24))
    c.u16(pcie + 0x12, speed | (width << 4) | (0x2000 if slot else 0))
    if slot:
        c.u32(pcie + 0x14, ((port_no + 1) << 19) | 0x0060)
    c.u32(pcie + 0x24, 0x00010800 if bridge else 0x00730810)
    c.u32(pcie + 0x2C, 0x0000003E)
    c.u16(pcie + 0x30, speed)
    if bridge:
        c.u8(0xA0, 0x0D)                              # subsystem ID for bridges
        c.u8(0xA1, 0x00)
        c.u16(0xA4, dev["subsystem_vendor"])
        c.u16(0xA6, dev["subsystem_device"])
    else:
        c.u8(0xA0, 0x11)                              # MSI-X
        c.u8(0xA1, 0x00)
        c.u16(0xA2, 0x003F)
        c.u32(0xA4, 0x00002000)
        c.u32(0xA8, 0x00003000)

    # extended capabilities from 0x100
    caps = _ext_caps(dev)
    off = 0x100
    offsets = []
    for cap_id, ver, size in caps:
        offsets.append(off)
        off = (off + size + 3) & ~3
    for i, (cap_id, ver, size) in enumerate(caps):
        o = offsets[i]
        nxt = offsets[i + 1] if i + 1 < len(caps) else 0
        c.u32(o, cap_id | (ver << 16) | (nxt << 20))
        if cap_id == 0x000D:
            c.u16(o + 4, dev["acs"]["cap"])
            c.u16(o + 6, dev["acs"]["ctrl"])
        elif cap_id == 0x0001:
            c.u32(o + 0x08, 0x00462030)               # uncorrectable severity (defaults)
            c.u32(o + 0x14, 0x0000E000)               # correctable mask
            c.u32(o + 0x18, 0x000000A0)               # ECRC capable
        elif cap_id == 0x0003:
            serial = (dev["vendor"] << 48) | int(dev["bdf"].replace(":", "").replace(".", ""), 16)
            c.u32(o + 4, serial & 0xFFFFFFFF)
            c.u32(o + 8, (serial >> 32) & 0xFFFFFFFF)
    # ``config_patch: {"0x100": "0d00 0110"}`` overwrites bytes (odd or broken hardware in tests)
    for o, hexdata in (dev.get("config_patch") or {}).items():
        start = o if isinstance(o, int) else int(str(o), 0)
        data = bytearray.fromhex(hexdata)
        c.b[start:start + len(data)] = data
    size = int(dev.get("config_size", CFG_SIZE))
    return bytes(c.b[:size])


# ----------------------------------------------------------------------------------------------
# the tree


def _bus_of(bdf):
    return topomod.parse_bdf(bdf)[1]


def _subtree_max_bus(dev):
    m = _bus_of(dev["bdf"])
    for ch in dev.get("children", []):
        m = max(m, _subtree_max_bus(ch), _bus_of(ch["bdf"]))
    if dev.get("secondary") is not None:
        m = max(m, int(dev["secondary"]))
    return m


def _bridge_buses(dev):
    if dev["children"]:
        buses = set(_bus_of(ch["bdf"]) for ch in dev["children"])
        if len(buses) != 1:
            raise topomod.TopologyError("children of bridge %s sit on several buses %s"
                                        % (dev["bdf"], sorted(buses)))
        secondary = buses.pop()
        if secondary <= _bus_of(dev["bdf"]):
            raise topomod.TopologyError("bridge %s: secondary bus %02x not above its own bus"
                                        % (dev["bdf"], secondary))
    else:
        secondary = int(dev.get("secondary", _bus_of(dev["bdf"]) + 1))
    return secondary, max(secondary, _subtree_max_bus(dev))


def _cpus_all(topo):
    return ",".join(topo["numa_nodes"][n] for n in sorted(topo["numa_nodes"]))


def _mac(node_index, rail):
    return "b8:3f:d2:%02x:%02x:%02x" % ((node_index >> 8) & 0xFF, node_index & 0xFF, rail & 0xFF)


def _gid_words(raw16):
    return ":".join("%02x%02x" % (raw16[i], raw16[i + 1]) for i in range(0, 16, 2))


def _link_local_gid(mac):
    b = [int(x, 16) for x in mac.split(":")]
    eui = [b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]
    return _gid_words(bytes(bytearray([0xFE, 0x80, 0, 0, 0, 0, 0, 0] + eui)))


def _v4_gid(ipv4):
    parts = [int(x) for x in ipv4.split("/")[0].split(".")]
    return _gid_words(bytes(bytearray([0] * 10 + [0xFF, 0xFF] + parts)))


class _Builder(object):
    def __init__(self, root, topo, node_index):
        self.root = os.path.abspath(root)
        self.topo = topo
        self.node_index = node_index
        self.group = 0
        self.ifindex = 2
        self.gpus = []
        self.rails = []
        self.nic_order = sorted(
            (d["bdf"] for _rb, d in topomod.iter_devices(topo) if d["kind"] == "nic" and d.get("ibdev")),
            key=topomod.parse_bdf)

    def p(self, *parts):
        return os.path.join(self.root, *[x.lstrip("/") for x in parts])

    # -- PCI ---------------------------------------------------------------------------------
    def pci(self):
        _mkdir(self.p("sys/bus/pci/devices"))
        _mkdir(self.p("sys/bus/pci/drivers"))
        _mkdir(self.p("sys/kernel/iommu_groups"))
        for rb in self.topo["root_buses"]:
            seg, bus = rb["bus"].split(":")
            rdir = self.p("sys/devices", "pci%s:%s" % (seg.lower(), bus.lower()))
            _mkdir(rdir)
            _mkdir(os.path.join(rdir, "pci_bus", "%s:%s" % (seg.lower(), bus.lower())))
            for d in rb["devices"]:
                self.device(d, rdir, int(bus, 16), None, rb)

    def new_group(self, dev):
        if self.topo["iommu"] == "off":
            return None
        gid = self.group
        self.group += 1
        gtype = dev.get("iommu_type") or ("identity" if self.topo["iommu"] == "identity" else "DMA-FQ")
        gdir = self.p("sys/kernel/iommu_groups", str(gid))
        _mkdir(os.path.join(gdir, "devices"))
        _write(os.path.join(gdir, "type"), gtype + "\n")
        _write(os.path.join(gdir, "reserved_regions"), "0x00000000fee00000 0x00000000feefffff msi\n")
        return gid

    def device(self, dev, parent_dir, primary, parent_group, rb):
        bdf = dev["bdf"].lower()
        ddir = os.path.join(parent_dir, bdf)
        _mkdir(ddir)
        kind = dev["kind"]
        bridge = kind in topomod.BRIDGE_KINDS
        secondary = subordinate = 0
        if bridge:
            secondary, subordinate = _bridge_buses(dev)
        attrs = {
            "vendor": "0x%04x" % dev["vendor"],
            "device": "0x%04x" % dev["device"],
            "class": "0x%06x" % dev["class"],
            "subsystem_vendor": "0x%04x" % dev["subsystem_vendor"],
            "subsystem_device": "0x%04x" % dev["subsystem_device"],
            "revision": "0x%02x" % dev.get("revision", 0xA1 if kind == "gpu" else 0),
            "enable": "1",
            "current_link_speed": "32.0 GT/s PCIe",
            "current_link_width": "16",
            "max_link_speed": "32.0 GT/s PCIe",
            "max_link_width": "16",
        }
        numa = dev.get("numa")
        if numa is not None:
            attrs["numa_node"] = str(numa)
            cpus = self.topo["numa_nodes"].get(numa)
            attrs["local_cpulist"] = cpus if cpus else _cpus_all(self.topo)
        if bridge:
            attrs["secondary_bus_number"] = str(secondary)
            attrs["subordinate_bus_number"] = str(subordinate)
        for k, v in attrs.items():
            _write(os.path.join(ddir, k), v + "\n")
        _write(os.path.join(ddir, "config"),
               config_space(dev, primary=primary, secondary=secondary, subordinate=subordinate))
        _link(self.p("sys/bus/pci"), os.path.join(ddir, "subsystem"))
        _link(ddir, self.p("sys/bus/pci/devices", bdf))

        driver = dev.get("driver")
        if driver in ("nvidia",) and self.topo["nvidia_driver"]["flavour"] == "none":
            driver = None
        if driver == "nvidia" and kind == "nvswitch":
            driver = "nvidia-nvswitch"
        if driver:
            drvdir = self.p("sys/bus/pci/drivers", driver)
            _mkdir(drvdir)
            _link(drvdir, os.path.join(ddir, "driver"))
            _link(ddir, os.path.join(drvdir, bdf))

        # IOMMU group: devices behind a conventional PCI bridge share the bridge's group
        group = parent_group if parent_group is not None else self.new_group(dev)
        if group is not None:
            gdir = self.p("sys/kernel/iommu_groups", str(group))
            _link(gdir, os.path.join(ddir, "iommu_group"))
            _link(ddir, os.path.join(gdir, "devices", bdf))
        child_group = group if (kind == "bridge" and not dev.get("acs") and group is not None) else None

        if kind == "gpu":
            self.gpus.append({"bdf": bdf, "numa": numa if numa is not None else -1,
                              "name": GPU_NAMES.get(dev["device"], "NVIDIA GPU %04x" % dev["device"])})
        if kind == "nic":
            self.nic(dev, ddir, bdf, numa)
        for ch in dev["children"]:
            self.device(ch, ddir, secondary, child_group, rb)

    # -- NIC / RDMA ---------------------------------------------------------------------------
    def nic(self, dev, ddir, bdf, numa):
        netdev, ibdev = dev["netdev"], dev.get("ibdev")
        # rails (RDMA NICs) are numbered in PCI order; a plain Ethernet NIC gets an address outside the rails
        rail = self.nic_order.index(dev["bdf"]) if ibdev else 200 + int(dev["bdf"].split(":")[1], 16) % 50
        mac = dev.get("mac") or _mac(self.node_index, rail)
        ipv4 = dev.get("ipv4") or "10.100.%d.%d/16" % (rail, self.node_index)
        ifindex = self.ifindex
        self.ifindex += 1
        ndir = os.path.join(ddir, "net", netdev)
        for k, v in {
            "address": mac, "broadcast": "ff:ff:ff:ff:ff:ff", "ifindex": str(ifindex), "iflink": str(ifindex),
            "operstate": "up", "carrier": "1", "mtu": "9000", "type": "1", "dev_port": "0", "dev_id": "0x0",
            "speed": "400000", "duplex": "full", "addr_len": "6", "tx_queue_len": "1000",
            "phys_port_name": "p0",
        }.items():
            _write(os.path.join(ndir, k), v + "\n")
        _link(ddir, os.path.join(ndir, "device"))
        _link(ndir, self.p("sys/class/net", netdev))
        if not ibdev:
            return

        idir = os.path.join(ddir, "infiniband", ibdev)
        guid = mac.split(":")
        node_guid = "%s%s:%sff:fe%s:%s%s" % (guid[0], guid[1], guid[2], guid[3], guid[4], guid[5])
        for k, v in {
            "node_type": "1: CA", "fw_ver": dev.get("fw_ver", "28.42.1000"), "hca_type": "MT4129",
            "board_id": "MT_0000000838", "node_guid": node_guid, "sys_image_guid": node_guid,
            "node_desc": "node%03d %s" % (self.node_index, ibdev),
        }.items():
            _write(os.path.join(idir, k), v + "\n")
        _link(ddir, os.path.join(idir, "device"))
        _link(idir, self.p("sys/class/infiniband", ibdev))
        ports = int(dev.get("ports", 1))
        for port in range(1, ports + 1):
            pdir = os.path.join(idir, "ports", str(port))
            for k, v in {
                "link_layer": "Ethernet", "state": "4: ACTIVE", "phys_state": "5: LinkUp",
                "rate": "400 Gb/sec (4X NDR)", "lid": "0x0", "sm_lid": "0x0", "lid_mask_count": "0",
                "cap_mask": "0x00010000",
            }.items():
                _write(os.path.join(pdir, k), v + "\n")
            table = int(dev.get("gid_table_size", 16))
            ll = _link_local_gid(mac)
            v4 = _v4_gid(ipv4)
            used = {0: (ll, "IB/RoCE v1"), 1: (ll, "RoCE v2"), 2: (v4, "IB/RoCE v1"), 3: (v4, "RoCE v2")}
            for n in range(table):
                gid, gtype = used.get(n, ("0000:0000:0000:0000:0000:0000:0000:0000", None))
                _write(os.path.join(pdir, "gids", str(n)), gid + "\n", 0o444)
                _mkdir(os.path.join(pdir, "gid_attrs", "types"))
                _mkdir(os.path.join(pdir, "gid_attrs", "ndevs"))
                if gtype:
                    _write(os.path.join(pdir, "gid_attrs", "types", str(n)), gtype + "\n", 0o444)
                    _write(os.path.join(pdir, "gid_attrs", "ndevs", str(n)), netdev + "\n", 0o444)
        self.rails.append({"netdev": netdev, "ibdev": ibdev, "port": 1, "bdf": bdf,
                           "numa": numa if numa is not None else -1, "driver": "mlx5_core",
                           "ipv4": ipv4, "mac": mac})

    # -- host ----------------------------------------------------------------------------------
    def numa(self):
        nodes = sorted(self.topo["numa_nodes"])
        base = self.p("sys/devices/system/node")
        for n in nodes:
            _write(os.path.join(base, "node%d" % n, "cpulist"), self.topo["numa_nodes"][n] + "\n")
        span = "%d-%d" % (nodes[0], nodes[-1]) if len(nodes) > 1 else str(nodes[0])
        for k in ("online", "possible", "has_cpu", "has_normal_memory"):
            _write(os.path.join(base, k), span + "\n")

    def kernel(self):
        t = self.topo
        _write(self.p("proc/cmdline"), t["cmdline"] + "\n", 0o444)
        _write(self.p("proc/sys/kernel/osrelease"), t["kernel_release"] + "\n")
        _write(self.p("proc/version"), "Linux version %s (buildd@lcy02-amd64) (gcc 13.2.0) #1 SMP\n"
               % t["kernel_release"], 0o444)
        net = self.p("proc/sys/net")
        if os.path.lexists(net):
            os.unlink(net)
        os.symlink("/proc/sys/net", net)
        _mkdir(self.p("sys/kernel/config/rdma_cm"))
        for m in ("rdma_cm", "configfs", "mlx5_core", "mlx5_ib", "ib_core"):
            _mkdir(self.p("sys/module", m))
        _write(self.p("etc/os-release"), OS_RELEASE[t["os"]].format(v=t["os_version"]))
        _write(self.p("etc/machine-id"), MACHINE_ID + "\n")
        _write(self.p("etc/hostname"), "node%03d\n" % self.node_index)
        kver = t["kernel_release"]
        if t["os"] == "rhel":
            self.rhel_boot(kver)
        else:
            self.debian_boot(kver)

    def debian_boot(self, kver):
        t = self.topo
        _write(self.p("boot/vmlinuz-%s" % kver), b"")
        _write(self.p("boot/initrd.img-%s" % kver), b"")
        _mkdir(self.p("boot/grub"))
        _mkdir(self.p("etc/default/grub.d"))
        distributor = ("`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`"
                       if t["os"] == "ubuntu" else "`lsb_release -i -s 2> /dev/null || echo Debian`")
        _write(self.p("etc/default/grub"), "".join([
            "# If you change this file, run 'update-grub' afterwards to update\n",
            "# /boot/grub/grub.cfg.\n",
            "# For full documentation of the options in this file, see:\n",
            "#   info -f grub -n 'Simple configuration'\n\n",
            "GRUB_DEFAULT=0\n",
            "GRUB_TIMEOUT_STYLE=hidden\n" if t["os"] == "ubuntu" else "",
            "GRUB_TIMEOUT=%d\n" % (0 if t["os"] == "ubuntu" else 5),
            "GRUB_DISTRIBUTOR=%s\n" % distributor,
            'GRUB_CMDLINE_LINUX_DEFAULT="%s"\n' % t.get("grub_cmdline_linux_default", ""),
            'GRUB_CMDLINE_LINUX="%s"\n' % t.get("grub_cmdline_linux", ""),
        ]))

    def rhel_boot(self, kver):
        t = self.topo
        words = [w for w in t["cmdline"].split() if not w.startswith("BOOT_IMAGE=")]
        options = " ".join(words)
        linux = " ".join(w for w in words if not w.startswith("root=") and w != "ro")
        _write(self.p("boot/vmlinuz-%s" % kver), b"")
        _write(self.p("boot/initramfs-%s.img" % kver), b"")
        _write(self.p("etc/kernel/cmdline"), options + "\n")
        _write(self.p("etc/default/grub"), "".join([
            "GRUB_TIMEOUT=5\n",
            "GRUB_DISTRIBUTOR=\"$(sed 's, release .*$,,g' /etc/system-release)\"\n",
            "GRUB_DEFAULT=saved\n",
            "GRUB_DISABLE_SUBMENU=true\n",
            'GRUB_TERMINAL_OUTPUT="console"\n',
            'GRUB_CMDLINE_LINUX="%s"\n' % t.get("grub_cmdline_linux", linux),
            'GRUB_DISABLE_RECOVERY="true"\n',
            "GRUB_ENABLE_BLSCFG=true\n",
        ]))
        _write(self.p("boot/loader/entries/%s-%s.conf" % (MACHINE_ID, kver)), "".join([
            "title Red Hat Enterprise Linux (%s) %s (Plow)\n" % (kver, t["os_version"]),
            "version %s\n" % kver,
            "linux /vmlinuz-%s\n" % kver,
            "initrd /initramfs-%s.img $tuned_initrd\n" % kver,
            "options %s $tuned_params\n" % options,
            "grub_users $grub_users\n",
            "grub_arg --unrestricted\n",
            "grub_class rhel\n",
        ]))

    def nvidia(self):
        t = self.topo
        drv = t["nvidia_driver"]
        procs = {1: "systemd", 734: "systemd-journal", 1180: "sshd"}
        if drv["flavour"] != "none":
            ver = drv["version"]
            if drv["flavour"] == "open":
                head = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  "
                        "(dvs-builder@U16-I3-B03-4-3)  Tue Oct  8 03:21:19 UTC 2024\n" % ver)
                taint = "OE"
            else:
                head = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Tue Oct  8 03:06:03 UTC 2024\n" % ver
                taint = "POE"
            _write(self.p("proc/driver/nvidia/version"),
                   head + "GCC version:  gcc version 13.2.0 (Ubuntu 13.2.0-23ubuntu4) \n", 0o444)
            _write(self.p("sys/module/nvidia/version"), ver + "\n", 0o444)
            _write(self.p("sys/module/nvidia/taint"), taint + "\n", 0o444)
            _write(self.p("sys/module/nvidia/initstate"), "live\n", 0o444)
            for i, g in enumerate(self.gpus):
                _write(self.p("proc/driver/nvidia/gpus", g["bdf"], "information"), "".join([
                    "Model: \t\t %s\n" % g["name"],
                    "IRQ:   \t\t %d\n" % (300 + i),
                    "GPU UUID: \t GPU-%08x-5c1d-4a2b-9e3f-%012x\n" % (0x7a3e0000 + i, self.node_index),
                    "Video BIOS: \t 96.00.a5.00.01\n",
                    "Bus Type: \t PCIe\n",
                    "DMA Size: \t 52 bits\n",
                    "DMA Mask: \t 0xfffffffffffff\n",
                    "Bus Location: \t %s\n" % g["bdf"],
                    "Device Minor: \t %d\n" % i,
                    "GPU Excluded:\t No\n",
                ]), 0o444)
            procs[2204] = "nvidia-persiste"
        fm = t["fabric_manager"]
        if fm in ("running", "stopped"):
            _write(self.p("usr/lib/systemd/system/nvidia-fabricmanager.service"),
                   "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nType=forking\n"
                   "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n"
                   "\n[Install]\nWantedBy=multi-user.target\n")
        if fm == "running":
            procs[2817] = "nv-fabricmanage"  # comm keeps 15 characters
        for pid, comm in procs.items():
            _write(self.p("proc", str(pid), "comm"), comm + "\n", 0o444)
        nvfs = t["nvidia_fs"]
        if nvfs["loaded"]:
            ver = str(nvfs["version"])
            mm = ".".join(ver.split(".")[:2])
            patch = ver.split(".")[2] if ver.count(".") >= 2 else "0"
            base = self.p("proc/driver/nvidia-fs")
            _write(os.path.join(base, "version"), "version: %s\n" % mm, 0o444)
            _write(os.path.join(base, "modules"),
                   "".join("%s: %s\n" % (k, v) for k, v in sorted(nvfs["modules"].items())), 0o444)
            _write(os.path.join(base, "devcount"), "%d\n" % len(self.gpus), 0o444)
            _write(os.path.join(base, "bridges"), "", 0o444)
            _write(os.path.join(base, "peer_affinity"), "", 0o444)
            _write(os.path.join(base, "stats"), nvfs_stats_text(
                mm + "." + patch, str(nvfs.get("gds_version", "1.11.1.6")), bool(int(nvfs["rw_stats_enabled"]))))
            _write(self.p("sys/module/nvidia_fs/version"), "%s.%s\n" % (mm, patch), 0o444)
            _write(self.p("sys/module/nvidia_fs/parameters/rw_stats_enabled"), "%d\n" % int(nvfs["rw_stats_enabled"]))

    def manifest(self):
        t = self.topo
        m = {
            "name": "node%03d" % self.node_index,
            "topology": t["name"],
            "kernel_release": t["kernel_release"],
            "os": t["os"],
            "iproute2_version": t["iproute2_version"],
            "gpus": sorted(self.gpus, key=lambda g: topomod.parse_bdf(g["bdf"])),
            "rails": sorted(self.rails, key=lambda r: topomod.parse_bdf(r["bdf"])),
        }
        _write(self.p("var/lib/gpufabric-sim/manifest.json"), json.dumps(m, indent=2, sort_keys=True) + "\n")
        return m


def nvfs_stats_text(driver_version, gds_version, rw_stats, counters=None):
    """/proc/driver/nvidia-fs/stats as nvidia-fs prints it (counters all zero unless given)."""
    c = dict(counters or {})

    def g(k):
        return c.get(k, 0)

    lines = [
        "GDS Version: %s \n" % gds_version,
        "NVFS statistics(ver: 4.0)\n",
        "NVFS Driver(version: %s)\n" % driver_version,
        "Mellanox PeerDirect Supported: True\n",
        "IO stats: %s, peer IO stats: Disabled\n" % ("Enabled" if rw_stats else "Disabled"),
        "Logging level: info\n\n",
        "Active Shadow-Buffer (MiB): 0\n",
        "Active Process: 0\n",
    ]
    if rw_stats:
        lines.append("Batches\t\t\t\t: n=0 ok=0 err=0 Avg-Submit-Latency(usec)=0\n")
        lines.append("Reads\t\t\t\t: n=%d ok=%d err=%d readMiB=%d io_state_err=%d\n"
                     % (g("reads"), g("reads_ok"), g("read_err"), g("read_mib"), g("read_io_state_err")))
        lines.append("Reads\t\t\t\t: Bandwidth(MiB/s)=0 Avg-Latency(usec)=0\n")
    else:
        lines.append("Reads\t\t\t\t: err=%d io_state_err=%d\n" % (g("read_err"), g("read_io_state_err")))
    lines.append("Sparse Reads\t\t        : n=0 io=0 holes=0 pages=0 \n")
    if rw_stats:
        lines.append("Writes\t\t\t\t: n=%d ok=%d err=%d writeMiB=%d io_state_err=0 pg-cache=0 pg-cache-fail=0 "
                     "pg-cache-eio=0\n" % (g("writes"), g("writes_ok"), g("write_err"), g("write_mib")))
        lines.append("Writes\t\t\t\t: Bandwidth(MiB/s)=0 Avg-Latency(usec)=0\n")
    else:
        lines.append("Writes\t\t\t\t: err=%d io_state_err=0 pg-cache=0 pg-cache-fail=0 pg-cache-eio=0\n"
                     % g("write_err"))
    lines.extend([
        "Mmap\t\t\t\t: n=0 ok=0 err=0 munmap=0\n",
        "Bar1-map\t\t\t: n=0 ok=0 err=0 free=0 callbacks=0 active=0 delay-frees=0\n",
        "Error\t\t\t\t: cpu-gpu-pages=0 sg-ext=0 dma-map=0 dma-ref=0\n",
        "Ops\t\t\t\t: Read=0 Write=0 BatchIO=0\n",
    ])
    return "".join(lines)


def build_tree(root, topology, node_index=1):
    """Write the host tree of ``topology`` (a name, a path or a dict) below ``root``; return the manifest."""
    topo = topomod.load(topology)
    b = _Builder(root, topo, int(node_index))
    _mkdir(b.root)
    b.numa()
    b.pci()
    b.kernel()
    b.nvidia()
    return b.manifest()
