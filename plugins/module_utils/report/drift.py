# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet drift report: every node's concern statuses (``gpufabric_concerns``) as JSON and Markdown.

drift.yml hands each node's data here (``concerns.assess`` says what it holds); the status of every concern and the
node verdict come from ``concerns`` (the same code the fleet report and the metrics use), so the three never
disagree. Old callers that pass only a flat ``drift`` list get drift for the concerns with items and not_checked for
the rest. Pure functions; the ``fabric_report`` module only writes the files.

Schema ``gpufabric.drift/v2``: ``generated`` (when the report was made, UTC ISO 8601), ``coverage`` (which inventory
hosts it covers out of how many: ``coverage``), ``nodes.<host>`` = ``{"concerns": {<concern>: {status, reason, items[, corrected]}},
"verdict": {status, reasons}, "counts": {<status>: n}, "drifted": bool, "items": [every deviation found],
"by_concern": {<concern>: n}, "reboot_required", "unreachable", "errors", "source"}``; ``summary`` =
``{nodes, drifted_nodes, drift_items, corrected_items, reboot_required, statuses, attention}``.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.report import markdown as md

DRIFT_KEYS = cm.ITEM_KEYS
SCHEMA = "gpufabric.drift/v2"
# a node with a concern in one of these is "drifted": drift.yml exits non-zero on it
DRIFTED = (cm.DRIFT, cm.ERROR, cm.NOT_CHECKED)


class ReportError(ValueError):
    """Input the report cannot be built from."""


# a report's time stamp: UTC, ISO 8601, to the second
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# how many left-out host names the Markdown and HTML name before "and N more" (the JSON names them all)
NAMED_LEFT_OUT = 20


def now():
    """The current time as a report's ``generated`` (UTC, ISO 8601)."""
    return time.strftime(TIME_FORMAT, time.gmtime())


def _names(value, what):
    if not isinstance(value, (list, tuple)) or not all(isinstance(h, str) for h in value):
        raise ReportError("%s must be a list of host names" % what)
    return sorted(set(value))


# the report modules' ``scope`` option (plugins/doc_fragments/report_scope.py documents it)
SCOPE_SPEC = dict(type="dict", options=dict(
    pattern=dict(type="str"),
    inventory_hosts=dict(type="list", elements="str"),
    limit=dict(type="str"),
))


def coverage(hosts, scope=None):
    """Which inventory hosts a report covers, out of how many.

    hosts: the hosts in the report; scope: what the play targeted, ``{pattern, inventory_hosts, limit}`` (the
    inventory hosts its host pattern names without ``--limit``, and the limit, or None) or None when the caller did
    not say. Returns ``{hosts, inventory_hosts, pattern, limit, limited, left_out, complete}``: ``inventory_hosts``
    and ``left_out`` (the inventory hosts of the pattern not in the report) are None when no scope was given."""
    hosts = _names(list(hosts), "the report's hosts")
    scope = scope or {}
    if not isinstance(scope, dict):
        raise ReportError("scope must be a mapping (pattern, inventory_hosts, limit)")
    limit = scope.get("limit") or None
    pattern = scope.get("pattern") or None
    for key, value in (("limit", limit), ("pattern", pattern)):
        if value is not None and not isinstance(value, str):
            raise ReportError("scope.%s must be a host pattern (a string)" % key)
    out = {"hosts": len(hosts), "inventory_hosts": None, "pattern": pattern, "limit": limit,
           "limited": limit is not None, "left_out": None, "complete": None}
    if scope.get("inventory_hosts") is not None:
        inventory = _names(scope["inventory_hosts"], "scope.inventory_hosts")
        covered = set(hosts)
        left = [h for h in inventory if h not in covered]
        out.update(inventory_hosts=len(inventory), left_out=left, complete=not left)
    return out


def coverage_text(c):
    """One sentence: "Covers 1 of 2 inventory hosts (pattern all, --limit sim2); left out: sim1." (plain text)."""
    if c["inventory_hosts"] is None:
        text = "Covers %d host(s); the inventory they were taken from was not given" % c["hosts"]
    else:
        text = "Covers %d of %d inventory host(s)" % (c["hosts"], c["inventory_hosts"])
    how = []
    if c.get("pattern"):
        how.append("pattern %s" % c["pattern"])
    if c["limited"]:
        how.append("--limit %s" % c["limit"])
    if how:
        text += " (%s)" % ", ".join(how)
    left = c.get("left_out") or []
    if left:
        shown = ", ".join(left[:NAMED_LEFT_OUT])
        more = len(left) - NAMED_LEFT_OUT
        text += "; left out: %s%s" % (shown, " and %d more" % more if more > 0 else "")
    return text + "."


