# -*- coding: utf-8 -*-
"""nfs_mounts across the kernels of the OS profiles and the two NFS clients (nfs_client_caps): nconnect over RDMA
before 6.9, IPv6 servers (rdma6), the vendor client's option set, the kernel's version flags, and absent volumes
that are not the collection's."""
from __future__ import absolute_import, division, print_function

import os

import pytest

from nfs_kernel import mount_line, new_node, nfs_line

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import client_caps as caps
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import manage as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

SRC = "10.77.0.10:/srv/nfs"
VOL = {"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1"}
UNIT = "mnt-nfs\\x2drdma.mount"
UNIT_PATH = "/etc/systemd/system/" + UNIT
# the running kernels of the OS profiles (os_profiles.PROFILES), and one from 6.9 on
KERNELS = {"ubuntu2204": "5.15.0-125-generic", "el9": "5.14.0-427.13.1.el9_4.x86_64", "debian12": "6.1.0-28-amd64",
           "ubuntu2404": "6.8.0-45-generic", "debian13": "6.12.9-amd64"}
BEFORE_6_9 = ("ubuntu2204", "el9", "debian12", "ubuntu2404")


def apply(node, vols, check_mode=False, **desired):
    return check.apply(Sysroot(node.root), node.run, dict(desired, volumes=list(vols)), check_mode,
                       "/usr/bin/systemctl")


def evaluate(node, vols, **desired):
    return check.evaluate(Sysroot(node.root), node.run, dict(desired, volumes=list(vols)), "/usr/bin/systemctl")


# --- 1. nconnect over RDMA before 6.9 ----------------------------------------------------------------------

@pytest.mark.parametrize("profile", sorted(KERNELS))
@pytest.mark.parametrize("vers,proto,client,before_6_9", [
    ("4.1", "rdma", "in_tree", False), ("4.2", "rdma6", "in_tree", False), ("3", "rdma", "in_tree", True),
    ("4.1", "tcp", "in_tree", True), ("4.1", "rdma", "vendor", True),
])
def test_nconnect_effect_table(profile, vers, proto, client, before_6_9):
    effect, why = caps.nconnect_effect(KERNELS[profile], vers, proto, client)
    if profile in BEFORE_6_9 and not before_6_9:
        assert effect is False and "6.9" in why and "nfs4client.c" in why and KERNELS[profile] in why
    else:
        assert (effect, why) == (True, None)


@pytest.mark.parametrize("text,want", [
    ("6.1.0-28-amd64", (6, 1)), ("5.14.0-427.13.1.el9_4.x86_64", (5, 14)), ("6.12.9+deb13-amd64", (6, 12)),
    ("6.9", (6, 9)), ("", None), ("six", None), ("6.x", None), ("6.1.0\n7", None),
])
def test_release(text, want):
    assert caps.release(text) == want


@pytest.mark.parametrize("profile,vers", [(p, v) for p in sorted(KERNELS) for v in ("4.1", "3")])
def test_sim_kernel_shows_nconnect_by_release(profile, vers):
    line = mount_line(120, SRC, "/mnt/x", "nfs", "proto=rdma,port=20049,vers=%s,nconnect=4" % vers,
                      kernel=KERNELS[profile])
    assert (",nconnect=4," in line) == (vers == "3" or profile not in BEFORE_6_9)


