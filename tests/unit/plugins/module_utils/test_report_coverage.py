# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every report says when it was made and which inventory hosts it covers; the fleet page puts problem nodes first,
collapses the ok ones and filters by concern and status without script (issue 23, items 2 and 3).

How the filter behaves in a browser is tests/integration/test_report_render.py; the page's time and size at 1,000
and 10,000 nodes are tests/bench/report_scaling.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

import pytest
from fleet_nodes import all_ok, discover_shipped, identity

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as dr
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet_html

STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")
INV = ["a", "b", "c"]

COVERAGE = [
    # hosts, scope, expected coverage (subset), sentence
    (["a", "b", "c"], {"pattern": "all", "inventory_hosts": INV},
     {"hosts": 3, "inventory_hosts": 3, "limited": False, "left_out": [], "complete": True},
     "Covers 3 of 3 inventory host(s) (pattern all)."),
    (["b"], {"pattern": "all", "inventory_hosts": INV, "limit": "b"},
     {"hosts": 1, "inventory_hosts": 3, "limit": "b", "limited": True, "left_out": ["a", "c"], "complete": False},
     "Covers 1 of 3 inventory host(s) (pattern all, --limit b); left out: a, c."),
    (["a"], None, {"hosts": 1, "inventory_hosts": None, "left_out": None, "complete": None, "limited": False},
     "Covers 1 host(s); the inventory they were taken from was not given."),
    (["h%03d" % i for i in range(5)], {"inventory_hosts": ["h%03d" % i for i in range(30)], "limit": "h00[0-4]"},
     {"hosts": 5, "inventory_hosts": 30, "complete": False},
     "Covers 5 of 30 inventory host(s) (--limit h00[0-4]); left out: %s and 5 more."
     % ", ".join("h%03d" % i for i in range(5, 25))),
]


@pytest.mark.parametrize("hosts,scope,expected,text", COVERAGE)
def test_coverage(hosts, scope, expected, text):
    c = dr.coverage(hosts, scope)
    assert dict((k, c[k]) for k in expected) == expected
    assert dr.coverage_text(c) == text


@pytest.mark.parametrize("scope,match", [
    ("all", "scope must be a mapping"),
    ({"inventory_hosts": "a,b"}, "scope.inventory_hosts must be a list of host names"),
    ({"inventory_hosts": ["a", 3]}, "scope.inventory_hosts must be a list of host names"),
    ({"limit": ["a"]}, "scope.limit must be a host pattern"),
])
def test_bad_scope_is_a_clear_error(scope, match):
    with pytest.raises(dr.ReportError, match=match):
        dr.build({"a": {"concerns": all_ok()}}, scope=scope)
    with pytest.raises(fr.FleetReportError, match=match):
        fr.build({"a": {"concerns": all_ok()}}, scope=scope)


def test_drift_report_says_when_and_what_it_covers():
    scope = {"pattern": "all", "inventory_hosts": INV, "limit": "b"}
    rep = dr.build({"b": {"concerns": all_ok()}}, scope=scope)
    assert STAMP.match(rep["generated"]), rep["generated"]
    assert rep["coverage"]["left_out"] == ["a", "c"]
    md = dr.to_markdown(dr.build({"b": {"concerns": all_ok()}}, generated="2026-12-05T10:00:00Z", scope=scope))
    assert md.splitlines()[2] == ("Generated 2026-12-05T10:00:00Z. Covers 1 of 3 inventory host(s) (pattern all, "
                                  "\\-\\-limit b); left out: a, c.").replace("\\-\\-", "--")
    assert json.loads(dr.to_json(rep))["coverage"]["hosts"] == 1


def test_fleet_report_says_when_and_what_it_covers():
    rep = fr.build({"b": {"concerns": all_ok()}}, scope={"pattern": "all", "inventory_hosts": INV, "limit": "b"})
    assert STAMP.match(rep["generated"])
    md = fr.to_markdown(rep)
    assert "Covers 1 of 3 inventory host(s) (pattern all, --limit b); left out: a, c." in md
    html = fr.to_html(rep)
    assert "generated %s" % rep["generated"] in html
    assert '<div class="why"><b>Partial report:</b> Covers 1 of 3 inventory host(s)' in html


