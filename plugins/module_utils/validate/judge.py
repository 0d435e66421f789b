# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's judgement of one node's validation suite: the status of the ``performance`` concern.

``judge_node(doc, store, tolerance, earlier=None)`` takes the ``validation`` document of ``fabric_validate`` (one
node; ``check_doc`` says what it must hold), the baseline ``Store`` and the user's tolerance, and, for the canary of
``kernel_upgrade.yml``, the document of the same node's run before the upgrade. It judges:

- **each run** that expects the direct path: its path (a pass means fast *and* on the intended path: a
  ``fallback`` verdict is drift, ``not_exercised`` and ``unknown`` are not_checked with the verdict's reason, never
  a pass) and its bandwidth against the baseline of its own profile (``baseline.judge``: the fleet median and the
  node's own last good run; a new profile is not_checked "not judged", a run 30 % slower is drift naming both
  numbers). A run whose tool is missing is not_checked with what to install; a run that failed is error;
- **each negative test** (``NEGATIVE``): a run forced off the direct path against its configured counterpart. It
  passes only when its verdict flips to the fallback it was forced to and its bandwidth drops as the topology says
  (``RULES``); where the topology implies no drop, the bandwidths are shown and only the flip is judged. A pair that
  did not run is not_checked;
- **against the earlier run** (``compare``): a bandwidth more than the tolerance below the same run before, host CPU
  up by more than the tolerance (seed 003: "CPU up at the same bandwidth means staging"), a run that fails now, or a
  path that was direct before and is not now, is drift naming both.

Runs whose path was the one expected are recorded in the store (``good: false`` when they drifted, so a slow or
fallen-back run never becomes a reference); the store's files are written once per profile. Returns ``{"node",
"profile_key", "status" (the performance concern: ``concern_model.status`` with items), "runs" (one row per run,
for the report), "negative", "canary" (None without an earlier run)}``. Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.validate import baseline
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

CONCERN = baseline.CONCERN
SCHEMA = 1
TESTS = ("nccl", "nccl_intra", "perftest", "gds")
EXPECTS = (paths.DIRECT, paths.FALLBACK)
RUN_STATUSES = (C.OK, C.NOT_CHECKED, C.ERROR)
# the least host CPU time (s) whose rise the canary judges: below it scheduling noise dominates
CPU_FLOOR = 1.0
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}")

# How far a forced run's bandwidth must fall below its configured counterpart's (forced / configured):
DROP = "drop"        # below (1 - tolerance): the direct path is measurably faster, by how much depends on the node
HALF = "half"        # at most one half: the forced path is a different class of transport
PARITY = "parity"    # no drop implied: the direct (configured) run must be within the tolerance of the forced one
NONE = "none"        # no drop implied, none judged: only the flip proves the fallback is detectable
RULES = {
    DROP: "the direct path must be faster by more than the tolerance",
    HALF: "the forced path must reach at most half the direct path's bandwidth",
    PARITY: "no drop implied: the direct run must reach the forced run's bandwidth within the tolerance",
    NONE: "no drop implied: the bandwidths are shown, only the flip of the verdict is judged",
}

