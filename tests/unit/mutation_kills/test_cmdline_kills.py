# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cmdline: what its own tests left unseen (make mutation's survivors): ensure's whole result on a GRUB host, an EL
host with grubby and a microVM, in check mode and applied; not_driven's whole result; status_of's branches;
describe; backend_for."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import types

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as cmdline
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.detect import Found
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from cmdline_nodes import GRUB_TOOLS, KVER, Node, make_debian, make_el, make_microvm, remove_tools, subprocess_run

EL_K, EL_OLD = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.8.1.el9_3.x86_64"
DROPIN = "/etc/default/grub.d/99-gpufabric.cfg"
DROPIN_TEXT = (
    "# Managed by the gpufabric.node Ansible collection (gpufabric.node.kernel_cmdline).\n"
    "# It appends the collection's kernel arguments to GRUB_CMDLINE_LINUX as /etc/default/grub and the\n"
    "# drop-ins sorting before this file set it; it never removes an argument of theirs. The collection\n"
    "# rewrites this file as a whole (local edits are lost): put your own arguments in /etc/default/grub\n"
    "# and run update-grub.\n"
    'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"\n')


@pytest.fixture
def node(tmp_path, monkeypatch):
    return Node(tmp_path, monkeypatch)


def item(obj, key, cur, want):
    return {"concern": "cmdline", "object": obj, "key": key, "current": cur, "desired": want}


def test_grub_host_whole_result_in_check_mode_and_applied(node):
    make_debian(node.root, proc="quiet splash")
    boot = [item("bootloader", "iommu", None, "iommu=pt"), item("bootloader", "splash", "splash", None)]
    conflict = item("/etc/default/grub", "splash", "splash", None)
    running = [item("running", "iommu", None, "iommu=pt"), item("running", "splash", "splash", None)]
    reason = ("/etc/default/grub has splash in GRUB_CMDLINE_LINUX_DEFAULT, which is in absent: remove it there; then "
              "run update-grub (the collection never rewrites the admin's GRUB files)")
    expected = {
        "changed": True, "bootloader": "grub",
        "bootloader_evidence": ["update-grub", "grub-mkconfig", "grub2-mkconfig", "/etc/default/grub"],
        "reboot_required": True,
        "cmdline_current": "BOOT_IMAGE=/boot/vmlinuz-%s root=UUID=3f1a ro quiet splash" % KVER,
        "cmdline_next": "iommu=pt quiet splash", "args_added": ["iommu=pt"], "args_removed": [],
        "actions": ["write " + DROPIN],
        "drift": boot + [conflict] + running,
        "concerns": {"cmdline": {"status": "drift", "reason": reason, "items": [conflict] + boot}},
        "diff": {"before": "", "after": DROPIN_TEXT, "before_header": DROPIN + " (before)",
                 "after_header": DROPIN + " (after)"},
        "kernel_cmdline_file": None,
    }
    assert node.ensure(["iommu=pt"], ["splash"], check=True) == expected
    # applied: the drop-in is written and update-grub run; the admin's splash is left, and is what still differs
    applied = node.ensure(["iommu=pt"], ["splash"])
    assert applied == dict(expected, actions=["write " + DROPIN, "run %s/update-grub" % node.bin], concerns={
        "cmdline": {"status": "drift", "reason": reason, "items": [conflict, boot[1]]}})
    assert node.read(DROPIN.lstrip("/")) == DROPIN_TEXT


def test_ensure_defaults_apply_and_update_grub(node, monkeypatch):
    """No check_mode, no sysroot, no update_bootloader given: a real run on the sysroot the environment names."""
    make_debian(node.root, proc="quiet")
    r = cmdline.ensure(["iommu=pt"], [], subprocess_run, node.which, arch="x86_64")
    assert r["actions"] == ["write " + DROPIN, "run %s/update-grub" % node.bin]
    assert r["concerns"]["cmdline"] == {"status": "ok", "reason": "corrected 1 item(s)", "corrected": True,
                                        "items": [item("bootloader", "iommu", None, "iommu=pt")]}
    assert node.read(DROPIN.lstrip("/")) == DROPIN_TEXT


def test_ensure_without_update_bootloader_writes_only_the_dropin(node):
    make_debian(node.root, proc="quiet")
    r = node.ensure(["iommu=pt"], update_bootloader=False)
    assert r["actions"] == ["write " + DROPIN]


