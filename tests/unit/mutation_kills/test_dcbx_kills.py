# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcbx: what its own tests left unseen (make mutation's survivors): every field of a parsed mode, every refusal's
message, each way reading the mode or the firmware settings can fail, and the lldpad item and reason as written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx

FW_OUT = """
Device #1:
----------

Device type:        ConnectX7
PCI device:         0000:17:00.0

Configurations:                                     Next Boot
        LLDP_NB_DCBX_P1                             False(0)
        LLDP_NB_RX_MODE_P1                          ALL(2)
        LLDP_NB_TX_MODE_P1                          ALL(2)
        DCBX_IEEE_P1                                True(1)
        DCBX_CEE_P1                                 True(1)
        DCBX_WILLING_P1                             True(1)
        OTHER_KEY_P1                                7
"""


@pytest.mark.parametrize("text,state", [
    ('{"host":true,"ieee":true}', {"flags": ["host", "ieee"], "owner": "host", "versions": ["ieee"],
                                   "static": False}),
    ('[{"lld_managed":true,"cee":true,"ieee":true,"static":true}]',
     {"flags": ["lld-managed", "cee", "ieee", "static"], "owner": "lld-managed", "versions": ["cee", "ieee"],
      "static": True}),
    ("host lld-managed ieee ", {"flags": ["host", "lld-managed", "ieee"], "owner": "lld-managed",
                                "versions": ["ieee"], "static": False}),
    ("ieee cee host ieee", {"flags": ["host", "cee", "ieee"], "owner": "host", "versions": ["cee", "ieee"],
                            "static": False}),
    ("", {"flags": [], "owner": "lld-managed", "versions": [], "static": False}),
])
def test_parse_every_field(text, state):
    assert dcbx.parse(text) == state


@pytest.mark.parametrize("text,message", [
    ('{"host": 1}', "unexpected key 'host' in dcb dcbx show"),
    ('{"willing": true}', "unexpected key 'willing' in dcb dcbx show"),
    ('[{"host": true}, {"ieee": true}]', "unexpected JSON from dcb dcbx show: [{'host': True}, {'ieee': True}]"),
    ("host auto", "unexpected word 'auto' in dcb dcbx show"),
])
def test_parse_refusals(text, message):
    with pytest.raises(dcbx.DcbxError) as e:
        dcbx.parse(text)
    assert str(e.value) == message


def test_parse_bad_json_says_so():
    with pytest.raises(dcbx.DcbxError) as e:
        dcbx.parse('{"host": tru')
    assert str(e.value).startswith("cannot parse the JSON of dcb dcbx show: ")


def test_host_owned_needs_ieee():
    assert dcbx.host_owned(dcbx.parse("host ieee")) is True
    assert dcbx.host_owned(dcbx.parse("host cee")) is False
    assert dcbx.host_owned(None) is False


def test_plan_of_a_rail_with_no_mode_bits():
    assert dcbx.plan("ens1np0", dcbx.parse(""), "host") == (
        [["dcb", "dcbx", "set", "dev", "ens1np0", "host", "ieee"]],
        [{"concern": "dcb", "object": "ens1np0", "key": "dcbx", "current": "none", "desired": "host ieee"}])
    assert dcbx.plan("ens1np0", None, "host") == ([], [])
    assert dcbx.plan("ens1np0", dcbx.parse("cee ieee"), "keep") == ([], [])


def _runner(result):
    calls = []

    def run(argv):
        calls.append(argv)
        if isinstance(result, Exception):
            raise result
        return result
    return run, calls


@pytest.mark.parametrize("result,expect", [
    ((0, '{"host":true,"ieee":true}', ""), ({"flags": ["host", "ieee"], "owner": "host", "versions": ["ieee"],
                                             "static": False}, None)),
    (OSError(2, "No such file or directory"), (None, "cannot run dcb: [Errno 2] No such file or directory")),
    ((1, "", " Attribute read: Operation not supported\n"),
     (None, "dcb dcbx show dev ens1np0 failed (rc=1): Attribute read: Operation not supported")),
    ((2, "out only\n", ""), (None, "dcb dcbx show dev ens1np0 failed (rc=2): out only")),
    ((2, None, None), (None, "dcb dcbx show dev ens1np0 failed (rc=2): ")),
    ((0, "host bogus", ""), (None, "unexpected word 'bogus' in dcb dcbx show")),
])
def test_read(result, expect):
    run, calls = _runner(result)
    assert dcbx.read(run, "ens1np0") == expect
    assert calls == [["dcb", "-j", "dcbx", "show", "dev", "ens1np0"]]


