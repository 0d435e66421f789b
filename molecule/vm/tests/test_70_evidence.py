# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The evidence timer under the guest's real systemd (persistence_evidence: true, its interval in group_vars), run by
the node's own Python (which cannot import ansible), and its textfile served by the guest's prometheus-node-exporter
(Debian; prepare.yml points --collector.textfile.directory at the timer's directory). Scraped over HTTP inside the
guest after the timer has fired twice; promtool (host, package prometheus) checks what node_exporter serves."""
from __future__ import absolute_import, division, print_function

import json
import re
import subprocess
import time

import pytest

from conftest import log, wait_for

__metaclass__ = type

TIMER = 'gpufabric-evidence.timer'
SERVICE = 'gpufabric-evidence.service'
SCRIPT = '/usr/local/sbin/gpufabric-evidence'
SCRAPE = ("python3 -c \"import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
          "'http://127.0.0.1:9100/metrics%s', timeout=60).read().decode())\"")
TEXTFILE_ONLY = '?collect%5B%5D=textfile'          # collect[]=textfile: the textfile collector and exporter metrics
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text, prefix):
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1).startswith(prefix):
            out[(m.group(1), frozenset(LABEL.findall(m.group(2) or '')))] = float(m.group(3))
    return out


def show(host, unit, prop):
    return host.check_output('systemctl show -P %s %s' % (prop, unit))


def runs(host):
    """{JOB_RESULT: count} of the service's start jobs this boot (systemd's job-done messages: done, failed...)."""
    out = host.check_output('journalctl -b -o json --no-pager UNIT=%s' % SERVICE)
    counts = {}
    for line in out.splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get('JOB_TYPE') == 'start' and entry.get('JOB_RESULT'):
            counts[entry['JOB_RESULT']] = counts.get(entry['JOB_RESULT'], 0) + 1
    return counts


def next_run(host, patience, before=None):
    """Wait until one more run than ``before`` (default: now) has finished (the service may start again at once: a
    run under TCG can take longer than the interval); returns the counts after it."""
    before = runs(host) if before is None else before
    after = wait_for(lambda: sum(runs(host).values()) > sum(before.values()) and runs(host), patience, interval=5)
    log('evidence runs this boot: %s, then %s' % (before, after))
    return after


def journal_tail(host):
    return host.run('journalctl -b --no-pager -o cat -n 25 -u %s' % SERVICE).stdout


@pytest.fixture(scope='module')
def lab_textfile(lab_vars):
    return '%s/%s' % (lab_vars['persistence_evidence_textfile_dir'], 'gpufabric-evidence.prom')


def test_node_python_cannot_import_ansible(host):
    shebang = host.file(SCRIPT).content_string.splitlines()[0]
    log('%s: %s' % (SCRIPT, shebang))
    assert shebang == '#!/usr/bin/python3'
    run = host.run("/usr/bin/python3 -c 'import ansible'")
    assert run.rc != 0 and "No module named 'ansible'" in run.stderr, run.stderr


@pytest.fixture(scope='module')
def patience(lab_vars):
    """Seconds to wait for the next run to finish: one interval, plus a run under TCG (30-50 s of CPU here), plus
    margin."""
    return int(lab_vars['persistence_evidence_interval']) + 180


STAMP = ('gpufabric_last_check_timestamp_seconds', frozenset({('writer', 'evidence_timer')}))


def served_stamp(host):
    """The last-check timestamp node_exporter serves now, or None while it serves none (no run wrote the file yet)."""
    run = host.run(SCRAPE % TEXTFILE_ONLY)
    return samples(run.stdout, 'gpufabric_').get(STAMP) if run.rc == 0 else None


@pytest.fixture(scope='module')
def fired(host, patience, evidence_start):
    """The timer enabled and active, one more run finished since verify started (conftest's evidence_start; waited
    for here, but the timer's interval has usually passed by now), at least two runs this boot, all successful. Also
    the served evidence timestamp at that start (``stamp_before``), which
    test_served_evidence_advances_with_the_timer compares with what is served after that run."""
    assert show(host, TIMER, 'UnitFileState') == 'enabled'
    assert show(host, TIMER, 'ActiveState') == 'active'
    waited = time.time()
    after = next_run(host, patience, before=evidence_start['runs'])
    log('verify started %.0f s before the wait, which took %.0f s; timer last triggered at %s (monotonic)' % (
        waited - evidence_start['at'], time.time() - waited, show(host, TIMER, 'LastTriggerUSecMonotonic')))
    if not after or set(after) != {'done'} or after['done'] < 2:
        log('journal of %s:\n%s' % (SERVICE, journal_tail(host)))
    assert after, 'no run of %s finished within %d s' % (SERVICE, patience)
    assert set(after) == {'done'} and after['done'] >= 2, (after, journal_tail(host))
    return dict(after, stamp_before=evidence_start['stamp'])


def scrape(host, lab_textfile, query=''):
    """(file text, full scrape) with the file unchanged across the scrape (the timer may write in between)."""
    for _attempt in range(5):
        first = host.file(lab_textfile).content_string
        # host.run, not check_output: that strips the final newline, which the text format requires
        run = host.run(SCRAPE % query)
        assert run.rc == 0, run.stderr
        served = run.stdout
        if host.file(lab_textfile).content_string == first:
            return first, served
    raise AssertionError('the textfile changed during every scrape')


def test_node_exporter_serves_the_timer_textfile(host, fired, lab_textfile):
    assert host.service('prometheus-node-exporter').is_running
    text, served = scrape(host, lab_textfile)
    want, got = samples(text, 'gpufabric_'), samples(served, 'gpufabric_')
    log('textfile %d gpufabric samples, served %d; node_ok=%s' % (
        len(want), len(got), [v for (n, _labels), v in got.items() if n == 'gpufabric_node_ok']))
    assert want and got == want
    assert 'node_textfile_scrape_error 0' in served.splitlines()
    assert re.search(r'^node_textfile_mtime_seconds\{file="%s"\} ' % re.escape(lab_textfile), served, re.M), \
        [line for line in served.splitlines() if line.startswith('node_textfile')]


def test_served_evidence_advances_with_the_timer(host, fired, lab_textfile, patience):
    """What node_exporter served when verify started, against what it serves after the run the fixture waited for;
    only when it served nothing then (no run had finished yet) does this test wait for one more run."""
    first = fired['stamp_before']
    if first is None:
        first = samples(scrape(host, lab_textfile)[1], 'gpufabric_')[STAMP]
        assert next_run(host, patience).get('done', 0) > fired['done']
    second = samples(scrape(host, lab_textfile)[1], 'gpufabric_')[STAMP]
    log('served gpufabric_last_check_timestamp_seconds %s -> %s' % (first, second))
    assert second > first


def promtool(text):
    proc = subprocess.run(['promtool', 'check', 'metrics'], input=text.encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False, timeout=60)
    return proc.returncode, proc.stdout.decode('utf-8', 'replace')


def test_promtool_accepts_what_node_exporter_serves(host, fired, lab_textfile):
    # the textfile collector's output as a scrape with collect[]=textfile gets it: no lint problem at all
    text, served = scrape(host, lab_textfile, TEXTFILE_ONLY)
    assert samples(served, 'gpufabric_') == samples(text, 'gpufabric_')
    rc, out = promtool(served)
    log('promtool check metrics (collect[]=textfile, %d lines): rc=%d %s' % (len(served.splitlines()), rc, out))
    assert rc == 0, out
    # the full scrape parses (rc 1 is a parse error); its lint problems (rc 3) are node_exporter's own
    # meminfo/netstat/entropy names, none of ours
    rc, out = promtool(scrape(host, lab_textfile)[1])
    problems = [line for line in out.splitlines() if line.strip()]
    log('promtool check metrics (full scrape): rc=%d, %d lint problems' % (rc, len(problems)))
    assert rc in (0, 3), out
    assert not [p for p in problems if p.startswith('gpufabric_')], out


def test_promtool_rejects_a_broken_scrape(host, fired, lab_textfile):
    served = scrape(host, lab_textfile, TEXTFILE_ONLY)[1]
    # the sample of the node verdict (its labels, such as writer, kept), its value made a word
    broken, n = re.subn(r'^(gpufabric_node_ok(?:\{[^}\n]*\})?) \S+$', r'\1 one', served, flags=re.M)
    assert n == 1
    rc, out = promtool(broken)
    log('promtool on a broken copy: rc=%d %s' % (rc, out.strip()))
    assert rc == 1 and 'expected float' in out, out