def test_ensure_validates_for_the_architecture_given(node):
    make_debian(node.root, proc="quiet iommu=on")
    with pytest.raises(cmdline.CmdlineError):
        node.ensure(["iommu=on"], check=True)
    r = cmdline.ensure(["iommu=on"], [], subprocess_run, node.which, check_mode=True,
                       sysroot=Sysroot(node.root), arch="aarch64")
    assert r["concerns"]["cmdline"]["status"] == "drift"


def test_el_host_whole_result_applied(node):
    make_el(node.root)
    opts = "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb quiet"
    boot = [item("bootloader", "iommu", None, "iommu=pt"), item("bootloader", "rhgb", "rhgb", None)]
    running = [item("running", "iommu", None, "iommu=pt"), item("running", "rhgb", "rhgb", None)]
    header = "grubby default entry /boot/vmlinuz-%s" % EL_K
    assert node.ensure(["iommu=pt"], ["rhgb"]) == {
        "changed": True, "bootloader": "grubby",
        "bootloader_evidence": [node.bin + "/grubby", "/boot/loader/entries/abc-%s.conf" % EL_OLD,
                                "/boot/loader/entries/abc-%s.conf" % EL_K],
        "reboot_required": True,
        "cmdline_current": "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s %s" % (EL_K, opts),
        "cmdline_next": "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M quiet $tuned_params iommu=pt",
        "args_added": ["iommu=pt"], "args_removed": ["rhgb"],
        "actions": ["--update-kernel=ALL --args=iommu=pt --remove-args=rhgb"],
        "drift": boot + running + [item("kernel_cmdline_file", "iommu", None, "iommu=pt")],
        "concerns": {"cmdline": {"status": "ok", "reason": "corrected 2 item(s)", "corrected": True, "items": boot}},
        "diff": {"before": 'args="ro crashkernel=1G-4G:192M rhgb quiet $tuned_params"\n',
                 "after": 'args="ro crashkernel=1G-4G:192M quiet $tuned_params iommu=pt"\n',
                 "before_header": header + " (before)", "after_header": header + " (after)"},
        "kernel_cmdline_file": {"action": "created", "path": "/etc/kernel/cmdline", "before": None,
                                "after": ["root=/dev/mapper/rl-root", "ro", "crashkernel=1G-4G:192M", "quiet",
                                          "iommu=pt"]},
    }


NONE_HEADER = "kernel command line (boot loader none, not managed by the collection)"
MICROVM_WHY = "nothing in this guest sets the kernel command line (no GRUB, grubby, systemd-boot or UKI): it comes " \
              "from the hypervisor"
MICROVM_TODO = "set it in the VM definition (microVM kernel args, libvirt <cmdline>, QEMU -append) and restart the VM"


def _not_driven(proc, status, reason, items):
    return {"changed": False, "bootloader": "none",
            "bootloader_evidence": ["no GRUB, grubby, systemd-boot or UKI layout"], "reboot_required": False,
            "cmdline_current": proc, "cmdline_next": None, "args_added": [], "args_removed": [], "actions": [],
            "drift": items, "concerns": {"cmdline": {"status": status, "reason": reason, "items": items}},
            "diff": {"before": "", "after": "", "before_header": NONE_HEADER + " (before)",
                     "after_header": NONE_HEADER + " (after)"},
            "kernel_cmdline_file": None}


@pytest.mark.parametrize("proc,present,absent,status,reason,items", [
    ("console=ttyS0 root=/dev/vda rw", ["iommu=pt"], [], "drift",
     "%s: %s; /proc/cmdline lacks iommu=pt" % (MICROVM_WHY, MICROVM_TODO), [item("running", "iommu", None, "iommu=pt")]),
    ("console=ttyS0 iommu=off splash", ["iommu=pt"], ["splash"], "drift",
     "%s: %s; /proc/cmdline has iommu=off instead of iommu=pt, has splash" % (MICROVM_WHY, MICROVM_TODO),
     [item("running", "iommu", "iommu=off", "iommu=pt"), item("running", "splash", "splash", None)]),
    ("console=ttyS0 iommu=pt", ["iommu=pt"], [], "not_applicable",
     "%s; /proc/cmdline already has the wanted arguments (to change them, %s)" % (MICROVM_WHY, MICROVM_TODO), []),
])
def test_microvm_whole_result(node, proc, present, absent, status, reason, items):
    make_microvm(node.root, proc=proc)
    remove_tools(node.bin, GRUB_TOOLS)
    for check in (True, False):
        assert node.ensure(present, absent, check=check) == _not_driven(proc, status, reason, items)


