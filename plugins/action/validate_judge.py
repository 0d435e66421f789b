# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of validate_judge: the nodes' documents and the directories, resolved on the controller, then one
module execution.

- ``nodes`` not given: every play host's (``ansible_play_hosts_all``) variable ``gpufabric_validation`` (the
  document, or the registered result of fabric_validate), null for a host without it;
- ``baseline_dir`` not given: ``gpufabric_baseline_dir``, else ``baselines``; ``dest`` not given:
  ``gpufabric_report_dir``, else ``reports``; ``tolerance`` not given: ``gpufabric_validate_tolerance`` when set;
- a relative directory of a task that runs on the controller is the directory ansible-playbook runs in
  (``fabric_report``'s action plugin says why), never the playbook's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.plugins.action import ActionBase

from ansible_collections.gpufabric.node.plugins.action.fabric_report import controller_dest

VAR = "gpufabric_validation"
DIRS = (("baseline_dir", "gpufabric_baseline_dir", "baselines"), ("dest", "gpufabric_report_dir", "reports"))


def play_documents(hosts, hostvars, var=VAR):
    """{host: its ``var`` or None} of the play hosts (the controller itself left out)."""
    out = {}
    for h in hosts or []:
        if h == "localhost":
            continue
        hv = hostvars[h] if h in hostvars else {}
        out[h] = hv[var] if var in hv else None
    return out


def resolve(args, task_vars, transport, cwd, template=lambda v: v):
    """The module's arguments: the defaults above filled in (the variables' values through ``template``),
    relative directories joined to ``cwd``."""
    args = dict(args)
    if args.get("nodes") is None:
        args["nodes"] = template(play_documents(task_vars.get("ansible_play_hosts_all"),
                                                task_vars.get("hostvars") or {}))
    if args.get("tolerance") is None and task_vars.get("gpufabric_validate_tolerance") is not None:
        args["tolerance"] = template(task_vars["gpufabric_validate_tolerance"])
    for opt, var, default in DIRS:
        if not args.get(opt):
            args[opt] = template(task_vars.get(var)) or default
        args[opt] = controller_dest({"dest": args[opt]}, transport, cwd)["dest"]
    return args


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = resolve(self._task.args, task_vars, getattr(self._connection, "transport", None), os.getcwd(),
                       self._templar.template)
        result.update(self._execute_module(module_name="gpufabric.node.validate_judge", module_args=args,
                                           task_vars=task_vars))
        return result
