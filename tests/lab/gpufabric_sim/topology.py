# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Topology descriptions of simulated hosts.

A topology is a plain dict (YAML in ``tests/lab/topologies/<name>.yml``)::

    name: hgx-h200
    kernel_release: 6.8.0-45-generic
    os: ubuntu                      # ubuntu | debian | rhel | rocky
    os_version: "24.04"
    bootloader: grub                # grub (ubuntu/debian default) | grubby (rhel default: GRUB 2 + BLS)
    init: systemd                   # PID 1; anything else (process_api on a microVM) has no /run/systemd/system
                                    # | systemd-boot | uki | none (microVM: command line from the hypervisor)
    cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=... ro quiet splash"
    iommu: translated               # identity | translated | off
    nvidia_driver: {flavour: open, version: 550.127.05}   # flavour: open | proprietary | none
    fabric_manager: running         # running | stopped | absent
    nvidia_fs: {loaded: true, version: "2.22", modules: {rpcrdma: 0}, rw_stats_enabled: 0}
                                    # modules: storage modules loaded at boot -> what their nvidia-fs register
                                    # function returns (0 registers; -95 refuses; false: no hook). nvidia-fs
                                    # lists them only while /dev/nvidia-fs* is held open (nvfs_proc.py)
    iproute2_version: "6.1.0"       # 6.1.0 | 6.5.0 (dcb JSON shape)
    numa_nodes: {0: "0-47,96-143", 1: "48-95,144-191"}
    root_buses:                     # the generic nested form
      - bus: "0000:15"              # <segment>:<bus>, shown as sysfs pci0000:15
        numa: 0
        devices:
          - bdf: "0000:15:01.0"
            kind: root_port          # root_port | switch_up | switch_down | bridge | gpu | nic
                                     # | nvswitch | nvme | other
            acs: {cap: 0x5f, ctrl: 0x1d}   # absent: no ACS extended capability
            children: [...]
          - {bdf: "0000:18:00.0", kind: nic, netdev: ens1np0, ibdev: mlx5_0, ports: 1}
    switched:                       # optional compact generator, appended to root_buses
      switches:
        - {bus: "0000:15", numa: 0, slots: [gpu, nic, nic, gpu]}

Per device, ``vendor``/``device``/``class``/``subsystem_vendor``/``subsystem_device``/
``driver``/``numa`` (``numa: -1`` writes ``-1``; ``numa: null`` omits the file) and
``iommu_type`` (per-group type override) may be given; defaults come from ``kind``.

``bootloader`` other than grub/grubby leaves the node without GRUB: no ``/etc/default/grub``, no grub.cfg, no
update-grub/grub-mkconfig/grubby tools. ``systemd-boot`` and ``uki`` boot through UEFI (ESP at ``/boot/efi``,
EFI variables ``LoaderInfo``/``StubInfo``); ``none`` is a microVM booted by the hypervisor (no EFI, ``/boot``
empty). The boot loader passes no ``BOOT_IMAGE=`` there, so it is dropped from ``cmdline``.

``load(name_or_path, **overrides)`` returns the expanded topology (generator applied, defaults filled; overrides
replace top-level keys, e.g. ``bootloader="none"``); ``names()`` lists the shipped topologies.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOPOLOGY_DIR = os.path.abspath(os.path.join(HERE, "..", "topologies"))
DEFAULT = "hgx-h200"

KINDS = ("root_port", "switch_up", "switch_down", "bridge", "gpu", "nic", "nvswitch", "nvme", "other")
BRIDGE_KINDS = ("root_port", "switch_up", "switch_down", "bridge")

# vendor, device, class, subsystem vendor, subsystem device, driver
KIND_DEFAULTS = {
    "root_port": (0x8086, 0x352A, 0x060400, 0x8086, 0x0000, "pcieport"),
    "switch_up": (0x1000, 0xC030, 0x060400, 0x1000, 0x100B, "pcieport"),
    "switch_down": (0x1000, 0xC030, 0x060400, 0x1000, 0x100B, "pcieport"),
    "bridge": (0x1A03, 0x1150, 0x060400, 0x1A03, 0x1150, None),
    "gpu": (0x10DE, 0x2335, 0x030200, 0x10DE, 0x18BE, "nvidia"),
    "nic": (0x15B3, 0x1021, 0x020000, 0x15B3, 0x0041, "mlx5_core"),
    "nvswitch": (0x10DE, 0x22A3, 0x068000, 0x10DE, 0x1796, "nvidia"),
    "nvme": (0x144D, 0xA80A, 0x010802, 0x144D, 0xA801, "nvme"),
    "other": (0x8086, 0x0B25, 0x088000, 0x8086, 0x0000, None),
}

