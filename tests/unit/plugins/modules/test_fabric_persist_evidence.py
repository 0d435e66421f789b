# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_persist's evidence timer on a simulated HGX node (the simulator's systemctl, udevadm and dcb as commands):
installed, idempotent, drift and fix, removal; the installed script run as the timer runs it, before and after a
change on the node, its textfile read back with prometheus_client's parser."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import stat
import subprocess
import sys

import desired_doc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufabric_sim import bootsim
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import record as performance
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence, evidence_unit as persist_evidence
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry as S
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fabric_persist

LAB = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab"))
WRAPPER = "#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom %s import %s\nsys.exit(%s())\n"
# the simulated node is Ubuntu: its OS profile's node_exporter directory, shared with fabric_metrics' gpufabric.prom
PROM = "var/lib/prometheus/node-exporter/gpufabric-evidence.prom"
SCRIPT = "usr/local/sbin/gpufabric-evidence"
UNITS = "etc/systemd/system/"
# the desired state as fabric_check's action plugin resolves it for a host that turns the timer on, and the options
# the persistence role (its action plugin) passes: the timer evaluates the very document the module installs
DOC = desired_doc.resolve({"persistence_evidence": True, "persistence_evidence_interval": 30})
DESIRED = nd.evidence_desired(DOC)
ARGS = S.persistence.params(DOC, nd.evidence_desired)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    dcb_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"])
    return root, manifest


@pytest.fixture
def node(template, tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    shutil.copytree(template[0], root, symlinks=True)
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    for name, mod, fn in (("systemctl", "gpufabric_sim.services", "systemctl_main"),
                          ("udevadm", "gpufabric_sim.udev", "udevadm_main"),
                          ("dcb", "gpufabric_sim.emulators.dcb", "main")):
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            f.write(WRAPPER % (sys.executable, LAB, mod, fn, fn))
        os.chmod(path, 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ["PATH"])
    return root, template[1]


def systemctl(*argv):
    return subprocess.run(["systemctl"] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)


def metrics(root):
    with open(os.path.join(root, PROM)) as f:
        text = f.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def run_timer_command(root):
    """The service's ExecStart, exactly as the unit says, in the node's environment."""
    unit = bootsim.read_unit(os.path.join(root, UNITS, persist_evidence.SERVICE))
    (argv, _ignore), = bootsim.unit_exec_commands(unit, root)
    assert argv[0] == os.path.join(root, SCRIPT)  # the simulator runs the node's /usr/local/sbin/...
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)


