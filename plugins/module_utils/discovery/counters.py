# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-priority NIC counters (mlx5 ``ethtool -S``): snapshot, delta, and the fabric acceptance verdicts.

mlx5 facts this code relies on (DESIGN.md section 3):

* ``rx_prio{p}_bytes|packets|discards`` and ``tx_prio{p}_bytes|packets`` exist for p = 0..7.
* ``rx_prio{p}_pause``, ``tx_prio{p}_pause`` (and ``*_pause_duration``, ``rx_prio{p}_pause_transition``) exist only
  for priorities with PFC enabled: a priority without pause counters has PFC off.
* Counters only grow; a smaller value after than before means the device was reset (driver reload, reboot) while
  the test ran, and the delta means nothing.

Acceptance (seed 000, "the lossless class has to match at every hop"): an incast test (several senders, one
receiver) must show the traffic in the lossless priority on the senders' tx and the receiver's rx counters,
priority 0 flat, and a congestion signal while the receiver's link is congested: pause frames (PFC acted) or ECN
activity (DCQCN acted: RoCE packets received CE-marked and CNPs sent, read from the RDMA port's ``hw_counters``,
drivers/infiniband/hw/mlx5/counters.c ``np_ecn_marked_roce_packets np_cnp_sent rp_cnp_handled rp_cnp_ignored``).
DCQCN working well keeps the switch queue below the pause threshold, so an incast with ECN/CNP activity and no
pause passes; one with neither fails. Storage traffic is checked on the receive side too because the array marks
its own return traffic.

Plain Python, no Ansible imports; ``run(argv) -> (rc, out, err)`` is injected.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

SCHEMA_SNAPSHOT = "gpufabric.counters/v1"
SCHEMA_DELTA = "gpufabric.counters-delta/v1"
SCHEMA_ACCEPTANCE = "gpufabric.acceptance/v1"
PRIORITIES = tuple(range(8))
FIELDS = ("rx_bytes", "rx_packets", "rx_discards", "tx_bytes", "tx_packets", "rx_pause", "tx_pause",
          "rx_pause_duration", "tx_pause_duration")
PAUSE_FIELDS = ("rx_pause", "tx_pause")
ROLES = ("sender", "receiver", "storage")
# the direction whose counters carry a role's data
DATA_DIRECTION = {"sender": "tx", "receiver": "rx", "storage": "rx"}
DEFAULT_MIN_BYTES = 1 << 20
DEFAULT_FLAT_TOLERANCE = 1 << 20

_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+):\s+(-?\d+)\s*\Z")
_PRIO = re.compile(r"^(rx|tx)_prio([0-7])_(bytes|packets|discards|pause|pause_duration)\Z")
_IFNAME = re.compile(r"^[A-Za-z0-9_.\-:]{1,15}\Z")
# the RDMA port's congestion counters (/sys/class/infiniband/<dev>/ports/<n>/hw_counters/)
CC_COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored")


class CountersError(ValueError):
    """Input or tool output the counters cannot be read from; the message names the rail."""