# (test, forced variant) -> the counterpart variants (first found), the fallbacks the verdict must flip to (None: no
# flip, the forced run stays on a direct path of another placement), the bandwidth rule and why (docs/validate.md).
NEGATIVE = {
    ("nccl", "gdr_loc"): (("configured",), (paths.NO_GDR,), DROP,
                          "NCCL_NET_GDR_LEVEL=LOC: the NIC reads and writes host memory and a proxy copies between "
                          "GPU and host; on a NIC under the GPU's PCIe switch (PIX/PXB) that adds a copy and PCIe "
                          "traffic through the root complex (after an upgrade that disabled GDR all-reduce fell "
                          "from about 180 to 10 GB/s, NVIDIA/nccl#1676)"),
    ("nccl", "socket"): (("configured",), (paths.SOCKET,), HALF,
                         "NCCL_IB_DISABLE=1: NCCL's socket transport copies through host memory and the kernel's "
                         "TCP stack on one CPU thread per connection, a fraction of RDMA's line rate"),
    ("nccl_intra", "host_memory"): (("configured",), (paths.HOST_MEMORY,), DROP,
                                    "NCCL_P2P_DISABLE=1: GPUs exchange through shared host memory (SHM) instead of "
                                    "NVLink or PCIe peer to peer; an H200's NVLink has about seven times its "
                                    "PCIe Gen5 bandwidth (900 against 128 GB/s, seed 000)"),
    ("perftest", "host_memory"): (("local_nic", "configured"), (paths.HOST_MEMORY,), PARITY,
                                  "the same NIC into host memory: both legs run at the NIC's line rate when the "
                                  "GPU's peer-to-peer path works, so no drop is implied; a GPU leg slower than "
                                  "the host leg is P2P through the root complex"),
    ("perftest", "remote_nic"): (("local_nic", "configured"), None, DROP,
                                 "the NIC on the other socket (SYS): GPU peer-to-peer crosses both root complexes "
                                 "and the CPU interconnect, slower than the NIC under the GPU's own switch (seed "
                                 "003: a rank on the remote-socket NIC creates cross-NUMA traffic); a NIC of the "
                                 "same socket (NODE) goes through one root complex and implies no drop"),
    ("gds", "host_buffer"): (("gds_direct", "configured"), (paths.HOST_MEMORY,), NONE,
                             "gdsio -x 2 against -x 0: GDS removes the bounce through host memory, not necessarily "
                             "throughput: on seed 000's H200 the host path was faster (3.5/7 GB/s write/read "
                             "against 2.5/4.2 GB/s through GDS on the same mount)"),
    ("gds", "host_memory"): (("gds_direct",), (paths.HOST_MEMORY,), NONE,
                             "KvikIO's posix API against its cufile API: the host path of the same files; as with "
                             "gdsio -x 2, seed 000 measured no throughput gain from GDS"),
    ("gds", "compat_on"): (("compat_off", "gds_direct"), (paths.HOST_MEMORY,), NONE,
                           "cuFile or KvikIO compat mode: POSIX I/O into host memory, then a copy to the GPU; as "
                           "with gdsio -x 2, seed 000 measured no throughput gain from GDS"),
}


class JudgeError(ValueError):
    """A validation document that does not follow the schema; the message names the node and the field."""


def _number(v):
    return v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def check_doc(doc, host="node"):
    """``doc`` when it is a ``validation`` document of schema 1 (runs with unique ids, known tests, expects and
    statuses, numbers where numbers go, a verdict state of ``paths.STATES``); JudgeError naming what is not."""
    if not isinstance(doc, dict):
        raise JudgeError("%s: the validation result is not a mapping" % host)
    if doc.get("schema") != SCHEMA:
        raise JudgeError("%s: validation schema %r is not %d" % (host, doc.get("schema"), SCHEMA))
    prof = doc.get("profile")
    if not isinstance(prof, dict) or not isinstance(prof.get("key"), str):
        raise JudgeError("%s: the validation result has no profile with a key" % host)
    if not isinstance(doc.get("runs"), list):
        raise JudgeError("%s: the validation result has no list of runs" % host)
    seen = set()
    for r in doc["runs"]:
        if not isinstance(r, dict) or not _ID.fullmatch(str(r.get("id"))):
            raise JudgeError("%s: a run without an id of letters, digits and ._:@+-: %r" % (host, r))
        rid = r["id"]
        if rid in seen:
            raise JudgeError("%s: run id %s appears twice" % (host, rid))
        seen.add(rid)
        for key, allowed in (("test", TESTS), ("expect", EXPECTS), ("status", RUN_STATUSES)):
            if r.get(key) not in allowed:
                raise JudgeError("%s: run %s: %s %r is not one of %s"
                                 % (host, rid, key, r.get(key), ", ".join(allowed)))
        for key in ("bandwidth", "cpu_s", "wall_s"):
            if r.get(key) is not None and not (_number(r[key]) and r[key] >= 0):
                raise JudgeError("%s: run %s: %s %r is not a non-negative number" % (host, rid, key, r[key]))
        v = r.get("verdict")
        if v is not None and (not isinstance(v, dict) or v.get("state") not in paths.STATES):
            raise JudgeError("%s: run %s: the verdict has no state of %s" % (host, rid, ", ".join(paths.STATES)))
        if r.get("profile") is not None and not isinstance((r["profile"] or {}).get("key"), str):
            raise JudgeError("%s: run %s: its profile has no key" % (host, rid))
    return doc


