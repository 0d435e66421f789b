# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rdma_cm default RoCE ToS of the rails' RDMA devices: the body of the ``rdma_cm_tos`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str"),
    devices=dict(type="list", elements="str"),
    tos=dict(type="int", default=rdma_cm.DEFAULT_TOS),
    expected_dscp=dict(type="int"),
)

MUTUALLY_EXCLUSIVE = [("rails", "devices")]
REQUIRED_ONE_OF = [("rails", "devices")]


def make_runner(module):
    """run(argv): a program that is not installed fails the module."""
    return CommandRunner(module, required=True)


def diff_text(ports, key):
    lines = []
    for p in ports:
        v = p[key]
        lines.append("%s/%d default_roce_tos = %s\n" % (p["device"], p["port"], "unknown" if v is None else v))
    return "".join(lines)


def run(module, sysroot=None):
    """Validate, compare and (unless check mode) set default_roce_tos on every port, and record it."""
    p = module.params
    sysroot = sysroot or Sysroot()
    rail_of = {}
    try:
        tos = rdma_cm.validate_tos(p["tos"])
        expected = rdma_cm.validate_dscp(p["expected_dscp"]) if p["expected_dscp"] is not None else None
        conflicts = desired.contradictions({"tos": tos, "expected_dscp": expected})
        if conflicts:
            raise ValueError("; ".join(conflicts))
        if p["rails"] is not None:
            pairs = []
            for rail, ibdev, port in rdma_cm.rail_devices(sysroot, p["rails"]):
                pairs.append((ibdev, port))
                rail_of[(ibdev, port)] = rail
        else:
            if not p["devices"]:
                raise ValueError("devices must list at least one RDMA device")
            if len(set(p["devices"])) != len(p["devices"]):
                raise ValueError("devices lists a device twice: %s" % ", ".join(p["devices"]))
            pairs = [(d, None) for d in p["devices"]]
        pairs = rdma_cm.validate_devices_ports(sysroot, pairs)
        section = {"tos": tos}
        if p["rails"] is not None:
            section["rails"] = p["rails"]
        else:
            section["devices"] = p["devices"]
        state_store.validate_section("rdma_cm", section)
    except (ValueError, rdma_cm.RdmaCmError, rdma_cm.RailError) as e:
        module.fail_json(msg=str(e), concerns={"rdma_cm": concerns.error("rdma_cm", str(e))})

    for w in rdma_cm.tos_warnings(tos, expected):
        module.warn(w)

    # one writer of node state at a time (nodelock.py): from the read of the ports through the record
    with nodelock.for_module(module, sysroot, "rdma_cm_tos", ("rdma_cm",)):
        try:
            res = rdma_cm.apply_tos(sysroot, pairs, tos, module.check_mode, run=make_runner(module))
        except (ValueError, rdma_cm.RdmaCmError, OSError, IOError) as e:
            msg = "setting default_roce_tos failed: %s" % e
            module.fail_json(msg=msg, concerns={"rdma_cm": concerns.error("rdma_cm", msg)})

        for entry in res["ports"]:
            if (entry["device"], entry["port"]) in rail_of:
                entry["rail"] = rail_of[(entry["device"], entry["port"])]
        # a rail (or device) with a failed port keeps what state.json recorded for it
        bad_ports = set(r["object"] for r in res["results"] if r["result"] == results.FAILED)
        failed = sorted(set(e.get("rail") or e["device"] for e in res["ports"]
                            if "%s/%d" % (e["device"], e["port"]) in bad_ports))
        out = dict(changed=res["changed"], ports=res["ports"], results=res["results"], configfs=res["configfs"],
                   drift=list(res["drift"]), actions=res["actions"], state_file=state_store.STATE_FILE)
        try:
            st_before, st_after, st_item = state_store.record_with_drift(sysroot, "rdma_cm", section,
                                                                         module.check_mode, keep=failed)
        except (ValueError, OSError, IOError) as e:
            msg = "recording the ToS for the boot-time applier failed: %s" % e
            module.fail_json(msg=msg, concerns={"rdma_cm": concerns.error(
                "rdma_cm", msg, items=results.annotate(out["drift"], res["results"]))}, **out)
    if st_item:
        out["drift"].append(st_item)
    out["changed"] = out["changed"] or bool(st_item)
    if module._diff:
        out["diff"] = [dict(before=diff_text(res["ports"], "before"), after=diff_text(res["ports"], "after"),
                            before_header=rdma_cm.RDMA_CM, after_header=rdma_cm.RDMA_CM),
                       dict(before=st_before, after=st_after, before_header=state_store.STATE_FILE,
                            after_header=state_store.STATE_FILE)]
    if bad_ports:
        msg = results.failure_message("setting default_roce_tos", "port(s)", res["results"])
        out["concerns"] = {"rdma_cm": concerns.error("rdma_cm", msg, items=results.annotate(out["drift"],
                                                                                            res["results"]))}
        module.fail_json(msg=msg, **out)
    out["concerns"] = {"rdma_cm": concerns.from_items("rdma_cm", out["drift"], module.check_mode)}
    return out
