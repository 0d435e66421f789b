# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery on layouts of real hosts: SR-IOV VFs, virtio-net, Soft-RoCE/siw, RoCE LAG, dual-port NICs,
NIC cards with their own switch, numa_node -1, GPUs without NICs and NICs without GPUs, devices removed
while discovery runs. Each layout is a sysfs tree written by tests/unit/sysfs_host.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from sysfs_host import bridge, build, down, gpu, host, nic, rbus, rp, up, virtio_nic

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def by(items, key, value):
    found = [i for i in items if i[key] == value]
    assert len(found) == 1, (key, value, items)
    return found[0]


def notes_about(facts, device):
    return [n["note"] for n in facts["discovery_notes"] if n["device"] == device]


# -- SR-IOV --------------------------------------------------------------------------------------

# GPU0 and GPU1 share a switch with PF0 (which has two VFs); PF1 only meets them at the root complex.
# Counting VFs as NICs gave GPU1 a VF of PF0 (PIX) and dropped the real rail mlx5_1.
SRIOV = host(rbus("0000:10", 0,
                  rp("0000:10:01.0", up("0000:11:00.0",
                                        down("0000:12:00.0", gpu("0000:13:00.0")),
                                        down("0000:12:01.0", gpu("0000:14:00.0")),
                                        down("0000:12:02.0", nic("0000:15:00.0", "ens1np0", "mlx5_0", vfs=[
                                            {"bdf": "0000:15:00.2", "netdev": "ens1v0", "ibdev": "mlx5_2"},
                                            {"bdf": "0000:15:00.3", "netdev": "ens1v1", "ibdev": "mlx5_3"}])))),
                  rp("0000:10:02.0", nic("0000:16:00.0", "ens2np0", "mlx5_1"))))


def test_sriov_vfs_never_paired(tmp_path):
    facts = T.discover(build(str(tmp_path), SRIOV))
    assert [(p["gpu"], p["netdev"], p["ibdev"], p["relation"]) for p in facts["pairing"]] == [
        ("0000:13:00.0", "ens1np0", "mlx5_0", "PIX"), ("0000:14:00.0", "ens2np0", "mlx5_1", "PHB")]
    pf = by(facts["nics"], "bdf", "0000:15:00.0")
    assert pf["vfs"] == ["0000:15:00.2", "0000:15:00.3"] and pf["physfn"] is None and pf["rdma"] is True
    for vf, ib in (("0000:15:00.2", "mlx5_2"), ("0000:15:00.3", "mlx5_3")):
        entry = by(facts["nics"], "bdf", vf)
        assert entry["physfn"] == "0000:15:00.0" and entry["rdma"] is False and entry["ibdevs"] == [ib]
        assert vf not in facts["matrix"]["0000:13:00.0"]
        rail = by(facts["rails"], "ibdev", ib)
        assert rail["kind"] == "vf" and rail["physfn"] == "0000:15:00.0" and rail["pairable"] is False
        assert "virtual function" in rail["reason"]
        assert by(facts["unpaired"]["rails"], "ibdev", ib)["kind"] == "vf"
    assert facts["pairing_reason"] is None


def test_scalable_function_is_not_a_pf_rail(tmp_path):
    # mlx5 SF: an auxiliary device below the PF with its own netdev and RDMA device (device link to the SF)
    model = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0",
        down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", gpu("0000:14:00.0")),
        down("0000:12:02.0", nic("0000:15:00.0", "ens1np0", "mlx5_0", sfs=[
            {"name": "mlx5_core.sf.2", "netdev": "enp21s0f0npf0sf2", "ibdev": "mlx5_2"}]))))))
    facts = T.discover(build(str(tmp_path), model))
    assert [(p["ibdev"], p["shared"]) for p in facts["pairing"]] == [("mlx5_0", False), ("mlx5_0", True)]
    sf = by(facts["rails"], "ibdev", "mlx5_2")
    assert sf["kind"] == "subfunction" and sf["pairable"] is False and sf["bdf"] == "0000:15:00.0"
    assert sf["netdev"] == "enp21s0f0npf0sf2" and "mlx5_core.sf.2" in sf["reason"]
    assert by(facts["rails"], "ibdev", "mlx5_0")["kind"] == "pf"
    n = by(facts["nics"], "bdf", "0000:15:00.0")
    assert n["rdma"] is True and n["ibdevs"] == ["mlx5_0", "mlx5_2"]


