# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mtu_persist: what its own tests left unseen (make mutation's survivors) in the record: networkd's runtime file
of a link read pair by pair, every file entry, drift item and result of ``record`` as a whole (networkd drop-ins,
the netplan file written, left alone in check mode and removed, NetworkManager's profile, an ifupdown stanza held
at another MTU, the state file), and every failure message word for word."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RAIL, RAIL2, RAIL3 = "ens1np0", "ens2np0", "ens3np0"
UUID = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
DROPIN = mtu_persist.HEADER + "[Link]\nMTUBytes=9000\n"
DROPIN_A = "/etc/systemd/network/20-rails.network.d/gpufabric-mtu.conf"
DROPIN_B = "/etc/systemd/network/30-b.network.d/gpufabric-mtu.conf"
NETPLAN = mtu_persist.NETPLAN_FILE
NETPLAN_TEXT = (mtu_persist.HEADER + '{\n  "network": {\n    "ethernets": {\n      "r0": {\n        "mtu": 9000\n'
                '      }\n    },\n    "version": 2\n  }\n}\n')
NO_STATE = {"path": state.STATE_FILE, "before": "", "after": "", "changed": False}
SHOW = ["nmcli", "-g", "802-3-ethernet.mtu", "connection", "show", "uuid", UUID]
MODIFY = ["nmcli", "connection", "modify", "uuid", UUID, "802-3-ethernet.mtu", "9000"]
REAPPLY = ["nmcli", "device", "reapply", RAIL]
RELOAD = ["networkctl", "reload"]


class Run(object):
    """A command runner: ``answers`` {tuple(argv): (rc, stdout, stderr)}, (0, "", "") for anything else."""

    def __init__(self, answers=None):
        self.answers, self.calls = answers or {}, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.answers.get(tuple(argv), (0, "", ""))


def owner(rail, who, **kw):
    """An owner document as ``mtu_persist.owner`` returns it."""
    out = {"rail": rail, "owner": who, "network_file": None, "netplan_id": None, "nm_uuid": None,
           "interfaces_file": None, "interfaces_mtu": None, "kind": None, "netplan_type": None}
    out.update(kw)
    return out


def sysroot(tmp_path, files=None):
    sr = Sysroot(str(tmp_path))
    for path, text in (files or {}).items():
        sr.write_file_atomic(path, text)
    return sr


def item(obj, key, current, desired):
    return {"concern": "mtu", "object": obj, "key": key, "current": current, "desired": desired}


def result(obj, outcome, error=None):
    return {"object": obj, "result": outcome, "error": error, "changes": []}


# ------------------------------------------------------------------------------------ networkd's runtime file

@pytest.mark.parametrize("text,expected", [
    ("# This is private data. Do not parse.\nADMIN_STATE=configured\nNETWORK_FILE=/etc/x.network\n",
     {"ADMIN_STATE": "configured", "NETWORK_FILE": "/etc/x.network"}),
    # a comment holding a pair is still a comment; spaces around key and value go
    ("#NETWORK_FILE=/a.network\n NETWORK_FILE = /b.network \n", {"NETWORK_FILE": "/b.network"}),
    # a line without "=" is skipped and the next one read; a value keeps its own "="
    ("junk\nLLDP=a=b=c\nADMIN_STATE=unmanaged\n", {"LLDP": "a=b=c", "ADMIN_STATE": "unmanaged"}),
    ("", {}),
])
def test_state_file_pairs(tmp_path, text, expected):
    sr = sysroot(tmp_path, {"%s/7" % mtu_persist.NETIF_LINKS: text})
    assert mtu_persist._state_file(sr, 7) == expected


def test_state_file_of_an_unmanaged_or_unknown_link(tmp_path):
    sr = sysroot(tmp_path, {"%s/7" % mtu_persist.NETIF_LINKS: "NETWORK_FILE=/etc/x.network\n"})
    assert mtu_persist._state_file(sr, None) == {}
    assert mtu_persist._state_file(sr, 8) == {}


# ------------------------------------------------------------------------------------------ files

