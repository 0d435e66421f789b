# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The additive GRUB drop-in against the grub emulator (which sources /etc/default/grub and grub.d/*.cfg with a
real /bin/sh, as grub-mkconfig does): what boots, the conflicts with the admin's arguments, migration of the old
whole-assignment drop-in, check mode, idempotence; a property test over admin and requested arguments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cmdline_nodes import ACS, GRUB_TOOLS, Node, make_debian, make_wrappers, next_boot, remove_tools, w, which_in
from gpufabric_sim.emulators import grub as grub_emu

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as c
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DROPIN = "etc/default/grub.d/99-gpufabric.cfg"
OLD_HEADER = ("# Managed by the gpufabric.node Ansible collection (gpufabric.node.kernel_cmdline).\n"
              "# The collection owns this file and rewrites it as a whole: local edits are lost.\n"
              "# It assigns the complete kernel command line computed from /etc/default/grub and the\n"
              "# other drop-ins, with the requested arguments added and conflicting ones removed.\n"
              "# Change arguments through the collection's variables, then run update-grub.\n")


@pytest.fixture
def node(tmp_path, monkeypatch):
    return Node(tmp_path, monkeypatch)


def booted(root):
    """The arguments the next boot gets after BOOT_IMAGE, root= and ro."""
    return c.split_cmdline(next_boot(root))[3:]


def conflict_view(doc):
    return sorted((i["object"], i["current"], i["desired"]) for i in doc["items"] if i["object"] not in
                  ("bootloader", "running"))


