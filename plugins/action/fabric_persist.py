# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of fabric_persist: with ``evidence: true`` and no ``evidence_desired``, the desired state the
evidence timer evaluates on the node, resolved on the controller as fabric_check resolves it (the core roles'
``defaults/main.yml`` overlaid with the host's variables, plus their vars tables) and cut to the keys the check
reads (``node_desired.evidence_desired``). Then one module execution, as without the plugin."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufabric.node.plugins.action.fabric_check import resolve, role_files
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired


# module option -> the persistence role variable it comes from (concerns/persistence/spec.py params, inverted)
OPTION_VARS = dict((k, "persistence_" + k) for k in (
    "state", "python", "lib_dir", "script", "unit_dir", "boot_wait", "device_wait", "before_units", "enabled",
    "evidence", "evidence_interval", "evidence_textfile_dir", "evidence_filename", "evidence_script"))
OPTION_VARS["rules_file"] = "persistence_udev_rules_file"


def describe_task(doc, args):
    """The desired document with the persistence variables set to this task's options: what the node holds is what
    this task installs (a task that passes an option directly, not through the role's variable, included), so the
    node's own check of the persistence concern compares the installation with itself."""
    doc = dict(doc)
    for opt, var in OPTION_VARS.items():
        if opt in args and var in doc:
            doc[var] = args[opt]
    return doc


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        evidence = boolean(self._templar.template(args.get("evidence", False)), strict=False)
        present = self._templar.template(args.get("state", "present")) == "present"
        if evidence and present and args.get("evidence_desired") is None:
            defaults, constants = role_files(self._loader)
            try:
                args["evidence_desired"] = node_desired.evidence_desired(
                    describe_task(resolve(self._templar, task_vars, defaults, constants), args))
            except node_desired.DesiredError as e:
                raise AnsibleActionFail("evidence_desired: %s" % e)
        result.update(self._execute_module(module_name="gpufabric.node.fabric_persist", module_args=args,
                                           task_vars=task_vars))
        return result
