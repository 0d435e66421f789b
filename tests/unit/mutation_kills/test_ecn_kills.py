# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ecn: what its own tests left unseen (make mutation's survivors): every reason locate gives word for word, the
whole state read_rail returns (no controls, sysfs, debugfs, lockdown, a refused read on an older kernel), each
control's error naming the rail, the summary of each kind of rail, the firmware document and item, and apply_ecn's
whole result in check mode, after a fix, under lockdown and when a rail fails (read, write, read-back)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn

RAIL = "ens1np0"
BDF = "0000:11:00.0"
DEV = "/sys/devices/pci0000:10/0000:10:01.0/" + BDF
SYSFS = "/sys/class/net/ens1np0/ecn"
DEBUGFS = "/sys/kernel/debug/mlx5/0000:11:00.0/cc_params"
DESIRED = {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}
LOCKED = ("kernel lockdown [integrity] (/sys/kernel/security/lockdown; Secure Boot): debugfs refuses the 0600 mlx5 "
          "cc_params files (fs/debugfs/file.c, Linux 5.4+); check: cat /sys/kernel/security/lockdown, mokutil "
          "--sb-state; manage the CNP class with lockdown none, or in the firmware (mlxconfig)")
NOT_QUERIED = "DCQCN's per-priority enable (firmware ROCE_CC_PRIO_MASK_P<port>) was not queried"
NOT_QUERIED_DOC = {"status": "not_checked", "enabled": None, "mask": None, "key": None, "tool": None,
                   "reason": NOT_QUERIED}
NO_TOOL = "no mlxconfig; check: mlxconfig -d 0000:11:00.0 query K"


class Tree(object):
    """A host tree in memory, as ecn reads it: ``files`` {path: text, None: exists but cannot be read}, ``links``
    {path: target}. ``writes`` lists what write_attr got; ``stuck`` keeps the files as they were, ``refuse`` makes
    every write fail, ``refuse_after`` every write after that many."""

    def __init__(self, files, links, stuck=False, refuse=False, refuse_after=None):
        self.files, self.links, self.stuck, self.refuse, self.writes = files, links, stuck, refuse, []
        self.refuse_after = refuse_after

    def realpath(self, p):
        for link, target in self.links.items():
            if p == link or p.startswith(link + "/"):
                return self.realpath(target + p[len(link):])
        return p

    def isdir(self, p):
        prefix = self.realpath(p) + "/"
        return any(k.startswith(prefix) for k in list(self.files) + list(self.links))

    def exists(self, p):
        return self.realpath(p) in self.files or self.isdir(p)

    def readlink_name(self, p):
        head, tail = p.rsplit("/", 1)
        target = self.links.get(self.realpath(head) + "/" + tail)
        return target.rstrip("/").split("/")[-1] if target else None

    def read(self, p, default=None):
        text = self.files.get(self.realpath(p))
        return default if text is None else text.strip()

    def write_attr(self, p, value):
        if self.refuse or (self.refuse_after is not None and len(self.writes) >= self.refuse_after):
            raise IOError("write refused")
        self.writes.append((p, value))
        if not self.stuck:
            self.files[self.realpath(p)] = value


def host(driver="mlx5_core", pci=True, sysfs=None, debugfs=None, lockdown=None, release="6.1.0-18-amd64", **kw):
    """One rail ens1np0 on PCI function BDF (``pci`` False: its device is no PCI function) with the OFED sysfs
    controls (``sysfs``: ofed's keywords) and/or the inbox cc_params (``debugfs``: inbox's keywords)."""
    files = {"/sys/class/net/ens1np0/mtu": "4200\n", DEV + "/vendor": "0x15b3\n",
             "/proc/sys/kernel/osrelease": release + "\n"}
    links = {"/sys/class/net/ens1np0/device": DEV}
    if pci:
        links["/sys/bus/pci/devices/" + BDF] = DEV
    if driver:
        links[DEV + "/driver"] = "../../../../bus/pci/drivers/" + driver
    if sysfs is not None:
        files.update(ofed(**sysfs))
    if debugfs is not None:
        files.update(inbox(**debugfs))
    if lockdown:
        files["/sys/kernel/security/lockdown"] = " ".join(
            "[%s]" % m if m == lockdown else m for m in ("none", "integrity", "confidentiality")) + "\n"
    return Tree(files, links, **kw)


