# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the roles' settings that contradict each other, from the role variables as the play has them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.module_utils import contradictions
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired


def role_conflicts(variables):
    """Messages (list of str) for the role variables that cannot be read or contradict each other; [] when none.
    ``variables``: the role variables of ``node_desired.CONFLICT_KEYS`` as given (a null DSCP map included); each
    concern's spec derives what the roles derive (the lossless entry under DSCP trust) before the check."""
    if not isinstance(variables, dict):
        raise AnsibleFilterError("role_conflicts: expected a mapping of role variables, got %s"
                                 % type(variables).__name__)
    missing = [k for k in node_desired.CONFLICT_KEYS if k not in variables]
    unknown = sorted(k for k in variables if k not in node_desired.CONFLICT_KEYS)
    if missing or unknown:
        raise AnsibleFilterError("role_conflicts: %s" % "; ".join(
            (["missing %s" % ", ".join(missing)] if missing else []) +
            (["unknown %s" % ", ".join(unknown)] if unknown else [])))
    try:
        return contradictions.conflicts(contradictions.from_role_vars(node_desired.conflict_vars(variables)))
    except (TypeError, KeyError) as e:
        raise AnsibleFilterError("role_conflicts: %s" % (e.args[0] if e.args else e))


class FilterModule(object):
    def filters(self):
        return {"role_conflicts": role_conflicts}
