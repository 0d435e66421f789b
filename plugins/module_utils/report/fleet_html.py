# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's HTML page: one static file (inline CSS and SVG, no script, no external assets).

Renders the model ``fleet_report.build`` makes. At the top the fleet: counts, what changed since the last report and
one row per node with its verdict and a badge per concern. Per node: the verdict with its reasons, the status of
every concern (only ``ok`` reads "as desired"), the deviations, the GDS verdict, driver and Fabric Manager, the
GPU<->NIC<->NUMA map drawn as SVG (NUMA nodes as boxes holding their GPUs and RDMA NICs, one line per GPU/NIC pair
coloured by the PCIe relation PIX/PXB/PHB/NODE/SYS, cross-NUMA pairs dashed and marked) and the pair table with the
ACS control of the bridges on each path.

The layout holds at common widths (1024 px and up): tables wrap their cells (long values break anywhere), wide
tables scroll inside their own wrapper instead of running into the next block, grid columns may shrink, the SVG
scales down. ``tests/integration/test_report_render.py`` measures that in Chromium.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report.drift import coverage_text
from ansible_collections.gpufabric.node.plugins.module_utils.report.prom import ACS_REDIRECT_MASK

try:
    from html import escape as _escape
except ImportError:  # pragma: no cover - Python 2 is not a target
    from cgi import escape as _escape

RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
RELATION_TEXT = {
    "PIX": "through at most one PCIe switch",
    "PXB": "through several PCIe switches/bridges",
    "PHB": "through the PCIe host bridge",
    "NODE": "across host bridges of one NUMA node",
    "SYS": "across NUMA nodes (CPU interconnect)",
}
COLORS = {"PIX": "#2e7d32", "PXB": "#1565c0", "PHB": "#ef6c00", "NODE": "#ad1457", "SYS": "#c62828"}
VERDICT_TEXT = {"ok": "OK", "attention": "NEEDS ATTENTION", "unreachable": "UNREACHABLE"}


def esc(v):
    return _escape("" if v is None else str(v), quote=True)


# ----------------------------------------------------------------------------------------------
# SVG

BOX_W, COL_W, ROW_H, ITEM_H, HEAD_H, GAP, PAD = 400, 150, 46, 34, 40, 70, 16


