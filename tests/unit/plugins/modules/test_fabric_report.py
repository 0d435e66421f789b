# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_report module: files, idempotence, check mode, the managed_concerns option, clear errors."""
from __future__ import absolute_import, division, print_function

import json
import os

import pytest
from ansible.module_utils import basic
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.modules import fabric_report

__metaclass__ = type

DRIFT = [{"concern": "sysctl", "object": "ens6np0", "key": "arp_ignore", "current": 0, "desired": 1}]


def statuses(items=(), check_mode=True):
    return dict((n, cm.from_items(n, list(items), check_mode)) for n in cm.CORE)


def test_writes_json_and_markdown_then_unchanged(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"concerns": statuses(DRIFT)}, "n2": {"concerns": statuses()},
                      "n3": {"unreachable": True}}, "dest": str(tmp_path / "rep"),
            "generated": "2026-12-05T10:00:00Z"}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r["changed"] is True and not r.get("failed")
    assert r["summary"]["drifted_nodes"] == ["n1", "n3"]
    n = len(cm.CORE)
    assert r["summary"]["statuses"] == {"ok": 2 * n - 1, "drift": 1, "error": 0, "not_checked": n,
                                        "not_applicable": 0}
    data = json.loads((tmp_path / "rep" / "drift-report.json").read_text())
    assert data["schema"] == "gpufabric.drift/v2"
    assert data["nodes"]["n1"]["concerns"]["sysctl"]["status"] == "drift"
    assert data["nodes"]["n1"]["concerns"]["sysctl"]["items"][0]["desired"] == 1
    assert data["nodes"]["n1"]["items"][0]["desired"] == 1
    assert data["nodes"]["n3"]["verdict"]["status"] == "unreachable"
    md = (tmp_path / "rep" / "drift-report.md").read_text()
    assert "| n1 | DRIFT | 1 |" in md and "| n3 | UNREACHABLE | 0 |" in md
    r2 = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r2["changed"] is False


def test_fix_run(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"concerns": statuses(DRIFT, check_mode=False)}}, "dest": str(tmp_path), "fixed": True,
            "basename": "drift-fixed"}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r["summary"]["drifted_nodes"] == [] and r["summary"]["corrected_items"] == 1
    assert "| n1 | FIXED | 1 |" in r["markdown"] and "| sysctl | ens6np0 | arp_ignore | 0 | 1 | fixed |" in r["markdown"]


def test_managed_concerns_option(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"concerns": statuses()}}, "dest": str(tmp_path),
            "managed_concerns": list(cm.CORE) + ["gds"]}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert r["report"]["nodes"]["n1"]["concerns"]["gds"]["status"] == "not_checked"
    assert r["summary"]["drifted_nodes"] == ["n1"], "a managed concern without a status is not checked"
    r = run_module(fabric_report, dict(args, managed_concerns=["dbc"]), monkeypatch=monkeypatch)
    assert r["failed"] and "dbc" in r["msg"]


def test_check_mode_writes_nothing(tmp_path, monkeypatch):
    args = {"nodes": {"n1": {"concerns": statuses(DRIFT)}}, "dest": str(tmp_path / "rep")}
    r = run_module(fabric_report, args, check_mode=True, monkeypatch=monkeypatch)
    assert r["changed"] is True
    assert not os.path.exists(str(tmp_path / "rep"))


@pytest.mark.parametrize("nodes,match", [
    ({"n1": {"drift": [{"concern": "x"}]}}, "node n1: drift item"),
    ({"n1": {"concerns": {"dcb": {"status": "broken"}}}}, "n1: concern dcb has status 'broken'"),
    ({"n1": {"concerns": {"ib": {"status": "ok"}}}}, "n1: unknown concern 'ib'"),
])
def test_a_bad_node_is_reported_as_an_error(tmp_path, monkeypatch, nodes, match):
    nodes = dict(nodes, n2={})
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, w: warned.append(w))
    r = run_module(fabric_report, {"nodes": nodes, "dest": str(tmp_path)}, monkeypatch=monkeypatch)
    assert not r.get("failed") and [w for w in warned if match in w]
    assert sorted(r["report"]["nodes"]) == ["n1", "n2"] and match in r["report"]["nodes"]["n1"]["errors"][0]
    assert "| n1 | ERROR |" in (tmp_path / "drift-report.md").read_text()


