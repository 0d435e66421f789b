# -*- coding: utf-8 -*-
"""desired.contradictions: settings that contradict each other, by role variable and module option."""
from __future__ import absolute_import, division, print_function

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired

__metaclass__ = type

# the roles' defaults as Ansible templates them (numbers of templated defaults arrive as strings)
ROLE_DEFAULTS = {"trust": "dscp", "dscp_map": [{"dscp": "26", "priority": "3"}], "pfc_priorities": [3],
                 "expected_dscp": "26", "expected_priority": 3, "ecn": True, "tos": "106", "nccl_ib_tc": 106}


def m(*pairs):
    return [{"dscp": d, "priority": p} for d, p in pairs]


def pair_of(message):
    """(key, key) of the two settings a message names first."""
    names = dict((desired.name(k), k) for k in desired.KEYS)
    head = message.split(" contradict each other: ")[0]
    first, second = head.split(") and ", 1)
    return names[first + ")"], names[second]


# id, document (None: the role defaults with these changes), pairs expected in order, text the messages carry
CASES = [
    ("role-defaults-agree", {}, [], None),
    ("pfc-4-map-26-3", {"pfc_priorities": [4]},
     [("pfc_priorities", "dscp_map"), ("dscp_map", "pfc_priorities"), ("tos", "dscp_map")],
     "PFC is on priority 4 but the map (26->3) sends no DSCP there"),
    ("pfc-4-map-26-3-dcb_qos-only", {"_only": {"trust": "dscp", "dscp_map": m((26, 3)), "pfc_priorities": [4]}},
     [("pfc_priorities", "dscp_map")], "while DSCP 26 has no PFC"),
    ("pfc-extra-lossless-prio", {"pfc_priorities": [3, 5]}, [("pfc_priorities", "dscp_map")], "priority 5"),
    ("pfc-on-0", {"pfc_priorities": [0, 3]}, [("pfc_priorities", "trust")], "every DSCP without an APP entry"),
    ("lossy-fabric-no-checks", {"pfc_priorities": []}, [], None),
    ("tos-106-map-24-3", {"dscp_map": m((24, 3))}, [("expected_dscp", "dscp_map"), ("tos", "dscp_map")],
     "ToS 106 (DSCP 26, ECT(0)): the map (24->3) does not map DSCP 26"),
    ("tos-106-map-24-3-rdma-only", {"_only": {"tos": 106, "dscp_map": m((24, 3)), "pfc_priorities": [3]}},
     [("tos", "dscp_map")], "does not map DSCP 26"),
    ("tos-dscp-on-lossy-prio", {"dscp_map": m((26, 5), (24, 3)), "expected_dscp": 24, "expected_priority": 3},
     [("tos", "expected_dscp"), ("tos", "dscp_map")], "maps DSCP 26 to priority 5, which has no PFC"),
    ("tos-96-expected-26", {"tos": 96},
     [("tos", "expected_dscp"), ("tos", "dscp_map"), ("ecn", "tos"), ("nccl_ib_tc", "tos")],
     "ToS 96 (DSCP 24, Not-ECT) carries DSCP 24 (tos >> 2) but the lossless DSCP is 26"),
    ("tc-104-tos-106-ecn-only", {"nccl_ib_tc": 104}, [("nccl_ib_tc", "tos")],
     "both carry DSCP 26 (same priority), but NCCL_IB_TC is the full traffic class byte and its ECN bits differ"),
    ("tc-104-tos-106-nccl-only", {"_only": {"nccl_ib_tc": 104, "tos": 106}}, [("nccl_ib_tc", "tos")],
     "NCCL 104 (DSCP 26, Not-ECT) vs RDMA CM 106 (DSCP 26, ECT(0))"),
    ("tc-dscp-differs", {"nccl_ib_tc": 96}, [("nccl_ib_tc", "tos"), ("nccl_ib_tc", "dscp_map")],
     "carry different DSCPs, so NCCL and RDMA CM traffic would land in different classes"),
    ("tc-without-tos", {"tos": None, "nccl_ib_tc": 96},
     [("nccl_ib_tc", "expected_dscp"), ("nccl_ib_tc", "ecn"), ("nccl_ib_tc", "dscp_map")], "tc >> 2"),
    ("tc-without-tos-ecn", {"tos": None, "nccl_ib_tc": 104}, [("nccl_ib_tc", "ecn")], "use 106 (ECT(0))"),
    ("trust-pcp-with-map", {"trust": "pcp"}, [("trust", "dscp_map")], "trust pcp cannot be combined"),
    ("trust-pcp-empty-map", {"trust": "pcp", "dscp_map": []}, [], None),
    ("trust-pcp-map-dcb_qos-only", {"_only": {"trust": "pcp", "dscp_map": m((26, 3))}}, [("trust", "dscp_map")],
     "PCP trust classifies by the VLAN priority"),
    ("ecn-on-tos-104", {"tos": 104, "nccl_ib_tc": 104}, [("ecn", "tos")], "switches cannot ECN-mark"),
    ("ecn-off-tos-106", {"ecn": "false"}, [("ecn", "tos")], "ECN-capable while ECN is off; use 104"),
    ("tos-ce", {"tos": 107, "nccl_ib_tc": 107}, [("ecn", "tos")], "CE marks every packet"),
    ("priority-not-the-maps", {"expected_priority": 4},
     [("expected_priority", "dscp_map"), ("expected_priority", "pfc_priorities")], "sends DSCP 26 to priority 3"),
    ("priority-without-pfc", {"pfc_priorities": [3, 4], "expected_priority": 4, "dscp_map": m((26, 4), (10, 3))},
     [], None),
    ("map-lossless-dscp-without-pfc", {"dscp_map": m((26, 4), (10, 3)), "expected_priority": 4},
     [("dscp_map", "pfc_priorities"), ("tos", "dscp_map")], "the lossless class must have PFC"),
    ("fifo-dscp-24-default-lossless", {"nccl_ib_fifo_tc": 96}, [("nccl_ib_fifo_tc", "dscp_map")],
     "mlx5 default priority 3 (DSCP >> 3) has PFC"),
    ("fifo-dscp-46-default-lossy", {"nccl_ib_fifo_tc": 184}, [], None),
    ("fifo-dscp-in-map", {"nccl_ib_fifo_tc": 104}, [], None),
    ("rdma-tos-expected-agree", {"_only": {"tos": 106, "expected_dscp": 26}}, [], None),
]


