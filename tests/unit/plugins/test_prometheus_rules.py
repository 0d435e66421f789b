# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped alerting rules (files/prometheus) and Grafana dashboard (files/grafana) against the textfiles the code
writes on a simulated HGX H200 node: the evidence timer's CLI (``evidence_timer.main``, its root guard aside) and
``fabric_metrics``, both with their default directory. ``promtool test rules`` evaluates the rules and the dashboard's
fleet matrix on those files (tests/unit/promrules.py); the integration tier does the same with a converged node."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import subprocess
import sys

import promrules
import pytest
from modrunner import run_module

import desired_doc
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu

from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.boot import evidence_timer
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom
from ansible_collections.gpufabric.node.plugins.modules import fabric_metrics

LAB = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "lab"))
NOW = 1767225600.0     # 2026-01-01T00:00:00Z: the time of the timer's check
DETAIL = ("gpufabric_rail_pfc_enabled", "gpufabric_rail_dscp_priority", "gpufabric_acs_ctrl",
          "gpufabric_pcie_link_width", "gpufabric_pcie_link_max_width", "gpufabric_pcie_link_speed_transfers_per_second",
          "gpufabric_pcie_link_max_speed_transfers_per_second")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """{root, textfile_dir, drift (text), no_desired (text), report (text)}: one simulated node's files."""
    base = tmp_path_factory.mktemp("promrules")
    root = str(base / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    dcb_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"])
    bindir = base / "bin"
    bindir.mkdir()
    (bindir / "dcb").write_text("#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom gpufabric_sim.emulators import dcb\n"
                                "sys.exit(dcb.main(sys.argv[1:]))\n" % (sys.executable, LAB))
    os.chmod(str(bindir / "dcb"), 0o755)
    sr = Sysroot(root)
    # the last GDS proof fell back to compatibility mode
    evidence.record_gds_verdict(sr, {"transfer": {"bytes": 1}, "gds_active": True, "compat_fallback_suspected": True},
                                now=NOW - 3600)
    out = {"root": root, "textfile_dir": os_profiles.textfile_dir(sr)[0]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUFABRIC_SYSROOT", root)
        mp.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
        mp.setattr(evidence_timer.guard, "check_applier", lambda *_a: [])
        path = os.path.join(root, out["textfile_dir"].lstrip("/"), evidence.DEFAULT_FILENAME)
        out["no_desired"] = timer(sr, path)
        persist_doc = desired_doc.resolve({"persistence_evidence": True})
        os.makedirs(os.path.dirname(sr.path(evidence.DESIRED_FILE)), exist_ok=True)
        with open(sr.path(evidence.DESIRED_FILE), "w") as f:
            f.write(evidence.desired_document(nd.evidence_desired(persist_doc)))
        out["drift"] = timer(sr, path)
        res = run_module(fabric_metrics, {"concerns": {"dcb": {"status": "drift", "reason": "pfc"}},
                                          "checked_at": NOW}, monkeypatch=mp)
        assert not res.get("failed"), res
        assert res["path"] == os.path.join(out["textfile_dir"], evidence.REPORT_FILENAME)
        with open(sr.path(res["path"])) as f:
            out["report"] = f.read()
    return out


def timer(sr, path):
    """The timer's run as its service starts it (no --textfile-dir: the OS profile's), the file it wrote."""
    out, err = io.StringIO(), io.StringIO()
    rc = evidence_timer.main(["--interval", "60"], out=out, err=err, sysroot=sr, clock=lambda: NOW)
    assert rc == 0, err.getvalue()
    with open(path) as f:
        return f.read()


def current(text, name, **match):
    return [(labels, v) for n, labels, v in promrules.samples(text)
            if n == name and all(labels.get(k) == w for k, w in match.items())]


def test_the_timer_writes_to_the_os_profiles_directory(node):
    # the simulated node is Ubuntu: Debian's node_exporter directory, shared with fabric_metrics
    assert node["textfile_dir"] == "/var/lib/prometheus/node-exporter"
    assert current(node["drift"], "gpufabric_check_interval_seconds") == [({"writer": "evidence_timer"}, 60.0)]
    assert current(node["drift"], "gpufabric_last_check_timestamp_seconds") == [({"writer": "evidence_timer"}, NOW)]
    promrules.need_promtool()
    for text in (node["drift"], node["no_desired"], node["report"]):
        res = subprocess.run([promrules.PROMTOOL, "check", "metrics"], input=text, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        assert res.returncode == 0 and res.stdout == "", res.stdout


def test_the_two_writers_never_export_the_same_series(node):
    timer_series = set((n, frozenset(lab.items())) for n, lab, _v in promrules.samples(node["drift"]))
    report_series = set((n, frozenset(lab.items())) for n, lab, _v in promrules.samples(node["report"]))
    assert timer_series and report_series and not timer_series & report_series
    assert set(dict(lab)["writer"] for _n, lab in timer_series) == {"evidence_timer"}
    assert set(dict(lab)["writer"] for _n, lab in report_series) == {"fabric_metrics"}
    # the same names: only the label tells them apart; node_exporter would refuse them without it
    without = set((n, frozenset((k, v) for k, v in lab if k != "writer")) for n, lab in timer_series)
    assert without & set((n, frozenset((k, v) for k, v in lab if k != "writer")) for n, lab in report_series)


def test_series_budget_and_detail_only_where_drift_is(node):
    text = node["drift"]
    dcb_drift = [lab for lab, v in current(text, "gpufabric_concern_status", concern="dcb", status="drift") if v]
    assert dcb_drift, "the fresh simulated node's DCB differs from the desired state"
    rails = set(lab["rail"] for lab, _v in current(text, "gpufabric_rail_dcb_up"))
    assert len(rails) == 8
    assert set(lab["rail"] for lab, _v in current(text, "gpufabric_rail_pfc_enabled")) == rails
    detail = [s for s in promrules.samples(text) if s[0] in DETAIL]
    assert len(promrules.samples(text)) - len(detail) <= 200
    # the node's evidence with DCB and ACS as desired: no detail at all (the converged node: integration tier)
    ev = {"facts": {"pairing": [], "path_bridges": []}, "node": {"concerns": {"dcb": {"status": "ok"}}},
          "dcb": dict((r, {"app": {"dscp": dict((d, [3]) for d in range(64)), "count": 64},
                           "pfc": {"prio_pfc": [p == 3 for p in range(8)]}, "trust": "dscp"}) for r in rails)}
    ok = promrules.samples(prom.render_evidence(ev))
    assert not [s for s in ok if s[0] in DETAIL]
    assert [(lab["pfc_priorities"], lab["trust"]) for n, lab, _v in ok if n == "gpufabric_rail_dcb_info"] == \
        [("3", "dscp")] * 8


def test_alerts_fire_from_the_timer_textfile(node, tmp_path):
    text = node["drift"]
    bad = [lab for lab, v in current(text, "gpufabric_concern_status") if v and lab["status"] in ("drift", "error")]
    assert {"dcb", "acs"} <= set(lab["concern"] for lab in bad)
    labels = {"instance": "n1", "job": promrules.JOB, "writer": "evidence_timer"}
    want = [promrules.expected_alert("GpufabricConcernDrift",
                                     dict(labels, concern=lab["concern"], status=lab["status"])) for lab in bad]
    want_gds = [promrules.expected_alert("GpufabricGdsFallback", labels)]
    reboot = current(text, "gpufabric_reboot_required")[0][1]
    series = promrules.input_series(text, "n1", NOW)
    tests = [{"eval_time": "35m", "alertname": "GpufabricConcernDrift", "exp_alerts": want},
             {"eval_time": "4m", "alertname": "GpufabricConcernDrift", "exp_alerts": []},   # for: 5m
             {"eval_time": "1m", "alertname": "GpufabricGdsFallback", "exp_alerts": want_gds},
             {"eval_time": "35m", "alertname": "GpufabricRebootPending",
              "exp_alerts": [promrules.expected_alert("GpufabricRebootPending", labels)] if reboot else []},
             {"eval_time": "35m", "alertname": "GpufabricCheckStale", "exp_alerts": []},
             {"eval_time": "35m", "alertname": "GpufabricNoDesiredState", "exp_alerts": []}]
    res = promrules.run_tests(tmp_path, series, tests)
    assert res.returncode == 0, res.stdout
    # the same file next to a report.yml file of the same node: the timer's view wins, no second alert
    both = series + promrules.input_series(node["report"], "n1", NOW)
    res = promrules.run_tests(tmp_path, both, tests[:1] + tests[2:3])
    assert res.returncode == 0, res.stdout
    # a node with only report.yml's file: its statuses alert
    only = promrules.input_series(node["report"], "n2", NOW)
    rep = dict(labels, instance="n2", writer="fabric_metrics")
    res = promrules.run_tests(tmp_path, only, [{"eval_time": "10m", "alertname": "GpufabricConcernDrift",
                                                "exp_alerts": [promrules.expected_alert(
                                                    "GpufabricConcernDrift", dict(rep, concern="dcb",
                                                                                  status="drift"))]}])
    assert res.returncode == 0, res.stdout


def test_stale_timer_and_missing_desired_state(node, tmp_path):
    labels = {"instance": "n1", "job": promrules.JOB, "writer": "evidence_timer"}
    stopped = promrules.input_series(node["drift"], "n1", NOW, checks="stop")
    stale = [promrules.expected_alert("GpufabricCheckStale", labels)]
    res = promrules.run_tests(tmp_path, stopped, [
        {"eval_time": "3m", "alertname": "GpufabricCheckStale", "exp_alerts": []},     # 180 s: not yet 3 intervals
        {"eval_time": "4m", "alertname": "GpufabricCheckStale", "exp_alerts": stale}])
    assert res.returncode == 0, res.stdout
    assert current(node["no_desired"], "gpufabric_evidence_desired_state") == [({"writer": "evidence_timer"}, 0.0)]
    res = promrules.run_tests(tmp_path, promrules.input_series(node["no_desired"], "n1", NOW), [
        {"eval_time": "20m", "alertname": "GpufabricNoDesiredState",
         "exp_alerts": [promrules.expected_alert("GpufabricNoDesiredState", labels)]},
        {"eval_time": "20m", "alertname": "GpufabricConcernDrift", "exp_alerts": []}])   # not_checked: no drift
    assert res.returncode == 0, res.stdout


CODES = {"ok": 0, "not_applicable": 1, "not_checked": 2, "drift": 3, "error": 4}


def test_dashboard_fleet_matrix(node, tmp_path):
    matrix = [e for e in promrules.dashboard_exprs() if '" worst"' in e]
    assert len(matrix) == 1
    series = promrules.input_series(node["drift"], "n1", NOW) + promrules.input_series(node["no_desired"], "n2", NOW)
    want = []
    for inst, text in (("n1", node["drift"]), ("n2", node["no_desired"])):
        codes = dict((lab["concern"], CODES[lab["status"]]) for lab, v in current(text, "gpufabric_concern_status")
                     if v)
        want += [{"labels": '{concern="%s", instance="%s"}' % (c, inst), "value": v} for c, v in codes.items()]
        node_ok = current(text, "gpufabric_node_ok")[0][1]
        want.append({"labels": '{concern=" worst", instance="%s"}' % inst,
                     "value": max(list(codes.values()) + [3 * (1 - node_ok)])})
    query = {"expr": matrix[0], "eval_time": "5m", "exp_samples": want}
    res = promrules.run_tests(tmp_path, series, promql_tests=[query])
    assert res.returncode == 0, res.stdout


def test_every_series_the_rules_and_the_dashboard_use_is_exported(node):
    exported = {}
    for text in (node["drift"], node["no_desired"], node["report"]):
        for name, labels, _v in promrules.samples(text):
            exported.setdefault(name, []).append(labels)
    exprs = [r["expr"] for r in promrules.rules()] + promrules.dashboard_exprs("evidence_timer") + \
        promrules.dashboard_exprs("fabric_metrics")
    used = [s for e in exprs for s in promrules.selectors(e)]
    assert len(set(n for n, _m in used)) >= 10
    for name, matchers in used:
        assert name in exported, name
        assert name[len(prom.PREFIX):] in prom.METRICS, name
        for label, (op, value) in matchers.items():
            values = set(lab.get(label) for lab in exported[name])
            assert values - {None}, (name, label)
            if op == "=":
                assert value in values, (name, label, value)
            elif op == "=~":
                assert all(v in values for v in value.split("|")), (name, label, value)


def test_rules_and_dashboard_queries_parse():
    promrules.need_promtool()
    res = subprocess.run([promrules.PROMTOOL, "check", "rules", promrules.RULES], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert res.returncode == 0, res.stdout
    for a in promrules.rules():
        for text in a.get("annotations", {}).values():
            assert "{{" not in promrules._TEMPLATE.sub("", text), text   # only {{ $labels.x }}: rendered by the tests
