# -*- coding: utf-8 -*-
"""nfs_mounts: a volume's extra options read back from mountinfo (nfs_mount_options.judge), against a node whose
kernel keeps and prints mount options as fs/nfs and fs/proc_namespace.c do (tests/unit/nfs_kernel.py: its own
model of the kernel, written apart from the one under test)."""
from __future__ import absolute_import, division, print_function


import pytest
from hypothesis import given, settings, strategies as st

from nfs_kernel import new_node, nfs_line

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import options as mo
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import parse_mountinfo
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

SRC = "10.77.0.10:/srv/nfs"
PATH = "/mnt/nfs-rdma"
VOL = {"path": PATH, "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1"}
UNIT = "mnt-nfs\\x2drdma.mount"
UNIT_PATH = "/etc/systemd/system/" + UNIT
# a mountinfo line the VM lab's bookworm 6.1 kernel wrote for the lab's export (fixtures/nfs_mounts)
REAL = ("286 26 0:44 / /mnt/nfs-rdma rw,relatime shared:129 - nfs4 10.77.0.10:/srv/nfs rw,vers=4.1,rsize=131072,"
        "wsize=131072,namlen=255,hard,proto=rdma,port=20049,timeo=600,retrans=2,sec=sys,clientaddr=10.77.0.10,"
        "local_lock=none,addr=10.77.0.10\n")


def pairs(texts):
    return [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else None) for t in texts]


def entry(texts=(), vers="4.1", line=None):
    """The mountinfo entry of a mount given the options ``texts``, as the test kernel prints it."""
    line = line or nfs_line(120, PATH, SRC, vers, options=pairs(texts))
    (m,) = [m for m in parse_mountinfo(line) if m["mountpoint"] == PATH]
    return m


def judge(want, mounted=None, vers="4.1", line=None):
    return mo.judge(pairs(want), entry(want if mounted is None else mounted, vers, line))


# every option the kernel keeps a record of, each read back from a mount given it
@pytest.mark.parametrize("opts", [
    ["hard"], ["soft"], ["softerr"], ["softerr", "softreval"], ["soft", "hard"], ["noatime"], ["relatime"],
    ["strictatime"], ["atime"], ["nodiratime"], ["nosuid", "nodev", "noexec"], ["suid", "dev", "exec"], ["ro"],
    ["rw"], ["defaults"], ["sync"], ["async"], ["lazytime"], ["nosymfollow"], ["timeo=600"], ["timeo=150"],
    ["retrans=5"], ["sec=sys"], ["sec=krb5:sys"], ["actimeo=30"], ["acregmin=10", "acdirmax=120"], ["noac"],
    ["ac"], ["nolock"], ["lock"], ["nocto"], ["cto"], ["noacl"], ["nordirplus"], ["nosharecache"],
    ["noresvport"], ["resvport"], ["posix"], ["lookupcache=all"], ["lookupcache=positive"], ["lookupcache=pos"],
    ["lookupcache=none"], ["local_lock=flock"], ["local_lock=none"], ["rsize=262144", "wsize=262144"],
    ["rsize=4194304"], ["fsc"], ["fsc=cache1"], ["max_connect=4"], ["max_connect=1"],
    ["hard", "noatime", "timeo=600", "retrans=3", "nocto", "actimeo=5", "lookupcache=pos"],
])
def test_options_the_kernel_shows_are_read_back(opts):
    assert judge(opts) == ([], [])


