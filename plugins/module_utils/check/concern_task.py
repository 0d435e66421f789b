# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The body of ``concern_check``: a read-only concern's check, by name, for the roles.

A read-only concern (its spec has ``READ_ONLY_TASK``: a body with ``ARGUMENT_SPEC`` and ``run(module, sysroot)``
that changes nothing) needs no module of its own: its role runs ``gpufabric.node.concern_check`` with ``concern``
and the body's ``options``, which are validated against the body's argument spec before it runs. The one-call check
runs the same body (``spec.evaluate``), so the role and the check say the same.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import TaskFailed, TaskModule

ARGUMENT_SPEC = dict(
    concern=dict(type="str", required=True),
    options=dict(type="dict", default={}),
)


def read_only():
    """The concerns ``concern_check`` runs, in registry order."""
    return [s.NAME for s in registry.SPECS if getattr(s, "READ_ONLY_TASK", None) is not None]


def run(module, sysroot=None):
    name = module.params["concern"]
    spec = registry.BY_NAME.get(name)
    if spec is None or getattr(spec, "READ_ONLY_TASK", None) is None:
        module.fail_json(msg="concern %r is not a read-only concern (concern_check runs %s)"
                         % (name, ", ".join(read_only())))
    body = spec.READ_ONLY_TASK
    try:
        sub = TaskModule(name, body.ARGUMENT_SPEC, module.params["options"] or {}, module,
                         check_mode=module.check_mode)
        res = body.run(sub, sysroot or Sysroot())
    except TaskFailed as e:
        module.fail_json(**dict(e.result, msg=e.result.get("msg") or "failed"))
    for w in sub.warnings:
        module.warn(w)
    return dict(res, changed=False)
