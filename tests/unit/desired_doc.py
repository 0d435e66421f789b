# -*- coding: utf-8 -*-
"""The desired-state document fabric_check's action plugin resolves, for a host without inventory variables:
the roles' defaults and vars tables, through the plugin's own functions (shared by the node_check tests)."""
from __future__ import absolute_import, division, print_function

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufabric.node.plugins.action import fabric_check as action

__metaclass__ = type


def resolve(host_vars=None):
    """The document for a host whose variables are ``host_vars`` (plain values, as JSON gives them)."""
    loader = DataLoader()
    defaults, constants = action.role_files(loader)
    doc = action.resolve(Templar(loader=loader), dict(host_vars or {}), defaults, constants)
    return to_plain(doc)


def to_plain(value):
    """The document as the module receives it (JSON: plain dicts, lists, str, int, bool, None)."""
    if isinstance(value, dict):
        return dict((str(k), to_plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)
