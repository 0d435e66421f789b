# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``gpudirect_rdma`` concern's check: the mechanism facts (``discovery/gpudirect.py``) judged against the
desired mechanism, discovering the node first when no gpufabric facts are given. Plain Python, a pure read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import gpudirect, topology


def check(sysroot, desired=None, facts_=None):
    """The gpudirect_rdma concern of the node (discovery unless gpufabric facts are given). Pure read."""
    desired = gpudirect.normalize_desired(desired)
    node = facts_
    if node is None or "gpu_driver" not in node or "rails" not in node:
        node = topology.discover(sysroot, ["pci", "rails", "gpu_driver"])
    mech = node.get("gpudirect_rdma") or gpudirect.facts(sysroot, node)
    return gpudirect.status_of(mech, node, desired)
