# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.filter.fabric_table import fabric_table
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as topo
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim import topology, tree

__metaclass__ = type

CASES = [
    # topology, PIX rows, cross-NUMA warnings, FM line, PCIe links below capability
    ("hgx-h200", 8, 0, "Fabric Manager: running", 0),
    ("pcie-4gpu-crossnuma", 1, 2, "Fabric Manager: not needed", 0),
    ("pcie-4gpu-downtrained", 1, 2, "Fabric Manager: not needed", 1),
]


@pytest.mark.parametrize("name,pix,cross,fm,below", CASES, ids=[c[0] for c in CASES])
def test_table(tmp_path, name, pix, cross, fm, below):
    tree.build_tree(str(tmp_path), topology.load(name), 1)
    lines = fabric_table(topo.discover(Sysroot(str(tmp_path))))
    rows = [line for line in lines if line.startswith("GPU") and "BDF" not in line and ":" not in line.split()[0]]
    assert sum(1 for r in rows if " PIX " in r) == pix
    assert sum(1 for line in lines if line.startswith("WARNING: GPU") and "crosses" in line) == cross
    assert fm in lines
    assert "IOMMU: translated  (translated: GPUDirect Storage fails; use iommu=pt)" in lines
    assert sum(1 for line in lines if line.startswith("WARNING: PCIe link") and "of x16" in line) == below
    assert any(line.startswith("PCIe links on the GPU<->NIC paths: ") and "%d below capability" % below in line
               for line in lines)
    assert "GPUDirect RDMA: DMA-BUF" in lines


def test_empty_host(tmp_path):
    lines = fabric_table(topo.discover(Sysroot(str(tmp_path))))
    assert lines[0].startswith("no GPU/NIC pairs found")


def test_bad_input():
    with pytest.raises(AnsibleFilterError):
        fabric_table(["not", "facts"])
