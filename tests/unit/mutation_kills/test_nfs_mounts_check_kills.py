# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nfs_mounts_check: what its own tests left unseen (make mutation's survivors): fstab's octal escapes and comment
lines, the /proc/mounts fallback, every field of the client state, a volume and the diff, each message word for
word, the systemctl commands a fix runs (argv and rc), and whose unit an absent volume's is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from nfs_kernel import new_node, nfs_line

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check as nfs_mounts_check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

SYSTEMCTL = "/usr/bin/systemctl"
SRC = "10.77.0.10:/srv/nfs"
VOL = {"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1"}
UNIT = "mnt-nfs\\x2drdma.mount"
UNIT_PATH = "/etc/systemd/system/" + UNIT
KERNEL = "6.1.0-28-amd64"
NOT_OURS = "not a unit the collection wrote, left alone"
HINT_CLIENT = (" (the in-tree NFS client is in memory where the vendor's is wanted: boot into the vendor client, "
               "playbooks/kernel_upgrade.yml)")
HINT_PROTO = (" (an NFSv4 mount of the same server and minor version over TCP makes the kernel reuse that client: "
              "unmount it or use another vers)")


def item(obj, key, current, desired):
    return {"concern": "nfs_mounts", "object": obj, "key": key, "current": current, "desired": desired}


def put(root, path, text, mode=0o644):
    Sysroot(str(root)).write_file_atomic(path, text)
    os.chmod(os.path.join(str(root), path.lstrip("/")), mode)


def unit_text(vol=None):
    return nm.plan({"volumes": [vol or VOL]}, vendor_installed=False)["volumes"][0]["unit_text"]


def argv(*verbs):
    return [{"argv": [SYSTEMCTL] + v.split(" "), "rc": 0} for v in verbs]


# --- reading the node --------------------------------------------------------------------------------------

# One ordered run: with ``i = 4`` or ``i -= 4`` after an escape the loop never ends on most texts, so the first
# entries are those such a loop fails on at once ("\\040" alone, then an escape at index 1 with text after it).
UNESCAPES = [
    ("\\040", " "), ("x\\040y", "x y"), ("a\\134", "a\\"), ("a123", "a123"), ("a\\04", "a\\04"), ("a\\", "a\\"),
    ("a\\X12", "a\\X12"), ("a\\804", "a\\804"),
]


def test_unescape_fstab_in_order():
    assert [nfs_mounts_check._unescape_fstab(text) for text, _want in UNESCAPES] == [w for _t, w in UNESCAPES]


@pytest.mark.parametrize("text,want", [
    (None, []),
    ("srv:/e /mnt/v/\n", ["/mnt/v"]),                                  # two fields are enough
    ("\n  \ngarbage\nsrv:/e /mnt/v nfs 0 0\n", ["/mnt/v"]),             # blank and one-field lines skipped
    ("#srv:/x /mnt/x nfs 0 0\n# a b\nsrv:/e\t/mnt/v nfs 0 0\n", ["/mnt/v"]),
])
def test_fstab_mount_points(tmp_path, text, want):
    if text is not None:
        put(tmp_path, "/etc/fstab", text)
    assert nfs_mounts_check.fstab_mount_points(Sysroot(str(tmp_path))) == want


def test_read_mounts_falls_back_to_proc_mounts_then_fails(tmp_path):
    put(tmp_path, "/proc/self/mountinfo", "")
    put(tmp_path, "/proc/mounts", "srv:/e /mnt/v nfs4 rw,vers=4.1,proto=rdma 0 0\n")
    assert nfs_mounts_check.read_mounts(Sysroot(str(tmp_path))) == (
        [{"mount_id": None, "root": "/", "mountpoint": "/mnt/v", "fstype": "nfs4", "source": "srv:/e",
          "options": {"rw": True, "vers": "4.1", "proto": "rdma"}}], "/proc/mounts")
    os.unlink(str(tmp_path / "proc/mounts"))
    with pytest.raises(nfs_mounts_check.MountError) as e:
        nfs_mounts_check.read_mounts(Sysroot(str(tmp_path)))
    assert str(e.value) == "neither /proc/self/mountinfo nor /proc/mounts can be read: the mounts cannot be checked"