DEBIAN_CASES = [
    # name, GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT, other drop-ins, present, absent,
    # next boot's arguments, conflicts [(file, argument, desired)], reboot_required after the change
    ("iommu appended", "", "quiet splash", None, ["iommu=pt"], [], ["iommu=pt", "quiet", "splash"], [], True),
    ("admin's iommu=off stays and is reported", "", "quiet iommu=off", None, ["iommu=pt"], [],
     ["iommu=pt", "quiet", "iommu=off"], [("/etc/default/grub", "iommu=off", "iommu=pt")], False),
    ("conflict from an earlier drop-in names it", "", "quiet",
     {"50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=off"\n'}, ["iommu=pt"], [],
     ["iommu=off", "iommu=pt", "quiet"], [("/etc/default/grub.d/50-cloudimg-settings.cfg", "iommu=off", "iommu=pt")],
     False),
    ("pci: only the missing sub-option, ; survives grub", "pci=realloc", "", None, [ACS], [],
     ["pci=realloc", ACS], [], True),
    ("pci: the admin's other value is reported", "pci=realloc,disable_acs_redir=0000:00:01.0", "", None, [ACS], [],
     ["pci=realloc,disable_acs_redir=0000:00:01.0", ACS],
     [("/etc/default/grub", "pci=realloc,disable_acs_redir=0000:00:01.0", ACS)], False),
    # iommu=pt still comes with the next boot: a reboot is worth it, the admin's arguments stay reported
    ("absent arguments of the admin are reported, not removed", "nomodeset", "quiet splash", None, ["iommu=pt"],
     ["splash", "nomodeset"], ["nomodeset", "iommu=pt", "quiet", "splash"],
     [("/etc/default/grub", "nomodeset", None), ("/etc/default/grub", "splash", None)], True),
    ("cumulative console added beside the admin's", "console=tty0", "", None, ["console=ttyS0,115200n8"], [],
     ["console=tty0", "console=ttyS0,115200n8"], [], True),
    ("only what the admin lacks", "iommu=pt", "quiet", None, ["iommu=pt", "nosmt"], [],
     ["iommu=pt", "nosmt", "quiet"], [], True),
]


@pytest.mark.parametrize("name,glinux,gdefault,dropins,present,absent,expected,conflicts,reboot", DEBIAN_CASES,
                         ids=[x[0] for x in DEBIAN_CASES])
def test_dropin_against_emulator(node, name, glinux, gdefault, dropins, present, absent, expected, conflicts,
                                 reboot):
    root = node.root
    make_debian(root, grub_linux=glinux, grub_default=gdefault, dropins=dropins)
    admin = node.read("etc/default/grub")
    before = node.hash()
    r = node.ensure(present, absent, check=True)
    assert r["changed"] is True and r["bootloader"] == "grub"
    assert node.hash() == before, "check mode wrote something"
    assert r["diff"]["before"] == "" and r["diff"]["before_header"] == "/etc/default/grub.d/99-gpufabric.cfg (before)"
    assert r["diff"]["after"].startswith("# Managed by the gpufabric.node")
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }' in r["diff"]["after"]
    assert r["concerns"]["cmdline"]["status"] == "drift"
    assert conflict_view(r["concerns"]["cmdline"]) == sorted(conflicts)

    r1 = node.ensure(present, absent)
    assert r1["changed"] is True
    assert r1["cmdline_next"] == r["cmdline_next"], "check mode and apply disagree"
    assert node.read(DROPIN) == r["diff"]["after"]
    assert node.read("etc/default/grub") == admin, "the admin's file is never rewritten"
    assert r1["actions"][0] == "write /etc/default/grub.d/99-gpufabric.cfg"
    assert r1["actions"][-1].startswith("run ") and r1["actions"][-1].endswith("update-grub")
    assert booted(root) == expected, next_boot(root)
    assert c.split_cmdline(r1["cmdline_next"]) == expected
    doc = r1["concerns"]["cmdline"]
    assert conflict_view(doc) == sorted(conflicts)
    assert r1["reboot_required"] is reboot
    if conflicts:
        assert doc["status"] == "drift" and "remove it there" in doc["reason"]
        assert conflicts[0][0] in doc["reason"] and conflicts[0][1] in doc["reason"]
    else:
        assert doc["status"] == "ok" and doc["corrected"] is True
    assert all(i in r1["drift"] for i in doc["items"] if i["object"] != "bootloader")

    mid = node.hash()
    r2 = node.ensure(present, absent)
    assert r2["changed"] is False and r2["args_added"] == [] and r2["args_removed"] == [] and r2["actions"] == []
    assert node.hash() == mid
    assert conflict_view(r2["concerns"]["cmdline"]) == sorted(conflicts)
    assert (r2["concerns"]["cmdline"]["status"] == "ok") is (not conflicts)

    node.reboot_into(next_boot(root))
    r3 = node.ensure(present, absent)
    assert r3["changed"] is False and r3["reboot_required"] is False
    assert [d for d in r3["drift"] if d["object"] == "running"] == [] or conflicts


def test_admin_argument_added_later_still_boots(node):
    # the field bug: the old drop-in assigned the whole GRUB_CMDLINE_LINUX, so this was silently lost
    make_debian(node.root)
    node.ensure(["iommu=pt", ACS])
    dropin = node.read(DROPIN)
    grub = node.read("etc/default/grub").replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="mitigations=off"')
    w(node.root, "etc/default/grub", grub)
    assert os.system("update-grub 2>/dev/null") == 0
    assert booted(node.root) == ["mitigations=off", "iommu=pt", ACS, "quiet", "splash"]
    r = node.ensure(["iommu=pt", ACS])
    assert r["changed"] is False and node.read(DROPIN) == dropin
    assert r["concerns"]["cmdline"]["status"] == "ok"


def test_nothing_to_do_writes_nothing(node):
    make_debian(node.root, grub_linux="iommu=pt", proc="iommu=pt quiet splash")
    before = node.hash()
    for check in (True, False):
        r = node.ensure(["iommu=pt"], check=check)
        assert r["changed"] is False and r["reboot_required"] is False and r["drift"] == []
        assert r["concerns"]["cmdline"] == {"status": "ok", "reason": None, "items": []}
        assert r["diff"]["before"] == r["diff"]["after"] == ""
    assert node.hash() == before and not os.path.exists(os.path.join(node.root, DROPIN))


