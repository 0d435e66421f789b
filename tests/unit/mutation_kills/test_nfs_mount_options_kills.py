# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nfs_mount_options.judge on mounts that show the opposite of what was asked (make mutation's survivors): each flag
option against its negation, the access-time options, the values shown always, unless default or as negotiated, and
the options never compared. The mounts are literal mountinfo lines as fs/proc_namespace.c and fs/nfs/super.c print
them, read by the real parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import options as mo
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import parse_mountinfo

SUPER = ("rw,vers=4.1,rsize=131072,wsize=131072,namlen=255,hard,proto=rdma,port=20049,timeo=600,retrans=2,sec=sys,"
         "clientaddr=10.0.0.2,local_lock=none,addr=10.0.0.1")


def mount(own="rw,relatime", sup=SUPER, fstype="nfs4"):
    (m,) = parse_mountinfo("120 26 0:44 / /mnt/v %s shared:1 - %s 10.0.0.1:/e %s\n" % (own, fstype, sup))
    return m


def judge(texts, m):
    return mo.judge([(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else None) for t in texts], m)


@pytest.mark.parametrize("want,m,items", [
    # per-mount flags (field 6)
    (["suid"], mount("rw,nosuid,relatime"), [("suid", "nosuid", "suid")]),
    (["nosuid"], mount(), [("nosuid", "absent", "nosuid")]),
    (["dev"], mount("rw,nodev,relatime"), [("dev", "nodev", "dev")]),
    (["exec"], mount("rw,noexec,relatime"), [("exec", "noexec", "exec")]),
    (["diratime"], mount("rw,nodiratime,relatime"), [("diratime", "nodiratime", "diratime")]),
    (["symfollow"], mount("rw,nosymfollow,relatime"), [("symfollow", "nosymfollow", "symfollow")]),
    (["defaults"], mount("rw,nosuid,relatime"), [("suid", "nosuid", "suid")]),
    (["ro"], mount(), [("ro", "rw", "ro")]),
    (["rw"], mount("ro,relatime"), [("rw", "ro", "rw")]),
    # superblock flags (super options)
    (["async"], mount(sup="sync," + SUPER), [("async", "sync", "async")]),
    (["sync"], mount(), [("sync", "absent", "sync")]),
    (["dirsync"], mount(), [("dirsync", "absent", "dirsync")]),
    (["nomand"], mount(sup="mand," + SUPER), [("nomand", "mand", "nomand")]),
    (["nolazytime"], mount(sup="lazytime," + SUPER), [("nolazytime", "lazytime", "nolazytime")]),
    # NFS flags shown only when set
    (["ac"], mount(sup=SUPER + ",noac"), [("ac", "noac", "ac")]),
    (["resvport"], mount(sup=SUPER + ",noresvport"), [("resvport", "noresvport", "resvport")]),
    (["nosoftreval"], mount(sup=SUPER + ",softreval"), [("nosoftreval", "softreval", "nosoftreval")]),
    (["softreval"], mount(), [("softreval", "absent", "softreval")]),
    (["cto"], mount(sup=SUPER + ",nocto"), [("cto", "nocto", "cto")]),
    (["lock"], mount(sup=SUPER + ",nolock"), [("lock", "nolock", "lock")]),
    (["acl"], mount(sup=SUPER + ",noacl"), [("acl", "noacl", "acl")]),
    (["rdirplus"], mount(sup=SUPER + ",nordirplus"), [("rdirplus", "nordirplus", "rdirplus")]),
    (["sharecache"], mount(sup=SUPER + ",nosharecache"), [("sharecache", "nosharecache", "sharecache")]),
    (["noposix"], mount(sup=SUPER + ",posix"), [("noposix", "posix", "noposix")]),
    (["nofsc"], mount(sup=SUPER + ",fsc"), [("nofsc", "fsc", "nofsc")]),
    (["migration"], mount(), [("migration", "absent", "migration")]),
    (["alignwrite"], mount(sup=SUPER + ",noalignwrite"), [("alignwrite", "noalignwrite", "alignwrite")]),
    # access time: two flags, shown as noatime, relatime or neither (strictatime)
    (["noatime"], mount(), [("noatime", "relatime", "noatime")]),
    (["strictatime"], mount("rw,noatime"), [("strictatime", "noatime", "strictatime")]),
    (["relatime"], mount("rw"), [("relatime", "strictatime", "relatime")]),
    (["atime"], mount("rw,noatime"), [("relatime", "noatime", "relatime")]),
    (["noatime", "atime"], mount("rw,noatime"), [("relatime", "noatime", "relatime")]),
    (["strictatime", "nostrictatime"], mount("rw"), [("relatime", "strictatime", "relatime")]),
    (["NOATIME"], mount("rw,noatime"), []),
    # hard/soft/softerr
    (["soft"], mount(), [("soft", "hard", "soft")]),
    (["hard"], mount(sup=SUPER.replace("hard", "softerr")), [("hard", "softerr", "hard")]),
    (["softerr"], mount(sup=SUPER.replace("hard", "soft")), [("softerr", "soft", "softerr")]),
    # values shown always
    (["timeo=150"], mount(), [("timeo", "timeo=600", "timeo=150")]),
    (["retrans=5"], mount(), [("retrans", "retrans=2", "retrans=5")]),
    (["local_lock=flock"], mount(), [("local_lock", "local_lock=none", "local_lock=flock")]),
    (["sec=krb5"], mount(), [("sec", "sec=sys", "sec=krb5")]),
    (["sec=krb5:sys"], mount(), []),
    # attribute cache times: shown unless the default
    (["acregmin=10"], mount(), [("acregmin", "acregmin=3", "acregmin=10")]),
    (["acdirmin=30"], mount(), []),
    (["acregmax=60"], mount(sup=SUPER + ",acregmax=120"), [("acregmax", "acregmax=120", "acregmax=60")]),
    (["actimeo=30"], mount(), [("acregmin", "acregmin=3", "acregmin=30"), ("acregmax", "acregmax=60", "acregmax=30"),
                               ("acdirmax", "acdirmax=60", "acdirmax=30")]),
    # shown unless the default
    (["lookupcache=none"], mount(), [("lookupcache", "lookupcache=all", "lookupcache=none")]),
    (["lookupcache=positive"], mount(sup=SUPER + ",lookupcache=pos"), []),
    (["lookupcache=all"], mount(sup=SUPER + ",lookupcache=none"), [("lookupcache", "lookupcache=none",
                                                                    "lookupcache=all")]),
    (["max_connect=4"], mount(), [("max_connect", "max_connect=1", "max_connect=4")]),
    (["max_connect=1"], mount(sup=SUPER + ",max_connect=4"), [("max_connect", "max_connect=4", "max_connect=1")]),
    (["xprtsec=tls"], mount(), [("xprtsec", "xprtsec=none", "xprtsec=tls")]),
    (["write=eager"], mount(), [("write", "write=lazy", "write=eager")]),
    # negotiated sizes: a smaller one shown is no drift, a larger one is
    (["rsize=65536"], mount(), [("rsize", "rsize=131072", "rsize=65536")]),
    (["rsize=1048576", "wsize=131072"], mount(), []),
    # fsc with a cache tag
    (["fsc=cache1"], mount(), [("fsc", "absent", "fsc=cache1")]),
    (["fsc=cache1"], mount(sup=SUPER + ",fsc=other"), [("fsc", "fsc=other", "fsc=cache1")]),
    (["fsc=cache1"], mount(sup=SUPER + ",fsc=cache1"), []),
])
def test_drift_when_the_mount_shows_otherwise(want, m, items):
    assert judge(want, m) == (items, [])


