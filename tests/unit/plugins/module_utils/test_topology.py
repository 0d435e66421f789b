# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery on the shipped topologies and on odd layouts described with the generic nested form."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ACS = {"cap": 0x5F, "ctrl": 0x1D}


# -- tiny layout helpers (generic nested form) -------------------------------------------------

def rp(bdf, *children, **kw):
    d = {"bdf": bdf, "kind": "root_port", "acs": dict(ACS), "children": list(children)}
    d.update(kw)
    return d


def up(bdf, *children, **kw):
    d = {"bdf": bdf, "kind": "switch_up", "children": list(children)}
    d.update(kw)
    return d


def down(bdf, *children, **kw):
    d = {"bdf": bdf, "kind": "switch_down", "acs": dict(ACS), "children": list(children)}
    d.update(kw)
    return d


def bridge(bdf, *children, **kw):
    d = {"bdf": bdf, "kind": "bridge", "children": list(children)}
    d.update(kw)
    return d


def gpu(bdf, **kw):
    d = {"bdf": bdf, "kind": "gpu"}
    d.update(kw)
    return d


def nic(bdf, i, **kw):
    d = {"bdf": bdf, "kind": "nic", "netdev": "ens%dnp0" % (i + 1), "ibdev": "mlx5_%d" % i}
    d.update(kw)
    return d


def host(*buses, **kw):
    topo = {"name": "odd", "numa_nodes": {0: "0-3", 1: "4-7"}, "root_buses": list(buses),
            "fabric_manager": "absent"}
    topo.update(kw)
    return topo


def rbus(bus, numa, *devices):
    return {"bus": bus, "numa": numa, "devices": list(devices)}


def build(tmp_path, topo, node_index=1):
    root = str(tmp_path / "root")
    build_tree(root, topo, node_index)
    return Sysroot(root)


# -- layouts ------------------------------------------------------------------------------------

TWO_LEVEL = host(rbus("0000:10", 0, rp(
    "0000:10:01.0",
    up("0000:11:00.0",
       down("0000:12:00.0",
            up("0000:13:00.0",
               down("0000:14:00.0", gpu("0000:15:00.0")),
               down("0000:14:01.0", gpu("0000:16:00.0")))),
       down("0000:12:01.0", nic("0000:17:00.0", 0))))))

NIC_INTERNAL_BRIDGE = host(rbus("0000:20", 0, rp(
    "0000:20:01.0",
    up("0000:21:00.0",
       down("0000:22:00.0", gpu("0000:23:00.0")),
       down("0000:22:01.0",
            up("0000:24:00.0", vendor=0x15B3, device=0x1979,
               children=[down("0000:25:00.0", nic("0000:26:00.0", 0), vendor=0x15B3, device=0x1979)]))))))

BRIDGE_NO_ACS = host(rbus("0000:30", 0, rp(
    "0000:30:01.0",
    up("0000:31:00.0",
       down("0000:32:00.0", bridge("0000:33:00.0", gpu("0000:34:00.0"))),
       down("0000:32:01.0", nic("0000:35:00.0", 0))))))

ROOT_COMPLEX = host(rbus("0000:40", 0,
                         rp("0000:40:01.0", gpu("0000:41:00.0")),
                         rp("0000:40:02.0", nic("0000:42:00.0", 0))))

TWO_HOST_BRIDGES = host(rbus("0000:50", 0, rp("0000:50:01.0", gpu("0000:51:00.0"))),
                        rbus("0000:60", 0, rp("0000:60:01.0", nic("0000:61:00.0", 0))))

CROSS_SOCKET = host(rbus("0000:50", 0, rp("0000:50:01.0", gpu("0000:51:00.0"))),
                    rbus("0000:d0", 1, rp("0000:d0:01.0", nic("0000:d1:00.0", 0))))

MISSING_NUMA = host(rbus("0000:70", 0,
                         rp("0000:70:01.0", gpu("0000:71:00.0", numa=-1)),
                         rp("0000:70:02.0", nic("0000:72:00.0", 0, numa=None))))

NO_GPUS = host(rbus("0000:80", 0, rp("0000:80:01.0", nic("0000:81:00.0", 0))))