def test_sriov_more_gpus_than_pfs_share_a_pf_not_a_vf(tmp_path):
    model = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0",
        down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", gpu("0000:14:00.0")),
        down("0000:12:02.0", nic("0000:15:00.0", "ens1np0", "mlx5_0",
                                 vfs=[{"bdf": "0000:15:00.2", "netdev": "ens1v0", "ibdev": "mlx5_1"}]))))))
    facts = T.discover(build(str(tmp_path), model))
    assert [(p["ibdev"], p["shared"]) for p in facts["pairing"]] == [("mlx5_0", False), ("mlx5_0", True)]
    assert "more GPUs (2) than RDMA rails (1)" in facts["pairing_reason"]


# -- virtio-net, software RDMA ---------------------------------------------------------------------

MICROVM = {"nodes": {0: "0-15"}, "buses": [rbus(
    "0000:00", -1, {"bdf": "0000:00:00.0", "kind": "other", "class": 0x060000},
    virtio_nic("0000:00:03.0", "eth0"), gpu("0000:00:06.0"))]}


def test_virtio_netdev_and_single_node_numa(tmp_path):
    facts = T.discover(build(str(tmp_path), MICROVM))
    n = by(facts["nics"], "bdf", "0000:00:03.0")
    assert n["netdevs"] == ["eth0"] and n["rdma"] is False and n["numa"] == 0 and n["numa_source"] == "single_node"
    g = facts["gpus"][0]
    assert g["numa"] == 0 and g["numa_source"] == "single_node"
    assert any("one NUMA node" in t for t in notes_about(facts, "0000:00:06.0"))
    assert facts["rails"] == [] and facts["pairing"] == [] and facts["matrix"] == {"0000:00:06.0": {}}
    assert "no RDMA device" in facts["pairing_reason"] and "0000:00:03.0 (virtio-pci, eth0)" in facts["pairing_reason"]
    assert facts["unpaired"]["gpus"] == [{"gpu": "0000:00:06.0", "gpu_index": 0, "reason": facts["pairing_reason"]}]


SOFT_CASES = [
    # (id, model changes, rail expectations)
    ("rxe over virtio, one node", dict(MICROVM, soft_rdma=[{"name": "rxe0", "netdev": "eth0", "ipv4": "10.0.0.5"}]),
     {"ibdev": "rxe0", "kind": "software", "bdf": None, "netdev": "eth0", "numa": 0, "numa_source": "netdev_lower",
      "pci_functions": ["0000:00:03.0"], "pairable": False, "ipv4": "10.0.0.5", "driver": None}),
    ("rxe over virtio, two nodes", dict(MICROVM, nodes={0: "0-7", 1: "8-15"},
                                        soft_rdma=[{"name": "rxe0", "netdev": "eth0"}]),
     {"ibdev": "rxe0", "kind": "software", "netdev": "eth0", "numa": None, "numa_source": "unknown"}),
    ("siw found by node guid", dict(MICROVM, soft_rdma=[{"name": "siw0", "type": "siw", "netdev": "eth0"}]),
     {"ibdev": "siw0", "kind": "software", "netdev": "eth0", "numa": 0, "pci_functions": ["0000:00:03.0"]}),
    ("rxe over a netdev that is gone", dict(MICROVM, soft_rdma=[{"name": "rxe1", "netdev": "ghost0"}]),
     {"ibdev": "rxe1", "kind": "software", "netdev": "ghost0", "numa": None, "pci_functions": []}),
]


