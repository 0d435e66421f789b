# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""routing: what its own tests left unseen (make mutation's survivors): every refusal word for word, the bounds
of tables and priorities, the netlink messages normalised field by field (fallbacks included), plan keys that differ
in one field only, each drift entry and action as written, the netlink calls made, and the state file as text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

INET = socket.AF_INET


class Msg(dict):
    """A netlink message: header fields by key, attributes by get_attr(), which matches the name exactly (pyroute2
    0.9 upper-cases it), so the attribute names the code asks for are checked too."""

    def __init__(self, attrs=(), **fields):
        dict.__init__(self, fields)
        self.attrs = list(attrs)

    def get_attr(self, name):
        return next((value for key, value in self.attrs if key == name), None)


class Netlink(object):
    """An IPRoute that answers from lists and records every call."""

    def __init__(self, addrs=None, routes=(), rules=()):
        self.links = {"lo": 1, "ens1np0": 5, "ens2np0": 6}
        self.addrs, self.routes, self.rules, self.calls = addrs or {}, list(routes), list(rules), []

    def get_links(self):
        self.calls.append(("get_links",))
        return [Msg([("IFLA_IFNAME", name)], index=index) for name, index in self.links.items()]

    def get_addr(self, **kw):
        self.calls.append(("get_addr", kw))
        return self.addrs.get(kw["index"], [])

    def get_routes(self, **kw):
        self.calls.append(("get_routes", kw))
        return self.routes

    def get_rules(self, **kw):
        self.calls.append(("get_rules", kw))
        return self.rules

    def route(self, cmd, **kw):
        self.calls.append(("route", cmd, kw))

    def rule(self, cmd, **kw):
        self.calls.append(("rule", cmd, kw))


def ifa(address=None, local=None, plen=16, flags=0, ifa_flags=None):
    attrs = [(k, v) for k, v in (("IFA_ADDRESS", address), ("IFA_LOCAL", local), ("IFA_FLAGS", ifa_flags))
             if v is not None]
    return Msg(attrs, prefixlen=plen, flags=flags)


def rtm(table, dst, dst_len, oif, gateway=None, prefsrc=None, scope=routing.SCOPE_LINK):
    attrs = [("RTA_TABLE", table), ("RTA_OIF", oif), ("RTA_DST", dst if dst_len else None), ("RTA_GATEWAY", gateway),
             ("RTA_PREFSRC", prefsrc)]
    return Msg([a for a in attrs if a[1] is not None], table=min(table, 252), dst_len=dst_len, scope=scope)


def frm(src, table, priority=1000, action=routing.FR_ACT_TO_TBL):
    return Msg([("FRA_TABLE", table), ("FRA_PRIORITY", priority), ("FRA_SRC", src)], table=min(table, 252),
               src_len=32, action=action)


def route(table, dst, dst_len, oif, gateway=None, prefsrc=None, scope=routing.SCOPE_LINK):
    return {"table": table, "dst": dst, "dst_len": dst_len, "oif": oif, "gateway": gateway, "prefsrc": prefsrc,
            "scope": scope}


def rule(src, table, priority=1000, src_len=32):
    return {"src": src, "src_len": src_len, "table": table, "priority": priority}


def drift(obj, key, current, desired):
    return {"concern": "routing", "object": obj, "key": key, "current": current, "desired": desired}


ADDRS = {5: [ifa("10.100.0.1", "10.100.0.1", flags=0x80, ifa_flags=0x80)],
         6: [ifa("10.100.1.1", "10.100.1.1", flags=0x80, ifa_flags=0x80)]}
GW = {"ens2np0": "10.100.255.254"}
TABLES = [
    {"rail": "ens1np0", "table": 100, "address": "10.100.0.1", "prefixlen": 16, "network": "10.100.0.0",
     "gateway": None},
    {"rail": "ens2np0", "table": 101, "address": "10.100.1.1", "prefixlen": 16, "network": "10.100.0.0",
     "gateway": "10.100.255.254"}]
