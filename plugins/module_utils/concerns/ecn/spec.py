# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``ecn`` concern's spec: the roce_qos role's DCQCN settings as ``roce_ecn`` options, and the concern's
evaluation in the one-call check (not applicable where the role does not manage ECN/DCQCN).

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import spec as dcb_spec
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import task as ecn_task

NAME = "ecn"
KEYS = ("roce_qos_rails", "roce_qos_dcqcn", "roce_qos_priority", "roce_qos_cnp_dscp", "roce_qos_cnp_priority",
        "__roce_qos_no_rails", "__roce_qos_ecn_off_reason")
ROLE_VARS = ("__roce_qos_no_rails", "__roce_qos_ecn_off_reason")
TASK = "ECN/DCQCN on the lossless priority of every rail (NP, RP, CNP DSCP and priority)"


def params(d, dcb_rails):
    """roce_ecn as the role calls it: on the DCB rails (the physical ports of a RoCE LAG), the lossless priority."""
    return {"rails": dcb_rails, "priority": common.jinja_int(d["roce_qos_priority"]),
            "cnp_dscp": d["roce_qos_cnp_dscp"], "cnp_priority": d["roce_qos_cnp_priority"]}


def options(d, facts):
    """The module options the role passes to ``roce_ecn`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, dcb_spec.roce_qos_rails(d, facts.get("pairing"))[1])


def evaluate(ctx):
    """roce_ecn on the DCB rails, when the role manages ECN/DCQCN (roce_qos_dcqcn) and there are rails."""
    d = ctx.desired
    opts = options(d, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(["ecn"], d["__roce_qos_no_rails"])
    if not common.truthy(d["roce_qos_dcqcn"]):
        return {"ecn": model.status(model.NOT_APPLICABLE, d["__roce_qos_ecn_off_reason"])}
    return common.run_body(ctx, ["ecn"], "roce_ecn", ecn_task, opts, TASK)