def topology_svg(n, host="node"):
    """One SVG: NUMA boxes side by side, GPUs on the left of each, RDMA NICs on the right, pair lines."""
    numa = n["numa"] or ["?"]
    rows = dict((z, max(len([g for g in n["gpus"] if g["numa"] == z]), len([c for c in n["nics"] if c["numa"] == z]),
                        1)) for z in numa)
    height = HEAD_H + max(rows.values()) * ROW_H + PAD + 40
    width = len(numa) * BOX_W + (len(numa) - 1) * GAP + 2 * PAD
    pos_gpu, pos_nic = {}, {}
    parts = []
    for i, z in enumerate(numa):
        x0 = PAD + i * (BOX_W + GAP)
        parts.append('<g class="numa" data-numa="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="10" '
                     'class="numa-box"/><text x="%d" y="%d" class="numa-label">NUMA node %s</text></g>'
                     % (esc(z), x0, PAD, BOX_W, height - 2 * PAD - 24, x0 + 12, PAD + 24, esc(z)))
        for j, g in enumerate([g for g in n["gpus"] if g["numa"] == z]):
            x, y = x0 + 14, PAD + HEAD_H + j * ROW_H
            pos_gpu[g["bdf"]] = (x, y)
            parts.append('<g class="gpu" data-bdf="%s"><title>GPU%s %s %s (NUMA %s)</title>'
                         '<rect x="%d" y="%d" width="%d" height="%d" rx="5"/>'
                         '<text x="%d" y="%d" class="dev-name">GPU%s</text>'
                         '<text x="%d" y="%d" class="dev-bdf">%s</text></g>'
                         % (esc(g["bdf"]), esc(g["index"]), esc(g["model"]), esc(g["bdf"]), esc(z), x, y, COL_W,
                            ITEM_H, x + 8, y + 15, esc(g["index"]), x + 8, y + 28, esc(g["bdf"])))
        for j, c in enumerate([c for c in n["nics"] if c["numa"] == z]):
            x, y = x0 + BOX_W - 14 - COL_W, PAD + HEAD_H + j * ROW_H
            pos_nic[c["bdf"]] = (x, y)
            name = "/".join(c["netdevs"]) or c["bdf"]
            parts.append('<g class="nic" data-bdf="%s"><title>%s %s %s (NUMA %s)</title>'
                         '<rect x="%d" y="%d" width="%d" height="%d" rx="5"/>'
                         '<text x="%d" y="%d" class="dev-name">%s</text>'
                         '<text x="%d" y="%d" class="dev-bdf">%s %s</text></g>'
                         % (esc(c["bdf"]), esc(name), esc(",".join(c["ibdevs"])), esc(c["bdf"]), esc(z), x, y, COL_W,
                            ITEM_H, x + 8, y + 15, esc(name), x + 8, y + 28, esc(",".join(c["ibdevs"])),
                            esc(c["bdf"])))
    lines = []
    for p in n["pairs"]:
        if p["gpu"] not in pos_gpu or p["nic"] not in pos_nic:
            continue
        gx, gy = pos_gpu[p["gpu"]]
        nx, ny = pos_nic[p["nic"]]
        if nx > gx:
            x1, x2 = gx + COL_W, nx
        else:
            x1, x2 = gx, nx + COL_W
        y1, y2 = gy + ITEM_H // 2, ny + ITEM_H // 2
        cls = "pair rel-%s%s" % (p["relation"], " cross-numa" if p["cross_numa"] else "")
        mx, my = (x1 + x2) // 2, (y1 + y2) // 2
        lines.append('<g class="%s" data-gpu="%s" data-nic="%s"><title>GPU%s - %s: %s (%s)%s</title>'
                     '<path d="M%d %d C%d %d %d %d %d %d" stroke="%s"/>'
                     '<text x="%d" y="%d" class="rel-label" fill="%s">%s</text></g>'
                     % (cls, esc(p["gpu"]), esc(p["nic"]), esc(p["gpu_index"]), esc(p["netdev"]), p["relation"],
                        esc(RELATION_TEXT[p["relation"]]), ", CROSS-NUMA" if p["cross_numa"] else "",
                        x1, y1, mx, y1, mx, y2, x2, y2, COLORS[p["relation"]], mx - 14, my - 4,
                        COLORS[p["relation"]], p["relation"] + (" cross-NUMA" if p["cross_numa"] else "")))
    legend = []
    lx = PAD
    for rel in RELATIONS:
        legend.append('<g class="legend"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="4"/>'
                      '<text x="%d" y="%d">%s</text></g>'
                      % (lx, height - 18, lx + 26, height - 18, COLORS[rel], lx + 32, height - 13, rel))
        lx += 80
    legend.append('<g class="legend"><line x1="%d" y1="%d" x2="%d" y2="%d" class="legend-cross"/>'
                  '<text x="%d" y="%d">cross-NUMA pair</text></g>' % (lx, height - 18, lx + 26, height - 18, lx + 32,
                                                                      height - 13))
    return ('<svg xmlns="http://www.w3.org/2000/svg" class="topo" role="img" viewBox="0 0 %d %d" width="%d" '
            'height="%d" aria-label="GPU, NIC and NUMA map of %s">%s%s%s</svg>'
            % (width, height, width, height, esc(host), "".join(parts), "".join(lines), "".join(legend)))


