# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcb.apply_dcb: what its own tests left unseen (make mutation's survivors): the DCBX takeover (run, failed, read
again), every per-rail result field word for word (check mode's prediction, read-back failures, what changed), the
``changed`` of a rail whose read-back failed, the default sysroot and the batch file of run_batch."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ETS = {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
       "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]}
ETS_VENDOR = {"tc_tsa": ["vendor"] * 8, "tc_bw": [100] + [0] * 7, "prio_tc": [0] * 8}
NOT_SUPPORTED = "dcb -j pfc show dev r0 failed (rc=1): Operation not supported"


class Node(object):
    """A scripted ``dcb``: per rail its DSCP table, enabled PFC priorities, DCBX flags, ETS and apptrust order.
    Writes change that state; ``hook(node, argv)`` may answer a write first; ``broken`` (object, rail) fail."""

    def __init__(self, rails, dscp=None, pfc=(3,), dcbx="cee ieee", apptrust=None, hook=None):
        self.state = dict((r, {"dscp": dict({26: 3} if dscp is None else dscp), "pfc": list(pfc), "dcbx": dcbx,
                               "ets": dict(ETS_VENDOR), "apptrust": apptrust}) for r in rails)
        self.calls, self.broken, self.hook = [], set(), hook

    def show(self, obj, dev):
        if (obj, dev) in self.broken:
            return None
        st = self.state[dev]
        return json.dumps({
            "app": lambda: {"dscp_prio": [[d, p] for d, p in sorted(st["dscp"].items())]},
            "pfc": lambda: {"pfc_cap": 8, "prio_pfc": [p in st["pfc"] for p in range(8)]},
            "dcbx": lambda: dict((w.replace("-", "_"), True) for w in st["dcbx"].split()),
            "ets": lambda: st["ets"], "apptrust": lambda: {"order": st["apptrust"]}}[obj]())

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv == ["dcb", "-V"]:
            return 0, "dcb utility, iproute2-6.5.0\n", ""
        if argv[1:3] == ["-j", "-b"]:
            with open(argv[3]) as f:
                texts = [self.show(line.split()[0], line.split()[3]) for line in f.read().splitlines()]
            if None in texts:
                return 1, "", "Operation not supported\nCommand failed %s:1\n" % argv[3]
            return 0, ",".join(texts) + "\n", ""
        if argv[1] == "-j":
            text = self.show(argv[2], argv[5])
            return (1, "", "Operation not supported\n") if text is None else (0, text, "")
        reply = self.hook(self, argv) if self.hook else None
        if reply is not None:
            return reply
        st = self.state[argv[4]]
        if argv[1:3] == ["dcbx", "set"]:
            st["dcbx"] = " ".join(argv[5:])
        elif argv[1:3] == ["pfc", "set"]:
            st["pfc"] = [int(a.split(":")[0]) for a in argv[7:] if a.endswith(":on")]
        elif argv[1:3] == ["app", "add"]:
            st["dscp"].update(tuple(int(v) for v in a.split(":")) for a in argv[6:])
        elif argv[1:3] == ["apptrust", "set"]:
            st["apptrust"] = argv[6:]
        return 0, "", ""


def sysroot(tmp_path, rails, driver="mlx5_core"):
    for r in rails:
        dev = tmp_path / "sys" / "class" / "net" / r
        (dev / "device").mkdir(parents=True)
        drv = tmp_path / "sys" / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        os.symlink(str(drv), str(dev / "device" / "driver"))
    return Sysroot(str(tmp_path))


def summary(trust="dscp", dscp=3, entries=1, pfc=(3,), dcbx="host ieee", **extra):
    """A rail's before/after view; entries None: check mode's prediction (no dscp_entries)."""
    out = dict({"trust": trust, "dscp_prio": {"26": dscp} if dscp != {} else {}, "pfc": list(pfc), "dcbx": dcbx},
               **extra)
    if entries is not None:
        out["dscp_entries"] = entries
    return out


def rail(name, before, after, commands=(), changes=(), error=None, result="changed", changed=True,
         dcbx_error=None, driver="mlx5_core", apptrust=False):
    return {"rail": name, "driver": driver, "apptrust_supported": apptrust, "before": before, "after": after,
            "dcbx_error": dcbx_error, "commands": list(commands), "changes": list(changes), "error": error,
            "result": result, "changed": changed}


def ch(key, before, after):
    return {"key": key, "before": before, "after": after}


def dcbx_set(r):
    return ["dcb", "dcbx", "set", "dev", r, "host", "ieee"]


def pfc_set(r):
    return ["dcb", "pfc", "set", "dev", r, "prio-pfc", "all:off", "3:on"]


def writes(node):
    return [c for c in node.calls if c[1] != "-j" and c != ["dcb", "-V"]]


# ------------------------------------------------------------------------------------------------
# check mode: the prediction, the takeover planned but not run
# ------------------------------------------------------------------------------------------------

CHECK_CASES = [
    ("takeover, remap and pfc", {}, dict(dscp={26: 5}, pfc=()), rail(
        "r0", summary(dscp=5, pfc=(), dcbx="cee ieee"), summary(entries=None),
        [dcbx_set("r0"), ["dcb", "app", "add", "dev", "r0", "dscp-prio", "26:3"], pfc_set("r0")],
        [ch("dcbx", "cee ieee", "host ieee"), ch("dscp_prio:26", 5, 3), ch("pfc", [], [3])])),
    ("host owned, to pcp trust", {"trust": "pcp"}, dict(dcbx="host cee ieee"), rail(
        "r0", dict(summary(dcbx="host cee ieee"), dscp_prio={}),
        summary(trust="pcp", dscp={}, entries=None, dcbx="host cee ieee"),
        [["dcb", "app", "flush", "dev", "r0", "dscp-prio"]], [ch("trust", "dscp", "pcp")])),
    ("dcbx kept, ets", {"dcbx": "keep", "ets": ETS}, dict(pfc=()), rail(
        "r0", summary(pfc=(), dcbx=None, ets=ETS_VENDOR), summary(entries=None, dcbx=None, ets=ETS),
        [pfc_set("r0"), ["dcb", "ets", "set", "dev", "r0", "tc-tsa", "0:ets", "1:strict", "2:strict", "3:ets",
                         "4:strict", "5:strict", "6:strict", "7:strict", "tc-bw", "0:50", "1:0", "2:0", "3:50",
                         "4:0", "5:0", "6:0", "7:0", "prio-tc", "0:0", "1:1", "2:2", "3:3", "4:4", "5:5", "6:6",
                         "7:7"]],
        [ch("pfc", [], [3]), ch("ets", ETS_VENDOR, ETS)])),
    ("nothing to do", {}, dict(dcbx="host ieee"), rail(
        "r0", summary(), summary(), result="unchanged", changed=False)),
]


@pytest.mark.parametrize("case", CHECK_CASES, ids=[c[0] for c in CHECK_CASES])
def test_check_mode_rail_result(tmp_path, case):
    _id, desired, node_args, expected = case
    node = Node(["r0"], **node_args)
    res = dcb.apply_dcb(node, ["r0"], desired, True, sysroot=sysroot(tmp_path, ["r0"]))
    assert res["rails"] == [expected]
    assert res["commands"] == expected["commands"] and res["changed"] is expected["changed"]
    assert writes(node) == [] and len(node.calls) == 1


APPTRUST_CASES = [
    # PCP -> DSCP trust: the predicted order is the wanted trust alone
    ("trust changes", dict(dscp={}, apptrust=["pcp"]), summary(trust="pcp", dscp=None, entries=0, apptrust=["pcp"]),
     summary(entries=None, apptrust=["dscp"]),
     [["dcb", "app", "add", "dev", "eth9", "dscp-prio", "26:3"],
      ["dcb", "apptrust", "set", "dev", "eth9", "order", "dscp"]],
     [ch("trust", "pcp", "dscp"), ch("dscp_prio:26", None, 3)]),
    # trust already right: the order is left as it is, even when it lists more than the trust
    ("trust kept", dict(pfc=(), apptrust=["dscp", "pcp"]), summary(pfc=(), apptrust=["dscp", "pcp"]),
     summary(entries=None, apptrust=["dscp", "pcp"]), [pfc_set("eth9")], [ch("pfc", [], [3])]),
]


@pytest.mark.parametrize("case", APPTRUST_CASES, ids=[c[0] for c in APPTRUST_CASES])
def test_check_mode_predicts_apptrust(tmp_path, case):
    _id, node_args, before, after, commands, changes = case
    node = Node(["eth9"], dcbx="host ieee", **node_args)
    res = dcb.apply_dcb(node, ["eth9"], {}, True, sysroot=sysroot(tmp_path, ["eth9"], driver="other_drv"))
    assert res["rails"] == [rail("eth9", before, after, commands, changes, driver="other_drv", apptrust=True)]
    assert res["dcb_version"] == "6.5.0"


def test_check_mode_unreadable_dcbx_is_no_rail_error(tmp_path):
    node = Node(["r0"], pfc=())
    node.broken.add(("dcbx", "r0"))
    res = dcb.apply_dcb(node, ["r0"], {}, True, sysroot=sysroot(tmp_path, ["r0"]))
    assert res["rails"] == [rail("r0", summary(pfc=(), dcbx=None), summary(entries=None, dcbx=None), [pfc_set("r0")],
                                 [ch("pfc", [], [3])],
                                 dcbx_error="dcb dcbx show dev r0 failed (rc=1): Operation not supported")]


def test_unreadable_rail_then_a_good_one(tmp_path):
    node = Node(["r0", "r1"])
    node.broken.add(("pfc", "r0"))
    res = dcb.apply_dcb(node, ["r0", "r1"], {}, True, sysroot=sysroot(tmp_path, ["r0", "r1"]))
    error = "reading the DCB state of rail r0 failed: " + NOT_SUPPORTED
    assert res["rails"] == [
        rail("r0", None, None, error=error, result="failed", changed=False),
        rail("r1", summary(dcbx="cee ieee"), summary(entries=None), [dcbx_set("r1")],
             [ch("dcbx", "cee ieee", "host ieee")])]
    assert res["errors"] == [error] and res["commands"] == [dcbx_set("r1")]


def test_default_sysroot_from_environment(tmp_path, monkeypatch):
    sysroot(tmp_path, ["r0"])
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(tmp_path))
    node = Node(["r0"], dcbx="host ieee")
    res = dcb.apply_dcb(node, ["r0"], {}, True)
    assert res["rails"] == [rail("r0", summary(), summary(), result="unchanged", changed=False)]


