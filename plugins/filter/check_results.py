# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of drift.yml: the roles to run in fix mode, and every node's data for the report (module_utils/
check_results.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.check import results as check_results


def check_fix_roles(result):
    """The roles to run on a node in fix mode, from its fabric_check result."""
    return check_results.fix_roles(result)


def check_nodes(hosts, hostvars, check_var="__gpufabric_check", roles_var="__gpufabric_node_result"):
    """{host: node data} for fabric_report from the hosts' fabric_check results and, where the roles ran, theirs."""
    out = {}
    for h in hosts:
        hv = hostvars[h] if h in hostvars else {}
        out[h] = check_results.node_data(hv.get(check_var), hv.get(roles_var))
    return out


class FilterModule(object):
    def filters(self):
        return {"check_fix_roles": check_fix_roles, "check_nodes": check_nodes}
