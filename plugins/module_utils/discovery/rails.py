# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery stage 2: network interfaces and RDMA devices, and the rails they make.

Private to the collection; the public names are re-exported by ``topology``.

What the kernel shows and this stage relies on:

* A netdev's sysfs directory sits below its parent device (drivers/base/core.c ``device_add``): directly at
  ``<pci function>/net/<if>`` for most NICs, one level deeper for virtio-net (``<function>/virtioN/net/<if>``,
  drivers/virtio/virtio.c registers the virtio device below the PCI function, drivers/net/virtio_net.c the
  netdev below the virtio device), or below ``/sys/devices/virtual/net`` for bonds, VLANs and other
  software interfaces, which name what they stack on with ``lower_<if>`` links (net/core/dev.c
  ``netdev_adjacent_sysfs_add``) and, for a bond, ``bonding/slaves``. The PCI function of a netdev is the
  nearest function above its directory, else the functions of its lower devices.
* An RDMA device has a ``device`` link when it has a parent device (drivers/base/core.c
  ``device_add_class_symlinks``): mlx5 registers on the PCI function (a RoCE LAG device ``mlx5_bond_0`` on
  the first PF of the bond, the bond netdev in its GID table). Soft-RoCE (drivers/infiniband/sw/rxe
  ``rxe_register_device`` passes no DMA device) and siw (drivers/infiniband/sw/siw ``siw_device_register``)
  have none; rxe shows the netdev it runs over in ``parent`` (``parent_show``), and both derive the node GUID
  from the netdev's MAC (``addrconf_addr_eui48``).
* A port's netdev is in ``ports/<p>/gid_attrs/ndevs/<n>`` (drivers/infiniband/core/sysfs.c); the GID table
  also holds the GIDs of upper devices (VLANs over the rail), so the lowest device of the stack is taken.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci_scan as tpci

CLASS_NET = "/sys/class/net"
CLASS_IB = "/sys/class/infiniband"
_MAX_STACK = 8          # lower_* recursion bound (bond over VLAN over ...)


def natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name or "")]


def _int(text):
    try:
        return int(text, 0)
    except (TypeError, ValueError):
        return None


class NetScan(object):
    """The host's network interfaces: where each lives, its PCI function, what it stacks on."""

    @classmethod
    def of(cls, scan):
        """The interfaces of ``scan``'s host, read once per walk."""
        if getattr(scan, "net", None) is None:
            scan.net = cls(scan)
        return scan.net

    def __init__(self, scan):
        self.scan = scan
        self.sr = scan.sysroot
        self._paths = None
        self._by_function = None

    @property
    def paths(self):
        """{netdev: host-absolute directory}, from /sys/class/net and the NIC functions' own net/ dirs."""
        if self._paths is None:
            sr = self.sr
            found = {}
            for name in sr.listdir(CLASS_NET):
                path = sr.realpath(CLASS_NET + "/" + name)
                if sr.isdir(path):
                    found[name] = path
            for dev in self.scan.devices.values():
                if not dev.is_nic or not dev.path:
                    continue
                for sub in [""] + ["/" + e for e in sr.listdir(dev.path) if sr.isdir("%s/%s/net" % (dev.path, e))]:
                    for name in sr.listdir("%s%s/net" % (dev.path, sub)):
                        found.setdefault(name, "%s%s/net/%s" % (dev.path, sub, name))
            self._paths = found
        return self._paths

    def attr(self, name, attr):
        path = self.paths.get(name)
        return self.sr.read("%s/%s" % (path, attr)) if path else None

    def own_function(self, name):
        """The PCI function the netdev's directory sits below, or None (virtual interface)."""
        path = self.paths.get(name)
        if not path or path.startswith("/sys/devices/virtual/"):
            return None
        return self.scan.function_at(path)

    def lowers(self, name):
        """Interfaces this one stacks on: ``lower_<if>`` links, else a bond's ``bonding/slaves``."""
        path = self.paths.get(name)
        if not path:
            return []
        out = sorted(e[len("lower_"):] for e in self.sr.listdir(path) if e.startswith("lower_"))
        if not out:
            out = sorted((self.sr.read(path + "/bonding/slaves") or "").split())
        return out

    def is_bond(self, name):
        path = self.paths.get(name)
        return bool(path) and self.sr.isdir(path + "/bonding")

    def functions(self, name, depth=0):
        """Sorted PCI functions carrying a netdev: its own, else those of its lower devices."""
        own = self.own_function(name)
        if own:
            return [own]
        if depth >= _MAX_STACK:
            return []
        found = set()
        for low in self.lowers(name):
            found.update(self.functions(low, depth + 1))
        return tpci.sort_bdf(found)

    def physical(self, name, depth=0):
        """Sorted netdevs of PCI functions a netdev stands for: itself, or the bottom of its stack (bond slaves)."""
        if self.own_function(name):
            return [name]
        if depth >= _MAX_STACK:
            return []
        found = set()
        for low in self.lowers(name):
            found.update(self.physical(low, depth + 1))
        return sorted(found, key=natural)

    def by_function(self):
        """{bdf: [netdev, ...]} of the netdevs whose own PCI function is ``bdf``."""
        if self._by_function is None:
            out = {}
            for name in sorted(self.paths):
                fn = self.own_function(name)
                if fn:
                    out.setdefault(fn, []).append(name)
            self._by_function = out
        return self._by_function

    def by_mac(self, mac):
        mac = (mac or "").lower()
        return sorted(n for n in self.paths if mac and (self.attr(n, "address") or "").lower() == mac)


