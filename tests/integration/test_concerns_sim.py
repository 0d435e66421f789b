# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every verdict true on a simulated fleet over SSH (issue: a status per concern, no concern hidden by another).

- a node without a boot loader (a microVM): the kernel command line concern is not_applicable or drift with a
  reason, every other concern has its real status, and drift injected on its DCB and one sysctl is reported;
- a node where one concern's module fails (dcb answers every command with an error): that concern is `error`, every
  other concern still reports, both JSON reports carry nodes.<host>.concerns.<concern>.status and the HTML shows the
  same words; a node with a pending reboot and a translated IOMMU is not "OK";
- persistence drift (the applier unit disabled, the udev rule deleted, o+w on the applier script) is reported by
  drift.yml with rc != 0 and fixed by gpufabric_fix=true.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Fleet, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

NODES = {"cs1": "hgx-h200", "cs2": "hgx-h200"}
CORE = ("cmdline", "acs", "dcb", "rdma_cm", "sysctl", "routing", "nccl", "persistence", "nfs_mounts")
FAILING_DCB = "#!/bin/sh\necho 'Error: Failed to connect to the kernel: Operation not supported' >&2\nexit 1\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("cfleet")), NODES, bootloaders={"cs2": "none"}).create()
    try:
        rc, out = f.playbook("provision.yml")
        # cs2 has no boot loader: provisioning reports the kernel command line, it does not fail on it
        assert rc == 0, out
        yield f
    finally:
        f.destroy()


def _statuses(report, host):
    return dict((c, v["status"]) for c, v in report["nodes"][host]["concerns"].items())


def _rails(fleet, node):
    rc, res = fleet.ansible(node, "gpufabric.node.gpufabric_facts", {})
    assert rc == 0, res
    return [p["netdev"] for p in res[node]["ansible_facts"]["gpufabric"]["pairing"]]


def test_no_boot_loader_node_reports_every_concern_and_the_injected_drift(fleet, tmp_path):
    rails = _rails(fleet, "cs2")
    fleet.sh("cs2", "dcb app del dev %s dscp-prio 26:3" % rails[1])
    fleet.sh("cs2", "sysctl -qw net.ipv4.conf.%s.arp_ignore=0" % rails[3])
    # two NVLink links of GPU 2 untrained (the simulator's nvidia-smi reads its own state file)
    nvlink_down = os.path.join(fleet.root("cs2"), "var/lib/gpufabric-sim/nvlink/down")
    os.makedirs(os.path.dirname(nvlink_down), exist_ok=True)
    with open(nvlink_down, "w") as f:
        f.write("2 7\n2 8\n")
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "cs2,localhost")
    os.unlink(nvlink_down)
    assert rc != 0, out
    report = json.loads((tmp_path / "drift-report.json").read_text())
    st = _statuses(report, "cs2")
    assert set(CORE) <= set(st)
    cmdline = report["nodes"]["cs2"]["concerns"]["cmdline"]
    assert cmdline["status"] in ("not_applicable", "drift") and cmdline["reason"], cmdline
    assert re.search(r"boot loader|microVM|outside", cmdline["reason"], re.I), cmdline
    assert st["dcb"] == "drift" and st["sysctl"] == "drift", st
    assert st["acs"] in ("ok", "drift") and st["rdma_cm"] == "ok" and st["nccl"] == "ok", st
    assert st["routing"] == "not_applicable" and st["persistence"] == "ok", st
    assert st["nfs_mounts"] == "not_applicable", st    # storage_mounts_volumes is empty
    items = dict(((i["object"], i["key"]), i) for c in ("dcb", "sysctl")
                 for i in report["nodes"]["cs2"]["concerns"][c]["items"])
    assert (rails[1], "dscp_prio:26") in items and (rails[3], "arp_ignore") in items, items
    fm = report["nodes"]["cs2"]["concerns"]["fabric_manager"]
    assert fm["status"] == "drift" and "GPU 2: NVLink link(s) 7, 8 down" in fm["reason"], fm
    # put it back for the other tests
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-e", "gpufabric_fix=true",
                             "-l", "cs2,localhost")
    fixed = json.loads((tmp_path / "drift-fixed.json").read_text())
    assert _statuses(fixed, "cs2")["dcb"] == "ok" and _statuses(fixed, "cs2")["sysctl"] == "ok", out


def test_a_failing_module_hides_no_other_concern(fleet, tmp_path):
    dcb = os.path.join(fleet.path, "cs1", "bin", "dcb")
    with open(dcb) as f:
        real = f.read()
    try:
        with open(dcb, "w") as f:
            f.write(FAILING_DCB)
        rc, out = fleet.playbook("report.yml", "-e", "gpufabric_report_dir=%s" % tmp_path,
                                 "-e", "gpufabric_metrics_dir=/tmp/gpufabric-metrics-cs", "-l", "cs1,localhost")
        assert rc == 0, out
        rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "cs1,localhost")
        assert rc != 0, out
    finally:
        with open(dcb, "w") as f:
            f.write(real)
    drift = json.loads((tmp_path / "drift-report.json").read_text())
    fleet_json = json.loads((tmp_path / "fleet-report.json").read_text())
    for report in (drift, fleet_json):
        st = _statuses(report, "cs1")
        assert st["dcb"] == "error", st
        assert all(st[c] != "not_checked" for c in CORE), st
        assert st["rdma_cm"] == "ok" and st["sysctl"] == "ok" and st["nccl"] == "ok", st
        assert "Operation not supported" in report["nodes"]["cs1"]["concerns"]["dcb"]["reason"]
        fm = report["nodes"]["cs1"]["concerns"]["fabric_manager"]
        assert fm["status"] == "ok" and "8 GPU(s), 144 link(s) active" in fm["reason"], fm
    html = (tmp_path / "fleet-report.html").read_text()
    assert "error" in html and "Operation not supported" in html
    # provisioned without a reboot: the IOMMU is still translated and the boot loader waits for a reboot
    verdict = fleet_json["nodes"]["cs1"]["verdict"]
    assert verdict["status"] != "ok"
    assert any("reboot" in r.lower() for r in verdict["reasons"]), verdict
    assert any("translated" in r.lower() for r in verdict["reasons"]), verdict


def test_persistence_drift_is_reported_and_fixed(fleet, tmp_path):
    root = fleet.root("cs1")
    script = os.path.join(root, "usr/local/sbin/gpufabric-apply")
    rules = os.path.join(root, "etc/udev/rules.d/90-gpufabric-rdma.rules")
    assert os.path.exists(script) and os.path.exists(rules)
    fleet.sh("cs1", "systemctl disable gpufabric-apply.service")
    os.unlink(rules)
    os.chmod(script, os.stat(script).st_mode | stat.S_IWOTH)
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "cs1,localhost")
    assert rc != 0, out
    report = json.loads((tmp_path / "drift-report.json").read_text())
    pers = report["nodes"]["cs1"]["concerns"]["persistence"]
    assert pers["status"] == "drift", pers
    text = json.dumps(pers["items"])
    assert "gpufabric-apply.service" in text and "90-gpufabric-rdma.rules" in text and "gpufabric-apply" in text
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-e", "gpufabric_fix=true",
                             "-l", "cs1,localhost")
    assert rc == 0, out
    assert os.path.exists(rules) and not os.stat(script).st_mode & stat.S_IWOTH
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "cs1,localhost")
    assert rc == 0, out
    assert _statuses(json.loads((tmp_path / "drift-report.json").read_text()), "cs1")["persistence"] == "ok"
