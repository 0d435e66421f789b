# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mount units of the simulated node: ``systemctl start x.mount`` mounts an NFS volume, ``stop`` unmounts it.

The node's ``proc/self/mountinfo`` is the kernel's mount table: a start appends the line the kernel would show
(``nfs_kernel.mount_line``: the super options by the rules of fs/nfs/super.c), a stop removes the top entry at the
mount point. Only NFS mount units the collection wrote (the storage_mounts role's header, ``MANAGED``) mount; any
other mount unit fails to start, as before, since no kernel behind the tree could mount it.

What mount.nfs and the kernel need that the simulator checks: the unit's ``Where=`` is the mount point systemd
derives from the unit name (else systemd refuses the unit: "Where= setting doesn't match unit name"); ``What=`` is
``server:/export``; the server is reachable from the node: ``ip route get <server>`` inside the node's network
namespace gives the source address, which NFSv4 shows as ``clientaddr=`` (no route: "Network is unreachable", as
mount.nfs says, and nothing is mounted). A node whose tree has no mountinfo yet gets the base mounts first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

from gpufabric_sim import nfs_kernel

MOUNTINFO = "proc/self/mountinfo"
MANAGED = "# Managed by gpufabric.node (nfs_mounts)"
NFS_TYPES = ("nfs", "nfs4")


class MountFailed(Exception):
    pass


def _mount_values(sections):
    vals = dict(sections.get("Mount", []))
    return vals.get("What", ""), vals.get("Where", ""), vals.get("Type", ""), vals.get("Options", "")


def managed(path):
    """The unit file was written by the collection's storage_mounts role (its first line is the header)."""
    with open(path) as f:
        return f.readline().startswith(MANAGED)


def unit_where(unit):
    """The mount point systemd derives from a mount unit's name (``mnt-nfs\\x2drdma.mount`` -> ``/mnt/nfs-rdma``)."""
    from gpufabric_sim.units import unit_unescape
    name = unit[:-len(".mount")]
    return "/" if name == "-" else "/" + unit_unescape(name)


def route_source(server):
    """The source address the node's kernel picks to reach ``server`` (``ip -j route get``, run inside the node's
    namespace as every emulator is); None when the node has no route to it."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    p = subprocess.run([ip, "-j", "route", "get", server], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    if p.returncode != 0:
        return None
    try:
        routes = json.loads(p.stdout)
    except ValueError:
        return None
    return (routes[0].get("prefsrc") if routes else None) or None


def kernel_release(root):
    """The running kernel's release (the node's proc/sys/kernel/osrelease; None when the tree has none)."""
    path = os.path.join(root, "proc/sys/kernel/osrelease")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return f.read().strip() or None


def read_mountinfo(root):
    path = os.path.join(root, MOUNTINFO)
    if not os.path.isfile(path):
        from gpufabric_sim.tree import base_mountinfo
        return base_mountinfo()
    with open(path) as f:
        return f.read()


def write_mountinfo(root, text):
    path = os.path.join(root, MOUNTINFO)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o444)
    os.rename(tmp, path)


def mount(root, unit, unit_path, sections, route=None):
    """Mount what the unit says; raises MountFailed with the message systemctl prints. Returns the new line."""
    what, where, fstype, options = _mount_values(sections)
    if fstype not in NFS_TYPES or not managed(unit_path):
        raise MountFailed("the simulated node cannot mount %s: it mounts only the NFS mount units the "
                          "storage_mounts role writes (Type=%s)" % (unit, fstype or "none"))
    if where != unit_where(unit):
        raise MountFailed("Where=%s does not match the unit name %s (systemd refuses the unit)" % (where, unit))
    server, sep, export = what.rpartition(":")
    if not sep or not server or not export.startswith("/"):
        raise MountFailed("mount.nfs: remote share not in 'host:dir' format: %r" % what)
    server = server.strip("[]")
    client = (route or route_source)(server)
    if client is None:
        raise MountFailed("mount.nfs: Network is unreachable (no route from the node to %s)" % server)
    text = read_mountinfo(root)
    lines = text.splitlines(True)
    ids = [int(ln.split()[0]) for ln in lines if ln.split()]
    try:
        line = nfs_kernel.mount_line(max(ids + [99]) + 1, what, where, fstype, options, clientaddr=client,
                                     kernel=kernel_release(root))
    except (ValueError, KeyError) as e:
        raise MountFailed("mount.nfs: an incorrect mount option was specified (%s)" % e)
    write_mountinfo(root, text + line)
    return line


def unmount(root, unit, sections):
    """Remove the top mountinfo entry at the unit's mount point (nothing when nothing is mounted there)."""
    where = dict(sections.get("Mount", [])).get("Where") or unit_where(unit)
    path = os.path.join(root, MOUNTINFO)
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        lines = f.read().splitlines(True)
    at = [i for i, ln in enumerate(lines) if len(ln.split()) > 4 and ln.split()[4] == where.replace(" ", "\\040")]
    if not at:
        return False
    del lines[at[-1]]
    write_mountinfo(root, "".join(lines))
    return True


def mounted(root, where):
    """Whether something is mounted at ``where`` (systemd's mount unit state follows mountinfo)."""
    path = os.path.join(root, MOUNTINFO)
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        return any(len(ln.split()) > 4 and ln.split()[4] == where for ln in f)