NO_IOMMU = host(rbus("0000:40", 0, rp("0000:40:01.0", up(
    "0000:41:00.0",
    down("0000:42:00.0", gpu("0000:43:00.0")),
    down("0000:42:01.0", nic("0000:44:00.0", 0))))), iommu="off")

PROPRIETARY = host(rbus("0000:40", 0, rp("0000:40:01.0", gpu("0000:41:00.0"))),
                   nvidia_driver={"flavour": "proprietary"}, nvidia_fs={"loaded": True, "modules": {"rpcrdma": 0}})

NO_DRIVER = host(rbus("0000:40", 0, rp("0000:40:01.0", gpu("0000:41:00.0"))), nvidia_driver="none")

FM_STOPPED = host(rbus("0000:40", 0, rp("0000:40:01.0", gpu("0000:41:00.0")),
                       rp("0000:40:02.0", {"bdf": "0000:42:00.0", "kind": "nvswitch"})),
                  fabric_manager="stopped")

MIXED_IOMMU = host(rbus("0000:40", 0, rp("0000:40:01.0", gpu("0000:41:00.0", iommu_type="identity"))))

IDENTITY = host(rbus("0000:40", 0, rp("0000:40:01.0", gpu("0000:41:00.0"))), iommu="identity",
                cmdline="BOOT_IMAGE=/boot/vmlinuz ro iommu=pt intel_iommu=on")

# truncated config spaces everywhere: roles come from the tree, ACS reads give an error
TRUNCATED = host(rbus("0000:10", 0, rp(
    "0000:10:01.0", config_size=256,
    children=[up("0000:11:00.0", config_size=64,
                 children=[down("0000:12:00.0", gpu("0000:13:00.0"), config_size=256),
                           down("0000:12:01.0", nic("0000:14:00.0", 0), config_size=256)])])))

# garbage ext caps: a downstream port's Power Budgeting header loops back to 0x100 before ACS, the other's
# AER points below 0x100, the upstream port's chain ends after AER
GARBAGE = host(rbus("0000:10", 0, rp(
    "0000:10:01.0",
    up("0000:11:00.0", config_patch={"0x100": "01000200"},
       children=[down("0000:12:00.0", gpu("0000:13:00.0"), config_patch={"0x168": "04000110"}),
                 down("0000:12:01.0", nic("0000:14:00.0", 0), config_patch={"0x100": "01005000"})]))))

MULTI_GPU_ONE_NIC = host(rbus("0000:10", 0, rp(
    "0000:10:01.0",
    up("0000:11:00.0",
       down("0000:12:00.0", gpu("0000:13:00.0")),
       down("0000:12:01.0", gpu("0000:14:00.0")),
       down("0000:12:02.0", nic("0000:15:00.0", 0))))))


RELATION_CASES = [
    # (id, topology, gpu, nic, relation, bridges on the path)
    ("two-level switch", TWO_LEVEL, "0000:15:00.0", "0000:17:00.0", "PXB",
     ["0000:14:00.0", "0000:13:00.0", "0000:12:00.0", "0000:11:00.0", "0000:12:01.0"]),
    ("nic internal bridge", NIC_INTERNAL_BRIDGE, "0000:23:00.0", "0000:26:00.0", "PXB",
     ["0000:22:00.0", "0000:21:00.0", "0000:22:01.0", "0000:24:00.0", "0000:25:00.0"]),
    ("bridge without ACS", BRIDGE_NO_ACS, "0000:34:00.0", "0000:35:00.0", "PXB",
     ["0000:33:00.0", "0000:32:00.0", "0000:31:00.0", "0000:32:01.0"]),
    ("root complex", ROOT_COMPLEX, "0000:41:00.0", "0000:42:00.0", "PHB", ["0000:40:01.0", "0000:40:02.0"]),
    ("two host bridges one node", TWO_HOST_BRIDGES, "0000:51:00.0", "0000:61:00.0", "NODE",
     ["0000:50:01.0", "0000:60:01.0"]),
    ("across sockets", CROSS_SOCKET, "0000:51:00.0", "0000:d1:00.0", "SYS", ["0000:50:01.0", "0000:d0:01.0"]),
    ("missing numa", MISSING_NUMA, "0000:71:00.0", "0000:72:00.0", "PHB", ["0000:70:01.0", "0000:70:02.0"]),
    ("no iommu", NO_IOMMU, "0000:43:00.0", "0000:44:00.0", "PIX", ["0000:42:00.0", "0000:41:00.0", "0000:42:01.0"]),
    ("truncated config", TRUNCATED, "0000:13:00.0", "0000:14:00.0", "PIX",
     ["0000:12:00.0", "0000:11:00.0", "0000:12:01.0"]),
    ("garbage ext caps", GARBAGE, "0000:13:00.0", "0000:14:00.0", "PIX",
     ["0000:12:00.0", "0000:11:00.0", "0000:12:01.0"]),
]


