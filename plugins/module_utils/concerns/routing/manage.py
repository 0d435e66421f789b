# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-rail source routing for rails that share one flat subnet.

Without it the kernel sends every reply out of the lowest-metric route of the subnet, i.e.
one rail. For each rail ``i`` (in the order given) the collection owns routing table
``table_base + i`` holding the rail's connected subnet route (``src`` = the rail address,
``scope link``) and, when a gateway is given, a default route through that rail; and one
rule ``from <rail address>/32 lookup <table>`` at a configurable priority.

Plan and apply work on normalised netlink dumps (plain dicts), so the plan is unit-tested
with fake dumps. ``IPRoute`` (pyroute2) is injected by the caller.

Persistence: the desired state is recorded in ``/etc/gpufabric/routing.json``
(``{"version": 1, "table_base", "rule_priority", "rails": [{"rail", "table", "address",
"prefixlen", "gateway"}]}``). The boot-time applier reads it with :func:`load_state`,
turns it into the desired routes and rules with :func:`desired_from_state` and calls
:func:`apply` with the same plan code. Tables of a previous state that are no longer
desired are emptied (their rules removed), so removing a rail cleans up after it.
Plain Python: no Ansible imports. This file is private to the collection: no stable API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

try:
    import ipaddress
except ImportError:  # pragma: no cover - Python 3 always has it
    ipaddress = None

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl

STATE_FILE = "/etc/gpufabric/routing.json"
STATE_VERSION = 1
DEFAULT_TABLE_BASE = 100
DEFAULT_RULE_PRIORITY = 1000
RESERVED_TABLES = (0, 253, 254, 255)
SCOPE_UNIVERSE = 0
SCOPE_LINK = 253
RTPROT_STATIC = 4
FR_ACT_TO_TBL = 1


class RoutingError(Exception):
    """A failure phrased for a platform engineer."""


def validate_table_base(base, count):
    """Tables base..base+count-1 must avoid 0/253/254/255 and fit in 32 bits."""
    if isinstance(base, bool) or not isinstance(base, int):
        raise ValueError("routing_table_base must be an integer (got %r)" % (base,))
    last = base + count - 1
    if base < 1 or last > 0xFFFFFFFF:
        raise ValueError("routing_table_base %d: tables %d..%d must lie in 1..4294967295" % (base, base, last))
    clash = [t for t in RESERVED_TABLES if base <= t <= last]
    if clash:
        raise ValueError("routing_table_base %d: tables %d..%d would include reserved table(s) %s "
                         "(253 default, 254 main, 255 local)" % (base, base, last, ", ".join(str(c) for c in clash)))
    return base


def validate_priority(priority):
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 32765:
        raise ValueError("routing_rule_priority must be 1..32765 (0 is the local rule, 32766/32767 main/default; "
                         "got %r)" % (priority,))
    return priority


def desired_tables(rail_addrs, table_base, gateways=None):
    """One entry per rail: {"rail","table","address","prefixlen","network","gateway"}.

    ``rail_addrs``: ordered list of (rail, "a.b.c.d", prefixlen). ``gateways``: {rail: ip}.
    """
    gateways = dict(gateways or {})
    unknown = sorted(set(gateways) - set(r for r, _a, _p in rail_addrs))
    if unknown:
        raise ValueError("routing_gateways names rail(s) that are not managed: %s" % ", ".join(unknown))
    validate_table_base(table_base, len(rail_addrs))
    out = []
    for i, (rail, addr, plen) in enumerate(rail_addrs):
        iface = ipaddress.ip_interface(u"%s/%d" % (addr, plen))
        gw = gateways.get(rail)
        if gw:
            try:
                gw_ip = ipaddress.ip_address(u"%s" % gw)
            except ValueError:
                raise ValueError("gateway %r of rail %s is not an IPv4 address" % (gw, rail))
            if gw_ip.version != 4 or gw_ip not in iface.network:
                raise ValueError("gateway %s of rail %s is not inside the rail's subnet %s" % (gw, rail, iface.network))
            gw = str(gw_ip)
        out.append({"rail": rail, "table": table_base + i, "address": str(iface.ip), "prefixlen": plen,
                    "network": str(iface.network.network_address), "gateway": gw or None})
    return out


def desired_routes_rules(tables, priority):
    """(routes, rules) as normalised dicts (see normalise_route / normalise_rule)."""
    routes = []
    rules = []
    for t in tables:
        routes.append({"table": t["table"], "dst": t["network"], "dst_len": t["prefixlen"], "oif": t["rail"],
                       "gateway": None, "prefsrc": t["address"], "scope": SCOPE_LINK})
        if t.get("gateway"):
            routes.append({"table": t["table"], "dst": "0.0.0.0", "dst_len": 0, "oif": t["rail"],
                           "gateway": t["gateway"], "prefsrc": t["address"], "scope": SCOPE_UNIVERSE})
        rules.append({"src": t["address"], "src_len": 32, "table": t["table"], "priority": priority})
    return routes, rules


