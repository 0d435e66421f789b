# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's HTML of a simulated fleet, opened in headless Chromium (Debian package ``chromium``).

The facts are discovered from simulated node trees (hgx-h200: 8 GPUs, 2 ACS bridges on every GPU/NIC path;
pcie-4gpu-crossnuma) with concern statuses of every kind; the page must render to a non-trivial screenshot without
console errors. A canary page with a console error proves the detection works.

Layout: the page is rendered at 1400, 1280 and 1024 px with a small script injected into a copy of it (the report
itself has no script) that measures every element's box and writes what it finds into the DOM, which Chromium
dumps (``--dump-dom``): no element may stick out of its section or its grid column, no table cell's content may
overflow the cell, no wrapper may need to scroll, the page may not scroll sideways and no two blocks (tables, the
SVG map, headings, paragraphs, lists) may overlap. A canary re-creates the old layout (cells that do not wrap, grid
columns that do not shrink, wrappers that do not clip) and the check must object to it. With
``GPUFABRIC_REPORT_SCREENSHOT_DIR`` set, the screenshots are copied there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (os.path.join(REPO, ".build"), os.path.join(REPO, "tests", "lab")):
    if p not in sys.path:
        sys.path.insert(0, p)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--hide-scrollbars"]
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)$", re.M)


def screenshot(html_path, png_path, profile, size="1500,2600"):
    argv = [CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--window-size=%s" % size,
                                 "--screenshot=%s" % png_path, "file://%s" % html_path]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    return p.returncode, p.stdout + p.stderr


