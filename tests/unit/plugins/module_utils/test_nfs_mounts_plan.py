# -*- coding: utf-8 -*-
"""nfs_mounts: unit names (systemd-escape --path), value validation, the rendered unit, the check from mountinfo
and the fix against a node whose systemctl mounts like the kernel (tests/unit/nfs_kernel.py)."""
from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from nfs_kernel import new_node, nfs_line

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

SYSTEMD_ESCAPE = shutil.which("systemd-escape")
SRC = "10.77.0.10:/srv/nfs"
VOL = {"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1"}
UNIT = "mnt-nfs\\x2drdma.mount"
UNIT_PATH = "/etc/systemd/system/" + UNIT


@pytest.mark.parametrize("path,want", [
    ("/", "-"),
    ("/mnt/nfs-rdma", "mnt-nfs\\x2drdma"),
    ("/mnt/data", "mnt-data"),
    ("/.snap/a", "\\x2esnap-a"),
    ("/mnt/a.b/c_d:e", "mnt-a.b-c_d:e"),
    ("/mnt/a,b=c@d+e", "mnt-a\\x2cb\\x3dc\\x40d\\x2be"),
    ("/mnt/x y", "mnt-x\\x20y"),
    ("/mnt/\u00e9", "mnt-\\xc3\\xa9"),
])
def test_escape_path_table(path, want):
    assert nm.escape_path(path) == want


@pytest.mark.parametrize("path", ["mnt/x", "/mnt//x", "/mnt/./x", "/mnt/../x", "/mnt/x/", ""])
def test_escape_path_refuses_what_systemd_refuses(path):
    with pytest.raises(nm.MountInputError):
        nm.escape_path(path)


@pytest.mark.skipif(SYSTEMD_ESCAPE is None, reason="systemd-escape is not installed")
@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="abcXYZ019._-:,=@+ \\%\u00e9~", min_size=1, max_size=8)
                .filter(lambda s: s not in (".", "..")), min_size=1, max_size=4))
def test_escape_path_matches_systemd_escape(parts):
    path = "/" + "/".join(parts)
    out = subprocess.run([SYSTEMD_ESCAPE, "--path", path], stdout=subprocess.PIPE, check=True)
    assert nm.escape_path(path) == out.stdout.decode("utf-8").strip()


def test_unit_name_length_limit():
    assert nm.unit_name("/mnt/" + "a" * 240) == "mnt-" + "a" * 240 + ".mount"
    with pytest.raises(nm.MountInputError, match="longer than"):
        nm.unit_name("/mnt/" + "-" * 80)


@pytest.mark.parametrize("server,want", [
    ("10.77.0.10", "10.77.0.10"), ("storage-1.example.net", "storage-1.example.net"), ("NAS1", "nas1"),
    ("fd00::0001", "[fd00::1]"), ("[fd00::1]", "[fd00::1]"), ("vast.", "vast"),
])
def test_server_accepted(server, want):
    assert nm.server_source(server, "v") == want


@pytest.mark.parametrize("server", ["", "10.0.0", "a b", "-bad.host", "host_x", "fe80::1%eth0", "[10.0.0.1]",
                                    "x" * 64, "a\nb", "srv:/x", "1.2.3.4.5"])
def test_server_refused(server):
    with pytest.raises(nm.MountInputError):
        nm.server_source(server, "v")


@pytest.mark.parametrize("text,ok", [
    ("hard", True), ("noatime", True), ("x-systemd.mount-timeout=90", True), ("sec=krb5p", True),
    ("rsize=1048576", True), ("context=system_u:object_r:nfs_t:s0", True), ("a=b,c", False), ("a b", False),
    ("a=%i", False), ("a=\"x\"", False), ("a=b\\c", False), ("proto=tcp", False), ("vers=3", False),
    ("nfsvers=4", False), ("NCONNECT=2", False), ("", False), ("=x", False), ("a=", False), ("a=b\tc", False),
])
def test_extra_options(text, ok):
    if ok:
        assert nm.option(text, "v")[0] == text.split("=")[0]
    else:
        with pytest.raises(nm.MountInputError):
            nm.option(text, "v")