def ofed(np=tuple(range(8)), rp=tuple(range(8)), dscp="48", prio="6"):
    files = {SYSFS + "/roce_np/cnp_dscp": dscp, SYSFS + "/roce_np/cnp_802p_prio": prio}
    for p in range(8):
        files["%s/roce_np/enable/%d" % (SYSFS, p)] = "%d\n" % (p in np)
        files["%s/roce_rp/enable/%d" % (SYSFS, p)] = "%d\n" % (p in rp)
    return files


def inbox(dscp="48", prio="6", mode="0"):
    return {DEBUGFS + "/np_cnp_dscp": dscp, DEBUGFS + "/np_cnp_prio": prio, DEBUGFS + "/np_cnp_prio_mode": mode}


class Firmware(object):
    """apply_ecn's ``firmware``: the same document for every call, the calls kept in ``calls``."""

    def __init__(self, status, enabled, reason=None):
        self.doc = {"status": status, "enabled": enabled, "mask": 247 if enabled is False else None, "key": "K",
                    "tool": "mlxconfig", "reason": reason}
        self.calls = []

    def __call__(self, bdf, priority):
        self.calls.append((bdf, priority))
        return dict(self.doc)


def state(**kw):
    st = {"rail": RAIL, "source": None, "reason": None, "priorities": {}, "np_enabled": None, "rp_enabled": None,
          "cnp_dscp": None, "cnp_priority": None, "cnp_priority_mode": None, "base": None, "not_checked": None}
    st.update(kw)
    return st


def prios(np=(), rp=(), none=False):
    return dict((str(p), {"np": None if none else p in np, "rp": None if none else p in rp}) for p in range(8))


# ------------------------------------------------------------------------------------------------ locate

MLX5_REASON = ("rail ens1np0: mlx5 without ECN controls: no /sys/class/net/ens1np0/ecn (MLNX_OFED/DOCA driver) and "
               "no /sys/kernel/debug/mlx5/%s/cc_params (inbox driver: debugfs not mounted, or the firmware denies "
               "congestion-control query/modify)")
OTHER_REASON = "rail ens1np0: %s exposes no ECN/DCQCN controls (no /sys/class/net/ens1np0/ecn, no mlx5 cc_params)"
SOFT = "no device driver (a virtual or software netdev, e.g. under Soft-RoCE)"


@pytest.mark.parametrize("kw, located", [
    (dict(driver="virtio_net"), (None, None, OTHER_REASON % "driver virtio_net")),
    (dict(driver=None, pci=False), (None, None, OTHER_REASON % SOFT)),
    ({}, (None, None, MLX5_REASON % BDF)),
    (dict(pci=False), (None, None, MLX5_REASON % "<function>")),
    (dict(sysfs={}, debugfs={}), ("sysfs", SYSFS, None)),
    (dict(debugfs={}, driver=None), ("debugfs", DEBUGFS, None)),
])
def test_locate_every_reason_word_for_word(kw, located):
    assert ecn.locate(host(**kw), RAIL) == located


# ------------------------------------------------------------------------------------------------ read_rail

