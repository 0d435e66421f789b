# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who can change what root runs at boot: the ownership and mode check of the boot-time applier's inputs.

Root runs ``gpufabric-apply`` at boot and on every RDMA device registration. Whoever can change its script, its
library (the copy of these module_utils), or the state it applies (``/etc/gpufabric``) runs code as root or sets
the fabric. So each of these paths, and every directory on the way to it from ``/``, must leave that to root:

- a path the collection installs (``paths`` given to :func:`findings`): a regular file or a directory, not a
  symlink, owned by uid 0 and gid 0, not writable by group or others;
- a directory on the way (``/``, ``/etc``, ``/usr/local/sbin``, the collection does not own them): owned by uid 0,
  not writable by others (unless it is sticky, like ``/tmp``), and not writable by its group unless that group is
  gid 0. A symlink on the way is followed (its own directory was checked) and the directories it leads to are
  checked in turn.

``findings`` says what is wrong per path (for ``fabric_persist``'s drift items), ``unsafe`` the same as one line per
path (for the applier's log), ``running_code`` which files the applier is running from. Paths are host paths below
the sysroot and the walk stops at its root; code running from outside the sysroot (a checkout, in development) is
checked on the real file system. Plain Python: no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import sys

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

PKG = "ansible_collections.gpufabric.node.plugins.module_utils"
MAX_LINKS = 40
# the applier's exit code when it refuses to run
RC_REFUSED = 3
# what the applier applies: the state directory and the files it reads there
STATE_PATHS = (state.STATE_DIR, state.STATE_FILE, acs.STATE_FILE, routing.STATE_FILE)


def _mode(st):
    return stat.S_IMODE(st.st_mode)


def kind(st):
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "special file"


def _issues(st, managed):
    """[(code, text)]: what lets a non-root user change this file or directory; [] when nothing does.

    code: owner (uid not 0), group (gid not 0, for the collection's own paths), others_write, group_write.
    A sticky directory of root's (``/tmp``) may be writable by others on the way: nobody but root can rename or
    remove an entry of root's there, and the next component is checked for being root's."""
    out = []
    mode = _mode(st)
    if st.st_uid != 0:
        out.append(("owner", "owned by uid %d, not root" % st.st_uid))
    if managed and st.st_gid != 0:
        out.append(("group", "group is gid %d, not root" % st.st_gid))
    if mode & stat.S_IWOTH and (managed or not (mode & stat.S_ISVTX and st.st_uid == 0)):
        out.append(("others_write", "writable by others"))
    if mode & stat.S_IWGRP and (managed or st.st_gid != 0):
        out.append(("group_write", "writable by group %d" % st.st_gid))
    return out


def _finding(path, st, managed, issues, target=None):
    return {"path": path, "kind": kind(st), "uid": st.st_uid, "gid": st.st_gid, "mode": _mode(st),
            "managed": managed, "codes": [c for c, _t in issues], "issues": [t for _c, t in issues],
            "target": target}


class _Walk(object):
    """Checks paths below one sysroot; every directory is looked at once."""

    def __init__(self, sysroot, managed):
        self.sysroot = sysroot
        self.managed = set(managed)
        self.out = []
        self.seen = set()
        # directory -> its canonical host path (None: missing or not a directory); the payload's files share their
        # directories, and a walk looks at each once
        self.chased = {}

    def _note(self, path, st, issues, target=None):
        if issues and path not in self.seen:
            self.out.append(_finding(path, st, path in self.managed, issues, target))
        self.seen.add(path)

    def _dir(self, path, st):
        if path not in self.seen:
            self._note(path, st, _issues(st, path in self.managed))

    def chase(self, path):
        """The canonical host path of the directory ``path``, each directory on the way checked; None when a
        component does not exist (nothing below it exists either) or is not a directory."""
        if path not in self.chased:
            self.chased[path] = self._chase(path)
        return self.chased[path]

    def _chase(self, path):
        todo = [c for c in path.split("/") if c and c != "."][::-1]
        cur = "/"
        try:
            self._dir(cur, os.lstat(self.sysroot.path(cur)))
        except OSError:
            return None
        links = 0
        while todo:
            name = todo.pop()
            if name == "..":
                cur = os.path.dirname(cur)
                continue
            nxt = os.path.join(cur, name)
            try:
                st = os.lstat(self.sysroot.path(nxt))
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                try:
                    target = os.readlink(self.sysroot.path(nxt))
                except OSError:
                    return None
                if links > MAX_LINKS:
                    self._note(nxt, st, [("loop", "more than %d symlinks on the way (a loop?)" % MAX_LINKS)], target)
                    return None
                if target.startswith("/"):
                    cur = "/"
                todo.extend([c for c in target.split("/") if c and c != "."][::-1])
                continue
            if not stat.S_ISDIR(st.st_mode):
                self._note(nxt, st, [("not_dir", "not a directory")])
                return None
            self._dir(nxt, st)
            cur = nxt
        return cur

    def leaf(self, path):
        """Check one of the collection's paths: the directories on the way, then the path itself."""
        if path == "/":
            self.chase("/")
            return
        parent = self.chase(os.path.dirname(path))
        if parent is None:
            return
        real = os.path.join(parent, os.path.basename(path))
        try:
            st = os.lstat(self.sysroot.path(real))
        except OSError:
            return
        if real != path and real not in self.managed:
            # reached through a symlinked directory: judged where it really is, as the collection's
            self.managed.add(real)
            self.seen.discard(real)
            self.out = [f for f in self.out if f["path"] != real]
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(self.sysroot.path(real))
            except OSError:
                target = "?"
            self._note(real, st, [("symlink", "a symlink (to %s), not what is installed there" % target)], target)
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            self._note(real, st, [("special", "a %s, not a regular file or directory" % kind(st))])
        else:
            self._note(real, st, _issues(st, True))


def findings(sysroot, paths):
    """What lets a non-root user change ``paths`` (host paths below ``sysroot``) or swap them.

    Returns a list of {"path", "kind" (file, directory, symlink, special file), "uid", "gid", "mode" (int),
    "managed" (True for one of ``paths``, False for a directory on the way), "codes" (owner, group, others_write,
    group_write, symlink, special, not_dir, loop), "issues": [the same in words], "target" (of a symlink)}, one per
    path at most, in the order found. Paths that do not exist are not reported (their directories are).
    """
    norm = [os.path.normpath("/" + p.lstrip("/")) for p in paths]
    walk = _Walk(sysroot, norm)
    for p in norm:
        walk.leaf(p)
    return walk.out


def describe(f):
    """One line naming the file, what is wrong, its owner and mode."""
    return "%s: %s (%s, owner %d:%d, mode %04o)" % (f["path"], "; ".join(f["issues"]), f["kind"], f["uid"],
                                                    f["gid"], f["mode"])


def unsafe(sysroot, paths):
    """[reason] for every path in ``paths`` (or directory on the way to it) that a non-root user could change."""
    return [describe(f) for f in findings(sysroot, paths)]


def running_code(modules=None, script=None):
    """Real paths of the code the applier runs: ``script``, then every loaded module of this collection's
    module_utils (and its package ``__init__`` files), with the bytecode Python would load instead of them."""
    modules = sys.modules if modules is None else modules
    out = [os.path.abspath(script)] if script else []
    for name in sorted(modules):
        mod = modules[name]
        if mod is None or not (name == PKG or name.startswith(PKG + ".") or PKG.startswith(name + ".")):
            continue
        for attr in ("__file__", "__cached__"):
            p = getattr(mod, attr, None)
            if p and (attr == "__file__" or os.path.exists(p)):
                p = os.path.abspath(p)
                if p not in out:
                    out.append(p)
    return out


def check_applier(sysroot, code, state_paths):
    """[reason] the applier must not run: its code (real paths) and the state it applies (host paths).

    Code below the sysroot is checked there up to its root; code outside it (a checkout) on the real file system.
    """
    inside = []
    outside = []
    for p in code:
        host = sysroot.unroot(p)
        if sysroot.is_host or host != os.path.abspath(p) or p == sysroot.root:
            inside.append(host)
        else:
            outside.append(p)
    reasons = unsafe(sysroot, inside + list(state_paths))
    if outside:
        reasons += unsafe(Sysroot("/"), outside)
    return reasons


def refuse(sysroot, script=None, log=None, modules=None):
    """The applier's entry check: RC_REFUSED after logging one line per unsafe file, None when all is safe."""
    reasons = check_applier(sysroot, running_code(modules, script), STATE_PATHS)
    for r in reasons:
        (log or (lambda line: None))("error: refusing to run: %s" % r)
    return RC_REFUSED if reasons else None