@pytest.mark.parametrize("profile", sorted(KERNELS))
def test_nconnect_over_rdma_converges_on_every_kernel(tmp_path, profile):
    """Before 6.9 the mount never shows nconnect: not_applicable with the reason, no drift, no remount loop."""
    node = new_node(tmp_path, KERNELS[profile])
    vol = dict(VOL, nconnect=4)
    res = apply(node, [vol])
    assert res["status"]["status"] == "ok" and res["status"]["corrected"]
    (v,) = res["volumes"]
    if profile in BEFORE_6_9:
        assert "nconnect=" not in node.mountinfo() and v["nconnect"] is None
        assert [(n["key"], n["status"]) for n in v["not_effective"]] == [("nconnect", "not_applicable")]
    else:
        assert ",nconnect=4," in node.mountinfo() and v["not_effective"] == []
    node.calls = []
    res = apply(node, [vol])
    assert not res["changed"] and node.verbs() == ["is-enabled"]
    doc = evaluate(node, [vol])
    assert doc["status"] == "ok" and doc["items"] == []
    assert (doc["reason"] is not None) == (profile in BEFORE_6_9)
    if profile in BEFORE_6_9:
        assert "nconnect=4: not_applicable" in doc["reason"] and "6.9" in doc["reason"]


def test_nconnect_shown_otherwise_is_drift_on_an_old_kernel(tmp_path):
    """A backported kernel shows nconnect: the value it shows is judged as usual."""
    node = new_node(tmp_path, KERNELS["el9"])
    vol = dict(VOL, nconnect=4)
    apply(node, [vol])
    node.unmount("/mnt/nfs-rdma")
    node.write_mountinfo(node.mountinfo() + nfs_line(130, "/mnt/nfs-rdma", SRC, "4.1", nconnect=2))
    doc = evaluate(node, [vol])
    assert [(i["key"], i["current"], i["desired"]) for i in doc["items"]] == [("nconnect", "2", "4")]


def test_unreadable_kernel_release_is_not_checked(tmp_path):
    node = new_node(tmp_path, "6.1.0-28-amd64")
    vol = dict(VOL, nconnect=4)
    apply(node, [vol])
    with open(node.p("proc/sys/kernel/osrelease"), "w") as f:
        f.write("garbage\n")
    doc = evaluate(node, [vol])
    assert doc["status"] == "ok" and "not_checked" in doc["reason"] and "osrelease" in doc["reason"]


# --- 2. an IPv6 server: proto=rdma6 ------------------------------------------------------------------------

V6 = dict(VOL, server="fd00:77::10")
V6_SRC = "[fd00:77::10]:/srv/nfs"


@pytest.mark.parametrize("server,proto", [("fd00:77::10", "rdma6"), ("[fd00:77::10]", "rdma6"),
                                          ("10.77.0.10", "rdma"), ("nas.example.net", "rdma")])
def test_plan_writes_the_netid_of_the_address_family(server, proto):
    (v,) = nm.plan({"volumes": [dict(VOL, server=server)]}, vendor_installed=False)["volumes"]
    assert v["proto"] == proto and "Options=proto=%s,port=20049," % proto in v["unit_text"]


def test_ipv6_server_mounts_and_reads_back_rdma6(tmp_path):
    node = new_node(tmp_path)
    res = apply(node, [V6])
    assert res["status"]["status"] == "ok" and res["volumes"][0]["proto"] == "rdma6"
    line = node.mountinfo().splitlines()[-1]
    assert " nfs4 %s " % V6_SRC in line and ",proto=rdma6," in line and ",addr=fd00:77::10" in line
    node.calls = []
    assert not apply(node, [V6])["changed"] and node.verbs() == ["is-enabled"]


@pytest.mark.parametrize("proto", ["tcp6", "rdma"])
def test_ipv6_server_on_another_netid_is_drift(tmp_path, proto):
    node = new_node(tmp_path)
    apply(node, [V6])
    node.unmount("/mnt/nfs-rdma")
    node.write_mountinfo(node.mountinfo() + nfs_line(130, "/mnt/nfs-rdma", V6_SRC, "4.1", proto=proto))
    doc = evaluate(node, [V6])
    assert [(i["key"], i["current"], i["desired"]) for i in doc["items"]] == [("proto", proto, "rdma6")]


@pytest.mark.parametrize("what,options", [
    ("[fd00::1]:/x", "proto=rdma,vers=4.1"), ("10.0.0.1:/x", "proto=rdma6,vers=4.1"),
    ("[fd00::1]:/x", "vers=3,proto=tcp"),
])
def test_sim_refuses_an_address_of_the_other_family(what, options):
    with pytest.raises(ValueError, match="Address family"):
        mount_line(120, what, "/mnt/x", "nfs", options)


