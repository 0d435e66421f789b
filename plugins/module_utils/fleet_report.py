# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet report for people: one static HTML page (inline CSS and SVG, no external assets), JSON and Markdown.

Per node: the GPU<->NIC<->NUMA map drawn as SVG (NUMA nodes as boxes holding their GPUs and RDMA NICs, one line per
GPU/NIC pair coloured by the PCIe relation PIX/PXB/PHB/NODE/SYS, cross-NUMA pairs dashed and marked), the pair
table, the configured state against the desired one (the drift items the roles export, normalised by
``report.build``), the GDS verdict with its reasons, driver and Fabric Manager state, and what changed since the
previous report (its JSON, read by the caller).

Pure functions; the ``fleet_report`` module reads the previous JSON and writes the files.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufabric.node.plugins.module_utils import report as drift_report

try:
    from html import escape as _escape
except ImportError:  # pragma: no cover - Python 2 is not a target
    from cgi import escape as _escape

SCHEMA = "gpufabric.fleet/v1"
RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")
RELATION_TEXT = {
    "PIX": "through at most one PCIe switch",
    "PXB": "through several PCIe switches/bridges",
    "PHB": "through the PCIe host bridge",
    "NODE": "across host bridges of one NUMA node",
    "SYS": "across NUMA nodes (CPU interconnect)",
}
COLORS = {"PIX": "#2e7d32", "PXB": "#1565c0", "PHB": "#ef6c00", "NODE": "#ad1457", "SYS": "#c62828"}
CONCERNS = (("acs", "PCIe ACS"), ("dcb", "DCB (trust, DSCP map, PFC)"), ("rdma_cm", "rdma_cm ToS"),
            ("sysctl", "Rail sysctls"), ("routing", "Rail routing"), ("cmdline", "Kernel command line"),
            ("nccl", "NCCL defaults"))


class FleetReportError(ValueError):
    """Input the report cannot be built from."""


def esc(v):
    return _escape("" if v is None else str(v), quote=True)


def _numa(v):
    return "?" if v is None or v == -1 else str(v)


# ----------------------------------------------------------------------------------------------
# model


def _node_model(host, data, drift_node):
    facts = data.get("facts")
    facts = {} if facts is None else facts
    if not isinstance(facts, dict):
        raise FleetReportError("node %s: facts must be the gpufabric facts mapping" % host)
    gpus = [dict(index=g.get("index"), bdf=g.get("bdf"), numa=_numa(g.get("numa")), model=g.get("model") or "GPU")
            for g in facts.get("gpus") or []]
    nics = []
    for n in facts.get("nics") or []:
        if not n.get("rdma"):
            continue
        nics.append(dict(bdf=n.get("bdf"), numa=_numa(n.get("numa")), netdevs=list(n.get("netdevs") or []),
                         ibdevs=list(n.get("ibdevs") or [])))
    bridges = dict((b.get("bdf"), b) for b in facts.get("path_bridges") or [])
    pairs = []
    for p in facts.get("pairing") or []:
        rel = p.get("relation")
        if rel not in RELATIONS:
            raise FleetReportError("node %s: GPU %s has PCIe relation %r (one of %s)"
                                   % (host, p.get("gpu"), rel, ", ".join(RELATIONS)))
        acs = []
        for b in p.get("bridges") or []:
            info = (bridges.get(b) or {}).get("acs") or {}
            if info.get("present"):
                acs.append({"bdf": b, "ctrl": info.get("ctrl")})
        pairs.append(dict(gpu=p.get("gpu"), gpu_index=p.get("gpu_index"), nic=p.get("nic"), netdev=p.get("netdev"),
                          ibdev=p.get("ibdev"), relation=rel, gpu_numa=_numa(p.get("gpu_numa")),
                          nic_numa=_numa(p.get("nic_numa")), cross_numa=bool(p.get("cross_numa")), acs=acs))
    numa = [str(n.get("node")) for n in facts.get("numa_nodes") or []]
    for x in gpus + nics:
        if x["numa"] not in numa:
            numa.append(x["numa"])
    gds = data.get("gds")
    if gds is not None:
        if not isinstance(gds, dict) or "ok" not in gds:
            raise FleetReportError("node %s: gds must be {ok: bool, reasons: [str]}" % host)
        gds = {"ok": bool(gds["ok"]), "reasons": [str(r) for r in gds.get("reasons") or []]}
    iommu = facts.get("iommu") or {}
    nvfs = facts.get("nvidia_fs") or {}
    fm = facts.get("fabric_manager") or {}
    drv = facts.get("gpu_driver") or {}
    return {
        "numa": numa,
        "gpus": gpus,
        "nics": nics,
        "pairs": pairs,
        "nvswitches": len(facts.get("nvswitches") or []),
        "kernel_release": facts.get("kernel_release"),
        "iommu": iommu.get("mode"),
        "driver": {"flavour": drv.get("flavour"), "version": drv.get("version")},
        "fabric_manager": {"needed": bool(fm.get("needed")), "running": bool(fm.get("running"))},
        "nvidia_fs": {"loaded": bool(nvfs.get("loaded")), "version": nvfs.get("version"),
                      "modules": sorted((nvfs.get("modules") or {}).keys())},
        "gds": gds,
        "checked": data.get("drift") is not None,
        "drift": drift_node["items"],
        "by_concern": drift_node["by_concern"],
        "errors": drift_node["errors"],
        "unreachable": drift_node["unreachable"],
        "reboot_required": drift_node["reboot_required"],
        "warnings": [str(w) for w in data.get("warnings") or []],
    }


