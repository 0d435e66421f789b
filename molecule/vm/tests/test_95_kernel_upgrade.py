# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_upgrade.yml on the real kernel: the converged lab node moves from the image's Debian kernel ABI to a newer
one (the newest linux-image-<base>-<abi>-amd64 the controller's apt knows, from bookworm-security) with the vendor
NFS client (the vastnfs-like fixture of tests/fixtures/vendor_nfs) built in podman on the controller for the TARGET
kernel before the reboot, and proven loaded after it.

Order matters and this file runs last in the scenario (the fixture's sunrpc/rpcrdma/nfs are stand-ins: once they
are the node's NFS stack, NFS on the node stops working, as it would with a broken vendor client):

1. a vendor release that does not compile for the target kernel (kernel_ceiling variant): the playbook stops before
   anything is installed or rebooted, says why, records the failure; the node runs the old kernel, the target
   kernel's package is not installed, nothing exists for it under /lib/modules;
2. (a wrong sha256, refused before any build, is the controller's check alone: tests/integration/
   test_vendor_nfs_podman.py::test_wrong_sha_refused with real podman, test_kmod_build.py in the unit tier; each
   kernel_upgrade.yml run costs minutes under TCG, so the VM lab leaves it to them)
3. the lab's own out-of-tree driver (dcbtest, the rails' NIC) is built for the target kernel in podman and placed
   under /lib/modules/<target>/updates, as DKMS would; the gate checks it with kernel_upgrade_other_modules;
4. the good release: build for the target, kernel package from a flat apt repository pushed into the guest (it has
   no network), client installed for the target, gate, reboot, post-boot proof by the playbook; then independent
   read-backs here: uname -r, srcversion of the loaded sunrpc/rpcrdma equal to the installed vendor files, the
   bundle version parameter, /proc/cmdline, ACS, DCB, ToS, the upgrade record;
5. running the playbook again on the upgraded node: no reboot, the record says done.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import PROJECT, WORK, log, playbook, recap
from test_40_dcb import dscp_prio, pfc_on

__metaclass__ = type

sys.path.insert(0, os.path.join(PROJECT, 'tests', 'lab', 'vm'))
sys.path.insert(0, os.path.join(PROJECT, 'tests', 'fixtures', 'vendor_nfs'))
import labimage  # noqa: E402 pylint: disable=wrong-import-position
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

LAB = os.path.join(PROJECT, 'tests', 'lab', 'vm', 'lab.py')
VM = os.environ.get('GPUFABRIC_VM_NAME', 'molecule-vm')
UPGRADE = os.path.join(PROJECT, 'playbooks', 'kernel_upgrade.yml')
VERSION = '4.0.35-gf1'
GUEST_REPO = '/srv/lab-kernels'
STATE = '/etc/gpufabric/upgrade.json'


def lab(*args, **kw):
    """python3 lab.py ARGS; returns stdout (stderr goes to the test log)."""
    proc = subprocess.run(['python3', LAB] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=kw.get('timeout', 1800), check=False)
    err = proc.stderr.decode('utf-8', 'replace')
    if proc.returncode != 0:
        raise AssertionError('lab.py %s failed (rc=%d): %s' % (' '.join(args), proc.returncode, err[-3000:]))
    return proc.stdout.decode('utf-8', 'replace').strip()


def sublevel(uname_v):
    """(major, minor, sublevel) of the running Debian kernel from ``uname -v`` (``... Debian 6.1.176-1 ...``)."""
    m = re.search(r'Debian (\d+)\.(\d+)\.(\d+)', uname_v)
    assert m, 'cannot read the kernel version from uname -v: %r' % uname_v
    return tuple(int(x) for x in m.groups())


def upgrade_args(target, tarball, digest, *extra):
    args = {
        'kernel_upgrade_kernel_release': target,
        'vendor_nfs_client_src': tarball,
        'vendor_nfs_client_sha256': digest,
        'vendor_nfs_client_version': VERSION,
        # built on the controller in podman (the node has none), in the lab's podman storage: builder images of
        # both kernels live there
        'vendor_nfs_client_build_host': 'localhost',
        'vendor_nfs_client_podman_conf_dir': os.path.join(labimage.cache_dir(), 'podman'),
        'vendor_nfs_client_builder_suite': labimage.SUITE,
        'kernel_upgrade_other_modules': ['dcbtest'],
        'kernel_upgrade_require_loaded': ['sunrpc', 'rpcrdma'],
        'kernel_upgrade_reboot_timeout': 900,
        # the lab node has no GPU or RDMA device: the canary's suite would only say "not judged"
        'kernel_upgrade_canary': False,
    }
    for item in extra:
        args.update(item)
    return ['-e', json.dumps(args)]


def record(host):
    out = host.run('cat %s' % STATE)
    return json.loads(out.stdout) if out.rc == 0 else {}


def boot_id(host):
    return host.check_output('cat /proc/sys/kernel/random/boot_id').strip()


@pytest.fixture(scope='module')
def upgrade(host):
    """Target kernel, fixture tarballs and the guest's local apt repository for it."""
    current = host.check_output('uname -r').strip()
    target = os.environ.get('GPUFABRIC_VM_UPGRADE_KVER')
    if not target:
        newer = json.loads(lab('kernels', '--current', current))['newer']
        if not newer:
            pytest.skip('the controller\'s apt knows no Debian kernel ABI newer than %s (apt-get update with the '
                        'suite\'s -security source)' % current)
        target = newer[0]
    work = os.path.join(WORK, 'kernel-upgrade')
    os.makedirs(work, exist_ok=True)
    good = vf.make_source_tarball(work, version=VERSION)
    ceiling = vf.make_source_tarball(work, version=VERSION, variant='kernel_ceiling',
                                     max_kernel=sublevel(host.check_output('uname -v')))
    start = time.time()
    repo = lab('kernel-repo', '--kver', target)
    host.run_expect([0], 'rm -rf %s && mkdir -p %s' % (GUEST_REPO, GUEST_REPO))
    lab('push', VM, os.path.join(repo, 'Packages'),
        *[os.path.join(repo, f) for f in os.listdir(repo) if f.endswith('.deb')] + [GUEST_REPO + '/'])
    # the guest has no network: apt sees only this repository (its other sources are never updated)
    host.run_expect([0], "echo 'deb [trusted=yes] file:%s ./' > /etc/apt/sources.list.d/lab-kernels.list && "
                         "apt-get -q update -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/lab-kernels.list "
                         "-o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0" % GUEST_REPO)
    # mkinitramfs with MODULES=most (Debian's default) copies every storage/network module and runs 10+ minutes
    # under TCG; the lab's initramfs only needs what this VM boots from, and this VM's hardware is fixed (root on
    # virtio-blk, ext4): MODULES=list with those three modules (initramfs.conf(5); /etc/initramfs-tools/modules is
    # the admin's list) took the hook from 103 s to 65 s in the same guest, against MODULES=dep, which runs the
    # hooks that work out the root device; gzip -1 (zstd is not installed in the image) saves 2.5 s more. The
    # guest booted the new kernel from such an initramfs (docs/benchmarks.md, session 12).
    host.run_expect([0], "printf 'MODULES=list\\nCOMPRESSLEVEL=1\\n' > /etc/initramfs-tools/conf.d/lab-upgrade.conf && "
                         "printf 'virtio_pci\\nvirtio_blk\\next4\\n' >> /etc/initramfs-tools/modules")
    # the lab's stand-in for the NFS mounts that load the client at boot on a storage node
    host.run_expect([0], "printf 'sunrpc\\nrpcrdma\\n' > /etc/modules-load.d/lab-nfs-client.conf")
    log('kernel upgrade %s -> %s: repository in the guest in %.1f s' % (current, target, time.time() - start))
    return {'current': current, 'target': target, 'good': good, 'ceiling': ceiling}


def test_build_failure_for_target_stops_before_anything(host, upgrade):
    target = upgrade['target']
    before = boot_id(host)
    rc, out = playbook(UPGRADE, *upgrade_args(target, *upgrade['ceiling']), timeout=2400)
    rec = record(host)
    log('failing vendor release: rc=%d record=%s' % (rc, json.dumps(rec, sort_keys=True)))
    assert rc != 0, out[-4000:]
    assert 'supports kernels up to' in out and 'failed at' in out, out[-4000:]
    assert rec.get('phase') == 'failed' and rec.get('target') == target
    assert 'Build and verify' in rec.get('failed_task', ''), rec
    assert 'supports kernels up to' in rec.get('error', ''), rec
    assert boot_id(host) == before, 'the node rebooted'
    assert host.check_output('uname -r').strip() == upgrade['current']
    assert not host.package('linux-image-' + target).is_installed
    assert host.run('test -e /lib/modules/%s' % target).rc == 1, 'something was installed for %s' % target
    assert host.run('ls /boot/vmlinuz-%s' % target).rc != 0
    assert not host.package('vastnfs-modules').is_installed


def test_site_driver_built_for_target(host, upgrade):
    """The rails' NIC driver (dcbtest) for the target kernel, as DKMS would place it."""
    target = upgrade['target']
    ko = lab('dcbdrv', '--kver', target)
    host.run_expect([0], 'mkdir -p /lib/modules/%s/updates' % target)
    lab('push', VM, ko, '/lib/modules/%s/updates/dcbtest.ko' % target)
    magic = host.check_output('modinfo -F vermagic /lib/modules/%s/updates/dcbtest.ko' % target)
    assert magic.split()[0] == target


def test_upgrade_to_target_with_vendor_client(host, upgrade):
    target = upgrade['target']
    tarball, digest = upgrade['good']
    before = boot_id(host)
    start = time.time()
    rc, out = playbook(UPGRADE, *upgrade_args(target, tarball, digest), timeout=3000)
    log('kernel_upgrade.yml %s -> %s: rc=%d in %.0f s' % (upgrade['current'], target, rc, time.time() - start))
    assert rc == 0, out[-6000:]
    assert boot_id(host) != before, 'the node did not reboot'
    # the order on the node: build verified (controller) before the kernel package, client before the reboot
    order = [out.find(t) for t in ('TASK [Build and verify the vendor NFS client for the target kernel',
                                   'TASK [Install the target kernel package',
                                   'TASK [Install the verified vendor NFS client for the target kernel',
                                   'TASK [Gate - refuse to reboot',
                                   'TASK [Reboot into the target kernel]',
                                   'TASK [Proof - the target kernel runs the vendor')]
    assert -1 not in order and order == sorted(order), order


def test_target_kernel_runs_the_vendor_client(host, upgrade):
    target = upgrade['target']
    assert host.check_output('uname -r').strip() == target
    bundle = '/lib/modules/%s/updates/bundle' % target
    for name in ('sunrpc', 'rpcrdma'):
        live = host.check_output('cat /sys/module/%s/srcversion' % name).strip()
        installed = host.check_output('modinfo -F srcversion %s/%s.ko' % (bundle, name)).strip()
        log('%s: loaded srcversion %s, installed vendor file %s' % (name, live, installed))
        assert live == installed
        assert host.check_output('modinfo -F vermagic %s/%s.ko' % (bundle, name)).split()[0] == target
    assert host.check_output('cat /sys/module/sunrpc/parameters/nfs_bundle_version').strip() == VERSION
    status = host.check_output("dpkg-query -W -f '${Status} ${Version}' vastnfs-modules")
    assert status.startswith('install ok installed'), status
    rec = record(host)
    assert rec.get('phase') == 'done' and rec.get('target') == target, rec


def test_target_kernel_keeps_the_fabric(host, upgrade, lab_vars, rails):
    cmdline = host.check_output('cat /proc/cmdline')
    assert 'iommu=pt' in cmdline.split() and 'pci=disable_acs_redir=' in cmdline
    for bdf in ('00:11.0', '00:12.0'):
        assert host.check_output('setpci -s %s ECAP_ACS+6.w' % bdf).strip() == '0011'
    dcbtest = host.check_output('modinfo -F vermagic dcbtest').split()[0]
    assert dcbtest == upgrade['target'] and host.file('/sys/module/dcbtest').is_directory
    for n, rail in enumerate(rails):
        assert dscp_prio(host, rail).get(26) == 3 and pfc_on(host, rail) == [3], rail
        tos = host.check_output('cat /sys/kernel/config/rdma_cm/rxe%d/ports/1/default_roce_tos' % n).strip()
        assert tos == '106', (rail, tos)


def test_rerun_on_upgraded_node_is_safe(host, upgrade):
    tarball, digest = upgrade['good']
    before = boot_id(host)
    rc, out = playbook(UPGRADE, *upgrade_args(upgrade['target'], tarball, digest), timeout=1800)
    assert rc == 0, out[-4000:]
    assert boot_id(host) == before, 'a re-run rebooted an upgraded node'
    counts = recap(out, [h for h in (VM, 'molecule-vm') if h + ' ' in out][0])
    log('re-run on the upgraded node: %s' % counts)
    assert counts['failed'] == 0
    assert record(host).get('phase') == 'done'
