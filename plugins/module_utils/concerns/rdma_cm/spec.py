# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``rdma_cm`` concern's spec: the roce_qos role's ToS as ``rdma_cm_tos`` options, its contradiction keys, and
the concern's evaluation in the one-call check.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import spec as dcb_spec
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import task as rdma_cm_task

NAME = "rdma_cm"
KEYS = ("roce_qos_rails", "roce_qos_dscp", "roce_qos_priority", "roce_qos_dscp_map", "roce_qos_pfc_priorities",
        "roce_qos_trust", "roce_qos_ecn", "roce_qos_tos", "__roce_qos_no_rails")
ROLE_VARS = ("__roce_qos_no_rails",)
CONFLICT_KEYS = ("roce_qos_ecn", "roce_qos_tos")
TASK = "Default rdma_cm ToS on every RDMA device of the rails"


def params(d, rails_):
    return {"rails": rails_, "tos": common.jinja_int(d["roce_qos_tos"]),
            "expected_dscp": common.jinja_int(d["roce_qos_dscp"])}


def options(d, facts):
    """The module options the role passes to ``rdma_cm_tos`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, dcb_spec.roce_qos_rails(d, facts.get("pairing"))[0])


def evaluate(ctx):
    opts = options(ctx.desired, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(["rdma_cm"], ctx.desired["__roce_qos_no_rails"])
    return common.run_body(ctx, ["rdma_cm"], "rdma_cm_tos", rdma_cm_task, opts, TASK,
                           mutually_exclusive=rdma_cm_task.MUTUALLY_EXCLUSIVE,
                           required_one_of=rdma_cm_task.REQUIRED_ONE_OF)
