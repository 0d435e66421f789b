# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

pyroute2 = pytest.importorskip("pyroute2")
from pyroute2.netlink.rtnl.fibmsg import fibmsg  # noqa: E402
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg  # noqa: E402
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg  # noqa: E402
from pyroute2.netlink.rtnl.rtmsg import rtmsg  # noqa: E402


def route(table, dst, dst_len, oif, prefsrc=None, gateway=None, scope=routing.SCOPE_LINK):
    return {"table": table, "dst": dst, "dst_len": dst_len, "oif": oif, "gateway": gateway, "prefsrc": prefsrc,
            "scope": scope}


def rule(src, table, priority=1000, src_len=32):
    return {"src": src, "src_len": src_len, "table": table, "priority": priority}


RAILS = [("ens1np0", "10.100.0.1", 16), ("ens2np0", "10.100.1.1", 16)]
TABLES = routing.desired_tables(RAILS, 100)
WANT_ROUTES, WANT_RULES = routing.desired_routes_rules(TABLES, 1000)

PLAN_CASES = [
    # id, current routes, current rules, managed tables, expected plan counts (del_rules, del_routes, add_routes,
    # add_rules)
    ("empty host", [], [], {100, 101}, (0, 0, 2, 2)),
    ("all present", list(WANT_ROUTES), list(WANT_RULES), {100, 101}, (0, 0, 0, 0)),
    ("address changed on rail 1", [route(100, "10.100.0.0", 16, "ens1np0", "10.100.0.9"), WANT_ROUTES[1]],
     [rule("10.100.0.9", 100), WANT_RULES[1]], {100, 101}, (1, 1, 1, 1)),
    ("rule at other priority", list(WANT_ROUTES), [rule("10.100.0.1", 100, 500), WANT_RULES[1]], {100, 101},
     (1, 0, 0, 1)),
    ("stray route in owned table", list(WANT_ROUTES) + [route(101, "0.0.0.0", 0, "ens2np0", None, "10.100.0.254",
                                                              routing.SCOPE_UNIVERSE)],
     list(WANT_RULES), {100, 101}, (0, 1, 0, 0)),
    ("rail removed since last run", list(WANT_ROUTES) + [route(102, "10.100.0.0", 16, "ens3np0", "10.100.2.1")],
     list(WANT_RULES) + [rule("10.100.2.1", 102)], {100, 101, 102}, (1, 1, 0, 0)),
    ("foreign table untouched", list(WANT_ROUTES) + [route(254, "10.100.0.0", 16, "ens1np0", "10.100.0.1")],
     list(WANT_RULES) + [rule("10.0.0.1", 254)], {100, 101}, (0, 0, 0, 0)),
]


