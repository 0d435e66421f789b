# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcb -j -b`` batches: which iproute2 releases answer them whole, and how their output reads.

Plain Python, no I/O (``manage.run_batch`` runs the process; ``check/node_check.SnapshotRunner`` reads what a batch
answered as the answers of the single queries). This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# What the dcb of each iproute2 release can do, read in iproute2's source (github.com/iproute2/iproute2: dcb/dcb.c,
# lib/utils.c do_batch; the first release tag containing the commit):
#   5.11.0  dcb itself (67033d1c): ets, pfc, buffer, maxrate; -j; -b FILE|- (do_batch: one process, one netlink
#           socket, one JSON writer, so the objects of successive show lines come out comma-separated; it stops at
#           the first failing line with "Command failed FILE:LINE" and rc 1, -f goes on)
#   5.12.0  dcb app (8e9bed14), dcb dcbx (89d11ea5)
#   6.1.0   every request carries NLM_F_ACK (84c03697), but a read stops at its attribute and leaves the ACK in the
#           socket: the next command of the same process reads that ACK (its seq is time(NULL), so it matches
#           within the second) and fails with "Attribute not found: Success". A batch answers its first command only
#   6.2.0   d0e02f35 reads up to the ACK: whole batches again; dcb apptrust (21f88a07)
#   6.5.0   JSON APP entries gain a trailing " " element
BATCH_DEFECT = ((6, 1, 0), (6, 2, 0))   # [from, to): releases whose batch answers only its first command


def batch_answers_all(version):
    """True when the dcb of iproute2 ``version`` (a tuple) answers every command of a ``-b`` batch."""
    return not BATCH_DEFECT[0] <= tuple(version) < BATCH_DEFECT[1]


def split_batch_json(text, count):
    """``dcb -j -b`` stdout -> list of ``count`` JSON texts (one per show command), or None when the
    output does not have that shape (wrong count, not comma-separated objects)."""
    text = (text or "").strip()
    if not text:
        return [] if count == 0 else None
    try:
        data = json.loads("[" + text + "]")
    except ValueError:
        return None
    if len(data) != count or not all(isinstance(d, dict) for d in data):
        return None
    return [json.dumps(d) for d in data]


_BATCH_FAILED_RE = re.compile(r"Command failed \S*:(\d+)")
# iproute2 6.1's dcb (Debian bookworm, Ubuntu 24.04) answers only the first command of a batch: every later one fails
# with "Attribute not found: Success" and the batch stops there (seen on the VM lab's DCB driver with the distribution
# binary; single commands work).
_BATCH_DEFECT = "Attribute not found"


def batch_texts(rc, out, err, count):
    """(texts, usable) of a ``dcb -j -b`` run of ``count`` show lines that ended with ``rc``, ``out``, ``err``
    (see ``manage.run_batch``)."""
    if rc == 0:
        texts = split_batch_json(out, count)
        return (texts, True) if texts is not None else ([], False)
    m = _BATCH_FAILED_RE.search(err or "")
    if m and int(m.group(1)) >= 2 and _BATCH_DEFECT in (err or ""):
        answered = int(m.group(1)) - 1
        texts = split_batch_json(out, answered)
        if texts is not None:
            return texts, True
    return [], False
