# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of the last judgement of the ``performance`` concern, left on the node by ``validate.yml``.

The suite moves data and is judged on the controller (``validate/judge.py``, the ``validate_judge`` module); a
read-only check cannot repeat it. So ``validate.yml`` leaves the judgement's status on the node in ``RECORD_FILE``
(as ``gds_verify`` leaves its proof in ``/var/lib/gpufabric/gds_verdict.json``), and the one-call check (drift.yml,
the evidence timer) reports that status with its age. Without a record the concern is not_checked: the check moves
no data.

``document(status, now, ...)`` builds the record, ``read(sysroot)`` reads it back (a record that does not follow
``SCHEMA`` is a warning, never a status), ``status_of(doc, now)`` is the concern's status from it.
Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import time

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C

NAME = "performance"
RECORD_FILE = "/var/lib/gpufabric/performance_verdict.json"
SCHEMA = "gpufabric.performance-verdict/v1"
# the most of a record read (ours are a few KiB: the status with its items)
MAX_RECORD = 1 << 20
NO_RECORD = "the one-call check moves no data: run validate.yml (its judge leaves the node's status in %s)" \
    % RECORD_FILE


def document(status, now, profile_key=None, report=None):
    """The record of one judgement: the status document (``concern_model.status``), when it was made, the profile
    it was judged on and the report that shows it."""
    doc = C.normalize(NAME, status)
    return {"schema": SCHEMA, "time": float(now), "status": doc["status"], "reason": doc["reason"],
            "items": doc["items"], "profile_key": profile_key, "report": report}


def read(sysroot, path=RECORD_FILE):
    """(record or None, warning or None): None without a record; a record that does not parse is a warning."""
    raw = sysroot.read_raw(path)
    if raw is None:
        return None, None
    if len(raw) > MAX_RECORD:
        return None, "%s is larger than %d bytes" % (path, MAX_RECORD)
    try:
        doc = json.loads(raw)
    except ValueError as e:
        return None, "%s is not JSON: %s" % (path, e)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or isinstance(doc.get("time"), bool) or \
            not isinstance(doc.get("time"), (int, float)) or not math.isfinite(doc["time"]):
        return None, "%s is not a %s record" % (path, SCHEMA)
    try:
        C.normalize(NAME, doc)
    except C.ConcernError as e:
        return None, "%s: %s" % (path, e)
    return doc, None


def age(seconds):
    """``3 d 4 h``, ``2 h 5 min``, ``7 min``: how long ago, for people."""
    seconds = int(max(0, seconds))
    d, h, m = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if d:
        return "%d d %d h" % (d, h)
    if h:
        return "%d h %d min" % (h, m)
    return "%d min" % m


def status_of(doc, now):
    """The concern's status from a record: the judged status, its reason followed by the judgement's age."""
    doc = dict(doc)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc["time"]))
    said = "judged by validate.yml %s ago (%s)" % (age(now - doc["time"]), when) if now >= doc["time"] else \
        "judged by validate.yml at %s (later than this node's clock)" % when
    out = C.normalize(NAME, doc)
    out["reason"] = C.one_line("%s; %s" % (out["reason"], said) if out["reason"] else said, 1000)
    return out


def from_node(sysroot, now=None, path=RECORD_FILE):
    """The concern's status on a node: from its record, not_checked without one (or with an unusable one)."""
    doc, warning = read(sysroot, path)
    if doc is None:
        return C.status(C.NOT_CHECKED, NO_RECORD if warning is None else "%s (%s)" % (NO_RECORD, warning))
    return status_of(doc, time.time() if now is None else now)
