# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcb: what its own tests left unseen (make mutation's survivors): every refusal's message word for word, every
field of a parsed object, the defaults of read_rail, the DCBX error of a rail, the re-read of a rail whose batch
answers do not parse, the apptrust probe's bounds and the diff text as rendered."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb

APP = '{"dscp_prio":[[26,3]]}'
APP_STATE = {"dscp": {26: [3]}, "pcp": {}, "other": {}, "count": 1}
PFC = '{"pfc_cap":8,"prio_pfc":[false,false,false,true,false,false,false,false]}'
PFC_STATE = {"pfc_cap": 8, "delay": None, "macsec_bypass": None, "prio_pfc": [False] * 3 + [True] + [False] * 4,
             "enabled": [3], "requests": None, "indications": None}
ETS = '{"tc_tsa":["ets","strict"],"tc_bw":[100,0],"prio_tc":[0,1]}'
ETS_STATE = {"tc_tsa": ["ets", "strict"], "tc_bw": [100, 0], "prio_tc": [0, 1], "willing": None}
DCBX = '{"host":true,"ieee":true}'
DCBX_STATE = {"flags": ["host", "ieee"], "owner": "host", "versions": ["ieee"], "static": False}
JSON_ERROR = "Expecting value: line 1 column 1 (char 0)"


class Runner(object):
    """dcb stand-in: single commands answered from ``replies`` ("app show dev r0" -> (rc, out, err), default rc 0
    and the object's good JSON), a batch (``-b FILE``) by ``batch``; records every call (a batch as its lines)."""

    GOOD = {"app": APP, "pfc": PFC, "ets": ETS, "apptrust": '{"order":["dscp"]}', "dcbx": DCBX}

    def __init__(self, replies=None, batch=None):
        self.replies = replies or {}
        self.batch = batch
        self.calls = []

    def __call__(self, argv):
        if "-b" in argv:
            with open(argv[-1]) as f:
                self.calls.append(["batch"] + f.read().splitlines())
            return self.batch
        self.calls.append(list(argv))
        words = [str(a) for a in argv[2:]]
        return self.replies.get(" ".join(words), (0, self.GOOD.get(words[0], ""), ""))


def single(obj, dev="r0"):
    return ["dcb", "-j", obj, "show", "dev", dev]


def refused(func, *args):
    with pytest.raises(dcb.DcbError) as e:
        func(*args)
    return str(e.value)


# ------------------------------------------------------------------------------------------------ parsing