DEFAULT_ACS_CAP = 0x005F
BOOTLOADERS = ("grub", "grubby", "systemd-boot", "uki", "none")


class TopologyError(ValueError):
    pass


def names():
    """Names of the shipped topologies (default first)."""
    found = sorted(f[:-4] for f in os.listdir(TOPOLOGY_DIR) if f.endswith(".yml"))
    if DEFAULT in found:
        found.remove(DEFAULT)
        found.insert(0, DEFAULT)
    return found


def load(name_or_path=None, **overrides):
    """Load a shipped topology by name, a YAML file by path, or expand a dict; ``overrides`` replace top-level
    keys before the expansion (``bootloader="none"``)."""
    if isinstance(name_or_path, dict):
        raw = copy.deepcopy(name_or_path)
    else:
        name = name_or_path or DEFAULT
        path = name if os.path.sep in name or name.endswith((".yml", ".yaml")) else os.path.join(
            TOPOLOGY_DIR, name + ".yml")
        if not os.path.exists(path):
            raise TopologyError("unknown topology %r (shipped: %s)" % (name, ", ".join(names())))
        with open(path) as f:
            raw = yaml.safe_load(f)
    raw = raw or {}
    raw.update(overrides)
    base = raw.pop("base", None)
    if base:
        # ``base: <shipped topology>``: that topology with this file's top-level keys replacing its own
        if not isinstance(base, str) or base == raw.get("name"):
            raise TopologyError("base must name another shipped topology, not %r" % (base,))
        path = os.path.join(TOPOLOGY_DIR, base + ".yml")
        if not os.path.exists(path):
            raise TopologyError("unknown base topology %r (shipped: %s)" % (base, ", ".join(names())))
        with open(path) as f:
            merged = yaml.safe_load(f) or {}
        if merged.get("base"):
            raise TopologyError("base topology %r has a base of its own" % base)
        merged.update(raw)
        raw = merged
    _link_current(raw)
    return expand(raw)


def _link_current(raw):
    """``link_current: {bdf: [speed code, width]}`` (top level): the link the function trained to, set on the
    device of that BDF in the nested layout (tree.link_current); an unknown BDF is an error."""
    wanted = dict(raw.pop("link_current", None) or {})
    if not wanted:
        return

    def walk(devs):
        for d in devs or []:
            if d.get("bdf") in wanted:
                d["link_current"] = list(wanted.pop(d["bdf"]))
            walk(d.get("children"))
    for rb in raw.get("root_buses") or []:
        walk(rb.get("devices"))
    if wanted:
        raise TopologyError("link_current names BDFs not in the layout: %s" % ", ".join(sorted(wanted)))


def parse_bdf(bdf):
    """'0000:15:01.0' -> (0, 0x15, 1, 0)."""
    try:
        dom, bus, devfn = bdf.split(":")
        dev, fn = devfn.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except (ValueError, AttributeError):
        raise TopologyError("bad BDF %r (want 0000:15:01.0)" % (bdf,))


def _int(v):
    if isinstance(v, int):
        return v
    return int(str(v), 0)


