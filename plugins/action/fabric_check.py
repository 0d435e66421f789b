# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of fabric_check: the desired state resolved once on the controller, then one module execution.

The desired state is the roles' own variables: each role's ``defaults/main.yml`` (the file the role reads when it
runs) overlaid with the host's variables (inventory, group and host vars, play vars, extra vars), templated with
those variables, plus the constant tables of the roles' ``vars/main.yml`` the checks read
(``node_desired.ROLE_VARS``). Nothing is copied beside the roles. The document goes to the module as ``desired``
unless the task gives one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired

ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "roles"))


def _load(loader, path):
    """A role's variables file, its templates trusted as the role's own are (ansible-core >= 2.19 tags them)."""
    try:
        return loader.load_from_file(path, trusted_as_template=True)
    except TypeError:  # ansible-core < 2.19: no trust tags
        return loader.load_from_file(path)


def roles_of(names=None):
    """The roles of the concerns ``names`` (default the core ones), in the order of the concern list."""
    names = model.managed_names(names)
    return [r for r in model.roles() if any(n in names for n in model.of_role(r))]


def role_files(loader, roles_dir=ROLES_DIR, roles=None):
    """(defaults, constants): the roles' defaults (default: the roles of the core concerns) in the order of the
    concern list, and the constant tables of their vars files that node_desired reads."""
    defaults, constants = {}, {}
    for role in roles or roles_of():
        path = os.path.join(roles_dir, role, "defaults", "main.yml")
        data = _load(loader, path) or {}
        if not isinstance(data, dict):
            raise AnsibleActionFail("%s is not a mapping of variables" % path)
        defaults.update(data)
        wanted = node_desired.ROLE_VARS.get(role, ())
        if wanted:
            path = os.path.join(roles_dir, role, "vars", "main.yml")
            data = _load(loader, path) or {}
            for k in wanted:
                if k not in data:
                    raise AnsibleActionFail("%s lacks %s" % (path, k))
                constants[k] = data[k]
    return defaults, constants


def resolve(templar, task_vars, defaults, constants):
    """The desired document: for each role default, the host's value when it has one, else the default, templated
    with the host's variables over the defaults (the precedence a role's defaults have)."""
    env = dict(defaults)
    env.update(task_vars)
    t = templar.copy_with_new_env(available_variables=env)
    doc = {}
    for k in defaults:
        doc[k] = t.template(task_vars[k] if k in task_vars else defaults[k])
    doc.update(t.template(constants))
    return doc


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("desired", "concerns", "gds_wanted"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        gds_wanted = args.pop("gds_wanted", None)
        if args.get("desired") is None:
            try:
                roles = roles_of(self._templar.template(args.get("concerns")))
            except model.ConcernError as e:
                raise AnsibleActionFail(str(e))
            defaults, constants = role_files(self._loader, roles=roles)
            args["desired"] = resolve(self._templar, task_vars, defaults, constants)
        if gds_wanted is None:
            gds_wanted = task_vars.get("gpufabric_gds_wanted", False)
        gds_wanted = boolean(self._templar.template(gds_wanted), strict=False)
        result.update(self._execute_module(module_name="gpufabric.node.fabric_check", module_args=args,
                                           task_vars=task_vars))
        result["gds_wanted"] = gds_wanted
        return result
