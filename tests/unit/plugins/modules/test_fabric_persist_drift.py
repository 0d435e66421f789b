# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_persist: each way the installed applier can drift, seen in check mode and fixed by a real run.

The node is the simulated tree of test_fabric_persist (its systemctl/udevadm emulators); the tampering is what an
admin or an intruder does on a real node: systemctl disable/mask, rm/edit of a file, chmod o+w, chown to nobody.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from gpufabric_sim import runtime
from modrunner import run_module
# node: the simulated node fixture
from test_fabric_persist import LIB, node  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fabric_persist

NOBODY = 65534
UNIT = "gpufabric-apply.service"
SCRIPT = "/usr/local/sbin/gpufabric-apply"
RULE = "/etc/udev/rules.d/90-gpufabric-rdma.rules"
UNIT_FILE = "/etc/systemd/system/" + UNIT
TEMPLATE_FILE = "/etc/systemd/system/gpufabric-apply@.service"
APPLIER = LIB + "/boot/applier.py"
STATE = "/etc/gpufabric/state.json"


def at(root, path):
    return os.path.join(root, path.lstrip("/"))


def systemctl(*argv):
    def run(root, bindir):
        p = subprocess.run([os.path.join(bindir, "systemctl")] + list(argv), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, check=False)
        assert p.returncode == 0, p.stderr
    return run


def chmod(path, mode):
    return lambda root, _b: os.chmod(at(root, path), mode)


def chown(path, uid, gid=0):
    return lambda root, _b: os.lchown(at(root, path), uid, gid)


def remove(path):
    return lambda root, _b: os.unlink(at(root, path))


def append(path, text):
    def run(root, _b):
        with open(at(root, path), "a") as f:
            f.write(text)
    return run


def write(path, text, mode=0o644):
    def run(root, _b):
        os.makedirs(os.path.dirname(at(root, path)), exist_ok=True)
        with open(at(root, path), "w") as f:
            f.write(text)
        os.chmod(at(root, path), mode)
    return run


def symlink(path, target):
    def run(root, _b):
        if os.path.lexists(at(root, path)):
            os.unlink(at(root, path))
        os.symlink(target, at(root, path))
    return run


def steps(*fns):
    def run(root, bindir):
        for fn in fns:
            fn(root, bindir)
    return run


def recorded(root, _b):
    state.record(Sysroot(root), "rdma_cm", {"devices": ["mlx5_0"], "tos": 106}, False)


def snapshot(root):
    """Content, types and modes of the tree (runtime.tree_hash) and every owner."""
    owners = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames + filenames):
            st = os.lstat(os.path.join(dirpath, n))
            owners.append((os.path.join(dirpath, n), st.st_uid, st.st_gid))
    return runtime.tree_hash(root), owners


def unit_state(root, bindir):
    p = subprocess.run([os.path.join(bindir, "systemctl"), "is-enabled", UNIT], stdout=subprocess.PIPE,
                       universal_newlines=True, check=False)
    return p.stdout.strip()


USR_UNIT_DIR = {"unit_dir": "/usr/lib/systemd/system"}