@pytest.mark.parametrize("key,value,ok", [
    ("remoteports", "172.25.1.1-172.25.1.32", True), ("remoteports", "10.0.0.1~10.0.0.5-10.0.0.8", True),
    ("localports", "ens1np0~ens2np0", True), ("localports", "172.25.1.101-172.25.1.104", True),
    ("remoteports", "ens1np0", False), ("remoteports", "10.0.0.9-10.0.0.1", False), ("remoteports", "", False),
    ("localports", "a,b", False), ("remoteports", "10.0.0.1~", False), ("localports", "x" * 16, False),
])
def test_multipath_values(key, value, ok):
    if ok:
        assert nm.multipath(value, key, "v") == value
    else:
        with pytest.raises(nm.MountInputError):
            nm.multipath(value, key, "v")


@pytest.mark.parametrize("change,match", [
    ({"vers": "4.3"}, "vers must be"), ({"nconnect": 17}, "nconnect"), ({"nconnect": True}, "nconnect"),
    ({"port": 0}, "port"), ({"export": "srv"}, "absolute"), ({"export": "/srv/%h"}, "character"),
    ({"path": "/mnt/x/../y"}, "normalized"), ({"server": None}, "server is required"), ({"bogus": 1}, "unknown"),
    ({"state": "mounted"}, "state"), ({"options": "hard"}, "list"), ({"path": "/"}, "cannot be"),
    ({"remoteports": "10.0.0.1-10.0.0.4"}, "vendor NFS client"),
])
def test_volume_refused(change, match):
    raw = dict(VOL, **change)
    raw = dict((k, v) for k, v in raw.items() if v is not None)
    with pytest.raises(nm.MountInputError, match=match):
        nm.plan({"volumes": [raw]}, vendor_installed=False)


def test_plan_vendor_choice_and_duplicates():
    mp = dict(VOL, remoteports="10.0.0.1-10.0.0.4", localports="ens1np0~ens2np0", nconnect=8)
    p = nm.plan({"volumes": [mp]}, vendor_installed=True)
    assert p["vendor_wanted"]
    assert nm.options_text(p["volumes"][0]["options"]) == (
        "proto=rdma,port=20049,vers=4.1,nconnect=8,remoteports=10.0.0.1-10.0.0.4,localports=ens1np0~ens2np0")
    with pytest.raises(nm.MountInputError, match="vendor NFS client"):
        nm.plan({"volumes": [mp], "vendor_client": "in_tree"}, vendor_installed=True)
    with pytest.raises(nm.MountInputError, match="required"):
        nm.plan({"volumes": [VOL], "vendor_client": "required"}, vendor_installed=False)
    with pytest.raises(nm.MountInputError, match="both mount"):
        nm.plan({"volumes": [VOL, dict(VOL, server="10.0.0.2")]}, vendor_installed=False)
    with pytest.raises(nm.MountInputError, match="before_units"):
        nm.plan({"volumes": [VOL], "before_units": ["remote fs"]}, vendor_installed=False)


def test_rendered_unit():
    p = nm.plan({"volumes": [dict(VOL, options=["hard", "x-systemd.mount-timeout=90"])]}, vendor_installed=False)
    text = p["volumes"][0]["unit_text"]
    lines = text.splitlines()
    assert p["volumes"][0]["unit_path"] == UNIT_PATH
    assert "After=network-online.target gpufabric-apply.service" in lines
    assert "Before=remote-fs.target" in lines
    assert "What=10.77.0.10:/srv/nfs" in lines and "Where=/mnt/nfs-rdma" in lines and "Type=nfs" in lines
    assert "Options=proto=rdma,port=20049,vers=4.1,hard,x-systemd.mount-timeout=90" in lines
    assert "WantedBy=remote-fs.target" in lines
    assert "%" not in text and "\\" not in text


