# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric acceptance (tier 3): playbooks/fabric_acceptance.yml with real perftest traffic between the lab's rails.

One node, one pair: rxe0 on dcb0 sends (ib_write_bw, RDMA-CM, ToS 106), rxe1 on dcb1 receives; lab-rails routes
the guest's traffic to dcb1's address out of dcb0, so the RoCE v2 packets cross the dcbtest pair, and dcbtest
counts them per priority from each port's own DSCP map (converge: DSCP 26 -> 3, PFC on 3). A single pair is not
an incast, and dcbtest has no congestion model: no pause frame is expected or counted.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import re

import pytest

from conftest import PROJECT, WORK, log, playbook

__metaclass__ = type

ACCEPTANCE = os.path.join(PROJECT, 'playbooks', 'fabric_acceptance.yml')
REPORTS = os.path.join(WORK, 'reports')
SENDER, RECEIVER = 'dcb0', 'dcb1'
SENDER_IP, RECEIVER_IP = '10.77.0.10', '10.77.0.11'
MIB = 1 << 20
STAT = re.compile(r'^\s*(\w+):\s+(\d+)\s*$')


def ethtool_stats(host, rail):
    out = {}
    for line in host.check_output('ethtool -S %s' % rail).splitlines():
        match = STAT.match(line)
        if match:
            out[match.group(1)] = int(match.group(2))
    return out


def rxe_counter(host, ibdev, name):
    return int(host.check_output('cat /sys/class/infiniband/%s/ports/1/hw_counters/%s' % (ibdev, name)))


def snapshot(host):
    return {
        'dcb0': ethtool_stats(host, SENDER),
        'dcb1': ethtool_stats(host, RECEIVER),
        'rxe0_sent': rxe_counter(host, 'rxe0', 'sent_pkts'),
        'rxe1_rcvd': rxe_counter(host, 'rxe1', 'rcvd_pkts'),
    }


def moved(before, after, rail, counter):
    return after[rail][counter] - before[rail][counter]


def extra_vars(node, report_dir, **more):
    data = {'fabric_acceptance_hosts': node, 'fabric_acceptance_receiver': node,
            'fabric_acceptance_senders': [node], 'fabric_acceptance_rails': [RECEIVER],
            'fabric_acceptance_sender_rails': {RECEIVER: SENDER}, 'fabric_acceptance_duration': 8,
            'fabric_acceptance_server_settle': 5, 'fabric_acceptance_report_dir': report_dir}
    data.update(more)
    return json.dumps(data)


@pytest.fixture(scope='module')
def node(lab_vars):
    return lab_vars['inventory_hostname']


def test_rails_route_across_the_pair(host):
    """The guest's traffic to dcb1's address leaves through dcb0; its own address stays local (NFS)."""
    assert re.search(r'\bdev %s\b.*\bsrc %s\b' % (SENDER, SENDER_IP),
                     host.check_output('ip -o route get %s' % RECEIVER_IP))
    assert re.search(r'\bdev %s\b' % RECEIVER,
                     host.check_output('ip -o route get %s from %s' % (SENDER_IP, RECEIVER_IP)))
    assert host.check_output('ip -o route get %s' % SENDER_IP).startswith('local %s ' % SENDER_IP)


def test_counters_classify_by_dscp(host):
    """ICMP with DSCP 26 lands in priority 3 on dcb0 tx and dcb1 rx (and the replies on dcb1 tx / dcb0 rx);
    DSCP 0 lands in priority 0. mlx5's names; PFC counters only for the PFC priority."""
    names = ethtool_stats(host, SENDER)
    for p in range(8):
        for what in ('rx_prio%d_bytes', 'rx_prio%d_packets', 'tx_prio%d_bytes', 'tx_prio%d_packets'):
            assert what % p in names
        assert ('rx_prio%d_pause' % p in names) == (p == 3), p
        assert ('tx_prio%d_pause' % p in names) == (p == 3), p
    count, size = 20, 1000
    for tos, prio in ((104, 3), (0, 0)):
        before = {rail: ethtool_stats(host, rail) for rail in (SENDER, RECEIVER)}
        host.check_output('ping -q -c %d -i 0.2 -s %d -Q %d %s' % (count, size, tos, RECEIVER_IP))
        after = {rail: ethtool_stats(host, rail) for rail in (SENDER, RECEIVER)}
        delta = dict(('%s %s' % (rail, name), after[rail][name] - before[rail][name])
                     for rail in after for name in after[rail] if after[rail][name] != before[rail][name])
        log('ping -Q %d: %s' % (tos, delta))
        for rail, direction in ((SENDER, 'tx'), (RECEIVER, 'rx'), (RECEIVER, 'tx'), (SENDER, 'rx')):
            assert delta.get('%s %s_prio%d_packets' % (rail, direction, prio), 0) >= count, (rail, direction)
            assert delta.get('%s %s_prio%d_bytes' % (rail, direction, prio), 0) >= count * size
        # nothing echo-sized in the other priority (ARP, untagged and not IP, is priority 0 in either case)
        other = 0 if prio == 3 else 3
        assert delta.get('%s tx_prio%d_bytes' % (SENDER, other), 0) < size
        assert delta.get('%s rx_prio%d_bytes' % (RECEIVER, other), 0) < size