def _doc(delta):
    if "_only" in delta:
        return dict(delta["_only"])
    return dict(ROLE_DEFAULTS, **delta)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_contradictions(case):
    _id, delta, pairs, text = case
    got = desired.contradictions(_doc(delta))
    assert [pair_of(msg) for msg in got] == pairs, got
    if text is not None:
        assert any(text in msg for msg in got), got
    for msg in got:
        # both settings named by role variable and module option (or "role only")
        a, b = pair_of(msg)
        assert msg.startswith("%s and %s contradict each other: " % (desired.name(a), desired.name(b)))


@pytest.mark.parametrize("doc,messages", [
    ({"tos": "abc"}, ["roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos): 'abc' is not an integer 0..255"]),
    ({"tos": 256}, ["roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos): 256 is out of range 0..255"]),
    ({"expected_dscp": True}, ["roce_qos_dscp (rdma_cm_tos expected_dscp): True is not an integer 0..63"]),
    ({"dscp_map": [{"dscp": 64, "priority": 1}]},
     ["roce_qos_dscp_map (dcb_qos dscp_map): item 0 dscp 64 is out of range 0..63"]),
    ({"dscp_map": m((26, 3), (26, 4))},
     ["roce_qos_dscp_map (dcb_qos dscp_map): maps DSCP 26 to two priorities (3 and 4)"]),
    ({"dscp_map": [{"dscp": 26}]},
     ["roce_qos_dscp_map (dcb_qos dscp_map): item 0 is not {dscp, priority}: {'dscp': 26}"]),
    ({"dscp_map": {"26": 3}}, ["roce_qos_dscp_map (dcb_qos dscp_map): is not a list of {dscp, priority} items"]),
    ({"pfc_priorities": [9]}, ["roce_qos_pfc_priorities (dcb_qos pfc_priorities): priority 9 is out of range 0..7"]),
    ({"trust": "vlan"}, ["roce_qos_trust (dcb_qos trust): 'vlan' is not dscp or pcp"]),
    ({"ecn": "maybe"},
     ["roce_qos_ecn (role only: the ECN bits of the default roce_qos_tos): 'maybe' is not a boolean"]),
    ({"nccl_ib_tc": " 106 ", "tos": "106", "ecn": "yes"}, []),
])
def test_unreadable(doc, messages):
    assert desired.unreadable(doc) == messages
    assert desired.conflicts(doc) == messages + desired.contradictions(doc)


