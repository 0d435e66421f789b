# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's nvidia-smi nvlink --status: the layout the real tool prints (the fabric_manager parser reads it
like the recorded output), links trained only while Fabric Manager runs, and nothing at all without NVLink (as
recorded on a real H200 host)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import nvidia_smi as emu

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.fabric_manager import check

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures")
FM = {"needed": True, "running": True, "pids": [2817]}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = {}
    for name in ("hgx-h200", "pcie-4gpu-crossnuma"):
        root = str(tmp_path_factory.mktemp(name) / "root")
        sim_tree.build_tree(root, sim_topology.load(name))
        out[name] = root
    return out


def _fm_proc(root):
    for pid in os.listdir(os.path.join(root, "proc")):
        comm = os.path.join(root, "proc", pid, "comm")
        if pid.isdigit() and os.path.exists(comm) and open(comm).read().startswith(emu.FM_COMM):
            return os.path.join(root, "proc", pid)
    return None


def _down(root, lines):
    path = os.path.join(root, emu.DOWN_FILE)
    if lines is None:
        if os.path.exists(path):
            os.unlink(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(lines)


@pytest.mark.parametrize("down,status,reason,keys", [
    (None, "ok", "8 GPU(s), 144 link(s) active", []),
    ("3 4\n3 5\n", "drift", "GPU 3: NVLink link(s) 4, 5 down", [("GPU 3", "nvlink_down")]),
    ("0 17\nnot a line\n", "drift", "GPU 0: NVLink link(s) 17 down", [("GPU 0", "nvlink_down")]),
])
def test_hgx_node_reads_as_the_real_layout(trees, down, status, reason, keys):
    root = trees["hgx-h200"]
    _down(root, down)
    try:
        rc, out, err = emu.run(["nvlink", "--status"], root)
    finally:
        _down(root, None)
    assert (rc, err) == (0, "")
    assert out.splitlines()[0].startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
    assert out.splitlines()[1] == "\t Link 0: 26.562 GB/s" or down
    doc = check.status(FM, check.parse_nvlink_status(out))
    assert (doc["status"], [(i["object"], i["key"]) for i in doc["items"]]) == (status, keys)
    assert reason in doc["reason"]


def test_links_untrained_while_fabric_manager_is_down(trees, tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(trees["hgx-h200"], root, symlinks=True)
    shutil.rmtree(_fm_proc(root))
    rc, out, _err = emu.run(["nvlink", "-s"], root)
    gpus = check.parse_nvlink_status(out)
    assert rc == 0 and len(gpus) == 8
    assert {lk["state"] for g in gpus for lk in g["links"]} == {"inactive"}


def test_no_nvlink_prints_nothing_like_the_recorded_h200(trees):
    with open(os.path.join(FIXTURES, "validate", "h200-microvm", "nvidia-smi-nvlink-status.txt")) as f:
        recorded = f.read()
    assert emu.run(["nvlink", "--status"], trees["pcie-4gpu-crossnuma"]) == (0, recorded, "")


@pytest.mark.parametrize("argv", [[], ["nvlink"], ["topo", "-m"], ["nvlink", "--status", "-i", "0"]])
def test_what_it_does_not_model_is_an_error(trees, argv):
    rc, out, err = emu.run(argv, trees["hgx-h200"])
    assert rc == 2 and out == "" and "only 'nvlink --status'" in err
