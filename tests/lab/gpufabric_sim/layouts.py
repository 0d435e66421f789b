# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real-host layouts on top of the built PCI tree (new topology keys, applied after ``_Builder.pci``).

* ``sriov: {vfs_per_pf: 2, vf_ibdevs: true}`` (top level) or ``vfs: N`` on a NIC: SR-IOV virtual functions
  as drivers/pci/iov.c shows them: VF functions beside their PF (the VF's sysfs parent is the PF's parent),
  ``physfn`` on the VF, ``virtfn<N>`` on the PF, ``sriov_numvfs`` / ``sriov_totalvfs``; ConnectX-7 VF id
  ``15b3:101e``; with ``vf_ibdevs`` each VF gets a netdev and an RDMA device of its own (as mlx5 does when
  the VFs are bound to mlx5_core). VFs are not rails: they stay out of the manifest (no veth).
* ``virtio: true`` on a NIC: virtio-net's netdev lives at ``<function>/virtio<N>/net/<if>`` (the virtio
  device is the PCI function's child), not at ``<function>/net/<if>``.
* ``soft_rdma: [{name: rxe0, netdev: eth0}]`` (top level): a Soft-RoCE device below
  ``/sys/devices/virtual/infiniband`` with no ``device`` link, its ``parent`` naming the netdev
  (drivers/infiniband/sw/rxe ``parent_show``), node GUID from the netdev's MAC, GID table on that netdev.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim import topology as topomod
from gpufabric_sim import tree

CX7_VF = 0x101E


def apply(b):
    """Apply the layout keys of ``b.topo`` to the tree ``b`` (a tree._Builder) has written."""
    t = b.topo
    sriov = t.get("sriov") or {}
    vf_bdfs = set()
    for _rb, dev in list(topomod.iter_devices(t)):
        if dev["kind"] != "nic":
            continue
        if dev.get("virtio"):
            _virtio(b, dev)
        count = int(dev.get("vfs", sriov.get("vfs_per_pf", 0) if dev.get("ibdev") else 0))
        if count:
            _vfs(b, dev, count, bool(dev.get("vf_ibdevs", sriov.get("vf_ibdevs", False))), vf_bdfs)
    for s in t.get("soft_rdma") or []:
        _soft_rdma(b, s)


def _ddir(b, bdf):
    return os.path.realpath(b.p("sys/bus/pci/devices", bdf))


def _virtio(b, dev):
    ddir = _ddir(b, dev["bdf"])
    index = getattr(b, "virtio_index", 0)            # virtio devices are numbered host-wide
    b.virtio_index = index + 1
    vdir = os.path.join(ddir, "virtio%d" % index)
    old = os.path.join(ddir, "net")
    new = os.path.join(vdir, "net")
    os.makedirs(vdir)
    os.rename(old, new)
    drv = b.p("sys/bus/virtio/drivers/virtio_net")
    tree._mkdir(drv)
    tree._link(drv, os.path.join(vdir, "driver"))
    for netdev in os.listdir(new):
        tree._link(vdir, os.path.join(new, netdev, "device"))
        tree._link(os.path.join(new, netdev), b.p("sys/class/net", netdev))