def test_unreadable_values_are_skipped_by_the_rules():
    # the map cannot be read: no rule that needs it fires, the others still do
    doc = dict(ROLE_DEFAULTS, dscp_map=[{"dscp": 99, "priority": 3}], tos=96)
    assert [pair_of(x) for x in desired.contradictions(doc)] == [("tos", "expected_dscp"), ("ecn", "tos"),
                                                                 ("nccl_ib_tc", "tos")]


@pytest.mark.parametrize("doc,error", [([], TypeError), ({"colour": 1}, KeyError)])
def test_bad_documents(doc, error):
    with pytest.raises(error):
        desired.contradictions(doc)


def test_from_role_vars():
    assert desired.from_role_vars({"roce_qos_tos": 106, "nccl_ib_tc": 104}) == {"tos": 106, "nccl_ib_tc": 104}
    with pytest.raises(KeyError) as e:
        desired.from_role_vars({"roce_qos_toss": 106})
    assert "roce_qos_toss" in str(e.value) and "roce_qos_tos" in str(e.value)


# ------------------------------------------------------------------------------------------------
# properties: consistent settings never contradict; arbitrary input never raises
# ------------------------------------------------------------------------------------------------

@st.composite
def consistent(draw):
    dscp = draw(st.integers(0, 63))
    prio = draw(st.integers(1, 7))
    ecn = draw(st.booleans())
    tos = (dscp << 2) | (2 if ecn else 0)
    dmap = draw(st.dictionaries(st.integers(0, 63).filter(lambda d: d != dscp), st.integers(0, 7), max_size=4))
    dmap[dscp] = prio
    # PFC on the lossless priority and on any other priority the map sends a DSCP to (not 0)
    pfc = sorted({prio} | draw(st.sets(st.sampled_from(sorted(set(dmap.values()) - {0})))))
    doc = {"trust": "dscp", "dscp_map": m(*sorted(dmap.items())), "pfc_priorities": pfc, "expected_dscp": dscp,
           "expected_priority": prio, "ecn": ecn, "tos": tos, "nccl_ib_tc": tos}
    fifo = draw(st.sampled_from([None, tos] + [(d << 2) for d in dmap]))
    if fifo is not None:
        doc["nccl_ib_fifo_tc"] = fifo
    # drop any subset of the keys: fewer settings never contradict more
    for key in draw(st.sets(st.sampled_from(sorted(doc)))):
        doc[key] = None
    return doc


@settings(max_examples=300, deadline=None)
@given(consistent())
def test_consistent_settings_do_not_contradict(doc):
    assert desired.conflicts(doc) == []


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 300), st.text(max_size=4), st.floats(allow_nan=False),
                   st.lists(st.one_of(st.integers(-1, 70), st.text(max_size=2)), max_size=3),
                   st.lists(st.fixed_dictionaries({"dscp": st.integers(-1, 70), "priority": st.integers(-1, 9)}),
                            max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(desired.KEYS), VALUES))
def test_any_document_gives_messages_not_exceptions(doc):
    out = desired.conflicts(doc)
    assert isinstance(out, list) and all(isinstance(x, str) for x in out)
