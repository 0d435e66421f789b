# -*- coding: utf-8 -*-
"""argspec.py against Ansible itself: the same booleans, and for every option spec the one-call check validates, the
same validated options and the same errors, over a table of good, coercible and bad values per option type."""
from __future__ import absolute_import, division, print_function

import importlib
import os

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator as AnsibleValidator
from ansible.module_utils.common.process import get_bin_path as ansible_get_bin_path
from ansible.module_utils.parsing.convert_bool import boolean as ansible_boolean

from ansible_collections.gpufabric.node.plugins.module_utils import argspec
from ansible_collections.gpufabric.node.plugins.module_utils import node_payload

__metaclass__ = type

BOOL_TABLE = [True, False, "yes", "Y", " on ", "TRUE", "t", "1", "0", "no", "Off", "f", "N", "false", 1, 0, 1.0, 0.0,
              2, -1, "2", "maybe", "", " ", "yes please", None, 0.5, b"yes", b"no", b"x", "\u00fcber"]


def outcome(fn, *args, **kw):
    try:
        return ("value", fn(*args, **kw))
    except TypeError as e:
        return ("TypeError", str(e))


@pytest.mark.parametrize("value", BOOL_TABLE, ids=repr)
@pytest.mark.parametrize("strict", [True, False])
def test_boolean_is_ansibles(value, strict):
    assert outcome(argspec.boolean, value, strict=strict) == outcome(ansible_boolean, value, strict=strict)


@pytest.mark.parametrize("value,want", [("yes", True), ("ON", True), (" 1 ", True), ("off", False), (0, False),
                                        ("nope", TypeError), (None, TypeError), ([], TypeError)], ids=repr)
def test_boolean_strict_words(value, want):
    if want is TypeError:
        with pytest.raises(TypeError, match="is not a valid boolean"):
            argspec.boolean(value)
    else:
        assert argspec.boolean(value) is want


def test_get_bin_path_is_ansibles(tmp_path, monkeypatch):
    for name, mode in (("tool", 0o755), ("noexec", 0o644)):
        (tmp_path / name).write_text("#!/bin/sh\n")
        os.chmod(str(tmp_path / name), mode)
    (tmp_path / "adir").mkdir()
    monkeypatch.setenv("PATH", "/nonexistent:" + str(tmp_path))
    for name in ("tool", "noexec", "adir", "sh", "ip", "missing-tool-xyz"):
        for opt in (None, [str(tmp_path)], ["/nonexistent"]):
            assert outcome_v(argspec.get_bin_path, name, opt) == outcome_v(ansible_get_bin_path, name, opt), name


def outcome_v(fn, name, opt):
    try:
        return fn(name, opt_dirs=opt)
    except ValueError as e:
        return "ValueError: %s" % e


# --- the validator ----------------------------------------------------------------------------------------

def task_specs():
    """(name, spec, spec keywords) of every module body in the node payload (what node_check validates)."""
    out = []
    for name in node_payload.NODE_PAYLOAD:
        mod = importlib.import_module("ansible_collections.gpufabric.node.plugins.module_utils." + name)
        if hasattr(mod, "ARGUMENT_SPEC"):
            kw = {}
            for attr, key in (("MUTUALLY_EXCLUSIVE", "mutually_exclusive"), ("REQUIRED_ONE_OF", "required_one_of")):
                if hasattr(mod, attr):
                    kw[key] = getattr(mod, attr)
            out.append((name, mod.ARGUMENT_SPEC, kw))
    return out


SAMPLES = {
    "str": ["a", 5, 1.5, True, None, ["x"], {"k": 1}],
    "path": ["/x/y", "~/x", "$HOME/x", "rel/x", 5, None],
    "int": [5, "5", " 7 ", "5.0", "5.5", "x", 5.0, 5.5, True, None, [1], "1e3"],
    "bool": [True, False, "yes", "off", "maybe", 1, 2, 0.0, None, [1]],
    "list": [["a"], [], "a,b", "", 5, 1.5, {"a": 1}, None, [1, "2", "x", None], [{"a": 1}]],
    "dict": [{}, {"a": 1}, "a=1 b='2 3'", "a=1,b=x\\ y", '{"a": 1}', "{'a': 1}", "{bad", "junk", "=", 5, None, []],
}


def good(opt):
    if opt.get("choices"):
        return list(opt["choices"])[0] if opt.get("type") != "list" else [list(opt["choices"])[0]]
    kind = opt.get("type", "str")
    if kind == "list":
        el = opt.get("elements")
        return [base(opt["options"])] if el == "dict" and opt.get("options") else [1] if el == "int" else ["a"]
    if kind == "dict":
        return base(opt["options"]) if opt.get("options") else {}
    return {"str": "a", "path": "/x", "int": 1, "bool": True}[kind]


def base(spec):
    return dict((k, good(o)) for k, o in spec.items() if o.get("required"))


def variants(spec):
    """Parameter sets: the required options alone, none at all, an unknown one, and each option with each sample of
    its type (its choices, one that is not among them, True/False words), nested specs one level down."""
    b = base(spec)
    yield b
    yield {}
    yield dict(b, bogus_option=1)
    for name, opt in spec.items():
        kind = opt.get("type", "str")
        samples = list(SAMPLES[kind])
        if opt.get("choices"):
            samples += list(opt["choices"]) + ["nope", "True", "False"]
        for s in samples:
            yield dict(b, **{name: s})
        sub = opt.get("options")
        if sub:
            for sv in variants(sub):
                yield dict(b, **{name: [sv] if kind == "list" else sv})
            yield dict(b, **{name: ["not-a-dict"] if kind == "list" else "x=1"})


@pytest.mark.parametrize("name,spec,kw", task_specs(), ids=lambda v: v if isinstance(v, str) else "")
def test_validator_is_ansibles(name, spec, kw):
    n = 0
    for params in variants(spec):
        mine = argspec.ArgumentSpecValidator(spec, **kw).validate(params)
        n += 1
        try:
            theirs = AnsibleValidator(spec, **kw).validate(params)
        except TypeError:  # Ansible fails with a traceback (a number for a dict of options): an error here too
            assert mine.error_messages, (name, params)
            continue
        assert mine.error_messages == list(theirs.error_messages), (name, params)
        if not mine.error_messages:
            assert mine.validated_parameters == theirs.validated_parameters, (name, params)
    assert n > len(spec) * 3


def test_validated_parameters_are_a_copy():
    spec = {"a": {"type": "list", "default": []}, "b": {"type": "dict", "options": {"c": {"type": "int"}}}}
    params = {"b": {"c": "3"}}
    res = argspec.ArgumentSpecValidator(spec).validate(params)
    assert res.validated_parameters == {"a": [], "b": {"c": 3}} and params == {"b": {"c": "3"}}
    res.validated_parameters["a"].append(1)
    assert argspec.ArgumentSpecValidator(spec).validate({}).validated_parameters["a"] == []


@pytest.mark.parametrize("spec", [{"a": {"aliases": ["b"]}}, {"a": {"type": "float"}}, {"a": {"no_log": True}},
                                  {"a": {"type": "list", "elements": "path"}}, {"a": {"type": "str", "options": {}}},
                                  {"a": {"type": "dict", "options": {"b": {"type": "raw"}}}}])
def test_a_spec_beyond_the_subset_is_refused(spec):
    with pytest.raises(argspec.SpecError, match="not implemented here|options need"):
        argspec.ArgumentSpecValidator(spec)
