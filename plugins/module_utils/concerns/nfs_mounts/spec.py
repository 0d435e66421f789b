# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``nfs_mounts`` concern's spec: the storage_mounts role's variables as ``nfs_mounts`` options, and the
concern's evaluation in the one-call check.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import task as nfs_mounts_task

NAME = "nfs_mounts"
KEYS = ("storage_mounts_volumes", "storage_mounts_vendor_client", "storage_mounts_unit_dir",
        "storage_mounts_after_units", "storage_mounts_before_units")
TASK = "Mount the storage volumes over RDMA"


def params(d):
    keys = ("volumes", "vendor_client", "unit_dir", "after_units", "before_units")
    return dict((k, d["storage_mounts_" + k]) for k in keys)


def evaluate(ctx):
    return common.run_body(ctx, ["nfs_mounts"], "nfs_mounts", nfs_mounts_task, params(ctx.desired), TASK)
