# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_report module: writes HTML/JSON/Markdown, diffs against the previous report (v2 or v1), check mode writes
nothing, clear errors."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest
from ansible.module_utils import basic
from fleet_nodes import all_ok, discover_shipped, nodes_of
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import fleet_report as fleet_report_module

V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "fixtures",
                  "fleet-report-v1.json")


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    return discover_shipped(tmp_path_factory)


def test_module_writes_three_files_then_diffs(facts, tmp_path, monkeypatch):
    args = {"nodes": nodes_of(facts), "dest": str(tmp_path / "rep"), "generated": "2026-12-05T10:00:00Z"}
    r = run_module(fleet_report_module, args, monkeypatch=monkeypatch)
    assert r["changed"] and not r.get("failed") and len(r["files"]) == 3
    assert r["summary"]["ok"] == ["hgx"] and r["summary"]["attention"] == ["pcie"]
    html = (tmp_path / "rep" / "fleet-report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "No previous report" in html
    r = run_module(fleet_report_module, args, monkeypatch=monkeypatch)
    assert r["changes"] == []
    assert run_module(fleet_report_module, args, monkeypatch=monkeypatch)["changed"] is False
    args["nodes"]["pcie"]["concerns"] = all_ok()
    r = run_module(fleet_report_module, args, check_mode=True, monkeypatch=monkeypatch)
    # two concerns and two drift items resolved; GDS still fails: the verdict stays
    assert r["changed"] and len(r["changes"]) == 4
    # each change line names its node and what changed (the concern), as report.yml prints them
    assert "pcie concern dcb: drift -> ok" in r["change_lines"] and len(r["change_lines"]) == 4
    assert "resolved" not in (tmp_path / "rep" / "fleet-report.md").read_text(), "check mode wrote nothing"


def test_module_reads_a_v1_previous_report(facts, tmp_path, monkeypatch):
    shutil.copyfile(V1, str(tmp_path / "fleet-report.json"))
    nodes = nodes_of(facts)
    nodes["hgx"]["facts"] = facts["hgx-h200"]
    r = run_module(fleet_report_module, {"nodes": nodes, "dest": str(tmp_path)}, monkeypatch=monkeypatch)
    assert not r.get("failed") and r["report"]["has_previous"] is True
    assert [(c["node"], c["what"], c["change"]) for c in r["changes"]] == [("hgx", "status", "ok -> attention")]
    assert r["report"]["schema"] == "gpufabric.fleet/v2"


def test_module_ignores_foreign_previous(facts, tmp_path, monkeypatch):
    (tmp_path / "fleet-report.json").write_text('{"schema": "something/else"}')
    r = run_module(fleet_report_module, {"nodes": nodes_of(facts), "dest": str(tmp_path)}, monkeypatch=monkeypatch)
    assert r["changes"] == [] and r["report"]["has_previous"] is False
    r = run_module(fleet_report_module, {"nodes": {}, "dest": str(tmp_path), "basename": "../x"},
                   monkeypatch=monkeypatch)
    assert r["failed"] and "basename" in r["msg"]


def test_module_managed_concerns_and_bad_statuses(facts, tmp_path, monkeypatch):
    args = {"nodes": nodes_of(facts), "dest": str(tmp_path), "managed_concerns": ["cmdline", "vendor_client"]}
    r = run_module(fleet_report_module, args, check_mode=True, monkeypatch=monkeypatch)
    hgx = r["report"]["nodes"]["hgx"]
    assert hgx["concerns"]["vendor_client"]["status"] == "not_checked" and hgx["status"] == "attention"
    args = {"nodes": {"n1": {"concerns": {"dcb": {"status": "fine"}}}}, "dest": str(tmp_path)}
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, w: warned.append(w))
    r = run_module(fleet_report_module, args, monkeypatch=monkeypatch)
    assert not r.get("failed") and r["report"]["summary"]["attention"] == ["n1"]
    assert [w for w in warned if "n1: concern dcb has status 'fine'" in w]