@pytest.mark.parametrize("want,mounted,items", [
    (["hard"], ["soft"], [("hard", "soft", "hard")]),
    (["hard"], ["softerr"], [("hard", "softerr", "hard")]),
    (["soft"], [], [("soft", "hard", "soft")]),
    (["noatime"], [], [("noatime", "relatime", "noatime")]),
    (["strictatime"], [], [("strictatime", "relatime", "strictatime")]),
    (["noatime", "strictatime"], ["noatime"], [("strictatime", "noatime", "strictatime")]),
    (["atime"], ["noatime"], [("relatime", "noatime", "relatime")]),
    (["noatime", "relatime"], [], [("noatime", "relatime", "noatime")]),     # relatime does not undo noatime
    (["relatime"], ["strictatime"], [("relatime", "strictatime", "relatime")]),
    (["ro"], [], [("ro", "rw", "ro")]),
    (["rw"], ["ro"], [("rw", "ro", "rw")]),
    (["nosuid"], [], [("nosuid", "absent", "nosuid")]),
    (["exec"], ["noexec"], [("exec", "noexec", "exec")]),
    (["sync"], [], [("sync", "absent", "sync")]),
    (["timeo=600"], ["timeo=100"], [("timeo", "timeo=100", "timeo=600")]),
    (["retrans=2"], ["retrans=7"], [("retrans", "retrans=7", "retrans=2")]),
    (["sec=krb5"], [], [("sec", "sec=sys", "sec=krb5")]),
    (["actimeo=30"], [], [("acregmin", "acregmin=3", "acregmin=30"), ("acregmax", "acregmax=60", "acregmax=30"),
                          ("acdirmax", "acdirmax=60", "acdirmax=30")]),
    (["acregmin=3"], ["acregmin=9"], [("acregmin", "acregmin=9", "acregmin=3")]),
    (["nolock"], [], [("nolock", "absent", "nolock")]),
    (["lock"], ["nolock"], [("lock", "nolock", "lock")]),
    (["cto"], ["nocto"], [("cto", "nocto", "cto")]),
    (["lookupcache=none"], [], [("lookupcache", "lookupcache=all", "lookupcache=none")]),
    (["lookupcache=all"], ["lookupcache=pos"], [("lookupcache", "lookupcache=pos", "lookupcache=all")]),
    (["local_lock=none"], ["local_lock=all"], [("local_lock", "local_lock=all", "local_lock=none")]),
    # the kernel lowers rsize to what the server takes, never raises it: larger than asked is another mount's
    (["rsize=65536"], [], [("rsize", "rsize=1048576", "rsize=65536")]),
    (["fsc"], [], [("fsc", "absent", "fsc")]),
    (["max_connect=4"], [], [("max_connect", "max_connect=1", "max_connect=4")]),
])
def test_options_the_mount_shows_otherwise_are_drift(want, mounted, items):
    got, unknown = judge(want, mounted)
    assert (sorted(got), unknown) == (sorted(items), [])


@pytest.mark.parametrize("opts,vers", [
    (["_netdev", "nofail", "x-systemd.automount", "x-systemd.mount-timeout=30"], "4.1"),
    (["bg", "retry=5", "clientaddr=10.0.0.1"], "4.1"),
    (["mountproto=tcp", "mountport=635"], "3"),
    (["max_connect=4"], "3"),           # NFSv3 never shows it
    (["frobnicate", "wibble=3"], "4.1"),  # options this model does not know
    (["norelatime"], "4.1"),            # the kernel sets relatime again (path_mount)
])
def test_options_without_a_record_are_not_compared_never_matched(opts, vers):
    items, unknown = judge(opts, [], vers)
    assert items == [] and unknown == opts


def test_noac_makes_the_attribute_times_uncomparable():
    assert judge(["noac", "acregmin=10"]) == ([], ["acregmin=10"])


def test_hard_clears_softreval_and_softerr_sets_it():
    assert judge(["softreval", "hard"]) == ([], [])
    assert judge(["nosoftreval", "softerr"]) == ([], [])
    assert judge(["softerr", "nosoftreval"]) == ([], [])


def test_lock_and_nolock_decide_local_lock_wherever_they_are():
    assert judge(["nolock", "local_lock=flock"]) == ([], ["local_lock=flock"])
    assert judge(["local_lock=flock", "nolock"], ["nolock"]) == ([], ["local_lock=flock"])


