# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/fabric_acceptance.yml on a 3-node simulated fleet (1 receiver, 2 senders), provisioned with roce_qos.

ib_write_bw on the nodes is the tier-2 EMULATOR (tests/lab/gpufabric_sim/emulators/perftest.py): it accounts the
counters the real tool would move (DSCP from -T or the rdma_cm default, each card's own DCB map, senders paused
while two of them share the receiver's rail) and sends no packets. Needs root, ``ip netns`` and openssh-server.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet as fl  # noqa: E402

WHY = fl.why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

RAILS = ["ens1np0", "ens2np0"]
PROVISION = """\
- name: Lossless class on every rail
  hosts: all
  gather_facts: false
  roles:
    - gpufabric.node.roce_qos
"""


def install_perftest_wrapper(fleet_dir, node):
    """The runtime does not yet put ib_write_bw in <node>/bin: write the same kind of wrapper it writes."""
    from gpufabric_sim import runtime
    path = os.path.join(fleet_dir, node, "bin", "ib_write_bw")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(runtime.render_wrapper(sys.executable, "gpufabric_sim.emulators.perftest", "main", True))
        os.chmod(path, 0o755)


def run_playbook(inventories, playbook, extra, timeout=900):
    cmd = [os.path.join(fl.BIN, "ansible-playbook")]
    for i in inventories:
        cmd += ["-i", i]
    cmd += [playbook, "-e", json.dumps(extra)]
    p = subprocess.run(cmd, env=fl.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("acceptance")
    f = fl.Fleet(str(base / "fleet"), {"rcv": "hgx-h200", "snd1": "hgx-h200", "snd2": "hgx-h200"})
    try:
        f.create()
        for n in f.nodes:
            install_perftest_wrapper(f.path, n)
        book = str(base / "provision.yml")
        with open(book, "w") as fh:
            fh.write(PROVISION)
        rc, out = run_playbook([f.inventory], book, {"roce_qos_rails": RAILS})
        assert rc == 0, out[-4000:]
        f.base = str(base)
        yield f
    finally:
        f.destroy()


def extra(report_dir, **kw):
    e = {"fabric_acceptance_receiver": "rcv", "fabric_acceptance_senders": ["snd1", "snd2"],
         "fabric_acceptance_rails": RAILS, "fabric_acceptance_duration": 4, "fabric_acceptance_server_settle": 2,
         "fabric_acceptance_report_dir": report_dir}
    e.update(kw)
    return e


def test_incast_passes_on_a_lossless_fleet(fleet):
    rep = os.path.join(fleet.base, "rep-ok")
    rc, out = run_playbook([fleet.inventory], os.path.join(fl.REPO, "playbooks", "fabric_acceptance.yml"), extra(rep))
    assert rc == 0, out[-6000:]
    data = json.load(open(os.path.join(rep, "fabric-acceptance.json")))
    inc = data["incast"]
    assert inc["ok"] is True and [r["rail"] for r in inc["rails"]] == RAILS
    for r in inc["rails"]:
        assert r["incast"] and r["pause_frames"] > 0
        roles = sorted(p["role"] for p in r["participants"])
        assert roles == ["receiver", "sender", "sender"]
        for p in r["participants"]:
            assert p["bytes_in_priority"] > 1 << 30 and p["bytes_in_priority0"] == 0
    assert "PASS" in open(os.path.join(rep, "fabric-acceptance.md")).read()


def test_wrong_dscp_on_one_sender_rail_fails_naming_it(fleet):
    rep = os.path.join(fleet.base, "rep-bad")
    hv = os.path.join(fleet.base, "bad-sender.yml")
    with open(hv, "w") as fh:
        fh.write("all:\n  hosts:\n    snd2:\n      fabric_acceptance_rail_tos: {ens2np0: 0}\n")
    rc, out = run_playbook([fleet.inventory, hv], os.path.join(fl.REPO, "playbooks", "fabric_acceptance.yml"),
                           extra(rep))
    assert rc != 0, out[-6000:]
    assert "Fabric acceptance FAILED on" in out and "snd2 rail ens2np0 (sender, ens2np0)" in out, out[-6000:]
    data = json.load(open(os.path.join(rep, "fabric-acceptance.json")))
    inc = data["incast"]
    assert inc["ok"] is False
    assert inc["failed"] == ["rcv/ens2np0", "snd2/ens2np0"]
    sender = [f for f in inc["failures"] if f["host"] == "snd2"][0]
    assert sender["reasons"] == ["no_traffic_in_priority", "priority0_not_flat"]
    assert "wrong DSCP" in sender["message"]
    rcv = [f for f in inc["failures"] if f["host"] == "rcv"][0]
    assert rcv["reasons"] == ["priority0_not_flat"] and "traffic from snd2" in rcv["message"]
    assert [r["ok"] for r in inc["rails"]] == [True, False], "the other rail still passes"


def _switch(fleet, **kw):
    from gpufabric_sim.emulators import perftest
    perftest.write_switch(fleet.path, **kw)


def test_ecn_only_incast_passes_without_pauses(fleet):
    """The leaf marks ECN; provision enabled the NP and RP on priority 3 (roce_ecn): DCQCN keeps the queue below the
    pause threshold, the receiver's NP sends CNPs and the senders' RPs handle them."""
    rep = os.path.join(fleet.base, "rep-ecn")
    _switch(fleet, pfc=True, ecn=True)
    try:
        rc, out = run_playbook([fleet.inventory], os.path.join(fl.REPO, "playbooks", "fabric_acceptance.yml"),
                               extra(rep))
    finally:
        _switch(fleet)
    assert rc == 0, out[-6000:]
    inc = json.load(open(os.path.join(rep, "fabric-acceptance.json")))["incast"]
    assert inc["ok"] is True
    for r in inc["rails"]:
        assert r["incast"] and r["pause_frames"] == 0
        cong = r["congestion"]
        assert cong["ecn_acted"] is True and cong["read"] == 3
        assert cong["np_ecn_marked_roce_packets"] > 0 and cong["np_cnp_sent"] > 0 and cong["rp_cnp_handled"] > 0
        rcv = [p for p in r["participants"] if p["role"] == "receiver"][0]
        assert rcv["congestion"]["np_cnp_sent"] > 0
    assert "ECN marked/CNP sent/CNP handled" in open(os.path.join(rep, "fabric-acceptance.md")).read()


def test_incast_with_neither_pauses_nor_ecn_fails(fleet):
    """The leaf neither pauses nor marks (PFC and ECN off on the switch): the incast shows no congestion signal."""
    rep = os.path.join(fleet.base, "rep-none")
    _switch(fleet, pfc=False, ecn=False)
    try:
        rc, out = run_playbook([fleet.inventory], os.path.join(fl.REPO, "playbooks", "fabric_acceptance.yml"),
                               extra(rep))
    finally:
        _switch(fleet)
    assert rc != 0, out[-6000:]
    inc = json.load(open(os.path.join(rep, "fabric-acceptance.json")))["incast"]
    assert inc["ok"] is False
    assert sorted(set(f["rail"] for f in inc["failures"])) == RAILS
    for f in inc["failures"]:
        assert f["reasons"] == ["no_pause_under_incast"]
        assert "neither PFC nor DCQCN acted" in f["message"]
    for r in inc["rails"]:
        assert r["pause_frames"] == 0 and r["congestion"]["read"] == 3 and not r["congestion"]["ecn_acted"]


def test_validate_nccl_catches_a_silent_gdr_fallback(fleet):
    """validate.yml's NCCL runs on the emulated all_reduce_perf: a node as provisioned passes (direct, and both
    forced fallbacks flip); a node whose GPUDirect RDMA went silently off (the emulator's fault knob) fails, named."""
    from gpufabric_sim.emulators import nccl_tests
    rep = os.path.join(fleet.base, "validate")
    nccl_tests.write_state(fleet.root("snd2"), gdr=False)
    try:
        rc, out = run_playbook([fleet.inventory], os.path.join(fl.REPO, "playbooks", "validate.yml"),
                               {"validate_hosts": "rcv:snd2", "validate_tests": ["nccl"], "validate_report_dir": rep,
                                "validate_baseline_dir": os.path.join(rep, "baselines"),
                                "validate_size": 1 << 20, "validate_timeout": 60})
    finally:
        nccl_tests.write_state(fleet.root("snd2"), gdr=True)
    assert rc != 0, out[-4000:]
    assert os.path.exists(os.path.join(rep, "validate-rcv.json")), out[-6000:]
    docs = dict((n, json.load(open(os.path.join(rep, "validate-%s.json" % n)))) for n in ("rcv", "snd2"))
    states = dict((n, dict((r["id"], (r["verdict"] or {}).get("state")) for r in d["runs"])) for n, d in docs.items())
    assert states["rcv"] == {"nccl.configured": "direct", "nccl.gdr_loc": "fallback", "nccl.socket": "fallback"}
    assert states["snd2"]["nccl.configured"] == "fallback"
    cfg = [r for r in docs["rcv"]["runs"] if r["id"] == "nccl.configured"][0]
    assert cfg["env"]["NCCL_NET"] == "IB" and cfg["bandwidth"] > 0 and cfg["cpu_s"] is not None
    assert "snd2" in out and "nccl.configured expected the direct path and shows fallback: no gdr" in out
    assert "failed=0" in out.split("rcv ")[-1].split("\n")[0]