# ----------------------------------------------------------------------------------------------
# HTML
CSS = """
*,*::before,*::after{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f6f8;color:#1d2733}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c7d0da;font-size:13px}
main{padding:20px 28px;max-width:1500px;overflow-wrap:anywhere}
section{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:0 0 22px;padding:16px 20px}
h2{margin:0 0 10px;font-size:19px}h3{font-size:15px;margin:16px 0 6px}
.badge{display:inline-block;border-radius:10px;padding:2px 9px;font-size:12px;font-weight:600;margin-left:8px;
white-space:nowrap}
.st-ok{background:#e3f3e5;color:#1b5e20}.st-attention{background:#fff1d6;color:#8a4b00}
.st-unreachable{background:#fde2e2;color:#a31515}
.cs{display:inline-block;border-radius:8px;padding:1px 7px;font-size:12px;font-weight:600;white-space:nowrap}
.cs-ok,.cs-fixed,.cs-corrected{background:#e3f3e5;color:#1b5e20}.cs-drift,.cs-not-fixed{background:#fff1d6;color:#8a4b00}
.cs-error{background:#fde2e2;color:#a31515}.cs-not-checked{background:#ece6f5;color:#4a2f7a}
.cs-not-applicable{background:#eceff1;color:#455a64}
.why{background:#fff8e8;border-left:4px solid #e0a100;padding:6px 12px;margin:0 0 10px;font-size:13px}
.why.unreachable{background:#fdeeee;border-color:#c62828}.why ul{margin:4px 0;padding-left:20px}
.fine{color:#1b5e20;font-size:13px;margin:0 0 10px}
.cards{display:flex;gap:14px;flex-wrap:wrap;margin-bottom:18px}
.card{background:#fff;border-radius:10px;padding:12px 16px;box-shadow:0 1px 3px rgba(0,0,0,.12);min-width:130px}
.card b{display:block;font-size:22px}.card b.bad{color:#a31515}.card b.good{color:#1b5e20}
.card span{font-size:12px;color:#5b6875}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:13px;margin:4px 0 8px;max-width:100%}
th,td{border-bottom:1px solid #e3e7eb;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:normal}
td.long{overflow-wrap:anywhere}table.items td{white-space:nowrap}table.items td.long{white-space:normal}
th{background:#eef1f4;font-weight:600}
table.concerns{width:100%}table.concerns td:first-child{width:34%}
table.fleet{font-size:12px}table.fleet td,table.fleet th{overflow-wrap:normal;padding:3px 2px}
table.fleet td:first-child{white-space:nowrap}table.fleet td:first-child .badge{display:block;margin:2px 0 0;width:max-content}
table.fleet .cs{white-space:normal;text-align:center;font-size:11px;padding:1px 3px}
table.fleet th.c{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;vertical-align:bottom;
padding:5px 3px;font-size:11px}
td .sub{display:block;color:#5b6875;font-size:11px}
.bad{color:#a31515;font-weight:600}.good{color:#1b5e20}
p.bad{font-weight:600;overflow-wrap:anywhere}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(380px,100%),1fr));gap:8px 28px}
.grid>*{min-width:0}
svg.topo{display:block;max-width:100%;height:auto;background:#fbfcfd;border:1px solid #e3e7eb;border-radius:8px}
svg .numa-box{fill:#f1f5fa;stroke:#90a4ba;stroke-width:1.5}
svg .numa-label{font-size:14px;font-weight:700;fill:#36506b}
svg .gpu rect{fill:#e8f5e9;stroke:#43a047}svg .nic rect{fill:#e3f2fd;stroke:#1e88e5}
svg .dev-name{font-size:12px;font-weight:700;fill:#1d2733}svg .dev-bdf{font-size:10px;fill:#5b6875}
svg .pair path{fill:none;stroke-width:3;opacity:.9}
svg .pair.cross-numa path{stroke-width:4;stroke-dasharray:9 5}
svg .rel-label{font-size:11px;font-weight:700}
svg .legend text{font-size:11px;fill:#36506b}
svg .legend-cross{stroke:#c62828;stroke-width:4;stroke-dasharray:9 5}
ul.changes li{margin:2px 0;font-size:13px;overflow-wrap:anywhere}
.muted{color:#5b6875;font-size:12px}
"""