def test_two_callers_compose(node):
    make_debian(node.root)
    node.ensure(["iommu=pt"])
    r = node.ensure([ACS])
    assert r["changed"] is True
    assert c.split_cmdline(r["cmdline_next"])[:2] == ["iommu=pt", ACS]
    assert node.ensure(["iommu=pt"])["changed"] is False
    assert node.ensure([ACS])["changed"] is False


def test_absent_drops_our_own_argument(node):
    make_debian(node.root)
    node.ensure(["iommu=pt", ACS])
    r = node.ensure([], ["pci=disable_acs_redir"])
    assert r["changed"] is True and r["args_removed"] == [ACS]
    assert r["concerns"]["cmdline"]["status"] == "ok", "our own argument is ours to remove: no conflict"
    assert booted(node.root) == ["iommu=pt", "quiet", "splash"]


def test_dropin_removed_when_the_admin_carries_everything(node):
    make_debian(node.root)
    node.ensure(["iommu=pt"])
    grub = node.read("etc/default/grub").replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="iommu=pt"')
    w(node.root, "etc/default/grub", grub)
    r = node.ensure(["iommu=pt"])
    assert r["changed"] is True and r["actions"][0] == "remove /etc/default/grub.d/99-gpufabric.cfg"
    assert r["diff"]["after"] == ""
    assert not os.path.exists(os.path.join(node.root, DROPIN))
    assert booted(node.root) == ["iommu=pt", "quiet", "splash"]
    assert node.ensure(["iommu=pt"])["changed"] is False


LATER_DROPINS = [
    # name, the drop-in after ours, kind of item, its current, its desired
    ("drops ours", 'GRUB_CMDLINE_LINUX="nomodeset"\n', None, "iommu=pt", "sorts after 99-gpufabric.cfg and drops"),
    ("contradicts ours", 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=off"\n', "iommu=off", "iommu=pt",
     "which conflicts with iommu=pt"),
]


@pytest.mark.parametrize("name,text,current,desired,reason", LATER_DROPINS, ids=[x[0] for x in LATER_DROPINS])
def test_later_dropin_is_reported_not_failed(node, name, text, current, desired, reason):
    make_debian(node.root, dropins={"99-zz-local.cfg": text})
    for check in (True, False):
        r = node.ensure(["iommu=pt"], check=check)
        doc = r["concerns"]["cmdline"]
        assert doc["status"] == "drift" and reason in doc["reason"], doc
        assert ("/etc/default/grub.d/99-zz-local.cfg", current, desired) in conflict_view(doc)
        assert r["reboot_required"] is False
    assert node.read("etc/default/grub.d/99-zz-local.cfg") == text


OLD_DROPIN = OLD_HEADER + (
    "GRUB_CMDLINE_LINUX='iommu=pt '\"'\"'%s'\"'\"''\n"
    "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'\n" % ACS)


def test_old_whole_assignment_dropin_is_migrated(node):
    # written by an earlier version for iommu=pt and the ACS argument (two roles); since then the admin added
    # mitigations=off to /etc/default/grub, which that drop-in masked
    make_debian(node.root, grub_default="quiet splash mitigations=off", dropins={"99-gpufabric.cfg": OLD_DROPIN})
    assert os.system("update-grub 2>/dev/null") == 0
    assert booted(node.root) == ["iommu=pt", ACS, "quiet", "splash"], "the old format loses the admin's argument"
    before = node.hash()
    dry = node.ensure(["iommu=pt"], check=True)
    assert dry["changed"] is True and node.hash() == before
    assert dry["diff"]["before"] == OLD_DROPIN and "${GRUB_CMDLINE_LINUX:+" in dry["diff"]["after"]
    assert dry["actions"] == ["rewrite /etc/default/grub.d/99-gpufabric.cfg in the additive format "
                              "(it assigned the whole command line)"]
    r = node.ensure(["iommu=pt"])
    assert r["changed"] is True and r["args_added"] == ["mitigations=off"] and r["args_removed"] == []
    assert booted(node.root) == ["iommu=pt", ACS, "quiet", "splash", "mitigations=off"]
    assert "iommu=pt 'pci=disable_acs_redir=" in node.read(DROPIN), "the other role's argument is kept"
    again = node.ensure(["iommu=pt"])
    assert again["changed"] is False and node.ensure([ACS])["changed"] is False


