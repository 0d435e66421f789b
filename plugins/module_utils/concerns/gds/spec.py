# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``gds`` concern's spec: a proof that moves data (a counted GDS transfer, ``gds_verify``), which a read-only
check cannot make: the one-call check says so and names the role that proves it.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common

NAME = "gds"
KEYS = ()


def evaluate(ctx):
    return {"gds": common.proof_not_checked("gds", "GPUDirect Storage transfer")}
