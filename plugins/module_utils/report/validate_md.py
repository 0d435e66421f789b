# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation report for people (``validate_judge``'s Markdown): per node its ``performance`` status, a table
of its runs, its negative tests and the canary's comparison, from ``validate.judge.report``'s document. Every value
from a node or the user (names, reasons, the title) is literal Markdown text on one line (``markdown.inline``).
Plain Python; private to the collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.report import markdown


def _cell(text):
    return markdown.cell(C.one_line("" if text is None else text, 300))


def to_markdown(doc, title="gpufabric validation report"):
    """The report for people: per node its performance status, a table of its runs, its negative tests and, for the
    canary, the comparison with its run before the upgrade."""
    out = ["# %s" % markdown.inline(title), "", "Generated %s; tolerance %.0f %%; baselines in %s." % (
        doc["generated"], 100 * doc["tolerance"], markdown.inline(doc["baseline_dir"])), "",
        "Performance: %s." % ", ".join("%d %s" % (n, C.LABELS[s]) for s, n in doc["counts"].items() if n), ""]
    if doc["failed"]:
        out += ["**Regressed or failed: %s.**" % ", ".join(markdown.inline(h) for h in doc["failed"]), ""]
    if doc["not_judged"]:
        out += ["Not judged (never a pass): %s." % ", ".join(markdown.inline(h) for h in doc["not_judged"]), ""]
    for host, j in doc["nodes"].items():
        st = j["status"]
        out += ["## %s: %s" % (markdown.inline(host), C.LABELS[st["status"]]), ""]
        if st.get("reason"):
            out += [_cell(st["reason"]), ""]
        if j.get("profile_key"):
            out += ["Profile `%s`, suite run at %s." % (j["profile_key"], markdown.inline(j.get("at"))), ""]
        if j["runs"]:
            out += ["| run | expects | path taken | bandwidth | host CPU | status | reason |",
                    "| --- | --- | --- | --- | --- | --- | --- |"]
            for r in j["runs"]:
                reason = r["reason"] if r["status"] != C.OK else (r.get("baseline") or {}).get("reason") or r["reason"]
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    _cell(r["id"]), r["expect"], _cell(r["verdict"]), r["bandwidth_text"],
                    "n/a" if r.get("cpu_s") is None else "%.1f s" % r["cpu_s"], C.LABELS[r["status"]],
                    _cell(reason)))
            out.append("")
        if j["negative"]:
            out += ["| negative test | against | rule | status | reason |", "| --- | --- | --- | --- | --- |"]
            for n in j["negative"]:
                out.append("| %s | %s | %s | %s | %s |" % (
                    _cell(n["id"]), _cell(n["counterpart"] or "-"), n["rule"], C.LABELS[n["status"]],
                    _cell(n["reason"])))
            out.append("")
        if j.get("canary"):
            out += ["Against the run before the upgrade: %s (%s)." % (
                C.LABELS[j["canary"]["status"]], _cell(j["canary"]["reason"])), ""]
    return "\n".join(out).rstrip("\n") + "\n"
