# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCB through the real iproute2 `dcb` on the dcbtest driver (mlx5 semantics), restored at boot by the applier;
the second provision run (molecule's idempotence stage) changes nothing and does not bounce the link."""
from __future__ import absolute_import, division, print_function

import json
import os

from conftest import WORK, log

__metaclass__ = type


def dscp_prio(host, rail):
    data = json.loads(host.check_output('dcb -j app show dev %s' % rail) or '{}')
    pairs = {}
    for entry in data.get('dscp_prio', []):
        if isinstance(entry, dict):      # iproute2 >= 6.5
            pairs[int(entry['dscp'])] = int(entry['prio'])
        else:                            # bookworm's 6.1: [[26,3],...]
            pairs[int(entry[0])] = int(entry[1])
    return pairs


def pfc_on(host, rail):
    data = json.loads(host.check_output('dcb -j pfc show dev %s' % rail))
    return [i for i, on in enumerate(data['prio_pfc']) if on]


def toggles(host, rail):
    return int(host.check_output('cat /sys/class/net/%s/dcbtest/link_toggles' % rail))


def test_dcb_restored_at_boot(host, rails):
    for rail in rails:
        trust = host.check_output('cat /sys/class/net/%s/dcbtest/trust' % rail)
        prio = dscp_prio(host, rail)
        pfc = pfc_on(host, rail)
        log('%s: trust=%s dscp26->%s entries=%d pfc=%s link_toggles=%d'
            % (rail, trust, prio.get(26), len(prio), pfc, toggles(host, rail)))
        assert trust == 'dscp'
        assert prio.get(26) == 3
        assert pfc == [3]
        # PFC programmed once at this boot (the applier); its repeated runs (udev) did not bounce the link again
        assert toggles(host, rail) == 1
        assert host.file('/sys/class/net/%s/carrier' % rail).content_string.strip() == '1'


def test_second_run_does_not_toggle_the_link(host, rails):
    """molecule's idempotence stage ran converge.yml (provision.yml) a second time and failed on any change; around
    each run converge.yml appended the boot id and the rails' link toggle counters to link-toggles.jsonl. The second
    run, on the same boot, left the counters as they were: no PFC or DCB write bounced a link. That the state the
    boot-time applier restores is the one roce_qos wants (so a run after a reboot would not write either) is
    test_dcb_restored_at_boot's values and test_90_drift's clean one-call check on this boot."""
    with open(os.path.join(WORK, 'link-toggles.jsonl')) as handle:
        runs = [json.loads(line) for line in handle if line.strip()]
    log('converge.yml runs (boot, link toggles before -> after): %s' % [
        (r['boot_before'][:8], r['before'], r['after']) for r in runs])
    assert len(runs) >= 2, 'no record of the idempotence run: %s' % runs
    second = runs[-1]
    assert second['rails'] == list(rails)
    assert second['boot_before'] == second['boot_after'], 'the idempotence run rebooted the node'
    assert second['before'] == second['after'], second
    assert all(t >= 1 for t in second['after']), 'PFC was never programmed on this boot: %s' % second
    for rail in rails:
        assert dscp_prio(host, rail).get(26) == 3 and pfc_on(host, rail) == [3]


# run by the node's own Python with the installed library (no Ansible): each rail's objects read over rtnetlink
# (dcbnl.py) and through `dcb -j OBJ show`, each parsed the collection's way
KERNEL_VS_DCB = r'''
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl, dcbx, manage
rails = sys.argv[2:]
parse = {"ets": manage.parse_ets, "pfc": manage.parse_pfc, "app": manage.parse_app, "dcbx": dcbx.parse}
got = dcbnl.KernelDcb().answers([(o, r) for r in rails for o in parse])
out = {}
for r in rails:
    for o, p in parse.items():
        proc = subprocess.Popen(["dcb", "-j", o, "show", "dev", r], stdout=subprocess.PIPE,
                                env=dict(os.environ, LC_ALL="C"))
        text = proc.communicate()[0].decode()
        out["%s %s" % (r, o)] = {"kernel": got[(o, r)].value if (o, r) in got else None,
                                 "dcb": p(text) if proc.returncode == 0 else None}
print(json.dumps(out, sort_keys=True))
'''


def test_kernel_read_is_what_dcb_reads(host, rails, lab_vars):
    """The collection reads DCB in-process over rtnetlink on a real host; on this kernel and driver it reads the
    same state as iproute2's dcb (the state provision left: DSCP trust, 26 -> 3, PFC on 3, DCBX host+IEEE)."""
    lib = lab_vars.get('persistence_lib_dir', '/usr/local/lib/gpufabric')
    run = host.run("/usr/bin/python3 - %s %s <<'EOF'\n%sEOF" % (lib, ' '.join(rails), KERNEL_VS_DCB))
    assert run.rc == 0, run.stderr
    seen = json.loads(run.stdout)
    log('kernel vs dcb: %s' % dict((k, v['kernel'] == v['dcb']) for k, v in sorted(seen.items())))
    for key, both in sorted(seen.items()):
        assert both['kernel'] is not None and both['kernel'] == both['dcb'], (key, both)
    for rail in rails:
        assert seen['%s app' % rail]['kernel']['dscp']['26'] == [3]   # a JSON key
        assert seen['%s pfc' % rail]['kernel']['enabled'] == [3]
        assert seen['%s dcbx' % rail]['kernel']['owner'] == 'host'
