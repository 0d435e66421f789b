# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The evidence timer on one simulated hgx-h200 node over SSH: fabric_persist (module shipped by AnsiballZ, the
action plugin resolving the desired state from the roles' defaults) installs gpufabric-evidence.timer, enabled
and started; its service, started on the node as the timer would start it,
writes the textfile, which prometheus_client's parser accepts; a change on the node with no Ansible run shows in
the next run's file. Then the node's clock is elapsed twice by the timer's interval (``gpufabric_sim elapse``):
the timer fires each time, as systemd would, and each run rewrites the file.
Then, as a user does it: provision.yml with persistence_evidence=true, and one start of the
service writes the textfile that promtool accepts, all with the node's Python, which cannot import ansible. After a
reboot the converged node's file (at most 200 series) makes the shipped alerting rules fire nothing in
``promtool test rules``; with DCB drift injected on the node, the timer alone (no drift.yml) makes the drift alert
fire for it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import promrules
import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Fleet, sim, why_not  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence_unit  # noqa: E402

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

NODE = "ev1"
# the simulated node is Ubuntu: its OS profile's node_exporter directory; the timer's own file name
PROM = "/var/lib/prometheus/node-exporter/gpufabric-evidence.prom"
HW = "/sys/class/infiniband/mlx5_0/ports/1/hw_counters"
SCRIPT = "/usr/local/sbin/gpufabric-evidence"
INTERVAL = evidence_unit.DEFAULT_INTERVAL
PROMTOOL = shutil.which("promtool")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("fleet")), {NODE: "hgx-h200"}).create()
    try:
        yield f
    finally:
        f.destroy()


def textfile(fleet):
    with open(os.path.join(fleet.root(NODE), PROM.lstrip("/"))) as f:
        return f.read()


def samples(fleet):
    """{name: {frozenset(labels): value}} of the timer's file, its label writer="evidence_timer" left out."""
    out = {}
    for fam in text_string_to_metric_families(textfile(fleet)):
        for s in fam.samples:
            labels = dict(s.labels)
            assert labels.pop("writer") == "evidence_timer", s
            out.setdefault(s.name, {})[frozenset(labels.items())] = s.value
    return out


def test_timer_installed_and_its_file_follows_the_node(fleet):
    rc, res = fleet.ansible(NODE, "gpufabric.node.fabric_persist", {"boot_wait": 0, "evidence": True})
    assert rc == 0, res
    r = res[NODE]
    assert r["changed"] is True and r["concerns"]["persistence"]["status"] == "ok", r
    assert "systemctl start gpufabric-evidence.timer" in r["commands"]
    state = fleet.sh(NODE, "systemctl is-enabled gpufabric-evidence.timer; systemctl is-active "
                           "gpufabric-evidence.timer").stdout.split()
    assert state == ["enabled", "active"]
    rc, res = fleet.ansible(NODE, "gpufabric.node.fabric_persist", {"boot_wait": 0, "evidence": True}, "--check")
    assert rc == 0 and res[NODE]["changed"] is False and res[NODE]["drift"] == [], res

    fleet.sh(NODE, "systemctl start gpufabric-evidence.service")
    m = samples(fleet)
    assert m["gpufabric_evidence_desired_state"] == {frozenset(): 1.0}
    status = dict((dict(k)["concern"], dict(k)["status"]) for k, v in m["gpufabric_concern_status"].items() if v)
    log = fleet.sh(NODE, "cat $GPUFABRIC_SYSROOT/var/log/gpufabric-sim/gpufabric-evidence.service.log",
                   check=False).stdout
    assert status["persistence"] == "ok", log
    assert not any(m.get("gpufabric_rdma_port_cnp_sent_total", {}).values())

    # no Ansible from here: the NIC counts CNPs, the timer's service runs again
    fleet.sh(NODE, "mkdir -p $GPUFABRIC_SYSROOT%s && echo 77 > $GPUFABRIC_SYSROOT%s/np_cnp_sent" % (HW, HW))
    fleet.sh(NODE, "systemctl start gpufabric-evidence.service")
    m = samples(fleet)
    cnp = dict((dict(k)["device"], v) for k, v in m["gpufabric_rdma_port_cnp_sent_total"].items())
    # the simulator gives every mlx5 port hw_counters at 0: only the one that counted CNPs changed
    assert cnp["mlx5_0"] == 77.0 and not any(v for dev, v in cnp.items() if dev != "mlx5_0"), cnp


