# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's option validation, boolean parsing and binary lookup, in plain Python, for code that runs on a node.

The evidence timer (``evidence_timer.py``) runs the one-call check (``node_check.py``) with the node's Python, which
has no Ansible. The check runs the concern modules' bodies with a ``task_host.TaskModule``, whose options must be
validated, coerced and defaulted as AnsibleModule does it for the module itself, or the timer would judge a node by
other options than the roles' modules. This file does that for the part of the argument spec language the
collection's module bodies use:

- ``type``: ``str``, ``path``, ``int``, ``bool``, ``list``, ``dict``; ``elements`` ``str``, ``int``, ``dict``;
- ``default``, ``required``, ``choices``, ``options`` (of a ``dict`` or of a ``list`` of ``dict``);
- ``mutually_exclusive`` and ``required_one_of`` of the top level.

A spec that uses anything else is refused (:class:`SpecError`): never validated differently from Ansible. The order
of the checks, the coercions and the error messages are those of ansible-core 2.19's ``ArgumentSpecValidator``; a
unit test holds them to it for every spec the one-call check validates.

:func:`boolean` is ``ansible.module_utils.parsing.convert_bool.boolean`` (the same true and false words) and
:func:`get_bin_path` is ``ansible.module_utils.common.process.get_bin_path``.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import stat

BOOLEANS_TRUE = frozenset(("y", "yes", "on", "1", "true", "t", 1, 1.0, True))
BOOLEANS_FALSE = frozenset(("n", "no", "off", "0", "false", "f", 0, 0.0, False))
BOOLEANS = BOOLEANS_TRUE.union(BOOLEANS_FALSE)
SPEC_KEYS = frozenset(("type", "elements", "default", "required", "choices", "options"))
TYPES = ("str", "path", "int", "bool", "list", "dict")
ELEMENTS = ("str", "int", "dict")
SBIN_PATHS = ("/sbin", "/usr/sbin", "/usr/local/sbin")


class SpecError(ValueError):
    """An argument spec that uses more than this file implements."""


def boolean(value, strict=True):
    """A boolean from a boolean, a number or one of the words of ``BOOLEANS`` (any case, outer blanks ignored).
    Anything else is a TypeError, or False when not ``strict``."""
    if isinstance(value, bool):
        return value
    normalized = value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        normalized = value.lower().strip()
    try:
        hash(normalized)
    except TypeError:  # unhashable (a list, a dict): not one of the words
        normalized = None
    if normalized in BOOLEANS_TRUE:
        return True
    if normalized in BOOLEANS_FALSE or not strict:
        return False
    raise TypeError("The value '%s' is not a valid boolean. Valid booleans include: %s"
                    % (value, ", ".join(repr(i) for i in BOOLEANS)))


def get_bin_path(arg, opt_dirs=None, path=None):
    """The first executable regular file ``arg`` in ``opt_dirs`` (those that exist), ``path`` (default: PATH), then
    the sbin directories missing from it; ValueError naming the paths searched when there is none."""
    paths = [d for d in opt_dirs or [] if d is not None and os.path.exists(d)]
    paths += (os.environ.get("PATH", "") if path is None else path).split(os.pathsep)
    for p in SBIN_PATHS:
        if p not in paths and os.path.exists(p):
            paths.append(p)
    for d in paths:
        if not d:
            continue
        path = os.path.join(d, arg)
        if os.path.exists(path) and not os.path.isdir(path) and \
                os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
            return path
    raise ValueError('Failed to find required executable "%s" in paths: %s' % (arg, os.pathsep.join(paths)))


# --- type checkers (ansible.module_utils.common.validation) ----------------------------------------------

def _str(value):
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _path(value):
    return os.path.expanduser(os.path.expandvars(_str(value)))


def _int(value):
    if isinstance(value, int):
        return value
    import decimal   # here, not at the top: the node-side check rarely converts, and every start would pay for it
    try:
        dec = decimal.Decimal(value)
        as_int = int(dec)
        if dec != as_int:
            raise ValueError("Significant decimal part found")
        return as_int
    except (decimal.DecimalException, TypeError, ValueError):
        raise TypeError('"%r" cannot be converted to an int' % (value,))


def _bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int, float)):
        return boolean(value)
    raise TypeError("%s cannot be converted to a bool" % type(value))


def _list(value):
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, (int, float)):
        return [str(value)]
    raise TypeError("%s cannot be converted to a list" % type(value))