R1 = route(100, "10.100.0.0", 16, "ens1np0", prefsrc="10.100.0.1")
R2 = route(101, "10.100.0.0", 16, "ens2np0", prefsrc="10.100.1.1")
R3 = route(101, "0.0.0.0", 0, "ens2np0", "10.100.255.254", "10.100.1.1", routing.SCOPE_UNIVERSE)
U1, U2 = rule("10.100.0.1", 100), rule("10.100.1.1", 101)
T1 = "route 10.100.0.0/16 dev ens1np0 src 10.100.0.1 scope link table 100"
T2 = "route 10.100.0.0/16 dev ens2np0 src 10.100.1.1 scope link table 101"
T3 = "route default via 10.100.255.254 dev ens2np0 src 10.100.1.1 table 101"
TU1, TU2 = "rule from 10.100.0.1/32 lookup 100 priority 1000", "rule from 10.100.1.1/32 lookup 101 priority 1000"
ADD1 = {"dst": "10.100.0.0/16", "table": 100, "scope": 253, "oif": 5, "prefsrc": "10.100.0.1", "proto": 4}
ADD2 = {"dst": "10.100.0.0/16", "table": 101, "scope": 253, "oif": 6, "prefsrc": "10.100.1.1", "proto": 4}
ADD3 = {"dst": "0.0.0.0/0", "table": 101, "scope": 0, "oif": 6, "gateway": "10.100.255.254", "prefsrc": "10.100.1.1",
        "proto": 4}
STATE = """{
  "rails": [
    {
      "address": "10.100.0.1",
      "gateway": null,
      "prefixlen": 16,
      "rail": "ens1np0",
      "table": 100
    },
    {
      "address": "10.100.1.1",
      "gateway": "10.100.255.254",
      "prefixlen": 16,
      "rail": "ens2np0",
      "table": 101
    }
  ],
  "rule_priority": 1000,
  "table_base": 100,
  "version": 1
}
"""
DUMPS = [("get_links",), ("get_addr", {"index": 5, "family": INET}), ("get_addr", {"index": 6, "family": INET}),
         ("get_links",), ("get_routes", {"family": INET}), ("get_rules", {"family": INET})]


# ------------------------------------------------------------------------------------------------ validation

def test_bounds_accepted():
    assert [routing.validate_table_base(b, c) for b, c in ((1, 1), (0xFFFFFFFF, 1), (246, 7), (256, 3))] == [
        1, 0xFFFFFFFF, 246, 256]
    assert [routing.validate_priority(p) for p in (1, 32765)] == [1, 32765]


@pytest.mark.parametrize("base,count,message", [
    ("100", 2, "routing_table_base must be an integer (got '100')"),
    (True, 1, "routing_table_base must be an integer (got True)"),
    (0, 8, "routing_table_base 0: tables 0..7 must lie in 1..4294967295"),
    (0xFFFFFFFF, 2, "routing_table_base 4294967295: tables 4294967295..4294967296 must lie in 1..4294967295"),
    (250, 8, "routing_table_base 250: tables 250..257 would include reserved table(s) 253, 254, 255 "
             "(253 default, 254 main, 255 local)"),
    (246, 8, "routing_table_base 246: tables 246..253 would include reserved table(s) 253 "
             "(253 default, 254 main, 255 local)"),
])
def test_table_base_refusals(base, count, message):
    with pytest.raises(ValueError) as e:
        routing.validate_table_base(base, count)
    assert str(e.value) == message


@pytest.mark.parametrize("priority,shown", [(0, "0"), (32766, "32766"), (True, "True"), ("5", "'5'")])
def test_priority_refusals(priority, shown):
    with pytest.raises(ValueError) as e:
        routing.validate_priority(priority)
    assert str(e.value) == ("routing_rule_priority must be 1..32765 (0 is the local rule, 32766/32767 main/default; "
                            "got %s)" % shown)


@pytest.mark.parametrize("gateways,message", [
    ({"ens9np0": "10.100.0.254", "ens8np0": "10.100.0.253"},
     "routing_gateways names rail(s) that are not managed: ens8np0, ens9np0"),
    ({"ens1np0": "gw"}, "gateway 'gw' of rail ens1np0 is not an IPv4 address"),
    ({"ens1np0": "10.200.0.1"}, "gateway 10.200.0.1 of rail ens1np0 is not inside the rail's subnet 10.100.0.0/16"),
])
def test_gateway_refusals(gateways, message):
    with pytest.raises(ValueError) as e:
        routing.desired_tables([("ens1np0", "10.100.0.1", 16)], 100, gateways)
    assert str(e.value) == message


def test_desired_tables_routes_and_rules_whole():
    tables = routing.desired_tables([("ens1np0", "10.100.0.1", 16), ("ens2np0", "10.100.1.1", 16)], 100, GW)
    assert tables == TABLES
    assert routing.desired_routes_rules(tables, 1000) == ([R1, R2, R3], [U1, U2])


