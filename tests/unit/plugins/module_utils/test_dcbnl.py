# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcbnl.py: the rails' DCB read over rtnetlink gives what ``dcb -j`` gives.

The replies are the kernel's own: tests/fixtures/dcbnl/bookworm-6.1-dcbtest.json was recorded in the VM lab
(Debian 6.1 kernel, the dcbtest dcbnl driver, iproute2 6.1's dcb; tests/lab/vm/dcbnl_record.py) and holds, for each
DCB state, the datagrams of the kernel's answer beside ``dcb -j OBJ show`` of the same state. Selectors the lab's
driver does not take (ethertype, ports, PCP, a trust table) are built by ``encode``, which first has to rebuild the
recorded replies byte for byte."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import json
import os
import socket
import struct

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils.check import qos_facts
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl, dcbx
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fixtures", "dcbnl", "bookworm-6.1-dcbtest.json"))
with open(RECORDING) as _f:
    REC = json.load(_f)
PARSE = {"ets": dcb.parse_ets, "pfc": dcb.parse_pfc, "app": dcb.parse_app, "apptrust": dcb.parse_apptrust,
         "dcbx": dcbx.parse}
CASES = [(s["step"], rail, r) for s in REC["steps"] for rail, r in sorted(s["rails"].items())]


def unhex(datagrams):
    return [binascii.unhexlify(d) for d in datagrams]


class FakeSocket(object):
    """Answers each request with the next list of datagrams (the sequence number rewritten to the request's)."""

    def __init__(self, answers, keep_seq=False):
        self.answers = list(answers)
        self.sent = []
        self.queue = []
        self.closed = False
        self.keep_seq = keep_seq

    def send(self, data):
        self.sent.append(data)
        seq = struct.unpack_from("=I", data, 8)[0]
        for dg in (self.answers.pop(0) if self.answers else []):
            dg = bytearray(dg)
            if not self.keep_seq:
                off = 0
                while off + 16 <= len(dg):
                    struct.pack_into("=I", dg, off + 8, seq)
                    off += (struct.unpack_from("=I", dg, off)[0] + 3) & ~3
            self.queue.append(bytes(dg))
        return len(data)

    def recv(self, size):
        if not self.queue:
            raise socket.timeout("timed out")
        return self.queue.pop(0)

    def close(self):
        self.closed = True


def kernel_of(*answers, **kw):
    sock = FakeSocket(answers, **kw)
    return dcbnl.KernelDcb(connect=lambda: sock), sock


# ----------------------------------------------------------------------------------------------
# the recorded kernel against the recorded dcb


@pytest.mark.parametrize("step,rail,rec", [c for c in CASES if not c[2]["ieee_get"]["error"]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_recorded_reply_reads_as_dcb_printed_it(step, rail, rec):
    kernel, sock = kernel_of(unhex(rec["ieee_get"]["datagrams"]))
    got = kernel.answers([(obj, rail) for obj in PARSE])
    for obj, parse in PARSE.items():
        out = rec["dcb"][obj]
        if out["rc"] == 0:
            assert got[(obj, rail)] == dcbnl.Parsed(parse(out["out"])), obj
        else:   # dcb failed on it (apptrust: the driver has no trust table, this dcb no such object): not answered
            assert (obj, rail) not in got
    assert len(sock.sent) == 1 and sock.closed   # DCBX came with the IEEE reply: no second request


def test_recording_is_not_vacuous():
    """The recording covers a rail in PCP trust with the driver's defaults and one in DSCP trust with PFC and ETS."""
    first = REC["steps"][0]["rails"]["dcb0"]["dcb"]
    last = REC["steps"][-1]["rails"]["dcb0"]["dcb"]
    assert REC["kernel"].startswith("6.1.") and "iproute2-6.1" in REC["dcb_version"]
    assert dcb.parse_app(first["app"]["out"])["count"] == 0
    app = dcb.parse_app(last["app"]["out"])
    assert app["count"] == 64 and app["dscp"][26] == [3]
    assert dcb.parse_pfc(last["pfc"]["out"])["enabled"] == [3]
    assert dcb.parse_ets(last["ets"]["out"])["tc_tsa"][7] == "strict"


@pytest.mark.parametrize("step,rail,rec", [c for c in CASES if not c[2]["gdcbx"]["error"]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_recorded_gdcbx_answers_dcbx_where_the_ieee_reply_has_none(step, rail, rec):
    ieee = [m for d in unhex(rec["ieee_get"]["datagrams"]) for m in dcbnl.messages(d) if m[0] == dcbnl.RTM_GETDCB]
    attrs = dcbnl.reply_attributes(ieee[0][3])
    del attrs[dcbnl.DCB_ATTR_DCBX]   # a kernel before 3.2 (dcbnl.py's table)
    gdcbx = [m for d in unhex(rec["gdcbx"]["datagrams"]) for m in dcbnl.messages(d) if m[0] == dcbnl.RTM_GETDCB]
    got = dcbnl.rail_objects(attrs, dcbnl.reply_attributes(gdcbx[0][3]))
    assert got["dcbx"] == dcbnl.Parsed(dcbx.parse(rec["dcb"]["dcbx"]["out"]))


@pytest.mark.parametrize("rail,code", [("lo", errno.EOPNOTSUPP), ("nosuchdev0", errno.ENODEV)])
def test_recorded_refusals_are_left_to_dcb_and_the_next_rail_is_asked(rail, code):
    step = REC["steps"][-1]["rails"]
    refused = unhex(step[rail]["ieee_get"]["datagrams"])
    kernel, sock = kernel_of(refused, unhex(step["dcb0"]["ieee_get"]["datagrams"]))
    got = kernel.answers([("app", rail), ("pfc", rail), ("app", "dcb0")])
    assert set(got) == {("app", "dcb0")}
    assert str(os.strerror(code)) in kernel.errors[rail]
    assert len(sock.sent) == 2


def test_recorded_refusal_codes():
    step = REC["steps"][0]["rails"]
    assert step["lo"]["ieee_get"]["error"]["errno"] == errno.EOPNOTSUPP
    assert step["nosuchdev0"]["ieee_get"]["error"]["errno"] == errno.ENODEV


# ----------------------------------------------------------------------------------------------
# an encoder of the kernel's reply (net/dcb/dcbnl.c dcbnl_ieee_fill), held to the recording


def _attr(kind, payload):
    pad = (4 - len(payload) % 4) % 4
    return struct.pack("=HH", 4 + len(payload), kind) + payload + b"\0" * pad


def encode(ifname, ets=None, pfc=None, apps=(), trust=None, dcbx_byte=None, seq=1, pid=436, flags=5):
    ieee = b""
    if ets is not None:
        ieee += _attr(dcbnl.DCB_ATTR_IEEE_ETS, ets)
    if pfc is not None:
        ieee += _attr(dcbnl.DCB_ATTR_IEEE_PFC, pfc)
    ieee += _attr(dcbnl.DCB_ATTR_IEEE_APP_TABLE, b"".join(
        _attr(kind, struct.pack("@BBH", sel, prio, proto)) for kind, sel, prio, proto in apps))
    if trust is not None:
        ieee += _attr(dcbnl.DCB_ATTR_DCB_APP_TRUST_TABLE, b"".join(_attr(k, struct.pack("B", s)) for k, s in trust))
    body = struct.pack("=BBH", 0, dcbnl.DCB_CMD_IEEE_GET, 0) + _attr(dcbnl.DCB_ATTR_IFNAME, ifname.encode() + b"\0")
    body += _attr(dcbnl.DCB_ATTR_IEEE, ieee)
    if dcbx_byte is not None:
        body += _attr(dcbnl.DCB_ATTR_DCBX, struct.pack("B", dcbx_byte))
    msg = struct.pack("=IHHII", 16 + len(body), dcbnl.RTM_GETDCB, flags, seq, pid) + body
    # the ACK echoes the request's header (NLM_F_CAPPED: without its payload)
    ack = struct.pack("=IHHII", 36, dcbnl.NLMSG_ERROR, 256, seq, pid) + struct.pack("=i", 0) + \
        dcbnl.request(dcbnl.DCB_CMD_IEEE_GET, ifname, seq)[:16]
    return [msg, ack]


def decode(datagram):
    """The encoder's arguments back from a recorded reply."""
    kind, _flags, seq, payload = dcbnl.messages(datagram)[0]
    assert kind == dcbnl.RTM_GETDCB
    top = dcbnl.reply_attributes(payload)
    ieee = dict(dcbnl.attributes(top[dcbnl.DCB_ATTR_IEEE]))
    apps = [(k,) + struct.unpack("@BBH", d) for k, d in dcbnl.attributes(ieee[dcbnl.DCB_ATTR_IEEE_APP_TABLE])]
    return dict(ifname=top[dcbnl.DCB_ATTR_IFNAME][:-1].decode(), ets=ieee.get(dcbnl.DCB_ATTR_IEEE_ETS),
                pfc=ieee.get(dcbnl.DCB_ATTR_IEEE_PFC), apps=apps, dcbx_byte=bytearray(top[dcbnl.DCB_ATTR_DCBX])[0],
                seq=seq, pid=struct.unpack_from("=I", datagram, 12)[0])


@pytest.mark.parametrize("step,rail,rec", [c for c in CASES if not c[2]["ieee_get"]["error"]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_encoder_rebuilds_the_recorded_reply_byte_for_byte(step, rail, rec):
    recorded = unhex(rec["ieee_get"]["datagrams"])
    assert encode(**decode(recorded[0])) == recorded


IEEE, DCBAPP = dcbnl.DCB_ATTR_IEEE_APP, dcbnl.DCB_ATTR_DCB_APP
ETS = struct.pack("@BBB8s8s8s8s8s8s8s", 1, 8, 0, bytes([50, 50, 0, 0, 0, 0, 0, 0]), b"\0" * 8,
                  bytes([2, 2, 0, 0, 0, 0, 0, 7]), bytes([0, 0, 0, 1, 0, 0, 0, 0]), b"\0" * 8, b"\0" * 8, b"\0" * 8)
PFC = struct.pack("@BBBH8Q8Q", 8, 0x28, 1, 52, *([0] * 16))


def test_every_selector_reads_as_dcb_prints_it():
    """dcb/dcb_app.c: ethtype with protocol 0 is default-prio, PCP 0-15 by name ("3nd", "3de"), above by number;
    entries under the wrong attribute type are skipped as dcb skips them."""
    apps = [(IEEE, 5, 3, 26), (IEEE, 5, 5, 26), (IEEE, 1, 4, 0x8906), (IEEE, 1, 2, 0), (IEEE, 2, 6, 4791),
            (IEEE, 3, 3, 4791), (IEEE, 4, 1, 80), (DCBAPP, 255, 3, 3), (DCBAPP, 255, 4, 11), (DCBAPP, 255, 7, 40),
            (IEEE, 255, 2, 1), (DCBAPP, 5, 2, 10), (IEEE, 9, 1, 1)]
    kernel, _sock = kernel_of(encode("eth9", ETS, PFC, apps, trust=[(IEEE, 5), (DCBAPP, 255), (IEEE, 255)],
                                     dcbx_byte=0x0d))
    got = kernel.answers([(o, "eth9") for o in PARSE])
    json_text = {"dscp_prio": [[26, 3], [26, 5]], "ethtype_prio": [[0x8906, 4]], "default_prio": [2],
                 "stream_port_prio": [[4791, 6]], "dgram_port_prio": [[4791, 3]], "port_prio": [[80, 1]],
                 "pcp_prio": [["3nd", 3], ["3de", 4], [40, 7]]}
    assert got[("app", "eth9")].value == dcb.parse_app(json.dumps(json_text))
    assert got[("apptrust", "eth9")].value == ["dscp", "pcp"]
    assert dcb.trust_of(got[("app", "eth9")].value, got[("apptrust", "eth9")].value) == "dscp"
    assert got[("ets", "eth9")].value == dcb.parse_ets(json.dumps(
        {"willing": True, "tc_bw": [50, 50, 0, 0, 0, 0, 0, 0], "tc_tsa": ["ets", "ets"] + ["strict"] * 5 + [7],
         "prio_tc": [0, 0, 0, 1, 0, 0, 0, 0]}))
    assert got[("pfc", "eth9")].value == dcb.parse_pfc(json.dumps(
        {"pfc_cap": 8, "macsec_bypass": True, "delay": 52, "prio_pfc": [False, False, False, True, False, True,
                                                                        False, False]}))
    assert got[("dcbx", "eth9")].value == dcbx.parse('{"host":true,"cee":true,"ieee":true}')


def test_a_wrong_sized_struct_is_left_to_dcb():
    kernel, _sock = kernel_of(encode("eth9", ETS[:-1], PFC + b"\0\0\0\0", [], dcbx_byte=None))
    got = kernel.answers([(o, "eth9") for o in ("ets", "pfc", "app", "dcbx")])
    assert set(got) == {("app", "eth9")}   # no DCBX in the reply and GDCBX timed out: left to dcb too


# ----------------------------------------------------------------------------------------------
# the conversation


def test_request_is_dcbs_request():
    data = dcbnl.request(dcbnl.DCB_CMD_IEEE_GET, "ens1np0", 7)
    length, kind, flags, seq, pid = struct.unpack_from("=IHHII", data)
    assert (length, kind, flags, seq, pid) == (len(data), 78, dcbnl.NLM_F_REQUEST | dcbnl.NLM_F_ACK, 7, 0)
    assert data[16:20] == struct.pack("=BBH", 0, 21, 0)
    assert dcbnl.attributes(data, 20) == [(dcbnl.DCB_ATTR_IFNAME, b"ens1np0\0")]
    assert len(data) % 4 == 0


@pytest.mark.parametrize("name", ["", "a" * 16, "a/b", "a\0b", u"\u00e9th0", "eth\n0"])
def test_request_refuses_what_is_no_interface_name(name):
    with pytest.raises((dcbnl.DcbnlError, UnicodeError)):
        dcbnl.request(dcbnl.DCB_CMD_IEEE_GET, name, 1)


def test_stale_answers_are_never_taken_for_this_requests():
    """What an earlier request left in the socket (iproute2 6.1's batch defect) has another sequence number."""
    reply = unhex(REC["steps"][-1]["rails"]["dcb0"]["ieee_get"]["datagrams"])
    stale = encode("dcb0", ETS, PFC, [], dcbx_byte=1, seq=999)
    sock = FakeSocket([], keep_seq=True)
    sock.queue = stale + reply   # recorded with seq 1
    got = dcbnl.talk(sock, dcbnl.DCB_CMD_IEEE_GET, "dcb0", 1)
    assert len(dict(dcbnl.attributes(got[dcbnl.DCB_ATTR_IEEE]))[dcbnl.DCB_ATTR_IEEE_APP_TABLE]) == 64 * 8


def test_ack_without_answer_and_silence_are_errors():
    ack_only = encode("dcb0")[1:]
    with pytest.raises(dcbnl.DcbnlError, match="without an answer"):
        dcbnl.talk(FakeSocket([ack_only]), dcbnl.DCB_CMD_IEEE_GET, "dcb0", 1)
    with pytest.raises(dcbnl.DcbnlError, match="no answer") as e:
        dcbnl.talk(FakeSocket([[]]), dcbnl.DCB_CMD_IEEE_GET, "dcb0", 1)
    assert e.value.errno is None


def test_endless_unrelated_datagrams_are_bounded():
    noise = encode("dcb0", seq=5)[:1]
    sock = FakeSocket([noise * (dcbnl.MAX_DATAGRAMS + 4)], keep_seq=True)
    with pytest.raises(dcbnl.DcbnlError, match="no acknowledgement"):
        dcbnl.talk(sock, dcbnl.DCB_CMD_IEEE_GET, "dcb0", 1)


def test_a_silent_kernel_stops_the_read_and_leaves_the_rest_to_dcb():
    kernel, sock = kernel_of([], [])
    assert kernel.answers([("app", "a0"), ("app", "b0")]) == {}
    assert len(sock.sent) == 1 and sock.closed and "no answer" in kernel.errors["a0"]


def test_no_socket_answers_nothing():
    def refuse():
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
    kernel = dcbnl.KernelDcb(connect=refuse)
    assert kernel.answers([("app", "a0")]) == {}
    assert "no rtnetlink socket" in kernel.errors["a0"]


def test_each_read_asks_again():
    """apply_dcb reads, changes, reads back: the second read is the kernel's new answer, not the first one."""
    steps = REC["steps"]
    kernel, sock = kernel_of(unhex(steps[0]["rails"]["dcb0"]["ieee_get"]["datagrams"]),
                             unhex(steps[1]["rails"]["dcb0"]["ieee_get"]["datagrams"]))
    assert kernel.answers([("app", "dcb0")])[("app", "dcb0")].value["count"] == 0
    assert kernel.answers([("app", "dcb0")])[("app", "dcb0")].value["count"] == 64


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_any_datagram_reads_or_fails_as_dcbnl_error(data):
    try:
        for kind, _f, _s, payload in dcbnl.messages(data):
            if kind == dcbnl.RTM_GETDCB:
                dcbnl.rail_objects(dcbnl.reply_attributes(payload))
    except dcbnl.DcbnlError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([IEEE, DCBAPP, 0, 7]), st.integers(0, 255), st.integers(0, 255),
                          st.integers(0, 65535)), max_size=12))
def test_any_app_table_reads_as_dcb_json_would(apps):
    kernel, _sock = kernel_of(encode("eth9", apps=apps))
    got = kernel.answers([("app", "eth9")])[("app", "eth9")].value
    assert got["count"] == sum(1 for k, s, _p, _q in apps if k == IEEE and s == 5)
    assert dcb.parse_app(json.dumps(got_as_json(apps))) == got


def got_as_json(apps):
    """``dcb -j app show`` of these entries, as dcb/dcb_app.c prints it (by position, iproute2 < 6.5)."""
    keys = {2: "stream_port_prio", 3: "dgram_port_prio", 4: "port_prio"}
    out = {}
    for kind, sel, prio, proto in apps:
        if kind == IEEE and sel == 5:
            out.setdefault("dscp_prio", []).append([proto, prio])
        elif kind == IEEE and sel == 1:
            if proto:
                out.setdefault("ethtype_prio", []).append([proto, prio])
            else:
                out.setdefault("default_prio", []).append(prio)
        elif kind == IEEE and sel in keys:
            out.setdefault(keys[sel], []).append([proto, prio])
        elif kind == DCBAPP and sel == 255:
            name = ("%d%s" % (proto % 8, "nd" if proto < 8 else "de")) if proto < 16 else proto
            out.setdefault("pcp_prio", []).append([name, prio])
    return out


# ----------------------------------------------------------------------------------------------
# where the kernel is asked


def test_only_the_running_hosts_root_asks_the_kernel(tmp_path):
    assert isinstance(dcbnl.for_sysroot(Sysroot("/")), dcbnl.KernelDcb)
    assert dcbnl.for_sysroot(Sysroot(str(tmp_path))) is None


def test_read_rails_sends_dcb_only_what_the_kernel_did_not_answer():
    rec = REC["steps"][-1]["rails"]
    dcb0, lo = unhex(rec["dcb0"]["ieee_get"]["datagrams"]), unhex(rec["lo"]["ieee_get"]["datagrams"])
    # both rails together; lo fails, so read_each reads each rail again on its own: the kernel is asked again
    kernel, _sock = kernel_of(dcb0, lo, dcb0, lo)
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[1:3] == ["-j", "-b"]:
            with open(argv[3]) as f:
                assert f.read() == "app show dev lo\npfc show dev lo\n"
            return 1, "", "Attribute read: Operation not supported\nCommand failed %s:1\n" % argv[3]
        if argv[1:] == ["-V"]:
            return 0, "dcb utility, iproute2-6.1.0\n", ""
        return 1, "", "Attribute read: Operation not supported\n"
    states, errors = dcb.read_each(run, [("dcb0", True, False, True), ("lo", False, False, False)],
                                   lambda: dcb.dcb_version(run), kernel=kernel)
    assert states["dcb0"]["app"]["dscp"][26] == [3] and states["dcb0"]["dcbx"]["owner"] == "host"
    assert states["dcb0"]["ets"]["tc_tsa"][7] == "strict"
    assert "lo" in errors and "Operation not supported" in errors["lo"]
    assert not any("dcb0" in a for c in calls for a in c)


def test_read_rails_runs_no_process_when_the_kernel_answers_all():
    rec = REC["steps"][1]["rails"]
    kernel, _sock = kernel_of(*[unhex(rec[r]["ieee_get"]["datagrams"]) for r in ("dcb0", "dcb1")])

    def run(argv):
        raise AssertionError("ran %s" % argv)
    states = dcb.read_rails(run, [("dcb0", True, False, True), ("dcb1", True, False, True)], run, kernel=kernel)
    assert states["dcb0"]["trust"] == "dscp" and states["dcb1"]["trust"] == "pcp"
    assert states == dict((r, dcb.read_rail(recorded_dcb(rec[r]), r, True, False, True)) for r in ("dcb0", "dcb1"))


def recorded_dcb(rail_rec):
    def run(argv):
        out = rail_rec["dcb"][argv[2]]
        return out["rc"], out["out"], out["err"]
    return run


def test_probe_apptrust_asks_the_kernel():
    rec = REC["steps"][0]["rails"]["dcb0"]["ieee_get"]["datagrams"]
    kernel, _sock = kernel_of(unhex(rec), encode("eth9", trust=[(IEEE, 5)]))

    def run(argv):
        raise AssertionError("ran %s" % argv)
    assert dcb.probe_apptrust(run, "dcb0", "dcbtest", (6, 5, 0), kernel) is False
    assert dcb.probe_apptrust(run, "eth9", "sparx5-switch", (6, 5, 0), kernel) is True
    assert dcb.probe_apptrust(run, "eth9", "sparx5-switch", (6, 1, 0), kernel) is False   # this dcb cannot set it


def test_discovery_reads_dcbx_from_the_kernel(monkeypatch):
    rec = REC["steps"][-1]["rails"]
    kernel, _sock = kernel_of(unhex(rec["dcb0"]["ieee_get"]["datagrams"]), unhex(rec["lo"]["ieee_get"]["datagrams"]))
    monkeypatch.setattr(dcbnl, "for_sysroot", lambda sysroot: kernel)
    ran = []

    def run(argv):
        ran.append(argv)
        return 1, "", "Attribute read: Operation not supported\n"
    rails = [{"netdev": "dcb0", "kind": "pf"}, {"netdev": "lo", "kind": "pf"}]
    qos_facts.annotate(Sysroot("/nonexistent"), rails, run, lambda name: "/usr/sbin/" + name if name == "dcb" else None)
    assert rails[0]["dcbx"] == dict(dcbx.parse(rec["dcb0"]["dcb"]["dcbx"]["out"]), error=None)
    assert rails[1]["dcbx"]["error"].startswith("dcb dcbx show dev lo failed")
    assert [a[1:] for a in ran] == [["-j", "dcbx", "show", "dev", "lo"]]
