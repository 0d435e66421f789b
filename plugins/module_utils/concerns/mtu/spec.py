# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``mtu`` concern's spec: the rail_network role's MTU variables as ``rail_mtu`` options, and the concern's
evaluation in the one-call check.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import task as mtu_task

NAME = "mtu"
KEYS = ("rail_network_rails", "rail_network_mtu", "rail_network_mtu_persist", "__rail_network_no_rails")
ROLE_VARS = ("__rail_network_no_rails",)
TASK = "MTU of the rails, live and where their owner keeps it"


def params(d, rails_):
    return {"rails": rails_, "mtu": d["rail_network_mtu"], "persist": d["rail_network_mtu_persist"]}


def options(d, facts):
    """The module options the role passes to ``rail_mtu`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, common.rails(d["rail_network_rails"], facts.get("pairing")))


def evaluate(ctx):
    opts = options(ctx.desired, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(["mtu"], ctx.desired["__rail_network_no_rails"])
    return common.run_body(ctx, ["mtu"], "rail_mtu", mtu_task, opts, TASK)
