# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the node drain (playbooks/tasks/k8s_drain.yml; see module_utils/upgrade/k8s_drain.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.module_utils.upgrade import k8s_drain as drain


def _resources(result, what):
    """The objects of a registered k8s_info result, or a list of objects."""
    if isinstance(result, dict) and "resources" in result:
        return result["resources"]
    if isinstance(result, list):
        return result
    raise AnsibleFilterError("%s: expected a registered kubernetes.core.k8s_info result or a list, got %r"
                             % (what, result))


def k8s_drain_remaining(pods, node):
    try:
        return drain.remaining_pods(_resources(pods, "k8s_drain_remaining"), node)
    except drain.DrainError as e:
        raise AnsibleFilterError("k8s_drain_remaining: %s" % e)


def k8s_drain_refused_pod(message):
    return drain.refused_pod(message) or ""


def k8s_drain_blockers(pdbs, pod):
    try:
        pods = _resources(pod, "k8s_drain_blockers")
        if len(pods) != 1:
            raise AnsibleFilterError("k8s_drain_blockers: expected one pod, got %d" % len(pods))
        return drain.describe_blockers(_resources(pdbs, "k8s_drain_blockers"), pods[0])
    except drain.DrainError as e:
        raise AnsibleFilterError("k8s_drain_blockers: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"k8s_drain_remaining": k8s_drain_remaining,
                "k8s_drain_refused_pod": k8s_drain_refused_pod,
                "k8s_drain_blockers": k8s_drain_blockers}
