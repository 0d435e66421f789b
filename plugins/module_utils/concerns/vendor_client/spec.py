# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``vendor_client`` concern's spec: the vendor NFS client's proof needs a mount (not checked by the read-only
check), but the kernel hold it set is read: its status when one is recorded (``kernel_hold.hold_status``).

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import hold as kernel_hold
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

NAME = "vendor_client"
KEYS = ()


def evaluate(ctx):
    hold = kernel_hold.hold_status(ctx.sysroot, CommandRunner(ctx.runner), os_profiles.detect(ctx.sysroot)[0])
    if hold:
        return {"vendor_client": hold}
    return {"vendor_client": common.proof_not_checked("vendor_client", "vendor NFS client proof")}
