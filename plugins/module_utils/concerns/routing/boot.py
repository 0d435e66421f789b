# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``routing`` section of the boot-time record: where the routing module keeps its own state file
(``routing.json``, whose format ``routing.py`` owns); the applier loads that file and sets the per-rail tables
and rules again at boot.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing


ROUTING_STATE_FILE = routing.STATE_FILE


def _validate_routing(data):
    br.only_keys(data, "routing", ("state_file",))
    path = data.get("state_file", ROUTING_STATE_FILE)
    if not isinstance(path, str) or not path.startswith("/") or "/../" in path + "/":
        raise ValueError("routing.state_file must be an absolute path (got %r)" % (path,))
    return {"state_file": os.path.normpath(path)}


def _default_iproute():
    try:
        from pyroute2 import IPRoute
    except ImportError:
        raise routing.RoutingError("pyroute2 is not installed for %s: per-rail routing cannot be applied "
                                   "(install python3-pyroute2)" % sys.executable)
    return IPRoute()


def _apply_routing(ctx, section, ipr_factory):
    path = section["state_file"]
    try:
        st = routing.load_state(ctx.sysroot, path)
    except routing.RoutingError as e:
        ctx.error("routing", str(e))
        return
    if st is None:
        ctx.error("routing", "routing is recorded but %s does not exist: rerun the rail network role" % path)
        return
    try:
        tables = routing.desired_from_state(st)
        ipr = ipr_factory()
    except (routing.RoutingError, ValueError, KeyError) as e:
        ctx.error("routing", str(e))
        return
    try:
        def missing_now():
            try:
                have = dict((r, (a, p)) for r, a, p in routing.rail_ipv4(ipr, [t["rail"] for t in tables]))
            except routing.RoutingError as e:
                return [str(e)]
            return ["rail %s has %s/%d, recorded %s/%d" % (t["rail"], have[t["rail"]][0], have[t["rail"]][1],
                                                           t["address"], t["prefixlen"])
                    for t in tables if have[t["rail"]] != (t["address"], t["prefixlen"])]

        missing = ctx.wait(missing_now)
        if missing:
            for m in missing:
                ctx.error("routing", m)
            return
        res = routing.apply(ipr, tables, st["rule_priority"], ctx.check_mode)
    except Exception as e:  # netlink errors (pyroute2 NetlinkError and friends) are reported, not raised
        ctx.error("routing", "%s: %s" % (type(e).__name__, e))
        return
    finally:
        close = getattr(ipr, "close", None)
        if close:
            close()
    ctx.concerns["routing"] = {"changed": res["changed"]}
    ctx.drift("routing", res["drift"])


def _routing_fallback(ctx):
    """routing.json without a routing section in state.json (a record from before the section existed)."""
    if not ctx.sysroot.exists(routing.STATE_FILE):
        return
    _apply_routing(ctx, {"state_file": routing.STATE_FILE}, ctx.ipr_factory or _default_iproute)


SECTION = br.Section("routing", "routing", _validate_routing,
                     lambda ctx, section, device: _apply_routing(ctx, section, ctx.ipr_factory or _default_iproute),
                     order=70, legacy_file=routing.STATE_FILE, fallback=_routing_fallback)