# ------------------------------------------------------------------------------------------------ texts and args

@pytest.mark.parametrize("r,text", [
    (route(100, None, 8, "ens1np0"), "0.0.0.0/8 dev ens1np0 scope link table 100"),
    (route(100, "", 0, "ens1np0", "10.0.0.254", scope=0), "default via 10.0.0.254 dev ens1np0 table 100"),
])
def test_route_text(r, text):
    assert routing.route_text(r) == text


@pytest.mark.parametrize("r,text", [
    ({"src": None, "table": 100, "priority": 5}, "from all lookup 100 priority 5"),
    ({"src": "", "src_len": 0, "table": 100, "priority": 5}, "from all lookup 100 priority 5"),
    (rule("10.0.0.0", 100, 5, 24), "from 10.0.0.0/24 lookup 100 priority 5"),
    (rule("10.0.0.1", 100, 5, 0), "from 10.0.0.1/32 lookup 100 priority 5"),
    ({"src": "10.0.0.1", "table": 100}, "from 10.0.0.1/32 lookup 100 priority None"),
])
def test_rule_text(r, text):
    assert routing.rule_text(r) == text


@pytest.mark.parametrize("r,args", [
    (route(100, None, 0, "7", "10.0.0.254", "10.0.0.1", 0),
     {"dst": "0.0.0.0/0", "table": 100, "scope": 0, "oif": 7, "gateway": "10.0.0.254", "prefsrc": "10.0.0.1"}),
    (route(100, "10.0.0.0", 8, "ens1np0"), {"dst": "10.0.0.0/8", "table": 100, "scope": 253, "oif": 5}),
    (route(100, "10.0.0.0", 8, "gone0"), {"dst": "10.0.0.0/8", "table": 100, "scope": 253}),
    (route(100, "10.0.0.0", 8, None), {"dst": "10.0.0.0/8", "table": 100, "scope": 253}),
])
def test_route_args(r, args):
    assert routing._route_args(r, {"ens1np0": 5}) == args


# ------------------------------------------------------------------------------------------------ plan

GW_A, GW_B = route(100, "0.0.0.0", 0, "ens1np0", "10.100.0.254", scope=0), route(100, "0.0.0.0", 0, "ens1np0")


@pytest.mark.parametrize("want,have,want_rules,have_rules,expected", [
    # one field apart: gateway, scope, dst, src_len -> replaced
    ([GW_A], [route(100, "0.0.0.0", 0, "ens1np0", "10.100.0.253", scope=0)], [], [],
     {"del_rules": [], "del_routes": [route(100, "0.0.0.0", 0, "ens1np0", "10.100.0.253", scope=0)],
      "add_routes": [GW_A], "add_rules": []}),
    ([R1], [dict(R1, scope=0)], [], [], {"del_rules": [], "del_routes": [dict(R1, scope=0)], "add_routes": [R1],
                                         "add_rules": []}),
    ([R1], [dict(R1, dst="10.200.0.0")], [], [],
     {"del_rules": [], "del_routes": [dict(R1, dst="10.200.0.0")], "add_routes": [R1], "add_rules": []}),
    ([], [], [U1], [dict(U1, src_len=24)],
     {"del_rules": [dict(U1, src_len=24)], "del_routes": [], "add_routes": [], "add_rules": [U1]}),
    # a missing dst is the default route's 0.0.0.0: nothing to do
    ([GW_A], [dict(GW_A, dst=None)], [], [], {"del_rules": [], "del_routes": [], "add_routes": [], "add_rules": []}),
    # keys with None beside text in the same place still sort (deterministically)
    ([GW_B, GW_A], [], [rule(None, 100), U1], [],
     {"del_rules": [], "del_routes": [], "add_routes": [GW_A, GW_B], "add_rules": [U1, rule(None, 100)]}),
    ([], [GW_B, GW_A], [], [rule(None, 100), U1],
     {"del_rules": [U1, rule(None, 100)], "del_routes": [GW_A, GW_B], "add_routes": [], "add_rules": []}),
])
def test_plan_whole(want, have, want_rules, have_rules, expected):
    assert routing.plan(want, want_rules, have, have_rules, {100}) == expected