@pytest.mark.parametrize("case", SOFT_CASES, ids=[c[0] for c in SOFT_CASES])
def test_software_rdma(tmp_path, case):
    _name, model, want = case
    facts = T.discover(build(str(tmp_path), model))
    rail = by(facts["rails"], "ibdev", want["ibdev"])
    for k, v in want.items():
        assert rail[k] == v, (k, rail)
    assert facts["pairing"] == [] and "software RDMA" in facts["pairing_reason"]
    assert "no GPUDirect" in rail["reason"]
    if rail["pci_functions"]:
        assert by(facts["nics"], "bdf", "0000:00:03.0")["soft_ibdevs"] == [want["ibdev"]]
    if rail["numa"] is None:
        assert notes_about(facts, want["ibdev"])


def test_siw_next_to_a_hardware_rail_is_not_paired(tmp_path):
    model = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0", down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", nic("0000:14:00.0", "ens1np0", "mlx5_0"))))),
        soft_rdma=[{"name": "siw0", "type": "siw", "netdev": "ens1np0"}])
    facts = T.discover(build(str(tmp_path), model))
    assert [p["ibdev"] for p in facts["pairing"]] == ["mlx5_0"]
    siw = by(facts["rails"], "ibdev", "siw0")
    assert siw["netdev"] == "ens1np0" and siw["numa"] == 0 and siw["pci_functions"] == ["0000:14:00.0"]
    n = by(facts["nics"], "bdf", "0000:14:00.0")
    assert n["ibdevs"] == ["mlx5_0"] and n["soft_ibdevs"] == ["siw0"]


# -- RoCE LAG --------------------------------------------------------------------------------------

def lag_model(**bond):
    # Socket Direct style: the two PFs of the bond hang below different switches; the GPU shares PF1's
    b = {"name": "bond0", "slaves": ["ens1f0np0", "ens1f1np1"], "ibdev": "mlx5_bond_0", "ipv4": "10.1.0.1"}
    b.update(bond)
    return host(rbus("0000:10", 0,
                     rp("0000:10:01.0", up("0000:11:00.0", down("0000:12:00.0", nic("0000:13:00.0", "ens1f0np0")))),
                     rp("0000:10:02.0", up("0000:21:00.0",
                                           down("0000:22:00.0", gpu("0000:23:00.0")),
                                           down("0000:22:01.0", nic("0000:24:00.0", "ens1f1np1"))))),
                bonds=[b])


@pytest.mark.parametrize("bond", [{}, {"no_lower_links": True}], ids=["lower links", "bonding/slaves only"])
def test_roce_lag_bond_pairs_through_the_nearest_pf(tmp_path, bond):
    facts = T.discover(build(str(tmp_path), lag_model(**bond)))
    rail = by(facts["rails"], "ibdev", "mlx5_bond_0")
    assert rail["kind"] == "bond" and rail["bond"] == "bond0" and rail["netdev"] == "bond0"
    assert rail["bdf"] == "0000:13:00.0" and rail["pci_functions"] == ["0000:13:00.0", "0000:24:00.0"]
    assert rail["ipv4"] == "10.1.0.1" and rail["pairable"] is True
    [p] = facts["pairing"]
    assert p["nic"] == "0000:24:00.0" and p["relation"] == "PIX" and p["bond"] == "bond0"
    assert p["netdev"] == "bond0" and p["nic_functions"] == ["0000:13:00.0", "0000:24:00.0"]
    assert p["phys_netdevs"] == rail["phys_netdevs"] == ["ens1f0np0", "ens1f1np1"]
    assert p["bridges"] == ["0000:22:00.0", "0000:21:00.0", "0000:22:01.0"]
    for f in ("0000:13:00.0", "0000:24:00.0"):
        n = by(facts["nics"], "bdf", f)
        assert n["rdma"] is True and n["bond"] == "bond0" and n["ibdevs"] == ["mlx5_bond_0"]
    assert facts["matrix"]["0000:23:00.0"] == {"0000:13:00.0": "PHB", "0000:24:00.0": "PIX"}