# title, module args, tamper, expected drift items (object, key, current, desired; None: any), fixed by a real run,
# commands of the fix
CASES = [
    ("unit disabled", {}, systemctl("disable", UNIT),
     [(UNIT, "unit_file_state", "disabled", "enabled")], True, ["systemctl enable " + UNIT]),
    ("unit enabled for this boot only", {}, steps(systemctl("disable", UNIT), systemctl("enable", "--runtime", UNIT)),
     [(UNIT, "unit_file_state", "enabled-runtime", "enabled")], True, ["systemctl enable " + UNIT]),
    ("unit file replaced by a mask", {}, steps(remove(UNIT_FILE), systemctl("mask", UNIT)),
     [(UNIT_FILE, "type", "symlink to /dev/null", "file"), (UNIT, "unit_file_state", "masked", "enabled")], True,
     ["systemctl daemon-reload"]),
    ("unit below /usr masked in /etc", USR_UNIT_DIR, systemctl("mask", UNIT),
     [(UNIT, "unit_file_state", "masked", "enabled")], True, ["systemctl unmask " + UNIT]),
    ("unit below /usr masked in /run", USR_UNIT_DIR, systemctl("mask", "--runtime", UNIT),
     [(UNIT, "unit_file_state", "masked-runtime", "enabled")], True, ["systemctl unmask --runtime " + UNIT]),
    ("udev rule deleted", {}, remove(RULE), [(RULE, "content", "missing", None)], True,
     ["udevadm control --reload"]),
    ("udev rule edited", {}, append(RULE, 'ACTION=="add", RUN+="/bin/true"\n'), [(RULE, "content", None, None)],
     True, ["udevadm control --reload"]),
    ("boot unit edited", {}, append(UNIT_FILE, "ExecStartPre=/tmp/x\n"), [(UNIT_FILE, "content", None, None)], True,
     ["systemctl daemon-reload"]),
    ("template unit deleted", {}, remove(TEMPLATE_FILE), [(TEMPLATE_FILE, "content", "missing", None)], True,
     ["systemctl daemon-reload"]),
    ("script edited", {}, append(SCRIPT, "import os; os.system('id')\n"), [(SCRIPT, "content", None, None)], True, []),
    ("script writable by others", {}, chmod(SCRIPT, 0o757), [(SCRIPT, "mode", "0757", "0755")], True, []),
    ("script owned by nobody", {}, chown(SCRIPT, NOBODY), [(SCRIPT, "owner", "65534:0", "0:0")], True, []),
    ("script swapped for a symlink", {}, symlink(SCRIPT, "/tmp/evil"),
     [(SCRIPT, "type", "symlink to /tmp/evil", "file")], True, []),
    ("library file edited", {}, append(APPLIER, "\nRC_OK = 1\n"), [(APPLIER, "content", None, None)], True, []),
    ("library file writable by group", {}, chmod(APPLIER, 0o664), [(APPLIER, "mode", "0664", "0644")], True, []),
    ("library file of another group", {}, chown(APPLIER, 0, 100), [(APPLIER, "owner", "0:100", "0:0")], True, []),
    ("library file no longer in the collection", {}, write(LIB + "/old_concern.py", "import os\n"),
     [(LIB + "/old_concern.py", "content", "present", "absent")], True, []),
    ("library file of an older layout, in a package", {}, write(LIB + "/concerns/old/task.py", "import os\n"),
     [(LIB + "/concerns/old/task.py", "content", "present", "absent")], True, []),
    ("symlink planted in the library", {}, symlink(LIB + "/helper.py", "/tmp/helper.py"),
     [(LIB + "/helper.py", "content", "present", "absent")], True, []),
    ("library directory writable by others", {}, chmod(LIB, 0o777), [(LIB, "mode", "0777", "0755")], True, []),
    ("library top directory owned by nobody", {}, chown("/usr/local/lib/gpufabric", NOBODY),
     [("/usr/local/lib/gpufabric", "owner", "65534:0", "0:0")], True, []),
    ("bytecode writable by others", {}, write(LIB + "/__pycache__/applier.cpython-311.pyc", "", 0o666),
     [(LIB + "/__pycache__/applier.cpython-311.pyc", "mode", "0666", "0644")], True, []),
    ("state file writable by others", {}, steps(recorded, chmod(STATE, 0o666)), [(STATE, "mode", "0666", "0644")],
     True, []),
    ("state directory owned by nobody", {}, steps(recorded, chown("/etc/gpufabric", NOBODY, NOBODY)),
     [("/etc/gpufabric", "owner", "65534:65534", "0:0")], True, []),
    # directories the collection does not own: reported, never changed
    ("script directory writable by others", {}, chmod("/usr/local/sbin", 0o777),
     [("/usr/local/sbin", "mode", "0777", "0775")], False, []),
    ("unit directory owned by nobody", {}, chown("/etc/systemd/system", NOBODY),
     [("/etc/systemd/system", "owner", "65534:0", "0:0")], False, []),
    ("/etc group-writable by another group", {}, steps(chown("/etc", 0, 100), chmod("/etc", 0o775)),
     [("/etc", "mode", "0775", "0755")], False, []),
]
NO_DRIFT = [
    ("runtime mask hidden by the unit file in /etc", {}, systemctl("mask", "--runtime", UNIT)),
    ("/etc group-writable by root's group", {}, chmod("/etc", 0o775)),
    ("state file as the modules write it", {}, recorded),
    ("bytecode as Python writes it", {}, write(LIB + "/__pycache__/applier.cpython-311.pyc", "", 0o644)),
]


