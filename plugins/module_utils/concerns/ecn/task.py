# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ECN/DCQCN on the lossless priority of the rails: the body of the ``roce_ecn`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn, host as ecn_host
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str", required=True),
    priority=dict(type="int", default=ecn.DEFAULT_PRIORITY),
    cnp_dscp=dict(type="int", default=ecn.DEFAULT_CNP_DSCP),
    cnp_priority=dict(type="int", default=ecn.DEFAULT_CNP_PRIORITY),
)


def diff_text(rails, key):
    lines = []
    for r in rails:
        v = r.get(key) or {}
        for k in sorted(v):
            if k != "source":
                lines.append("%s %s = %s\n" % (r["rail"], k, "not exposed" if v[k] is None else v[k]))
        if not v:
            lines.append("%s: %s\n" % (r["rail"], r.get("reason") or r.get("error") or "unknown"))
    return "".join(lines)


def firmware_reader(module):
    """ecn.apply_ecn's ``firmware``: the firmware's per-priority DCQCN enable through mlxconfig/mstconfig, where
    installed (read only: ``query``)."""
    run = CommandRunner(module)
    return lambda bdf, priority: ecn_host.firmware_prio(run, run.bin_path, bdf, priority)


def run(module, sysroot=None):
    """Validate, plan and (unless check mode) apply the NP/RP enables and the CNP class on every rail, and record
    them for the boot-time applier (ECN is lost at reboot and driver reload)."""
    p = module.params
    sysroot = sysroot or Sysroot()
    desired = {"priority": p["priority"], "cnp_dscp": p["cnp_dscp"], "cnp_priority": p["cnp_priority"]}
    try:
        ecn.normalize_desired(dict(desired, rails=p["rails"]))
        for r in p["rails"]:
            if not sysroot.exists("/sys/class/net/%s" % r):
                raise ValueError("rail %s does not exist (no /sys/class/net/%s)" % (r, r))
    except ValueError as e:
        module.fail_json(msg=str(e), concerns={"ecn": concerns.error("ecn", str(e))})

    section = dict(desired, rails=p["rails"])
    with nodelock.for_module(module, sysroot, "roce_ecn", ("ecn",)):
        try:
            state_store.validate_section("ecn", section)
            res = ecn.apply_ecn(sysroot, p["rails"], desired, module.check_mode, firmware_reader(module))
        except (ValueError, OSError, IOError) as e:
            msg = "ECN configuration failed: %s" % e
            module.fail_json(msg=msg, concerns={"ecn": concerns.error("ecn", msg)})
        out = dict(changed=res["changed"], rails=res["rails"], drift=list(res["drift"]), results=res["results"],
                   state_file=state_store.STATE_FILE)
        st_before = st_after = None
        if not res["errors"] and any(r["source"] for r in res["rails"]):
            try:
                st_before, st_after, st_item = state_store.record_with_drift(sysroot, "ecn", section,
                                                                             module.check_mode, merge=True)
            except (ValueError, OSError, IOError) as e:
                msg = "recording the ECN settings for the boot-time applier failed: %s" % e
                module.fail_json(msg=msg, concerns={"ecn": concerns.error("ecn", msg)}, **out)
            if st_item:
                out["drift"].append(st_item)
                out["changed"] = True
    if module._diff:
        out["diff"] = [dict(before=diff_text(res["rails"], "before"), after=diff_text(res["rails"], "after"),
                            before_header="ecn (runtime)", after_header="ecn (runtime)"),
                       dict(before=st_before or "", after=st_after or "", before_header=state_store.STATE_FILE,
                            after_header=state_store.STATE_FILE)]
    if res["errors"]:
        msg = results.failure_message("ECN configuration", "rail(s)", res["results"])
        out["concerns"] = {"ecn": concerns.error("ecn", msg, items=results.annotate(res["drift"], res["results"]))}
        module.fail_json(msg=msg, **out)
    out["concerns"] = {"ecn": ecn.status_of(dict(res, drift=out["drift"]), module.check_mode)}
    return out
