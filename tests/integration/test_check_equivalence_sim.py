# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one-call check (fabric_check) and the role-based check give the same report (issue 15).

One simulated fleet with every topology of tests/lab/topologies and every OS the simulator builds (Ubuntu 22.04
and 24.04, Debian 12 and 13, RHEL and Rocky 9.4), and every boot loader kind (grub, grubby, systemd-boot, uki, none),
provisioned, then the usual drift injected (a DSCP map entry, an ARP sysctl, the rdma_cm ToS, nccl.conf, the
applier's udev rule, the MTU of one rail, the ECN notification point of one rail; the node with a GPU link trained
at x8 of x16 drifts in pcie_link, which nothing can fix; a storage volume never provisioned is checked on every node
beside the NFS-over-RDMA volume provision.yml mounted through the storage_mounts role, which the simulated kernel
shows in mountinfo by its own option rules: that one is ok on both paths). drift.yml by default and with
gpufabric_check=roles must report the same statuses, reasons and items, concern by concern and node by node. Then
fix mode: only the drifted nodes are touched (every other node's tree hashes as before), and there only the roles of the drifted concerns run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import REPO, Fleet, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

TOPOLOGIES = os.path.join(REPO, "tests", "lab", "topologies")
# node -> (topology, os, os_version, boot loader or None for the OS's own)
NODES = {
    "eq1": ("hgx-h200", "ubuntu", "24.04", None),
    "eq2": ("hgx-h200-sriov", "ubuntu", "22.04", None),
    "eq3": ("pcie-4gpu-crossnuma", "rhel", "9.4", None),
    "eq4": ("hgx-h200", "debian", "12", "systemd-boot"),
    "eq5": ("pcie-4gpu-crossnuma", "rocky", "9.4", "uki"),
    "eq6": ("hgx-h200", "debian", "13", "none"),
    "eq7": ("pcie-4gpu-downtrained", "ubuntu", "24.04", None),
}
# a volume never provisioned: the check finds it unmounted and without its unit on every node
VOLUMES = [{"path": "/mnt/eqdata", "server": "10.77.0.10", "export": "/srv/eqdata", "vers": "4.2"}]
# the volume provision.yml mounts on every node (storage_mounts role): the server on the rail subnet, reachable from
# every node's namespace (the simulator mounts only what the node can route to)
SERVED = {"path": "/mnt/eqtrain", "server": "10.100.0.250", "export": "/srv/train", "vers": "4.2", "nconnect": 4}


def _topology(d, node, topo, os_id, version):
    with open(os.path.join(TOPOLOGIES, topo + ".yml")) as f:
        raw = yaml.safe_load(f)
    raw.update(name="%s-%s%s" % (topo, os_id, version.replace(".", "")), os=os_id, os_version=version)
    raw.setdefault("nfs_mounts", [])    # every node shows its mounts (hgx-h200-sriov also has a boot-time one)
    path = os.path.join(d, "%s.yml" % node)
    with open(path, "w") as f:
        yaml.safe_dump(raw, f)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("eqfleet"))
    nodes = dict((n, _topology(d, n, t, o, v)) for n, (t, o, v, _b) in NODES.items())
    f = Fleet(os.path.join(d, "fleet"), nodes, bootloaders=dict((n, b) for n, (_t, _o, _v, b) in NODES.items() if b))
    f.create()
    try:
        rc, out = f.playbook("provision.yml", "-e", json.dumps({"storage_mounts_volumes": [SERVED]}))
        assert rc == 0, out[-4000:]
        yield f
    finally:
        f.destroy()


def _rails(fleet, node):
    rc, res = fleet.ansible(node, "gpufabric.node.gpufabric_facts", {"gather_subset": ["pci", "rails"]})
    assert rc == 0, res
    return [p["netdev"] for p in res[node]["ansible_facts"]["gpufabric"]["pairing"]]


