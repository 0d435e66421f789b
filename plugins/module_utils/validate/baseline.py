# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Baselines per hardware profile: a measured bandwidth is judged against runs of the same profile, never against a
fixed threshold or the fastest result ever.

A **profile** (``profile(facts, pair=None, versions=None)``) is what a bandwidth depends on: the GPU model, the NIC
model (PCI vendor:device) and firmware, the PCIe generation and width the pair's links can train to, the GPU driver
flavour and version, the kernel, the NCCL and rdma-core versions, and a hash of the node's topology (GPUs, NICs,
NVSwitches and the GPU<->NIC pairing with its PCIe relation). Its ``key`` is the first 16 hex digits of the SHA-256
of the canonical JSON of those fields. The link capability (the lower of both ends' max speed and width), not the
current speed, enters the profile: an idle GPU link runs slower, and a link that trained down is a regression of
its profile, not a new one.

The **store** (``Store(directory)``) is a directory the user versions (git): one JSON file per profile,
``<directory>/<key>.json``::

    {"schema": 1, "key": "...", "profile": {...},
     "runs": [{"node", "metric", "value", "unit", "at", "good", "status"}, ...]}

written atomically (temp file, fsync, rename) with sorted keys and a trailing newline, so a diff shows what a run
added. At most ``KEEP`` runs per node and metric are kept.

**Judging** (``judge``): a run is compared with the *fleet median* (the median of the last good run of every node of
the profile, this node's included) and with the *node's own last good run*. Bandwidths are higher-is-better: a run
more than ``tolerance`` (a fraction, 0.1 = 10 %) below either reference is ``drift``, with both numbers in the reason;
otherwise ``ok``. A profile (or metric) without a good run is ``not_checked``: the run starts the baseline and is
not judged, never a pass. A drifted run is stored with ``good: false`` and never becomes a reference.

``evaluate`` does the three steps (load, judge, record and save) and returns the status document of a future
``performance`` concern (``concern_model.status``: ``status``, ``reason``, ``items``), with ``baseline`` beside it.
Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import math
import os
import re
import time

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths

SCHEMA = 1
KEEP = 20
CONCERN = "performance"
DEFAULT_TOLERANCE = 0.10
FIELDS = ("gpu_model", "nic_model", "nic_firmware", "pcie_gpu", "pcie_nic", "driver_flavour", "driver_version",
          "kernel", "nccl_version", "rdma_core", "topology_hash")
_KEY = re.compile(r"[0-9a-f]{16}")
_METRIC = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}")
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{0,200}")


class BaselineError(ValueError):
    """A baseline file or a run that does not follow the schema."""


def _link(facts, bdf):
    """``Gen5 x16``: what the link of ``bdf`` can train to (the lower of both ends), or None."""
    for link in facts.get("pcie_links") or []:
        if link.get("device") == bdf:
            gen = pcie_link.GENERATION.get(link.get("max_speed"))
            width = link.get("max_width")
            return "Gen%s x%s" % (gen, width) if gen and width else None
    return None


def topology_hash(facts):
    """SHA-256 (16 hex digits) of the node's GPUs, NICs, NVSwitches and pairing: two nodes of one build share it."""
    doc = {"gpus": sorted([g.get("bdf"), g.get("model") or g.get("device")] for g in facts.get("gpus") or []),
           "nics": sorted([n.get("bdf"), n.get("vendor"), n.get("device")] for n in facts.get("nics") or []
                          if n.get("rdma")),
           "nvswitches": len(facts.get("nvswitches") or []),
           "pairing": sorted([p.get("gpu"), p.get("nic"), p.get("relation")] for p in facts.get("pairing") or [])}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _version(v):
    """A version as the profile keeps it: a string (the facts give rdma-core's release as a number, ``50``)."""
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def profile(facts, pair=None, versions=None):
    """The profile of a node (or of one GPU<->NIC ``pair``, an entry of ``facts["pairing"]``) from its gpufabric
    facts and the ``versions`` the facts do not hold (``nic_firmware``, ``nccl_version``, ``rdma_core``; a
    ``gpudirect_rdma.dmabuf.rdma_core`` fact is used when present). ``incomplete`` names the fields left None."""
    versions = versions or {}
    facts = facts or {}
    pairs = facts.get("pairing") or []
    p = pair or (pairs[0] if pairs else {})
    gpus = dict((g.get("bdf"), g) for g in facts.get("gpus") or [])
    nics = dict((n.get("bdf"), n) for n in facts.get("nics") or [])
    gpu = gpus.get(p.get("gpu")) or (list(gpus.values())[0] if gpus else {})
    nic = nics.get(p.get("nic")) or next((n for n in nics.values() if n.get("rdma")), {})
    drv = facts.get("gpu_driver") or {}
    dmabuf = (facts.get("gpudirect_rdma") or {}).get("dmabuf") or {}
    prof = {"gpu_model": gpu.get("model") or gpu.get("device"),
            "nic_model": "%s:%s" % (nic["vendor"], nic["device"]) if nic.get("vendor") else None,
            "nic_firmware": versions.get("nic_firmware"),
            "pcie_gpu": _link(facts, gpu.get("bdf")), "pcie_nic": _link(facts, nic.get("bdf")),
            "driver_flavour": drv.get("flavour"), "driver_version": drv.get("version"),
            "kernel": facts.get("kernel_release"), "nccl_version": versions.get("nccl_version"),
            "rdma_core": _version(versions.get("rdma_core") or dmabuf.get("rdma_core")),
            "topology_hash": topology_hash(facts)}
    for k in FIELDS:
        v = prof[k]
        if v is not None and not (isinstance(v, str) and _TEXT.fullmatch(v)):
            raise BaselineError("profile field %s: %r is not a printable string of at most 200 characters" % (k, v))
    canon = json.dumps(prof, sort_keys=True).encode("utf-8")
    out = dict(prof)
    out["key"] = hashlib.sha256(canon).hexdigest()[:16]
    out["incomplete"] = [k for k in FIELDS if prof[k] is None]
    return out


class Store(object):
    """The baseline files of one directory (``<directory>/<key>.json``)."""

    def __init__(self, directory):
        if not directory or not os.path.isabs(directory):
            raise BaselineError("the baseline directory must be an absolute path, not %r" % (directory,))
        self.directory = directory
        self._sr = Sysroot(directory)

    def path(self, key):
        if not _KEY.fullmatch(key or ""):
            raise BaselineError("profile key %r is not 16 hex digits" % (key,))
        return os.path.join(self.directory, key + ".json")

    def load(self, key):
        """The profile's document, or None when the profile has no file yet."""
        try:
            with open(self.path(key)) as f:
                doc = json.load(f)
        except IOError as e:
            if not os.path.exists(self.path(key)):
                return None
            raise BaselineError("cannot read %s: %s" % (self.path(key), e))
        except ValueError as e:
            raise BaselineError("%s is not JSON: %s" % (self.path(key), e))
        return check(doc, key)

    def save(self, doc):
        check(doc, doc.get("key"))
        text = json.dumps(doc, sort_keys=True, indent=1) + "\n"
        self._sr.write_file_atomic("/" + doc["key"] + ".json", text, 0o644)

    def keys(self):
        if not os.path.isdir(self.directory):
            return []
        return sorted(n[:-5] for n in os.listdir(self.directory) if n.endswith(".json") and _KEY.fullmatch(n[:-5]))


def new_doc(prof):
    return {"schema": SCHEMA, "key": prof["key"], "profile": dict((k, prof.get(k)) for k in FIELDS), "runs": []}


def check(doc, key):
    """``doc`` when it follows the schema and belongs to ``key``; BaselineError naming what does not."""
    if not isinstance(doc, dict):
        raise BaselineError("a baseline document is an object")
    if doc.get("schema") != SCHEMA:
        raise BaselineError("baseline schema %r is not %d (written by another version of the collection)"
                            % (doc.get("schema"), SCHEMA))
    if doc.get("key") != key or not _KEY.fullmatch(key or ""):
        raise BaselineError("baseline key %r does not match its file %r" % (doc.get("key"), key))
    if not isinstance(doc.get("profile"), dict) or not isinstance(doc.get("runs"), list):
        raise BaselineError("baseline %s lacks its profile or runs" % key)
    for r in doc["runs"]:
        check_run(r)
    return doc


def check_run(r):
    if not isinstance(r, dict):
        raise BaselineError("a run is an object")
    if not _NODE.fullmatch(str(r.get("node"))) or not _METRIC.fullmatch(str(r.get("metric"))):
        raise BaselineError("run node %r / metric %r: not a host name / metric name" % (r.get("node"),
                                                                                        r.get("metric")))
    v = r.get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) or v < 0:
        raise BaselineError("run value %r of %s is not a non-negative number" % (v, r.get("metric")))
    if not isinstance(r.get("good"), bool):
        raise BaselineError("run of %s lacks its good flag" % r.get("metric"))
    return r