def _route_key(r):
    return (r["table"], r["dst"] or "0.0.0.0", r["dst_len"], r["oif"], r.get("gateway"), r.get("prefsrc"),
            r.get("scope"))


def _rule_key(r):
    return (r.get("src"), r.get("src_len"), r["table"], r.get("priority"))


def route_text(r):
    s = "%s/%d" % (r["dst"] or "0.0.0.0", r["dst_len"])
    if r["dst_len"] == 0:
        s = "default"
    if r.get("gateway"):
        s += " via %s" % r["gateway"]
    s += " dev %s" % r["oif"]
    if r.get("prefsrc"):
        s += " src %s" % r["prefsrc"]
    if r.get("scope") == SCOPE_LINK:
        s += " scope link"
    return "%s table %d" % (s, r["table"])


def rule_text(r):
    src = "all" if not r.get("src") else "%s/%d" % (r["src"], r.get("src_len") or 32)
    return "from %s lookup %d priority %s" % (src, r["table"], r.get("priority"))


def plan(desired_routes, desired_rules, current_routes, current_rules, managed_tables):
    """Compare desired with current (normalised dumps). Tables in ``managed_tables`` are owned:
    anything in them, or any rule pointing at them, that is not desired is removed."""
    managed = set(managed_tables)
    want_routes = dict((_route_key(r), r) for r in desired_routes)
    want_rules = dict((_rule_key(r), r) for r in desired_rules)
    have_routes = dict((_route_key(r), r) for r in current_routes if r["table"] in managed)
    have_rules = dict((_rule_key(r), r) for r in current_rules if r["table"] in managed)
    return {
        "del_rules": [have_rules[k] for k in sorted(have_rules, key=str) if k not in want_rules],
        "del_routes": [have_routes[k] for k in sorted(have_routes, key=str) if k not in want_routes],
        "add_routes": [want_routes[k] for k in sorted(want_routes, key=str) if k not in have_routes],
        "add_rules": [want_rules[k] for k in sorted(want_rules, key=str) if k not in have_rules],
    }


def plan_drift(p):
    drift = []
    for r in p["add_routes"]:
        drift.append({"concern": "routing", "object": r["oif"], "key": "route " + route_text(r),
                      "current": "absent", "desired": "present"})
    for r in p["del_routes"]:
        drift.append({"concern": "routing", "object": r["oif"] or "table %d" % r["table"],
                      "key": "route " + route_text(r), "current": "present", "desired": "absent"})
    for r in p["add_rules"]:
        drift.append({"concern": "routing", "object": "table %d" % r["table"], "key": "rule " + rule_text(r),
                      "current": "absent", "desired": "present"})
    for r in p["del_rules"]:
        drift.append({"concern": "routing", "object": "table %d" % r["table"], "key": "rule " + rule_text(r),
                      "current": "present", "desired": "absent"})
    return drift


def plan_empty(p):
    return not any(p[k] for k in ("del_rules", "del_routes", "add_routes", "add_rules"))


# --- netlink (pyroute2) --------------------------------------------------------------------------

def _attr(msg, name):
    try:
        return msg.get_attr(name)
    except AttributeError:
        return None


def normalise_route(msg, ifnames):
    """pyroute2 rtmsg -> dict with the table from RTA_TABLE (tables > 255) and the oif as a name."""
    table = _attr(msg, "RTA_TABLE")
    if table is None:
        table = msg["table"]
    oif = _attr(msg, "RTA_OIF")
    return {"table": table, "dst": _attr(msg, "RTA_DST") or "0.0.0.0", "dst_len": msg["dst_len"],
            "oif": ifnames.get(oif, str(oif) if oif is not None else None), "gateway": _attr(msg, "RTA_GATEWAY"),
            "prefsrc": _attr(msg, "RTA_PREFSRC"), "scope": msg["scope"]}


def normalise_rule(msg):
    table = _attr(msg, "FRA_TABLE")
    if table is None:
        table = msg["table"]
    return {"src": _attr(msg, "FRA_SRC"), "src_len": msg["src_len"], "table": table,
            "priority": _attr(msg, "FRA_PRIORITY"), "action": msg["action"]}


