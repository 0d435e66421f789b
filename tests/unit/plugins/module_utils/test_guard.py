# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guard: who but root could change what the boot-time applier runs or applies (real files, real owners)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import types

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import guard
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

NOBODY = 65534
SCRIPT = "/usr/local/sbin/gpufabric-apply"


@pytest.fixture
def root(tmp_path):
    """A node root with the applier's script, a library file and the state file, all root's, 0755/0644."""
    r = tmp_path / "root"
    for d in ("usr/local/sbin", "usr/local/lib/gpufabric/pkg", "etc/gpufabric", "opt/real"):
        (r / d).mkdir(parents=True)
    for p, mode in ((SCRIPT, 0o755), ("/usr/local/lib/gpufabric/pkg/applier.py", 0o644),
                    ("/etc/gpufabric/state.json", 0o644), ("/opt/real/file", 0o644)):
        (r / p.lstrip("/")).write_text("x\n")
        os.chmod(str(r / p.lstrip("/")), mode)
    for dirpath, dirnames, _files in os.walk(str(r)):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    os.chmod(str(r), 0o755)
    return str(r)


def at(root, path):
    return os.path.join(root, path.lstrip("/"))


def chmod(path, mode):
    return lambda root: os.chmod(at(root, path), mode)


def chown(path, uid, gid=0):
    return lambda root: os.lchown(at(root, path), uid, gid)


def both(*fns):
    def run(root):
        for fn in fns:
            fn(root)
    return run


def swap_symlink(path, target):
    def run(root):
        os.unlink(at(root, path))
        os.symlink(target, at(root, path))
    return run


def dir_symlink(path, target):
    """Move the directory ``path`` to ``target`` and leave a symlink behind."""
    def run(root):
        os.rename(at(root, path), at(root, target))
        os.symlink(target, at(root, path))
    return run


def loop(root):
    os.symlink("b", at(root, "/etc/a"))
    os.symlink("a", at(root, "/etc/b"))


def file_for_dir(root):
    os.rename(at(root, "/usr/local/sbin"), at(root, "/usr/local/sbin.d"))
    with open(at(root, "/usr/local/sbin"), "w") as f:
        f.write("")
    os.chmod(at(root, "/usr/local/sbin"), 0o644)


CASES = [
    # title, tamper, paths, expected reasons (substrings, one list per reason, in order)
    ("all root's", None, [SCRIPT], []),
    ("file writable by others", chmod(SCRIPT, 0o757), [SCRIPT],
     [[SCRIPT + ": writable by others", "owner 0:0, mode 0757"]]),
    ("file writable by group", chmod(SCRIPT, 0o775), [SCRIPT], [[SCRIPT + ": writable by group 0", "mode 0775"]]),
    ("file owned by nobody", chown(SCRIPT, NOBODY), [SCRIPT],
     [[SCRIPT + ": owned by uid 65534, not root", "owner 65534:0"]]),
    ("file of another group", chown(SCRIPT, 0, 100), [SCRIPT], [[SCRIPT + ": group is gid 100", "owner 0:100"]]),
    ("symlink swapped in", swap_symlink(SCRIPT, "/opt/real/file"), [SCRIPT],
     [[SCRIPT + ": a symlink (to /opt/real/file)"]]),
    ("symlink swapped in, dangling", swap_symlink(SCRIPT, "/nowhere"), [SCRIPT], [[SCRIPT + ": a symlink"]]),
    ("parent writable by others", chmod("/usr/local/sbin", 0o777), [SCRIPT],
     [["/usr/local/sbin: writable by others", "directory, owner 0:0, mode 0777"]]),
    ("grandparent owned by nobody", chown("/usr/local", NOBODY), [SCRIPT],
     [["/usr/local: owned by uid 65534", "directory, owner 65534:0"]]),
    ("the root writable by others", chmod("/", 0o777), [SCRIPT], [["/: writable by others"]]),
    ("sticky directory of root's on the way: fine", chmod("/usr/local", 0o1777), [SCRIPT], []),
    ("sticky directory of nobody's on the way", both(chown("/usr/local", NOBODY), chmod("/usr/local", 0o1777)),
     [SCRIPT], [["/usr/local: owned by uid 65534, not root; writable by others"]]),
    ("sticky is no excuse for the collection's directory", chmod("/etc/gpufabric", 0o1777),
     ["/etc/gpufabric"], [["/etc/gpufabric: writable by others"]]),
    ("parent group-writable by root's group: fine", chmod("/usr/local/sbin", 0o775), [SCRIPT], []),
    ("parent of another group, group-writable", both(chown("/usr/local/sbin", 0, 50), chmod("/usr/local/sbin", 0o775)),
     [SCRIPT], [["/usr/local/sbin: writable by group 50"]]),
    ("parent of another group, not writable: fine", chown("/usr/local/sbin", 0, 50), [SCRIPT], []),
    ("parent dir symlinked to a safe dir: fine", dir_symlink("/usr/local/sbin", "/opt/sbin"), [SCRIPT], []),
    ("parent dir symlinked to a dir others can write",
     both(dir_symlink("/usr/local/sbin", "/opt/sbin"), chmod("/opt/sbin", 0o777)), [SCRIPT],
     [["/opt/sbin: writable by others"]]),
    ("file reached through a symlinked dir is judged where it is",
     both(dir_symlink("/usr/local/sbin", "/opt/sbin"), chmod("/opt/sbin/gpufabric-apply", 0o666)), [SCRIPT],
     [["/opt/sbin/gpufabric-apply: writable by others"]]),
    ("a file where a directory is", file_for_dir, [SCRIPT], [["/usr/local/sbin: not a directory"]]),
    ("symlink loop on the way", loop, ["/etc/a/state.json"], [["more than 40 symlinks"]]),
    ("missing file: its directories still count", chmod("/etc/gpufabric", 0o777), ["/etc/gpufabric/routing.json"],
     [["/etc/gpufabric: writable by others"]]),
    ("the collection's directory: its group counts", chmod("/etc/gpufabric", 0o775),
     ["/etc/gpufabric", "/etc/gpufabric/state.json"], [["/etc/gpufabric: writable by group 0"]]),
    ("the collection's directory listed after a file in it", chmod("/etc/gpufabric", 0o775),
     ["/etc/gpufabric/state.json", "/etc/gpufabric"], [["/etc/gpufabric: writable by group 0"]]),
    ("several paths, one line each", both(chmod(SCRIPT, 0o777), chown("/etc/gpufabric/state.json", NOBODY)),
     [SCRIPT, "/etc/gpufabric/state.json"],
     [[SCRIPT + ": writable by others; writable by group 0"], ["/etc/gpufabric/state.json: owned by uid 65534"]]),
]