def _cell(c):
    """A table cell: a plain value (escaped) or a (html, css class) pair of ready markup."""
    if isinstance(c, tuple):
        html, cls = c
        return '<td%s>%s</td>' % (' class="%s"' % cls if cls else "", html)
    return "<td>%s</td>" % esc(c)


def _table(head, rows, cls=None, scroll=False):
    h = "<tr>%s</tr>" % "".join("<th>%s</th>" % esc(c) for c in head)
    body = "".join("<tr>%s</tr>" % "".join(_cell(c) for c in r) for r in rows)
    table = '<table%s>%s%s</table>' % (' class="%s"' % cls if cls else "", h, body)
    return '<div class="scroll">%s</div>' % table if scroll else table


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _short_bdf(bdf):
    bdf = str(bdf or "")
    return bdf[5:] if bdf.startswith("0000:") else bdf


# the fleet table's one row per node: 13 concern columns have to fit at 1024 px (the full label is the cell's title)
SHORT_LABELS = {"not applicable": "n/a", "not checked": "n/c"}


def status_badge(doc, fixed=False, short=False):
    label, _detail = cm.describe(doc, fixed)
    text = SHORT_LABELS.get(label, label) if short else label
    return '<span class="cs cs-%s">%s</span>' % (label.replace(" ", "-"), esc(text))


def verdict_badge(status, short=False):
    text = VERDICT_TEXT.get(status, status)
    if short and status == "attention":
        text = "ATTENTION"
    return '<span class="badge st-%s">%s</span>' % (esc(status), esc(text))


def _verdict(n):
    v = n["verdict"]
    if v["status"] == "ok":
        return ('<p class="fine">Every concern is ok or not applicable, no reboot is pending and no warning breaks a '
                'data path.</p>')
    head = "Unreachable:" if v["status"] == "unreachable" else "Needs attention:"
    return ('<div class="why %s"><b>%s</b><ul>%s</ul></div>'
            % (esc(v["status"]), head, "".join("<li>%s</li>" % esc(r) for r in v["reasons"])))


def concerns_table(n):
    rows = []
    for name in cm.NAMES:
        doc = n["concerns"].get(name)
        if doc is None:
            continue
        _label, detail = cm.describe(doc)
        rows.append((cm.TITLES[name], (status_badge(doc), None),
                     (esc(detail), "long good" if doc["status"] == cm.OK else "long")))
    return _table(("concern", "status", "detail"), rows, cls="concerns")


def _pairs_table(n):
    rows = []
    for p in n["pairs"]:
        acs = []
        for a in p["acs"]:
            if isinstance(a["ctrl"], int):
                bad = a["ctrl"] & ACS_REDIRECT_MASK
                acs.append('<span class="%s" title="%s">%s 0x%04x</span>'
                           % ("bad" if bad else "good", esc(a["bdf"]), esc(_short_bdf(a["bdf"])), a["ctrl"]))
            else:
                acs.append('<span title="%s">%s</span>' % (esc(a["bdf"]), esc(_short_bdf(a["bdf"]))))
        far = p["cross_numa"] or p["relation"] in ("NODE", "SYS")
        rows.append((("GPU%s<span class=\"sub\">%s</span>" % (esc(p["gpu_index"]), esc(p["gpu"])), None),
                     p["gpu_numa"],
                     ("%s<span class=\"sub\">%s</span>" % (esc(p["netdev"] or "-"), esc(p["ibdev"] or "")), None),
                     p["nic_numa"],
                     (esc(p["relation"]) + ("<span class=\"sub bad\">CROSS-NUMA</span>" if p["cross_numa"] else ""),
                      "bad" if far else None),
                     ("<br>".join(acs) or "-", None)))
    return _table(("GPU", "NUMA", "rail", "NIC NUMA", "PCIe", "ACS ctrl on path"), rows, cls="pairs", scroll=True)