def test_elapsing_the_timer_runs_its_service_each_time(fleet):
    # the previous test installed and started the timer with the default interval (OnBootSec=60s,
    # OnUnitActiveSec=INTERVAL): each elapse of the interval fires it once
    prom = os.path.join(fleet.root(NODE), PROM.lstrip("/"))
    show = "systemctl show -p LastTriggerUSec --value gpufabric-evidence.timer"
    before = fleet.sh(NODE, show).stdout.strip()
    stamps = [os.stat(prom).st_mtime_ns]
    for _i in range(2):
        report = json.loads(sim("elapse", "--fleet", fleet.path, "--node", NODE, "--seconds", str(INTERVAL)).stdout)
        assert [(t["timer"], t["unit"], t["rc"]) for t in report["triggered"]] == [
            ("gpufabric-evidence.timer", "gpufabric-evidence.service", 0)], report
        stamps.append(os.stat(prom).st_mtime_ns)
    assert stamps[0] < stamps[1] < stamps[2], stamps
    assert samples(fleet)["gpufabric_evidence_desired_state"] == {frozenset(): 1.0}
    after = fleet.sh(NODE, show).stdout.strip()
    assert before == "n/a" and after != "n/a", (before, after)
    # stopped, it never fires
    fleet.sh(NODE, "systemctl stop gpufabric-evidence.timer")
    report = json.loads(sim("elapse", "--fleet", fleet.path, "--node", NODE, "--seconds", str(3 * INTERVAL)).stdout)
    assert report["triggered"] == [] and os.stat(prom).st_mtime_ns == stamps[2]


def promtool(path):
    if PROMTOOL is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (Debian prometheus, tests/lab/apt-packages.txt)")
        pytest.skip("promtool is not installed (Debian prometheus, tests/lab/apt-packages.txt)")
    with open(path) as f:
        return subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, check=False)


def test_provision_with_evidence_on_a_node_python_without_ansible(fleet, tmp_path):
    with open(os.path.join(fleet.path, "fleet.json")) as f:
        python = json.load(f)["node_python"]
    # the node's Python (ansible_python_interpreter, the modules' and the installed scripts' interpreter)
    probe = fleet.sh(NODE, "%s -c 'import ansible'" % python, check=False)
    assert probe.returncode == 1 and "No module named 'ansible'" in probe.stderr, probe
    rc, out = fleet.playbook("provision.yml", "-l", NODE, "-e", "persistence_evidence=true")
    assert rc == 0, out[-4000:]
    with open(os.path.join(fleet.root(NODE), SCRIPT.lstrip("/"))) as f:
        assert f.readline() == "#!%s\n" % python
    prom = os.path.join(fleet.root(NODE), PROM.lstrip("/"))
    os.unlink(prom)
    fleet.sh(NODE, "systemctl start gpufabric-evidence.service")
    log = fleet.sh(NODE, "cat $GPUFABRIC_SYSROOT/var/log/gpufabric-sim/gpufabric-evidence.service.log",
                   check=False).stdout
    assert os.path.exists(prom) and "Traceback" not in log, log
    m = samples(fleet)
    assert m["gpufabric_evidence_desired_state"] == {frozenset(): 1.0}
    status = dict((dict(k)["concern"], dict(k)["status"]) for k, v in m["gpufabric_concern_status"].items() if v)
    assert status["persistence"] == "ok" and status["dcb"] == "ok", (status, log)
    res = promtool(prom)
    assert res.returncode == 0, res.stdout
    # the check can fail: the same file with a sample whose label value is not closed
    broken = str(tmp_path / "broken.prom")
    with open(prom) as f, open(broken, "w") as b:
        b.write(f.read() + "gpufabric_evidence_desired_state{x=\"1} 1\n")
    res = promtool(broken)
    assert res.returncode != 0, res.stdout