# --- the check from mountinfo ------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    return new_node(tmp_path)


def converged(node, vol=None, line=None):
    """The unit written and enabled as the fix leaves it, and the mount ``line`` (default: as desired)."""
    vol = VOL if vol is None else vol
    p = nm.plan({"volumes": [vol]}, vendor_installed=False)
    Sysroot(node.root).write_file_atomic(UNIT_PATH, p["volumes"][0]["unit_text"])
    node.run(["systemctl", "enable", UNIT])
    node.calls = []
    if line is None:
        line = nfs_line(120, "/mnt/nfs-rdma", SRC, vol["vers"])
    node.write_mountinfo(node.mountinfo() + line)


def status(node, vol=None, **desired):
    vol = VOL if vol is None else vol
    return check.evaluate(Sysroot(node.root), node.run, dict(desired, volumes=[vol]), "/usr/bin/systemctl")


def keys(doc):
    return sorted((i["object"], i["key"], i["current"], i["desired"]) for i in doc["items"])


def test_no_volumes_is_not_applicable(node):
    doc = check.evaluate(Sysroot(node.root), node.run, {"volumes": []}, "/usr/bin/systemctl")
    assert doc["status"] == "not_applicable" and "storage_mounts_volumes" in doc["reason"]


def test_converged_volume_is_ok_and_reads_only(node):
    converged(node)
    assert status(node) == {"status": "ok", "reason": None, "items": []}
    assert node.verbs() == ["is-enabled"]


@pytest.mark.parametrize("line,want", [
    (None, [("/mnt/nfs-rdma", "mounted", "absent", "mounted")]),
    (nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1", proto="tcp", port=2049),
     [("/mnt/nfs-rdma", "port", None, "20049"), ("/mnt/nfs-rdma", "proto", "tcp", "rdma")]),
    (nfs_line(120, "/mnt/nfs-rdma", "10.77.0.11:/srv/nfs", "4.1"),
     [("/mnt/nfs-rdma", "source", "10.77.0.11:/srv/nfs", SRC)]),
    (nfs_line(120, "/mnt/nfs-rdma", SRC, "4.2"), [("/mnt/nfs-rdma", "vers", "4.2", "4.1")]),
    (nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1", nconnect=4), [("/mnt/nfs-rdma", "nconnect", "4", None)]),
    (nfs_line(120, "/mnt/nfs-rdma", SRC, "3"),
     [("/mnt/nfs-rdma", "fstype", "nfs", "nfs4"), ("/mnt/nfs-rdma", "vers", "3", "4.1")]),
    # a TCP mount over the RDMA one: the one on top is what a reader gets
    (nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1") + nfs_line(121, "/mnt/nfs-rdma", SRC, "4.1", proto="tcp"),
     [("/mnt/nfs-rdma", "proto", "tcp", "rdma")]),
])
def test_mount_drift(node, line, want):
    converged(node, line=line or "")
    doc = status(node)
    assert doc["status"] == "drift"
    assert keys(doc) == sorted(want)


FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "nfs_mounts", "vm-lab-bookworm-6.1.mountinfo")


def test_mountinfo_recorded_on_the_vm_lab_kernel(node):
    """The lines the VM lab's bookworm 6.1 kernel wrote after nfs_mounts mounted the lab export (grep nfs)."""
    with open(FIXTURE) as f:
        converged(node, line=f.read())
    assert status(node) == {"status": "ok", "reason": None, "items": []}
    (m,) = check.nfs_mounts(check.read_mounts(Sysroot(node.root))[0])
    assert m == {"path": "/mnt/nfs-rdma", "mounted": True, "fstype": "nfs4", "source": SRC, "proto": "rdma",
                 "port": "20049", "vers": "4.1", "nconnect": None, "remoteports": None, "localports": None}
    assert keys(status(node, dict(VOL, vers="4.2"))) == [(UNIT_PATH, "content", "differs", "managed"),
                                                         ("/mnt/nfs-rdma", "vers", "4.1", "4.2")]


