# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Table-driven tests of kernel command line parsing, validation, merge and comparison (cmdline_args, through the
re-exporting cmdline module) and of the grubby backend against the emulator. The GRUB drop-in:
test_cmdline_grub.py; the boot loader detection: test_cmdline_detect.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdline_nodes import ACS, Node, make_el, next_boot

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as c
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import args as cmdline_args
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

# --------------------------------------------------------------------------- parsing

SPLIT_CASES = [
    ("plain", "ro quiet splash", False, ["ro", "quiet", "splash"]),
    ("blanks", "  ro \t quiet\n", False, ["ro", "quiet"]),
    ("kernel double quotes", 'dyndbg="file x.c +p" ro', False, ["dyndbg=file x.c +p", "ro"]),
    ("kernel keeps single quotes", "a='b'", False, ["a='b'"]),
    ("value with =", "pci=disable_acs_redir=0000:00:01.0/00.0", False, ["pci=disable_acs_redir=0000:00:01.0/00.0"]),
    ("grub single quotes", "'pci=a;b' quiet", True, ["pci=a;b", "quiet"]),
    ("grub backslash", r"a\ b c", True, ["a b", "c"]),
    ("grub escaped dq", r'x="a\"b"', True, ['x=a"b']),
    ("empty", "", False, []),
]


@pytest.mark.parametrize("name,text,grub,expected", SPLIT_CASES, ids=[x[0] for x in SPLIT_CASES])
def test_split(name, text, grub, expected):
    assert c.split_cmdline(text, grub=grub) == expected


@pytest.mark.parametrize("text,grub", [('a "b', False), ("a 'b", True), ('x="y', True)])
def test_split_malformed_quotes(text, grub):
    with pytest.raises(c.CmdlineError, match="malformed quotes"):
        c.split_cmdline(text, grub=grub)


@pytest.mark.parametrize("token", ["pci=a;b", "x=it's", "quiet", "a=b c", "iommu=pt"])
def test_grub_word_roundtrip(token):
    assert c.split_cmdline(c.join_grub([token, "ro"]), grub=True) == [token, "ro"]


# --------------------------------------------------------------------------- merge

