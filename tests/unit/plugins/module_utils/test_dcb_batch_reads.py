# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rail's DCB state in one ``dcb -j -b`` process where iproute2 answers whole batches (the evidence timer's
read_dcb, discovery's DCBX facts), one process per object where its 6.1 batch defect would stop the batch: the same
states and errors as reading each rail alone. Against the simulator's dcb, in this process."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from gpufabric_sim.emulators import dcb as dcb_emu

from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check, qos_facts
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RAILS = ["ens1np0", "ens2np0", "ens3np0"]
C = {"LC_ALL": "C", "LANG": "C"}


@pytest.mark.parametrize("version,whole", [((5, 12, 0), True), ((6, 0, 0), True), ((6, 1, 0), False),
                                           ((6, 1, 2), False), ((6, 2, 0), True), ((6, 5, 0), True)])
def test_batch_answers_all(version, whole):
    assert dcb.batch_answers_all(version) is whole


def node(tmp_path, version, missing=()):
    """A node whose rails are mlx5 netdevs with DCB, but ``missing`` (no DCB device: dcb fails on them)."""
    root = str(tmp_path)
    dcb_emu.init_node(root, version)
    for r in RAILS:
        os.makedirs(os.path.join(root, "sys/bus/pci/drivers/mlx5_core"), exist_ok=True)
        os.makedirs(os.path.join(root, "sys/class/net", r, "device"))
        os.symlink(os.path.join(root, "sys/bus/pci/drivers/mlx5_core"),
                   os.path.join(root, "sys/class/net", r, "device", "driver"))
        if r not in missing:
            dcb_emu.init_device(root, r, "mlx5_core")
    dcb_emu.run(["app", "add", "dev", RAILS[0], "dscp-prio", "26:3"], root=root)
    calls = []

    def run(argv):
        calls.append(list(argv[1:]))
        return dcb_emu.run(list(argv[1:]), root=root)
    return root, run, calls


def alone(run, rails):
    """What reading each rail on its own gives (the evidence timer's reads before the batch)."""
    out = {}
    for r in rails:
        try:
            out[r] = dcb.read_rail(run, r)
        except dcb.DcbError as e:
            out[r] = {"error": str(e)}
    return out


@pytest.mark.parametrize("version,missing,processes", [
    ("6.5.0", (), 2),                  # dcb -V, one batch
    ("6.1.0", (), 1 + 2 * 3),          # dcb -V, then app and pfc of each rail: no batch that answers one command
    # the batch fails at ens2: read object by object up to the failure, then each rail in a batch of its own,
    # ens2's failing one followed by its app read, which gives the precise error
    ("6.5.0", ("ens2np0",), 2 + 3 + 1 + 2 + 1),
])
def test_read_dcb_one_batch_same_states(tmp_path, version, missing, processes):
    root, run, calls = node(tmp_path, version, missing)
    states, ver = evidence.read_dcb(Sysroot(root), run, RAILS, "/usr/sbin/dcb")
    assert ver == version
    assert len(calls) == processes
    assert list(states) == RAILS
    assert states == alone(run, RAILS)
    assert states["ens1np0"]["trust"] == "dscp"
    assert [r for r in RAILS if "error" in states[r]] == list(missing)
    assert (["-j", "-b"] == calls[1][:2]) is (version == "6.5.0")


@pytest.mark.parametrize("version,missing,answered,processes", [
    ("6.5.0", (), RAILS, 1),
    ("6.1.0", (), RAILS[:1], 1),     # the defect: the first command answers, the others are read alone
    ("6.5.0", ("ens2np0",), [], 1),  # a rail without DCBX fails the batch: every rail alone, with its own error
])
def test_batch_dcbx(tmp_path, version, missing, answered, processes):
    _root, run, calls = node(tmp_path, version, missing)
    got = qos_facts.batch_dcbx(run, RAILS)
    assert sorted(got) == answered
    assert len(calls) == processes
    for r in answered:
        assert json.loads(got[r]) == json.loads(dcb_emu.run(["-j", "dcbx", "show", "dev", r], root=_root)[1])


def test_annotate_dcbx_facts_as_alone(tmp_path):
    root, run, calls = node(tmp_path, "6.1.0", ("ens3np0",))
    rails = [{"netdev": r, "kind": "pf"} for r in RAILS]
    got = qos_facts.annotate(Sysroot(root), rails, run, lambda name: None if name != "dcb" else "/usr/sbin/dcb")
    assert [r["dcbx"]["error"] is None for r in got] == [True, True, False]
    assert "ens3np0" in got[2]["dcbx"]["error"]
    assert len([c for c in calls if "-b" in c]) == 1


class Backend(object):
    """A runner backend (run_command) over the simulator's dcb, counting the processes it would start."""

    def __init__(self, run):
        self.run = run

    def run_command(self, args, environ_update=None, check_rc=False, **_kw):
        return self.run(list(args))


