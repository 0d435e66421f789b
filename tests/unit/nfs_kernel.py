# -*- coding: utf-8 -*-
"""A node for the nfs_mounts tests: a sysroot with /proc/self/mountinfo and a systemctl that behaves like systemd
with the kernel's NFS client behind it (mount units enabled through remote-fs.target.wants, started by writing the
mount into mountinfo as the kernel shows it: fstype nfs4 for v4.x, the super options the kernel prints)."""
from __future__ import absolute_import, division, print_function

import os

# the tests import the kernel's rules from here
from gpufabric_sim.nfs_kernel import (  # noqa: F401 pylint: disable=unused-import
    SERVER_MAX_IO, USERSPACE, kernel_options, kernel_state, mount_line, nfs_line)

__metaclass__ = type

BASE = ("22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n"
        "23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "24 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")


def new_node(tmp_path, kernel="6.1.0-28-amd64"):
    """A Node below ``tmp_path``/root running kernel release ``kernel`` (the nfs_mounts tests' fixture)."""
    root = str(tmp_path / "root")
    os.makedirs(os.path.join(root, "proc/sys/kernel"))
    with open(os.path.join(root, "proc/sys/kernel/osrelease"), "w") as f:
        f.write(kernel + "\n")
    return Node(root)


class Node(object):
    def __init__(self, root, lines=""):
        self.root = root
        self.calls = []
        self.refuse = {}          # unit -> stderr of a start that fails (a busy mount, a server refusing RDMA)
        self.trunk_tcp = False    # NFSv4 trunking: a new mount reuses a TCP client of the same server and version
        self.write_mountinfo(BASE + lines)

    def p(self, *parts):
        return os.path.join(self.root, *[x.lstrip("/") for x in parts])

    def mountinfo(self):
        with open(self.p("proc/self/mountinfo")) as f:
            return f.read()

    def write_mountinfo(self, text):
        os.makedirs(self.p("proc/self"), exist_ok=True)
        with open(self.p("proc/self/mountinfo"), "w") as f:
            f.write(text)

    def unmount(self, path):
        self.write_mountinfo("".join(line for line in self.mountinfo().splitlines(True)
                                     if line.split()[4] != path))

    def _unit(self, unit):
        path = self.p("etc/systemd/system", unit)
        if not os.path.exists(path):
            return None
        out = {}
        with open(path) as f:
            for line in f:
                k, sep, v = line.strip().partition("=")
                if sep and not line.startswith("#"):
                    out[k] = v
        return out

    def _mount(self, unit):
        u = self._unit(unit)
        if u is None:
            return 5, "", "Failed to start %s: Unit %s not found.\n" % (unit, unit)
        if unit in self.refuse:
            return 1, "", self.refuse[unit]
        n = 100 + len(self.mountinfo().splitlines())
        kernel = None
        if os.path.isfile(self.p("proc/sys/kernel/osrelease")):
            with open(self.p("proc/sys/kernel/osrelease")) as f:
                kernel = f.read().strip()
        try:
            line = mount_line(n, u["What"], u["Where"], u.get("Type", "nfs"), u["Options"],
                              proto="tcp" if self.trunk_tcp else None, kernel=kernel)
        except ValueError as e:
            return 32, "", "mount.nfs: %s\n" % e
        self.write_mountinfo(self.mountinfo() + line)
        return 0, "", ""

    def run(self, argv):
        self.calls.append(list(argv))
        verb, args = argv[1], argv[2:]
        wants = self.p("etc/systemd/system/remote-fs.target.wants")
        if verb == "is-enabled":
            if self._unit(args[0]) is None:
                return 1, "", "Failed to get unit file state for %s: No such file or directory\n" % args[0]
            return (0, "enabled\n", "") if os.path.lexists(os.path.join(wants, args[0])) else (1, "disabled\n", "")
        if verb == "enable":
            os.makedirs(wants, exist_ok=True)
            os.symlink("/etc/systemd/system/" + args[0], os.path.join(wants, args[0]))
            return 0, "", ""
        if verb == "disable":
            if os.path.lexists(os.path.join(wants, args[0])):
                os.unlink(os.path.join(wants, args[0]))
            return 0, "", ""
        if verb == "daemon-reload":
            return 0, "", ""
        if verb in ("stop", "restart"):
            where = self.where(args[0])
            if where:
                self.unmount(where)
            if verb == "stop":
                return 0, "", ""
        if verb in ("start", "restart"):
            return self._mount(args[0])
        raise AssertionError("unexpected systemctl call %r" % (argv,))

    def where(self, unit):
        u = self._unit(unit)
        if u is not None:
            return u["Where"]
        # systemd knows every mount point as a unit: unescape the name
        name = unit[:-len(".mount")]
        return "/" + bytes(name.replace("-", "/"), "ascii").decode("unicode_escape")

    def verbs(self):
        return [c[1] for c in self.calls]