@pytest.mark.parametrize("kw, st", [
    (dict(driver="virtio_net"), state(reason=OTHER_REASON % "driver virtio_net")),
    (dict(sysfs=dict(np=(3,), rp=(3, 4), dscp="26", prio="5")),
     state(source="sysfs", base=SYSFS, priorities=prios((3,), (3, 4)), np_enabled=[3], rp_enabled=[3, 4],
           cnp_dscp=26, cnp_priority=5)),
    (dict(sysfs=dict(np=(), rp=(7,), dscp="0x1a", prio="0")),
     state(source="sysfs", base=SYSFS, priorities=prios((), (7,)), np_enabled=[], rp_enabled=[7],
           cnp_dscp=26, cnp_priority=0)),
    (dict(debugfs=dict(dscp="26", prio="5", mode="1")),
     state(source="debugfs", base=DEBUGFS, priorities=prios(none=True), cnp_dscp=26, cnp_priority=5,
           cnp_priority_mode=1)),
    (dict(debugfs=dict(dscp="26"), lockdown="integrity"),
     state(source="debugfs", base=DEBUGFS, priorities=prios(none=True), not_checked=LOCKED)),
    (dict(debugfs=dict(dscp="26"), lockdown="none"),
     state(source="debugfs", base=DEBUGFS, priorities=prios(none=True), cnp_dscp=26, cnp_priority=6,
           cnp_priority_mode=0)),
    # before 5.4 the files are tried; a refused read under lockdown is put down to lockdown, nothing half read stays
    (dict(debugfs=dict(dscp="26", prio=None), lockdown="integrity", release="4.19.0-26-amd64"),
     state(source="debugfs", base=DEBUGFS, priorities=prios(none=True), not_checked=LOCKED)),
    (dict(debugfs=dict(dscp="26", prio="5", mode="1"), lockdown="integrity", release="4.19.0-26-amd64"),
     state(source="debugfs", base=DEBUGFS, priorities=prios(none=True), cnp_dscp=26, cnp_priority=5,
           cnp_priority_mode=1)),
])
def test_read_rail_whole_state(kw, st):
    assert ecn.read_rail(host(**kw), RAIL) == st


@pytest.mark.parametrize("kw, path, content, message", [
    (dict(sysfs={}), SYSFS + "/roce_np/enable/5", "2", "%s holds 2, expected 0 or 1"),
    (dict(sysfs={}), SYSFS + "/roce_np/enable/0", "on", "unexpected content 'on' in %s"),
    (dict(sysfs={}), SYSFS + "/roce_rp/enable/0", "x", "unexpected content 'x' in %s"),
    (dict(sysfs={}), SYSFS + "/roce_rp/enable/7", "-1", "%s holds -1, expected 0 or 1"),
    (dict(sysfs={}), SYSFS + "/roce_np/cnp_dscp", "x", "unexpected content 'x' in %s"),
    (dict(sysfs={}), SYSFS + "/roce_np/cnp_802p_prio", None, "cannot read %s"),
    (dict(sysfs={}), SYSFS + "/roce_np/cnp_802p_prio", "6 7", "unexpected content '6 7' in %s"),
    (dict(debugfs={}), DEBUGFS + "/np_cnp_dscp", "x", "unexpected content 'x' in %s"),
    (dict(debugfs={}), DEBUGFS + "/np_cnp_prio", "x", "unexpected content 'x' in %s"),
    (dict(debugfs={}), DEBUGFS + "/np_cnp_prio_mode", "x", "unexpected content 'x' in %s"),
    (dict(debugfs={}), DEBUGFS + "/np_cnp_prio", None, "cannot read %s"),
    (dict(debugfs={}, lockdown="none"), DEBUGFS + "/np_cnp_prio_mode", None, "cannot read %s"),
    (dict(debugfs={}, lockdown="integrity", release="4.19.0"), DEBUGFS + "/np_cnp_dscp", "x",
     "unexpected content 'x' in %s"),
])
def test_read_rail_errors_name_the_rail_and_the_file(kw, path, content, message):
    sr = host(**kw)
    sr.files[path] = content
    with pytest.raises(ecn.EcnError) as e:
        ecn.read_rail(sr, RAIL)
    assert str(e.value) == "rail ens1np0: " + message % path


# ------------------------------------------------------------------------------------------------ summary

