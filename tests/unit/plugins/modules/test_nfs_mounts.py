# -*- coding: utf-8 -*-
"""nfs_mounts run in-process: check mode predicts and writes nothing, the real run converges and reads back, a second
run changes nothing, bad input fails before any command; and a simulated node (gpufabric_sim) evaluates from its
proc/self/mountinfo and refuses to mount."""
from __future__ import absolute_import, division, print_function

import hashlib
import io
import os

import pytest
from ansible.module_utils import basic

from gpufabric_sim import services as sim_services
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from modrunner import run_module
from nfs_kernel import Node

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import nfs_mounts

__metaclass__ = type

VOL = {"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1", "nconnect": 2,
       "options": ["hard"]}
UNIT = "mnt-nfs\\x2drdma.mount"


def digest(root):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        if os.path.relpath(d, root).startswith("run/gpufabric"):
            continue
        for f in sorted(files):
            p = os.path.join(d, f)
            h.update(p.encode())
            if os.path.isfile(p) and not os.path.islink(p):
                h.update(open(p, "rb").read())
    return h.hexdigest()


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    os.makedirs(os.path.join(root, "proc/sys/kernel"))
    with open(os.path.join(root, "proc/sys/kernel/osrelease"), "w") as f:
        f.write("6.1.0-28-amd64\n")
    n = Node(root)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: n.run(argv))
    return n


def test_check_then_fix_then_idempotent(node, monkeypatch):
    before = digest(node.root)
    res = run_module(nfs_mounts, {"volumes": [VOL]}, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] and res["concerns"]["nfs_mounts"]["status"] == "drift"
    assert sorted(i["key"] for i in res["drift"]) == ["content", "mounted", "unit_file_state"]
    assert "Options=proto=rdma,port=20049,vers=4.1,nconnect=2,hard" in res["diff"]["after"]
    assert digest(node.root) == before and node.verbs() == ["is-enabled"]

    res = run_module(nfs_mounts, {"volumes": [VOL]}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] and res["concerns"]["nfs_mounts"]["status"] == "ok"
    assert res["concerns"]["nfs_mounts"]["corrected"]
    vol = res["ansible_facts"]["gpufabric_nfs_mounts"]["volumes"][0]
    # the node runs 6.1: an NFSv4 client over RDMA gets nconnect only from 6.9 (nfs_client_caps)
    assert (vol["mounted"], vol["fstype"], vol["proto"], vol["port"], vol["vers"], vol["nconnect"]) == (
        True, "nfs4", "rdma", "20049", "4.1", None)
    assert [n["option"] for n in vol["not_effective"]] == ["nconnect=2"]
    assert res["ansible_facts"]["gpufabric_nfs_mounts"]["client"]["in_use"] == "not_loaded"

    node.calls = []
    res = run_module(nfs_mounts, {"volumes": [VOL]}, monkeypatch=monkeypatch)
    assert not res["changed"] and res["drift"] == [] and node.verbs() == ["is-enabled"]


@pytest.mark.parametrize("vol,match", [
    (dict(VOL, options=["proto=tcp"]), "set by the volume's own keys"),
    (dict(VOL, options=["a=b,c"]), "no comma"),
    (dict(VOL, server="fe80::1%eth0"), "zone"),
    (dict(VOL, path="/mnt/a b"), "character outside"),
    (dict(VOL, export="/srv\nx"), "control character"),
    (dict(VOL, localports="ens1np0"), "vendor NFS client"),
])
def test_bad_input_fails_before_anything(node, monkeypatch, vol, match):
    before = digest(node.root)
    res = run_module(nfs_mounts, {"volumes": [vol]}, monkeypatch=monkeypatch)
    assert res["failed"] and match in res["msg"], res["msg"]
    assert node.calls == [] and digest(node.root) == before
    if "control character" not in match:      # inputs.guard fails before the module's own checks
        assert res["concerns"]["nfs_mounts"]["status"] == "error"


def test_no_volumes_is_not_applicable(node, monkeypatch):
    res = run_module(nfs_mounts, {"volumes": []}, monkeypatch=monkeypatch)
    assert not res["changed"] and res["concerns"]["nfs_mounts"]["status"] == "not_applicable"


# --- the simulated node ------------------------------------------------------------------------------------

def sim_node(tmp_path, proto):
    root = str(tmp_path / "sim")
    topo = sim_topology.load("hgx-h200", nfs_mounts=[{
        "path": "/mnt/nfs-rdma", "source": "10.77.0.10:/srv/nfs",
        "options": "vers=4.1,proto=%s,port=%d" % (proto, 20049 if proto == "rdma" else 2049)}])
    sim_tree.build_tree(root, topo)
    return root


def test_sim_node_evaluates_from_its_mountinfo(tmp_path):
    root = sim_node(tmp_path, "rdma")
    desired = {"volumes": [dict(VOL, nconnect=None, options=[])]}
    # mounted as wanted, but no unit keeps it: drift on the unit alone
    doc = check.evaluate(Sysroot(root), None, desired)
    assert doc["status"] == "drift"
    assert sorted(i["key"] for i in doc["items"]) == ["content", "unit_file_state"]
    tcp = sim_node(tmp_path / "tcp", "tcp")
    doc = check.evaluate(Sysroot(tcp), None, desired)
    assert ("/mnt/nfs-rdma", "proto", "tcp", "rdma") in [(i["object"], i["key"], i["current"], i["desired"])
                                                         for i in doc["items"]]


def test_sim_systemctl_cannot_mount(tmp_path):
    root = sim_node(tmp_path, "rdma")
    # a mount unit the collection did not write, at a free mount point: the simulated node cannot mount it (it mounts
    # the storage_mounts role's NFS units only: tests/unit/lab/test_mounts.py)
    Sysroot(root).write_file_atomic("/etc/systemd/system/mnt-other.mount", "[Mount]\nWhat=x:/y\nWhere=/mnt/other\n")
    err = io.StringIO()
    sc = sim_services.Systemctl(root, out=io.StringIO(), err=err)
    assert sc.start(["mnt-other.mount"]) == 1 and "cannot mount" in err.getvalue()
    # what the topology mounted at boot is active (systemd derives mount units from mountinfo): a start is a no-op
    Sysroot(root).write_file_atomic("/etc/systemd/system/" + UNIT, "[Mount]\nWhat=x:/y\nWhere=/mnt/nfs-rdma\n")
    assert sc.start([UNIT]) == 0 and sc.is_active([UNIT]) == 0
