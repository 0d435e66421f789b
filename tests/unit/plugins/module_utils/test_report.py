# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import report as rpt

__metaclass__ = type


def item(concern, obj, key, cur, des):
    return {"concern": concern, "object": obj, "key": key, "current": cur, "desired": des}


FIVE = [
    item("acs", "0000:17:01.0", "acs_ctrl", "0x001d", "0x0011"),
    item("dcb", "ens3np0", "dscp_prio:26", None, 3),
    item("rdma_cm", "mlx5_4/1", "default_roce_tos", 0, 106),
    item("sysctl", "ens6np0", "arp_ignore", 0, 1),
    item("dcb", "ens8np0", "pfc", [], [3]),
]

CASES = [
    ("clean fleet", {"a": {"drift": []}, "b": {}}, [], 0),
    ("one node five items", {"a": {"drift": FIVE}, "b": {"drift": []}}, ["a"], 5),
    ("duplicates count once", {"a": {"drift": FIVE + FIVE[:2]}}, ["a"], 5),
    ("errors make a node drifted", {"a": {"errors": ["dcb missing"]}}, ["a"], 0),
    ("unreachable node", {"a": {"unreachable": True}}, ["a"], 0),
]


@pytest.mark.parametrize("name,nodes,drifted,items", CASES, ids=[c[0] for c in CASES])
def test_build(name, nodes, drifted, items):
    r = rpt.build(nodes)
    assert r["summary"]["drifted_nodes"] == drifted
    assert r["summary"]["drift_items"] == items
    json.loads(rpt.to_json(r))
    md = rpt.to_markdown(r)
    for host in drifted:
        assert "| %s |" % host in md


def test_items_sorted_and_grouped():
    r = rpt.build({"a": {"drift": FIVE}})
    n = r["nodes"]["a"]
    assert [i["concern"] for i in n["items"]] == ["acs", "dcb", "dcb", "rdma_cm", "sysctl"]
    assert n["by_concern"] == {"acs": 1, "dcb": 2, "rdma_cm": 1, "sysctl": 1}
    md = rpt.to_markdown(r)
    assert "| dcb | ens3np0 | dscp_prio:26 | - | 3 |" in md
    assert "| dcb | ens8np0 | pfc | [] | [3] |" in md


def test_reboot_pending_is_not_drift():
    r = rpt.build({"a": {"drift": [], "reboot_required": True}})
    assert r["summary"]["drifted_nodes"] == []
    assert r["summary"]["reboot_required"] == ["a"]


BAD = [
    ("not a mapping", ["a"]),
    ("item not a mapping", {"a": {"drift": ["x"]}}),
    ("item lacks key", {"a": {"drift": [{"concern": "dcb", "object": "x"}]}}),
    ("node results not a mapping", {"a": "oops"}),
]


@pytest.mark.parametrize("name,nodes", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, nodes):
    with pytest.raises(rpt.ReportError):
        rpt.build(nodes)


def test_fixed_marks_nodes():
    r = rpt.build({"a": {"drift": FIVE}})
    assert "| a | FIXED | 5 |" in rpt.to_markdown(r, fixed=True)
    assert "| a | DRIFT | 5 |" in rpt.to_markdown(r)