MERGE_CASES = [
    # name, current, present, absent, expected
    ("add to empty", [], ["iommu=pt"], [], ["iommu=pt"]),
    ("append keeps order", ["ro", "quiet"], ["iommu=pt"], [], ["ro", "quiet", "iommu=pt"]),
    ("iommu=off -> pt in place", ["ro", "iommu=off", "quiet"], ["iommu=pt"], [], ["ro", "iommu=pt", "quiet"]),
    ("already there", ["ro", "iommu=pt"], ["iommu=pt"], [], ["ro", "iommu=pt"]),
    ("repeated key collapsed", ["iommu=off", "ro", "iommu=nopt"], ["iommu=pt"], [], ["iommu=pt", "ro"]),
    ("repeated same value deduplicated", ["iommu=pt", "iommu=pt"], ["iommu=pt"], [], ["iommu=pt"]),
    ("flag added", ["ro"], ["nosmt"], [], ["ro", "nosmt"]),
    ("flag present", ["ro", "nosmt"], ["nosmt"], [], ["ro", "nosmt"]),
    ("flag replaces valued form", ["nosmt=force"], ["nosmt"], [], ["nosmt"]),
    ("valued replaces flag", ["quiet", "mitigations"], ["mitigations=off"], [], ["quiet", "mitigations=off"]),
    ("pci merged into realloc", ["ro", "pci=realloc"], [ACS], [],
     ["ro", "pci=realloc," + ACS[len("pci="):]]),
    ("pci sub-option replaced", ["pci=realloc,disable_acs_redir=0000:00:01.0"], [ACS], [],
     ["pci=realloc," + ACS[len("pci="):]]),
    ("pci two args consolidated", ["pci=realloc", "ro", "pci=disable_acs_redir=0000:00:01.0"], [ACS], [],
     ["pci=realloc," + ACS[len("pci="):], "ro"]),
    ("pci already satisfied in two args", ["pci=realloc", ACS], [ACS], [], ["pci=realloc", ACS]),
    ("pci added fresh", ["ro"], [ACS], [], ["ro", ACS]),
    ("absent by key", ["ro", "iommu=off", "quiet", "iommu=soft"], [], ["iommu"], ["ro", "quiet"]),
    ("absent by key=value", ["intel_iommu=on", "intel_iommu=sm_on"], [], ["intel_iommu=sm_on"], ["intel_iommu=on"]),
    ("absent key=value not matching", ["iommu=pt"], [], ["iommu=off"], ["iommu=pt"]),
    ("absent flag", ["ro", "quiet", "splash"], [], ["splash"], ["ro", "quiet"]),
    ("absent pci sub-option by key", ["pci=realloc,disable_acs_redir=0000:00:01.0"], [],
     ["pci=disable_acs_redir"], ["pci=realloc"]),
    ("absent pci last sub-option drops arg", ["ro", "pci=disable_acs_redir=0000:00:01.0"], [],
     ["pci=disable_acs_redir"], ["ro"]),
    ("absent whole pci", ["pci=realloc,nocrs", "ro"], [], ["pci"], ["ro"]),
    ("console cumulative", ["console=tty0"], ["console=ttyS0,115200n8"], [], ["console=tty0", "console=ttyS0,115200n8"]),
    ("console already there", ["console=tty0", "console=ttyS0"], ["console=ttyS0"], [], ["console=tty0", "console=ttyS0"]),
    ("present and absent different keys", ["iommu=off", "intel_iommu=off"], ["iommu=pt", "intel_iommu=on"],
     ["amd_iommu"], ["iommu=pt", "intel_iommu=on"]),
    ("dotted module param", ["ro"], ["iommu.passthrough=1"], [], ["ro", "iommu.passthrough=1"]),
    ("dotted key is not a sub-option of iommu", ["iommu=off", "iommu.passthrough=0"], ["iommu=pt"],
     ["iommu.passthrough=0"], ["iommu=pt"]),
]


@pytest.mark.parametrize("name,current,present,absent,expected", MERGE_CASES, ids=[x[0] for x in MERGE_CASES])
def test_merge(name, current, present, absent, expected):
    present, absent = c.validate(present, absent, arch="x86_64")
    got = c.merge(current, present, absent)
    assert got == expected
    # idempotence: merging the result again changes nothing and reports no deviation
    assert c.merge(got, present, absent) == got
    assert c.deviations(got, present, absent) == []
    # deviations are reported exactly when the merge changes something
    assert bool(c.deviations(current, present, absent)) == (got != current)


def test_token_diff():
    assert c.token_diff(["ro", "iommu=off", "quiet"], ["ro", "iommu=pt", "quiet"]) == (["iommu=pt"], ["iommu=off"])


# --------------------------------------------------------------------------- validation

