# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel's NFS client as /proc/self/mountinfo shows it: which options a mount keeps and how it prints them.

Shared by the simulated node (``mounts.py``: ``systemctl start x.mount``) and the unit tests' fake node
(tests/unit/nfs_kernel.py), so there is one copy of the rules. The order and the defaults follow
``nfs_show_mount_options`` / ``nfs_show_mountd_options`` / ``nfs_show_nfsv4_options`` and ``nfs_show_options`` in
fs/nfs/super.c (read at torvalds/linux 002160269fcc, a 5.x tree; later releases print softerr/softreval,
nconnect and max_connect in the same function):
``vers=4.<minor>`` for v4, rsize/wsize then ``namlen``; ac* only when not the default (3/60/30/60); ``hard`` unless
soft; ``proto=``; for v4 ``port=`` only when it is not 2049 (v3: when set); timeo, retrans, sec; v4 ``clientaddr=``,
v3 ``mountaddr=``/``mountvers=``/``mountproto=``; fsc; lookupcache when not ``all``; ``local_lock=``; then
``addr=`` (nfs_show_options). rsize/wsize are rounded down to a multiple of the page size and lowered to the
server's maximum (SERVER_MAX_IO).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# options mount.nfs keeps to itself or hands to systemd: the kernel never shows them
USERSPACE = ("_netdev", "nofail", "auto", "noauto", "user", "users", "defaults")


# the first release whose nfs4_set_client (fs/nfs/nfs4client.c) hands nconnect to an RDMA client ("NFS: enable
# nconnect for RDMA"); before it an NFSv4 mount over RDMA keeps cl_nconnect 0 and nfs_show_mount_options
# (fs/nfs/super.c) prints no nconnect=. NFSv3's nfs_init_server (fs/nfs/client.c) passes it whatever the transport.
NCONNECT_RDMA_V4 = (6, 9)


def nconnect_kept(nconnect, vers, proto, kernel):
    """The nconnect the client keeps for a mount of ``vers`` over ``proto`` on kernel release ``kernel`` (None: any
    release from 6.9)."""
    if not nconnect or kernel is None or vers == "3" or not proto.startswith("rdma"):
        return nconnect
    major, minor = kernel.split(".")[:2]
    return nconnect if (int(major), int(minor.split("-")[0])) >= NCONNECT_RDMA_V4 else None


CLIENTADDR = "10.77.0.10"   # the unit tests' client address (the simulator passes the node's own)
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


def kernel_options(st, vers, proto, port, nconnect, addr, clientaddr=CLIENTADDR):
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
    sup += ["clientaddr=%s" % clientaddr] if vers != "3" else ["mountaddr=%s" % addr, "mountvers=3", "mountproto=tcp"]
    if st["fsc"]:
        sup.append("fsc" if st["fsc"] is True else "fsc=%s" % st["fsc"])
    if st["lookupcache"] != "all":
        sup.append("lookupcache=%s" % st["lookupcache"])
    sup += ["local_lock=%s" % st["local_lock"], "addr=%s" % addr]
    return mnt, ",".join(sup)


def nfs_line(mount_id, path, source, vers, proto="rdma", port=20049, nconnect=None, extra="", options=(),
             clientaddr=CLIENTADDR):
    """One mountinfo line as fs/proc_namespace.c and fs/nfs/super.c (nfs_show_mount_options) write it for a mount
    given ``options`` [(name, value or None)]; ``extra`` is appended to the super options as it is."""
    addr = source.rsplit(":", 1)[0].strip("[]")
    mnt, sup = kernel_options(kernel_state(list(options)), vers, proto, port, nconnect, addr, clientaddr)
    return "%d 22 0:%d / %s %s shared:%d - %s %s %s%s\n" % (
        mount_id, mount_id, path, mnt, mount_id, "nfs" if vers == "3" else "nfs4", source, sup, extra)


def split_options(text):
    """[(name, value or None)] of a comma-separated option list (a mount unit's ``Options=``)."""
    return [(o.split("=", 1)[0], o.split("=", 1)[1]) if "=" in o else (o, None) for o in text.split(",") if o]


def mount_line(mount_id, what, where, fstype, options_text, clientaddr=CLIENTADDR, proto=None, kernel=None):
    """The mountinfo line the kernel shows once mount.nfs has mounted ``what`` at ``where`` with the option list
    ``options_text`` (a mount unit's What=, Where=, Type=, Options=). ``proto``: the transport the client really
    uses, when it differs from the one asked for (NFSv4 trunking reuses a TCP client). The version is ``vers=``
    (or ``nfsvers=``); without one mount.nfs negotiates, and the mount shows the highest v4 (4.2); ``Type=nfs4``
    without ``vers=`` also means 4.2. Options mount.nfs keeps to itself (USERSPACE, ``x-systemd.*``) are dropped.
    ``kernel``: the running kernel's release, for the options whose effect depends on it (``nconnect_kept``)."""
    opts = split_options(options_text)
    d = dict(opts)
    vers = d.get("vers") or d.get("nfsvers") or "4.2"
    if vers == "4":
        vers = "4.%s" % d.get("minorversion", "2")
    if fstype == "nfs4" and vers == "3":
        raise ValueError("an nfs4 mount cannot be NFSv3")
    kept = [(k, v) for k, v in opts if k not in ("proto", "port", "vers", "nfsvers", "minorversion", "nconnect")
            and k not in USERSPACE and not k.startswith("x-systemd.")]
    # mount.nfs takes the address family from the netid (rdma, tcp: IPv4; rdma6, tcp6: IPv6) and looks the server
    # up in it: an address of the other family does not resolve; the kernel shows the netid it uses
    host = what.rsplit(":", 1)[0]
    v6 = host.startswith("[")
    asked = d.get("proto") or ("tcp6" if v6 else "tcp")
    if (v6 and not asked.endswith("6")) or (asked.endswith("6") and host.replace(".", "").isdigit()):
        raise ValueError("Failed to resolve server %s: Address family for hostname not supported (proto=%s)"
                         % (host, asked))
    port = int(d["port"]) if d.get("port") else (20049 if asked.startswith("rdma") else 2049)
    proto = (proto + "6" if asked.endswith("6") else proto) if proto else asked
    nconnect = nconnect_kept(int(d["nconnect"]) if d.get("nconnect") else None, vers, proto, kernel)
    return nfs_line(mount_id, where, what, vers, proto, port, nconnect, options=kept, clientaddr=clientaddr)