def png_pixels(path):
    """(width, height, decompressed scanlines) of a PNG, read with the standard library."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def _concerns(**over):
    from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
    out = dict((n, cm.status(cm.OK)) for n in cm.CORE)
    out.update(over)
    return out


def fleet_nodes(tmp_path):
    from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
    from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
    from gpufabric_sim import topology as sim_topology
    from gpufabric_sim import tree
    facts = {}
    for i, (host, topo) in enumerate((("hgx-a", "hgx-h200"), ("pcie-b", "pcie-4gpu-crossnuma")), 1):
        root = str(tmp_path / host)
        os.makedirs(root)
        tree.build_tree(root, sim_topology.load(topo), i)
        facts[host] = topology.discover(Sysroot(root), ["all"])
    acs_items = [{"concern": "acs", "object": b["bdf"], "key": "acs_ctrl", "current": "0x001d", "desired": "0x0011"}
                 for b in facts["hgx-a"]["path_bridges"] if b["acs"]["present"]]
    long_cmdline = " ".join("option%d=value%d" % (i, i) for i in range(40))
    return {
        "hgx-a": {"facts": facts["hgx-a"], "reboot_required": True, "gds_wanted": True,
                  "gds": {"ok": False, "reasons": ["IOMMU in translated mode: DMA chunks 4096 != 1, EIO"]},
                  "concerns": _concerns(
                      acs=cm.status(cm.DRIFT, "%d bridges redirect peer-to-peer traffic" % len(acs_items), acs_items),
                      cmdline=cm.status(cm.DRIFT, "kernel arguments differ", [
                          {"concern": "cmdline", "object": "grub", "key": "GRUB_CMDLINE_LINUX",
                           "current": long_cmdline, "desired": long_cmdline + " iommu=pt"}]),
                      routing=cm.status(cm.NOT_APPLICABLE, "routing is turned off (rail_network_routing: false)"),
                      nccl=cm.status(cm.ERROR, "nccl_config: cannot write /etc/nccl.conf: " + "x" * 300))},
        "pcie-b": {"facts": facts["pcie-b"],
                   "gds": {"ok": False, "reasons": ["IOMMU in translated mode: DMA chunks 4096 != 1, EIO"]},
                   "concerns": _concerns(
                       dcb=cm.status(cm.DRIFT, "1 item(s) differ", [
                           {"concern": "dcb", "object": "ens2np0", "key": "pfc", "current": [], "desired": [3]}]),
                       sysctl=cm.status(cm.DRIFT, "1 item(s) differ", [
                           {"concern": "sysctl", "object": "ens1np0", "key": "arp_ignore", "current": 0,
                            "desired": 1}]))},
        "gone-c": {"unreachable": True},
    }


def fleet_html(tmp_path, nodes=None):
    from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
    nodes = nodes or fleet_nodes(tmp_path)
    previous = fr.build(dict(nodes, **{"pcie-b": dict(nodes["pcie-b"], concerns=_concerns())}))
    rep = fr.build(nodes, previous, title="gpufabric fleet report (simulated)", generated="2024-06-01T12:00:00Z")
    path = str(tmp_path / "fleet-report.html")
    with open(path, "w") as f:
        f.write(fr.to_html(rep))
    return path, rep


def test_canary_console_error_is_detected(tmp_path):
    page = tmp_path / "canary.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("canary-broken")</script></body></html>')
    rc, log = screenshot(str(page), str(tmp_path / "c.png"), str(tmp_path / "profile"), size="400,300")
    assert rc == 0, log[-3000:]
    assert any("canary-broken" in m for m in CONSOLE.findall(log)), log[-3000:]


def test_fleet_report_renders(tmp_path):
    html, _rep = fleet_html(tmp_path)
    png = str(tmp_path / "fleet-report.png")
    rc, log = screenshot(html, png, str(tmp_path / "profile"))
    assert rc == 0, log[-3000:]
    assert CONSOLE.findall(log) == [], "console messages: %s" % CONSOLE.findall(log)
    assert os.path.getsize(png) > 50000, "screenshot suspiciously small"
    width, height, raw = png_pixels(png)
    assert (width, height) == (1500, 2600)
    assert len(set(raw[:1 << 20])) > 40, "screenshot looks like one colour"
    out = os.environ.get("GPUFABRIC_REPORT_SCREENSHOT")
    if out:
        shutil.copyfile(png, out)


# Measures the laid-out page and writes the problems it finds into <pre id="layout-check"> as JSON.
LAYOUT_CHECK = r"""<script>
(function () {
  var out = [], slack = 0.5;
  function box(e) { return e.getBoundingClientRect(); }
  function name(e) {
    var t = (e.textContent || "").replace(/\s+/g, " ").trim().slice(0, 60);
    return e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined && e.className ?
      "." + String(e.className).split(" ").join(".") : "") + ' "' + t + '"';
  }
  function skipped(e, top) {  // inside the SVG or inside a scroll wrapper below top: measured there
    if (e.closest("svg") && e.tagName.toLowerCase() !== "svg") return true;
    var s = e.parentElement && e.parentElement.closest(".scroll");
    return s && top.contains(s) && s !== top;
  }
  function inside(container, what) {
    var c = box(container);
    container.querySelectorAll("*").forEach(function (e) {
      if (skipped(e, container)) return;
      var b = box(e);
      if (b.width === 0 && b.height === 0) return;
      if (b.right > c.right + slack || b.left < c.left - slack)
        out.push(what + " " + name(container).slice(0, 40) + " is overflowed by " + name(e) +
                 " (" + Math.round(b.left) + ".." + Math.round(b.right) + " vs " + Math.round(c.left) + ".." +
                 Math.round(c.right) + ")");
    });
  }
  var root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + slack)
    out.push("the page scrolls sideways: " + root.scrollWidth + " > " + root.clientWidth);
  document.querySelectorAll("main section").forEach(function (s) { inside(s, "section"); });
  document.querySelectorAll(".grid > *").forEach(function (c) { inside(c, "grid column"); });
  document.querySelectorAll(".scroll").forEach(function (s) {
    if (s.scrollWidth > s.clientWidth + slack) out.push("needs to scroll: " + name(s.firstElementChild));
  });
  document.querySelectorAll("main *").forEach(function (e) {  // text or children sticking out of a block
    if (e.clientWidth === 0 || e.classList.contains("scroll") || skipped(e, document.body)) return;
    if (e.scrollWidth > e.clientWidth + slack) out.push("content overflows: " + name(e));
  });
  document.querySelectorAll("main td:not(.long), main th").forEach(function (c) {  // a name broken mid-word
    var walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), t;
    while ((t = walk.nextNode())) {
      var word = t.textContent.trim();
      if (!word || /\s/.test(word)) continue;
      var r = document.createRange();
      r.selectNodeContents(t);
      if (r.getClientRects().length > 1) out.push("word broken across lines: " + word + " in " + name(c));
    }
  });
  var blocks = Array.prototype.slice.call(document.querySelectorAll("main table, main svg.topo, main h2, main h3, " +
                                                                     "main p, main ul, main .why"));
  for (var i = 0; i < blocks.length; i++) {
    var a = box(blocks[i]);
    for (var j = i + 1; j < blocks.length; j++) {
      if (blocks[i].contains(blocks[j]) || blocks[j].contains(blocks[i])) continue;
      var b = box(blocks[j]);
      if (a.left < b.right - slack && b.left < a.right - slack && a.top < b.bottom - slack && b.top < a.bottom - slack)
        out.push("overlap: " + name(blocks[i]) + " and " + name(blocks[j]));
    }
  }
  var pre = document.createElement("pre");
  pre.id = "layout-check";
  pre.setAttribute("data-width", String(root.clientWidth));
  pre.setAttribute("data-sections", String(document.querySelectorAll("main section").length));
  pre.setAttribute("data-cells", String(document.querySelectorAll("td").length));
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""
RESULT = re.compile(r'<pre id="layout-check" data-width="(\d+)" data-sections="(\d+)" data-cells="(\d+)">(.*?)</pre>',
                    re.S)


