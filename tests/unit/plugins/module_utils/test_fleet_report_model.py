# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet report builder: model, SVG per GPU/NIC, cross-NUMA marking, since-last diff, module files."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re
import xml.etree.ElementTree as ET

import pytest
from fleet_nodes import DRIFT, discover_shipped, nodes_of

from ansible_collections.gpufabric.node.plugins.module_utils import fleet_report as fr

SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    return discover_shipped(tmp_path_factory)


def svg_of(html, host):
    m = re.search(r'<section class="node" id="node-%s">.*?(<svg .*?</svg>)' % host, html, re.S)
    assert m, "no SVG for %s" % host
    return ET.fromstring(m.group(1))


def test_model_and_status(facts):
    rep = fr.build(nodes_of(facts))
    assert rep["schema"] == fr.SCHEMA and rep["summary"]["nodes"] == 2
    assert rep["summary"]["ok"] == ["hgx"] and rep["summary"]["attention"] == ["pcie"]
    assert rep["summary"]["cross_numa_pairs"] == 2 and rep["summary"]["drift_items"] == 2
    pcie = rep["nodes"]["pcie"]
    assert [(p["gpu_index"], p["relation"], p["cross_numa"]) for p in pcie["pairs"]] == [
        (0, "PIX", False), (1, "PHB", False), (2, "SYS", True), (3, "SYS", True)]
    assert pcie["by_concern"] == {"dcb": 1, "rdma_cm": 1}
    assert len(rep["nodes"]["hgx"]["gpus"]) == 8 and len(rep["nodes"]["hgx"]["nics"]) == 8


@pytest.mark.parametrize("host,gpus,nics,cross", [("hgx", 8, 8, 0), ("pcie", 4, 4, 2)])
def test_svg_has_one_element_per_gpu_nic_and_pair(facts, host, gpus, nics, cross):
    html = fr.to_html(fr.build(nodes_of(facts)))
    svg = svg_of(html, host)
    groups = svg.findall(SVG_NS + "g")
    kinds = [g.get("class") for g in groups]
    assert kinds.count("gpu") == gpus and kinds.count("nic") == nics
    pairs = [g for g in groups if (g.get("class") or "").startswith("pair ")]
    assert len(pairs) == gpus
    crossing = [g for g in pairs if "cross-numa" in g.get("class")]
    assert len(crossing) == cross
    for g in crossing:
        assert "rel-SYS" in g.get("class") and "CROSS-NUMA" in g.find(SVG_NS + "title").text
    numa = [g for g in groups if g.get("class") == "numa"]
    assert [g.get("data-numa") for g in numa] == ["0", "1"]
    # every GPU box sits inside its NUMA box
    boxes = dict((g.get("data-numa"), g.find(SVG_NS + "rect")) for g in numa)
    rep = fr.build(nodes_of(facts))["nodes"][host]
    for g in [g for g in groups if g.get("class") == "gpu"]:
        model = [x for x in rep["gpus"] if x["bdf"] == g.get("data-bdf")][0]
        box, rect = boxes[model["numa"]], g.find(SVG_NS + "rect")
        assert int(box.get("x")) <= int(rect.get("x")) < int(box.get("x")) + int(box.get("width"))


def test_html_is_self_contained_and_escaped(facts):
    nodes = nodes_of(facts)
    nodes["pcie"]["errors"] = ["<script>alert(1)</script>"]
    html = fr.to_html(fr.build(nodes, title="fleet <A&B>"))
    assert "<script>" not in html and "&lt;script&gt;" in html and "fleet &lt;A&amp;B&gt;" in html
    assert not re.search(r'(src|href)=', html), "no external assets"
    md = fr.to_markdown(fr.build(nodes))
    assert "## pcie (error)" in md and "| GPU2 | 0000:" in md and "CROSS-NUMA" in md


def test_fabric_manager_and_gds_shown(facts):
    f = copy.deepcopy(facts["hgx-h200"])
    f["fabric_manager"] = {"needed": True, "running": False, "pids": []}
    rep = fr.build({"hgx": {"facts": f, "drift": [], "gds": {"ok": False, "reasons": ["nvidia-fs not loaded"]}}})
    assert rep["nodes"]["hgx"]["status"] == "attention"
    html = fr.to_html(rep)
    assert "NEEDED BUT NOT RUNNING" in html and "GDS failing" in html and "nvidia-fs not loaded" in html


def test_not_checked_vs_as_desired(facts):
    rep = fr.build({"a": {"facts": facts["hgx-h200"]}, "b": {"facts": facts["hgx-h200"], "drift": []}})
    html = fr.to_html(rep)
    a, b = html.split('id="node-a"')[1].split('id="node-b"')
    assert "not checked" in a and "as desired" not in a
    assert "as desired" in b and "not checked" not in b


DIFF_CASES = [
    ("first report", None, lambda n: n, []),
    ("nothing changed", "same", lambda n: n, []),
    ("drift resolved", "same", lambda n: dict(n, pcie=dict(n["pcie"], drift=DRIFT[:1])),
     [("pcie", "drift", "resolved: rdma_cm mlx5_0/1 default_roce_tos: 0 (want 106)")]),
    ("node added", "same", lambda n: dict(n, new={"facts": n["hgx"]["facts"], "drift": []}),
     [("new", "node", "added to the report")]),
    ("gds fixed", "same", lambda n: dict(n, pcie=dict(n["pcie"], gds={"ok": True})),
     [("pcie", "gds", "failing -> ok")]),
]


@pytest.mark.parametrize("name,prev,change,expected", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_since_last(facts, name, prev, change, expected):
    base = nodes_of(facts)
    previous = json.loads(fr.to_json(fr.build(base))) if prev else None
    rep = fr.build(change(copy.deepcopy(base)), previous)
    got = [(c["node"], c["what"], c["change"]) for c in rep["changes"]]
    if name == "drift resolved":
        assert ("pcie", "status", "attention -> attention") not in got
    assert got == expected


def test_pair_relation_change_is_listed(facts):
    base = nodes_of(facts)
    previous = json.loads(fr.to_json(fr.build(base)))
    moved = copy.deepcopy(base)
    moved["hgx"]["facts"]["pairing"][0]["relation"] = "SYS"
    got = [(c["what"], c["change"]) for c in fr.build(moved, previous)["changes"]]
    assert ("pair GPU0", "ens1np0 PIX -> ens1np0 SYS") in got


@pytest.mark.parametrize("nodes,match", [
    ([], "mapping"),
    ({"a": 3}, "data must be a mapping"),
    ({"a": {"facts": []}}, "facts must be"),
    ({"a": {"drift": [{"concern": "x"}]}}, "lacks"),
    ({"a": {"gds": {"reasons": []}}}, "gds must be"),
    ({"a": {"facts": {"pairing": [{"gpu": "g", "relation": "FAR"}]}}}, "relation 'FAR'"),
])
def test_bad_input(nodes, match):
    with pytest.raises(fr.FleetReportError, match=match):
        fr.build(nodes)
