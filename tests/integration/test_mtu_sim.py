# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mtu concern on one simulated hgx-h200 node over SSH: the rails are real veths in the node's namespace (real
iproute2 reads and sets their MTU), ibv_devinfo is the simulator's (active MTU from the real netdev MTU).
provision.yml sets 9000 on every rail and the RDMA ports then carry 4096; a second run changes nothing; an MTU put
back by hand is drift in drift.yml's report and fixed by gpufabric_fix=true; after a simulated reboot (the veths come
back at 1500) the boot-time applier sets it again (the udev run of each RDMA device for its rails), because nobody
else owns these rails."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Fleet, sim, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

NODE = "mt1"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("mtufleet")), {NODE: "hgx-h200"}).create()
    try:
        yield f
    finally:
        f.destroy()


def links(fleet):
    out = fleet.sh(NODE, "ip -d -j link show").stdout
    return dict((link["ifname"], link) for link in json.loads(out))


def rails(fleet):
    with open(os.path.join(fleet.root(NODE), "var/lib/gpufabric-sim/manifest.json")) as f:
        return [r["netdev"] for r in json.load(f)["rails"]]


def test_provision_drift_fix_and_reboot(fleet, tmp_path):
    names = rails(fleet)
    assert set(links(fleet)[r]["mtu"] for r in names) == {1500}, "the veths boot at 1500"
    rc, out = fleet.playbook("provision.yml", "-l", NODE)
    assert rc == 0, out[-6000:]
    got = links(fleet)
    assert set(got[r]["mtu"] for r in names) == {9000}, dict((r, got[r]["mtu"]) for r in names)
    assert got["lo"]["mtu"] == 65536, "only the rails are touched"
    devinfo = fleet.sh(NODE, "ibv_devinfo").stdout
    assert devinfo.count("active_mtu:\t\t4096 (5)") == len(names), devinfo

    # a second run changes nothing (check mode says so, and writes nothing)
    before = fleet.hash(NODE)
    rc, res = fleet.ansible(NODE, "gpufabric.node.rail_mtu", {"rails": names}, "--check")
    assert rc == 0 and res[NODE]["changed"] is False, res
    assert res[NODE]["concerns"]["mtu"]["status"] == "ok" and fleet.hash(NODE) == before
    assert [o["owner"] for o in res[NODE]["owners"]] == ["applier"] * len(names)

    # drift: one rail back at 1500 by hand
    fleet.sh(NODE, "ip link set dev %s mtu 1500" % names[2])
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-l", "%s,localhost" % NODE)
    assert rc != 0, out[-4000:]
    report = json.loads((tmp_path / "drift-report.json").read_text())
    doc = report["nodes"][NODE]["concerns"]["mtu"]
    assert doc["status"] == "drift", doc
    assert [(i["object"], i["key"], i["current"], i["desired"]) for i in doc["items"]] == [
        (names[2], "mtu", 1500, 9000)], doc
    assert "Rail MTU" in (tmp_path / "drift-report.md").read_text()
    rc, out = fleet.playbook("drift.yml", "-e", "gpufabric_report_dir=%s" % tmp_path, "-e", "gpufabric_fix=true",
                             "-l", "%s,localhost" % NODE)
    report = json.loads((tmp_path / "drift-fixed.json").read_text())
    assert report["nodes"][NODE]["concerns"]["mtu"]["status"] == "ok", out[-4000:]
    assert links(fleet)[names[2]]["mtu"] == 9000

    # reboot: the driver creates the rails at 1500, the applier sets the recorded MTU
    boot = json.loads(sim("reboot", "--fleet", fleet.path, "--node", NODE).stdout)
    assert [u["rc"] for u in boot["units"] if u["unit"] == "gpufabric-apply.service"] == [0], boot
    got = links(fleet)
    assert set(got[r]["mtu"] for r in names) == {9000}, dict((r, got[r]["mtu"]) for r in names)
    # coldplug runs gpufabric-apply@<ibdev> for every RDMA device first (its rails' MTU and DCB), then the full run
    logdir = os.path.join(fleet.root(NODE), "var/log/gpufabric-sim")
    log = ""
    for name in sorted(os.listdir(logdir)):
        if name.startswith("gpufabric-apply"):
            with open(os.path.join(logdir, name)) as f:
                log += f.read()
    for r in names:
        assert log.count("mtu: %s mtu 1500 -> 9000" % r) == 1, log[-3000:]
