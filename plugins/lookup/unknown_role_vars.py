# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: unknown_role_vars
version_added: 0.5.0
author: gpufabric developers (@gpufabric)
short_description: The variables with a role's prefix that the role does not know (a misspelled role variable)
description:
  - For a role of this collection, finds every variable visible to the host whose name starts with the role's name
    and C(_) (C(roce_qos_) for C(roce_qos)) but is neither one of the role's options (its C(meta/argument_specs.yml),
    every entry point) nor one of its outputs (a name with the prefix that the role's own tasks set with
    C(set_fact) or C(register), such as C(roce_qos_drift)). A misspelled variable, such as C(roce_qos_pfc_priority)
    for C(roce_qos_pfc_priorities), is otherwise silently ignored and the role runs with its default.
  - Each such name gets a warning that names it and, where one is close, the option that was likely meant.
    With O(strict) the lookup fails instead, naming all of them.
  - Not reported - the role's internal variables (C(__roce_qos_*), from C(vars/main.yml) or registered), variables of
    another role of this collection whose name is longer and starts with the same prefix, and C(gpufabric_*).
  - Every role of this collection runs it as its first task, with O(strict) from C(gpufabric_strict_vars).
options:
  _terms:
    description: The role's name (a role of this collection, without the collection prefix).
    required: true
    type: list
    elements: str
  strict:
    description: Fail naming every unknown variable instead of warning.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Check the roce_qos variables against the role's argument spec (gpufabric_strict_vars - fail)
  ansible.builtin.debug:
    msg: "{{ lookup('gpufabric.node.unknown_role_vars', 'roce_qos', strict=gpufabric_strict_vars | default(false)) }}"
    verbosity: 1
"""

RETURN = r"""
_raw:
  description: One message per unknown variable, sorted by name (empty when every variable is known).
  type: list
  elements: str
"""

import difflib
import os
import re

import yaml
from ansible.errors import AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - PyYAML without libyaml
    from yaml import SafeLoader as _Loader

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]*")
SET_FACT = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
# task keywords that hold more tasks
NESTED = ("block", "rescue", "always")
# how close a known option must be to be offered as the likely intended name (difflib's ratio)
CUTOFF = 0.75


def _load(path):
    with open(path) as f:
        return yaml.load(f, Loader=_Loader)  # nosec B506 - a safe loader (CSafeLoader or SafeLoader)


def role_options(roles, role):
    """The options of every entry point of the role's meta/argument_specs.yml."""
    spec = _load(os.path.join(roles, role, "meta", "argument_specs.yml")) or {}
    out = set()
    for entry in (spec.get("argument_specs") or {}).values():
        out.update((entry or {}).get("options") or {})
    return out


def _task_outputs(tasks, prefix, out):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if isinstance(task.get("register"), str) and task["register"].startswith(prefix):
            out.add(task["register"])
        for key in SET_FACT:
            if isinstance(task.get(key), dict):
                out.update(k for k in task[key] if k.startswith(prefix))
        for key in NESTED:
            _task_outputs(task.get(key), prefix, out)


def role_outputs(roles, role):
    """The names with the role's prefix that its own tasks set (set_fact) or register: what the role exports."""
    out = set()
    tasks = os.path.join(roles, role, "tasks")
    for name in sorted(os.listdir(tasks)):
        if name.endswith((".yml", ".yaml")):
            _task_outputs(_load(os.path.join(tasks, name)), role + "_", out)
    return out


def known_roles(roles):
    return sorted(r for r in os.listdir(roles) if os.path.isfile(os.path.join(roles, r, "meta", "argument_specs.yml")))


def unknown_vars(role, names, options, outputs, other_roles=()):
    """Messages for the names with the role's prefix that are neither options nor outputs, sorted by name.

    ``other_roles``: roles whose own prefix is longer and starts with this role's (their variables are theirs)."""
    prefix = role + "_"
    others = tuple(r + "_" for r in other_roles if r != role and r.startswith(prefix))
    messages = []
    for name in sorted({n for n in names if isinstance(n, str)}):
        if not name.startswith(prefix) or name in options or name in outputs:
            continue
        if others and name.startswith(others):
            continue
        msg = "%s is not a variable of the role gpufabric.node.%s (not an option in its meta/argument_specs.yml)" % (
            name, role)
        # compared without the prefix that every option shares, which would make any two names look alike
        suffixes = sorted(o[len(prefix):] for o in options if o.startswith(prefix))
        close = difflib.get_close_matches(name[len(prefix):], suffixes, n=1, cutoff=CUTOFF)
        messages.append(msg + ("; did you mean %s%s?" % (prefix, close[0]) if close else "."))
    return messages


def check(role, names, roles=ROLES):
    """The messages for ``names`` (the variable names visible to the host) and role ``role`` of the collection."""
    if not isinstance(role, str) or not ROLE_NAME.fullmatch(role):
        raise ValueError("unknown_role_vars: %r is not a role name" % (role,))
    available = known_roles(roles)
    if role not in available:
        raise ValueError("unknown_role_vars: no role %s in gpufabric.node (one of %s)" % (role, ", ".join(available)))
    return unknown_vars(role, names, role_options(roles, role), role_outputs(roles, role), available)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        unknown = sorted(set(kwargs) - {"strict"})
        if unknown:
            raise AnsibleLookupError("unknown_role_vars: unknown option %s (one of: strict)" % ", ".join(unknown))
        try:
            strict = boolean(kwargs.get("strict", False), strict=True)
        except TypeError as e:
            raise AnsibleLookupError("unknown_role_vars: strict must be a boolean: %s" % e)
        names = list(variables or {})
        messages = []
        for role in terms:
            try:
                messages.extend(check(role, names))
            except (ValueError, OSError, yaml.YAMLError) as e:
                raise AnsibleLookupError(str(e))
        if strict and messages:
            raise AnsibleLookupError("Unknown role variables (gpufabric_strict_vars is true): " + " ".join(messages))
        for msg in messages:
            self._display.warning(msg)
        return messages