def alerts_of(text, instance):
    """{alertname: [expected alert]} the shipped rules must raise for a node serving ``text``, known from its samples
    (not from the rules): its concerns in drift or error, a pending reboot, a GDS fallback, no desired state."""
    labels = {"instance": instance, "job": promrules.JOB, "writer": "evidence_timer"}
    got = dict((n, (lab, v)) for n, lab, v in promrules.samples(text) if n != "gpufabric_concern_status")
    want = dict((name, []) for name in promrules.alert_names())
    for name, lab, v in promrules.samples(text):
        if name == "gpufabric_concern_status" and v and lab["status"] in ("drift", "error"):
            want["GpufabricConcernDrift"].append(promrules.expected_alert("GpufabricConcernDrift", dict(
                labels, concern=lab["concern"], status=lab["status"])))
    if got["gpufabric_reboot_required"][1]:
        want["GpufabricRebootPending"].append(promrules.expected_alert("GpufabricRebootPending", labels))
    if not got["gpufabric_evidence_desired_state"][1]:
        want["GpufabricNoDesiredState"].append(promrules.expected_alert("GpufabricNoDesiredState", labels))
    fallback = got.get("gpufabric_gds_compat_fallback_detected", ({}, 0))[1]
    if fallback or not got.get("gpufabric_gds_active", ({}, 1))[1]:
        want["GpufabricGdsFallback"].append(promrules.expected_alert("GpufabricGdsFallback", labels))
    return want


def test_alerts_from_the_timer_alone_converged_then_drift(fleet, tmp_path):
    """The node the previous test provisioned, rebooted (the kernel arguments take effect), its timer's service run:
    every concern ok, at most 200 series, the rules fire nothing. Then one rail loses PFC, no Ansible runs, the
    timer's service runs: the drift alert fires for dcb, and only that rail has its PFC and DSCP detail."""
    boot = json.loads(sim("reboot", "--fleet", fleet.path, "--node", NODE).stdout)
    assert not boot["degraded"], boot
    fleet.sh(NODE, "systemctl start gpufabric-evidence.service")     # as the timer starts it
    ok = textfile(fleet)
    status = dict((lab["concern"], lab["status"]) for n, lab, v in promrules.samples(ok)
                  if n == "gpufabric_concern_status" and v)
    series = len(promrules.samples(ok))
    print("converged hgx-h200 node: %d series; statuses %s" % (series, status))
    assert series <= 200, series
    assert not [c for c, st in status.items() if st in ("drift", "error")], status
    now = samples(fleet)["gpufabric_last_check_timestamp_seconds"][frozenset()]
    want = alerts_of(ok, NODE)
    assert not any(want.values()), want
    tests = [{"eval_time": "35m", "alertname": name, "exp_alerts": []} for name in want]
    res = promrules.run_tests(tmp_path, promrules.input_series(ok, NODE, now), tests)
    assert res.returncode == 0, res.stdout

    rail = sorted(lab["rail"] for n, lab, _v in promrules.samples(ok) if n == "gpufabric_rail_dcb_up")[0]
    fleet.sh(NODE, "dcb pfc set dev %s prio-pfc all:off" % rail)
    fleet.sh(NODE, "systemctl start gpufabric-evidence.service")
    drift = textfile(fleet)
    now = samples(fleet)["gpufabric_last_check_timestamp_seconds"][frozenset()]
    want = alerts_of(drift, NODE)
    assert [(a["exp_labels"]["concern"], a["exp_labels"]["status"]) for a in want["GpufabricConcernDrift"]] == [
        ("dcb", "drift")], want
    # only that rail's PFC and DSCP detail is exported
    assert set(lab["rail"] for n, lab, _v in promrules.samples(drift) if n == "gpufabric_rail_pfc_enabled") == {rail}
    tests = [{"eval_time": "35m", "alertname": name, "exp_alerts": exp} for name, exp in want.items()]
    res = promrules.run_tests(tmp_path, promrules.input_series(drift, NODE, now), tests)
    assert res.returncode == 0, res.stdout
