# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import counters as c

MIB = 1 << 20


def ethtool_text(prio=None, pfc=(3,)):
    """mlx5-shaped ``ethtool -S`` text: prio = {p: {field: value}}."""
    prio = prio or {}
    lines = ["NIC statistics:", "     rx_packets: 10", "     tx_bytes: 99", "     ch0_arm: 1"]
    for p in range(8):
        v = prio.get(p, {})
        for name in ("rx_bytes", "rx_packets", "rx_discards", "tx_bytes", "tx_packets"):
            d, what = name.split("_", 1)
            lines.append("     %s_prio%d_%s: %d" % (d, p, what, v.get(name, 0)))
    for p in pfc:
        v = prio.get(p, {})
        lines.append("     rx_prio%d_pause: %d" % (p, v.get("rx_pause", 0)))
        lines.append("     rx_prio%d_pause_duration: 7" % p)
        lines.append("     tx_prio%d_pause: %d" % (p, v.get("tx_pause", 0)))
        lines.append("     rx_prio%d_pause_transition: 1" % p)
    return "\n".join(lines) + "\n"


def snap_of(rails, t=100.0):
    """rails = {netdev: (prio dict, pfc)} -> snapshot through the parser."""
    texts = dict((r, ethtool_text(*v)) for r, v in rails.items())
    return c.snapshot(lambda argv: (0, texts[argv[2]], ""), sorted(rails), clock=lambda: t)


def test_parse_ignores_noise_and_reads_ints():
    stats = c.parse_ethtool_stats("NIC statistics:\n     rx_prio3_bytes: 12\n  garbage line\n     x: -1\n")
    assert stats == {"rx_prio3_bytes": 12, "x": -1}


@pytest.mark.parametrize("pfc,expected", [((3,), [3]), ((), []), ((3, 4), [3, 4])])
def test_pause_counters_mean_pfc(pfc, expected):
    prio, found = c.prio_counters(c.parse_ethtool_stats(ethtool_text({3: {"rx_pause": 5}}, pfc)))
    assert found == expected
    assert prio["3"]["rx_pause"] == (5 if 3 in pfc else 0)


def test_snapshot_runs_one_ethtool_per_rail_in_c_form():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, ethtool_text(), ""

    s = c.snapshot(run, ["ens1np0", "ens2np0"])
    assert calls == [["ethtool", "-S", "ens1np0"], ["ethtool", "-S", "ens2np0"]]
    assert set(s["rails"]) == {"ens1np0", "ens2np0"} and s["schema"] == c.SCHEMA_SNAPSHOT


@pytest.mark.parametrize("rails,run,match", [
    ([], None, "at least one"),
    (["ens1np0", "ens1np0"], None, "twice"),
    (["../x"], None, "not a network interface"),
    (["ens1np0"], lambda a: (96, "", "No such device"), "ens1np0 failed.*No such device"),
    (["eth0"], lambda a: (0, "NIC statistics:\n     rx_bytes: 1\n", ""), "eth0 shows no per-priority"),
])
def test_snapshot_errors_name_the_rail(rails, run, match):
    with pytest.raises(c.CountersError, match=match):
        c.snapshot(run or (lambda a: (0, ethtool_text(), "")), rails)


def test_delta_and_reset():
    before = snap_of({"r": ({3: {"tx_bytes": 100}, 0: {"tx_bytes": 5}}, (3,))}, t=10.0)
    after = snap_of({"r": ({3: {"tx_bytes": 300 * MIB}, 0: {"tx_bytes": 5}}, (3,))}, t=12.5)
    d = c.delta(before, after)
    assert d["interval_s"] == 2.5
    assert d["rails"]["r"]["prio"]["3"]["tx_bytes"] == 300 * MIB - 100
    assert d["rails"]["r"]["prio"]["0"]["tx_bytes"] == 0 and not d["rails"]["r"]["reset"]
    reset = c.delta(before=after, after=before)
    assert reset["rails"]["r"]["reset"] is True
    assert reset["rails"]["r"]["prio"]["3"]["tx_bytes"] == 100, "counts since the reset"


def test_delta_missing_rails():
    a = snap_of({"r": ({}, (3,))})
    b = snap_of({"s": ({}, (3,))})
    d = c.delta(a, b)
    assert d["rails"]["s"]["missing_before"] and d["rails"]["r"]["missing_after"]
    with pytest.raises(c.CountersError, match="previous"):
        c.delta({"x": 1}, b)


