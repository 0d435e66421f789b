# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet report builder: concern statuses and node verdict, SVG per GPU/NIC, cross-NUMA marking, wording per status,
since-last diff (against v2 and v1 reports), bad input."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import re
import xml.etree.ElementTree as ET

import pytest
from fleet_nodes import DRIFT, all_ok, discover_shipped, drifting, nodes_of

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as report_mod

SVG_NS = "{http://www.w3.org/2000/svg}"
V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "fleet-report-v1.json")


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    return discover_shipped(tmp_path_factory)


def svg_of(html, host):
    m = re.search(r'<section class="node[^"]*" id="node-%s">.*?(<svg .*?</svg>)' % host, html, re.S)
    assert m, "no SVG for %s" % host
    return ET.fromstring(m.group(1))


def section(html, host):
    m = re.search(r'<section class="node[^"]*" id="node-%s">(.*?)</section>' % re.escape(host), html, re.S)
    assert m, "no section for %s" % host
    return m.group(1)


def concern_rows(section_html):
    """{title: (badge label, detail)} of a node section's concerns table."""
    table = re.search(r'<table class="concerns">(.*?)</table>', section_html, re.S).group(1)
    return dict((t, (label, detail)) for t, label, detail in re.findall(
        r'<tr><td>([^<]*)</td><td><span class="cs [^"]*">([^<]*)</span></td><td[^>]*>([^<]*)</td></tr>', table))


def test_model_and_status(facts):
    rep = fr.build(nodes_of(facts))
    assert rep["schema"] == fr.SCHEMA == "gpufabric.fleet/v2" and rep["summary"]["nodes"] == 2
    assert rep["summary"]["ok"] == ["hgx"] and rep["summary"]["attention"] == ["pcie"]
    assert rep["summary"]["cross_numa_pairs"] == 2 and rep["summary"]["drift_items"] == 2
    assert rep["summary"]["statuses"] == {"ok": 2 * len(cm.CORE) - 1, "drift": 3, "error": 0, "not_checked": 0,
                                          "not_applicable": 0}
    pcie = rep["nodes"]["pcie"]
    assert [(p["gpu_index"], p["relation"], p["cross_numa"]) for p in pcie["pairs"]] == [
        (0, "PIX", False), (1, "PHB", False), (2, "SYS", True), (3, "SYS", True)]
    assert pcie["by_concern"] == {"dcb": 1, "rdma_cm": 1}
    assert pcie["concerns"]["dcb"]["status"] == "drift" and pcie["concerns"]["gds"]["status"] == "drift"
    assert pcie["verdict"]["status"] == "attention"
    reasons = " ".join(pcie["verdict"]["reasons"])
    assert "DCB (trust, DSCP map, PFC): drift" in reasons and "IOMMU is translated" in reasons
    assert reasons.count("different NUMA nodes") == 2
    hgx = rep["nodes"]["hgx"]
    assert hgx["verdict"] == {"status": "ok", "reasons": []}
    assert len(hgx["gpus"]) == 8 and len(hgx["nics"]) == 8


def test_the_field_report_node_needs_attention(facts):
    """make demo: the simulated HGX node, nothing checked, IOMMU translated, reboot pending: never OK."""
    rep = fr.build({"sim1": {"facts": facts["hgx-h200"], "reboot_required": True, "gds_wanted": True}})
    n = rep["nodes"]["sim1"]
    assert rep["summary"]["attention"] == ["sim1"] and rep["summary"]["ok"] == []
    assert set(c["status"] for c in n["concerns"].values()) == {"not_checked"}
    assert any("reboot pending" in r for r in n["verdict"]["reasons"])
    assert any("IOMMU is translated" in r for r in n["verdict"]["reasons"])
    html = fr.to_html(rep)
    assert "as desired" not in html and "NEEDS ATTENTION" in html
    assert re.search(r"<b[^>]*>1</b><span>need attention</span>", html)
    md = fr.to_markdown(rep)
    assert "as desired" not in md and "need attention: sim1" in md and "## sim1 (needs attention)" in md


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
    assert not re.search(r'src=|href="(?!#)', html), "no external assets (in-page links only)"
    md = fr.to_markdown(fr.build(nodes))
    assert "## pcie (needs attention)" in md and "play error: &lt;script&gt;" in md and "<script>" not in md
    assert "| GPU2 | 0000:" in md and "CROSS-NUMA" in md


def test_fabric_manager_and_gds_shown(facts):
    f = copy.deepcopy(facts["hgx-h200"])
    f["fabric_manager"] = {"needed": True, "running": False, "pids": []}
    rep = fr.build({"hgx": {"facts": f, "concerns": all_ok(),
                            "gds": {"ok": False, "reasons": ["nvidia-fs not loaded"]}}})
    assert rep["nodes"]["hgx"]["status"] == "attention"
    assert any("nvidia-fabricmanager is not running" in r for r in rep["nodes"]["hgx"]["verdict"]["reasons"])
    html = fr.to_html(rep)
    assert "NEEDED BUT NOT RUNNING" in html and "GDS failing" in html and "nvidia-fs not loaded" in html


