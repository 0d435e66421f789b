# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``acs`` concern's spec: the pcie_acs role's variables as ``pcie_acs`` options, and the concern's evaluation in
the one-call check: the runtime ACS state and the kernel argument that keeps it across reboots, merged.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import task as acs_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import task as cmdline_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import TaskFailed

NAME = "acs"
KEYS = ("pcie_acs_clear", "pcie_acs_pairs", "pcie_acs_endpoints", "pcie_acs_bridges", "pcie_acs_persist",
        "pcie_acs_bootloader")
TASK = "Clear ACS redirection on the GPU<->NIC path bridges"


def params(d):
    return common.omit_empty({"clear": d["pcie_acs_clear"], "pairs": d["pcie_acs_pairs"],
                              "persist": d["pcie_acs_persist"]},
                             endpoints=d["pcie_acs_endpoints"], bridges=d["pcie_acs_bridges"])


def evaluate(ctx):
    d = ctx.desired
    try:
        res = ctx.task("pcie_acs", acs_task, params(d))
    except TaskFailed as e:
        return common.failed(["acs"], e, TASK)
    docs = [res["concerns"]["acs"]]
    cmd = None
    if d["pcie_acs_persist"] == "kernel_cmdline" and res.get("kernel_arg") is not None:
        cmd = {"present": [res["kernel_arg"]], "bootloader": d["pcie_acs_bootloader"]}
    elif d["pcie_acs_persist"] == "applier":
        cmd = {"absent": ["pci=disable_acs_redir"], "bootloader": d["pcie_acs_bootloader"]}
    if cmd is not None:
        try:
            c = ctx.task("kernel_cmdline", cmdline_task, cmd)
        except TaskFailed as e:
            own = (e.result.get("concerns") or {}).get("cmdline")
            docs.append(own if isinstance(own, dict) else model.error("acs", e.result.get("msg")))
        else:
            docs.append(c["concerns"]["cmdline"])
            ctx.reboot["acs"] = bool(c.get("reboot_required"))
    return {"acs": model.merge("acs", docs)}
