# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``dcb`` concern's spec: the roce_qos role's rails and DSCP map as ``dcb_qos`` options, the role's
contradiction keys for the lossless class, and the concern's evaluation in the one-call check.

The rails (``roce_qos_rails``) and the DSCP map (``dscp_map``) are the role's: rdma_cm and ecn read them from here.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import task as dcb_task

NAME = "dcb"
KEYS = ("roce_qos_rails", "roce_qos_dscp", "roce_qos_priority", "roce_qos_dscp_map", "roce_qos_pfc_priorities",
        "roce_qos_trust", "roce_qos_dcbx", "roce_qos_ets", "roce_qos_ecn", "roce_qos_tos", "__roce_qos_no_rails")
ROLE_VARS = ("__roce_qos_no_rails",)
# the settings of the lossless class checked for contradictions before any role runs (contradictions.py)
CONFLICT_KEYS = ("roce_qos_trust", "roce_qos_dscp_map", "roce_qos_pfc_priorities", "roce_qos_dscp",
                 "roce_qos_priority")
TASK = "DCB on every rail (trust, DSCP to priority, PFC)"


def roce_qos_rails(desired, pairing):
    """(the rails' netdevs, the ports DCB goes on): the role's rails when given, else the netdevs paired with GPUs,
    and DCB on the physical ports of a RoCE LAG rail."""
    given = desired["roce_qos_rails"]
    netdevs = common.rails(given, pairing)
    if given:
        return netdevs, list(given)
    phys = []
    for p in pairing or []:
        phys.extend(p.get("phys_netdevs") or [])
    return netdevs, common.unique(phys) or netdevs


def dscp_map(d):
    """The DSCP map the role applies: the map when set, else the lossless entry in DSCP trust (none in PCP)."""
    if d["roce_qos_dscp_map"] is not None:
        return d["roce_qos_dscp_map"]
    if d["roce_qos_trust"] == "dscp":
        return [{"dscp": common.jinja_int(d["roce_qos_dscp"]), "priority": common.jinja_int(d["roce_qos_priority"])}]
    return []


def conflict_vars(d):
    """The DSCP map the contradiction check sees: the map when set, else the lossless entry in DSCP trust (the
    values as given, not yet through ``int``)."""
    dmap = d["roce_qos_dscp_map"]
    if dmap is None:
        dmap = ([{"dscp": d["roce_qos_dscp"], "priority": d["roce_qos_priority"]}]
                if d["roce_qos_trust"] == "dscp" else [])
    return {"roce_qos_dscp_map": dmap}


def params(d, dcb_rails):
    return common.omit_empty({"rails": dcb_rails, "dscp_map": dscp_map(d),
                              "pfc_priorities": d["roce_qos_pfc_priorities"], "trust": d["roce_qos_trust"],
                              "dcbx": d["roce_qos_dcbx"]}, ets=d["roce_qos_ets"])


def options(d, facts):
    """The module options the role passes to ``dcb_qos`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, roce_qos_rails(d, facts.get("pairing"))[1])


def evaluate(ctx):
    opts = options(ctx.desired, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(["dcb"], ctx.desired["__roce_qos_no_rails"])
    return common.run_body(ctx, ["dcb"], "dcb_qos", dcb_task, opts, TASK)
