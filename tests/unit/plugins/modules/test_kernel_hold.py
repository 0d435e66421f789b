# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_hold as a module, on a simulated Ubuntu node whose apt tools are the simulator's emulators: check mode
predicts the real run and writes nothing, a real run holds and is idempotent, unheld releases, diff, bad input."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from gpufabric_sim import runtime as sim_runtime
from modrunner import run_module

from test_check_mode_all import template  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpufabric.node.plugins.modules import kernel_hold


@pytest.fixture
def node(template, tmp_path, monkeypatch):  # noqa: F811
    root = str(tmp_path / "root")
    sim_runtime.sync_tree(template[0], root)
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    for tool, (mod, func, argv0) in sorted(sim_runtime.WRAPPERS.items()):
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write(sim_runtime.render_wrapper(sys.executable, mod, func, argv0))
        os.chmod(path, 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
    return {"root": root, "kver": template[1]["kernel_release"]}


def test_check_mode_predicts_the_real_run_then_idempotent(node, monkeypatch):
    args = {"kernel_releases": [node["kver"]]}
    before = sim_runtime.tree_hash(node["root"])
    check = run_module(kernel_hold, args, check_mode=True, diff=True, monkeypatch=monkeypatch)
    assert not check.get("failed"), check.get("msg")
    assert check["changed"] is True and check["added"] and "diff" in check
    assert sim_runtime.tree_hash(node["root"]) == before  # check mode wrote nothing

    real = run_module(kernel_hold, args, monkeypatch=monkeypatch)
    assert not real.get("failed"), real.get("msg")
    assert real["changed"] is True and real["added"] == check["added"]
    assert set(real["added"]) <= set(real["held"])
    # issue 21 item 23: the held release is recorded for the drift check (the vendor client's record)
    with open(os.path.join(node["root"], "etc/gpufabric/vendor_nfs.json")) as f:
        assert json.load(f)["hold"] == {"kernel_releases": [node["kver"]]}

    again = run_module(kernel_hold, args, check_mode=True, monkeypatch=monkeypatch)
    assert again["changed"] is False and not again["added"] and again["held"] == real["held"]


def test_unheld_releases_what_was_held(node, monkeypatch):
    args = {"kernel_releases": [node["kver"]]}
    held = run_module(kernel_hold, args, monkeypatch=monkeypatch)["held"]
    assert held
    res = run_module(kernel_hold, dict(args, state="unheld"), monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and set(res["released"]) == set(held) and not res["held"]
    with open(os.path.join(node["root"], "etc/gpufabric/vendor_nfs.json")) as f:
        assert "hold" not in json.load(f)


def test_unsupported_release_fails_naming_it(node, monkeypatch):
    with open(os.path.join(node["root"], "etc/os-release"), "w") as f:
        f.write('ID=gentoo\nVERSION_ID="2.15"\n')
    res = run_module(kernel_hold, {"kernel_releases": [node["kver"]]}, monkeypatch=monkeypatch)
    assert res.get("failed") and "gentoo" in res["msg"]


def test_control_character_refused_before_anything(node, monkeypatch):
    before = sim_runtime.tree_hash(node["root"])
    res = run_module(kernel_hold, {"kernel_releases": [node["kver"] + "\n"]}, monkeypatch=monkeypatch)
    assert res.get("failed") and "kernel_releases" in res["msg"]
    assert sim_runtime.tree_hash(node["root"]) == before