def test_plan_drift_every_entry():
    gone = route(102, "10.1.0.0", 16, None)
    p = {"add_routes": [R3], "del_routes": [R1, gone], "add_rules": [U1], "del_rules": [rule(None, 102, 500)]}
    assert routing.plan_drift(p) == [
        drift("ens2np0", T3, "absent", "present"),
        drift("ens1np0", T1, "present", "absent"),
        drift("table 102", "route " + routing.route_text(gone), "present", "absent"),
        drift("table 100", TU1, "absent", "present"),
        drift("table 102", "rule from all lookup 102 priority 500", "present", "absent"),
    ]


# ------------------------------------------------------------------------------------------------ netlink

@pytest.mark.parametrize("msg,expected", [
    (rtm(300, "10.100.0.0", 16, 5, "10.100.0.254", "10.100.0.1"),
     route(300, "10.100.0.0", 16, "ens1np0", "10.100.0.254", "10.100.0.1")),
    (Msg([("RTA_OIF", 7)], table=100, dst_len=0, scope=0), route(100, "0.0.0.0", 0, "7", scope=0)),
    (Msg([], table=100, dst_len=0, scope=253), route(100, "0.0.0.0", 0, None)),
])
def test_normalise_route(msg, expected):
    assert routing.normalise_route(msg, {5: "ens1np0"}) == expected


@pytest.mark.parametrize("msg,expected", [
    (frm("10.100.0.1", 300, 500), {"src": "10.100.0.1", "src_len": 32, "table": 300, "priority": 500,
                                   "action": 1}),
    (Msg([], table=100, src_len=0, action=1), {"src": None, "src_len": 0, "table": 100, "priority": None,
                                               "action": 1}),
])
def test_normalise_rule(msg, expected):
    assert routing.normalise_rule(msg) == expected


def test_link_maps_and_dump_of_managed_table_rules_only():
    assert routing.link_maps(Netlink()) == ({"lo": 1, "ens1np0": 5, "ens2np0": 6},
                                            {1: "lo", 5: "ens1np0", 6: "ens2np0"})
    ipr = Netlink(routes=[rtm(100, "10.100.0.0", 16, 5), rtm(254, "10.100.0.0", 16, 5)],
                  rules=[frm("10.100.0.1", 100), frm("10.100.0.2", 100, action=2), frm("10.100.0.3", 254)])
    assert routing.dump(ipr, [100], {5: "ens1np0"}) == (
        [route(100, "10.100.0.0", 16, "ens1np0")],
        [{"src": "10.100.0.1", "src_len": 32, "table": 100, "priority": 1000, "action": 1}])
    assert ipr.calls == [("get_routes", {"family": INET}), ("get_rules", {"family": INET})]


@pytest.mark.parametrize("addrs,address", [
    # a secondary (IFA_F_SECONDARY 0x01) before a primary with IFA_F_NODAD (0x02): skipped, not the end
    ([ifa("10.0.0.9", "10.0.0.9", 24, 0x01, 0x01), ifa("10.0.0.1", "10.0.0.1", 24, 0x02, 0x02)], "10.0.0.1"),
    # IFA_FLAGS (32 bits) is what counts when present
    ([ifa("10.0.0.9", "10.0.0.9", 24, 0x00, 0x101), ifa("10.0.0.1", "10.0.0.1", 24, 0x00, 0x100)], "10.0.0.1"),
    # older kernels: no IFA_FLAGS, the header's flags
    ([ifa("10.0.0.9", "10.0.0.9", 24, 0x01), ifa("10.0.0.1", "10.0.0.1", 24, 0x00)], "10.0.0.1"),
    ([ifa(address="10.0.0.1", plen=24)], "10.0.0.1"),
    ([ifa(local="10.0.0.2", plen=24)], "10.0.0.2"),
    # a point-to-point address: IFA_LOCAL is this end, IFA_ADDRESS the peer (include/uapi/linux/if_addr.h)
    ([ifa(address="10.0.0.2", local="10.0.0.1", plen=24)], "10.0.0.1"),
])
def test_rail_ipv4_first_primary(addrs, address):
    ipr = Netlink(addrs={5: addrs})
    assert routing.rail_ipv4(ipr, ["ens1np0"]) == [("ens1np0", address, 24)]
    assert ipr.calls == [("get_links",), ("get_addr", {"index": 5, "family": INET})]


