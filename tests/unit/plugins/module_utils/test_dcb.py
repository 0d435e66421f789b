# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

import json
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim.emulators import dcb as dcb_emu

__metaclass__ = type

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "dcb")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


# ------------------------------------------------------------------------------------------------
# parsing: both JSON shapes, captured samples
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,dscp,count", [
    ("app_61_pcp_trust.json", {}, 0),
    ("app_65_pcp_trust.json", {}, 0),
    ("app_61_generic_multi.json", {26: [3, 5], 48: [6]}, 3),
    ("app_65_generic_multi.json", {26: [3, 5], 48: [6]}, 3),
    ("app_61_pretty.json", {26: [3, 5], 48: [6]}, 3),
])
def test_parse_app_fixtures(name, dscp, count):
    app = dcb.parse_app(fixture(name))
    assert app["dscp"] == dscp
    assert app["count"] == count


@pytest.mark.parametrize("name", ["app_61_mlx5_dscp64_26to5.json", "app_65_mlx5_dscp64_26to5.json"])
def test_parse_mlx5_64_entry_table(name):
    app = dcb.parse_app(fixture(name))
    assert app["count"] == 64
    assert sorted(app["dscp"]) == list(range(64))
    for d in range(64):
        assert app["dscp"][d] == [5 if d == 26 else d >> 3]
    assert dcb.trust_of(app, None) == "dscp"


@pytest.mark.parametrize("text,expected", [
    ('{"dscp_prio":[[26,3]]}\n', {26: [3]}),
    ('{"dscp_prio":[[26,3," "]]}\n', {26: [3]}),
    ('{"dscp_prio":[[26,3," "],[10,1," "]],"pcp_prio":[["3nd",3," "]]}', {26: [3], 10: [1]}),
    ("", {}),
    ("{}\n", {}),
])
def test_parse_app_shapes(text, expected):
    assert dcb.parse_app(text)["dscp"] == expected


def test_mlx5_pcp_trust_without_dscp_entries():
    app = dcb.parse_app(fixture("app_61_pcp_trust.json"))
    assert dcb.trust_of(app, None) == "pcp"
    assert app["dscp"] == {}


@pytest.mark.parametrize("text", ['{"dscp_prio":[[26]]}', '{"dscp_prio":[26]}', "not json", "[1]"])
def test_parse_app_garbage(text):
    with pytest.raises(dcb.DcbError):
        dcb.parse_app(text)


def test_parse_pfc_and_stats():
    off = dcb.parse_pfc(fixture("pfc_off.json"))
    assert off["enabled"] == [] and off["pfc_cap"] == 8 and off["delay"] == 7
    on = dcb.parse_pfc(fixture("pfc_3_stats.json"))
    assert on["enabled"] == [3]
    assert on["requests"] == [0] * 8 and on["indications"] == [0] * 8
    with pytest.raises(dcb.DcbError):
        dcb.parse_pfc('{"pfc_cap":8}')


def test_parse_ets_and_apptrust():
    ets = dcb.parse_ets(fixture("ets_mlx5_default.json"))
    assert ets["tc_tsa"] == ["vendor"] * 8
    assert ets["prio_tc"] == [1, 0, 2, 3, 4, 5, 6, 7]
    assert dcb.parse_apptrust(fixture("apptrust_generic.json")) == ["pcp"]
    assert dcb.trust_of({"dscp": {26: [3]}}, ["pcp"]) == "pcp"
    assert dcb.trust_of({"dscp": {}}, ["dscp", "pcp"]) == "dscp"


