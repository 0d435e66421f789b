# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_check prints each warning once: discovery's warnings come back both as the check's ``warnings`` and as
the facts body's own (``gpufabric_facts: ...``); the console shows them once (issue 23, item 7). The whole console
of a drift.yml run is checked in tests/integration/test_fabric_sim.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.modules import fabric_check

IOMMU = "IOMMU is in translated mode: GPUDirect Storage fails with EIO (add iommu=pt to the kernel command line)"
SYS = "GPU 0000:3b:00.0 is paired with NIC 0000:99:00.0 (ens3np0) across NUMA nodes (SYS)"

CASES = [
    ({"warnings": [IOMMU, SYS], "module_warnings": ["gpufabric_facts: " + IOMMU, "gpufabric_facts: " + SYS]},
     [IOMMU, SYS]),
    # a concern body's own warning stays, prefixed with its module; so does one that merely reads the same
    ({"warnings": [IOMMU], "module_warnings": ["dcb_qos: rail ens1np0 has no DCB support", "pcie_acs: " + IOMMU]},
     [IOMMU, "dcb_qos: rail ens1np0 has no DCB support", "pcie_acs: " + IOMMU]),
    # the fallback discovery (when the play's failed) warns what it found: not in warnings, so shown
    ({"warnings": [], "module_warnings": ["gpufabric_facts: " + SYS, "gpufabric_facts: " + SYS]},
     ["gpufabric_facts: " + SYS]),
    ({"warnings": [], "module_warnings": []}, []),
]


@pytest.mark.parametrize("res,shown", CASES)
def test_each_warning_once(res, shown):
    assert fabric_check.shown_warnings(res) == shown
