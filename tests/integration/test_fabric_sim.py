# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host-fabric promise on a simulated fleet (hgx-h200 + pcie-4gpu-crossnuma) over SSH:
provision converges and is idempotent, drift.yml reports exactly the injected deviations and nothing else,
check mode writes nothing, the fix run corrects only those (PFC touched on the drifted rail only), and the
next drift check is clean."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import BIN, Fleet, env, recap, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

NODES = {"sim1": "hgx-h200", "sim2": "pcie-4gpu-crossnuma"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("fleet")), NODES).create()
    try:
        yield f
    finally:
        f.destroy()


def dcb_counters(fleet, node, rail):
    with open(os.path.join(fleet.root(node), "var/lib/gpufabric-sim/dcb/%s.json" % rail)) as fh:
        return json.load(fh)["counters"]


def facts(fleet, node):
    rc, res = fleet.ansible(node, "gpufabric.node.gpufabric_facts", {})
    assert rc == 0, res
    return res[node]["ansible_facts"]["gpufabric"]


def test_provision_converges(fleet):
    """The fleet the other tests check. That a second provision.yml changes nothing on these two topologies is
    molecule's sim scenario (its idempotence step, the same two nodes: hgx-h200 and pcie-4gpu-crossnuma), and the
    compat tier's smoke on each other ansible-core minor; a run here cost about a minute of CI."""
    rc, out = fleet.playbook("provision.yml")
    assert rc == 0, out
    first = recap(out)
    assert set(first) == set(NODES) and all(r["changed"] > 0 and r["failed"] == 0 for r in first.values()), out


def quiet(out):
    """A drift.yml console (issue 23, item 7): each warning once (discovery's warnings are not repeated as the facts
    body's "gpufabric_facts: ..."), and no warning about a host pattern (the fix group) that matches nothing."""
    warnings = re.findall(r"^\[WARNING\]: (.*)$", out, re.M)
    assert warnings, "the simulated nodes warn (cross-NUMA pairs, translated IOMMU): the check must see them"
    assert len(warnings) == len(set(warnings)), warnings
    assert [w for w in warnings if any(w != v and w.endswith(": " + v) for v in warnings)] == [], warnings
    assert "Could not match supplied host pattern" not in out, out


def test_drift_clean_after_provision(fleet, tmp_path):
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path)
    assert rc == 0, out
    quiet(out)
    report = json.loads((tmp_path / "drift-report.json").read_text())
    assert report["summary"]["drifted_nodes"] == [] and report["summary"]["drift_items"] == 0
    assert report["coverage"] == {"hosts": 2, "inventory_hosts": 2, "pattern": "all", "limit": None,
                                  "limited": False, "left_out": [], "complete": True}
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z", report["generated"]), report["generated"]


def drift_by_name(fleet, cwd, *extra):
    """drift.yml run by its name (gpufabric.node.drift, as from an installed collection) in the directory ``cwd``."""
    os.makedirs(str(cwd))
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", fleet.inventory, "gpufabric.node.drift"] + list(extra)
    p = subprocess.run(cmd, cwd=str(cwd), env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=900, check=False)
    return p.returncode, p.stdout


def _inject(fleet):
    """Five deviations on sim1: one ACS path bridge, one DSCP entry, one ToS, one arp_ignore, one PFC."""
    f = facts(fleet, "sim1")
    bridge = [b for b in f["path_bridges"] if b["acs"]["present"]][0]
    pairs = f["pairing"]
    rails = [p["netdev"] for p in pairs]
    tos_dev = pairs[4]["ibdev"]
    py = ("import os; p=os.environ['GPUFABRIC_SYSROOT']+'/sys/bus/pci/devices/%s/config'; "
          "fd=os.open(p, os.O_WRONLY); os.lseek(fd, %d, 0); os.write(fd, bytes([0x1d, 0x00])); os.close(fd)"
          % (bridge["bdf"], bridge["acs"]["offset"] + 6))
    fleet.sh("sim1", "%s -c \"%s\"" % (sys.executable, py))
    fleet.sh("sim1", "dcb app del dev %s dscp-prio 26:3" % rails[2])
    fleet.sh("sim1", "echo 0 > $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/%s/ports/1/default_roce_tos" % tos_dev)
    fleet.sh("sim1", "sysctl -qw net.ipv4.conf.%s.arp_ignore=0" % rails[5])
    fleet.sh("sim1", "dcb pfc set dev %s prio-pfc all:off" % rails[7])
    return {
        ("acs", bridge["bdf"], "acs_ctrl"),
        ("dcb", rails[2], "dscp_prio:26"),
        ("rdma_cm", "%s/1" % tos_dev, "default_roce_tos"),
        ("sysctl", rails[5], "arp_ignore"),
        ("dcb", rails[7], "pfc"),
    }, rails