# ------------------------------------------------------------------------------------------------
# applying: takeover, read again, read back
# ------------------------------------------------------------------------------------------------

def handover_drops_pfc(node, argv):
    """The firmware hands DCB over with PFC off: the plan after the takeover must see it."""
    if argv[1:3] == ["dcbx", "set"]:
        node.state[argv[4]]["pfc"] = []
    return None


def test_takeover_then_planned_from_the_state_read_again(tmp_path):
    node = Node(["r0"], hook=handover_drops_pfc)
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    assert res["rails"] == [rail("r0", summary(dcbx="cee ieee"), summary(), [dcbx_set("r0"), pfc_set("r0")],
                                 [ch("dcbx", "cee ieee", "host ieee"), ch("pfc", [], [3])])]
    assert res["commands"] == [dcbx_set("r0"), pfc_set("r0")]
    assert [c[:3] for c in node.calls] == [["dcb", "-j", "-b"], dcbx_set("r0")[:3], ["dcb", "-j", "-b"],
                                           pfc_set("r0")[:3], ["dcb", "-j", "-b"]]
    assert res["dcb_version"] is None and res["changed"] is True


def test_compliant_rail_after_is_before(tmp_path):
    node = Node(["r0"], dcbx="host ieee")
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    assert res["rails"] == [rail("r0", summary(), summary(), result="unchanged", changed=False)]
    assert len(node.calls) == 1