def guid_to_mac(guid):
    """MAC behind an EUI-64 made from it (``addrconf_addr_eui48``: U/L bit flipped, ff:fe inserted), or None."""
    hexdigits = (guid or "").replace(":", "").lower()
    if len(hexdigits) != 16 or hexdigits[6:10] != "fffe":
        return None
    try:
        b = bytearray.fromhex(hexdigits)
    except ValueError:
        return None
    mac = [b[0] ^ 0x02, b[1], b[2], b[5], b[6], b[7]]
    return ":".join("%02x" % x for x in mac)


def _gid_ndevs(sr, ibdir, port):
    base = "%s/ports/%s/gid_attrs/ndevs" % (ibdir, port)
    names = []
    for n in sorted((int(x) for x in sr.listdir(base) if x.isdigit())):
        nd = sr.read("%s/%d" % (base, n))
        if nd and nd not in names:
            names.append(nd)
    return names


def port_netdev(net, ibdir, port, nports, fn, parent, guid):
    """(netdev, how) of one RDMA port; how is gid_table | parent | dev_port | only_netdev | node_guid."""
    sr = net.sr
    cands = _gid_ndevs(sr, ibdir, port)
    # the GID table also lists upper devices (VLANs over the rail): keep the bottom of the stack
    lowest = [c for c in cands if not any(other in net.lowers(c) for other in cands if other != c)]
    if lowest:
        return lowest[0], "gid_table"
    if parent and nports == 1:
        return parent, "parent"
    own = net.by_function().get(fn, []) if fn else []
    for nd in own:
        dp = _int(net.attr(nd, "dev_port"))
        if dp is not None and dp == int(port) - 1 and (nports > 1 or len(own) == 1):
            return nd, "dev_port"
    if len(own) == 1 and nports == 1:
        return own[0], "only_netdev"
    mac = guid_to_mac(guid)
    matches = net.by_mac(mac) if mac else []
    if len(matches) == 1 and nports == 1:
        return matches[0], "node_guid"
    return None, None


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


def _device_function(scan, ibdir):
    """(bdf, has_parent_device, sub_device) of an RDMA device: the PCI function its ``device`` link leads to.

    ``sub_device`` names the parent when it is a device below the function rather than the function itself
    (an auxiliary device such as an mlx5 scalable function ``mlx5_core.sf.N``), else None.
    """
    sr = scan.sysroot
    if sr.exists(ibdir + "/device"):
        parent = sr.realpath(ibdir + "/device")
        fn = scan.function_at(parent)
        sub = None
        if fn and scan.devices[fn].path and parent.rstrip("/") != scan.devices[fn].path.rstrip("/"):
            sub = parent.rstrip("/").split("/")[-1]
        return fn, True, sub
    real = sr.realpath(ibdir)
    if real.startswith("/sys/devices/virtual/"):
        return None, False, None
    return scan.function_at(real), False, None


def _numa_of_functions(scan, fns, subject):
    """(node, source, reason) of a device living on ``fns`` (the lower devices of a software rail)."""
    devs = [scan.devices[f] for f in fns if f in scan.devices]
    if not devs:
        return None, "unknown", "%s has no PCI function below it: its NUMA node is unknown" % subject
    nodes = set(d.numa for d in devs)
    if len(nodes) == 1 and None not in nodes:
        d = devs[0]
        return d.numa, "netdev_lower", None
    return None, "unknown", "%s runs over PCI functions %s whose NUMA node is unknown or differs" \
        % (subject, ", ".join(d.bdf for d in devs))


