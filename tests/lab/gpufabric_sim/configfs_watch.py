# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""configfs ``rdma_cm`` emulation for a fleet of simulated nodes.

On a real host ``mkdir /sys/kernel/config/rdma_cm/<ibdev>`` makes the kernel create, synchronously,
``ports/<n>/default_roce_tos`` (``0``) and ``ports/<n>/default_roce_mode`` (``RoCE v2``) for every
port of a registered RDMA device, and fails with ENODEV for a name that is not one. A plain
directory cannot do either, so one watcher process per fleet reacts to new directories in every
node's ``root/sys/kernel/config/rdma_cm/``:

* a known ibdev (``root/sys/class/infiniband/<ibdev>`` exists) gets ``ports/`` built in a staging
  directory and renamed into place in one step (readers never see half a ``ports/``);
* any other name is removed again (the sim's stand-in for ENODEV).

This is the one place where the simulator is not synchronous: module code must wait (~2 s) for
``ports/`` to appear after its ``mkdir``. Also different from configfs: ``rmdir`` of a group fails
with ENOTEMPTY here (the simulator's reboot/reregister remove groups themselves).

inotify through ctypes when libc has it, a 50 ms poll otherwise; every second a full rescan also
repairs anything missed (queue overflow, watches lost when a directory was recreated) and picks up
nodes added to ``fleet.json``.

Run: ``python -m gpufabric_sim.configfs_watch --fleet DIR`` (the runtime starts it; pid in
``<fleet>/configfs-watch.pid``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import ctypes
import ctypes.util
import errno
import json
import os
import select
import shutil
import signal
import struct
import sys
import tempfile
import time

RDMA_CM = os.path.join("sys", "kernel", "config", "rdma_cm")
IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_IGNORED = 0x00008000
IN_Q_OVERFLOW = 0x00004000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
EVENT_HEADER = struct.Struct("iIII")


def ib_ports(root, ibdev):
    """Port numbers of an RDMA device from <root>/sys/class/infiniband/<ibdev>/ports/."""
    d = os.path.join(root, "sys", "class", "infiniband", ibdev, "ports")
    try:
        return sorted(int(p) for p in os.listdir(d) if p.isdigit())
    except OSError:
        return []


def ensure_group(root, name, staging_dir):
    """Make ``rdma_cm/<name>`` look like configfs made it. Returns 'ports', 'removed' or 'ok'."""
    group = os.path.join(root, RDMA_CM, name)
    if not os.path.isdir(group) or os.path.islink(group):
        return "ok"
    if not os.path.isdir(os.path.join(root, "sys", "class", "infiniband", name)):
        shutil.rmtree(group, ignore_errors=True)
        return "removed"
    if os.path.isdir(os.path.join(group, "ports")):
        return "ok"
    stage = tempfile.mkdtemp(prefix="cm-", dir=staging_dir)
    try:
        ports = os.path.join(stage, "ports")
        os.mkdir(ports, 0o755)
        for port in ib_ports(root, name) or [1]:
            pd = os.path.join(ports, str(port))
            os.mkdir(pd, 0o755)
            for attr, value in (("default_roce_mode", "RoCE v2\n"), ("default_roce_tos", "0\n")):
                with open(os.path.join(pd, attr), "w") as f:
                    f.write(value)
                os.chmod(os.path.join(pd, attr), 0o644)
        os.chmod(ports, 0o755)
        try:
            os.rename(ports, os.path.join(group, "ports"))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY):
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return "ports"


def scan_node(root, staging_dir):
    """Fix every group of one node; returns {name: result} for groups that changed."""
    base = os.path.join(root, RDMA_CM)
    changed = {}
    try:
        names = os.listdir(base)
    except OSError:
        return changed
    for name in sorted(names):
        if name.startswith("."):
            continue
        r = ensure_group(root, name, staging_dir)
        if r != "ok":
            changed[name] = r
    return changed


class Inotify(object):
    """Minimal inotify over ctypes; raises OSError when unavailable."""

    def __init__(self):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")

    def add(self, path, mask):
        wd = self._add(self.fd, path.encode(), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch %s" % path)
        return wd

    def read(self):
        try:
            data = os.read(self.fd, 65536)
        except OSError as e:
            if e.errno == errno.EAGAIN:
                return []
            raise
        events = []
        pos = 0
        while pos + EVENT_HEADER.size <= len(data):
            wd, mask, _cookie, length = EVENT_HEADER.unpack_from(data, pos)
            pos += EVENT_HEADER.size
            name = data[pos:pos + length].rstrip(b"\0").decode("utf-8", "replace")
            pos += length
            events.append((wd, mask, name))
        return events


def fleet_roots(fleet):
    try:
        with open(os.path.join(fleet, "fleet.json")) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    return [n["root"] for n in data.get("nodes", []) if n.get("root")]


def run(fleet, poll=0.05, rescan=1.0, stop_after=None):
    staging = os.path.join(fleet, ".configfs-staging")
    os.makedirs(staging, exist_ok=True)
    try:
        ino = Inotify()
    except (OSError, AttributeError):
        ino = None
    watches = {}  # wd -> root
    watched = {}  # root -> wd
    fleet_mtime = None
    roots = []
    last_scan = 0.0
    started = time.time()

    def stop(_sig, _frm):
        raise SystemExit(0)  # interrupts a waiting select() at once

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        now = time.time()
        if stop_after is not None and now - started > stop_after:
            break
        if now - last_scan >= rescan or (ino is None and now - last_scan >= poll):
            try:
                m = os.stat(os.path.join(fleet, "fleet.json")).st_mtime
            except OSError:
                m = None
            if m != fleet_mtime:
                fleet_mtime = m
                roots = fleet_roots(fleet)
            for root in roots:
                if ino is not None and root not in watched:
                    try:
                        wd = ino.add(os.path.join(root, RDMA_CM), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
                        watches[wd] = root
                        watched[root] = wd
                    except OSError:
                        pass
                scan_node(root, staging)
            last_scan = now
        if ino is None:
            time.sleep(poll)
            continue
        r, _w, _x = select.select([ino.fd], [], [], rescan)
        if not r:
            continue
        for wd, mask, name in ino.read():
            if mask & IN_Q_OVERFLOW:
                last_scan = 0.0
                continue
            if mask & IN_IGNORED:
                root = watches.pop(wd, None)
                if root is not None:
                    watched.pop(root, None)
                continue
            root = watches.get(wd)
            if root and name and mask & IN_ISDIR and not name.startswith("."):
                ensure_group(root, name, staging)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpufabric_sim.configfs_watch", description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--fleet", required=True)
    args = p.parse_args(argv)
    return run(os.path.abspath(args.fleet))


if __name__ == "__main__":
    sys.exit(main())