def link_maps(ipr):
    """({name: index}, {index: name}) of the namespace the IPRoute socket lives in."""
    by_name = {}
    for link in ipr.get_links():
        by_name[_attr(link, "IFLA_IFNAME")] = link["index"]
    return by_name, dict((v, k) for k, v in by_name.items())


def rail_ipv4(ipr, rails, by_name=None):
    """[(rail, address, prefixlen)] using each rail's first primary IPv4 address; RoutingError names the rail."""
    import socket   # with pyroute2 only: not a cost of every start of the node-side check
    if by_name is None:
        by_name = link_maps(ipr)[0]
    out = []
    for rail in rails:
        if rail not in by_name:
            raise RoutingError("rail %s is not a network interface in this network namespace" % rail)
        chosen = None
        for msg in ipr.get_addr(index=by_name[rail], family=socket.AF_INET):
            flags = _attr(msg, "IFA_FLAGS")
            if flags is None:
                flags = msg["flags"]
            if flags & 0x01:  # IFA_F_SECONDARY
                continue
            # IFA_LOCAL is this end; IFA_ADDRESS is the peer on a point-to-point address (include/uapi/linux/if_addr.h)
            chosen = (rail, _attr(msg, "IFA_LOCAL") or _attr(msg, "IFA_ADDRESS"), msg["prefixlen"])
            break
        if chosen is None:
            raise RoutingError("rail %s has no IPv4 address: per-rail routing needs one (ip -4 addr show dev %s)"
                               % (rail, rail))
        out.append(chosen)
    return out


def dump(ipr, managed_tables, ifnames):
    """(routes, rules) of the managed tables, normalised."""
    import socket   # with pyroute2 only
    managed = set(managed_tables)
    routes = []
    for msg in ipr.get_routes(family=socket.AF_INET):
        r = normalise_route(msg, ifnames)
        if r["table"] in managed:
            routes.append(r)
    rules = []
    for msg in ipr.get_rules(family=socket.AF_INET):
        r = normalise_rule(msg)
        if r["table"] in managed and r["action"] == FR_ACT_TO_TBL:
            rules.append(r)
    return routes, rules


def _route_args(r, by_name):
    args = {"dst": "%s/%d" % (r["dst"] or "0.0.0.0", r["dst_len"]), "table": r["table"], "scope": r["scope"]}
    if r.get("oif") is not None:
        if r["oif"] in by_name:
            args["oif"] = by_name[r["oif"]]
        elif str(r["oif"]).isdigit():
            args["oif"] = int(r["oif"])
    if r.get("gateway"):
        args["gateway"] = r["gateway"]
    if r.get("prefsrc"):
        args["prefsrc"] = r["prefsrc"]
    return args


def execute(ipr, p, by_name):
    """Apply a plan: delete stale rules and routes first (a changed route has the same key), then add."""
    done = []
    for r in p["del_rules"]:
        ipr.rule("del", src=r["src"], src_len=r["src_len"], table=r["table"], priority=r["priority"])
        done.append("del rule " + rule_text(r))
    for r in p["del_routes"]:
        ipr.route("del", **_route_args(r, by_name))
        done.append("del route " + route_text(r))
    for r in p["add_routes"]:
        if r["oif"] not in by_name:
            raise RoutingError("rail %s disappeared while routing was applied" % r["oif"])
        args = _route_args(r, by_name)
        args["proto"] = RTPROT_STATIC
        ipr.route("add", **args)
        done.append("add route " + route_text(r))
    for r in p["add_rules"]:
        ipr.rule("add", src=r["src"], src_len=r["src_len"], table=r["table"], priority=r["priority"])
        done.append("add rule " + rule_text(r))
    return done


# --- state file ----------------------------------------------------------------------------------

def render_state(tables, table_base, priority):
    state = {"version": STATE_VERSION, "table_base": table_base, "rule_priority": priority,
             "rails": [dict((k, t[k]) for k in ("rail", "table", "address", "prefixlen", "gateway"))
                       for t in tables]}
    return json.dumps(state, indent=2, sort_keys=True) + "\n"


def load_state(sysroot, path=STATE_FILE):
    """Parsed state file or None when absent; RoutingError when unreadable or of another version."""
    try:
        raw = bounded_read.read_text(sysroot.path(path))
    except (OSError, ValueError) as e:   # a link, not a regular file, over RECORD_LIMIT, not UTF-8
        raise RoutingError("cannot read %s: %s: remove it or rerun rail_sysctl with routing" % (path, e))
    if raw is None:
        return None
    try:
        state = json.loads(raw)
    except (ValueError, RecursionError) as e:   # RecursionError: nested deeper than the parser's limit
        raise RoutingError("%s is not valid JSON (%s): remove it or rerun rail_sysctl with routing" % (path, e))
    version = state.get("version") if isinstance(state, dict) else None
    if isinstance(version, bool) or version != STATE_VERSION:
        raise RoutingError("%s has an unknown format (version %r)" % (path, version))
    problem = state_problem(state)
    if problem:
        # its tables are the ones a run deletes routes and rules from: never act on a file the collection did not write
        raise RoutingError("%s is not a state file the collection wrote: %s; remove it and run the rail network "
                           "role again" % (path, problem))
    return state


