# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS on the GPU<->NIC path bridges: the body of the ``pcie_acs`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ARGUMENT_SPEC = dict(
    clear=dict(type="list", elements="str", default=list(acs.DEFAULT_CLEAR)),
    pairs=dict(type="str", choices=["paired", "all"], default="paired"),
    endpoints=dict(type="list", elements="dict", options=dict(
        gpu=dict(type="str", required=True),
        nic=dict(type="str", required=True),
    )),
    bridges=dict(type="list", elements="str"),
    persist=dict(type="str", choices=["kernel_cmdline", "applier", "none"], default="kernel_cmdline"),
)


def run(module, sysroot=None):
    """Select the path bridges, clear their ACS bits (check mode: compare only), keep acs.json in step."""
    p = module.params
    sysroot = sysroot or Sysroot()
    scan = topology.PciScan.of(sysroot)
    try:
        clear_names, mask = acs.validate_clear(p["clear"])
        sel = acs.select(sysroot, endpoints=p["endpoints"], bridges=p["bridges"], pairs=p["pairs"], scan=scan)
    except (acs.AcsError, pci.PciError) as e:
        module.fail_json(msg=str(e), concerns={"acs": concerns.error("acs", str(e))})

    bdfs = sel.sorted()
    if not bdfs:
        module.warn("no GPU<->NIC path bridges found (no GPU or no RDMA NIC discovered): nothing to do")
    for w in acs.persist_warnings(clear_names, p["persist"]):
        module.warn(w)

    # one writer of node state at a time (nodelock.py): from the read of the bridges through acs.json
    with nodelock.for_module(module, sysroot, "pcie_acs", ("acs",)):
        res = acs.apply_acs(sysroot, bdfs, mask, check_mode=module.check_mode, scan=scan, all_or_nothing=True)
        for entry in res["bridges"]:
            entry["pairs"] = sel.pairs.get(entry["bdf"], [])
        state = {"path": acs.STATE_FILE}
        out = dict(
            changed=res["changed"],
            bridges=res["bridges"],
            results=res["results"],
            pairs=[list(x) for x in sel.endpoint_pairs],
            kernel_arg=acs.kernel_arg(res["bridges"]) if p["persist"] == "kernel_cmdline" else None,
            state_file=state,
            off_path_clear=acs.off_path_clear(sysroot, bdfs, scan=scan),
            drift=list(res["drift"]),
        )
        try:
            had = sysroot.exists(acs.STATE_FILE)
            if p["persist"] == "applier":
                # a bridge that failed keeps what acs.json recorded for it
                try:
                    previous = acs.read_state(sysroot)
                except acs.AcsError:
                    previous = None
                wrote = acs.write_state(sysroot, acs.state_document(res["bridges"], clear_names, previous),
                                        module.check_mode)
                state["action"] = ("would be written" if module.check_mode else "written") if wrote else "unchanged"
            else:
                wrote = acs.remove_state(sysroot, module.check_mode)
                state["action"] = ("would be removed" if module.check_mode else "removed") if wrote else "absent"
        except (IOError, OSError) as e:
            msg = "cannot update %s: %s" % (acs.STATE_FILE, e)
            module.fail_json(msg=msg, concerns={"acs": concerns.error("acs", msg, items=results.annotate(
                out["drift"], res["results"]))}, **out)
    if wrote:
        out["drift"].append({"concern": "acs", "object": acs.STATE_FILE, "key": "acs",
                             "current": "differs" if had else "missing",
                             "desired": "recorded" if p["persist"] == "applier" else "absent"})
    out["changed"] = out["changed"] or wrote
    if module._diff:
        before = acs.diff_lines(res["bridges"], "ctrl_before")
        after = acs.diff_lines(res["bridges"], "ctrl_after")
        out["diff"] = dict(before=before, after=after, before_header="ACS control (before)",
                           after_header="ACS control (after)")
    if res["errors"]:
        msg = results.failure_message("clearing ACS", "bridge(s)", res["results"])
        out["concerns"] = {"acs": concerns.error("acs", msg, items=results.annotate(out["drift"], res["results"]))}
        module.fail_json(msg=msg, **out)
    if not bdfs and not out["drift"]:
        # nothing to manage is not "as desired": say why
        why = ("no GPU<->NIC pair was discovered (no RDMA NIC paired with a GPU), so there is no path bridge to manage"
               if not sel.endpoint_pairs else "the GPU<->NIC paths cross no PCIe bridge: there is no ACS to clear")
        out["concerns"] = {"acs": concerns.status(concerns.NOT_APPLICABLE, why)}
    else:
        out["concerns"] = {"acs": concerns.from_items("acs", out["drift"], module.check_mode)}
    return out
