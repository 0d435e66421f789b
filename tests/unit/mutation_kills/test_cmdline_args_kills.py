# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cmdline_args: what its own tests left unseen (make mutation's survivors): splitting at the ends of the text,
every refusal's message word for word, absent and present applied one after another (a handled argument followed
by one still to do), the pci= sub-option merge in place, deviations and conflicts as whole lists, the helpers the
backends share (_check, shell_quote, format_kernel_arg, CommandError, Plan) and the os-release and /proc readers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import args as cmdline_args
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ACS1 = "disable_acs_redir=0000:16:01.0"
ACS2 = "disable_acs_redir=0000:16:02.0"
IOMMU_HINT = ("iommu= accepts on x86 a comma-separated list of "
              "off|force|noforce|biomerge|panic|nopanic|merge|nomerge|soft|pt|nopt; got %s. For passthrough use "
              "iommu=pt (x86) or iommu.passthrough=1 (arm64); to turn the Intel IOMMU on use intel_iommu=on")
NEITHER = ("disable_acs_redir device %s is neither a path ([<domain>:]<bus>:<dev>.<fn>[/<dev>.<fn>]...) nor an id "
           "(pci:<vendor>:<device>); separate devices with ';' (a ',' ends the pci= sub-option)")


# ------------------------------------------------------------------------------------------------ parsing

@pytest.mark.parametrize("text,grub,tokens", [
    ("a='b c'", False, ["a='b", "c'"]),
    ("a='b c'", True, ["a=b c"]),
    ("aXb", False, ["aXb"]),
    ('a "" b', False, ["a", "", "b"]),
    ("\\  x", True, [" ", "x"]),
    ("a\\b", True, ["ab"]),
    ("a\\", True, ["a\\"]),
    ('"a\\Xb"', True, ["a\\Xb"]),
    ('"a\\$b\\\\"', True, ["a$b\\"]),
])
def test_split_at_the_ends(text, grub, tokens):
    assert cmdline_args.split_cmdline(text, grub=grub) == tokens


def test_split_default_is_kernel_rules():
    assert cmdline_args.split_cmdline("x='a b' ro") == ["x='a", "b'", "ro"]


@pytest.mark.parametrize("text,grub,message", [
    ('a "b', False, 'malformed quotes in command line \'a "b\': " quote not closed'),
    ('x="a\\', True, 'malformed quotes in command line \'x="a\\\\\': " quote not closed'),
    ('"a\\"', True, 'malformed quotes in command line \'"a\\\\"\': " quote not closed'),
    ("x='a", True, "malformed quotes in command line \"x='a\": ' quote not closed"),
])
def test_split_malformed_message(text, grub, message):
    with pytest.raises(cmdline_args.CmdlineError) as e:
        cmdline_args.split_cmdline(text, grub=grub)
    assert str(e.value) == message


@pytest.mark.parametrize("value,subs", [(None, []), ("", []), ("a,,b,", ["a", "b"]), ("realloc", ["realloc"])])
def test_split_suboptions(value, subs):
    assert cmdline_args.split_suboptions(value) == subs


@pytest.mark.parametrize("token,word", [
    ("quiet", "quiet"),
    ("dyndbg=file x.c +p", 'dyndbg="file x.c +p"'),
    ("k=a=b c", 'k="a=b c"'),
    ("a b", '"a b"'),
    ("a\tb", '"a\tb"'),
])
def test_format_kernel_arg(token, word):
    assert cmdline_args.format_kernel_arg(token) == word


@pytest.mark.parametrize("value,quoted", [("it's", "'it'\"'\"'s'"), ("plain", "'plain'"), ("", "''")])
def test_shell_quote(value, quoted):
    assert cmdline_args.shell_quote(value) == quoted