def test_old_dropin_that_masked_a_conflict(node):
    # the old drop-in removed the admin's iommu=off from the effective command line; migrated, it boots again
    # and is reported for the operator to remove
    old = OLD_HEADER + "GRUB_CMDLINE_LINUX='iommu=pt'\nGRUB_CMDLINE_LINUX_DEFAULT='quiet'\n"
    make_debian(node.root, grub_default="quiet iommu=off", dropins={"99-gpufabric.cfg": old})
    r = node.ensure(["iommu=pt"])
    assert r["changed"] is True
    assert conflict_view(r["concerns"]["cmdline"]) == [("/etc/default/grub", "iommu=off", "iommu=pt")]
    assert booted(node.root) == ["iommu=pt", "quiet", "iommu=off"]


def test_grub_mkconfig_fallback(node):
    make_debian(node.root)
    os.unlink(os.path.join(node.bin, "update-grub"))
    r = node.ensure(["iommu=pt"])
    assert r["changed"] and r["actions"][-1].endswith("grub-mkconfig -o /boot/grub/grub.cfg")
    assert "iommu=pt" in node.read("boot/grub/grub.cfg")


def test_update_bootloader_false_writes_only_the_dropin(node):
    make_debian(node.root)
    r = node.ensure(["iommu=pt"], update_bootloader=False)
    assert r["changed"] and r["actions"] == ["write /etc/default/grub.d/99-gpufabric.cfg"]
    assert not os.path.exists(os.path.join(node.root, "boot/grub/grub.cfg"))


def test_explicit_grub_without_tools_fails_before_writing(node):
    make_debian(node.root)
    remove_tools(node.bin, ("update-grub", "grub-mkconfig", "grub2-mkconfig"))
    before = node.hash()
    for check in (True, False):
        with pytest.raises(c.CmdlineError, match="update-grub, grub-mkconfig and grub2-mkconfig are all missing"):
            node.ensure(["iommu=pt"], check=check, bootloader="grub")
    assert node.hash() == before


def test_broken_admin_file_is_an_error_naming_it(node):
    make_debian(node.root, dropins={"10-broken.cfg": 'GRUB_CMDLINE_LINUX="unterminated\n'})
    with pytest.raises(c.CommandError, match="10-broken.cfg"):
        node.ensure(["iommu=pt"], check=True)


def test_malformed_grub_quotes_name_the_files(node):
    make_debian(node.root, grub_linux="a'b")
    with pytest.raises(c.CmdlineError, match="GRUB_CMDLINE_LINUX as set by /etc/default/grub"):
        node.ensure(["iommu=pt"], check=True)


# --------------------------------------------------------------------------- property

ADMIN_POOL = ["quiet", "splash", "nomodeset", "nosmt", "iommu=off", "iommu=pt", "intel_iommu=on", "mitigations=off",
              "console=tty0", "console=ttyS0,115200n8", "pci=realloc", "pci=realloc,nocrs",
              "pci=disable_acs_redir=0000:00:01.0", ACS, "hugepages=16", "pci=noaer",
              "pci=disable_acs_redir=pci:15b3:1021;0000:00:02.0"]
PRESENT_POOL = ["iommu=pt", ACS, "intel_iommu=on", "console=ttyS0,115200n8", "nosmt", "pci=realloc"]
ABSENT_POOL = ["splash", "iommu.strict", "mitigations", "intel_iommu=off", "nomodeset"]
CUMULATIVE = ("console", "hugepages")


