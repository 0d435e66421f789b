# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``nccl`` concern's spec: the nccl role's variables as ``nccl_config`` options, its contradiction keys (the
traffic classes NCCL sets), and the concern's evaluation in the one-call check.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import task as nccl_task

NAME = "nccl"
KEYS = ("nccl_rails", "nccl_conf_path", "nccl_ib_tc", "nccl_ib_gid_index", "nccl_ib_fifo_tc", "nccl_socket_ifname",
        "nccl_extra_vars", "__nccl_no_rails")
ROLE_VARS = ("__nccl_no_rails",)
CONFLICT_KEYS = ("nccl_ib_tc", "nccl_ib_fifo_tc")
TASK = "Write the NCCL defaults"


def params(d, rails_):
    return common.omit_none({"rails": rails_, "path": d["nccl_conf_path"], "tc": d["nccl_ib_tc"],
                             "extra_vars": d["nccl_extra_vars"]},
                            gid_index=d["nccl_ib_gid_index"], fifo_tc=d["nccl_ib_fifo_tc"],
                            socket_ifname=d["nccl_socket_ifname"])


def options(d, facts):
    """The module options the role passes to ``nccl_config`` (the ``gpufabric.node.concern_options`` lookup): the role
    variables ``d`` and the host's gpufabric ``facts`` (their ``pairing``)."""
    return params(d, common.rails(d["nccl_rails"], facts.get("pairing")))


def evaluate(ctx):
    opts = options(ctx.desired, {"pairing": ctx.pairing()})
    if not opts["rails"]:
        return common.not_checked(["nccl"], ctx.desired["__nccl_no_rails"])
    return common.run_body(ctx, ["nccl"], "nccl_config", nccl_task, opts, TASK)