ERROR_CASES = [
    ("empty", [""], [], "empty kernel argument"),
    ("blank", ["   "], [], "empty kernel argument"),
    ("empty absent", [], [""], "empty kernel argument"),
    ("whitespace inside", ["iommu=pt quiet"], [], "whitespace"),
    ("quoted whitespace", ['dyndbg="a b"'], [], "whitespace"),
    ("iommu=on is not x86", ["iommu=on"], [], "iommu= accepts"),
    ("iommu empty", ["iommu="], [], "iommu= accepts"),
    ("iommu flag", ["iommu"], [], "iommu= accepts"),
    ("iommu list with bad item", ["iommu=pt,bogus"], [], "bogus"),
    ("both present and absent", ["iommu=pt"], ["iommu"], "both in present"),
    ("both present and absent exact", ["nosmt"], ["nosmt"], "both in present"),
    ("pci sub-option both", [ACS], ["pci=disable_acs_redir"], "both in present"),
    ("whole pci absent vs sub-option", [ACS], ["pci"], "both in present"),
    ("malformed quotes", ['dyndbg="+p'], [], "malformed quotes"),
    ("single quote", ["x='y'"], [], "single quote"),
    ("no key", ["=pt"], [], "no parameter name"),
    ("acs bdf without function", ["pci=disable_acs_redir=0000:16:01"], [], "neither a path"),
    ("acs comma separated", ["pci=disable_acs_redir=0000:16:01.0,0000:16:02.0"], [], "separate disable_acs_redir devices with"),
    ("acs bad id", ["pci=disable_acs_redir=pci:15b3"], [], "neither a path"),
    ("acs empty", ["pci=disable_acs_redir="], [], "at least one device"),
    ("pci empty sub-option", ["pci=realloc,,nocrs"], [], "without empty items"),
    ("conflicting present values", ["iommu=pt", "iommu=off"], [], "given twice"),
    ("bool param", ["iommu.passthrough=yes"], [], "boolean"),
    ("NUL", ["iommu=pt\x00"], [], "control character"),
    ("NUL in absent", [], ["quiet\x00splash"], "control character"),
    ("escape", ["\x1b[31m"], [], "control character"),
    ("DEL", ["nosmt\x7f"], [], "control character"),
    ("newline", ["iommu=pt\nquiet"], [], "whitespace"),
    ("acs device with trailing newline", ["pci=disable_acs_redir=0000:16:01.0\n"], [], "whitespace"),
]


@pytest.mark.parametrize("name,present,absent,match", ERROR_CASES, ids=[x[0] for x in ERROR_CASES])
def test_validation_errors(name, present, absent, match):
    with pytest.raises(c.CmdlineError, match=match):
        c.validate(present, absent, arch="x86_64")


@pytest.mark.parametrize("present", [
    ["iommu=pt"], ["iommu=pt,nomerge"], ["iommu=off"], [ACS], ["pci=disable_acs_redir=pci:15b3:1021"],
    ["pci=disable_acs_redir=pci:10de:2335:10de:16c1;16:01.0"], ["pci=realloc,hpmemsize=256M"],
    ['dyndbg="+p"'], ["console=tty0", "console=ttyS0"], ["iommu.passthrough=1"],
])
def test_validation_accepts(present):
    c.validate(present, [], arch="x86_64")


def test_iommu_not_checked_on_arm64():
    c.validate(["iommu.passthrough=1", "iommu=on"], [], arch="aarch64")


def test_validate_strips_kernel_quotes():
    assert c.validate(['dyndbg="+p"'], [])[0] == ["dyndbg=+p"]


@pytest.mark.parametrize("dev", ["0000:16:01.0\n", "16:01.0\n", "pci:15b3:1021\n"])
def test_pci_device_patterns_match_whole_strings(dev):
    # a bare $ would accept a trailing newline; the device list is matched as a whole
    with pytest.raises(c.CmdlineError, match="neither a path"):
        c.validate_pci_dev_list(dev, "present")


# --------------------------------------------------------------------------- comparing with an admin's arguments

CONFLICT_CASES = [
    # name, tokens, present, absent, expected [(argument, key, desired)]
    ("none", ["quiet", "iommu=pt"], ["iommu=pt"], [], []),
    ("other value", ["quiet", "iommu=off"], ["iommu=pt"], [], [("iommu=off", "iommu", "iommu=pt")]),
    ("flag against value", ["nosmt"], ["nosmt=force"], [], [("nosmt", "nosmt", "nosmt=force")]),
    ("absent flag", ["quiet", "splash"], ["iommu=pt"], ["splash"], [("splash", "splash", None)]),
    ("absent by key", ["intel_iommu=strict"], [], ["intel_iommu"], [("intel_iommu=strict", "intel_iommu", None)]),
    ("absent key=value not matching", ["intel_iommu=on"], [], ["intel_iommu=strict"], []),
    ("cumulative never conflicts", ["console=tty0"], ["console=ttyS0,115200n8"], [], []),
    ("pci other sub-options are fine", ["pci=realloc,nocrs"], [ACS], [], []),
    ("pci same sub-option other value", ["pci=realloc,disable_acs_redir=0000:00:01.0"], [ACS], [],
     [("pci=realloc,disable_acs_redir=0000:00:01.0", "pci", ACS)]),
    ("pci same sub-option same value", ["pci=realloc", ACS], [ACS], [], []),
    ("absent pci sub-option", ["pci=realloc,disable_acs_redir=0000:00:01.0"], [], ["pci=disable_acs_redir"],
     [("pci=realloc,disable_acs_redir=0000:00:01.0", "pci", None)]),
    ("absent pci sub-option not there", ["pci=realloc"], [], ["pci=disable_acs_redir"], []),
    ("dotted key is its own", ["iommu.passthrough=0"], ["iommu=pt"], [], []),
    ("repeated conflict named once", ["iommu=off", "iommu=off"], ["iommu=pt"], [], [("iommu=off", "iommu", "iommu=pt")]),
]


