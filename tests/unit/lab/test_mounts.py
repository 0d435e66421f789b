# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node mounts (gpufabric_sim/mounts.py): the nfs_mounts module's own fix, run against the simulator's
systemctl, writes the unit, enables and starts it, and the mountinfo line the start adds (the kernel's option rules,
gpufabric_sim/nfs_kernel.py) is what the module's check reads back as ok; stop removes the line; a mount unit the
collection did not write, and a server the node has no route to, fail as they would."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import sys

import pytest

from gpufabric_sim import mounts, nfs_kernel, services
from gpufabric_sim.tree import base_mountinfo, mountinfo_text

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import parse_mountinfo
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

VOL = {"path": "/mnt/nfs-rdma", "server": "10.100.0.250", "export": "/srv/nfs", "vers": "4.2", "nconnect": 4,
       "options": ["rsize=1000000", "noatime"]}
UNIT = "mnt-nfs\\x2drdma.mount"


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-28-amd64\n")
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "proc/self").mkdir()
    (root / "proc/self/mountinfo").write_text(base_mountinfo())    # every node has one (tree.py writes it)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    routes = {"10.100.0.250": "10.100.0.3"}
    monkeypatch.setattr(mounts, "route_source", routes.get)

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        real = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            rc = services.systemctl_main(["systemctl"] + list(argv[1:]))
        finally:
            sys.stdout, sys.stderr = real
        return rc, out.getvalue(), err.getvalue()
    return str(root), run


def test_the_modules_fix_mounts_and_its_check_reads_ok(node):
    root, run = node
    out = check.apply(Sysroot(root), run, {"volumes": [VOL]}, False, "systemctl")
    assert ["systemctl", "start", UNIT] in [a["argv"] for a in out["actions"]], out
    doc = check.evaluate(Sysroot(root), run, {"volumes": [VOL]}, "systemctl")
    assert doc["status"] == "ok", doc
    with open(os.path.join(root, mounts.MOUNTINFO)) as f:
        text = f.read()
    assert text.startswith(base_mountinfo())
    line = text[len(base_mountinfo()):]
    # the kernel's view: nfs4, vers=4.2, rsize rounded down to 4 KiB, proto=rdma, port=20049 (not 2049: shown),
    # no nconnect (the topology's 6.8 kernel passes it to an NFSv4 client over RDMA only from 6.9), the node's own
    # address as clientaddr, local_lock=none, addr= last; noatime on the mount, not the sb
    assert line.split(" - ")[1] == (
        "nfs4 10.100.0.250:/srv/nfs rw,vers=4.2,rsize=999424,wsize=1048576,namlen=255,hard,proto=rdma,"
        "port=20049,timeo=600,retrans=2,sec=sys,clientaddr=10.100.0.3,local_lock=none,addr=10.100.0.250\n")
    assert line.split()[4:6] == ["/mnt/nfs-rdma", "rw,noatime"]
    (m,) = check.nfs_mounts(parse_mountinfo(text))
    assert (m["proto"], m["port"], m["vers"]) == ("rdma", "20049", "4.2")
    rc, active, _err = run(["systemctl", "is-active", UNIT])
    assert (rc, active) == (0, "active\n")
    assert run(["systemctl", "show", "-p", "SubState", "--value", UNIT])[1] == "mounted\n"
    # stop unmounts: the check finds it missing
    assert run(["systemctl", "stop", UNIT])[0] == 0
    with open(os.path.join(root, mounts.MOUNTINFO)) as f:
        assert f.read() == base_mountinfo()
    assert run(["systemctl", "is-active", UNIT])[:2] == (3, "inactive\n")
    doc = check.evaluate(Sysroot(root), run, {"volumes": [VOL]}, "systemctl")
    assert doc["status"] == "drift" and [(i["key"], i["current"]) for i in doc["items"]] == [("mounted", "absent")]


def test_unreachable_server_and_foreign_units_do_not_mount(node):
    root, run = node
    far = dict(VOL, server="10.77.0.10")
    with pytest.raises(check.MountError) as e:
        check.apply(Sysroot(root), run, {"volumes": [far]}, False, "systemctl")
    assert "Network is unreachable" in str(e.value)
    with open(os.path.join(root, mounts.MOUNTINFO)) as f:
        assert f.read() == base_mountinfo()
    assert run(["systemctl", "is-failed", UNIT])[:2] == (0, "failed\n")
    # a mount unit the collection did not write: as before, the simulated node cannot mount it
    with open(os.path.join(root, "etc/systemd/system/srv.mount"), "w") as f:
        f.write("[Mount]\nWhat=10.100.0.250:/srv\nWhere=/srv\nType=nfs\nOptions=vers=4.2\n")
    rc, _out, err = run(["systemctl", "start", "srv.mount"])
    assert rc == 1 and "cannot mount srv.mount" in err and "storage_mounts role writes" in err
    # a managed unit whose Where= is not its name's mount point: systemd refuses it
    with open(os.path.join(root, "etc/systemd/system/data.mount"), "w") as f:
        f.write(mounts.MANAGED + "\n[Mount]\nWhat=10.100.0.250:/srv\nWhere=/srv\nType=nfs\nOptions=vers=4.2\n")
    rc, _out, err = run(["systemctl", "start", "data.mount"])
    assert rc == 1 and "does not match the unit name" in err


def test_boot_mountinfo_of_the_topology_follows_the_same_rules():
    text = mountinfo_text([{"path": "/data", "source": "10.100.0.250:/export", "fstype": "nfs4",
                            "options": "vers=4.2,proto=rdma,port=20049"}], node_index=7)
    line = text.splitlines()[-1]
    assert line == nfs_kernel.mount_line(100, "10.100.0.250:/export", "/data", "nfs4",
                                         "vers=4.2,proto=rdma,port=20049", clientaddr="10.100.0.7").rstrip("\n")
    assert ",clientaddr=10.100.0.7,local_lock=none,addr=10.100.0.250" in line and ",port=20049," in line
