# -*- coding: utf-8 -*-
"""gpufabric.node.desired_conflicts over the roles' variables (as the integrator calls it at the start of a play)."""
from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.filter import desired as desired_filter
from ansible_collections.gpufabric.node.plugins.filter.desired import FilterModule, desired_conflicts

__metaclass__ = type

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def role_defaults():
    """roce_qos and nccl defaults, templated the way Ansible does (numbers in templates become strings)."""
    with open(os.path.join(ROOT, "roles", "roce_qos", "defaults", "main.yml")) as f:
        roce = yaml.safe_load(f)
    with open(os.path.join(ROOT, "roles", "nccl", "defaults", "main.yml")) as f:
        nccl = yaml.safe_load(f)
    # not set: the role derives the one lossless entry (the dcb spec's dscp_map), as the play passes it
    assert roce["roce_qos_dscp_map"] is None
    ecn = 2 if roce["roce_qos_ecn"] else 0
    return {"roce_qos_trust": roce["roce_qos_trust"],
            "roce_qos_dscp_map": [{"dscp": str(roce["roce_qos_dscp"]), "priority": str(roce["roce_qos_priority"])}],
            "roce_qos_pfc_priorities": roce["roce_qos_pfc_priorities"], "roce_qos_dscp": roce["roce_qos_dscp"],
            "roce_qos_priority": roce["roce_qos_priority"], "roce_qos_ecn": roce["roce_qos_ecn"],
            "roce_qos_tos": str(roce["roce_qos_dscp"] * 4 + ecn), "nccl_ib_tc": nccl["nccl_ib_tc"],
            "nccl_ib_fifo_tc": nccl["nccl_ib_fifo_tc"]}


def test_registered():
    assert FilterModule().filters() == {"desired_conflicts": desired_conflicts}


def test_role_defaults_agree():
    assert desired_conflicts(role_defaults()) == []


@pytest.mark.parametrize("changes,needles", [
    ({"roce_qos_pfc_priorities": [4]},
     ["roce_qos_pfc_priorities (dcb_qos pfc_priorities) and roce_qos_dscp_map (dcb_qos dscp_map) contradict"]),
    ({"roce_qos_dscp_map": [{"dscp": 24, "priority": 3}]},
     ["roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos) and roce_qos_dscp_map (dcb_qos dscp_map) contradict"]),
    ({"nccl_ib_tc": 104}, ["nccl_ib_tc (nccl_config tc) and roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos)",
                           "ECN bits differ"]),
    ({"roce_qos_trust": "pcp"}, ["roce_qos_trust (dcb_qos trust) and roce_qos_dscp_map (dcb_qos dscp_map)"]),
    ({"roce_qos_ecn": False, "roce_qos_tos": "104"}, ["nccl_ib_tc (nccl_config tc) and roce_qos_tos"]),
    ({"roce_qos_tos": "x"}, ["roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos): 'x' is not an integer"]),
])
def test_conflicts_name_both_settings(changes, needles):
    got = desired_conflicts(dict(role_defaults(), **changes))
    assert got
    for needle in needles:
        assert any(needle in msg for msg in got), got


def test_subset_of_variables():
    assert desired_conflicts({"roce_qos_tos": 106, "nccl_ib_tc": 106}) == []
    assert len(desired_conflicts({"roce_qos_tos": 106, "nccl_ib_tc": 98})) == 1


@pytest.mark.parametrize("value,needle", [
    ({"roce_qos_toss": 106}, "unknown role variable(s) roce_qos_toss"),
    (["roce_qos_tos"], "expected a dict of role variables, not list"),
])
def test_bad_input(value, needle):
    with pytest.raises(AnsibleFilterError) as e:
        desired_conflicts(value)
    assert needle in str(e.value)


def test_doc_file_matches():
    with open(os.path.join(os.path.dirname(desired_filter.__file__), "desired_conflicts.yml")) as f:
        doc = yaml.safe_load(f)
    assert doc["DOCUMENTATION"]["name"] == "desired_conflicts"
    for var in ("roce_qos_trust", "roce_qos_dscp_map", "roce_qos_pfc_priorities", "roce_qos_dscp", "roce_qos_priority",
                "roce_qos_ecn", "roce_qos_tos", "nccl_ib_tc", "nccl_ib_fifo_tc"):
        assert var in " ".join(doc["DOCUMENTATION"]["options"]["_input"]["description"])