@pytest.mark.parametrize("st, priority, out", [
    (state(reason="why"), 3, {"source": None}),
    ({"source": None}, 3, {"source": None}),
    (state(source="debugfs", priorities=prios(none=True), not_checked="locked"), 3,
     {"source": "debugfs", "not_checked": "locked"}),
    (state(source="sysfs", priorities=prios((4,), (3,)), cnp_dscp=26, cnp_priority=5), 4,
     {"source": "sysfs", "np_enable:4": True, "rp_enable:4": False, "cnp_dscp": 26, "cnp_priority": 5}),
    (state(source="sysfs", priorities=prios((4,), (3,)), cnp_dscp=26, cnp_priority=5), 3,
     {"source": "sysfs", "np_enable:3": False, "rp_enable:3": True, "cnp_dscp": 26, "cnp_priority": 5}),
    (state(source="sysfs", cnp_dscp=48, cnp_priority=6), 2,
     {"source": "sysfs", "np_enable:2": None, "rp_enable:2": None, "cnp_dscp": 48, "cnp_priority": 6}),
    ({"source": "sysfs", "priorities": {"0": {"np": True, "rp": True}}, "cnp_dscp": 0, "cnp_priority": 0}, 0,
     {"source": "sysfs", "np_enable:0": True, "rp_enable:0": True, "cnp_dscp": 0, "cnp_priority": 0}),
    (state(source="debugfs", priorities=prios(none=True), cnp_dscp=26, cnp_priority=5, cnp_priority_mode=1), 3,
     {"source": "debugfs", "np_enable:3": None, "rp_enable:3": None, "cnp_dscp": 26, "cnp_priority": 5,
      "cnp_priority_mode": 1}),
])
def test_summary_of_each_kind_of_rail(st, priority, out):
    assert ecn.summary(st, priority) == out


# ------------------------------------------------------------------------------------------------ _firmware

FW_ITEM = {"concern": "ecn", "object": RAIL, "key": "firmware_cc_prio:3", "current": False, "desired": True}


@pytest.mark.parametrize("status, enabled, items", [
    ("ok", False, [FW_ITEM]),
    ("ok", True, []),
    ("not_checked", None, []),
    ("not_checked", False, []),
])
def test_firmware_item_only_when_read_and_off(status, enabled, items):
    read = Firmware(status, enabled)
    fw, got = ecn._firmware(host(debugfs={}), RAIL, {"source": "debugfs"}, 3, read)
    assert (fw, got, read.calls) == (read.doc, items, [(BDF, 3)])


def test_firmware_not_queried_and_sysfs_rails():
    sr = host(debugfs={})
    assert ecn._firmware(sr, RAIL, {"source": "debugfs"}, 5, None) == (NOT_QUERIED_DOC, [])
    read = Firmware("ok", False)
    assert ecn._firmware(sr, RAIL, {"source": "sysfs"}, 3, read) == (None, [])
    assert ecn._firmware(sr, RAIL, {"source": None}, 3, read) == (None, []) and read.calls == []


# ------------------------------------------------------------------------------------------------ apply_ecn

def entry(**kw):
    e = {"rail": RAIL, "source": None, "reason": None, "not_checked": None, "firmware": None, "before": None,
         "after": None, "error": None}
    e.update(kw)
    return e


def item(key, cur, want):
    return {"concern": "ecn", "object": RAIL, "key": key, "current": cur, "desired": want}


def res(outcome, changes=(), error=None):
    return {"object": RAIL, "result": outcome, "error": error,
            "changes": [{"key": k, "before": b, "after": a} for k, b, a in changes]}


SYSFS_BEFORE = {"source": "sysfs", "np_enable:3": False, "rp_enable:3": False, "cnp_dscp": 48, "cnp_priority": 6}
SYSFS_ON = dict(SYSFS_BEFORE, **{"np_enable:3": True, "rp_enable:3": True})
SYSFS_DRIFT = [item("np_enable:3", False, True), item("rp_enable:3", False, True)]
SYSFS_CHANGES = [("np_enable:3", False, True), ("rp_enable:3", False, True)]


def test_a_missing_rail_is_refused_word_for_word():
    with pytest.raises(ValueError) as e:
        ecn.apply_ecn(host(sysfs={}), [RAIL, "ens9np0"], DESIRED, True)
    assert str(e.value) == "rail ens9np0 does not exist (no /sys/class/net/ens9np0)"


