# -*- coding: utf-8 -*-
"""gpufabric.node.unknown_role_vars: a role variable that the role does not know (a misspelled one) is reported, and
nothing the role itself defines, exports or keeps internal is."""
from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.gpufabric.node.plugins.lookup import unknown_role_vars as urv

__metaclass__ = type

ROLES = urv.ROLES
ALL = urv.known_roles(ROLES)
REPO = os.path.dirname(ROLES)


def _yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("role,names,reported", [
    # the case: the real option is roce_qos_pfc_priorities
    ("roce_qos", ["roce_qos_pfc_priority"], {"roce_qos_pfc_priority": "roce_qos_pfc_priorities"}),
    ("roce_qos", ["roce_qos_dscpp", "roce_qos_bogus"], {"roce_qos_dscpp": "roce_qos_dscp", "roce_qos_bogus": None}),
    ("nccl", ["nccl_ib_tcc", "nccl_ib_tc"], {"nccl_ib_tcc": "nccl_ib_tc"}),
    # options, the role's own outputs (set_fact, register), internal and registered __ names: none reported
    ("roce_qos", ["roce_qos_pfc_priorities", "roce_qos_drift", "__roce_qos_dcb", "__roce_qos_rails"], {}),
    ("vendor_nfs_client", ["vendor_nfs_client_build", "vendor_nfs_client_installed",
                           "vendor_nfs_client_kernel_hold_result", "vendor_nfs_client_src"], {}),
    ("iommu", ["iommu_reboot_required", "iommu_drift", "iommu_mode"], {}),
    # other roles' variables, collection-wide ones and Ansible's own
    ("roce_qos", ["nccl_ib_tc", "gpufabric_strict_vars", "gpufabric_concerns", "role_name", "hostvars"], {}),
    ("gds", ["gds_verify_pathh"], {"gds_verify_pathh": "gds_verify_path"}),
])
def test_reported_with_the_likely_intended_option(role, names, reported):
    got = urv.check(role, names)
    assert len(got) == len(reported), got
    for msg, (name, meant) in zip(got, sorted(reported.items())):
        assert msg.startswith(name + " is not a variable of the role gpufabric.node.%s " % role), msg
        assert msg.endswith("did you mean %s?" % meant if meant else "."), msg


@pytest.mark.parametrize("names,others,reported", [
    (["gds_x_size"], ["gds", "gds_x"], []),                         # a longer role's prefix: its variable
    (["gds_x_size"], ["gds"], ["gds_x_size"]),
    (["gds_size", "gds_size", 3], ["gds"], ["gds_size"]),          # once per name; non-string keys ignored
])
def test_names_of_a_role_with_a_longer_prefix_are_that_roles(names, others, reported):
    got = urv.unknown_vars("gds", names, {"gds_mode"}, set(), others)
    assert [m.split(" ", 1)[0] for m in got] == reported


def test_outputs_are_read_from_every_task_file_and_nested_block(tmp_path):
    tasks = tmp_path / "r" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(yaml.safe_dump([
        {"name": "a", "ansible.builtin.set_fact": {"r_out": 1, "__r_internal": 2, "other_x": 3, "cacheable": False}},
        {"name": "b", "block": [{"name": "c", "ansible.builtin.command": "true", "register": "r_reg"}],
         "rescue": [{"name": "d", "set_fact": {"r_rescued": 1}}],
         "always": [{"name": "e", "ansible.builtin.debug": {"msg": "x"}, "register": "__r_dbg"}]},
    ]))
    (tasks / "more.yaml").write_text(yaml.safe_dump([{"name": "f", "ansible.builtin.set_fact": {"r_more": 1}}]))
    (tasks / "notes.txt").write_text("r_not_tasks")
    assert urv.role_outputs(str(tmp_path), "r") == {"r_out", "r_reg", "r_rescued", "r_more"}


@pytest.mark.parametrize("role", ALL)
def test_a_role_run_with_its_defaults_and_its_outputs_reports_nothing(role):
    defaults = _yaml(os.path.join(ROLES, role, "defaults", "main.yml")) or {}
    options = urv.role_options(ROLES, role)
    assert "gpufabric_strict_vars" in options
    assert urv.check(role, list(defaults) + sorted(options) + sorted(urv.role_outputs(ROLES, role))) == []


def _set_vars(node, out):
    """Variable names that a playbook or role sets: play/task/include vars, role params, set_fact."""
    if isinstance(node, list):
        for item in node:
            _set_vars(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "vars" and isinstance(value, dict) or key in urv.SET_FACT and isinstance(value, dict):
                out.update(k for k in value if isinstance(k, str))
            if key == "roles" and isinstance(value, list):
                out.update(k for r in value if isinstance(r, dict) for k in r)
            _set_vars(value, out)


def test_every_role_variable_the_playbooks_and_roles_set_is_known():
    names = set()
    for top in ("playbooks", "roles", "molecule"):
        for dirpath, _dirs, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith((".yml", ".yaml")):
                    _set_vars(_yaml(os.path.join(dirpath, f)), names)
    assert {"vendor_nfs_client_install", "roce_qos_drift"} <= names       # the walk reaches both kinds
    assert [m for role in ALL for m in urv.check(role, names)] == []


@pytest.mark.parametrize("role", ALL)
def test_each_role_checks_first_with_its_name_and_strict_switch(role):
    first = _yaml(os.path.join(ROLES, role, "tasks", "main.yml"))[0]
    msg = first["ansible.builtin.debug"]["msg"]
    assert first["ansible.builtin.debug"]["verbosity"] == 1
    assert "lookup('gpufabric.node.unknown_role_vars', '%s'," % role in " ".join(msg.split())
    assert "strict=gpufabric_strict_vars | default(false)" in msg
    with open(os.path.join(ROLES, role, "README.md")) as f:
        assert "gpufabric_strict_vars" in f.read()


class Display:
    def __init__(self):
        self.warnings = []

    def warning(self, msg):
        self.warnings.append(msg)


@pytest.mark.parametrize("strict", [False, True])
def test_the_lookup_warns_or_fails_naming_every_unknown_variable(strict):
    lookup = urv.LookupModule()
    lookup._display = Display()
    variables = {"roce_qos_pfc_priority": [3], "roce_qos_ecnn": True, "roce_qos_dscp": 26, "__roce_qos_dcb": {}}
    if strict:
        with pytest.raises(AnsibleLookupError, match=r"gpufabric_strict_vars.*roce_qos_ecnn .*roce_qos_pfc_priority "):
            lookup.run(["roce_qos"], variables=variables, strict=True)
        assert lookup._display.warnings == []
    else:
        got = lookup.run(["roce_qos"], variables=variables)
        assert got == lookup._display.warnings and [m.split(" ", 1)[0] for m in got] == [
            "roce_qos_ecnn", "roce_qos_pfc_priority"]
    assert urv.LookupModule().run(["roce_qos"], variables={"roce_qos_dscp": 26}, strict=True) == []


@pytest.mark.parametrize("role,kwargs,message", [
    ("no_such_role", {}, "no role no_such_role in gpufabric.node"),
    ("../roles", {}, "is not a role name"),
    ("", {}, "is not a role name"),
    ("roce_qos", {"strict": "maybe"}, "strict must be a boolean"),
    ("roce_qos", {"strcit": True}, "unknown option strcit"),
])
def test_bad_input_is_an_error_naming_it(role, kwargs, message):
    with pytest.raises(AnsibleLookupError, match=message):
        urv.LookupModule().run([role], variables={}, **kwargs)
