# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated host tree: config spaces, links, NIC/RDMA files, host files, manifest."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

import pytest

from gpufabric_sim import topology
from gpufabric_sim.emulators import grub
from gpufabric_sim.tree import build_tree

MANIFEST_KEYS = {"name", "topology", "kernel_release", "os", "iproute2_version", "gpus", "rails"}
RAIL_KEYS = {"netdev", "ibdev", "port", "bdf", "numa", "driver", "ipv4", "mac"}


@pytest.fixture(scope="module", params=topology.names())
def built(request, tmp_path_factory):
    root = str(tmp_path_factory.mktemp(request.param) / "root")
    manifest = build_tree(root, request.param, node_index=7)
    return request.param, root, manifest


def _devices(root):
    base = os.path.join(root, "sys/bus/pci/devices")
    return [(bdf, os.path.realpath(os.path.join(base, bdf))) for bdf in sorted(os.listdir(base))]


def test_shipped_names():
    assert topology.names()[0] == "hgx-h200"
    assert "pcie-4gpu-crossnuma" in topology.names()


def test_config_spaces_are_4096_bytes_with_terminating_ext_chain(built):
    _name, root, _m = built
    for bdf, real in _devices(root):
        data = open(os.path.join(real, "config"), "rb").read()
        assert len(data) == 4096, bdf
        pos, seen = 0x100, []
        while pos:
            assert pos >= 0x100 and pos % 4 == 0 and pos not in seen, (bdf, hex(pos))
            seen.append(pos)
            header = struct.unpack_from("<I", data, pos)[0]
            pos = header >> 20
        first = struct.unpack_from("<I", data, 0x100)[0] & 0xFFFF
        assert first == 0x0001, "%s: AER must come first" % bdf


def test_bridge_bus_numbers_match_tree(built):
    _name, root, _m = built
    for bdf, real in _devices(root):
        data = open(os.path.join(real, "config"), "rb").read()
        if data[0x0E] & 0x7F != 1:
            continue
        primary, secondary, subordinate = data[0x18], data[0x19], data[0x1A]
        assert primary == int(bdf.split(":")[1], 16)
        kids = [d for d in os.listdir(real) if d.count(":") == 2]
        for k in kids:
            assert int(k.split(":")[1], 16) == secondary
        for dirpath, dirnames, _files in os.walk(real):
            for d in dirnames:
                if d.count(":") == 2 and "." in d:
                    assert secondary <= int(d.split(":")[1], 16) <= subordinate


def test_links_resolve_inside_root(built):
    _name, root, _m = built
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                continue
            count += 1
            target = os.readlink(p)
            if p == os.path.join(root, "proc/sys/net"):
                assert target == "/proc/sys/net"
                continue
            assert not os.path.isabs(target), p
            real = os.path.realpath(p)
            assert real.startswith(root + os.sep) and os.path.exists(real), p
    assert count > 50


def test_sysfs_attributes(built):
    name, root, manifest = built
    for g in manifest["gpus"]:
        d = os.path.join(root, "sys/bus/pci/devices", g["bdf"])
        assert open(os.path.join(d, "vendor")).read() == "0x10de\n"
        assert open(os.path.join(d, "class")).read() == "0x030200\n"
        assert int(open(os.path.join(d, "numa_node")).read()) == g["numa"]
        assert os.path.basename(os.readlink(os.path.join(d, "driver"))) == "nvidia"
        assert os.path.isdir(os.path.join(d, "iommu_group", "devices"))