@pytest.mark.parametrize("case", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan(case):
    _id, routes, rules, managed, counts = case
    p = routing.plan(WANT_ROUTES, WANT_RULES, routes, rules, managed)
    assert tuple(len(p[k]) for k in ("del_rules", "del_routes", "add_routes", "add_rules")) == counts
    drift = routing.plan_drift(p)
    assert len(drift) == sum(counts)
    assert all(d["concern"] == "routing" for d in drift)
    assert routing.plan_empty(p) is (sum(counts) == 0)


def test_desired_tables_and_routes():
    tables = routing.desired_tables(RAILS, 200, {"ens2np0": "10.100.255.254"})
    assert [(t["rail"], t["table"], t["network"], t["gateway"]) for t in tables] == [
        ("ens1np0", 200, "10.100.0.0", None), ("ens2np0", 201, "10.100.0.0", "10.100.255.254")]
    routes, rules = routing.desired_routes_rules(tables, 1234)
    assert [routing.route_text(r) for r in routes] == [
        "10.100.0.0/16 dev ens1np0 src 10.100.0.1 scope link table 200",
        "10.100.0.0/16 dev ens2np0 src 10.100.1.1 scope link table 201",
        "default via 10.100.255.254 dev ens2np0 src 10.100.1.1 table 201",
    ]
    assert [routing.rule_text(r) for r in rules] == [
        "from 10.100.0.1/32 lookup 200 priority 1234", "from 10.100.1.1/32 lookup 201 priority 1234"]


BAD = [
    ("table base 0", lambda: routing.validate_table_base(0, 8), "must lie in 1..4294967295"),
    ("table base covers 253..255", lambda: routing.validate_table_base(250, 8), "reserved table"),
    ("table base main", lambda: routing.validate_table_base(254, 1), "reserved table"),
    ("table base too high", lambda: routing.validate_table_base(0xFFFFFFFF, 2), "must lie in"),
    ("table base text", lambda: routing.validate_table_base("100", 2), "must be an integer"),
    ("priority 0", lambda: routing.validate_priority(0), "1..32765"),
    ("priority main", lambda: routing.validate_priority(32766), "1..32765"),
    ("gateway outside subnet", lambda: routing.desired_tables(RAILS, 100, {"ens1np0": "10.200.0.1"}),
     "not inside the rail's subnet"),
    ("gateway not an address", lambda: routing.desired_tables(RAILS, 100, {"ens1np0": "gw"}), "not an IPv4"),
    ("gateway for unknown rail", lambda: routing.desired_tables(RAILS, 100, {"ens9np0": "10.100.0.254"}),
     "not managed"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input(case):
    _id, call, msg = case
    with pytest.raises(ValueError, match=msg):
        call()


# --- fake netlink: real pyroute2 message classes, so normalisation is exercised ---------------------

class FakeIPRoute(object):
    def __init__(self, links, addrs):
        """links: {name: index}; addrs: {name: [(addr, plen, flags)]}."""
        self.links = links
        self.addrs = addrs
        self.routes = []
        self.rules = []
        self.calls = []

    def get_links(self):
        out = []
        for name, idx in self.links.items():
            m = ifinfmsg()
            m["index"] = idx
            m["attrs"] = [("IFLA_IFNAME", name)]
            out.append(m)
        return out

    def get_addr(self, index, family):
        name = [n for n, i in self.links.items() if i == index][0]
        out = []
        for addr, plen, flags in self.addrs.get(name, []):
            m = ifaddrmsg()
            m["prefixlen"] = plen
            m["flags"] = flags
            m["index"] = index
            m["attrs"] = [("IFA_ADDRESS", addr), ("IFA_LOCAL", addr), ("IFA_FLAGS", flags)]
            out.append(m)
        return out

    def get_routes(self, family):
        out = []
        for r in self.routes:
            m = rtmsg()
            m["dst_len"] = r["dst_len"]
            m["table"] = r["table"] if r["table"] < 256 else 252
            m["scope"] = r["scope"]
            attrs = [("RTA_TABLE", r["table"]), ("RTA_OIF", r["oif"])]
            if r["dst_len"]:
                attrs.append(("RTA_DST", r["dst"].split("/")[0]))
            if r.get("gateway"):
                attrs.append(("RTA_GATEWAY", r["gateway"]))
            if r.get("prefsrc"):
                attrs.append(("RTA_PREFSRC", r["prefsrc"]))
            m["attrs"] = attrs
            out.append(m)
        return out

    def get_rules(self, family):
        out = []
        for r in self.rules:
            m = fibmsg()
            m["src_len"] = r["src_len"]
            m["table"] = r["table"] if r["table"] < 256 else 252
            m["action"] = routing.FR_ACT_TO_TBL
            m["attrs"] = [("FRA_TABLE", r["table"]), ("FRA_PRIORITY", r["priority"]), ("FRA_SRC", r["src"])]
            out.append(m)
        return out

    def route(self, cmd, **kw):
        self.calls.append(("route", cmd, kw))
        dst, dst_len = kw["dst"].split("/")
        entry = {"dst": dst, "dst_len": int(dst_len), "table": kw["table"], "oif": kw["oif"],
                 "gateway": kw.get("gateway"), "prefsrc": kw.get("prefsrc"), "scope": kw["scope"]}
        if cmd == "add":
            self.routes.append(entry)
        else:
            self.routes.remove(entry)

    def rule(self, cmd, **kw):
        self.calls.append(("rule", cmd, kw))
        entry = {"src": kw["src"], "src_len": kw["src_len"], "table": kw["table"], "priority": kw["priority"]}
        if cmd == "add":
            self.rules.append(entry)
        else:
            self.rules.remove(entry)


def fake():
    return FakeIPRoute({"lo": 1, "ens1np0": 5, "ens2np0": 6},
                       {"ens1np0": [("10.100.0.1", 16, 0x80), ("10.100.9.9", 16, 0x81)],
                        "ens2np0": [("10.100.1.1", 16, 0x80)]})


def test_manage_applies_then_is_idempotent(tmp_path):
    sr = Sysroot(str(tmp_path))
    ipr = fake()
    first = routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 300, 1000, {}, False)
    assert first["changed"]
    assert [(t["rail"], t["table"], t["address"]) for t in first["tables"]] == [
        ("ens1np0", 300, "10.100.0.1"), ("ens2np0", 301, "10.100.1.1")]
    assert len(ipr.routes) == 2 and len(ipr.rules) == 2
    assert ipr.routes[0]["oif"] == 5
    state = json.loads(open(os.path.join(str(tmp_path), "etc/gpufabric/routing.json")).read())
    assert state["version"] == 1 and state["table_base"] == 300
    assert routing.desired_from_state(state) == first["tables"]
    ipr.calls = []
    second = routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 300, 1000, {}, False)
    assert not second["changed"] and second["drift"] == [] and ipr.calls == []


def test_manage_check_mode_changes_nothing(tmp_path):
    sr = Sysroot(str(tmp_path))
    ipr = fake()
    res = routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 100, 1000, {}, True)
    assert res["changed"] and ipr.calls == [] and ipr.routes == []
    assert not os.path.exists(os.path.join(str(tmp_path), "etc/gpufabric/routing.json"))
    assert len([d for d in res["drift"] if d["desired"] == "present"]) == 4


