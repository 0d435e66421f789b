# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record the kernel interfaces gpufabric reads on a real host, as a file tests can lay out as a sysroot.

    python3 tests/device/host_snapshot.py OUT_JSON        # on the host (root reads the PCI config spaces)
    tests/unit/hostsnap.py materialize(OUT_JSON, root)     # in a test: the same tree below root

What is recorded (nothing else): every PCI function under /sys/bus/pci/devices with the attributes discovery reads,
its links (driver, iommu_group, physfn, virtfn*), its config space (hex, when readable) and every directory up to
/sys/devices; /sys/class/net, /sys/class/infiniband and the netdevs/RDMA devices they point to; IOMMU group types;
NUMA nodes; the NVIDIA, nvidia-fs and peermem module files; /proc/cmdline, /proc/sys/kernel/osrelease,
/etc/os-release, /proc/modules, /proc/self/mountinfo; the names under /boot and /boot/efi; and which boot-loader and
network tools exist. Values are the host's own; addresses of netdevs are replaced with a stable fake (a snapshot
is committed as a fixture).
"""
from __future__ import absolute_import, division, print_function

import binascii
import json
import os
import re
import shutil
import sys

__metaclass__ = type

PCI_ATTRS = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "numa_node", "revision",
             "current_link_speed", "current_link_width", "max_link_speed", "max_link_width", "local_cpulist",
             "sriov_numvfs", "sriov_totalvfs", "enable", "modalias")
NET_ATTRS = ("type", "mtu", "operstate", "carrier", "dev_port", "dev_id", "ifindex", "iflink", "flags",
             "addr_len", "speed", "duplex")
IB_ATTRS = ("node_type", "node_guid", "fw_ver", "hca_type", "board_id")
IB_PORT_ATTRS = ("link_layer", "state", "phys_state", "rate", "lid")
FILES = ("/proc/cmdline", "/proc/1/comm", "/proc/sys/kernel/osrelease", "/etc/os-release", "/proc/modules", "/proc/self/mountinfo",
         "/proc/driver/nvidia/version", "/sys/module/nvidia/version", "/sys/module/nvidia/taint",
         "/sys/module/nvidia_fs/version", "/sys/module/nvidia_peermem/version", "/etc/default/grub",
         "/etc/kernel/cmdline", "/etc/kernel/install.conf", "/sys/devices/system/node/online",
         "/sys/devices/system/node/possible", "/proc/sys/net/ipv4/conf/all/arp_ignore",
         "/proc/sys/net/ipv4/conf/all/arp_announce", "/proc/sys/net/ipv4/conf/all/rp_filter")
TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby", "bootctl", "kernel-install", "dracut",
         "systemctl", "udevadm", "dcb", "ip", "ethtool", "rdma", "mlxconfig", "nvidia-smi", "modinfo", "podman")
_MAC = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


class Recorder(object):
    def __init__(self):
        self.entries = {}
        self.errors = []

    def _read(self, path, binary=False, limit=65536):
        try:
            with open(path, "rb") as f:
                data = f.read(limit)
        except (IOError, OSError) as e:
            self.errors.append("%s: %s" % (path, e.strerror or e))
            return None
        if binary:
            return binascii.hexlify(data).decode("ascii")
        return data.decode("utf-8", "replace")

    def file(self, path, binary=False):
        if path in self.entries or not os.path.isfile(path):
            return
        data = self._read(path, binary)
        if data is not None:
            self.entries[path] = {"type": "hex" if binary else "file", "data": data}

    def link(self, path):
        if path in self.entries or not os.path.islink(path):
            return None
        target = os.readlink(path)
        self.entries[path] = {"type": "link", "target": target}
        return os.path.normpath(os.path.join(os.path.dirname(path), target))

    def dir(self, path):
        while path not in ("/", "") and path not in self.entries:
            self.entries[path] = {"type": "dir"}
            path = os.path.dirname(path)

    def attrs(self, base, names):
        for n in names:
            self.file(os.path.join(base, n))

    def listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []


def _pci(rec, real):
    rec.dir(real)
    rec.attrs(real, PCI_ATTRS)
    rec.file(os.path.join(real, "config"), binary=True)
    for n in rec.listdir(real):
        p = os.path.join(real, n)
        if n in ("driver", "iommu_group", "physfn") or n.startswith("virtfn"):
            rec.link(p)
    # parents that are PCI functions (bridges, switch ports) get the same record
    parent = os.path.dirname(real)
    if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", os.path.basename(parent)):
        _pci(rec, parent)


def _netdev(rec, real):
    rec.dir(real)
    rec.attrs(real, NET_ATTRS)
    addr = os.path.join(real, "address")
    if os.path.isfile(addr):
        data = rec._read(addr) or ""
        if _MAC.match(data.strip()):
            data = "02:00:00:00:%02x:%02x\n" % (len(rec.entries) // 256 % 256, len(rec.entries) % 256)
        rec.entries[addr] = {"type": "file", "data": data}
    for n in ("device", "master", "lower", "upper"):
        rec.link(os.path.join(real, n))
    for n in rec.listdir(real):
        if n.startswith(("lower_", "upper_")):
            rec.link(os.path.join(real, n))
    for sub in ("bonding", "ecn", "qos"):
        if os.path.isdir(os.path.join(real, sub)):
            for root, _dirs, files in os.walk(os.path.join(real, sub)):
                rec.dir(root)
                for f in files:
                    rec.file(os.path.join(root, f))


def _ibdev(rec, real):
    rec.dir(real)
    rec.attrs(real, IB_ATTRS)
    for n in ("device", "parent"):
        rec.link(os.path.join(real, n))
    rec.file(os.path.join(real, "parent"))
    ports = os.path.join(real, "ports")
    for port in rec.listdir(ports):
        pdir = os.path.join(ports, port)
        rec.dir(pdir)
        rec.attrs(pdir, IB_PORT_ATTRS)
        for sub in ("gid_attrs/types", "gid_attrs/ndevs"):
            d = os.path.join(pdir, sub)
            for g in rec.listdir(d)[:16]:
                rec.file(os.path.join(d, g))
        gids = os.path.join(pdir, "gids")
        for g in rec.listdir(gids)[:16]:
            rec.file(os.path.join(gids, g))


def snapshot():
    rec = Recorder()
    for bdf in rec.listdir("/sys/bus/pci/devices"):
        real = rec.link("/sys/bus/pci/devices/" + bdf)
        if real:
            _pci(rec, real)
            for sub in rec.listdir(real):
                if sub == "net" or re.match(r"^virtio\d+$", sub):
                    netdir = os.path.join(real, sub) if sub == "net" else os.path.join(real, sub, "net")
                    for nd in rec.listdir(netdir):
                        _netdev(rec, os.path.join(netdir, nd))
                if sub == "infiniband":
                    for ib in rec.listdir(os.path.join(real, sub)):
                        _ibdev(rec, os.path.join(real, sub, ib))
    for cls, fn in (("/sys/class/net", _netdev), ("/sys/class/infiniband", _ibdev)):
        rec.dir(cls)
        for name in rec.listdir(cls):
            real = rec.link(os.path.join(cls, name))
            if real and os.path.isdir(real):
                fn(rec, real)
    rec.dir("/sys/kernel/iommu_groups")
    for g in rec.listdir("/sys/kernel/iommu_groups"):
        base = "/sys/kernel/iommu_groups/" + g
        rec.dir(base + "/devices")
        rec.file(base + "/type")
        for d in rec.listdir(base + "/devices"):
            rec.link(base + "/devices/" + d)
    for n in rec.listdir("/sys/devices/system/node"):
        if n.startswith("node"):
            rec.dir("/sys/devices/system/node/" + n)
            rec.file("/sys/devices/system/node/%s/cpulist" % n)
    for mod in ("nvidia", "nvidia_fs", "nvidia_peermem", "rpcrdma", "sunrpc", "mlx5_core", "mlx5_ib", "rdma_rxe"):
        if os.path.isdir("/sys/module/" + mod):
            rec.dir("/sys/module/" + mod)
            for p in rec.listdir("/sys/module/%s/parameters" % mod):
                rec.file("/sys/module/%s/parameters/%s" % (mod, p))
    for base in ("/proc/driver/nvidia-fs", "/proc/driver/nvidia/gpus"):
        for root, _dirs, files in os.walk(base):
            rec.dir(root)
            for f in files:
                rec.file(os.path.join(root, f))
    for p in FILES:
        rec.file(p)
    for d in ("/dev",):
        for n in rec.listdir(d):
            if n.startswith(("nvidia", "infiniband")):
                rec.entries[os.path.join(d, n)] = {"type": "file", "data": ""}
    listing = {}
    for d in ("/boot", "/boot/efi", "/boot/efi/EFI", "/boot/efi/loader", "/boot/loader/entries", "/efi",
              "/etc/default/grub.d", "/sys/firmware/efi", "/run/systemd/system"):
        if os.path.isdir(d):
            listing[d] = rec.listdir(d)
    return {
        "schema": "gpufabric.hostsnap/v1",
        "uname": list(os.uname()),
        "euid": os.geteuid(),
        "tools": dict((t, shutil.which(t) is not None) for t in TOOLS),
        "listing": listing,
        "entries": rec.entries,
        "errors": rec.errors[:200],
    }


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    snap = snapshot()
    with open(argv[1], "w") as f:
        json.dump(snap, f, indent=1, sort_keys=True)
    sys.stdout.write("%d entries, %d read errors\n" % (len(snap["entries"]), len(snap["errors"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
