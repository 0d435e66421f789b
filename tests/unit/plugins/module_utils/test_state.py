# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DCB = {"rails": ["ens2np0", "ens1np0"], "dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3],
       "trust": "dscp", "ets": None}
TOS_RAILS = {"rails": ["ens1np0", "ens10np0", "ens2np0"], "tos": 106}
ACS = {"bridges": [{"kernel_path": "0000:15:01.0/00.0", "bdf": "16:00.0"}], "clear": ["RR", "CR", "EC"]}

NORMALISE_CASES = [
    # id, concern, input, expected stored section
    ("dcb rails sorted, defaults filled", "dcb", {"rails": ["ens2np0", "ens1np0"]},
     {"rails": ["ens1np0", "ens2np0"], "dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3],
      "trust": "dscp", "ets": None}),
    ("dcb dscp_map sorted by dscp", "dcb",
     {"rails": ["ens1np0"], "dscp_map": [{"dscp": 46, "priority": 5}, {"dscp": 26, "priority": 3}],
      "pfc_priorities": [5, 3]},
     {"rails": ["ens1np0"], "dscp_map": [{"dscp": 26, "priority": 3}, {"dscp": 46, "priority": 5}],
      "pfc_priorities": [3, 5], "trust": "dscp", "ets": None}),
    ("rdma_cm rails in natural order", "rdma_cm", TOS_RAILS,
     {"rails": ["ens1np0", "ens2np0", "ens10np0"], "tos": 106}),
    ("rdma_cm devices", "rdma_cm", {"devices": ["mlx5_1", "mlx5_0"], "tos": "104"},
     {"devices": ["mlx5_0", "mlx5_1"], "tos": 104}),
    ("acs short names and short bdf", "acs", ACS,
     {"bridges": [{"kernel_path": "0000:15:01.0/00.0", "bdf": "0000:16:00.0"}],
      "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]}),
    ("acs default clear", "acs", {"bridges": [{"kernel_path": "0000:15:01.0"}]},
     {"bridges": [{"kernel_path": "0000:15:01.0", "bdf": None}], "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]}),
    ("acs bdf only (no path form known)", "acs", {"bridges": [{"bdf": "0000:16:00.0", "kernel_path": None}]},
     {"bridges": [{"kernel_path": None, "bdf": "0000:16:00.0"}], "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]}),
    ("nvidia_fs bool", "nvidia_fs", {"rw_stats_enabled": True}, {"rw_stats_enabled": 1}),
    ("routing default file", "routing", {}, {"state_file": "/etc/gpufabric/routing.json"}),
]


@pytest.mark.parametrize("concern,data,expected", [c[1:] for c in NORMALISE_CASES],
                         ids=[c[0] for c in NORMALISE_CASES])
def test_validate_section_normalises(concern, data, expected):
    assert state.validate_section(concern, data) == expected


BAD_CASES = [
    ("unknown concern", "sysctl", {}, "unknown concern"),
    ("dcb no rails", "dcb", {"dscp_map": []}, "dcb.rails must be a non-empty list"),
    ("dcb rails a string", "dcb", {"rails": "ens1np0"}, "dcb.rails must be a non-empty list"),
    ("dcb bad ifname", "dcb", {"rails": ["a/b"]}, "dcb.rails"),
    ("dcb duplicate rail", "dcb", {"rails": ["ens1np0", "ens1np0"]}, "twice"),
    ("dcb dscp out of range", "dcb", {"rails": ["ens1np0"], "dscp_map": [{"dscp": 64, "priority": 3}]}, "0..63"),
    ("dcb pcp with map", "dcb", {"rails": ["ens1np0"], "trust": "pcp", "dscp_map": [{"dscp": 26, "priority": 3}]},
     "trust pcp"),
    ("dcb unknown key", "dcb", {"rails": ["ens1np0"], "willing": True}, "unknown key(s) willing"),
    ("rdma_cm both", "rdma_cm", {"rails": ["ens1np0"], "devices": ["mlx5_0"], "tos": 106}, "exactly one"),
    ("rdma_cm neither", "rdma_cm", {"tos": 106}, "exactly one"),
    ("rdma_cm tos 256", "rdma_cm", {"devices": ["mlx5_0"], "tos": 256}, "0..255"),
    ("rdma_cm bad device", "rdma_cm", {"devices": ["../x"], "tos": 106}, "not an RDMA device name"),
    ("acs bad path", "acs", {"bridges": [{"kernel_path": "15:01.0/0.0.0"}]}, "path form"),
    ("acs empty", "acs", {"bridges": []}, "non-empty list"),
    ("acs entry without path or bdf", "acs", {"bridges": [{"kernel_path": None}]}, "entries must be"),
    ("acs unmanaged bit", "acs", {"bridges": [{"kernel_path": "0000:15:01.0"}], "clear": ["TB"]}, "not managed"),
    ("acs duplicate", "acs", {"bridges": [{"kernel_path": "0000:15:01.0"}, {"kernel_path": "0000:15:01.0"}]},
     "twice"),
    ("nvidia_fs 2", "nvidia_fs", {"rw_stats_enabled": 2}, "0..1"),
    ("nvidia_fs missing", "nvidia_fs", {}, "required"),
    ("routing relative", "routing", {"state_file": "etc/x.json"}, "absolute path"),
]


@pytest.mark.parametrize("concern,data,msg", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_validate_section_rejects(concern, data, msg):
    with pytest.raises(ValueError) as e:
        state.validate_section(concern, data)
    assert msg in str(e.value)


def test_missing_file_loads_empty(tmp_path):
    assert state.load(Sysroot(str(tmp_path))) == {"version": 1}


def test_round_trip_and_idempotent(tmp_path):
    sr = Sysroot(str(tmp_path))
    assert state.record(sr, "dcb", DCB, False) is True
    assert state.record(sr, "rdma_cm", TOS_RAILS, False) is True
    assert state.record(sr, "nvidia_fs", {"rw_stats_enabled": 1}, False) is True
    loaded = state.load(sr)
    assert loaded["version"] == 1
    assert loaded["dcb"]["rails"] == ["ens1np0", "ens2np0"]
    assert loaded["rdma_cm"] == {"rails": ["ens1np0", "ens2np0", "ens10np0"], "tos": 106}
    assert loaded["nvidia_fs"] == {"rw_stats_enabled": 1}
    text = (tmp_path / "etc/gpufabric/state.json").read_text()
    # the same desired state in another order changes nothing
    assert state.record(sr, "dcb", dict(DCB, rails=["ens1np0", "ens2np0"]), False) is False
    assert state.record(sr, "rdma_cm", {"tos": 106, "rails": ["ens2np0", "ens10np0", "ens1np0"]}, False) is False
    assert (tmp_path / "etc/gpufabric/state.json").read_text() == text
    assert oct(os.stat(str(tmp_path / "etc/gpufabric/state.json")).st_mode & 0o777) == "0o644"


def test_sections_are_independent(tmp_path):
    sr = Sysroot(str(tmp_path))
    state.record(sr, "dcb", DCB, False)
    state.record(sr, "rdma_cm", TOS_RAILS, False)
    assert state.record(sr, "rdma_cm", {"devices": ["mlx5_0"], "tos": 104}, False) is True
    loaded = state.load(sr)
    assert loaded["rdma_cm"] == {"devices": ["mlx5_0"], "tos": 104}
    assert loaded["dcb"]["rails"] == ["ens1np0", "ens2np0"]
    assert state.forget(sr, "rdma_cm", False) is True
    assert state.forget(sr, "rdma_cm", False) is False
    assert "rdma_cm" not in state.load(sr) and "dcb" in state.load(sr)


def test_check_mode_writes_nothing(tmp_path):
    sr = Sysroot(str(tmp_path))
    assert state.record(sr, "dcb", DCB, True) is True
    assert not (tmp_path / "etc").exists()
    state.record(sr, "dcb", DCB, False)
    before = (tmp_path / "etc/gpufabric/state.json").read_text()
    assert state.record(sr, "dcb", dict(DCB, pfc_priorities=[3, 4]), True) is True
    assert (tmp_path / "etc/gpufabric/state.json").read_text() == before


def test_invalid_data_writes_nothing(tmp_path):
    sr = Sysroot(str(tmp_path))
    state.record(sr, "dcb", DCB, False)
    before = (tmp_path / "etc/gpufabric/state.json").read_text()
    with pytest.raises(ValueError):
        state.record(sr, "dcb", {"rails": []}, False)
    assert (tmp_path / "etc/gpufabric/state.json").read_text() == before


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    sr = Sysroot(str(tmp_path))
    state.record(sr, "dcb", DCB, False)
    path = tmp_path / "etc/gpufabric/state.json"
    before = path.read_text()

    def broken_fsync(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        state.record(sr, "rdma_cm", TOS_RAILS, False)
    assert path.read_text() == before
    leftovers = [n for n in os.listdir(str(path.parent)) if n not in ("state.json", ".state.lock")]
    assert leftovers == []


LOAD_BAD = [
    ("not json", "{", "not valid JSON"),
    ("other version", json.dumps({"version": 2}), "unknown state version 2"),
    ("unknown section", json.dumps({"version": 1, "kmod": {}}), "unknown section(s) kmod"),
    ("invalid section", json.dumps({"version": 1, "rdma_cm": {"tos": 106}}), "exactly one"),
    ("not an object", "[]", "must be a JSON object"),
    ("100,000 deep", "[" * 100000 + "]" * 100000, "nested too deeply"),
    ("deep inside a section", json.dumps({"version": 1, "nvidia_fs": {"rw_stats_enabled": 1}})[:-1]
     + ', "mtu": ' + "[" * 50000 + "]" * 50000 + "}", "nested too deeply"),
    ("a list where a section maps", json.dumps({"version": 1, "dcb": [1, 2]}), "dcb"),
    ("not UTF-8", b"\xff\xfe{}", "not UTF-8"),
    ("over the size cap", b" " * (state.MAX_STATE + 1), "over the"),
]


@pytest.mark.parametrize("text,msg", [c[1:] for c in LOAD_BAD], ids=[c[0] for c in LOAD_BAD])
def test_load_rejects(tmp_path, text, msg):
    p = tmp_path / "etc/gpufabric/state.json"
    p.parent.mkdir(parents=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(state.StateError) as e:
        state.load(Sysroot(str(tmp_path)))
    assert msg in str(e.value) and "/etc/gpufabric/state.json" in str(e.value)


@pytest.mark.parametrize("text", [c[1] for c in LOAD_BAD], ids=[c[0] for c in LOAD_BAD])
def test_unusable_file_is_reported_and_replaced_by_the_next_record(tmp_path, text):
    p = tmp_path / "etc/gpufabric/state.json"
    p.parent.mkdir(parents=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    sr = Sysroot(str(tmp_path))
    _before, after, item = state.record_with_drift(sr, "nvidia_fs", {"rw_stats_enabled": 0}, False)
    assert item["current"].startswith("unusable, replaced: ") and "/etc/gpufabric/state.json" in item["current"]
    assert state.load(sr) == {"version": 1, "nvidia_fs": {"rw_stats_enabled": 0}} == json.loads(after)


def test_a_symlinked_state_file_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text(json.dumps({"version": 1}))
    p = tmp_path / "etc/gpufabric/state.json"
    p.parent.mkdir(parents=True)
    os.symlink(str(target), str(p))
    sr = Sysroot(str(tmp_path))
    with pytest.raises(state.StateError) as e:
        state.load(sr)
    assert "symbolic link" in str(e.value)
    assert state.record(sr, "nvidia_fs", {"rw_stats_enabled": 1}, False)
    assert not os.path.islink(str(p)) and target.read_text() == json.dumps({"version": 1})


def test_a_temp_file_left_by_a_kill_is_removed_by_the_next_write(tmp_path):
    sr = Sysroot(str(tmp_path))
    state.record(sr, "nvidia_fs", {"rw_stats_enabled": 1}, False)
    d = os.path.dirname(sr.path(state.STATE_FILE))
    old = time.time() - 3600
    for name in (".gpufabric.k1ll3d_0", ".gpufabric.abcdefgh", ".gpufabric.fresh123", ".gpufabric.toolong99x",
                 "gpufabric.abcdefgh", ".gpufabric.link0000"):
        path = os.path.join(d, name)
        if name.startswith(".gpufabric.link"):
            os.symlink("/etc/hostname", path)
            continue
        with open(path, "w") as f:
            f.write("{")
        if name != ".gpufabric.fresh123":
            os.utime(path, (old, old))
    state.record(sr, "nvidia_fs", {"rw_stats_enabled": 0}, False)
    # the two stale temp files of the collection's own pattern are gone; a fresh one (a live writer's), other
    # names and a symlink stay
    assert sorted(os.listdir(d)) == [".gpufabric.fresh123", ".gpufabric.link0000", ".gpufabric.toolong99x",
                                     ".state.lock", "gpufabric.abcdefgh", "state.json"]


def test_corrupt_file_is_replaced_by_record(tmp_path):
    p = tmp_path / "etc/gpufabric/state.json"
    p.parent.mkdir(parents=True)
    p.write_text("{garbage")
    sr = Sysroot(str(tmp_path))
    changed, before, after = state.plan_record(sr, "nvidia_fs", {"rw_stats_enabled": 0})
    assert changed and before == "{garbage" and json.loads(after) == {"version": 1, "nvidia_fs": {"rw_stats_enabled": 0}}
    assert state.record(sr, "nvidia_fs", {"rw_stats_enabled": 0}, False) is True
    assert state.load(sr) == {"version": 1, "nvidia_fs": {"rw_stats_enabled": 0}}


def test_dcb_desired_is_apply_dcb_argument(tmp_path):
    section = state.validate_section("dcb", DCB)
    assert state.dcb_desired(section) == {"dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3],
                                          "trust": "dscp", "ets": None}


def _dcb(rails, pfc):
    return {"rails": rails, "dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": pfc, "trust": "dscp",
            "ets": None}


GROUP_CASES = [
    # id, concern, input, stored
    ("one group is stored flat", "dcb", {"groups": [_dcb(["ens2np0", "ens1np0"], [3])]},
     _dcb(["ens1np0", "ens2np0"], [3])),
    ("groups with equal settings merge", "dcb", {"groups": [_dcb(["ens2np0"], [3]), _dcb(["ens1np0"], [3])]},
     _dcb(["ens1np0", "ens2np0"], [3])),
    ("groups sorted by their first rail", "dcb", {"groups": [_dcb(["ens5np0"], [3]), _dcb(["ens1np0"], [4])]},
     {"groups": [_dcb(["ens1np0"], [4]), _dcb(["ens5np0"], [3])]}),
    ("rdma_cm groups", "rdma_cm", {"groups": [{"devices": ["mlx5_4"], "tos": 104},
                                              {"devices": ["mlx5_1", "mlx5_0"], "tos": 106}]},
     {"groups": [{"devices": ["mlx5_0", "mlx5_1"], "tos": 106}, {"devices": ["mlx5_4"], "tos": 104}]}),
]


@pytest.mark.parametrize("concern,data,expected", [c[1:] for c in GROUP_CASES], ids=[c[0] for c in GROUP_CASES])
def test_groups_normalise(concern, data, expected):
    assert state.validate_section(concern, data) == expected


GROUP_BAD = [
    ("rail in two groups", "dcb", {"groups": [_dcb(["ens1np0"], [3]), _dcb(["ens1np0"], [4])]},
     "rails ens1np0 recorded twice"),
    ("same rail twice after merging", "dcb", {"groups": [_dcb(["ens1np0"], [3]), _dcb(["ens1np0"], [3])]},
     "recorded twice"),
    ("kinds mixed", "rdma_cm", {"groups": [{"rails": ["ens1np0"], "tos": 106}, {"devices": ["mlx5_1"], "tos": 104}]},
     "mix rails and devices"),
    ("empty groups", "dcb", {"groups": []}, "dcb.groups must be a non-empty list"),
    ("groups beside settings", "dcb", {"groups": [_dcb(["ens1np0"], [3])], "trust": "dscp"}, "unknown key(s) trust"),
    ("bad group", "dcb", {"groups": [_dcb(["ens1np0"], [3]), {"rails": []}]}, "dcb.groups[1].rails"),
]


@pytest.mark.parametrize("concern,data,msg", [c[1:] for c in GROUP_BAD], ids=[c[0] for c in GROUP_BAD])
def test_groups_rejected(concern, data, msg):
    with pytest.raises(ValueError) as e:
        state.validate_section(concern, data)
    assert msg in str(e.value)


R = ["ens1np0", "ens2np0", "ens3np0"]
KEEP_CASES = [
    # id, concern, previous section (None: none), new section, failed, recorded
    ("nothing failed", "dcb", _dcb(R, [3]), _dcb(R, [4]), [], _dcb(R, [4])),
    ("a failed rail keeps its settings", "dcb", _dcb(R, [3]), _dcb(R, [4]), ["ens2np0"],
     {"groups": [_dcb(["ens1np0", "ens3np0"], [4]), _dcb(["ens2np0"], [3])]}),
    ("a failed rail without a record gets none", "dcb", _dcb(["ens1np0"], [3]), _dcb(R, [4]), ["ens2np0"],
     _dcb(["ens1np0", "ens3np0"], [4])),
    ("no record at all", "dcb", None, _dcb(R, [4]), ["ens2np0"], _dcb(["ens1np0", "ens3np0"], [4])),
    ("every rail failed", "dcb", _dcb(R, [3]), _dcb(R, [4]), R, _dcb(R, [3])),
    ("every rail failed, none recorded", "dcb", None, _dcb(R, [4]), R, None),
    ("failed rail had the new settings already", "dcb", _dcb(R, [4]), _dcb(R, [4]), ["ens2np0"], _dcb(R, [4])),
    ("rails no longer listed are dropped", "dcb", _dcb(R, [3]), _dcb(["ens1np0", "ens2np0"], [4]), ["ens2np0"],
     {"groups": [_dcb(["ens1np0"], [4]), _dcb(["ens2np0"], [3])]}),
    ("an earlier group is kept per rail", "dcb",
     {"groups": [_dcb(["ens1np0", "ens3np0"], [4]), _dcb(["ens2np0"], [3])]}, _dcb(R, [5]), ["ens2np0"],
     {"groups": [_dcb(["ens1np0", "ens3np0"], [5]), _dcb(["ens2np0"], [3])]}),
    ("rdma_cm by rails", "rdma_cm", {"rails": R, "tos": 104}, {"rails": R, "tos": 106}, ["ens3np0"],
     {"groups": [{"rails": ["ens1np0", "ens2np0"], "tos": 106}, {"rails": ["ens3np0"], "tos": 104}]}),
    ("rdma_cm recorded by devices, now by rails: not kept", "rdma_cm", {"devices": ["mlx5_2"], "tos": 104},
     {"rails": R, "tos": 106}, ["ens3np0"], {"rails": ["ens1np0", "ens2np0"], "tos": 106}),
]


@pytest.mark.parametrize("concern,previous,new,failed,expected", [c[1:] for c in KEEP_CASES],
                         ids=[c[0] for c in KEEP_CASES])
def test_record_keeps_failed_objects(tmp_path, concern, previous, new, failed, expected):
    sr = Sysroot(str(tmp_path))
    if previous is not None:
        state.record(sr, concern, previous, False)
    h = sr.read_raw(state.STATE_FILE)
    # check mode plans the same and writes nothing
    state.record(sr, concern, new, True, keep=failed)
    assert sr.read_raw(state.STATE_FILE) == h
    state.record(sr, concern, new, False, keep=failed)
    assert state.load(sr).get(concern) == expected


R4 = ["ens1np0", "ens2np0", "ens3np0", "ens4np0"]
MERGE_CASES = [
    # id, previous section (None: none), new section (None: only a removal), failed, removed, recorded
    ("2 of 4 rails: the other 2 keep their record", _dcb(R4, [3]), _dcb(["ens1np0", "ens2np0"], [4]), [], [],
     {"groups": [_dcb(["ens1np0", "ens2np0"], [4]), _dcb(["ens3np0", "ens4np0"], [3])]}),
    ("same settings on a subset: nothing changes", _dcb(R4, [3]), _dcb(["ens2np0"], [3]), [], [], _dcb(R4, [3])),
    ("a new rail joins the record", _dcb(["ens1np0"], [3]), _dcb(["ens2np0"], [3]), [], [],
     _dcb(["ens1np0", "ens2np0"], [3])),
    ("no record yet", None, _dcb(["ens2np0"], [3]), [], [], _dcb(["ens2np0"], [3])),
    ("a failed named rail keeps its record, unnamed ones too", _dcb(R4, [3]), _dcb(["ens1np0", "ens2np0"], [4]),
     ["ens2np0"], [], {"groups": [_dcb(["ens1np0"], [4]), _dcb(["ens2np0", "ens3np0", "ens4np0"], [3])]}),
    ("a failed rail never recorded gets none", _dcb(["ens3np0"], [3]), _dcb(["ens1np0"], [4]), ["ens1np0"], [],
     _dcb(["ens3np0"], [3])),
    ("explicit removal", _dcb(R4, [3]), None, [], ["ens3np0", "ens9np0"], _dcb(["ens1np0", "ens2np0", "ens4np0"], [3])),
    ("removing the last rail drops the section", _dcb(["ens1np0"], [3]), None, [], ["ens1np0"], None),
    ("removal beside an update", {"groups": [_dcb(["ens1np0"], [4]), _dcb(["ens2np0", "ens3np0"], [3])]},
     _dcb(["ens1np0"], [5]), [], ["ens2np0"], {"groups": [_dcb(["ens1np0"], [5]), _dcb(["ens3np0"], [3])]}),
]


@pytest.mark.parametrize("previous,new,failed,removed,expected", [c[1:] for c in MERGE_CASES],
                         ids=[c[0] for c in MERGE_CASES])
def test_record_merges_per_rail(tmp_path, previous, new, failed, removed, expected):
    sr = Sysroot(str(tmp_path))
    if previous is not None:
        state.record(sr, "dcb", previous, False)
    h = sr.read_raw(state.STATE_FILE)
    changed = state.record(sr, "dcb", new, True, keep=failed, merge=True, removed=removed)
    assert sr.read_raw(state.STATE_FILE) == h
    assert changed == (state.load(sr).get("dcb") != expected)
    state.record(sr, "dcb", new, False, keep=failed, merge=True, removed=removed)
    assert state.load(sr).get("dcb") == expected
    # what the boot-time applier gets from it: every recorded rail once
    rails = [r for rs, _d in state.dcb_groups(expected) for r in rs] if expected else []
    assert sorted(rails) == sorted(set(rails))


def test_dcb_groups_for_the_applier():
    section = state.validate_section("dcb", {"groups": [_dcb(["ens2np0"], [3]), _dcb(["ens1np0"], [4])]})
    assert [(rails, d["pfc_priorities"]) for rails, d in state.dcb_groups(section)] == [
        (["ens1np0"], [4]), (["ens2np0"], [3])]
    assert state.dcb_groups(state.validate_section("dcb", _dcb(R, [3])))[0][0] == R
