# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""drift.yml's bookkeeping between the one-call check, the fix by the roles and the report (controller side).

``fix_roles(result)``: the roles to run on a node in fix mode (those of its concerns in drift or error).
``node_data(check, roles)``: the node's data for the reports (``concerns.assess``) from its fabric_check result and,
when the roles ran on it, their result (``__gpufabric_node_result``): the concerns the roles checked or fixed
replace the check's, the others keep the check's status.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model

NODE_KEYS = ("concerns", "errors", "reboot_required", "facts", "warnings", "gds_wanted")
FIXABLE = (model.DRIFT, model.ERROR)


def _mapping(value):
    return value if isinstance(value, dict) else {}


def fix_roles(result):
    """Roles (in the order of the concern list) whose concerns the check found in drift or error; every role when
    the check itself failed (it said nothing about any concern); none for a node that was not reached."""
    result = _mapping(result)
    if result.get("unreachable") or result.get("skipped"):
        return []
    found = _mapping(result.get("concerns"))
    if not found:
        return model.roles() if result.get("failed") else []
    out = []
    for role in model.roles():
        if any(_mapping(found.get(n)).get("status") in FIXABLE for n in model.of_role(role)):
            out.append(role)
    return out


def node_data(check=None, roles=None):
    """The node's data for the reports; ``{"unreachable": True}`` when neither the check nor the roles reached it."""
    check = _mapping(check)
    roles = _mapping(roles) if roles else None
    if roles is None:
        if not check or check.get("unreachable"):
            return {"unreachable": True}
        if check.get("failed") and not check.get("concerns"):
            return {"errors": ["fabric_check: %s" % model.one_line(check.get("msg") or "failed")]}
        return dict((k, check[k]) for k in NODE_KEYS if k in check)
    out = dict((k, roles[k]) for k in NODE_KEYS if k in roles)
    if check.get("concerns"):
        merged = dict(_mapping(check.get("concerns")))
        merged.update(_mapping(roles.get("concerns")))
        out["concerns"] = merged
        out["reboot_required"] = bool(roles.get("reboot_required")) or bool(check.get("reboot_required"))
    return out
