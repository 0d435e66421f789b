# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""drift.yml on the real kernel: clean on the converged node; after drift injected over SSH (a sysctl, a ToS
value, an ACS bit, the NFS over RDMA mount unmounted) it reports exactly those four, and the fix run corrects
them."""
from __future__ import absolute_import, division, print_function

import json
import os

import pytest

from conftest import PROJECT, WORK, log, playbook

__metaclass__ = type

DRIFT = os.path.join(PROJECT, 'playbooks', 'drift.yml')
REPORTS = os.path.join(WORK, 'reports')
INJECT = [
    # (what, command, expected drift item)
    ('sysctl', 'sysctl -q -w net.ipv4.conf.dcb0.arp_ignore=0',
     {'concern': 'sysctl', 'object': 'dcb0', 'key': 'arp_ignore', 'current': 0, 'desired': 1}),
    ('ToS', 'echo 96 > /sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_tos',
     {'concern': 'rdma_cm', 'object': 'rxe0/1', 'key': 'default_roce_tos', 'current': 96, 'desired': 106}),
    ('ACS bit', 'setpci -s 00:12.0 ECAP_ACS+6.w=0004:0004',     # ReqRedir back on
     {'concern': 'acs', 'object': '0000:00:12.0', 'key': 'acs_ctrl', 'current': '0x0015', 'desired': '0x0011'}),
]


def report(node, basename):
    with open(os.path.join(REPORTS, basename + '.json')) as handle:
        data = json.load(handle)
    return data['nodes'][node]


def read_back(host):
    return {
        'arp_ignore': host.check_output('sysctl -n net.ipv4.conf.dcb0.arp_ignore'),
        'tos': host.check_output('cat /sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_tos'),
        'acs': host.check_output('setpci -s 00:12.0 ECAP_ACS+6.w'),
    }


@pytest.fixture(scope='module')
def node(lab_vars):
    return lab_vars['inventory_hostname']


def test_drift_clean_on_converged_node(node):
    rc, out = playbook(DRIFT, '-e', 'gpufabric_report_dir=' + REPORTS, timeout=900)
    rep = report(node, 'drift-report')
    log('drift.yml on the converged node: rc=%d items=%s errors=%s' % (rc, rep['items'], rep['errors']))
    assert rc == 0, out[-4000:]
    assert rep['items'] == [] and rep['errors'] == [] and not rep['drifted']


def _item_key(item):
    return (item['concern'], item['object'], item['key'])


def _mount_proto(host, path):
    proto = None
    for line in host.file('/proc/self/mountinfo').content_string.splitlines():
        left, _sep, right = line.partition(' - ')
        if left.split()[4] == path:
            opts = right.split()[2].split(',')
            proto = dict(o.split('=', 1) for o in opts if '=' in o).get('proto')
    return proto


def test_injected_drift_reported_exactly_and_fixed(host, node, lab_vars):
    """The three runtime values of INJECT and the collection's NFS over RDMA mount unmounted, in one check and one
    fix (each drift.yml run costs minutes under TCG): exactly those four items, then all four corrected."""
    for _what, command, _expected in INJECT:
        host.check_output(command)
    path = lab_vars['storage_mounts_volumes'][0]['path']
    unit = host.check_output('systemd-escape --path --suffix=mount %s' % path)
    host.check_output("umount '%s'" % path)
    assert _mount_proto(host, path) is None
    injected = read_back(host)
    log('injected: %s; umount %s' % (injected, path))
    assert injected == {'arp_ignore': '0', 'tos': '96', 'acs': '0015'}

    rc, out = playbook(DRIFT, '-e', 'gpufabric_report_dir=' + REPORTS, timeout=900)
    rep = report(node, 'drift-report')
    log('drift.yml after injection: rc=%d items=%s' % (rc, rep['items']))
    assert rc != 0
    expected = sorted([entry[2] for entry in INJECT] + [
        {'concern': 'nfs_mounts', 'object': path, 'key': 'mounted', 'current': 'absent', 'desired': 'mounted'}],
        key=_item_key)
    assert sorted(rep['items'], key=_item_key) == expected
    assert rep['errors'] == []
    assert rep['concerns']['nfs_mounts']['status'] == 'drift'

    rc, out = playbook(DRIFT, '-e', 'gpufabric_report_dir=' + REPORTS, '-e', 'gpufabric_fix=true', timeout=900)
    fixed = report(node, 'drift-fixed')
    after = read_back(host)
    proto = _mount_proto(host, path)
    log('drift.yml -e gpufabric_fix=true: rc=%d items=%s; read back %s; %s proto=%s, %s %s' % (
        rc, fixed['items'], after, path, proto, unit, host.run("systemctl is-active '%s'" % unit).stdout.strip()))
    assert rc == 0, out[-4000:]
    assert sorted(fixed['items'], key=_item_key) == expected
    assert after == {'arp_ignore': '1', 'tos': '106', 'acs': '0011'}
    assert fixed['concerns']['nfs_mounts']['status'] == 'ok' and proto == 'rdma'
