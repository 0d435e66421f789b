# -*- coding: utf-8 -*-
"""DCBX ownership (module_utils/concerns/dcb/dcbx.py) and its part of the dcb concern, against the dcb emulator (dcb_dcbx.py)."""
from __future__ import absolute_import, division, print_function

import os

import pytest

from gpufabric_sim.emulators import dcb as dcb_emu
from gpufabric_sim.emulators import dcb_dcbx

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb, dcbx
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type


@pytest.mark.parametrize("text, flags, owner", [
    ('{"host":true,"cee":true,"ieee":true}', ["host", "cee", "ieee"], "host"),
    ('{"cee":true,"ieee":true}', ["cee", "ieee"], "lld-managed"),
    ('{"lld_managed":true,"cee":true}', ["lld-managed", "cee"], "lld-managed"),
    ("host ieee \n", ["host", "ieee"], "host"),
    ("ieee host", ["host", "ieee"], "host"),
    ("{}", [], "lld-managed"),
    ('[{"host":true,"static":true}]', ["host", "static"], "host"),
])
def test_parse_both_output_shapes(text, flags, owner):
    st = dcbx.parse(text)
    assert st["flags"] == flags and st["owner"] == owner


@pytest.mark.parametrize("text", ['{"host":false}', '{"willing":true}', "host bogus", "{", '"x"'])
def test_parse_refuses_what_dcb_does_not_print(text):
    with pytest.raises(dcbx.DcbxError):
        dcbx.parse(text)


@pytest.mark.parametrize("flags, drift", [
    (["host", "ieee"], False), (["host", "cee", "ieee"], False), (["host", "cee"], True),
    (["cee", "ieee"], True), (["host", "lld-managed", "ieee"], True), ([], True),
])
def test_plan(flags, drift):
    cmds, items = dcbx.plan("ens1np0", dcbx.describe(flags), "host")
    assert bool(items) is drift
    if drift:
        assert cmds == [["dcb", "dcbx", "set", "dev", "ens1np0", "host", "ieee"]]
        assert items[0]["key"] == "dcbx" and items[0]["desired"] == "host ieee" and items[0]["concern"] == "dcb"
    assert dcbx.plan("ens1np0", dcbx.describe(flags), "keep") == ([], [])
    assert dcbx.plan("ens1np0", None, "host") == ([], [])


class Runner(object):
    def __init__(self, root):
        self.root = root
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return dcb_emu.run(argv[1:], root=self.root)


def _node(tmp_path, driver="mlx5_core", version="6.5.0"):
    root = str(tmp_path)
    for r in ("ens1np0", "ens2np0"):
        os.makedirs(os.path.join(root, "sys/class/net", r, "device"))
        drv = os.path.join(root, "sys/bus/pci/drivers", "mlx5_core" if driver == "mlx5_core" else "other_drv")
        if not os.path.isdir(drv):
            os.makedirs(drv)
        os.symlink(drv, os.path.join(root, "sys/class/net", r, "device", "driver"))
    dcb_emu.init_node(root, version)
    for r in ("ens1np0", "ens2np0"):
        dcb_emu.init_device(root, r, driver)
    return Sysroot(root), Runner(root)


@pytest.mark.parametrize("version", ["6.1.0", "6.5.0"])
def test_mlx5_rail_taken_over_by_the_firmware_is_drift_and_fixed(tmp_path, version):
    sr, run = _node(tmp_path, version=version)
    rails = ["ens1np0", "ens2np0"]
    dcb.apply_dcb(run, rails, {}, False, sysroot=sr)
    assert dcb.apply_dcb(run, rails, {}, True, sysroot=sr)["drift"] == []
    dcb_dcbx.firmware_takes_over(str(tmp_path), "ens2np0")
    check = dcb.apply_dcb(run, rails, {}, True, sysroot=sr)
    assert [(d["object"], d["key"], d["current"]) for d in check["drift"]] == [("ens2np0", "dcbx", "cee ieee")]
    assert check["commands"] == [["dcb", "dcbx", "set", "dev", "ens2np0", "host", "ieee"]]
    assert dcb_emu.state(str(tmp_path), "ens2np0")["dcbx"]["mode"] == "auto", "check mode wrote nothing"
    fix = dcb.apply_dcb(run, rails, {}, False, sysroot=sr)
    assert not fix["errors"], fix["errors"]
    r2 = [r for r in fix["rails"] if r["rail"] == "ens2np0"][0]
    assert r2["before"]["dcbx"] == "cee ieee" and r2["after"]["dcbx"] == "host ieee"
    assert dcb_emu.state(str(tmp_path), "ens2np0")["dcbx"]["mode"] == "host"
    again = dcb.apply_dcb(run, rails, {}, False, sysroot=sr)
    assert not again["changed"] and again["drift"] == []