def test_rdma_files(built):
    _name, root, manifest = built
    for i, r in enumerate(manifest["rails"]):
        assert r["ipv4"] == "10.100.%d.7/16" % i
        port = os.path.join(root, "sys/class/infiniband", r["ibdev"], "ports/1")
        assert open(os.path.join(port, "link_layer")).read().strip() == "Ethernet"
        gid3 = open(os.path.join(port, "gids/3")).read().strip()
        assert gid3 == "0000:0000:0000:0000:0000:ffff:0a64:%02x07" % i
        assert open(os.path.join(port, "gid_attrs/types/3")).read().strip() == "RoCE v2"
        assert open(os.path.join(port, "gid_attrs/types/0")).read().strip() == "IB/RoCE v1"
        assert open(os.path.join(port, "gid_attrs/ndevs/1")).read().strip() == r["netdev"]
        assert open(os.path.join(port, "gids/0")).read().startswith("fe80:0000:0000:0000:")
        assert open(os.path.join(port, "gids/5")).read().strip() == ":".join(["0000"] * 8)
        assert not os.path.exists(os.path.join(port, "gid_attrs/types/5"))
        net = os.path.join(root, "sys/class/net", r["netdev"])
        assert open(os.path.join(net, "address")).read().strip() == r["mac"]
        assert os.path.realpath(os.path.join(net, "device")) == \
            os.path.realpath(os.path.join(root, "sys/bus/pci/devices", r["bdf"]))
    assert os.path.isdir(os.path.join(root, "sys/kernel/config/rdma_cm"))
    assert os.listdir(os.path.join(root, "sys/kernel/config/rdma_cm")) == []


def test_manifest_per_contract(built):
    name, root, manifest = built
    assert set(manifest) == MANIFEST_KEYS
    assert manifest["topology"] == name and manifest["name"] == "node007"
    for r in manifest["rails"]:
        assert set(r) == RAIL_KEYS and r["driver"] == "mlx5_core" and r["port"] == 1
    for g in manifest["gpus"]:
        assert set(g) == {"bdf", "numa", "name"}
    on_disk = json.load(open(os.path.join(root, "var/lib/gpufabric-sim/manifest.json")))
    assert on_disk == manifest
    assert len(set(r["mac"] for r in manifest["rails"])) == len(manifest["rails"])


def test_host_files(built):
    name, root, manifest = built

    def read(p):
        with open(os.path.join(root, p)) as f:
            return f.read()
    topo = topology.load(name)
    assert read("proc/cmdline").strip() == topo["cmdline"]
    assert "iommu=pt" not in read("proc/cmdline")
    assert read("proc/sys/kernel/osrelease").strip() == manifest["kernel_release"]
    assert "ID=%s" % manifest["os"] in read("etc/os-release").replace('"', "")
    assert "GRUB_CMDLINE_LINUX=" in read("etc/default/grub")
    if manifest["os"] == "rhel":
        entries = os.listdir(os.path.join(root, "boot/loader/entries"))
        assert entries and manifest["kernel_release"] in entries[0]
    assert "Open Kernel Module" in read("proc/driver/nvidia/version")
    for n in topo["numa_nodes"]:
        assert read("sys/devices/system/node/node%d/cpulist" % n).strip() == topo["numa_nodes"][n]


def test_fresh_node_boots_its_own_cmdline(built):
    """The boot loader config the installer leaves: the next boot gives the running command line."""
    _name, root, manifest = built
    with open(os.path.join(root, "proc/cmdline")) as f:
        cmdline = f.read().strip()
    assert grub.next_boot_cmdline(root) == cmdline
    if manifest["os"] == "rhel":
        assert os.path.isfile(os.path.join(root, "etc/kernel/cmdline"))
        assert os.readlink(os.path.join(root, "etc/system-release")) == "redhat-release"
        assert not os.path.exists(os.path.join(root, "boot/grub/grub.cfg"))
    else:
        cfg = os.path.join(root, "boot/grub/grub.cfg")
        with open(cfg) as f:
            assert f.read() == grub.generate_grub_cfg(root), "one implementation: update-grub's output"
        assert os.stat(cfg).st_mode & 0o777 == 0o444


