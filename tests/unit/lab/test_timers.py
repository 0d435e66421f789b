# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's clock and timer units (gpufabric_sim/timers.py): time spans as systemd parses them (checked
against ``systemd-analyze timespan`` / ``calendar`` on this host), and elapse: a started timer's service runs each
time the timer falls due, in order, as src/core/timer.c schedules it; stopped, never started and masked timers
never fire."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import re
import shutil
import subprocess
import time

import pytest

from gpufabric_sim import services, timers
from gpufabric_sim import units as sim_units

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _need_systemd_analyze():
    if SYSTEMD_ANALYZE is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing (package systemd, tests/lab/apt-packages.txt)")
        pytest.skip("systemd-analyze is not installed")


SPANS = ["5min 30s", "1h", "90", "2min", "1.5h", ".5h", "1y 2M", "3 weeks", "500ms", "2d3h", "0", "1min30", "20us",
         "10 s", "1h 1h", "5m", "1w", "5s5", "1h30m", "3d 2h 1min 4s 3ms 2us", "0.000001s", "1M", "1month", "1.25",
         "5sec", "4\u00b5s", "1y1M1w1d1h1m1s1ms1us", "1.5 min", "infinity", " 5s",
         # refused by systemd
         "5x", "min", "", "-5s", "2 hours 3 mins", "1e3", "5.", ".", "1.5.5", "5secs", "1 m s", "1mo"]


