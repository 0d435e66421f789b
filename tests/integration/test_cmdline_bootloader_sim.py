# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_cmdline through Ansible over SSH on simulated nodes: a microVM whose boot-loader tools are removed
(the field report: it must not fail, in check mode or a real run), a systemd-boot node, and a GRUB node where an
argument the admin adds to /etc/default/grub after the collection's run still boots."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Fleet, sim, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

MODULE = "gpufabric.node.kernel_cmdline"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("clfleet")),
              {"clvm": "hgx-h200", "clsd": "pcie-4gpu-crossnuma", "clgrub": "hgx-h200"},
              bootloaders={"clvm": "none", "clsd": "systemd-boot"})
    try:
        yield f.create()
    finally:
        f.destroy()


def _one(fleet, node, args, check=False):
    rc, res = fleet.ansible(node, MODULE, args, *(["--check"] if check else []))
    return rc, res[node]


def test_microvm_without_boot_loader_tools(fleet):
    out = fleet.sh("clvm", "for t in update-grub grub-mkconfig grub2-mkconfig grubby; do command -v $t || true; done;"
                           " ls $GPUFABRIC_SYSROOT/boot; test -e $GPUFABRIC_SYSROOT/etc/default/grub || echo nogrub")
    assert out.stdout.split() == ["nogrub"], out.stdout
    before = fleet.hash("clvm")
    for check in (True, False):
        rc, r = _one(fleet, "clvm", {"present": ["iommu=pt"]}, check=check)
        assert rc == 0 and not r.get("failed"), r
        assert r["changed"] is False and r["reboot_required"] is False and r["bootloader"] == "none"
        doc = r["concerns"]["cmdline"]
        assert doc["status"] == "drift" and "hypervisor" in doc["reason"] and "lacks iommu=pt" in doc["reason"]
        assert doc["items"] == [{"concern": "cmdline", "object": "running", "key": "iommu", "current": None,
                                 "desired": "iommu=pt"}]
        rc, r = _one(fleet, "clvm", {"absent": ["iommu=off"]}, check=check)
        assert rc == 0 and r["concerns"]["cmdline"]["status"] == "not_applicable", r
    assert fleet.hash("clvm") == before
    # the hypervisor passes the same command line at the next boot
    with open(os.path.join(fleet.root("clvm"), "proc/cmdline")) as f:
        cmdline = f.read()
    rep = json.loads(sim("reboot", "--fleet", fleet.path, "--node", "clvm").stdout)
    assert rep["cmdline"] == cmdline.strip() and rep["notes"]


def test_systemd_boot_node_is_checked_not_driven(fleet):
    assert fleet.sh("clsd", "bootctl is-installed").stdout == "yes\n"
    before = fleet.hash("clsd")
    rc, r = _one(fleet, "clsd", {"present": ["iommu=pt"]})
    assert rc == 0 and not r.get("failed"), r
    assert r["bootloader"] == "systemd-boot" and r["changed"] is False and r["reboot_required"] is False
    assert any("LoaderInfo: systemd-boot" in e for e in r["bootloader_evidence"])
    reason = r["concerns"]["cmdline"]["reason"]
    kver = "5.14.0-427.13.1.el9_4.x86_64"
    assert "/etc/kernel/cmdline" in reason and "kernel-install add %s /usr/lib/modules/%s/vmlinuz" % (kver, kver) \
        in reason, reason
    assert fleet.hash("clsd") == before


def test_grub_admin_argument_added_later_still_boots(fleet):
    args = {"present": ["iommu=pt"]}
    rc, r = _one(fleet, "clgrub", args)
    assert rc == 0 and r["changed"] is True and r["concerns"]["cmdline"]["status"] == "ok", r
    # the admin adds an argument to /etc/default/grub afterwards and regenerates grub.cfg
    fleet.sh("clgrub", "sed -i 's|^GRUB_CMDLINE_LINUX=.*|GRUB_CMDLINE_LINUX=\"mitigations=off\"|' "
                       "$GPUFABRIC_SYSROOT/etc/default/grub && update-grub 2>/dev/null")
    rep = json.loads(sim("reboot", "--fleet", fleet.path, "--node", "clgrub").stdout)
    words = rep["cmdline"].split()
    assert "mitigations=off" in words and "iommu=pt" in words, rep["cmdline"]
    rc, r = _one(fleet, "clgrub", args)
    assert r["changed"] is False and r["reboot_required"] is False
    assert r["concerns"]["cmdline"] == {"status": "ok", "reason": None, "items": []}
    # a conflicting argument of the admin's is reported against the file, never rewritten
    fleet.sh("clgrub", "sed -i 's|^GRUB_CMDLINE_LINUX_DEFAULT=.*|GRUB_CMDLINE_LINUX_DEFAULT=\"iommu=off\"|' "
                       "$GPUFABRIC_SYSROOT/etc/default/grub")
    before = fleet.hash("clgrub")
    for check in (True, False):
        rc, r = _one(fleet, "clgrub", args, check=check)
        assert rc == 0 and not r.get("failed"), r
        doc = r["concerns"]["cmdline"]
        assert doc["status"] == "drift"
        assert {"concern": "cmdline", "object": "/etc/default/grub", "key": "iommu", "current": "iommu=off",
                "desired": "iommu=pt"} in doc["items"]
        assert r["changed"] is False and r["reboot_required"] is False
    assert fleet.hash("clgrub") == before