# ------------------------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("present,absent,message", [
    ([""], [], "present: empty kernel argument; remove the empty list item"),
    ([], [" "], "absent: empty kernel argument; remove the empty list item"),
    (["a\x00"], [], "present: 'a\\x00' contains a control character; give printable kernel arguments only"),
    (["x='y'"], [], "present: \"x='y'\" contains a single quote; the kernel does not understand single quotes"),
    (['dyndbg="+p'], [], "present: 'dyndbg=\"+p' has malformed quotes (a double quote is not closed)"),
    (['x="a" b'], [], "present: 'x=\"a\" b' contains whitespace; give one kernel argument per list item"),
    (['dyndbg="a b"'], [], "present: 'dyndbg=a b' contains whitespace; give one kernel argument per list item"),
    (["a b"], [], "present: 'a b' contains whitespace; give one kernel argument per list item"),
    (["=pt"], [], "present: '=pt' has no parameter name before '='"),
    ([], ["=pt"], "absent: '=pt' has no parameter name before '='"),
    ([], ["iommu="], "absent: 'iommu=' ends with '='; give the key alone to remove it with any value"),
    (["iommu=on"], [], "present: 'iommu=on': " + IOMMU_HINT % "'on'"),
    (["iommu"], [], "present: 'iommu': " + IOMMU_HINT % "''"),
    (["iommu="], [], "present: 'iommu=': " + IOMMU_HINT % "''"),
    (["iommu=pt,bogus"], [], "present: 'iommu=pt,bogus': " + IOMMU_HINT % "'pt,bogus'"),
    (["iommu.strict=2"], [], "present: 'iommu.strict=2': iommu.strict takes a boolean (0 or 1); got '2'"),
    (["pci"], [], "present: 'pci': pci= needs comma-separated sub-options without empty items"),
    (["pci=realloc,"], [], "present: 'pci=realloc,': pci= needs comma-separated sub-options without empty items"),
    (["pci=0000:16:01.0"], [], "present: 'pci=0000:16:01.0': '0000:16:01.0' is a device, not a pci= sub-option; "
     "the kernel splits pci= on ',' so separate disable_acs_redir devices with ';'"),
    (["pci=disable_acs_redir=0000:16:01"], [],
     "present: 'pci=disable_acs_redir=0000:16:01': " + NEITHER % "'0000:16:01'"),
    (["pci=disable_acs_redir="], [], "present: 'pci=disable_acs_redir=': disable_acs_redir= needs at least one device"),
    ([], ["pci=realloc,,nocrs"], "absent: 'pci=realloc,,nocrs' has an empty pci= sub-option"),
    ([], ["pci=realloc,"], "absent: 'pci=realloc,' has an empty pci= sub-option"),
    (["console=tty0", "iommu=pt", "iommu=off"], [],
     "present: iommu is given twice with different values (iommu=pt and iommu=off)"),
    (["pci=" + ACS1, "pci=realloc," + ACS2], [],
     "present: pci=disable_acs_redir is given twice with different values (%s and %s)" % (ACS1, ACS2)),
    # in one pci= argument too: the kernel's pci_setup applies the last, merge would keep the first
    (["pci=%s,realloc,%s" % (ACS1, ACS2)], [],
     "present: pci=disable_acs_redir is given twice with different values (%s and %s)" % (ACS1, ACS2)),
    (["nosmt"], ["nosmt"], "'nosmt' is both in present ('nosmt') and absent: decide which one you want"),
    (["iommu=pt"], ["iommu"], "'iommu' is both in present ('iommu=pt') and absent: decide which one you want"),
    (["pci=" + ACS1], ["pci=disable_acs_redir"],
     "'pci=disable_acs_redir' is both in present ('pci=%s') and absent: decide which one you want" % ACS1),
    (["pci=realloc"], ["pci"], "'pci' is both in present ('pci=realloc') and absent: decide which one you want"),
])
def test_validate_refusals(present, absent, message):
    with pytest.raises(cmdline_args.CmdlineError) as e:
        cmdline_args.validate(present, absent, arch="x86_64")
    assert str(e.value) == message


