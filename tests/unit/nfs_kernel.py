# -*- coding: utf-8 -*-
"""A node for the nfs_mounts tests: a sysroot with /proc/self/mountinfo and a systemctl that behaves like systemd
with the kernel's NFS client behind it (mount units enabled through remote-fs.target.wants, started by writing the
mount into mountinfo as the kernel shows it: fstype nfs4 for v4.x, the super options the kernel prints)."""
from __future__ import absolute_import, division, print_function

import os

__metaclass__ = type

BASE = ("22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n"
        "23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "24 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")
# options mount.nfs keeps to itself or hands to systemd: the kernel never shows them
USERSPACE = ("_netdev", "nofail", "auto", "noauto", "user", "users", "defaults")


SERVER_MAX_IO = 1048576   # the server's rtmax/wtmax: a larger rsize/wsize is lowered to it


def kernel_state(options):
    """What the kernel keeps of a mount's option list [(name, value or None)], left to right as fs/nfs/fs_context.c
    parses it: the mount's flags, the superblock's, and the NFS client's settings."""
    st = {"ro": False, "mnt": set(), "sb": set(), "flags": set(), "soft": None, "timeo": "600",
          "retrans": "2", "sec": "sys", "ac": {"acregmin": "3", "acregmax": "60", "acdirmin": "30", "acdirmax": "60"},
          "lookupcache": "all", "local_lock": "none", "rsize": SERVER_MAX_IO, "wsize": SERVER_MAX_IO, "fsc": None,
          "max_connect": 1}
    mnt_flags = {"nosuid": ("nosuid", 1), "suid": ("nosuid", 0), "nodev": ("nodev", 1), "dev": ("nodev", 0),
                 "noexec": ("noexec", 1), "exec": ("noexec", 0), "nodiratime": ("nodiratime", 1),
                 "diratime": ("nodiratime", 0), "nosymfollow": ("nosymfollow", 1), "symfollow": ("nosymfollow", 0)}
    sb_flags = {"sync": ("sync", 1), "async": ("sync", 0), "dirsync": ("dirsync", 1), "lazytime": ("lazytime", 1),
                "nolazytime": ("lazytime", 0)}
    nfs_flags = {"posix": ("posix", 1), "noposix": ("posix", 0), "nocto": ("nocto", 1), "cto": ("nocto", 0),
                 "noac": ("noac", 1), "ac": ("noac", 0), "noacl": ("noacl", 1), "acl": ("noacl", 0),
                 "nordirplus": ("nordirplus", 1), "rdirplus": ("nordirplus", 0), "nosharecache": ("nosharecache", 1),
                 "sharecache": ("nosharecache", 0), "noresvport": ("noresvport", 1), "resvport": ("noresvport", 0),
                 "softreval": ("softreval", 1), "nosoftreval": ("softreval", 0)}
    ms_noatime = ms_strictatime = False   # mount(8)'s MS_ flags; path_mount turns them into the mount's
    for k, v in options:
        if k in ("ro", "rw"):
            st["ro"] = k == "ro"
        elif k in ("noatime", "atime"):
            ms_noatime = k == "noatime"
        elif k in ("strictatime", "nostrictatime"):
            ms_strictatime = k == "strictatime"
        elif k in ("relatime", "norelatime"):
            pass    # MS_RELATIME: path_mount sets MNT_RELATIME unless MS_NOATIME, whatever was asked
        elif k in mnt_flags:
            (st["mnt"].add if mnt_flags[k][1] else st["mnt"].discard)(mnt_flags[k][0])
        elif k in sb_flags:
            (st["sb"].add if sb_flags[k][1] else st["sb"].discard)(sb_flags[k][0])
        elif k in nfs_flags:
            (st["flags"].add if nfs_flags[k][1] else st["flags"].discard)(nfs_flags[k][0])
        elif k == "soft":
            st["soft"] = "soft"
        elif k == "softerr":
            st["soft"] = "softerr"
            st["flags"].add("softreval")
        elif k == "hard":
            st["soft"] = None
            st["flags"].discard("softreval")
        elif k in ("lock", "nolock"):
            st["flags"].discard("nolock") if k == "lock" else st["flags"].add("nolock")
            st["local_lock"] = "none" if k == "lock" else "all"
        elif k in ("timeo", "retrans", "local_lock"):
            st[k] = v
        elif k == "sec":
            st["sec"] = v.split(":")[0]
        elif k == "actimeo":
            st["ac"] = dict((a, v) for a in st["ac"])
        elif k in st["ac"]:
            st["ac"][k] = v
        elif k == "lookupcache":
            st["lookupcache"] = {"positive": "pos"}.get(v, v)
        elif k in ("rsize", "wsize"):
            st[k] = min(int(v) // 4096 * 4096, SERVER_MAX_IO)
        elif k == "fsc":
            st["fsc"] = v or True
        elif k == "max_connect":
            st["max_connect"] = int(v)
    st["mnt"].discard("relatime")
    if ms_strictatime:
        pass
    elif ms_noatime:
        st["mnt"].add("noatime")
    else:
        st["mnt"].add("relatime")
    if "noac" in st["flags"]:
        st["ac"] = dict((a, "0") for a in st["ac"])
    return st


def kernel_options(st, vers, proto, port, nconnect, addr):
    """(field 6, super options) of a mountinfo line for the state ``st``, in the order show_mountinfo and
    nfs_show_options print them."""
    rw = "ro" if st["ro"] else "rw"
    mnt = rw + "".join("," + f for f in ("nosuid", "nodev", "noexec", "noatime", "nodiratime", "relatime",
                                         "nosymfollow") if f in st["mnt"])
    sup = [rw] + [f for f in ("sync", "dirsync", "lazytime") if f in st["sb"]]
    sup += ["vers=%s" % vers, "rsize=%d" % st["rsize"], "wsize=%d" % st["wsize"], "namlen=255"]
    defaults = {"acregmin": "3", "acregmax": "60", "acdirmin": "30", "acdirmax": "60"}
    sup += ["%s=%s" % (a, st["ac"][a]) for a in ("acregmin", "acregmax", "acdirmin", "acdirmax")
            if st["ac"][a] != defaults[a]]
    if st["soft"] is None:
        sup.append("hard")
    sup += [f for f in ("soft", "softerr") if st["soft"] == f]
    sup += [f for f in ("softreval", "posix", "nocto", "noac", "nolock", "noacl", "nordirplus", "nosharecache",
                        "noresvport") if f in st["flags"]]
    sup.append("proto=%s" % proto)
    if nconnect:
        sup.append("nconnect=%d" % nconnect)
    if vers != "3" and st["max_connect"] > 1:
        sup.append("max_connect=%d" % st["max_connect"])
    # NFSv4 prints port= only when it is not 2049 (nfs_show_mount_options); v3 always
    if vers == "3" or port != 2049:
        sup.append("port=%d" % port)
    sup += ["timeo=%s" % st["timeo"], "retrans=%s" % st["retrans"], "sec=%s" % st["sec"]]
    sup += ["clientaddr=10.77.0.10"] if vers != "3" else ["mountaddr=%s" % addr, "mountvers=3", "mountproto=tcp"]
    if st["fsc"]:
        sup.append("fsc" if st["fsc"] is True else "fsc=%s" % st["fsc"])
    if st["lookupcache"] != "all":
        sup.append("lookupcache=%s" % st["lookupcache"])
    sup += ["local_lock=%s" % st["local_lock"], "addr=%s" % addr]
    return mnt, ",".join(sup)


def nfs_line(mount_id, path, source, vers, proto="rdma", port=20049, nconnect=None, extra="", options=()):
    """One mountinfo line as fs/proc_namespace.c and fs/nfs/super.c (nfs_show_mount_options) write it for a mount
    given ``options`` [(name, value or None)]; ``extra`` is appended to the super options as it is."""
    addr = source.rsplit(":", 1)[0].strip("[]")
    mnt, sup = kernel_options(kernel_state(list(options)), vers, proto, port, nconnect, addr)
    return "%d 22 0:%d / %s %s shared:%d - %s %s %s%s\n" % (
        mount_id, mount_id, path, mnt, mount_id, "nfs" if vers == "3" else "nfs4", source, sup, extra)


def new_node(tmp_path):
    """A Node below ``tmp_path``/root with the running kernel's release (the nfs_mounts tests' fixture)."""
    root = str(tmp_path / "root")
    os.makedirs(os.path.join(root, "proc/sys/kernel"))
    with open(os.path.join(root, "proc/sys/kernel/osrelease"), "w") as f:
        f.write("6.1.0-28-amd64\n")
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
        opts = [o.split("=", 1) if "=" in o else [o, None] for o in u["Options"].split(",")]
        d = dict((k, v) for k, v in opts)
        given = [(k, v) for k, v in opts if k not in ("proto", "port", "vers", "nconnect") and k not in USERSPACE
                 and not k.startswith("x-systemd.")]
        proto = "tcp" if self.trunk_tcp else d["proto"]
        n = 100 + len(self.mountinfo().splitlines())
        self.write_mountinfo(self.mountinfo() + nfs_line(n, u["Where"], u["What"], d["vers"], proto,
                                                         int(d["port"]), int(d["nconnect"]) if d.get("nconnect")
                                                         else None, options=given))
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
