# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.report import capture as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import fabric_capture


def test_check_then_write_then_idempotent_and_replays(tmp_path, monkeypatch):
    root = str(tmp_path / "node")
    sim_tree.build_tree(root, sim_topology.load("hgx-h200-sriov"))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    out = tmp_path / "out"
    out.mkdir()
    dest = str(out / "node1")
    checked = run_module(fabric_capture, {"dest": dest}, check_mode=True, monkeypatch=monkeypatch)
    assert checked["changed"] is True and not checked.get("failed") and os.listdir(str(out)) == []
    first = run_module(fabric_capture, {"dest": dest}, monkeypatch=monkeypatch)
    assert first["changed"] is True and first["tarball"] == dest + ".tar.gz"
    assert first["manifest"]["masked"] is True and first["entries"] > 100
    again = run_module(fabric_capture, {"dest": dest}, check_mode=True, monkeypatch=monkeypatch)
    second = run_module(fabric_capture, {"dest": dest}, monkeypatch=monkeypatch)
    assert again["changed"] is False and second["changed"] is False
    replay = C.unpack(first["tarball"], str(tmp_path / "replay"))
    with open(first["facts_file"]) as f:
        assert json.loads(json.dumps(T.discover(Sysroot(replay)))) == json.load(f)


def test_missing_directory_and_bad_subset_fail_before_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(tmp_path))
    res = run_module(fabric_capture, {"dest": str(tmp_path / "nope" / "x")}, monkeypatch=monkeypatch)
    assert res["failed"] and "does not exist" in res["msg"]
    res = run_module(fabric_capture, {"dest": str(tmp_path / "x"), "gather_subset": ["bogus"]},
                     monkeypatch=monkeypatch)
    assert res["failed"] and not os.path.exists(str(tmp_path / "x.tar.gz"))
