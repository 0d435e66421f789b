# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time applier re-applies the recorded ECN/DCQCN settings (state.json ``ecn``) on a simulated hgx-h200
tree (MLNX_OFED sysfs): at boot for every rail, on a device's udev add for that device's rail only."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim import tree as sim_tree

from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


class Clock(object):
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def _np(root, rail, prio=3):
    with open(os.path.join(root, "sys/class/net", rail, "ecn/roce_np/enable", str(prio))) as f:
        return f.read().strip()


def _apply(sr, **kw):
    lines = []
    clock = Clock()
    rc, summary = applier.run_applier(sr, lambda argv: (127, "", "not here"), log=lines.append, sleep=clock.sleep,
                                      clock=clock, **kw)
    return rc, summary, lines


def test_boot_and_device_runs_reapply_the_recorded_ecn(tmp_path):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, "hgx-h200")
    sr = Sysroot(root)
    rails = [r["netdev"] for r in manifest["rails"]]
    state.record(sr, "ecn", {"rails": rails, "priority": 3, "cnp_dscp": 48, "cnp_priority": 6}, False)
    rc, summary, lines = _apply(sr)
    assert rc == 0, lines
    assert all(_np(root, r) == "1" for r in rails)
    assert "ecn: ens1np0 np_enable:3 False -> True" in lines
    assert summary["concerns"]["ecn"]["rails"] == rails
    rc, summary, lines = _apply(sr)
    assert rc == 0 and lines == [] and summary["changed"] is False
    # driver reload of one device: its rail lost ECN, another rail drifted too; the device run fixes only its own
    dev = manifest["rails"][2]
    for rail in (dev["netdev"], rails[5]):
        with open(os.path.join(root, "sys/class/net", rail, "ecn/roce_np/enable/3"), "w") as f:
            f.write("0\n")
    rc, summary, lines = _apply(sr, only_device=dev["ibdev"])
    assert rc == 0, lines
    assert _np(root, dev["netdev"]) == "1" and _np(root, rails[5]) == "0"
    assert ecn.concern_status(sr, {"rails": rails})["status"] == "drift"


def test_bad_recorded_ecn_is_refused_by_the_store():
    for bad, needle in (({"rails": ["ens1np0"], "priority": 9}, "priority must be 0..7"),
                        ({"rails": [], "priority": 3}, "ecn.rails must be a non-empty list"),
                        ({"rails": ["ens1np0"], "colour": 1}, "unknown key(s) colour")):
        try:
            state.validate_section("ecn", bad)
        except ValueError as e:
            assert needle in str(e), e
        else:
            raise AssertionError("accepted %r" % (bad,))


def _set(root, rail, prio, value):
    with open(os.path.join(root, "sys/class/net", rail, "ecn/roce_np/enable", str(prio)), "w") as f:
        f.write(value + "\n")


def test_a_run_on_some_rails_keeps_the_others_record_and_boot_restores_both(tmp_path):
    """Issue 21 (ECN's boot record per rail, as item 9 for DCB): a roce_ecn run on 2 of the 8 rails at priority 4
    used to replace the record with those 2, so after a reboot the other 6 came up without ECN. The record is
    merged per rail: 2 rails at priority 4, 6 at priority 3, each group re-applied at boot."""
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, "hgx-h200")
    sr = Sysroot(root)
    rails = [r["netdev"] for r in manifest["rails"]]
    base = {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}
    state.record(sr, "ecn", dict(base, rails=rails), False, merge=True)
    state.record(sr, "ecn", dict(base, priority=4, rails=rails[:2]), False, merge=True)
    got = state.load(sr)["ecn"]
    assert got == {"groups": [dict(base, priority=4, rails=rails[:2]), dict(base, rails=rails[2:])]}, got
    for r in rails:                      # the reboot: ECN is lost
        _set(root, r, 3, "0")
        _set(root, r, 4, "0")
    rc, summary, lines = _apply(sr)
    assert rc == 0, lines
    assert [(_np(root, r, 4), _np(root, r, 3)) for r in rails] == [("1", "0")] * 2 + [("0", "1")] * 6
    assert sorted(summary["concerns"]["ecn"]["rails"]) == sorted(rails)
    rc, summary, lines = _apply(sr)
    assert rc == 0 and lines == [] and summary["changed"] is False
