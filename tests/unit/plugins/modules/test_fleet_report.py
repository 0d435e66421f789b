# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_report module: writes HTML/JSON/Markdown, diffs against the previous report, check mode writes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils import topology
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fleet_report as fleet_report_module
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree

DRIFT = [{"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]},
         {"concern": "rdma_cm", "object": "mlx5_0/1", "key": "default_roce_tos", "current": 0, "desired": 106}]


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    """gpufabric facts of the two shipped simulated topologies, discovered from built trees."""
    out = {}
    for i, name in enumerate(("hgx-h200", "pcie-4gpu-crossnuma"), 1):
        root = str(tmp_path_factory.mktemp(name))
        tree.build_tree(root, sim_topology.load(name), i)
        out[name] = topology.discover(Sysroot(root), ["all"])
    return out


def nodes_of(facts):
    return {"hgx": {"facts": facts["hgx-h200"], "drift": [], "gds": {"ok": True, "reasons": []}},
            "pcie": {"facts": facts["pcie-4gpu-crossnuma"], "drift": list(DRIFT),
                     "gds": {"ok": False, "reasons": ["IOMMU in translated mode: transfers fail with EIO"]}}}


def test_module_writes_three_files_then_diffs(facts, tmp_path, monkeypatch):
    args = {"nodes": nodes_of(facts), "dest": str(tmp_path / "rep")}
    r = run_module(fleet_report_module, args, monkeypatch=monkeypatch)
    assert r["changed"] and not r.get("failed") and len(r["files"]) == 3
    html = (tmp_path / "rep" / "fleet-report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "No previous report" in html
    r = run_module(fleet_report_module, args, monkeypatch=monkeypatch)
    assert r["changes"] == []
    assert run_module(fleet_report_module, args, monkeypatch=monkeypatch)["changed"] is False
    args["nodes"]["pcie"]["drift"] = []
    r = run_module(fleet_report_module, args, check_mode=True, monkeypatch=monkeypatch)
    assert r["changed"] and len(r["changes"]) == 2  # two drift items resolved; GDS still fails: status stays
    assert "resolved" not in (tmp_path / "rep" / "fleet-report.md").read_text(), "check mode wrote nothing"


def test_module_ignores_foreign_previous(facts, tmp_path, monkeypatch):
    (tmp_path / "fleet-report.json").write_text('{"schema": "something/else"}')
    r = run_module(fleet_report_module, {"nodes": nodes_of(facts), "dest": str(tmp_path)}, monkeypatch=monkeypatch)
    assert r["changes"] == [] and r["report"]["has_previous"] is False
    r = run_module(fleet_report_module, {"nodes": {}, "dest": str(tmp_path), "basename": "../x"},
                   monkeypatch=monkeypatch)
    assert r["failed"] and "basename" in r["msg"]
