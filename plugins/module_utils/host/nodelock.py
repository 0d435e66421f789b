# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node lock: one writer of node state at a time, modules and the boot-time applier alike.

Every module that changes the node (DCB, rdma_cm ToS, ACS, sysctls and routing, the kernel command line,
nccl.conf, the boot-time applier's files, the nvidia-fs kernel modules and ``rw_stats_enabled``) and the applier
(``applier.py``, every ``gpufabric-apply`` run) hold an exclusive ``flock`` on ``/run/gpufabric/lock`` from their
read of the current state through their writes, the read-back and the recording in ``/etc/gpufabric``. Two runs
that want different settings therefore never interleave: the second one waits for the first and then reads what
the first one left.

A second writer tries again every ``POLL_S`` seconds, up to a bounded total wait (``DEFAULT_TIMEOUT_S``, the
environment variable ``GPUFABRIC_LOCK_TIMEOUT`` overrides it, the applier also takes ``--lock-wait``), then fails
with :class:`NodeLockError` naming the holder: right after it gets the lock, a holder writes its name, pid and
start time (UTC) into the lock file, and it removes the file before it lets go (so a run leaves nothing behind
but the directory; a waiter that had opened the removed file finds it gone and opens the new one). The kernel
releases an ``flock`` when its process dies, leaving the file and its record: what the file says is only
informational, and a waiter that times out checks whether the named process still runs and says so when it does
not.

Check mode takes no lock (it writes nothing; reading without the lock is fine). A nested acquisition in the
process that already holds the lock (same path) is counted, not waited for, so code that holds the lock can call
code that takes it again without deadlocking on itself. The lock directory is created mode 0700; the directory and
the file must be owned by the user that runs (root on a node) and writable by nobody else, else the lock is
refused: whoever could replace them could hold every writer off.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import stat
import time

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns

try:
    import fcntl
except ImportError:  # pragma: no cover - every Linux Python has it
    fcntl = None

LOCK_DIR = "/run/gpufabric"
LOCK_FILE = LOCK_DIR + "/lock"
TIMEOUT_ENV = "GPUFABRIC_LOCK_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
POLL_S = 0.2
_BUSY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)

# {real path: [pid, fd, depth]} of the locks this process holds (nested use counts, see the module docstring)
_HELD = {}


class NodeLockError(Exception):
    """The node lock could not be taken (held by another writer past the timeout, or unsafe); names the holder."""


def timeout_from_env(default=DEFAULT_TIMEOUT_S, environ=None):
    """Seconds to wait for the lock: ``GPUFABRIC_LOCK_TIMEOUT`` when set, else ``default``."""
    raw = (os.environ if environ is None else environ).get(TIMEOUT_ENV)
    if raw is None or raw == "":
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_TIMEOUT_S:  # also false for NaN
        raise NodeLockError("%s must be a number of seconds 0..%d (got %r)" % (TIMEOUT_ENV, MAX_TIMEOUT_S, raw))
    return value


