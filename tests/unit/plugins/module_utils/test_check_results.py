# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""drift.yml's bookkeeping: which roles fix mode runs on a node, and the node data the report reads."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.check import results as cr
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model

OK = model.status(model.OK)
DRIFT = model.status(model.DRIFT, "differs", [{"concern": "dcb", "object": "ens1np0", "key": "pfc",
                                               "current": [], "desired": [3]}])
ERR = model.status(model.ERROR, "dcb failed")
NC = model.status(model.NOT_CHECKED, "no rails")


def _all(**over):
    out = dict((n, OK) for n in model.CORE)
    out.update(over)
    return out


@pytest.mark.parametrize("result,roles", [
    ({"concerns": _all()}, []),
    ({"concerns": _all(dcb=DRIFT)}, ["roce_qos"]),
    ({"concerns": _all(rdma_cm=ERR, routing=DRIFT)}, ["roce_qos", "rail_network"]),
    ({"concerns": _all(cmdline=DRIFT, persistence=DRIFT)}, ["iommu", "persistence"]),
    ({"concerns": _all(nccl=NC)}, []),  # nothing a role run could change: no rails
    ({"failed": True, "msg": "boom"}, model.roles()),  # the check said nothing: every role
    ({"unreachable": True, "msg": "ssh"}, []),
    ({}, []),
    (None, []),
])
def test_fix_roles(result, roles):
    assert cr.fix_roles(result) == roles


def test_node_data_from_the_check_alone():
    check = {"concerns": _all(dcb=DRIFT), "facts": {"architecture": "x86_64"}, "warnings": ["w"], "errors": [],
             "reboot_required": True, "gds_wanted": False, "changed": False, "schema": "x", "module_warnings": []}
    assert cr.node_data(check) == {"concerns": _all(dcb=DRIFT), "facts": {"architecture": "x86_64"},
                                   "warnings": ["w"], "errors": [], "reboot_required": True, "gds_wanted": False}
    assert cr.node_data({}) == {"unreachable": True}
    assert cr.node_data({"unreachable": True, "msg": "x"}) == {"unreachable": True}
    assert cr.node_data({"failed": True, "msg": "bad\ndesired"}) == {"errors": ["fabric_check: bad desired"]}


def test_node_data_after_the_fix_keeps_the_checks_other_concerns():
    check = {"concerns": _all(dcb=DRIFT), "reboot_required": True, "facts": {}, "warnings": [], "errors": []}
    fixed = model.status(model.OK, "corrected 1 item(s)", DRIFT["items"], corrected=True)
    roles = {"concerns": {"dcb": fixed, "rdma_cm": OK}, "reboot_required": False, "facts": {"a": 1},
             "warnings": ["x"], "errors": [], "gds_wanted": False}
    out = cr.node_data(check, roles)
    assert out["concerns"] == _all(dcb=fixed)
    assert out["reboot_required"] is True  # the check's pending reboot stands: the iommu role did not run
    assert out["facts"] == {"a": 1} and out["warnings"] == ["x"]
    # the role-based check alone (no fabric_check result): the roles' data as it is
    assert cr.node_data(None, roles) == roles