def test_drift_reports_exactly_the_injected_items_and_fix_corrects_only_them(fleet, tmp_path):
    expected, rails = _inject(fleet)
    before = {n: fleet.hash(n) for n in NODES}
    counters = {r: dcb_counters(fleet, "sim1", r) for r in rails}

    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path)
    assert rc != 0, out
    report = json.loads((tmp_path / "drift-report.json").read_text())
    assert report["summary"]["drifted_nodes"] == ["sim1"]
    got = {(i["concern"], i["object"], i["key"]) for i in report["nodes"]["sim1"]["items"]}
    assert got == expected
    assert report["nodes"]["sim2"]["items"] == []
    assert (tmp_path / "drift-report.md").read_text().count("| sim1 | DRIFT | 5 |") == 1
    quiet(out)

    # --limit: the drifted node alone, by the playbook's name from another directory; the report (in that
    # directory's reports/) covers 1 of the 2 inventory hosts and names the other; rc != 0 on its drift
    rc, out = drift_by_name(fleet, tmp_path / "cwd", "--limit", "sim1")
    assert rc != 0 and "Drift on sim1" in out, out
    quiet(out)
    limited = json.loads((tmp_path / "cwd" / "reports" / "drift-report.json").read_text())
    assert sorted(limited["nodes"]) == ["sim1"] and limited["summary"]["drifted_nodes"] == ["sim1"]
    assert limited["coverage"] == {"hosts": 1, "inventory_hosts": 2, "pattern": "all", "limit": "sim1",
                                   "limited": True, "left_out": ["sim2"], "complete": False}
    assert "Covers 1 of 2 inventory host(s) (pattern all, --limit sim1); left out: sim2." in " ".join(out.split())
    # check mode wrote nothing on any node
    assert {n: fleet.hash(n) for n in NODES} == before

    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-e", "gpufabric_fix=true")
    assert rc == 0, out
    fixed = json.loads((tmp_path / "drift-fixed.json").read_text())
    assert {(i["concern"], i["object"], i["key"]) for i in fixed["nodes"]["sim1"]["items"]} == expected
    # the drift report no longer shows the drift the fix corrected: the fix run rewrote it
    assert json.loads((tmp_path / "drift-report.json").read_text()) == fixed
    assert fixed["fixed"] and fixed["summary"]["drifted_nodes"] == []
    assert recap(out)["sim2"]["changed"] == 0
    after = {r: dcb_counters(fleet, "sim1", r) for r in rails}
    # PFC touched on the one drifted rail only; the link toggled once there (off -> {3}), nowhere else
    for r in rails:
        delta = after[r]["pfc_set_calls"] - counters[r]["pfc_set_calls"]
        toggles = after[r]["link_toggles"] - counters[r]["link_toggles"]
        assert (delta, toggles) == ((1, 1) if r == rails[7] else (0, 0)), r
    assert after[rails[2]]["app_set_calls"] - counters[rails[2]]["app_set_calls"] == 1
    assert sum(after[r]["app_set_calls"] - counters[r]["app_set_calls"] for r in rails) == 1

    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path)
    assert rc == 0, out


def test_acs_only_on_path_bridges_both_topologies(fleet):
    """After provision: RR|CR|EC clear on every path bridge with ACS, the kernel's 0x001d everywhere else."""
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
    from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
    for node in NODES:
        f = facts(fleet, node)
        path = set(b["bdf"] for b in f["path_bridges"] if b["acs"]["present"])
        assert path, node
        root = Sysroot(fleet.root(node))
        cleared = set()
        others = 0
        for bdf in root.listdir("/sys/bus/pci/devices"):
            info = pci.acs_info(root, bdf)
            if not info.get("present"):
                continue
            if info["ctrl"] & 0x2c == 0:
                cleared.add(bdf)
            else:
                assert info["ctrl"] == 0x001d, (node, bdf, hex(info["ctrl"]))
                others += 1
        assert cleared == path, node
        assert others > 0, node