def vendor_record(root, kernels):
    put(root, "/etc/gpufabric/vendor_nfs.json", json.dumps({"version": 1, "kernels": kernels}))


NOTHING = {"kernel_release": "", "installed": False, "version": None, "nfs_bundle_version": None,
           "rpcrdma_loaded": False, "rpcrdma_srcversion": None, "rpcrdma_srcversion_installed": None,
           "in_use": "not_loaded"}


@pytest.mark.parametrize("setup,want", [
    ("bare", NOTHING),
    ("junk", dict(NOTHING, kernel_release=KERNEL)),
    ("vendor", {"kernel_release": KERNEL, "installed": True, "version": "4.0.35", "nfs_bundle_version": "4.0.35",
                "rpcrdma_loaded": True, "rpcrdma_srcversion": "ABC", "rpcrdma_srcversion_installed": "ABC",
                "in_use": "vendor"}),
])
def test_client_state_every_field(tmp_path, setup, want):
    if setup != "bare":
        put(tmp_path, "/proc/sys/kernel/osrelease", KERNEL + "\n")
    if setup == "junk":
        vendor_record(tmp_path, {KERNEL: "junk"})
    if setup == "vendor":
        vendor_record(tmp_path, {KERNEL: {"version": "4.0.35", "modules": {"rpcrdma": {"srcversion": "ABC"}}}})
        put(tmp_path, "/sys/module/rpcrdma/srcversion", "ABC\n")
        put(tmp_path, "/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35\n")
    assert nfs_mounts_check.client_state(Sysroot(str(tmp_path))) == want


def test_observe_takes_only_valued_options():
    top = {"mountpoint": "/mnt/v", "fstype": "nfs4", "source": "s:/e", "options": {"proto": True, "port": "20049"}}
    assert nfs_mounts_check.observe([], "/mnt/v", top) == {
        "path": "/mnt/v", "mounted": True, "fstype": "nfs4", "source": "s:/e", "proto": None, "port": "20049",
        "vers": None, "nconnect": None, "remoteports": None, "localports": None}


class Systemctl(object):
    """A run() that records its argv and answers ``reply``, or fails the test when ``reply`` is None."""

    def __init__(self, reply=None):
        self.reply, self.calls = reply, []

    def __call__(self, args):
        assert self.reply is not None, "systemctl was run: %r" % (args,)
        self.calls.append(list(args))
        return self.reply


@pytest.mark.parametrize("run,systemctl", [(Systemctl(), None), (None, SYSTEMCTL)])
def test_unit_state_without_systemctl_or_run_reads_the_layout(tmp_path, run, systemctl):
    assert nfs_mounts_check.unit_state(Sysroot(str(tmp_path)), run, systemctl, "mnt-v.mount") == "not-found"


def test_unit_state_asks_systemctl_and_says_why_it_failed(tmp_path):
    run = Systemctl((0, "enabled\n", ""))
    assert nfs_mounts_check.unit_state(Sysroot(str(tmp_path)), run, SYSTEMCTL, "mnt-v.mount") == "enabled"
    assert run.calls == [[SYSTEMCTL, "is-enabled", "mnt-v.mount"]]
    with pytest.raises(nfs_mounts_check.MountError) as e:
        nfs_mounts_check.unit_state(Sysroot(str(tmp_path)), Systemctl((1, "", "Access denied\n")), SYSTEMCTL,
                                    "mnt-v.mount")
    assert str(e.value) == "systemctl is-enabled mnt-v.mount failed (rc=1): Access denied"


# --- comparing ---------------------------------------------------------------------------------------------

VOL_PATH = {"path": "/mnt/v", "unit_path": "/etc/systemd/system/mnt-v.mount"}
HEADER_NAME = "# Managed by gpufabric.node (nfs_mounts): do not edit, rerun the storage_mounts role."