def _vfs(b, pf, count, with_ib, seen):
    dom, bus, dev, fn = topomod.parse_bdf(pf["bdf"])
    pdir = _ddir(b, pf["bdf"])
    parent = os.path.dirname(pdir)
    first = 2 if fn == 0 else 2 + fn * count
    for i in range(count):
        devfn = (dev << 3) + first + i
        bdf = "%04x:%02x:%02x.%x" % (dom, bus, devfn >> 3, devfn & 7)
        if bdf in seen or os.path.exists(b.p("sys/bus/pci/devices", bdf)):
            raise topomod.TopologyError("VF %s of %s collides with another function" % (bdf, pf["bdf"]))
        seen.add(bdf)
        vf = dict(pf, bdf=bdf, device=CX7_VF, subsystem_device=CX7_VF, children=[], acs=None)
        for key in ("ibdev", "ipv4", "mac"):
            vf.pop(key, None)
        vdir = os.path.join(parent, bdf)
        # no link files: a VF has no link of its own (its Link registers are reserved); tools read the PF's
        for name in ("vendor", "class", "subsystem_vendor", "numa_node", "local_cpulist", "revision", "enable"):
            src = os.path.join(pdir, name)
            if os.path.exists(src):
                with open(src) as f:
                    tree._write(os.path.join(vdir, name), f.read())
        tree._write(os.path.join(vdir, "device"), "0x%04x\n" % CX7_VF)
        tree._write(os.path.join(vdir, "subsystem_device"), "0x%04x\n" % CX7_VF)
        tree._write(os.path.join(vdir, "config"), tree.config_space(vf))
        tree._link(b.p("sys/bus/pci"), os.path.join(vdir, "subsystem"))
        tree._link(vdir, b.p("sys/bus/pci/devices", bdf))
        if pf.get("driver"):
            drvdir = b.p("sys/bus/pci/drivers", pf["driver"])
            tree._link(drvdir, os.path.join(vdir, "driver"))
            tree._link(vdir, os.path.join(drvdir, bdf))
        group = b.new_group(vf)
        if group is not None:
            gdir = b.p("sys/kernel/iommu_groups", str(group))
            tree._link(gdir, os.path.join(vdir, "iommu_group"))
            tree._link(vdir, os.path.join(gdir, "devices", bdf))
        tree._link(pdir, os.path.join(vdir, "physfn"))
        tree._link(vdir, os.path.join(pdir, "virtfn%d" % i))
        if with_ib:
            vf["netdev"] = "%sv%d" % (pf["netdev"][:10], i)
            vf["ibdev"] = "mlx5_%d" % (len(b.nic_order))
            b.nic_order.append(bdf)
            before = len(b.rails)
            b.nic(vf, vdir, bdf, pf.get("numa"))
            del b.rails[before:]                      # a VF is not a rail: no veth, not in the manifest
    tree._write(os.path.join(pdir, "sriov_numvfs"), "%d\n" % count)
    tree._write(os.path.join(pdir, "sriov_totalvfs"), "16\n")


def _soft_rdma(b, s):
    name, netdev = s["name"], s["netdev"]
    net = b.p("sys/class/net", netdev)
    if not os.path.lexists(net):
        raise topomod.TopologyError("soft_rdma %s: netdev %s does not exist" % (name, netdev))
    with open(os.path.join(net, "address")) as f:
        mac = f.read().strip()
    octets = mac.split(":")
    guid = "%02x%s:%sff:fe%s:%s%s" % (int(octets[0], 16) ^ 2, octets[1], octets[2], octets[3], octets[4], octets[5])
    idir = b.p("sys/devices/virtual/infiniband", name)
    for k, v in {"parent": netdev, "node_type": "1: CA", "node_guid": guid, "sys_image_guid": guid,
                 "node_desc": "rxe"}.items():
        tree._write(os.path.join(idir, k), v + "\n")
    pdir = os.path.join(idir, "ports", "1")
    for k, v in {"link_layer": "Ethernet", "state": "4: ACTIVE", "phys_state": "5: LinkUp"}.items():
        tree._write(os.path.join(pdir, k), v + "\n")
    ll = tree._link_local_gid(mac)
    gids = [(ll, "IB/RoCE v1"), (ll, "RoCE v2")]
    if s.get("ipv4"):
        v4 = tree._v4_gid(s["ipv4"])
        gids += [(v4, "IB/RoCE v1"), (v4, "RoCE v2")]
    for n, (gid, gtype) in enumerate(gids):
        tree._write(os.path.join(pdir, "gids", str(n)), gid + "\n", 0o444)
        tree._write(os.path.join(pdir, "gid_attrs", "types", str(n)), gtype + "\n", 0o444)
        tree._write(os.path.join(pdir, "gid_attrs", "ndevs", str(n)), netdev + "\n", 0o444)
    tree._link(idir, b.p("sys/class/infiniband", name))