def deviations(concerns):
    """The items of the concerns that differ (drift) or were corrected, one list sorted by concern, object, key."""
    out = []
    for name in cm.NAMES:
        c = concerns.get(name)
        if c is None or not (c["status"] == cm.DRIFT or c.get("corrected")):
            continue
        items = sorted((dict((k, i.get(k)) for k in DRIFT_KEYS) for i in c["items"]),
                       key=lambda i: (str(i["object"]), str(i["key"])))
        for i in items:
            if i not in out:
                out.append(i)
    return out


def node_entry(a):
    """The report's view of one node from ``concerns.assess``."""
    concerns = a["concerns"]
    items = deviations(concerns)
    by = {}
    for i in items:
        by[i["concern"]] = by.get(i["concern"], 0) + 1
    counts = cm.counts(concerns)
    drifted = a["unreachable"] or bool(a["errors"]) or any(counts[s] for s in DRIFTED)
    return {
        "concerns": concerns,
        "verdict": a["verdict"],
        "counts": counts,
        "drifted": drifted,
        "items": items,
        "corrected": sum(len(c["items"]) for c in concerns.values() if c.get("corrected")),
        "by_concern": by,
        "reboot_required": a["reboot_required"],
        "unreachable": a["unreachable"],
        "errors": a["errors"],
        "source": a["source"],
    }


# --- one node's data, checked on its own ----------------------------------------------------------------------

UNUSABLE = "node data unusable: "
# what a wrongly shaped value raises in the readers (ConcernError and the reports' errors are ValueErrors)
SHAPE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError)
# the facts the reports read: key -> (type of the value, type of each entry of a list, keys of an entry and their type)
_FACT_SHAPES = {
    "gpus": (list, dict, {"index": (int, str), "bdf": str, "model": str}),
    "nics": (list, dict, {"bdf": str, "netdevs": list, "ibdevs": list}),
    "pairing": (list, dict, {"gpu": str, "bridges": list, "netdev": str, "relation": str}),
    "path_bridges": (list, dict, {"bdf": str, "acs": dict}),
    "numa_nodes": (list, dict, {}),
    "nvswitches": (list, None, {}),
    "iommu": (dict, None, {"mode": str, "cmdline": list}),
    "nvidia_fs": (dict, None, {"modules": dict, "version": str}),
    "fabric_manager": (dict, None, {}),
    "gpu_driver": (dict, None, {"flavour": str, "version": str}),
}


def _shape_error(host, where, value, want):
    names = want.__name__ if isinstance(want, type) else " or ".join(t.__name__ for t in want)
    shown = json.dumps(value, default=repr)[:80]
    return ReportError("node %s: %s must be %s, got %s %s" % (host, where, names, type(value).__name__, shown))


def _check_entry(host, where, value, keys):
    for key, want in sorted(keys.items()):
        if value.get(key) is not None and not isinstance(value[key], want):
            raise _shape_error(host, "%s.%s" % (where, key), value[key], want)