@pytest.mark.parametrize("entry,mounted,want", [
    (None, True, ("not_ours", "/mnt/v is mounted (nfs4) but /etc/systemd/system/mnt-v.mount does not exist: %s"
                  % NOT_OURS)),
    (None, False, ("none", None)),
    ("link", False, ("not_ours", "/etc/systemd/system/mnt-v.mount is a link to /dev/null (masked): " + NOT_OURS)),
    ("dir", False, ("not_ours", "/etc/systemd/system/mnt-v.mount is not a regular file: " + NOT_OURS)),
    ("admin", True, ("not_ours", "/etc/systemd/system/mnt-v.mount has no '%s' header: an admin's own unit, left "
                                 "alone (remove it by hand if it is to go)" % HEADER_NAME)),
    ("ours", True, ("ours", None)),
])
def test_ownership_every_answer(tmp_path, entry, mounted, want):
    real = str(tmp_path / "etc/systemd/system/mnt-v.mount")
    os.makedirs(os.path.dirname(real))
    if entry == "link":
        os.symlink("/dev/null", real)
    elif entry == "dir":
        os.mkdir(real)
    elif entry is not None:
        put(tmp_path, VOL_PATH["unit_path"], "[Mount]\n" if entry == "admin" else nm.HEADER + "[Mount]\n")
    obs = {"mounted": mounted, "fstype": "nfs4"} if mounted else {"mounted": False}
    assert nfs_mounts_check.ownership(Sysroot(str(tmp_path)), VOL_PATH, obs) == want


def test_ownership_does_not_follow_a_link_swapped_in_after_lstat(tmp_path, monkeypatch):
    put(tmp_path, "/etc/ours", nm.HEADER + "[Mount]\n")
    os.makedirs(str(tmp_path / "etc/systemd/system"))
    os.symlink(str(tmp_path / "etc/ours"), str(tmp_path / "etc/systemd/system/mnt-v.mount"))
    real_stat = os.stat
    monkeypatch.setattr(nfs_mounts_check.os, "lstat", real_stat)    # lstat saw the regular file the link replaced
    with pytest.raises(OSError):
        nfs_mounts_check.ownership(Sysroot(str(tmp_path)), VOL_PATH, {"mounted": False})


CLIENT = {"kernel_release": KERNEL, "in_use": "in_tree"}
PRESENT = {"path": "/mnt/v", "state": "present", "vers": "4.1", "source": "s:/e", "proto": "rdma", "port": 20049,
           "nconnect": None, "remoteports": None, "localports": None}
SHOWN = {"path": "/mnt/v", "mounted": True, "fstype": "nfs4", "source": "s:/e", "proto": "rdma", "port": "20049",
         "vers": "4.1", "nconnect": None, "remoteports": None, "localports": None}


@pytest.mark.parametrize("vol,obs,skip,want", [
    # multipath options not asked for are not compared, whatever the mount shows
    ({}, {"remoteports": "10.0.0.1-10.0.0.4", "localports": "ens1np0"}, (), []),
    ({"localports": "ens1np0~ens2np0"}, {"localports": "ens1np0"}, (), [("localports", "ens1np0", "ens1np0~ens2np0")]),
    ({"nconnect": 8, "remoteports": "10.0.0.1-10.0.0.4"}, {"remoteports": "10.0.0.1"}, ("nconnect",),
     [("remoteports", "10.0.0.1", "10.0.0.1-10.0.0.4")]),
    # vers 4 accepts 4.2, and the keys after vers are still compared
    ({"vers": "4", "nconnect": 8}, {"vers": "4.2"}, (), [("nconnect", None, "8")]),
    # NFSv3 shows port= always; NFSv4 hides 2049, and the keys after port are still compared
    ({"vers": "3", "port": 2049}, {"fstype": "nfs", "vers": "3", "port": None}, (), [("port", None, "2049")]),
    ({"port": 2049}, {"port": None, "vers": "4.2"}, (), [("vers", "4.2", "4.1")]),
])
def test_mount_items(vol, obs, skip, want):
    got = nfs_mounts_check.mount_items(dict(PRESENT, **vol), dict(SHOWN, **obs), CLIENT, False, (), skip)
    assert got == [item("/mnt/v", k, c, d) for k, c, d in want]