def test_check_mode_whole_result_and_the_rails_of_desired_are_not_read():
    sr = host(sysfs=dict(np=(), rp=()))
    st = ecn.read_rail(sr, RAIL)
    # the rails argument decides; a "rails" in desired (even a bad one) is left to the caller
    out = ecn.apply_ecn(sr, [RAIL], dict(DESIRED, rails=[RAIL, RAIL]), True)
    assert out == {
        "changed": True, "drift": SYSFS_DRIFT, "errors": [], "state": {RAIL: st},
        "results": [res("changed", SYSFS_CHANGES)],
        "rails": [entry(source="sysfs", before=SYSFS_BEFORE, after=SYSFS_ON)]}
    assert sr.writes == []


def test_a_rail_without_controls_and_one_in_line_have_whole_entries():
    out = ecn.apply_ecn(host(driver="virtio_net"), [RAIL], {}, False)
    assert out["rails"] == [entry(reason=OTHER_REASON % "driver virtio_net", before={"source": None},
                                  after={"source": None})]
    assert (out["changed"], out["results"]) == (False, [res("unchanged")])
    out = ecn.apply_ecn(host(sysfs={}), [RAIL], None, False)
    assert out["rails"] == [entry(source="sysfs", before=SYSFS_ON, after=SYSFS_ON)]


def test_a_fix_on_debugfs_writes_in_order_and_shows_the_firmware_before_and_after():
    sr = host(debugfs=dict(dscp="26", mode="1"))
    read = Firmware("ok", True)
    out = ecn.apply_ecn(sr, [RAIL], DESIRED, False, read)
    assert sr.writes == [(DEBUGFS + "/np_cnp_dscp", "48\n"), (DEBUGFS + "/np_cnp_prio_mode", "0\n"),
                         (DEBUGFS + "/np_cnp_prio", "6\n")]
    before = {"source": "debugfs", "np_enable:3": None, "rp_enable:3": None, "cnp_dscp": 26, "cnp_priority": 6,
              "cnp_priority_mode": 1, "firmware_cc_prio:3": True}
    assert out["rails"] == [entry(source="debugfs", firmware=read.doc, before=before,
                                  after=dict(before, cnp_dscp=48, cnp_priority_mode=0))]
    assert out["drift"] == [item("cnp_dscp", 26, 48), item("cnp_priority_mode", 1, 0)]
    assert (out["changed"], out["errors"]) == (True, [])
    assert out["results"] == [res("changed", [("cnp_dscp", 26, 48), ("cnp_priority_mode", 1, 0)])]


def test_a_debugfs_rail_that_fails_part_way_keeps_the_firmware_reading():
    sr = host(debugfs=dict(dscp="26", mode="1"), refuse_after=1)
    out = ecn.apply_ecn(sr, [RAIL], DESIRED, False, Firmware("ok", True))
    before = {"source": "debugfs", "np_enable:3": None, "rp_enable:3": None, "cnp_dscp": 26, "cnp_priority": 6,
              "cnp_priority_mode": 1, "firmware_cc_prio:3": True}
    assert out["rails"][0]["after"] == dict(before, cnp_dscp=48)
    assert out["results"] == [res("failed", [("cnp_dscp", 26, 48)], "rail ens1np0: write refused")]
    assert out["changed"] is True


@pytest.mark.parametrize("read, not_checked", [
    (None, LOCKED + "; " + NOT_QUERIED),
    (Firmware("not_checked", None, NO_TOOL), LOCKED + "; " + NO_TOOL),
    (Firmware("ok", True), LOCKED),
    (Firmware("ok", False, "DCQCN is off for priority 3"), LOCKED),
])
def test_lockdown_and_the_firmware_reason_are_both_kept(read, not_checked):
    out = ecn.apply_ecn(host(debugfs=dict(dscp="26"), lockdown="integrity"), [RAIL], DESIRED, False, read)
    fw = read.doc if read else NOT_QUERIED_DOC
    before = {"source": "debugfs", "not_checked": LOCKED, "firmware_cc_prio:3": fw["enabled"]}
    assert out["rails"] == [entry(source="debugfs", not_checked=not_checked, firmware=fw, before=before,
                                  after=before)]
    assert out["drift"] == ([item("firmware_cc_prio:3", False, True)] if fw["enabled"] is False else [])
    assert (out["changed"], out["errors"], out["results"]) == (False, [], [res("unchanged")])


