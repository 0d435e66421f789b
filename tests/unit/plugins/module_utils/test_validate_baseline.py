# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Baselines per hardware profile: the profile key, the store's round trip and the judgement of a run against the
fleet median and the node's own last good run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.validate import baseline as B

GPU, NIC = "0000:19:00.0", "0000:1a:00.0"
FACTS = {
    "kernel_release": "6.8.0-60-generic",
    "gpus": [{"bdf": GPU, "model": "H200 SXM", "device": "0x2335"}],
    "nics": [{"bdf": NIC, "vendor": "0x15b3", "device": "0x1021", "rdma": True},
             {"bdf": "0000:c1:00.0", "vendor": "0x8086", "device": "0x1593", "rdma": False}],
    "nvswitches": [{"bdf": "0000:05:00.0"}] * 4,
    "pairing": [{"gpu": GPU, "nic": NIC, "relation": "PIX"}],
    "pcie_links": [{"device": GPU, "max_speed": 32.0, "max_width": 16, "current_speed": 2.5},
                   {"device": NIC, "max_speed": 32.0, "max_width": 16, "current_speed": 32.0}],
    "gpu_driver": {"flavour": "open", "version": "570.133.20"},
    "gpudirect_rdma": {"dmabuf": {"rdma_core": "50.0"}},
}
VERSIONS = {"nic_firmware": "28.43.1014", "nccl_version": "2.30.7"}
METRIC = "nccl.all_reduce.busbw"
GB = 1e9


def _prof(facts=None, versions=None):
    return B.profile(facts if facts is not None else FACTS, versions=versions if versions is not None else VERSIONS)


def test_profile_fields():
    p = _prof()
    assert {k: p[k] for k in B.FIELDS if k != "topology_hash"} == {
        "gpu_model": "H200 SXM", "nic_model": "0x15b3:0x1021", "nic_firmware": "28.43.1014",
        "pcie_gpu": "Gen5 x16", "pcie_nic": "Gen5 x16", "driver_flavour": "open", "driver_version": "570.133.20",
        "kernel": "6.8.0-60-generic", "nccl_version": "2.30.7", "rdma_core": "50.0"}
    assert p["incomplete"] == []
    assert len(p["key"]) == 16 and p["key"] == _prof()["key"]
    assert B.profile({}, versions={})["incomplete"] == [k for k in B.FIELDS if k != "topology_hash"]
    # the facts give rdma-core's release as a number (discovery/gpudirect.py): the profile keeps it as a string
    assert B.profile(_changed(("gpudirect_rdma", "dmabuf", "rdma_core"), 50), versions={})["rdma_core"] == "50"


def _changed(path, value):
    f = copy.deepcopy(FACTS)
    obj = f
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value
    return f


@pytest.mark.parametrize("facts,versions,same", [
    (_changed(("kernel_release",), "6.8.0-61-generic"), VERSIONS, False),
    (_changed(("gpu_driver", "version"), "575.51.03"), VERSIONS, False),
    (FACTS, dict(VERSIONS, nccl_version="2.28.9"), False),
    (FACTS, dict(VERSIONS, nic_firmware="28.44.1036"), False),
    (_changed(("pairing",), [{"gpu": GPU, "nic": NIC, "relation": "SYS"}]), VERSIONS, False),
    # a link that trained down keeps its profile (its capability did not change): it is judged as a regression
    (_changed(("pcie_links", 1, "current_speed"), 16.0), VERSIONS, True),
    # another slot generation is another profile
    (_changed(("pcie_links", 1, "max_speed"), 16.0), VERSIONS, False),
    # a NIC without RDMA does not enter the topology
    (_changed(("nics", 1, "device"), "0x159b"), VERSIONS, True),
])
def test_what_changes_the_profile(facts, versions, same):
    assert (_prof(facts, versions)["key"] == _prof()["key"]) is same


def test_a_control_character_in_a_version_is_refused():
    with pytest.raises(B.BaselineError, match="nic_firmware"):
        _prof(versions=dict(VERSIONS, nic_firmware="28.43\n1014"))


def test_store_round_trip(tmp_path):
    store = B.Store(str(tmp_path / "baselines"))
    p = _prof()
    assert store.load(p["key"]) is None and store.keys() == []
    doc = B.new_doc(p)
    B.record(doc, "gpu-a01", METRIC, 38.4 * GB, {"status": "not_checked"}, at="2026-12-01T10:00:00Z")
    store.save(doc)
    assert store.keys() == [p["key"]]
    assert store.load(p["key"]) == doc
    text = (tmp_path / "baselines" / (p["key"] + ".json")).read_text()
    assert text.endswith("}\n") and json.loads(text)["schema"] == B.SCHEMA
    assert os.listdir(str(tmp_path / "baselines")) == [p["key"] + ".json"]   # no temp file left


@pytest.mark.parametrize("edit,error", [
    (lambda d: d.update(schema=2), "schema 2 is not 1"),
    (lambda d: d.update(key="0123456789abcdef"), "does not match its file"),
    (lambda d: d.update(runs={}), "lacks its profile or runs"),
    (lambda d: d["runs"].append({"node": "a", "metric": METRIC, "value": -1, "good": True}), "non-negative"),
    (lambda d: d["runs"].append({"node": "a", "metric": METRIC, "value": float("nan"), "good": True}),
     "non-negative"),
    (lambda d: d["runs"].append({"node": "a b", "metric": METRIC, "value": 1, "good": True}), "host name"),
    (lambda d: d["runs"].append({"node": "a", "metric": METRIC, "value": 1}), "good flag"),
])
def test_a_broken_file_is_refused(tmp_path, edit, error):
    store = B.Store(str(tmp_path))
    p = _prof()
    doc = B.new_doc(p)
    edit(doc)
    (tmp_path / (p["key"] + ".json")).write_text(json.dumps(doc))
    with pytest.raises(B.BaselineError, match=error):
        store.load(p["key"])


