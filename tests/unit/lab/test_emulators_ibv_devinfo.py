# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's ibv_devinfo: the real tool's layout, and the active MTU the kernel derives from the netdev MTU."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim import runtime
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import ibv_devinfo as emu

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("ibv") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    return root, manifest


def _set_mtu(root, netdev, value):
    with open(os.path.join(root, "sys/class/net", netdev, "mtu"), "w") as f:
        f.write("%d\n" % value)


@pytest.mark.parametrize("netdev_mtu, active", [(1500, 1024), (4191, 2048), (4200, 4096), (9000, 4096)])
def test_active_mtu_follows_the_netdev(built, netdev_mtu, active):
    root, manifest = built
    rail = manifest["rails"][0]
    if os.path.exists("/sys/class/net/%s" % rail["netdev"]):
        pytest.skip("a host interface has the rail's name")
    _set_mtu(root, rail["netdev"], netdev_mtu)
    rc, out, _err = emu.run(["-d", rail["ibdev"], "-i", "1"], root)
    assert rc == 0 and out.startswith("hca_id:\t%s\n" % rail["ibdev"])
    # the collection's parser reads what the emulator prints
    assert mtu.parse_devinfo(out) == {1: {"max_mtu": 4096, "active_mtu": active}}


def test_a_capped_port_and_the_errors(built):
    root, manifest = built
    rail = manifest["rails"][1]
    cap = os.path.join(root, "var/lib/gpufabric-sim/ibv", rail["ibdev"], "1")
    os.makedirs(cap)
    with open(os.path.join(cap, "max_mtu"), "w") as f:
        f.write("2048\n")
    _set_mtu(root, rail["netdev"], 9000)
    rc, out, _err = emu.run(["-d", rail["ibdev"]], root)
    assert rc == 0 and mtu.parse_devinfo(out) == {1: {"max_mtu": 2048, "active_mtu": 2048}}
    assert emu.run(["-d", "nope"], root)[0] == 255
    rc, out, _err = emu.run(["-l"], root)
    assert rc == 0 and ("\t%s\n" % rail["ibdev"]) in out
    rc, out, _err = emu.run([], root)
    assert out.count("hca_id:") == len(manifest["rails"])


def test_every_node_has_it(built):
    assert "ibv_devinfo" in runtime.node_tools(sim_topology.load("hgx-h200"))
