# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-fs's ``/proc/driver/nvidia-fs/modules`` on simulated nodes: storage modules listed only while a device is
held open.

What the driver does (github.com/NVIDIA/gds-nvidia-fs, read at 2.28.4):

* ``src/nvfs-core.c`` ``nvfs_open()`` registers: ``nvfs_get_ops()``, then ``nvfs_blk_register_dma_ops()`` ->
  ``probe_module_list()`` (``src/nvfs-mod.c``) calls, for every entry of ``modules_list[]`` (``src/nvfs-dma.c``)
  that is not registered yet, the register function its storage module exports (``rpcrdma_register_nvfs_dma_ops``
  for rpcrdma); an entry whose module does not export it, or whose register call returns non-zero, stays out.
* ``nvfs_close()`` unregisters: at the last close (``nvfs_count_ops() == 0``) ``cleanup_module_list()`` drops every
  entry again.
* ``src/nvfs-proc.c`` ``nvfs_modules_show()`` prints ``<name>: <version>`` per registered entry in table order. A
  probed entry's version is never set since 2.7 (``(null)``); the WekaFS pseudo entry ``wekafsio: 1`` is always
  there.

So an idle node shows ``wekafsio: 1\\n`` and nothing else; with a device held and a vendor NFS client whose rpcrdma
registers: ``wekafsio: 1\\nrpcrdma: (null)\\n``. ``modules_text(root)`` computes that for one node tree: held =
some process has an fd on one of the node's ``dev/nvidia-fs<N>`` (found through ``/proc/<pid>/fd``); a storage
module is listed when ``sys/module/<name>`` exists (loaded) and the node's hook table says its registration returns
0. The kernel probes at each open, so a module loaded while a device is held appears only at the next open; this
computes what a probe at the read would register, which is the same for a reader that opens a device right before
reading (``nvfs_modules.read_held``). Mapped GPU buffers (``/proc/<pid>/maps``) are not looked at: nothing maps a
simulated device.

The hook table is ``run/gpufabric-sim/nvfs-hooks.json`` (kernel memory: a reboot resets it from the topology's
``nvidia_fs.modules``), ``{"<name>": <what its register function returns>}``: ``0`` registers, a negative errno is
refused (the driver logs ``nvfs registration failed``), a module missing from the table does not export the hook
(in-tree module, or a vendor build without it). ``load_module(root, name, hook)`` writes both.