@pytest.mark.parametrize("text,version", [
    ("dcb utility, iproute2-6.1.0\n", (6, 1, 0)),
    ("dcb utility, iproute2-6.5.0\n", (6, 5, 0)),
    ("dcb utility, iproute2-v6.8.0-12-gabc\n", (6, 8, 0)),
    ("dcb utility, iproute2-5.12\n", (5, 12, 0)),
])
def test_parse_version(text, version):
    assert dcb.parse_version(text) == version


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("desired,needle", [
    ({"dscp_map": [{"dscp": 64, "priority": 3}]}, "DSCP 64 is out of range"),
    ({"dscp_map": [{"dscp": -1, "priority": 3}]}, "DSCP -1 is out of range"),
    ({"dscp_map": [{"dscp": 26, "priority": 8}]}, "priority 8 for DSCP 26"),
    ({"dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 26, "priority": 4}]}, "two priorities"),
    ({"dscp_map": [{"dscp": 26}]}, "exactly the keys"),
    ({"dscp_map": {"26": 3}}, "must be a list"),
    ({"dscp_map": [{"dscp": "x", "priority": 3}]}, "must be an integer"),
    ({"dscp_map": [{"dscp": True, "priority": 3}]}, "must be an integer"),
    ({"pfc_priorities": [3, 3]}, "lists priority 3 twice"),
    ({"pfc_priorities": [8]}, "PFC priority 8 is out of range"),
    ({"trust": "vlan"}, "trust must be one of"),
    ({"trust": "dscp", "dscp_map": []}, "needs at least one dscp_map entry"),
    ({"trust": "pcp", "dscp_map": [{"dscp": 26, "priority": 3}]}, "cannot be combined"),
    ({"ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [10] * 8, "prio_tc": list(range(8))}}, "sums to 80%"),
    ({"ets": {"tc_tsa": ["strict"] * 8, "tc_bw": [10] * 8, "prio_tc": list(range(8))}}, "0 or 100"),
    ({"ets": {"tc_tsa": ["ets"] * 7, "tc_bw": [10] * 8, "prio_tc": list(range(8))}}, "must list 8"),
    ({"ets": {"tc_tsa": ["wfq"] * 8, "tc_bw": [0] * 8, "prio_tc": list(range(8))}}, "not one of"),
    ({"ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [100] + [0] * 7, "prio_tc": [8] * 8}}, "TCs are 0..7"),
    ({"ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [100] + [0] * 7}}, "missing: prio_tc"),
    ({"ets": {"tc_tsa": ["ets"] * 8, "tc_bw": [101] + [0] * 7, "prio_tc": [0] * 8}}, "0..100"),
    ({"colour": "blue"}, "unknown DCB settings"),
    ({"dcbx": "lld"}, "dcbx must be one of host, keep"),
])
def test_normalize_desired_errors(desired, needle):
    with pytest.raises(dcb.DcbValidationError) as e:
        dcb.normalize_desired(desired)
    assert needle in str(e.value)


@pytest.mark.parametrize("desired,expected", [
    ({}, {"dscp_map": {26: 3}, "pfc": [3], "trust": "dscp", "ets": None, "other_app_entries": "keep"}),
    ({"trust": "pcp"}, {"dscp_map": {}, "pfc": [3], "trust": "pcp", "ets": None, "other_app_entries": "keep"}),
    ({"pfc_priorities": [5, 3], "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 26, "priority": 3}]},
     {"dscp_map": {26: 3}, "pfc": [3, 5], "trust": "dscp", "ets": None, "other_app_entries": "keep"}),
    ({"pfc_priorities": [], "other_app_entries": "remove"},
     {"dscp_map": {26: 3}, "pfc": [], "trust": "dscp", "ets": None, "other_app_entries": "remove"}),
    ({"dcbx": "keep"}, {"dscp_map": {26: 3}, "pfc": [3], "trust": "dscp", "ets": None, "other_app_entries": "keep",
                        "dcbx": "keep"}),
    # the boundaries: DSCP 0 and 63 (64 is refused above), priority 7
    ({"dscp_map": [{"dscp": 63, "priority": 7}, {"dscp": 0, "priority": 0}]},
     {"dscp_map": {0: 0, 63: 7}, "pfc": [3], "trust": "dscp", "ets": None, "other_app_entries": "keep"}),
])
def test_normalize_desired_ok(desired, expected):
    assert dcb.normalize_desired(desired) == dict({"dcbx": "host"}, **expected)


def _sysroot(tmp_path, devs, driver="mlx5_core"):
    for d in devs:
        dev_dir = tmp_path / "sys" / "class" / "net" / d
        dev_dir.mkdir(parents=True)
        if driver:
            drv = tmp_path / "sys" / "bus" / "pci" / "drivers" / driver
            drv.mkdir(parents=True, exist_ok=True)
            (dev_dir / "device").mkdir()
            os.symlink(str(drv), str(dev_dir / "device" / "driver"))
    return Sysroot(str(tmp_path))


@pytest.mark.parametrize("rails,needle", [
    ([], "at least one"),
    (["ens1np0", "ens1np0"], "twice"),
    (["ens1np0", "ens9np0"], "unknown rail(s) ens9np0"),
    (["a/b"], "not a valid"),
    (["x" * 16], "not a valid"),
])
def test_validate_rails(tmp_path, rails, needle):
    sr = _sysroot(tmp_path, ["ens1np0"])
    with pytest.raises(dcb.DcbValidationError) as e:
        dcb.validate_rails(sr, rails)
    assert needle in str(e.value)


def test_driver_of(tmp_path):
    sr = _sysroot(tmp_path, ["ens1np0"])
    assert dcb.driver_of(sr, "ens1np0") == "mlx5_core"
    assert dcb.driver_of(sr, "nope") is None


# plan: tests/unit/plugins/module_utils/test_dcb_plan.py

ETS = {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
       "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]}


# ------------------------------------------------------------------------------------------------
# apply_dcb against the emulator (in-process runner)
# ------------------------------------------------------------------------------------------------

class EmuRunner(object):
    def __init__(self, root):
        self.root = root
        self.calls = []
        self.batches = []

    def __call__(self, argv):
        assert argv[0] == "dcb"
        self.calls.append(list(argv))
        if "-b" in argv:
            with open(argv[argv.index("-b") + 1]) as f:
                self.batches.append(f.read().splitlines())
        return dcb_emu.run(argv[1:], root=self.root)

    def writes(self):
        return [c for c in self.calls if c[1] in ("app", "pfc", "ets", "apptrust", "dcbx")
                and c[2] in ("add", "del", "replace", "flush", "set")]


def _node(tmp_path, rails, version="6.1.0", driver="mlx5_core"):
    sr = _sysroot(tmp_path, rails, driver=None if driver == "none" else
                  ("mlx5_core" if driver == "mlx5_core" else "other_drv"))
    dcb_emu.init_node(str(tmp_path), version)
    for r in rails:
        dcb_emu.init_device(str(tmp_path), r, driver="mlx5_core" if driver in ("mlx5_core", "none")
                            else "other")
    return sr, EmuRunner(str(tmp_path))


RAILS = ["ens1np0", "ens2np0"]


@pytest.mark.parametrize("version", ["6.1.0", "6.5.0"])
def test_apply_from_boot_then_idempotent(tmp_path, version):
    sr, run = _node(tmp_path, RAILS, version)
    res = dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    # mlx5 rails need no version: dcb -V is not run
    assert res["changed"] and res["dcb_version"] is None
    # per rail: the whole table (PCP -> DSCP switch), the delete of what must not stay in priority 3, pfc set
    assert [c[1:3] for c in res["commands"]] == [["app", "add"], ["app", "del"], ["pfc", "set"]] * 2
    for r in res["rails"]:
        assert r["before"]["trust"] == "pcp" and r["after"]["trust"] == "dscp"
        # 64 DSCP entries but 24, 25, 27..31 (firmware default priority 3 = lossless, nobody wanted them)
        assert r["after"]["dscp_prio"] == {"26": 3} and r["after"]["dscp_entries"] == 57
        assert r["after"]["pfc"] == [3]
    for rail in RAILS:
        st = dcb_emu.state(str(tmp_path), rail)
        assert st["counters"]["link_toggles"] == 1
    # second run: compliant, no write at all, no pfc set
    run.calls = []
    res2 = dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    assert not res2["changed"] and res2["commands"] == [] and res2["drift"] == []
    assert run.writes() == []
    for rail in RAILS:
        c = dcb_emu.state(str(tmp_path), rail)["counters"]
        assert c["pfc_set_calls"] == 1 and c["app_set_calls"] == 1 and c["app_del_calls"] == 1
        st = dcb_emu.state(str(tmp_path), rail)
        assert [d for d in range(64) if dcb_emu.dscp_priority(st, d) == 3] == [26]


def _batch_lines(calls):
    """The show commands of the dcb -j -b FILE calls (the runner records the file's lines)."""
    return [c for c in calls if c[:3] == ["dcb", "-j", "-b"]]


def test_reads_all_rails_in_one_process(tmp_path):
    sr, run = _node(tmp_path, RAILS, "6.5.0")
    dcb.apply_dcb(run, RAILS, {}, True, sysroot=sr)
    assert len(run.calls) == 1 and run.calls[0][:3] == ["dcb", "-j", "-b"]
    assert run.batches == [["%s show dev %s" % (o, r) for r in RAILS for o in ("app", "pfc", "dcbx")]]
    assert not os.path.exists(run.calls[0][3])


def test_converge_reads_back_in_one_batch(tmp_path):
    sr, run = _node(tmp_path, RAILS, "6.5.0")
    dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    # read, 3 writes per rail (app add, app del, pfc set), read back: no -V, no per-object reads
    assert len(run.calls) == 2 + 3 * len(RAILS)
    assert len(_batch_lines(run.calls)) == 2
    assert run.calls[0][:3] == ["dcb", "-j", "-b"] and run.calls[-1][:3] == ["dcb", "-j", "-b"]


def test_non_mlx5_queries_version_and_batches_apptrust(tmp_path):
    sr, run = _node(tmp_path, ["eth9"], "6.5.0", driver="other")
    res = dcb.apply_dcb(run, ["eth9"], {}, True, sysroot=sr)
    assert res["dcb_version"] == "6.5.0"
    assert run.calls[:2] == [["dcb", "-V"], ["dcb", "-j", "apptrust", "show", "dev", "eth9"]]
    assert run.batches == [["app show dev eth9", "pfc show dev eth9", "apptrust show dev eth9", "dcbx show dev eth9"]]


SPLIT = [
    ("two objects", '{"a":1},{"b":[1,2]}\n', 2, [{"a": 1}, {"b": [1, 2]}]),
    ("empty app table", '{},{"prio_pfc":[]}\n', 2, [{}, {"prio_pfc": []}]),
    ("count mismatch", '{},{}\n', 3, None),
    ("not objects", '[1],[2]\n', 2, None),
    ("garbage", 'Attribute read\n', 1, None),
    ("nothing for one command", '\n', 1, None),
    ("nothing for nothing", '', 0, []),
]


@pytest.mark.parametrize("case", SPLIT, ids=[c[0] for c in SPLIT])
def test_split_batch_json(case):
    _id, text, count, expected = case
    got = dcb.split_batch_json(text, count)
    assert (None if got is None else [json.loads(t) for t in got]) == expected


def test_batch_failure_falls_back_to_precise_errors(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"], "6.5.0")
    (tmp_path / "sys" / "class" / "net" / "veth0").mkdir()
    res = dcb.apply_dcb(run, ["ens1np0", "veth0"], {}, True, sysroot=sr)
    ok, bad = res["results"]
    assert bad["object"] == "veth0" and bad["result"] == "failed"
    assert "dcb -j app show dev veth0 failed" in bad["error"] and "Operation not supported" in bad["error"]
    # the readable rail is still planned (check mode: would change)
    assert ok["object"] == "ens1np0" and ok["result"] == "changed" and res["changed"]
    # veth0 has no driver: its apptrust probe needs the version first; -V runs once, not again on fallback
    assert [c[:3] for c in run.calls[:3]] == [["dcb", "-V"], ["dcb", "-j", "apptrust"], ["dcb", "-j", "-b"]]
    assert run.calls.count(["dcb", "-V"]) == 1
    assert ["dcb", "-j", "app", "show", "dev", "ens1np0"] in run.calls


def test_batch_output_unexpected_falls_back(tmp_path):
    sr, run = _node(tmp_path, RAILS)

    def no_batch(argv):
        if "-b" in argv:
            return 0, "{}\n", ""  # one object for four commands: not trusted
        return run(argv)
    res = dcb.apply_dcb(no_batch, RAILS, {}, True, sysroot=sr)
    assert res["changed"] and res["dcb_version"] == "6.1.0"
    assert run.calls == [["dcb", "-V"]] + [
        c for r in RAILS for c in (["dcb", "-j", "app", "show", "dev", r], ["dcb", "-j", "pfc", "show", "dev", r],
                                   ["dcb", "-j", "dcbx", "show", "dev", r])]


def test_only_drifted_rail_is_touched(tmp_path):
    sr, run = _node(tmp_path, RAILS)
    dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    # someone remaps DSCP 26 on rail 2 by hand
    dcb_emu.run(["app", "add", "dev", "ens2np0", "dscp-prio", "26:5"], root=str(tmp_path))
    run.calls = []
    res = dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    assert run.writes() == [["dcb", "app", "add", "dev", "ens2np0", "dscp-prio", "26:3"]]
    assert [d["object"] for d in res["drift"]] == ["ens2np0"]
    assert res["drift"][0]["current"] == 5
    assert dcb_emu.state(str(tmp_path), "ens2np0")["counters"]["pfc_set_calls"] == 1


def test_pfc_off_one_pfc_set_and_right_pfc_never(tmp_path):
    sr, run = _node(tmp_path, RAILS)
    dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    dcb_emu.run(["pfc", "set", "dev", "ens1np0", "prio-pfc", "all:off"], root=str(tmp_path))
    run.calls = []
    res = dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    assert run.writes() == [["dcb", "pfc", "set", "dev", "ens1np0", "prio-pfc", "all:off", "3:on"]]
    assert res["drift"] == [{"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}]
    assert dcb_emu.state(str(tmp_path), "ens2np0")["counters"]["pfc_set_calls"] == 1


def test_check_mode_reads_only(tmp_path):
    sr, run = _node(tmp_path, RAILS)
    res = dcb.apply_dcb(run, RAILS, {}, True, sysroot=sr)
    assert res["changed"] and len(res["commands"]) == 6
    assert run.writes() == []
    assert res["rails"][0]["after"]["trust"] == "dscp"
    st = dcb_emu.state(str(tmp_path), "ens1np0")
    assert st["trust"] == "pcp" and st["apps"] == [] and st["counters"]["pfc_set_calls"] == 0


def test_after_reset_reapplies(tmp_path):
    sr, run = _node(tmp_path, RAILS, "6.5.0")
    dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    dcb_emu.reset_device(str(tmp_path), "ens1np0")
    res = dcb.apply_dcb(run, RAILS, {}, False, sysroot=sr)
    assert [r["changed"] for r in res["rails"]] == [True, False]


def test_generic_driver_uses_apptrust(tmp_path):
    sr, run = _node(tmp_path, ["eth9"], "6.5.0", driver="other")
    res = dcb.apply_dcb(run, ["eth9"], {}, False, sysroot=sr)
    r = res["rails"][0]
    assert r["apptrust_supported"]
    assert ["dcb", "apptrust", "set", "dev", "eth9", "order", "dscp"] in r["commands"]
    assert dcb_emu.state(str(tmp_path), "eth9")["apptrust"] == ["dscp"]
    assert r["after"]["trust"] == "dscp"
    # remap on the generic table: replace leaves exactly one priority
    dcb_emu.run(["app", "add", "dev", "eth9", "dscp-prio", "26:5"], root=str(tmp_path))
    res = dcb.apply_dcb(run, ["eth9"], {}, False, sysroot=sr)
    assert res["rails"][0]["commands"] == [["dcb", "app", "replace", "dev", "eth9", "dscp-prio", "26:3"]]
    assert [a for a in dcb_emu.state(str(tmp_path), "eth9")["apps"] if a[1] == 26] == [[5, 26, 3]]


def test_mlx5_on_65_never_sets_apptrust(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"], "6.5.0")
    res = dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert not res["rails"][0]["apptrust_supported"]
    assert not any("apptrust" in c for c in run.calls)


def test_apptrust_probe_when_driver_unknown(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"], "6.5.0", driver="none")
    res = dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert not res["rails"][0]["apptrust_supported"]
    assert [c for c in run.calls if "apptrust" in c] == [["dcb", "-j", "apptrust", "show", "dev", "ens1np0"]]
    assert res["rails"][0]["after"]["dscp_prio"] == {"26": 3}


def test_ets_applied_and_verified(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"])
    res = dcb.apply_dcb(run, ["ens1np0"], {"ets": ETS}, False, sysroot=sr)
    assert res["rails"][0]["after"]["ets"]["tc_tsa"] == ETS["tc_tsa"]
    run.calls = []
    res = dcb.apply_dcb(run, ["ens1np0"], {"ets": ETS}, False, sysroot=sr)
    assert not res["changed"]


def test_ets_left_alone_when_not_given(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"])
    dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert not any(c[2] == "ets" for c in run.calls if len(c) > 2)
    assert dcb_emu.state(str(tmp_path), "ens1np0")["counters"]["ets_set_calls"] == 0


def test_trust_pcp_flushes_dscp_entries(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"])
    dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    res = dcb.apply_dcb(run, ["ens1np0"], {"trust": "pcp"}, False, sysroot=sr)
    assert res["rails"][0]["after"]["trust"] == "pcp"
    assert dcb_emu.state(str(tmp_path), "ens1np0")["trust"] == "pcp"


@pytest.mark.parametrize("reply,needle", [
    ((0, "dcb utility, iproute2-5.10.0\n", ""), "too old"),
    ((1, "", "boom"), "dcb -V failed"),
    ((0, "garbage\n", ""), "cannot read the iproute2 version"),
])
def test_dcb_version_errors(tmp_path, reply, needle):
    sr = _sysroot(tmp_path, ["ens1np0"])
    calls = []

    def run(argv):
        calls.append(argv)
        return reply
    with pytest.raises(dcb.DcbError) as e:
        dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert needle in str(e.value)
    # the batch read fails (its output is no JSON); dcb -V then says why
    assert [c[:3] for c in calls] == [["dcb", "-j", "-b"], ["dcb", "-V"]]


def test_dcb_missing(tmp_path):
    sr = _sysroot(tmp_path, ["ens1np0"])

    def run(argv):
        raise OSError(2, "No such file or directory")
    with pytest.raises(dcb.DcbError) as e:
        dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert "cannot run dcb" in str(e.value)


def test_validation_runs_nothing(tmp_path):
    sr = _sysroot(tmp_path, ["ens1np0"])
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "", ""
    for rails, desired in ((["ens1np0", "nope0"], {}), (["ens1np0"], {"pfc_priorities": [3, 3]}), ([], {})):
        with pytest.raises(dcb.DcbValidationError):
            dcb.apply_dcb(run, rails, desired, False, sysroot=sr)
    assert calls == []


def test_device_without_dcb_fails_clearly(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"])
    (tmp_path / "sys" / "class" / "net" / "veth0").mkdir()
    res = dcb.apply_dcb(run, ["veth0"], {}, False, sysroot=sr)
    assert not res["changed"] and res["commands"] == [] and run.writes() == []
    assert res["results"] == [{"object": "veth0", "result": "failed", "error": res["errors"][0], "changes": []}]
    assert "Operation not supported" in res["errors"][0] and "veth0" in res["errors"][0]


def test_readback_mismatch_fails(tmp_path):
    sr, run = _node(tmp_path, ["ens1np0"])

    def lying(argv):
        if argv[1:3] == ["pfc", "set"]:
            return 0, "", ""  # claims success, changes nothing
        return run(argv)
    res = dcb.apply_dcb(lying, ["ens1np0"], {}, False, sysroot=sr)
    r = res["results"][0]
    assert r["result"] == "failed" and "does not read back" in r["error"] and "pfc" in r["error"]
    # the DSCP entry did get in: the rail changed in part, and says so
    assert res["changed"] and [c["key"] for c in r["changes"]] == ["trust", "dscp_prio:26"]


# (failing command, commands that must have run on the rail, what changed on it)
FAILING_COMMAND_CASES = [
    ("app", [["app", "add"]], []),
    # PCP -> DSCP trust on mlx5: the whole table in one add, the extra DSCPs of the lossless priority deleted, then PFC
    ("pfc", [["app", "add"], ["app", "del"], ["pfc", "set"]], ["trust", "dscp_prio:26"]),
]


@pytest.mark.parametrize("obj,ran,changed_keys", FAILING_COMMAND_CASES, ids=[c[0] for c in FAILING_COMMAND_CASES])
def test_failed_command_stops_that_rail_only(tmp_path, obj, ran, changed_keys):
    sr, run = _node(tmp_path, RAILS)

    def failing(argv):
        if argv[1:3] == [obj, {"app": "add", "pfc": "set"}[obj]] and argv[4] == RAILS[0]:
            return 1, "", "Attribute write: Invalid argument\n"
        return run(argv)
    res = dcb.apply_dcb(failing, RAILS, {}, False, sysroot=sr)
    bad, good = res["results"]
    assert bad["result"] == "failed" and "Invalid argument" in bad["error"] and RAILS[0] in bad["error"]
    assert [c[1:3] for c in res["commands"] if c[4] == RAILS[0]] == ran
    assert [c["key"] for c in bad["changes"]] == changed_keys
    # the other rail is configured all the same
    assert good["result"] == "changed" and good["error"] is None
    assert dcb_emu.state(str(tmp_path), RAILS[1])["trust"] == "dscp"
    assert res["changed"] and res["errors"] == [bad["error"]]


def test_diff_text():
    results = [{"rail": "r0", "before": {"trust": "pcp", "pfc": [], "dscp_prio": {"26": None}},
                "after": {"trust": "dscp", "pfc": [3], "dscp_prio": {"26": 3}}}]
    assert dcb.diff_text(results, "before") == "r0 trust=pcp pfc=none dscp26->None\n"
    assert dcb.diff_text(results, "after") == "r0 trust=dscp pfc=3 dscp26->3\n"


def defect_61(run):
    """iproute2 6.1's batch mode as seen with bookworm's dcb on the VM lab's DCB driver: the first command answers,
    the second fails with "Attribute not found: Success" and the batch stops (rc 1)."""
    def runner(argv):
        if "-b" not in argv:
            return run(argv)
        with open(argv[argv.index("-b") + 1]) as f:
            first = f.read().splitlines()[0].split()
        rc, out, _err = run(["dcb", "-j"] + first)
        assert rc == 0
        run.calls.append(["batch-defect"])
        return 1, out, "Attribute not found: Success\nCommand failed %s:2\n" % argv[argv.index("-b") + 1]
    return runner


def test_iproute2_61_batch_defect_reads_the_rest_without_version(tmp_path):
    sr, run = _node(tmp_path, RAILS)
    res = dcb.apply_dcb(defect_61(run), RAILS, {}, True, sysroot=sr)
    assert res["changed"] and res["dcb_version"] is None
    singles = [c for c in run.calls if c[:2] == ["dcb", "-j"] and "-b" not in c]
    # the batch's first answer (app of the first rail, re-run here by the stand-in) is used; the other 5 objects
    # are read one by one; no dcb -V
    assert singles[0] == ["dcb", "-j", "app", "show", "dev", RAILS[0]]
    assert singles[1:] == [["dcb", "-j", "pfc", "show", "dev", RAILS[0]],
                           ["dcb", "-j", "dcbx", "show", "dev", RAILS[0]],
                           ["dcb", "-j", "app", "show", "dev", RAILS[1]],
                           ["dcb", "-j", "pfc", "show", "dev", RAILS[1]],
                           ["dcb", "-j", "dcbx", "show", "dev", RAILS[1]]]
    assert ["dcb", "-V"] not in run.calls
    assert [r["before"]["trust"] for r in res["rails"]] == ["pcp", "pcp"]


@pytest.mark.parametrize("err,out,version_probed", [
    # the first command itself failed: nothing answered, the tool may be missing features
    ("Attribute not found: Success\nCommand failed /tmp/x:1\n", "", True),
    # another failure at line 2: not the known defect
    ("Operation not supported\nCommand failed /tmp/x:2\n", '{"dscp_prio":[]}\n', True),
    # the defect signature but the answered prefix is not JSON
    ("Attribute not found: Success\nCommand failed /tmp/x:2\n", "garbage\n", True),
])
def test_batch_failures_other_than_the_defect(tmp_path, err, out, version_probed):
    sr, run = _node(tmp_path, RAILS)

    def runner(argv):
        if "-b" in argv:
            return 1, out, err
        return run(argv)
    dcb.apply_dcb(runner, RAILS, {}, True, sysroot=sr)
    assert (["dcb", "-V"] in run.calls) is version_probed
    assert len([c for c in run.calls if c[:2] == ["dcb", "-j"]]) == 6


def test_iproute2_61_emulated_batch_defect(tmp_path):
    """The simulator's 6.1 dcb has the defect too: one batch, then the unanswered objects one by one, no -V."""
    sr, run = _node(tmp_path, RAILS, "6.1.0")
    res = dcb.apply_dcb(run, RAILS, {}, True, sysroot=sr)
    assert res["changed"] and res["dcb_version"] is None
    assert run.calls[0][:3] == ["dcb", "-j", "-b"]
    assert run.calls[1:] == [["dcb", "-j", "pfc", "show", "dev", RAILS[0]],
                             ["dcb", "-j", "dcbx", "show", "dev", RAILS[0]],
                             ["dcb", "-j", "app", "show", "dev", RAILS[1]],
                             ["dcb", "-j", "pfc", "show", "dev", RAILS[1]],
                             ["dcb", "-j", "dcbx", "show", "dev", RAILS[1]]]
