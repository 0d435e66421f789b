# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cmdline_grub: what its own tests left unseen (make mutation's survivors): conflict_reason's and remaining's whole
results, the conflict notes of each variable and kind and the file they name among several drop-ins after ours,
the sourcing command word for word and its errors, which files are sourced, the read-back and update errors of
apply, and the update command for each GRUB tool."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import grub as cmdline_grub
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.args import CmdlineError, CommandError
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from cmdline_nodes import subprocess_run

ENV = shutil.which("env") or "/usr/bin/env"
DROPIN = "/etc/default/grub.d/99-gpufabric.cfg"
L, D = "GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"
TAIL = "; then run update-grub (the collection never rewrites the admin's GRUB files)"
SCRIPT = ('for f in "$@"; do if [ "$f" = "@candidate@" ]; then eval "$GPUFABRIC_CANDIDATE" || exit 3; '
          'else . "$f" || exit 3; fi; done; printf "%s\\0%s\\0" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')
WORDS_ERROR = "malformed quotes in command line \"a'b\": ' quote not closed"


def item(obj, key, cur, want):
    return {"concern": "cmdline", "object": obj, "key": key, "current": cur, "desired": want}


class Host(object):
    """A Debian tree under tmp_path sourced with the real /bin/sh; other commands are recorded and answered."""

    def __init__(self, tmp_path, linux="", default="quiet", dropins=None, tools=("update-grub",), grub=True):
        self.root = str(tmp_path)
        self.sr = Sysroot(self.root)
        os.makedirs(self.sr.path("/etc/default/grub.d"))
        if grub:
            self.write("/etc/default/grub", '%s="%s"\n%s="%s"\n' % (L, linux, D, default))
        for name, text in (dropins or {}).items():
            self.write("/etc/default/grub.d/" + name, text)
        self.tools = dict((t, "/sbin/" + t) for t in tools)
        self.tools["env"] = ENV
        self.calls = []
        self.answer = (0, "", "")

    def write(self, p, text):
        with open(self.sr.path(p), "w") as f:
            f.write(text)

    def run(self, argv):
        if argv[0] == ENV:
            return subprocess_run(argv)
        self.calls.append(argv)
        return self.answer

    def backend(self):
        return cmdline_grub.GrubDropinBackend(self.sr, self.run, self.tools.get)


# ------------------------------------------------------------------------------------------------ conflict_reason

DROPPED = (item("/etc/default/grub.d/99-zz.cfg", "iommu", None, "iommu=pt"), L, "dropped")
UNWANTED = (item("/etc/default/grub", "splash", "splash", None), D, "unwanted")
OTHER = (item("/etc/default/grub", "iommu", "iommu=off", "iommu=pt"), L, "other value")
DROPPED_TEXT = ("/etc/default/grub.d/99-zz.cfg sorts after 99-gpufabric.cfg and drops iommu=pt: make it append to "
                "$GRUB_CMDLINE_LINUX or rename it to sort before 99-gpufabric.cfg")
UNWANTED_TEXT = "/etc/default/grub has splash in GRUB_CMDLINE_LINUX_DEFAULT, which is in absent: remove it there"
OTHER_TEXT = ("/etc/default/grub has iommu=off in GRUB_CMDLINE_LINUX, which conflicts with iommu=pt: "
              "remove it there")


@pytest.mark.parametrize("notes,text", [
    ([], TAIL),
    ([DROPPED], DROPPED_TEXT + TAIL),
    ([UNWANTED], UNWANTED_TEXT + TAIL),
    ([OTHER], OTHER_TEXT + TAIL),
    ([UNWANTED, OTHER], UNWANTED_TEXT + "; " + OTHER_TEXT + TAIL),
    ([OTHER, DROPPED, UNWANTED], OTHER_TEXT + "; " + DROPPED_TEXT + "; 1 more conflict(s) in the items" + TAIL),
    ([DROPPED, UNWANTED, OTHER, OTHER], DROPPED_TEXT + "; " + UNWANTED_TEXT + "; 2 more conflict(s) in the items"
     + TAIL),
])
def test_conflict_reason_whole_text(notes, text):
    assert cmdline_grub.conflict_reason(notes) == text


def test_remaining_whole_items():
    assert cmdline_grub.remaining(["iommu=off", "quiet"], ["iommu=pt", "nosmt"], ["quiet"]) == [
        item("bootloader", "iommu", "iommu=off", "iommu=pt"), item("bootloader", "nosmt", None, "nosmt"),
        item("bootloader", "quiet", "quiet", None)]
    assert cmdline_grub.remaining(["iommu=pt"], ["iommu=pt"], []) == []


