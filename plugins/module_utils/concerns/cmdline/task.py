# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel arguments for the next boot: the body of the ``kernel_cmdline`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.manage import (
    CmdlineError,
    CommandError,
    ensure,
    validate,
)
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    present=dict(type="list", elements="str", default=[]),
    absent=dict(type="list", elements="str", default=[]),
    bootloader=dict(type="str", choices=["auto", "grub", "grubby", "systemd-boot", "uki", "none"],
                    default="auto"),
    update_bootloader=dict(type="bool", default=True),
)


def _runner(module):
    return CommandRunner(module)


def _bin_path(module):
    def which(name):
        if name == "env":
            return module.get_bin_path("env", required=True)
        return module.get_bin_path(name)
    return which


def run(module, sysroot=None):
    """Validate, detect the boot loader, plan and (unless check mode) apply the kernel arguments."""
    p = module.params
    try:
        # bad arguments fail before anything is touched, the lock included (ensure validates again)
        validate(p["present"], p["absent"], arch=os.uname()[4])
    except CmdlineError as e:
        module.fail_json(msg=str(e))
    # one writer of node state at a time (nodelock.py): from the read of the boot configuration through the update
    with nodelock.for_module(module, sysroot or Sysroot(), "kernel_cmdline"):
        try:
            result = ensure(
                present=p["present"],
                absent=p["absent"],
                run=_runner(module),
                bin_path=_bin_path(module),
                bootloader=p["bootloader"],
                update_bootloader=p["update_bootloader"],
                check_mode=module.check_mode,
                arch=os.uname()[4],
                sysroot=sysroot,
            )
        except CommandError as e:
            module.fail_json(msg=str(e), rc=e.rc, stdout=e.out, stderr=e.err, cmd=e.argv)
        except CmdlineError as e:
            module.fail_json(msg=str(e))
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    return result