def _node_html(host, n):
    out = ['<section class="node %s" id="node-%s">' % (filter_classes(n), esc(host)),
           '<h2>%s%s</h2>' % (esc(host), verdict_badge(n["status"])), _verdict(n)]
    if n["unreachable"]:
        out.append("<h3>Concerns</h3>%s</section>" % concerns_table(n))
        return "".join(out)
    out.append('<p class="muted">kernel %s &middot; %d GPU(s), %d RDMA NIC(s), %d NVSwitch(es) &middot; IOMMU %s</p>'
               % (esc(n["kernel_release"] or "?"), len(n["gpus"]), len(n["nics"]), n["nvswitches"],
                  esc(n["iommu"] or "unknown")))
    for e in n["errors"]:
        out.append('<p class="bad">Error: %s</p>' % esc(e))
    out.append('<div class="grid"><div><h3>Concerns</h3>')
    out.append(concerns_table(n))
    if n["reboot_required"]:
        out.append('<p class="bad">Reboot pending: the kernel command line changes at the next boot.</p>')
    out.append("</div><div><h3>GPUDirect Storage</h3>")
    if n["gds"] is None:
        out.append('<p class="muted">No GDS verdict given%s.</p>' % (" (GDS is wanted on this node)"
                                                                     if n["gds_wanted"] else ""))
    else:
        ok = n["gds"]["ok"]
        out.append('<p><span class="%s">%s</span></p>' % ("good" if ok else "bad", "GDS works" if ok else "GDS failing"))
        if n["gds"]["reasons"]:
            out.append('<ul class="changes">%s</ul>' % "".join("<li>%s</li>" % esc(r) for r in n["gds"]["reasons"]))
    nv = n["nvidia_fs"]
    out.append('<p class="muted">nvidia-fs: %s; storage modules hooked: %s; IOMMU: %s</p>'
               % ("loaded " + esc(nv["version"] or "") if nv["loaded"] else "not loaded",
                  esc(", ".join(nv["modules"]) or "none"), esc(n["iommu"] or "unknown")))
    out.append("<h3>Driver and Fabric Manager</h3>")
    drv, fm = n["driver"], n["fabric_manager"]
    out.append(_table(("component", "state"), [
        ("GPU kernel module", (esc("%s %s" % (drv["flavour"] or "unknown", drv["version"] or "")),
                               "good" if drv["flavour"] == "open" else "bad")),
        ("Fabric Manager", (esc("not needed (no NVSwitch)" if not fm["needed"] else
                                ("running" if fm["running"] else "NEEDED BUT NOT RUNNING (CUDA error 802)")),
                            "bad" if fm["needed"] and not fm["running"] else "good"))]))
    if n["warnings"]:
        out.append("<h3>Warnings</h3>")
        out.extend('<p class="bad">%s</p>' % esc(w) for w in n["warnings"])
    out.append("</div></div>")
    if n["drift"]:
        rows = []
        for i in n["drift"]:
            fixed = n["concerns"].get(i["concern"], {}).get("corrected")
            rows.append((i["concern"], i["object"], i["key"],
                         (esc(_fmt(i["current"])), "long" if fixed else "long bad"),
                         (esc(_fmt(i["desired"])), "long good"), "corrected" if fixed else "drift"))
        out.append("<h3>Deviations</h3>")
        out.append(_table(("concern", "object", "setting", "current", "desired", ""), rows, cls="items", scroll=True))
    out.append("<h3>GPU &harr; NIC map</h3>")
    out.append(topology_svg(n, host))
    out.append("<h3>GPU &harr; NIC pairs</h3>")
    if n["pairs"]:
        out.append(_pairs_table(n))
        out.append('<p class="muted">ACS ctrl in red: ReqRedir, CmpltRedir or EgressCtrl set, peer-to-peer traffic '
                   'is redirected upstream.</p>')
    else:
        out.append('<p class="muted">No GPU/NIC pairs.</p>')
    out.append("</section>")
    return "".join(out)


