# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate_judge: every node judged once against the baseline store, the report files, the records for the nodes,
check mode writing nothing, and the action plugin's defaults (the play hosts' documents, the directories)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.action import validate_judge as action
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import record
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths
from ansible_collections.gpufabric.node.plugins.modules import validate_judge

GB = 1e9
KEY = "0123456789abcdef"


def _doc(node, bw, state=paths.DIRECT, at="2026-12-01T10:00:00Z"):
    v = paths.verdict("nccl", state, state, paths.NO_GDR if state == paths.FALLBACK else None, [], bw)
    return {"schema": 1, "node": node, "at": at, "profile": {"key": KEY}, "profile_key": KEY, "versions": {},
            "runs": [{"id": "nccl.configured", "test": "nccl", "variant": "configured", "expect": "direct",
                      "status": "ok", "reason": "", "tool": "all_reduce_perf", "command": [], "env": {}, "rc": 0,
                      "metric": "nccl.configured.busbw", "bandwidth": bw, "cpu_s": 5.0, "wall_s": 10.0,
                      "verdict": v, "counters": {}}]}


def _args(tmp_path, nodes, **kw):
    args = dict(nodes=nodes, baseline_dir=str(tmp_path / "baselines"), dest=str(tmp_path / "reports"),
                generated="2026-12-01T10:05:00Z")
    args.update(kw)
    return args


FLEET = {"a1": _doc("a1", 38.4 * GB), "a2": _doc("a2", 38.0 * GB), "a3": _doc("a3", 38.8 * GB)}


def test_first_run_starts_the_baseline_then_judges(tmp_path, monkeypatch):
    first = run_module(validate_judge, _args(tmp_path, FLEET), monkeypatch=monkeypatch)
    assert not first.get("failed"), first
    # the first node of a new profile starts its baseline; the next ones are judged against it
    assert first["changed"] and first["not_judged"] == ["a1"] and first["regressed"] == []
    assert "not judged: new profile %s" % KEY in first["statuses"]["a1"]["reason"]
    assert os.listdir(str(tmp_path / "baselines")) == [KEY + ".json"]
    assert sorted(os.listdir(str(tmp_path / "reports"))) == ["validate-report.json", "validate-report.md"]
    rec = first["nodes"]["a1"]["record"]
    assert (rec["schema"], rec["status"], rec["profile_key"]) == (record.SCHEMA, C.NOT_CHECKED, KEY)
    nodes = dict(FLEET, a2=_doc("a2", 26.0 * GB, at="2026-12-02T10:00:00Z"),
                 a3={"failed": True, "msg": "fabric_validate: bad option"}, a4=None,
                 a5={"changed": False, "validation": _doc("a5", 38.1 * GB)})
    second = run_module(validate_judge, _args(tmp_path, nodes), monkeypatch=monkeypatch)
    st = second["statuses"]
    assert (st["a1"]["status"], st["a2"]["status"], st["a3"]["status"], st["a4"]["status"], st["a5"]["status"]) == (
        C.OK, C.DRIFT, C.NOT_CHECKED, C.NOT_CHECKED, C.OK)
    assert "26.00 GB/s is 32 % below the fleet median 38.40 GB/s" in st["a2"]["reason"]
    assert "suite failed on the node: fabric_validate: bad option" in st["a3"]["reason"]
    assert second["regressed"] == ["a2"] and second["not_judged"] == ["a3", "a4"]
    with open(str(tmp_path / "reports" / "validate-report.json")) as f:
        assert json.load(f)["failed"] == ["a2"]


def test_check_mode_writes_nothing(tmp_path, monkeypatch):
    res = run_module(validate_judge, _args(tmp_path, FLEET), check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] is True and not os.path.exists(str(tmp_path / "baselines"))
    assert not os.path.exists(str(tmp_path / "reports"))


def test_canary_against_the_earlier_run(tmp_path, monkeypatch):
    before = _doc("a1", 38.4 * GB, at="2026-12-01T09:00:00Z")
    after = _doc("a1", 38.4 * GB, state=paths.FALLBACK)
    res = run_module(validate_judge, _args(tmp_path, {"a1": after}, earlier={"a1": before}), monkeypatch=monkeypatch)
    assert res["canary_failed"] == ["a1"]
    assert "took the direct path before and fallback: no gdr now" in res["nodes"]["a1"]["canary"]["reason"]
    same = run_module(validate_judge, _args(tmp_path, {"a1": copy.deepcopy(before)}, earlier={"a1": before}),
                      monkeypatch=monkeypatch)
    assert same["canary_failed"] == [] and same["nodes"]["a1"]["canary"]["status"] == C.OK


@pytest.mark.parametrize("extra, match", [
    ({"basename": "../x"}, "basename"),
    ({"tolerance": 1.5}, "tolerance"),
    ({"generated": "yesterday"}, "generated"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, monkeypatch, extra, match):
    res = run_module(validate_judge, _args(tmp_path, FLEET, **extra), monkeypatch=monkeypatch)
    assert res["failed"] and match in res["msg"]
    assert not os.path.exists(str(tmp_path / "baselines"))


def test_a_bad_document_is_that_nodes_error(tmp_path, monkeypatch):
    bad = dict(_doc("a9", 1.0), schema=7)
    res = run_module(validate_judge, _args(tmp_path, dict(FLEET, a9=bad)), monkeypatch=monkeypatch)
    assert res["statuses"]["a9"]["status"] == C.ERROR and "schema 7" in res["statuses"]["a9"]["reason"]
    assert res["statuses"]["a1"]["status"] == C.NOT_CHECKED


@pytest.mark.parametrize("args, task_vars, transport, want", [
    ({}, {"ansible_play_hosts_all": ["a1", "a2", "localhost"],
          "hostvars": {"a1": {"gpufabric_validation": {"x": 1}}, "a2": {}}}, "local",
     {"nodes": {"a1": {"x": 1}, "a2": None}, "baseline_dir": "/cwd/baselines", "dest": "/cwd/reports"}),
    ({"nodes": {}}, {"gpufabric_baseline_dir": "/srv/baselines", "gpufabric_report_dir": "out",
                     "gpufabric_validate_tolerance": 0.2}, "local",
     {"nodes": {}, "baseline_dir": "/srv/baselines", "dest": "/cwd/out", "tolerance": 0.2}),
    ({"nodes": {}, "dest": "r"}, {}, "ssh", {"nodes": {}, "baseline_dir": "baselines", "dest": "r"}),
])
def test_action_plugin_defaults(args, task_vars, transport, want):
    assert action.resolve(args, task_vars, transport, "/cwd") == want