def _switched(spec, start_gpu, start_nic):
    """Expand the compact switch generator into root buses."""
    sw_vendor = _int(spec.get("switch_vendor", 0x1000))
    sw_device = _int(spec.get("switch_device", 0xC030))
    rp_acs = spec.get("root_port_acs", {"cap": DEFAULT_ACS_CAP, "ctrl": 0x001D})
    dn_acs = spec.get("downstream_acs", {"cap": DEFAULT_ACS_CAP, "ctrl": 0x001D})
    up_acs = spec.get("upstream_acs")
    gpu_i, nic_i = start_gpu, start_nic
    buses = []
    for sw in spec.get("switches", []):
        seg, rbus = sw["bus"].split(":")
        rbus = int(rbus, 16)
        rp_dev = sw.get("root_port_device", 1)
        up_bus = rbus + 1
        dn_bus = rbus + 2
        downs = []
        for i, kind in enumerate(sw.get("slots", [])):
            ep_bus = dn_bus + 1 + i
            ep = {"bdf": "%s:%02x:00.0" % (seg, ep_bus), "kind": kind}
            if kind == "nic":
                ep.update({"netdev": "ens%dnp0" % (nic_i + 1), "ibdev": "mlx5_%d" % nic_i, "ports": 1})
                nic_i += 1
            elif kind == "gpu":
                gpu_i += 1
            d = {"bdf": "%s:%02x:%02x.0" % (seg, dn_bus, i), "kind": "switch_down",
                 "vendor": sw_vendor, "device": sw_device, "children": [ep]}
            if dn_acs:
                d["acs"] = dict(dn_acs)
            downs.append(d)
        up = {"bdf": "%s:%02x:00.0" % (seg, up_bus), "kind": "switch_up", "vendor": sw_vendor,
              "device": sw_device, "children": downs}
        if up_acs:
            up["acs"] = dict(up_acs)
        rp = {"bdf": "%s:%02x:%02x.0" % (seg, rbus, rp_dev), "kind": "root_port", "children": [up]}
        if rp_acs:
            rp["acs"] = dict(rp_acs)
        buses.append({"bus": sw["bus"], "numa": sw.get("numa", 0), "devices": [rp]})
    return buses


def _walk(devices):
    for d in devices:
        yield d
        yield from _walk(d.get("children", []))


def iter_devices(topology):
    """Yield (root_bus, device) for every device of an expanded topology, depth first."""
    for rb in topology["root_buses"]:
        for d in _walk(rb["devices"]):
            yield rb, d