def _inject(fleet):
    r = _rails(fleet, "eq1")
    fleet.sh("eq1", "dcb app del dev %s dscp-prio 26:3" % r[1])
    fleet.sh("eq1", "sysctl -qw net.ipv4.conf.%s.arp_ignore=0" % r[0])
    tos = sorted(glob.glob(os.path.join(fleet.root("eq3"), "sys/kernel/config/rdma_cm/*/ports/1/default_roce_tos")))
    assert tos
    with open(tos[0], "w") as f:
        f.write("0\n")
    os.unlink(os.path.join(fleet.root("eq4"), "etc/nccl.conf"))
    os.unlink(os.path.join(fleet.root("eq5"), "etc/udev/rules.d/90-gpufabric-rdma.rules"))
    fleet.sh("eq6", "ip link set dev %s mtu 1500" % _rails(fleet, "eq6")[2])
    np = os.path.join(fleet.root("eq1"), "sys/class/net", r[3], "ecn/roce_np/enable/3")
    with open(np) as f:
        assert f.read().strip() == "1", "provision enabled the NP on priority 3"
    with open(np, "w") as f:
        f.write("0\n")


def _report(fleet, tmp_path, *extra):
    d = tmp_path / ("r%d" % len(list(tmp_path.iterdir())))
    d.mkdir()
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % d, *extra)
    name = "drift-fixed.json" if "gpufabric_fix=true" in extra else "drift-report.json"
    assert (d / name).exists(), out[-4000:]
    return rc, out, json.loads((d / name).read_text())


def _concerns(report):
    return dict((h, n["concerns"]) for h, n in report["nodes"].items())


def test_one_call_and_role_check_give_the_same_report(fleet, tmp_path):
    _inject(fleet)
    vols = "-e", json.dumps({"storage_mounts_volumes": [SERVED] + VOLUMES})
    rc1, out1, one = _report(fleet, tmp_path, *vols)
    rc2, out2, roles = _report(fleet, tmp_path, "-e", "gpufabric_check=roles", *vols)
    assert rc1 == rc2 != 0, (out1[-3000:], out2[-3000:])
    assert sorted(one["nodes"]) == sorted(NODES)
    for host in sorted(NODES):
        a, b = one["nodes"][host], roles["nodes"][host]
        for name in sorted(set(a["concerns"]) | set(b["concerns"])):
            assert a["concerns"].get(name) == b["concerns"].get(name), (host, name)
        assert a["verdict"] == b["verdict"], host
    assert one["summary"] == roles["summary"]
    st = dict((h, dict((c, v["status"]) for c, v in cs.items())) for h, cs in _concerns(one).items())
    assert st["eq1"]["dcb"] == "drift" and st["eq1"]["sysctl"] == "drift", st["eq1"]
    assert st["eq3"]["rdma_cm"] == "drift" and st["eq4"]["nccl"] == "drift", (st["eq3"], st["eq4"])
    assert st["eq5"]["persistence"] == "drift", st["eq5"]
    assert st["eq6"]["mtu"] == "drift" and st["eq1"]["ecn"] == "drift", (st["eq6"], st["eq1"])
    assert [(i["object"], i["key"]) for i in one["nodes"]["eq1"]["concerns"]["ecn"]["items"]] == [
        (_rails(fleet, "eq1")[3], "np_enable:3")]
    assert st["eq7"]["pcie_link"] == "drift" and st["eq2"]["pcie_link"] == "ok", (st["eq7"], st["eq2"])
    # both volumes are checked on every node, the same way: the provisioned one is ok on both paths (no item names
    # it), the other is missing
    assert set(s["nfs_mounts"] for s in st.values()) == {"drift"}, st
    for host in NODES:
        for report in (one, roles):
            items = report["nodes"][host]["concerns"]["nfs_mounts"]["items"]
            assert items and all("eqdata" in i["object"] for i in items), (host, items)
    with open(os.path.join(fleet.root("eq3"), "proc/self/mountinfo")) as f:
        (line,) = [x for x in f if " /mnt/eqtrain " in x]
    # eq3 runs EL 9's 5.14: an NFSv4 client over RDMA gets nconnect only from 6.9, so the mount does not show it
    # (nfs_client_caps), and the volume is ok all the same
    assert line.split(" - ")[1].startswith("nfs4 10.100.0.250:/srv/train rw,vers=4.2,") and \
        ",proto=rdma,port=20049," in line and "nconnect" not in line and ",clientaddr=10.100." in line, line
    assert set(s["gpudirect_rdma"] for s in st.values()) <= {"ok", "drift"}, st
    # one module execution per node: one task result per node in the check play (PLAY RECAP counts it)
    assert out1.count("fabric_check") >= 1 and "Check (role-based) or fix" in out1


