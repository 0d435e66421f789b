# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's mstconfig: the real tool's layout, read back by the collection's own parser (ecn_host), the
firmware's shipped mask unless the simulator's state says otherwise, and the refusals of the real tool."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import mstconfig as emu

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import host as ecn_host


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mst") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    return root, manifest


def _run(monkeypatch, capsys, root, argv):
    monkeypatch.setenv(emu.SYSROOT_ENV, root)
    rc = emu.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_shipped_mask_is_read_back_by_the_collection(built, monkeypatch, capsys):
    root, manifest = built
    bdf = manifest["rails"][0]["bdf"]
    monkeypatch.setenv(emu.SYSROOT_ENV, root)

    def run(argv):
        rc = emu.main(argv[1:])
        out, err = capsys.readouterr()
        return rc, out, err

    got = ecn_host.firmware_prio(run, lambda name: "/sim/bin/" + name if name == "mstconfig" else None, bdf, 3)
    assert got["status"] == "ok" and got["enabled"] is True and got["mask"] == 255 and got["tool"] == "mstconfig"


def test_a_mask_without_the_priority_is_read_as_off(built, monkeypatch, capsys):
    root, manifest = built
    bdf = manifest["rails"][1]["bdf"]
    state = os.path.join(root, "var", "lib", "gpufabric-sim", "firmware")
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "%s.json" % bdf), "w") as f:
        json.dump({"ROCE_CC_PRIO_MASK_P1": 0xF7}, f)
    rc, out, _err = _run(monkeypatch, capsys, root, ["-d", bdf, "query", "ROCE_CC_PRIO_MASK_P1"])
    assert rc == 0
    assert ecn_host.parse_prio_mask(out, "ROCE_CC_PRIO_MASK_P1") == 0xF7
    assert "Configurations:" in out and "Next Boot" in out and bdf in out


@pytest.mark.parametrize("argv, message", [
    (["-d", "0000:19:00.0", "query", "NO_SUCH_PARAM"], "Unknown Parameter: NO_SUCH_PARAM"),
    (["-d", "0000:99:00.0", "query", "ROCE_CC_PRIO_MASK_P1"], "Failed to open device"),
    (["-d", "not-a-bdf", "query"], "Failed to open device"),
    (["query"], "usage"),
    (["-d", "0000:19:00.0", "set", "ROCE_CC_PRIO_MASK_P1=8"], "usage"),
])
def test_refusals(built, monkeypatch, capsys, argv, message):
    root, _manifest = built
    rc, out, err = _run(monkeypatch, capsys, root, argv)
    assert rc != 0 and out == "" and message in err


def test_a_gpu_function_is_not_a_connectx(built, monkeypatch, capsys):
    root, manifest = built
    gpus = [d for d in os.listdir(os.path.join(root, "sys", "bus", "pci", "devices"))
            if open(os.path.join(root, "sys", "bus", "pci", "devices", d, "vendor")).read().strip() == "0x10de"]
    assert gpus
    rc, _out, err = _run(monkeypatch, capsys, root, ["-d", gpus[0], "query"])
    assert rc == 1 and "Failed to open device" in err