def test_sim_shows_tcp6_for_ipv6_without_proto():
    assert ",proto=tcp6," in mount_line(120, "[fd00::1]:/x", "/mnt/x", "nfs", "vers=4.1")


# --- 3. the vendor client's option set ---------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"nconnect": 32}, {"nconnect": 64}, {"remoteports": "dns"},
                                    {"remoteports": "dns", "localports": "ens1np0~ens2np0", "nconnect": 32}])
def test_vendor_options_accepted_with_the_vendor_client(change):
    (v,) = nm.plan({"volumes": [dict(VOL, **change)]}, vendor_installed=True)["volumes"]
    for key, value in change.items():
        assert ",%s=%s" % (key, value) in v["unit_text"]


@pytest.mark.parametrize("change,match", [
    ({"nconnect": 32}, "in-tree NFS client's bound; the vendor client's is 64"),
    ({"remoteports": "dns"}, "vendor NFS client"),
])
def test_vendor_options_refused_with_the_in_tree_client(change, match):
    with pytest.raises(nm.MountInputError, match=match):
        nm.plan({"volumes": [dict(VOL, **change)]}, vendor_installed=False)
    with pytest.raises(nm.MountInputError, match=match):
        nm.plan({"volumes": [dict(VOL, **change)], "vendor_client": "in_tree"}, vendor_installed=True)


@pytest.mark.parametrize("key,value", [("nconnect", 65), ("nconnect", 0), ("remoteports", "DNS"),
                                       ("remoteports", "dns~10.0.0.1")])
def test_vendor_option_set_has_bounds(key, value):
    with pytest.raises(nm.MountInputError):
        nm.plan({"volumes": [dict(VOL, **{key: value})]}, vendor_installed=True)


def test_option_sets_are_separate():
    assert caps.nconnect_max("in_tree") == 16 and caps.nconnect_max("vendor") == 64
    assert caps.OPTION_SETS["in_tree"]["options"] == frozenset()
    assert caps.OPTION_SETS["vendor"]["options"] == {"remoteports", "localports"}


# --- 4. the kernel's version flags beside vers= ------------------------------------------------------------

@pytest.mark.parametrize("vers,flags,want", [
    (None, ["v3"], "3"), (None, ["v4.1"], "4.1"), (None, ["v4"], "4"), (None, ["v4.0"], "4.0"), (None, [], "4.2"),
    ("4.1", ["v4.1"], "4.1"), ("4", ["v4.2"], "4.2"), ("4.2", ["v4"], "4.2"), ("3", ["v3"], "3"),
    (None, ["v4", "v4.1"], "4.1"),
])
def test_version_flags_fold_into_one_vers(tmp_path, vers, flags, want):
    vol = dict(VOL, options=["hard"] + flags)
    vol.pop("vers")
    if vers is not None:
        vol["vers"] = vers
    (v,) = nm.plan({"volumes": [vol]}, vendor_installed=False)["volumes"]
    assert v["vers"] == want and v["extra_options"] == [("hard", None)]
    options = [line for line in v["unit_text"].splitlines() if line.startswith("Options=")][0]
    assert options == "Options=proto=rdma,port=20049,vers=%s,hard" % want
    node = new_node(tmp_path)
    res = apply(node, [vol])          # mounted as planned, read back without "still differ"
    assert res["status"]["status"] == "ok" and res["volumes"][0]["vers"] == ("4.2" if want == "4" else want)