def test_the_real_kernels_line():
    """The VM lab kernel's own line: what it shows is judged, and it shows no atime flag beyond relatime."""
    assert judge(["hard", "timeo=600", "retrans=2", "sec=sys", "local_lock=none", "rsize=1048576"], line=REAL) \
        == ([], [])
    assert sorted(judge(["soft", "noatime", "rsize=65536"], line=REAL)[0]) == [
        ("noatime", "relatime", "noatime"), ("rsize", "rsize=131072", "rsize=65536"), ("soft", "hard", "soft")]


def test_a_vendor_client_that_prints_no_retry_mode_leaves_it_uncompared():
    line = REAL.replace(",hard", "")
    assert judge(["hard"], line=line) == ([], ["hard"])


KNOWN = ["hard", "soft", "softerr", "noatime", "atime", "relatime", "strictatime", "nostrictatime", "nodiratime", "nosuid", "suid", "nodev",
         "noexec", "ro", "rw", "sync", "async", "lazytime", "nocto", "cto", "noac", "ac", "nolock", "lock", "noacl",
         "nordirplus", "noresvport", "posix", "softreval", "nosoftreval", "timeo=50", "timeo=600", "retrans=4",
         "sec=sys", "actimeo=20", "acregmin=7", "acdirmin=40", "lookupcache=pos", "lookupcache=none",
         "local_lock=flock", "local_lock=posix", "rsize=131072", "wsize=524288", "fsc", "max_connect=8"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(KNOWN), max_size=8))
def test_any_option_list_reads_back_from_the_mount_it_made(opts):
    """Whatever the order and the overrides (later options win), a mount made with the options matches them."""
    names = [o.split("=")[0] for o in opts]
    if "noac" in names and any(n.startswith("ac") and n not in ("ac",) for n in names):
        opts = [o for o in opts if not o.startswith(("actimeo", "acregmin", "acdirmin"))]
    if "nolock" in names or "lock" in names:   # they decide local_lock (test_lock_and_nolock_decide_local_lock...)
        opts = [o for o in opts if not o.startswith("local_lock=")]
    assert judge(opts) == ([], [])


# --- through the concern: the check, the fix and the report ------------------------------------------------

@pytest.fixture
def node(tmp_path):
    return new_node(tmp_path)


def apply(node, check_mode, vol):
    return check.apply(Sysroot(node.root), node.run, {"volumes": [vol]}, check_mode, "/usr/bin/systemctl")


def test_a_mount_made_with_other_options_is_drift_and_the_fix_remounts_it(node):
    vol = dict(VOL, options=["hard", "noatime", "timeo=600", "_netdev"])
    p = nm.plan({"volumes": [vol]}, vendor_installed=False)
    Sysroot(node.root).write_file_atomic(UNIT_PATH, p["volumes"][0]["unit_text"])
    node.run(["systemctl", "enable", UNIT])
    # mounted by hand with other options (the unit is as desired)
    node.write_mountinfo(node.mountinfo() + nfs_line(120, PATH, SRC, "4.1", options=pairs(["soft", "timeo=100"])))
    node.calls = []
    res = apply(node, True, vol)
    assert res["changed"] and res["status"]["status"] == "drift"
    assert sorted((i["key"], i["current"], i["desired"]) for i in res["items"]) == [
        ("option:hard", "soft", "hard"), ("option:noatime", "relatime", "noatime"),
        ("option:timeo", "timeo=100", "timeo=600")]
    assert res["volumes"][0]["options_not_compared"] == ["_netdev"]
    node.calls = []
    res = apply(node, False, vol)
    assert node.verbs() == ["is-enabled", "restart", "is-enabled"]
    assert res["status"]["status"] == "ok" and res["status"]["corrected"]
    line = node.mountinfo().splitlines()[-1]
    assert " rw,noatime " in line and ",hard," in line and ",timeo=600," in line
    assert check.evaluate(Sysroot(node.root), node.run, {"volumes": [vol]}, "/usr/bin/systemctl") == \
        {"status": "ok", "reason": None, "items": []}