def _median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def references(doc, node, metric):
    """``{fleet_median, fleet_nodes, node_last, node_last_at}`` of the good runs of ``metric`` (None when none)."""
    last = {}
    for r in (doc or {}).get("runs") or []:
        if r["metric"] == metric and r["good"]:
            last[r["node"]] = r          # runs are in time order: the last one wins
    mine = last.get(node)
    return {"fleet_median": _median([r["value"] for r in last.values()]) if last else None,
            "fleet_nodes": len(last), "node_last": mine["value"] if mine else None,
            "node_last_at": mine.get("at") if mine else None}


def judge(doc, node, metric, value, tolerance=DEFAULT_TOLERANCE, unit="B/s"):
    """The status of one run against its profile's baseline (see the module docstring)."""
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise BaselineError("tolerance %r is not a fraction in [0, 1)" % (tolerance,))
    ref = references(doc, node, metric)
    shown = _fmt(value, unit)
    base = {"metric": metric, "value": value, "unit": unit, "tolerance": tolerance,
            "profile": (doc or {}).get("key"), "references": ref}
    if ref["fleet_median"] is None:
        why = "new profile %s" % base["profile"] if not (doc or {}).get("runs") else "no good run of %s yet" % metric
        return C.status(C.NOT_CHECKED, "not judged: %s; this run (%s %s) starts its baseline" % (why, metric, shown),
                        baseline=base)
    floor = 1.0 - tolerance
    low = []
    for name, ref_v, extra in (("the fleet median", ref["fleet_median"], " (%d node(s))" % ref["fleet_nodes"]),
                               ("the node's last good run", ref["node_last"],
                                " (%s)" % ref["node_last_at"] if ref["node_last_at"] else "")):
        if ref_v is not None and value < ref_v * floor:
            low.append((name, ref_v, extra))
    compared = "the fleet median %s%s" % (_fmt(ref["fleet_median"], unit), " (%d node(s))" % ref["fleet_nodes"])
    if ref["node_last"] is not None:
        compared += " and the node's last good run %s" % _fmt(ref["node_last"], unit)
    if low:
        parts = ["%.0f %% below %s %s%s" % (100.0 * (1 - value / r), n, _fmt(r, unit), e) for n, r, e in low]
        item = {"concern": CONCERN, "object": node, "key": metric, "current": value,
                "desired": ">= %s" % _fmt(max(r for _n, r, _e in low) * floor, unit)}
        reason = "%s %s is %s (tolerance %.0f %%)" % (metric, shown, " and ".join(parts), 100 * tolerance)
        return C.status(C.DRIFT, reason, [item], baseline=base)
    return C.status(C.OK, "%s %s is within %.0f %% of %s" % (metric, shown, 100 * tolerance, compared), baseline=base)


def _fmt(v, unit):
    return paths.rate(v) if unit == "B/s" else "%g %s" % (v, unit)


def record(doc, node, metric, value, status, unit="B/s", at=None):
    """Append the run to ``doc`` (good unless it drifted), keeping the last KEEP runs per node and metric."""
    run = check_run({"node": node, "metric": metric, "value": value, "unit": unit,
                     "at": at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "good": status["status"] != C.DRIFT, "status": status["status"]})
    doc["runs"].append(run)
    same = [r for r in doc["runs"] if r["node"] == node and r["metric"] == metric]
    for old in same[:-KEEP] if len(same) > KEEP else []:
        doc["runs"].remove(old)
    return doc


def evaluate(store, prof, node, metric, value, tolerance=DEFAULT_TOLERANCE, unit="B/s", at=None, save=True):
    """Load the profile's baseline, judge the run, record it and (``save``) write the file back; the status."""
    doc = store.load(prof["key"]) or new_doc(prof)
    status = judge(doc, node, metric, value, tolerance, unit)
    record(doc, node, metric, value, status, unit, at)
    if save:
        store.save(doc)
    return status