@pytest.mark.parametrize("func,text,message", [
    (dcb.parse_app, "not json", "cannot parse the JSON of dcb app show: " + JSON_ERROR),
    (dcb.parse_app, "[1]", "unexpected JSON from dcb app show: [1]"),
    (dcb.parse_app, '{"dscp_prio":[[26]]}', "unexpected dscp_prio entry [26] in dcb app show"),
    (dcb.parse_app, '{"dscp_prio":[26]}', "unexpected dscp_prio entry 26 in dcb app show"),
    (dcb.parse_app, '{"ethtype_prio":[[35078]]}', "unexpected ethtype_prio entry [35078] in dcb app show"),
    (dcb.parse_app, '{"default_prio":[true]}', "unexpected default_prio entry True in dcb app show"),
    (dcb.parse_app, '{"default_prio":["x"]}', "unexpected default_prio entry 'x' in dcb app show"),
    (dcb.parse_pfc, "not json", "cannot parse the JSON of dcb pfc show: " + JSON_ERROR),
    (dcb.parse_pfc, '"pfc"', "unexpected JSON from dcb pfc show: 'pfc'"),
    (dcb.parse_pfc, ' {"pfc_cap":8}\n', "dcb pfc show printed no prio_pfc: '{\"pfc_cap\":8}'"),
    (dcb.parse_pfc, "", "dcb pfc show printed no prio_pfc: ''"),
    (dcb.parse_pfc, None, "dcb pfc show printed no prio_pfc: ''"),
    (dcb.parse_ets, "not json", "cannot parse the JSON of dcb ets show: " + JSON_ERROR),
    (dcb.parse_ets, "[]", "unexpected JSON from dcb ets show: []"),
    (dcb.parse_ets, "{}", "dcb ets show printed no tc_tsa"),
    (dcb.parse_ets, '{"tc_tsa":[]}', "dcb ets show printed no tc_bw"),
    (dcb.parse_ets, '{"tc_tsa":[],"tc_bw":[]}', "dcb ets show printed no prio_tc"),
    (dcb.parse_apptrust, "not json", "cannot parse the JSON of dcb apptrust show: " + JSON_ERROR),
    (dcb.parse_apptrust, "3", "unexpected JSON from dcb apptrust show: 3"),
    (dcb.parse_version, "  dcb, iproute2-x\n", "cannot read the iproute2 version from 'dcb, iproute2-x'"),
    (dcb.parse_version, "", "cannot read the iproute2 version from ''"),
    (dcb.parse_version, None, "cannot read the iproute2 version from ''"),
    # a wrong-shaped answer is a DcbError (read_rails and _read_each catch no other): never a traceback for all rails
    (dcb.parse_app, '{"dscp_prio":[[26,null]]}', "unexpected dscp_prio entry [26, None] in dcb app show"),
    (dcb.parse_app, '{"dscp_prio":[["x",1]]}', "unexpected dscp_prio entry ['x', 1] in dcb app show"),
    (dcb.parse_app, '{"dscp_prio":[[true,1]]}', "unexpected dscp_prio entry [True, 1] in dcb app show"),
    (dcb.parse_app, '{"ethtype_prio":[[[1],1]]}', "unexpected ethtype_prio entry [[1], 1] in dcb app show"),
    (dcb.parse_app, '{"dscp_prio":7}', "unexpected dscp_prio in dcb app show: 7"),
    (dcb.parse_pfc, '{"prio_pfc":5}', "unexpected prio_pfc in dcb pfc show: 5"),
    (dcb.parse_ets, '{"tc_tsa":[],"tc_bw":["a"],"prio_tc":[]}', "unexpected tc_bw in dcb ets show: ['a']"),
    (dcb.parse_ets, '{"tc_tsa":[],"tc_bw":[],"prio_tc":[1.5]}', "unexpected prio_tc in dcb ets show: [1.5]"),
    (dcb.parse_ets, '{"tc_tsa":3,"tc_bw":[],"prio_tc":[]}', "unexpected tc_tsa in dcb ets show: 3"),
    (dcb.parse_apptrust, '{"order":3}', "unexpected order in dcb apptrust show: 3"),
    (dcb.parse_ets, '{"tc_tsa":[],"tc_bw":3,"prio_tc":[]}', "unexpected tc_bw in dcb ets show: 3"),
    (dcb.parse_app, '{"default_prio":3}', "unexpected default_prio in dcb app show: 3"),
])
def test_parse_refusals(func, text, message):
    assert refused(func, text) == message


def test_parse_whole_objects():
    assert dcb.parse_pfc(' {"pfc_cap":8,"macsec_bypass":true,"delay":7,"prio_pfc":[0,1],"requests":[1,2],'
                         '"indications":[3,4]}\n') == {
        "pfc_cap": 8, "delay": 7, "macsec_bypass": True, "prio_pfc": [False, True], "enabled": [1],
        "requests": [1, 2], "indications": [3, 4]}
    assert dcb.parse_pfc(PFC) == PFC_STATE
    assert dcb.parse_ets('{"willing":true,"tc_tsa":["ets"],"tc_bw":["100"],"prio_tc":["0"]}') == {
        "tc_tsa": ["ets"], "tc_bw": [100], "prio_tc": [0], "willing": True}
    assert dcb.parse_ets(ETS) == ETS_STATE
    assert dcb.parse_app(APP) == APP_STATE
    assert dcb.parse_app('{"default_prio":[5,2],"pcp_prio":[["1de",4," "]],"port_prio":[[80,1]]}') == {
        "dscp": {}, "pcp": {"1de": [4]}, "count": 0,
        "other": {"port_prio": {80: [1]}, "pcp_prio": {"1de": [4]}, "default_prio": {None: [2, 5]}}}


@pytest.mark.parametrize("text,order", [
    ("{}", []), ("", []), (None, []), ('{"order":["ethtype","dscp"]}', ["ethtype", "dscp"]),
])
def test_parse_apptrust(text, order):
    assert dcb.parse_apptrust(text) == order


