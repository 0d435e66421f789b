# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GRUB backend of the kernel command line (Debian/Ubuntu): one additive drop-in, then update-grub.

grub-mkconfig sources ``/etc/default/grub`` and then ``/etc/default/grub.d/*.cfg`` (in the shell's byte order)
with ``/bin/sh``; 10_linux puts ``$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT`` on the ``linux`` line of the
normal entries and ``$GRUB_CMDLINE_LINUX`` alone on the recovery entries, as GRUB script words.

The collection owns ``/etc/default/grub.d/99-gpufabric.cfg``. It *appends* the collection's arguments to
``GRUB_CMDLINE_LINUX`` as the files before it left it::

    GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt 'pci=disable_acs_redir=...;...'"

so an argument an admin adds to ``/etc/default/grub`` later still boots. Only what the admin's files (and the
drop-ins before ours) do not already carry is appended (for ``pci=`` only the missing sub-options: the kernel
applies every ``pci=`` occurrence). The admin's arguments are never removed or rewritten: one that contradicts
the request (``iommu=off`` against ``iommu=pt``, an argument in ``absent``, a ``pci=`` sub-option with another
value) is reported as a conflict naming the file and the variable it comes from, for the operator to remove
there. A drop-in that sorts after ours and drops or contradicts our arguments is reported the same way.

Drop-ins written by earlier versions assigned the complete variables (``GRUB_CMDLINE_LINUX='...'``); they are
rewritten once into the additive form, keeping as the collection's arguments those of their
``GRUB_CMDLINE_LINUX`` the admin's files do not carry.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils.host import runner
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.args import (
    CmdlineError,
    CommandError,
    Plan,
    _check,
    arg_key,
    conflicts,
    deviations,
    has_arg,
    join_grub,
    merge,
    missing_args,
    shell_dquote_body,
    split_cmdline,
    token_diff,
)

GRUB_DEFAULT = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
GRUB_DROPIN_NAME = "99-gpufabric.cfg"
GRUB_DROPIN = GRUB_DROPIN_DIR + "/" + GRUB_DROPIN_NAME
GRUB_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
GRUB_TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig")
# the whole-assignment format of earlier versions: GRUB_CMDLINE_LINUX='...' (shell_quote of the complete value)
_OLD_FORMAT = re.compile(r"^GRUB_CMDLINE_LINUX(?:_DEFAULT)?='", re.M)
HEADER = (
    "# Managed by the gpufabric.node Ansible collection (gpufabric.node.kernel_cmdline).\n"
    "# It appends the collection's kernel arguments to GRUB_CMDLINE_LINUX as /etc/default/grub and the\n"
    "# drop-ins sorting before this file set it; it never removes an argument of theirs. The collection\n"
    "# rewrites this file as a whole (local edits are lost): put your own arguments in /etc/default/grub\n"
    "# and run update-grub.\n"
)


def render_dropin(tokens):
    """The drop-in that appends ``tokens`` (GRUB script words, shell-quoted) to GRUB_CMDLINE_LINUX."""
    return HEADER + 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }%s"\n' % shell_dquote_body(
        join_grub(tokens))


# the name that stands for the drop-in content not written yet (GrubDropinBackend.CANDIDATE)
CANDIDATE_FILE = "@candidate@"
# sources the files named after it in order (the candidate from the environment) and prints the two variables
# NUL-terminated; it only reads, so a read-only evaluation runs it once per set of files
SOURCE_SCRIPT = runner.read_only_script(
    'for f in "$@"; do '
    'if [ "$f" = "%s" ]; then eval "$GPUFABRIC_CANDIDATE" || exit 3; '
    'else . "$f" || exit 3; fi; done; '
    'printf "%%s\\0%%s\\0" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"' % CANDIDATE_FILE)


class GrubDropinBackend(object):
    """Debian/Ubuntu: the collection's additive drop-in below /etc/default/grub.d, then update-grub."""

    name = "grub"
    CANDIDATE = CANDIDATE_FILE

    def __init__(self, sysroot, run, bin_path, sh="/bin/sh"):
        self.sysroot = sysroot
        self.run = run
        self.bin_path = bin_path
        self.sh = sh
        self.dropin_content = None
        self.remove_dropin = False
        self.expected = None
        self.notes = []
        self._memo = {}

    # ----------------------------------------------------------------------- sourcing the defaults

    def _files(self):
        """(prefix, suffix): /etc/default/grub and the drop-ins sorting before ours, and those after it."""
        names = [n for n in self.sysroot.listdir(GRUB_DROPIN_DIR) if n.endswith(".cfg") and n != GRUB_DROPIN_NAME]
        # /bin/sh expands grub.d/*.cfg in byte order under LC_ALL=C; os.fsencode gives back the name's own bytes,
        # also for a name that is not UTF-8 (listdir decoded it with surrogateescape)
        names.sort(key=os.fsencode)
        ours = os.fsencode(GRUB_DROPIN_NAME)
        d = self.sysroot.path(GRUB_DROPIN_DIR)
        prefix = [self.sysroot.path(GRUB_DEFAULT)] if self.sysroot.exists(GRUB_DEFAULT) else []
        prefix += [os.path.join(d, n) for n in names if os.fsencode(n) < ours]
        suffix = [os.path.join(d, n) for n in names if os.fsencode(n) > ours]
        return prefix, suffix

    def _source(self, files, candidate=None):
        """Source files in order with /bin/sh in a clean environment; returns {var: value}.

        A file named ``CANDIDATE`` stands for drop-in content not written yet (check mode, and the
        check of later drop-ins): it is evaluated from the environment instead.
        """
        script = SOURCE_SCRIPT
        # an emptied environment for the sourced shell, with the runners' C locale
        argv = [self.bin_path("env") or "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
        argv += ["%s=%s" % kv for kv in sorted(runner.C_LOCALE.items())]
        if candidate is not None:
            argv.append("GPUFABRIC_CANDIDATE=%s" % candidate)
        argv += [self.sh, "-c", script, "sh"] + list(files)
        rc, out, err = self.run(argv)
        if rc != 0:
            raise CommandError("sourcing the GRUB defaults (%s) with %s failed (rc=%s): %s"
                               % (" ".join(self._label(f) for f in files), self.sh, rc, (err or "").strip()),
                               argv=argv, rc=rc, out=out, err=err)
        parts = out.split("\0")
        if len(parts) < 3:
            raise CmdlineError("unexpected output while sourcing the GRUB defaults: %r" % out)
        return {"GRUB_CMDLINE_LINUX": parts[0], "GRUB_CMDLINE_LINUX_DEFAULT": parts[1]}

    def _label(self, f):
        return GRUB_DROPIN if f == self.CANDIDATE else self.sysroot.unroot(f)

    def _words(self, values, files):
        """{var: words} of sourced values; malformed quotes name the files that gave them."""
        out = {}
        for var in GRUB_VARS:
            try:
                out[var] = split_cmdline(values[var], grub=True)
            except CmdlineError as e:
                raise CmdlineError("%s as set by %s: %s" % (var, " ".join(self._label(f) for f in files) or
                                                            "nothing", e))
        return out

    def _effective(self, files, candidate=None):
        """The next boot's arguments from these files (normal entry: LINUX then LINUX_DEFAULT) and the words."""
        if self.CANDIDATE not in files:
            candidate = None
        key = (tuple(files), candidate)
        if key not in self._memo:
            words = self._words(self._source(files, candidate), files)
            self._memo[key] = (words["GRUB_CMDLINE_LINUX"] + words["GRUB_CMDLINE_LINUX_DEFAULT"], words)
        all_words, words = self._memo[key]
        return list(all_words), dict((k, list(v)) for k, v in words.items())

    # ----------------------------------------------------------------------- plan

    def _ours_before(self, text, admin_all):
        """The arguments the drop-in now on disk adds for the collection, and whether it has the old format."""
        if text is None:
            return [], False
        ours = self.sysroot.path(GRUB_DROPIN)
        words = self._words(self._source([ours]), [ours])
        if _OLD_FORMAT.search(text):
            # the old drop-in assigned the admin's GRUB_CMDLINE_LINUX with the requested arguments merged in:
            # what it has beyond the admin's files now is what the collection added
            return token_diff(admin_all, words["GRUB_CMDLINE_LINUX"])[0], True
        return words["GRUB_CMDLINE_LINUX"] + words["GRUB_CMDLINE_LINUX_DEFAULT"], False

    def plan(self, present, absent):
        prefix, suffix = self._files()
        ours = self.sysroot.path(GRUB_DROPIN)
        text = self.sysroot.read_raw(GRUB_DROPIN) if os.path.isfile(ours) else None
        admin_all, _words = self._effective(prefix)
        ours_before, old_format = self._ours_before(text, admin_all)
        # the arguments of earlier calls stay (the iommu and pcie_acs roles share the drop-in); this call's
        # present replace other values of their keys and its absent remove theirs
        wanted = merge(ours_before, present, absent)
        append = missing_args(admin_all, wanted)
        new_text = render_dropin(append) if append else None
        before, _w = self._effective(prefix + ([ours] if text is not None else []) + suffix)
        if new_text is None:
            after_files, after = prefix + suffix, self._effective(prefix + suffix)
        else:
            after_files = prefix + [self.CANDIDATE] + suffix
            after = self._effective(after_files, new_text)
        after_all, after_words = after
        plan = Plan(before, after_all, text or "", new_text or "", GRUB_DROPIN)
        self.dropin_content = new_text
        self.remove_dropin = new_text is None and text is not None
        plan.changed = new_text != text
        if plan.changed:
            if self.remove_dropin:
                plan.actions.append("remove %s" % GRUB_DROPIN)
            elif old_format:
                plan.actions.append("rewrite %s in the additive format (it assigned the whole command line)"
                                    % GRUB_DROPIN)
            else:
                plan.actions.append("write %s" % GRUB_DROPIN)
        self.expected = after_all
        self.notes = self._conflicts(after_files, new_text, after_all, after_words, present, absent)
        plan.conflicts = [item for item, _var, _kind in self.notes]
        return plan

    def _conflicts(self, files, candidate, after, words, present, absent):
        """(drift item, variable, kind) for what the admin's files do against the request in the next boot's
        command line; kind: ``unwanted`` (an absent argument), ``other value`` or ``dropped``."""
        bad = conflicts(after, present, absent)
        lost = [p for p in present if not has_arg(after, p)]
        if not bad and not lost:
            return []
        steps = [[]]
        for i in range(len(files)):
            steps.append(self._effective(files[:i + 1], candidate)[0])
        items = []
        for token, key, want in bad:
            # the file that last put the argument there
            src = [i for i in range(len(files)) if steps[i + 1].count(token) > steps[i].count(token)]
            where = self._label(files[src[-1]]) if src else GRUB_DEFAULT
            var = "GRUB_CMDLINE_LINUX" if token in words["GRUB_CMDLINE_LINUX"] else "GRUB_CMDLINE_LINUX_DEFAULT"
            items.append(({"concern": "cmdline", "object": where, "key": key, "current": token, "desired": want},
                          var, "unwanted" if want is None else "other value"))
        for token in lost:
            # a drop-in after ours that assigns GRUB_CMDLINE_LINUX (or _DEFAULT) without keeping ours
            src = [i for i in range(len(files)) if has_arg(steps[i], token) and not has_arg(steps[i + 1], token)]
            where = self._label(files[src[-1]]) if src else GRUB_DROPIN
            items.append(({"concern": "cmdline", "object": where, "key": arg_key(token), "current": None,
                           "desired": token}, "GRUB_CMDLINE_LINUX", "dropped"))
        return items

    # ----------------------------------------------------------------------- apply

    def update_command(self):
        p = self.bin_path("update-grub")
        if p:
            return [p]
        for tool, cfgdir in (("grub-mkconfig", "/boot/grub"), ("grub2-mkconfig", "/boot/grub2")):
            p = self.bin_path(tool)
            if p:
                if tool == "grub2-mkconfig" and not self.sysroot.isdir("/boot/grub2"):
                    cfgdir = "/boot/grub"
                return [p, "-o", cfgdir + "/grub.cfg"]
        return None

    def apply(self, plan, update_bootloader=True):
        if not plan.changed:
            return
        if self.remove_dropin:
            self.sysroot.remove(GRUB_DROPIN)
        else:
            self.sysroot.write_file_atomic(GRUB_DROPIN, self.dropin_content)
        # read back: the files as they are now give the planned command line
        self._memo = {}
        prefix, suffix = self._files()
        files = prefix + ([] if self.remove_dropin else [self.sysroot.path(GRUB_DROPIN)]) + suffix
        got = self._effective(files)[0]
        if got != self.expected:
            raise CmdlineError("after writing %s the GRUB defaults give %r instead of %r (a file changed meanwhile?)"
                               % (GRUB_DROPIN, " ".join(got), " ".join(self.expected)))
        if update_bootloader:
            argv = self.update_command()
            if argv is None:
                raise CmdlineError("none of update-grub, grub-mkconfig, grub2-mkconfig found")
            plan.actions.append("run %s" % " ".join(argv))
            _check(self.run, argv, " ".join(argv))


def conflict_reason(notes):
    """One line for the operator from the backend's notes: what conflicts where, and what to do."""
    parts = []
    for i, var, kind in notes[:2]:
        if kind == "dropped":
            parts.append("%s sorts after %s and drops %s: make it append to $GRUB_CMDLINE_LINUX or rename it to "
                         "sort before %s" % (i["object"], GRUB_DROPIN_NAME, i["desired"], GRUB_DROPIN_NAME))
        elif kind == "unwanted":
            parts.append("%s has %s in %s, which is in absent: remove it there" % (i["object"], i["current"], var))
        else:
            parts.append("%s has %s in %s, which conflicts with %s: remove it there"
                         % (i["object"], i["current"], var, i["desired"]))
    more = "; %d more conflict(s) in the items" % (len(notes) - 2) if len(notes) > 2 else ""
    return "%s%s; then run update-grub (the collection never rewrites the admin's GRUB files)" % (
        "; ".join(parts), more)


def remaining(tokens, present, absent):
    """Drift items for what the next boot's command line still lacks or has (object ``bootloader``)."""
    return [{"concern": "cmdline", "object": "bootloader", "key": k, "current": cur, "desired": want}
            for k, cur, want in deviations(tokens, present, absent)]