def _state(run):
    return (run.get("verdict") or {}).get("state")


def _label(run):
    v = run.get("verdict")
    return paths.label(v) if v else "no verdict"


def _item(node, key, current, desired):
    return {"concern": CONCERN, "object": node, "key": key, "current": current, "desired": desired}


def path_status(run, node):
    """Whether a run that expects the direct path took it."""
    v = run.get("verdict") or {}
    why = v.get("reason") or "no reason given"
    state = v.get("state")
    if state == paths.DIRECT:
        return C.status(C.OK, "on the direct path")
    if state == paths.FALLBACK:
        return C.status(C.DRIFT, "%s expected the direct path and took %s: %s" % (run["id"], paths.label(v), why),
                        [_item(node, run["id"] + ".path", paths.label(v), paths.DIRECT)])
    if state == paths.NOT_EXERCISED:
        return C.status(C.NOT_CHECKED, "%s did not exercise the direct path: %s" % (run["id"], why))
    return C.status(C.NOT_CHECKED, "%s: the output cannot tell which path the data took (%s); read the NCCL INFO "
                    "channel lines or the nvidia-fs counters of the run" % (run["id"], why))


def combine(docs, empty_reason):
    """One status from several: the worst (error, drift, not_checked, ok), its first three distinct reasons, every
    item."""
    docs = [d for d in docs if d]
    if not docs:
        return C.status(C.NOT_CHECKED, empty_reason)
    merged = C.merge(CONCERN, docs)
    reasons = []
    for d in docs:
        if d["status"] == merged["status"] and d.get("reason") and d["reason"] not in reasons:
            reasons.append(d["reason"])
    more = " and %d more" % (len(reasons) - 3) if len(reasons) > 3 else ""
    merged["reason"] = C.one_line("; ".join(reasons[:3]) + more, 1000) if reasons else merged["reason"]
    return merged


def _row(run):
    return {"id": run["id"], "test": run["test"], "variant": run.get("variant"), "expect": run["expect"],
            "tool": run.get("tool"), "metric": run.get("metric"), "bandwidth": run.get("bandwidth"),
            "bandwidth_text": paths.rate(run.get("bandwidth")), "cpu_s": run.get("cpu_s"),
            "wall_s": run.get("wall_s"), "verdict": _label(run), "state": _state(run),
            "path": None, "baseline": None, "status": None, "reason": None}


class _Profiles(object):
    """The baseline documents of one judgement: each profile's file loaded once, written once at the end."""

    def __init__(self, store, default):
        self.store, self.default, self.docs = store, default, {}

    def doc(self, prof=None):
        """(key, document) of ``prof`` (default: the node's profile), a new document for a profile without one."""
        prof = prof or self.default
        if prof["key"] not in self.docs:
            self.docs[prof["key"]] = self.store.load(prof["key"]) or baseline.new_doc(prof)
        return prof["key"], self.docs[prof["key"]]


def _judge_run(run, node, profiles, tolerance):
    """(row, status counted for the concern or None for a forced run, (profile key, status to record) or None)."""
    row = _row(run)
    if run["status"] != C.OK:
        st = C.status(run["status"], "%s: %s" % (run["id"], run.get("reason") or "did not run"))
        row.update(status=st["status"], reason=st["reason"])
        return row, st, None
    bw, metric = run.get("bandwidth"), run.get("metric")
    key, base = None, None
    if bw is not None and metric and _state(run) in (paths.DIRECT, paths.FALLBACK):
        key, bdoc = profiles.doc(run.get("profile"))
        base = baseline.judge(bdoc, node, metric, bw, tolerance)
        row["baseline"] = {"status": base["status"], "reason": base["reason"],
                           "references": base["baseline"]["references"], "profile": key}
    if run["expect"] == paths.FALLBACK:
        row.update(status=C.OK, reason="forced off the direct path: judged as a negative test")
        return row, None, (key, base) if base else None
    path = path_status(run, node)
    row["path"] = path["status"]
    if bw is None and path["status"] == C.OK:
        path = C.status(C.NOT_CHECKED, "%s: on the direct path, but the run gave no bandwidth" % run["id"])
    st = combine([path, base], "no result")
    if path["status"] == C.DRIFT and base is not None:
        base = dict(base, status=C.DRIFT)      # a run off its path never becomes a reference
    row.update(status=st["status"], reason=st["reason"])
    return row, st, (key, base) if base else None