@pytest.mark.parametrize("name,tokens,present,absent,expected", CONFLICT_CASES, ids=[x[0] for x in CONFLICT_CASES])
def test_conflicts(name, tokens, present, absent, expected):
    present, absent = c.validate(present, absent, arch="x86_64")
    assert c.conflicts(tokens, present, absent) == expected


MISSING_CASES = [
    # name, have, wanted, expected
    ("nothing there", ["quiet"], ["iommu=pt"], ["iommu=pt"]),
    ("already there", ["iommu=pt", "quiet"], ["iommu=pt"], []),
    ("other value is not the wanted one", ["iommu=off"], ["iommu=pt"], ["iommu=pt"]),
    ("pci adds only missing sub-options", ["pci=realloc"], ["pci=realloc,nocrs"], ["pci=nocrs"]),
    ("pci split over two args", ["pci=realloc", "pci=nocrs"], ["pci=realloc,nocrs"], []),
    ("pci sub-option with other value", ["pci=disable_acs_redir=0000:00:01.0"], [ACS], [ACS]),
    ("cumulative exact", ["console=tty0"], ["console=ttyS0", "console=tty0"], ["console=ttyS0"]),
    ("no repeats", [], ["nosmt", "nosmt"], ["nosmt"]),
]


@pytest.mark.parametrize("name,have,wanted,expected", MISSING_CASES, ids=[x[0] for x in MISSING_CASES])
def test_missing_args(name, have, wanted, expected):
    got = c.missing_args(have, wanted)
    assert got == expected
    assert all(c.has_arg(have + got, t) for t in wanted)
    assert c.missing_args(have + got, wanted) == []


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40))
@settings(max_examples=60, deadline=None)
def test_shell_dquote_body_roundtrip(value):
    out = subprocess.run(["/bin/sh", "-c", 'printf %s "' + c.shell_dquote_body(value) + '"'],
                         stdout=subprocess.PIPE, check=True).stdout.decode("utf-8", "surrogateescape")
    assert out == value


def test_cmdline_reexports_the_stages():
    # the split by stage keeps the import names of the single module it was
    for name in ("split_cmdline", "validate", "merge", "deviations", "token_diff", "GrubDropinBackend",
                 "GrubbyBackend", "parse_grubby_info", "GRUB_DROPIN", "detect", "ensure", "CmdlineError"):
        assert hasattr(c, name), name
    assert c.merge is cmdline_args.merge


# --------------------------------------------------------------------------- os-release, reboot

@pytest.mark.parametrize("text,family", [
    ('ID=ubuntu\nID_LIKE=debian\n', "debian"),
    ('ID=debian\n', "debian"),
    ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "el"),
    ('ID="almalinux"\nID_LIKE="rhel centos fedora"\n', "el"),
    ('ID=fedora\n', "el"),
    ('ID=arch\n', None),
])
def test_os_family(tmp_path, text, family):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text(text)
    assert c.os_family(c.read_os_release(Sysroot(str(tmp_path)))) == family