def _sections(out, host):
    """{task header: the lines of the task's results for ``host``} from ansible-playbook's default output."""
    found = {}
    for part in re.split(r"\nTASK \[", out)[1:]:
        head, _sep, body = part.partition("]")
        found.setdefault(head, []).extend(line for line in body.splitlines() if "[%s]" % host in line)
    return found


def _once_tasks(playbook):
    """Names of the tasks of ``playbook`` that run once for their play (``run_once``, ``add_host``)."""
    with open(playbook) as f:
        plays = yaml.safe_load(f)
    return set(t["name"] for play in plays for t in play.get("tasks") or []
               if t.get("run_once") or "ansible.builtin.add_host" in t)


def test_fix_mode_touches_only_the_drifted_nodes_and_concerns(fleet, tmp_path):
    # the first test's drift fixed (the concerns a fix cannot reach, such as the kernel command line of a boot
    # loader the collection only checks, stay as they are)
    _report(fleet, tmp_path, "-e", "gpufabric_fix=true")
    _rc, _out, clean = _report(fleet, tmp_path, "-e", json.dumps({"storage_mounts_volumes": [SERVED]}))
    assert clean["nodes"]["eq2"]["verdict"]["status"] != "unreachable"
    assert clean["nodes"]["eq2"]["concerns"]["nfs_mounts"]["status"] == "ok", clean["nodes"]["eq2"]
    assert all(c["status"] in ("ok", "not_applicable") for c in clean["nodes"]["eq2"]["concerns"].values()), clean
    r = _rails(fleet, "eq2")
    fleet.sh("eq2", "sysctl -qw net.ipv4.conf.%s.arp_announce=0" % r[0])
    _rc, _out, check = _report(fleet, tmp_path)
    drifted = sorted(h for h, n in check["nodes"].items()
                     if any(c["status"] in ("drift", "error") for c in n["concerns"].values()))
    assert "eq2" in drifted and "eq1" not in drifted, drifted
    before = dict((n, fleet.hash(n)) for n in NODES)
    _rc, out, fixed = _report(fleet, tmp_path, "-e", "gpufabric_fix=true")
    after = dict((n, fleet.hash(n)) for n in NODES)
    # no node but eq2 is touched (eq2's sysctl lives in its network namespace, outside the hashed tree)
    assert [n for n in NODES if before[n] != after[n] and n != "eq2"] == [], out[-3000:]
    # on eq2 only rail_network ran: the other roles' module tasks were skipped there
    tasks = _sections(out, "eq2")
    ran = [h for h, lines in tasks.items() if any(x.startswith(("ok:", "changed:")) for x in lines)]
    assert any("ARP and rp_filter sysctls" in h for h in ran), ran
    for name in ("DCB on every rail", "Write the NCCL defaults", "Install the boot-time applier",
                 "Clear ACS redirection", "Ensure the IOMMU kernel arguments", "ECN/DCQCN on the lossless priority",
                 "Mount the storage volumes over RDMA", "Check the PCIe links"):
        assert not [h for h in ran if name in h], (name, ran)
    # the clean node eq1 is in no task of the fix play (its check result alone is its report); the tasks that run
    # once for a whole play (add_host, run_once: the report's) print the play's first host, eq1, and touch no node
    once = _once_tasks(os.path.join(REPO, "playbooks", "drift.yml"))
    assert {"Show the report", "Put every node with a concern in drift or error in the fix group, with the roles to "
            "run there"} <= once, once
    eq1 = [h for h, lines in _sections(out, "eq1").items() if lines and h not in once]
    assert eq1 == ["Check every concern (fabric_check, read-only)"], eq1
    st = fixed["nodes"]["eq2"]["concerns"]["sysctl"]
    assert st["status"] == "ok" and st.get("corrected") is True, st
    _rc, out, clean = _report(fleet, tmp_path)
    assert clean["nodes"]["eq2"]["concerns"]["sysctl"]["status"] == "ok", out[-3000:]