def test_dcbx_kept_reads_back_without_mode(tmp_path):
    node = Node(["r0"], pfc=())
    res = dcb.apply_dcb(node, ["r0"], {"dcbx": "keep"}, False, sysroot=sysroot(tmp_path, ["r0"]))
    assert res["rails"] == [rail("r0", summary(pfc=(), dcbx=None), summary(dcbx=None), [pfc_set("r0")],
                                 [ch("pfc", [], [3])])]
    assert node.state["r0"]["dcbx"] == "cee ieee"


def lying(_node, _argv):
    return 0, "", ""


def test_nothing_reads_back_as_set(tmp_path):
    node = Node(["r0"], pfc=(), hook=lying)
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    error = ("rail r0 does not read back as configured after dcb dcbx set dev r0 host ieee; "
             "dcb pfc set dev r0 prio-pfc all:off 3:on: dcbx is 'cee ieee', wanted 'host ieee', pfc is [], wanted [3]")
    before = summary(pfc=(), dcbx="cee ieee")
    assert res["rails"] == [rail("r0", before, before, [dcbx_set("r0"), pfc_set("r0")], error=error,
                                 result="failed", changed=False)]


# (rc, out, err, the tail of the message)
FAILURES = [
    (1, "", "Attribute write: Operation not supported\n", "Attribute write: Operation not supported"),
    (2, "busy\n", "", "busy"),
    (1, "", "", ""),
]


@pytest.mark.parametrize("rc,out,err,tail", FAILURES)
def test_failed_takeover_fails_that_rail_only(tmp_path, rc, out, err, tail):
    def hook(_node, argv):
        return (rc, out, err) if argv[4] == "r0" else None
    node = Node(["r0", "r1"], hook=hook)
    res = dcb.apply_dcb(node, ["r0", "r1"], {}, False, sysroot=sysroot(tmp_path, ["r0", "r1"]))
    error = "dcb dcbx set dev r0 host ieee failed on rail r0 (rc=%s): %s" % (rc, tail)
    assert res["rails"] == [
        rail("r0", summary(dcbx="cee ieee"), summary(dcbx="cee ieee"), [dcbx_set("r0")], error=error,
             result="failed", changed=False),
        rail("r1", summary(dcbx="cee ieee"), summary(), [dcbx_set("r1")], [ch("dcbx", "cee ieee", "host ieee")])]
    assert res["commands"] == [dcbx_set("r0"), dcbx_set("r1")] and res["errors"] == [error]