@pytest.mark.parametrize("rail,addrs,message", [
    ("ens7np0", [], "rail ens7np0 is not a network interface in this network namespace"),
    ("ens1np0", [ifa("10.0.0.9", "10.0.0.9", 24, 0x01, 0x01)],
     "rail ens1np0 has no IPv4 address: per-rail routing needs one (ip -4 addr show dev ens1np0)"),
])
def test_rail_ipv4_refusals(rail, addrs, message):
    with pytest.raises(routing.RoutingError) as e:
        routing.rail_ipv4(Netlink(addrs={5: addrs}), [rail])
    assert str(e.value) == message


def test_execute_calls_and_actions_in_order():
    ipr = Netlink()
    gone = route(102, "10.100.0.0", 16, "7", prefsrc="10.100.2.1")
    p = {"del_rules": [rule("10.100.2.1", 102)], "del_routes": [gone], "add_routes": [R3], "add_rules": [U2]}
    assert routing.execute(ipr, p, {"ens2np0": 6}) == [
        "del rule from 10.100.2.1/32 lookup 102 priority 1000",
        "del route 10.100.0.0/16 dev 7 src 10.100.2.1 scope link table 102",
        "add " + T3,
        "add " + TU2]
    assert ipr.calls == [
        ("rule", "del", rule("10.100.2.1", 102)),
        ("route", "del", {"dst": "10.100.0.0/16", "table": 102, "scope": 253, "oif": 7, "prefsrc": "10.100.2.1"}),
        ("route", "add", ADD3),
        ("rule", "add", U2)]


def test_execute_refuses_a_vanished_rail():
    p = {"del_rules": [], "del_routes": [], "add_routes": [R1], "add_rules": []}
    with pytest.raises(routing.RoutingError) as e:
        routing.execute(Netlink(), p, {"ens2np0": 6})
    assert str(e.value) == "rail ens1np0 disappeared while routing was applied"


def test_apply_in_check_mode_whole():
    ipr = Netlink(routes=[rtm(100, "10.100.0.0", 16, 5, prefsrc="10.100.0.9")], rules=[frm("10.100.0.1", 100)])
    stale = route(100, "10.100.0.0", 16, "ens1np0", prefsrc="10.100.0.9")
    assert routing.apply(ipr, TABLES[:1], 1000, True) == {
        "changed": True,
        "plan": {"del_rules": [], "del_routes": [stale], "add_routes": [R1], "add_rules": []},
        "drift": [drift("ens1np0", T1, "absent", "present"),
                  drift("ens1np0", "route 10.100.0.0/16 dev ens1np0 src 10.100.0.9 scope link table 100", "present",
                        "absent")],
        "actions": []}
    assert ipr.calls == DUMPS[:1] + DUMPS[4:]


# ------------------------------------------------------------------------------------------------ state file

def test_render_state_text():
    assert routing.render_state(TABLES, 100, 1000) == STATE


def test_desired_from_state():
    assert routing.desired_from_state({"version": 1}) == []
    assert routing.desired_from_state(json.loads(STATE)) == TABLES


def test_load_state_absent_and_present(tmp_path):
    sr = Sysroot(str(tmp_path))
    assert routing.load_state(sr) is None
    sr.write_file_atomic("/etc/gpufabric/routing.json", STATE)
    assert routing.load_state(sr) == json.loads(STATE)
    assert routing.load_state(sr, "/etc/other.json") is None


def _json_error(text):
    with pytest.raises(ValueError) as e:
        json.loads(text)
    return str(e.value)


@pytest.mark.parametrize("content,message", [
    ("{", "/etc/gpufabric/routing.json is not valid JSON (%s): remove it or rerun rail_sysctl with routing"
     % _json_error("{")),
    ('{"version": 9}', "/etc/gpufabric/routing.json has an unknown format (version 9)"),
    ("{}", "/etc/gpufabric/routing.json has an unknown format (version None)"),
    ("[1]", "/etc/gpufabric/routing.json has an unknown format (version None)"),
])
def test_load_state_refusals(tmp_path, content, message):
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(routing.STATE_FILE, content)
    with pytest.raises(routing.RoutingError) as e:
        routing.load_state(sr)
    assert str(e.value) == message


