# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of fleet_report: a relative ``dest`` of a task that runs on the controller is the directory
ansible-playbook runs in (``fabric_report``'s action plugin says why)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpufabric.node.plugins.action.fabric_report import run_report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        return run_report(self, "gpufabric.node.fleet_report", tmp, task_vars)