def test_change_lines_name_the_concern():
    before = fr.build({"n1": {"concerns": all_ok()}})
    after = fr.build({"n1": {"concerns": all_ok(dcb=cm.status(cm.DRIFT, "pfc differs"),
                                                sysctl=cm.status(cm.DRIFT, "arp_ignore differs"))}}, before)
    lines = [fr.change_text(c) for c in after["changes"]]
    assert "n1 concern dcb: ok -> drift" in lines and "n1 concern sysctl: ok -> drift" in lines
    assert "n1 status: ok -> attention" in lines


@pytest.fixture(scope="module")
def big_page(tmp_path_factory):
    """1,000 nodes with the facts of the simulated HGX node (IOMMU identity: verdict ok), 3 of them bad."""
    facts = identity(discover_shipped(tmp_path_factory)["hgx-h200"])
    bad = {"n0421": all_ok(dcb=cm.status(cm.DRIFT, "1 item(s) differ", [
        {"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}])),
        "n0007": all_ok(nccl=cm.status(cm.ERROR, "cannot write /etc/nccl.conf")),
        "n0999": all_ok(acs=cm.status(cm.NOT_CHECKED, "not reported"))}
    nodes = dict(("n%04d" % i, {"facts": facts, "concerns": bad.get("n%04d" % i, all_ok())}) for i in range(1000))
    rep = fr.build(nodes, generated="2026-12-05T10:00:00Z")
    return rep, fr.to_html(rep)


def test_1000_nodes_problem_nodes_first_ok_nodes_collapsed(big_page):
    rep, html = big_page
    rows = re.findall(r'<tr class="([^"]*)"><td><a href="#node-([^"]+)">', html)
    # worst first: error, drift, not checked; then the 997 ok nodes by name
    assert [h for _c, h in rows[:3]] == ["n0007", "n0421", "n0999"]
    assert [h for _c, h in rows[3:]] == sorted(h for h in rep["nodes"] if h not in ("n0007", "n0421", "n0999"))
    assert html.index('href="#node-n0999"') < html.index('<details class="ok-nodes"><summary>997 ok node(s)')
    assert html.index('<details class="ok-nodes">') < html.index('href="#node-n0000"')
    # the bad nodes have their section (map and pairs); the ok nodes are rows only at this size
    assert re.findall(r'<section class="node [^"]*" id="node-([^"]+)">', html) == ["n0007", "n0421", "n0999"]
    assert "The maps and pairs of the 997 ok nodes are left out" in html
    assert len(html.encode("utf-8")) < 2 * 1000 * 1000, "well under the 5 MB goal at 1,000 nodes"


def test_the_page_stays_static(big_page):
    _rep, html = big_page
    assert "<script" not in html.lower() and " src=" not in html and "@import" not in html and "url(" not in html
    assert not re.search(r'href="(?!#)', html), "links only within the page"


FILTER_CLASSES = [
    (all_ok(), "n"),
    (all_ok(routing=cm.status(cm.NOT_APPLICABLE, "off")), "n f-routing-na f-routing-n f-any-na"),
    (all_ok(dcb=cm.status(cm.DRIFT, "x"), nccl=cm.status(cm.ERROR, "y")),
     "n p f-dcb-d f-dcb-n f-dcb-b f-nccl-e f-nccl-n f-nccl-b f-any-d f-any-e"),
]


@pytest.mark.parametrize("concerns,classes", FILTER_CLASSES)
def test_filter_classes_name_only_what_is_not_ok(concerns, classes):
    rep = fr.build({"x": {"concerns": concerns}})
    assert fleet_html.filter_classes(rep["nodes"]["x"]) == classes


def test_a_few_ok_nodes_keep_their_sections_collapsed():
    rep = fr.build({"ok1": {"concerns": all_ok()}, "bad": {"concerns": all_ok(dcb=cm.status(cm.DRIFT, "x"))}})
    html = fr.to_html(rep)
    assert html.index('id="node-bad"') < html.index("<summary>The 1 ok node(s) in detail</summary>") \
        < html.index('id="node-ok1"')
