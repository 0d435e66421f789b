# -*- coding: utf-8 -*-
"""fabric_validate as a module: check mode plans and runs nothing, a node without GPUs or tools gets every run
not_checked with what is missing (never a failure of the task) and its work directory removed, bad input fails
before anything is touched, and ``changed`` is never true (it moves data, it changes no configuration)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import fabric_validate


@pytest.fixture
def node(tmp_path, monkeypatch):
    """An empty node (no PCI devices, no RDMA, no nvidia-fs) and its work directory."""
    root = tmp_path / "root"
    (root / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.18.44\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    return {"root": root, "work": work}


def _args(n, **kw):
    args = {"gds_dir": str(n["work"]), "python": sys.executable, "node": "gpu-a01"}
    args.update(kw)
    return args


@pytest.mark.parametrize("check_mode", [True, False], ids=["check", "run"])
def test_a_node_without_gpus_is_not_checked_run_by_run(node, monkeypatch, check_mode):
    res = run_module(fabric_validate, _args(node), check_mode=check_mode, monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["failures"] == []
    doc = res["validation"]
    assert doc["node"] == "gpu-a01" and doc["schema"] == 1 and doc["profile_key"] == doc["profile"]["key"]
    tests = set(r["test"] for r in doc["runs"])
    assert tests == {"nccl", "nccl_intra", "perftest", "gds"}
    for r in doc["runs"]:
        assert r["status"] == "not_checked" and r["reason"], r
        assert r["rc"] is None and r["bandwidth"] is None
    assert len(res["lines"]) == len(doc["runs"])
    assert os.listdir(str(node["work"])) == []          # nothing left behind (check mode: nothing created)


def test_check_mode_plans_the_runs_a_node_with_tools_would_make(node, monkeypatch):
    """A GPU and nccl-tests: check mode gives the planned commands and runs none of them."""
    facts = {"gpus": [{"index": 0, "bdf": "0000:18:00.0", "model": "H200"}], "rails": [], "pairing": [],
             "matrix": {}, "nvidia_fs": {"loaded": False}, "gpu_driver": {}, "kernel_release": "6.18.44"}
    monkeypatch.setattr(fabric_validate.validation.topology, "discover", lambda sr, subset: facts)
    bin_dir = node["work"].parent / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "all_reduce_perf"
    tool.write_text("#!/bin/sh\necho ran > %s/ran\n" % node["work"].parent)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    res = run_module(fabric_validate, _args(node, tests=["nccl"]), check_mode=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    run = dict((r["id"], r) for r in res["validation"]["runs"])["nccl.configured"]
    assert run["status"] == "not_checked" and run["reason"] == "check mode: planned, not run"
    assert run["tool"] == "all_reduce_perf" and run["command"][0] == str(tool)
    assert not (node["work"].parent / "ran").exists() and os.listdir(str(node["work"])) == []


@pytest.mark.parametrize("args,message", [
    ({"tests": ["nccl", "fio"]}, "tests"),
    ({"image": "img;rm -rf /"}, "image"),
    ({"gds_dir": "/nonexistent/gpufabric"}, "gds_dir /nonexistent/gpufabric is not a directory"),
    ({"node": "gpu\nExecStartPre=/bin/id"}, "node"),
])
def test_bad_input_fails_naming_it_before_anything_runs(node, monkeypatch, args, message):
    res = run_module(fabric_validate, _args(node, **args), monkeypatch=monkeypatch)
    assert res.get("failed") and message in res["msg"], res
    assert os.listdir(str(node["work"])) == []
