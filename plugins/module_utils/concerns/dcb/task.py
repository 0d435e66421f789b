# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCB on the rails (trust, DSCP map, PFC, ETS): the body of the ``dcb_qos`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx as dcbx_mode
from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired_state
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl.manage import validate_ifname
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str", required=True),
    dscp_map=dict(type="list", elements="dict", options=dict(
        dscp=dict(type="int", required=True),
        priority=dict(type="int", required=True),
    )),
    pfc_priorities=dict(type="list", elements="int", default=[3]),
    trust=dict(type="str", choices=["dscp", "pcp"], default="dscp"),
    other_app_entries=dict(type="str", choices=list(dcb.OTHER_APP_CHOICES), default=dcb.DEFAULT_OTHER_APP),
    dcbx=dict(type="str", choices=list(dcb.DCBX_CHOICES), default=dcb.DEFAULT_DCBX),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    ets=dict(type="dict", options=dict(
        tc_tsa=dict(type="list", elements="str", required=True),
        tc_bw=dict(type="list", elements="int", required=True),
        prio_tc=dict(type="list", elements="int", required=True),
    )),
)


def make_runner(module, binary):
    """run(argv): ``argv[0]`` (``dcb``) is ``binary``, looked up once by the caller."""
    run = CommandRunner(module)
    return lambda argv: run([binary] + list(argv[1:]))


def forget(module, sysroot):
    """state=absent: remove the rails from the boot-time record (the applier no longer re-applies DCB to them); their
    runtime DCB is left as it is. A rail that no longer exists can be removed."""
    rails = module.params["rails"]
    try:
        if not rails:
            raise ValueError("rails must list at least one network interface")
        for r in rails:
            validate_ifname(r)
    except ValueError as e:
        module.fail_json(msg=str(e), concerns={"dcb": concerns.error("dcb", str(e))})
    with nodelock.for_module(module, sysroot, "dcb_qos", ("dcb",)):
        try:
            before, after, item = state_store.record_with_drift(sysroot, "dcb", None, module.check_mode, merge=True,
                                                                removed=rails)
        except (ValueError, OSError, IOError) as e:
            msg = "removing rails from the DCB record failed: %s" % e
            module.fail_json(msg=msg, concerns={"dcb": concerns.error("dcb", msg)})
    drift = [item] if item else []
    out = dict(changed=bool(item), rails=[], results=[], drift=drift, commands=[], dcb_version=None,
               state_file=state_store.STATE_FILE, concerns={"dcb": concerns.from_items("dcb", drift,
                                                                                       module.check_mode)})
    if module._diff:
        out["diff"] = [dict(before=before, after=after, before_header=state_store.STATE_FILE,
                            after_header=state_store.STATE_FILE)]
    return out


def run(module, sysroot=None):
    """Validate, plan and (unless check mode) apply DCB on every rail, and record it for the boot-time applier."""
    p = module.params
    sysroot = sysroot or Sysroot()
    if p.get("state") == "absent":
        return forget(module, sysroot)
    desired = {"dscp_map": p["dscp_map"], "pfc_priorities": p["pfc_priorities"],
               "trust": p["trust"], "ets": p["ets"]}
    # other_app_entries goes to apply_dcb; the recorded state (state.py) does not hold it yet
    want = dict(desired, other_app_entries=p["other_app_entries"], dcbx=p["dcbx"])
    conflicts = desired_state.contradictions(
        {"trust": p["trust"], "pfc_priorities": p["pfc_priorities"],
         "dscp_map": p["dscp_map"] if p["dscp_map"] is not None else
         (dcb.DEFAULT_DSCP_MAP if p["trust"] == "dscp" else [])})
    if conflicts:
        msg = "; ".join(conflicts)
        module.fail_json(msg=msg, concerns={"dcb": concerns.error("dcb", msg)})
    try:
        dcb.normalize_desired(want)
        dcb.validate_rails(sysroot, p["rails"])
    except dcb.DcbValidationError as e:
        module.fail_json(msg=str(e), concerns={"dcb": concerns.error("dcb", str(e))})

    binary = module.get_bin_path("dcb")
    if binary is None:
        msg = "the dcb command (iproute2 >= 5.12) was not found in PATH; install iproute2"
        module.fail_json(msg=msg, concerns={"dcb": concerns.error("dcb", msg)})

    # one writer of node state at a time (nodelock.py): held from the read of the rails through the read-back
    # and the record, so a concurrent run or the boot-time applier cannot interleave its commands
    with nodelock.for_module(module, sysroot, "dcb_qos", ("dcb",)):
        try:
            res = dcb.apply_dcb(make_runner(module, binary), p["rails"], want, module.check_mode,
                                sysroot=sysroot)
        except dcb.DcbValidationError as e:
            module.fail_json(msg=str(e), concerns={"dcb": concerns.error("dcb", str(e))})
        except dcb.DcbError as e:
            msg = "DCB configuration failed: %s" % e
            module.fail_json(msg=msg, concerns={"dcb": concerns.error("dcb", msg)})

        # the boot-time applier re-applies what is recorded here (DCB is lost at reboot and driver reload); a rail
        # that failed keeps what was recorded for it
        # merged per rail: the rails this run does not name keep their record (removal is state=absent)
        failed = results.names(res["results"], results.FAILED)
        section = dict(desired, rails=p["rails"])
        out = dict(changed=res["changed"], rails=res["rails"], results=res["results"], drift=list(res["drift"]),
                   commands=res["commands"], dcb_version=res["dcb_version"], state_file=state_store.STATE_FILE)
        try:
            st_before, st_after, st_item = state_store.record_with_drift(sysroot, "dcb", section, module.check_mode,
                                                                         keep=failed, merge=True)
        except (ValueError, OSError, IOError) as e:
            msg = "recording the DCB state for the boot-time applier failed: %s" % e
            module.fail_json(msg=msg, concerns={"dcb": concerns.error("dcb", msg, items=results.annotate(
                out["drift"], res["results"]))}, **out)
    if st_item:
        out["drift"].append(st_item)
    out["changed"] = out["changed"] or bool(st_item)
    # a host lldpad can rewrite the rails' DCB: reported (drift the module does not fix), never silently fought
    agent = dcbx_mode.lldpad(sysroot)
    out["lldpad"] = agent
    if agent:
        out["drift"].append(dcbx_mode.lldpad_item(agent))
    if module._diff:
        out["diff"] = [dict(before=dcb.diff_text(res["rails"], "before"),
                            after=dcb.diff_text(res["rails"], "after"),
                            before_header="dcb (runtime)", after_header="dcb (runtime)"),
                       dict(before=st_before, after=st_after, before_header=state_store.STATE_FILE,
                            after_header=state_store.STATE_FILE)]
    if failed:
        msg = results.failure_message("DCB configuration", "rail(s)", res["results"])
        out["concerns"] = {"dcb": concerns.error("dcb", msg, items=results.annotate(out["drift"], res["results"]))}
        module.fail_json(msg=msg, **out)
    doc = concerns.from_items("dcb", [d for d in out["drift"] if d["key"] != dcbx_mode.LLDPAD], module.check_mode)
    if agent:
        extra = dict((k, v) for k, v in doc.items() if k not in ("status", "reason", "items"))
        doc = concerns.status(concerns.DRIFT, "; ".join([dcbx_mode.lldpad_reason(agent)]
                                                        + ([doc["reason"]] if doc.get("reason") else [])),
                              doc["items"] + [dcbx_mode.lldpad_item(agent)], **extra)
    out["concerns"] = {"dcb": doc}
    return out
