# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input, through Ansible over SSH against a simulated HGX node: every row fails with a clear message
and leaves the node exactly as it was (hash of the node tree, DCB emulator state, live sysctls)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import BIN, Fleet, env, why_not  # noqa: E402  pylint: disable=wrong-import-position

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

R = ["ens1np0", "ens2np0"]
# (name, module, args, fragment expected in the failure message — lower case)
BAD = [
    ("DSCP 64", "dcb_qos", {"rails": R, "dscp_map": [{"dscp": 64, "priority": 3}]}, "dscp"),
    ("priority 8", "dcb_qos", {"rails": R, "dscp_map": [{"dscp": 26, "priority": 8}]}, "priority"),
    ("ToS 256", "rdma_cm_tos", {"rails": R, "tos": 256}, "256"),
    ("unknown rail name", "dcb_qos", {"rails": ["ens99np0"]}, "ens99np0"),
    ("BDF that is not a bridge", "pcie_acs", {"bridges": ["0000:18:00.0"], "persist": "none"}, "bridge"),
    ("PFC priorities with duplicates", "dcb_qos", {"rails": R, "pfc_priorities": [3, 3]}, "twice"),
    ("rp_filter 3", "rail_sysctl", {"rails": R, "rp_filter": 3}, "rp_filter"),
    ("rail without an RDMA device", "rdma_cm_tos", {"rails": ["eno8303"]}, "eno8303"),
    ("DSCP -1", "dcb_qos", {"rails": R, "dscp_map": [{"dscp": -1, "priority": 3}]}, "dscp"),
    ("one DSCP two priorities", "dcb_qos",
     {"rails": R, "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 26, "priority": 4}]}, "26"),
    ("empty rail list", "dcb_qos", {"rails": []}, "rail"),
    ("PFC priority 8", "dcb_qos", {"rails": R, "pfc_priorities": [8]}, "8"),
    ("ETS bandwidth not 100", "dcb_qos",
     {"rails": R, "ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [10] * 8, "prio_tc": list(range(8))}}, "100"),
    ("ToS -1", "rdma_cm_tos", {"rails": R, "tos": -1}, "tos"),
    ("rails and devices together", "rdma_cm_tos", {"rails": R, "devices": ["mlx5_0"]}, "mutually exclusive"),
    ("unknown RDMA device", "rdma_cm_tos", {"devices": ["mlx5_99"]}, "mlx5_99"),
    ("arp_ignore 9", "rail_sysctl", {"rails": R, "arp_ignore": 9}, "arp_ignore"),
    ("arp_announce 3", "rail_sysctl", {"rails": R, "arp_announce": 3}, "arp_announce"),
    ("duplicate rails", "rail_sysctl", {"rails": ["ens1np0", "ens1np0"]}, "ens1np0"),
    ("reserved routing table", "rail_sysctl", {"rails": R, "routing": True, "routing_table_base": 253}, "table"),
    ("unknown ACS bit", "pcie_acs", {"clear": ["Bogus"], "persist": "none"}, "bogus"),
    ("malformed BDF", "pcie_acs", {"bridges": ["zz:00.0"], "persist": "none"}, "zz:00.0"),
    ("GPU equals NIC", "pcie_acs", {"endpoints": [{"gpu": "0000:18:00.0", "nic": "0000:18:00.0"}],
                                    "persist": "none"}, "0000:18:00.0"),
    ("empty kernel argument", "kernel_cmdline", {"present": [""]}, "empty"),
    ("iommu bad value", "kernel_cmdline", {"present": ["iommu=bogus"]}, "iommu"),
    ("key present and absent", "kernel_cmdline", {"present": ["iommu=pt"], "absent": ["iommu"]}, "iommu"),
    ("NCCL traffic class 300", "nccl_config", {"rails": R, "tc": 300}, "300"),
    ("NCCL unknown rail", "nccl_config", {"rails": ["ens99np0"]}, "ens99np0"),
]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    f = Fleet(str(tmp_path_factory.mktemp("badfleet")), {"sim1": "hgx-h200"}).create()
    try:
        yield f
    finally:
        f.destroy()


def _state(fleet):
    live = fleet.sh("sim1", "sysctl -a 2>/dev/null | grep -E 'conf\\.(all|default|ens[0-9]np0)\\.(arp_|rp_filter)'"
                    " | sort; for r in ens1np0 ens2np0; do dcb -j app show dev $r; dcb -j pfc show dev $r; done").stdout
    return fleet.hash("sim1"), live


def test_bad_inputs_fail_clearly_and_change_nothing(node, tmp_path):
    tasks = []
    for i, (name, module, args, _frag) in enumerate(BAD):
        tasks.append({"name": "row %d: %s" % (i, name), "gpufabric.node.%s" % module: args,
                      "ignore_errors": True, "register": "r%d" % i})
    play = [{"name": "bad inputs", "hosts": "sim1", "gather_facts": False, "tasks": tasks}]
    pb = tmp_path / "bad.yml"
    pb.write_text(yaml.safe_dump(play))
    before = _state(node)
    e = env()
    e.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    p = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", node.inventory, str(pb)], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600, check=False)
    data = json.loads(p.stdout)
    results = [t["hosts"]["sim1"] for t in data["plays"][0]["tasks"]]
    assert len(results) == len(BAD)
    problems = []
    for (name, _module, _args, frag), res in zip(BAD, results):
        msg = str(res.get("msg", ""))
        if not res.get("failed"):
            problems.append("%s: did not fail (%s)" % (name, res))
        elif frag not in msg.lower():
            problems.append("%s: message does not name the problem (%r): %s" % (name, frag, msg))
        elif "Traceback" in msg:
            problems.append("%s: traceback instead of a message: %s" % (name, msg))
    assert not problems, "\n".join(problems)
    assert _state(node) == before
