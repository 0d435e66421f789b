# -*- coding: utf-8 -*-
"""nodelock: the one flock that serialises the modules that write node state and the boot-time applier."""
from __future__ import absolute_import, division, print_function

import json
import os
import stat
import subprocess
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", ".build"))
HOLDER = """
import sys
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
with nodelock.NodeLock(Sysroot(sys.argv[1]), sys.argv[2], timeout=float(sys.argv[3])):
    print("held", flush=True)
    sys.stdin.read()
"""
TRY = """
import sys
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
try:
    with nodelock.NodeLock(Sysroot(sys.argv[1]), "probe", timeout=0):
        print("got it")
except nodelock.NodeLockError as e:
    print("busy: %s" % e)
"""


def python(code, *args, **kw):
    env = dict(os.environ, PYTHONPATH=BUILD)
    return subprocess.Popen([sys.executable, "-c", code] + list(args), env=env, universal_newlines=True,
                            stdout=subprocess.PIPE, **kw)


class Holder(object):
    def __init__(self, root, owner="dcb_qos", timeout=0):
        self.proc = python(HOLDER, root, owner, str(timeout), stdin=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == "held"
        self.pid = self.proc.pid

    def release(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def probe(root):
    out, _err = python(TRY, root).communicate(timeout=30)
    return out.strip()


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "root")


def lock_path(root):
    return os.path.join(root, "run/gpufabric/lock")


def test_holder_is_recorded_and_removed(root):
    with nodelock.NodeLock(Sysroot(root), "dcb_qos") as lock:
        with open(lock_path(root)) as f:
            info = json.load(f)
        assert info["owner"] == "dcb_qos" and info["pid"] == os.getpid() and info["since"].endswith("Z")
        assert lock.waited_s < 1
        assert stat.S_IMODE(os.stat(os.path.dirname(lock_path(root))).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(lock_path(root)).st_mode) == 0o600
        assert probe(root).startswith("busy: the node lock /run/gpufabric/lock is held by dcb_qos (pid %d) since "
                                      % os.getpid())
    # a run leaves nothing behind but the directory
    assert not os.path.lexists(lock_path(root)) and os.listdir(os.path.dirname(lock_path(root))) == []
    assert probe(root) == "got it"


def test_waiter_times_out_naming_the_other_process(root):
    h = Holder(root, "gpufabric-apply --device mlx5_0")
    try:
        with pytest.raises(nodelock.NodeLockError) as e:
            nodelock.NodeLock(Sysroot(root), "rail_sysctl", timeout=0.3).acquire()
        msg = str(e.value)
        assert "held by gpufabric-apply --device mlx5_0 (pid %d) since " % h.pid in msg
        assert "rail_sysctl waited 0." in msg or "rail_sysctl waited 1." in msg
    finally:
        h.release()
    with nodelock.NodeLock(Sysroot(root), "rail_sysctl", timeout=0):
        pass


def test_waiter_gets_the_lock_when_the_holder_lets_go(root):
    h = Holder(root)
    waiter = python(TRY.replace('timeout=0', 'timeout=30'), root)
    h.release()
    out, _err = waiter.communicate(timeout=60)
    assert out.strip() == "got it"


def test_bounded_wait_polls_until_the_deadline(root):
    h = Holder(root)
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s
    try:
        with pytest.raises(nodelock.NodeLockError):
            nodelock.NodeLock(Sysroot(root), "pcie_acs", timeout=1.0, sleep=sleep, clock=lambda: now[0]).acquire()
    finally:
        h.release()
    assert abs(sum(slept) - 1.0) < 1e-9 and max(slept) <= nodelock.POLL_S


def test_stale_record_of_a_dead_process_does_not_block(root):
    dead = python("pass")
    dead.wait()
    os.makedirs(os.path.dirname(lock_path(root)), 0o700)
    with open(lock_path(root), "w") as f:
        f.write(json.dumps({"owner": "dcb_qos", "pid": dead.pid, "since": "2026-01-01T00:00:00Z"}))
    os.chmod(lock_path(root), 0o600)
    with nodelock.NodeLock(Sysroot(root), "nccl_config", timeout=0):
        with open(lock_path(root)) as f:
            assert json.load(f)["owner"] == "nccl_config"


@pytest.mark.parametrize("text, words", [
    ("", "a process that has not recorded itself in the lock file yet"),
    ("garbage", "a process that has not recorded itself in the lock file yet"),
    ('{"owner": "x"}', "a process that has not recorded itself in the lock file yet"),
    ('{"owner": "kernel_cmdline", "pid": %(me)d, "since": "T"}', "kernel_cmdline (pid %(me)d) since T"),
    ('{"owner": "kernel_cmdline", "pid": %(dead)d, "since": "T"}',
     "a process that did not record itself; the lock file still names kernel_cmdline (pid %(dead)d, no longer "
     "running) since T"),
])
def test_describe_holder(text, words):
    dead = python("pass")
    dead.wait()
    values = {"me": os.getpid(), "dead": dead.pid}
    assert nodelock.describe_holder(text % values) == words % values


def test_nested_use_in_one_process_does_not_deadlock(root):
    outer = nodelock.NodeLock(Sysroot(root), "gpufabric-apply", timeout=0)
    with outer:
        with nodelock.NodeLock(Sysroot(root), "dcb", timeout=0):
            pass
        # the inner exit did not let go of the outer hold
        assert probe(root).startswith("busy: ")
        with open(lock_path(root)) as f:
            assert json.load(f)["owner"] == "gpufabric-apply"
    assert probe(root) == "got it"


def test_disabled_takes_nothing(root):
    h = Holder(root)
    try:
        with nodelock.NodeLock(Sysroot(root), "check mode", timeout=0, enabled=False):
            pass
    finally:
        h.release()


def test_unsafe_directory_or_file_is_refused(root):
    d = os.path.dirname(lock_path(root))
    os.makedirs(d)
    os.chmod(d, 0o777)
    with pytest.raises(nodelock.NodeLockError, match="directory .* writable by group or others"):
        nodelock.NodeLock(Sysroot(root), "x", timeout=0).acquire()
    os.chmod(d, 0o700)
    os.symlink("/tmp/elsewhere", lock_path(root))
    with pytest.raises(nodelock.NodeLockError, match="is a symlink"):
        nodelock.NodeLock(Sysroot(root), "x", timeout=0).acquire()
    os.unlink(lock_path(root))
    with open(lock_path(root), "w"):
        pass
    os.chmod(lock_path(root), 0o666)
    with pytest.raises(nodelock.NodeLockError, match="file .* writable by group or others"):
        nodelock.NodeLock(Sysroot(root), "x", timeout=0).acquire()


@pytest.mark.parametrize("raw, want", [
    (None, nodelock.DEFAULT_TIMEOUT_S), ("", nodelock.DEFAULT_TIMEOUT_S), ("0", 0.0), ("2.5", 2.5),
    ("3600", 3600.0), ("-1", None), ("3601", None), ("nan", None), ("soon", None), ("inf", None),
])
def test_timeout_from_env(raw, want):
    env = {} if raw is None else {nodelock.TIMEOUT_ENV: raw}
    if want is None:
        with pytest.raises(nodelock.NodeLockError, match=nodelock.TIMEOUT_ENV):
            nodelock.timeout_from_env(environ=env)
    else:
        assert nodelock.timeout_from_env(environ=env) == want


def test_applier_fails_naming_the_holder_and_check_mode_reads_anyway(root):
    h = Holder(root, "dcb_qos")
    try:
        rc, summary = applier.run_applier(Sysroot(root), lambda argv: (127, "", ""), wait_timeout=0,
                                          lock_timeout=0.2)
        assert rc == applier.RC_FAILED
        assert len(summary["errors"]) == 1
        assert summary["errors"][0].startswith("error: lock: the node lock /run/gpufabric/lock is held by dcb_qos "
                                               "(pid %d) since " % h.pid)
        assert "gpufabric-apply waited" in summary["errors"][0]
        rc, summary = applier.run_applier(Sysroot(root), lambda argv: (127, "", ""), check_mode=True,
                                          wait_timeout=0, lock_timeout=0)
        assert rc == applier.RC_OK and summary["errors"] == []
    finally:
        h.release()
    rc, summary = applier.run_applier(Sysroot(root), lambda argv: (127, "", ""), wait_timeout=0, lock_timeout=0)
    assert rc == applier.RC_OK and summary["skipped"]


def test_applier_lock_wait_option_is_bounded():
    with pytest.raises(SystemExit):
        applier.main(["--lock-wait", "-1"])
    with pytest.raises(SystemExit):
        applier.main(["--lock-wait", "nan"])


COUNTER = """
import os, sys, time
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
path = os.path.join(sys.argv[1], "counter")
for _ in range(20):
    with nodelock.NodeLock(Sysroot(sys.argv[1]), "counter", timeout=60):
        with open(path) as f:
            n = int(f.read())
        time.sleep(0.001)
        with open(path, "w") as f:
            f.write(str(n + 1))
"""


def test_contenders_never_hold_it_at_once(root):
    """Read-modify-write of a counter by four processes under the lock, each holder removing the lock file when
    it lets go: no update is lost."""
    os.makedirs(root)
    with open(os.path.join(root, "counter"), "w") as f:
        f.write("0")
    procs = [python(COUNTER, root) for _i in range(4)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    with open(os.path.join(root, "counter")) as f:
        assert f.read() == "80"
