# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Markdown reports (drift and fleet) with hostile node strings, read by a real CommonMark/GFM parser
(markdown-it-py): every string comes out as the literal text it was, and none makes a heading, HTML, a link, an
image, code, emphasis, a quote or a table cell of its own."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest
from fleet_nodes import DRIFT, all_ok, discover_shipped, nodes_of
from markdown_it import MarkdownIt

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufabric.node.plugins.module_utils.report import markdown as md
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as rpt

HOSTILE = [
    "x\n# forged heading",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "**bold** and _em_ and *em*",
    "`code` ``more``",
    "[link](http://evil.example) and <http://auto.example>",
    "![img](http://evil.example/x.png)",
    "[ref]: http://evil.example",
    "[ref] and [ref][]",
    "550.127.05 and 12. twelve",
    "cell | break | here",
    "- a list item",
    "+ another",
    "1. ordered",
    "7) ordered",
    "> a quote",
    "    indented code",
    "```\nfenced\n```",
    "&lt;entity&gt; &amp; &#x3C;",
    "~~strike~~",
    "setext\r\n===",
    "trailing backslash \\",
    "_leading underscore_",
    "#",
    "= heading underline",
    "tab\tand\x00nul\x1b[31m",
]
FORBIDDEN = {"html_block", "html_inline", "link_open", "image", "code_inline", "code_block", "fence", "em_open",
             "strong_open", "s_open", "blockquote_open", "ordered_list_open", "hr"}


def parse(text):
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def literal(s):
    """What the reader should see of ``s``: one line, whitespace and control characters as one space."""
    return re.sub(r"\s+", " ", re.sub(u"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", " ", s)).strip()


def shown(tokens):
    """(headings as (tag, text), every piece of inline text joined) of a parsed document."""
    heads, text = [], []
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            heads.append((t.tag, tokens[i + 1].content))
        for c in t.children or []:
            assert c.type not in FORBIDDEN, (c.type, c.content)
        assert t.type not in FORBIDDEN, (t.type, t.content)
        if t.type == "inline":
            text.append("".join(c.content for c in t.children if c.type == "text"))
    return heads, "\n".join(text)


@pytest.mark.parametrize("s", HOSTILE)
def test_inline_is_literal_text(s):
    tokens = parse("- %s\n\n| a |\n|---|\n| %s |\n\n## %s\n" % (md.inline(s), md.cell(s), md.inline(s)))
    heads, text = shown(tokens)
    assert heads == [("h2", md.inline(s))]
    assert text.split("\n") == [literal(s), "a", literal(s), literal(s)]
    assert [t.type for t in tokens if t.type.endswith("_open")] == [
        "bullet_list_open", "list_item_open", "paragraph_open", "table_open", "thead_open", "tr_open", "th_open",
        "tbody_open", "tr_open", "td_open", "heading_open"]


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    return discover_shipped(tmp_path_factory)


def _hostile_nodes(facts):
    nodes = nodes_of(facts)
    pcie = nodes["pcie"]
    pcie["errors"] = list(HOSTILE)
    pcie["gds"] = {"ok": False, "reasons": list(HOSTILE)}
    pcie["facts"]["gpu_driver"] = dict(pcie["facts"].get("gpu_driver") or {}, version=HOSTILE[1], flavour=HOSTILE[0])
    items = [dict(DRIFT[0], object=s, current=s) for s in HOSTILE[:3]]
    pcie["concerns"] = all_ok(dcb=cm.from_items("dcb", items, True), nccl=cm.error("nccl", HOSTILE[5]))
    nodes["evil\n# host <b>"] = {"facts": nodes["hgx"]["facts"], "concerns": all_ok(), "errors": HOSTILE[-5:]}
    return nodes


def test_drift_report_markdown_with_hostile_strings(facts):
    nodes = _hostile_nodes(facts)
    report = rpt.build(dict((h, dict(n, gds_wanted=False)) for h, n in nodes.items()))
    heads, text = shown(parse(rpt.to_markdown(report, title=HOSTILE[0])))
    assert [h for h in heads if h[0] == "h1"] == [("h1", md.inline(HOSTILE[0]))]
    assert sorted(h[1].split(" (")[0] for h in heads if h[0] == "h2") == sorted(md.inline(h) for h in nodes)
    for s in HOSTILE + ["evil # host <b>"]:
        assert literal(s) in text, s


def test_fleet_report_markdown_with_hostile_strings(facts):
    nodes = _hostile_nodes(facts)
    rep = fr.build(nodes, title=HOSTILE[1], generated=HOSTILE[2])
    heads, text = shown(parse(fr.to_markdown(rep)))
    assert [h for h in heads if h[0] == "h1"] == [("h1", md.inline(HOSTILE[1]))]
    assert sorted(h[1] for h in heads if h[0] == "h2") == sorted(
        ["Since the last report"] + ["%s (needs attention)" % md.inline(h) if h != "hgx" else "hgx (ok)"
                                     for h in nodes])
    for s in HOSTILE + ["evil # host <b>"]:
        assert literal(s) in text, s