@pytest.mark.parametrize("tamper,paths,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unsafe(root, tamper, paths, expected):
    if tamper:
        tamper(root)
    reasons = guard.unsafe(Sysroot(root), paths)
    assert len(reasons) == len(expected), reasons
    for reason, parts in zip(reasons, expected):
        for part in parts:
            assert part in reason, (part, reason)
        assert "\n" not in reason


def test_findings_are_structured(root):
    chmod(SCRIPT, 0o646)(root)
    chown("/usr/local/sbin", NOBODY)(root)
    found = guard.findings(Sysroot(root), [SCRIPT])
    assert [(f["path"], f["managed"], f["codes"], f["mode"], f["uid"]) for f in found] == [
        ("/usr/local/sbin", False, ["owner"], 0o755, NOBODY),
        (SCRIPT, True, ["others_write"], 0o646, 0)]


def test_running_code_lists_script_modules_and_bytecode(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "applier.py").write_text("")
    (lib / "applier.pyc").write_text("")
    (lib / "__init__.py").write_text("")
    mods = {
        guard.PKG + ".applier": types.SimpleNamespace(__file__=str(lib / "applier.py"),
                                                      __cached__=str(lib / "applier.pyc")),
        guard.PKG + ".state": types.SimpleNamespace(__file__=str(lib / "state.py"),
                                                    __cached__=str(lib / "missing.pyc")),
        "ansible_collections": types.SimpleNamespace(__file__=str(lib / "__init__.py")),
        "ansible_collections.gpufabric.node.plugins.modules.x": types.SimpleNamespace(__file__="/elsewhere/x.py"),
        "json": types.SimpleNamespace(__file__="/usr/lib/python3/json/__init__.py"),
        "namespace_pkg": None,
    }
    assert guard.running_code(mods, script=str(tmp_path / "sbin" / "gpufabric-apply")) == [
        str(tmp_path / "sbin" / "gpufabric-apply"), str(lib / "__init__.py"), str(lib / "applier.py"),
        str(lib / "applier.pyc"), str(lib / "state.py")]


def test_check_applier_code_inside_and_outside_the_sysroot(root, tmp_path):
    outside = tmp_path / "checkout" / "applier.py"
    outside.parent.mkdir()
    outside.write_text("")
    os.chmod(str(outside), 0o666)
    chmod(SCRIPT, 0o757)(root)
    reasons = guard.check_applier(Sysroot(root), [at(root, SCRIPT), str(outside)], ["/etc/gpufabric/state.json"])
    assert len(reasons) == 2
    assert reasons[0].startswith(SCRIPT + ": writable by others"), "inside: named by its host path"
    assert reasons[1].startswith(str(outside) + ": writable by others"), "outside: checked on the real file system"


def test_refuse_logs_one_line_per_file(root):
    chmod("/etc/gpufabric/state.json", 0o666)(root)
    lines = []
    rc = guard.refuse(Sysroot(root), script=at(root, SCRIPT), log=lines.append, modules={})
    assert rc == guard.RC_REFUSED
    assert lines == ["error: refusing to run: /etc/gpufabric/state.json: writable by others; writable by group 0 "
                     "(file, owner 0:0, mode 0666)"]
    chmod("/etc/gpufabric/state.json", 0o644)(root)
    assert guard.refuse(Sysroot(root), script=at(root, SCRIPT), log=lines.append, modules={}) is None