@pytest.mark.parametrize("present,absent,result", [
    (["iommu=pt", "iommu=pt"], [], (["iommu=pt", "iommu=pt"], [])),
    (["pci=realloc,nocrs", "pci=realloc"], [], (["pci=realloc,nocrs", "pci=realloc"], [])),
    (["pci=%s,%s" % (ACS1, ACS1)], [], (["pci=%s,%s" % (ACS1, ACS1)], [])),
    (["console=tty0", "console=ttyS0"], [], (["console=tty0", "console=ttyS0"], [])),
    ([], ["x=y=", "pci=disable_acs_redir=", "x=a,,b"], ([], ["x=y=", "pci=disable_acs_redir=", "x=a,,b"])),
    (['a="b"'], None, (["a=b"], [])),
    (None, ["quiet"], ([], ["quiet"])),
])
def test_validate_accepts(present, absent, result):
    assert cmdline_args.validate(present, absent, arch="x86_64") == result


@pytest.mark.parametrize("raw,where,normal", [(8, "present", "8"), (1.5, "absent", "1.5"), ('a="b"', "present", "a=b")])
def test_normalize_arg_converts(raw, where, normal):
    assert cmdline_args.normalize_arg(raw, where) == normal


@pytest.mark.parametrize("devs,message", [
    ("", "w: disable_acs_redir= needs at least one device"),
    ("0000:16:01.0;bogus", "w: " + NEITHER % "'bogus'"),
])
def test_validate_pci_dev_list(devs, message):
    with pytest.raises(cmdline_args.CmdlineError) as e:
        cmdline_args.validate_pci_dev_list(devs, "w")
    assert str(e.value) == message


@pytest.mark.parametrize("a,b,overlap", [
    ({"pci"}, {"pci=realloc"}, True),
    ({"pci=realloc"}, {"pci"}, True),
    ({"pci=realloc"}, {"pci=nocrs"}, False),
    ({"iommu"}, {"iommu.strict"}, False),
])
def test_overlaps_both_ways(a, b, overlap):
    assert cmdline_args._overlaps(a, b) is overlap


# ------------------------------------------------------------------------------------------------ merge

@pytest.mark.parametrize("tokens,present,absent,result", [
    (["quiet", "splash", "ro"], [], ["quiet", "splash"], ["ro"]),
    (["iommu=pt", "pci=realloc,nocrs"], [], ["pci=nocrs"], ["iommu=pt", "pci=realloc"]),
    (["pci", "pci=nocrs"], [], ["pci=nocrs"], ["pci"]),
    (["ro", "pci=realloc,nocrs", "quiet"], [], ["pci=nocrs"], ["ro", "pci=realloc", "quiet"]),
    (["pci=realloc,nocrs,noaer"], [], ["pci=nocrs"], ["pci=realloc,noaer"]),
    (["pci=realloc," + ACS1], [], ["pci=" + ACS1], ["pci=realloc"]),
    (["pci=realloc," + ACS1], [], ["pci=" + ACS2], ["pci=realloc," + ACS1]),
    (["pci=realloc,nocrs", "x=1", "x=2"], [], ["pci=nocrs", "x=2"], ["pci=realloc", "x=1"]),
    (["ro"], ["console=ttyS0", "nosmt"], [], ["ro", "console=ttyS0", "nosmt"]),
    (["ro"], ["pci=realloc", "nosmt"], [], ["ro", "pci=realloc", "nosmt"]),
    (["iommu=pt"], ["iommu=pt", "nosmt"], [], ["iommu=pt", "nosmt"]),
    (["ro"], ["iommu=pt", "nosmt"], [], ["ro", "iommu=pt", "nosmt"]),
    (["pci=realloc", "pci=nocrs,noaer"], ["pci=realloc"], [], ["pci=realloc", "pci=nocrs,noaer"]),
    (["pci=%s,realloc" % ACS1], ["pci=" + ACS2], [], ["pci=%s,realloc" % ACS2]),
    (["ro", "pci=%s,realloc" % ACS1, "pci=nocrs"], ["pci=" + ACS2], [], ["ro", "pci=%s,realloc,nocrs" % ACS2]),
    ([], ["pci=realloc,realloc"], [], ["pci=realloc"]),
])
def test_merge_whole_result(tokens, present, absent, result):
    assert cmdline_args.merge(tokens, present, absent) == result