def test_install_idempotent_and_the_file_follows_the_node(node, monkeypatch):
    root, manifest = node
    check = run_module(fabric_persist, ARGS, check_mode=True, monkeypatch=monkeypatch)
    assert check["changed"] is True and check["concerns"]["persistence"]["status"] == concerns.DRIFT
    keys = set((i["object"], i["key"]) for i in check["drift"])
    assert {("/" + SCRIPT, "content"), ("/" + UNITS + persist_evidence.TIMER, "content"),
            ("/etc/gpufabric/desired.json", "content"), (persist_evidence.TIMER, "unit_file_state"),
            (persist_evidence.TIMER, "active_state")} <= keys
    assert not os.path.exists(os.path.join(root, SCRIPT)) and not os.path.exists(os.path.join(root, PROM))

    res = run_module(fabric_persist, ARGS, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["concerns"]["persistence"]["status"] == concerns.OK
    assert "systemctl enable gpufabric-evidence.timer" in res["commands"]
    assert "systemctl start gpufabric-evidence.timer" in res["commands"]
    assert res["commands"].index("systemctl daemon-reload") < res["commands"].index(
        "systemctl enable gpufabric-evidence.timer")
    assert systemctl("is-enabled", persist_evidence.TIMER).stdout.split() == ["enabled"]
    assert systemctl("is-active", persist_evidence.TIMER).stdout.split() == ["active"]
    for rel, mode in ((SCRIPT, 0o755), (UNITS + persist_evidence.SERVICE, 0o644),
                      (UNITS + persist_evidence.TIMER, 0o644), ("etc/gpufabric/desired.json", 0o644)):
        st = os.lstat(os.path.join(root, rel))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == mode and (st.st_uid, st.st_gid) == (0, 0)
    assert evidence.load_desired(Sysroot(root)) == DESIRED
    timer = bootsim.read_unit(os.path.join(root, UNITS, persist_evidence.TIMER))
    assert bootsim.unit_value(timer, "Timer", "OnUnitActiveSec") == "30s"
    assert bootsim.unit_value(timer, "Install", "WantedBy") == "timers.target"
    assert {"concerns.persistence.evidence", "boot.evidence_timer", "report.prom", "concerns.persistence.evidence_unit"} <= set(res["module_utils"])

    again = run_module(fabric_persist, ARGS, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["commands"] == [] and again["drift"] == []

    # the timer fires: its service runs the installed script (the simulator runs the unit's ExecStart)
    assert systemctl("start", persist_evidence.SERVICE).returncode == 0, open(
        os.path.join(root, "var/log/gpufabric-sim", persist_evidence.SERVICE + ".log")).read()
    m = metrics(root)
    st = os.stat(os.path.join(root, PROM))
    assert stat.S_IMODE(st.st_mode) == 0o644
    status = {}
    for name in concerns.CORE:
        mine = dict((dict(k)["status"], v) for k, v in m["gpufabric_concern_status"].items()
                    if dict(k)["concern"] == name)
        assert sorted(mine) == sorted(concerns.STATUSES) and sum(mine.values()) == 1.0, name
        status[name] = [k for k, v in mine.items() if v == 1.0][0]
    # evaluated on the node against the installed desired state: the timer's own installation is as desired, the
    # fresh node's DCB is not
    assert status["persistence"] == "ok" and status["dcb"] == "drift", status
    assert m["gpufabric_evidence_desired_state"] == {frozenset({"writer": "evidence_timer"}.items()): 1.0}
    assert dict((dict(k)["state"], v) for k, v in m["gpufabric_pcie_links"].items())["degraded"] == 0.0
    assert "gpufabric_pcie_link_width" not in m and "gpufabric_gds_verdict_timestamp_seconds" not in m
    ts = frozenset({"writer": "evidence_timer"}.items())
    t0 = m["gpufabric_last_check_timestamp_seconds"][ts]
    assert m["gpufabric_check_interval_seconds"] == {ts: 30.0}   # persistence_evidence_interval

    # the node changes, no Ansible runs: a GPU link trains down, the NIC sends CNPs, a GDS proof is recorded
    rail = manifest["rails"][0]
    hw = os.path.join(root, "sys/class/infiniband", rail["ibdev"], "ports/1/hw_counters")
    os.makedirs(hw, exist_ok=True)  # the simulator gives mlx5 ports hw_counters/
    with open(os.path.join(hw, "np_cnp_sent"), "w") as f:
        f.write("1234\n")
    gpu = sorted(d[0] for d in evidence.path_devices(topology.discover(Sysroot(root))) if d[1] == "gpu")[0]
    with open(os.path.join(root, "sys/bus/pci/devices", gpu, "current_link_width"), "w") as f:
        f.write("8\n")
    done = run_timer_command(root)
    assert done.returncode == 0, done.stderr
    assert "gpufabric-evidence: wrote /" + PROM in done.stdout
    m = metrics(root)
    degraded = dict((dict(k)["device"], v) for k, v in m["gpufabric_pcie_link_width"].items())
    assert degraded == {gpu: 8.0}
    assert dict((dict(k)["device"], v) for k, v in m["gpufabric_rdma_port_cnp_sent_total"].items()
                if v) == {rail["ibdev"]: 1234.0}
    assert m["gpufabric_last_check_timestamp_seconds"][ts] >= t0


def test_gds_verdict_age_and_refusal(node, monkeypatch):
    root, _manifest = node
    assert not run_module(fabric_persist, ARGS, monkeypatch=monkeypatch).get("failed")
    sr = Sysroot(root)
    evidence.record_gds_verdict(sr, {"transfer": {"bytes": 1}, "gds_active": True,
                                     "compat_fallback_suspected": False}, now=1000.0)
    # validate.yml's judgement left on the node: the timer reports the performance concern from it
    sr.makedirs("/var/lib/gpufabric")
    sr.write_file_atomic(performance.RECORD_FILE, json.dumps(performance.document(concerns.status(
        concerns.DRIFT, "nccl.configured.busbw 10.00 GB/s is 74 % below its earlier run 38.40 GB/s"), 1000.0)))
    done = run_timer_command(root)
    assert done.returncode == 0, done.stderr
    m = metrics(root)
    ts = frozenset({"writer": "evidence_timer"}.items())
    assert m["gpufabric_gds_active"] == {ts: 1.0}
    assert m["gpufabric_gds_verdict_timestamp_seconds"] == {ts: 1000.0}
    perf = dict((dict(k)["status"], v) for k, v in m["gpufabric_concern_status"].items()
                if dict(k)["concern"] == "performance")
    assert perf[concerns.DRIFT] == 1.0 and perf[concerns.OK] == 0.0
    # a desired state anyone can change: root must not act on it
    os.chmod(os.path.join(root, "etc/gpufabric/desired.json"), 0o666)
    refused = run_timer_command(root)
    assert refused.returncode == 3 and "desired.json" in refused.stderr
    fixed = run_module(fabric_persist, ARGS, monkeypatch=monkeypatch)
    assert fixed["changed"] is True and ("/etc/gpufabric/desired.json", "mode") in set(
        (i["object"], i["key"]) for i in fixed["drift"])
    assert run_timer_command(root).returncode == 0


def test_timer_drift_then_fixed_then_removed(node, monkeypatch):
    root, _m = node
    run_module(fabric_persist, ARGS, monkeypatch=monkeypatch)
    assert systemctl("disable", "--now", persist_evidence.TIMER).returncode == 0
    check = run_module(fabric_persist, ARGS, check_mode=True, monkeypatch=monkeypatch)
    assert check["concerns"]["persistence"]["status"] == concerns.DRIFT
    assert [(i["key"], i["current"], i["desired"]) for i in check["drift"]] == [
        ("unit_file_state", "disabled", "enabled"), ("active_state", "inactive", "active")]
    fix = run_module(fabric_persist, ARGS, monkeypatch=monkeypatch)
    assert fix["commands"] == ["systemctl enable gpufabric-evidence.timer", "systemctl start gpufabric-evidence.timer"]
    assert systemctl("is-active", persist_evidence.TIMER).stdout.split() == ["active"]
    # a changed interval rewrites the timer and restarts it
    longer = run_module(fabric_persist, dict(ARGS, evidence_interval=120), monkeypatch=monkeypatch)
    assert longer["commands"] == ["systemctl daemon-reload", "systemctl restart gpufabric-evidence.timer"]
    off = run_module(fabric_persist, {}, monkeypatch=monkeypatch)
    assert off["changed"] is True and off["commands"][0] == "systemctl disable --now gpufabric-evidence.timer"
    for rel in (SCRIPT, UNITS + persist_evidence.SERVICE, UNITS + persist_evidence.TIMER, "etc/gpufabric/desired.json"):
        assert not os.path.lexists(os.path.join(root, rel)), rel
    assert systemctl("is-active", persist_evidence.TIMER).stdout.split() == ["inactive"]
    assert run_module(fabric_persist, {}, monkeypatch=monkeypatch)["changed"] is False


def test_without_desired_state_every_concern_is_not_checked(node, monkeypatch):
    root, _m = node
    res = run_module(fabric_persist, {"evidence": True}, monkeypatch=monkeypatch)
    assert not res.get("failed") and not os.path.exists(os.path.join(root, "etc/gpufabric/desired.json"))
    done = run_timer_command(root)
    assert done.returncode == 0 and "no desired state on the node" in done.stderr + done.stdout
    m = metrics(root)
    ts = frozenset({"writer": "evidence_timer"}.items())
    assert m["gpufabric_evidence_desired_state"] == {ts: 0.0}
    assert all(v == 1.0 for k, v in m["gpufabric_concern_status"].items() if dict(k)["status"] == "not_checked")
    assert m["gpufabric_node_ok"] == {ts: 0.0}


@pytest.mark.parametrize("args,msg", [
    ({"evidence": True, "evidence_interval": 5}, "evidence_interval"),
    ({"evidence": True, "evidence_interval": 100000}, "evidence_interval"),
    ({"evidence": True, "evidence_filename": "gpufabric.txt"}, "ending in .prom"),
    ({"evidence": True, "evidence_filename": ".gpufabric.prom"}, "evidence_filename"),
    ({"evidence": True, "evidence_filename": "gpufabric.prom"}, "fabric_metrics"),
    ({"evidence": True, "evidence_textfile_dir": "/var/lib/node exporter"}, "evidence_textfile_dir"),
    ({"evidence": True, "evidence_textfile_dir": "/"}, "evidence_textfile_dir"),
    ({"evidence": True, "evidence_script": "/usr/local/sbin/gpufabric-apply"}, "evidence_script"),
    ({"evidence": True, "evidence_script": "/usr/local/lib/gpufabric/x"}, "evidence_script"),
    ({"evidence_desired": {"dcb": {}}}, "evidence_desired"),
    ({"evidence": True, "evidence_desired": {"x": float("nan")}}, "evidence_desired"),
])
def test_bad_input_touches_nothing(node, monkeypatch, args, msg):
    root, _m = node
    res = run_module(fabric_persist, args, monkeypatch=monkeypatch)
    assert res.get("failed") and msg in res["msg"], res
    assert not os.path.exists(os.path.join(root, "usr/local/sbin/gpufabric-apply"))


def test_hostile_text_in_the_desired_state_is_json_on_the_node(node, monkeypatch):
    root, _m = node
    hostile = {"nccl": {"extra_vars": {"NCCL_X": '"""; $(id) `id` %n \'"; ;id ../x'}}}
    res = run_module(fabric_persist, dict(ARGS, evidence_desired=hostile), monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    with open(os.path.join(root, "etc/gpufabric/desired.json")) as f:
        assert json.load(f)["desired"] == hostile
    bad = run_module(fabric_persist, dict(ARGS, evidence_desired={"x": "a\nb"}), monkeypatch=monkeypatch)
    assert bad.get("failed")


def test_the_script_runs_a_module_the_library_copy_holds():
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import task as persist_task
    from ansible_collections.gpufabric.node.plugins.module_utils import node_payload
    assert persist_evidence.ENTRY in node_payload.ENTRY_POINTS
    assert sorted(persist_task.library_sources()) == sorted(node_payload.NODE_PAYLOAD)


@pytest.mark.parametrize("args", [{"evidence": True}, {"evidence": True, "boot_wait": 0, "rules_file": "/etc/x.rules"},
                                  {"evidence": True, "evidence_interval": 15, "python": "/usr/bin/python3"}])
def test_action_describes_the_task_it_runs(args):
    """The fabric_persist action's document: the roles' variables with this task's options over them; the node's
    own check (persistence_params of the installed document) then asks for exactly these options."""
    from ansible_collections.gpufabric.node.plugins.action import fabric_persist as action
    doc = nd.evidence_desired(action.describe_task(desired_doc.resolve({}), args))
    again = S.persistence.params(doc, nd.evidence_desired)
    for opt, value in args.items():
        assert again[opt] == value, opt
    assert again["evidence_desired"] == doc
    assert set(action.OPTION_VARS) == set(persist_evidence.OPTIONS[:-1]) | {
        "state", "python", "lib_dir", "script", "unit_dir", "boot_wait", "device_wait", "before_units", "enabled",
        "rules_file"}
