# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge of a node's validation suite (validate/judge.py): the baseline round trip through it, a second run
within the tolerance, a run 30 % slower, a new profile, the path checks, the negative tests and the canary's
comparison with the run before an upgrade."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.validate import baseline as B
from ansible_collections.gpufabric.node.plugins.module_utils.validate import judge as J
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths
from ansible_collections.gpufabric.node.plugins.module_utils.report import validate_md

GB = 1e9
KEY, KEY2 = "0123456789abcdef", "fedcba9876543210"


def _verdict(state, fallback=None, bw=None):
    return paths.verdict("nccl", state, "%s%s" % (state, " (%s)" % fallback if fallback else ""), fallback,
                         ["evidence of %s" % state], bw)


def _run(rid, bw, state=paths.DIRECT, fallback=None, expect=paths.DIRECT, status="ok", test="nccl",
         variant=None, cpu=None, reason=""):
    return {"id": rid, "test": test, "variant": variant or rid.split(".")[-1], "expect": expect, "status": status,
            "reason": reason, "tool": "all_reduce_perf", "command": ["all_reduce_perf"], "env": {}, "rc": 0,
            "metric": rid + ".busbw" if bw is not None else None, "bandwidth": bw, "cpu_s": cpu, "wall_s": 10.0,
            "verdict": _verdict(state, fallback, bw) if status == "ok" else None, "counters": {}}


def _doc(runs, node="gpu-a01", key=KEY, at="2026-12-01T10:00:00Z"):
    return {"schema": 1, "node": node, "at": at, "profile": {"key": key, "gpu_model": "H200 SXM"},
            "profile_key": key, "versions": {}, "runs": runs}


def _configured(bw=38.4 * GB, **kw):
    return _run("nccl.configured", bw, **kw)


@pytest.fixture
def store(tmp_path):
    return B.Store(str(tmp_path / "baselines"))


def _seed(store, nodes=("gpu-a02", "gpu-a03"), bw=38.4 * GB):
    """The fleet's earlier runs of the same profile."""
    for n in nodes:
        J.judge_node(_doc([_configured(bw)], node=n), store)


def test_store_round_trip_and_new_profile_is_not_judged(store):
    j = J.judge_node(_doc([_configured()]), store)
    assert j["status"]["status"] == C.NOT_CHECKED
    assert "not judged: new profile %s" % KEY in j["status"]["reason"] and "38.40 GB/s" in j["status"]["reason"]
    with open(os.path.join(store.directory, KEY + ".json")) as f:
        saved = json.load(f)
    assert saved == store.load(KEY)
    assert [(r["node"], r["metric"], r["value"], r["good"], r["at"]) for r in saved["runs"]] == [
        ("gpu-a01", "nccl.configured.busbw", 38.4 * GB, True, "2026-12-01T10:00:00Z")]
    assert j["recorded"] == [KEY]


@pytest.mark.parametrize("bw, want, words", [
    (37.9 * GB, C.OK, ["within 10 %", "38.40 GB/s"]),
    (38.4 * GB * 0.7, C.DRIFT, ["26.88 GB/s", "30 % below the fleet median 38.40 GB/s",
                                "30 % below the node's last good run 38.40 GB/s"]),
])
def test_second_run_against_the_profile(store, bw, want, words):
    _seed(store, nodes=("gpu-a01", "gpu-a02", "gpu-a03"))
    j = J.judge_node(_doc([_configured(bw)], at="2026-12-02T10:00:00Z"), store)
    assert j["status"]["status"] == want
    for w in words:
        assert w in j["status"]["reason"]
    last = store.load(KEY)["runs"][-1]
    assert (last["value"], last["good"]) == (bw, want == C.OK)
    if want == C.DRIFT:
        assert [i["key"] for i in j["status"]["items"]] == ["nccl.configured.busbw"]


def test_another_profile_starts_its_own_baseline(store):
    _seed(store)
    j = J.judge_node(_doc([_configured(10 * GB)], key=KEY2), store)
    assert j["status"]["status"] == C.NOT_CHECKED and "new profile %s" % KEY2 in j["status"]["reason"]
    assert sorted(store.keys()) == sorted([KEY, KEY2])