@pytest.mark.parametrize("span", SPANS)
def test_timespan_as_systemd_analyze_parses_it(span):
    _need_systemd_analyze()
    p = subprocess.run([SYSTEMD_ANALYZE, "timespan", span], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    m = re.search(r"\u03bcs: (\d+)", p.stdout)
    if p.returncode != 0:
        with pytest.raises(ValueError):
            timers.parse_timespan(span)
    else:
        assert m, p.stdout
        assert timers.parse_timespan(span) == int(m.group(1)), span


CALENDARS = ["hourly", "daily", "weekly", "monthly", "quarterly", "yearly", "*:0/15", "*-*-* 04:00:00",
             "Mon *-*-* 00:00:00", "Mon..Fri 08:30", "*-*-1 00:00", "12:00", "Sat,Sun 03:00", "*-01,07-01 06:00"]


@pytest.mark.parametrize("spec", CALENDARS)
def test_calendar_next_elapse_as_systemd_analyze(spec):
    _need_systemd_analyze()
    before = int(time.time()) * timers.USEC
    p = subprocess.run([SYSTEMD_ANALYZE, "calendar", spec], stdout=subprocess.PIPE, universal_newlines=True,
                       env=dict(os.environ, TZ="UTC", LC_ALL="C"), check=True)
    after = int(time.time()) * timers.USEC
    want = re.search(r"Next elapse: (.*)", p.stdout).group(1).strip()
    cal = timers.parse_calendar(spec)
    got = set(timers.format_timestamp(timers.calendar_next(cal, t)) for t in (before, after))
    assert want in got, (spec, want, got)


@pytest.mark.parametrize("bad", ["Mon 25:00", "*-13-01", "Funday 10:00", "10:00 Europe/Berlin", "*-*-* 1:2:3:4"])
def test_calendar_refused(bad):
    with pytest.raises(ValueError):
        timers.parse_calendar(bad)


# --- elapse ------------------------------------------------------------------------------------------------------

SERVICE = "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo %n >> \"$$GPUFABRIC_SYSROOT/runs\"'\n"


def node(tmp_path, monkeypatch, timer, extra=None, service=SERVICE):
    root = tmp_path / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (units / "ev.timer").write_text("[Timer]\n" + timer + "\n[Install]\nWantedBy=timers.target\n")
    (units / "ev.service").write_text(service)
    for name, text in (extra or {}).items():
        (units / name).write_text(text)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    return services.Systemctl(str(root), out=io.StringIO(), err=io.StringIO())


def runs(sc):
    try:
        with open(os.path.join(sc.root, "runs")) as f:
            return f.read().split()
    except OSError:
        return []


def at(report):
    return [(t["timer"], t["monotonic"] // timers.USEC) for t in report["triggered"]]


def show(sc, unit, prop):
    sc.out = io.StringIO()
    sc.show([unit], [prop], True)
    return sc.out.getvalue().strip()


def test_boot_then_unit_active_as_the_evidence_timer(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnBootSec=60s\nOnUnitActiveSec=300\nAccuracySec=1s\nUnit=ev.service")
    assert sc.start(["ev.timer"]) == 0
    assert show(sc, "ev.timer", "LastTriggerUSec") == "n/a"
    assert show(sc, "ev.timer", "NextElapseUSecMonotonic") == "1min"
    assert at(timers.elapse(sc, 59 * timers.USEC)) == [] and runs(sc) == []
    assert at(timers.elapse(sc, 1 * timers.USEC)) == [("ev.timer", 60)]
    assert runs(sc) == ["ev.service"]
    assert show(sc, "ev.timer", "LastTriggerUSec") != "n/a"
    # OnBootSec is spent; OnUnitActiveSec counts from the last run: 360, 660
    assert at(timers.elapse(sc, timers.parse_timespan("10min"))) == [("ev.timer", 360), ("ev.timer", 660)]
    assert len(runs(sc)) == 3
    real, mono = timers.now(sc.root)
    assert mono == 660 * timers.USEC
    assert show(sc, "ev.timer", "NextElapseUSecRealtime") == timers.format_timestamp(real + 300 * timers.USEC)
    sc.out = io.StringIO()
    timers.list_timers(sc, sc.out)
    assert "ev.timer" in sc.out.getvalue() and "5min left" in sc.out.getvalue()


def test_stopped_never_started_and_masked_timers_never_fire(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnBootSec=10\nOnUnitActiveSec=10")
    assert sc.enable(["ev.timer"]) == 0      # enabled but not started: nothing is waiting
    assert timers.elapse(sc, 100 * timers.USEC)["triggered"] == []
    sc.start(["ev.timer"])                    # OnBootSec=10 is long past: it elapses at once, as in systemd
    assert runs(sc) == ["ev.service"]
    sc.stop(["ev.timer"])
    assert timers.elapse(sc, 100 * timers.USEC)["triggered"] == [] and len(runs(sc)) == 1
    sc.start(["ev.timer"])
    assert len(runs(sc)) == 2                 # a start forgets the last trigger: OnBootSec is due again
    # a vendor timer (systemctl refuses to mask over a unit file in /etc) masked with --now: stopped, not startable
    etc = os.path.join(sc.root, "etc/systemd/system")
    os.makedirs(os.path.join(sc.root, "usr/lib/systemd/system"))
    os.rename(os.path.join(etc, "ev.timer"), os.path.join(sc.root, "usr/lib/systemd/system/ev.timer"))
    assert sc.mask(["ev.timer"], now=True) == 0
    assert sc.start(["ev.timer"]) == 1 and "masked" in sc.err.getvalue()
    assert timers.elapse(sc, 100 * timers.USEC)["triggered"] == [] and len(runs(sc)) == 2


def test_timers_fire_in_time_order(tmp_path, monkeypatch):
    other = "[Timer]\nOnActiveSec=20\nUnit=other.service\n"
    svc = SERVICE
    sc = node(tmp_path, monkeypatch, "OnActiveSec=30", extra={"other.timer": other, "other.service": svc})
    sc.start(["ev.timer", "other.timer"])
    report = timers.elapse(sc, timers.parse_timespan("1min"))
    # OnActiveSec is a one time trigger: each fires once
    assert at(report) == [("other.timer", 20), ("ev.timer", 30)] and runs(sc) == ["other.service", "ev.service"]
    assert timers.elapse(sc, timers.parse_timespan("1h"))["triggered"] == []


def test_unit_inactive_counts_from_the_end_of_the_run(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnUnitInactiveSec=2min")
    sc.start(["ev.timer"])
    # the service never ran: the value has no base yet
    assert timers.elapse(sc, timers.parse_timespan("1h"))["triggered"] == []
    sc.start(["ev.service"])                  # by hand at 1h; it ends at once
    assert at(timers.elapse(sc, timers.parse_timespan("5min"))) == [("ev.timer", 3720), ("ev.timer", 3840)]


def test_randomized_delay_is_within_the_delay_and_fixed_by_machine_id(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnBootSec=100\nOnUnitActiveSec=100\nRandomizedDelaySec=50\nFixedRandomDelay=yes")
    sc.start(["ev.timer"])
    fired = [t["monotonic"] for t in timers.elapse(sc, timers.parse_timespan("10min"))["triggered"]]
    assert fired, fired
    delay = fired[0] - 100 * timers.USEC
    assert 0 <= delay < 50 * timers.USEC
    assert [b - a for a, b in zip(fired, fired[1:])] == [100 * timers.USEC + delay] * (len(fired) - 1)


def test_persistent_calendar_timer_catches_up_at_start(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnCalendar=hourly\nPersistent=true")
    sc.start(["ev.timer"])
    stamp = timers.stamp_path(sc.root, "ev.timer")
    assert os.path.exists(stamp)
    report = timers.elapse(sc, timers.parse_timespan("2h"))
    assert len(report["triggered"]) == 2
    assert int(os.stat(stamp).st_mtime) * timers.USEC == report["triggered"][-1]["realtime"]
    # stopped while an hour passes: the missed run happens at the next start
    sc.stop(["ev.timer"])
    timers.elapse(sc, timers.parse_timespan("90min"))
    assert len(runs(sc)) == 2
    sc.start(["ev.timer"])
    assert len(runs(sc)) == 3


def test_failing_service_and_timer_without_trigger(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnBootSec=5", service="[Service]\nType=oneshot\nExecStart=/bin/false\n")
    sc.start(["ev.timer"])
    report = timers.elapse(sc, 10 * timers.USEC)
    assert [t["rc"] for t in report["triggered"]] == [1]
    assert sim_units.load_state(sc.root)["units"]["ev.service"]["state"] == "failed"
    (tmp_path / "root/etc/systemd/system/bad.timer").write_text("[Timer]\nOnBootSec=soon\nAccuracySec=1s\n")
    assert sc.start(["bad.timer"]) == 1
    assert "lacks a value setting" in sc.err.getvalue() and "OnBootSec=soon" in sc.err.getvalue()


def test_clock_survives_a_reboot_forward_only(tmp_path, monkeypatch):
    sc = node(tmp_path, monkeypatch, "OnBootSec=5")
    timers.elapse(sc, timers.parse_timespan("1y"))
    real, mono = timers.now(sc.root)
    shutil.rmtree(os.path.join(sc.root, "run"))          # what a reboot does to /run
    real2, mono2 = timers.now(sc.root)
    assert mono2 == 0 and real2 >= real
