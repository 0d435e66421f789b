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

from ansible_collections.gpufabric.node.plugins.module_utils import routing
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

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
    ("version true", doc(version=True), "version True"),
    ("rails not a list", doc(rails={"x": 1}), "rails must be a list"),
    ("rail entry not an object", doc(rails=[1]), "rails[0] must be an object"),
    ("main table", doc(rails=[rail(table=254)]), "rails[0].table 254 is reserved"),
    ("local table", doc(rails=[rail(table=255)]), "rails[0].table 255 is reserved"),
    ("table 0", doc(rails=[rail(table=0)]), "rails[0].table 0 is reserved"),
    ("table true", doc(rails=[rail(table=True)]), "rails[0].table must be an integer in 1..4294967295"),
    ("table too large", doc(rails=[rail(table=1 << 32)]), "rails[0].table must be an integer in 1..4294967295"),
    ("table text", doc(rails=[rail(table="100")]), "rails[0].table must be an integer in 1..4294967295"),
    ("no table", doc(rails=[dict((k, v) for k, v in RAIL.items() if k != "table")]),
     "rails[0].table must be an integer in 1..4294967295"),
    ("rail name with slash", doc(rails=[rail(rail="../x")]), "rails[0].rail must be an interface name"),
    ("rail name too long", doc(rails=[rail(rail="x" * 16)]), "rails[0].rail must be an interface name"),
    ("rail name not text", doc(rails=[rail(rail=7)]), "rails[0].rail must be an interface name"),
    ("address not IPv4", doc(rails=[rail(address="fe80::1")]), "rails[0].address must be an IPv4 address"),
    ("address garbage", doc(rails=[rail(address="10.0.0.1 dev x")]), "rails[0].address must be an IPv4 address"),
    ("prefixlen 33", doc(rails=[rail(prefixlen=33)]), "rails[0].prefixlen must be an integer in 0..32"),
    ("prefixlen bool", doc(rails=[rail(prefixlen=True)]), "rails[0].prefixlen must be an integer in 0..32"),
    ("gateway bad", doc(rails=[rail(gateway="gw")]), "rails[0].gateway must be an IPv4 address or null"),
    ("two rails one table", doc(rails=[rail(), rail(rail="ens2np0", address="10.101.0.1")]),
     "rails[1].table 100 is also rails[0]'s"),
    ("priority 0", doc(rule_priority=0), "rule_priority"),
    ("priority text", doc(rule_priority="1000"), "rule_priority"),
]


@pytest.mark.parametrize("state,msg", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_state_file_the_collection_did_not_write_is_refused(tmp_path, state, msg):
    with pytest.raises(routing.RoutingError) as e:
        load(tmp_path, state)
    assert msg in str(e.value)
    assert routing.STATE_FILE in str(e.value)


def test_manage_never_deletes_from_main_on_a_hand_edited_state(tmp_path):
    """The run that would read table 254 as its own stops before it touches netlink."""
    sr = Sysroot(str(tmp_path))
    sr.write_file_atomic(routing.STATE_FILE, json.dumps(doc(rails=[rail(table=254)])))

    class NoNetlink(object):
        def __getattr__(self, name):
            raise AssertionError("netlink touched: %s" % name)

    with pytest.raises(routing.RoutingError, match="table 254 is reserved"):
        routing.manage(sr, NoNetlink(), ["ens1np0"], 100, 1000, {}, True)
