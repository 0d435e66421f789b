# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet drift report: aggregate the ``drift`` lists the modules return into JSON and Markdown.

Every state-managing module returns ``drift``: a list of
``{"concern", "object", "key", "current", "desired"}`` found before it applied anything. drift.yml collects
those per node and hands them here. Pure functions; the ``fabric_report`` module only writes the files.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

DRIFT_KEYS = ("concern", "object", "key", "current", "desired")
SCHEMA = "gpufabric.drift/v1"


class ReportError(ValueError):
    """Input the report cannot be built from."""


def normalize_item(item, node):
    if not isinstance(item, dict):
        raise ReportError("node %s: a drift item must be a mapping, got %r" % (node, item))
    missing = [k for k in ("concern", "object", "key") if k not in item]
    if missing:
        raise ReportError("node %s: drift item %r lacks %s" % (node, item, ", ".join(missing)))
    return dict((k, item.get(k)) for k in DRIFT_KEYS)


def _sort_key(item):
    return (str(item["concern"]), str(item["object"]), str(item["key"]))


def build(nodes):
    """nodes: {host: {"drift": [...], "reboot_required": bool, "errors": [str], "unreachable": bool}}."""
    if not isinstance(nodes, dict):
        raise ReportError("nodes must be a mapping of host name to results")
    out = {}
    drifted = []
    total = 0
    for host in sorted(nodes):
        data = nodes[host] or {}
        if not isinstance(data, dict):
            raise ReportError("node %s: results must be a mapping" % host)
        items = sorted((normalize_item(i, host) for i in (data.get("drift") or [])), key=_sort_key)
        # the same deviation reported twice (two tasks looking at one setting) counts once
        unique = []
        for i in items:
            if i not in unique:
                unique.append(i)
        errors = [str(e) for e in (data.get("errors") or [])]
        concerns = {}
        for i in unique:
            concerns.setdefault(i["concern"], []).append(i)
        node = {
            "drifted": bool(unique),
            "items": unique,
            "by_concern": dict((c, len(v)) for c, v in sorted(concerns.items())),
            "reboot_required": bool(data.get("reboot_required")),
            "unreachable": bool(data.get("unreachable")),
            "errors": errors,
        }
        out[host] = node
        total += len(unique)
        if unique or errors or node["unreachable"]:
            drifted.append(host)
    return {
        "schema": SCHEMA,
        "summary": {
            "nodes": len(out),
            "drifted_nodes": drifted,
            "drift_items": total,
            "reboot_required": sorted(h for h, n in out.items() if n["reboot_required"]),
        },
        "nodes": out,
    }


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(report, title="gpufabric drift report", fixed=False):
    """Markdown text; with ``fixed`` the items are what a fix run corrected."""
    s = report["summary"]
    lines = ["# %s" % title, ""]
    lines.append("%d node(s), %d drifted, %d drift item(s)." % (s["nodes"], len(s["drifted_nodes"]), s["drift_items"]))
    if s["reboot_required"]:
        lines.append("Reboot pending (kernel command line) on: %s." % ", ".join(s["reboot_required"]))
    lines.append("")
    lines.append("| node | state | items | concerns |")
    lines.append("|---|---|---|---|")
    for host, n in sorted(report["nodes"].items()):
        if n["unreachable"]:
            state = "UNREACHABLE"
        elif n["errors"]:
            state = "ERROR"
        elif n["drifted"]:
            state = "FIXED" if fixed else "DRIFT"
        else:
            state = "ok"
        concerns = ", ".join("%s: %d" % kv for kv in sorted(n["by_concern"].items())) or "-"
        lines.append("| %s | %s | %d | %s |" % (host, state, len(n["items"]), concerns))
    for host, n in sorted(report["nodes"].items()):
        if not (n["items"] or n["errors"]):
            continue
        lines.extend(["", "## %s" % host, ""])
        for e in n["errors"]:
            lines.append("- error: %s" % _cell(e))
        if n["items"]:
            lines.append("| concern | object | setting | current | desired |")
            lines.append("|---|---|---|---|---|")
            for i in n["items"]:
                lines.append("| %s | %s | %s | %s | %s |" % tuple(_cell(i[k]) for k in DRIFT_KEYS))
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