@pytest.mark.parametrize("tokens,present,absent,result", [
    (["pci=realloc"], ["pci=nocrs"], [], [("pci", "pci=realloc", "pci=nocrs")]),
    (["ro", "pci=realloc", "pci=noaer"], ["pci=nocrs"], [], [("pci", "pci=realloc pci=noaer", "pci=nocrs")]),
    (["ro"], ["pci=nocrs"], [], [("pci", None, "pci=nocrs")]),
    (["ro"], ["pci=nocrs", "nosmt"], [], [("pci", None, "pci=nocrs"), ("nosmt", None, "nosmt")]),
    (["iommu=off", "ro", "iommu=soft"], ["iommu=pt"], [], [("iommu", "iommu=off iommu=soft", "iommu=pt")]),
    (["ro"], ["iommu=pt", "pci=nocrs"], [], [("iommu", None, "iommu=pt"), ("pci", None, "pci=nocrs")]),
    (["ro", "iommu=pt"], ["iommu=pt"], [], []),
    (["iommu=off", "ro", "iommu=soft"], [], ["iommu"], [("iommu", "iommu=off iommu=soft", None)]),
    (["ro", "pci=realloc,nocrs"], [], ["pci=nocrs", "quiet"], [("pci", "pci=realloc,nocrs", None)]),
])
def test_deviations_whole_list(tokens, present, absent, result):
    assert cmdline_args.deviations(tokens, present, absent) == result


@pytest.mark.parametrize("tokens,present,absent,result", [
    (["quiet", "quiet", "iommu=off"], ["iommu=pt"], [], [("iommu=off", "iommu", "iommu=pt")]),
    (["iommu=off"], ["nosmt", "iommu=pt"], [], [("iommu=off", "iommu", "iommu=pt")]),
    (["console=tty0", "iommu=pt"], ["console=ttyS0", "iommu=pt"], [], []),
    (["ro", "pci=realloc," + ACS2], ["pci=" + ACS1], [], [("pci=realloc," + ACS2, "pci", "pci=" + ACS1)]),
    (["splash", "x"], [], ["quiet", "splash"], [("splash", "splash", None)]),
])
def test_conflicts_whole_list(tokens, present, absent, result):
    assert cmdline_args.conflicts(tokens, present, absent) == result


@pytest.mark.parametrize("tokens,token,has", [
    (["iommu=pt,nopt"], "iommu=pt", False),
    (["iommu=pt"], "iommu=pt", True),
    (["pci=realloc"], "pci=nocrs", False),
    (["pci=realloc", "pci=nocrs,noaer"], "pci=nocrs,realloc", True),
])
def test_has_arg(tokens, token, has):
    assert cmdline_args.has_arg(tokens, token) is has


def test_sub_options_of_the_key_only():
    tokens = ["iommu=pt,nopt", "pci", "pci=realloc", "ro", "pci=nocrs,noaer"]
    assert cmdline_args.sub_options(tokens, "pci") == ["realloc", "nocrs", "noaer"]


@pytest.mark.parametrize("have,wanted,missing", [
    (["iommu=pt,nopt"], ["iommu=pt"], ["iommu=pt"]),
    (["pci=realloc"], ["pci=realloc", "nosmt"], ["nosmt"]),
    (["pci=realloc"], ["pci=realloc,nocrs,noaer"], ["pci=nocrs,noaer"]),
    (["ro"], ["ro", "nosmt", "nosmt"], ["nosmt"]),
])
def test_missing_args(have, wanted, missing):
    assert cmdline_args.missing_args(have, wanted) == missing


# ------------------------------------------------------------------------------------------------ readers

def write(root, files):
    for path, text in files.items():
        real = os.path.join(str(root), path.lstrip("/"))
        if not os.path.isdir(os.path.dirname(real)):
            os.makedirs(os.path.dirname(real))
        with open(real, "w") as f:
            f.write(text)


OS_RELEASE = (
    "# a comment=with equals\n"
    "\n"
    "junk line\n"
    "ID=ubuntu\n"
    'PRETTY_NAME="Ubuntu 22.04.4 LTS"\n'
    "NAME='Pop OS'\n"
    "VARIANT=Server  Edition\n"
    'VERSION="1=2"\n'
    'BROKEN="unclosed\n'
    "  \n"
)


