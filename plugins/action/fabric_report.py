# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of fabric_report (and, importing ``run_report``, of fleet_report): a relative ``dest`` of a task
that runs on the controller is the directory ansible-playbook runs in.

Ansible starts a module on the local connection in the playbook's directory, so ``dest: reports`` would land next
to the playbook, inside the installed collection when the playbook runs by its name (``gpufabric.node.drift``). On
the controller the plugin joins a relative ``dest`` to the controller's current directory; on any other connection
the module takes it from its own. Then one module execution, as without the plugin."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.plugins.action import ActionBase


def controller_dest(args, transport, cwd):
    """``args`` with a relative ``dest`` joined to ``cwd`` when the module runs on the controller (``transport``
    local); unchanged otherwise."""
    dest = args.get("dest")
    if transport != "local" or not isinstance(dest, str) or not dest:
        return args
    dest = os.path.expanduser(dest)
    if os.path.isabs(dest):
        return args
    return dict(args, dest=os.path.normpath(os.path.join(cwd, dest)))


def run_report(action, module_name, tmp, task_vars):
    task_vars = task_vars or {}
    result = super(type(action), action).run(tmp, task_vars)
    args = controller_dest(dict(action._task.args), getattr(action._connection, "transport", None), os.getcwd())
    result.update(action._execute_module(module_name=module_name, module_args=args, task_vars=task_vars))
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        return run_report(self, "gpufabric.node.fabric_report", tmp, task_vars)