def test_removed_rail_is_cleaned_up(tmp_path):
    sr = Sysroot(str(tmp_path))
    ipr = fake()
    routing.manage(sr, ipr, ["ens1np0", "ens2np0"], 100, 1000, {}, False)
    res = routing.manage(sr, ipr, ["ens1np0"], 100, 1000, {}, False)
    assert res["changed"]
    assert [r["table"] for r in ipr.routes] == [100] and [r["table"] for r in ipr.rules] == [100]


def test_rail_without_address_names_the_rail():
    ipr = FakeIPRoute({"ens1np0": 5}, {})
    with pytest.raises(routing.RoutingError, match="rail ens1np0 has no IPv4 address"):
        routing.rail_ipv4(ipr, ["ens1np0"])
    with pytest.raises(routing.RoutingError, match="ens7np0 is not a network interface"):
        routing.rail_ipv4(ipr, ["ens7np0"])


@pytest.mark.parametrize("content,msg", [("{", "not valid JSON"), ('{"version": 9}', "unknown format")])
def test_bad_state_file(tmp_path, content, msg):
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(routing.STATE_FILE, content)
    with pytest.raises(routing.RoutingError, match=msg):
        routing.load_state(sr)


# --- integration: a network namespace with two veth rails (root only) ----------------------------

def _can_netns():
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.mark.skipif(not _can_netns(), reason="needs root and iproute2 to create a network namespace")
def test_netns_integration(tmp_path):
    ns = "gft-%s" % uuid.uuid4().hex[:8]

    def ip(*args):
        subprocess.check_call(["ip", "-n", ns] + list(args))

    subprocess.check_call(["ip", "netns", "add", ns])
    try:
        for i, name in enumerate(("rail0", "rail1")):
            ip("link", "add", name, "type", "veth", "peer", "name", name + "p")
            ip("addr", "add", "10.100.%d.1/16" % i, "dev", name)
            ip("link", "set", name, "up")
            ip("link", "set", name + "p", "up")
        sr = Sysroot(str(tmp_path))
        ipr = pyroute2.IPRoute(netns=ns)
        try:
            first = routing.manage(sr, ipr, ["rail0", "rail1"], 100, 1000, {"rail1": "10.100.255.254"}, False)
            second = routing.manage(sr, ipr, ["rail0", "rail1"], 100, 1000, {"rail1": "10.100.255.254"}, False)
        finally:
            ipr.close()
        assert first["changed"] and not second["changed"]
        rules = subprocess.check_output(["ip", "-n", ns, "rule", "show"]).decode()
        assert "from 10.100.0.1 lookup 100" in rules and "from 10.100.1.1 lookup 101" in rules
        t101 = subprocess.check_output(["ip", "-n", ns, "route", "show", "table", "101"]).decode()
        assert "default via 10.100.255.254 dev rail1" in t101
        assert "10.100.0.0/16 dev rail1" in t101 and "src 10.100.1.1" in t101
        got = subprocess.check_output(["ip", "-n", ns, "route", "get", "10.100.7.7", "from", "10.100.1.1"]).decode()
        assert "dev rail1" in got
    finally:
        subprocess.call(["ip", "netns", "del", ns])
