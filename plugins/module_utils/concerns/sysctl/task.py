# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ARP and rp_filter sysctls of the rails and per-rail policy routing: the body of the ``rail_sysctl`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

Plain Python: no Ansible imports (the evidence timer runs it on the node).
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str", required=True),
    arp_ignore=dict(type="int", default=1, choices=list(sysctl.ALLOWED["arp_ignore"])),
    arp_announce=dict(type="int", default=2, choices=list(sysctl.ALLOWED["arp_announce"])),
    rp_filter=dict(type="int", default=2, choices=list(sysctl.ALLOWED["rp_filter"])),
    routing=dict(type="bool", default=False),
    routing_table_base=dict(type="int", default=routing.DEFAULT_TABLE_BASE),
    routing_rule_priority=dict(type="int", default=routing.DEFAULT_RULE_PRIORITY),
    routing_gateways=dict(type="dict", default={}),
)


def missing_required_lib(library):
    """AnsibleModule's message for a Python library the node lacks (``ansible.module_utils.basic``'s words)."""
    return ("Failed to import the required Python library (%s) on %s's Python %s. Please read the module "
            "documentation and install it in the appropriate location. If the required library is installed, but "
            "Ansible is using the wrong Python interpreter, please consult the documentation on "
            "ansible_python_interpreter" % (library, os.uname().nodename, sys.executable))


def import_iproute():
    """pyroute2's IPRoute class and None; (None, traceback) without pyroute2."""
    try:
        from pyroute2 import IPRoute as iproute_class
    except ImportError:
        import traceback   # only on this failure: traceback is 3 ms of every start of the node-side check
        return None, traceback.format_exc()
    return iproute_class, None


