# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: concern_vars
version_added: 0.4.0
author: gpufabric developers (@gpufabric)
short_description: The role variables a part of the concern check reads, from the concerns' specs
description:
  - Returns the names of the role variables that a part of the check reads, as the concerns' specs
    (C(plugins/module_utils/concerns/<name>/spec.py)) declare them, so a play reads them by name instead of
    listing them.
  - C(conflicts) - the variables the contradiction check reads before any role runs (the specs' C(CONFLICT_KEYS));
    hand their values to the P(gpufabric.node.role_conflicts#filter) filter.
options:
  _terms:
    description: Which list; C(conflicts).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Settings of the roles that contradict each other
  ansible.builtin.set_fact:
    conflicts: "{{ dict(keys | zip(query('ansible.builtin.vars', *keys))) | gpufabric.node.role_conflicts }}"
  vars:
    keys: "{{ query('gpufabric.node.concern_vars', 'conflicts') }}"
"""

RETURN = r"""
_raw:
  description: The role variable names, in the registry's order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired

LISTS = {"conflicts": node_desired.CONFLICT_KEYS}


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        out = []
        for term in terms:
            if term not in LISTS:
                raise AnsibleLookupError("concern_vars: unknown list %r (one of %s)" % (term, ", ".join(sorted(LISTS))))
            out.extend(k for k in LISTS[term] if k not in out)
        return out