# -- dual port ---------------------------------------------------------------------------------------

def dual_port_one_function(**kw):
    return host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0",
        down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", gpu("0000:14:00.0")),
        down("0000:12:02.0", dict(nic("0000:15:00.0", ibdev="mlx4_0", driver="mlx4_core", **kw),
                                  netdevs=[{"name": "eth2", "dev_port": 0},
                                           {"name": "eth3", "dev_port": 1, "mtu": 9000}]))))))


@pytest.mark.parametrize("kw", [{}, {"no_gid_ndevs": True}], ids=["gid table", "dev_port"])
def test_dual_port_one_function_two_rails(tmp_path, kw):
    facts = T.discover(build(str(tmp_path), dual_port_one_function(**kw)))
    assert [(r["ibdev"], r["port"], r["netdev"], r["dev_port"], r["phys_netdevs"]) for r in facts["rails"]] == [
        ("mlx4_0", 1, "eth2", 0, ["eth2"]), ("mlx4_0", 2, "eth3", 1, ["eth3"])]
    # issue 21 item 21: each rail's live MTU is in the facts
    assert [r["mtu"] for r in facts["rails"]] == [1500, 9000]
    assert [(p["gpu"], p["port"], p["netdev"], p["shared"]) for p in facts["pairing"]] == [
        ("0000:13:00.0", 1, "eth2", False), ("0000:14:00.0", 2, "eth3", False)]
    assert by(facts["nics"], "bdf", "0000:15:00.0")["netdevs"] == ["eth2", "eth3"]


def test_dual_port_two_functions_of_one_card(tmp_path):
    model = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0",
        down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", gpu("0000:14:00.0")),
        down("0000:12:02.0", nic("0000:15:00.0", "ens1f0np0", "mlx5_0"), nic("0000:15:00.1", "ens1f1np1", "mlx5_1"))))))
    facts = T.discover(build(str(tmp_path), model))
    assert [(p["gpu"], p["nic"], p["netdev"], p["relation"]) for p in facts["pairing"]] == [
        ("0000:13:00.0", "0000:15:00.0", "ens1f0np0", "PIX"), ("0000:14:00.0", "0000:15:00.1", "ens1f1np1", "PIX")]
    assert [(r["ibdev"], r["port"], r["dev_port"]) for r in facts["rails"]] == [("mlx5_0", 1, 0), ("mlx5_1", 1, 0)]


@pytest.mark.parametrize("nics,ports", [
    ([dict(nic("0000:15:00.0", ibdev="mlx4_0", driver="mlx4_core"),
           netdevs=[{"name": "eth2", "dev_port": 0}, {"name": "eth3", "dev_port": 1}])],
     [("mlx4_0", 1, "eth2", "0000:15:00.0"), ("mlx4_0", 2, "eth3", "0000:15:00.0")]),
    ([nic("0000:15:00.0", "ens1f0np0", "mlx5_0"), nic("0000:15:00.1", "ens1f1np1", "mlx5_1")],
     [("mlx5_0", 1, "ens1f0np0", "0000:15:00.0"), ("mlx5_1", 1, "ens1f1np1", "0000:15:00.1")]),
], ids=["one function", "two functions"])
def test_a_gpu_owns_both_ports_of_its_dual_port_nic(tmp_path, nics, ports):
    """One GPU, one dual-port NIC: NCCL uses both ports, so the second is the GPU's too, not an unpaired rail
    (issue 21 item 13); a rail on another card stays unpaired."""
    model = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0",
        down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:02.0", *nics))),
        rp("0000:10:02.0", nic("0000:20:00.0", "ens2np0", "mlx5_9"))))
    facts = T.discover(build(str(tmp_path), model))
    assert len(facts["pairing"]) == 1
    assert [(p["ibdev"], p["port"], p["netdev"], p["nic"]) for p in facts["pairing"][0]["ports"]] == ports
    assert [(r["ibdev"], r["reason"]) for r in facts["unpaired"]["rails"]] == [
        ("mlx5_9", "every GPU is paired with a rail at least as close")]