# --- the fleet at a glance: problem nodes first, ok nodes collapsed, a filter by concern and status ------------
# The filter needs no script: radio buttons (the first children of <main>, visually hidden, their labels in the
# fleet section) and one CSS rule per (concern, status) choice that hides the node rows and sections without the
# matching class. A node's classes name only its concerns that are not ok, so an ok node's row stays short.
STATUS_CODES = {cm.DRIFT: "d", cm.ERROR: "e", cm.NOT_CHECKED: "nc", cm.NOT_APPLICABLE: "na"}
# the status choices: (code, label); "p" (problem): a concern in drift, error or not checked, or (any concern) a node
# whose verdict is not ok; "ok": the concern ok, or (any concern) a node whose verdict is ok
STATUS_CHOICES = (("any", "any"), ("p", "problem"), ("ok", "ok"), ("d", "drift"), ("e", "error"),
                  ("nc", "not checked"), ("na", "not applicable"))
BAD = (cm.DRIFT, cm.ERROR, cm.NOT_CHECKED)
# up to this many ok nodes keep their full section (map, pairs), collapsed; beyond it they are rows of the fleet
# table only (the JSON report has every node's facts): 13-14 kB of HTML per 8-GPU node would make 1,000 nodes 14 MB
OK_SECTIONS_MAX = 50
# the changes since the last report the page lists (the JSON and Markdown list them all)
CHANGES_SHOWN = 200
FILTER_CSS = """
.fsel{position:absolute;width:1px;height:1px;margin:0;opacity:0;overflow:hidden;clip-path:inset(50%)}
.filters{font-size:12px;margin:0 0 8px;line-height:2}.filters b{margin-right:4px}
.filters label{display:inline-block;border:1px solid #c5ced8;border-radius:8px;padding:0 7px;margin:0 2px;
cursor:pointer;line-height:18px;background:#fff}
details.ok-nodes>summary{cursor:pointer;font-weight:600;font-size:14px;margin:8px 0}
"""


def problem_rank(n):
    """Where a node goes in the page, worst first: unreachable, error, drift, not checked, other attention, ok."""
    c = n["counts"]
    if n["unreachable"]:
        return 0
    if n["errors"] or c[cm.ERROR]:
        return 1
    if c[cm.DRIFT]:
        return 2
    if c[cm.NOT_CHECKED]:
        return 3
    return 4 if n["status"] != cm.OK else 5


def ordered(rep):
    """The report's (host, node) pairs, problem nodes first (``problem_rank``, then by name), ok nodes last."""
    return sorted(rep["nodes"].items(), key=lambda hn: (problem_rank(hn[1]), hn[0]))


def filter_classes(n):
    """The classes the filter's rules match on a node's row and section."""
    cls = ["n"] + (["p"] if n["status"] != cm.OK else [])
    seen = set()
    for name in sorted(n["concerns"]):
        status = n["concerns"][name]["status"]
        if status == cm.OK:
            continue
        seen.add(status)
        cls += ["f-%s-%s" % (name, STATUS_CODES[status]), "f-%s-n" % name]
        if status in BAD:
            cls.append("f-%s-b" % name)
    cls += ["f-any-%s" % STATUS_CODES[s] for s in cm.STATUSES if s in seen]
    return " ".join(cls)


def _hide(concern, code):
    """The selector of the node rows and sections a (concern, status) choice hides (None: it hides nothing)."""
    if code == "any":
        return None
    if concern == "any":
        which = {"p": ":not(.p)", "ok": ".p"}.get(code, ":not(.f-any-%s)" % code)
    else:
        which = {"p": ":not(.f-%s-b)" % concern, "ok": ".f-%s-n" % concern}.get(
            code, ":not(.f-%s-%s)" % (concern, code))
    return "#fc-%s:checked~#fs-%s:checked~* .n%s" % (concern, code, which)


