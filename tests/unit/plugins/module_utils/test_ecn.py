# -*- coding: utf-8 -*-
"""ECN/DCQCN planner (module_utils/concerns/ecn/manage.py) on host trees laid out as the kernel does (sysfs_host)."""
from __future__ import absolute_import, division, print_function

import os

import pytest

import lockdown_kernel as lk
import sysfs_host as sh

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn

__metaclass__ = type


def _host(tmp_path, with_virtio=False, soft=False):
    devices = [sh.rp("0000:10:01.0", sh.nic("0000:11:00.0", "ens1np0", "mlx5_0")),
               sh.rp("0000:10:02.0", sh.nic("0000:12:00.0", "ens2np0", "mlx5_1"))]
    if with_virtio:
        devices.append(sh.rp("0000:10:03.0", sh.virtio_nic("0000:13:00.0", "eth0")))
    model = sh.host(sh.rbus("0000:10", 0, *devices))
    if soft:
        model["soft_rdma"] = [{"name": "rxe0", "type": "rxe", "netdev": "eth0"}]
    return sh.build(str(tmp_path), model)


def _write(sr, path, value, mode=0o644):
    real = sr.path(path)
    if not os.path.isdir(os.path.dirname(real)):
        os.makedirs(os.path.dirname(real))
    with open(real, "w") as f:
        f.write("%s\n" % value)
    os.chmod(real, mode)


def ofed(sr, netdev, np=(0, 1, 2, 3, 4, 5, 6, 7), rp=(0, 1, 2, 3, 4, 5, 6, 7), dscp=48, prio=6):
    base = "/sys/class/net/%s/ecn" % netdev
    for p in range(8):
        _write(sr, "%s/roce_np/enable/%d" % (base, p), int(p in np))
        _write(sr, "%s/roce_rp/enable/%d" % (base, p), int(p in rp))
    _write(sr, base + "/roce_np/cnp_dscp", dscp)
    _write(sr, base + "/roce_np/cnp_802p_prio", prio)
    _write(sr, base + "/roce_np/min_time_between_cnps", 4)


def inbox(sr, bdf, dscp=48, prio=6, mode=1):
    base = "/sys/kernel/debug/mlx5/%s/cc_params" % bdf
    for name, v in (("np_cnp_dscp", dscp), ("np_cnp_prio", prio), ("np_cnp_prio_mode", mode),
                    ("np_min_time_between_cnps", 4), ("rp_min_rate", 0)):
        _write(sr, "%s/%s" % (base, name), v, 0o600)


DESIRED = {"priority": 3, "cnp_dscp": 48, "cnp_priority": 6}


@pytest.mark.parametrize("setup, keys", [
    (dict(np=(), rp=()), ["np_enable:3", "rp_enable:3"]),
    (dict(np=(3,), rp=(0, 1)), ["rp_enable:3"]),
    (dict(dscp=26), ["cnp_dscp"]),
    (dict(prio=3, dscp=0), ["cnp_dscp", "cnp_priority"]),
    ({}, []),
])
def test_ofed_sysfs_drift_fix_and_second_run(tmp_path, setup, keys):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", **setup)
    ofed(sr, "ens2np0")
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, check_mode=True)
    assert sorted(d["key"] for d in res["drift"]) == sorted(keys)
    assert all(d["object"] == "ens1np0" for d in res["drift"])
    assert res["changed"] == bool(keys)
    doc = ecn.status_of(res, True)
    assert doc["status"] == ("drift" if keys else "ok")
    # check mode wrote nothing
    assert ecn.read_rail(sr, "ens1np0")["priorities"]["3"] == ecn.apply_ecn(sr, ["ens1np0"], DESIRED, True)[
        "state"]["ens1np0"]["priorities"]["3"]
    assert ecn.concern_status(sr, dict(DESIRED, rails=["ens1np0", "ens2np0"]))["status"] == doc["status"]
    fixed = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, check_mode=False)
    assert not fixed["errors"]
    assert fixed["changed"] == bool(keys)
    st = ecn.read_rail(sr, "ens1np0")
    assert st["priorities"]["3"] == {"np": True, "rp": True}
    assert (st["cnp_dscp"], st["cnp_priority"]) == (48, 6)
    # only the lossless priority is managed: the others keep what they had
    if setup.get("rp") == (0, 1):
        assert st["rp_enabled"] == [0, 1, 3]
    again = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, check_mode=False)
    assert not again["changed"] and not again["drift"]
    assert ecn.concern_status(sr, dict(DESIRED, rails=["ens1np0", "ens2np0"]))["status"] == "ok"