def test_nfsv4_on_port_2049_shows_no_port(node):
    vol = dict(VOL, port=2049)
    converged(node, vol, nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1", port=2049))
    assert "port=" not in node.mountinfo().splitlines()[-1]
    assert status(node, vol)["status"] == "ok"


def test_vers_4_accepts_the_negotiated_minor_version(node):
    vol = dict(VOL, vers="4")
    converged(node, vol, nfs_line(120, "/mnt/nfs-rdma", SRC, "4.2"))
    assert status(node, vol)["status"] == "ok"


def test_unit_drift_and_fstab_clash(node):
    converged(node)
    os.unlink(os.path.join(node.root, "etc/systemd/system/remote-fs.target.wants", UNIT))
    with open(os.path.join(node.root, UNIT_PATH.lstrip("/")), "a") as f:
        f.write("# edited\n")
    os.chmod(os.path.join(node.root, UNIT_PATH.lstrip("/")), 0o666)
    assert keys(status(node)) == sorted([(UNIT_PATH, "content", "differs", "managed"),
                                         (UNIT_PATH, "owner_mode", "0:0 0666", "0:0 0644"),
                                         (UNIT, "unit_file_state", "disabled", "enabled")])
    os.makedirs(os.path.join(node.root, "etc"), exist_ok=True)
    with open(os.path.join(node.root, "etc/fstab"), "w") as f:
        f.write("# static\nLABEL=root / ext4 defaults 0 1\n10.77.0.10:/srv/nfs /mnt/nfs-rdma nfs proto=rdma 0 0\n")
    doc = status(node)
    assert doc["status"] == "error" and "/etc/fstab" in doc["reason"]


def test_absent_volume(node):
    converged(node)
    doc = status(node, {"path": "/mnt/nfs-rdma", "state": "absent"})
    assert keys(doc) == sorted([("/mnt/nfs-rdma", "mounted", "mounted", "absent"),
                                (UNIT_PATH, "content", "present", "absent")])


def vendor(node, srcversion="ABCDEF0123456789ABCDEF0", loaded=True, bundle=True):
    state = {"version": 1, "kernels": {"6.1.0-28-amd64": {"version": "4.0.35", "modules": {
        "rpcrdma": {"path": "/lib/modules/6.1.0-28-amd64/updates/rpcrdma.ko", "srcversion": srcversion},
        "sunrpc": {"path": "/lib/modules/6.1.0-28-amd64/updates/sunrpc.ko", "srcversion": "1" * 23}}}}}
    Sysroot(node.root).write_file_atomic("/etc/gpufabric/vendor_nfs.json", json.dumps(state))
    if loaded:
        Sysroot(node.root).write_file_atomic("/sys/module/rpcrdma/srcversion", "ABCDEF0123456789ABCDEF0\n")
    if bundle:
        Sysroot(node.root).write_file_atomic("/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35\n")


@pytest.mark.parametrize("kw,in_use", [
    ({}, "vendor"), ({"srcversion": "0" * 23}, "in_tree"), ({"bundle": False}, "in_tree"),
    ({"loaded": False}, "not_loaded"),
])
def test_vendor_client_in_use(node, kw, in_use):
    converged(node)
    vendor(node, **kw)
    client = check.client_state(Sysroot(node.root))
    assert client["installed"] and client["in_use"] == in_use
    doc = status(node)
    if in_use == "vendor":
        assert doc["status"] == "ok"
    else:
        assert keys(doc) == [("/mnt/nfs-rdma", "nfs_client", in_use, "vendor")]
    # in_tree: the vendor client is not wanted, whatever is installed
    assert status(node, vendor_client="in_tree")["status"] == "ok"


# --- the fix ---------------------------------------------------------------------------------------------

def apply(node, check_mode, vols=(VOL,), **desired):
    return check.apply(Sysroot(node.root), node.run, dict(desired, volumes=list(vols)), check_mode,
                       "/usr/bin/systemctl")


def tree(root):
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files + _dirs:
            p = os.path.join(d, f)
            out[p] = os.readlink(p) if os.path.islink(p) else (open(p).read() if os.path.isfile(p) else "dir")
    return out


def test_check_mode_writes_nothing_then_fix_then_idempotent(node):
    before = tree(node.root)
    res = apply(node, True)
    assert res["changed"] and res["status"]["status"] == "drift"
    assert tree(node.root) == before and node.verbs() == ["is-enabled"]
    node.calls = []
    res = apply(node, False)
    assert res["status"]["status"] == "ok" and res["status"]["corrected"]
    assert node.verbs() == ["is-enabled", "daemon-reload", "enable", "start", "is-enabled"]
    st = os.stat(os.path.join(node.root, UNIT_PATH.lstrip("/")))
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644)
    assert res["volumes"][0]["proto"] == "rdma" and res["volumes"][0]["ok"]
    assert [m["path"] for m in res["nfs_mounts"]] == ["/mnt/nfs-rdma"]
    node.calls = []
    res = apply(node, False)
    assert not res["changed"] and res["status"] == {"status": "ok", "reason": None, "items": []}
    assert node.verbs() == ["is-enabled"]