def test_bad_basename(tmp_path, monkeypatch):
    r = run_module(fabric_report, {"nodes": {}, "dest": str(tmp_path), "basename": "a/b"}, monkeypatch=monkeypatch)
    assert r["failed"] and "basename" in r["msg"]


def test_fix_run_also_rewrites_the_drift_report(tmp_path, monkeypatch):
    """A fix run's report is written as drift-fixed.* and as drift-report.*: the check's older report, which
    showed the drift that is now fixed, is not left standing."""
    (tmp_path / "drift-report.json").write_text('{"old": true}')
    args = {"nodes": {"n1": {"concerns": statuses(DRIFT, check_mode=False)}}, "dest": str(tmp_path), "fixed": True,
            "basename": "drift-fixed", "also_basenames": ["drift-report"], "generated": "2026-12-05T10:00:00Z"}
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    assert [os.path.basename(f) for f in r["files"]] == ["drift-fixed.json", "drift-fixed.md", "drift-report.json",
                                                         "drift-report.md"]
    assert (tmp_path / "drift-report.json").read_text() == (tmp_path / "drift-fixed.json").read_text()
    data = json.loads((tmp_path / "drift-report.json").read_text())
    assert data["fixed"] is True and data["generated"] == "2026-12-05T10:00:00Z"
    r = run_module(fabric_report, dict(args, also_basenames=["../x"]), monkeypatch=monkeypatch)
    assert r["failed"] and "also_basenames" in r["msg"]


@pytest.mark.parametrize("extra,coverage", [
    ({"scope": {"pattern": "all", "inventory_hosts": ["n1", "n2", "n3"], "limit": "n1"}},
     {"hosts": 1, "inventory_hosts": 3, "pattern": "all", "limit": "n1", "limited": True, "left_out": ["n2", "n3"],
      "complete": False}),
    ({}, {"hosts": 1, "inventory_hosts": None, "pattern": None, "limit": None, "limited": False, "left_out": None,
          "complete": None}),
])
def test_time_and_coverage(tmp_path, monkeypatch, extra, coverage):
    args = dict({"nodes": {"n1": {"concerns": statuses()}}, "dest": str(tmp_path)}, **extra)
    r = run_module(fabric_report, args, monkeypatch=monkeypatch)
    data = json.loads((tmp_path / "drift-report.json").read_text())
    assert data["coverage"] == coverage == r["report"]["coverage"]
    assert len(data["generated"]) == 20 and data["generated"].endswith("Z")
    r = run_module(fabric_report, dict(args, generated="yesterday"), monkeypatch=monkeypatch)
    assert r["failed"] and "generated must be an ISO 8601 time" in r["msg"]


def test_relative_dest_is_the_controllers_current_directory(tmp_path):
    """The action plugin: on the controller a relative dest is where ansible-playbook runs, not the playbook's
    directory (where Ansible starts a local module); elsewhere the module's own directory decides."""
    from ansible_collections.gpufabric.node.plugins.action.fabric_report import controller_dest
    cwd = str(tmp_path)
    assert controller_dest({"dest": "reports"}, "local", cwd)["dest"] == os.path.join(cwd, "reports")
    assert controller_dest({"dest": "../r"}, "local", cwd)["dest"] == os.path.join(os.path.dirname(cwd), "r")
    assert controller_dest({"dest": "/srv/r"}, "local", cwd) == {"dest": "/srv/r"}
    assert controller_dest({"dest": "reports"}, "ssh", cwd) == {"dest": "reports"}
    assert controller_dest({}, "local", cwd) == {}
