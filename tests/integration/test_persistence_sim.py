# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot-time persistence as a concern, on one simulated hgx-h200 node over SSH (the module shipped by AnsiballZ):
what an admin does by hand (systemctl disable, rm of the udev rule, chmod o+w of the applier) is drift in check
mode, which writes nothing; at the next boot the applier refuses to run from the tampered script; a real run of
fabric_persist puts everything back, and the boot after that re-applies the recorded ToS."""

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

NODE = "pe1"
UNIT = "gpufabric-apply.service"
SCRIPT = "/usr/local/sbin/gpufabric-apply"
RULE = "/etc/udev/rules.d/90-gpufabric-rdma.rules"
TOS = "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("fleet")), {NODE: "hgx-h200"}).create()
    try:
        yield f
    finally:
        f.destroy()


def persist(fleet, check=False):
    rc, res = fleet.ansible(NODE, "gpufabric.node.fabric_persist", {"boot_wait": 0},
                            *(["--check"] if check else []))
    assert rc == 0, res
    return res[NODE]


def reboot(fleet):
    return json.loads(sim("reboot", "--fleet", fleet.path, "--node", NODE).stdout)


def tos(fleet):
    """The ToS of mlx5_0 port 1; None while its configfs group does not exist (nobody made it since boot)."""
    try:
        with open(os.path.join(fleet.root(NODE), TOS.lstrip("/"))) as f:
            return f.read().strip()
    except IOError:
        return None


def test_tampering_is_drift_refused_at_boot_and_fixed(fleet):
    rc, res = fleet.ansible(NODE, "gpufabric.node.rdma_cm_tos", {"devices": ["mlx5_0"], "tos": 106})
    assert rc == 0, res
    first = persist(fleet)
    assert first["changed"] is True and first["concerns"]["persistence"]["status"] == "ok"
    clean = persist(fleet, check=True)
    assert clean["changed"] is False and clean["drift"] == [] and clean["concerns"]["persistence"]["status"] == "ok"

    fleet.sh(NODE, "systemctl disable %s && rm $GPUFABRIC_SYSROOT%s && chmod o+w $GPUFABRIC_SYSROOT%s"
             % (UNIT, RULE, SCRIPT))
    before = fleet.hash(NODE)
    check = persist(fleet, check=True)
    assert check["changed"] is True
    got = {(i["object"], i["key"], i["current"]) for i in check["drift"]}
    assert got == {(UNIT, "unit_file_state", "disabled"), (RULE, "content", "missing"), (SCRIPT, "mode", "0757")}
    assert check["concerns"]["persistence"]["status"] == "drift"
    assert fleet.hash(NODE) == before, "check mode wrote something"

    # the boot runs the unit (enabled again by hand), and the applier refuses its world-writable script
    fleet.sh(NODE, "systemctl enable %s" % UNIT)
    boot = reboot(fleet)
    unit = [u for u in boot["units"] if u["unit"] == UNIT]
    assert unit and unit[0]["rc"] != 0, boot
    with open(os.path.join(fleet.root(NODE), "var/log/gpufabric-sim", UNIT + ".log")) as f:
        log = f.read()
    assert "error: refusing to run: %s: writable by others (file, owner 0:0, mode 0757)" % SCRIPT in log
    assert tos(fleet) is None, "nothing applied"

    fleet.sh(NODE, "systemctl disable %s" % UNIT)
    fix = persist(fleet)
    assert fix["changed"] is True and fix["concerns"]["persistence"]["status"] == "ok"
    assert "systemctl enable %s" % UNIT in fix["commands"] and "udevadm control --reload" in fix["commands"]
    again = persist(fleet)
    assert again["changed"] is False and again["drift"] == []
    boot = reboot(fleet)
    assert [u["rc"] for u in boot["units"] if u["unit"] == UNIT] == [0], boot
    assert tos(fleet) == "106"