@pytest.mark.parametrize("vers,flags,match", [
    ("4.2", ["v3"], "vers=4.2 and v3 contradict"), ("4.1", ["v4.2"], "contradict"),
    (None, ["v3", "v4.1"], "contradict"),
    ("3", ["v4"], "contradict"), (None, ["v4.0", "v4.1"], "contradict"), (None, ["v2"], "option v2"),
    (None, ["v4.1=1"], "takes no value"), (None, ["v3", "v3"], "twice"),
])
def test_contradicting_versions_are_refused_before_anything(vers, flags, match):
    vol = dict(VOL, options=flags)
    vol.pop("vers")
    if vers is not None:
        vol["vers"] = vers
    with pytest.raises(nm.MountInputError, match=match):
        nm.plan({"volumes": [vol]}, vendor_installed=False)


# --- 5. state: absent touches only the collection's own units ----------------------------------------------

SCRATCH = ("[Unit]\nDescription=Local scratch\n\n[Mount]\nWhat=/dev/nvme1n1\nWhere=/scratch\nType=xfs\n\n"
           "[Install]\nWantedBy=local-fs.target\n")
XFS = "140 22 259:5 / /scratch rw,relatime shared:40 - xfs /dev/nvme1n1 rw,attr2,inode64,noquota\n"


def admin_units(node):
    """An admin's own xfs scratch.mount, enabled and mounted, and a masked srv-old.mount."""
    unit_dir = node.p("etc/systemd/system")
    os.makedirs(os.path.join(unit_dir, "local-fs.target.wants"))
    with open(os.path.join(unit_dir, "scratch.mount"), "w") as f:
        f.write(SCRATCH)
    os.symlink("/etc/systemd/system/scratch.mount", os.path.join(unit_dir, "local-fs.target.wants/scratch.mount"))
    os.symlink("/dev/null", os.path.join(unit_dir, "srv-old.mount"))
    node.write_mountinfo(node.mountinfo() + XFS)
    return unit_dir


def test_absent_leaves_units_that_are_not_ours_alone(tmp_path):
    node = new_node(tmp_path)
    unit_dir = admin_units(node)
    before = node.mountinfo()
    vols = [{"path": "/scratch", "state": "absent"}, {"path": "/srv/old", "state": "absent"}]
    for check_mode in (True, False):
        res = apply(node, vols, check_mode)
        assert not res["changed"] and res["items"] == [] and res["actions"] == []
        assert res["status"]["status"] == "ok" and "not ours" in res["status"]["reason"]
    assert node.verbs() == [] and node.mountinfo() == before
    assert os.readlink(os.path.join(unit_dir, "srv-old.mount")) == "/dev/null"
    with open(os.path.join(unit_dir, "scratch.mount")) as f:
        assert f.read() == SCRATCH
    assert os.path.islink(os.path.join(unit_dir, "local-fs.target.wants/scratch.mount"))
    scratch, old = res["volumes"]
    assert scratch["ownership"] == "not_ours" and "header" in scratch["ownership_reason"]
    assert old["ownership"] == "not_ours" and "masked" in old["ownership_reason"]
    doc = evaluate(node, vols)
    assert doc["status"] == "ok" and "/scratch (absent): not ours" in doc["reason"]


def test_absent_leaves_a_mount_without_our_unit_alone(tmp_path):
    node = new_node(tmp_path)
    node.write_mountinfo(node.mountinfo() + nfs_line(130, "/mnt/nfs-rdma", SRC, "4.1"))
    res = apply(node, [{"path": "/mnt/nfs-rdma", "state": "absent"}])
    assert not res["changed"] and node.verbs() == [] and "/mnt/nfs-rdma" in node.mountinfo()
    assert res["volumes"][0]["ownership"] == "not_ours"


def test_absent_still_removes_our_own_unit(tmp_path):
    node = new_node(tmp_path)
    apply(node, [VOL])
    node.calls = []
    res = apply(node, [{"path": "/mnt/nfs-rdma", "state": "absent"}])
    assert res["status"]["corrected"] and node.verbs() == ["stop", "disable", "daemon-reload"]
    assert not os.path.exists(node.p(UNIT_PATH)) and "/mnt/nfs-rdma" not in node.mountinfo()