def rail_delta(prio=None, pfc=(3,), reset=False):
    d = {"prio": dict((str(p), dict((f, 0) for f in c.FIELDS)) for p in range(8)), "pfc_counters": list(pfc),
         "reset": reset, "missing_before": False}
    for p, vals in (prio or {}).items():
        d["prio"][str(p)].update(vals)
    return d


GOOD_TX = {3: {"tx_bytes": 10 * MIB}}
GOOD_RX = {3: {"rx_bytes": 10 * MIB}}

# one row per failure reason, plus the passing case of each role
CHECK_CASES = [
    ("sender ok", "sender", rail_delta(GOOD_TX), []),
    ("receiver ok", "receiver", rail_delta(GOOD_RX), []),
    ("storage ok", "storage", rail_delta({3: {"rx_bytes": 10 * MIB, "tx_bytes": MIB}}), []),
    ("sender wrong dscp", "sender", rail_delta({0: {"tx_bytes": 10 * MIB}}),
     ["no_traffic_in_priority", "priority0_not_flat"]),
    ("receiver wrong map", "receiver", rail_delta({0: {"rx_bytes": 10 * MIB}}),
     ["no_traffic_in_priority", "priority0_not_flat"]),
    ("prio 0 a little", "sender", rail_delta({3: {"tx_bytes": 10 * MIB}, 0: {"tx_bytes": 1000}}), []),
    ("prio 0 too much", "sender", rail_delta({3: {"tx_bytes": 10 * MIB}, 0: {"tx_bytes": 2 * MIB}}),
     ["priority0_not_flat"]),
    ("other priority", "sender", rail_delta({3: {"tx_bytes": 10 * MIB}, 1: {"tx_bytes": 5 * MIB}}),
     ["traffic_in_other_priority"]),
    ("discards", "receiver", rail_delta({3: {"rx_bytes": 10 * MIB, "rx_discards": 4}}), ["discards_in_priority"]),
    ("pfc off", "sender", rail_delta(GOOD_TX, pfc=()), ["pfc_off"]),
    ("reset", "sender", rail_delta(GOOD_TX, reset=True), ["counters_reset"]),
    ("missing", "sender", None, ["rail_missing"]),
    ("storage requests unmarked", "storage", rail_delta({3: {"rx_bytes": 10 * MIB}, 0: {"tx_bytes": 3 * MIB}}),
     ["priority0_not_flat"]),
    ("storage array unmarked", "storage", rail_delta({0: {"rx_bytes": 10 * MIB}}),
     ["no_traffic_in_priority", "priority0_not_flat"]),
    ("sender rx irrelevant", "sender", rail_delta({3: {"tx_bytes": 10 * MIB}, 0: {"rx_bytes": 9 * MIB}}), []),
]


@pytest.mark.parametrize("name,role,rd,reasons", CHECK_CASES, ids=[x[0] for x in CHECK_CASES])
def test_check_rail(name, role, rd, reasons):
    assert [f["reason"] for f in c.check_rail(rd, role, 3, MIB, MIB)] == reasons


def test_check_rail_bad_role():
    with pytest.raises(c.CountersError, match="role"):
        c.check_rail(rail_delta(), "bystander")


def delta_of(rails):
    return {"schema": c.SCHEMA_DELTA, "interval_s": 1.0, "rails": rails}


PAUSED = {3: {"tx_bytes": 10 * MIB, "rx_pause": 40}}


def plan(senders=("s1", "s2"), netdev="ens1np0"):
    parts = [{"host": "r", "netdev": netdev, "role": "receiver"}]
    parts += [{"host": s, "netdev": netdev, "role": "sender"} for s in senders]
    return [{"rail": "rail0", "participants": parts}]