def test_check_mode_writes_nothing(store):
    J.judge_node(_doc([_configured()]), store, record=False)
    assert store.keys() == []


@pytest.mark.parametrize("state, fallback, want, words", [
    (paths.FALLBACK, paths.NO_GDR, C.DRIFT, ["expected the direct path and took fallback: no gdr"]),
    (paths.NOT_EXERCISED, None, C.NOT_CHECKED, ["did not exercise the direct path: not_exercised"]),
    (paths.UNKNOWN, None, C.NOT_CHECKED, ["cannot tell which path"]),
])
def test_fast_but_off_the_path_is_not_a_pass(store, state, fallback, want, words):
    _seed(store)
    j = J.judge_node(_doc([_configured(state=state, fallback=fallback)]), store)
    assert j["status"]["status"] == want
    for w in words:
        assert w in j["status"]["reason"]
    mine = [r for r in store.load(KEY)["runs"] if r["node"] == "gpu-a01"]
    # a fallen-back run is kept but never a reference; a run that proved no path is not recorded
    assert [r["good"] for r in mine] == ([False] if state == paths.FALLBACK else [])


@pytest.mark.parametrize("status, want", [("not_checked", C.NOT_CHECKED), ("error", C.ERROR)])
def test_a_run_that_did_not_happen(store, status, want):
    j = J.judge_node(_doc([_configured(status=status, reason="all_reduce_perf not found: install nccl-tests")]),
                     store)
    assert j["status"]["status"] == want and "install nccl-tests" in j["status"]["reason"]
    assert store.keys() == []


GDR_LOC = dict(state=paths.FALLBACK, fallback=paths.NO_GDR, expect=paths.FALLBACK)
SOCKET = dict(state=paths.FALLBACK, fallback=paths.SOCKET, expect=paths.FALLBACK)


@pytest.mark.parametrize("forced, want, words", [
    # flips and drops: a pass
    (_run("nccl.gdr_loc", 20 * GB, **GDR_LOC), C.OK, ["flipped to fallback: no gdr", "52 %"]),
    (_run("nccl.socket", 5 * GB, **SOCKET), C.OK, ["flipped to fallback: socket"]),
    # does not flip: the fallback would not be seen
    (_run("nccl.gdr_loc", 20 * GB, expect=paths.FALLBACK), C.DRIFT,
     ["its verdict says direct", "would not be seen"]),
    # flips but the bandwidth does not drop as the topology implies
    (_run("nccl.gdr_loc", 37 * GB, **GDR_LOC), C.DRIFT, ["37.00 GB/s against 38.40 GB/s", "faster by more than"]),
    (_run("nccl.socket", 25 * GB, **SOCKET), C.DRIFT, ["at most half"]),
    # the forced run did not run
    (_run("nccl.socket", None, status="not_checked", expect=paths.FALLBACK, reason="no IPoIB address"),
     C.NOT_CHECKED, ["did not run (no IPoIB address)"]),
])
def test_negative_tests(store, forced, want, words):
    j = J.judge_node(_doc([_configured(), forced]), store)
    (neg,) = j["negative"]
    assert (neg["id"], neg["counterpart"], neg["status"]) == (forced["id"], "nccl.configured", want)
    assert neg["why"] == J.NEGATIVE[("nccl", forced["variant"])][3]
    for w in words:
        assert w in neg["reason"]
    if want == C.DRIFT:
        assert j["status"]["status"] == C.DRIFT


def test_negative_test_without_its_counterpart(store):
    j = J.judge_node(_doc([_run("nccl.gdr_loc", 20 * GB, **GDR_LOC)]), store)
    assert j["negative"][0]["status"] == C.NOT_CHECKED and "counterpart did not run" in j["negative"][0]["reason"]


