# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""acs: the pure parts of the judge exactly (make mutation's survivors): the clear names and masks with their
messages, the kernel argument, the recorded document with a failed bridge's own bits (and where they fall back to),
its groups, and what the boot-time applier reads back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import acs
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

ALL = "SrcValid, ReqRedir, CmpltRedir, UpstreamFwd, EgressCtrl"


@pytest.mark.parametrize("names,expect", [
    (None, (["ReqRedir", "CmpltRedir", "EgressCtrl"], 0x2C)),
    ("rr|cr, ec", (["ReqRedir", "CmpltRedir", "EgressCtrl"], 0x2C)),
    (["UpstreamFwd", " sv "], (["SrcValid", "UpstreamFwd"], 0x11)),
    (["EGRESSCTRL"], (["EgressCtrl"], 0x20)),
    ("UF", (["UpstreamFwd"], 0x10)),
])
def test_clear_names_and_mask(names, expect):
    assert acs.validate_clear(names) == expect


@pytest.mark.parametrize("names,message", [
    ([], "clear must name at least one ACS bit (%s)" % ALL),
    (" , |", "clear must name at least one ACS bit (%s)" % ALL),
    (["TB"], "ACS bit TransBlk is not managed by this module (it is unrelated to peer-to-peer routing between GPU "
             "and NIC); choose from %s" % ALL),
    (["directtrans"], "ACS bit DirectTrans is not managed by this module (it is unrelated to peer-to-peer routing "
                      "between GPU and NIC); choose from %s" % ALL),
    (["RR", "Bogus"], "unknown ACS bit name 'Bogus' in clear (choose from %s)" % ALL),
    (["RR", "ReqRedir"], "ACS bit ReqRedir is listed twice in clear"),
])
def test_clear_refused_with_its_message(names, message):
    with pytest.raises(acs.AcsError) as e:
        acs.validate_clear(names)
    assert str(e.value) == message


def test_small_helpers():
    assert acs.hex16(None) is None
    assert acs.hex16(0x2C) == "0x002c"
    assert acs.names_of(0x7F) == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl"]
    assert acs.names_of(0x42) == []
    assert acs.setpci_command("0000:17:00.0", 0x11) == "setpci -s 0000:17:00.0 ECAP_ACS+0x6.w=0011"


def entry(bdf, status="cleared", path=None, cap="0x005f", has_acs=True, before="0x001d", after="0x0011"):
    return {"bdf": bdf, "kernel_path": path or bdf, "status": status, "acs": has_acs, "acs_cap": cap,
            "ctrl_before": before, "ctrl_after": after}


def test_kernel_arg():
    entries = [entry("0000:17:00.0", path="0000:16:00.0/0000:17:00.0"), entry("0000:05:00.0"),
               entry("0000:06:00.0", cap="0x0013"),            # SV, TB, UF: nothing disable_acs_redir clears
               entry("0000:07:00.0", has_acs=False), dict(entry("0000:08:00.0"), kernel_path=None),
               entry("0000:05:00.0")]
    assert acs.kernel_arg(entries) == "pci=disable_acs_redir=0000:05:00.0;0000:16:00.0/0000:17:00.0"
    assert acs.kernel_arg([entry("0000:06:00.0", cap="0x0004")]) == "pci=disable_acs_redir=0000:06:00.0"
    assert acs.kernel_arg([entry("0000:06:00.0", cap="0x0013")]) is None
    assert acs.kernel_arg([]) is None


def test_persist_warnings():
    assert acs.persist_warnings(["ReqRedir", "SrcValid", "UpstreamFwd"], "kernel_cmdline") == [
        "pci=disable_acs_redir= only clears ReqRedir, CmpltRedir and EgressCtrl at boot; SrcValid, UpstreamFwd were "
        "cleared now but will be set again by the kernel at the next boot (use persist: applier to keep them clear)"]
    assert acs.persist_warnings(["ReqRedir", "CmpltRedir", "EgressCtrl"], "kernel_cmdline") == []
    assert acs.persist_warnings(["SrcValid"], "applier") == []
    assert acs.persist_warnings(["SrcValid"], "none") == [
        "persist is none: the kernel sets the ACS bits again at the next boot"]


def test_bridge_results():
    out = acs.bridge_results([entry("a", "error"), dict(entry("b", "not_written"), error=None),
                              entry("c", "cleared"), entry("d", "would_clear"),
                              entry("e", "cleared", before="0x0011"), entry("f", "ok", before="0x0011")])
    assert [(r["object"], r["result"], r["error"], r["changes"]) for r in out] == [
        ("a", "failed", "error", []), ("b", "failed", "not_written", []),
        ("c", "changed", None, [{"key": "acs_ctrl", "before": "0x001d", "after": "0x0011"}]),
        ("d", "changed", None, [{"key": "acs_ctrl", "before": "0x001d", "after": "0x0011"}]),
        ("e", "unchanged", None, []), ("f", "unchanged", None, [])]
    assert acs.bridge_results([dict(entry("g", "error"), error="cannot write")])[0]["error"] == "cannot write"


def test_diff_lines():
    assert acs.diff_lines([entry("0000:05:00.0"), entry("0000:06:00.0", has_acs=False)], "ctrl_after") == \
        "0000:05:00.0 ECAP_ACS+0x6 = 0x0011\n"


PREV = {"schema": acs.STATE_SCHEMA, "clear": ["ReqRedir"], "bridges": [
    {"bdf": "0000:20:00.0", "kernel_path": "0000:1f:00.0/0000:20:00.0"},
    {"bdf": "0000:21:00.0", "kernel_path": "0000:21:00.0", "clear": ["SrcValid"]},
    {"bdf": "0000:22:00.0", "kernel_path": "0000:22:00.0", "clear": ["ReqRedir", "CmpltRedir"]},
    {"bdf": "0000:23:00.0", "kernel_path": "0000:23:00.0"}]}