@pytest.mark.parametrize("want,m,not_compared", [
    (["_netdev", "x-systemd.automount", "nofail", "foo=1"], mount(),
     ["_netdev", "x-systemd.automount", "nofail", "foo=1"]),
    (["hard"], mount(sup=SUPER.replace("hard,", "")), ["hard"]),
    (["timeo=600"], mount(sup=SUPER.replace("timeo=600,", "")), ["timeo=600"]),
    (["sec=sys"], mount(sup=SUPER.replace("sec=sys,", "")), ["sec=sys"]),
    (["acregmin=10"], mount(sup=SUPER + ",noac"), ["acregmin=10"]),
    (["lookupcache=bogus"], mount(), ["lookupcache=bogus"]),
    (["max_connect=4"], mount(fstype="nfs"), ["max_connect=4"]),
    (["rsize=big"], mount(), ["rsize=big"]),
    (["bsize=4096"], mount(), ["bsize=4096"]),
    # an x- option is userspace's (mount(8) keeps it): never compared, even where a mount table were to show it
    (["x-gvfs-show", "x-a=1"], mount(sup=SUPER + ",x-gvfs-show,x-a=2"), ["x-gvfs-show", "x-a=1"]),
])
def test_not_compared(want, m, not_compared):
    assert judge(want, m) == ([], not_compared)


def test_no_access_time_option_asks_for_none():
    # a volume that names no access-time option takes the mount's, whatever it is
    assert judge(["hard"], mount("rw,noatime")) == ([], [])
    assert judge([], mount("rw")) == ([], [])


def test_nolock_decides_local_lock():
    assert judge(["local_lock=flock", "nolock"], mount()) == ([("nolock", "absent", "nolock")], ["local_lock=flock"])


@pytest.mark.parametrize("want,m", [
    (["softreval", "hard"], mount()),
    (["nosoftreval", "softerr"], mount(sup=SUPER.replace("hard", "softerr") + ",softreval")),
])
def test_hard_and_softerr_undo_an_earlier_softreval_choice(want, m):
    assert judge(want, m) == ([], [])


def test_last_of_a_group_wins():
    assert judge(["soft", "hard", "ro", "rw", "nosuid", "suid"], mount()) == ([], [])
    assert judge(["rw", "ro"], mount()) == ([("ro", "rw", "ro")], [])


def test_mount_without_own_options_falls_back_to_all():
    m = {"fstype": "nfs4", "options": {"rw": True, "nosuid": True, "hard": True}}
    assert mo.judge([("suid", None)], m) == ([("suid", "nosuid", "suid")], [])
    assert mo.judge([("ro", None)], {"fstype": "nfs4"}) == ([("ro", "rw", "ro")], [])


def test_strictatime_wins_over_a_later_noatime():
    # MS_STRICTATIME stays set by a later noatime: the kernel shows neither flag
    assert judge(["strictatime", "noatime"], mount("rw")) == ([], [])
    assert judge(["strictatime", "relatime"], mount("rw")) == ([], [])


def test_the_mounts_own_flags_decide_ro_not_the_superblocks():
    # a read-write bind of a read-only superblock, and the reverse
    assert judge(["rw"], mount("rw,relatime", sup="ro," + SUPER[3:])) == ([], [])
    assert judge(["ro"], mount("ro,relatime")) == ([], [])


def test_items_follow_the_order_of_the_last_option_of_each_group():
    assert judge(["timeo=1", "ro", "timeo=2"], mount()) == (
        [("ro", "rw", "ro"), ("timeo", "timeo=600", "timeo=2")], [])


def test_overridden_local_lock_without_a_value():
    assert judge(["local_lock", "nolock"], mount(sup=SUPER + ",nolock")) == ([], ["local_lock"])