@pytest.mark.parametrize("apptrust,trust", [
    ([], "pcp"), (["ethtype", "stream-port"], "pcp"), (["ethtype", "dscp", "pcp"], "dscp"), (None, "dscp"),
])
def test_trust_of_an_order_without_a_trust_word_is_pcp(apptrust, trust):
    assert dcb.trust_of({"dscp": {26: [3]}}, apptrust) == trust


# ------------------------------------------------------------------------------------------------ rails

class FakeSysroot(object):
    def __init__(self, devs):
        self.paths = set("/sys/class/net/%s" % d for d in devs)

    def exists(self, path):
        return path in self.paths


@pytest.mark.parametrize("rails,message", [
    ([], "rails must list at least one network interface"),
    (None, "rails must list at least one network interface"),
    ([""], "rail '' is not a valid network interface name"),
    ([5], "rail 5 is not a valid network interface name"),
    (["r0", None], "rail None is not a valid network interface name"),
    (["a/b"], "rail 'a/b' is not a valid network interface name"),
    (["x" * 16], "rail '%s' is not a valid network interface name" % ("x" * 16)),
    (["r0", "r1", "r0"], "rails lists r0 twice"),
    (["r0", "nope1", "r1", "nope2"], "unknown rail(s) nope1, nope2: no such network interface in /sys/class/net"),
    (["nope1"], "unknown rail(s) nope1: no such network interface in /sys/class/net"),
])
def test_validate_rails_messages(rails, message):
    with pytest.raises(dcb.DcbValidationError) as e:
        dcb.validate_rails(FakeSysroot(["r0", "r1", "x" * 15]), rails)
    assert str(e.value) == message


def test_validate_rails_longest_name():
    assert dcb.validate_rails(FakeSysroot(["r0", "x" * 15]), ("x" * 15, "r0")) == ["x" * 15, "r0"]


# ------------------------------------------------------------------------------------------------ dcb -V

@pytest.mark.parametrize("reply,message", [
    ((1, "", "boom\n"), "dcb -V failed (rc=1): boom; install iproute2 >= 5.12"),
    ((2, "out\n", ""), "dcb -V failed (rc=2): out; install iproute2 >= 5.12"),
    ((1, "out", "err"), "dcb -V failed (rc=1): err; install iproute2 >= 5.12"),
    ((127, "", ""), "dcb -V failed (rc=127): ; install iproute2 >= 5.12"),
    ((0, "dcb utility, iproute2-5.11.0\n", ""), "dcb of iproute2 5.11.0 is too old: 'dcb app' needs iproute2 >= 5.12"),
    ((0, "", "dcb utility, iproute2-4.9\n"), "dcb of iproute2 4.9.0 is too old: 'dcb app' needs iproute2 >= 5.12"),
    ((0, "garbage\n", ""), "cannot read the iproute2 version from 'garbage'"),
])
def test_dcb_version_refusals(reply, message):
    with pytest.raises(dcb.DcbToolError) as e:
        dcb.dcb_version(lambda argv: reply)
    assert str(e.value) == message


def test_dcb_version_at_the_minimum():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "dcb utility, iproute2-5.12.0\n", ""
    assert dcb.dcb_version(run) == (5, 12, 0)
    assert calls == [["dcb", "-V"]]


def test_cannot_run_dcb():
    def run(argv):
        raise OSError(2, "No such file or directory")
    with pytest.raises(dcb.DcbToolError) as e:
        dcb.read_rail(run, "r0")
    assert str(e.value) == "cannot run dcb: [Errno 2] No such file or directory"


# ------------------------------------------------------------------------------------------------ apptrust probe

@pytest.mark.parametrize("driver,version,reply,supported,probed", [
    ("mlx5_core", (6, 5, 0), (0, '{"order":["pcp"]}', ""), False, False),
    ("other", (6, 1, 0), (0, '{"order":["pcp"]}', ""), False, False),
    ("other", (6, 2, 0), (0, '{"order":["pcp"]}', ""), True, True),
    ("other", (6, 2, 0), (0, "", ""), True, True),
    ("other", (6, 8, 0), (1, "", "Operation not supported\n"), False, True),
    ("other", (6, 8, 0), (0, "garbage", ""), False, True),
    ("other", (6, 8, 0), (0, "[1]", ""), False, True),
])
def test_probe_apptrust(driver, version, reply, supported, probed):
    calls = []

    def run(argv):
        calls.append(argv)
        return reply
    assert dcb.probe_apptrust(run, "r0", driver, version) is supported
    assert calls == ([single("apptrust")] if probed else [])


