# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the concerns' specs (``concerns/<name>/spec.py``) share: role variables read as Ansible hands them over,
the rails a role takes, and the status of a concern whose module body failed in the one-call check.

A spec turns the role variables of its concern into the options of its module and evaluates the concern in the
one-call check (``check/node_check.py``) with the body its role's task runs. These helpers are the filters and
conventions every spec uses the same way: Jinja's ``int`` and ``bool``, a role's rails, an option the task omits
when it is empty, and the statuses the roles record when a task fails.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.argspec import boolean
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import TaskFailed


class DesiredError(ValueError):
    """A desired-state document the check cannot read."""


def jinja_int(value):
    """Jinja's ``int`` filter: the integer of a number or numeric string, 0 otherwise."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def truthy(value):
    """The ``bool`` filter the roles' conditions use: a boolean, or a string such as yes/on/true/1."""
    return boolean(value, strict=False)


def unique(values):
    out = []
    for v in values:
        if v and v not in out:
            out.append(v)
    return out


def rails(role_rails, pairing):
    """``__<role>_rails``: the role's rails when given, else the netdevs of the RDMA NICs paired with GPUs."""
    if role_rails:
        return list(role_rails)
    return unique(p.get("netdev") for p in pairing or [])


def omit_empty(params, **optional):
    """``params`` with each optional option that is set and not empty (the task's ``| default(omit)`` of a list)."""
    for k, v in optional.items():
        if v:
            params[k] = v
    return params


def omit_none(params, **optional):
    """``params`` with each optional option that is not None (the task's ``| default(omit)``)."""
    for k, v in optional.items():
        if v is not None:
            params[k] = v
    return params


def failed(names, e, task=None):
    """Statuses of ``names`` when their module body failed (``TaskFailed`` ``e``) in the role's task ``task``, as the
    role ends up recording them: the module's own status where its failed result gave one (the role's rescue records
    ``concern_error``, then its export step lays the registered result's ``concerns`` over it), else what the
    rescue recorded (``concerns.task_error``: ``error`` with the message and per-object results, naming the task)."""
    own = e.result.get("concerns") or {}
    return dict((n, model.normalize(n, own[n]) if isinstance(own.get(n), dict) else model.task_error(e.result, n, task))
                for n in names)


def not_checked(names, reason):
    """``not_checked`` with ``reason`` for each of ``names`` (a role with no rails to work on)."""
    return dict((n, model.status(model.NOT_CHECKED, reason)) for n in names)


def proof_not_checked(name, what):
    """A proof that moves data (``what``) is not made by the read-only check: not_checked, naming the role that
    makes it."""
    return model.status(model.NOT_CHECKED, "the one-call check makes no %s; run the %s role (verify.yml)"
                        % (what, model.CONCERNS[model.NAMES.index(name)]["role"]))


def run_body(ctx, names, module, body, params, task, **kw):
    """The statuses a concern module body gives in the one-call check: ``body`` (its ``run``) run as ``module`` in
    check mode with ``params`` through ``ctx.task``; ``failed(names, ...)`` under the role's ``task`` name when it
    fails."""
    try:
        res = ctx.task(module, body, params, **kw)
    except TaskFailed as e:
        return failed(names, e, task)
    return dict(res["concerns"])