def test_inbox_debugfs_cnp_class_and_no_enable_per_priority(tmp_path):
    sr = _host(tmp_path)
    inbox(sr, "0000:11:00.0", dscp=26, prio=0, mode=1)
    inbox(sr, "0000:12:00.0", mode=0)
    st = ecn.read_rail(sr, "ens1np0")
    assert st["source"] == "debugfs"
    assert st["priorities"]["3"] == {"np": None, "rp": None}
    assert st["np_enabled"] is None
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, True)
    assert sorted(d["key"] for d in res["drift"]) == ["cnp_dscp", "cnp_priority", "cnp_priority_mode"]
    ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False)
    st = ecn.read_rail(sr, "ens1np0")
    assert (st["cnp_dscp"], st["cnp_priority"], st["cnp_priority_mode"]) == (48, 6, 0)
    assert not ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False)["changed"]


def test_mode_alone_is_drift_on_debugfs(tmp_path):
    sr = _host(tmp_path)
    inbox(sr, "0000:11:00.0", mode=1)
    res = ecn.apply_ecn(sr, ["ens1np0"], DESIRED, True)
    assert [d["key"] for d in res["drift"]] == ["cnp_priority_mode"]


@pytest.mark.parametrize("layout, rails, needle", [
    ("mlx5", ["ens1np0"], "mlx5 without ECN controls"),
    ("virtio", ["eth0"], "exposes no ECN/DCQCN controls"),
    ("soft", ["eth0"], "exposes no ECN/DCQCN controls"),
])
def test_no_controls_is_not_applicable_with_the_reason(tmp_path, layout, rails, needle):
    sr = _host(tmp_path, with_virtio=layout in ("virtio", "soft"), soft=layout == "soft")
    res = ecn.apply_ecn(sr, rails, DESIRED, False)
    assert not res["changed"] and not res["drift"]
    doc = ecn.status_of(res, False)
    assert doc["status"] == "not_applicable"
    assert needle in doc["reason"] and rails[0] in doc["reason"]
    assert ecn.concern_status(sr, dict(DESIRED, rails=rails))["status"] == "not_applicable"


def test_a_rail_without_controls_beside_one_with_them(tmp_path):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=())
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, True)
    doc = ecn.status_of(res, True)
    assert doc["status"] == "drift" and [d["object"] for d in doc["items"]] == ["ens1np0"]
    ok = ecn.status_of(ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False), False)
    assert ok["status"] == "ok"
    ok = ecn.status_of(ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False), False)
    assert ok["status"] == "ok" and "ens2np0" in ok["reason"]


@pytest.mark.parametrize("content, needle", [("yes", "unexpected content"), ("2", "expected 0 or 1")])
def test_unreadable_control_fails_that_rail_only(tmp_path, content, needle):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0")
    ofed(sr, "ens2np0", np=())
    _write(sr, "/sys/class/net/ens1np0/ecn/roce_np/enable/5", content)
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False)
    assert len(res["errors"]) == 1 and "ens1np0" in res["errors"][0] and needle in res["errors"][0]
    assert ecn.read_rail(sr, "ens2np0")["priorities"]["3"]["np"] is True
    assert ecn.concern_status(sr, dict(DESIRED, rails=["ens1np0", "ens2np0"]))["status"] == "error"


def test_a_write_that_does_not_read_back_fails(tmp_path, monkeypatch):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=())
    monkeypatch.setattr(sr, "write_attr", lambda p, v: None)
    res = ecn.apply_ecn(sr, ["ens1np0"], DESIRED, False)
    assert res["errors"] and "not read back as written" in res["errors"][0]
    assert "np_enable:3" in res["errors"][0] and res["results"][0]["result"] == "failed"


