# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery replayed on snapshots of real hosts (tests/unit/fixtures/hosts, laid out by hostsnap)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hostsnap

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def test_h200_microvm(tmp_path):
    # Ubuntu 24.04, kernel 6.18, one H200, one virtio NIC (eth0 below virtio2/net), numa_node -1 everywhere,
    # one NUMA node, no RDMA device: tests/device/results/h200-before shows netdevs [] and GPU numa null
    sr = Sysroot(hostsnap.materialize(hostsnap.load("h200-microvm"), str(tmp_path)))
    facts = T.discover(sr)
    [g] = facts["gpus"]
    assert (g["bdf"], g["model"], g["numa"], g["numa_source"]) == ("0000:00:06.0", "H200 SXM", 0, "single_node")
    [n] = facts["nics"]
    assert (n["bdf"], n["driver"], n["netdevs"], n["rdma"], n["numa"]) == ("0000:00:03.0", "virtio-pci", ["eth0"],
                                                                           False, 0)
    assert facts["numa_nodes"] == [{"node": 0, "cpulist": "0-15"}]
    assert facts["rails"] == [] and facts["pairing"] == [] and facts["path_bridges"] == []
    assert facts["pairing_reason"].startswith("no RDMA NIC to pair with: no RDMA device in /sys/class/infiniband")
    assert "0000:00:03.0 (virtio-pci, eth0)" in facts["pairing_reason"]
    assert facts["unpaired"] == {"gpus": [{"gpu": "0000:00:06.0", "gpu_index": 0,
                                           "reason": facts["pairing_reason"]}], "rails": []}
    noted = dict((x["device"], x["note"]) for x in facts["discovery_notes"])
    assert "one NUMA node" in noted["0000:00:06.0"] and "one NUMA node" in noted["0000:00:03.0"]
    assert facts["iommu"]["mode"] == "off" and facts["gpu_driver"]["flavour"] == "open"
    assert T.warnings(facts) == []