def run(module, sysroot=None, load_iproute=None):
    """Validate, compare and (unless check mode) set the rail sysctls and the per-rail routing."""
    p = module.params
    sysroot = sysroot or Sysroot()
    load_iproute = load_iproute or import_iproute
    values = dict((k, p[k]) for k in sysctl.KEYS)
    try:
        sysctl.validate_rails(sysroot, p["rails"])
        sysctl.desired_settings(p["rails"], values)
        if p["routing"]:
            routing.validate_table_base(p["routing_table_base"], len(p["rails"]))
            routing.validate_priority(p["routing_rule_priority"])
            unknown = sorted(set(p["routing_gateways"]) - set(p["rails"]))
            if unknown:
                raise ValueError("routing_gateways names rail(s) that are not in rails: %s" % ", ".join(unknown))
        elif p["routing_gateways"]:
            raise ValueError("routing_gateways needs routing: true")
    except ValueError as e:
        fail(module, sysroot, str(e))
    iproute_class = None
    if p["routing"]:
        iproute_class, import_error = load_iproute()
        if iproute_class is None:
            fail(module, sysroot, missing_required_lib("pyroute2"), exception=import_error)

    # one writer of node state at a time (nodelock.py): from the read of addresses and sysctls through the record
    with nodelock.for_module(module, sysroot, "rail_sysctl", fail=lambda msg: fail(module, sysroot, msg)):
        ipr = None
        route_res = None
        route_error = None
        try:
            try:
                if p["routing"]:
                    # Addresses and the routing plan are read before any sysctl is written, so a rail without an
                    # address fails the task before anything is touched.
                    ipr = iproute_class()
                    addrs = routing.rail_ipv4(ipr, p["rails"])
                    routing.desired_tables(addrs, p["routing_table_base"], p["routing_gateways"])
                res = sysctl.manage(sysroot, p["rails"], values, module.check_mode)
            except (ValueError, sysctl.SysctlError, routing.RoutingError) as e:
                fail(module, sysroot, str(e))
            except Exception as e:  # netlink errors carry an errno and a message; report them in words
                import traceback
                fail(module, sysroot, "applying rail settings failed: %s" % e, exception=traceback.format_exc())
            if p["routing"]:
                # sysctls may have changed by now: a routing failure is reported with them, not instead of them
                try:
                    route_res = routing.manage(sysroot, ipr, p["rails"], p["routing_table_base"],
                                               p["routing_rule_priority"], p["routing_gateways"], module.check_mode)
                    # state.json points the boot-time applier at the routing state file.
                    route_res["recorded"] = state_store.record(sysroot, "routing", {"state_file": routing.STATE_FILE},
                                                               module.check_mode)
                    if route_res["recorded"]:
                        route_res["changed"] = True
                        route_res["drift"].append({"concern": "routing", "object": state_store.STATE_FILE,
                                                   "key": "routing", "current": "missing", "desired": "recorded"})
                except (ValueError, routing.RoutingError) as e:
                    route_error = "per-rail routing failed: %s" % e
                except Exception as e:  # netlink errors (pyroute2 NetlinkError and friends)
                    route_error = "per-rail routing failed: %s: %s" % (type(e).__name__, e)
        finally:
            if ipr is not None:
                ipr.close()

    sysctl_drift = list(res["drift"])
    out = dict(changed=res["changed"], settings=res["settings"], effective_rp_filter=res["effective_rp_filter"],
               path=res["file"]["path"], drift=list(sysctl_drift), results=res["results"])
    diffs = [dict(before=res["live_before"], after=res["live_after"], before_header=sysctl.CONF_DIR + " (live)",
                  after_header=sysctl.CONF_DIR + " (live)"),
             dict(before=res["file"]["before"], after=res["file"]["after"],
                  before_header=res["file"]["path"], after_header=res["file"]["path"])]
    msgs = []
    if res["errors"]:
        msgs.append(results.failure_message("rail sysctls", "setting(s)", res["results"]))
        status = {"sysctl": concerns.error("sysctl", msgs[0], items=results.annotate(
            sysctl_drift, res["results"], lambda i: sysctl.sysctl_key(i["object"], i["key"])))}
    else:
        status = {"sysctl": concerns.from_items("sysctl", sysctl_drift, module.check_mode)}
    if route_res is not None:
        out["changed"] = out["changed"] or route_res["changed"]
        out["drift"].extend(route_res["drift"])
        out["routing"] = dict(tables=route_res["tables"], actions=route_res["actions"],
                              state_file=route_res["state_file"]["path"])
        plan_lines = ["- " + d["key"] + "\n" for d in route_res["drift"] if d["desired"] == "absent"]
        plan_lines += ["+ " + d["key"] + "\n" for d in route_res["drift"] if d["desired"] == "present"]
        diffs.append(dict(before=route_res["state_file"]["before"], after=route_res["state_file"]["after"],
                          before_header=route_res["state_file"]["path"], after_header=route_res["state_file"]["path"]))
        if plan_lines:
            diffs.append(dict(before="", after="".join(plan_lines), before_header="netlink (routes/rules)",
                              after_header="netlink changes"))
        status["routing"] = concerns.from_items("routing", route_res["drift"], module.check_mode)
    elif route_error:
        msgs.append(route_error)
        status["routing"] = concerns.error("routing", route_error)
    else:
        status["routing"] = routing_off_status(sysroot)
    out["concerns"] = status
    if module._diff:
        out["diff"] = diffs
    if msgs:
        module.fail_json(msg="; ".join(msgs), **out)
    return out


def fail(module, sysroot, msg, **kw):
    """A failure before anything was touched: both concerns of the module are in error."""
    module.fail_json(msg=msg, concerns={"sysctl": concerns.error("sysctl", msg),
                                        "routing": concerns.error("routing", msg) if module.params["routing"]
                                        else routing_off_status(sysroot)}, **kw)


def routing_off_status(sysroot):
    """routing: false. not_applicable when nothing of the collection's per-rail routing is left on the node;
    drift when an earlier run's routing is still recorded (the boot-time applier re-applies it, and this module
    leaves existing routing alone)."""
    left = []
    if sysroot.exists(routing.STATE_FILE):
        left.append(routing.STATE_FILE)
    try:
        if "routing" in state_store.load(sysroot):
            left.append("%s (routing section)" % state_store.STATE_FILE)
    except state_store.StateError:
        pass
    if not left:
        return concerns.status(concerns.NOT_APPLICABLE, "per-rail routing is off (routing: false) and nothing of "
                               "an earlier run is left to remove")
    return concerns.status(
        concerns.DRIFT, "per-rail routing is off (routing: false) but %s is still recorded: the boot-time applier "
        "re-applies those tables and rules, and this module leaves existing routing alone" % " and ".join(left),
        [{"concern": "routing", "object": obj.split(" ")[0], "key": "recorded routing", "current": "present",
          "desired": "absent"} for obj in left])