# ------------------------------------------------------------------------------------------------ read_rail

def test_read_rail_defaults_read_app_and_pfc_only():
    run = Runner()
    assert dcb.read_rail(run, "r0") == {"app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None,
                                        "trust": "dscp"}
    assert run.calls == [single("app"), single("pfc")]


def test_read_rail_every_object():
    run = Runner({"apptrust show dev r0": (0, '{"order":["ethtype"]}', "")})
    assert dcb.read_rail(run, "r0", with_ets=True, apptrust=True, with_dcbx=True) == {
        "app": APP_STATE, "pfc": PFC_STATE, "ets": ETS_STATE, "apptrust": ["ethtype"], "trust": "pcp",
        "dcbx": DCBX_STATE, "dcbx_error": None}
    assert run.calls == [single("app"), single("pfc"), single("ets"), single("apptrust"), single("dcbx")]


@pytest.mark.parametrize("reply,error", [
    ((1, "", "Operation not supported\n"), "dcb dcbx show dev r0 failed (rc=1): Operation not supported"),
    ((2, "partial\n", ""), "dcb dcbx show dev r0 failed (rc=2): partial"),
    ((1, "out", "err"), "dcb dcbx show dev r0 failed (rc=1): err"),
    ((255, "", ""), "dcb dcbx show dev r0 failed (rc=255): "),
    ((0, "host auto", ""), "unexpected word 'auto' in dcb dcbx show"),
    ((0, "{broken", ""), "cannot parse the JSON of dcb dcbx show: Expecting property name enclosed in double quotes: "
                         "line 1 column 2 (char 1)"),
])
def test_read_rail_dcbx_not_readable_is_no_rail_error(reply, error):
    run = Runner({"dcbx show dev r0": reply})
    assert dcb.read_rail(run, "r0", with_dcbx=True) == {
        "app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None, "trust": "dscp", "dcbx": None,
        "dcbx_error": error}
    assert run.calls == [single("app"), single("pfc"), single("dcbx")]


@pytest.mark.parametrize("reply,message", [
    ((1, "", "Operation not supported\n"), "dcb -j pfc show dev r0 failed (rc=1): Operation not supported"),
    ((2, "partial\n", ""), "dcb -j pfc show dev r0 failed (rc=2): partial"),
    ((1, "out", "err"), "dcb -j pfc show dev r0 failed (rc=1): err"),
    ((1, "", ""), "dcb -j pfc show dev r0 failed (rc=1): "),
])
def test_read_rail_failed_object(reply, message):
    run = Runner({"pfc show dev r0": reply})
    assert refused(dcb.read_rail, run, "r0", True, True, True) == message
    assert run.calls == [single("app"), single("pfc")]


# ------------------------------------------------------------------------------------------------ read_rails

def batch_of(*texts):
    return 0, ",".join(texts) + "\n", ""