def _utc(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _pid_running(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    return True


def describe_holder(text):
    """Words for the holder recorded in a lock file's content (``text``)."""
    try:
        info = json.loads(text)
        pid = int(info["pid"])
        owner = str(info["owner"])
        since = str(info["since"])
    except (ValueError, TypeError, KeyError):
        return "a process that has not recorded itself in the lock file yet"
    if pid > 0 and _pid_running(pid):
        return "%s (pid %d) since %s" % (owner, pid, since)
    return ("a process that did not record itself; the lock file still names %s (pid %d, no longer running) "
            "since %s" % (owner, pid, since))


def _check_owned(real, st, what):
    problems = []
    if st.st_uid != os.geteuid():
        problems.append("owned by uid %d, not uid %d that runs this" % (st.st_uid, os.geteuid()))
    if stat.S_IMODE(st.st_mode) & (stat.S_IWGRP | stat.S_IWOTH):
        problems.append("writable by group or others (mode %04o)" % stat.S_IMODE(st.st_mode))
    if problems:
        raise NodeLockError("refusing the node lock %s %s: %s" % (what, real, "; ".join(problems)))


def _lock_dir(real_dir):
    try:
        os.makedirs(os.path.dirname(real_dir), 0o755)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    try:
        os.mkdir(real_dir, 0o700)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    st = os.lstat(real_dir)
    if not stat.S_ISDIR(st.st_mode):
        raise NodeLockError("refusing the node lock directory %s: it is not a directory" % real_dir)
    _check_owned(real_dir, st, "directory")


class NodeLock(object):
    """Context manager: the node lock held by ``owner`` (a module or program name), unless ``enabled`` is false.

    ``timeout``: seconds to wait in total, None for ``timeout_from_env()``. ``sleep``/``clock`` for tests.
    """

    def __init__(self, sysroot, owner, timeout=None, enabled=True, path=LOCK_FILE, sleep=None, clock=None):
        self.sysroot = sysroot
        self.owner = owner
        self.timeout = timeout
        self.enabled = enabled and fcntl is not None
        self.path = path
        self.sleep = sleep or time.sleep
        self.clock = clock or time.monotonic
        self.real = sysroot.path(path)
        self.waited_s = 0.0
        self._entered = False

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def acquire(self):
        if not self.enabled or self._entered:
            return self
        held = _HELD.get(self.real)
        if held is not None and held[0] == os.getpid():
            held[2] += 1
            self._entered = True
            return self
        timeout = timeout_from_env() if self.timeout is None else float(self.timeout)
        _lock_dir(os.path.dirname(self.real))
        start = self.clock()
        while True:
            fd = self._open()
            try:
                got = self._try(fd)
            except BaseException:
                os.close(fd)
                raise
            if got:
                break
            os.close(fd)
            waited = self.clock() - start
            if waited >= timeout:
                raise NodeLockError("the node lock %s is held by %s: %s waited %.1f s for it and gives up; run it "
                                    "again when that is done" % (self.sysroot.unroot(self.real), self._holder(),
                                                                 self.owner, waited))
            self.sleep(min(POLL_S, max(0.0, timeout - waited)))
        self.waited_s = self.clock() - start
        _HELD[self.real] = [os.getpid(), fd, 1]
        self._entered = True
        return self

    def _open(self):
        try:
            fd = os.open(self.real, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise NodeLockError("refusing the node lock %s: it is a symlink" % self.real)
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NodeLockError("refusing the node lock %s: it is not a regular file" % self.real)
            _check_owned(self.real, st, "file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _try(self, fd):
        """True when this process now holds the lock on ``fd``: the flock is taken and ``fd`` is still the file at
        the lock's path (a holder removes the file before it lets go; whoever opened it before then retries)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as e:
            if e.errno not in _BUSY:
                raise
            return False
        try:
            now = os.lstat(self.real)
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise
            return False
        mine = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            return False
        record = json.dumps({"owner": self.owner, "pid": os.getpid(), "since": _utc(time.time())},
                            sort_keys=True) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode("utf-8"), 0)
        return True

    def _holder(self):
        try:
            fd = os.open(self.real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return describe_holder("")
        try:
            return describe_holder(os.read(fd, 4096).decode("utf-8", "replace"))
        finally:
            os.close(fd)

    def release(self):
        if not self._entered:
            return
        self._entered = False
        held = _HELD.get(self.real)
        if held is None or held[0] != os.getpid():
            return
        held[2] -= 1
        if held[2] > 0:
            return
        del _HELD[self.real]
        fd = held[1]
        try:
            os.unlink(self.real)  # still holding it: a waiter that opened this file sees it gone and retries
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def for_module(module, sysroot, name, concern_names=(), fail=None):
    """The node lock for an Ansible module (no lock in check mode). Entering it fails the module with the holder's
    name when the lock stays taken past the timeout: ``fail(msg)`` when given, else ``fail_json`` with
    ``concern_names`` in error."""
    return _ModuleLock(module, NodeLock(sysroot, name, enabled=not module.check_mode), concern_names, fail)


class _ModuleLock(object):
    def __init__(self, module, lock, concern_names, fail):
        self.module = module
        self.lock = lock
        self.concern_names = concern_names
        self.fail = fail

    def __enter__(self):
        try:
            self.lock.acquire()
        except (NodeLockError, OSError, IOError) as e:
            msg = str(e) if isinstance(e, NodeLockError) else "cannot take the node lock %s: %s" % (LOCK_FILE, e)
            if self.fail is not None:
                self.fail(msg)
            self.module.fail_json(msg=msg, changed=False, lock_file=LOCK_FILE,
                                  concerns=dict((c, concerns.error(c, msg)) for c in self.concern_names))
        return self.lock

    def __exit__(self, *exc):
        self.lock.release()
        return False
