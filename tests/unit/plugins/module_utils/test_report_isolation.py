# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node with wrongly shaped data never costs the fleet its report: the drift and the fleet report are built,
rendered (JSON, Markdown, HTML) and the bad node appears as an error naming what was wrong; every other node is
reported as it is alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
from fleet_nodes import all_ok, discover_shipped, identity

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as rpt

# id, the bad node's data (a function of the good node's facts), words the error must contain
SHAPES = [
    ("data is a list", lambda f: [], "data must be a mapping"),
    ("data is a string", lambda f: "ok", "data must be a mapping"),
    ("facts is a list", lambda f: {"facts": []}, "facts must be"),
    ("gpus is a string", lambda f: {"facts": dict(f, gpus="8x H200")}, "gpus"),
    ("a gpu is None", lambda f: {"facts": dict(f, gpus=[None])}, "gpus"),
    ("nic netdevs is a number", lambda f: {"facts": dict(f, nics=[{"rdma": True, "netdevs": 5}])}, "netdevs"),
    ("pairing entries are numbers", lambda f: {"facts": dict(f, pairing=[1, 2])}, "pairing"),
    ("unknown PCIe relation", lambda f: {"facts": dict(f, pairing=[{"gpu": "g", "relation": "FAR"}])},
     "relation 'FAR'"),
    ("iommu is a list", lambda f: {"facts": dict(f, iommu=["pt"])}, "iommu"),
    ("nvidia_fs modules is a list", lambda f: {"facts": dict(f, nvidia_fs={"loaded": True, "modules": ["nvme"]})},
     "modules"),
    ("path bridge bdf is a list", lambda f: {"facts": dict(f, path_bridges=[{"bdf": ["0000:00:01.0"]}])},
     "path_bridges"),
    ("gpu_driver is a string", lambda f: {"facts": dict(f, gpu_driver="550")}, "gpu_driver"),
    ("concerns is a list", lambda f: {"facts": f, "concerns": ["dcb"]}, "concerns must be a mapping"),
    ("a concern is a string", lambda f: {"facts": f, "concerns": {"dcb": "ok"}}, "dcb"),
    ("a concern's status is unknown", lambda f: {"facts": f, "concerns": {"dcb": {"status": "okay"}}}, "okay"),
    ("a concern's items is a string", lambda f: {"facts": f, "concerns": {"dcb": {"status": "drift", "reason": "r",
                                                                                  "items": "pfc"}}}, "items"),
    ("a drift item is None",
     lambda f: {"facts": f, "concerns": {"dcb": {"status": "drift", "reason": "r", "items": [None]}}}, "dcb"),
    ("errors is a string", lambda f: {"facts": f, "errors": "boom"}, "errors"),
    ("gds without ok", lambda f: {"facts": f, "gds": {"reasons": []}}, "gds must be"),
    ("gds reasons is a number", lambda f: {"facts": f, "gds": {"ok": False, "reasons": 3}}, "reasons"),
    ("unreachable is a string", lambda f: {"facts": f, "unreachable": "yes"}, "unreachable"),
    ("old drift list of incomplete items", lambda f: {"drift": [{"concern": "x"}]}, "lacks"),
    ("numa_nodes of numbers", lambda f: {"facts": dict(f, numa_nodes=[0, 1])}, "numa_nodes"),
]

# what only the fleet report reads (the PCIe relation it draws): the drift report reports the node as it is
FLEET_ONLY = ("unknown PCIe relation",)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    facts = identity(discover_shipped(tmp_path_factory)["hgx-h200"])
    return {"facts": facts, "concerns": all_ok(), "gds": {"ok": True, "reasons": []}}


def _bad_entry_says(node, words):
    text = json.dumps(node["verdict"]) + json.dumps(node["errors"]) + json.dumps(node["concerns"])
    assert words in text, text
    assert node["verdict"]["status"] == "attention"
    assert set(c["status"] for c in node["concerns"].values()) == {cm.ERROR}


@pytest.mark.parametrize("case", SHAPES, ids=[c[0] for c in SHAPES])
def test_drift_report_isolates_a_badly_shaped_node(good, case):
    _id, make, words = case
    alone = rpt.build({"good": good})["nodes"]["good"]
    report = rpt.build({"good": good, "bad": make(good["facts"])})
    assert report["nodes"]["good"] == alone
    if case[0] in FLEET_ONLY:
        assert report["nodes"]["bad"]["errors"] == []
        return
    _bad_entry_says(report["nodes"]["bad"], words)
    assert "bad" in report["summary"]["drifted_nodes"] and "good" not in report["summary"]["drifted_nodes"]
    md = rpt.to_markdown(report)
    assert "## good (ok)" in md and "| bad | ERROR |" in md
    json.loads(rpt.to_json(report))


@pytest.mark.parametrize("case", SHAPES, ids=[c[0] for c in SHAPES])
def test_fleet_report_isolates_a_badly_shaped_node(good, case):
    _id, make, words = case
    alone = fr.build({"good": good})["nodes"]["good"]
    rep = fr.build({"good": good, "bad": make(good["facts"])})
    assert rep["nodes"]["good"] == alone
    _bad_entry_says(rep["nodes"]["bad"], words)
    assert rep["summary"]["ok"] == ["good"] and rep["summary"]["attention"] == ["bad"]
    assert "## good (ok)" in fr.to_markdown(rep) and "node-bad" in fr.to_html(rep)
    json.loads(fr.to_json(rep))