def test_read_again_after_takeover_fails(tmp_path):
    def hook(node, argv):
        node.broken.add(("pfc", argv[4]))
    node = Node(["r0"], hook=hook)
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    error = "reading the DCB state of rail r0 failed: after taking DCB over: " + NOT_SUPPORTED
    # the takeover worked and nothing could be read back: the rail may have changed, and says so
    assert res["rails"] == [rail("r0", summary(dcbx="cee ieee"), None, [dcbx_set("r0")], error=error,
                                 result="failed", changed=True)]
    assert res["dcb_version"] == "6.5.0" and res["changed"] is True


def test_failed_takeover_and_unreadable_after(tmp_path):
    def hook(node, argv):
        node.broken.add(("pfc", argv[4]))
        return 1, "", "Attribute write: Operation not supported\n"
    node = Node(["r0"], hook=hook)
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    error = "dcb dcbx set dev r0 host ieee failed on rail r0 (rc=1): Attribute write: Operation not supported"
    # nothing worked on the rail: not changed, even though it could not be read back
    assert res["rails"] == [rail("r0", summary(dcbx="cee ieee"), None, [dcbx_set("r0")], error=error,
                                 result="failed", changed=False)]
    assert res["changed"] is False


def test_read_back_fails_on_one_rail(tmp_path):
    def hook(node, argv):
        if argv[4] == "r0":
            node.broken.add(("pfc", "r0"))
    node = Node(["r0", "r1"], pfc=(), dcbx="host ieee", hook=hook)
    res = dcb.apply_dcb(node, ["r0", "r1"], {}, False, sysroot=sysroot(tmp_path, ["r0", "r1"]))
    error = "reading rail r0 back failed: " + NOT_SUPPORTED
    before = summary(pfc=())
    assert res["rails"] == [
        rail("r0", before, None, [pfc_set("r0")], error=error, result="failed", changed=True),
        rail("r1", before, summary(), [pfc_set("r1")], [ch("pfc", [], [3])])]


@pytest.mark.parametrize("rc,out,err,tail", FAILURES)
def test_failed_command_and_unreadable_after(tmp_path, rc, out, err, tail):
    def hook(node, argv):
        node.broken.add(("pfc", argv[4]))
        return rc, out, err
    node = Node(["r0"], pfc=(), dcbx="host ieee", hook=hook)
    res = dcb.apply_dcb(node, ["r0"], {}, False, sysroot=sysroot(tmp_path, ["r0"]))
    # the first error stays; nothing worked on the rail: not changed
    error = "dcb pfc set dev r0 prio-pfc all:off 3:on failed on rail r0 (rc=%s): %s" % (rc, tail)
    assert res["rails"] == [rail("r0", summary(pfc=()), None, [pfc_set("r0")], error=error, result="failed",
                                 changed=False)]


# ------------------------------------------------------------------------------------------------
# run_batch: the batch file, and output that cannot be trusted
# ------------------------------------------------------------------------------------------------

def test_run_batch_file_and_answers():
    node = Node(["r0"], dcbx="host ieee")
    assert dcb.run_batch(node, [("dcbx", "r0"), ("pfc", "r0")]) == (
        ['{"host": true, "ieee": true}', '{"pfc_cap": 8, "prio_pfc": [false, false, false, true, false, false, '
         'false, false]}'], True)
    path = node.calls[0][3]
    assert node.calls == [["dcb", "-j", "-b", path]]
    assert os.path.dirname(path) == tempfile.gettempdir()
    name = os.path.basename(path)
    assert name.startswith("gpufabric-dcb-") and name.endswith(".batch") and len(name) > len("gpufabric-dcb-.batch")
    assert not os.path.exists(path)


@pytest.mark.parametrize("reply", [
    (0, "garbage\n", ""),
    (0, "{}\n", ""),
    (1, "", "Operation not supported\nCommand failed /tmp/x:1\n"),
    (1, '{"dscp_prio":[]}\n', "Operation not supported\nCommand failed /tmp/x:2\n"),
])
def test_run_batch_untrusted_output(reply):
    assert dcb.run_batch(lambda argv: reply, [("app", "r0"), ("pfc", "r0")]) == ([], False)
