# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One result per object (rail, device port, bridge, setting) of a partial apply.

The modules that configure many objects (``dcb_qos`` per rail, ``rdma_cm_tos`` per device port, ``pcie_acs`` per
bridge, ``rail_sysctl`` per setting) and the boot-time applier go on with the other objects when one fails, and then
say for each object what happened::

    {"object": "ens5np0", "result": "failed", "error": "dcb pfc set ... failed (rc=1): ...",
     "changes": [{"key": "dscp_prio:26", "before": null, "after": 3}]}

``result`` is ``changed`` (in check mode: would change), ``unchanged`` or ``failed``; ``changes`` lists what was
changed on the object, one entry per key, as read back (a failed object may have been changed in part: its first
commands worked). A module's ``changed`` is true when any object changed, failed ones included.

Plain Python, no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

CHANGED = "changed"
UNCHANGED = "unchanged"
FAILED = "failed"
RESULTS = (CHANGED, UNCHANGED, FAILED)


def result(obj, outcome, error=None, changes=None):
    if outcome not in RESULTS:
        raise ValueError("result %r is not one of %s" % (outcome, ", ".join(RESULTS)))
    if (outcome == FAILED) != bool(error):
        raise ValueError("a failed object needs an error, and only a failed one: %r %r" % (obj, error))
    return {"object": obj, "result": outcome, "error": error, "changes": list(changes or [])}


def change(key, before, after):
    return {"key": key, "before": before, "after": after}


def from_drift(obj, drift, error=None):
    """The result of an object planned with ``drift`` (the items of every object): corrected in full (its drift is
    what changed, or in check mode what would) or, with ``error``, failed before anything was changed on it."""
    if error:
        return result(obj, FAILED, error)
    items = [d for d in drift if d["object"] == obj]
    if not items:
        return result(obj, UNCHANGED)
    return result(obj, CHANGED, changes=[change(d["key"], d["current"], d["desired"]) for d in items])


def failed(results):
    return [r for r in results if r["result"] == FAILED]


def changed(results):
    return any(r["result"] == CHANGED or r["changes"] for r in results)


def names(results, outcome):
    return [r["object"] for r in results if r["result"] == outcome]


def _fmt(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return "unset" if value is None else str(value)


def change_lines(results):
    """``<object> <key> <before> -> <after>``, one line per object and key that changed."""
    return ["%s %s %s -> %s" % (r["object"], c["key"], _fmt(c["before"]), _fmt(c["after"]))
            for r in results for c in r["changes"]]


def failure_message(what, noun, results):
    """One line naming every failed object with its error, then what was changed and what was left as it was."""
    bad = failed(results)
    head = "%s failed on %s %s: %s" % (what, noun, ", ".join(r["object"] for r in bad),
                                       "; ".join("%s: %s" % (r["object"], r["error"]) for r in bad))
    tail = []
    for outcome in (CHANGED, UNCHANGED):
        objs = names(results, outcome)
        if objs:
            tail.append("%s %s" % (outcome, ", ".join(objs)))
    partly = [r["object"] for r in bad if r["changes"]]
    if partly:
        tail.append("changed in part before failing %s" % ", ".join(partly))
    return head + (" (%s)" % "; ".join(tail) if tail else "")


def annotate(items, results, object_of=None):
    """Drift items with the ``result`` (and ``error``) of their object, for a concern's error status; items of
    objects without a result (a state file) are left as they are. ``object_of(item)``: the result object an item
    belongs to (default its ``object``; rail_sysctl's results are per setting)."""
    by_obj = dict((r["object"], r) for r in results)
    out = []
    for i in items:
        item = dict(i)
        r = by_obj.get(object_of(i) if object_of else i.get("object"))
        if r is not None:
            item["result"] = r["result"]
            if r["error"]:
                item["error"] = r["error"]
        out.append(item)
    return out
