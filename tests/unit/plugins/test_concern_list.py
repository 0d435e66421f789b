# -*- coding: utf-8 -*-
"""The one list of concerns (module_utils/concern_model.py) and the playbooks' tasks/concerns.yml stay in step."""
from __future__ import absolute_import, division, print_function

import os
import re

import pytest
import yaml

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns

__metaclass__ = type

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TASKS = os.path.join(REPO, "playbooks", "tasks", "concerns.yml")


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _imported_roles(tasks):
    out = []
    for t in tasks:
        for inner in t.get("block") or []:
            if "ansible.builtin.import_role" in inner:
                out.append(inner["ansible.builtin.import_role"]["name"].split(".")[-1])
        if "ansible.builtin.import_role" in t:
            out.append(t["ansible.builtin.import_role"]["name"].split(".")[-1])
    return out


def test_tasks_file_imports_the_core_roles_in_list_order():
    core_roles = []
    for c in concerns.CONCERNS:
        if c["core"] and c["role"] not in core_roles:
            core_roles.append(c["role"])
    assert _imported_roles(_load(TASKS)) == core_roles


def test_every_role_import_is_isolated_and_backed_by_a_rescue():
    for t in _load(TASKS):
        roles = _imported_roles([t])
        if not roles:
            continue
        (role,) = roles
        inner = t["block"][0]
        want = {"%s_continue_on_error" % role: True}
        if os.path.exists(os.path.join(REPO, "roles", role, "tasks", "after_reboot.yml")):
            # a role that can reboot leaves it to the play's one reboot (checked below)
            want["%s_reboot_defer" % role] = True
        assert inner["vars"] == want, role
        rescue = " ".join(str(r.get("ansible.builtin.set_fact")) for r in t["rescue"])
        assert "concern_failed('%s'" % role in rescue, role


def test_roles_that_defer_their_reboot_get_one_reboot_then_their_checks():
    """Every role the tasks file imports with <role>_reboot_defer declares it (defaults, argument spec), has the
    after_reboot.yml the play includes, and does not reboot in its handler while deferring; the play reboots only
    after the last of them and before any other role."""
    tasks = _load(TASKS)
    deferring = [r for t in tasks for r in _imported_roles([t]) if "%s_reboot_defer" % r in t["block"][0]["vars"]]
    assert deferring, "no role defers its reboot"
    for role in deferring:
        defaults = _load(os.path.join(REPO, "roles", role, "defaults", "main.yml"))
        assert defaults["%s_reboot_defer" % role] is False, role
        spec = _load(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"))
        assert spec["argument_specs"]["main"]["options"]["%s_reboot_defer" % role]["default"] is False, role
        handlers = open(os.path.join(REPO, "roles", role, "handlers", "main.yml")).read()
        assert "not __%s_reboot_deferred" % role in handlers, role
        main = open(os.path.join(REPO, "roles", role, "tasks", "main.yml")).read()
        assert "'role': '%s'" % role in main and "gpufabric_reboot_requests" in main, role
    names = [t.get("name") for t in tasks]
    hub = [i for i, t in enumerate(tasks) if "ansible.builtin.reboot" in str(t.get("block"))]
    assert len(hub) == 1, names
    last_deferring = max(i for i, t in enumerate(tasks) if set(_imported_roles([t])) & set(deferring))
    first_other = min(i for i, t in enumerate(tasks) if _imported_roles([t]) and not set(_imported_roles([t])) & set(deferring))
    assert last_deferring < hub[0] < first_other, names
    include = [b for b in tasks[hub[0]]["block"] if "ansible.builtin.include_role" in b][0]
    assert include["ansible.builtin.include_role"]["tasks_from"] == "after_reboot.yml"


@pytest.mark.parametrize("play", ["provision.yml", "drift.yml", "report.yml"])
def test_playbooks_run_the_list_and_import_no_concern_role_themselves(play):
    text = open(os.path.join(REPO, "playbooks", play)).read()
    assert "import_tasks: tasks/concerns.yml" in text
    for role in concerns.roles():
        assert not re.search(r"name: gpufabric\.node\.%s\b" % role, text), (play, role)


@pytest.mark.parametrize("role", sorted(set(c["role"] for c in concerns.CONCERNS if c["core"])))
def test_each_core_role_records_every_one_of_its_concerns(role):
    text = open(os.path.join(REPO, "roles", role, "tasks", "main.yml")).read()
    assert "gpufabric_concerns" in text
    assert "%s_continue_on_error" % role in text
    defaults = _load(os.path.join(REPO, "roles", role, "defaults", "main.yml"))
    assert defaults["%s_continue_on_error" % role] is False
    spec = _load(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"))
    assert "%s_continue_on_error" % role in spec["argument_specs"]["main"]["options"]
    for name in concerns.of_role(role):
        # the rescue records the concern's error by name
        assert "concern_error('%s'" % name in text, (role, name)


def test_roles_of_the_list_exist():
    for role in concerns.roles():
        assert os.path.isdir(os.path.join(REPO, "roles", role)), role