def filter_css(names):
    """The filter's rules for the concerns ``names``: what each choice hides, the chosen and focused labels."""
    hide = [h for c in ("any",) + tuple(names) for code, _label in STATUS_CHOICES for h in [_hide(c, code)] if h]
    ids = ["fc-%s" % c for c in ("any",) + tuple(names)] + ["fs-%s" % code for code, _label in STATUS_CHOICES]
    return (FILTER_CSS + ",".join(hide) + "{display:none}"
            + ",".join("#%s:checked~* label[for=%s]" % (i, i) for i in ids)
            + "{background:#1d2733;color:#fff;border-color:#1d2733}"
            + ",".join("#%s:focus-visible~* label[for=%s]" % (i, i) for i in ids) + "{outline:2px solid #1565c0}")


def filter_inputs(names):
    out = ['<input type="radio" class="fsel" name="fc" id="fc-any" checked aria-label="any concern">']
    out += ['<input type="radio" class="fsel" name="fc" id="fc-%s" aria-label="concern %s">' % (c, c) for c in names]
    out += ['<input type="radio" class="fsel" name="fs" id="fs-%s"%s aria-label="status %s">'
            % (code, " checked" if code == "any" else "", label) for code, label in STATUS_CHOICES]
    return "".join(out)


def filter_labels(names):
    concerns = "".join('<label for="fc-%s" title="%s">%s</label>' % (c, esc(cm.TITLES[c]), esc(c)) for c in names)
    statuses = "".join('<label for="fs-%s">%s</label>' % (code, esc(label)) for code, label in STATUS_CHOICES)
    return ('<div class="filters"><b>Concern:</b><label for="fc-any" title="any concern">any</label>%s<br>'
            '<b>Status:</b>%s</div>' % (concerns, statuses))


def _fleet_rows(rows, names):
    out = []
    for host, n in rows:
        cells = []
        for x in names:
            doc = n["concerns"].get(x)
            if doc is None:
                cells.append("<td>-</td>")
            elif doc["status"] == cm.OK and not doc.get("corrected"):
                cells.append('<td>%s</td>' % OK_BADGE)
            else:
                cells.append('<td title="%s">%s</td>' % (esc(cm.describe(doc)[1]), status_badge(doc, short=True)))
        out.append('<tr class="%s"><td><a href="#node-%s">%s</a>%s</td>%s</tr>'
                   % (filter_classes(n), esc(host), esc(host), verdict_badge(n["status"], short=True), "".join(cells)))
    return "".join(out)


OK_BADGE = '<span class="cs cs-ok">ok</span>'


def concern_names(rep):
    return [x for x in cm.NAMES if any(x in n["concerns"] for n in rep["nodes"].values())]


def _fleet_table(rep, names):
    head = '<tr><th>node</th>%s</tr>' % "".join(
        '<th class="c" title="%s">%s</th>' % (esc(cm.TITLES[x]), esc(x)) for x in names)
    nodes = ordered(rep)
    bad = [hn for hn in nodes if hn[1]["status"] != cm.OK]
    ok = [hn for hn in nodes if hn[1]["status"] == cm.OK]
    out = [filter_labels(names)]
    if bad:
        out.append('<div class="scroll"><table class="fleet problems">%s%s</table></div>'
                   % (head, _fleet_rows(bad, names)))
    else:
        out.append('<p class="fine">No node needs attention.</p>')
    if ok:
        out.append('<details class="ok-nodes"><summary>%d ok node(s): every concern ok or not applicable</summary>'
                   '<div class="scroll"><table class="fleet oks">%s%s</table></div></details>'
                   % (len(ok), head, _fleet_rows(ok, names)))
    out.append('<p class="muted">Problem nodes first (unreachable, error, drift, not checked, other attention), then '
               'the ok nodes, collapsed. n/a: not applicable, n/c: not checked; a cell\'s tooltip gives the reason. The '
               'filter shows the nodes where the chosen concern (any: some concern) has the chosen status.</p>')
    return "".join(out)


