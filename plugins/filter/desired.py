# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: settings of the roles that contradict each other (call once at the start of a play)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired


def desired_conflicts(variables):
    """Messages (list of str) for the role variables that cannot be read or contradict each other; [] when none."""
    try:
        return desired.conflicts(desired.from_role_vars(variables))
    except (TypeError, KeyError) as e:
        raise AnsibleFilterError("desired_conflicts: %s" % (e.args[0] if e.args else e))


class FilterModule(object):
    def filters(self):
        return {"desired_conflicts": desired_conflicts}