def test_fresh_backend_has_planned_nothing(tmp_path):
    b = Host(tmp_path).backend()
    assert (b.dropin_content, b.remove_dropin, b.expected, b.notes, b.sh) == (None, False, None, [], "/bin/sh")


# ------------------------------------------------------------------------------------------------ conflicts

def test_conflict_notes_name_the_variable_and_kind(tmp_path):
    host = Host(tmp_path, linux="iommu=off", default="quiet splash")
    b = host.backend()
    plan = b.plan(["iommu=pt"], ["splash"])
    assert b.notes == [(item("/etc/default/grub", "iommu", "iommu=off", "iommu=pt"), L, "other value"),
                       (item("/etc/default/grub", "splash", "splash", None), D, "unwanted")]
    assert plan.conflicts == [n[0] for n in b.notes]
    assert (plan.before, plan.after, plan.actions) == (["iommu=off", "quiet", "splash"],
                                                       ["iommu=off", "iommu=pt", "quiet", "splash"],
                                                       ["write " + DROPIN])


def test_conflict_in_default_and_absent_in_linux(tmp_path):
    host = Host(tmp_path, linux="nomodeset", default="quiet iommu=off")
    b = host.backend()
    b.plan(["iommu=pt"], ["nomodeset"])
    assert b.notes == [(item("/etc/default/grub", "nomodeset", "nomodeset", None), L, "unwanted"),
                       (item("/etc/default/grub", "iommu", "iommu=off", "iommu=pt"), D, "other value")]


# 99-x keeps the arguments, 99-y drops them, 99-z keeps them again: 99-y is the one to name
LATER = {
    "99-x.cfg": '%s="$%s nosmt"\n' % (L, L),
    "99-y.cfg": '%s="nomodeset"\n' % L,
    "99-z.cfg": '%s="$%s hugepages=1"\n' % (L, L),
}


@pytest.mark.parametrize("check", [True, False])
def test_dropped_names_the_dropping_file_among_later_ones(tmp_path, check):
    host = Host(tmp_path, dropins=LATER)
    b = host.backend()
    plan = b.plan(["iommu=pt"], [])
    if not check:
        b.apply(plan, update_bootloader=False)
        b = host.backend()
        plan = b.plan(["iommu=pt"], [])
    assert b.notes == [(item("/etc/default/grub.d/99-y.cfg", "iommu", None, "iommu=pt"), L, "dropped")]
    assert plan.after == ["nomodeset", "hugepages=1", "quiet"]


def test_conflict_fallbacks_when_no_file_is_to_blame(tmp_path):
    b = Host(tmp_path).backend()
    words = {L: ["iommu=off"], D: []}
    assert b._conflicts([], None, ["iommu=off"], words, ["iommu=pt"], []) == [
        (item("/etc/default/grub", "iommu", "iommu=off", "iommu=pt"), L, "other value"),
        (item(DROPIN, "iommu", None, "iommu=pt"), L, "dropped")]


# ------------------------------------------------------------------------------------------------ sourcing

def test_source_command_word_for_word(tmp_path):
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, "iommu=pt\0quiet\0", ""
    b = cmdline_grub.GrubDropinBackend(Sysroot(str(tmp_path)), run, {"env": "/opt/bin/env"}.get)
    grub = b.sysroot.path("/etc/default/grub")
    assert b._effective([grub], "ignored") == (["iommu=pt", "quiet"], {L: ["iommu=pt"], D: ["quiet"]})
    assert b._effective([grub]) == (["iommu=pt", "quiet"], {L: ["iommu=pt"], D: ["quiet"]})
    b._effective([grub, b.CANDIDATE], "X=1")
    head = ["/opt/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "LC_ALL=C"]
    assert seen == [head + ["/bin/sh", "-c", SCRIPT, "sh", grub],
                    head + ["GPUFABRIC_CANDIDATE=X=1", "/bin/sh", "-c", SCRIPT, "sh", grub, "@candidate@"]]
    b = cmdline_grub.GrubDropinBackend(Sysroot(str(tmp_path)), run, {}.get)
    b._source([])
    assert seen[-1] == ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "LC_ALL=C", "/bin/sh", "-c",
                        SCRIPT, "sh"]