def test_firmware_reason_alone_when_the_rail_was_read():
    out = ecn.apply_ecn(host(debugfs={}), [RAIL], DESIRED, True, Firmware("not_checked", None, NO_TOOL))
    assert out["rails"][0]["not_checked"] == NO_TOOL


NOT_BACK = ("rail ens1np0: np_enable:3 (reads False, wrote True), rp_enable:3 (reads False, wrote True) do(es) not "
            "read back as written")


def test_a_fix_that_does_not_read_back_fails_with_what_it_tried():
    sr = host(sysfs=dict(np=(), rp=()), stuck=True)
    out = ecn.apply_ecn(sr, [RAIL], DESIRED, False)
    assert sr.writes == [(SYSFS + "/roce_np/enable/3", "1\n"), (SYSFS + "/roce_rp/enable/3", "1\n")]
    assert out["rails"] == [entry(source="sysfs", before=SYSFS_BEFORE, after=SYSFS_BEFORE, error=NOT_BACK)]
    assert out["errors"] == [NOT_BACK]
    # nothing reads differently afterwards: nothing changed, whatever was written
    assert out["results"] == [res("failed", (), NOT_BACK)] and out["changed"] is False
    assert out["drift"] == SYSFS_DRIFT


def test_a_rail_that_fails_part_way_says_what_did_change():
    """np is written, then the rp write fails: the task changed the node and names what it changed."""
    sr = host(sysfs=dict(np=(), rp=()), refuse_after=1)
    out = ecn.apply_ecn(sr, [RAIL], DESIRED, False)
    msg = "rail ens1np0: write refused"
    assert sr.writes == [(SYSFS + "/roce_np/enable/3", "1\n")]
    assert out["changed"] is True and out["errors"] == [msg]
    assert out["rails"][0]["after"] == dict(SYSFS_BEFORE, **{"np_enable:3": True})
    assert out["results"] == [res("failed", [("np_enable:3", False, True)], msg)]


def test_a_refused_write_fails_the_rail_with_no_change_and_the_next_rail_goes_on():
    sr = host(sysfs=dict(np=(), rp=()), refuse=True)
    sr.links["/sys/class/net/ens2np0"] = "/sys/class/net/ens1np0"
    out = ecn.apply_ecn(sr, [RAIL, "ens2np0"], DESIRED, False)
    msg = "rail ens1np0: write refused"
    assert out["rails"][0] == entry(source="sysfs", before=SYSFS_BEFORE, error=msg)
    assert out["errors"] == [msg, "rail ens2np0: write refused"]
    assert out["results"][0] == res("failed", (), msg)
    assert [r["rail"] for r in out["rails"]] == [RAIL, "ens2np0"]


@pytest.mark.parametrize("path, content, msg", [
    (SYSFS + "/roce_rp/enable/2", "yes", "rail ens1np0: unexpected content 'yes' in %s/roce_rp/enable/2" % SYSFS),
    (SYSFS + "/roce_np/cnp_dscp", None, "rail ens1np0: cannot read %s/roce_np/cnp_dscp" % SYSFS),
])
def test_an_unreadable_rail_keeps_its_first_entry_and_the_error(path, content, msg):
    sr = host(sysfs={})
    sr.files[path] = content
    out = ecn.apply_ecn(sr, [RAIL], DESIRED, False)
    assert out == {"changed": False, "rails": [entry(error=msg)], "drift": [], "results": [res("failed", (), msg)],
                   "errors": [msg], "state": {}}
