# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``gpudirect_rdma`` concern's spec: evaluated by the ``pcie_link`` concern's run of ``fabric_health`` (one
read-only module run gives both), with the same role variables.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.pcie_link import spec as pcie_link_spec

NAME = "gpudirect_rdma"
KEYS = pcie_link_spec.KEYS
evaluate = pcie_link_spec.evaluate
READ_ONLY_TASK = pcie_link_spec.READ_ONLY_TASK
