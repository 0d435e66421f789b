# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_cm default ToS on both rails after the reboot (the boot-time applier) and after a device re-registers."""
from __future__ import absolute_import, division, print_function

from conftest import log, wait_for

__metaclass__ = type

TOS = '/sys/kernel/config/rdma_cm/%s/ports/1/default_roce_tos'


def tos(host, ibdev):
    f = host.file(TOS % ibdev)
    return f.content_string.strip() if f.exists else None


def ibdev_of(host, rail):
    out = host.check_output('rdma link show')
    for line in out.splitlines():
        fields = line.split()
        if fields[-1] == rail:
            return fields[1].split('/')[0]
    raise AssertionError('no RDMA device on %s: %s' % (rail, out))


def test_applier_ran_at_boot(host):
    unit = host.service('gpufabric-apply.service')
    assert unit.is_enabled
    props = host.check_output('systemctl show -p ActiveState -p Result gpufabric-apply.service')
    log('gpufabric-apply.service: %s' % props.replace('\n', ' '))
    assert 'ActiveState=active' in props and 'Result=success' in props


def test_tos_on_every_rail_after_reboot(host, rails, lab_vars):
    for rail in rails:
        dev = ibdev_of(host, rail)
        value = tos(host, dev)
        log('%s (%s) default_roce_tos=%s' % (dev, rail, value))
        assert value == '106'


def test_tos_back_after_device_reregistration(host):
    """rdma link delete + add: a new ib_device, ToS 0 again in the kernel; udev -> gpufabric-apply@rxe1."""
    host.check_output('rdma link delete rxe1')
    host.check_output('rdma link add rxe1 type rxe netdev dcb1')
    value = wait_for(lambda: tos(host, 'rxe1') == '106' and '106', 90)
    runs = host.run('journalctl -b --no-pager -o cat -u gpufabric-apply@rxe1.service')
    log('after re-registration rxe1 default_roce_tos=%s; applier@rxe1 journal tail: %s'
        % (tos(host, 'rxe1'), ' | '.join(runs.stdout.strip().splitlines()[-4:])))
    assert value == '106'
    assert tos(host, 'rxe0') == '106'
    link = host.check_output('rdma link show rxe1/1')
    assert 'state ACTIVE' in link and link.split()[-1] == 'dcb1'