EVERY_STATUS = all_ok(
    acs=cm.status("drift", "2 bridges redirect peer-to-peer traffic",
                  [{"concern": "acs", "object": "0000:17:00.0", "key": "acs_ctrl", "current": 29, "desired": 17}]),
    dcb=cm.error("dcb", "dcb -j app show failed: rc=1", task="DCB"),
    rdma_cm=cm.status("not_checked", "the play stopped before rdma_cm"),
    routing=cm.status("not_applicable", "routing is turned off on this node"),
    nccl=cm.status("ok", "corrected 1 item(s)", [{"concern": "nccl", "object": "/etc/nccl.conf", "key": "NCCL_IB_HCA",
                                                  "current": None, "desired": "mlx5"}], corrected=True))


def test_as_desired_only_for_ok_html(facts):
    rep = fr.build({"n": {"facts": facts["hgx-h200"], "concerns": EVERY_STATUS}})
    rows = concern_rows(section(fr.to_html(rep), "n"))
    assert len(rows) == len(cm.CORE)
    expected = {"Kernel command line": ("ok", "as desired"),
                "PCIe ACS": ("drift", "2 bridges redirect peer-to-peer traffic"),
                "DCB (trust, DSCP map, PFC)": ("error", "DCB: dcb -j app show failed: rc=1"),
                "rdma_cm ToS": ("not checked", "the play stopped before rdma_cm"),
                "Rail routing": ("not applicable", "routing is turned off on this node"),
                "NCCL defaults": ("corrected", "corrected 1 item(s)")}
    for title, want in expected.items():
        assert rows[title] == want
    for title, (label, detail) in rows.items():
        assert ("desired" in detail) == (label == "ok"), (title, label, detail)


def test_as_desired_only_for_ok_markdown(facts):
    md = fr.to_markdown(fr.build({"n": {"facts": facts["hgx-h200"], "concerns": EVERY_STATUS}}))
    rows = [line for line in md.splitlines() if line.startswith("| ") and line.split(" | ")[0][2:] in
            cm.TITLES.values()]
    assert len(rows) == len(cm.CORE)
    for line in rows:
        assert ("as desired" in line) == line.split(" | ")[1].startswith("ok"), line
    assert "| Rail routing | NOT APPLICABLE | routing is turned off on this node |" in rows
    assert "| rdma_cm ToS | NOT CHECKED | the play stopped before rdma_cm |" in rows
    assert "| DCB (trust, DSCP map, PFC) | ERROR | DCB: dcb -j app show failed: rc=1 |" in rows


def test_unreachable_node_has_every_concern_not_checked(facts):
    rep = fr.build(nodes_of(facts, gone={"unreachable": True}))
    n = rep["nodes"]["gone"]
    assert n["verdict"]["status"] == "unreachable" and "gone" in rep["summary"]["attention"]
    assert [(k, c["status"], c["reason"]) for k, c in sorted(n["concerns"].items())] == [
        (k, "not_checked", "the node was unreachable") for k in sorted(cm.CORE)]
    html = section(fr.to_html(rep), "gone")
    rows = concern_rows(html)
    assert set(rows.values()) == {("not checked", "the node was unreachable")} and len(rows) == len(cm.CORE)
    assert "UNREACHABLE" in html and "as desired" not in html
    md = fr.to_markdown(rep).split("## gone")[1].split("## hgx")[0]
    assert md.count("| NOT CHECKED | the node was unreachable |") == len(cm.CORE) and "as desired" not in md


def test_not_checked_vs_as_desired(facts):
    rep = fr.build({"a": {"facts": facts["hgx-h200"]}, "b": {"facts": facts["hgx-h200"], "concerns": all_ok()},
                    "c": {"facts": facts["hgx-h200"], "drift": []}})
    html = fr.to_html(rep)
    a, b, c = section(html, "a"), section(html, "b"), section(html, "c")
    assert "not checked" in a and "as desired" not in a
    assert "as desired" in b and "not checked" not in b
    assert "not checked" in c and "as desired" not in c, "an old caller's empty drift list proves nothing"