@pytest.mark.parametrize("os_name,menu", [("ubuntu", "Ubuntu"), ("debian", "Debian GNU/Linux")])
def test_installer_grub_defaults_follow_the_cmdline(tmp_path, os_name, menu):
    root = str(tmp_path / "root")
    cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-25-amd64 root=UUID=ab ro quiet nosmt=force"
    build_tree(root, {"os": os_name, "kernel_release": "6.1.0-25-amd64", "cmdline": cmdline, "root_buses": []})
    with open(os.path.join(root, "etc/default/grub")) as f:
        defaults = f.read()
    assert 'GRUB_CMDLINE_LINUX="quiet nosmt=force"\n' in defaults and 'GRUB_CMDLINE_LINUX_DEFAULT=""\n' in defaults
    assert grub.next_boot_cmdline(root) == cmdline
    with open(os.path.join(root, "boot/grub/grub.cfg")) as f:
        assert "\nmenuentry '%s' --class %s " % (menu, os_name) in f.read()


def test_hgx_specifics(tmp_path):
    root = str(tmp_path / "root")
    m = build_tree(root, "hgx-h200", 1)
    assert [r["netdev"] for r in m["rails"]] == ["ens%dnp0" % i for i in range(1, 9)]
    assert [r["ibdev"] for r in m["rails"]] == ["mlx5_%d" % i for i in range(8)]
    assert [g["numa"] for g in m["gpus"]] == [0] * 4 + [1] * 4
    assert open(os.path.join(root, "proc/2817/comm")).read() == "nv-fabricmanage\n"
    assert open(os.path.join(root, "proc/driver/nvidia-fs/version")).read() == "version: 2.22\n"
    stats = open(os.path.join(root, "proc/driver/nvidia-fs/stats")).read()
    assert "IO stats: Disabled" in stats and "readMiB" not in stats
    assert open(os.path.join(root, "sys/module/nvidia_fs/parameters/rw_stats_enabled")).read() == "0\n"
    groups = os.listdir(os.path.join(root, "sys/kernel/iommu_groups"))
    assert groups and open(os.path.join(root, "sys/kernel/iommu_groups", groups[0], "type")).read() == "DMA-FQ\n"


BAD_TOPOLOGIES = [
    ({"root_buses": [{"bus": "0000:10", "devices": [{"bdf": "0000:10:01.0", "kind": "wat"}]}]}, "kind"),
    ({"root_buses": [{"bus": "0000:10", "devices": [{"bdf": "10:1", "kind": "gpu"}]}]}, "bad BDF"),
    ({"root_buses": [{"bus": "0000:10", "devices": [
        {"bdf": "0000:10:01.0", "kind": "gpu"}, {"bdf": "0000:10:01.0", "kind": "gpu"}]}]}, "duplicate"),
    ({"root_buses": [{"bus": "0000:10", "devices": [{"bdf": "0000:10:01.0", "kind": "nic"}]}]}, "netdev"),
    ({"iommu": "maybe"}, "iommu"),
    ({"root_buses": [{"bus": "0000:10", "devices": [
        {"bdf": "0000:10:01.0", "kind": "gpu", "children": [{"bdf": "0000:11:00.0", "kind": "gpu"}]}]}]},
     "cannot have children"),
]


@pytest.mark.parametrize("topo,message", BAD_TOPOLOGIES)
def test_bad_topologies(tmp_path, topo, message):
    with pytest.raises(topology.TopologyError, match=message):
        build_tree(str(tmp_path / "root"), topo)


def test_children_on_two_buses_rejected(tmp_path):
    topo = {"root_buses": [{"bus": "0000:10", "devices": [{"bdf": "0000:10:01.0", "kind": "root_port", "children": [
        {"bdf": "0000:11:00.0", "kind": "gpu"}, {"bdf": "0000:12:00.0", "kind": "gpu"}]}]}]}
    with pytest.raises(topology.TopologyError, match="several buses"):
        build_tree(str(tmp_path / "root"), topo)


def test_load_unknown_name():
    with pytest.raises(topology.TopologyError, match="unknown topology"):
        topology.load("no-such-topology")