@pytest.mark.parametrize("desired, needle", [
    ({"priority": 8}, "priority must be 0..7"),
    ({"priority": True}, "priority must be an integer"),
    ({"cnp_dscp": 64}, "cnp_dscp must be 0..63"),
    ({"cnp_priority": "x"}, "cnp_priority must be an integer"),
    ({"bogus": 1}, "unknown ECN settings: bogus"),
    ({"rails": []}, "rails must list"),
    ({"rails": ["a", "a"]}, "listed twice"),
    ({"rails": ["bad/name"]}, "not a legal"),
])
def test_bad_input_is_refused_before_anything(tmp_path, desired, needle):
    with pytest.raises(ValueError) as e:
        ecn.normalize_desired(desired)
    assert needle in str(e.value)


def test_unknown_rail_is_refused(tmp_path):
    sr = _host(tmp_path)
    with pytest.raises(ValueError) as e:
        ecn.apply_ecn(sr, ["ens9np0"], DESIRED, True)
    assert "ens9np0" in str(e.value)
    assert ecn.concern_status(sr, dict(DESIRED, rails=["ens9np0"]))["status"] == "error"


def test_facts_per_priority(tmp_path):
    sr = _host(tmp_path)
    ofed(sr, "ens1np0", np=(3,), rp=(3, 4))
    f = ecn.facts(sr, "ens1np0")
    assert f["source"] == "sysfs" and f["np_enabled"] == [3] and f["rp_enabled"] == [3, 4]
    assert f["priorities"]["4"] == {"np": False, "rp": True}
    assert "base" not in f
    assert ecn.facts(sr, "ens2np0")["source"] is None and ecn.facts(sr, "ens2np0")["reason"]


@pytest.mark.parametrize("mode", ["integrity", "confidentiality"])
def test_lockdown_makes_inbox_ecn_not_checked_not_error(tmp_path, mode):
    """Issue 21 item 7: under lockdown debugfs refuses the 0600 cc_params files; ECN is not_checked, not error."""
    _host(tmp_path)
    sr = lk.LockedDownSysroot(str(tmp_path))
    inbox(sr, "0000:11:00.0", dscp=26)
    inbox(sr, "0000:12:00.0")
    lk.write_lockdown(str(tmp_path), mode)
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False)
    assert not res["errors"] and not res["changed"] and not res["drift"]
    assert [r["source"] for r in res["rails"]] == ["debugfs", "debugfs"]
    doc = ecn.status_of(res, False)
    assert doc["status"] == "not_checked"
    assert "[%s]" % mode in doc["reason"] and "rails ens1np0, ens2np0" in doc["reason"]
    assert "cat /sys/kernel/security/lockdown" in doc["reason"]
    assert ecn.concern_status(sr, dict(DESIRED, rails=["ens1np0", "ens2np0"]))["status"] == "not_checked"
    assert ecn.facts(sr, "ens1np0")["not_checked"]
    # nothing was written: the value the kernel would have refused is still there
    assert ecn.read_rail(lk.LockedDownSysroot(str(tmp_path)), "ens1np0")["cnp_dscp"] is None
    lk.write_lockdown(str(tmp_path), "none")
    assert ecn.read_rail(sr, "ens1np0")["cnp_dscp"] == 26


def test_lockdown_beside_a_sysfs_rail_keeps_its_drift(tmp_path):
    sr = _host(tmp_path)
    sr = lk.LockedDownSysroot(sr.path("/"))
    ofed(sr, "ens1np0", np=())
    inbox(sr, "0000:12:00.0")
    lk.write_lockdown(sr.path("/"), "integrity")
    res = ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, True)
    doc = ecn.status_of(res, True)
    assert doc["status"] == "drift" and "ens1np0 np_enable:3" in doc["reason"]
    assert "not checked: rail ens2np0: kernel lockdown [integrity]" in doc["reason"]
    fixed = ecn.status_of(ecn.apply_ecn(sr, ["ens1np0", "ens2np0"], DESIRED, False), False)
    assert fixed["status"] == "not_checked" and fixed["corrected"] and "corrected 1 item(s)" in fixed["reason"]