# -- NIC card with its own switch ------------------------------------------------------------------

CX = {"vendor": 0x15B3, "device": 0x197B}


def card_model(config_size=4096):
    # host switch 21 (Broadcom) holds the GPU and a ConnectX card whose own switch (24/25, Mellanox) holds the NIC
    return host(rbus("0000:20", 0, rp(
        "0000:20:01.0", up("0000:21:00.0", config_size=config_size, children=[
            down("0000:22:00.0", gpu("0000:23:00.0"), config_size=config_size),
            down("0000:22:01.0", up("0000:24:00.0", config_size=config_size,
                                    children=[down("0000:25:00.0", nic("0000:26:00.0", "ens1np0", "mlx5_0"),
                                                   config_size=config_size, **CX)], **CX),
                 config_size=config_size)]))))


@pytest.mark.parametrize("size", [4096, 64], ids=["config readable", "roles from the tree"])
def test_nic_card_switch_is_not_the_gpus_switch(tmp_path, size):
    facts = T.discover(build(str(tmp_path), card_model(size)))
    [p] = facts["pairing"]
    assert p["relation"] == "PXB" and p["switch"] == "0000:21:00.0"
    assert p["bridges"] == ["0000:22:00.0", "0000:21:00.0", "0000:22:01.0", "0000:24:00.0", "0000:25:00.0"]
    n = by(facts["nics"], "bdf", "0000:26:00.0")
    assert n["card_bridges"] == ["0000:24:00.0", "0000:25:00.0"]
    cards = dict((b["bdf"], b["nic_card"]) for b in facts["path_bridges"])
    assert cards == {"0000:21:00.0": None, "0000:22:00.0": None, "0000:22:01.0": None,
                     "0000:24:00.0": "0000:26:00.0", "0000:25:00.0": "0000:26:00.0"}
    roles = dict((b["bdf"], b["role"]) for b in facts["path_bridges"])
    assert roles == {"0000:21:00.0": "upstream", "0000:22:00.0": "downstream", "0000:22:01.0": "downstream",
                     "0000:24:00.0": "upstream", "0000:25:00.0": "downstream"}


def test_gpu_behind_the_nic_cards_switch_is_pix(tmp_path):
    # converged card (GPU behind the ConnectX switch): that switch is the GPU's switch
    model = host(rbus("0000:20", 0, rp("0000:20:01.0", up(
        "0000:21:00.0", down("0000:22:00.0", gpu("0000:23:00.0"), **CX),
        down("0000:22:01.0", nic("0000:24:00.0", "ens1np0", "mlx5_0"), **CX), **CX))))
    facts = T.discover(build(str(tmp_path), model))
    [p] = facts["pairing"]
    assert p["relation"] == "PIX" and p["switch"] == "0000:21:00.0"
    assert by(facts["nics"], "bdf", "0000:24:00.0")["card_bridges"] == ["0000:21:00.0", "0000:22:01.0"]


# -- NUMA ------------------------------------------------------------------------------------------

NUMA_CASES = [
    # (id, nodes, gpu numa, nic numa, same root bus, gpu numa, nic numa, relation, cross_numa)
    ("one node, -1", {0: "0-7"}, -1, -1, False, 0, 0, "NODE", False),
    ("one node, no file", {0: "0-7"}, None, None, False, 0, 0, "NODE", False),
    ("two nodes, -1 is unknown", {0: "0-7", 1: "8-15"}, -1, -1, False, None, None, "SYS", False),
    ("two nodes, one known", {0: "0-7", 1: "8-15"}, 1, -1, False, 1, None, "SYS", False),
    ("two nodes, known and different", {0: "0-7", 1: "8-15"}, 0, 1, False, 0, 1, "SYS", True),
    ("two nodes, known and equal", {0: "0-7", 1: "8-15"}, 1, 1, False, 1, 1, "NODE", False),
    ("two nodes, -1 below one root complex", {0: "0-7", 1: "8-15"}, -1, -1, True, None, None, "PHB", False),
]


