# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""routing: the state file is read back as what the collection wrote, or refused. Its tables are the ones the next
run deletes routes and rules from, so a hand-edited or corrupt file must never name main (254), local (255),
default (253) or the unspecified table 0, and a malformed entry is a RoutingError, not a traceback."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RAIL = {"rail": "ens1np0", "table": 100, "address": "10.100.0.1", "prefixlen": 16, "gateway": None}


def doc(**over):
    d = {"version": 1, "table_base": 100, "rule_priority": 1000, "rails": [dict(RAIL)]}
    d.update(over)
    return d


def rail(**over):
    r = dict(RAIL)
    r.update(over)
    return r


def load(tmp_path, content):
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(routing.STATE_FILE, content if isinstance(content, str) else json.dumps(content))
    return routing.load_state(sr)


def test_what_render_state_writes_is_read_back(tmp_path):
    tables = [dict(RAIL, network="10.100.0.0"), dict(RAIL, rail="ens2np0", table=101, address="10.101.0.1",
                                                     network="10.101.0.0", gateway="10.101.0.254")]
    state = load(tmp_path, routing.render_state(tables, 100, 1000))
    assert routing.desired_from_state(state) == tables


BAD = [
    ("version true", doc(version=True), None, "has an unknown format (version True)"),
    ("rails not a list", doc(rails={"x": 1}), "rails must be a list", None),
    ("rail entry not an object", doc(rails=[1]), "rails[0] must be an object", None),
    ("main table", doc(rails=[rail(table=254)]), "rails[0].table 254 is reserved (253 default, 254 main, 255 local)",
     None),
    ("local table", doc(rails=[rail(table=255)]),
     "rails[0].table 255 is reserved (253 default, 254 main, 255 local)", None),
    ("table 0", doc(rails=[rail(table=0)]), "rails[0].table 0 is reserved (253 default, 254 main, 255 local)", None),
    ("table true", doc(rails=[rail(table=True)]), "rails[0].table must be an integer in 1..4294967295 (got True)",
     None),
    ("table too large", doc(rails=[rail(table=1 << 32)]),
     "rails[0].table must be an integer in 1..4294967295 (got 4294967296)", None),
    ("table text", doc(rails=[rail(table="100")]), "rails[0].table must be an integer in 1..4294967295 (got '100')",
     None),
    ("no table", doc(rails=[dict((k, v) for k, v in RAIL.items() if k != "table")]),
     "rails[0].table must be an integer in 1..4294967295 (got None)", None),
    ("rail name with slash", doc(rails=[rail(rail="../x")]), "rails[0].rail must be an interface name (got '../x')",
     None),
    ("rail name too long", doc(rails=[rail(rail="x" * 16)]),
     "rails[0].rail must be an interface name (got 'xxxxxxxxxxxxxxxx')", None),
    ("rail name 16 bytes in UTF-8", doc(rails=[rail(rail=u"\u00e9" * 8)]),
     "rails[0].rail must be an interface name (got %r)" % (u"\u00e9" * 8), None),
    ("rail name empty", doc(rails=[rail(rail="")]), "rails[0].rail must be an interface name (got '')", None),
    ("rail name dot", doc(rails=[rail(rail=".")]), "rails[0].rail must be an interface name (got '.')", None),
    ("rail name dot dot", doc(rails=[rail(rail="..")]), "rails[0].rail must be an interface name (got '..')", None),
    ("rail name colon", doc(rails=[rail(rail="eth0:1")]), "rails[0].rail must be an interface name (got 'eth0:1')",
     None),
    ("rail name space", doc(rails=[rail(rail="a b")]), "rails[0].rail must be an interface name (got 'a b')", None),
    ("rail name control", doc(rails=[rail(rail="a\x01")]), "rails[0].rail must be an interface name (got 'a\\x01')",
     None),
    ("rail name not text", doc(rails=[rail(rail=7)]), "rails[0].rail must be an interface name (got 7)", None),
    ("no rail name", doc(rails=[dict((k, v) for k, v in RAIL.items() if k != "rail")]),
     "rails[0].rail must be an interface name (got None)", None),
    ("address not IPv4", doc(rails=[rail(address="fe80::1")]),
     "rails[0].address must be an IPv4 address (got 'fe80::1')", None),
    ("address garbage", doc(rails=[rail(address="10.0.0.1 dev x")]),
     "rails[0].address must be an IPv4 address (got '10.0.0.1 dev x')", None),
    ("no address", doc(rails=[dict((k, v) for k, v in RAIL.items() if k != "address")]),
     "rails[0].address must be an IPv4 address (got None)", None),
    ("prefixlen 33", doc(rails=[rail(prefixlen=33)]), "rails[0].prefixlen must be an integer in 0..32 (got 33)", None),
    ("prefixlen bool", doc(rails=[rail(prefixlen=True)]),
     "rails[0].prefixlen must be an integer in 0..32 (got True)", None),
    ("no prefixlen", doc(rails=[dict((k, v) for k, v in RAIL.items() if k != "prefixlen")]),
     "rails[0].prefixlen must be an integer in 0..32 (got None)", None),
    ("gateway bad", doc(rails=[rail(gateway="gw")]), "rails[0].gateway must be an IPv4 address or null (got 'gw')",
     None),
    ("two rails one table", doc(rails=[rail(), rail(rail="ens2np0", address="10.101.0.1")]),
     "rails[1].table 100 is also rails[0]'s", None),
    ("priority 0", doc(rule_priority=0),
     "rule_priority must be 1..32765 (0 is the local rule, 32766/32767 main/default; got 0)", None),
    ("priority text", doc(rule_priority="1000"),
     "rule_priority must be 1..32765 (0 is the local rule, 32766/32767 main/default; got '1000')", None),
]


@pytest.mark.parametrize("state,problem,other", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_state_file_the_collection_did_not_write_is_refused(tmp_path, state, problem, other):
    with pytest.raises(routing.RoutingError) as e:
        load(tmp_path, state)
    if problem:
        assert str(e.value) == ("%s is not a state file the collection wrote: %s; remove it and run the rail network "
                                "role again" % (routing.STATE_FILE, problem))
    else:
        assert str(e.value) == "%s %s" % (routing.STATE_FILE, other)


GOOD = [
    ("no rails key", {"version": 1, "rule_priority": 1}),
    ("the last table and a 15-byte name", doc(rails=[rail(table=0xFFFFFFFF, rail="x" * 15)])),
    ("tables 1 and 252, prefix lengths 0 and 32, a 1-byte name", doc(rule_priority=32765, rails=[
        rail(table=1, prefixlen=0, rail="X"), rail(rail="ens2np0", table=252, prefixlen=32, gateway="10.100.0.254")])),
]


@pytest.mark.parametrize("state", [g[1] for g in GOOD], ids=[g[0] for g in GOOD])
def test_the_edges_of_what_the_collection_writes_are_accepted(tmp_path, state):
    assert load(tmp_path, state) == state
    assert routing.state_problem(state) is None


def test_manage_never_deletes_from_main_on_a_hand_edited_state(tmp_path):
    """The run that would read table 254 as its own stops before it touches netlink."""
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(routing.STATE_FILE, json.dumps(doc(rails=[rail(table=254)])))

    class NoNetlink(object):
        def __getattr__(self, name):
            raise AssertionError("netlink touched: %s" % name)

    with pytest.raises(routing.RoutingError, match="table 254 is reserved"):
        routing.manage(sr, NoNetlink(), ["ens1np0"], 100, 1000, {}, True)
