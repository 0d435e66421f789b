# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MTU of the rails, live and persisted, and their RDMA ports' active MTU: the body of the ``rail_mtu`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu_live
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    rails=dict(type="list", elements="str", required=True),
    mtu=dict(type="int", default=mtu_live.DEFAULT_MTU),
    persist=dict(type="bool", default=True),
)


def make_runner(module):
    """run(argv) -> (rc, out, err): argv[0] through get_bin_path, C locale; 127 when it is not installed."""
    return CommandRunner(module)


def fail(module, msg, **kw):
    module.fail_json(msg=msg, concerns={"mtu": concerns.error("mtu", msg)}, **kw)


def run(module, sysroot=None):
    """Validate, plan and (unless check mode) set and persist the MTU of every rail."""
    p = module.params
    try:
        mtu_live.validate_rails(p["rails"])
        mtu_live.validate_mtu(p["mtu"], "mtu (role variable rail_network_mtu)")
    except ValueError as e:
        fail(module, str(e))
    if module.get_bin_path("ip") is None:
        fail(module, "the ip command (iproute2) was not found in PATH; install iproute2")
    sysroot = sysroot or Sysroot()
    run_cmd = make_runner(module)
    # a rail that does not exist or cannot take the MTU fails before the node lock is taken or anything is touched
    try:
        mtu_live.plan(mtu_live.read_links(run_cmd), p["rails"], p["mtu"])
    except ValueError as e:
        fail(module, str(e))
    except mtu_live.MtuError as e:
        fail(module, "rail MTU: %s" % e)
    with nodelock.for_module(module, sysroot, "rail_mtu", fail=lambda msg: fail(module, msg)):
        try:
            res = mtu_persist.manage(sysroot, run_cmd, p["rails"], p["mtu"], module.check_mode, p["persist"])
        except ValueError as e:
            fail(module, str(e))
        except (mtu_live.MtuError, state_store.StateError, OSError, IOError) as e:
            fail(module, "rail MTU: %s" % e)
    out = dict(changed=res["changed"], mtu=res["mtu"], rdma_ports=res["ports"],
               warnings_mtu=[i["note"] for i in res["port_items"]], results=res["results"],
               files=[dict(path=f["path"], changed=f["changed"]) for f in res["files"]],
               drift=res["drift"] + [dict((k, i[k]) for k in concerns.ITEM_KEYS) for i in res["port_items"]],
               concerns={"mtu": res["status"]})
    if p["persist"]:
        out["owners"] = res["owners"]
    for line in out["warnings_mtu"]:
        module.warn(line)
    if module._diff:
        diffs = [dict(before="".join("%s mtu %s\n" % (n, v) for n, v in sorted(res["before"].items())),
                      after="".join("%s mtu %s\n" % (n, v) for n, v in sorted(res["mtu"].items())),
                      before_header="ip link (live)", after_header="ip link (live)")]
        diffs.extend(dict(before=f["before"], after=f["after"], before_header=f["path"], after_header=f["path"])
                     for f in res["files"] if f["changed"])
        out["diff"] = diffs
    if res["status"]["status"] == concerns.ERROR:
        module.fail_json(msg=res["status"]["reason"], **out)
    return out
