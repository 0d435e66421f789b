# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufabric_facts gather_subset qos on simulated nodes: ECN per priority, DCBX owner, firmware LLDP settings."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from gpufabric_sim import runtime as sim_runtime
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from gpufabric_sim.emulators import dcb_dcbx
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.modules import gpufabric_facts


def _node(tmp_path, monkeypatch, topology, tools=True, mlxconfig=None):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, topology)
    dcb_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"], r["driver"])
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    if tools:
        mod, func, argv0 = sim_runtime.WRAPPERS["dcb"]
        with open(os.path.join(bindir, "dcb"), "w") as f:
            f.write(sim_runtime.render_wrapper(sys.executable, mod, func, argv0))
        os.chmod(os.path.join(bindir, "dcb"), 0o755)
    if mlxconfig is not None:
        with open(os.path.join(bindir, "mlxconfig"), "w") as f:
            f.write("#!/bin/sh\ncat <<'OUT'\n%s\nOUT\n" % mlxconfig)
        os.chmod(os.path.join(bindir, "mlxconfig"), 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + "/usr/bin:/bin")

    def get_bin_path(_self, name, required=False, opt_dirs=None):
        """Only the node's tools: never the host's own dcb or mlxconfig."""
        path = os.path.join(bindir, name)
        return path if os.path.exists(path) else None

    monkeypatch.setattr(gpufabric_facts.AnsibleModule, "get_bin_path", get_bin_path)
    return root, manifest


def _rails(res):
    return dict((r["netdev"], r) for r in res["ansible_facts"]["gpufabric"]["rails"] if "ecn" in r)


MLXCONFIG = """
Device #1:
----------

Device type:    ConnectX7
Device:         0000:1a:00.0

Configurations:                              Next Boot
        LLDP_NB_DCBX_P1                     False(0)
        LLDP_NB_RX_MODE_P1                  OFF(0)
        LLDP_NB_TX_MODE_P1                  OFF(0)"""


def test_hgx_ofed_rails_report_ecn_per_priority_and_host_dcbx(tmp_path, monkeypatch):
    root, m = _node(tmp_path, monkeypatch, "hgx-h200")
    dcb_dcbx.firmware_takes_over(root, "ens2np0")
    res = run_module(gpufabric_facts, {"gather_subset": ["rails", "qos"]}, monkeypatch=monkeypatch)
    rails = _rails(res)
    assert sorted(rails) == sorted(r["netdev"] for r in m["rails"])
    e = rails["ens1np0"]["ecn"]
    assert e["source"] == "sysfs" and e["np_enabled"] == [] and e["priorities"]["3"] == {"np": False, "rp": False}
    assert (e["cnp_dscp"], e["cnp_priority"]) == (48, 6)
    assert rails["ens1np0"]["dcbx"]["owner"] == "host" and rails["ens1np0"]["dcbx"]["flags"] == ["host", "cee", "ieee"]
    assert rails["ens2np0"]["dcbx"]["owner"] == "lld-managed" and rails["ens2np0"]["dcbx"]["flags"] == ["cee", "ieee"]
    fw = rails["ens1np0"]["firmware_dcbx"]
    assert fw["status"] == "not_checked" and "could not be read" in fw["reason"] and fw["settings"] is None


def test_inbox_node_reports_unknown_enables_and_mlxconfig_settings(tmp_path, monkeypatch):
    root, m = _node(tmp_path, monkeypatch, "hgx-h200-sriov", mlxconfig=MLXCONFIG)
    res = run_module(gpufabric_facts, {"gather_subset": ["qos"]}, monkeypatch=monkeypatch)
    rails = _rails(res)
    assert rails, "qos implies rails"
    # VFs have no ECN/DCB of their own
    assert all(r.get("kind") != "vf" for r in rails.values())
    e = rails["ens1np0"]["ecn"]
    assert e["source"] == "debugfs" and e["np_enabled"] is None and e["priorities"]["3"] == {"np": None, "rp": None}
    assert (e["cnp_dscp"], e["cnp_priority_mode"]) == (0, 1)
    fw = rails["ens1np0"]["firmware_dcbx"]
    assert fw["status"] == "ok" and fw["settings"]["LLDP_NB_DCBX_P1"] == "False(0)"


def test_no_ecn_controls_and_no_dcb_tool(tmp_path, monkeypatch):
    _root, _m = _node(tmp_path, monkeypatch, "pcie-4gpu-crossnuma", tools=False)
    res = run_module(gpufabric_facts, {}, monkeypatch=monkeypatch)
    rails = _rails(res)
    r = rails["ens1np0"]
    assert r["ecn"]["source"] is None and "mlx5 without ECN controls" in r["ecn"]["reason"]
    assert r["dcbx"]["owner"] is None and "not installed" in r["dcbx"]["error"]


@pytest.mark.parametrize("subset", [["rails"], ["all", "!qos"]])
def test_without_qos_nothing_is_run(tmp_path, monkeypatch, subset):
    _node(tmp_path, monkeypatch, "hgx-h200")
    res = run_module(gpufabric_facts, {"gather_subset": subset}, monkeypatch=monkeypatch)
    assert not _rails(res)
