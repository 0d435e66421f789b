# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``pcie_link`` concern's spec, which ``gpudirect_rdma`` shares: the fabric_health role's variables as
``fabric_health`` options, and one read-only evaluation in the one-call check that gives both concerns.

The link and mechanism readers and judges are discovery's (``discovery/pcie_link.py``, ``discovery/gpudirect.py``);
the module body is ``concerns/gpudirect_rdma/task.py``.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import task as health_task

NAME = "pcie_link"
KEYS = ("fabric_health_gpu_idle_speed", "fabric_health_slot_limited", "fabric_health_gpudirect_mechanism",
        "fabric_health_nccl_log")
GIVES = ("pcie_link", "gpudirect_rdma")
# the body concern_check runs for this concern (read-only: it changes nothing)
READ_ONLY_TASK = health_task
TASK = "Check the PCIe links on the GPU<->NIC paths and the GPUDirect RDMA mechanism"


def params(d):
    return common.omit_empty({"pcie_link": {"gpu_idle_speed": d["fabric_health_gpu_idle_speed"],
                                            "slot_limited": d["fabric_health_slot_limited"]},
                              "gpudirect_rdma": {"mechanism": d["fabric_health_gpudirect_mechanism"]}},
                             nccl_log=d["fabric_health_nccl_log"])


def evaluate(ctx):
    """fabric_health (read-only) for pcie_link and gpudirect_rdma. The module discovers the node itself (subsets
    pci, rails, gpu_driver); the play's discovery is the same code on the same node, so it is handed over when
    it succeeded and the body discovers only when it did not."""
    facts = None if ctx.discovery_failed else ctx.discover()
    return common.run_body(ctx, GIVES, "fabric_health", health_task, params(ctx.desired), TASK, facts=facts)