@pytest.mark.parametrize("directory,key,error", [
    ("relative/dir", None, "absolute path"),
    ("/tmp", "../etc/passwd", "16 hex digits"),
])
def test_store_paths_are_checked(directory, key, error):
    with pytest.raises(B.BaselineError, match=error):
        B.Store(directory).path(key)


# --- judging: (history of (node, value GB/s, good)), this run, tolerance -> status, reason fragments ---------------

@pytest.mark.parametrize("history,node,value,tol,status,fragments", [
    # a new profile starts its baseline: never a pass
    ([], "gpu-a01", 38.4, 0.1, "not_checked", ["not judged: new profile", "starts its baseline"]),
    # a second run within tolerance
    ([("gpu-a01", 38.4, True)], "gpu-a01", 37.9, 0.1, "ok",
     ["within 10 % of the fleet median 38.40 GB/s (1 node(s)) and the node's last good run 38.40 GB/s"]),
    # 30 % slower on the same profile: drift naming both numbers
    ([("gpu-a01", 38.4, True)], "gpu-a01", 26.88, 0.1, "drift",
     ["26.88 GB/s is 30 % below the fleet median 38.40 GB/s", "and 30 % below the node's last good run 38.40 GB/s",
      "tolerance 10 %"]),
    # the fleet median of the nodes' last good runs; the node itself is new to the profile
    ([("gpu-a01", 38.0, True), ("gpu-a02", 40.0, True), ("gpu-a03", 36.0, True), ("gpu-a01", 38.4, True)],
     "gpu-a09", 37.0, 0.1, "ok", ["fleet median 38.40 GB/s (3 node(s))"]),
    # fine against the fleet, but 25 % below its own last good run
    ([("gpu-a01", 30.0, True), ("gpu-a02", 30.0, True), ("gpu-a03", 40.0, True)], "gpu-a03", 30.0, 0.1, "drift",
     ["25 % below the node's last good run 40.00 GB/s"]),
    # a drifted run never becomes a reference
    ([("gpu-a01", 38.4, True), ("gpu-a01", 10.0, False)], "gpu-a01", 37.0, 0.1, "ok",
     ["node's last good run 38.40 GB/s"]),
    # a wider tolerance lets the 30 % drop through
    ([("gpu-a01", 38.4, True)], "gpu-a01", 26.88, 0.35, "ok", ["within 35 %"]),
    # a profile that only has drifted runs has no baseline yet
    ([("gpu-a01", 10.0, False)], "gpu-a01", 38.0, 0.1, "not_checked", ["no good run of %s yet" % METRIC]),
])
def test_judge(history, node, value, tol, status, fragments):
    doc = B.new_doc(_prof())
    for i, (n, v, good) in enumerate(history):
        B.record(doc, n, METRIC, v * GB, {"status": "ok" if good else "drift"}, at="2026-12-0%dT00:00:00Z" % (i + 1))
    st = B.judge(doc, node, METRIC, value * GB, tol)
    assert st["status"] == status
    for f in fragments:
        assert f in st["reason"]
    assert st["baseline"]["profile"] == doc["key"]
    if status == "drift":
        (item,) = st["items"]
        assert (item["concern"], item["object"], item["key"], item["current"]) == ("performance", node, METRIC,
                                                                                   value * GB)


def test_evaluate_round_trips_through_the_store(tmp_path):
    """Run 1 on a new profile starts the baseline; run 2 within tolerance is ok; run 3, 30 % slower, drifts and is
    kept out of the references; a node on a new driver starts a new profile."""
    store = B.Store(str(tmp_path))
    p = _prof()
    seq = [(38.4, "not_checked"), (38.0, "ok"), (26.88, "drift"), (38.1, "ok")]
    for i, (v, want) in enumerate(seq):
        st = B.evaluate(store, p, "gpu-a01", METRIC, v * GB, 0.1, at="2026-12-0%dT00:00:00Z" % (i + 1))
        assert st["status"] == want, st["reason"]
    doc = store.load(p["key"])
    runs = [(r["value"] / GB, r["good"]) for r in doc["runs"]]
    assert runs == [(38.4, True), (38.0, True), (26.88, False), (38.1, True)]
    new = _prof(_changed(("gpu_driver", "version"), "575.51.03"))
    st = B.evaluate(store, new, "gpu-a01", METRIC, 20 * GB, 0.1)
    assert st["status"] == "not_checked" and "new profile %s" % new["key"] in st["reason"]
    assert store.keys() == sorted([p["key"], new["key"]])


def test_runs_are_bounded_per_node_and_metric():
    doc = B.new_doc(_prof())
    for i in range(B.KEEP + 5):
        B.record(doc, "gpu-a01", METRIC, (30 + i) * GB, {"status": "ok"})
    B.record(doc, "gpu-a02", METRIC, 1 * GB, {"status": "ok"})
    mine = [r["value"] / GB for r in doc["runs"] if r["node"] == "gpu-a01"]
    assert len(mine) == B.KEEP and mine[0] == 35 and len(doc["runs"]) == B.KEEP + 1


@pytest.mark.parametrize("tol", [-0.1, 1, True, "0.1"])
def test_tolerance_is_a_fraction(tol):
    with pytest.raises(B.BaselineError, match="tolerance"):
        B.judge(B.new_doc(_prof()), "gpu-a01", METRIC, 1.0, tol)