@pytest.mark.parametrize("case", NUMA_CASES, ids=[c[0] for c in NUMA_CASES])
def test_numa(tmp_path, case):
    _name, nodes, gnuma, nnuma, same, want_g, want_n, rel, cross = case
    g = rp("0000:10:01.0", gpu("0000:11:00.0", numa=gnuma))
    n = rp("0000:10:02.0" if same else "0000:80:01.0", nic("0000:81:00.0", "ens1np0", "mlx5_0", numa=nnuma))
    buses = [rbus("0000:10", 0, g, n)] if same else [rbus("0000:10", 0, g), rbus("0000:80", 0, n)]
    facts = T.discover(build(str(tmp_path), {"nodes": nodes, "buses": buses}))
    [p] = facts["pairing"]
    assert (p["gpu_numa"], p["nic_numa"], p["relation"], p["cross_numa"]) == (want_g, want_n, rel, cross)
    assert facts["gpus"][0]["numa"] == want_g and facts["rails"][0]["numa"] == want_n
    unknown = [w for w in T.warnings(facts) if "unknown" in w]
    assert bool(unknown) is (rel == "SYS" and not cross)
    if want_g is None:
        assert any("unknown" in t for t in notes_about(facts, "0000:11:00.0"))


# -- GPUs without NICs, NICs without GPUs ------------------------------------------------------------

LONELY_CASES = [
    ("gpu without nic", host(rbus("0000:10", 0, rp("0000:10:01.0", gpu("0000:11:00.0")))),
     [], ["0000:11:00.0"], "no RDMA device"),
    ("gpu with an ethernet-only nic", host(rbus("0000:10", 0, rp("0000:10:01.0", gpu("0000:11:00.0")),
                                                rp("0000:10:02.0", nic("0000:12:00.0", "eno1")))),
     [], ["0000:11:00.0"], "0000:12:00.0 (mlx5_core, eno1)"),
    ("nic without gpu", host(rbus("0000:10", 0, rp("0000:10:01.0", nic("0000:12:00.0", "ens1np0", "mlx5_0")))),
     [("mlx5_0", "no GPU on this host")], [], "no GPU on this host"),
    ("more rails than gpus", host(rbus("0000:10", 0, rp("0000:10:01.0", up(
        "0000:11:00.0", down("0000:12:00.0", gpu("0000:13:00.0")),
        down("0000:12:01.0", nic("0000:14:00.0", "ens1np0", "mlx5_0")))),
        rp("0000:10:02.0", nic("0000:15:00.0", "ens2np0", "mlx5_1")))),
     [("mlx5_1", "every GPU is paired with a rail at least as close")], [], None),
]


@pytest.mark.parametrize("case", LONELY_CASES, ids=[c[0] for c in LONELY_CASES])
def test_unpaired_say_why(tmp_path, case):
    _name, model, rails, gpus, reason = case
    facts = T.discover(build(str(tmp_path), model))
    assert [(r["ibdev"], r["reason"]) for r in facts["unpaired"]["rails"]] == rails
    assert [g["gpu"] for g in facts["unpaired"]["gpus"]] == gpus
    if reason is None:
        assert facts["pairing_reason"] is None
    else:
        assert reason in facts["pairing_reason"]
        for g in facts["unpaired"]["gpus"]:
            assert g["reason"] == facts["pairing_reason"]


# -- devices removed while discovery runs ------------------------------------------------------------