def layout_problems(html_path, width, tmp_path, tag, extra_css=""):
    """(problems, clientWidth, sections, cells, screenshot path) of the page at ``width`` px."""
    with open(html_path) as f:
        page = f.read()
    probe = str(tmp_path / ("probe-%s.html" % tag))
    with open(probe, "w") as f:
        f.write(page.replace("</body>", "%s%s</body>" % ("<style>%s</style>" % extra_css if extra_css else "",
                                                         LAYOUT_CHECK)))
    png = str(tmp_path / ("fleet-%s.png" % tag))
    argv = [CHROMIUM] + [f for f in FLAGS if f != "--hide-scrollbars"] + [
        "--user-data-dir=%s" % (tmp_path / ("profile-%s" % tag)), "--window-size=%d,4200" % width, "--dump-dom",
        "--screenshot=%s" % png, "file://%s" % probe]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                       check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert CONSOLE.findall(p.stderr) == [], "console messages: %s" % CONSOLE.findall(p.stderr)
    m = RESULT.search(p.stdout)
    assert m, "the layout check left no result: %s" % p.stdout[-2000:]
    text = m.group(4).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return json.loads(text), int(m.group(1)), int(m.group(2)), int(m.group(3)), png


@pytest.fixture(scope="module")
def wide_fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    path, rep = fleet_html(tmp)
    return path, rep, tmp


def test_fixture_is_an_8_gpu_node_with_2_acs_bridges_per_path(wide_fleet):
    _path, rep, _tmp = wide_fleet
    hgx = rep["nodes"]["hgx-a"]
    assert len(hgx["gpus"]) == 8 and len(hgx["pairs"]) == 8
    assert [len(p["acs"]) for p in hgx["pairs"]] == [2] * 8


@pytest.mark.parametrize("width", [1400, 1280, 1024])
def test_layout_holds_at_common_widths(wide_fleet, width):
    path, _rep, tmp = wide_fleet
    problems, client, sections, cells, png = layout_problems(path, width, tmp, str(width))
    assert client <= width and client > width - 40, "rendered %d px wide, not about %d" % (client, width)
    assert sections == 5 and cells > 150, "the page the check measured is not the whole report"
    assert problems == [], "\n".join(problems[:30])
    assert os.path.getsize(png) > 50000, "screenshot suspiciously small"
    out = os.environ.get("GPUFABRIC_REPORT_SCREENSHOT_DIR")
    if out:
        shutil.copyfile(png, os.path.join(out, "fleet-report-%d.png" % width))


# the old layout: cells that never wrap, grid columns that never shrink, wrappers that do not clip
OLD_LAYOUT = (".scroll{overflow:visible!important}td,th{overflow-wrap:normal!important;white-space:nowrap!important}"
              ".grid{grid-template-columns:repeat(2,minmax(420px,1fr))!important}.grid>*{min-width:auto!important}")
