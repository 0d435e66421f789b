# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet report for people: the model behind one static HTML page (``fleet_html``), JSON and Markdown.

Per node: the status of every concern and the node verdict (``concerns.assess``, the same computation the drift
report and the metrics use), the GPU<->NIC<->NUMA facts (pairs with their PCIe relation and the ACS control of the
bridges on each path), the deviations, the GDS verdict with its reasons, driver and Fabric Manager state, and what
changed since the previous report (its JSON, read by the caller; a ``gpufabric.fleet/v1`` report is read too).

Schema ``gpufabric.fleet/v2``: ``nodes.<host>`` carries ``concerns`` (``{<concern>: {status, reason, items[,
corrected]}}``), ``verdict`` (``{status, reasons}``), ``status`` (the verdict's status), ``counts``, ``drift`` and
``by_concern`` (the deviations, derived from the concerns), ``blocking`` (the warnings that keep it from ok) and the
facts the page draws; ``summary`` = ``{nodes, ok, attention, statuses, drift_items, cross_numa_pairs,
reboot_required}``; ``generated`` (when it was made, UTC ISO 8601) and ``coverage`` (which inventory hosts it covers
out of how many, ``drift.coverage``).

Pure functions; the ``fleet_report`` module reads the previous JSON and writes the files.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet_html
from ansible_collections.gpufabric.node.plugins.module_utils.report import markdown as md
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as drift_report

SCHEMA = "gpufabric.fleet/v2"
SCHEMA_V1 = "gpufabric.fleet/v1"
# previous reports the "changes since last report" can be computed against
PREVIOUS_SCHEMAS = (SCHEMA_V1, SCHEMA)
RELATIONS = fleet_html.RELATIONS
to_html = fleet_html.to_html
topology_svg = fleet_html.topology_svg


class FleetReportError(ValueError):
    """Input the report cannot be built from."""


def _numa(v):
    return "?" if v is None or v == -1 else str(v)


# ----------------------------------------------------------------------------------------------
# model


def _node_model(host, data, a):
    facts = data.get("facts") or {}
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
        gds = {"ok": bool(gds["ok"]), "reasons": [str(r) for r in gds.get("reasons") or []]}
    iommu = facts.get("iommu") or {}
    nvfs = facts.get("nvidia_fs") or {}
    fm = facts.get("fabric_manager") or {}
    drv = facts.get("gpu_driver") or {}
    entry = drift_report.node_entry(a)
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
        "gds_wanted": a["gds_wanted"],
        "concerns": a["concerns"],
        "verdict": a["verdict"],
        "status": a["verdict"]["status"],
        "counts": entry["counts"],
        "source": a["source"],
        "drift": entry["items"],
        "by_concern": entry["by_concern"],
        "errors": a["errors"],
        "unreachable": a["unreachable"],
        "reboot_required": a["reboot_required"],
        "blocking": a["blocking"],
        "warnings": a["warnings"],
    }


def _mapping(v):
    return v if isinstance(v, dict) else {}


def _fingerprint(n):
    """What the changes compare, from a v2 or a v1 report's node (None for concerns a v1 report does not hold)."""
    n = _mapping(n)
    pairs = [p for p in n.get("pairs") or [] if isinstance(p, dict)]
    drift = [i for i in n.get("drift") or [] if isinstance(i, dict)]
    gds = _mapping(n.get("gds")) if n.get("gds") is not None else None
    drv, fm = _mapping(n.get("driver")), _mapping(n.get("fabric_manager"))
    concerns = n.get("concerns")
    return {
        "pairs": dict(("GPU%s" % p.get("gpu_index"), "%s %s" % (p.get("netdev"), p.get("relation"))) for p in pairs),
        "drift": sorted("%s %s %s: %s (want %s)" % (i.get("concern"), i.get("object"), i.get("key"),
                                                    json.dumps(i.get("current"), sort_keys=True),
                                                    json.dumps(i.get("desired"), sort_keys=True)) for i in drift),
        "gds": None if gds is None else ("ok" if gds.get("ok") else "failing"),
        "driver": "%s %s" % (drv.get("flavour"), drv.get("version")),
        "fabric_manager": "running" if fm.get("running") else "not running",
        "iommu": n.get("iommu"),
        "status": n.get("status"),
        "concerns": None if not isinstance(concerns, dict) else dict(
            (k, _mapping(v).get("status")) for k, v in concerns.items()),
    }


def diff(previous, current):
    """Human-readable changes between two reports' node sections (previous may be None, a v1 or a v2 report)."""
    if not previous or not isinstance(previous, dict):
        return []
    pn, cn = _mapping(previous.get("nodes")), current.get("nodes") or {}
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
        if a["concerns"] is not None:
            for name in cm.NAMES:
                was, now = a["concerns"].get(name), b["concerns"].get(name)
                if was != now:
                    out.append({"node": host, "what": "concern " + name,
                                "change": "%s -> %s" % (was or "not reported", now or "not reported")})
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


def change_text(c):
    """One change as a line of plain text, naming the node and what changed: "sim1 concern dcb: ok -> drift"."""
    return "%s %s: %s" % (c["node"], c["what"], c["change"])


