# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``routing`` concern's spec: evaluated by the ``sysctl`` concern's run of ``rail_sysctl`` (one module run
gives both), with the same role variables.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import spec as sysctl_spec

NAME = "routing"
KEYS = sysctl_spec.KEYS
ROLE_VARS = sysctl_spec.ROLE_VARS
evaluate = sysctl_spec.evaluate