EVAL_CASES = [
    ("incast passes", plan(), {"r": rail_delta({3: {"rx_bytes": 20 * MIB}}), "s1": rail_delta(PAUSED),
                               "s2": rail_delta(PAUSED)}, True, [], []),
    ("incast without pause", plan(), {"r": rail_delta({3: {"rx_bytes": 20 * MIB}}), "s1": rail_delta(GOOD_TX),
                                      "s2": rail_delta(GOOD_TX)}, True, ["no_pause_under_incast"], []),
    ("pause not required", plan(), {"r": rail_delta({3: {"rx_bytes": 20 * MIB}}), "s1": rail_delta(GOOD_TX),
                                    "s2": rail_delta(GOOD_TX)}, False, [], []),
    ("one sender needs no pause", plan(("s1",)), {"r": rail_delta(GOOD_RX), "s1": rail_delta(GOOD_TX)}, True,
     [], []),
    ("wrong dscp on s2", plan(), {"r": rail_delta({3: {"rx_bytes": 10 * MIB}, 0: {"rx_bytes": 10 * MIB}}),
                                  "s1": rail_delta(PAUSED), "s2": rail_delta({0: {"tx_bytes": 10 * MIB}})}, True,
     ["priority0_not_flat", "no_traffic_in_priority", "priority0_not_flat"], ["r/ens1np0", "s2/ens1np0"]),
    ("host without delta", plan(("s1",)), {"r": rail_delta(GOOD_RX)}, True, ["rail_missing"], ["s1/ens1np0"]),
]


@pytest.mark.parametrize("name,pl,rails,expect_pause,reasons,failed", EVAL_CASES, ids=[x[0] for x in EVAL_CASES])
def test_evaluate(name, pl, rails, expect_pause, reasons, failed):
    deltas = dict((h, delta_of({"ens1np0": rd})) for h, rd in rails.items())
    res = c.evaluate(pl, deltas, 3, MIB, MIB, expect_pause)
    assert res["ok"] is (not reasons)
    assert [r for f in res["failures"] for r in f["reasons"]] == reasons
    assert res["failed"] == failed


def test_wrong_dscp_message_names_sender_rail_and_cause():
    deltas = {"r": delta_of({"ens1np0": rail_delta({3: {"rx_bytes": 10 * MIB}, 0: {"rx_bytes": 10 * MIB}})}),
              "s1": delta_of({"ens1np0": rail_delta(PAUSED)}),
              "s2": delta_of({"ens1np0": rail_delta({0: {"tx_bytes": 10 * MIB}})})}
    res = c.evaluate(plan(), deltas)
    msgs = [f["message"] for f in res["failures"]]
    assert any(m.startswith("s2 rail ens1np0 (sender, rail0)") and "wrong DSCP" in m for m in msgs), msgs
    assert any(m.startswith("r rail ens1np0 (receiver") and "traffic from s2" in m for m in msgs), msgs
    assert not any(m.startswith("s1") for m in msgs)
    md = c.to_markdown(res)
    assert md.startswith("# gpufabric fabric acceptance\n\nFAIL") and "| rail0 | s2 | ens1np0 | sender |" in md


def test_tool_error_is_a_failure():
    deltas = {"r": delta_of({"ens1np0": rail_delta(GOOD_RX)}), "s1": delta_of({"ens1np0": rail_delta(GOOD_TX)})}
    res = c.evaluate(plan(("s1",)), deltas, errors={"s1": {"ens1np0": "ib_write_bw rc=1: REJECTED"}})
    assert res["failures"][0]["reasons"] == ["tool_failed"] and "REJECTED" in res["failures"][0]["message"]


@pytest.mark.parametrize("bad,match", [
    ([], "non-empty"),
    ([{"participants": []}], "rail"),
    ([{"rail": "x", "participants": []}], "no participants"),
    ([{"rail": "x", "participants": [{"host": "a"}]}], "host' and 'netdev"),
    ([{"rail": "x", "participants": [{"host": "a", "netdev": "e", "role": "boss"}]}], "role"),
])
def test_bad_plan(bad, match):
    with pytest.raises(c.CountersError, match=match):
        c.evaluate(copy.deepcopy(bad), {})


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * MIB, "3.0 MiB")])
def test_human_bytes(n, text):
    assert c.human_bytes(n) == text


# --- ECN/CNP (hw_counters) as the congestion signal of an incast --------------------------------------------------

def cc(marked=0, sent=0, handled=0, ignored=0):
    return {"np_ecn_marked_roce_packets": marked, "np_cnp_sent": sent, "rp_cnp_handled": handled,
            "rp_cnp_ignored": ignored}


def with_cc(rd, counters, reset=False):
    rd = copy.deepcopy(rd)
    rd["rdma"], rd["rdma_reset"] = counters, reset
    return rd