def _kv_fields(value):
    fields, buf, in_quote, in_escape = [], [], False, False
    for c in value.strip():
        if in_escape:
            buf.append(c)
            in_escape = False
        elif c == "\\":
            in_escape = True
        elif not in_quote and c in ("'", '"'):
            in_quote = c
        elif in_quote and in_quote == c:
            in_quote = False
        elif not in_quote and c in (",", " "):
            if buf:
                fields.append("".join(buf))
            buf = []
        else:
            buf.append(c)
    if buf:
        fields.append("".join(buf))
    return fields


def _dict(value):
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise TypeError("%s cannot be converted to a dict" % type(value))
    if value.startswith("{"):
        try:
            return json.loads(value)
        except Exception:
            from ast import literal_eval   # here: rarely needed, and ast is 2 ms of every start
            try:
                result = literal_eval(value)
            except Exception:
                result = None
            if isinstance(result, dict):
                return result
            raise TypeError("unable to evaluate string as dictionary")
    if "=" in value:
        try:
            return dict(x.split("=", 1) for x in _kv_fields(value))
        except ValueError:
            raise TypeError('unable to evaluate string in the "key=value" format as dictionary')
    raise TypeError("dictionary requested, could not parse JSON or key=value")


CHECKERS = {"str": _str, "path": _path, "int": _int, "bool": _bool, "list": _list, "dict": _dict}


# --- the validator (ansible.module_utils.common.arg_spec / parameters) -------------------------------------

def check_spec(spec, where="argument_spec"):
    """SpecError when ``spec`` uses a key, type or element type this file does not implement."""
    for name, opt in spec.items():
        extra = sorted(set(opt) - SPEC_KEYS)
        if extra:
            raise SpecError("%s.%s uses %s: not implemented here" % (where, name, ", ".join(extra)))
        kind = opt.get("type", "str")
        if kind not in TYPES:
            raise SpecError("%s.%s: type %r is not implemented here" % (where, name, kind))
        if "elements" in opt and (kind != "list" or opt["elements"] not in ELEMENTS):
            raise SpecError("%s.%s: elements %r of type %r is not implemented here"
                            % (where, name, opt["elements"], kind))
        if "options" in opt:
            if not (kind == "dict" or opt.get("elements") == "dict"):
                raise SpecError("%s.%s: options need type dict or a list of dict" % (where, name))
            check_spec(opt["options"], "%s.%s" % (where, name))


def _context(msg, ctx):
    return "%s found in %s" % (msg, " -> ".join(ctx)) if ctx else msg


def _set_defaults(spec, params, set_none=True):
    for name, opt in spec.items():
        default = opt.get("default")
        if name not in params and (default is not None or set_none):
            params[name] = copy.deepcopy(default)


def _terms_present(terms, params):
    terms = [terms] if isinstance(terms, str) else terms
    return len(set(terms).intersection(params))


def _mutually_exclusive(groups, params, ctx):
    found = [g for g in groups or [] if _terms_present(g, params) > 1]
    if found:
        return [_context("parameters are mutually exclusive: %s" % ", ".join("|".join(g) for g in found), ctx)]
    return []


def _required_one_of(groups, params, ctx):
    for g in groups or []:
        if _terms_present(g, params) == 0:
            return [_context("one of the following is required: %s" % ", ".join(g), ctx)]
    return []


def _required(spec, params, ctx):
    missing = sorted(k for k, opt in spec.items() if opt.get("required", False) and k not in params)
    return [_context("missing required arguments: %s" % ", ".join(missing), ctx)] if missing else []


def _types(spec, params, ctx, errors):
    for name, opt in spec.items():
        if name not in params:
            continue
        value = params[name]
        if value is None and not opt.get("required") and opt.get("default") is None:
            continue
        kind = opt.get("type", "str")
        try:
            params[name] = CHECKERS[kind](value)
        except (TypeError, ValueError) as e:
            msg = "argument '%s' is of type %s" % (name, type(value).__name__)
            if ctx:
                msg += " found in '%s'." % " -> ".join(ctx)
            errors.append(msg + " and we were unable to convert to %s: %s" % (kind, e))
            continue
        if opt.get("elements"):
            params[name] = _elements(opt["elements"], name, params[name], ctx, errors)


def _elements(kind, name, values, ctx, errors):
    out = []
    for value in values:
        try:
            out.append(CHECKERS[kind](value))
        except (TypeError, ValueError) as e:
            msg = "Elements value for option '%s'" % name
            if ctx:
                msg += " found in '%s'" % " -> ".join(ctx)
            errors.append(msg + " is of type %s and we were unable to convert to %s: %s"
                          % (type(value).__name__, kind, e))
    return out