@pytest.mark.parametrize("case", RELATION_CASES, ids=[c[0] for c in RELATION_CASES])
def test_relation_and_pairing(tmp_path, case):
    _name, topo, g, n, relation, bridges = case
    sr = build(tmp_path, topo)
    assert T.pci_relation(sr, g, n) == relation
    assert T.pci_relation(sr, n, g) == relation
    facts = T.discover(sr)
    assert facts["matrix"][g][n] == relation
    pair = [p for p in facts["pairing"] if p["gpu"] == g][0]
    assert pair["nic"] == n and pair["relation"] == relation
    assert pair["bridges"] == bridges
    assert [b["bdf"] for b in T.path_bridges(sr, g, n)] == bridges
    assert pair["cross_numa"] is (relation == "SYS")


ACS_CASES = [
    # (id, topology, gpu, nic, {bridge: expected acs 'present' or 'error'})
    ("switch ports", TWO_LEVEL, "0000:16:00.0", "0000:17:00.0",
     {"0000:14:01.0": True, "0000:13:00.0": False, "0000:11:00.0": False}),
    ("bridge without ACS", BRIDGE_NO_ACS, "0000:34:00.0", "0000:35:00.0",
     {"0000:33:00.0": False, "0000:32:00.0": True}),
    ("truncated", TRUNCATED, "0000:13:00.0", "0000:14:00.0",
     {"0000:12:00.0": "error", "0000:11:00.0": "error"}),
    ("garbage", GARBAGE, "0000:13:00.0", "0000:14:00.0",
     {"0000:12:00.0": False, "0000:11:00.0": False, "0000:12:01.0": False}),
]


@pytest.mark.parametrize("case", ACS_CASES, ids=[c[0] for c in ACS_CASES])
def test_path_bridge_acs(tmp_path, case):
    _name, topo, g, n, expected = case
    sr = build(tmp_path, topo)
    got = dict((b["bdf"], b) for b in T.path_bridges(sr, g, n))
    for bdf, want in expected.items():
        acs = got[bdf]["acs"]
        if want == "error":
            assert "root" in acs["error"]
        else:
            assert acs["present"] is want
            if want:
                assert acs["ctrl"] == 0x1D and acs["ctrl_bits"] == ["SV", "RR", "CR", "UF"]
                assert acs["offset"] >= 0x100


def test_roles_from_config_and_from_tree(tmp_path):
    sr = build(tmp_path, TRUNCATED)
    scan = T.PciScan(sr)
    assert [scan.role(b) for b in ("0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0")] == \
        ["root_port", "upstream", "downstream", "endpoint"]
    sr2 = build(tmp_path / "b", BRIDGE_NO_ACS)
    scan2 = T.PciScan(sr2)
    assert scan2.role("0000:33:00.0") == "bridge"
    assert scan2.role("0000:31:00.0") == "upstream"