def _status(n):
    if n["unreachable"]:
        return "unreachable"
    if n["errors"]:
        return "error"
    fm = n["fabric_manager"]
    if n["drift"] or (n["gds"] and not n["gds"]["ok"]) or (fm["needed"] and not fm["running"]):
        return "attention"
    return "ok"


def _fingerprint(n):
    return {
        "pairs": dict(("GPU%s" % p["gpu_index"], "%s %s" % (p["netdev"], p["relation"])) for p in n.get("pairs", [])),
        "drift": sorted("%s %s %s: %s (want %s)" % (i["concern"], i["object"], i["key"],
                                                    json.dumps(i.get("current")), json.dumps(i.get("desired")))
                        for i in n.get("drift", [])),
        "gds": None if not n.get("gds") else ("ok" if n["gds"]["ok"] else "failing"),
        "driver": "%s %s" % ((n.get("driver") or {}).get("flavour"), (n.get("driver") or {}).get("version")),
        "fabric_manager": "running" if (n.get("fabric_manager") or {}).get("running") else "not running",
        "iommu": n.get("iommu"),
        "status": n.get("status"),
    }


def diff(previous, current):
    """Human-readable changes between two reports' node sections (previous may be None)."""
    if not previous:
        return []
    pn, cn = previous.get("nodes") or {}, current.get("nodes") or {}
    out = []
    for host in sorted(set(pn) | set(cn)):
        if host not in pn:
            out.append({"node": host, "what": "node", "change": "added to the report"})
            continue
        if host not in cn:
            out.append({"node": host, "what": "node", "change": "no longer in the report"})
            continue
        a, b = _fingerprint(pn[host]), _fingerprint(cn[host])
        for key in ("status", "driver", "fabric_manager", "iommu", "gds"):
            if a[key] != b[key]:
                out.append({"node": host, "what": key, "change": "%s -> %s" % (a[key], b[key])})
        for gpu in sorted(set(a["pairs"]) | set(b["pairs"])):
            if a["pairs"].get(gpu) != b["pairs"].get(gpu):
                out.append({"node": host, "what": "pair " + gpu,
                            "change": "%s -> %s" % (a["pairs"].get(gpu, "none"), b["pairs"].get(gpu, "none"))})
        for item in b["drift"]:
            if item not in a["drift"]:
                out.append({"node": host, "what": "drift", "change": "new: " + item})
        for item in a["drift"]:
            if item not in b["drift"]:
                out.append({"node": host, "what": "drift", "change": "resolved: " + item})
    return out


