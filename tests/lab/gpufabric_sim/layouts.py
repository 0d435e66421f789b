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
* every mlx5 rail's RDMA port gets ``hw_counters/`` (drivers/infiniband/hw/mlx5/counters.c: the basic counters and
  the congestion counters ``rp_cnp_ignored rp_cnp_handled np_ecn_marked_roce_packets np_cnp_sent``), all 0, mode
  0444; the perftest emulator makes them grow.
* ``ecn: {interface: sysfs | debugfs, enabled: [prios], cnp_dscp: N, cnp_priority: N, cnp_priority_mode: N}`` (top
  level): the ECN/DCQCN controls of every mlx5 rail (see plugins/module_utils/concerns/ecn/manage.py and docs/ecn.md). ``sysfs`` is
  MLNX_OFED/DOCA's ``/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<0..7>`` (``0``/``1``), ``roce_np/cnp_dscp``,
  ``roce_np/cnp_802p_prio``, ``min_time_between_cnps``; ``debugfs`` the inbox driver's
  ``/sys/kernel/debug/mlx5/<bdf>/cc_params/`` (cong.c's file names, mode 0600, ``%u``). Without the key a rail has
  neither (an inbox driver with debugfs not mounted). The values are runtime state: a reboot rebuilds them.
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
    for r in b.rails:
        if r.get("driver") == "mlx5_core":
            _hw_counters(b, r)
    if t.get("ecn"):
        for r in b.rails:
            if r.get("driver") == "mlx5_core":
                _ecn(b, t["ecn"], r)


# drivers/infiniband/hw/mlx5/counters.c: basic_q_cnts, out_of_seq_q_cnts, retrans_q_cnts, extended_err_cnts, cong_cnts
HW_COUNTERS = ("rx_write_requests", "rx_read_requests", "rx_atomic_requests", "out_of_buffer", "out_of_sequence",
               "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
               "local_ack_timeout_err", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
               "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
               "resp_cqe_flush_error", "req_cqe_flush_error", "rp_cnp_ignored", "rp_cnp_handled",
               "np_ecn_marked_roce_packets", "np_cnp_sent")
CC_PARAMS = {"rp_clamp_tgt_rate": 0, "rp_clamp_tgt_rate_ati": 1, "rp_time_reset": 300, "rp_byte_reset": 32767,
             "rp_threshold": 1, "rp_ai_rate": 5, "rp_max_rate": 0, "rp_hai_rate": 50, "rp_min_dec_fac": 50,
             "rp_min_rate": 0, "rp_rate_to_set_on_first_cnp": 0, "rp_dce_tcp_g": 1019, "rp_dce_tcp_rtt": 1,
             "rp_rate_reduce_monitor_period": 4, "rp_initial_alpha_value": 1023, "rp_gd": 11,
             "np_min_time_between_cnps": 4}


def _hw_counters(b, r):
    pdir = os.path.realpath(b.p("sys/class/infiniband", r["ibdev"], "ports", str(r.get("port", 1))))
    for name in HW_COUNTERS:
        tree._write(os.path.join(pdir, "hw_counters", name), "0\n", 0o444)


def _ecn(b, spec, r):
    kind = spec.get("interface")
    enabled = set(int(p) for p in spec.get("enabled", range(8)))
    dscp, prio = int(spec.get("cnp_dscp", 48)), int(spec.get("cnp_priority", 6))
    if kind == "sysfs":
        base = os.path.realpath(b.p("sys/class/net", r["netdev"]))
        for point in ("roce_np", "roce_rp"):
            for p in range(8):
                tree._write(os.path.join(base, "ecn", point, "enable", str(p)), "%d\n" % (p in enabled))
        tree._write(os.path.join(base, "ecn", "roce_np", "cnp_dscp"), "%d\n" % dscp)
        tree._write(os.path.join(base, "ecn", "roce_np", "cnp_802p_prio"), "%d\n" % prio)
        tree._write(os.path.join(base, "ecn", "roce_np", "min_time_between_cnps"), "4\n")
    elif kind == "debugfs":
        base = b.p("sys/kernel/debug/mlx5", r["bdf"], "cc_params")
        values = dict(CC_PARAMS, np_cnp_dscp=dscp, np_cnp_prio=prio,
                      np_cnp_prio_mode=int(spec.get("cnp_priority_mode", 1)))
        for name, v in sorted(values.items()):
            tree._write(os.path.join(base, name), "%d\n" % v, 0o600)
    else:
        raise topomod.TopologyError("ecn.interface must be sysfs or debugfs, not %r" % (kind,))


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