BASE = host(rbus("0000:10", 0, rp("0000:10:01.0", up(
    "0000:11:00.0", down("0000:12:00.0", gpu("0000:13:00.0")),
    down("0000:12:01.0", nic("0000:14:00.0", "ens1np0", "mlx5_0")),
    down("0000:12:02.0", gpu("0000:15:00.0")),
    down("0000:12:03.0", nic("0000:16:00.0", "ens2np0", "mlx5_1"))))))
DEV = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0"


def _rm_dir(sr, path):
    shutil.rmtree(sr.path(path))


def _rm_file(sr, path):
    os.unlink(sr.path(path))


VANISH_CASES = [
    # (id, damage, devices gone from gpus/nics, note subject)
    ("gpu dir gone, link left", lambda sr: _rm_dir(sr, DEV + "/0000:12:02.0/0000:15:00.0"), ["0000:15:00.0"],
     "0000:15:00.0"),
    ("nic vendor unreadable", lambda sr: _rm_file(sr, DEV + "/0000:12:03.0/0000:16:00.0/vendor"), ["0000:16:00.0"],
     "0000:16:00.0"),
    ("nic dir gone with its rdma device", lambda sr: _rm_dir(sr, DEV + "/0000:12:03.0/0000:16:00.0"),
     ["0000:16:00.0"], "mlx5_1"),
    ("netdev gone", lambda sr: _rm_dir(sr, DEV + "/0000:12:03.0/0000:16:00.0/net"), [], None),
    ("port attributes gone", lambda sr: _rm_dir(sr, DEV + "/0000:12:03.0/0000:16:00.0/infiniband/mlx5_1/ports"),
     [], None),
]


@pytest.mark.parametrize("case", VANISH_CASES, ids=[c[0] for c in VANISH_CASES])
def test_removed_devices_are_skipped_with_a_note(tmp_path, case):
    _name, damage, gone, subject = case
    sr = build(str(tmp_path), BASE)
    damage(sr)
    facts = T.discover(sr)
    present = set(g["bdf"] for g in facts["gpus"]) | set(n["bdf"] for n in facts["nics"])
    assert not present & set(gone)
    if subject:
        assert notes_about(facts, subject)
    assert [p["ibdev"] for p in facts["pairing"]][:1] == ["mlx5_0"]
    T.warnings(facts)


class RacingSysroot(Sysroot):
    """Removes a device's directory right after the PCI device list was read (hot unplug mid-walk)."""

    def __init__(self, root, victims):
        Sysroot.__init__(self, root)
        self.victims = list(victims)

    def listdir(self, p):
        out = Sysroot.listdir(self, p)
        if p in ("/sys/bus/pci/devices", "/sys/class/infiniband", "/sys/class/net"):
            while self.victims:
                shutil.rmtree(self.path(self.victims.pop()))
        return out


def test_device_removed_mid_walk(tmp_path):
    build(str(tmp_path), BASE)
    sr = RacingSysroot(str(tmp_path), [DEV + "/0000:12:03.0"])
    facts = T.discover(sr)
    assert [n["bdf"] for n in facts["nics"]] == ["0000:14:00.0"]
    assert notes_about(facts, "0000:16:00.0") and notes_about(facts, "0000:12:03.0")
    assert [(p["gpu"], p["ibdev"], p["shared"]) for p in facts["pairing"]] == [
        ("0000:13:00.0", "mlx5_0", False), ("0000:15:00.0", "mlx5_0", True)]


def test_two_level_bridge_without_acs(tmp_path):
    model = host(rbus("0000:30", 0, rp("0000:30:01.0", up(
        "0000:31:00.0", down("0000:32:00.0", bridge("0000:33:00.0", gpu("0000:34:00.0"), nic("0000:34:01.0",
                                                                                             "ens1np0",
                                                                                             "mlx5_0")))))))
    facts = T.discover(build(str(tmp_path), model))
    [p] = facts["pairing"]
    assert p["relation"] == "PIX" and p["bridges"] == ["0000:33:00.0"] and p["switch"] == "0000:33:00.0"
    assert facts["path_bridges"][0]["acs"]["present"] is False
