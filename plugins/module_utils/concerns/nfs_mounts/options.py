# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A volume's extra mount options (``storage_mounts_volumes[].options``) read back from mountinfo.

The kernel does not echo the options a mount was given: it prints the state it keeps. So each option is judged by
what that state shows, following the kernel's writers:

- ``fs/proc_namespace.c`` ``show_mountinfo``: the mount's own flags in field 6 (``ro``/``rw``, ``nosuid``,
  ``nodev``, ``noexec``, ``noatime``, ``nodiratime``, ``relatime``, ``nosymfollow``), the superblock's in the super
  options (``ro``/``rw``, ``sync``, ``dirsync``, ``mand``, ``lazytime``), then the file system's own;
- ``fs/nfs/super.c`` ``nfs_show_mount_options``: ``hard`` unless ``soft`` or ``softerr``; the flags ``soft``,
  ``softerr``, ``softreval``, ``posix``, ``nocto``, ``noac``, ``nolock``, ``noacl``, ``nordirplus``, ``nosharecache``,
  ``noresvport`` only when set; ``acregmin``/``acregmax``/``acdirmin``/``acdirmax`` only when not their defaults
  (3, 60, 30, 60 s); ``timeo``, ``retrans``, ``sec`` and ``local_lock`` always; ``lookupcache=pos|none`` only when not
  ``all``; ``max_connect`` (NFSv4) only above 1; ``xprtsec`` only for TLS; ``fsc``, ``migration``, ``noalignwrite``
  and ``write=eager|wait`` only when set.

``rsize``, ``wsize`` and ``bsize`` are what the client and the server agreed: the kernel lowers a request to the
server's and the transport's maximum, so a smaller value shown is not drift, a larger one is. Options that never
reach the kernel's record (``_netdev``, ``nofail``, ``x-systemd.*``, ``bg``, ``retry=``, the ``mount*=`` options of
NFSv3's MOUNT protocol, ``clientaddr``, ...) and options this table does not know are reported as not compared;
they are never reported as matching.

``judge(extra, mount)`` -> ``(items, not_compared)``: ``items`` are ``(option, current, desired)`` for the options
the mount shows otherwise; ``mount`` is a ``parse_mountinfo`` entry (``mount_options``: field 6, ``options``: both
fields). Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# per-mount flags (show_mnt_opts), superblock flags (show_sb_opts): option -> the flag it sets, or (flag, False)
# for an option that clears it
VFS_MOUNT = {
    "nosuid": ("nosuid", True), "suid": ("nosuid", False), "nodev": ("nodev", True), "dev": ("nodev", False),
    "noexec": ("noexec", True), "exec": ("noexec", False),
    "nodiratime": ("nodiratime", True), "diratime": ("nodiratime", False), "nosymfollow": ("nosymfollow", True),
    "symfollow": ("nosymfollow", False),
}
VFS_SB = {
    "sync": ("sync", True), "async": ("sync", False), "dirsync": ("dirsync", True), "mand": ("mand", True),
    "nomand": ("mand", False), "lazytime": ("lazytime", True), "nolazytime": ("lazytime", False),
}
# NFS flags shown only when set (nfs_info[] and the options after it); their negations clear them
NFS_FLAGS = {
    "softreval": ("softreval", True), "nosoftreval": ("softreval", False), "posix": ("posix", True),
    "noposix": ("posix", False), "nocto": ("nocto", True), "cto": ("nocto", False), "noac": ("noac", True),
    "ac": ("noac", False), "nolock": ("nolock", True), "lock": ("nolock", False), "noacl": ("noacl", True),
    "acl": ("noacl", False), "nordirplus": ("nordirplus", True), "rdirplus": ("nordirplus", False),
    "nosharecache": ("nosharecache", True), "sharecache": ("nosharecache", False),
    "noresvport": ("noresvport", True), "resvport": ("noresvport", False), "fsc": ("fsc", True),
    "nofsc": ("fsc", False), "migration": ("migration", True), "nomigration": ("migration", False),
    "noalignwrite": ("noalignwrite", True), "alignwrite": ("noalignwrite", False),
}
AC_DEFAULTS = {"acregmin": "3", "acregmax": "60", "acdirmin": "30", "acdirmax": "60"}
ALWAYS_SHOWN = ("timeo", "retrans", "local_lock")
NEGOTIATED = ("rsize", "wsize", "bsize")
# shown only when not the default: option -> (default value, how a value is shown)
SHOWN_UNLESS_DEFAULT = {
    "lookupcache": ("all", {"all": "all", "positive": "pos", "pos": "pos", "none": "none"}),
    "max_connect": ("1", None),
    "xprtsec": ("none", None),
    "write": ("lazy", None),
}
# read by mount(8) or systemd, or by NFSv3's MOUNT protocol, or chosen by the kernel: never in the record to compare
NOT_RECORDED = frozenset((
    "_netdev", "nofail", "auto", "noauto", "user", "nouser", "users", "owner", "group", "bg", "fg", "retry",
    "sloppy", "intr", "nointr", "mountproto", "mountport", "mounthost", "mountaddr", "mountvers", "mountprog",
    "nfsprog", "clientaddr", "namlen", "addr", "trunkdiscovery", "notrunkdiscovery", "comment", "context",
    "fscontext", "defcontext", "rootcontext",
    "norelatime",   # clears MS_RELATIME, which the kernel sets again unless noatime or strictatime (do_mount)
))


