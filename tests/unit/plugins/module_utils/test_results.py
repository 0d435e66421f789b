# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-object results of a partial apply: shape, messages, annotation of drift items."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import results

OK = results.result("r1", "changed", changes=[results.change("pfc", [], [3])])
SAME = results.result("r2", "unchanged")
BAD = results.result("r3", "failed", "pfc set failed: busy", [results.change("dscp_prio:26", None, 3)])
BAD2 = results.result("r4", "failed", "unreadable")


def test_result_shape_is_checked():
    assert OK == {"object": "r1", "result": "changed", "error": None,
                  "changes": [{"key": "pfc", "before": [], "after": [3]}]}
    for args in (("r", "broken"), ("r", "failed"), ("r", "changed", "an error on a changed object")):
        with pytest.raises(ValueError):
            results.result(*args)


MESSAGE_CASES = [
    ("one failed among others", [OK, SAME, BAD],
     "X failed on rail(s) r3: r3: pfc set failed: busy (changed r1; unchanged r2; changed in part before failing r3)"),
    ("all failed", [BAD2, results.result("r5", "failed", "gone")],
     "X failed on rail(s) r4, r5: r4: unreadable; r5: gone"),
]


@pytest.mark.parametrize("entries,msg", [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES])
def test_failure_message_names_every_failed_object(entries, msg):
    assert results.failure_message("X", "rail(s)", entries) == msg


CHANGED_CASES = [
    ("nothing", [SAME], False),
    ("a changed object", [SAME, OK], True),
    ("a failed object that changed in part", [SAME, BAD], True),
    ("a failed object that changed nothing", [SAME, BAD2], False),
]


@pytest.mark.parametrize("entries,changed", [c[1:] for c in CHANGED_CASES], ids=[c[0] for c in CHANGED_CASES])
def test_changed(entries, changed):
    assert results.changed(entries) is changed


def test_lines_and_annotate():
    assert results.change_lines([OK, SAME, BAD]) == ["r1 pfc [] -> [3]", "r3 dscp_prio:26 unset -> 3"]
    items = [{"concern": "dcb", "object": "r3", "key": "pfc", "current": [], "desired": [3]},
             {"concern": "dcb", "object": "r1", "key": "pfc", "current": [], "desired": [3]},
             {"concern": "dcb", "object": "/etc/gpufabric/state.json", "key": "dcb", "current": "missing",
              "desired": "recorded"}]
    out = results.annotate(items, [OK, BAD])
    assert [(i.get("result"), i.get("error")) for i in out] == [
        ("failed", "pfc set failed: busy"), ("changed", None), (None, None)]
    assert "result" not in items[0]      # a copy
    by_key = results.annotate(items[:1], [results.result("r3/pfc", "unchanged")],
                              lambda i: i["object"] + "/" + i["key"])
    assert by_key[0]["result"] == "unchanged"
    assert results.from_drift("r1", items, None)["changes"] == [{"key": "pfc", "before": [], "after": [3]}]
    assert results.from_drift("r9", items)["result"] == "unchanged"
