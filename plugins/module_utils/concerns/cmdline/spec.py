# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cmdline`` concern's spec: the iommu role's variables, the kernel arguments they mean on this
architecture, and the concern's evaluation in the one-call check (``kernel_cmdline`` in check mode).

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import task as cmdline_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import TaskFailed
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model

NAME = "cmdline"
# the role variables (and role vars tables) the check reads
KEYS = ("iommu_mode", "iommu_extra_kernel_args", "iommu_absent_kernel_args", "iommu_bootloader",
        "__iommu_arch_map", "__iommu_mode_args")
# the constant tables of roles/iommu/vars/main.yml it reads (no Jinja in them)
ROLE_VARS = ("__iommu_arch_map", "__iommu_mode_args")
TASK = "Ensure the IOMMU kernel arguments for the next boot"


def iommu_args(desired, arch):
    """(``__iommu_present``, ``__iommu_absent``) on ``arch``; DesiredError with the role's assert message when the
    mode is not supported there."""
    arch_map = desired["__iommu_arch_map"]
    modes = desired["__iommu_mode_args"]
    mode = desired["iommu_mode"]
    if arch not in arch_map or mode not in modes.get(arch_map[arch], {}):
        raise common.DesiredError("iommu_mode=%s is not supported on %s (supported: x86_64 passthrough|translated|off, "
                                  "aarch64 passthrough|translated)" % (mode, arch))
    args = modes[arch_map[arch]][mode]
    extra = list(desired["iommu_extra_kernel_args"])
    absent = list(desired["iommu_absent_kernel_args"])
    user_keys = [re.sub(r"=.*", "", str(a)) for a in extra + absent]
    present = list(args["present"]) + extra
    absent = [v for k, v in (args.get("absent") or {}).items() if k not in user_keys] + absent
    return present, absent


def options(d, facts):
    """The module options the role passes to ``kernel_cmdline`` (the ``gpufabric.node.concern_options`` lookup): the
    role variables ``d`` on the host's architecture (``facts['architecture']``); DesiredError when ``iommu_mode`` is
    not supported there."""
    present, absent = iommu_args(d, facts.get("architecture"))
    return {"present": present, "absent": absent, "bootloader": d["iommu_bootloader"]}


def evaluate(ctx):
    d = ctx.desired
    try:
        params = options(d, {"architecture": ctx.architecture()})
    except common.DesiredError as e:
        task = "Check that the IOMMU mode is supported on this architecture"
        return {"cmdline": model.error("cmdline", str(e), task)}
    try:
        res = ctx.task("kernel_cmdline", cmdline_task, params)
    except TaskFailed as e:
        return common.failed(["cmdline"], e, TASK)
    ctx.reboot["cmdline"] = bool(res.get("reboot_required"))
    return dict(res["concerns"])