def _one(name, value, mount):
    """(current, desired) when the mount shows otherwise, None when it shows the option, "not_compared" else."""
    opts = mount.get("options") or {}
    mnt = mount.get("mount_options") if mount.get("mount_options") is not None else opts
    desired = name if value is None else "%s=%s" % (name, value)
    if name in ("ro", "rw") and value is None:
        cur = "ro" if mnt.get("ro") else "rw"
        return None if cur == name else (cur, desired)
    if value is None and name in ("noatime", "relatime", "strictatime"):
        cur = "noatime" if "noatime" in mnt else ("relatime" if "relatime" in mnt else "strictatime")
        return None if cur == name else (cur, desired)
    # a flag shown only when set: the mount's own in field 6, the superblock's and NFS's in the super options
    for table, field in ((VFS_MOUNT, mnt), (VFS_SB, opts), (NFS_FLAGS, opts)):
        if value is None and name in table:
            flag, on = table[name]
            shown = flag in field
            return None if shown == on else (flag if shown else "absent", desired)
    if value is None and name in ("hard", "soft", "softerr"):
        cur = "softerr" if "softerr" in opts else ("soft" if "soft" in opts else ("hard" if "hard" in opts else None))
        if cur is None:
            return "not_compared"
        return None if cur == name else (cur, desired)
    if value is not None and name in ALWAYS_SHOWN:
        cur = opts.get(name)
        if not isinstance(cur, str):
            return "not_compared"
        return None if cur == value else ("%s=%s" % (name, cur), desired)
    if value is not None and name == "sec":
        cur = opts.get("sec")
        if not isinstance(cur, str):
            return "not_compared"
        return None if cur in value.split(":") else ("sec=%s" % cur, desired)
    if value is not None and name in AC_DEFAULTS:
        if "noac" in opts:
            return "not_compared"    # noac zeroes the attribute cache times whatever was asked
        cur = opts.get(name, AC_DEFAULTS[name])
        return None if cur == value else ("%s=%s" % (name, cur), desired)
    if value is not None and name in SHOWN_UNLESS_DEFAULT:
        if name == "max_connect" and mount.get("fstype") != "nfs4":
            return "not_compared"    # NFSv3 does not show it
        default, canon = SHOWN_UNLESS_DEFAULT[name]
        want = (canon or {}).get(value, value)
        if canon is not None and value not in canon:
            return "not_compared"
        cur = opts.get(name, (canon or {}).get(default, default))
        return None if cur == want else ("%s=%s" % (name, cur), desired)
    if value is not None and name in NEGOTIATED:
        cur = opts.get(name)
        if not (isinstance(cur, str) and cur.isdigit() and value.isdigit()):
            return "not_compared"
        return None if int(cur) <= int(value) else ("%s=%s" % (name, cur), desired)
    if value is not None and name == "fsc":
        cur = opts.get("fsc")
        return None if cur == value else ("absent" if cur is None else "fsc=%s" % cur, desired)
    return "not_compared"


# options that set one piece of the kernel's state: of each group, the last one given is what the mount gets
GROUPS = {"ro": "rw", "rw": "rw", "hard": "retry", "soft": "retry", "softerr": "retry"}
# the access-time options are two independent flags (MS_NOATIME: noatime/atime, MS_STRICTATIME: strictatime/
# nostrictatime); the kernel shows relatime unless one is set, neither with strictatime (path_mount)
ATIME = ("noatime", "atime", "strictatime", "nostrictatime", "relatime")


def _group(name):
    if name in GROUPS:
        return GROUPS[name]
    for table in (VFS_MOUNT, VFS_SB, NFS_FLAGS):
        if name in table:
            return "flag:" + table[name][0]
    return name


def _expand(extra):
    """The options as the kernel's parser leaves them, read left to right: of the options that set one thing the
    last wins; ``actimeo`` is the four times it sets; ``defaults`` is what it means to the kernel (rw, suid, dev,
    exec, async); ``hard`` also clears ``softreval`` and ``softerr`` sets it; ``lock``/``nolock`` decide ``local_lock`` whatever their
    place (nfs_try_mount_request), so a ``local_lock=`` beside them is not what the mount gets."""
    out, noatime, strict, atime_given = {}, False, False, False

    def put(name, value):
        g = _group(name)
        out.pop(g, None)
        out[g] = (name, value)

    for name, value in extra:
        n = name.lower()
        if n in ATIME and value is None:
            atime_given = True
            noatime = {"noatime": True, "atime": False}.get(n, noatime)
            strict = {"strictatime": True, "nostrictatime": False}.get(n, strict)
        elif n == "actimeo" and value is not None:
            for k in AC_DEFAULTS:
                put(k, value)
        elif n == "defaults" and value is None:
            for k in ("rw", "suid", "dev", "exec", "async"):
                put(k, None)
        else:
            # hard clears softreval and softerr sets it (fs_context.c): an earlier softreval/nosoftreval is undone
            undone = {"hard": ("softreval", None), "softerr": ("nosoftreval", None)}.get(n)
            if value is None and undone and out.get("flag:softreval") == undone:
                out.pop("flag:softreval")
            put(n, value)
    if atime_given:
        out["atime"] = ("strictatime" if strict else ("noatime" if noatime else "relatime"), None)
    overridden = []
    if "flag:nolock" in out and "local_lock" in out:
        overridden.append(out.pop("local_lock"))
    return list(out.values()), overridden


def judge(extra, mount):
    """(items, not_compared) for the volume's extra options ``extra`` [(name, value or None)] on ``mount``."""
    items = []
    wanted, overridden = _expand(extra)
    unknown = [n if v is None else "%s=%s" % (n, v) for n, v in overridden]
    for name, value in wanted:
        text = name if value is None else "%s=%s" % (name, value)
        if name in NOT_RECORDED:   # x- options and any other name _one knows no field for are not compared there
            unknown.append(text)
            continue
        res = _one(name, value, mount)
        if res == "not_compared":
            unknown.append(text)
        elif res is not None:
            items.append((name, res[0], res[1]))
    return items, unknown