@pytest.mark.parametrize("runs, want, words", [
    # per pair: the forced id names its counterpart
    ([_run("perftest.mlx5_0.local_nic", 45 * GB, test="perftest"),
      _run("perftest.mlx5_1.local_nic", 45 * GB, test="perftest"),
      _run("perftest.mlx5_0.remote_nic", 30 * GB, test="perftest")], C.OK, ["stayed direct"]),
    ([_run("perftest.mlx5_0.local_nic", 45 * GB, test="perftest"),
      dict(_run("perftest.mlx5_0.remote_nic", 44 * GB, test="perftest"), relation="SYS")], C.DRIFT,
     ["faster by more than the tolerance"]),
    ([_run("perftest.mlx5_0.local_nic", 45 * GB, test="perftest"),
      dict(_run("perftest.mlx5_0.remote_nic", 44 * GB, test="perftest"), relation="NODE")], C.OK,
     ["no drop implied"]),
    # kvikio's posix API against cufile, and the cuFile program's compat mode on a node without nvidia-fs
    ([_run("gds.gds_direct", 4.2 * GB, test="gds"),
      _run("gds.host_memory", 7 * GB, test="gds", state=paths.FALLBACK, fallback=paths.HOST_MEMORY,
           expect=paths.FALLBACK)], C.OK, ["flipped to fallback: host memory"]),
    ([_run("gds.compat_on", 2 * GB, test="gds", state=paths.FALLBACK, fallback=paths.HOST_MEMORY,
           expect=paths.FALLBACK),
      _run("gds.compat_off", None, test="gds", state=paths.NOT_EXERCISED)], C.NOT_CHECKED,
     ["nothing to flip from"]),
    # host memory on the same NIC: no drop implied, the GPU leg must keep up
    ([_run("perftest.mlx5_0.local_nic", 45 * GB, test="perftest"),
      _run("perftest.mlx5_0.host_memory", 46 * GB, test="perftest", state=paths.FALLBACK,
           fallback=paths.HOST_MEMORY, expect=paths.FALLBACK)], C.OK, ["flipped to fallback: host memory"]),
    ([_run("perftest.mlx5_0.local_nic", 20 * GB, test="perftest"),
      _run("perftest.mlx5_0.host_memory", 46 * GB, test="perftest", state=paths.FALLBACK,
           fallback=paths.HOST_MEMORY, expect=paths.FALLBACK)], C.DRIFT, ["must reach the forced run's"]),
    # GDS: seed 000's host path was faster; only the flip is judged
    ([_run("gds.gds_direct", 4.2 * GB, test="gds"),
      _run("gds.host_buffer", 7 * GB, test="gds", state=paths.FALLBACK, fallback=paths.HOST_MEMORY,
           expect=paths.FALLBACK)], C.OK, ["only the flip", "7.00 GB/s against 4.20 GB/s"]),
    ([_run("gds.gds_direct", 4.2 * GB, test="gds"),
      _run("gds.host_buffer", 7 * GB, test="gds", expect=paths.FALLBACK)], C.DRIFT, ["would not be seen"]),
])
def test_negative_tests_per_topology(store, runs, want, words):
    j = J.judge_node(_doc(runs), store)
    (neg,) = j["negative"]
    assert neg["status"] == want, neg
    for w in words:
        assert w in neg["reason"]
    assert neg["counterpart"].rsplit(".", 1)[0] == neg["id"].rsplit(".", 1)[0]


def test_compat_mode_allowed_with_nvidia_fs_is_a_direct_run(store):
    """The cuFile program's compat_on run expects the direct path where nvidia-fs is loaded: no negative test."""
    j = J.judge_node(_doc([_run("gds.compat_on", 3 * GB, test="gds"), _run("gds.compat_off", 3 * GB, test="gds")]),
                     store)
    assert j["negative"] == [] and [r["path"] for r in j["runs"]] == [C.OK, C.OK]


BEFORE = _doc([_configured(cpu=12.0), _run("nccl_intra.configured", 300 * GB, test="nccl_intra")],
              at="2026-12-01T09:00:00Z")


def _after(**changes):
    doc = copy.deepcopy(BEFORE)
    doc["at"] = "2026-12-01T10:00:00Z"
    doc["profile"]["key"] = doc["profile_key"] = KEY2      # the new kernel: a new profile
    for rid, run in changes.items():
        doc["runs"] = [run if r["id"] == rid else r for r in doc["runs"]]
    return doc