def test_read_rails_without_dcbx_by_default():
    run, versions = Runner(batch=batch_of(APP, PFC)), []
    assert dcb.read_rails(run, [("r0", False, False)], lambda: versions.append(1)) == {
        "r0": {"app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None, "trust": "dscp"}}
    assert run.calls == [["batch", "app show dev r0", "pfc show dev r0"]]
    assert versions == []


def test_read_rails_rereads_a_rail_whose_answers_do_not_parse():
    # the batch answered both objects, pfc without prio_pfc: both are read again, one process each
    run, versions = Runner(batch=batch_of(APP, "{}")), []
    assert dcb.read_rails(run, [("r0", False, False, False)], lambda: versions.append(1)) == {
        "r0": {"app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None, "trust": "dscp"}}
    assert run.calls == [["batch", "app show dev r0", "pfc show dev r0"], single("app"), single("pfc")]
    assert versions == []


def test_read_rails_rereads_dcbx_with_its_own_error():
    run = Runner({"dcbx show dev r0": (1, "", "Operation not supported\n")}, batch=batch_of(APP, "{}", DCBX))
    assert dcb.read_rails(run, [("r0", False, False, True)], lambda: None)["r0"] == {
        "app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None, "trust": "dscp", "dcbx": None,
        "dcbx_error": "dcb dcbx show dev r0 failed (rc=1): Operation not supported"}
    assert run.calls[1:] == [single("app"), single("pfc"), single("dcbx")]


def test_read_rails_unanswered_dcbx_read_alone():
    # the batch stopped after app (iproute2 6.1's defect): pfc and dcbx are read one by one, app is not
    defect = (1, APP + "\n", "Attribute not found: Success\nCommand failed /tmp/x:2\n")
    run, versions = Runner({"dcbx show dev r0": (1, "", "Operation not supported\n")}, batch=defect), []
    assert dcb.read_rails(run, [("r0", False, False, True)], lambda: versions.append(1))["r0"] == {
        "app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None, "trust": "dscp", "dcbx": None,
        "dcbx_error": "dcb dcbx show dev r0 failed (rc=1): Operation not supported"}
    assert run.calls[1:] == [single("pfc"), single("dcbx")]
    assert versions == []


def test_read_rails_rereads_only_the_rail_that_did_not_parse():
    # the first rail answered whole; the second's app did not parse: only its objects are read again
    run = Runner(batch=batch_of(APP, PFC, DCBX, '{"dscp_prio":[[1]]}', PFC, DCBX))
    states = dcb.read_rails(run, [("r0", False, False, True), ("r1", False, False, True)], lambda: None)
    assert states["r0"] == states["r1"] == {"app": APP_STATE, "pfc": PFC_STATE, "ets": None, "apptrust": None,
                                            "trust": "dscp", "dcbx": DCBX_STATE, "dcbx_error": None}
    assert run.calls[1:] == [single("app", "r1"), single("pfc", "r1"), single("dcbx", "r1")]


def test_read_rails_unusable_batch_checks_the_version():
    run, versions = Runner(batch=(0, "garbage\n", "")), []
    assert dcb.read_rails(run, [("r0", False, False, False)], lambda: versions.append(1))["r0"]["trust"] == "dscp"
    assert versions == [1]
    assert run.calls[1:] == [single("app"), single("pfc")]


# ------------------------------------------------------------------------------------------------ summary, diff

def _current(apptrust):
    return {"trust": "dscp", "app": {"dscp": {26: [3], 10: [1, 2]}, "count": 3}, "pfc": {"enabled": [3]},
            "apptrust": apptrust, "ets": None}


def test_summarize_apptrust_only_where_read():
    want = {"dscp_map": {26: 3, 10: 1, 0: 0}}
    base = {"trust": "dscp", "dscp_prio": {"0": None, "10": [1, 2], "26": 3}, "dscp_entries": 3, "pfc": [3]}
    assert dcb.summarize(_current(None), want) == base
    assert dcb.summarize(_current(["dscp", "pcp"]), want) == dict(base, apptrust=["dscp", "pcp"])
    assert dcb.summarize(_current([]), want) == dict(base, apptrust=[])


def test_diff_text_whole():
    ets = {"tc_tsa": ["ets", "strict", "vendor"], "tc_bw": [60, 40, 0], "prio_tc": [0, 1, 2]}
    results = [{"rail": "r0", "before": {"trust": "dscp", "pfc": [3, 5], "dscp_prio": {"26": 3, "10": 1, "9": None},
                                         "ets": ets}},
               {"rail": "r1", "before": None},
               {"rail": "r2", "before": {"trust": "pcp", "pfc": [], "dscp_prio": {}, "ets": None}}]
    assert dcb.diff_text(results, "before") == (
        "r0 trust=dscp pfc=3,5 dscp9->None dscp10->1 dscp26->3\n"
        "r0 ets tsa=ets,strict,vendor bw=60,40,0 prio_tc=0,1,2\n"
        "r1 trust=None pfc=none \n"
        "r2 trust=pcp pfc=none \n")
    assert dcb.diff_text([], "before") == ""