def rdma_devices(scan, net=None):
    """One record per RDMA device (sorted naturally by name) with its ports; see ``list_rails``."""
    sr = scan.sysroot
    net = net or NetScan.of(scan)
    out = []
    for ibdev in sorted(sr.listdir(CLASS_IB), key=natural):
        ibdir = CLASS_IB + "/" + ibdev
        if not sr.exists(ibdir):
            scan.note(ibdev, "listed in %s but gone (removed while discovery ran): skipped" % CLASS_IB)
            continue
        fn, has_parent, sub = _device_function(scan, ibdir)
        parent = sr.read(ibdir + "/parent")
        guid = sr.read(ibdir + "/node_guid")
        ports = sorted((p for p in sr.listdir(ibdir + "/ports") if p.isdigit()), key=int)
        dev = scan.devices.get(fn) if fn else None
        rec = {"ibdev": ibdev, "bdf": fn, "kind": None, "physfn": None, "bond": None, "functions": [],
               "numa": None, "numa_source": "unknown", "driver": dev.driver if dev else None,
               "reason": None, "ports": []}
        for port in ports:
            nd, how = port_netdev(net, ibdir, port, len(ports), fn, parent, guid)
            idx, gid, ipv4 = _roce_v2_ipv4(sr, ibdir, port)
            rec["ports"].append({
                "port": int(port), "netdev": nd, "netdev_source": how,
                "dev_port": _int(net.attr(nd, "dev_port")) if nd else None,
                "mtu": _int(net.attr(nd, "mtu")) if nd else None,
                "phys_netdevs": net.physical(nd) if nd else [],
                "link_layer": sr.read("%s/ports/%s/link_layer" % (ibdir, port)),
                "state": sr.read("%s/ports/%s/state" % (ibdir, port)),
                "roce_v2_ipv4_gid_index": idx, "roce_v2_ipv4_gid": gid, "ipv4": ipv4,
            })
        netdevs = [p["netdev"] for p in rec["ports"] if p["netdev"]]
        if dev is not None:
            rec["numa"], rec["numa_source"] = dev.numa, dev.numa_source
            if sub:
                rec["kind"], rec["functions"] = "subfunction", [fn]
                rec["reason"] = ("RDMA device of %s, a device below %s (an auxiliary device such as an mlx5 "
                                 "scalable function), not of the function itself: not paired" % (sub, fn))
            elif dev.is_vf:
                rec["kind"], rec["physfn"] = "vf", dev.physfn
                rec["reason"] = ("SR-IOV virtual function of %s: VFs never take part in GPU pairing, DCB or "
                                 "NCCL" % dev.physfn)
                rec["functions"] = [fn]
            else:
                fns = set([fn])
                for nd in netdevs:
                    if net.own_function(nd) is None:          # a bond (or VLAN) over the PFs: RoCE LAG
                        lower = net.functions(nd)
                        if len(lower) > 1 or net.is_bond(nd):
                            rec["bond"] = nd
                        fns.update(f for f in lower if f in scan.devices and not scan.devices[f].is_vf)
                rec["kind"] = "bond" if rec["bond"] else "pf"
                rec["functions"] = tpci.sort_bdf(fns)
        elif fn is None and not has_parent:
            rec["kind"] = "software"
            lower = tpci.sort_bdf(set(f for nd in netdevs for f in net.functions(nd)))
            rec["functions"] = lower
            over = ", ".join(netdevs) or "an unknown interface"
            rec["numa"], rec["numa_source"], why = _numa_of_functions(scan, lower, "%s (over %s)" % (ibdev, over))
            rec["reason"] = ("software RDMA device (no PCI function of its own, e.g. rxe or siw) over %s: "
                             "no GPUDirect RDMA, not paired" % over)
            if why:
                scan.note(ibdev, why)
        else:
            rec["kind"] = "unknown"
            rec["reason"] = ("its parent device %s is not a PCI function (or was removed while discovery ran): "
                             "not paired" % sr.realpath(ibdir + "/device"))
            scan.note(ibdev, rec["reason"])
        out.append(rec)
    return out


def rails_of(records):
    """Flatten RDMA device records into rails (one per port), ordered by RDMA device name and port."""
    rails = []
    for rec in records:
        for p in rec["ports"]:
            rails.append({
                "netdev": p["netdev"], "ibdev": rec["ibdev"], "port": p["port"], "bdf": rec["bdf"],
                "numa": rec["numa"], "driver": rec["driver"], "link_layer": p["link_layer"], "state": p["state"],
                "roce_v2_ipv4_gid_index": p["roce_v2_ipv4_gid_index"], "roce_v2_ipv4_gid": p["roce_v2_ipv4_gid"],
                "ipv4": p["ipv4"],
                "kind": rec["kind"], "physfn": rec["physfn"], "bond": rec["bond"],
                "pci_functions": list(rec["functions"]), "dev_port": p["dev_port"], "mtu": p["mtu"],
                "phys_netdevs": list(p["phys_netdevs"]),
                "numa_source": rec["numa_source"],
                "pairable": rec["kind"] in ("pf", "bond") and bool(rec["functions"]),
                "reason": rec["reason"],
            })
    return sorted(rails, key=lambda r: (natural(r["ibdev"]), r["port"]))


def list_rails(sysroot=None, scan=None):
    """One entry per RDMA device port (see the ``topology`` docstring)."""
    if scan is None:
        scan = tpci.PciScan.of(sysroot)
    return rails_of(rdma_devices(scan))


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