def _coverage_html(rep):
    c = rep.get("coverage")
    if not c or c.get("complete") is not False:
        return ""
    return '<div class="why"><b>Partial report:</b> %s</div>' % esc(coverage_text(c))


def to_html(rep):
    s = rep["summary"]
    names = concern_names(rep)
    head = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>%s</title><style>%s%s</style></head><body>' % (esc(rep["title"]), CSS, filter_css(names)))
    sub = ["generated %s" % esc(rep["generated"])] if rep.get("generated") else []
    if rep.get("coverage"):
        sub.append(esc(coverage_text(dict(rep["coverage"], left_out=None))))
    body = ['<header><h1>%s</h1><p>%s</p></header><main>%s'
            % (esc(rep["title"]), " &middot; ".join(sub), filter_inputs(names))]
    body.append(_coverage_html(rep))
    body.append('<div class="cards">'
                '<div class="card"><b>%d</b><span>nodes</span></div>'
                '<div class="card"><b class="%s">%d</b><span>ok</span></div>'
                '<div class="card"><b class="%s">%d</b><span>need attention</span></div>'
                '<div class="card"><b class="%s">%d</b><span>concerns not checked</span></div>'
                '<div class="card"><b>%d</b><span>drift items</span></div>'
                '<div class="card"><b class="%s">%d</b><span>cross-NUMA GPU/NIC pairs</span></div>'
                '<div class="card"><b>%d</b><span>changes since last report</span></div></div>'
                % (s["nodes"], "good" if s["ok"] else "", len(s["ok"]), "bad" if s["attention"] else "good",
                   len(s["attention"]), "bad" if s["statuses"][cm.NOT_CHECKED] else "good",
                   s["statuses"][cm.NOT_CHECKED], s["drift_items"], "bad" if s["cross_numa_pairs"] else "good",
                   s["cross_numa_pairs"], len(rep["changes"])))
    body.append('<section class="fleet"><h2>Concerns per node</h2>%s</section>' % _fleet_table(rep, names))
    body.append('<section class="since"><h2>Since the last report</h2>')
    if not rep.get("has_previous"):
        body.append('<p class="muted">No previous report in this directory.</p>')
    else:
        if rep.get("previous_schema") and rep["previous_schema"] != rep["schema"]:
            body.append('<p class="muted">The previous report (%s) holds no concern statuses; they are compared from '
                        'the next report on.</p>' % esc(rep["previous_schema"]))
        if not rep["changes"]:
            body.append('<p class="muted">Nothing changed since %s.</p>'
                        % esc(rep.get("previous_generated") or "the previous report"))
        else:
            body.append('<ul class="changes">%s</ul>' % "".join(
                "<li><b>%s</b> %s: %s</li>" % (esc(c["node"]), esc(c["what"]), esc(c["change"]))
                for c in rep["changes"][:CHANGES_SHOWN]))
            if len(rep["changes"]) > CHANGES_SHOWN:
                body.append('<p class="muted">and %d more (the JSON and Markdown reports list them all).</p>'
                            % (len(rep["changes"]) - CHANGES_SHOWN))
    body.append("</section>")
    nodes = ordered(rep)
    # the sections in one block after the filter's inputs: its rules reach what lies inside the inputs' later siblings
    body.append('<div class="nodes">')
    body.extend(_node_html(h, n) for h, n in nodes if n["status"] != cm.OK)
    ok = [(h, n) for h, n in nodes if n["status"] == cm.OK]
    if ok and len(ok) <= OK_SECTIONS_MAX:
        body.append('<details class="ok-nodes"><summary>The %d ok node(s) in detail</summary>%s</details>'
                    % (len(ok), "".join(_node_html(h, n) for h, n in ok)))
    elif ok:
        body.append('<p class="muted">The maps and pairs of the %d ok nodes are left out of this page (it shows them '
                    'for up to %d ok nodes); the JSON report has every node\'s facts.</p>' % (len(ok), OK_SECTIONS_MAX))
    body.append("</div></main></body></html>\n")
    return head + "".join(body)
