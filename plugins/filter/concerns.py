# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that record concern statuses in the host fact ``gpufabric_concerns`` (see module_utils/concern_model.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model


def _task_name(task):
    if isinstance(task, dict):
        return task.get("name") or task.get("action")
    return task or None


def concern_error(result, concern, task=None):
    """The status document of a concern whose task failed: ``error`` with the failure as the reason. A module that
    returned its own status for the concern (with per-object results in its items) is taken as it is."""
    if concern not in model.NAMES:
        raise AnsibleFilterError("concern_error: unknown concern %r (one of %s)" % (concern, ", ".join(model.NAMES)))
    try:
        return model.task_error(result, concern, _task_name(task))
    except model.ConcernError as e:
        raise AnsibleFilterError(str(e))


def concern_failed(recorded, role, task=None, result=None):
    """``recorded`` (gpufabric_concerns) with every concern of ``role`` that the role did not record before it
    failed set to ``error``: the backstop of playbooks/tasks/concerns.yml."""
    recorded = dict(recorded or {})
    names = model.of_role(role)
    if not names:
        raise AnsibleFilterError("concern_failed: %r is not a role of the concern list" % role)
    for n in names:
        if n not in recorded:
            recorded[n] = concern_error(result, n, task)
    return recorded


def concern_status(value, reason=None, items=None):
    """A status document: ``'not_checked' | gpufabric.node.concern_status('no rails')``."""
    try:
        return model.status(value, reason, items)
    except model.ConcernError as e:
        raise AnsibleFilterError(str(e))


def concern_open(recorded, reboot_required=False, names=None):
    """Lines for what is not as desired: every recorded concern that is not ok or not_applicable, in list order, and
    a pending reboot. With ``names``, only those concerns, and one that was not recorded at all is not_checked."""
    out = []
    for n in model.NAMES:
        if names is not None and n not in names:
            continue
        c = (recorded or {}).get(n)
        if c is None and names is not None:
            out.append("%s: not_checked (no status was recorded)" % model.TITLES[n])
        elif c and c.get("status") not in (model.OK, model.NOT_APPLICABLE):
            out.append("%s: %s (%s)" % (model.TITLES[n], c.get("status"), c.get("reason")))
    if reboot_required:
        out.append("Reboot pending: the boot loader carries kernel arguments the running kernel lacks; set "
                   "iommu_reboot_ok=true / pcie_acs_reboot_ok=true to let the play reboot the node, or reboot it "
                   "in the next maintenance window")
    return out


def concern_merge(docs, name):
    """One status for ``name`` from several modules' status documents (the worst wins; see concerns.merge)."""
    try:
        return model.merge(name, list(docs or []))
    except model.ConcernError as e:
        raise AnsibleFilterError(str(e))


def concern_errors(recorded, names=None):
    """Lines naming the concerns whose status is error (for a play's final assert)."""
    out = []
    for n in model.NAMES:
        c = (recorded or {}).get(n)
        if c and (names is None or n in names) and c.get("status") == model.ERROR:
            out.append("%s: %s" % (model.TITLES[n], c.get("reason")))
    return out


def concern_contradictions(conflicts):
    """Every core concern ``error`` because the desired settings contradict each other (nothing was touched)."""
    if not conflicts:
        return {}
    reason = "not checked or changed: the desired settings contradict each other: %s" % " | ".join(
        str(c) for c in conflicts)
    return dict((n, model.status(model.ERROR, reason)) for n in model.CORE)


def concerns_of_role(role):
    """The concern names a role of the list records."""
    names = model.of_role(role)
    if not names:
        raise AnsibleFilterError("concerns_of_role: %r is not a role of the concern list" % role)
    return names


def concern_title(name):
    if name not in model.TITLES:
        raise AnsibleFilterError("concern_title: unknown concern %r" % name)
    return model.TITLES[name]


def data_path_failures(facts, gds_wanted=None):
    """What breaks a wanted proof on the node's data path (concerns.data_path_failures): verify.yml fails on it."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("data_path_failures: the input must be the gpufabric facts (a mapping), got %r"
                                 % (facts,))
    return model.data_path_failures(facts, gds_wanted)


class FilterModule(object):
    def filters(self):
        return {
            "concern_error": concern_error,
            "concern_failed": concern_failed,
            "concern_status": concern_status,
            "concern_errors": concern_errors,
            "concern_merge": concern_merge,
            "concern_open": concern_open,
            "concern_title": concern_title,
            "concern_contradictions": concern_contradictions,
            "concerns_of_role": concerns_of_role,
            "data_path_failures": data_path_failures,
        }
