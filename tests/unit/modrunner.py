# -*- coding: utf-8 -*-
"""Run an Ansible module's main() in-process with given arguments and return its result dict."""
from __future__ import absolute_import, division, print_function

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

__metaclass__ = type


class ModuleExit(Exception):
    def __init__(self, result, failed):
        Exception.__init__(self, result.get("msg", ""))
        self.result = result
        self.failed = failed


def run_module(module, args, check_mode=False, diff=False, monkeypatch=None):
    """Call module.main() with ``args``; returns the result dict (``failed`` set when fail_json was called)."""
    payload = dict(args)
    payload["_ansible_check_mode"] = check_mode
    payload["_ansible_diff"] = diff
    payload.setdefault("_ansible_remote_tmp", "/tmp")
    payload.setdefault("_ansible_keep_remote_files", False)
    data = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload}))

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs, False)

    def fail_json(self, msg, **kwargs):
        kwargs["msg"] = msg
        kwargs["failed"] = True
        raise ModuleExit(kwargs, True)

    mp = monkeypatch or pytest.MonkeyPatch()
    mp.setattr(basic, "_ANSIBLE_ARGS", data)
    mp.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    mp.setattr(basic.AnsibleModule, "exit_json", exit_json)
    mp.setattr(basic.AnsibleModule, "fail_json", fail_json)
    try:
        module.main()
    except ModuleExit as e:
        return e.result
    finally:
        if monkeypatch is None:
            mp.undo()
    raise AssertionError("module returned without exit_json/fail_json")
