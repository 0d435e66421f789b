# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the GPU Operator's objects (see module_utils/upgrade/gpu_operator.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.module_utils.upgrade import gpu_operator as op


def _resources(result, many=True):
    """The objects of a registered k8s_info result (or the objects themselves); None when it was not run."""
    if result is None or (isinstance(result, dict) and (result.get("skipped") or "resources" not in result
                                                        and "items" not in result and "metadata" not in result)):
        return None
    if isinstance(result, dict) and "resources" in result:
        items = result["resources"]
        return items if many else (items[0] if items else None)
    return result


def gpu_operator_pod_identities(pods, node):
    try:
        return op.identities(_resources(pods) or [], node)
    except op.OperatorError as e:
        raise AnsibleFilterError("gpu_operator_pod_identities: %s" % e)


def gpu_operator_node_state(node_obj, pods, node, kernel, before=None, gds=False, nvfs_loaded=None):
    try:
        return op.node_state(_resources(node_obj, many=False), _resources(pods), node, kernel, before, bool(gds),
                             nvfs_loaded)
    except op.OperatorError as e:
        raise AnsibleFilterError("gpu_operator_node_state: %s" % e)


def _node_name(entry):
    """A node name, or an [inventory host, node name] pair whose empty name means the host's name."""
    if isinstance(entry, (list, tuple)) and len(entry) == 2:
        return entry[1] or entry[0]
    return entry


def gpu_operator_rollout_refusal(cluster_policy, pods, nodes, play_nodes,
                                 skip_label="nvidia.com/gpu-driver-upgrade.skip"):
    try:
        return op.rollout_refusal(_resources(cluster_policy, many=False), _resources(pods) or [],
                                  _resources(nodes) or [], [_node_name(n) for n in play_nodes], skip_label)
    except op.OperatorError as e:
        raise AnsibleFilterError("gpu_operator_rollout_refusal: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"gpu_operator_pod_identities": gpu_operator_pod_identities,
                "gpu_operator_node_state": gpu_operator_node_state,
                "gpu_operator_rollout_refusal": gpu_operator_rollout_refusal}