def test_a_refused_read_without_lockdown_stays_an_error(tmp_path):
    sr = _host(tmp_path)
    inbox(sr, "0000:11:00.0")
    os.remove(sr.path("/sys/kernel/debug/mlx5/0000:11:00.0/cc_params/np_cnp_prio"))
    os.mkdir(sr.path("/sys/kernel/debug/mlx5/0000:11:00.0/cc_params/np_cnp_prio"))
    res = ecn.apply_ecn(sr, ["ens1np0"], DESIRED, True)
    assert res["errors"] and "cannot read" in res["errors"][0]


def firmware(masks):
    """apply_ecn's ``firmware`` with the masks of ROCE_CC_PRIO_MASK per PCI function (None: not readable)."""
    def read(bdf, priority):
        if masks.get(bdf) is None:
            return {"status": "not_checked", "enabled": None, "mask": None, "key": "K", "tool": None,
                    "reason": "no mlxconfig for %s; check: mlxconfig -d %s query K" % (bdf, bdf)}
        mask = masks[bdf]
        on = bool(mask >> priority & 1)
        return {"status": "ok", "enabled": on, "mask": mask, "key": "K", "tool": "mlxconfig",
                "reason": None if on else "DCQCN is off for priority %d in the firmware of %s" % (priority, bdf)}
    return read


# id, firmware masks (None: apply_ecn without a firmware reader), check-mode status, fix-run status, needle
INBOX_FIRMWARE_CASES = [
    ("not-queried", None, "drift", "not_checked", "was not queried"),
    ("tool-missing", {}, "drift", "not_checked", "check: mlxconfig -d 0000:11:00.0 query K"),
    ("default-mask-255", {"0000:11:00.0": 255, "0000:12:00.0": 255}, "drift", "ok", None),
    ("bit-3-clear-on-one", {"0000:11:00.0": 255, "0000:12:00.0": 247}, "drift", "drift",
     "DCQCN is off for priority 3 in the firmware of 0000:12:00.0"),
    ("one-unreadable", {"0000:11:00.0": 255}, "drift", "not_checked", "rail ens2np0: no mlxconfig"),
]


@pytest.mark.parametrize("case", INBOX_FIRMWARE_CASES, ids=[c[0] for c in INBOX_FIRMWARE_CASES])
def test_inbox_ecn_is_ok_only_when_the_firmware_enables_the_priority(tmp_path, case):
    """Issue 21 item 6: on the inbox driver the CNP class alone does not make ECN ok."""
    _id, masks, check_status, fix_status, needle = case
    sr = _host(tmp_path)
    inbox(sr, "0000:11:00.0", dscp=26)
    inbox(sr, "0000:12:00.0", mode=0)
    fw = None if masks is None else firmware(masks)
    rails = ["ens1np0", "ens2np0"]
    check = ecn.apply_ecn(sr, rails, DESIRED, True, fw)
    doc = ecn.status_of(check, True)
    assert doc["status"] == check_status
    assert ecn.concern_status(sr, dict(DESIRED, rails=rails), fw)["status"] == check_status
    fix = ecn.apply_ecn(sr, rails, DESIRED, False, fw)
    assert not fix["errors"]
    doc = ecn.status_of(fix, False)
    assert doc["status"] == fix_status
    if needle:
        assert needle in doc["reason"]
    again = ecn.apply_ecn(sr, rails, DESIRED, False, fw)
    assert not again["changed"], "the firmware item is never written"
    assert ecn.status_of(again, False)["status"] == fix_status
    fw_items = [d for d in again["drift"] if d["key"].startswith("firmware_")]
    want_items = [("ens2np0", "firmware_cc_prio:3")] if fix_status == "drift" else []
    assert [(d["object"], d["key"]) for d in fw_items] == want_items
    if fix_status == "drift":
        assert doc["items"] and "not corrected" not in doc["reason"] and not again["results"][1]["changes"]
    assert again["rails"][0]["before"]["firmware_cc_prio:3"] == (None if not masks else True)
