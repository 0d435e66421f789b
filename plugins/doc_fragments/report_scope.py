# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # the report modules' scope option (fabric_report, fleet_report): what the play targeted, for the coverage
    DOCUMENTATION = r"""
options:
  scope:
    description:
      - What the play targeted, for the report's C(coverage) (hosts covered out of the inventory hosts of the
        pattern, whether a C(--limit) applied, the hosts left out). Left out, the coverage names only the hosts in
        the report.
    type: dict
    version_added: 0.2.0
    suboptions:
      pattern:
        description: The play's host pattern (for example C(all)).
        type: str
      inventory_hosts:
        description: The inventory hosts the pattern names without C(--limit).
        type: list
        elements: str
      limit:
        description: The C(--limit) of the run (C(ansible_limit)), if any.
        type: str
"""