@pytest.mark.parametrize("version,remembered", [("6.5.0", 6), ("6.1.0", 1)])
def test_snapshot_keeps_what_a_batch_answered(tmp_path, version, remembered):
    """Each show a batch answered stands for its single query (the evaluation, then the timer's own reads)."""
    root, run, calls = node(tmp_path, version)
    snap = node_check.SnapshotRunner(Backend(run))
    lines = [(obj, r) for r in RAILS for obj in ("app", "pfc")]
    texts, usable = dcb.run_batch(lambda argv: snap.run_command(["/usr/sbin/dcb"] + argv[1:], C), lines)
    assert usable and len(texts) == remembered and len(calls) == 1
    for obj, r in lines:
        rc, out, err = snap.run_command(["/usr/sbin/dcb", "-j", obj, "show", "dev", r], C)
        assert (rc, json.loads(out), err) == (0, json.loads(dcb_emu.run(["-j", obj, "show", "dev", r],
                                                                        root=root)[1]), "")
    assert len(calls) == 1 + len(lines) - remembered
    snap.run_command(["/usr/sbin/dcb", "-j", "app", "show", "dev", RAILS[0]], {"LC_ALL": "POSIX"})
    assert len(calls) == 2 + len(lines) - remembered   # another environment: another query


@pytest.mark.parametrize("version,processes", [("6.5.0", 1), ("6.1.0", 1 + 5)])
def test_a_batch_of_answered_lines_runs_no_process(tmp_path, version, processes):
    """The timer's own DCB read after the evaluation's: a batch whose every line the snapshot holds is answered from
    it, as dcb prints a batch (the same texts), and ``dcb -V`` is asked once."""
    _root, run, calls = node(tmp_path, version)
    snap = node_check.SnapshotRunner(Backend(run))

    def batch(lines):
        return dcb.run_batch(lambda argv: snap.run_command(["/usr/sbin/dcb"] + argv[1:], C), lines)
    lines = [(obj, r) for r in RAILS for obj in ("app", "pfc")]
    first, usable = batch(lines)
    for obj, r in lines[len(first):]:      # where 6.1 stopped the batch: the single queries
        first.append(snap.run_command(["/usr/sbin/dcb", "-j", obj, "show", "dev", r], C)[1])
    assert usable and len(calls) == processes
    again, usable = batch(lines[1:] + lines[:1])     # the same lines in another order
    assert usable and [json.loads(t) for t in again] == [json.loads(t) for t in first[1:] + first[:1]]
    assert len(calls) == processes
    batch(lines + [("ets", RAILS[0])])                # a line not answered yet: the batch runs
    assert len(calls) == processes + 1
    for _i in range(2):
        assert snap.run_command(["/usr/sbin/dcb", "-V"], C)[0] == 0
    assert len(calls) == processes + 2


def test_snapshot_ignores_batches_of_anything_but_show(tmp_path):
    _root, run, calls = node(tmp_path, "6.5.0")
    snap = node_check.SnapshotRunner(Backend(run))
    batch = tmp_path / "b.batch"
    batch.write_text("pfc show dev %s\npfc set dev %s prio-pfc 3:on\n" % (RAILS[0], RAILS[0]))
    assert snap.run_command(["/usr/sbin/dcb", "-j", "-b", str(batch)], C)[0] == 0
    snap.run_command(["/usr/sbin/dcb", "-j", "pfc", "show", "dev", RAILS[0]], C)
    assert len(calls) == 2


def test_snapshot_sysroot_reads_once_and_forgets_on_write(tmp_path):
    """The evaluation's sysroot: each read-only answer once (a path read again is not read again), a write through it
    forgets them all, and what it hands out cannot change what it kept."""
    from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import SnapshotSysroot
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "a").write_text(" 1 \n")
    snap = SnapshotSysroot(Sysroot(str(tmp_path)))
    assert (snap.read("/sys/a"), snap.read_raw("/sys/a"), snap.listdir("/sys")) == ("1", " 1 \n", ["a"])
    (tmp_path / "sys" / "a").write_text("2")
    (tmp_path / "sys" / "b").write_text("3")
    assert (snap.read("/sys/a"), snap.exists("/sys/b"), snap.read("/sys/b", "none")) == ("1", True, "3")
    snap.listdir("/sys").append("x")
    assert snap.listdir("/sys") == ["a"]
    assert snap.read("/sys/c", "none") == "none" and snap.path("/sys/a") == str(tmp_path / "sys" / "a")
    snap.write_attr("/sys/b", "4")
    assert (snap.read("/sys/a"), snap.read("/sys/b"), snap.listdir("/sys")) == ("2", "4", ["a", "b"])


def test_snapshot_runs_a_registered_read_only_script_once(tmp_path):
    """``sh -c SCRIPT`` with a script registered read-only (the GRUB defaults' sourcing) is answered from its first
    run for the same argv and environment; any other script runs every time."""
    from ansible_collections.gpufabric.node.plugins.module_utils.host import runner
    from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import grub
    calls = []

    def run(argv, environ_update=None, check_rc=False, **kw):
        calls.append(list(argv))
        return 0, "x\0y\0", ""
    snap = node_check.SnapshotRunner(Backend(run))
    source = ["/usr/bin/env", "-i", "PATH=/usr/bin", "/bin/sh", "-c", grub.SOURCE_SCRIPT, "sh", "/etc/default/grub"]
    other = ["/usr/bin/env", "-i", "/bin/sh", "-c", "echo changed > /tmp/x"]
    assert runner.runs_read_only_script(source) and not runner.runs_read_only_script(other)
    for _i in range(2):
        assert snap.run_command(source, C) == (0, "x\0y\0", "")
        snap.run_command(other, C)
    assert len(calls) == 3
    snap.run_command(source[:-1] + ["/etc/default/grub.d/x.cfg"], C)   # other files: run
    snap.run_command(source, {"LC_ALL": "POSIX"})                       # other environment: run
    assert len(calls) == 5