# names squeezed into narrow columns, broken anywhere
SQUEEZED = "td,th{overflow-wrap:anywhere!important}table.pairs{width:260px!important}"
CANARIES = [("old layout", OLD_LAYOUT, ("section", "grid column", "overlap:")),
            ("squeezed names", SQUEEZED, ("word broken across lines: ens1np0",))]


@pytest.mark.parametrize("name,css,expected", CANARIES, ids=[c[0] for c in CANARIES])
def test_layout_check_catches_a_broken_layout(wide_fleet, name, css, expected):
    path, _rep, tmp = wide_fleet
    problems, _client, _sections, _cells, _png = layout_problems(path, 1024, tmp, name.replace(" ", "-"), css)
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems[:10])


# Chooses each (concern, status) of the filter in turn (as a click on its labels would) and records the node rows and
# sections left visible; writes {"concern/status": [visible rows], ...} into <pre id="filter-check">.
FILTER_CHECK = r"""<script>
(function () {
  var out = {}, choices = %s;
  function shown(sel) {
    return Array.prototype.filter.call(document.querySelectorAll(sel), function (e) {
      return getComputedStyle(e).display !== "none";
    }).map(function (e) { return e.id ? e.id.replace("node-", "") : e.querySelector("a").textContent; });
  }
  choices.forEach(function (c) {
    document.getElementById("fc-" + c[0]).checked = true;
    document.getElementById("fs-" + c[1]).checked = true;
    out[c[0] + "/" + c[1]] = {rows: shown("table.fleet tr.n"), sections: shown("section.node")};
  });
  var pre = document.createElement("pre");
  pre.id = "filter-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""
PROBLEMS = ["gone-c", "hgx-a", "pcie-b"]  # unreachable, error (nccl), drift: worst first
FILTERS = [
    (("any", "any"), PROBLEMS + ["ok-d", "ok-e"]),
    (("any", "p"), PROBLEMS),
    (("any", "ok"), ["ok-d", "ok-e"]),
    (("any", "nc"), ["gone-c"]),
    (("any", "d"), ["hgx-a", "pcie-b"]),
    (("dcb", "d"), ["pcie-b"]),
    (("nccl", "e"), ["hgx-a"]),
    (("routing", "na"), ["hgx-a"]),
    (("acs", "ok"), ["pcie-b", "ok-d", "ok-e"]),
    (("sysctl", "p"), ["gone-c", "pcie-b"]),
    (("dcb", "any"), PROBLEMS + ["ok-d", "ok-e"]),
]


def test_filter_by_concern_and_status_in_a_browser(tmp_path):
    """Problem nodes first, ok nodes after them (collapsed), and the script-free filter shows exactly the nodes
    whose chosen concern (any: some concern) has the chosen status, in the fleet table and in the node sections."""
    nodes = fleet_nodes(tmp_path)
    nodes.update({"ok-d": {"concerns": _concerns()}, "ok-e": {"concerns": _concerns()}})
    path, _rep = fleet_html(tmp_path, nodes)
    with open(path) as f:
        page = f.read()
    assert "<script" not in page
    probe = str(tmp_path / "filter-probe.html")
    with open(probe, "w") as f:
        f.write(page.replace("</body>", FILTER_CHECK % json.dumps([list(c) for c, _want in FILTERS]) + "</body>"))
    argv = [CHROMIUM] + FLAGS + ["--user-data-dir=%s" % (tmp_path / "profile-filter"), "--window-size=1280,2000",
                                 "--dump-dom", "file://%s" % probe]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                       check=False)
    assert p.returncode == 0 and CONSOLE.findall(p.stderr) == [], p.stderr[-3000:]
    m = re.search(r'<pre id="filter-check">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stdout[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    for (concern, status), want in FILTERS:
        seen = got["%s/%s" % (concern, status)]
        assert seen["rows"] == want, (concern, status, seen)
        # the ok nodes (two, under the page's limit) keep their sections, collapsed after the problem nodes'
        assert seen["sections"] == want, (concern, status, seen)