def test_fix_remounts_a_tcp_mount_and_a_removed_one(node):
    converged(node, line=nfs_line(120, "/mnt/nfs-rdma", SRC, "4.1", proto="tcp", port=2049))
    res = apply(node, False)
    assert res["status"]["corrected"] and node.verbs() == ["is-enabled", "restart", "is-enabled"]
    assert res["volumes"][0]["proto"] == "rdma"
    node.unmount("/mnt/nfs-rdma")
    node.calls = []
    res = apply(node, False)
    assert [i["key"] for i in res["items"]] == ["mounted"] and node.verbs() == ["is-enabled", "start", "is-enabled"]


def test_fix_that_does_not_hold_fails_naming_the_volume(node):
    node.trunk_tcp = True
    with pytest.raises(check.MountError, match="/mnt/nfs-rdma proto is tcp, not rdma.*reuse"):
        apply(node, False)
    node.trunk_tcp = False
    node.unmount("/mnt/nfs-rdma")
    node.refuse[UNIT] = "Job for %s failed.\n" % UNIT
    with pytest.raises(check.MountError, match="systemctl start mnt-nfs"):
        apply(node, False)


def test_absent_unmounts_disables_and_removes(node):
    converged(node)
    res = apply(node, False, [{"path": "/mnt/nfs-rdma", "state": "absent"}])
    assert res["status"]["corrected"] and node.verbs() == ["stop", "disable", "daemon-reload"]
    assert not os.path.exists(os.path.join(node.root, UNIT_PATH.lstrip("/")))
    assert "/mnt/nfs-rdma" not in node.mountinfo()
    node.calls = []
    assert not apply(node, False, [{"path": "/mnt/nfs-rdma", "state": "absent"}])["changed"]


def test_unit_change_remounts_only_when_the_mount_settings_change(node):
    converged(node)
    res = apply(node, False, after_units=["gpufabric-apply.service", "nfs-server.service"])
    assert [i["key"] for i in res["items"]] == ["content"]
    assert node.verbs() == ["is-enabled", "daemon-reload", "is-enabled"]     # ordering only: no remount
    node.calls = []
    after = ["gpufabric-apply.service", "nfs-server.service"]
    res = apply(node, False, [dict(VOL, options=["noatime"])], after_units=after)
    assert node.verbs() == ["is-enabled", "daemon-reload", "restart", "is-enabled"]
    assert ",noatime" in node.mountinfo() and res["status"]["corrected"]


def test_failed_fix_says_what_it_ran(node):
    node.refuse[UNIT] = "Job for %s failed.\n" % UNIT
    with pytest.raises(check.MountError) as e:
        apply(node, False)
    assert [a["argv"][1] for a in e.value.actions] == ["daemon-reload", "enable", "start"]