@pytest.mark.parametrize("before,content,check_mode,expected", [
    (None, "new\n", False, {"before": "", "after": "new\n", "changed": True}),
    (None, "new\n", True, {"before": "", "after": "new\n", "changed": True}),
    ("old\n", "new\n", False, {"before": "old\n", "after": "new\n", "changed": True}),
    ("same\n", "same\n", False, {"before": "same\n", "after": "same\n", "changed": False}),
    ("old\n", None, False, {"before": "old\n", "after": "", "changed": True}),
    ("old\n", None, True, {"before": "old\n", "after": "", "changed": True}),
    (None, None, False, {"before": "", "after": "", "changed": False}),
])
def test_file_entry_and_what_is_left_on_disk(tmp_path, before, content, check_mode, expected):
    path = "/etc/x/f.conf"
    sr = sysroot(tmp_path, {path: before} if before is not None else {})
    assert mtu_persist._file(sr, path, content, 0o644, check_mode) == dict(expected, path=path)
    assert sr.read_raw(path) == (before if check_mode else content)


# ------------------------------------------------------------------------------------------ networkd

def _networkd_owners():
    return [owner(RAIL3, "networkd", network_file="/run/systemd/network/30-b.network"),
            owner(RAIL, "networkd", network_file="/etc/systemd/network/20-rails.network"),
            owner(RAIL2, "networkd", network_file="/etc/systemd/network/20-rails.network")]


@pytest.mark.parametrize("answer,outcome,error", [
    ((0, "", ""), "changed", None),
    ((3, "", " Failed to reload network settings \n"), "failed",
     "networkctl reload failed (rc=3): Failed to reload network settings; the drop-in takes effect at the next boot "
     "or networkctl reload"),
    ((3, None, None), "failed",
     "networkctl reload failed (rc=3): ; the drop-in takes effect at the next boot or networkctl reload"),
])
def test_networkd_dropins_whole_record(tmp_path, answer, outcome, error):
    sr = sysroot(tmp_path, {DROPIN_A: "[Link]\nMTUBytes=1500\n"})
    run = Run({tuple(RELOAD): answer})
    assert mtu_persist.record(sr, run, _networkd_owners(), 9000, False) == {
        "files": [{"path": DROPIN_A, "before": "[Link]\nMTUBytes=1500\n", "after": DROPIN, "changed": True},
                  {"path": DROPIN_B, "before": "", "after": DROPIN, "changed": True}, NO_STATE],
        "drift": [item(DROPIN_A, "MTUBytes", "differs", 9000), item(DROPIN_B, "MTUBytes", "missing", 9000)],
        "results": [result("systemd-networkd (networkctl reload)", outcome, error)],
        "applier_rails": [], "held_items": []}
    assert run.calls == [RELOAD]
    assert sr.read_raw(DROPIN_A) == DROPIN and sr.read_raw(DROPIN_B) == DROPIN


def test_networkd_dropins_in_place_need_no_reload(tmp_path):
    sr = sysroot(tmp_path, {DROPIN_A: DROPIN, DROPIN_B: DROPIN})
    run = Run()
    assert mtu_persist.record(sr, run, _networkd_owners(), 9000, False) == {
        "files": [{"path": DROPIN_A, "before": DROPIN, "after": DROPIN, "changed": False},
                  {"path": DROPIN_B, "before": DROPIN, "after": DROPIN, "changed": False}, NO_STATE],
        "drift": [], "results": [], "applier_rails": [], "held_items": []}
    assert run.calls == []


# ------------------------------------------------------------------------------------------ netplan

@pytest.mark.parametrize("before,check_mode,current", [
    (None, False, "missing"),
    (None, True, "missing"),
    ('{"network": {"version": 2}}\n', False, "differs"),
    ('{"network": {"version": 2}}\n', True, "differs"),
])
def test_netplan_file_whole_record(tmp_path, before, check_mode, current):
    sr = sysroot(tmp_path, {NETPLAN: before} if before else {})
    owners = [owner(RAIL, "netplan", netplan_id="r0"), owner(RAIL2, "netplan", netplan_id="r0")]
    assert mtu_persist.record(sr, Run(), owners, 9000, check_mode) == {
        "files": [{"path": NETPLAN, "before": before or "", "after": NETPLAN_TEXT, "changed": True}, NO_STATE],
        "drift": [item(NETPLAN, "mtu", current, 9000)], "results": [], "applier_rails": [], "held_items": []}
    assert sr.read_raw(NETPLAN) == (before if check_mode else NETPLAN_TEXT)


