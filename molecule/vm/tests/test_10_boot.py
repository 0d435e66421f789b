# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""After provision.yml's reboot and one more reboot (side_effect): kernel command line, IOMMU domains, ACS."""
from __future__ import absolute_import, division, print_function

from conftest import log

__metaclass__ = type

# ACS control bits (PCIe spec 7.7.8.3 / lspci names)
SRC_VALID, REQ_REDIR, CMPLT_REDIR, UPSTREAM_FWD, EGRESS_CTRL = 0x01, 0x04, 0x08, 0x10, 0x20
KERNEL_ACS = SRC_VALID | REQ_REDIR | CMPLT_REDIR | UPSTREAM_FWD        # 0x001d: what Linux enables
MANAGED = REQ_REDIR | CMPLT_REDIR | EGRESS_CTRL                        # pcie_acs_clear defaults
PATH_ROOT_PORTS = ('0000:00:11.0', '0000:00:12.0')                     # NVMe side, e1000e side
OFF_PATH_ROOT_PORT = '0000:00:10.0'                                    # management virtio-net


def acs_ctrl(host, bdf):
    return int(host.check_output('setpci -s %s ECAP_ACS+6.w' % bdf), 16)


def test_endpoints_are_the_lab_devices(host, lab_vars):
    pair = lab_vars['pcie_acs_endpoints'][0]
    gpu = host.check_output('lspci -D -n -s %s' % pair['gpu'])
    nic = host.check_output('lspci -D -n -s %s' % pair['nic'])
    log('GPU stand-in: %s | NIC: %s' % (gpu, nic))
    assert ' 0108: 1b36:0010' in gpu      # QEMU NVMe
    assert ' 0200: 8086:10d3' in nic      # e1000e (82574L)


def test_cmdline_carries_iommu_pt_and_acs_parameter(host):
    cmdline = host.file('/proc/cmdline').content_string.split()
    log('/proc/cmdline: %s' % ' '.join(cmdline))
    assert 'iommu=pt' in cmdline
    acs = [a for a in cmdline if a.startswith('pci=disable_acs_redir=')]
    assert len(acs) == 1, cmdline
    assert sorted(acs[0].split('=', 2)[2].split(';')) == sorted(PATH_ROOT_PORTS)


def test_iommu_groups_are_identity(host):
    types = host.check_output('cat /sys/kernel/iommu_groups/*/type').split()
    log('iommu group types: %s' % ' '.join(types))
    assert types and set(types) == {'identity'}
    dmesg = host.run('journalctl -k -b --no-pager -g "Default domain type"')
    log('kernel: %s' % dmesg.stdout.strip())
    assert 'Passthrough' in dmesg.stdout


def test_acs_clear_on_path_bridges_only(host):
    values = dict((bdf, acs_ctrl(host, bdf)) for bdf in PATH_ROOT_PORTS + (OFF_PATH_ROOT_PORT,))
    log('ACS control: %s' % ', '.join('%s=0x%04x' % kv for kv in sorted(values.items())))
    for bdf in PATH_ROOT_PORTS:
        assert values[bdf] & MANAGED == 0, bdf
        # the bits the role does not manage stay as the kernel set them
        assert values[bdf] == KERNEL_ACS & ~MANAGED, bdf
    assert values[OFF_PATH_ROOT_PORT] == KERNEL_ACS
