# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufabric.node.concern_options: the roles' module options, derived by the concerns' specs from the role
variables as Ansible templates them (a real Templar over the roles' own defaults and vars files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufabric.node.plugins.lookup.concern_options import LookupModule

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# a RoCE LAG rail (bond0 over two PFs) and a plain one, as gpufabric_facts pairs them
PAIRING = [{"gpu": 0, "netdev": "bond0", "phys_netdevs": ["ens1f0np0", "ens1f1np1"]},
           {"gpu": 1, "netdev": "ens2np0", "phys_netdevs": ["ens2np0"]},
           {"gpu": 2, "netdev": "ens2np0", "phys_netdevs": ["ens2np0"]}]


def _load(loader, path):
    try:
        return loader.load_from_file(path, trusted_as_template=True) or {}
    except TypeError:  # ansible-core < 2.19 has no trust tags
        return loader.load_from_file(path) or {}


def options(role, concerns, overrides=None, facts=None):
    """The lookup's answer in role ``role``: its defaults, its vars, the host's ``overrides`` and facts."""
    loader = DataLoader()
    variables = {}
    for part in ("defaults", "vars"):
        path = os.path.join(REPO, "roles", role, part, "main.yml")
        if os.path.exists(path):
            variables.update(_load(loader, path))
    variables.update(overrides or {})
    variables["ansible_facts"] = facts if facts is not None else {"gpufabric": {"pairing": PAIRING,
                                                                                "architecture": "x86_64"}}
    templar = Templar(loader=loader, variables=variables)
    return LookupModule(loader=loader, templar=templar).run(list(concerns), variables)


LOSSLESS = [{"dscp": 26, "priority": 3}]


@pytest.mark.parametrize("overrides,dcb,rdma_cm,ecn_rails", [
    ({}, {"rails": ["ens1f0np0", "ens1f1np1", "ens2np0"], "dscp_map": LOSSLESS, "pfc_priorities": [3],
          "trust": "dscp", "dcbx": "host"},
     {"rails": ["bond0", "ens2np0"], "tos": 106, "expected_dscp": 26}, ["ens1f0np0", "ens1f1np1", "ens2np0"]),
    ({"roce_qos_rails": ["ens9np0"]}, {"rails": ["ens9np0"]}, {"rails": ["ens9np0"]}, ["ens9np0"]),
    ({"roce_qos_dscp": "24", "roce_qos_priority": 4, "roce_qos_pfc_priorities": [4]},
     {"dscp_map": [{"dscp": 24, "priority": 4}], "pfc_priorities": [4]}, {"expected_dscp": 24}, None),
    ({"roce_qos_trust": "pcp"}, {"dscp_map": [], "trust": "pcp"}, {}, None),
    ({"roce_qos_dscp_map": [{"dscp": 10, "priority": 3}]}, {"dscp_map": [{"dscp": 10, "priority": 3}]}, {}, None),
    ({"roce_qos_ets": [{"tc": 3}]}, {"ets": [{"tc": 3}]}, {}, None),
])
def test_roce_qos(overrides, dcb, rdma_cm, ecn_rails):
    got = options("roce_qos", ["dcb", "rdma_cm", "ecn"], overrides)
    assert dict((k, got[0][k]) for k in dcb) == dcb
    assert "ets" in got[0] if "roce_qos_ets" in overrides else "ets" not in got[0]
    assert dict((k, got[1][k]) for k in rdma_cm) == rdma_cm
    assert ecn_rails is None or got[2]["rails"] == ecn_rails
    assert got[2]["priority"] == int(overrides.get("roce_qos_priority", 3))


def test_no_pairing_no_rails():
    got = options("roce_qos", ["dcb", "rdma_cm"], facts={"gpufabric": {"pairing": []}})
    assert got[0]["rails"] == [] and got[1]["rails"] == []


@pytest.mark.parametrize("role,concern,overrides,want,absent_keys", [
    ("nccl", "nccl", {}, {"rails": ["bond0", "ens2np0"]}, ("gid_index", "fifo_tc", "socket_ifname")),
    ("nccl", "nccl", {"nccl_ib_gid_index": 3}, {"gid_index": 3}, ()),
    ("rail_network", "sysctl", {"rail_network_rails": ["a0"]}, {"rails": ["a0"]}, ()),
    ("rail_network", "mtu", {"rail_network_mtu": 4200}, {"rails": ["bond0", "ens2np0"], "mtu": 4200}, ()),
])
def test_rails_of_the_other_roles(role, concern, overrides, want, absent_keys):
    got = options(role, [concern], overrides)[0]
    assert dict((k, got[k]) for k in want) == want
    assert not [k for k in absent_keys if k in got]


@pytest.mark.parametrize("overrides,arch,present,absent", [
    ({}, "x86_64", ["iommu=pt"], ["iommu.passthrough=0", "intel_iommu=off", "amd_iommu=off"]),
    ({"iommu_mode": "translated"}, "amd64", ["iommu=nopt"],
     ["iommu.passthrough=1", "intel_iommu=off", "amd_iommu=off"]),
    ({"iommu_extra_kernel_args": ["intel_iommu=on"]}, "x86_64", ["iommu=pt", "intel_iommu=on"],
     ["iommu.passthrough=0", "amd_iommu=off"]),                             # the user's key wins
    ({}, "aarch64", ["iommu.passthrough=1"], []),
])
def test_iommu_kernel_arguments(overrides, arch, present, absent):
    got = options("iommu", ["cmdline"], overrides, facts={"architecture": arch})[0]
    assert (got["present"], got["absent"], got["bootloader"]) == (present, absent, "auto")


def test_setup_fact_is_preferred_to_gpufabric_facts():
    facts = {"architecture": "aarch64", "gpufabric": {"architecture": "x86_64"}}
    assert options("iommu", ["cmdline"], facts=facts)[0]["present"] == ["iommu.passthrough=1"]


@pytest.mark.parametrize("role,terms,overrides,facts,message", [
    ("iommu", ["cmdline"], {"iommu_mode": "off"}, {"architecture": "aarch64"}, "not supported on aarch64"),
    ("iommu", ["acs"], {}, None, "'acs' is not a concern whose role options"),
    ("iommu", ["nosuch"], {}, None, "'nosuch' is not a concern"),
    ("iommu", ["dcb"], {}, None, r"concern_options\(dcb\): the role variables roce_qos_rails, .* are not defined"),
])
def test_errors_name_the_problem(role, terms, overrides, facts, message):
    with pytest.raises(AnsibleLookupError, match=message):
        options(role, terms, overrides, facts)


# Jinja filters that compute data; a role's vars file only names what the concern specs derive
DERIVING = re.compile(r"\|\s*(map|select|reject|selectattr|rejectattr|unique|flatten|int|regex_replace|dict2items|"
                      r"items2dict|combine|zip|difference|union)\b")


ROLES_WITH_VARS = sorted(r for r in os.listdir(os.path.join(REPO, "roles"))
                         if os.path.exists(os.path.join(REPO, "roles", r, "vars", "main.yml")))


@pytest.mark.parametrize("role", ROLES_WITH_VARS)
def test_roles_vars_files_derive_nothing_in_jinja(role):
    path = os.path.join(REPO, "roles", role, "vars", "main.yml")
    text = open(path).read()
    assert not DERIVING.findall(text), "%s derives values in Jinja; the concern's spec.options owns that" % path