def test_netplan_file_in_place_is_no_drift(tmp_path):
    sr = sysroot(tmp_path, {NETPLAN: NETPLAN_TEXT})
    assert mtu_persist.record(sr, Run(), [owner(RAIL, "netplan", netplan_id="r0")], 9000, False) == {
        "files": [{"path": NETPLAN, "before": NETPLAN_TEXT, "after": NETPLAN_TEXT, "changed": False}, NO_STATE],
        "drift": [], "results": [], "applier_rails": [], "held_items": []}


@pytest.mark.parametrize("check_mode", [False, True])
def test_netplan_file_without_netplan_rails_is_removed(tmp_path, monkeypatch, check_mode):
    """No rail is netplan's: the collection's file goes, and the operator's netplan files are not read."""
    def unread(_sysroot):
        raise AssertionError("the netplan files were read without a netplan rail")

    monkeypatch.setattr(mtu_persist, "_netplan_types", unread)
    sr = sysroot(tmp_path, {NETPLAN: NETPLAN_TEXT})
    assert mtu_persist.record(sr, Run(), [], 9000, check_mode) == {
        "files": [{"path": NETPLAN, "before": NETPLAN_TEXT, "after": "", "changed": True}, NO_STATE],
        "drift": [item(NETPLAN, "mtu", "differs", "absent")], "results": [], "applier_rails": [], "held_items": []}
    assert sr.exists(NETPLAN) == check_mode


def test_netplan_rail_of_a_kind_netplan_cannot_type_is_refused_by_name(tmp_path):
    sr = sysroot(tmp_path)
    owners = [owner(RAIL2, "netplan", netplan_id="m0", kind="macvlan")]
    with pytest.raises(ValueError) as e:
        mtu_persist.record(sr, Run(), owners, 9000, False)
    assert str(e.value) == (
        "rail ens2np0: netplan id 'm0' is a macvlan link and the node's netplan files cannot be read (no PyYAML) to "
        "find its definition type; the collection writes ethernets, bonds, vlans or bridges only")
    assert not sr.exists(NETPLAN)


# ------------------------------------------------------------------------------------------ NetworkManager

NM_OBJ = "%s (NetworkManager %s)" % (RAIL, UUID)
NM_KEY = "NetworkManager 802-3-ethernet.mtu"