def _counterpart(run, by_id, rows_of):
    spec = NEGATIVE[(run["test"], run["variant"])]
    for want in spec[0]:
        named = re.sub(r"(?<![^.])%s(?![^.])" % re.escape(run["variant"]), want, run["id"])
        if named != run["id"] and by_id.get(named, {}).get("variant") == want:
            return by_id[named]
        same = [r for r in rows_of.get(run["test"], []) if r.get("variant") == want]
        if len(same) == 1:
            return same[0]
    return None


def is_negative(run):
    """A run is a negative test when ``NEGATIVE`` has its variant and it is forced off the direct path (or, for a
    rule without a flip, such as the remote NIC, whatever it expects): the cuFile run with compat mode allowed on a
    node with nvidia-fs expects the direct path and is a direct run."""
    spec = NEGATIVE.get((run["test"], run.get("variant")))
    return spec is not None and (run["expect"] == paths.FALLBACK or spec[1] is None)


def negative_test(forced, base_run, tolerance, node):
    """The negative test of ``forced`` against ``base_run`` (its configured counterpart, or None)."""
    wanted, rule = NEGATIVE[(forced["test"], forced["variant"])][1:3]
    fid = forced["id"]
    if forced["variant"] == "remote_nic" and forced.get("relation") not in (None, "SYS"):
        rule = NONE     # a NIC of the same socket (NODE): P2P through its root complex, no drop implied
    if base_run is None:
        return C.status(C.NOT_CHECKED, "negative test %s: its configured counterpart did not run" % fid)
    bid = base_run["id"]
    for r in (forced, base_run):
        if r["status"] != C.OK:
            return C.status(C.NOT_CHECKED, "negative test %s against %s: %s did not run (%s)"
                            % (fid, bid, r["id"], r.get("reason") or r["status"]))
    if wanted is not None and _state(base_run) != paths.DIRECT:
        return C.status(C.NOT_CHECKED, "negative test %s: its counterpart %s is not on the direct path (%s), so "
                        "there is nothing to flip from" % (fid, bid, _label(base_run)))
    if wanted is not None and not (_state(forced) == paths.FALLBACK and forced["verdict"].get("fallback") in wanted):
        return C.status(C.DRIFT, "negative test %s: forced to fallback: %s, its verdict says %s: a silent fallback "
                        "of this kind would not be seen" % (fid, wanted[0].replace("_", " "), _label(forced)),
                        [_item(node, fid + ".flip", _label(forced), "fallback: " + wanted[0].replace("_", " "))])
    if wanted is None and _state(forced) != _state(base_run):
        return C.status(C.DRIFT, "negative test %s: meant to take the same kind of path as %s on another "
                        "placement, it took %s against %s" % (fid, bid, _label(forced), _label(base_run)),
                        [_item(node, fid + ".path", _label(forced), _label(base_run))])
    fb, bb = forced.get("bandwidth"), base_run.get("bandwidth")
    flip = "flipped to %s" % _label(forced) if wanted is not None else "stayed %s" % _label(forced)
    if rule == NONE:
        return C.status(C.OK, "negative test %s %s (%s against %s for %s; %s)"
                        % (fid, flip, paths.rate(fb), paths.rate(bb), bid, RULES[NONE]))
    if fb is None or not bb:
        return C.status(C.NOT_CHECKED, "negative test %s %s, but the pair has no bandwidth to compare (%s against "
                        "%s)" % (fid, flip, paths.rate(fb), paths.rate(bb)))
    ratio = fb / bb
    shown = "%s against %s for %s (%.0f %%)" % (paths.rate(fb), paths.rate(bb), bid, 100 * ratio)
    if rule == PARITY:
        good, limit = bb >= fb * (1 - tolerance), "%s >= %s" % (bid, paths.rate(fb * (1 - tolerance)))
    elif rule == HALF:
        good, limit = ratio <= 0.5, "<= %s" % paths.rate(bb * 0.5)
    else:
        good, limit = ratio < 1 - tolerance, "< %s" % paths.rate(bb * (1 - tolerance))
    if good:
        return C.status(C.OK, "negative test %s %s and its bandwidth is as the topology implies: %s"
                        % (fid, flip, shown))
    return C.status(C.DRIFT, "negative test %s %s, but %s: %s" % (fid, flip, shown, RULES[rule]),
                    [_item(node, fid + ".bandwidth", fb, limit)])