def oracle_conflict(t, present, absent):
    """Independent of the module: does the admin's argument t contradict the request?"""
    key = t.split("=", 1)[0]
    for a in absent:
        if t == a or ("=" not in a and key == a):
            return True
    for p in present:
        pkey = p.split("=", 1)[0]
        if pkey != key or key in CUMULATIVE:
            continue
        if key == "pci":
            want = dict((s.split("=", 1)[0], s) for s in p[4:].split(","))
            if any(s.split("=", 1)[0] in want and s != want[s.split("=", 1)[0]] for s in t[4:].split(",")):
                return True
        elif t != p:
            return True
    return False


def carries(words, p):
    if p.startswith("pci="):
        subs = [s for x in words if x.startswith("pci=") for s in x[4:].split(",")]
        return all(s in subs for s in p[4:].split(","))
    return p in words


def _unique(xs):
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _admin_lists():
    return st.lists(st.sampled_from(ADMIN_POOL), max_size=4)


@given(linux=_admin_lists(), default=_admin_lists(), earlier=_admin_lists(),
       present=st.lists(st.sampled_from(PRESENT_POOL), min_size=1, max_size=3, unique=True),
       absent=st.lists(st.sampled_from(ABSENT_POOL), max_size=2, unique=True))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_admin_arguments_kept_wanted_arguments_boot(linux, default, earlier, present, absent):
    try:
        present, absent = c.validate(present, absent, arch="x86_64")
    except c.CmdlineError:
        assume(False)
    tmp = tempfile.mkdtemp()
    try:
        root = os.path.join(tmp, "root")
        bindir = os.path.join(tmp, "bin")
        os.makedirs(root)
        make_wrappers(bindir, GRUB_TOOLS)

        def q(tokens):
            return c.shell_dquote_body(c.join_grub(tokens))
        make_debian(root, grub_linux=q(linux), grub_default=q(default),
                    dropins={"50-earlier.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT %s"\n'
                             % q(earlier)} if earlier else None)
        env = dict(os.environ, GPUFABRIC_SYSROOT=root, PATH=bindir + os.pathsep + os.environ["PATH"])
        old_env = dict(os.environ)
        os.environ.update(env)
        try:
            r = c.ensure(present, absent, _run, which_in(bindir), sysroot=Sysroot(root), arch="x86_64")
            r2 = c.ensure(present, absent, _run, which_in(bindir), sysroot=Sysroot(root), arch="x86_64")
        finally:
            os.environ.clear()
            os.environ.update(old_env)
        # what the next update-grub (the admin's or ours) puts on the default entry's linux line
        words = grub_emu.grub_cfg_default_args(grub_emu.generate_grub_cfg(root))[3:]
        admin = linux + default + earlier
        for t in admin:
            if not oracle_conflict(t, present, absent):
                assert t in words, (t, words)
        for p in present:
            assert carries(words, p), (p, words)
        # the admin's arguments are all still there, in their order: only ours were appended to LINUX
        ours = words[len(linux):len(words) - len(default) - len(earlier)]
        assert words == linux + ours + default + earlier
        wanted_subs = set(s for p in present if p.startswith("pci=") for s in p[4:].split(","))
        for t in ours:
            # a requested argument, or for pci= some of the requested sub-options
            assert t in present or (t.startswith("pci=") and set(t[4:].split(",")) <= wanted_subs), t
            assert t not in admin, "appended again although the admin has it: %s" % t
        reported = set(i["current"] for i in r["concerns"]["cmdline"]["items"]
                       if i["object"] not in ("bootloader", "running") and i["current"] is not None)
        assert reported == set(t for t in admin if oracle_conflict(t, present, absent))
        assert r2["changed"] is False
        assert r2["concerns"]["cmdline"]["status"] in ("ok", "drift")
        assert (r2["concerns"]["cmdline"]["status"] == "ok") is (not reported and not c.deviations(
            words, present, absent))
    finally:
        shutil.rmtree(tmp)


def _run(argv):
    from cmdline_nodes import subprocess_run
    return subprocess_run(argv)