@pytest.mark.parametrize("answers,check_mode,drift,res,calls", [
    # the profile has it already
    ({tuple(SHOW): (0, " 9000\n", "")}, False, [], result(NM_OBJ, "unchanged"), [SHOW]),
    # auto (empty): drift, nothing changed in check mode
    ({tuple(SHOW): (0, "\n", "")}, True, [item(RAIL, NM_KEY, "auto", 9000)], result(NM_OBJ, "changed"), [SHOW]),
    ({tuple(SHOW): (0, None, None)}, True, [item(RAIL, NM_KEY, "auto", 9000)], result(NM_OBJ, "changed"), [SHOW]),
    ({tuple(SHOW): (0, "1500\n", "")}, False, [item(RAIL, NM_KEY, "1500", 9000)], result(NM_OBJ, "changed"),
     [SHOW, MODIFY, REAPPLY]),
    ({tuple(SHOW): (10, "", " Error: no such connection profile.\n")}, False, [],
     result(NM_OBJ, "failed", "nmcli connection show uuid %s failed (rc=10): Error: no such connection profile."
            % UUID), [SHOW]),
    ({tuple(SHOW): (10, None, None)}, False, [],
     result(NM_OBJ, "failed", "nmcli connection show uuid %s failed (rc=10): " % UUID), [SHOW]),
    ({tuple(SHOW): (0, "1500", ""), tuple(MODIFY): (4, "", " Error: failed to modify.\n")}, False,
     [item(RAIL, NM_KEY, "1500", 9000)],
     result(NM_OBJ, "failed", "nmcli connection modify uuid %s 802-3-ethernet.mtu 9000 failed (rc=4): Error: "
            "failed to modify." % UUID), [SHOW, MODIFY]),
    ({tuple(SHOW): (0, "1500", ""), tuple(MODIFY): (4, None, None)}, False, [item(RAIL, NM_KEY, "1500", 9000)],
     result(NM_OBJ, "failed", "nmcli connection modify uuid %s 802-3-ethernet.mtu 9000 failed (rc=4): " % UUID),
     [SHOW, MODIFY]),
    ({tuple(SHOW): (0, "", ""), tuple(REAPPLY): (2, "", " Error: not active.\n")}, False,
     [item(RAIL, NM_KEY, "auto", 9000)],
     result(NM_OBJ, "failed", "nmcli device reapply ens1np0 failed (rc=2): Error: not active.; the profile has "
            "802-3-ethernet.mtu 9000, the device takes it at its next activation"), [SHOW, MODIFY, REAPPLY]),
    ({tuple(SHOW): (0, "", ""), tuple(REAPPLY): (2, None, None)}, False, [item(RAIL, NM_KEY, "auto", 9000)],
     result(NM_OBJ, "failed", "nmcli device reapply ens1np0 failed (rc=2): ; the profile has 802-3-ethernet.mtu "
            "9000, the device takes it at its next activation"), [SHOW, MODIFY, REAPPLY]),
])
def test_networkmanager_whole_record(tmp_path, answers, check_mode, drift, res, calls):
    run = Run(answers)
    assert mtu_persist.record(sysroot(tmp_path), run, [owner(RAIL, "networkmanager", nm_uuid=UUID)], 9000,
                              check_mode) == {"files": [NO_STATE], "drift": drift, "results": [res],
                                              "applier_rails": [], "held_items": []}
    assert run.calls == calls


# ------------------------------------------------------------------------------------------ ifupdown and applier

STATE_TEXT = '{\n  "mtu": {\n    "mtu": 9000,\n    "rails": [\n      "%s",\n      "%s",\n      "%s"\n    ]\n  },\n' \
    '  "version": 1\n}\n' % (RAIL, RAIL2, RAIL3)


@pytest.mark.parametrize("check_mode", [False, True])
def test_ifupdown_and_applier_rails_whole_record(tmp_path, check_mode):
    sr = sysroot(tmp_path)
    owners = [owner(RAIL, "ifupdown", interfaces_file="/etc/network/interfaces.d/rails", interfaces_mtu="1500"),
              owner(RAIL2, "ifupdown", interfaces_file="/etc/network/interfaces", interfaces_mtu="9000"),
              owner(RAIL3, "applier")]
    assert mtu_persist.record(sr, Run(), owners, 9000, check_mode) == {
        "files": [{"path": state.STATE_FILE, "before": "", "after": STATE_TEXT, "changed": True}],
        "drift": [item(state.STATE_FILE, "mtu", "missing", "recorded")], "results": [],
        "applier_rails": [RAIL, RAIL2, RAIL3],
        "held_items": [dict(item(RAIL, "ifupdown mtu", "1500", 9000), note=(
            "ifupdown's stanza iface ens1np0 in /etc/network/interfaces.d/rails sets mtu 1500 at ifup, the rails "
            "want 9000: write 'mtu 9000' there (the collection does not edit that file)"))]}
    assert sr.read_raw(state.STATE_FILE) == (None if check_mode else STATE_TEXT)


def test_ifupdown_stanza_without_mtu_and_state_in_place(tmp_path):
    text = '{\n  "mtu": {\n    "mtu": 9000,\n    "rails": [\n      "%s"\n    ]\n  },\n  "version": 1\n}\n' % RAIL
    sr = sysroot(tmp_path, {state.STATE_FILE: text})
    owners = [owner(RAIL, "ifupdown", interfaces_file="/etc/network/interfaces", interfaces_mtu=None)]
    assert mtu_persist.record(sr, Run(), owners, 9000, False) == {
        "files": [{"path": state.STATE_FILE, "before": text, "after": text, "changed": False}],
        "drift": [], "results": [], "applier_rails": [RAIL], "held_items": []}