def build(nodes, previous=None, title="gpufabric fleet report", generated=None, managed=None, scope=None):
    """nodes: {host: node data (``concerns.assess``: concerns, facts, warnings, reboot_required, gds_wanted, errors,
    unreachable; old callers' drift and a GDS verdict gds: {ok, reasons})}; managed: the concern names the play
    manages (default the core ones); previous: the previous report (v1 or v2) or None; generated: when the report is
    made (default now, UTC); scope: what the play targeted (``drift.coverage``). A node whose data is wrongly shaped
    is reported as an error naming what was wrong; the other nodes are reported as they are."""
    if not isinstance(nodes, dict):
        raise FleetReportError("nodes must be a mapping of host name to node data")
    try:
        managed = cm.managed_names(managed)
    except cm.ConcernError as e:
        raise FleetReportError(str(e))
    # a node with wrongly shaped data is an error of its own (drift_report.unusable), the others are reported
    out = drift_report.assess_each(nodes, managed, _node_model)
    try:
        cover = drift_report.coverage(list(out), scope)
    except drift_report.ReportError as e:
        raise FleetReportError(str(e))
    rep = {
        "schema": SCHEMA,
        "title": title,
        "generated": generated or drift_report.now(),
        "coverage": cover,
        "managed": list(managed),
        "summary": {
            "nodes": len(out),
            "ok": sorted(h for h, n in out.items() if n["status"] == cm.OK),
            "attention": sorted(h for h, n in out.items() if n["status"] != cm.OK),
            "statuses": dict((s, sum(n["counts"][s] for n in out.values())) for s in cm.STATUSES),
            "drift_items": sum(len(n["drift"]) for n in out.values()),
            "cross_numa_pairs": sum(1 for n in out.values() for p in n["pairs"] if p["cross_numa"]),
            "reboot_required": sorted(h for h, n in out.items() if n["reboot_required"]),
        },
        "nodes": out,
    }
    rep["changes"] = diff(previous, rep)
    rep["previous_generated"] = (previous or {}).get("generated") if isinstance(previous, dict) else None
    rep["previous_schema"] = (previous or {}).get("schema") if isinstance(previous, dict) else None
    rep["has_previous"] = bool(previous)
    return rep


_md = md.cell


def to_markdown(rep):
    s = rep["summary"]
    lines = ["# %s" % md.inline(rep["title"]), ""]
    lines.extend(drift_report.made_lines(rep))
    lines.append("%d node(s); ok: %s; need attention: %s; %d drift item(s); %d cross-NUMA pair(s)."
                 % (s["nodes"], md.join(s["ok"]) or "none", md.join(s["attention"]) or "none", s["drift_items"],
                    s["cross_numa_pairs"]))
    lines.append("Concern statuses: %s." % (drift_report.status_counts_text(s["statuses"]) or "none"))
    lines += ["", "## Since the last report", ""]
    if not rep.get("has_previous"):
        lines.append("No previous report.")
    else:
        if rep.get("previous_schema") and rep["previous_schema"] != rep["schema"]:
            lines.append("The previous report (%s) holds no concern statuses." % md.inline(rep["previous_schema"]))
        if not rep["changes"]:
            lines.append("Nothing changed.")
        lines.extend("- %s" % md.inline(change_text(c)) for c in rep["changes"])
    for host, n in sorted(rep["nodes"].items()):
        lines += ["", "## %s (%s)" % (md.inline(host), md.inline(drift_report.verdict_text(n["verdict"]))), ""]
        for r in n["verdict"]["reasons"]:
            lines.append("- %s" % md.inline(r))
        if n["verdict"]["reasons"]:
            lines.append("")
        lines += ["| concern | status | detail |", "|---|---|---|"]
        for name in cm.NAMES:
            c = n["concerns"].get(name)
            if c is not None:
                label, detail = cm.describe(c)
                lines.append("| %s | %s | %s |" % (cm.TITLES[name], md.cell(label if c["status"] == cm.OK else label.upper()),
                                                   _md(detail)))
        if n["unreachable"]:
            continue
        for i in n["drift"]:
            lines.append("- %s %s %s: %s (desired %s)" % tuple(md.inline(v) for v in (
                i["concern"], i["object"], i["key"], fleet_html._fmt(i["current"]), fleet_html._fmt(i["desired"]))))
        lines += ["", "| GPU | BDF | NUMA | rail | NIC NUMA | PCIe | note |", "|---|---|---|---|---|---|---|"]
        for p in n["pairs"]:
            cells = (p["gpu_index"], p["gpu"], p["gpu_numa"], p["netdev"], p["nic_numa"], p["relation"],
                     "CROSS-NUMA" if p["cross_numa"] else "")
            lines.append("| GPU%s | %s | %s | %s | %s | %s | %s |" % tuple(md.cell(c) for c in cells))
        lines.append("")
        if n["gds"] is not None:
            lines.append("- GDS: %s%s" % ("works" if n["gds"]["ok"] else "FAILING",
                                          "".join("; " + md.inline(r) for r in n["gds"]["reasons"])))
        lines.append("- GPU driver: %s %s; Fabric Manager: %s" % (
            md.inline(n["driver"]["flavour"]), md.inline(n["driver"]["version"] or ""),
            "not needed" if not n["fabric_manager"]["needed"] else
            ("running" if n["fabric_manager"]["running"] else "NEEDED BUT NOT RUNNING")))
        for e in n["errors"]:
            lines.append("- error: %s" % md.inline(e))
        for w in n["warnings"]:
            lines.append("- warning: %s" % md.inline(w))
    return "\n".join(lines) + "\n"


def to_json(rep):
    return json.dumps(rep, indent=2, sort_keys=True) + "\n"
