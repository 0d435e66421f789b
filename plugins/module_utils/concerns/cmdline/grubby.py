# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The grubby backend of the kernel command line (EL with Boot Loader Spec entries).

``grubby --info=ALL`` is read and only the difference is applied with ``grubby --update-kernel=...
--args=... --remove-args=...``; grubby-bls edits every entry's ``options`` line.

``/etc/kernel/cmdline`` is kept in step: kernel-install (run by the kernel package's scriptlets) writes the BLS entry
of a kernel installed later from that file (without it, from ``/proc/cmdline``, which lacks the arguments until the
next boot). When it is missing it is created from the default entry (``root=`` and its arguments).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.detect import KERNEL_CMDLINE
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.args import (
    CmdlineError,
    Plan,
    _check,
    join_kernel,
    merge,
    split_cmdline,
    token_diff,
)


def parse_grubby_info(text):
    """``grubby --info=...`` output -> list of entry dicts (index as int, quotes removed)."""
    entries = []
    cur = None
    for line in (text or "").splitlines():
        line = line.strip()
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1]
        if k == "index":
            cur = {"index": int(v)}
            entries.append(cur)
        elif cur is not None:
            cur[k] = v
    return entries


class GrubbyBackend(object):
    """EL: read with ``grubby --info=ALL``, change with ``grubby --update-kernel=... --args --remove-args``."""

    name = "grubby"
    max_passes = 3

    def __init__(self, sysroot, run, bin_path):
        self.sysroot = sysroot
        self.run = run
        self.grubby = bin_path("grubby")
        if not self.grubby:
            raise CmdlineError("grubby was not found in PATH; install the grubby package")

    def entries(self):
        out = _check(self.run, [self.grubby, "--info=ALL"], "grubby --info=ALL")
        ents = [e for e in parse_grubby_info(out) if e.get("kernel") and "args" in e]
        if not ents:
            raise CmdlineError("grubby --info=ALL lists no kernel entry")
        for e in ents:
            e["tokens"] = split_cmdline(e["args"])
        return ents

    def default_kernel(self):
        out = _check(self.run, [self.grubby, "--default-kernel"], "grubby --default-kernel")
        return out.strip().splitlines()[-1].strip() if out.strip() else None

    def _default_entry(self, ents):
        dk = self.default_kernel()
        for e in ents:
            if e["kernel"] == dk:
                return e
        return ents[0]

    @staticmethod
    def _todo(ents, present, absent):
        """(kernel, added, removed) for every boot entry whose arguments differ from the merged ones."""
        todo = []
        for e in ents:
            new = merge(e["tokens"], present, absent)
            if new != e["tokens"]:
                added, removed = token_diff(e["tokens"], new)
                todo.append((e["kernel"], added, removed))
        return todo

    def plan(self, present, absent):
        ents = self.entries()
        default = self._default_entry(ents)
        self.todo = self._todo(ents, present, absent)
        new_default = merge(default["tokens"], present, absent)
        plan = Plan(default["tokens"], new_default, 'args="%s"\n' % default["args"],
                    'args="%s"\n' % join_kernel(new_default),
                    "grubby default entry %s" % default["kernel"])
        self.default = default
        plan.root = default.get("root")
        self.kc_before, self.kc_after = self._kernel_cmdline(default, new_default, present, absent)
        plan.kernel_cmdline = {"path": KERNEL_CMDLINE, "before": self.kc_before, "after": self.kc_after,
                               "action": "unchanged" if self.kc_before == self.kc_after else "would change"}
        plan.changed = bool(self.todo) or self.kc_before != self.kc_after
        return plan

    def _kernel_cmdline(self, default, new_default, present, absent):
        """(tokens of /etc/kernel/cmdline or None, tokens it must have)."""
        text = self.sysroot.read(KERNEL_CMDLINE)
        if text is None:
            base = (["root=%s" % default["root"]] if default.get("root") else []) + list(new_default)
            # GRUB variables of the BLS options ($tuned_params) are kernel-install's to add, not the file's
            return None, [t for t in base if not t.startswith(("BOOT_IMAGE=", "$"))]
        before = split_cmdline(text)
        return before, merge(before, present, absent)

    def _write_kernel_cmdline(self, plan):
        if self.kc_before != self.kc_after:
            self.sysroot.write_file_atomic(KERNEL_CMDLINE, join_kernel(self.kc_after) + "\n", 0o644)
            plan.kernel_cmdline["action"] = "written" if self.kc_before is not None else "created"

    def _commands(self, nents):
        groups = {}
        for kernel, added, removed in self.todo:
            groups.setdefault((tuple(added), tuple(removed)), []).append(kernel)
        cmds = []
        for (added, removed), kernels in sorted(groups.items()):
            targets = ["ALL"] if len(groups) == 1 and len(kernels) == nents else kernels
            for target in targets:
                argv = [self.grubby, "--update-kernel=%s" % target]
                if added:
                    argv.append("--args=%s" % join_kernel(added))
                if removed:
                    argv.append("--remove-args=%s" % join_kernel(removed))
                cmds.append(argv)
        return cmds

    def apply(self, plan, present, absent):
        self._write_kernel_cmdline(plan)
        for _pass in range(self.max_passes):
            ents = self.entries()
            self.todo = self._todo(ents, present, absent)
            if not self.todo:
                # report what grubby really wrote (it appends new arguments at the end)
                for e in ents:
                    if e["kernel"] == self.default["kernel"]:
                        plan.after = list(e["tokens"])
                        plan.added, plan.removed = token_diff(plan.before, plan.after)
                return
            for argv in self._commands(len(ents)):
                plan.actions.append(" ".join(argv[1:]))
                _check(self.run, argv, "grubby")
        left = [k for k, _a, _r in self.todo]
        raise CmdlineError("grubby did not converge after %d passes for %s" % (self.max_passes, ", ".join(left)))