def _choices(spec, params, ctx, errors):
    for name, opt in spec.items():
        choices = opt.get("choices")
        if choices is None or name not in params:
            continue
        value = params[name]
        shown = ", ".join(str(c) for c in choices)
        if isinstance(value, list):
            bad = [v for v in value if v not in choices]
            if bad:
                errors.append(_context("value of %s must be one or more of: %s. Got no match for: %s"
                                       % (name, shown, ", ".join(str(v) for v in bad)), ctx))
            continue
        if value in choices:
            continue
        for word, words in (("False", BOOLEANS_FALSE), ("True", BOOLEANS_TRUE)):
            overlap = words.intersection(choices) if value == word else ()
            if len(overlap) == 1:
                (value,) = overlap
                params[name] = value
        if value not in choices:
            errors.append(_context("value of %s must be one of: %s, got: %s" % (name, shown, value), ctx))


def _sub_values(spec, params):
    """Ansible's pass over the values of options with sub-options before anything else (it collects no_log values
    there): a string is parsed as a dict, and the first value that is no dict is an error, reported first."""
    for name, opt in spec.items():
        sub = opt.get("options")
        value = params.get(name)
        if sub is None or value is None:
            continue
        for sub_params in value if isinstance(value, list) else [value]:
            if isinstance(sub_params, str):
                sub_params = _dict(sub_params)
            if not isinstance(sub_params, dict):
                raise TypeError("Value '%s' in the sub parameter field '%s' must be a %s, not '%s'"
                                % (sub_params, name, opt.get("type"), type(sub_params).__name__))
            _sub_values(sub, sub_params)


def _first_pass(spec, params, errors):
    try:
        _sub_values(spec, params)
    except TypeError as e:
        errors.append(str(e))


def _unsupported(spec, params, ctx, unsupported):
    for k in params:
        if k not in spec:
            unsupported[tuple(ctx + [k]) if ctx else k] = list(spec)


def _sub_specs(spec, params, prefix, ctx, errors, unsupported):
    for name, opt in spec.items():
        sub = opt.get("options")
        if sub is None or params.get(name) is None:
            continue
        ctx.append(name)
        value = params[name]
        elements = value if isinstance(value, (list, tuple)) else [value]
        for idx, sub_params in enumerate(elements):
            if not isinstance(sub_params, dict):
                errors.append("value of '%s' must be of type dict or list of dicts" % name)
                continue
            new_prefix = prefix + name + ("[%d]" % idx if opt.get("type") == "list" else "") + "."
            _first_pass(sub, sub_params, errors)
            _unsupported(sub, sub_params, ctx, unsupported)
            _set_defaults(sub, sub_params, False)
            errors.extend(_required(sub, sub_params, ctx))
            _types(sub, sub_params, ctx, errors)
            _choices(sub, sub_params, ctx, errors)
            _set_defaults(sub, sub_params)
            _sub_specs(sub, sub_params, new_prefix, ctx, errors, unsupported)
        ctx.pop()


class ValidationResult(object):
    def __init__(self, parameters, errors):
        self.validated_parameters = parameters
        self.error_messages = errors


class ArgumentSpecValidator(object):
    """``ArgumentSpecValidator(argument_spec, mutually_exclusive=None, required_one_of=None).validate(params)``:
    ``validated_parameters`` (a copy, coerced, with every option of the spec) and ``error_messages``."""

    def __init__(self, argument_spec, mutually_exclusive=None, required_one_of=None):
        check_spec(argument_spec)
        self.argument_spec = argument_spec
        self.mutually_exclusive = mutually_exclusive
        self.required_one_of = required_one_of

    def validate(self, parameters):
        spec = self.argument_spec
        params = copy.deepcopy(dict(parameters))
        errors = []
        unsupported = {}
        _first_pass(spec, params, errors)
        _unsupported(spec, params, [], unsupported)
        errors.extend(_mutually_exclusive(self.mutually_exclusive, params, None))
        _set_defaults(spec, params, False)
        errors.extend(_required(spec, params, None))
        _types(spec, params, None, errors)
        _choices(spec, params, None, errors)
        errors.extend(_required_one_of(self.required_one_of, params, None))
        _set_defaults(spec, params)
        _sub_specs(spec, params, "", [], errors, unsupported)
        if unsupported:
            names = sorted(".".join(k) if isinstance(k, tuple) else k for k in unsupported)
            last = sorted(unsupported, key=lambda k: ".".join(k) if isinstance(k, tuple) else k)[-1]
            supported = ", ".join(sorted(unsupported[last]))
            errors.append("%s. Supported parameters include: %s." % (", ".join(names), supported))
        return ValidationResult(params, errors)