def compare(doc, earlier, tolerance, node):
    """The canary's comparison of this run with the same node's ``earlier`` one: each run that was ok and expected
    the direct path then."""
    now = dict((r["id"], r) for r in doc["runs"])
    out = []
    for before in earlier["runs"]:
        if before["status"] != C.OK or before["expect"] != paths.DIRECT:
            continue
        rid = before["id"]
        run = now.get(rid)
        if run is None or run["status"] == C.NOT_CHECKED:
            out.append(C.status(C.NOT_CHECKED, "%s ran before (%s) and %s now" % (
                rid, earlier.get("at"), "not" if run is None else "not: " + (run.get("reason") or "not checked"))))
            continue
        if run["status"] == C.ERROR:
            out.append(C.status(C.DRIFT, "%s ran before (%s) and fails now: %s"
                                % (rid, _label(before), run.get("reason") or "error"),
                                [_item(node, rid + ".status", C.ERROR, C.OK)]))
            continue
        found = []
        if _state(before) == paths.DIRECT and _state(run) != paths.DIRECT:
            found.append(C.status(C.DRIFT, "%s took the direct path before and %s now (%s)" % (
                rid, _label(run), (run.get("verdict") or {}).get("reason") or "no reason given"),
                [_item(node, rid + ".path", _label(run), _label(before))]))
        b0, b1 = before.get("bandwidth"), run.get("bandwidth")
        name = run.get("metric") or rid
        if _number(b0) and _number(b1) and b1 < b0 * (1 - tolerance):
            found.append(C.status(C.DRIFT, "%s %s is %.0f %% below its earlier run %s (%s; tolerance %.0f %%)" % (
                name, paths.rate(b1), 100 * (1 - b1 / b0), paths.rate(b0), earlier.get("at"), 100 * tolerance),
                [_item(node, name, b1, ">= %s" % paths.rate(b0 * (1 - tolerance)))]))
        c0, c1 = before.get("cpu_s"), run.get("cpu_s")
        if _number(c0) and _number(c1) and c0 >= CPU_FLOOR and c1 > c0 * (1 + tolerance):
            found.append(C.status(C.DRIFT, "%s used %.1f s of host CPU against %.1f s in its earlier run (%.0f %% "
                                  "more; tolerance %.0f %%): more CPU for the same work means staging through host "
                                  "memory" % (rid, c1, c0, 100 * (c1 / c0 - 1), 100 * tolerance),
                                  [_item(node, rid + ".cpu_s", c1, "<= %.1f" % (c0 * (1 + tolerance)))]))
        out.extend(found or [C.status(C.OK, "%s as before (%s against %s, %s)" % (
            rid, paths.rate(b1), paths.rate(b0), _label(run)))])
    if not out:
        return C.status(C.NOT_CHECKED, "not judged: the earlier run (%s) has no run on the direct path to compare"
                        % earlier.get("at"))
    st = combine(out, "nothing compared")
    if st["status"] == C.OK:
        st["reason"] = "%d run(s) as fast as before (%s) and on the same path" % (len(out), earlier.get("at"))
    return st


