# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure-python parts of the VM lab (tests/lab/vm/lab.py, labimage.py): no QEMU, no root, no network."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import sys

import pytest

VM_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', 'lab', 'vm'))
if VM_DIR not in sys.path:
    sys.path.insert(0, VM_DIR)

import labimage  # noqa: E402
import lab  # noqa: E402


DEB822 = """Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""

ONE_LINE = """# comment
deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main contrib
deb-src http://list.example/debian bookworm main
"""


@pytest.mark.parametrize('texts, suite, expected', [
    ([('x.sources', DEB822)], 'bookworm', 'http://mirror.example/debian'),
    ([('sources.list', ONE_LINE)], 'bookworm', 'http://list.example/debian'),
    ([('x.sources', DEB822.replace('Types: deb\n', 'Types: deb\nEnabled: no\n', 1)),
      ('sources.list', ONE_LINE)], 'bookworm', 'http://list.example/debian'),
    ([('x.sources', DEB822)], 'bookworm-security', 'http://mirror.example/debian-security'),
])
def test_pick_mirror(texts, suite, expected):
    assert labimage.pick_mirror(labimage.apt_sources_entries(texts), suite) == expected


@pytest.mark.parametrize('texts, suite', [
    ([], 'bookworm'),
    ([('x.sources', DEB822.replace('Components: main', 'Components: contrib'))], 'bookworm'),
    ([('x.sources', DEB822.replace('Types: deb\n', 'Types: deb-src\n'))], 'bookworm'),
    ([('x.sources', DEB822)], 'trixie'),
])
def test_pick_mirror_none(texts, suite):
    with pytest.raises(labimage.LabError):
        labimage.pick_mirror(labimage.apt_sources_entries(texts), suite)


def test_host_mirror_override(monkeypatch):
    monkeypatch.setenv('GPUFABRIC_VM_MIRROR', 'http://override.example/debian/')
    assert labimage.host_mirror() == 'http://override.example/debian'


def test_package_list_is_the_recipe_plus_test_needs():
    names = labimage.read_package_list()
    for needed in ('linux-image-amd64', 'openssh-server', 'python3', 'rdma-core', 'perftest', 'iproute2',
                   'nfs-kernel-server', 'grub-pc', 'pciutils', 'ibverbs-utils', 'rdmacm-utils'):
        assert needed in names
    assert len(names) == len(set(names))


@pytest.mark.parametrize('line', ['Bad_Name', 'foo bar', '-x'])
def test_package_list_rejects_garbage(tmp_path, line):
    path = tmp_path / 'p.txt'
    path.write_text('# c\nkmod\n%s\n' % line)
    with pytest.raises(labimage.LabError):
        labimage.read_package_list(str(path))


def _fake_inputs(tmp_path):
    here = tmp_path / 'vm'
    shutil.copytree(VM_DIR, str(here), ignore=shutil.ignore_patterns('__pycache__', '*.ko', '*.o'))
    return str(here)


def test_image_key_stable_and_sensitive(tmp_path):
    here = _fake_inputs(tmp_path)
    key = labimage.image_key(here)
    assert key == labimage.image_key(here)
    assert len(key) == 64
    for rel in ('packages.txt', 'dcbtest/dcbtest.c', 'guest/usr/local/sbin/lab-rails', 'labimage.py'):
        path = os.path.join(here, rel)
        with open(path, 'a') as handle:
            handle.write('\n')
        changed = labimage.image_key(here)
        assert changed != key, rel
        key = changed


def test_image_key_ignores_boot_and_smoke_code(tmp_path):
    here = _fake_inputs(tmp_path)
    key = labimage.image_key(here)
    with open(os.path.join(here, 'lab.py'), 'a') as handle:
        handle.write('\n# smoke change\n')
    with open(os.path.join(here, 'dcbtest', 'dcbtest.ko'), 'w') as handle:
        handle.write('build output')
    assert labimage.image_key(here) == key


def test_driver_key_only_driver(tmp_path):
    here = _fake_inputs(tmp_path)
    key = labimage.driver_key(here)
    with open(os.path.join(here, 'packages.txt'), 'a') as handle:
        handle.write('\n')
    assert labimage.driver_key(here) == key
    with open(os.path.join(here, 'dcbtest', 'Kbuild'), 'a') as handle:
        handle.write('\n')
    assert labimage.driver_key(here) != key


def test_cache_dir_override(monkeypatch, tmp_path):
    monkeypatch.setenv('GPUFABRIC_VM_CACHE', str(tmp_path))
    assert labimage.cache_dir() == str(tmp_path)
    assert labimage.image_dir('abc') == os.path.join(str(tmp_path), 'images', 'abc')
    assert not labimage.image_ready('abc')
    monkeypatch.delenv('GPUFABRIC_VM_CACHE')
    assert labimage.cache_dir() == os.path.join(labimage.REPO, '.cache', 'vm')


def test_sfdisk_script_one_bootable_partition_at_2048():
    script = labimage.sfdisk_script()
    assert 'label: dos' in script
    assert 'start=2048' in script and 'bootable' in script
    assert labimage.PART_OFFSET == 2048 * 512


def test_timings_nested_total():
    t = labimage.Timings()
    t.run('image', lambda: t.run('debootstrap', lambda: None))
    t.run('boot', lambda: None)
    names = [(s[0], s[2]) for s in t.stages]
    assert names == [('image', 0), ('debootstrap', 1), ('boot', 0)]
    lines = t.summary().splitlines()
    assert lines[1].startswith('  debootstrap')
    assert lines[-1].startswith('total')


def test_timings_records_failing_stage():
    t = labimage.Timings()

    def boom():
        raise labimage.LabError('x')

    with pytest.raises(labimage.LabError):
        t.run('bad', boom)
    assert t.stages[0][0] == 'bad' and t.stages[0][1] is not None


@pytest.mark.parametrize('iommu', [False, True])
def test_qemu_argv_recipe_line(iommu):
    argv = lab.qemu_argv('/r', 2222, '/r/run.qcow2', '/r/nvme.raw', iommu=iommu)
    text = ' '.join(argv)
    assert argv[0] == 'qemu-system-x86_64'
    assert '-accel tcg,tb-size=256' in text and '-m 1024' in text and 'q35' in text
    assert ('-device intel-iommu' in text) is iommu
    assert 'hostfwd=tcp:127.0.0.1:2222-:22' in text
    netdevs = [argv[i + 1] for i, a in enumerate(argv) if a == '-netdev']
    assert len(netdevs) == 2 and all('restrict=on' in n for n in netdevs)
    assert 'nvme,drive=nvm,serial=lab0001,bus=dp1' in argv
    # the "NIC" has its own root port (00:12.0), not a switch port: QEMU's switch ports carry no ACS
    assert 'e1000e,netdev=n2,bus=rp3' in argv
    assert 'pcie-root-port,id=rp3,bus=pcie.0,chassis=5,slot=3,addr=0x12' in argv
    assert not any(a.startswith('xio3130-downstream,id=dp2') for a in argv)
    assert 'virtio-net-pci,netdev=n1,bus=rp1' in argv
    assert '-daemonize' in argv and '/r/qemu.pid' in argv
    assert 'kvm' not in text


def test_inventory_text():
    text = lab.inventory_text('vm1', 40022, '/c/run/vm1/id_ed25519')
    line = text.splitlines()[1]
    assert line.startswith('vm1 ')
    for part in ('ansible_host=127.0.0.1', 'ansible_port=40022', 'ansible_user=root',
                 'ansible_ssh_private_key_file=/c/run/vm1/id_ed25519',
                 'ansible_python_interpreter=/usr/bin/python3'):
        assert part in line.split()


def test_ssh_argv_loopback_only():
    argv = lab.ssh_argv({'key': '/k', 'port': 1234}, 'uname -r')
    assert argv[-2:] == ['root@127.0.0.1', 'uname -r']
    assert ['-p', '1234'] == argv[argv.index('-p'):argv.index('-p') + 2]
    assert 'BatchMode=yes' in argv


@pytest.mark.parametrize('text, expected', [
    ('{}', []),
    ('', []),
    ('{"dscp_prio":[[26,3]]}', [(26, 3)]),
    ('{"dscp_prio":[[26,3," "],[0,0," "]]}', [(26, 3), (0, 0)]),
    ('{"dscp_prio":[{"dscp":10,"prio":1}]}', [(10, 1)]),
    ('{"pcp_prio":[[1,1]]}', []),
])
def test_parse_dcb_app_dscp(text, expected):
    assert lab.parse_dcb_app_dscp(text) == expected


def test_free_port_is_loopback_bindable():
    port = lab.free_port()
    assert 1024 <= port <= 65535


def test_qemu_pid_refuses_foreign_pid(tmp_path):
    rdir = str(tmp_path)
    assert lab.qemu_pid(rdir) is None
    with open(os.path.join(rdir, 'qemu.pid'), 'w') as handle:
        handle.write('%d\n' % os.getpid())
    # Our own pid is alive but is not QEMU from this run dir: never killed.
    assert lab.qemu_pid(rdir) is None
    with open(os.path.join(rdir, 'qemu.pid'), 'w') as handle:
        handle.write('garbage')
    assert lab.qemu_pid(rdir) is None


def test_down_is_idempotent(monkeypatch, tmp_path):
    monkeypatch.setenv('GPUFABRIC_VM_CACHE', str(tmp_path))
    rdir = lab.run_dir('gone')
    os.makedirs(rdir)
    with open(os.path.join(rdir, 'qemu.pid'), 'w') as handle:
        handle.write('%d\n' % os.getpid())
    lab.down('gone')
    assert not os.path.exists(rdir)
    lab.down('gone')


def test_load_state_missing(monkeypatch, tmp_path):
    monkeypatch.setenv('GPUFABRIC_VM_CACHE', str(tmp_path))
    with pytest.raises(labimage.LabError):
        lab.load_state('nope')


def test_state_roundtrip(monkeypatch, tmp_path):
    monkeypatch.setenv('GPUFABRIC_VM_CACHE', str(tmp_path))
    state = {'name': 'vm2', 'pid': 1, 'port': 2, 'overlay': '/o'}
    lab.write_state(state)
    assert lab.load_state('vm2') == state
    with open(lab.state_path('vm2')) as handle:
        assert json.load(handle)['port'] == 2


def test_cli_parses_subcommands():
    p = lab.parser()
    assert p.parse_args(['up', '--name', 'x', '--iommu']).iommu is True
    assert p.parse_args(['up']).name == 'lab'
    args = p.parse_args(['ssh', 'x', '--', 'uname', '-r'])
    assert args.command[-2:] == ['uname', '-r']
    assert p.parse_args(['image', '--force']).force is True
    assert p.parse_args(['dcbdrv', '--kver', '6.1.0-50-amd64']).kver == '6.1.0-50-amd64'
    with pytest.raises(SystemExit):
        p.parse_args(['bogus'])


def test_guest_files_present_and_executable():
    guest = os.path.join(VM_DIR, 'guest')
    for rel in ('usr/local/sbin/lab-rails', 'usr/local/sbin/lab-firstboot'):
        assert os.access(os.path.join(guest, rel), os.X_OK), rel
    with open(os.path.join(guest, 'etc', 'modules-load.d', 'gpufabric-lab.conf')) as handle:
        assert 'dcbtest' in handle.read().split()
    with open(os.path.join(guest, 'etc', 'default', 'grub.d', '10-lab-serial.cfg')) as handle:
        assert 'GRUB_TIMEOUT=1' in handle.read().splitlines()
