# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) as the fake Kubernetes API (k8s_api.py) applies them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


class PatchError(Exception):
    """A JSON patch that cannot be applied (the API server answers 422)."""


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (also what a strategic merge patch of labels/annotations/spec does here)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(path):
    """RFC 6901 JSON pointer -> list of reference tokens."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("JSON pointer %r does not start with /" % path)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container, token, path, allow_end=False):
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError("%s: %r is not an array index" % (path, token))
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError("%s: index %d out of range" % (path, i))
    return i


def _parent(doc, path):
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("the operation needs a path below the root")
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("doc is missing path: %s" % path)
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path)]
        else:
            raise PatchError("doc is missing path: %s" % path)
    if not isinstance(cur, (dict, list)):
        raise PatchError("doc is missing path: %s" % path)
    return cur, tokens[-1]


def _get(doc, path):
    cur = doc
    for t in _pointer(path):
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path)]
        else:
            raise PatchError("doc is missing path: %s" % path)
    return cur


def _remove(doc, path):
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("doc is missing path: %s" % path)
        return parent.pop(last)
    return parent.pop(_index(parent, last, path))


def _add(doc, path, value):
    if path == "":
        return copy.deepcopy(value)
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    else:
        parent.insert(_index(parent, last, path, allow_end=True), copy.deepcopy(value))
    return doc


def json_patch(target, ops):
    """RFC 6902 JSON patch: a new document, or PatchError (nothing of ``target`` is changed)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("operation %r lacks op or path" % (op,))
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError("%s at %s lacks a value" % (kind, path))
        if kind == "add":
            doc = _add(doc, path, op["value"])
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if path == "":
                doc = copy.deepcopy(op["value"])
            else:
                _remove(doc, path)
                doc = _add(doc, path, op["value"])
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError("%s to %s lacks from" % (kind, path))
            if kind == "move" and (path + "/").startswith(op["from"] + "/"):
                raise PatchError("cannot move %s into itself" % op["from"])
            value = _remove(doc, op["from"]) if kind == "move" else copy.deepcopy(_get(doc, op["from"]))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError("testing value %s failed" % path)
        else:
            raise PatchError("unknown JSON patch operation %r" % kind)
    return doc
