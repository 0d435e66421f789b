# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NFS over RDMA (the collection's mount unit, storage_mounts) beside NFS over TCP (fstab), both mounted at boot after
the applier: after the side_effect reboot the RDMA mount is back on its own with proto=rdma, data moves with a
matching checksum and the RDMA device's counters rise."""
from __future__ import absolute_import, division, print_function

from conftest import log

__metaclass__ = type

COUNTER = '/sys/class/infiniband/rxe0/ports/1/hw_counters/%s'
BLOB_MIB = 16


def mounts(host):
    out = {}
    for line in host.file('/proc/mounts').content_string.splitlines():
        dev, path, fstype, opts = line.split()[:4]
        if fstype.startswith('nfs'):
            out[path] = (dev, dict(o.split('=', 1) if '=' in o else (o, True) for o in opts.split(',')))
    return out


def counter(host, name):
    return int(host.check_output('cat ' + COUNTER % name))


def test_server_listens_on_rdma(host):
    ports = host.file('/proc/fs/nfsd/portlist').content_string.split('\n')
    assert 'rdma 20049' in ports and 'tcp 2049' in ports


def mountinfo(host, path):
    """The super options of the mount on top of ``path`` in /proc/self/mountinfo (what the kernel uses)."""
    top = None
    for line in host.file('/proc/self/mountinfo').content_string.splitlines():
        left, _sep, right = line.partition(' - ')
        if left.split()[4] == path:
            fstype, source, opts = right.split()[:3]
            top = (fstype, source, dict(o.split('=', 1) if '=' in o else (o, True) for o in opts.split(',')))
    return top


def test_tcp_mount_from_fstab(host, lab_vars):
    got = mounts(host)
    log('nfs mounts: %s' % dict((p, (d, o.get('proto'), o.get('port'), o.get('vers'))) for p, (d, o) in got.items()))
    for m in lab_vars['gpufabric_lab_nfs_mounts']:
        assert m['path'] in got, m['path']
        dev, opts = got[m['path']]
        assert dev == '%s:%s' % (lab_vars['gpufabric_lab_nfs_server'], lab_vars['gpufabric_lab_nfs_export'])
        assert opts['proto'] == m['proto'], (m['path'], opts)


def test_rdma_mount_is_the_collections_unit_and_came_back_after_the_reboot(host, lab_vars):
    vol = lab_vars['storage_mounts_volumes'][0]
    unit = host.check_output('systemd-escape --path --suffix=mount %s' % vol['path'])
    fragment = host.check_output("systemctl show -p FragmentPath --value '%s'" % unit)
    enabled = host.run("systemctl is-enabled '%s'" % unit).stdout.strip()
    active = host.run("systemctl is-active '%s'" % unit).stdout.strip()
    fstab = host.file('/etc/fstab').content_string
    boot = host.check_output('cat /proc/sys/kernel/random/boot_id')
    got = mountinfo(host, vol['path'])
    log('%s: %s (%s, %s) from %s; boot %s; mountinfo %s' % (vol['path'], unit, enabled, active, fragment, boot, got))
    assert fragment == '/etc/systemd/system/' + unit
    assert enabled == 'enabled' and active == 'active'
    assert vol['path'] not in fstab, 'the RDMA mount must come from the unit, not fstab'
    fstype, source, opts = got
    want = '%s:%s' % (lab_vars['gpufabric_lab_nfs_server'], lab_vars['gpufabric_lab_nfs_export'])
    assert fstype == 'nfs4' and source == want
    assert opts['proto'] == 'rdma' and opts['port'] == '20049' and opts['vers'] == vol['vers']
    # nconnect is in the unit; the kernel shows it only where NFSv4 passes it for RDMA (6.9, stable backports)
    unit_text = host.file('/etc/systemd/system/' + unit).content_string
    assert 'nconnect=%d' % vol['nconnect'] in unit_text
    log('kernel %s: mountinfo nconnect %s (the unit asks %d)'
        % (host.check_output('uname -r'), opts.get('nconnect'), vol['nconnect']))
    assert opts.get('nconnect') in (None, str(vol['nconnect']))
    # the side_effect rebooted the node after converge: the unit mounted it at this boot, after the applier
    units = host.check_output("systemctl show -p After --value '%s'" % unit).split()
    assert 'gpufabric-apply.service' in units
    applier_done = int(host.check_output('systemctl show -p ActiveEnterTimestampMonotonic --value '
                                         'gpufabric-apply.service'))
    mounted_at = int(host.check_output("systemctl show -p ActiveEnterTimestampMonotonic --value '%s'" % unit))
    log('applier active at %d us, mount active at %d us (monotonic, this boot)' % (applier_done, mounted_at))
    assert 0 < applier_done <= mounted_at


def test_rdma_mount_moves_data(host):
    blob = '/var/tmp/gpufabric-nfs-blob'
    host.check_output('head -c %dM /dev/urandom > %s' % (BLOB_MIB, blob))
    sent0, rcvd0 = counter(host, 'sent_pkts'), counter(host, 'rcvd_pkts')
    try:
        host.check_output('cp %s /mnt/nfs-rdma/blob && sync -f /mnt/nfs-rdma/blob' % blob)
        sent1, rcvd1 = counter(host, 'sent_pkts'), counter(host, 'rcvd_pkts')
        # read back through every path with cold caches: RDMA mount, TCP mount, the exported folder itself
        host.check_output('echo 3 > /proc/sys/vm/drop_caches')
        sums = host.check_output('sha256sum %s /mnt/nfs-rdma/blob /mnt/nfs-tcp/blob /srv/nfs/blob' % blob)
        sent2 = counter(host, 'sent_pkts')
    finally:
        host.run('rm -f /mnt/nfs-rdma/blob %s' % blob)
    digests = [line.split()[0] for line in sums.splitlines()]
    log('sha256: %s' % ' '.join(d[:16] for d in digests))
    log('rxe0 sent_pkts %d -> %d (write) -> %d (read back); rcvd_pkts %d -> %d' % (sent0, sent1, sent2, rcvd0, rcvd1))
    assert len(digests) == 4 and len(set(digests)) == 1
    # 16 MiB over RDMA is thousands of RoCE packets (the rxe MTU is at most 4096 bytes)
    assert sent1 - sent0 >= BLOB_MIB * 1024 * 1024 // 4096
    assert sent2 > sent1
