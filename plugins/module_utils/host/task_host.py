# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a concern module's body needs from its AnsibleModule, for running that body inside another module.

Each concern module (``pcie_acs``, ``dcb_qos``, ...) keeps its body in module_utils as ``run(module, sysroot)``
(``acs_task``, ``dcb_task``, ...). The module calls it with its own AnsibleModule. The one-call check
(``node_check``) calls the same bodies, in check mode, with a ``TaskModule``: the options are validated against
the module's own argument spec (``argspec.ArgumentSpecValidator``: the validation AnsibleModule does, in plain
Python, for the evidence timer runs this on a node without Ansible), commands and binaries
go to the runner's backend (the running ``fabric_check`` AnsibleModule, or ``runner.LocalBackend``; the
bodies wrap the TaskModule in ``runner.CommandRunner``), warnings are collected, and
``fail_json`` raises ``TaskFailed`` with what the module would have failed with instead of ending the process.

Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.argspec import ArgumentSpecValidator
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandFailed, LocalBackend


class TaskFailed(Exception):
    """A concern module body called fail_json: ``result`` is what the module would have returned (``msg``,
    ``failed``, and its ``concerns`` when it gave any)."""

    def __init__(self, result):
        Exception.__init__(self, result.get("msg") or "failed")
        self.result = result


# the runner of code without Ansible (unit tests, the evidence timer's one-call check): runner.py's backend
LocalRunner = LocalBackend


class TaskModule(object):
    """An AnsibleModule stand-in for one concern module body (see the file's doc)."""

    def __init__(self, name, argument_spec, params, runner, check_mode=True, diff=False, **spec_kw):
        self.name = name
        self.argument_spec = argument_spec
        self.check_mode = check_mode
        self._diff = diff
        self.warnings = []
        self._runner = runner
        res = ArgumentSpecValidator(argument_spec, **spec_kw).validate(dict(params))
        if res.error_messages:
            raise TaskFailed({"msg": "%s: %s" % (name, "; ".join(res.error_messages)), "failed": True})
        self.params = res.validated_parameters

    def warn(self, msg):
        self.warnings.append(msg)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        path = self._runner.get_bin_path(name, required=False, opt_dirs=opt_dirs)
        if path is None and required:
            self.fail_json(msg="Failed to find required executable \"%s\" in paths" % name)
        return path

    def run_command(self, args, **kw):
        try:
            return self._runner.run_command(args, **kw)
        except CommandFailed as e:
            raise TaskFailed(e.result)

    def fail_json(self, msg, **kw):
        kw["msg"] = msg
        kw["failed"] = True
        raise TaskFailed(kw)

    def exit_json(self, **kw):  # pragma: no cover - bodies return their result, they never exit
        raise AssertionError("a concern module body must return its result, not exit: %r" % (kw,))
