# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sysctl`` concern's spec, which ``routing`` shares: the rail_network role's sysctl and routing variables as
``rail_sysctl`` options, and one evaluation in the one-call check that gives both concerns (one module run).

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import task as rail_task

NAME = "sysctl"
KEYS = ("rail_network_rails", "rail_network_arp_ignore", "rail_network_arp_announce", "rail_network_rp_filter",
        "rail_network_routing", "rail_network_routing_table_base", "rail_network_routing_rule_priority",
        "rail_network_routing_gateways", "__rail_network_no_rails")
ROLE_VARS = ("__rail_network_no_rails",)
# the concerns one rail_sysctl run gives
GIVES = ("sysctl", "routing")
TASK = "ARP and rp_filter sysctls (and policy routing) for the rails"


def params(d, rails_):
    p = {"rails": rails_}
    for k in ("arp_ignore", "arp_announce", "rp_filter", "routing", "routing_table_base", "routing_rule_priority",
              "routing_gateways"):
        p[k] = d["rail_network_" + k]
    return p


def options(d, facts):
    """The module options the role passes to ``rail_sysctl`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, common.rails(d["rail_network_rails"], facts.get("pairing")))


def evaluate(ctx):
    opts = options(ctx.desired, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(GIVES, ctx.desired["__rail_network_no_rails"])
    return common.run_body(ctx, GIVES, "rail_sysctl", rail_task, opts, TASK)