DIFF_CASES = [
    ("first report", None, lambda n: n, []),
    ("nothing changed", "same", lambda n: n, []),
    ("drift resolved", "same", lambda n: dict(n, pcie=dict(n["pcie"], concerns=all_ok(**drifting(DRIFT[:1])))),
     [("pcie", "concern rdma_cm", "drift -> ok"),
      ("pcie", "drift", "resolved: rdma_cm mlx5_0/1 default_roce_tos: 0 (want 106)")]),
    ("node added", "same", lambda n: dict(n, new={"facts": n["hgx"]["facts"], "concerns": all_ok()}),
     [("new", "node", "added to the report")]),
    ("gds fixed", "same", lambda n: dict(n, pcie=dict(n["pcie"], gds={"ok": True})),
     [("pcie", "gds", "failing -> ok"), ("pcie", "concern gds", "drift -> ok")]),
    ("concern error", "same", lambda n: dict(n, hgx=dict(n["hgx"], concerns=all_ok(nccl=cm.error("nccl", "boom")))),
     [("hgx", "status", "ok -> attention"), ("hgx", "concern nccl", "ok -> error")]),
]


@pytest.mark.parametrize("name,prev,change,expected", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_since_last(facts, name, prev, change, expected):
    base = nodes_of(facts)
    previous = json.loads(fr.to_json(fr.build(base))) if prev else None
    rep = fr.build(change(copy.deepcopy(base)), previous)
    got = [(c["node"], c["what"], c["change"]) for c in rep["changes"]]
    assert got == expected


def test_pair_relation_change_is_listed(facts):
    base = nodes_of(facts)
    previous = json.loads(fr.to_json(fr.build(base)))
    moved = copy.deepcopy(base)
    moved["hgx"]["facts"]["pairing"][0]["relation"] = "SYS"
    got = [(c["what"], c["change"]) for c in fr.build(moved, previous)["changes"]]
    assert ("pair GPU0", "ens1np0 PIX -> ens1np0 SYS") in got


def test_since_a_v1_report(facts):
    """The v1 report (written by the code before the concern statuses) said hgx was ok with an identity-less IOMMU;
    its concerns are not compared, the rest is."""
    with open(V1) as f:
        previous = json.load(f)
    assert previous["schema"] == fr.SCHEMA_V1 and "concerns" not in previous["nodes"]["hgx"]
    nodes = nodes_of(facts)
    nodes["hgx"]["facts"] = facts["hgx-h200"]  # translated, as the v1 report saw it
    rep = fr.build(nodes, previous)
    got = [(c["node"], c["what"], c["change"]) for c in rep["changes"]]
    assert got == [("hgx", "status", "ok -> attention")]
    assert rep["has_previous"] and rep["previous_schema"] == fr.SCHEMA_V1
    assert "holds no concern statuses" in fr.to_html(rep) and "holds no concern statuses" in fr.to_markdown(rep)
    changed = copy.deepcopy(nodes)
    changed["pcie"]["concerns"] = all_ok()
    got = [(c["node"], c["what"], c["change"]) for c in fr.build(changed, previous)["changes"]]
    assert ("pcie", "drift", "resolved: dcb ens1np0 pfc: [] (want [3])") in got
    assert not [g for g in got if g[1].startswith("concern ")]


@pytest.mark.parametrize("previous", [
    {"schema": fr.SCHEMA, "nodes": []},
    {"schema": fr.SCHEMA, "nodes": {"hgx": "oops", "pcie": {"pairs": "x", "drift": [1], "concerns": {"dcb": 3}}}},
    {"schema": fr.SCHEMA_V1, "nodes": {"hgx": {"gds": "yes", "driver": None}}},
    ["not", "a", "report"],
])
def test_a_damaged_previous_report_does_not_crash(facts, previous):
    rep = fr.build(nodes_of(facts), previous)
    assert isinstance(rep["changes"], list)
    fr.to_html(rep)
    fr.to_markdown(rep)


@pytest.mark.parametrize("nodes,match", [
    ([], "mapping"),
    ({"a": 3}, "node a: data must be a mapping"),
    ({"a": {"facts": []}}, "node a: facts must be"),
    ({"a": {"drift": [{"concern": "x"}]}}, "lacks"),
    ({"a": {"gds": {"reasons": []}}}, "node a: gds must be"),
    ({"a": {"facts": {"pairing": [{"gpu": "g", "relation": "FAR"}]}}}, "relation 'FAR'"),
    ({"a": {"concerns": {"acs": {"status": "okay"}}}}, "a: concern acs has status 'okay'"),
    ({"a": {"concerns": {"ib": {"status": "ok"}}}}, "a: unknown concern 'ib'"),
    ({"a": {"concerns": "ok"}}, "node a: concerns must be a mapping"),
])
def test_bad_input(nodes, match):
    """A fleet that is not a mapping fails; a bad node is an error of its own, named in the report."""
    if not isinstance(nodes, dict):
        with pytest.raises(fr.FleetReportError) as e:
            fr.build(nodes)
        assert match in str(e.value)
        return
    rep = fr.build(nodes)
    assert rep["summary"]["attention"] == ["a"]
    assert match in report_mod.unusable_nodes(rep["nodes"])["a"]
