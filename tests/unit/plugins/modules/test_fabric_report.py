# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

import json
import os

from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import fabric_report

__metaclass__ = type

DRIFT = [{"concern": "sysctl", "object": "ens6np0", "key": "arp_ignore", "current": 0, "desired": 1}]


def test_writes_json_and_markdown_then_unchanged(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"drift": DRIFT}, "n2": {"drift": []}}, "dest": str(tmp_path / "rep")}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r["changed"] is True and not r.get("failed")
    assert r["summary"]["drifted_nodes"] == ["n1"]
    data = json.loads((tmp_path / "rep" / "drift-report.json").read_text())
    assert data["nodes"]["n1"]["items"][0]["desired"] == 1
    assert "| n1 | DRIFT | 1 |" in (tmp_path / "rep" / "drift-report.md").read_text()
    r2 = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r2["changed"] is False


def test_check_mode_writes_nothing(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"drift": DRIFT}}, "dest": str(tmp_path / "rep")}
    r = run_module(fabric_report, args, check_mode=True, monkeypatch=monkeypatch)
    assert r["changed"] is True
    assert not os.path.exists(str(tmp_path / "rep"))


def test_bad_item_fails_clearly(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"drift": [{"concern": "x"}]}}, "dest": str(tmp_path)}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r["failed"] and "lacks" in r["msg"]


def test_bad_basename(tmp_path, monkeypatch):
    r = run_module(fabric_report, {"nodes": {}, "dest": str(tmp_path), "basename": "a/b"}, monkeypatch=monkeypatch)
    assert r["failed"] and "basename" in r["msg"]