def build(nodes, previous=None, title="gpufabric fleet report", generated=None):
    """nodes: {host: {"facts": gpufabric facts, "drift": [items] or None (not checked), "gds": {ok, reasons},
    "errors": [str], "unreachable": bool, "reboot_required": bool, "warnings": [str]}}."""
    if not isinstance(nodes, dict):
        raise FleetReportError("nodes must be a mapping of host name to node data")
    for host, data in nodes.items():
        if data is not None and not isinstance(data, dict):
            raise FleetReportError("node %s: data must be a mapping" % host)
    try:
        drift = drift_report.build(dict((h, {"drift": (d or {}).get("drift"), "errors": (d or {}).get("errors"),
                                             "unreachable": (d or {}).get("unreachable"),
                                             "reboot_required": (d or {}).get("reboot_required")})
                                        for h, d in nodes.items()))
    except drift_report.ReportError as e:
        raise FleetReportError(str(e))
    out = {}
    for host in sorted(nodes):
        n = _node_model(host, nodes[host] or {}, drift["nodes"][host])
        n["status"] = _status(n)
        out[host] = n
    rep = {
        "schema": SCHEMA,
        "title": title,
        "generated": generated,
        "summary": {
            "nodes": len(out),
            "ok": sorted(h for h, n in out.items() if n["status"] == "ok"),
            "attention": sorted(h for h, n in out.items() if n["status"] != "ok"),
            "drift_items": sum(len(n["drift"]) for n in out.values()),
            "cross_numa_pairs": sum(1 for n in out.values() for p in n["pairs"] if p["cross_numa"]),
        },
        "nodes": out,
    }
    rep["changes"] = diff(previous, rep)
    rep["previous_generated"] = (previous or {}).get("generated")
    rep["has_previous"] = bool(previous)
    return rep


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
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f6f8;color:#1d2733}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c7d0da;font-size:13px}
main{padding:20px 28px;max-width:1500px}
section.node{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:0 0 22px;padding:16px 20px}
h2{margin:0 0 10px;font-size:19px}h3{font-size:15px;margin:16px 0 6px}
.badge{display:inline-block;border-radius:10px;padding:2px 9px;font-size:12px;font-weight:600;margin-left:8px}
.st-ok{background:#e3f3e5;color:#1b5e20}.st-attention{background:#fff1d6;color:#8a4b00}
.st-error,.st-unreachable{background:#fde2e2;color:#a31515}
.cards{display:flex;gap:14px;flex-wrap:wrap;margin-bottom:18px}
.card{background:#fff;border-radius:10px;padding:12px 16px;box-shadow:0 1px 3px rgba(0,0,0,.12);min-width:150px}
.card b{display:block;font-size:22px}.card b.bad{color:#a31515}.card b.good{color:#1b5e20}.card span{font-size:12px;color:#5b6875}
table{border-collapse:collapse;font-size:13px;margin:4px 0 8px}
th,td{border-bottom:1px solid #e3e7eb;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.bad,span.bad{color:#a31515;font-weight:600}td.good,span.good{color:#1b5e20}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:8px 28px}
svg.topo{max-width:100%;height:auto;background:#fbfcfd;border:1px solid #e3e7eb;border-radius:8px}
svg .numa-box{fill:#f1f5fa;stroke:#90a4ba;stroke-width:1.5}
svg .numa-label{font-size:14px;font-weight:700;fill:#36506b}
svg .gpu rect{fill:#e8f5e9;stroke:#43a047}svg .nic rect{fill:#e3f2fd;stroke:#1e88e5}
svg .dev-name{font-size:12px;font-weight:700;fill:#1d2733}svg .dev-bdf{font-size:10px;fill:#5b6875}
svg .pair path{fill:none;stroke-width:3;opacity:.9}
svg .pair.cross-numa path{stroke-width:4;stroke-dasharray:9 5}
svg .rel-label{font-size:11px;font-weight:700}
svg .legend text{font-size:11px;fill:#36506b}
svg .legend-cross{stroke:#c62828;stroke-width:4;stroke-dasharray:9 5}
ul.changes li{margin:2px 0;font-size:13px}
.muted{color:#5b6875;font-size:12px}
"""


def _table(head, rows, classes=None):
    h = "<tr>%s</tr>" % "".join("<th>%s</th>" % esc(c) for c in head)
    body = []
    for i, r in enumerate(rows):
        cls = (classes or [None] * len(rows))[i] or [None] * len(r)
        body.append("<tr>%s</tr>" % "".join('<td%s>%s</td>' % (' class="%s"' % cls[j] if cls[j] else "", esc(c))
                                            for j, c in enumerate(r)))
    return "<table>%s%s</table>" % (h, "".join(body))


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _node_html(host, n):
    out = ['<section class="node" id="node-%s">' % esc(host),
           '<h2>%s<span class="badge st-%s">%s</span></h2>' % (esc(host), n["status"], n["status"].upper())]
    if n["unreachable"]:
        out.append('<p class="bad">Unreachable: no data.</p></section>')
        return "".join(out)
    out.append('<p class="muted">kernel %s &middot; %d GPU(s), %d RDMA NIC(s), %d NVSwitch(es) &middot; IOMMU %s</p>'
               % (esc(n["kernel_release"] or "?"), len(n["gpus"]), len(n["nics"]), n["nvswitches"],
                  esc(n["iommu"] or "unknown")))
    for e in n["errors"]:
        out.append('<p class="bad">Error: %s</p>' % esc(e))
    out.append(topology_svg(n, host))
    out.append('<div class="grid"><div><h3>GPU &harr; NIC pairs</h3>')
    rows, cls = [], []
    for p in n["pairs"]:
        acs = ", ".join("%s=0x%04x" % (a["bdf"], a["ctrl"]) if isinstance(a["ctrl"], int) else a["bdf"]
                        for a in p["acs"]) or "-"
        rows.append(("GPU%s" % p["gpu_index"], p["gpu"], p["gpu_numa"], p["netdev"], p["ibdev"], p["nic_numa"],
                     p["relation"], "CROSS-NUMA" if p["cross_numa"] else "", acs))
        bad = "bad" if p["cross_numa"] or p["relation"] in ("NODE", "SYS") else None
        cls.append([None] * 6 + [bad, bad, None])
    out.append(_table(("GPU", "BDF", "NUMA", "rail", "RDMA dev", "NIC NUMA", "PCIe", "", "ACS ctrl on path"), rows, cls)
               if rows else '<p class="muted">No GPU/NIC pairs.</p>')
    out.append("</div><div><h3>Configured state vs desired</h3>")
    rows, cls = [], []
    for key, label in CONCERNS:
        count = n["by_concern"].get(key, 0)
        if not n["checked"]:
            state, c = "not checked", None
        elif count:
            state, c = "%d deviation(s)" % count, "bad"
        else:
            state, c = "as desired", "good"
        rows.append((label, state))
        cls.append([None, c])
    for key in sorted(set(n["by_concern"]) - set(k for k, _l in CONCERNS)):
        rows.append((key, "%d deviation(s)" % n["by_concern"][key]))
        cls.append([None, "bad"])
    out.append(_table(("concern", "state"), rows, cls))
    if n["drift"]:
        out.append(_table(("concern", "object", "setting", "current", "desired"),
                          [(i["concern"], i["object"], i["key"], _fmt(i["current"]), _fmt(i["desired"]))
                           for i in n["drift"]],
                          [[None, None, None, "bad", "good"] for _i in n["drift"]]))
    if n["reboot_required"]:
        out.append('<p class="bad">Reboot pending: the kernel command line changes at the next boot.</p>')
    out.append("<h3>GPUDirect Storage</h3>")
    if n["gds"] is None:
        out.append('<p class="muted">No GDS verdict given.</p>')
    else:
        ok = n["gds"]["ok"]
        out.append('<p><span class="%s">%s</span></p>' % ("good" if ok else "bad", "GDS works" if ok else "GDS failing"))
        if n["gds"]["reasons"]:
            out.append("<ul>%s</ul>" % "".join("<li>%s</li>" % esc(r) for r in n["gds"]["reasons"]))
    nv = n["nvidia_fs"]
    out.append('<p class="muted">nvidia-fs: %s; storage modules hooked: %s; IOMMU: %s</p>'
               % ("loaded " + esc(nv["version"] or "") if nv["loaded"] else "not loaded",
                  esc(", ".join(nv["modules"]) or "none"), esc(n["iommu"] or "unknown")))
    out.append("<h3>Driver and Fabric Manager</h3>")
    drv, fm = n["driver"], n["fabric_manager"]
    rows = [("GPU kernel module", "%s %s" % (drv["flavour"] or "unknown", drv["version"] or "")),
            ("Fabric Manager", "not needed (no NVSwitch)" if not fm["needed"]
             else ("running" if fm["running"] else "NEEDED BUT NOT RUNNING (CUDA error 802)"))]
    cls = [[None, "bad" if drv["flavour"] not in ("open",) else "good"],
           [None, "bad" if fm["needed"] and not fm["running"] else "good"]]
    out.append(_table(("component", "state"), rows, cls))
    for w in n["warnings"]:
        out.append('<p class="bad">%s</p>' % esc(w))
    out.append("</div></div></section>")
    return "".join(out)


def to_html(rep):
    s = rep["summary"]
    head = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<title>%s</title><style>%s</style></head><body>' % (esc(rep["title"]), CSS))
    sub = "generated %s" % esc(rep["generated"]) if rep.get("generated") else ""
    body = ['<header><h1>%s</h1><p>%s</p></header><main>' % (esc(rep["title"]), sub)]
    body.append('<div class="cards">'
                '<div class="card"><b>%d</b><span>nodes</span></div>'
                '<div class="card"><b class="%s">%d</b><span>need attention</span></div>'
                '<div class="card"><b>%d</b><span>drift items</span></div>'
                '<div class="card"><b class="%s">%d</b><span>cross-NUMA GPU/NIC pairs</span></div>'
                '<div class="card"><b>%d</b><span>changes since last report</span></div></div>'
                % (s["nodes"], "bad" if s["attention"] else "good", len(s["attention"]), s["drift_items"],
                   "bad" if s["cross_numa_pairs"] else "good", s["cross_numa_pairs"], len(rep["changes"])))
    body.append('<section class="node"><h2>Since the last report</h2>')
    if not rep.get("has_previous"):
        body.append('<p class="muted">No previous report in this directory.</p>')
    elif not rep["changes"]:
        body.append('<p class="muted">Nothing changed since %s.</p>' % esc(rep.get("previous_generated") or
                                                                           "the previous report"))
    else:
        body.append('<ul class="changes">%s</ul>' % "".join(
            "<li><b>%s</b> %s: %s</li>" % (esc(c["node"]), esc(c["what"]), esc(c["change"])) for c in rep["changes"]))
    body.append("</section>")
    body.extend(_node_html(h, n) for h, n in sorted(rep["nodes"].items()))
    body.append("</main></body></html>\n")
    return head + "".join(body)


def to_markdown(rep):
    s = rep["summary"]
    lines = ["# %s" % rep["title"], ""]
    if rep.get("generated"):
        lines += ["Generated %s." % rep["generated"], ""]
    lines.append("%d node(s); need attention: %s; %d drift item(s); %d cross-NUMA pair(s)."
                 % (s["nodes"], ", ".join(s["attention"]) or "none", s["drift_items"], s["cross_numa_pairs"]))
    lines += ["", "## Since the last report", ""]
    if not rep.get("has_previous"):
        lines.append("No previous report.")
    elif not rep["changes"]:
        lines.append("Nothing changed.")
    else:
        lines.extend("- %s %s: %s" % (c["node"], c["what"], c["change"]) for c in rep["changes"])
    for host, n in sorted(rep["nodes"].items()):
        lines += ["", "## %s (%s)" % (host, n["status"]), ""]
        if n["unreachable"]:
            lines.append("Unreachable.")
            continue
        lines += ["| GPU | BDF | NUMA | rail | NIC NUMA | PCIe | note |", "|---|---|---|---|---|---|---|"]
        for p in n["pairs"]:
            cells = (p["gpu_index"], p["gpu"], p["gpu_numa"], p["netdev"], p["nic_numa"], p["relation"],
                     "CROSS-NUMA" if p["cross_numa"] else "")
            lines.append("| GPU%s | %s | %s | %s | %s | %s | %s |" % cells)
        lines.append("")
        for key, label in CONCERNS:
            c = n["by_concern"].get(key, 0)
            lines.append("- %s: %s" % (label, "not checked" if not n["checked"] else
                                       ("%d deviation(s)" % c if c else "as desired")))
        for i in n["drift"]:
            lines.append("  - %s %s %s: %s (desired %s)" % (i["concern"], i["object"], i["key"], _fmt(i["current"]),
                                                            _fmt(i["desired"])))
        if n["gds"] is not None:
            lines.append("- GDS: %s%s" % ("works" if n["gds"]["ok"] else "FAILING",
                                          "".join("; " + r for r in n["gds"]["reasons"])))
        lines.append("- GPU driver: %s %s; Fabric Manager: %s" % (
            n["driver"]["flavour"], n["driver"]["version"] or "",
            "not needed" if not n["fabric_manager"]["needed"] else
            ("running" if n["fabric_manager"]["running"] else "NEEDED BUT NOT RUNNING")))
        for e in n["errors"]:
            lines.append("- error: %s" % e)
    return "\n".join(lines) + "\n"


def to_json(rep):
    return json.dumps(rep, indent=2, sort_keys=True) + "\n"
