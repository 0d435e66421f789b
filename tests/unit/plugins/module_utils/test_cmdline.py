# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Table-driven tests of kernel command line parsing, validation, merge and the two backends."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import cmdline as c
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LAB = os.path.join(REPO, "tests", "lab")
ACS = "pci=disable_acs_redir=0000:16:01.0/00.0;0000:16:01.0/01.0"

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


def test_strip_conflicts_secondary_list():
    got = c.strip_conflicts(["quiet", "iommu=off", "pci=realloc,disable_acs_redir=1:00.0", "splash"],
                            ["iommu=pt", ACS], ["splash"])
    assert got == ["quiet", "pci=realloc"]


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


# --------------------------------------------------------------------------- backends against the emulator

def _subprocess_run(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    out, err = p.communicate()
    return p.returncode, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape")


def make_wrappers(bindir, tools=("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")):
    os.makedirs(bindir)
    for tool in tools:
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nPYTHONPATH=%s exec %s -c 'import sys; from gpufabric_sim.emulators import grub; "
                    "sys.exit(grub.main([\"%s\"] + sys.argv[1:]))' \"$@\"\n" % (LAB, sys.executable, tool))
        os.chmod(path, 0o755)


def make_debian(root, grub_linux="", grub_default="quiet splash", proc="ro quiet splash", dropins=None):
    def w(rel, text):
        p = os.path.join(root, rel)
        if not os.path.isdir(os.path.dirname(p)):
            os.makedirs(os.path.dirname(p))
        with open(p, "w") as f:
            f.write(text)
    w("etc/os-release", 'PRETTY_NAME="Ubuntu 24.04 LTS"\nNAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n')
    w("etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="%s"\nGRUB_CMDLINE_LINUX="%s"\n'
      % (grub_default, grub_linux))
    for name, text in (dropins or {}).items():
        w("etc/default/grub.d/" + name, text)
    if not dropins:
        os.makedirs(os.path.join(root, "etc/default/grub.d"))
    w("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=3f1a ro %s\n" % proc)
    w("proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    w("boot/vmlinuz-6.8.0-45-generic", "")


def make_el(root, options="root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb quiet", proc=None,
            kvers=("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.8.1.el9_3.x86_64")):
    def w(rel, text):
        p = os.path.join(root, rel)
        if not os.path.isdir(os.path.dirname(p)):
            os.makedirs(os.path.dirname(p))
        with open(p, "w") as f:
            f.write(text)
    w("etc/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')
    for k in kvers:
        w("boot/loader/entries/abc-%s.conf" % k,
          "title Rocky Linux (%s) 9.4 (Blue Onyx)\nversion %s\nlinux /vmlinuz-%s\n"
          "initrd /initramfs-%s.img $tuned_initrd\noptions %s $tuned_params\ngrub_class rocky\n"
          % (k, k, k, k, options))
    w("proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s %s\n" % (kvers[0], proc if proc is not None else options))
    w("proc/sys/kernel/osrelease", kvers[0] + "\n")


def tree_hash(root):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            h.update(p.encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    bindir = str(tmp_path / "bin")
    os.makedirs(root)
    make_wrappers(bindir)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ["PATH"])

    def which(name):
        for d in os.environ["PATH"].split(os.pathsep):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        return None
    return {"root": root, "bin": bindir, "which": which}


def _ensure(node, present, absent=(), check=False, **kw):
    return c.ensure(list(present), list(absent), _subprocess_run, node["which"], check_mode=check,
                    sysroot=Sysroot(node["root"]), arch="x86_64", **kw)


def _next_boot(root):
    sys.path.insert(0, LAB)
    from gpufabric_sim.emulators import grub
    return grub.next_boot_cmdline(root)


DEBIAN_CASES = [
    # name, grub_linux, grub_default, dropins, present, absent, expected next-boot args (after root/ro)
    ("iommu added", "", "quiet splash", None, ["iommu=pt"], [], ["iommu=pt", "quiet", "splash"]),
    ("iommu=off in DEFAULT replaced", "", "quiet iommu=off", None, ["iommu=pt"], [], ["iommu=pt", "quiet"]),
    ("conflict from another drop-in", "", "quiet", {"50-cloudimg.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=off"\n'},
     ["iommu=pt"], [], ["iommu=pt", "quiet"]),
    ("pci merged, ; survives grub", "pci=realloc", "", None, [ACS], [], ["pci=realloc," + ACS[4:]]),
    ("absent flag removed", "nomodeset", "quiet splash", None, ["iommu=pt"], ["splash", "nomodeset"], ["iommu=pt", "quiet"]),
]


@pytest.mark.parametrize("name,glinux,gdefault,dropins,present,absent,expected", DEBIAN_CASES,
                         ids=[x[0] for x in DEBIAN_CASES])
def test_debian_dropin_against_emulator(node, name, glinux, gdefault, dropins, present, absent, expected):
    root = node["root"]
    make_debian(root, grub_linux=glinux, grub_default=gdefault, dropins=dropins)
    before = tree_hash(root)
    r = _ensure(node, present, absent, check=True)
    assert r["changed"] is True and r["bootloader"] == "grub"
    assert tree_hash(root) == before, "check mode wrote something"
    assert r["diff"]["before"] != r["diff"]["after"]
    assert "GRUB_CMDLINE_LINUX=" in r["diff"]["after"]

    r1 = _ensure(node, present, absent)
    assert r1["changed"] is True
    assert r1["reboot_required"] is True
    assert r1["cmdline_next"] == r["cmdline_next"], "check mode and apply disagree"
    dropin = open(os.path.join(root, "etc/default/grub.d/99-gpufabric.cfg")).read()
    assert dropin.startswith("# Managed by the gpufabric.node")
    nb = _next_boot(root)
    assert c.split_cmdline(nb)[3:] == expected, nb
    assert c.split_cmdline(r1["cmdline_next"]) == expected

    mid = tree_hash(root)
    r2 = _ensure(node, present, absent)
    assert r2["changed"] is False and r2["args_added"] == [] and r2["args_removed"] == []
    assert tree_hash(root) == mid
    assert [d for d in r2["drift"] if d["object"] == "bootloader"] == []

    # simulated reboot: the running kernel now has the args
    with open(os.path.join(root, "proc/cmdline"), "w") as f:
        f.write(nb + "\n")
    r3 = _ensure(node, present, absent)
    assert r3["changed"] is False and r3["reboot_required"] is False and r3["drift"] == []


def test_debian_nothing_to_do_writes_nothing(node):
    make_debian(node["root"], grub_linux="iommu=pt", proc="iommu=pt quiet splash")
    before = tree_hash(node["root"])
    r = _ensure(node, ["iommu=pt"])
    assert r["changed"] is False and r["reboot_required"] is False and r["drift"] == []
    assert tree_hash(node["root"]) == before


def test_debian_two_callers_compose(node):
    make_debian(node["root"])
    _ensure(node, ["iommu=pt"])
    r = _ensure(node, [ACS])
    assert r["changed"] is True
    assert c.split_cmdline(r["cmdline_next"])[:2] == ["iommu=pt", ACS]
    assert _ensure(node, ["iommu=pt"])["changed"] is False


def test_debian_dropin_removed_when_base_has_it(node):
    make_debian(node["root"])
    _ensure(node, ["iommu=pt"])
    dropin = os.path.join(node["root"], "etc/default/grub.d/99-gpufabric.cfg")
    assert os.path.exists(dropin)
    r = _ensure(node, [], ["iommu"])
    assert r["changed"] is True and r["args_removed"] == ["iommu=pt"]
    assert not os.path.exists(dropin)


def test_debian_later_dropin_overriding_fails(node):
    make_debian(node["root"], dropins={"99-zz-local.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=off"\n'})
    before = tree_hash(node["root"])
    with pytest.raises(c.CmdlineError, match="99-zz-local.cfg sort after"):
        _ensure(node, ["iommu=pt"])
    assert tree_hash(node["root"]) == before


def test_debian_grub_mkconfig_fallback(node):
    make_debian(node["root"])
    os.unlink(os.path.join(node["bin"], "update-grub"))
    r = _ensure(node, ["iommu=pt"])
    assert r["changed"]
    assert "iommu=pt" in open(os.path.join(node["root"], "boot/grub/grub.cfg")).read()


def test_debian_no_grub_tool_fails_before_writing(node):
    make_debian(node["root"])
    for t in ("update-grub", "grub-mkconfig", "grub2-mkconfig"):
        os.unlink(os.path.join(node["bin"], t))
    before = tree_hash(node["root"])
    with pytest.raises(c.CmdlineError, match="update-grub"):
        _ensure(node, ["iommu=pt"])
    assert tree_hash(node["root"]) == before


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
    root = node["root"]
    make_el(root, options=options)
    before = tree_hash(root)
    r = _ensure(node, present, absent, check=True)
    assert r["changed"] is True and r["bootloader"] == "grubby"
    assert tree_hash(root) == before, "check mode wrote something"
    assert r["diff"]["before"].startswith('args="') and r["diff"]["before"] != r["diff"]["after"]

    r1 = _ensure(node, present, absent)
    assert r1["changed"] is True and r1["reboot_required"] is True
    assert any(a.startswith("--update-kernel=ALL") for a in r1["actions"])
    nb = _next_boot(root)
    assert set(c.split_cmdline(nb)[2:]) == set(expected), nb
    for conf in os.listdir(os.path.join(root, "boot/loader/entries")):
        text = open(os.path.join(root, "boot/loader/entries", conf)).read()
        options = [ln for ln in text.splitlines() if ln.startswith("options ")][0]
        assert c.deviations(options.split()[1:], present, absent) == [], options

    mid = tree_hash(root)
    r2 = _ensure(node, present, absent)
    assert r2["changed"] is False and tree_hash(root) == mid
    with open(os.path.join(root, "proc/cmdline"), "w") as f:
        f.write(nb + "\n")
    assert _ensure(node, present, absent)["reboot_required"] is False


def test_el_entries_differ_updates_per_kernel(node):
    root = node["root"]
    make_el(root)
    # the older entry already has the argument: only the newer one is updated
    old = [n for n in os.listdir(os.path.join(root, "boot/loader/entries")) if "362" in n][0]
    p = os.path.join(root, "boot/loader/entries", old)
    text = open(p).read().replace("rhgb quiet", "rhgb quiet iommu=pt")
    open(p, "w").write(text)
    r = _ensure(node, ["iommu=pt"])
    assert r["changed"] and r["actions"] == ["--update-kernel=/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64 --args=iommu=pt"]
    assert _ensure(node, ["iommu=pt"])["changed"] is False


def test_el_missing_grubby_fails(node):
    make_el(node["root"])
    os.unlink(os.path.join(node["bin"], "grubby"))
    with pytest.raises(c.CmdlineError, match="grubby was not found"):
        _ensure(node, ["iommu=pt"])


def test_unknown_distribution_without_tools_fails(node):
    make_debian(node["root"])
    with open(os.path.join(node["root"], "etc/os-release"), "w") as f:
        f.write("ID=plan9\n")
    for t in os.listdir(node["bin"]):
        os.unlink(os.path.join(node["bin"], t))
    with pytest.raises(c.CmdlineError, match="cannot tell the bootloader"):
        _ensure(node, ["iommu=pt"])