def test_mount_items_of_an_absent_volume_is_ours_by_default():
    absent = {"path": "/mnt/v", "state": "absent"}
    want = [item("/mnt/v", "mounted", "mounted", "absent")]
    assert nfs_mounts_check.mount_items(absent, SHOWN, CLIENT, False) == want


@pytest.mark.parametrize("vers,in_use", [("3", "in_tree"), ("4.1", "vendor")])
def test_nconnect_is_effective_for_nfs3_and_the_vendor_client(vers, in_use):
    vol = dict(PRESENT, vers=vers, nconnect=4)
    assert nfs_mounts_check.not_effective(vol, SHOWN, dict(CLIENT, in_use=in_use)) == []


def test_unit_items(tmp_path):
    root = Sysroot(str(tmp_path))
    absent = dict(VOL_PATH, state="absent", unit="mnt-v.mount")
    assert nfs_mounts_check.unit_items(root, None, None, absent) == [
        item(VOL_PATH["unit_path"], "content", "present", "absent")]
    present = dict(absent, state="present", unit_text="[Mount]\n")
    assert nfs_mounts_check.unit_items(root, None, None, present) == [
        item(VOL_PATH["unit_path"], "content", "missing", "managed"),
        item("mnt-v.mount", "unit_file_state", "not-found", "enabled")]
    put(tmp_path, VOL_PATH["unit_path"], "[Mount]\n", 0o645)   # executable by others: not writable, fine
    assert nfs_mounts_check.unit_items(root, Systemctl((0, "enabled\n", "")), SYSTEMCTL, present) == []


def test_fstab_clash_names_every_path(tmp_path):
    put(tmp_path, "/etc/fstab", "s:/a /mnt/a nfs 0 0\ns:/b /mnt/b nfs 0 0\n")
    vols = [dict(VOL, path="/mnt/a"), dict(VOL, path="/mnt/b")]
    with pytest.raises(nfs_mounts_check.MountError) as e:
        nfs_mounts_check.survey(Sysroot(str(tmp_path)), None, {"volumes": vols})
    assert str(e.value) == ("/mnt/a, /mnt/b also in /etc/fstab: remove those entries, the storage_mounts role "
                            "manages these mount points with mount units (two definitions of one mount)")


def test_no_volumes_reads_no_mounts(tmp_path):
    assert nfs_mounts_check.evaluate(Sysroot(str(tmp_path)), None, {"volumes": []}) == {
        "status": "not_applicable", "items": [],
        "reason": "no storage volumes are configured (storage_mounts_volumes is empty)"}


def test_notes_of_every_volume():
    vols = [
        {"path": "/mnt/a", "ownership": "ours",
         "not_effective": [{"option": "nconnect=4", "status": "not_applicable", "reason": "r1"}]},
        {"path": "/mnt/b", "ownership": "not_ours", "ownership_reason": "r2", "not_effective": []},
    ]
    assert nfs_mounts_check._notes(vols, []) == "/mnt/a nconnect=4: not_applicable: r1; /mnt/b (absent): not ours: r2"


# --- the node: check and fix -----------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    return new_node(tmp_path)


