# -*- coding: utf-8 -*-
"""nfs_mount_options.judge on mounts that show the opposite: every option is reported as drift when the mount shows
otherwise (issue 21 item 24: the drift tests the mutants survived), table-driven, including the options no other
test gives as input. Mounts are written by the test kernel (tests/unit/nfs_kernel.py); states it does not model
(mand, migration, noalignwrite, write=, xprtsec=, bsize=) are appended to its super options as the kernel prints
them (fs/nfs/super.c nfs_show_mount_options, fs/proc_namespace.c show_sb_opts)."""
from __future__ import absolute_import, division, print_function

import pytest

from nfs_kernel import nfs_line

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import options as mo
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import parse_mountinfo

__metaclass__ = type

PATH = "/mnt/nfs-rdma"
SRC = "10.77.0.10:/srv/nfs"


def pairs(texts):
    return [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else None) for t in texts]


def judge(want, mounted=(), extra=""):
    (m,) = [m for m in parse_mountinfo(nfs_line(120, PATH, SRC, "4.1", options=pairs(mounted), extra=extra))
            if m["mountpoint"] == PATH]
    return mo.judge(pairs(want), m)


# the flags whose opposite the mount shows: (asked, the mount given, what it shows, the item)
@pytest.mark.parametrize("want,mounted,extra,item", [
    ("suid", ["nosuid"], "", ("suid", "nosuid", "suid")),
    ("dev", ["nodev"], "", ("dev", "nodev", "dev")),
    ("ac", ["noac"], "", ("ac", "noac", "ac")),
    ("resvport", ["noresvport"], "", ("resvport", "noresvport", "resvport")),
    ("nosoftreval", ["softreval"], "", ("nosoftreval", "softreval", "nosoftreval")),
    ("nosoftreval", ["softerr"], "", ("nosoftreval", "softreval", "nosoftreval")),   # softerr sets softreval
    # the options no other test gives as input
    ("acl", ["noacl"], "", ("acl", "noacl", "acl")),
    ("rdirplus", ["nordirplus"], "", ("rdirplus", "nordirplus", "rdirplus")),
    ("sharecache", ["nosharecache"], "", ("sharecache", "nosharecache", "sharecache")),
    ("noposix", ["posix"], "", ("noposix", "posix", "noposix")),
    ("nofsc", ["fsc"], "", ("nofsc", "fsc", "nofsc")),
    ("diratime", ["nodiratime"], "", ("diratime", "nodiratime", "diratime")),
    ("symfollow", ["nosymfollow"], "", ("symfollow", "nosymfollow", "symfollow")),
    ("nolazytime", ["lazytime"], "", ("nolazytime", "lazytime", "nolazytime")),
    ("dirsync", [], "", ("dirsync", "absent", "dirsync")),
    ("mand", [], "", ("mand", "absent", "mand")),
    ("nomand", [], ",mand", ("nomand", "mand", "nomand")),
    ("migration", [], "", ("migration", "absent", "migration")),
    ("nomigration", [], ",migration", ("nomigration", "migration", "nomigration")),
    ("noalignwrite", [], "", ("noalignwrite", "absent", "noalignwrite")),
    ("alignwrite", [], ",noalignwrite", ("alignwrite", "noalignwrite", "alignwrite")),
    ("write=eager", [], "", ("write", "write=lazy", "write=eager")),
    ("write=lazy", [], ",write=wait", ("write", "write=wait", "write=lazy")),
    ("xprtsec=tls", [], "", ("xprtsec", "xprtsec=none", "xprtsec=tls")),
    ("bsize=4096", [], ",bsize=8192", ("bsize", "bsize=8192", "bsize=4096")),
])
def test_a_mount_showing_the_opposite_is_drift(want, mounted, extra, item):
    assert judge([want], mounted, extra) == ([item], [])


# the same options on a mount that shows what was asked: no item
@pytest.mark.parametrize("want,mounted,extra", [
    ("suid", [], ""), ("dev", [], ""), ("ac", [], ""), ("resvport", [], ""), ("nosoftreval", [], ""),
    ("acl", [], ""), ("rdirplus", [], ""), ("sharecache", [], ""), ("noposix", [], ""), ("nofsc", [], ""),
    ("diratime", [], ""), ("symfollow", [], ""), ("nolazytime", [], ""), ("dirsync", ["dirsync"], ""),
    ("mand", [], ",mand"), ("nomand", [], ""), ("migration", [], ",migration"), ("nomigration", [], ""),
    ("noalignwrite", [], ",noalignwrite"), ("alignwrite", [], ""), ("write=eager", [], ",write=eager"),
    ("write=lazy", [], ""), ("xprtsec=tls", [], ",xprtsec=tls"), ("bsize=4096", [], ",bsize=4096"),
    ("bsize=8192", [], ",bsize=4096"),      # a smaller size agreed with the server is not drift
])
def test_a_mount_showing_what_was_asked_is_not_drift(want, mounted, extra):
    assert judge([want], mounted, extra) == ([], [])


def test_bsize_not_shown_is_not_compared():
    assert judge(["bsize=4096"]) == ([], ["bsize=4096"])


@pytest.mark.parametrize("shown", [["noatime"], ["strictatime"], ["nodiratime", "noatime"]])
def test_no_access_time_option_asked_leaves_the_mounts_own_alone(shown):
    """A volume that asks for no access-time option never judges it: a noatime volume is not remounted (kills
    ``atime_given`` starting True in ``_expand``)."""
    assert judge(["hard"], ["hard"] + shown) == ([], [])
    assert judge([], shown) == ([], [])
