# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_report module: writes HTML/JSON/Markdown, diffs against the previous report, check mode writes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from fleet_nodes import discover_shipped, nodes_of
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import fleet_report as fleet_report_module


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    return discover_shipped(tmp_path_factory)


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