@pytest.mark.parametrize("err,tail", [(" boom \n", "boom"), ("", ""), (None, "")])
def test_source_failure_names_the_files(tmp_path, err, tail):
    def run(_argv):
        return 2, "partial", err
    b = cmdline_grub.GrubDropinBackend(Sysroot(str(tmp_path)), run, {"env": "/usr/bin/env"}.get)
    files = [b.sysroot.path("/etc/default/grub"), b.CANDIDATE]
    with pytest.raises(CommandError) as e:
        b._source(files, "X=1")
    assert str(e.value) == ("sourcing the GRUB defaults (/etc/default/grub %s) with /bin/sh failed (rc=2): %s"
                            % (DROPIN, tail))
    assert (e.value.argv[-3:], e.value.rc, e.value.out, e.value.err) == (["sh"] + files, 2, "partial", err)


def test_source_unexpected_output(tmp_path):
    b = cmdline_grub.GrubDropinBackend(Sysroot(str(tmp_path)), lambda _argv: (0, "only\0", ""), {}.get)
    with pytest.raises(CmdlineError) as e:
        b._source([])
    assert str(e.value) == "unexpected output while sourcing the GRUB defaults: 'only\\x00'"


def test_label_of_the_candidate_is_our_dropin(tmp_path):
    b = Host(tmp_path).backend()
    assert b._label(b.CANDIDATE) == DROPIN
    assert b._label(b.sysroot.path("/etc/default/grub")) == "/etc/default/grub"


@pytest.mark.parametrize("files,where", [
    ([], "nothing"),
    (["/etc/default/grub", "/etc/default/grub.d/50-a.cfg"], "/etc/default/grub /etc/default/grub.d/50-a.cfg"),
])
def test_words_malformed_quotes_name_the_files(tmp_path, files, where):
    b = Host(tmp_path).backend()
    with pytest.raises(CmdlineError) as e:
        b._words({L: "ok", D: "a'b"}, [b.sysroot.path(f) for f in files])
    assert str(e.value) == "GRUB_CMDLINE_LINUX_DEFAULT as set by %s: %s" % (where, WORDS_ERROR)


def test_malformed_dropin_of_ours_names_it(tmp_path):
    host = Host(tmp_path, dropins={"99-gpufabric.cfg": '%s="a\'b"\n' % L})
    with pytest.raises(CmdlineError) as e:
        host.backend().plan(["iommu=pt"], [])
    assert str(e.value) == "GRUB_CMDLINE_LINUX as set by %s: %s" % (DROPIN, WORDS_ERROR)


# ------------------------------------------------------------------------------------------------ files

def test_files_only_cfg_in_byte_order(tmp_path):
    host = Host(tmp_path, dropins={"50-b.cfg": "", "50-a.cfg": "", "README": "", "60-x.cfg.dpkg-old": "",
                                   "99-gpufabric.cfg": "", "99-zz.cfg": "", "99-a.cfg": ""})
    d = host.sr.path("/etc/default/grub.d")
    prefix, suffix = host.backend()._files()
    assert prefix == [host.sr.path("/etc/default/grub")] + [
        os.path.join(d, n) for n in ("50-a.cfg", "50-b.cfg", "99-a.cfg")]
    assert suffix == [os.path.join(d, "99-zz.cfg")]


def test_files_named_in_bytes_that_are_not_utf8_sort_as_the_shell_sorts_them(tmp_path):
    """A drop-in named in Latin-1 bytes (50-\\xe9.cfg) is one /bin/sh sources: it sorts among the others by those
    bytes (0xe9 after every ASCII byte, before ours at 99-) and is sourced, with no traceback."""
    host = Host(tmp_path, dropins={"50-z.cfg": ""})
    d = host.sr.path("/etc/default/grub.d")
    with open(os.path.join(os.fsencode(d), b"50-\xe9.cfg"), "w") as f:
        f.write('%s="$%s iommu=pt"\n' % (D, D))
    b = host.backend()
    prefix, suffix = b._files()
    assert prefix == [host.sr.path("/etc/default/grub"), os.path.join(d, "50-z.cfg"),
                      os.path.join(d, os.fsdecode(b"50-\xe9.cfg"))]
    assert suffix == []
    plan = b.plan(["iommu=pt"], [])
    assert (plan.changed, plan.after) == (False, ["quiet", "iommu=pt"])


def test_files_sort_by_bytes_not_by_code_points(tmp_path):
    """Byte 0x80 sorts before UTF-8 "\\xc3\\xa9" (e acute) for the shell; as decoded text (U+DC80 against U+00E9)
    it would sort after."""
    host = Host(tmp_path)
    d = os.fsencode(host.sr.path("/etc/default/grub.d"))
    for name in (b"50-\x80.cfg", u"50-\u00e9.cfg".encode("utf-8")):
        with open(os.path.join(d, name), "w") as f:
            f.write("")
    prefix = host.backend()._files()[0]
    assert [os.fsencode(os.path.basename(p)) for p in prefix[1:]] == [b"50-\x80.cfg", b"50-\xc3\xa9.cfg"]


