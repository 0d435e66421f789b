# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery on the simulator's real-host layouts: hgx-h200-sriov (VFs on every rail) and h200-vm (virtio,
numa_node -1, Soft-RoCE)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


# a VM is too small for the shipped-topology contract (tests/unit/lab/test_tree.py): it lives with the fixtures
H200_VM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "topologies", "h200-vm.yml")


def discover(tmp_path, name):
    root = str(tmp_path / "root")
    build_tree(root, name, 3)
    return Sysroot(root), T.discover(Sysroot(root))


def test_hgx_sriov_pairs_the_pfs_only(tmp_path):
    sr, facts = discover(tmp_path, "hgx-h200-sriov")
    assert [p["netdev"] for p in facts["pairing"]] == ["ens%dnp0" % i for i in range(1, 9)]
    assert [p["ibdev"] for p in facts["pairing"]] == ["mlx5_%d" % i for i in range(8)]
    assert all(p["relation"] == "PIX" and not p["shared"] for p in facts["pairing"])
    pfs = [n for n in facts["nics"] if n["rdma"]]
    vfs = [n for n in facts["nics"] if n["physfn"]]
    assert len(pfs) == 8 and len(vfs) == 16
    for pf in pfs:
        assert len(pf["vfs"]) == 2 and all(by["physfn"] == pf["bdf"] for by in vfs if by["bdf"] in pf["vfs"])
    vf_rails = [r for r in facts["rails"] if r["kind"] == "vf"]
    assert len(vf_rails) == 16 and not any(r["pairable"] for r in vf_rails)
    assert sorted(r["ibdev"] for r in vf_rails) == sorted("mlx5_%d" % i for i in range(8, 24))
    for g, row in facts["matrix"].items():
        assert sorted(row) == sorted(n["bdf"] for n in pfs)
    assert len(facts["unpaired"]["rails"]) == 16


def test_hgx_sriov_shows_the_field_bug(tmp_path):
    # pairing over every function with an RDMA device (what discovery did before VFs were modelled):
    # GPU1 gets PF0's first VF, which sits below the same switch port as PF0, and the rail ens2np0 is lost
    sr, facts = discover(tmp_path, "hgx-h200-sriov")
    scan = T.PciScan(sr)
    with_ib = sorted(set(r["bdf"] for r in facts["rails"]))
    gpus = [g["bdf"] for g in facts["gpus"]]
    naive = T.pair_gpus(gpus, with_ib, lambda g, n: T.pci_relation(sr, g, n, scan))
    assert naive[gpus[1]] == "0000:19:00.2" and scan.get("0000:19:00.2").physfn == "0000:19:00.0"
    assert by_gpu(facts, gpus[1]) == "0000:1b:00.0"


def by_gpu(facts, gpu):
    return [p["nic"] for p in facts["pairing"] if p["gpu"] == gpu][0]


def test_h200_vm(tmp_path):
    _sr, facts = discover(tmp_path, H200_VM)
    [g] = facts["gpus"]
    assert g["numa"] == 0 and g["numa_source"] == "single_node"
    [n] = facts["nics"]
    assert n["netdevs"] == ["eth0"] and n["rdma"] is False and n["soft_ibdevs"] == ["rxe0"]
    [r] = facts["rails"]
    assert (r["ibdev"], r["kind"], r["bdf"], r["netdev"], r["numa"], r["numa_source"], r["pci_functions"],
            r["ipv4"]) == ("rxe0", "software", None, "eth0", 0, "netdev_lower", ["0000:00:03.0"], "172.16.0.2")
    assert facts["pairing"] == [] and "software RDMA" in facts["pairing_reason"]
    assert facts["iommu"]["mode"] == "off"
