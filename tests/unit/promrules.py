# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped Prometheus rules and Grafana dashboard against real textfiles, through promtool (Debian's prometheus).

A textfile the code wrote becomes ``promtool test rules`` input series of one node (``input_series``): every sample
as it is, on every evaluation step, with the labels Prometheus adds at the scrape (``instance``, ``job``); the times
in it (``*_timestamp_seconds``) are moved so that the check ran at evaluation time 0, and then, like the evidence
timer, once per interval (``checks="advance"``) or never again (``checks="stop"``: the timer died).
Shared by the unit and the integration tier."""
from __future__ import absolute_import, division, print_function

import json
import math
import os
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpufabric.node.plugins.module_utils.report import prom

__metaclass__ = type

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(REPO, "files", "prometheus", "gpufabric.rules.yml")
DASHBOARD = os.path.join(REPO, "files", "grafana", "gpufabric-fleet.json")
PROMTOOL = shutil.which("promtool")
JOB = "node"
STEP = 60          # seconds between two evaluation steps: the evidence timer's default interval
STEPS = 40         # the series cover 40 minutes
# {{ $labels.name }}: the one template form the shipped annotations use (rendered here, see expected_alert)
_TEMPLATE = re.compile(r"{{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*}}")
_SELECTOR = re.compile(r"\b(gpufabric_[a-z0-9_]+)(?:\{([^}]*)\})?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def need_promtool():
    if PROMTOOL is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (Debian prometheus, tests/lab/apt-packages.txt)")
        pytest.skip("promtool is not installed (Debian prometheus, tests/lab/apt-packages.txt)")


def samples(text):
    """[(name, {labels}, value)] of a textfile through prometheus_client's parser."""
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def _selector(name, labels):
    """``name{labels}`` as promtool reads a series: the label values escaped as in a PromQL string."""
    return "%s{%s}" % (name, ",".join('%s="%s"' % (k, prom.escape_label_value(v)) for k, v in sorted(labels.items())))


def _number(value):
    return repr(float(value)) if math.isfinite(value) else str(value)


def input_series(text, instance, now, checks="advance", interval=STEP, steps=STEPS):
    """promtool input series of the textfile ``text`` a timer run made at unix time ``now``."""
    out = []
    for name, labels, value in samples(text):
        labels = dict(labels, instance=instance, job=JOB)
        if name.endswith("_timestamp_seconds"):
            first = value - now
            values = ("%s+%sx%d" % (_number(first), interval, steps) if checks == "advance" and
                      name == "gpufabric_last_check_timestamp_seconds" else "%sx%d" % (_number(first), steps))
        else:
            values = "%sx%d" % (_number(value), steps)
        out.append({"series": _selector(name, labels), "values": values})
    return out


def rules():
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def alert_names():
    return [r["alert"] for r in rules() if "alert" in r]


def expected_alert(alertname, labels):
    """{exp_labels, exp_annotations} of the alert ``alertname`` for a series with ``labels``."""
    rule = [r for r in rules() if r.get("alert") == alertname][0]
    got = dict(labels, **rule.get("labels", {}))
    return {"exp_labels": got,
            "exp_annotations": dict((k, _TEMPLATE.sub(lambda m: got[m.group(1)], v))
                                    for k, v in rule.get("annotations", {}).items())}


def dashboard_exprs(writer="evidence_timer"):
    """Every PromQL expression of the dashboard, its template variable ``$writer`` set."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    return [t["expr"].replace("$writer", writer) for p in dash["panels"] for t in p.get("targets", [])]


def selectors(expr):
    """[(metric name, {label: (op, value)})] of every gpufabric selector in a PromQL expression."""
    return [(m.group(1), dict((k, (op, v)) for k, op, v in _MATCHER.findall(m.group(2) or "")))
            for m in _SELECTOR.finditer(expr)]


def run_tests(tmp_path, series, alert_tests=(), promql_tests=(), name="gpufabric_test.yml"):
    """``promtool test rules`` of the shipped rules with these input series; the CompletedProcess."""
    need_promtool()
    doc = {"rule_files": [RULES], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": list(alert_tests),
                      "promql_expr_test": list(promql_tests)}]}
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
    return subprocess.run([PROMTOOL, "test", "rules", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
