# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line: the entry point of ``kernel_cmdline`` (detect the boot loader, plan, apply, status).

The work is split by stage; this module re-exports their names, so ``cmdline.<name>`` keeps working:

* ``cmdline_args``: parse, validate, merge and compare kernel arguments (no boot loader knowledge);
* ``cmdline_detect``: which boot loader sets this host's command line (grub, grubby, systemd-boot, uki, none);
* ``cmdline_grub``: the additive GRUB drop-in (Debian/Ubuntu) and the conflicts with the admin's arguments;
* ``cmdline_grubby``: grubby and Boot Loader Spec entries (EL).

On a host whose boot loader the collection does not drive (a microVM or cloud VM whose command line comes from
the hypervisor; systemd-boot and UKIs until they are supported) nothing is written and nothing fails: the
``cmdline`` concern is ``not_applicable`` when ``/proc/cmdline`` already has what is wanted, else ``drift``
against the running command line, with what the operator does instead.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.args import (  # noqa: F401 (re-exported)  # pylint: disable=unused-import
    BOOL_KEYS,
    CUMULATIVE_KEYS,
    IOMMU_X86_OPTIONS,
    OS_RELEASE,
    PROC_CMDLINE,
    SUBOPTION_KEYS,
    CmdlineError,
    CommandError,
    Plan,
    arg_key,
    arg_value,
    conflicts,
    deviations,
    format_grub_word,
    format_kernel_arg,
    has_arg,
    join_grub,
    join_kernel,
    merge,
    missing_args,
    normalize_arg,
    os_family,
    read_os_release,
    read_proc_cmdline,
    reboot_required,
    shell_dquote_body,
    shell_quote,
    split_cmdline,
    split_suboptions,
    sub_options,
    token_diff,
    validate,
    validate_pci_dev_list,
)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.detect import (  # noqa: F401  # pylint: disable=unused-import
    DRIVEN,
    KINDS,
    Found,
    advice,
    detect,
    why,
)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.grub import (  # noqa: F401  # pylint: disable=unused-import
    GRUB_DEFAULT,
    GRUB_DROPIN,
    GRUB_DROPIN_DIR,
    GRUB_DROPIN_NAME,
    GRUB_VARS,
    GrubDropinBackend,
    conflict_reason,
    remaining,
    render_dropin,
)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline.grubby import (  # noqa: F401  # pylint: disable=unused-import
    GrubbyBackend,
    parse_grubby_info,
)
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

CONCERN = "cmdline"


def _items(obj, devs):
    return [{"concern": CONCERN, "object": obj, "key": k, "current": cur, "desired": want} for k, cur, want in devs]


def describe(items):
    """What the items say about a command line, briefly: ``lacks iommu=pt, has splash``."""
    out = []
    for i in items:
        if i["desired"] is None:
            out.append("has %s" % i["current"])
        elif i["current"] is None:
            out.append("lacks %s" % i["desired"])
        else:
            out.append("has %s instead of %s" % (i["current"], i["desired"]))
    return ", ".join(out)


def backend_for(found, sysroot, run, bin_path):
    if found.kind == "grub":
        return GrubDropinBackend(sysroot, run, bin_path)
    if found.kind == "grubby":
        return GrubbyBackend(sysroot, run, bin_path)
    raise CmdlineError("the collection does not drive the boot loader %s" % found.kind)


def not_driven(found, sysroot, proc_text, running):
    """The result on a host whose boot loader the collection does not drive: nothing to do, never a failure."""
    todo = advice(found, sysroot)
    if running:
        # the fix first: a long list of arguments is what one_line cuts, and the items carry it whole
        doc = concerns.status(concerns.DRIFT, "%s: %s; /proc/cmdline %s" % (why(found), todo, describe(running)),
                              running)
    else:
        doc = concerns.status(concerns.NOT_APPLICABLE,
                              "%s; /proc/cmdline already has the wanted arguments (to change them, %s)"
                              % (why(found), todo), [])
    header = "kernel command line (boot loader %s, not managed by the collection)" % found.kind
    return {
        "changed": False,
        "bootloader": found.kind,
        "bootloader_evidence": found.evidence,
        "reboot_required": False,
        "cmdline_current": proc_text,
        "cmdline_next": None,
        "args_added": [],
        "args_removed": [],
        "actions": [],
        "drift": list(running),
        "concerns": {CONCERN: doc},
        "diff": {"before": "", "after": "", "before_header": header + " (before)",
                 "after_header": header + " (after)"},
        "kernel_cmdline_file": None,
    }


def status_of(backend, plan, present, absent, check_mode):
    """The ``cmdline`` concern of a driven boot loader: the next boot's configuration against the request."""
    boot = _items("bootloader", deviations(plan.before, present, absent))
    left = remaining(plan.after, present, absent)
    if plan.conflicts:
        return concerns.status(concerns.DRIFT, conflict_reason(backend.notes),
                               plan.conflicts + (boot if check_mode else left))
    if left:
        return concerns.status(concerns.DRIFT, "the next boot's command line still %s after the change; see the "
                               "items" % describe(left), boot if check_mode else left)
    return concerns.from_items(CONCERN, boot, check_mode)


def ensure(present, absent, run, bin_path, bootloader="auto", update_bootloader=True,
           check_mode=False, sysroot=None, arch=None):
    """Validate, detect the boot loader, plan and (unless check_mode) apply. Returns a result dict for the module."""
    sysroot = sysroot or Sysroot()
    present, absent = validate(present, absent, arch=arch)
    proc_text = read_proc_cmdline(sysroot)
    proc_tokens = split_cmdline(proc_text)
    running = _items("running", deviations(proc_tokens, present, absent))
    found = detect(sysroot, bin_path, bootloader, update_bootloader)
    if not found.driven:
        return not_driven(found, sysroot, proc_text, running)
    # detect() made sure a driven GRUB has its update tool when update_bootloader is set
    backend = backend_for(found, sysroot, run, bin_path)
    plan = backend.plan(present, absent)
    drift = _items("bootloader", deviations(plan.before, present, absent)) + plan.conflicts + running
    kc = getattr(plan, "kernel_cmdline", None)
    if kc:
        # EL: kernels installed later get their BLS entry from /etc/kernel/cmdline
        drift += _items("kernel_cmdline_file", deviations(kc["before"] or [], present, absent))
    if plan.changed and not check_mode:
        if isinstance(backend, GrubbyBackend):
            backend.apply(plan, present, absent)
        else:
            backend.apply(plan, update_bootloader=update_bootloader)
    if isinstance(backend, GrubbyBackend) and getattr(plan, "root", None):
        cmdline_next = join_kernel(["root=%s" % plan.root] + plan.after)
    else:
        cmdline_next = join_kernel(plan.after)
    return {
        "changed": plan.changed,
        "bootloader": found.kind,
        "bootloader_evidence": found.evidence,
        "reboot_required": reboot_required(proc_tokens, present, absent, plan.after),
        "cmdline_current": proc_text,
        "cmdline_next": cmdline_next,
        "args_added": plan.added,
        "args_removed": plan.removed,
        "actions": plan.actions,
        "drift": drift,
        "concerns": {CONCERN: status_of(backend, plan, present, absent, check_mode)},
        "diff": plan.diff,
        "kernel_cmdline_file": kc,
    }