@pytest.mark.parametrize("items,text", [
    ([], ""),
    ([item("x", "iommu", None, "iommu=pt")], "lacks iommu=pt"),
    ([item("x", "splash", "splash", None)], "has splash"),
    ([item("x", "iommu", "iommu=on", "iommu=pt"), item("x", "quiet", "quiet", None),
      item("x", "pci", None, "pci=noaer")], "has iommu=on instead of iommu=pt, has quiet, lacks pci=noaer"),
])
def test_describe(items, text):
    assert cmdline.describe(items) == text


def test_backend_for_names_the_boot_loader_it_does_not_drive(tmp_path):
    sr = Sysroot(str(tmp_path))
    which = {"grubby": "/usr/sbin/grubby"}.get
    grub = cmdline.backend_for(Found("grub", []), sr, subprocess_run, which)
    assert isinstance(grub, cmdline.GrubDropinBackend)
    assert (grub.sysroot, grub.run, grub.bin_path) == (sr, subprocess_run, which)
    assert isinstance(cmdline.backend_for(Found("grubby", []), sr, subprocess_run, which), cmdline.GrubbyBackend)
    with pytest.raises(cmdline.CmdlineError) as e:
        cmdline.backend_for(Found("systemd-boot", []), sr, subprocess_run, which)
    assert str(e.value) == "the collection does not drive the boot loader systemd-boot"


def _plan(before, after, conflicts=()):
    return types.SimpleNamespace(before=before, after=after, conflicts=list(conflicts))


@pytest.mark.parametrize("check_mode", [True, False])
def test_status_of_when_the_next_boot_still_differs(check_mode):
    """A change that did not take (the next boot still lacks an argument): drift naming it, never ok."""
    backend = types.SimpleNamespace(notes=[])
    doc = cmdline.status_of(backend, _plan(["quiet"], ["quiet", "splash"]), ["iommu=pt"], ["splash"], check_mode)
    left = [item("bootloader", "iommu", None, "iommu=pt"), item("bootloader", "splash", "splash", None)]
    boot = [item("bootloader", "iommu", None, "iommu=pt")]
    assert doc == {"status": "drift", "reason": "the next boot's command line still lacks iommu=pt, has splash after "
                   "the change; see the items", "items": boot if check_mode else left}


@pytest.mark.parametrize("check_mode", [True, False])
def test_status_of_with_conflicts(check_mode):
    conflict = item("/etc/default/grub", "iommu", "iommu=on", "iommu=pt")
    backend = types.SimpleNamespace(notes=[(conflict, "GRUB_CMDLINE_LINUX", "conflict")])
    doc = cmdline.status_of(backend, _plan(["quiet"], ["quiet", "iommu=on"], [conflict]), ["iommu=pt"], [],
                            check_mode)
    assert doc["status"] == "drift"
    assert doc["reason"] == ("/etc/default/grub has iommu=on in GRUB_CMDLINE_LINUX, which conflicts with iommu=pt: "
                             "remove it there; then run update-grub (the collection never rewrites the admin's GRUB "
                             "files)")
    want = (item("bootloader", "iommu", None, "iommu=pt") if check_mode
            else item("bootloader", "iommu", "iommu=on", "iommu=pt"))
    assert doc["items"] == [conflict, want]


def test_status_of_nothing_to_do_is_ok():
    doc = cmdline.status_of(types.SimpleNamespace(notes=[]), _plan(["iommu=pt"], ["iommu=pt"]), ["iommu=pt"], [],
                            True)
    assert doc == {"status": "ok", "reason": None, "items": []}


def test_grub_asked_for_without_its_update_tools_needs_update_bootloader_false(node):
    make_debian(node.root, proc="quiet")
    remove_tools(node.bin, GRUB_TOOLS)
    with pytest.raises(cmdline.CmdlineError) as e:
        node.ensure(["iommu=pt"], check=True, bootloader="grub")
    assert "set update_bootloader=false" in str(e.value)
    r = node.ensure(["iommu=pt"], check=True, bootloader="grub", update_bootloader=False)
    assert (r["bootloader"], r["actions"]) == ("grub", ["write " + DROPIN])