@pytest.mark.parametrize("files,data", [
    ({"/usr/lib/os-release": 'ID=rocky\nNAME="Rocky Linux"\n'}, {"ID": "rocky", "NAME": "Rocky Linux"}),
    ({"/etc/os-release": "ID=debian\n", "/usr/lib/os-release": "ID=rocky\n"}, {"ID": "debian"}),
    ({"/etc/os-release": "", "/usr/lib/os-release": "ID=rocky\n"}, {"ID": "rocky"}),
    ({"/etc/os-release": OS_RELEASE}, {"ID": "ubuntu", "PRETTY_NAME": "Ubuntu 22.04.4 LTS", "NAME": "Pop OS",
                                       "VARIANT": "Server Edition", "VERSION": "1=2", "BROKEN": '"unclosed'}),
    ({}, {}),
])
def test_read_os_release(tmp_path, files, data):
    write(tmp_path, files)
    assert cmdline_args.read_os_release(Sysroot(str(tmp_path))) == data


@pytest.mark.parametrize("release,family", [
    ({"ID": "neon", "ID_LIKE": "ubuntu debian"}, "debian"),
    ({"ID": "weird", "ID_LIKE": "RHEL centos"}, "el"),
    ({"ID": "Rocky"}, "el"),
    ({"ID": "arch"}, None),
    ({}, None),
])
def test_os_family(release, family):
    assert cmdline_args.os_family(release) == family


def test_read_proc_cmdline(tmp_path):
    sysroot = Sysroot(str(tmp_path))
    with pytest.raises(cmdline_args.CmdlineError) as e:
        cmdline_args.read_proc_cmdline(sysroot)
    assert str(e.value) == "cannot read %s" % os.path.join(str(tmp_path), "proc", "cmdline")
    write(tmp_path, {"/proc/cmdline": "ro quiet\n"})
    assert cmdline_args.read_proc_cmdline(sysroot) == "ro quiet"


# ------------------------------------------------------------------------------------------------ backends' helpers

@pytest.mark.parametrize("rc,out,err,message", [
    (2, "o\n", " boom \n", "grubby failed (rc=2): boom"),
    (1, " only out \n", "", "grubby failed (rc=1): only out"),
    (1, "", "", "grubby failed (rc=1): "),
    (3, None, None, "grubby failed (rc=3): "),
])
def test_check_failure(rc, out, err, message):
    argv = ["grubby", "--info=ALL"]
    with pytest.raises(cmdline_args.CommandError) as e:
        cmdline_args._check(lambda a: (rc, out, err), argv, "grubby")
    assert (str(e.value), e.value.argv, e.value.rc, e.value.out, e.value.err) == (message, argv, rc, out, err)


def test_check_success_returns_out():
    assert cmdline_args._check(lambda a: (0, "out", "warning"), ["true"], "true") == "out"


def test_command_error_fields():
    e = cmdline_args.CommandError("m")
    assert isinstance(e, cmdline_args.CmdlineError)
    assert (str(e), e.args, e.argv, e.rc, e.out, e.err) == ("m", ("m",), None, None, "", "")
    e = cmdline_args.CommandError("x failed", argv=["x"], rc=4, out="o", err="e")
    assert (str(e), e.argv, e.rc, e.out, e.err) == ("x failed", ["x"], 4, "o", "e")


def test_plan_fields():
    plan = cmdline_args.Plan(("ro", "iommu=off"), ["ro", "iommu=pt"], "b\n", "a\n", "/etc/default/grub")
    assert (plan.before, plan.after, plan.added, plan.removed) == (
        ["ro", "iommu=off"], ["ro", "iommu=pt"], ["iommu=pt"], ["iommu=off"])
    assert plan.changed is False
    assert (plan.actions, plan.conflicts, plan.header) == ([], [], "/etc/default/grub")
    assert plan.diff == {"before": "b\n", "after": "a\n", "before_header": "/etc/default/grub (before)",
                         "after_header": "/etc/default/grub (after)"}