def test_default_topology(tmp_path):
    sr = build(tmp_path, "hgx-h200", 2)
    facts = T.discover(sr)
    assert len(facts["gpus"]) == 8 and len(facts["nvswitches"]) == 4
    assert all(g["model"] == "H200 SXM" for g in facts["gpus"])
    assert len(facts["rails"]) == 8
    assert [p["netdev"] for p in facts["pairing"]] == ["ens%dnp0" % i for i in range(1, 9)]
    for p in facts["pairing"]:
        assert p["relation"] == "PIX"
        assert p["gpu_numa"] == p["nic_numa"] == (0 if p["gpu_index"] < 4 else 1)
        # GPU and NIC hang below the same switch: downstream, upstream, downstream
        roles = [T.PciScan(sr).role(b) for b in p["bridges"]]
        assert roles == ["downstream", "upstream", "downstream"]
    for r in facts["rails"]:
        assert r["link_layer"] == "Ethernet" and r["roce_v2_ipv4_gid_index"] == 3
        assert r["ipv4"] == "10.100.%d.2" % int(r["ibdev"].split("_")[1])
    assert facts["iommu"]["mode"] == "translated"
    assert facts["gpu_driver"]["flavour"] == "open"
    assert facts["fabric_manager"] == {"needed": True, "running": True, "pids": [2817]}
    assert facts["nvidia_fs"]["loaded"] is True and facts["nvidia_fs"]["version"] == "2.22"
    assert [n["node"] for n in facts["numa_nodes"]] == [0, 1]
    warns = T.warnings(facts)
    assert len(warns) == 1 and "translated" in warns[0]
    downs = [b for b in facts["path_bridges"] if b["role"] == "downstream"]
    assert len(downs) == 16 and all(b["acs"]["ctrl"] == 0x1D for b in downs)


def test_crossnuma_topology(tmp_path):
    sr = build(tmp_path, "pcie-4gpu-crossnuma")
    facts = T.discover(sr)
    rel = dict((p["gpu"], (p["netdev"], p["relation"], p["cross_numa"])) for p in facts["pairing"])
    assert rel == {
        "0000:19:00.0": ("ens1np0", "PIX", False),
        "0000:39:00.0": ("ens2np0", "PHB", False),
        "0000:3b:00.0": ("ens3np0", "SYS", True),
        "0000:4b:00.0": ("ens4np0", "SYS", True),
    }
    no_acs = [b for b in facts["path_bridges"] if b["bdf"] == "0000:3a:00.0"]
    assert no_acs and no_acs[0]["acs"]["present"] is False and no_acs[0]["role"] == "bridge"
    assert sum("across NUMA" in w for w in T.warnings(facts)) == 2
    assert facts["fabric_manager"]["needed"] is False


HOST_CASES = [
    # (id, topology, check(facts))
    ("no gpus", NO_GPUS, lambda f: f["gpus"] == [] and f["pairing"] == [] and f["path_bridges"] == []
     and len(f["rails"]) == 1),
    ("no iommu groups", NO_IOMMU, lambda f: f["iommu"] == {"mode": "off", "groups": 0, "types": {}, "cmdline": []}),
    ("identity", IDENTITY, lambda f: f["iommu"]["mode"] == "identity"
     and f["iommu"]["cmdline"] == ["iommu=pt", "intel_iommu=on"]),
    ("mixed", MIXED_IOMMU, lambda f: f["iommu"]["mode"] == "mixed"),
    ("proprietary", PROPRIETARY, lambda f: f["gpu_driver"]["flavour"] == "proprietary"
     # the facts hold a /dev/nvidia-fs* open while they read the list; this tree's file is static (the idle list,
     # wekafsio only, a pseudo entry left out): test_nvidia_fs_facts_read_holding_a_device has the lifetime
     and f["gpu_driver"]["taint"] == "POE" and f["nvidia_fs"]["modules_read_held"]
     and f["nvidia_fs"]["modules"] == {}
     and any("proprietary" in w for w in T.warnings(f))),
    ("no driver", NO_DRIVER, lambda f: f["gpu_driver"] == {"flavour": "none", "version": None, "taint": None}
     and f["gpus"][0]["driver"] is None),
    ("fabric manager stopped", FM_STOPPED, lambda f: f["fabric_manager"]["needed"] and not f["fabric_manager"]["running"]
     and any("802" in w for w in T.warnings(f))),
    ("missing numa", MISSING_NUMA, lambda f: f["gpus"][0]["numa"] is None and f["nics"][0]["numa"] is None
     and f["rails"][0]["numa"] is None),
    ("more gpus than nics", MULTI_GPU_ONE_NIC, lambda f: [p["nic"] for p in f["pairing"]] == ["0000:15:00.0"] * 2),
]