@pytest.mark.parametrize("after, want, words", [
    (_after(), C.OK, ["2 run(s) as fast as before"]),
    (_after(**{"nccl.configured": _configured(35 * GB, cpu=12.5)}), C.OK, []),
    (_after(**{"nccl.configured": _configured(10 * GB, cpu=12.0)}), C.DRIFT,
     ["10.00 GB/s is 74 % below its earlier run 38.40 GB/s"]),
    (_after(**{"nccl.configured": _configured(38 * GB, cpu=30.0, state=paths.FALLBACK, fallback=paths.NO_GDR)}),
     C.DRIFT, ["took the direct path before and fallback: no gdr now", "30.0 s of host CPU against 12.0 s"]),
    (_after(**{"nccl.configured": _configured(38 * GB, state=paths.NOT_EXERCISED)}), C.DRIFT,
     ["not exercised now"]),
    (_after(**{"nccl.configured": _configured(status="error", reason="rc 1")}), C.DRIFT, ["nccl.configured ran before (direct) and fails now: rc 1"]),
    (_after(**{"nccl.configured": _configured(status="not_checked", reason="missing")}), C.NOT_CHECKED,
     ["ran before"]),
])
def test_canary_against_its_own_earlier_run(store, after, want, words):
    j = J.judge_node(after, store, earlier=BEFORE)
    assert j["canary"]["status"] == want, j["canary"]
    for w in words:
        assert w in j["canary"]["reason"]
    if want == C.DRIFT:   # (a run that fails now is also the concern's error)
        assert j["status"]["status"] in (C.DRIFT, C.ERROR)
        # a regressed canary's runs never become the new profile's references
        assert not [r for r in (store.load(KEY2) or {"runs": []})["runs"] if r["good"]]
    else:   # the new kernel's profile has no baseline yet: never a pass
        assert j["status"]["status"] == C.NOT_CHECKED


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.update(schema=2), "schema 2"),
    (lambda d: d["runs"].append(dict(d["runs"][0])), "appears twice"),
    (lambda d: d["runs"][0].update(expect="maybe"), "expect 'maybe'"),
    (lambda d: d["runs"][0].update(bandwidth=float("nan")), "not a non-negative number"),
    (lambda d: d["runs"][0].update(id="a\nb"), "without an id"),
    (lambda d: d["runs"][0].update(verdict={"state": "fast"}), "no state"),
])
def test_bad_documents_are_refused_naming_the_field(store, mutate, words):
    doc = _doc([_configured()])
    mutate(doc)
    with pytest.raises(J.JudgeError, match=words):
        J.judge_node(doc, store)


def test_report_lists_failures_and_not_judged(store):
    _seed(store, nodes=("gpu-a01", "gpu-a02", "gpu-a03"))
    judged = {"gpu-a01": J.judge_node(_doc([_configured(20 * GB)]), store),
              "gpu-b01": J.judge_node(_doc([_configured()], node="gpu-b01", key=KEY2), store),
              "gpu-c01": J.missing("gpu-c01")}
    doc = J.report(judged, "2026-12-01T10:00:00Z", 0.1, store.directory)
    assert (doc["failed"], doc["not_judged"]) == (["gpu-a01"], ["gpu-b01", "gpu-c01"])
    md = validate_md.to_markdown(doc)
    assert "**Regressed or failed: gpu-a01.**" in md and "## gpu-a01: drift" in md
    assert "| nccl.configured | direct | direct | 20.00 GB/s |" in md


def test_a_run_with_its_own_profile_is_judged_on_it(store):
    """A run may carry the profile of its GPU<->NIC pair: its baseline is that profile's file."""
    pair = dict(_run("perftest.gpu0.local_nic", 45 * GB, test="perftest"), profile={"key": KEY2})
    j = J.judge_node(_doc([_configured(), pair]), store)
    assert j["recorded"] == sorted([KEY, KEY2])
    assert [r["metric"] for r in store.load(KEY2)["runs"]] == ["perftest.gpu0.local_nic.busbw"]
    assert [r["baseline"]["profile"] for r in j["runs"]] == [KEY, KEY2]