def test_files_without_etc_default_grub(tmp_path):
    host = Host(tmp_path, grub=False, dropins={"50-a.cfg": '%s="iommu=pt"\n' % D})
    b = host.backend()
    assert b._files() == ([host.sr.path("/etc/default/grub.d/50-a.cfg")], [])
    plan = b.plan(["iommu=pt"], [])
    assert (plan.changed, plan.after, b.dropin_content) == (False, ["iommu=pt"], None)


def test_dropin_masked_by_dev_null_is_not_ours(tmp_path):
    host = Host(tmp_path, linux="iommu=pt")
    os.symlink("/dev/null", host.sr.path(DROPIN))
    b = host.backend()
    plan = b.plan(["iommu=pt"], [])
    assert (plan.changed, plan.actions, b.remove_dropin) == (False, [], False)


# ------------------------------------------------------------------------------------------------ plan and apply

def test_new_format_dropin_is_written_not_rewritten(tmp_path):
    host = Host(tmp_path)
    b = host.backend()
    b.apply(b.plan(["iommu=pt"], []))
    b = host.backend()
    text = host.sr.read_raw(DROPIN)
    assert b._ours_before(text, ["quiet"]) == (["iommu=pt"], False)
    plan = b.plan(["nosmt"], [])
    assert plan.actions == ["write " + DROPIN]
    assert b.dropin_content == cmdline_grub.render_dropin(["iommu=pt", "nosmt"])


def test_apply_runs_update_grub_by_default(tmp_path):
    host = Host(tmp_path)
    b = host.backend()
    plan = b.plan(["iommu=pt"], [])
    b.apply(plan)
    assert plan.actions == ["write " + DROPIN, "run /sbin/update-grub"]
    assert host.calls == [["/sbin/update-grub"]]


def test_apply_read_back_mismatch(tmp_path):
    host = Host(tmp_path)
    b = host.backend()
    plan = b.plan(["iommu=pt"], [])
    host.write("/etc/default/grub", '%s="nosmt"\n' % L)
    with pytest.raises(CmdlineError) as e:
        b.apply(plan)
    assert str(e.value) == ("after writing %s the GRUB defaults give 'nosmt iommu=pt' instead of 'iommu=pt quiet' "
                            "(a file changed meanwhile?)" % DROPIN)
    assert host.calls == []


def test_apply_without_update_tools(tmp_path):
    host = Host(tmp_path, tools=())
    b = host.backend()
    with pytest.raises(CmdlineError) as e:
        b.apply(b.plan(["iommu=pt"], []))
    assert str(e.value) == "none of update-grub, grub-mkconfig, grub2-mkconfig found"


def test_apply_update_failure_names_the_command(tmp_path):
    host = Host(tmp_path, tools=("grub-mkconfig",))
    host.answer = (1, "", "oops\n")
    b = host.backend()
    with pytest.raises(CommandError) as e:
        b.apply(b.plan(["iommu=pt"], []))
    assert str(e.value) == "/sbin/grub-mkconfig -o /boot/grub/grub.cfg failed (rc=1): oops"


@pytest.mark.parametrize("tools,dirs,argv", [
    (("update-grub", "grub-mkconfig", "grub2-mkconfig"), ("/boot/grub2",), ["/sbin/update-grub"]),
    (("grub-mkconfig", "grub2-mkconfig"), ("/boot/grub2",), ["/sbin/grub-mkconfig", "-o", "/boot/grub/grub.cfg"]),
    (("grub-mkconfig",), (), ["/sbin/grub-mkconfig", "-o", "/boot/grub/grub.cfg"]),
    (("grub2-mkconfig",), ("/boot/grub2",), ["/sbin/grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]),
    (("grub2-mkconfig",), ("/boot/grub",), ["/sbin/grub2-mkconfig", "-o", "/boot/grub/grub.cfg"]),
    (("grub2-mkconfig",), (), ["/sbin/grub2-mkconfig", "-o", "/boot/grub/grub.cfg"]),
    ((), ("/boot/grub2",), None),
])
def test_update_command(tmp_path, tools, dirs, argv):
    host = Host(tmp_path, tools=tools)
    for d in dirs:
        os.makedirs(host.sr.path(d))
    assert host.backend().update_command() == argv