@pytest.mark.parametrize("case", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_host_facts(tmp_path, case):
    _name, topo, check = case
    facts = T.discover(build(tmp_path, topo))
    assert check(facts), facts


def test_empty_host_never_crashes(tmp_path):
    facts = T.discover(Sysroot(str(tmp_path)))
    assert facts["gpus"] == [] and facts["rails"] == [] and facts["pairing"] == []
    assert facts["iommu"]["mode"] == "off"
    assert facts["gpu_driver"]["flavour"] == "none"
    assert facts["fabric_manager"] == {"needed": False, "running": False, "pids": []}
    assert facts["nvidia_fs"]["loaded"] is False
    assert T.warnings(facts) == []


def test_missing_device_is_not_a_crash(tmp_path):
    sr = build(tmp_path, ROOT_COMPLEX)
    os.unlink(sr.path("/sys/bus/pci/devices/0000:42:00.0"))
    facts = T.discover(sr)
    assert [g["bdf"] for g in facts["gpus"]] == ["0000:41:00.0"]
    assert facts["nics"] == [] and facts["pairing"] == []
    with pytest.raises(pci.PciError):
        T.pci_relation(sr, "0000:41:00.0", "0000:42:00.0")


SUBSET_CASES = [
    (["all"], set(T.SUBSETS)),
    (["rails", "iommu"], {"rails", "iommu"}),
    (["all", "!pci"], set(T.SUBSETS) - {"pci"}),
    (["!nvidia_fs"], set(T.SUBSETS) - {"nvidia_fs"}),
    (None, set(T.SUBSETS)),
]


@pytest.mark.parametrize("subset,expected", SUBSET_CASES)
def test_gather_subset(tmp_path, subset, expected):
    assert T.normalize_subset(subset) == expected
    facts = T.discover(build(tmp_path, ROOT_COMPLEX), subset)
    assert ("pairing" in facts) is ("pci" in expected)
    assert ("rails" in facts) is ("rails" in expected)
    assert ("iommu" in facts) is ("iommu" in expected)


def test_gather_subset_rejects_unknown():
    with pytest.raises(ValueError, match="unknown gather_subset"):
        T.normalize_subset(["gpus"])


def test_rail_lookups(tmp_path):
    sr = build(tmp_path, "hgx-h200")
    assert T.netdev_to_ibdev(sr, "ens3np0") == ("mlx5_2", 1)
    assert T.ibdev_to_netdev(sr, "mlx5_7") == "ens8np0"
    assert T.rail_by_ibdev(sr, "mlx5_0", 1)["bdf"] == "0000:19:00.0"
    assert T.rail_by_netdev(sr, "nope0") is None
    assert T.netdev_to_ibdev(sr, "nope0") == (None, None)
    assert T.ibdev_to_netdev(sr, "mlx5_0", 2) is None


PAIR_CASES = [
    # relations as a table: rows GPUs, columns NICs
    ("diagonal", ["PIX", "SYS"], ["SYS", "PIX"], {0: 0, 1: 1}),
    ("tie broken by PCI order", ["PHB", "PHB"], ["PHB", "PHB"], {0: 0, 1: 1}),
    ("closest wins before order", ["PHB", "PIX"], ["PHB", "SYS"], {0: 1, 1: 0}),
]


@pytest.mark.parametrize("case", PAIR_CASES, ids=[c[0] for c in PAIR_CASES])
def test_pair_gpus(case):
    _name, row0, row1, expected = case
    gpus = ["0000:10:00.0", "0000:20:00.0"]
    nics = ["0000:11:00.0", "0000:21:00.0"]
    table = {gpus[0]: dict(zip(nics, row0)), gpus[1]: dict(zip(nics, row1))}
    got = T.pair_gpus(gpus, nics, lambda g, n: table[g][n])
    assert got == dict((gpus[g], nics[n]) for g, n in expected.items())


def test_nvidia_fs_facts_read_holding_a_device(tmp_path, nvfs_lifetime):
    """nvidia-fs lists the hooked storage modules only while a device is open: the facts hold one."""
    facts = T.discover(build(tmp_path, PROPRIETARY))
    assert facts["nvidia_fs"]["modules_read_held"] is True
    assert set(facts["nvidia_fs"]["modules"]) == {"rpcrdma"}