def check_node_data(host, data):
    """ReportError naming the field when a node's data is not shaped as the reports read it (``concerns.assess``
    checks the concerns and flags; this checks the facts the reports draw)."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise ReportError("node %s: data must be a mapping, got %s" % (host, type(data).__name__))
    facts = data.get("facts")
    if facts is None:
        return
    if not isinstance(facts, dict):
        raise ReportError("node %s: facts must be the gpufabric facts mapping, got %s" % (host, type(facts).__name__))
    for key, (kind, entry, keys) in sorted(_FACT_SHAPES.items()):
        value = facts.get(key)
        if value is None:
            continue
        if not isinstance(value, kind):
            raise _shape_error(host, "facts." + key, value, kind)
        if kind is dict:
            _check_entry(host, "facts." + key, value, keys)
            continue
        for n, e in enumerate(value):
            if entry is not None and not isinstance(e, entry):
                raise _shape_error(host, "facts.%s[%d]" % (key, n), e, entry)
            if entry is dict:
                _check_entry(host, "facts.%s[%d]" % (key, n), e, keys)
    gds = data.get("gds")
    if isinstance(gds, dict) and gds.get("reasons") is not None and not isinstance(gds["reasons"], list):
        raise _shape_error(host, "gds.reasons", gds["reasons"], list)
    for name, doc in sorted((data.get("concerns") or {}).items() if isinstance(data.get("concerns"), dict) else []):
        if isinstance(doc, dict) and doc.get("items") is not None and not isinstance(doc["items"], list):
            raise _shape_error(host, "concern %s: items" % name, doc["items"], list)


def unusable(host, managed, error):
    """``concerns.assess`` of a node whose data could not be read: every managed concern an error naming what was
    wrong, and the same as a play error (so the node is drifted and needs attention)."""
    what = str(error) if isinstance(error, ValueError) else "%s: %s" % (type(error).__name__, error)
    msg = UNUSABLE + what
    return cm.assess({"concerns": dict((n, cm.error(n, msg)) for n in managed), "errors": [msg]}, managed, host)


def unusable_nodes(report_nodes):
    """{host: the error} of the nodes a report made from ``unusable`` (for the modules' warnings)."""
    return dict((h, e) for h, n in sorted(report_nodes.items()) for e in n["errors"][:1] if e.startswith(UNUSABLE))


def assess_each(nodes, managed, make, fixed=False):
    """{host: make(host, data, assessment)} with each node on its own: one whose data is wrongly shaped is made
    from ``unusable`` (and empty data) instead, and every other node is reported as it is."""
    out = {}
    for host in sorted(nodes, key=str):
        data = nodes[host]
        try:
            check_node_data(host, data)
            out[host] = make(host, data or {}, cm.assess(data, managed, host, fixed))
        except SHAPE_ERRORS as e:
            out[host] = make(host, {}, unusable(host, managed, e))
    return out


def build(nodes, managed=None, fixed=False, generated=None, scope=None):
    """nodes: {host: node data (see ``concerns.assess``)}; managed: the concern names the play manages (default the
    core ones); fixed: the data come from a fix run; generated: when the report is made (default now, UTC); scope:
    what the play targeted (``coverage``). A node with wrongly shaped data is reported as an error."""
    if not isinstance(nodes, dict):
        raise ReportError("nodes must be a mapping of host name to results")
    try:
        managed = cm.managed_names(managed)
    except cm.ConcernError as e:
        raise ReportError(str(e))
    out = assess_each(nodes, managed, lambda host, data, a: node_entry(a), fixed)
    cover = coverage(list(out), scope)
    statuses = dict((s, sum(n["counts"][s] for n in out.values())) for s in cm.STATUSES)
    return {
        "schema": SCHEMA,
        "fixed": bool(fixed),
        "generated": generated or now(),
        "coverage": cover,
        "managed": list(managed),
        "summary": {
            "nodes": len(out),
            "drifted_nodes": sorted(h for h, n in out.items() if n["drifted"]),
            "drift_items": sum(len(n["items"]) for n in out.values()),
            "corrected_items": sum(n["corrected"] for n in out.values()),
            "reboot_required": sorted(h for h, n in out.items() if n["reboot_required"]),
            "statuses": statuses,
            "attention": sorted(h for h, n in out.items() if n["verdict"]["status"] != cm.OK),
        },
        "nodes": out,
    }


_cell = md.cell


def node_state(n, fixed=False):
    """One word for a node's concerns, worst first; "ok" only when the verdict is ok too (a node whose concerns are
    fine but that needs a reboot or has a data-path warning is ATTENTION; the verdict column says why)."""
    if n["unreachable"]:
        return "UNREACHABLE"
    c = n["counts"]
    if n["errors"] or c[cm.ERROR]:
        return "ERROR"
    if c[cm.DRIFT]:
        return "NOT FIXED" if fixed else "DRIFT"
    if c[cm.NOT_CHECKED]:
        return "NOT CHECKED"
    if n["corrected"]:
        return "FIXED" if fixed else "CORRECTED"
    return "ok" if n["verdict"]["status"] == cm.OK else "ATTENTION"


def verdict_text(verdict):
    return {"ok": "ok", "attention": "needs attention", "unreachable": "unreachable"}.get(verdict["status"],
                                                                                          verdict["status"])


def status_counts_text(counts):
    return ", ".join("%s %d" % (cm.LABELS[s], counts[s]) for s in cm.SEVERITY if counts.get(s))


def made_lines(report):
    """The Markdown lines saying when a report was made and which hosts it covers (none for a report without)."""
    out = []
    if report.get("generated"):
        out.append("Generated %s." % md.inline(report["generated"]))
    if report.get("coverage"):
        out.append(md.inline(coverage_text(report["coverage"])))
    return [" ".join(out), ""] if out else []


def to_markdown(report, title="gpufabric drift report", fixed=None):
    """Markdown text; in a fix run (``fixed``, default the report's) corrected items read as fixed and a concern
    still drifting as not fixed."""
    fixed = report.get("fixed") if fixed is None else fixed
    s = report["summary"]
    lines = ["# %s" % md.inline(title), ""]
    lines.extend(made_lines(report))
    lines.append("%d node(s): %d need attention, %d with drift, errors or unchecked concerns%s."
                 % (s["nodes"], len(s["attention"]), len(s["drifted_nodes"]),
                    (" (%s)" % md.join(s["drifted_nodes"])) if s["drifted_nodes"] else ""))
    lines.append("Concern statuses: %s." % (status_counts_text(s["statuses"]) or "none"))
    lines.append("%d drift item(s)%s." % (s["drift_items"],
                                          ", %d fixed" % s["corrected_items"] if fixed and s["corrected_items"]
                                          else ""))
    if s["reboot_required"]:
        lines.append("Reboot pending (kernel command line) on: %s." % md.join(s["reboot_required"]))
    lines.append("")
    lines.append("| node | state | items | concerns | verdict |")
    lines.append("|---|---|---|---|---|")
    for host, n in sorted(report["nodes"].items()):
        by = ", ".join("%s: %d" % (md.inline(k), v) for k, v in sorted(n["by_concern"].items())) or "-"
        lines.append("| %s | %s | %d | %s | %s |" % (md.cell(host), node_state(n, fixed), len(n["items"]), by,
                                                     verdict_text(n["verdict"])))
    for host, n in sorted(report["nodes"].items()):
        lines.extend(["", "## %s (%s)" % (md.inline(host), md.inline(verdict_text(n["verdict"]))), ""])
        for r in n["verdict"]["reasons"]:
            lines.append("- %s" % md.inline(r))
        if n["verdict"]["reasons"]:
            lines.append("")
        lines.append("| concern | status | detail |")
        lines.append("|---|---|---|")
        for name in cm.NAMES:
            c = n["concerns"].get(name)
            if c is None:
                continue
            label, detail = cm.describe(c, fixed)
            lines.append("| %s | %s | %s |" % (cm.TITLES[name], md.cell(label.upper() if c["status"] != cm.OK else label),
                                               _cell(detail)))
        if n["items"]:
            lines.extend(["", "| concern | object | setting | current | desired | result |",
                          "|---|---|---|---|---|---|"])
            for i in n["items"]:
                c = n["concerns"][i["concern"]]
                result = ("fixed" if fixed else "corrected") if c.get("corrected") else (
                    "NOT FIXED" if fixed else "drift")
                lines.append("| %s | %s | %s | %s | %s | %s |" % (tuple(_cell(i[k]) for k in DRIFT_KEYS) + (result,)))
        for name in cm.NAMES:
            c = n["concerns"].get(name)
            if c is None or c["status"] != cm.ERROR or not c["items"]:
                continue
            lines.extend(["", "%s failed; per object:" % cm.TITLES[name], ""])
            for i in c["items"]:
                lines.append("- %s: %s%s" % (_cell(i.get("object")), _cell(i.get("result") or i.get("current")),
                                             " (%s)" % _cell(i["error"]) if i.get("error") else ""))
    return "\n".join(lines) + "\n"


def to_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def write_files(root, dest, basename, contents, extensions, check_mode):
    """Write ``contents[fmt]`` to ``dest/basename + extensions[fmt]`` atomically, only where it differs.

    Shared by the report modules. Returns (paths, changed); nothing is written in check mode.
    """
    paths, changed = [], False
    for fmt in contents:
        path = os.path.join(dest, basename + extensions[fmt])
        paths.append(path)
        if root.read_raw(path) == contents[fmt]:
            continue
        changed = True
        if not check_mode:
            root.write_file_atomic(path, contents[fmt])
    return paths, changed