@pytest.mark.parametrize("proc,present,absent,expected", [
    ("BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro iommu=pt", ["iommu=pt"], [], False),
    ("BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro iommu=off", ["iommu=pt"], [], True),
    ("BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro", ["iommu=pt"], [], True),
    ("ro quiet iommu=pt", ["iommu=pt"], ["quiet"], True),
    ("ro pci=realloc," + ACS[4:], [ACS], [], False),
])
def test_reboot_required(proc, present, absent, expected):
    assert c.reboot_required(c.split_cmdline(proc), present, absent) is expected


@pytest.mark.parametrize("proc,nxt,present,absent,expected", [
    ("ro iommu=off", "ro iommu=pt", ["iommu=pt"], [], True),
    ("ro iommu=pt", "ro iommu=pt", ["iommu=pt"], [], False),
    # an admin's iommu=off stays in the next boot: rebooting changes nothing the request is about
    ("ro iommu=off", "ro iommu=off iommu=pt", ["iommu=pt"], [], False),
    ("ro iommu=off iommu=pt", "ro iommu=off iommu=pt", ["iommu=pt"], [], False),
    # one of two fixed by the next boot is enough
    ("ro iommu=off", "ro iommu=off iommu=pt " + ACS, ["iommu=pt", ACS], [], True),
    ("ro splash", "ro", [], ["splash"], True),
    ("ro splash", "ro splash", [], ["splash"], False),
])
def test_reboot_required_against_next_boot(proc, nxt, present, absent, expected):
    got = c.reboot_required(c.split_cmdline(proc), present, absent, c.split_cmdline(nxt))
    assert got is expected


# --------------------------------------------------------------------------- grubby against the emulator

@pytest.fixture
def node(tmp_path, monkeypatch):
    return Node(tmp_path, monkeypatch)


EL_CASES = [
    ("iommu added", "root=/dev/mapper/rl-root ro rhgb quiet", ["iommu=pt"], [],
     ["ro", "rhgb", "quiet", "iommu=pt"]),
    ("iommu=off replaced", "root=/dev/mapper/rl-root ro iommu=off rhgb quiet", ["iommu=pt"], [],
     ["ro", "rhgb", "quiet", "iommu=pt"]),
    ("repeated iommu converges", "root=/dev/mapper/rl-root ro iommu=off iommu=soft quiet", ["iommu=pt"], [],
     ["ro", "quiet", "iommu=pt"]),
    ("pci merged", "root=/dev/mapper/rl-root ro pci=realloc quiet", [ACS], ["quiet"],
     ["ro", "pci=realloc," + ACS[4:]]),
]


@pytest.mark.parametrize("name,options,present,absent,expected", EL_CASES, ids=[x[0] for x in EL_CASES])
def test_el_grubby_against_emulator(node, name, options, present, absent, expected):
    root = node.root
    make_el(root, options=options)
    before = node.hash()
    r = node.ensure(present, absent, check=True)
    assert r["changed"] is True and r["bootloader"] == "grubby"
    assert node.hash() == before, "check mode wrote something"
    assert r["diff"]["before"].startswith('args="') and r["diff"]["before"] != r["diff"]["after"]
    assert r["concerns"]["cmdline"]["status"] == "drift"
    assert [i["object"] for i in r["concerns"]["cmdline"]["items"]] == ["bootloader"] * len(r["concerns"]["cmdline"]["items"])

    r1 = node.ensure(present, absent)
    assert r1["changed"] is True and r1["reboot_required"] is True
    assert r1["concerns"]["cmdline"]["status"] == "ok" and r1["concerns"]["cmdline"]["corrected"] is True
    assert any(a.startswith("--update-kernel=ALL") for a in r1["actions"])
    nb = next_boot(root)
    assert set(c.split_cmdline(nb)[2:]) == set(expected), nb
    for conf in os.listdir(os.path.join(root, "boot/loader/entries")):
        text = open(os.path.join(root, "boot/loader/entries", conf)).read()
        options = [ln for ln in text.splitlines() if ln.startswith("options ")][0]
        assert c.deviations(options.split()[1:], present, absent) == [], options

    mid = node.hash()
    r2 = node.ensure(present, absent)
    assert r2["changed"] is False and node.hash() == mid
    assert r2["concerns"]["cmdline"] == {"status": "ok", "reason": None, "items": []}
    node.reboot_into(nb)
    assert node.ensure(present, absent)["reboot_required"] is False