def test_perftest_between_rails_passes(host, node):
    report_dir = os.path.join(REPORTS, 'acceptance-pass')
    before = snapshot(host)
    rc, out = playbook(ACCEPTANCE, '-e', extra_vars(node, report_dir), timeout=900)
    after = snapshot(host)
    tx3, rx3 = moved(before, after, 'dcb0', 'tx_prio3_bytes'), moved(before, after, 'dcb1', 'rx_prio3_bytes')
    tx0, rx0 = moved(before, after, 'dcb0', 'tx_prio0_bytes'), moved(before, after, 'dcb1', 'rx_prio0_bytes')
    log('ib_write_bw dcb0 -> dcb1, ToS 106: dcb0 tx_prio3 +%d B, tx_prio0 +%d B; dcb1 rx_prio3 +%d B, rx_prio0 +%d B;'
        ' rxe0 sent_pkts +%d, rxe1 rcvd_pkts +%d; pauses dcb0 rx %d, dcb1 tx %d'
        % (tx3, tx0, rx3, rx0, after['rxe0_sent'] - before['rxe0_sent'], after['rxe1_rcvd'] - before['rxe1_rcvd'],
           moved(before, after, 'dcb0', 'rx_prio3_pause'), moved(before, after, 'dcb1', 'tx_prio3_pause')))
    assert rc == 0, out[-6000:]
    with open(os.path.join(report_dir, 'fabric-acceptance.json')) as handle:
        inc = json.load(handle)['incast']
    assert inc['ok'] is True and inc['failures'] == []
    (rail,) = inc['rails']
    assert rail['rail'] == RECEIVER and rail['incast'] is False and rail['pause_frames'] == 0
    rows = dict((p['role'], p) for p in rail['participants'])
    assert (rows['sender']['host'], rows['sender']['netdev']) == (node, SENDER)
    assert (rows['receiver']['host'], rows['receiver']['netdev']) == (node, RECEIVER)
    # what the playbook measured is inside what the test read around it, and real: MiBs in priority 3
    assert MIB <= rows['sender']['bytes_in_priority'] <= tx3
    assert MIB <= rows['receiver']['bytes_in_priority'] <= rx3
    # priority 0 flat: ARP and the like only (the playbook's tolerance is 1 MiB)
    assert tx0 < MIB and rx0 < MIB
    # the RoCE packets went through the pair: rxe counted them and the port counters carry at least their payload
    assert after['rxe0_sent'] - before['rxe0_sent'] >= tx3 // 4200
    assert after['rxe1_rcvd'] - before['rxe1_rcvd'] >= rx3 // 4200
    assert moved(before, after, 'dcb0', 'tx_prio3_pause') == 0 and moved(before, after, 'dcb1', 'rx_prio3_pause') == 0


def test_wrong_tos_on_the_sender_fails_naming_host_and_rail(host, node):
    report_dir = os.path.join(REPORTS, 'acceptance-bad-tos')
    before = snapshot(host)
    rc, out = playbook(ACCEPTANCE, '-e', extra_vars(node, report_dir, fabric_acceptance_rail_tos={SENDER: 0}),
                       timeout=900)
    after = snapshot(host)
    log('ib_write_bw dcb0 -> dcb1, ToS 0: dcb0 tx_prio0 +%d B, tx_prio3 +%d B; dcb1 rx_prio0 +%d B, rx_prio3 +%d B'
        % (moved(before, after, 'dcb0', 'tx_prio0_bytes'), moved(before, after, 'dcb0', 'tx_prio3_bytes'),
           moved(before, after, 'dcb1', 'rx_prio0_bytes'), moved(before, after, 'dcb1', 'rx_prio3_bytes')))
    assert rc != 0
    assert 'Fabric acceptance FAILED on' in out
    assert '%s rail %s (sender, %s)' % (node, SENDER, RECEIVER) in out, out[-6000:]
    with open(os.path.join(report_dir, 'fabric-acceptance.json')) as handle:
        inc = json.load(handle)['incast']
    assert inc['ok'] is False
    assert inc['failed'] == sorted(['%s/%s' % (node, SENDER), '%s/%s' % (node, RECEIVER)])
    sender = [f for f in inc['failures'] if f['netdev'] == SENDER][0]
    assert sender['host'] == node and sender['role'] == 'sender'
    assert sender['reasons'] == ['no_traffic_in_priority', 'priority0_not_flat']
    assert 'wrong DSCP' in sender['message']
    receiver = [f for f in inc['failures'] if f['netdev'] == RECEIVER][0]
    assert receiver['reasons'] == ['no_traffic_in_priority', 'priority0_not_flat']
    # the data really went through priority 0 of the pair
    assert moved(before, after, 'dcb0', 'tx_prio0_bytes') >= MIB
    assert moved(before, after, 'dcb1', 'rx_prio0_bytes') >= MIB
