# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The applier's udev rule read by its real consumer: `udevadm test` of the guest's systemd 252 (which has no
`udevadm verify`) against a real RDMA device, rxe0. udevadm test loads every rules file, runs the rules for the
event and prints the RUN list without running it. A broken copy of the rule is fed to udevadm in a private mount
namespace (a bind mount over /etc/udev/rules.d that dies with the command)."""
from __future__ import absolute_import, division, print_function

import re

from conftest import log

__metaclass__ = type

RULES_DIR = '/etc/udev/rules.d'
RULE = RULES_DIR + '/90-gpufabric-rdma.rules'     # persistence_udev_rules_file's default
DEVICE = '/sys/class/infiniband/rxe0'


def rule_run(host):
    """(line number, RUN value) of the collection's rule as installed."""
    for no, line in enumerate(host.file(RULE).content_string.splitlines(), 1):
        m = re.search(r'RUN\+="([^"]*)"', line)
        if m and not line.lstrip().startswith('#'):
            return no, m.group(1)
    raise AssertionError('no RUN+= in %s' % RULE)


def udevadm_test(host, action, wrap='%s'):
    run = host.run(wrap % ('udevadm test --action=%s %s' % (action, DEVICE)))
    return run, run.stdout + run.stderr


def run_list(out):
    return re.findall(r"^run: '(.*)'$", out, re.M)


def test_rdma_add_matches_the_rule_and_runs_the_applier_instance(host):
    no, value = rule_run(host)
    assert value.endswith(' --no-block restart gpufabric-apply@%k.service'), value
    run, out = udevadm_test(host, 'add')
    runs = run_list(out)
    log('udevadm test add rxe0: rc=%d, run list %s' % (run.rc, runs))
    assert run.rc == 0, out[-3000:]
    assert "rxe0: %s:%d RUN '%s'" % (RULE, no, value) in out, out[-3000:]
    assert value.replace('%k', 'rxe0') in runs
    assert 'Invalid' not in ''.join(line for line in out.splitlines() if RULE in line)


def test_change_event_does_not_start_the_applier(host):
    run, out = udevadm_test(host, 'change')
    assert run.rc == 0, out[-3000:]
    assert not [r for r in run_list(out) if 'gpufabric-apply@' in r], out[-3000:]


def test_broken_rule_is_reported_and_not_applied(host):
    no, value = rule_run(host)
    tmp = host.check_output('mktemp -d /tmp/gf-udev.XXXXXX')
    try:
        host.check_output('cp -a %s/. %s/' % (RULES_DIR, tmp))
        # the RUN value loses its closing quote
        host.check_output("sed -i '%ds/\\.service\"$/.service/' %s/%s" % (no, tmp, RULE.rsplit('/', 1)[1]))
        assert value + '"' not in host.file('%s/%s' % (tmp, RULE.rsplit('/', 1)[1])).content_string
        wrap = "unshare --mount sh -c 'mount --bind %s %s && exec %%s'" % (tmp, RULES_DIR)
        run, out = udevadm_test(host, 'add', wrap)
        log('broken rule: %s' % [line for line in out.splitlines() if RULE in line])
        assert '%s:%d Invalid key/value pair' % (RULE, no) in out, out[-3000:]
        assert not [r for r in run_list(out) if 'gpufabric-apply@' in r]
        assert host.file(RULE).contains('restart gpufabric-apply@%k.service"')
    finally:
        host.run('rm -rf %s' % tmp)
