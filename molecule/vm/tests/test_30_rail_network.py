# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rail sysctls after the reboot (from /etc/sysctl.d), the rail MTU (set again by the applier) and the rxe ports'
active MTU, and NCCL defaults from the real rxe devices."""
from __future__ import absolute_import, division, print_function

import json

from conftest import log

__metaclass__ = type


def test_arp_sysctls_after_reboot(host, rails):
    for rail in rails + ['all']:
        got = dict((key, host.check_output('sysctl -n net.ipv4.conf.%s.%s' % (rail, key)))
                   for key in ('arp_ignore', 'arp_announce', 'rp_filter'))
        log('%s: %s' % (rail, got))
        assert got == {'arp_ignore': '1', 'arp_announce': '2', 'rp_filter': '2'}, rail
    conf = host.file('/etc/sysctl.d/90-gpufabric-rails.conf')
    assert conf.exists and 'net.ipv4.conf.dcb0.arp_ignore' in conf.content_string.replace('/', '.')


def test_no_policy_routing_when_disabled(host):
    rules = host.check_output('ip -4 rule show')
    assert 'lookup 100' not in rules and 'lookup 101' not in rules


def test_nccl_conf_names_the_rails_devices(host):
    conf = host.file('/etc/nccl.conf').content_string
    log('nccl.conf: %s' % ' '.join(l for l in conf.splitlines() if l.startswith('NCCL_')))
    assert 'NCCL_IB_HCA==rxe0:1,rxe1:1' in conf.splitlines()
    assert 'NCCL_IB_TC=106' in conf.splitlines()
    gid = [l.split('=', 1)[1] for l in conf.splitlines() if l.startswith('NCCL_IB_GID_INDEX=')]
    assert len(gid) == 1
    # the index points at a RoCE v2 IPv4-mapped GID of the rail on both devices
    for dev in ('rxe0', 'rxe1'):
        kind = host.check_output('cat /sys/class/infiniband/%s/ports/1/gid_attrs/types/%s' % (dev, gid[0]))
        gidv = host.check_output('cat /sys/class/infiniband/%s/ports/1/gids/%s' % (dev, gid[0]))
        assert kind == 'RoCE v2' and gidv.startswith('0000:0000:0000:0000:0000:ffff:'), (dev, kind, gidv)


def test_rail_mtu_after_reboot(host, rails):
    """provision set 9000 on the dcbtest rails (max_mtu 9000); nobody else owns them (lab-rails.service, no networkd
    .network file), so the boot-time applier set it again after the reboot, and rxe follows the netdev MTU."""
    for rail in rails:
        link = json.loads(host.check_output('ip -d -j link show dev %s' % rail))[0]
        log('%s: mtu %s (max_mtu %s)' % (rail, link['mtu'], link.get('max_mtu')))
        assert link['mtu'] == 9000, rail
    state = json.loads(host.file('/etc/gpufabric/state.json').content_string)
    assert state['mtu'] == {'rails': sorted(rails), 'mtu': 9000}, state.get('mtu')
    for dev in ('rxe0', 'rxe1'):
        out = host.check_output('ibv_devinfo -d %s -i 1' % dev)
        active = [l.split(':', 1)[1].split()[0] for l in out.splitlines() if l.strip().startswith('active_mtu:')]
        log('%s: active_mtu %s' % (dev, active))
        assert active == ['4096'], out
    # the udev run of each rxe device (gpufabric-apply@rxeN) or the boot run set it, once per rail
    journal = host.run("journalctl -b --no-pager -o cat -u gpufabric-apply.service -u 'gpufabric-apply@*'").stdout
    for rail in rails:
        assert journal.count('mtu: %s mtu 1500 -> 9000' % rail) == 1, journal[-3000:]
