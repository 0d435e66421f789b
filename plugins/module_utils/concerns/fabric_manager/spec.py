# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``fabric_manager`` concern's spec: read-only, no role variable of its own; the fabric_health role runs its
body through ``concern_check`` and the one-call check evaluates it the same way.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.fabric_manager import task

NAME = "fabric_manager"
KEYS = ()
# the body concern_check runs for this concern (a read-only concern needs no module of its own)
READ_ONLY_TASK = task
TASK = "Check Fabric Manager and the NVLink state"


def evaluate(ctx):
    facts = None if ctx.discovery_failed else ctx.discover()
    return common.run_body(ctx, [NAME], "concern_check", task, {}, TASK, facts=facts)