def test_load_state_unreadable(tmp_path):
    sr = Sysroot(str(tmp_path))
    os.makedirs(sr.path(routing.STATE_FILE))
    with pytest.raises(OSError) as inner:
        bounded_read.read_text(sr.path(routing.STATE_FILE))
    with pytest.raises(routing.RoutingError) as e:
        routing.load_state(sr)
    assert str(e.value) == ("cannot read /etc/gpufabric/routing.json: %s: remove it or rerun rail_sysctl with "
                            "routing" % inner.value)


# ------------------------------------------------------------------------------------------------ manage

def test_manage_fresh_host_whole(tmp_path):
    sr = Sysroot(str(tmp_path))
    ipr = Netlink(addrs=ADDRS)
    res = routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 100, 1000, GW, False)
    assert res == {
        "changed": True,
        "plan": {"del_rules": [], "del_routes": [], "add_routes": [R1, R3, R2], "add_rules": [U1, U2]},
        "drift": [drift("ens1np0", T1, "absent", "present"), drift("ens2np0", T3, "absent", "present"),
                  drift("ens2np0", T2, "absent", "present"), drift("table 100", TU1, "absent", "present"),
                  drift("table 101", TU2, "absent", "present"),
                  drift(routing.STATE_FILE, "content", "missing", "managed")],
        "actions": ["add " + T1, "add " + T3, "add " + T2, "add " + TU1, "add " + TU2],
        "tables": TABLES,
        "state_file": {"path": routing.STATE_FILE, "changed": True, "before": "", "after": STATE}}
    assert ipr.calls == DUMPS + [("route", "add", ADD1), ("route", "add", ADD3), ("route", "add", ADD2),
                                 ("rule", "add", U1), ("rule", "add", U2)]
    assert sr.read_raw(routing.STATE_FILE) == STATE
    assert os.stat(sr.path(routing.STATE_FILE)).st_mode & 0o7777 == 0o644


def test_manage_only_the_file_differs(tmp_path):
    sr = Sysroot(str(tmp_path))
    old = STATE.replace('"rule_priority": 1000', '"rule_priority": 999')
    sr.write_file_atomic(routing.STATE_FILE, old)
    ipr = Netlink(addrs=ADDRS, routes=[rtm(100, "10.100.0.0", 16, 5, prefsrc="10.100.0.1"),
                                       rtm(101, "10.100.0.0", 16, 6, prefsrc="10.100.1.1"),
                                       rtm(101, None, 0, 6, "10.100.255.254", "10.100.1.1", 0)],
                  rules=[frm("10.100.0.1", 100), frm("10.100.1.1", 101)])
    res = routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 100, 1000, GW, False)
    assert res["changed"] is True and res["actions"] == []
    assert res["drift"] == [drift(routing.STATE_FILE, "content", "differs", "managed")]
    assert res["state_file"] == {"path": routing.STATE_FILE, "changed": True, "before": old, "after": STATE}
    assert ipr.calls == DUMPS
    assert sr.read_raw(routing.STATE_FILE) == STATE


def test_manage_cleans_the_tables_of_the_state_file_it_is_given(tmp_path):
    sr = Sysroot(str(tmp_path))
    path = "/etc/other/routing.json"
    sr.write_file_atomic(path, json.dumps({"version": 1, "table_base": 102, "rule_priority": 1000, "rails": [
        {"rail": "ens3np0", "table": 102, "address": "10.100.2.1", "prefixlen": 16, "gateway": None}]}))
    ipr = Netlink(addrs=ADDRS, routes=[rtm(100, "10.100.0.0", 16, 5, prefsrc="10.100.0.1"),
                                       rtm(102, "10.100.0.0", 16, 7, prefsrc="10.100.2.1"),
                                       rtm(103, "10.100.0.0", 16, 7, prefsrc="10.100.3.1")],
                  rules=[frm("10.100.0.1", 100), frm("10.100.2.1", 102)])
    res = routing.manage(sr, ipr, ["ens1np0"], 100, 1000, {}, False, path=path)
    assert res["actions"] == ["del rule from 10.100.2.1/32 lookup 102 priority 1000",
                              "del route 10.100.0.0/16 dev 7 src 10.100.2.1 scope link table 102"]
    assert ipr.calls == DUMPS[:2] + DUMPS[3:] + [
        ("rule", "del", rule("10.100.2.1", 102)),
        ("route", "del", {"dst": "10.100.0.0/16", "table": 102, "scope": 253, "oif": 7, "prefsrc": "10.100.2.1"})]
    assert res["state_file"]["path"] == path and not os.path.exists(sr.path(routing.STATE_FILE))
