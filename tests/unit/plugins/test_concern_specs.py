# -*- coding: utf-8 -*-
"""One concern, one place: the spec registry matches the concern list, every spec is complete, and no hub names
the concerns (issue 22).

- ``concerns/registry.py`` has one spec per entry of ``concern_model.CONCERNS``, in its order; each spec has its name,
  the role variables it reads and an evaluator; concerns that share an evaluator are the ones one module run gives;
- every boot-time record section (``concerns/sections.py``) belongs to a registered concern and has a unique key;
- no file in plugins/, roles/ or playbooks/ other than the two registry files names 10 or more concerns (module
  documentation is left out: the modules that take ``managed_concerns`` document the core list, which a test here
  holds to ``concerns.CORE``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re
import subprocess

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry, sections

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
REGISTRY_FILES = ("plugins/module_utils/concern_model.py", "plugins/module_utils/concerns/registry.py")
DOC_VARS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def test_one_spec_per_concern_in_list_order():
    assert tuple(s.NAME for s in registry.SPECS) == model.NAMES
    assert sorted(registry.BY_NAME) == sorted(model.NAMES)


@pytest.mark.parametrize("spec", registry.SPECS, ids=lambda s: s.NAME)
def test_every_spec_is_complete(spec):
    assert isinstance(spec.KEYS, tuple) and all(isinstance(k, str) for k in spec.KEYS)
    assert callable(spec.evaluate)
    assert set(getattr(spec, "ROLE_VARS", ())) <= set(spec.KEYS), "a role vars table the check reads is a key"
    if hasattr(spec, "conflict_vars"):
        assert set(spec.conflict_vars.__code__.co_varnames[:1]) == {"d"}


def test_shared_evaluators_are_one_module_run():
    """Two concerns share an evaluator only where one module run gives both (its spec's GIVES)."""
    by_fn = {}
    for s in registry.SPECS:
        by_fn.setdefault(s.evaluate, []).append(s.NAME)
    for names in by_fn.values():
        if len(names) > 1:
            owner = [registry.BY_NAME[n] for n in names if hasattr(registry.BY_NAME[n], "GIVES")]
            assert len(owner) == 1 and sorted(owner[0].GIVES) == sorted(names), names


def test_the_check_hub_is_built_from_the_specs():
    assert sorted(node_check.REGISTRY) == sorted(model.NAMES)
    for s in registry.SPECS:
        assert node_check.REGISTRY[s.NAME]["evaluate"] is s.evaluate


def test_boot_sections_belong_to_registered_concerns():
    keys = [s.key for s in sections.SECTIONS]
    assert len(keys) == len(set(keys))
    assert all(s.concern in model.NAMES for s in sections.SECTIONS)
    assert sorted(s.order for s in sections.SECTIONS) == sorted(set(s.order for s in sections.SECTIONS))


def _without_module_docs(path, text):
    """The file's text with its DOCUMENTATION, EXAMPLES and RETURN strings blanked (Python modules only)."""
    if not path.endswith(".py"):
        return text
    lines = text.split("\n")
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in DOC_VARS for t in node.targets):
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines)


def named_concerns(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = _without_module_docs(path, f.read())
    return [n for n in model.NAMES if re.search(r"(?<![\w./-])%s(?![\w-])" % re.escape(n), text)]


def test_no_hub_names_the_concerns():
    files = subprocess.check_output(["git", "ls-files", "--cached", "--others", "--exclude-standard", "plugins",
                                     "roles", "playbooks"], cwd=REPO, universal_newlines=True).split()
    many = {}
    for f in files:
        if f in REGISTRY_FILES or not f.endswith((".py", ".yml", ".yaml", ".j2")):
            continue
        found = named_concerns(f)
        if len(found) >= 10:
            many[f] = found
    assert many == {}


def test_the_reader_counts_names():
    """The counter sees a hub that lists the concerns (a test that cannot fail proves nothing)."""
    assert len(named_concerns(REGISTRY_FILES[1])) == len(model.NAMES)


@pytest.mark.parametrize("module", ["fabric_report", "fleet_report", "fabric_metrics"])
def test_documented_default_concerns_are_the_core_list(module):
    path = os.path.join(REPO, "plugins", "modules", module + ".py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"Default - the core concerns \(((?:C\([a-z_]+\),?\s*)+)\)", text)
    assert m, "%s documents the default of managed_concerns" % module
    assert tuple(re.findall(r"C\(([a-z_]+)\)", m.group(1))) == model.CORE


@pytest.mark.parametrize("module", ["fabric_report", "fleet_report", "fabric_metrics"])
def test_documented_choices_of_managed_concerns_are_the_list(module):
    """The static ``choices`` of ``managed_concerns`` in the module docs are the concern list, in its order."""
    import yaml
    path = os.path.join(REPO, "plugins", "modules", module + ".py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    doc = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
           and any(isinstance(t, ast.Name) and t.id == "DOCUMENTATION" for t in n.targets)][0]
    option = yaml.safe_load(doc)["options"]["managed_concerns"]
    assert tuple(option["choices"]) == model.NAMES


def test_no_module_utils_file_shares_a_module_basename():
    """One name per thing: a file of plugins/module_utils never has the basename of a module (issue 22)."""
    modules = set(f for f in os.listdir(os.path.join(REPO, "plugins", "modules")) if f.endswith(".py"))
    clashes = []
    for dirpath, _dirs, files in os.walk(os.path.join(REPO, "plugins", "module_utils")):
        clashes.extend(os.path.join(dirpath, f) for f in files if f in modules)
    assert clashes == []