def converged(node, vol=None, line=None):
    """The unit written and enabled as the fix leaves it, and the mount ``line`` (default: as desired)."""
    Sysroot(node.root).write_file_atomic(UNIT_PATH, unit_text(vol))
    node.run(["systemctl", "enable", UNIT])
    node.calls = []
    node.write_mountinfo(node.mountinfo() + (line or nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1")))


def run_apply(node, check_mode, vols=(VOL,), systemctl=SYSTEMCTL, **desired):
    return nfs_mounts_check.apply(Sysroot(node.root), node.run, dict(desired, volumes=list(vols)), check_mode,
                                  systemctl)


def in_tree_vendor(node):
    """The vendor client recorded for the running kernel, the in-tree rpcrdma in memory."""
    vendor_record(node.root, {KERNEL: {"version": "4.0.35", "modules": {"rpcrdma": {"srcversion": "A" * 23}}}})
    put(node.root, "/sys/module/rpcrdma/srcversion", "B" * 23 + "\n")


def test_check_mode_result_of_a_bare_node(node):
    res = run_apply(node, True)
    items = [item(UNIT_PATH, "content", "missing", "managed"), item(UNIT, "unit_file_state", "not-found", "enabled"),
             item("/mnt/nfs-rdma", "mounted", "absent", "mounted")]
    assert res == {
        "changed": True, "items": items, "actions": [],
        "diff": {"before": "", "after": "# %s\n%s" % (UNIT_PATH, unit_text()), "before_header": "mount units",
                 "after_header": "mount units"},
        "volumes": [{"path": "/mnt/nfs-rdma", "mounted": False, "unit": UNIT, "state": "present",
                     "desired_source": SRC, "ok": False, "options_not_compared": [], "not_effective": [],
                     "ownership": "ours", "ownership_reason": None}],
        "client": dict(NOTHING, kernel_release=KERNEL), "nfs_mounts": [], "mounts_source": "/proc/self/mountinfo",
        "vendor_wanted": False,
        "status": {"status": "drift", "items": items, "reason": "3 item(s) differ from the desired state: %s content, "
                   "%s unit_file_state, /mnt/nfs-rdma mounted" % (UNIT_PATH, UNIT)}}


def test_a_mount_that_differs_alone_is_not_ok(node):
    converged(node, line=nfs_line(120, "/mnt/nfs-rdma", SRC, "4.2"))
    (vol,) = run_apply(node, True)["volumes"]
    assert (vol["ok"], vol["vers"]) == (False, "4.2")


def test_drift_reason_is_the_items_not_the_notes(node):
    vol = dict(VOL, nconnect=4)
    converged(node, vol)
    os.unlink(os.path.join(node.root, "etc/systemd/system/remote-fs.target.wants", UNIT))
    reason = "1 item(s) differ from the desired state: %s unit_file_state" % UNIT
    assert run_apply(node, True, [vol])["status"]["reason"] == reason
    doc = nfs_mounts_check.evaluate(Sysroot(node.root), node.run, {"volumes": [vol]}, SYSTEMCTL)
    assert doc["reason"] == reason and doc["status"] == "drift"


def test_fix_of_a_bare_node_after_an_absent_volume_with_nothing(node):
    res = run_apply(node, False, [{"path": "/mnt/gone", "state": "absent"}, VOL])
    assert res["actions"] == argv("daemon-reload", "enable " + UNIT, "start " + UNIT)
    assert res["status"]["corrected"]


def test_fix_restarts_a_tcp_mount(node):
    converged(node, line=nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1", proto="tcp", port=2049))
    assert run_apply(node, False)["actions"] == argv("restart " + UNIT)


def test_fix_remounts_when_the_units_mount_settings_change(node):
    converged(node)
    Sysroot(node.root).write_file_atomic(UNIT_PATH, unit_text().replace("vers=4.1\n", "vers=4.1,soft\n"))
    res = run_apply(node, False)
    assert [i["key"] for i in res["items"]] == ["content"]
    assert res["actions"] == argv("daemon-reload", "restart " + UNIT)


def test_fix_of_an_absent_volume_stops_disables_and_reloads(node):
    converged(node)
    res = run_apply(node, False, [{"path": "/mnt/nfs-rdma", "state": "absent"}])
    assert res["actions"] == argv("stop " + UNIT, "disable " + UNIT, "daemon-reload")


def test_fix_leaves_a_mount_alone_that_only_the_client_keeps_from_holding(node):
    converged(node)
    in_tree_vendor(node)
    with pytest.raises(nfs_mounts_check.MountError) as e:
        run_apply(node, False)
    assert str(e.value) == ("after the fix the volumes still differ: /mnt/nfs-rdma nfs_client is in_tree, not vendor"
                            + HINT_CLIENT)
    assert e.value.actions == []


def test_fix_that_does_not_hold_lists_every_item_and_what_it_ran(node):
    in_tree_vendor(node)
    node.trunk_tcp = True
    with pytest.raises(nfs_mounts_check.MountError) as e:
        run_apply(node, False)
    assert str(e.value) == ("after the fix the volumes still differ: /mnt/nfs-rdma proto is tcp, not rdma; "
                            "/mnt/nfs-rdma nfs_client is in_tree, not vendor" + HINT_CLIENT)
    assert e.value.actions == argv("daemon-reload", "enable " + UNIT, "start " + UNIT)


def test_fix_without_systemctl_and_a_failed_start(node):
    with pytest.raises(nfs_mounts_check.MountError) as e:
        run_apply(node, False, systemctl=None)
    assert str(e.value) == "systemctl is not installed: the storage volumes are systemd mount units"
    node.refuse[UNIT] = "Job for %s failed.\n" % UNIT
    with pytest.raises(nfs_mounts_check.MountError) as e:
        run_apply(node, False)
    assert str(e.value) == ("fixing the storage volumes failed: %s start %s failed (rc=1): Job for %s failed."
                            % (SYSTEMCTL, UNIT, UNIT))
    assert e.value.actions == argv("daemon-reload", "enable " + UNIT) + [{"argv": [SYSTEMCTL, "start", UNIT], "rc": 1}]


# --- the fix's parts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("rc,out,err,message", [
    (0, "", "", None),
    (1, "", "Job failed.\n", "%s start u.mount failed (rc=1): Job failed." % SYSTEMCTL),
    (5, "out only\n", "", "%s start u.mount failed (rc=5): out only" % SYSTEMCTL),
    (3, "", "", "%s start u.mount failed (rc=3): " % SYSTEMCTL),
])
def test_systemctl_records_and_says_why(rc, out, err, message):
    actions = []
    try:
        nfs_mounts_check._systemctl(Systemctl((rc, out, err)), SYSTEMCTL, actions, "start", "u.mount")
        got = None
    except nfs_mounts_check.MountError as e:
        got = str(e)
    assert (got, actions) == (message, [{"argv": [SYSTEMCTL, "start", "u.mount"], "rc": rc}])


def test_mount_settings_are_the_four_keys():
    text = ("[Mount]\nWhat=srv:/e\n  Where=/mnt/v\nType=nfs\nOptions=proto=rdma,port=20049\nwhat=lower\n"
            "Description=a=b\n")
    assert nfs_mounts_check._mount_settings(text) == [
        "Options=proto=rdma,port=20049", "Type=nfs", "What=srv:/e", "Where=/mnt/v"]


@pytest.mark.parametrize("keys,want", [
    (["proto", "nfs_client"], HINT_CLIENT), (["proto"], HINT_PROTO), (["mounted"], ""),
])
def test_hint(keys, want):
    assert nfs_mounts_check._hint([{"key": k} for k in keys]) == want


def test_diff_skips_units_not_ours_and_joins_the_rest(tmp_path):
    for name, text in (("a", "admin\n"), ("b", "old b\n"), ("c", "old c\n")):
        put(tmp_path, "/u/%s.mount" % name, text)
    vols = [{"unit_path": "/u/a.mount", "state": "absent"},
            {"unit_path": "/u/b.mount", "state": "present", "unit_text": "new b\n"},
            {"unit_path": "/u/c.mount", "state": "absent"},
            {"unit_path": "/u/d.mount", "state": "present", "unit_text": "new d\n"}]
    seen = [{"ownership": "not_ours"}, {"ownership": "ours"}, {"ownership": "ours"}, {"ownership": "ours"}]
    s = {"plan": {"volumes": vols}, "volumes": seen}
    assert nfs_mounts_check._diff(Sysroot(str(tmp_path)), s) == {
        "before": "# /u/b.mount\nold b\n\n# /u/c.mount\nold c\n",
        "after": "# /u/b.mount\nnew b\n\n# /u/d.mount\nnew d\n",
        "before_header": "mount units", "after_header": "mount units"}