def judge_node(doc, store, tolerance=baseline.DEFAULT_TOLERANCE, earlier=None, record=True, host=None):
    """The judgement of one node's validation document (see the module docstring). ``record``: write the runs to
    the store (False: judge only, as in check mode). BaselineError from a store file that does not follow its schema,
    JudgeError from a document that does not."""
    check_doc(doc, host or "node")
    node = host or doc.get("node")
    if earlier is not None:
        check_doc(earlier, "%s (earlier run)" % node)
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise baseline.BaselineError("tolerance %r is not a fraction in [0, 1)" % (tolerance,))
    profiles = _Profiles(store, doc["profile"])
    rows, counted, to_record = [], [], []
    for run in doc["runs"]:
        row, st, rec = _judge_run(run, node, profiles, tolerance)
        rows.append(row)
        if st is not None:
            counted.append(st)
        if rec is not None:
            to_record.append((run, rec))
    by_id = dict((r["id"], r) for r in doc["runs"])
    rows_of = {}
    for r in doc["runs"]:
        rows_of.setdefault(r["test"], []).append(r)
    negative = []
    for run in doc["runs"]:
        if is_negative(run):
            base_run = _counterpart(run, by_id, rows_of)
            st = negative_test(run, base_run, tolerance, node)
            negative.append({"id": run["id"], "counterpart": base_run["id"] if base_run else None,
                             "rule": NEGATIVE[(run["test"], run["variant"])][2], "status": st["status"],
                             "reason": st["reason"], "why": NEGATIVE[(run["test"], run["variant"])][3]})
            counted.append(st)
        elif run["expect"] == paths.FALLBACK:
            counted.append(C.status(C.NOT_CHECKED, "%s is forced off the direct path (variant %s) but has no "
                                    "negative-test rule" % (run["id"], run.get("variant"))))
    canary = compare(doc, earlier, tolerance, node) if earlier is not None else None
    status = combine(counted + ([canary] if canary else []), "not judged: the suite gave no run")
    keys = sorted(profiles.docs)
    if record:
        # runs of a canary that regressed against its earlier run never become references of the new profile
        worse = canary is not None and canary["status"] == C.DRIFT
        for run, (key, st) in to_record:
            baseline.record(profiles.docs[key], node, run["metric"], run["bandwidth"],
                            C.status(C.DRIFT, "canary") if worse else st, at=doc.get("at"))
        for key in keys:
            store.save(profiles.docs[key])
    return {"node": node, "profile_key": doc["profile"]["key"], "at": doc.get("at"), "status": status,
            "runs": rows, "negative": negative, "canary": canary, "recorded": keys if record else []}


def missing(host, why=None):
    """The judgement of a node whose suite gave no document (unreachable, failed before its runs, not run)."""
    return {"node": host, "profile_key": None, "at": None, "runs": [], "negative": [], "canary": None, "recorded": [],
            "status": C.status(C.NOT_CHECKED, why or "not judged: no validation result from the node (the suite did "
                               "not run there)")}


def unusable(host, error):
    """The judgement of a node whose document (or whose profile's baseline file) could not be read."""
    return {"node": host, "profile_key": None, "at": None, "runs": [], "negative": [], "canary": None, "recorded": [],
            "status": C.status(C.ERROR, "the validation result could not be judged: %s" % error)}


# ------------------------------------------------------------------------------------------------
# The report of one judging pass (reports/validate-report.{json,md})

REPORT_SCHEMA = "gpufabric.validate-report/v1"


def report(judged, generated, tolerance, baseline_dir):
    """The JSON document of the report: every node's judgement in host order, and the counts per status."""
    counts = dict((s, 0) for s in C.STATUSES)
    for j in judged.values():
        counts[j["status"]["status"]] += 1
    return {"schema": REPORT_SCHEMA, "generated": generated, "tolerance": tolerance, "baseline_dir": baseline_dir,
            "counts": counts, "nodes": dict((h, judged[h]) for h in sorted(judged)),
            "failed": sorted(h for h, j in judged.items() if j["status"]["status"] in (C.DRIFT, C.ERROR)),
            "not_judged": sorted(h for h, j in judged.items() if j["status"]["status"] == C.NOT_CHECKED)}