def test_state_document_keeps_each_failed_bridge_with_its_own_bits():
    entries = [entry("0000:05:00.0"), entry("0000:04:00.0", "ok"), entry("0000:06:00.0", "would_clear"),
               entry("0000:07:00.0", has_acs=False), entry("0000:08:00.0", "skipped"),
               entry("0000:30:00.0", "error", path="0000:1f:00.0/0000:20:00.0"),   # renumbered: found by path
               entry("0000:21:00.0", "not_written"), entry("0000:22:00.0", "error")]
    doc = acs.state_document(entries, ("ReqRedir", "CmpltRedir"), PREV)
    assert doc == {"schema": "gpufabric.acs/v1", "clear": ["ReqRedir", "CmpltRedir"], "bridges": [
        {"bdf": "0000:04:00.0", "kernel_path": "0000:04:00.0"},
        {"bdf": "0000:05:00.0", "kernel_path": "0000:05:00.0"},
        {"bdf": "0000:06:00.0", "kernel_path": "0000:06:00.0"},
        {"bdf": "0000:20:00.0", "kernel_path": "0000:1f:00.0/0000:20:00.0", "clear": ["ReqRedir"]},
        {"bdf": "0000:21:00.0", "kernel_path": "0000:21:00.0", "clear": ["SrcValid"]},
        {"bdf": "0000:22:00.0", "kernel_path": "0000:22:00.0"}]}


def test_state_document_failed_bridge_falls_back_to_the_default_bits():
    prev = {"schema": acs.STATE_SCHEMA, "bridges": [{"bdf": "0000:20:00.0", "kernel_path": "p"},
                                                    {"kernel_path": "q"}]}
    doc = acs.state_document([entry("0000:20:00.0", "error", path="x"), entry("0000:50:00.0", "error", path="q")],
                             ["SrcValid"], prev)
    assert doc["bridges"] == [{"bdf": "0000:20:00.0", "kernel_path": "p",
                               "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]},
                              {"bdf": None, "kernel_path": "q", "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]}]
    assert acs.state_document([], ["ReqRedir"]) == {"schema": "gpufabric.acs/v1", "clear": ["ReqRedir"],
                                                    "bridges": []}


def test_state_groups():
    assert acs.state_groups(PREV) == [
        ([{"bdf": "0000:20:00.0", "kernel_path": "0000:1f:00.0/0000:20:00.0"},
          {"bdf": "0000:23:00.0", "kernel_path": "0000:23:00.0"}], ["ReqRedir"]),
        ([{"bdf": "0000:21:00.0", "kernel_path": "0000:21:00.0"}], ["SrcValid"]),
        ([{"bdf": "0000:22:00.0", "kernel_path": "0000:22:00.0"}], ["ReqRedir", "CmpltRedir"])]
    assert acs.state_groups({"bridges": [{"bdf": "b"}]}) == [
        ([{"bdf": "b", "kernel_path": None}], ["ReqRedir", "CmpltRedir", "EgressCtrl"])]
    assert acs.state_groups({}) == []


def test_state_file_round_trip_and_refusals(tmp_path):
    root = Sysroot(str(tmp_path))
    assert acs.read_state(root) is None
    assert acs.remove_state(root) is False
    assert acs.apply_state(root) is None
    assert acs.write_state(root, PREV, check_mode=True) is True
    assert acs.read_state(root) is None
    assert acs.write_state(root, PREV) is True
    path = os.path.join(str(tmp_path), "etc/gpufabric/acs.json")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == json.dumps(PREV, indent=2, sort_keys=True) + "\n"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    assert acs.read_state(root) == PREV
    assert acs.write_state(root, PREV) is False
    assert acs.remove_state(root, check_mode=True) is True and os.path.exists(path)
    assert acs.remove_state(root) is True and not os.path.exists(path)
    for text, message in [
            ("{", "/etc/gpufabric/acs.json is not JSON: "),
            ("[]", "/etc/gpufabric/acs.json is not a gpufabric.acs/v1 document"),
            ('{"schema": "other", "bridges": []}', "/etc/gpufabric/acs.json is not a gpufabric.acs/v1 document"),
            ('{"schema": "gpufabric.acs/v1", "bridges": {}}',
             "/etc/gpufabric/acs.json is not a gpufabric.acs/v1 document")]:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        with pytest.raises(acs.AcsError) as e:
            acs.read_state(root)
        assert str(e.value).startswith(message) and (message.endswith(": ") or str(e.value) == message)


def test_state_document_edges():
    # a failed bridge without a kernel path does not keep a recorded entry that names neither
    assert acs.state_document([dict(entry("0000:20:00.0", "error"), kernel_path=None)], ["ReqRedir"],
                              {"bridges": [{}]})["bridges"] == []
    # an entry without a BDF sorts before every BDF, domain ffff's too
    prev = {"bridges": [{"kernel_path": "q"}, {"bdf": "ffff:00:00.0", "kernel_path": "r"}]}
    doc = acs.state_document([entry("0000:01:00.0", "error", path="q"), entry("ffff:00:00.0", "error", path="r")],
                             ["ReqRedir", "CmpltRedir", "EgressCtrl"], prev)
    assert [b["kernel_path"] for b in doc["bridges"]] == ["q", "r"]


def test_diff_lines_of_several_bridges():
    assert acs.diff_lines([entry("0000:05:00.0"), entry("0000:06:00.0", after="0x0000")], "ctrl_after") == \
        "0000:05:00.0 ECAP_ACS+0x6 = 0x0011\n0000:06:00.0 ECAP_ACS+0x6 = 0x0000\n"