ECN_CASES = [
    # receiver NP saw CE and sent CNPs, senders' RPs handled them: no pause needed
    ("ecn-only incast passes", {"r": with_cc(rail_delta(GOOD_RX), cc(900, 300)),
                                "s1": with_cc(rail_delta(GOOD_TX), cc(handled=150)),
                                "s2": with_cc(rail_delta(GOOD_TX), cc(handled=150))}, True, None),
    ("neither pauses nor ecn fails", {"r": with_cc(rail_delta(GOOD_RX), cc()),
                                      "s1": with_cc(rail_delta(GOOD_TX), cc()),
                                      "s2": with_cc(rail_delta(GOOD_TX), cc())}, False, "neither PFC nor DCQCN"),
    ("marked but no cnp fails (NP off)", {"r": with_cc(rail_delta(GOOD_RX), cc(900, 0)),
                                          "s1": with_cc(rail_delta(GOOD_TX), cc()),
                                          "s2": with_cc(rail_delta(GOOD_TX), cc())}, False,
     "notification point is off"),
    ("counters unreadable and no pause fails saying so", {"r": rail_delta(GOOD_RX), "s1": rail_delta(GOOD_TX),
                                                          "s2": rail_delta(GOOD_TX)}, False,
     "could not be read"),
    ("a reset rdma counter is not evidence", {"r": with_cc(rail_delta(GOOD_RX), cc(900, 300), reset=True),
                                              "s1": with_cc(rail_delta(GOOD_TX), cc()),
                                              "s2": with_cc(rail_delta(GOOD_TX), cc())}, False, "neither PFC nor DCQCN"),
    ("pauses and ecn both pass", {"r": with_cc(rail_delta(GOOD_RX), cc(10, 5)),
                                  "s1": with_cc(rail_delta(PAUSED), cc(handled=5)),
                                  "s2": with_cc(rail_delta(PAUSED), cc())}, True, None),
]


@pytest.mark.parametrize("name,rails,ok,needle", ECN_CASES, ids=[x[0] for x in ECN_CASES])
def test_evaluate_ecn_as_congestion_signal(name, rails, ok, needle):
    deltas = dict((h, delta_of({"ens1np0": rd})) for h, rd in rails.items())
    res = c.evaluate(plan(), deltas, 3, MIB, MIB, True)
    assert res["ok"] is ok, res["failures"]
    if needle:
        assert [r for f in res["failures"] for r in f["reasons"]] == ["no_pause_under_incast"]
        assert needle in res["failures"][0]["message"]
    md = c.to_markdown(res)
    assert "ECN marked/CNP sent/CNP handled" in md
    if ok and res["rails"][0]["pause_frames"] == 0:
        assert res["rails"][0]["congestion"]["ecn_acted"] is True
        assert "| r | ens1np0 | receiver |" in md and "| 900/300/0 |" in md


def test_rdma_delta_and_reset():
    b = {"schema": c.SCHEMA_SNAPSHOT, "time": 1, "rails": {"e": {"prio": {}, "rdma": cc(5, 5, 5, 5)}}}
    a = {"schema": c.SCHEMA_SNAPSHOT, "time": 2, "rails": {"e": {"prio": {}, "rdma": cc(9, 7, 5, 6)}}}
    d = c.delta(b, a)["rails"]["e"]
    assert d["rdma"] == cc(4, 2, 0, 1) and d["rdma_reset"] is False
    d = c.delta(a, b)["rails"]["e"]
    assert d["rdma"] == cc(5, 5, 5, 5) and d["rdma_reset"] is True
    no = {"schema": c.SCHEMA_SNAPSHOT, "time": 2, "rails": {"e": {"prio": {}, "rdma": None}}}
    assert "rdma" not in c.delta(b, no)["rails"]["e"]


def test_snapshot_reads_the_rdma_ports_hw_counters(tmp_path):
    from gpufabric_sim import tree as sim_tree
    from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
    root = str(tmp_path / "root")
    sim_tree.build_tree(root, "hgx-h200")
    with open(tmp_path / "root/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent", "w") as f:
        f.write("17\n")
    text = "\n".join("     %s_prio%d_bytes: 0" % (d, p) for d in ("rx", "tx") for p in range(8))
    snap = c.snapshot(lambda argv: (0, text, ""), ["ens1np0", "eth9"], sysroot=Sysroot(root))
    assert snap["rails"]["ens1np0"]["rdma"] == cc(sent=17)
    assert snap["rails"]["eth9"]["rdma"] is None and "no RDMA device" in snap["rails"]["eth9"]["rdma_error"]
