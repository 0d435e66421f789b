# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCB through the real iproute2 `dcb` on the dcbtest driver (mlx5 semantics), restored at boot by the applier;
a second roce_qos run changes nothing and does not bounce the link."""
from __future__ import absolute_import, division, print_function

import json
import os

from conftest import SCENARIO, log, playbook, recap

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


def test_second_run_does_not_toggle_the_link(host, rails, lab_vars):
    before = dict((r, toggles(host, r)) for r in rails)
    rc, out = playbook(os.path.join(SCENARIO, 'rerun_roce_qos.yml'))
    after = dict((r, toggles(host, r)) for r in rails)
    counts = recap(out, lab_vars['inventory_hostname'])
    log('roce_qos second run: %s; link_toggles before %s after %s' % (counts, before, after))
    assert rc == 0, out[-3000:]
    assert counts['changed'] == 0 and counts['failed'] == 0
    assert before == after
    for rail in rails:
        assert dscp_prio(host, rail).get(26) == 3 and pfc_on(host, rail) == [3]
