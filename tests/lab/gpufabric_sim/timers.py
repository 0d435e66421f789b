# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time on a simulated node, and its timer units: a clock per node and ``elapse``, which runs what falls due.

The clock: time on a node passes only when a test elapses it (nothing runs in the background, so a run is
deterministic). The monotonic clock (time since boot, ``run/gpufabric-sim/clock.json``) starts at 0 when the node
boots and is lost with /run at a reboot; the realtime clock is the boot's wall-clock time (the host's time when the
node first reads its clock after boot, never earlier than the last time the node saw: ``var/lib/gpufabric-sim/
clock.json``) plus the monotonic one.

Timer units are scheduled as src/core/timer.c (systemd/systemd, ``timer_enter_waiting``, ``timer_start``,
``timer_enter_running``) does:
- OnBootSec=/OnStartupSec= count from boot (0), OnActiveSec= from the timer's own activation, OnUnitActiveSec= /
  OnUnitInactiveSec= from the later of the triggered unit's last activation / deactivation and the timer's last
  trigger (never activated and never triggered: that value is skipped);
- once the timer has triggered, an OnBootSec/OnStartupSec/OnActiveSec value already in the past is spent (a "one
  time trigger"); ``systemctl start`` forgets the last trigger, so a timer started after its OnBootSec has passed
  elapses at once;
- OnCalendar= counts from the last trigger's realtime, else the timer's activation; Persistent=yes keeps the last
  trigger as the mtime of ``/var/lib/systemd/timers/stamp-<timer>`` (read back at start when it is in the past), so
  a run missed while the timer was stopped happens at start;
- RandomizedDelaySec= adds ``hash % delay``: with FixedRandomDelay=yes the hash of machine id and unit name
  (timer_get_fixed_delay_hash), else a value derived from the unit name and the trigger count, so runs repeat;
- AccuracySec= lets systemd fire up to that late; the simulator fires at the earliest allowed time;
- Unit= names the unit to start (default: the timer's name with ``.service``).
A due timer starts its unit with ``systemctl start`` (a oneshot runs to its end) and its next elapse is computed
again from the new timestamps; stopped, disabled-and-never-started and masked timers never fire.
Time spans are parsed as parse_time() in src/basic/time-util.c; OnCalendar= takes the shorthands (minutely,
hourly, daily, weekly, monthly, quarterly, semiannually, yearly/annually) and ``[DOW] [[Y-]M-D] [H:M[:S]]`` with
``*``, numbers, ``a..b``, ``a/step`` and ``,`` lists, in UTC.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import hashlib
import json
import os
import re
import time

USEC = 1000000
USEC_INFINITY = (1 << 64) - 1

# extract_multiplier() of src/basic/time-util.c: the first suffix of this table that the text starts with wins
_MULTIPLIERS = (
    ("seconds", USEC), ("second", USEC), ("sec", USEC), ("s", USEC),
    ("minutes", 60 * USEC), ("minute", 60 * USEC), ("min", 60 * USEC),
    ("months", 2629800 * USEC), ("month", 2629800 * USEC), ("M", 2629800 * USEC),
    ("msec", 1000), ("ms", 1000), ("m", 60 * USEC),
    ("hours", 3600 * USEC), ("hour", 3600 * USEC), ("hr", 3600 * USEC), ("h", 3600 * USEC),
    ("days", 86400 * USEC), ("day", 86400 * USEC), ("d", 86400 * USEC),
    ("weeks", 604800 * USEC), ("week", 604800 * USEC), ("w", 604800 * USEC),
    ("years", 31557600 * USEC), ("year", 31557600 * USEC), ("y", 31557600 * USEC),
    ("usec", 1), ("us", 1), ("\u03bcs", 1), ("\u00b5s", 1),
)
_WS = " \t\n\r"


def parse_timespan(text, default_unit=USEC):
    """Microseconds of a systemd time span (``5min 30s``, ``1h``, ``90``: a bare number is ``default_unit``);
    ValueError for what systemd refuses."""
    p = text.strip(_WS)
    if p == "infinity":
        return USEC_INFINITY
    total = 0
    something = False
    while True:
        p = p.lstrip(_WS)
        if not p:
            if not something:
                raise ValueError("empty time span %r" % text)
            return total
        m = re.match(r"(\d+)(?:\.(\d+))?|\.(\d+)", p)
        if not m:
            raise ValueError("invalid time span %r" % text)
        whole, frac = m.group(1) or "0", m.group(2) or m.group(3) or ""
        p = p[m.end():]
        rest = p.lstrip(_WS)
        multiplier = default_unit
        for suffix, usec in _MULTIPLIERS:
            if rest.startswith(suffix):
                multiplier, p = usec, rest[len(suffix):]
                break
        else:
            if p and p[0] not in _WS:
                raise ValueError("invalid time span %r" % text)
        total += int(whole) * multiplier
        div = 10
        for digit in frac:
            total += int(digit) * multiplier // div
            div *= 10
        something = True


def format_timespan(usec):
    """systemd's format_timespan(..., accuracy 1 s) for the values ``show`` prints (``1min 30s``, ``0``)."""
    if usec == USEC_INFINITY:
        return "infinity"
    secs = usec // USEC
    if secs == 0:
        return "%dms" % (usec // 1000) if usec >= 1000 else ("%dus" % usec if usec else "0")
    parts = []
    for name, size in (("y", 31557600), ("month", 2629800), ("w", 604800), ("d", 86400), ("h", 3600),
                       ("min", 60), ("s", 1)):
        if secs >= size:
            parts.append("%d%s" % (secs // size, name))
            secs %= size
    return " ".join(parts)


def format_timestamp(usec):
    """``Thu 2026-12-03 09:30:00 UTC`` (systemctl show's form; the simulated node runs in UTC); ``n/a`` for 0."""
    if not usec or usec == USEC_INFINITY:
        return "n/a"
    return datetime.datetime.fromtimestamp(usec // USEC, datetime.timezone.utc).strftime("%a %Y-%m-%d %H:%M:%S UTC")


# --- OnCalendar ------------------------------------------------------------------------------------------------

SHORTHANDS = {"minutely": "*-*-* *:*:00", "hourly": "*-*-* *:00:00", "daily": "*-*-* 00:00:00",
              "weekly": "Mon *-*-* 00:00:00", "monthly": "*-*-01 00:00:00",
              "quarterly": "*-01,04,07,10-01 00:00:00", "semiannually": "*-01,07-01 00:00:00",
              "yearly": "*-01-01 00:00:00", "annually": "*-01-01 00:00:00"}
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _field(text, lo, hi, what):
    """The set of values a calendar field allows (None: any)."""
    if text == "*":
        return None
    out = set()
    for item in text.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:\.\.(\d+))?(?:/(\d+))?", item)
        if not m:
            raise ValueError("calendar %s %r is not emulated" % (what, text))
        start = lo if m.group(1) == "*" else int(m.group(1))
        end = int(m.group(2)) if m.group(2) else (hi if m.group(3) or m.group(1) == "*" else start)
        step = int(m.group(3) or 1)
        if not lo <= start <= hi or not start <= end <= hi or step < 1:
            raise ValueError("calendar %s %r is out of range" % (what, text))
        out.update(range(start, end + 1, step))
    return out


def _weekdays(text):
    out = set()
    for item in text.lower().split(","):
        ends = item.split("..")
        idx = []
        for e in ends:
            names = [i for i, d in enumerate(_DAYS) if e[:3] == d and ("monday tuesday wednesday thursday friday "
                                                                       "saturday sunday").split()[i].startswith(e)]
            if len(e) < 3 or not names:
                raise ValueError("calendar weekday %r is not valid" % item)
            idx.append(names[0])
        if len(idx) == 1:
            out.add(idx[0])
        elif len(idx) == 2 and idx[0] <= idx[1]:
            out.update(range(idx[0], idx[1] + 1))
        else:
            raise ValueError("calendar weekday range %r is not valid" % item)
    return out


def parse_calendar(text):
    """A calendar spec {dow, year, month, day, hour, minute, second} (None: any) from an OnCalendar= value."""
    words = SHORTHANDS.get(text.strip(), text.strip()).split()
    spec = {"dow": None}
    if words and re.fullmatch(r"[A-Za-z][A-Za-z.,]*", words[0]):
        spec["dow"] = _weekdays(words.pop(0))
    date, clock = "*-*-*", "00:00:00"
    if words and "-" in words[0]:
        date = words.pop(0)
    if words and ":" in words[0]:
        clock = words.pop(0)
    if words:
        raise ValueError("OnCalendar=%s: %r is not emulated (no time zones, no '~')" % (text, " ".join(words)))
    d = date.split("-")
    if len(d) == 2:
        d = ["*"] + d
    c = clock.split(":")
    if len(c) == 2:
        c.append("00")
    if len(d) != 3 or len(c) != 3:
        raise ValueError("OnCalendar=%s is not a calendar spec" % text)
    spec.update(year=_field(d[0], 1970, 2199, "year"), month=_field(d[1], 1, 12, "month"),
                day=_field(d[2], 1, 31, "day"), hour=_field(c[0], 0, 23, "hour"), minute=_field(c[1], 0, 59, "minute"),
                second=_field(c[2], 0, 59, "second"))
    return spec


def _ok(allowed, value):
    return allowed is None or value in allowed


def calendar_next(spec, after_usec):
    """The first realtime (usec) the spec matches strictly after ``after_usec`` (None: none within 10 years)."""
    after = datetime.datetime.fromtimestamp(after_usec // USEC, datetime.timezone.utc)
    day = after.replace(hour=0, minute=0, second=0)
    for _i in range(3660):
        if _ok(spec["year"], day.year) and _ok(spec["month"], day.month) and _ok(spec["day"], day.day) and \
                _ok(spec["dow"], day.weekday()):
            for h in sorted(spec["hour"]) if spec["hour"] is not None else range(24):
                for mi in sorted(spec["minute"]) if spec["minute"] is not None else range(60):
                    for s in sorted(spec["second"]) if spec["second"] is not None else range(60):
                        t = day.replace(hour=h, minute=mi, second=s)
                        if t > after:
                            return int(t.timestamp()) * USEC
        day += datetime.timedelta(days=1)
    return None


# --- timer units -----------------------------------------------------------------------------------------------

MONOTONIC_KEYS = {"OnActiveSec": "active", "OnBootSec": "boot", "OnStartupSec": "startup",
                  "OnUnitActiveSec": "unit_active", "OnUnitInactiveSec": "unit_inactive"}
_TRUE = ("yes", "true", "1", "on")


def timer_spec(unit, sections, warn=None):
    """The [Timer] section of ``unit``: {values: [(base, usec)], calendar: [(text, spec)], accuracy, random,
    fixed_random, persistent, unit}. Values systemd cannot parse are ignored with a warning, as systemd does;
    ValueError when no trigger is left ("Timer unit lacks value setting. Refusing.")."""
    out = {"values": [], "calendar": [], "accuracy": 60 * USEC, "random": 0, "fixed_random": False,
           "persistent": False, "unit": unit.rpartition(".")[0] + ".service"}
    for key, value in sections.get("Timer", []):
        try:
            if key in MONOTONIC_KEYS:
                if value.strip() == "":
                    out["values"] = []    # an empty assignment resets the list
                    out["calendar"] = []
                else:
                    out["values"].append((MONOTONIC_KEYS[key], parse_timespan(value)))
            elif key == "OnCalendar":
                if value.strip() == "":
                    out["values"], out["calendar"] = [], []
                else:
                    out["calendar"].append((value, parse_calendar(value)))
            elif key == "AccuracySec":
                out["accuracy"] = parse_timespan(value)
            elif key == "RandomizedDelaySec":
                out["random"] = parse_timespan(value)
            elif key == "FixedRandomDelay":
                out["fixed_random"] = value.strip().lower() in _TRUE
            elif key == "Persistent":
                out["persistent"] = value.strip().lower() in _TRUE
            elif key == "Unit":
                out["unit"] = value.strip()
        except ValueError as e:
            if warn:
                warn("%s: failed to parse %s=%s, ignoring: %s" % (unit, key, value, e))
    if not out["values"] and not out["calendar"]:
        raise ValueError("%s lacks a value setting (OnCalendar=, OnBootSec=...): refusing" % unit)
    return out


def stamp_path(root, unit):
    return os.path.join(root, "var", "lib", "systemd", "timers", "stamp-" + unit)


def _fixed_hash(root, unit):
    try:
        with open(os.path.join(root, "etc", "machine-id")) as f:
            mid = f.read().strip()
    except OSError:
        mid = ""
    return int(hashlib.sha256((mid + unit).encode()).hexdigest()[:16], 16)


def next_elapse(root, unit, spec, timer, trigger, now):
    """(monotonic usec of the next elapse or None, {base: spent}) for a started timer; ``timer``: its runtime state
    (activated_mono/_real, last_trigger_mono/_real, spent), ``trigger``: the triggered unit's (exit_mono,
    enter_mono), ``now``: (realtime, monotonic)."""
    real_now, mono_now = now
    boot_real = real_now - mono_now
    last_mono, last_real = timer.get("last_trigger_mono"), timer.get("last_trigger_real")
    best = None
    spent = set(timer.get("spent", []))
    for i, (base_kind, value) in enumerate(spec["values"]):
        if str(i) in spent:
            continue
        if base_kind == "active":
            base = timer.get("activated_mono", mono_now)
        elif base_kind in ("boot", "startup"):
            base = 0
        else:
            ts = trigger.get("exit_mono" if base_kind == "unit_active" else "enter_mono")
            cands = [x for x in (ts, last_mono) if x is not None]
            if not cands:
                continue
            base = max(cands)
        at = base + value
        past = last_mono is not None and (at < mono_now or at <= last_mono)
        if past and base_kind in ("active", "boot", "startup"):
            # a one time trigger, disabled now (systemd sees it in the past once the run took any time at all;
            # no time passes during a simulated run, hence also "at or before the last trigger")
            spent.add(str(i))
            continue
        best = at if best is None else min(best, at)
    for _text, cal in spec["calendar"]:
        b = last_real if last_real is not None else timer.get("activated_real", real_now)
        at_real = calendar_next(cal, b)
        if at_real is None:
            continue
        at = max(at_real - boot_real, 0)   # a time before boot is rebased to boot
        best = at if best is None else min(best, at)
    if best is not None and spec["random"]:
        h = _fixed_hash(root, unit) if spec["fixed_random"] else int(hashlib.sha256(
            ("%s:%d" % (unit, timer.get("triggers", 0))).encode()).hexdigest()[:16], 16)
        best += h % spec["random"]
    return best, sorted(spent)


# --- the clock -------------------------------------------------------------------------------------------------

def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, sort_keys=True)
    os.rename(tmp, path)


def _boot_clock(root):
    return os.path.join(root, "run", "gpufabric-sim", "clock.json")


def _wall_clock(root):
    return os.path.join(root, "var", "lib", "gpufabric-sim", "clock.json")


def now(root):
    """(realtime, monotonic) of the node in usec; the first read after a boot fixes the boot's wall-clock time."""
    boot = _read_json(_boot_clock(root))
    if "boot_realtime" not in boot:
        seen = _read_json(_wall_clock(root)).get("realtime", 0)
        boot = {"boot_realtime": max(int(time.time()) * USEC, seen), "monotonic": 0}
        _write_json(_boot_clock(root), boot)
    return boot["boot_realtime"] + boot["monotonic"], boot["monotonic"]


def set_monotonic(root, mono):
    boot = _read_json(_boot_clock(root))
    now(root)
    boot = _read_json(_boot_clock(root))
    boot["monotonic"] = max(boot["monotonic"], mono)
    _write_json(_boot_clock(root), boot)
    _write_json(_wall_clock(root), {"realtime": boot["boot_realtime"] + boot["monotonic"]})


def now_readonly(root):
    """``now`` without fixing the boot's time (for queries, which write nothing)."""
    boot = _read_json(_boot_clock(root))
    if "boot_realtime" not in boot:
        seen = _read_json(_wall_clock(root)).get("realtime", 0)
        return max(int(time.time()) * USEC, seen), 0
    return boot["boot_realtime"] + boot["monotonic"], boot["monotonic"]


# --- what systemctl does with timers ---------------------------------------------------------------------------

def started(root, unit, spec, record):
    """``record`` (the timer's runtime state) as ``timer_start`` leaves it: the last trigger forgotten, spent values
    re-enabled, Persistent= read back from the stamp file (or the stamp created)."""
    real, mono = now(root)
    record.update(activated_mono=mono, activated_real=real, spent=[], triggers=record.get("triggers", 0))
    record.pop("last_trigger_mono", None)
    record.pop("last_trigger_real", None)
    if spec["persistent"]:
        stamp = stamp_path(root, unit)
        if os.path.exists(stamp):
            ft = int(os.stat(stamp).st_mtime) * USEC
            if ft < real:
                record["last_trigger_real"] = ft
        else:
            os.makedirs(os.path.dirname(stamp), exist_ok=True)
            with open(stamp, "a"):
                pass
            os.utime(stamp, (real // USEC, real // USEC))
    return record


def _timer_units(sc, state):
    from gpufabric_sim import units
    for unit in sorted(state["units"]):
        if not unit.endswith(".timer") or state["units"][unit].get("state") != "active":
            continue
        path = units.find_unit(sc.root, unit)
        if path is None or units.mask_of(sc.root, unit):
            continue
        yield unit, path


def schedule(sc, state, warn=None):
    """{timer: (next elapse monotonic or None, spec)} of the started timers; updates their spent values."""
    from gpufabric_sim import units
    out = {}
    clock = now_readonly(sc.root)
    for unit, path in _timer_units(sc, state):
        try:
            spec = timer_spec(unit, units.read_unit_sections(sc.root, unit, path), warn)
        except ValueError:
            continue
        rec = state["units"][unit]
        at, spent = next_elapse(sc.root, unit, spec, rec, state["units"].get(spec["unit"], {}), clock)
        rec["spent"] = spent
        out[unit] = (at, spec)
    return out


MAX_TRIGGERS = 10000


def elapse(sc, usec):
    """Advance the node's clock by ``usec`` and start every timer's unit each time it falls due, in order (ties by
    timer name), as systemd would; returns {"monotonic", "realtime", "triggered": [{timer, unit, monotonic, rc}]}.
    ``sc``: the node's ``services.Systemctl``."""
    from gpufabric_sim import units
    _real, mono = now(sc.root)
    target = mono + int(usec)
    fired = []
    for _i in range(MAX_TRIGGERS):
        state = units.load_state(sc.root)
        plan = schedule(sc, state)
        units.save_state(sc.root, state)
        due = sorted((max(at, now(sc.root)[1]), unit, spec) for unit, (at, spec) in plan.items()
                     if at is not None and at <= target)
        if not due:
            break
        at, unit, spec = due[0]
        set_monotonic(sc.root, at)
        real, mono = now(sc.root)
        rec = state["units"][unit]
        rec.update(last_trigger_mono=mono, last_trigger_real=real, triggers=rec.get("triggers", 0) + 1)
        units.save_state(sc.root, state)
        if spec["persistent"]:
            os.makedirs(os.path.dirname(stamp_path(sc.root, unit)), exist_ok=True)
            with open(stamp_path(sc.root, unit), "a"):
                pass
            os.utime(stamp_path(sc.root, unit), (real // USEC, real // USEC))
        units.journal(sc.root, "timer %s elapsed: systemctl start %s" % (unit, spec["unit"]))
        rc = sc.start([spec["unit"]])
        fired.append({"timer": unit, "unit": spec["unit"], "monotonic": mono, "realtime": real, "rc": rc})
    else:
        raise RuntimeError("more than %d timer elapses in one step: a timer that never waits?" % MAX_TRIGGERS)
    set_monotonic(sc.root, target)
    real, mono = now(sc.root)
    return {"monotonic": mono, "realtime": real, "triggered": fired}


def properties(sc, unit, path, state):
    """The [Timer] properties ``systemctl show`` prints for a timer unit."""
    from gpufabric_sim import units
    try:
        spec = timer_spec(unit, units.read_unit_sections(sc.root, unit, path))
    except ValueError:
        return [("Unit", ""), ("NextElapseUSecRealtime", ""), ("LastTriggerUSec", "n/a")]
    rec = state["units"].get(unit, {})
    real, mono = now_readonly(sc.root)
    nxt = ""
    nxt_mono = "infinity"
    if rec.get("state") == "active":
        at, _spent = next_elapse(sc.root, unit, spec, rec, state["units"].get(spec["unit"], {}), (real, mono))
        if at is not None:
            nxt = format_timestamp(real - mono + at)
            nxt_mono = format_timespan(at)
    return [("Unit", spec["unit"]), ("NextElapseUSecRealtime", nxt), ("NextElapseUSecMonotonic", nxt_mono),
            ("LastTriggerUSec", format_timestamp(rec.get("last_trigger_real"))),
            ("LastTriggerUSecMonotonic", str(rec.get("last_trigger_mono", 0))),
            ("Persistent", "yes" if spec["persistent"] else "no"),
            ("AccuracyUSec", format_timespan(spec["accuracy"])),
            ("RandomizedDelayUSec", format_timespan(spec["random"]))]


def list_timers(sc, out):
    """``systemctl list-timers``: NEXT LEFT LAST PASSED UNIT ACTIVATES of the started timers, soonest first."""
    from gpufabric_sim import units
    state = units.load_state(sc.root)
    real, mono = now_readonly(sc.root)
    rows = []
    for unit, (at, spec) in schedule(sc, state).items():
        rec = state["units"][unit]
        last = rec.get("last_trigger_real")
        rows.append((at if at is not None else USEC_INFINITY,
                     format_timestamp(real - mono + at) if at is not None else "n/a",
                     format_timespan(at - mono) + " left" if at is not None else "n/a",
                     format_timestamp(last), format_timespan(real - last) + " ago" if last else "n/a",
                     unit, spec["unit"]))
    rows.sort()
    fmt = "%-28s %-14s %-28s %-14s %-30s %s\n"
    out.write(fmt % ("NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES"))
    for r in rows:
        out.write(fmt % r[1:])
    out.write("\n%d timers listed.\n" % len(rows))
    return 0


def cli(argv=None):
    """``python -m gpufabric_sim elapse --fleet DIR --node NAME --seconds SPAN``: let SPAN (a systemd time span)
    pass on the node, inside it as its login runs commands; prints the JSON report of what fell due."""
    import argparse
    from gpufabric_sim import runtime
    ap = argparse.ArgumentParser(prog="gpufabric_sim elapse", description=cli.__doc__)
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--seconds", required=True, help="a time span: 300, 5min, 1h 30s")
    args = ap.parse_args(argv)
    try:
        parse_timespan(args.seconds)
        node = runtime.get_node(runtime.load_fleet(os.path.abspath(args.fleet)), args.node)
    except (ValueError, runtime.SimError) as e:
        runtime.log(str(e))
        return 1
    return runtime.node_exec(node, ["systemctl", "gpufabric-sim-elapse", args.seconds]).returncode
