# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL defaults in /etc/nccl.conf: the body of the ``nccl_config`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str", required=True),
    path=dict(type="path", default=nccl.NCCL_CONF),
    tc=dict(type="int", default=nccl.DEFAULT_TC),
    gid_index=dict(type="int"),
    fifo_tc=dict(type="int"),
    expected_tos=dict(type="int"),
    socket_ifname=dict(type="str"),
    extra_vars=dict(type="dict", default={}),
)


def run(module, sysroot=None):
    """Validate, render and (unless check mode) write the NCCL configuration file."""
    p = module.params
    try:
        inputs.safe_path(p["path"], "path")
        if p["socket_ifname"] is not None:
            inputs.nccl_ifnames(p["socket_ifname"], "socket_ifname")
    except inputs.InputError as e:
        module.fail_json(msg=str(e), concerns={"nccl": concerns.error("nccl", str(e))})
    # tc's own range is checked by nccl.desired_vars below
    problems = desired.unreadable({"tos": p["expected_tos"]}) + desired.contradictions(
        {"nccl_ib_tc": p["tc"], "tos": p["expected_tos"]})
    if problems:
        msg = "; ".join(problems)
        module.fail_json(msg=msg, concerns={"nccl": concerns.error("nccl", msg)})
    sysroot = sysroot or Sysroot()
    try:
        found = rdma_cm.rail_devices(sysroot, p["rails"], with_gid_index=True)
        hca = nccl.hca_value([(ibdev, port) for _rail, ibdev, port, _gid in found])
        gid = nccl.choose_gid_index([(rail, g) for rail, _ibdev, _port, g in found], p["gid_index"])
        variables = nccl.desired_vars(hca, gid, p["tc"], p["fifo_tc"], p["socket_ifname"], p["extra_vars"])
    except (ValueError, nccl.NcclError, rdma_cm.RailError) as e:
        module.fail_json(msg=str(e), concerns={"nccl": concerns.error("nccl", str(e))})
    # one writer of node state at a time (nodelock.py)
    with nodelock.for_module(module, sysroot, "nccl_config", ("nccl",)):
        try:
            res = nccl.write_conf(sysroot, variables, module.check_mode, p["path"])
        except (OSError, IOError) as e:
            msg = "writing %s failed: %s" % (p["path"], e)
            module.fail_json(msg=msg, concerns={"nccl": concerns.error("nccl", msg)})
    out = dict(changed=res["changed"], path=res["path"], variables=dict(variables), drift=res["drift"],
               rails=[dict(rail=r, device=d, port=pt, gid_index=g) for r, d, pt, g in found],
               concerns={"nccl": concerns.from_items("nccl", res["drift"], module.check_mode)})
    if module._diff:
        out["diff"] = dict(before=res["before"], after=res["after"], before_header=res["path"],
                           after_header=res["path"])
    return out