def test_el_entries_differ_updates_per_kernel(node):
    root = node.root
    make_el(root)
    # the older entry already has the argument: only the newer one is updated
    old = [n for n in os.listdir(os.path.join(root, "boot/loader/entries")) if "362" in n][0]
    p = os.path.join(root, "boot/loader/entries", old)
    text = open(p).read().replace("rhgb quiet", "rhgb quiet iommu=pt")
    open(p, "w").write(text)
    r = node.ensure(["iommu=pt"])
    assert r["changed"] and r["actions"] == ["--update-kernel=/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64 --args=iommu=pt"]
    assert node.ensure(["iommu=pt"])["changed"] is False


def test_el_missing_grubby_fails(node):
    # BLS entries of GRUB 2: a boot loader the collection drives once grubby is installed
    make_el(node.root)
    os.unlink(os.path.join(node.bin, "grubby"))
    before = node.hash()
    with pytest.raises(c.CmdlineError, match="grubby was not found"):
        node.ensure(["iommu=pt"])
    assert node.hash() == before


NEW_EL = "5.14.0-503.11.1.el9_5.x86_64"


@pytest.mark.parametrize("kernel_cmdline", [
    "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb quiet\n",
    None,  # missing: created from the default entry
])
def test_el_kernel_cmdline_kept_in_step(node, kernel_cmdline):
    """/etc/kernel/cmdline follows the entries, so a kernel installed later (kernel-install) boots with the args."""
    from gpufabric_sim.emulators import pkg
    root = node.root
    make_el(root)
    w = os.path.join(root, "etc/kernel/cmdline")
    if kernel_cmdline is not None:
        os.makedirs(os.path.dirname(w))
        with open(w, "w") as f:
            f.write(kernel_cmdline)
    before = node.hash()
    r = node.ensure(["iommu=pt"], ["quiet"], check=True)
    assert r["changed"] and r["kernel_cmdline_file"]["action"] == "would change" and node.hash() == before
    assert "iommu=pt" in r["kernel_cmdline_file"]["after"] and "quiet" not in r["kernel_cmdline_file"]["after"]
    r = node.ensure(["iommu=pt"], ["quiet"])
    assert r["kernel_cmdline_file"]["action"] == ("written" if kernel_cmdline else "created")
    assert open(w).read() == "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb iommu=pt\n"
    mid = node.hash()
    r2 = node.ensure(["iommu=pt"], ["quiet"])
    assert r2["changed"] is False and r2["kernel_cmdline_file"]["action"] == "unchanged" and node.hash() == mid
    pkg.kernel_install(root, NEW_EL, machine_id="abc")
    entry = open(os.path.join(root, "boot/loader/entries/abc-%s.conf" % NEW_EL)).read()
    assert "options root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb iommu=pt $tuned_params" in entry
    # the new entry is in step: nothing to do
    assert node.ensure(["iommu=pt"], ["quiet"])["changed"] is False


def test_el_kernel_cmdline_drift_alone(node):
    """Entries in step but /etc/kernel/cmdline lacking the argument: drift, corrected by a real run."""
    root = node.root
    make_el(root, options="root=/dev/mapper/rl-root ro iommu=pt")
    os.makedirs(os.path.join(root, "etc/kernel"))
    with open(os.path.join(root, "etc/kernel/cmdline"), "w") as f:
        f.write("root=/dev/mapper/rl-root ro\n")
    r = node.ensure(["iommu=pt"], check=True)
    assert r["changed"] is True and r["actions"] == []
    assert [i["object"] for i in r["drift"] if i["key"] == "iommu"] == ["kernel_cmdline_file"]
    r = node.ensure(["iommu=pt"])
    assert r["changed"] is True and open(os.path.join(root, "etc/kernel/cmdline")).read() == \
        "root=/dev/mapper/rl-root ro iommu=pt\n"
