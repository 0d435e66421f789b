# -*- coding: utf-8 -*-
"""gpufabric.node.role_conflicts and the concern_vars lookup: the contradiction check of concerns.yml, with what the
roles derive from their variables derived by the concerns' specs."""
from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError, AnsibleLookupError

from ansible_collections.gpufabric.node.plugins.filter.desired import desired_conflicts
from ansible_collections.gpufabric.node.plugins.filter.role_conflicts import FilterModule, role_conflicts
from ansible_collections.gpufabric.node.plugins.lookup.concern_vars import LookupModule
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired

__metaclass__ = type

AS_GIVEN = {"roce_qos_trust": "dscp", "roce_qos_dscp_map": None, "roce_qos_pfc_priorities": [3], "roce_qos_dscp": 26,
            "roce_qos_priority": 3, "roce_qos_ecn": True, "roce_qos_tos": 106, "nccl_ib_tc": 106,
            "nccl_ib_fifo_tc": 192}


def test_registered():
    assert FilterModule().filters() == {"role_conflicts": role_conflicts}


def test_the_lookup_names_the_specs_keys():
    assert LookupModule().run(["conflicts"]) == list(node_desired.CONFLICT_KEYS)
    assert set(AS_GIVEN) == set(node_desired.CONFLICT_KEYS)
    with pytest.raises(AnsibleLookupError, match="unknown list 'everything'"):
        LookupModule().run(["everything"])


@pytest.mark.parametrize("changes,derived_map", [
    ({}, [{"dscp": 26, "priority": 3}]),
    ({"roce_qos_dscp": 24}, [{"dscp": 24, "priority": 3}]),                 # the map follows the DSCP
    ({"roce_qos_priority": 4, "roce_qos_pfc_priorities": [4]}, [{"dscp": 26, "priority": 4}]),
    ({"roce_qos_trust": "pcp"}, []),                                      # PCP trust: no entry
    ({"roce_qos_dscp_map": [{"dscp": 10, "priority": 3}]}, [{"dscp": 10, "priority": 3}]),  # a map set is the map
])
def test_same_messages_as_the_rules_over_what_the_roles_derive(changes, derived_map):
    given = dict(AS_GIVEN, **changes)
    derived = dict(given, roce_qos_dscp_map=derived_map)
    assert role_conflicts(given) == desired_conflicts(derived)


def test_defaults_agree_and_a_contradiction_is_named():
    assert role_conflicts(AS_GIVEN) == []
    got = role_conflicts(dict(AS_GIVEN, nccl_ib_tc=98))
    assert got and all("nccl_ib_tc" in m for m in got) and "roce_qos_tos" in got[0]


@pytest.mark.parametrize("value,message", [
    ({k: v for k, v in AS_GIVEN.items() if k != "nccl_ib_tc"}, "missing nccl_ib_tc"),
    (dict(AS_GIVEN, roce_qos_pfc=[3]), "unknown roce_qos_pfc"),
    ([1, 2], "expected a mapping"),
])
def test_bad_input_is_an_error_naming_it(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        role_conflicts(value)