A plain file cannot change with the holders, so on a fleet ``python -m gpufabric_sim.nvfs_proc --fleet DIR`` (the
runtime starts it, pid in ``<fleet>/nvfs-proc.pid``) turns each node's ``modules`` into a FIFO and answers every
reader with ``modules_text`` computed at that moment: the reader opens the FIFO, the server's writer open returns,
it computes, writes, closes, the reader reads to EOF. Before the answer a fresh FIFO is renamed over the path, so a
reader that lingers on the old one gets EOF instead of a second copy. Readers opening within the same instant share
one answer (one of them then reads nothing); the roles read one file at a time per node. Every 0.2 s the server
checks each node: a ``modules`` replaced by a reboot's tree sync, or removed with the directory (nvidia-fs
unloaded), is taken over again or dropped. When it stops it puts back regular files with the idle content, so no
reader blocks on a FIFO nobody serves. The tree builder writes that regular idle file; unit tests read through
``modules_text`` directly (tests/unit/nvfs_kernel.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import errno
import itertools
import json
import os
import re
import signal
import stat
import sys
import threading
import time

MODULES_REL = os.path.join("proc", "driver", "nvidia-fs", "modules")
HOOKS_REL = os.path.join("run", "gpufabric-sim", "nvfs-hooks.json")
DEV_RE = re.compile(r"^nvidia-fs(\d+)$")
DEVICES = 16  # nvfs_max_devices default (MAX_NVFS_DEVICES, src/nvfs-core.c): /dev/nvidia-fs0..15
PIDFILE = "nvfs-proc.pid"
READY = "nvfs-proc.ready"

# modules_list[] of src/nvfs-dma.c in order: (name, version as nvfs_modules_show prints it, probed?). Unprobed
# entries are registered statically; probed ones only while a device is open. mmfslinux is built with
# NVFS_ENABLE_KERN_RDMA_SUPPORT.
DRIVER_TABLE = (
    ("nvme", "(null)", True),
    ("nvme_rdma", "(null)", True),
    ("sfxvdriver", "(null)", True),
    ("nvmeib_common", "(null)", True),
    ("lnet", "(null)", True),
    ("beegfs", "(null)", True),
    ("wekafsio", "1", False),
    ("mmfslinux", "(null)", True),
    ("rpcrdma", "(null)", True),
    ("scatefs", "(null)", True),
    ("scsi_mod", "0", True),
)
PROBED = tuple(n for n, _v, probed in DRIVER_TABLE if probed)


# --------------------------------------------------------------------------------------------------- node state

def device_paths(root):
    d = os.path.join(root, "dev")
    try:
        names = os.listdir(d)
    except OSError:
        return []
    found = sorted((int(m.group(1)), n) for n in names for m in [DEV_RE.match(n)] if m)
    return [os.path.join(d, n) for _minor, n in found]


def holders(root, proc_dir="/proc"):
    """pids with an open fd on one of the node's ``dev/nvidia-fs<N>``."""
    targets = set(os.path.realpath(p) for p in device_paths(root))
    out = []
    if not targets:
        return out
    for pid in os.listdir(proc_dir):
        if not pid.isdigit():
            continue
        fd_dir = os.path.join(proc_dir, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in targets:
                    out.append(int(pid))
                    break
            except OSError:
                continue
    return sorted(out)


def read_hooks(root):
    try:
        with open(os.path.join(root, HOOKS_REL)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return dict((k, v) for k, v in data.items() if isinstance(v, int)) if isinstance(data, dict) else {}


def write_hooks(root, hooks):
    path = os.path.join(root, HOOKS_REL)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(hooks), f, indent=1, sort_keys=True)
    os.rename(tmp, path)


def load_module(root, name, hook=True):
    """Load a storage module on the node: ``sys/module/<name>/`` and its nvidia-fs hook.

    ``hook``: True (exports the hook, registration succeeds), False (no hook: in-tree module or a build without it),
    or an int (exports it; its register function returns that, e.g. -95 to refuse).
    """
    if name not in PROBED:
        raise ValueError("%s is not a storage module nvidia-fs probes (%s)" % (name, ", ".join(PROBED)))
    os.makedirs(os.path.join(root, "sys", "module", name), exist_ok=True)
    hooks = read_hooks(root)
    if hook is False:
        hooks.pop(name, None)
    else:
        hooks[name] = 0 if hook is True else int(hook)
    write_hooks(root, hooks)


def registered(root):
    """Names a probe would register now: loaded, exporting the hook, register call returning 0."""
    hooks = read_hooks(root)
    return [n for n in PROBED if hooks.get(n) == 0 and os.path.isdir(os.path.join(root, "sys", "module", n))]


def modules_text(root, proc_dir="/proc", held=None):
    """The content of the node's modules file now (``held``: override the /proc scan)."""
    if held is None:
        held = bool(holders(root, proc_dir))
    reg = set(registered(root)) if held else set()
    lines = []
    for name, version, probed in DRIVER_TABLE:
        if not probed or name in reg:
            lines.append("%s: %s\n" % (name, version))
    return "".join(lines)


def install_driver(root, devices=DEVICES):
    """What nvidia-fs's load leaves (as far as this file models it): the device nodes (mode 0666, nvfs_devnode) and
    an idle modules file. Regular files stand in for the character devices: an open of either is what counts."""
    d = os.path.join(root, "dev")
    os.makedirs(d, exist_ok=True)
    for i in range(devices):
        p = os.path.join(d, "nvidia-fs%d" % i)
        if not os.path.exists(p):
            with open(p, "w"):
                pass
        os.chmod(p, 0o666)
    _write_idle(root)


def _write_idle(root, path=None):
    path = path or os.path.join(root, MODULES_REL)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.idle-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(modules_text(root, held=False))
    os.chmod(tmp, 0o444)
    os.rename(tmp, path)


# --------------------------------------------------------------------------------------------------- the server

_SEQ = itertools.count()


def log(msg):
    sys.stderr.write("gpufabric-sim nvfs_proc: %s\n" % msg)
    sys.stderr.flush()


class Served(object):
    """One node's modules path as a FIFO, and the thread that answers each reader."""

    def __init__(self, root, scratch=None, proc_dir="/proc"):
        self.root = root
        self.path = os.path.join(root, MODULES_REL)
        self.scratch = scratch
        self.proc_dir = proc_dir
        self.lock = threading.Lock()
        self.stopping = False
        self.answers = 0
        self.opath, self.ino = self._install()
        self.thread = threading.Thread(target=self._loop, name="nvfs-%s" % root)
        self.thread.daemon = True
        self.thread.start()

    def _install(self):
        """A fresh FIFO renamed over the path; returns (O_PATH fd, inode). The O_PATH fd keeps the inode reachable
        (``/proc/self/fd/N``) when the path is replaced under it."""
        d = os.path.dirname(self.path)
        for where in ([self.scratch] if self.scratch else []) + [d]:
            tmp = os.path.join(where, ".nvfs-modules-%d-%d" % (os.getpid(), next(_SEQ)))
            os.mkfifo(tmp)
            os.chmod(tmp, 0o444)
            fd = os.open(tmp, os.O_PATH | os.O_CLOEXEC)
            try:
                os.rename(tmp, self.path)
            except OSError as e:
                os.close(fd)
                os.unlink(tmp)
                if e.errno == errno.EXDEV and where != d:
                    continue
                raise
            return fd, os.fstat(fd).st_ino
        raise OSError(errno.EXDEV, "cannot place a FIFO at %s" % self.path)

    def current(self):
        """True while the path is still this server's FIFO."""
        with self.lock:
            try:
                st = os.lstat(self.path)
            except OSError:
                return False
            return stat.S_ISFIFO(st.st_mode) and st.st_ino == self.ino

    def _loop(self):
        while True:
            with self.lock:
                if self.stopping:
                    return
                magic = "/proc/self/fd/%d" % self.opath
            try:
                w = os.open(magic, os.O_WRONLY | os.O_CLOEXEC)  # blocks until a reader opens the FIFO
            except OSError as e:
                log("%s: %s" % (self.path, e))
                time.sleep(0.2)
                continue
            old = None
            try:
                with self.lock:
                    stopping = self.stopping
                    if not stopping:
                        # later readers get a fresh FIFO; one lingering on this one reads EOF after the answer
                        try:
                            new = self._install()
                        except OSError as e:
                            log("%s: cannot renew the FIFO: %s" % (self.path, e))
                            new = None
                        if new is not None:
                            old = self.opath
                            self.opath, self.ino = new
                self._answer(w)
            finally:
                os.close(w)
                if old is not None:
                    os.close(old)
            if stopping:
                return

    def _answer(self, w):
        data = modules_text(self.root, self.proc_dir).encode("ascii")
        try:
            while data:
                data = data[os.write(w, data):]
        except OSError as e:  # the reader went away (EPIPE)
            if e.errno != errno.EPIPE:
                log("%s: %s" % (self.path, e))
        self.answers += 1

    def stop(self, restore=True):
        """End the thread; with ``restore`` put back a regular idle file if the path is still this FIFO. Readers
        already waiting on this FIFO (opened before the path was replaced) get one last answer."""
        with self.lock:
            self.stopping = True
            magic = "/proc/self/fd/%d" % self.opath
            try:
                wake = os.open(magic, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                wake = None
        self.thread.join(5)
        if wake is not None:
            os.close(wake)
        if restore and self._is_ours():
            try:
                _write_idle(self.root, self.path)
            except OSError as e:
                log("%s: cannot restore the idle file: %s" % (self.path, e))
        for _i in range(20):
            try:
                w = os.open(magic, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # ENXIO: nobody waits
            except OSError:
                break
            try:
                self._answer(w)
            finally:
                os.close(w)
            time.sleep(0.02)
        os.close(self.opath)

    def _is_ours(self):
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return stat.S_ISFIFO(st.st_mode) and st.st_ino == self.ino


class Server(object):
    """Serve the modules FIFO of every node root ``roots()`` returns whose nvidia-fs is loaded."""

    def __init__(self, roots, scratch=None, proc_dir="/proc"):
        self.roots = roots
        self.scratch = scratch
        self.proc_dir = proc_dir
        self.served = {}

    def scan(self):
        roots = self.roots()
        if roots is None:  # the list cannot be read right now: keep what is served
            return
        want = set(r for r in roots if os.path.isdir(os.path.dirname(os.path.join(r, MODULES_REL))))
        for root in list(self.served):
            s = self.served[root]
            if root not in want or not s.current():
                s.stop(restore=False)
                del self.served[root]
        for root in sorted(want - set(self.served)):
            try:
                self.served[root] = Served(root, self.scratch, self.proc_dir)
            except OSError as e:
                log("%s: %s" % (root, e))

    def stop(self):
        for root in list(self.served):
            self.served.pop(root).stop(restore=True)


def fleet_roots(fleet):
    try:
        with open(os.path.join(fleet, "fleet.json")) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return [n["root"] for n in data.get("nodes", []) if n.get("root")]


def wait_served(root, timeout=5.0):
    """Wait until the node's modules path is a FIFO again (after a reboot's tree sync); True when it is."""
    path = os.path.join(root, MODULES_REL)
    deadline = time.time() + timeout
    while True:
        try:
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                return True
        except OSError:
            pass
        if time.time() > deadline:
            return False
        time.sleep(0.05)


def run(fleet, interval=0.2, stop_after=None):
    scratch = os.path.join(fleet, ".nvfs-proc")
    os.makedirs(scratch, exist_ok=True)
    cache = {"mtime": None, "roots": None}

    def roots():
        try:
            m = os.stat(os.path.join(fleet, "fleet.json")).st_mtime
        except OSError:
            return None
        if m != cache["mtime"] or cache["roots"] is None:
            cache["roots"], cache["mtime"] = fleet_roots(fleet), m
        return cache["roots"]

    server = Server(roots, scratch)

    def stop(_sig, _frm):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started = time.time()
    ready = os.path.join(fleet, READY)
    try:
        server.scan()
        with open(ready, "w") as f:
            f.write("%d\n" % os.getpid())
        while stop_after is None or time.time() - started < stop_after:
            time.sleep(interval)
            server.scan()
    finally:
        server.stop()
        try:
            os.unlink(ready)
        except OSError:
            pass
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpufabric_sim.nvfs_proc", description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--fleet", required=True)
    args = p.parse_args(argv)
    return run(os.path.abspath(args.fleet))


if __name__ == "__main__":
    sys.exit(main())
