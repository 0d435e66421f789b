# -*- coding: utf-8 -*-
"""Lay out a host's sysfs as the kernel does, from a compact model, for discovery tests.

Independent of the simulator's builder (only its config-space encoder is reused), so discovery is tested
against a second writer and layouts the simulator does not make: SR-IOV VFs (``physfn`` / ``virtfnN``,
drivers/pci/iov.c), virtio-net (``<fn>/virtioN/net/<if>``), Soft-RoCE and siw devices below
``/sys/devices/virtual/infiniband`` (no ``device`` link; rxe has ``parent``), RoCE LAG (``mlx5_bond_0`` on the
first PF, bond netdev with ``lower_*`` links and ``bonding/slaves``), dual-port functions, ``numa_node`` -1.

Model (plain dicts)::

    {"nodes": {0: "0-7"},                                   # NUMA nodes (cpulist)
     "buses": [{"bus": "0000:10", "numa": 0, "devices": [dev, ...]}],
     "bonds": [{"name": "bond0", "slaves": ["ens1f0np0", "ens1f1np1"], "ibdev": "mlx5_bond_0"}],
     "soft_rdma": [{"name": "rxe0", "type": "rxe", "netdev": "eth0"}]}   # type rxe | siw

    dev: {"bdf", "kind": root_port|switch_up|switch_down|bridge|gpu|nic|nvswitch|other, "children": [...],
          "vendor", "device", "class", "driver", "acs": {cap, ctrl}, "config_size",
          "numa": int (-1 writes -1) | None (no file) | absent (the root bus's node),
          nic: "netdevs": [{"name", "dev_port", "virtio": bool, "mac"}], "ibdev": name, "ipv4": "10.0.0.1",
               "vfs": [{"bdf", "netdev", "ibdev"}], "sfs": [{"name": "mlx5_core.sf.2", "netdev", "ibdev"}]}

``build(root, model) -> Sysroot``. Helpers ``rp/up/down/bridge/gpu/nic/host/rbus`` make models short.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim.tree import config_space

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DEFAULTS = {
    # vendor, device, class, driver
    "root_port": (0x8086, 0x352A, 0x060400, "pcieport"),
    "switch_up": (0x1000, 0xC030, 0x060400, "pcieport"),
    "switch_down": (0x1000, 0xC030, 0x060400, "pcieport"),
    "bridge": (0x1A03, 0x1150, 0x060400, None),
    "gpu": (0x10DE, 0x2335, 0x030200, "nvidia"),
    "nic": (0x15B3, 0x1021, 0x020000, "mlx5_core"),
    "nvswitch": (0x10DE, 0x22A3, 0x068000, "nvidia-nvswitch"),
    "other": (0x8086, 0x0B25, 0x088000, None),
}
BRIDGES = ("root_port", "switch_up", "switch_down", "bridge")
VIRTIO = (0x1AF4, 0x1041, 0x020000, "virtio-pci")
CX7_VF = 0x101E
ACS = {"cap": 0x5F, "ctrl": 0x1D}


# -- model helpers ------------------------------------------------------------------------------

def rp(bdf, *children, **kw):
    return dict({"bdf": bdf, "kind": "root_port", "acs": dict(ACS), "children": list(children)}, **kw)


def up(bdf, *children, **kw):
    return dict({"bdf": bdf, "kind": "switch_up", "children": list(children)}, **kw)


def down(bdf, *children, **kw):
    return dict({"bdf": bdf, "kind": "switch_down", "acs": dict(ACS), "children": list(children)}, **kw)


def bridge(bdf, *children, **kw):
    return dict({"bdf": bdf, "kind": "bridge", "children": list(children)}, **kw)


def gpu(bdf, **kw):
    return dict({"bdf": bdf, "kind": "gpu"}, **kw)


def nic(bdf, netdev=None, ibdev=None, **kw):
    d = {"bdf": bdf, "kind": "nic", "netdevs": [{"name": netdev}] if netdev else []}
    if ibdev:
        d["ibdev"] = ibdev
    d.update(kw)
    return d


def virtio_nic(bdf, netdev, **kw):
    v, dv, k, drv = VIRTIO
    return dict({"bdf": bdf, "kind": "nic", "vendor": v, "device": dv, "class": k, "driver": drv,
                 "netdevs": [{"name": netdev, "virtio": True}]}, **kw)


def rbus(bus, numa, *devices):
    return {"bus": bus, "numa": numa, "devices": list(devices)}


def host(*buses, **kw):
    return dict({"nodes": {0: "0-7", 1: "8-15"}, "buses": list(buses)}, **kw)


def walk(devices, parents=()):
    """Yield (device, [ancestor devices]) depth first."""
    for d in devices:
        yield d, list(parents)
        yield from walk(d.get("children", []), tuple(parents) + (d,))


def all_netdevs(model):
    for rb in model["buses"]:
        for d, _anc in walk(rb["devices"]):
            for nd in d.get("netdevs", []):
                yield d, nd
            for vf in d.get("vfs", []):
                if vf.get("netdev"):
                    yield vf, {"name": vf["netdev"]}


# -- writer -------------------------------------------------------------------------------------

def _bus(bdf):
    return int(bdf.split(":")[1], 16)


class _Writer(object):
    def __init__(self, root, model):
        self.root = os.path.abspath(root)
        self.model = model
        self.ifindex = 2
        self.virtio = 0
        self.netdirs = {}
        self.fndirs = {}

    def p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def write(self, path, text):
        real = self.p(path)
        d = os.path.dirname(real)
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(real, "wb") as f:
            f.write(text if isinstance(text, bytes) else (str(text) + "\n").encode())

    def link(self, target, link):
        real, treal = self.p(link), self.p(target)
        d = os.path.dirname(real)
        if not os.path.isdir(d):
            os.makedirs(d)
        if os.path.lexists(real):
            os.unlink(real)
        os.symlink(os.path.relpath(treal, d), real)

    def mkdir(self, path):
        if not os.path.isdir(self.p(path)):
            os.makedirs(self.p(path))

    def build(self):
        for n, cpus in sorted(self.model.get("nodes", {}).items()):
            self.write("/sys/devices/system/node/node%d/cpulist" % n, cpus)
        self.mkdir("/sys/bus/pci/devices")
        self.mkdir("/sys/class/net")
        self.mkdir("/sys/class/infiniband")
        for rb in self.model["buses"]:
            dom, bus = rb["bus"].split(":")
            rdir = "/sys/devices/pci%s:%s" % (dom.lower(), bus.lower())
            self.mkdir(rdir)
            for d in rb["devices"]:
                self.device(d, rdir, rb["numa"], _bus(rb["bus"] + ":00.0"))
        for b in self.model.get("bonds", []):
            self.bond(b)
        for s in self.model.get("soft_rdma", []):
            self.soft_rdma(s)
        self.write("/proc/sys/kernel/osrelease", "6.8.0-test")
        return Sysroot(self.root)

    def function(self, dev, parent_dir, numa, primary, secondary=0, subordinate=0):
        kind = dev["kind"]
        v, dv, k, drv = DEFAULTS[kind]
        vendor, device, klass = dev.get("vendor", v), dev.get("device", dv), dev.get("class", k)
        bdf = dev["bdf"].lower()
        ddir = parent_dir + "/" + bdf
        self.fndirs[bdf] = ddir
        self.write(ddir + "/vendor", "0x%04x" % vendor)
        self.write(ddir + "/device", "0x%04x" % device)
        self.write(ddir + "/class", "0x%06x" % klass)
        n = dev.get("numa", numa)
        if n is not None:
            self.write(ddir + "/numa_node", str(n))
        cfg = {"bdf": bdf, "kind": "nic" if kind == "nic" else kind, "vendor": vendor, "device": device,
               "class": klass, "subsystem_vendor": vendor, "subsystem_device": 0, "acs": dev.get("acs"),
               "config_size": dev.get("config_size", 4096)}
        self.write(ddir + "/config", config_space(cfg, primary, secondary, subordinate))
        self.link(ddir, "/sys/bus/pci/devices/" + bdf)
        driver = dev.get("driver", drv)
        if driver:
            self.mkdir("/sys/bus/pci/drivers/" + driver)
            self.link("/sys/bus/pci/drivers/" + driver, ddir + "/driver")
        return ddir, n

    def device(self, dev, parent_dir, numa, primary):
        kids = dev.get("children", [])
        sec = _bus(kids[0]["bdf"]) if kids else 0
        ddir, n = self.function(dev, parent_dir, numa, primary, sec, sec)
        if dev["kind"] == "nic":
            self.nic(dev, ddir, parent_dir, numa, primary)
        for ch in kids:
            self.device(ch, ddir, numa, sec)

    def netdev(self, nd, parent_dir):
        name = nd["name"]
        if nd.get("virtio"):
            vdir = "%s/virtio%d" % (parent_dir, self.virtio)
            self.virtio += 1
            self.mkdir("/sys/bus/virtio/drivers/virtio_net")
            self.link("/sys/bus/virtio/drivers/virtio_net", vdir + "/driver")
            parent_dir = vdir
        ndir = "%s/net/%s" % (parent_dir, name)
        mac = nd.get("mac") or "02:00:00:%02x:%02x:%02x" % (self.ifindex >> 16 & 0xFF, self.ifindex >> 8 & 0xFF,
                                                            self.ifindex & 0xFF)
        for k, v in (("address", mac), ("dev_port", nd.get("dev_port", 0)), ("ifindex", self.ifindex),
                     ("type", 1), ("operstate", "up"), ("mtu", nd.get("mtu", 1500))):
            self.write("%s/%s" % (ndir, k), v)
        self.ifindex += 1
        self.link(parent_dir, ndir + "/device")
        self.link(ndir, "/sys/class/net/" + name)
        self.netdirs[name] = (ndir, mac)
        return ndir

    def ibdev(self, name, parent_dir, ndevs, ipv4=None, extra=None, node_type="1: CA", guid_mac=None):
        """An RDMA device: below ``parent_dir`` with a ``device`` link, or virtual when None."""
        idir = ("%s/infiniband/%s" % (parent_dir, name)) if parent_dir else "/sys/devices/virtual/infiniband/" + name
        if parent_dir:
            self.link(parent_dir, idir + "/device")
        self.write(idir + "/node_type", node_type)
        if guid_mac:
            b = [int(x, 16) for x in guid_mac.split(":")]
            eui = [b[0] ^ 2, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]
            self.write(idir + "/node_guid", ":".join("%02x%02x" % (eui[i], eui[i + 1]) for i in range(0, 8, 2)))
        for k, v in (extra or {}).items():
            self.write("%s/%s" % (idir, k), v)
        for port, nd in enumerate(ndevs, 1):
            pdir = "%s/ports/%d" % (idir, port)
            self.write(pdir + "/link_layer", "Ethernet")
            self.write(pdir + "/state", "4: ACTIVE")
            if nd is None:
                continue
            gids = [("fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1"),
                    ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2")]
            if ipv4:
                o = [int(x) for x in ipv4.split(".")]
                v4 = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(o)
                gids += [(v4, "IB/RoCE v1"), (v4, "RoCE v2")]
            for i, (g, t) in enumerate(gids):
                self.write("%s/gids/%d" % (pdir, i), g)
                self.write("%s/gid_attrs/types/%d" % (pdir, i), t)
                self.write("%s/gid_attrs/ndevs/%d" % (pdir, i), nd)
        self.link(idir, "/sys/class/infiniband/" + name)
        return idir

    def nic(self, dev, ddir, parent_dir, numa, primary):
        names = []
        for nd in dev.get("netdevs", []):
            self.netdev(nd, ddir)
            names.append(nd["name"])
        if dev.get("ibdev"):
            ports = dev.get("ibports", max(1, len(names)))
            ndevs = [names[i] if i < len(names) else None for i in range(ports)]
            if dev.get("no_gid_ndevs"):
                ndevs = [None] * ports
            self.ibdev(dev["ibdev"], ddir, ndevs, dev.get("ipv4"))
        for i, vf in enumerate(dev.get("vfs", [])):
            vfd = {"bdf": vf["bdf"], "kind": "nic", "vendor": dev.get("vendor", 0x15B3),
                   "device": vf.get("device", CX7_VF), "class": 0x020000, "driver": dev.get("driver", "mlx5_core"),
                   "numa": dev.get("numa", numa)}
            vdir, _n = self.function(vfd, parent_dir, numa, primary)       # the VF's parent is the PF's parent
            self.link(ddir, vdir + "/physfn")
            self.link(vdir, "%s/virtfn%d" % (ddir, i))
            if vf.get("netdev"):
                self.netdev({"name": vf["netdev"]}, vdir)
            if vf.get("ibdev"):
                self.ibdev(vf["ibdev"], vdir, [vf.get("netdev")], vf.get("ipv4"))
        for sf in dev.get("sfs", []):          # auxiliary devices below the function (mlx5 scalable functions)
            sdir = "%s/%s" % (ddir, sf["name"])
            self.mkdir(sdir)
            self.netdev({"name": sf["netdev"]}, sdir)
            self.ibdev(sf["ibdev"], sdir, [sf["netdev"]])
        if dev.get("vfs"):
            self.write(ddir + "/sriov_numvfs", len(dev["vfs"]))
            self.write(ddir + "/sriov_totalvfs", 16)

    def bond(self, b):
        bdir = "/sys/devices/virtual/net/" + b["name"]
        mac = self.netdirs[b["slaves"][0]][1]
        self.write(bdir + "/address", mac)
        self.write(bdir + "/ifindex", self.ifindex)
        self.ifindex += 1
        self.write(bdir + "/bonding/slaves", " ".join(b["slaves"]))
        self.write(bdir + "/bonding/mode", "802.3ad 4")
        for s in b["slaves"]:
            sdir = self.netdirs[s][0]
            if not b.get("no_lower_links"):
                self.link(sdir, "%s/lower_%s" % (bdir, s))
            self.link(bdir, "%s/upper_%s" % (sdir, b["name"]))
            self.link(bdir, sdir + "/master")
        self.link(bdir, "/sys/class/net/" + b["name"])
        self.netdirs[b["name"]] = (bdir, mac)
        if b.get("ibdev"):
            # mlx5 registers the LAG device on the first PF (the bond's first slave's function)
            first = os.path.dirname(os.path.dirname(self.netdirs[b["slaves"][0]][0]))
            self.ibdev(b["ibdev"], first, [b["name"]], b.get("ipv4"))

    def soft_rdma(self, s):
        nd = s["netdev"]
        mac = self.netdirs[nd][1] if nd in self.netdirs else "02:00:00:00:00:99"
        if s.get("type", "rxe") == "rxe":
            self.ibdev(s["name"], None, [nd], s.get("ipv4"), extra={"parent": nd}, guid_mac=mac)
        else:          # siw: iWARP, no parent attribute, no netdev in the GID attributes
            self.ibdev(s["name"], None, [None], None, node_type="4: RNIC", guid_mac=mac)


def build(root, model):
    """Write the model's sysfs below ``root``; returns a Sysroot on it."""
    return _Writer(root, model).build()