def matches(items, expected):
    for obj, key, current, desired in expected:
        found = [i for i in items if i["object"] == obj and i["key"] == key]
        assert found, "no %s %s in %s" % (obj, key, items)
        i = found[0]
        assert current is None or i["current"] == current, i
        assert desired is None or i["desired"] == desired, i
        assert i["concern"] == "persistence" and set(i) == {"concern", "object", "key", "current", "desired"}


def install(node, monkeypatch, args):
    res = run_module(fabric_persist, args, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    again = run_module(fabric_persist, args, check_mode=True, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["drift"] == [], again["drift"]
    assert again["concerns"]["persistence"] == {"status": "ok", "reason": None, "items": []}
    return res


@pytest.mark.parametrize("args,tamper,expected,fixable,fix_commands", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_drift_reported_then_fixed(node, monkeypatch, args, tamper, expected, fixable, fix_commands):
    root, _m, bindir = node
    install(node, monkeypatch, args)
    tamper(root, bindir)
    before = snapshot(root)

    check = run_module(fabric_persist, args, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert not check.get("failed"), check
    assert check["changed"] is fixable
    matches(check["drift"], expected)
    doc = check["concerns"]["persistence"]
    assert doc["status"] == "drift" and doc["items"] == check["drift"]
    assert snapshot(root) == before, "check mode wrote something"

    fix = run_module(fabric_persist, args, monkeypatch=monkeypatch)
    assert not fix.get("failed"), fix
    assert fix["changed"] is fixable
    assert fix["drift"] == check["drift"]
    assert fix["commands"] == fix_commands
    after = run_module(fabric_persist, args, check_mode=True, monkeypatch=monkeypatch)
    if fixable:
        assert fix["concerns"]["persistence"]["status"] == "ok" and fix["concerns"]["persistence"]["corrected"]
        assert after["drift"] == [] and after["concerns"]["persistence"]["status"] == "ok"
        assert unit_state(root, bindir) == "enabled"
    else:
        doc = fix["concerns"]["persistence"]
        assert doc["status"] == "drift" and "fix by hand" in doc["reason"]
        assert expected[0][0] in doc["reason"], "the reason names the directory"
        assert after["drift"] == check["drift"]
    assert after["changed"] is False
    second = run_module(fabric_persist, args, monkeypatch=monkeypatch)
    assert second["changed"] is False and second["commands"] == []


@pytest.mark.parametrize("args,tamper", [c[1:] for c in NO_DRIFT], ids=[c[0] for c in NO_DRIFT])
def test_no_drift(node, monkeypatch, args, tamper):
    root, _m, bindir = node
    install(node, monkeypatch, args)
    tamper(root, bindir)
    res = run_module(fabric_persist, args, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] is False and res["drift"] == [], res["drift"]
    assert res["concerns"]["persistence"]["status"] == "ok"


def test_fix_restores_the_exact_files(node, monkeypatch):
    root, _m, bindir = node
    install(node, monkeypatch, {})
    for fn in (chmod(SCRIPT, 0o777), chown(APPLIER, NOBODY, NOBODY), symlink(SCRIPT + ".x", "/tmp"),
               chmod(LIB, 0o777), systemctl("disable", UNIT), remove(RULE)):
        fn(root, bindir)
    os.unlink(at(root, SCRIPT + ".x"))
    res = run_module(fabric_persist, {}, monkeypatch=monkeypatch)
    assert res["changed"] is True
    actions = dict((f["path"], f["action"]) for f in res["files"])
    assert actions[SCRIPT] == "restored" and actions[APPLIER] == "restored" and actions[LIB] == "restored"
    assert actions[RULE] == "created"
    for path, mode in ((SCRIPT, 0o755), (APPLIER, 0o644), (LIB, 0o755), (RULE, 0o644)):
        st = os.lstat(at(root, path))
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, mode), path
    assert unit_state(root, bindir) == "enabled"


def test_check_mode_without_systemctl_reads_the_layout(node, monkeypatch):
    """No systemctl on the node: the unit file layout gives the same words as systemctl is-enabled."""
    root, _m, bindir = node
    install(node, monkeypatch, USR_UNIT_DIR)
    systemctl("mask", "--runtime", UNIT)(root, bindir)
    real = fabric_persist.AnsibleModule.get_bin_path
    monkeypatch.setattr(fabric_persist.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **kw: None if name == "systemctl" else real(self, name, *a, **kw))
    res = run_module(fabric_persist, USR_UNIT_DIR, check_mode=True, monkeypatch=monkeypatch)
    assert res["unit_file_state"] == "masked-runtime"
    matches(res["drift"], [(UNIT, "unit_file_state", "masked-runtime", "enabled")])
    assert res["commands"][:2] == ["systemctl unmask --runtime " + UNIT, "systemctl enable " + UNIT]
    # the rule names systemctl by the path it would have on a node that has it
    assert [(i["object"], i["key"]) for i in res["drift"] if i["object"] != UNIT] == [(RULE, "content")]
    fix = run_module(fabric_persist, USR_UNIT_DIR, monkeypatch=monkeypatch)
    assert fix["failed"] and "systemctl is not installed" in fix["msg"] and UNIT in fix["msg"]


LAYOUTS = [
    ("enabled", []),
    ("disabled", [systemctl("disable", UNIT)]),
    ("enabled for this boot", [systemctl("disable", UNIT), systemctl("enable", "--runtime", UNIT)]),
    ("masked", [systemctl("mask", UNIT)]),
    ("masked at runtime", [systemctl("mask", "--runtime", UNIT)]),
    ("masked by an empty file", [write("/etc/systemd/system/" + UNIT, "")]),
    ("static", [systemctl("disable", UNIT), write("/usr/lib/systemd/system/" + UNIT, "[Service]\nExecStart=/x\n")]),
    ("not found", [remove("/usr/lib/systemd/system/" + UNIT)]),
]


@pytest.mark.parametrize("tampers", [c[1] for c in LAYOUTS], ids=[c[0] for c in LAYOUTS])
def test_layout_agrees_with_systemctl(node, monkeypatch, tampers):
    root, _m, bindir = node
    install(node, monkeypatch, USR_UNIT_DIR)
    for fn in tampers:
        fn(root, bindir)
    assert persist.layout_state(Sysroot(root), UNIT) == unit_state(root, bindir)


def swapped_module(root, _b):
    """rdma_cm.py replaced by a symlink to a copy outside the node (the import still works)."""
    copy = os.path.join(os.path.dirname(root), "elsewhere_rdma_cm.py")
    with open(at(root, LIB + "/concerns/rdma_cm/manage.py")) as src, open(copy, "w") as dst:
        dst.write(src.read())
    symlink(LIB + "/concerns/rdma_cm/manage.py", copy)(root, _b)


@pytest.mark.parametrize("tamper,path", [
    (chmod(SCRIPT, 0o757), SCRIPT),
    (chown(APPLIER, NOBODY), APPLIER),
    (steps(recorded, chmod(STATE, 0o646)), STATE),
    (swapped_module, LIB + "/concerns/rdma_cm/manage.py"),
    (chmod(LIB, 0o757), LIB),
], ids=["script o+w", "library file of nobody", "state file o+w", "library file swapped for a symlink",
        "library directory o+w"])
def test_applier_refuses_a_tampered_file(node, monkeypatch, tamper, path):
    """The installed applier, run as systemd runs it, refuses before it applies anything."""
    root, _m, bindir = node
    sr = Sysroot(root)
    state.record(sr, "rdma_cm", {"devices": ["mlx5_0"], "tos": 106}, False)
    tos = at(root, "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos")
    os.makedirs(os.path.dirname(tos))
    with open(tos, "w") as f:
        f.write("0\n")
    install(node, monkeypatch, {"boot_wait": 0})
    tamper(root, bindir)
    p = subprocess.run([at(root, SCRIPT), "--wait", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    assert p.returncode == 3, (p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to run: %s: " % path), lines
    st = os.lstat(at(root, path))
    assert "owner %d:%d, mode %04o" % (st.st_uid, st.st_gid, st.st_mode & 0o7777) in lines[0]
    with open(tos) as f:
        assert f.read().strip() == "0", "nothing applied"
    # the persistence role's next run puts it right, and the applier runs again
    assert run_module(fabric_persist, {"boot_wait": 0}, monkeypatch=monkeypatch)["changed"] is True
    p = subprocess.run([at(root, SCRIPT), "--wait", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    assert p.returncode == 0, p.stderr
    with open(tos) as f:
        assert f.read().strip() == "106"
