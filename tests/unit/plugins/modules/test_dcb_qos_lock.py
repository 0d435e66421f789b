# -*- coding: utf-8 -*-
"""Two dcb_qos runs at once, and a run that finds the node lock taken: the node lock (nodelock.py) end to end.

The runs are separate processes against one simulated node; every ``dcb`` command goes through a wrapper that logs
its pid and sleeps a little, so two runs that were not serialised would interleave their commands."""
from __future__ import absolute_import, division, print_function

import json
import os
import stat
import subprocess
import sys
import time

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import dcb_qos
from gpufabric_sim.emulators import dcb as dcb_emu

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = os.path.abspath(os.path.join(HERE, "..", ".."))
LAB = os.path.abspath(os.path.join(UNIT, "..", "lab"))
BUILD = os.path.abspath(os.path.join(UNIT, "..", "..", ".build"))
RAILS = ["ens1np0", "ens2np0"]
SETTINGS = {
    "a": {"rails": RAILS, "dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3]},
    "b": {"rails": RAILS, "dscp_map": [{"dscp": 26, "priority": 5}, {"dscp": 46, "priority": 6}],
          "pfc_priorities": [5]},
}
DRIVER = """
import json, sys
from modrunner import run_module
from ansible_collections.gpufabric.node.plugins.modules import dcb_qos
args = json.loads(sys.argv[1])
print(json.dumps(run_module(dcb_qos, args, check_mode=args.pop("_check", False))))
"""
HOLDER = """
import sys
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
with nodelock.NodeLock(Sysroot(sys.argv[1]), "test-holder", timeout=0):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for r in RAILS:
        d = root / "sys" / "class" / "net" / r
        d.mkdir(parents=True)
        drv = root / "sys" / "bus" / "pci" / "drivers" / "mlx5_core"
        drv.mkdir(parents=True, exist_ok=True)
        (d / "device").mkdir()
        os.symlink(str(drv), str(d / "device" / "driver"))
    dcb_emu.init_node(str(root), "6.1.0")
    for r in RAILS:
        dcb_emu.init_device(str(root), r, driver="mlx5_core")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "dcb.log"
    wrapper = bindir / "dcb"
    wrapper.write_text(
        "#!%s\nimport os, sys, time\nsys.path.insert(0, %r)\nfrom gpufabric_sim.emulators import dcb\n"
        "with open(%r, 'a') as f:\n    f.write('%%d %%s\\n' %% (os.getppid(), ' '.join(sys.argv[1:])))\n"
        "time.sleep(0.05)\nsys.exit(dcb.main(sys.argv[1:]))\n" % (sys.executable, LAB, str(log)))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([BUILD, LAB, UNIT]))
    monkeypatch.delenv("GPUFABRIC_LOCK_TIMEOUT", raising=False)
    return {"root": str(root), "log": str(log)}


def start(args):
    return subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def invocations(log):
    """[(pid of the module process, dcb argv)] in the order the dcb commands ran."""
    with open(log) as f:
        return [(int(line.split(" ", 1)[0]), line.split(" ", 1)[1].strip()) for line in f if line.strip()]


def blocks(pids):
    out = []
    for p in pids:
        if not out or out[-1] != p:
            out.append(p)
    return out


# what each run's settings make of the rail (the DSCPs it maps, the PFC priorities)
WANT = {"a": {"26": 3, "pfc": [3]}, "b": {"26": 5, "46": 6, "pfc": [5]}}


def node_state(root, rail, like):
    st = dcb_emu.state(root, rail)
    return dict((k, dcb_emu.pfc_enabled(st) if k == "pfc" else dcb_emu.dscp_priority(st, int(k))) for k in like)


def test_two_runs_at_once_do_not_interleave_and_the_last_one_wins(node):
    procs = {"a": start(SETTINGS["a"]), "b": start(SETTINGS["b"])}
    pid_of = dict((k, p.pid) for k, p in procs.items())
    res = dict((k, finish(p)) for k, p in procs.items())
    for k in res:
        assert not res[k].get("failed"), res[k]
        assert res[k]["changed"]
    calls = invocations(node["log"])
    order = blocks([pid for pid, _argv in calls])
    # each run's dcb commands form one block: the second run waited for the first (no interleaving)
    assert sorted(order) == sorted(pid_of.values()) and len(order) == 2, calls
    first, last = [k for pid in order for k in pid_of if pid_of[k] == pid]
    # the run that waited read what the first one left, planned from that, and its settings hold in full
    for rail in res[last]["rails"]:
        assert rail["before"]["pfc"] == WANT[first]["pfc"]
    for rail in RAILS:
        assert node_state(node["root"], rail, WANT[last]) == WANT[last]
    with open(os.path.join(node["root"], "etc/gpufabric/state.json")) as f:
        recorded = json.load(f)["dcb"]
    assert recorded["rails"] == RAILS
    assert recorded["dscp_map"] == SETTINGS[last]["dscp_map"]
    assert recorded["pfc_priorities"] == SETTINGS[last]["pfc_priorities"]
    # node and record agree with the winner: a check-mode run of its settings finds nothing to do
    again = finish(start(dict(SETTINGS[last], _check=True)))
    assert not again["changed"] and again["drift"] == []


@pytest.fixture
def holder(node):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, node["root"]], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, universal_newlines=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_run_that_cannot_get_the_lock_fails_naming_the_holder(node, holder, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_LOCK_TIMEOUT", "0.3")
    t0 = time.monotonic()
    res = run_module(dcb_qos, SETTINGS["a"], monkeypatch=monkeypatch)
    assert time.monotonic() - t0 < 30
    assert res.get("failed") and not res["changed"]
    assert "/run/gpufabric/lock is held by test-holder (pid %d) since " % holder.pid in res["msg"]
    waited = float(res["msg"].split("dcb_qos waited ", 1)[1].split(" ", 1)[0])
    assert 0.3 <= waited < 30
    assert res["concerns"]["dcb"]["status"] == "error" and "test-holder" in res["concerns"]["dcb"]["reason"]
    # nothing was read or written under somebody else's lock, nothing recorded
    assert not os.path.exists(node["log"])
    assert not os.path.exists(os.path.join(node["root"], "etc/gpufabric/state.json"))


def test_check_mode_reads_without_the_lock(node, holder, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_LOCK_TIMEOUT", "0")
    res = run_module(dcb_qos, SETTINGS["a"], check_mode=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] and res["concerns"]["dcb"]["status"] == "drift"


def test_a_run_waits_for_a_holder_that_lets_go_in_time(node, holder, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_LOCK_TIMEOUT", "60")
    proc = start(SETTINGS["b"])
    time.sleep(3.0)  # an unserialised run would have run its first dcb commands by now
    assert proc.poll() is None and not os.path.exists(node["log"])  # waiting: no dcb command yet
    holder.stdin.close()
    res = finish(proc)
    assert not res.get("failed"), res
    for rail in RAILS:
        assert node_state(node["root"], rail, WANT["b"]) == WANT["b"]