def human_bytes(n):
    n = int(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n = n / 1024.0
    return str(n)


# ----------------------------------------------------------------------------------------------
# parsing and snapshots


def parse_ethtool_stats(text):
    """``ethtool -S`` output -> {counter: int}. Lines that are not ``name: integer`` are ignored."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def prio_counters(stats):
    """{counter: int} -> ({"0".."7": {field: int}}, [priorities that have pause counters])."""
    prio = dict((str(p), dict((f, 0) for f in FIELDS)) for p in PRIORITIES)
    pfc = set()
    for name, value in stats.items():
        m = _PRIO.match(name)
        if not m:
            continue
        direction, p, what = m.groups()
        field = "%s_%s" % (direction, what)
        if field in FIELDS:
            prio[p][field] = int(value)
        if what == "pause":
            pfc.add(int(p))
    return prio, sorted(pfc)


def validate_rails(rails):
    if not rails:
        raise CountersError("rails must list at least one network interface")
    seen = set()
    for r in rails:
        if not isinstance(r, str) or not _IFNAME.match(r) or r in (".", ".."):
            raise CountersError("%r is not a network interface name" % (r,))
        if r in seen:
            raise CountersError("rail %s is listed twice" % r)
        seen.add(r)


def rdma_counters(sysroot, ports):
    """({counter: int} summed over the rail's RDMA ports, None) or (None, why not) for ``CC_COUNTERS``."""
    if not ports:
        return None, "no RDMA device port behind the rail"
    out = dict((k, 0) for k in CC_COUNTERS)
    for ibdev, port in ports:
        base = "/sys/class/infiniband/%s/ports/%s/hw_counters" % (ibdev, port)
        for k in CC_COUNTERS:
            raw = sysroot.read("%s/%s" % (base, k))
            if raw is None:
                return None, "cannot read %s/%s" % (base, k)
            try:
                out[k] += int(raw)
            except ValueError:
                return None, "unexpected content %r in %s/%s" % (raw, base, k)
    return out, None


def snapshot(run, rails, clock=time.time, sysroot=None):
    """Read ``ethtool -S`` once per rail, and with ``sysroot`` the RDMA port's congestion counters (``rdma``, or
    ``rdma_error`` saying why they could not be read); raises CountersError naming the rail on failure."""
    validate_rails(rails)
    out = {"schema": SCHEMA_SNAPSHOT, "time": clock(), "rails": {}}
    ports = {}
    if sysroot is not None:
        from ansible_collections.gpufabric.node.plugins.module_utils.discovery import rails as topology_rails
        for r in topology_rails.list_rails(sysroot):
            ports.setdefault(r["netdev"], []).append((r["ibdev"], r["port"]))
    for rail in rails:
        rc, stdout, stderr = run(["ethtool", "-S", rail])
        if rc != 0:
            raise CountersError("ethtool -S %s failed (rc=%d): %s" % (rail, rc, (stderr or stdout).strip()))
        stats = parse_ethtool_stats(stdout)
        prio, pfc = prio_counters(stats)
        if not any(_PRIO.match(k) for k in stats):
            raise CountersError("ethtool -S %s shows no per-priority counters (rx_prio0_bytes ...): is it an mlx5 "
                                "port?" % rail)
        out["rails"][rail] = {"prio": prio, "pfc_counters": pfc}
        if sysroot is not None:
            cc, why = rdma_counters(sysroot, ports.get(rail))
            out["rails"][rail]["rdma"] = cc
            if why:
                out["rails"][rail]["rdma_error"] = why
    return out


def _rdma_delta(b, a):
    """(delta, reset) of the congestion counters, None when either snapshot has none."""
    if not isinstance((b or {}).get("rdma"), dict) or not isinstance((a or {}).get("rdma"), dict):
        return None, False
    d = dict((k, int(a["rdma"].get(k, 0)) - int(b["rdma"].get(k, 0))) for k in CC_COUNTERS)
    if any(v < 0 for v in d.values()):
        return dict((k, int(a["rdma"].get(k, 0))) for k in CC_COUNTERS), True
    return d, False


def _check_snapshot(snap, what):
    if not isinstance(snap, dict) or not isinstance(snap.get("rails"), dict):
        raise CountersError("%s is not a counters snapshot (no 'rails' mapping)" % what)


def delta(before, after):
    """Counter increase between two snapshots, per rail and priority.

    A rail whose counters went down was reset during the interval: it is marked ``reset`` and its values are the
    counts since the reset (what ``after`` shows), which understates the traffic.
    """
    _check_snapshot(before, "previous")
    _check_snapshot(after, "current")
    rails = {}
    for rail, a in sorted(after["rails"].items()):
        b = before["rails"].get(rail)
        if b is None:
            rails[rail] = {"prio": a["prio"], "pfc_counters": a.get("pfc_counters", []), "reset": False,
                           "missing_before": True}
            continue
        reset = False
        prio = {}
        for p in (str(x) for x in PRIORITIES):
            prio[p] = {}
            for f in FIELDS:
                av = int(a["prio"].get(p, {}).get(f, 0))
                bv = int(b["prio"].get(p, {}).get(f, 0))
                if av < bv:
                    reset = True
                prio[p][f] = av - bv
        if reset:
            prio = dict((p, dict((f, int(a["prio"].get(p, {}).get(f, 0))) for f in FIELDS)) for p in prio)
        rails[rail] = {"prio": prio, "pfc_counters": a.get("pfc_counters", []), "reset": reset,
                       "missing_before": False}
        cc, cc_reset = _rdma_delta(b, a)
        if cc is not None:
            rails[rail]["rdma"] = cc
            rails[rail]["rdma_reset"] = cc_reset
    for rail in before["rails"]:
        if rail not in after["rails"]:
            rails[rail] = {"prio": None, "pfc_counters": [], "reset": False, "missing_after": True}
    interval = None
    if before.get("time") is not None and after.get("time") is not None:
        interval = round(float(after["time"]) - float(before["time"]), 3)
    return {"schema": SCHEMA_DELTA, "interval_s": interval, "rails": rails}


# ----------------------------------------------------------------------------------------------
# verdict helpers on one rail's delta


def bytes_in(rail_delta, direction, priority):
    return int(rail_delta["prio"][str(priority)][direction + "_bytes"])


def other_priorities(rail_delta, direction, priority, tolerance):
    """{priority: bytes} of the priorities other than ``priority`` and 0 that moved more than ``tolerance``."""
    out = {}
    for p in PRIORITIES:
        if p in (0, int(priority)):
            continue
        b = bytes_in(rail_delta, direction, p)
        if b > tolerance:
            out[p] = b
    return out


def pauses(rail_delta, priority):
    c = rail_delta["prio"][str(priority)]
    return {"rx_pause": int(c["rx_pause"]), "tx_pause": int(c["tx_pause"])}


def check_rail(rail_delta, role, priority=3, min_bytes=DEFAULT_MIN_BYTES, flat_tolerance=DEFAULT_FLAT_TOLERANCE):
    """Failures of one participant's rail: a list of {"reason", "detail"} (empty when it passed).

    Reasons: rail_missing, counters_reset, no_traffic_in_priority, priority0_not_flat, traffic_in_other_priority,
    discards_in_priority, pfc_off (no pause counters for the priority: PFC is disabled on it).
    """
    if role not in ROLES:
        raise CountersError("role must be one of %s, got %r" % (", ".join(ROLES), role))
    if rail_delta is None or rail_delta.get("prio") is None or rail_delta.get("missing_before"):
        return [{"reason": "rail_missing", "detail": "no counters before and after the test"}]
    fails = []
    if rail_delta.get("reset"):
        fails.append({"reason": "counters_reset",
                      "detail": "counters went down during the test (driver reload or reboot): deltas are invalid"})
        return fails
    d = DATA_DIRECTION[role]
    p = int(priority)
    got = bytes_in(rail_delta, d, p)
    zero = bytes_in(rail_delta, d, 0) if p != 0 else 0
    if got < min_bytes:
        fails.append({"reason": "no_traffic_in_priority",
                      "detail": "%s %s in priority %d (at least %s expected)%s"
                                % (d, human_bytes(got), p, human_bytes(min_bytes),
                                   "; %s in priority 0" % human_bytes(zero) if zero else "")})
    if p != 0 and zero > flat_tolerance:
        fails.append({"reason": "priority0_not_flat",
                      "detail": "%s %s in priority 0 (tolerance %s)" % (d, human_bytes(zero),
                                                                        human_bytes(flat_tolerance))})
    if role == "storage" and p != 0:
        tx0 = bytes_in(rail_delta, "tx", 0)
        if tx0 > flat_tolerance:
            fails.append({"reason": "priority0_not_flat",
                          "detail": "tx %s in priority 0: the host's storage requests are not marked (rdma_cm "
                                    "default ToS)" % human_bytes(tx0)})
    others = other_priorities(rail_delta, d, p, flat_tolerance)
    if others:
        fails.append({"reason": "traffic_in_other_priority",
                      "detail": "%s " % d + ", ".join("%s in priority %d" % (human_bytes(b), q)
                                                      for q, b in sorted(others.items()))})
    disc = int(rail_delta["prio"][str(p)]["rx_discards"])
    if role != "sender" and disc > 0:
        fails.append({"reason": "discards_in_priority",
                      "detail": "%d packets discarded in priority %d: the class was not lossless" % (disc, p)})
    if p not in [int(x) for x in rail_delta.get("pfc_counters") or []]:
        fails.append({"reason": "pfc_off", "detail": "no pause counters for priority %d: PFC is off on it" % p})
    return fails


# ----------------------------------------------------------------------------------------------
# fleet evaluation


def validate_plan(plan):
    if not isinstance(plan, list) or not plan:
        raise CountersError("plan must be a non-empty list of rails with their participants")
    for i, entry in enumerate(plan):
        if not isinstance(entry, dict) or not entry.get("rail"):
            raise CountersError("plan entry %d has no 'rail' label" % i)
        parts = entry.get("participants")
        if not isinstance(parts, list) or not parts:
            raise CountersError("plan entry %s has no participants" % entry["rail"])
        for p in parts:
            if not isinstance(p, dict) or not p.get("host") or not p.get("netdev"):
                raise CountersError("plan entry %s: every participant needs 'host' and 'netdev'" % entry["rail"])
            if p.get("role") not in ROLES:
                raise CountersError("plan entry %s: participant %s has role %r (one of %s)"
                                    % (entry["rail"], p["host"], p.get("role"), ", ".join(ROLES)))


def _hint(role, fails):
    reasons = set(f["reason"] for f in fails)
    if reasons & {"no_traffic_in_priority", "priority0_not_flat", "traffic_in_other_priority"}:
        if role == "sender":
            return "the sender marks the wrong DSCP (ToS) or its DSCP-to-priority map is wrong"
        if role == "receiver":
            return "the receiver's DSCP-to-priority map is wrong, or a sender marks the wrong DSCP"
        return "the array's return traffic is not marked with the lossless DSCP, or the host's map is wrong"
    if "discards_in_priority" in reasons or "pfc_off" in reasons:
        return "PFC is not enabled on the lossless priority"
    return ""


def evaluate(plan, deltas, priority=3, min_bytes=DEFAULT_MIN_BYTES, flat_tolerance=DEFAULT_FLAT_TOLERANCE,
             expect_pause=True, errors=None):
    """Acceptance verdict of a whole test.

    plan: [{"rail": label, "participants": [{"host", "netdev", "role": sender|receiver|storage}]}]
    deltas: {host: delta()} ; errors: {host: {netdev: message}} for tools that failed (e.g. ib_write_bw).
    Pause frames are expected on a rail when ``expect_pause`` and at least two senders share its receiver: seen on
    any participant (senders paused: rx_pause; receiver pausing: tx_pause).
    """
    validate_plan(plan)
    if not isinstance(deltas, dict):
        raise CountersError("deltas must map host names to counter deltas")
    errors = errors or {}
    rails = []
    failures = []
    for entry in plan:
        rows = []
        pause_total = 0
        cc_total = dict((k, 0) for k in CC_COUNTERS)
        cc_read = 0
        senders = [p for p in entry["participants"] if p["role"] == "sender"]
        culprits = []
        for part in entry["participants"]:
            host, netdev, role = part["host"], part["netdev"], part["role"]
            hd = deltas.get(host)
            rd = None
            if isinstance(hd, dict) and isinstance(hd.get("rails"), dict):
                rd = hd["rails"].get(netdev)
            fails = check_rail(rd, role, priority, min_bytes, flat_tolerance)
            err = (errors.get(host) or {}).get(netdev)
            if err:
                fails.insert(0, {"reason": "tool_failed", "detail": str(err)})
            row = {"host": host, "netdev": netdev, "role": role, "ok": not fails, "failures": fails}
            if rd is not None and rd.get("prio") is not None:
                d = DATA_DIRECTION[role]
                row["bytes_in_priority"] = bytes_in(rd, d, priority)
                row["bytes_in_priority0"] = bytes_in(rd, d, 0)
                row["pauses"] = pauses(rd, priority)
                pause_total += sum(row["pauses"].values())
                if isinstance(rd.get("rdma"), dict) and not rd.get("rdma_reset"):
                    row["congestion"] = dict((k, int(rd["rdma"].get(k, 0))) for k in CC_COUNTERS)
                    cc_read += 1
                    for k in CC_COUNTERS:
                        cc_total[k] += row["congestion"][k]
            if fails and role == "sender":
                culprits.append(host)
            rows.append(row)
        incast = len(senders) >= 2
        rail_fail = []
        # DCQCN acted: the NP saw CE-marked RoCE packets and sent CNPs
        ecn_acted = cc_total["np_ecn_marked_roce_packets"] > 0 and cc_total["np_cnp_sent"] > 0
        if expect_pause and incast and pause_total == 0 and not ecn_acted:
            if cc_read == 0:
                why = "PFC did not act (the ECN/CNP counters could not be read)"
            elif cc_total["np_ecn_marked_roce_packets"] > 0:
                why = ("PFC did not act, and %d CE-marked packets drew no CNP: the notification point is off"
                       % cc_total["np_ecn_marked_roce_packets"])
            else:
                why = "no ECN mark and no CNP either: neither PFC nor DCQCN acted"
            rail_fail.append({"reason": "no_pause_under_incast",
                              "detail": "%d senders into one receiver and no pause frame in priority %d on any "
                                        "participant: %s" % (len(senders), int(priority), why)})
        for row in rows:
            if row["failures"]:
                hint = _hint(row["role"], row["failures"])
                if row["role"] == "receiver" and culprits:
                    hint = "traffic from %s left priority %d" % (", ".join(culprits), int(priority))
                row["hint"] = hint
                failures.append({"rail": entry["rail"], "host": row["host"], "netdev": row["netdev"],
                                 "role": row["role"], "reasons": [f["reason"] for f in row["failures"]],
                                 "message": "%s rail %s (%s, %s): %s%s"
                                            % (row["host"], row["netdev"], row["role"], entry["rail"],
                                               "; ".join(f["detail"] for f in row["failures"]),
                                               " -- " + hint if hint else "")})
        for f in rail_fail:
            failures.append({"rail": entry["rail"], "host": None, "netdev": None, "role": None,
                             "reasons": [f["reason"]], "message": "rail %s: %s" % (entry["rail"], f["detail"])})
        rails.append({"rail": entry["rail"], "ok": not rail_fail and all(r["ok"] for r in rows), "incast": incast,
                      "pause_frames": pause_total, "participants": rows, "failures": rail_fail,
                      "congestion": dict(cc_total, read=cc_read, ecn_acted=ecn_acted)})
    return {
        "schema": SCHEMA_ACCEPTANCE,
        "ok": not failures,
        "priority": int(priority),
        "min_bytes": int(min_bytes),
        "flat_tolerance": int(flat_tolerance),
        "rails": rails,
        "failures": failures,
        "failed": sorted(set("%s/%s" % (f["host"], f["netdev"]) for f in failures if f["host"])),
    }


def to_markdown(result, title="gpufabric fabric acceptance"):
    lines = ["# %s" % title, "",
             "%s: lossless priority %d, %d rail(s), %d failure(s)."
             % ("PASS" if result["ok"] else "FAIL", result["priority"], len(result["rails"]),
                len(result["failures"])), "",
             "| rail | host | netdev | role | prio %d | prio 0 | pauses rx/tx | ECN marked/CNP sent/CNP handled "
             "| verdict |" % result["priority"],
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rails"]:
        for p in r["participants"]:
            pz = p.get("pauses") or {}
            cz = p.get("congestion")
            cc = "%d/%d/%d" % (cz["np_ecn_marked_roce_packets"], cz["np_cnp_sent"], cz["rp_cnp_handled"]) if cz \
                else "-"
            lines.append("| %s | %s | %s | %s | %s | %s | %s/%s | %s | %s |" % (
                r["rail"], p["host"], p["netdev"], p["role"],
                human_bytes(p["bytes_in_priority"]) if "bytes_in_priority" in p else "-",
                human_bytes(p["bytes_in_priority0"]) if "bytes_in_priority0" in p else "-",
                pz.get("rx_pause", "-"), pz.get("tx_pause", "-"), cc,
                "ok" if p["ok"] else "FAIL: " + ", ".join(f["reason"] for f in p["failures"])))
    if result["failures"]:
        lines.extend(["", "## Failures", ""])
        lines.extend("- %s" % f["message"] for f in result["failures"])
    return "\n".join(lines) + "\n"