def _is_int(v, low, high):
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _is_ipv4(v):
    try:
        return isinstance(v, str) and str(ipaddress.IPv4Address(u"%s" % v)) == v
    except ValueError:
        return False


def state_problem(state):
    """What makes a version-1 state document differ from what render_state writes, or None."""
    try:
        validate_priority(state.get("rule_priority"))
    except ValueError as e:
        return str(e).replace("routing_rule_priority", "rule_priority")
    rails = state.get("rails", [])
    if not isinstance(rails, list):
        return "rails must be a list"
    owner = {}
    for i, r in enumerate(rails):
        where = "rails[%d]" % i
        if not isinstance(r, dict):
            return "%s must be an object" % where
        table = r.get("table")
        if not _is_int(table, 0, 0xFFFFFFFF):
            return "%s.table must be an integer in 1..4294967295 (got %r)" % (where, table)
        if table in RESERVED_TABLES:
            return "%s.table %d is reserved (253 default, 254 main, 255 local)" % (where, table)
        if table in owner:
            return "%s.table %d is also %s's" % (where, table, owner[table])
        owner[table] = where
        try:
            sysctl.validate_ifname(r.get("rail"))   # the rule the rails were recorded under
        except ValueError:
            return "%s.rail must be an interface name (got %r)" % (where, r.get("rail"))
        if not _is_ipv4(r.get("address")):
            return "%s.address must be an IPv4 address (got %r)" % (where, r.get("address"))
        if not _is_int(r.get("prefixlen"), 0, 32):
            return "%s.prefixlen must be an integer in 0..32 (got %r)" % (where, r.get("prefixlen"))
        if r.get("gateway") is not None and not _is_ipv4(r.get("gateway")):
            return "%s.gateway must be an IPv4 address or null (got %r)" % (where, r.get("gateway"))
    return None


def desired_from_state(state):
    """Tables (see desired_tables) from a loaded state file."""
    tables = []
    for r in state.get("rails", []):
        iface = ipaddress.ip_interface(u"%s/%d" % (r["address"], r["prefixlen"]))
        tables.append({"rail": r["rail"], "table": r["table"], "address": r["address"], "prefixlen": r["prefixlen"],
                       "network": str(iface.network.network_address), "gateway": r.get("gateway")})
    return tables


def apply(ipr, tables, priority, check_mode, previous_tables=()):
    """Plan and (unless check mode) apply. Returns {"changed","plan","drift","actions"}."""
    by_name, by_index = link_maps(ipr)
    managed = set(t["table"] for t in tables) | set(previous_tables)
    want_routes, want_rules = desired_routes_rules(tables, priority)
    cur_routes, cur_rules = dump(ipr, managed, by_index)
    p = plan(want_routes, want_rules, cur_routes, cur_rules, managed)
    actions = []
    if not check_mode and not plan_empty(p):
        actions = execute(ipr, p, by_name)
    return {"changed": not plan_empty(p), "plan": p, "drift": plan_drift(p), "actions": actions}


def manage(sysroot, ipr, rails, table_base, priority, gateways, check_mode, path=STATE_FILE):
    """Module entry point: addresses from netlink, plan, apply, record the state file."""
    validate_priority(priority)
    validate_table_base(table_base, len(rails))
    previous = load_state(sysroot, path)   # before netlink: a file that is refused stops the run untouched
    by_name = link_maps(ipr)[0]
    addrs = rail_ipv4(ipr, rails, by_name)
    tables = desired_tables(addrs, table_base, gateways)
    prev_tables = [r["table"] for r in (previous or {}).get("rails", [])]
    res = apply(ipr, tables, priority, check_mode, prev_tables)
    content = render_state(tables, table_base, priority)
    before = sysroot.read_raw(path, None)
    file_changed = before != content
    if file_changed and not check_mode:
        sysroot.write_file_atomic(path, content, 0o644)
    if file_changed:
        res["drift"].append({"concern": "routing", "object": path, "key": "content",
                             "current": "differs" if before else "missing", "desired": "managed"})
    res["changed"] = res["changed"] or file_changed
    res["tables"] = tables
    res["state_file"] = {"path": path, "changed": file_changed, "before": before or "", "after": content}
    return res