SETTINGS = {"LLDP_NB_DCBX_P1": "False(0)", "LLDP_NB_RX_MODE_P1": "ALL(2)", "LLDP_NB_TX_MODE_P1": "ALL(2)",
            "DCBX_IEEE_P1": "True(1)", "DCBX_CEE_P1": "True(1)", "DCBX_WILLING_P1": "True(1)"}


def test_parse_mlxconfig_keeps_the_keys_asked_for_after_the_header():
    assert dcbx.parse_mlxconfig(FW_OUT) == SETTINGS
    # before "Configurations:" nothing counts, even a line shaped like a setting
    assert dcbx.parse_mlxconfig("        DCBX_IEEE_P1     True(1)\n" + FW_OUT.split("Configurations:", maxsplit=1)[0]) == {}
    assert dcbx.parse_mlxconfig(None) == {}


@pytest.mark.parametrize("bdf,binary,result,expect", [
    (None, "/usr/bin/mlxconfig", None,
     {"status": "not_checked", "reason": "no PCI function behind the rail", "settings": None}),
    ("0000:17:00.0", None, None,
     {"status": "not_checked", "settings": None, "reason": "mlxconfig (NVIDIA MFT or mstflint) is not installed: "
                                                           "the firmware LLDP/DCBX settings could not be read"}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", OSError(13, "Permission denied"),
     {"status": "not_checked", "settings": None, "reason": "cannot run mlxconfig: [Errno 13] Permission denied"}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (3, "", "-E- Failed to open device\n"),
     {"status": "not_checked", "settings": None,
      "reason": "mlxconfig -d 0000:17:00.0 query failed (rc=3): -E- Failed to open device"}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (0, "Device #1:\n", ""),
     {"status": "not_checked", "settings": None, "reason": "mlxconfig -d 0000:17:00.0 query failed (rc=0): "
                                                           "Device #1:"}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (1, "x" * 400, None),
     {"status": "not_checked", "settings": None,
      "reason": "mlxconfig -d 0000:17:00.0 query failed (rc=1): " + "x" * 300}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (1, FW_OUT, ""),
     {"status": "not_checked", "settings": None,
      "reason": "mlxconfig -d 0000:17:00.0 query failed (rc=1): " + FW_OUT.strip()[:300]}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (2, "", None),
     {"status": "not_checked", "settings": None, "reason": "mlxconfig -d 0000:17:00.0 query failed (rc=2): no output"}),
    ("0000:17:00.0", "/usr/bin/mlxconfig", (0, FW_OUT, ""), {"status": "ok", "reason": None, "settings": SETTINGS}),
])
def test_firmware_facts(bdf, binary, result, expect):
    run, calls = _runner(result)
    assert dcbx.firmware_facts(run, lambda name: binary if name == "mlxconfig" else None, bdf) == expect
    if result is not None:
        assert calls == [["/usr/bin/mlxconfig", "-d", "0000:17:00.0", "query", "LLDP_NB_DCBX_P1",
                          "LLDP_NB_RX_MODE_P1", "LLDP_NB_TX_MODE_P1", "DCBX_IEEE_P1", "DCBX_CEE_P1",
                          "DCBX_WILLING_P1"]]


@pytest.mark.parametrize("agent,current", [
    ({"pids": [812, 90], "enabled": []}, "running (pid 812, 90)"),
    ({"pids": [], "enabled": ["/etc/systemd/system/multi-user.target.wants/lldpad.service",
                              "/etc/systemd/system/sockets.target.wants/lldpad.socket"]},
     "enabled (/etc/systemd/system/multi-user.target.wants/lldpad.service, "
     "/etc/systemd/system/sockets.target.wants/lldpad.socket)"),
    ({"pids": [7], "enabled": ["/etc/systemd/system/multi-user.target.wants/lldpad.service"]},
     "running (pid 7) and enabled (/etc/systemd/system/multi-user.target.wants/lldpad.service)"),
])
def test_lldpad_item_and_reason(agent, current):
    assert dcbx.lldpad_item(agent) == {"concern": "dcb", "object": "lldpad", "key": "lldpad", "current": current,
                                       "desired": "not running, not enabled"}
    assert dcbx.lldpad_reason(agent) == (
        "lldpad is %s: this host DCBX agent can rewrite ETS, PFC and APP behind dcb_qos, which does not stop it; "
        "stop it (systemctl disable --now lldpad.service lldpad.socket) or leave DCB to lldptool; check: "
        "systemctl status lldpad" % current)