def test_lld_managed_generic_driver_is_fixed_and_keep_leaves_it(tmp_path):
    sr, run = _node(tmp_path, driver="other")
    dcb_dcbx.firmware_takes_over(str(tmp_path), "ens1np0")
    keep = dcb.apply_dcb(run, ["ens1np0"], {"dcbx": "keep"}, True, sysroot=sr)
    assert not [d for d in keep["drift"] if d["key"] == "dcbx"]
    check = dcb.apply_dcb(run, ["ens1np0"], {}, True, sysroot=sr)
    assert [d["current"] for d in check["drift"] if d["key"] == "dcbx"] == ["lld-managed cee"]
    fix = dcb.apply_dcb(run, ["ens1np0"], {}, False, sysroot=sr)
    assert not fix["errors"]
    assert dcbx.parse(run(["dcb", "-j", "dcbx", "show", "dev", "ens1np0"])[1])["flags"] == ["host", "ieee"]


def test_a_driver_refusing_host_mode_fails_that_rail(tmp_path):
    sr, run = _node(tmp_path)
    dcb_dcbx.firmware_takes_over(str(tmp_path), "ens1np0")
    dcb_emu.inject_fault(str(tmp_path), "ens1np0", "dcbx", "EOPNOTSUPP")
    res = dcb.apply_dcb(run, ["ens1np0", "ens2np0"], {}, False, sysroot=sr)
    assert len(res["errors"]) == 1 and "dcbx set dev ens1np0" in res["errors"][0]
    assert [r["result"] for r in res["results"]] == ["failed", "changed"]


def test_unreadable_dcbx_is_not_a_rail_error(tmp_path, monkeypatch):
    sr, run = _node(tmp_path)

    def no_getdcbx(argv):
        if "dcbx" in argv or (argv[1:3] == ["-j", "-b"] and "dcbx" in open(argv[3]).read()):
            if "-b" in argv:
                return 1, "", "Attribute not found: Operation not supported\nCommand failed %s:3\n" % argv[3]
            return 1, "", "Attribute not found: Operation not supported\n"
        return run(argv)

    res = dcb.apply_dcb(no_getdcbx, ["ens1np0"], {}, True, sysroot=sr)
    assert not res["errors"]
    assert res["rails"][0]["before"]["dcbx"] is None and "Operation not supported" in res["rails"][0]["dcbx_error"]
    assert not [d for d in res["drift"] if d["key"] == "dcbx"]


@pytest.mark.parametrize("text, expected", [
    ("\nDevice #1:\n----------\n\nDevice type:    ConnectX7\nDevice:         0000:1a:00.0\n\n"
     "Configurations:                              Next Boot\n"
     "        LLDP_NB_DCBX_P1                     False(0)\n"
     "        LLDP_NB_RX_MODE_P1                  ALL(2)\n"
     "        DCBX_IEEE_P1                        True(1)\n",
     {"LLDP_NB_DCBX_P1": "False(0)", "LLDP_NB_RX_MODE_P1": "ALL(2)", "DCBX_IEEE_P1": "True(1)"}),
    ("Device type: ConnectX7\n        LLDP_NB_DCBX_P1   True(1)\n", {}),
])
def test_parse_mlxconfig(text, expected):
    assert dcbx.parse_mlxconfig(text) == expected


def test_firmware_facts_without_mlxconfig_say_not_read():
    f = dcbx.firmware_facts(lambda argv: (0, "", ""), lambda name: None, "0000:1a:00.0")
    assert f["status"] == "not_checked" and "could not be read" in f["reason"] and f["settings"] is None
    f = dcbx.firmware_facts(lambda argv: (3, "", "-E- Failed to open device"), lambda n: "/usr/bin/mlxconfig",
                            "0000:1a:00.0")
    assert f["status"] == "not_checked" and "Failed to open device" in f["reason"]
    text = "Configurations:      Next Boot\n        LLDP_NB_DCBX_P1     False(0)\n"
    f = dcbx.firmware_facts(lambda argv: (0, text, ""), lambda n: "/usr/bin/mlxconfig", "0000:1a:00.0")
    assert f == {"status": "ok", "reason": None, "settings": {"LLDP_NB_DCBX_P1": "False(0)"}}