def expand(raw):
    topo = copy.deepcopy(raw or {})
    topo.setdefault("name", "custom")
    topo.setdefault("kernel_release", "6.8.0-45-generic")
    topo.setdefault("os", "ubuntu")
    if topo["os"] not in ("ubuntu", "debian", "rhel", "rocky"):
        raise TopologyError("os must be ubuntu, debian, rhel or rocky, not %r" % topo["os"])
    el = topo["os"] in ("rhel", "rocky")
    topo.setdefault("os_version", {"ubuntu": "24.04", "debian": "12", "rhel": "9.4", "rocky": "9.4"}[topo["os"]])
    topo.setdefault("bootloader", "grubby" if el else "grub")
    # PID 1: systemd (the default) or another init, as on a microVM whose agent is PID 1 (the H200 host the device
    # tool lends runs "process_api"); only systemd creates /run/systemd/system (sd_booted(3))
    topo.setdefault("init", "systemd")
    if not isinstance(topo["init"], str) or not topo["init"] or "/" in topo["init"] or len(topo["init"]) > 15:
        raise TopologyError("init must be a process name (PID 1's comm, at most 15 characters), not %r"
                            % (topo["init"],))
    if topo["bootloader"] not in BOOTLOADERS:
        raise TopologyError("bootloader must be one of %s, not %r" % (", ".join(BOOTLOADERS), topo["bootloader"]))
    if (topo["bootloader"], el) in (("grub", True), ("grubby", False)):
        raise TopologyError("bootloader %s does not fit os %s (grub: ubuntu/debian, grubby: rhel/rocky)"
                            % (topo["bootloader"], topo["os"]))
    topo.setdefault("cmdline", "BOOT_IMAGE=/boot/vmlinuz-%s root=UUID=3f1a2c9e-5b7d-4e21-9a0c-6d8e2f4b1c70 ro"
                    % topo["kernel_release"])
    if topo["bootloader"] not in ("grub", "grubby"):
        # only GRUB passes BOOT_IMAGE=; systemd-boot, a UKI's stub and a hypervisor's direct kernel boot do not
        topo["cmdline"] = " ".join(w for w in topo["cmdline"].split() if not w.startswith("BOOT_IMAGE="))
    topo.setdefault("iommu", "translated")
    if topo["iommu"] not in ("identity", "translated", "off"):
        raise TopologyError("iommu must be identity, translated or off")
    drv = topo.get("nvidia_driver") or {}
    if isinstance(drv, str):
        drv = {"flavour": drv}
    drv.setdefault("flavour", "open")
    drv.setdefault("version", "550.127.05")
    if drv["flavour"] not in ("open", "proprietary", "none"):
        raise TopologyError("nvidia_driver.flavour must be open, proprietary or none")
    topo["nvidia_driver"] = drv
    topo.setdefault("fabric_manager", "absent")
    if topo["fabric_manager"] not in ("running", "stopped", "absent"):
        raise TopologyError("fabric_manager must be running, stopped or absent")
    nvfs = topo.get("nvidia_fs") or {"loaded": False}
    nvfs.setdefault("loaded", False)
    nvfs.setdefault("version", "2.22")
    nvfs.setdefault("modules", {})
    nvfs.setdefault("rw_stats_enabled", 0)
    topo["nvidia_fs"] = nvfs
    # NFS mounts the node has at boot (proc/self/mountinfo lists them as the kernel would; the tree has that file only
    # when the topology names some, even an empty list; ``systemctl start`` of a storage_mounts unit adds its line,
    # mounts.py); each {path, source, fstype, options}
    mounts = topo.get("nfs_mounts")
    if mounts is not None:
        if not isinstance(mounts, list):
            raise TopologyError("nfs_mounts must be a list of {path, source, fstype, options}")
        for m in mounts:
            if not isinstance(m, dict) or not str(m.get("path", "")).startswith("/") or ":" not in str(
                    m.get("source", "")):
                raise TopologyError("nfs_mounts entry %r needs an absolute path and a source server:/export" % (m,))
            m.setdefault("fstype", "nfs4")
            if m["fstype"] not in ("nfs", "nfs4"):
                raise TopologyError("nfs_mounts %s: fstype must be nfs or nfs4" % m["path"])
            m.setdefault("options", "vers=4.2,proto=rdma,port=20049")
    topo["iproute2_version"] = str(topo.get("iproute2_version", "6.1.0"))
    if topo["iproute2_version"] not in ("6.1.0", "6.5.0"):
        raise TopologyError("iproute2_version must be 6.1.0 or 6.5.0")
    numa = topo.get("numa_nodes") or {0: "0-7"}
    topo["numa_nodes"] = dict((int(k), str(v)) for k, v in numa.items())

    buses = list(topo.get("root_buses") or [])
    gpus = sum(1 for rb in buses for d in _walk(rb.get("devices", [])) if d.get("kind") == "gpu")
    nics = sum(1 for rb in buses for d in _walk(rb.get("devices", [])) if d.get("kind") == "nic" and d.get("ibdev"))
    if topo.get("switched"):
        buses.extend(_switched(topo.pop("switched"), gpus, nics))
    topo["root_buses"] = buses

    seen = set()
    for rb in buses:
        if "bus" not in rb:
            raise TopologyError("root bus without 'bus' (want 0000:15)")
        rb.setdefault("numa", 0)
        rb.setdefault("devices", [])
        for d in _walk(rb["devices"]):
            kind = d.get("kind")
            if kind not in KINDS:
                raise TopologyError("device %s: kind %r not in %s" % (d.get("bdf"), kind, ", ".join(KINDS)))
            parse_bdf(d.get("bdf"))
            if d["bdf"] in seen:
                raise TopologyError("duplicate BDF %s" % d["bdf"])
            seen.add(d["bdf"])
            vendor, device, klass, svid, sdid, driver = KIND_DEFAULTS[kind]
            d["vendor"] = _int(d.get("vendor", vendor))
            d["device"] = _int(d.get("device", device))
            d["class"] = _int(d.get("class", klass))
            d["subsystem_vendor"] = _int(d.get("subsystem_vendor", svid))
            d["subsystem_device"] = _int(d.get("subsystem_device", sdid))
            d.setdefault("driver", driver)
            if "numa" not in d:
                d["numa"] = rb["numa"]
            d.setdefault("children", [])
            if d["children"] and kind not in BRIDGE_KINDS:
                raise TopologyError("device %s of kind %s cannot have children" % (d["bdf"], kind))
            if "acs" in d and d["acs"] is not None:
                acs = d["acs"]
                acs["cap"] = _int(acs.get("cap", DEFAULT_ACS_CAP))
                if "ctrl" not in acs:
                    acs["ctrl"] = (0x001D & acs["cap"]) if topo["iommu"] != "off" else 0
                acs["ctrl"] = _int(acs["ctrl"])
            else:
                d["acs"] = None
            if kind == "nic":
                d.setdefault("ports", 1)
                # a NIC without ibdev is a plain Ethernet NIC (management, BMC-shared): no RDMA device
                if not d.get("netdev"):
                    raise TopologyError("nic %s needs a netdev" % d["bdf"])
    return topo