class HandoverRunner(Runner):
    """The emulator, where the handover to the host changes the rail's DCB (issue 21 item 8): the firmware's LLDP
    agent kept PFC as negotiated with the switch, and once the host owns the port PFC is what the host last set."""

    def __init__(self, root, host_pfc):
        Runner.__init__(self, root)
        self.host_pfc = host_pfc

    def __call__(self, argv):
        rc, out, err = Runner.__call__(self, argv)
        if argv[1:3] == ["dcbx", "set"] and rc == 0:
            dcb_emu.run(["pfc", "set", "dev", argv[4], "prio-pfc", "all:off"]
                        + ["%d:on" % p for p in self.host_pfc], root=self.root)
        return rc, out, err


def test_the_plan_is_made_after_the_host_takes_dcb_over(tmp_path):
    sr, run = _node(tmp_path)
    rails = ["ens1np0", "ens2np0"]
    dcb.apply_dcb(run, rails, {}, False, sysroot=sr)
    dcb_dcbx.firmware_takes_over(str(tmp_path), "ens2np0")
    run = HandoverRunner(str(tmp_path), host_pfc=[])
    fix = dcb.apply_dcb(run, rails, {}, False, sysroot=sr)
    assert not fix["errors"], fix["errors"]
    takeover = run.calls.index(["dcb", "dcbx", "set", "dev", "ens2np0", "host", "ieee"])
    pfc_set = run.calls.index(["dcb", "pfc", "set", "dev", "ens2np0", "prio-pfc", "all:off", "3:on"])
    reads = [i for i, c in enumerate(run.calls) if "show" in c or "-b" in c]
    assert takeover < pfc_set and any(takeover < i < pfc_set for i in reads), "read again between the two"
    assert [(d["object"], d["key"]) for d in fix["drift"]] == [("ens2np0", "dcbx"), ("ens2np0", "pfc")]
    r2 = fix["rails"][1]
    assert r2["before"]["dcbx"] == "cee ieee" and r2["before"]["pfc"] == [3], "before: as read before the handover"
    assert r2["after"]["pfc"] == [3] and r2["after"]["dcbx"] == "host ieee"
    assert not dcb.apply_dcb(run, rails, {}, False, sysroot=sr)["changed"]


# id, processes {pid: comm}, enabled unit links, found (pids, enabled)
LLDPAD_CASES = [
    ("none", {1: "systemd", 200: "lldpd"}, [], None),
    ("running", {1: "systemd", 812: "lldpad"}, [], ([812], [])),
    ("enabled-not-running", {1: "systemd"}, ["multi-user.target.wants/lldpad.service"],
     ([], ["/etc/systemd/system/multi-user.target.wants/lldpad.service"])),
    ("socket-enabled-and-running", {812: "lldpad", 9: "lldpad"}, ["sockets.target.wants/lldpad.socket"],
     ([9, 812], ["/etc/systemd/system/sockets.target.wants/lldpad.socket"])),
    ("look-alikes", {5: "lldpad2", 6: "lldptool", 7: "xlldpad"}, ["multi-user.target.wants/lldpd.service"], None),
]


@pytest.mark.parametrize("case", LLDPAD_CASES, ids=[c[0] for c in LLDPAD_CASES])
def test_lldpad_is_found(tmp_path, case):
    _id, procs, links, found = case
    for pid, comm in procs.items():
        os.makedirs(str(tmp_path / "proc" / str(pid)))
        (tmp_path / "proc" / str(pid) / "comm").write_text(comm + "\n")
    (tmp_path / "proc" / "self").mkdir(parents=True, exist_ok=True)
    for link in links:
        path = tmp_path / "etc/systemd/system" / link
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink("/usr/lib/systemd/system/" + os.path.basename(link), str(path))   # dangling below the root
    agent = dcbx.lldpad(Sysroot(str(tmp_path)))
    assert (agent if agent is None else (agent["pids"], agent["enabled"])) == found
    if agent:
        item = dcbx.lldpad_item(agent)
        assert item["object"] == item["key"] == "lldpad" and item["concern"] == "dcb"
        reason = dcbx.lldpad_reason(agent)
        assert "systemctl disable --now lldpad.service lldpad.socket" in reason and len(reason) < 400
