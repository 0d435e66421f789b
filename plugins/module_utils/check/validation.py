# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the validation suite's planned runs (``validate.suite.plan``) and build the ``validation`` document: the body
of ``fabric_validate``. It sits in the check layer, above the concerns, because it uses the GDS concern's nvidia-fs
counters and cufile.json policy (``concerns.gds.parse``) and its cuFile program; what it runs and how the outputs are
read stay below, in ``validate/`` (``suite``, ``runs``).

Every run goes through the one command runner, bounded by ``timeout -k 10 <timeout>`` (coreutils; rc 124 when it
ran past the limit), with around it:

- the children's CPU time (``resource.getrusage(RUSAGE_CHILDREN)``, user + system: every command the runner starts
  is a waited-for child of this process) and the wall time: "CPU up at the same bandwidth means staging";
- the NIC counters of the node's rails (``discovery.counters.snapshot``: ``ethtool -S`` per priority and the RDMA
  port's ``np_cnp_sent``, ``np_ecn_marked_roce_packets``, ``rp_cnp_handled``...) and, where nvidia-fs is loaded,
  its read/write counters (``/proc/driver/nvidia-fs/stats``, ``concerns.gds.parse``): the deltas that moved.

``validate(sr, run, params, check_mode)`` is the whole of it: facts, tools, plan, runs, the doc and the failures.
The programs the suite ships (the torch all-reduce, the cuFile program) are written into a private work directory
under ``gds_dir`` (default /var/tmp), which also holds the GDS test files and is removed at the end.
Plain Python; private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import parse as nvfs_parse
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as gds_proof
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import counters as nic_counters
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host import files
from ansible_collections.gpufabric.node.plugins.module_utils.validate import allreduce_torch
from ansible_collections.gpufabric.node.plugins.module_utils.validate import baseline
from ansible_collections.gpufabric.node.plugins.module_utils.validate import runs as readers
from ansible_collections.gpufabric.node.plugins.module_utils.validate import suite

FACT_SUBSET = ["pci", "rails", "gpu_driver", "nvidia_fs"]
SERVER_HEADSTART_S = 2.0
KILL_AFTER_S = 10
WORKDIR_PREFIX = "gpufabric-validate-"
RC_NOT_FOUND = 127      # timeout(1) could not run the program, or the runner found no timeout


def source(name):
    """The source text of a shipped program, ``allreduce_torch`` or ``cufile_probe`` (from a file or the AnsiballZ
    zip)."""
    if name == "cufile_probe":
        return gds_proof.probe_source()
    return files.module_source(allreduce_torch)


def bounded(argv, timeout):
    return ["timeout", "-k", str(KILL_AFTER_S), str(timeout)] + list(argv)


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Counters(object):
    """Snapshots of the NIC and nvidia-fs counters around one run; ``delta()`` the ones that moved."""

    def __init__(self, sr, run, facts, nvfs_loaded):
        self.sr, self.run, self.nvfs = sr, run, nvfs_loaded
        self.rails = sorted(set(r["netdev"] for r in facts.get("rails") or [] if r.get("netdev") and r.get("ibdev")))
        self.notes = []
        self.before = self.after = None

    def _snap(self):
        snap = {"nic": None, "nvfs": None}
        if self.rails:
            try:
                snap["nic"] = nic_counters.snapshot(self.run, self.rails, sysroot=self.sr)
            except nic_counters.CountersError as e:
                self.notes.append(str(e))
        if self.nvfs:
            text = self.sr.read_raw(nvfs_parse.STATS)
            snap["nvfs"] = nvfs_parse.counters(nvfs_parse.parse_stats(text)) if text else None
        return snap

    def start(self):
        self.before = self._snap()

    def stop(self):
        self.after = self._snap()

    def nvfs_delta(self):
        b, a = (self.before or {}).get("nvfs"), (self.after or {}).get("nvfs")
        return nvfs_parse.counter_delta(b, a) if b and a else None

    def delta(self):
        out = {}
        b, a = (self.before or {}).get("nic"), (self.after or {}).get("nic")
        if b and a:
            d = nic_counters.delta(b, a)
            for rail, rd in d["rails"].items():
                moved = {}
                for p, fields in sorted((rd.get("prio") or {}).items()):
                    for f, v in sorted(fields.items()):
                        if v:
                            direction, what = f.split("_", 1)
                            moved["%s_prio%s_%s" % (direction, p, what)] = v
                for k, v in sorted((rd.get("rdma") or {}).items()):
                    if v:
                        moved[k] = v
                if rd.get("reset") or rd.get("rdma_reset"):
                    moved["reset"] = 1
                out[rail] = moved
        nd = self.nvfs_delta()
        if nd is not None:
            out["nvidia_fs"] = dict((k, v) for k, v in nd.items() if v)
        return out


def _call(run, argv, env, timeout, box):
    box.append(run(bounded(argv, timeout), env))


def execute(r, run, sr, opts, facts, tools, workdir):
    """Run one planned run in place: rc, cpu_s, wall_s, counters, and what ``runs`` reads from its output."""
    ctr = Counters(sr, run, facts, tools["nvfs_loaded"])
    server = None
    if "CUFILE_ENV_PATH_JSON" in r["env"]:
        cfg = nvfs_parse.cufile_config(_base_cufile_json(sr), allow_compat_mode=r["variant"] == "compat_on",
                                       log_dir=workdir)
        with open(r["env"]["CUFILE_ENV_PATH_JSON"], "w") as f:
            f.write(nvfs_parse.render_cufile_json(cfg))
    if r["tool"] == "torch.distributed":
        store = os.path.join(workdir, "store")
        shutil.rmtree(store, ignore_errors=True)
        os.mkdir(store, 0o700)
    ctr.start()
    cpu0, t0 = children_cpu(), time.time()
    if r.get("server_command"):
        box = []
        th = threading.Thread(target=_call, args=(run, r["server_command"], r["env"], opts["timeout"], box))
        th.daemon = True
        th.start()
        time.sleep(SERVER_HEADSTART_S)
        rc, out, err = run(bounded(r["command"], opts["timeout"]), r["env"])
        th.join(opts["timeout"] + KILL_AFTER_S + 5)
        server = box[0] if box else (None, "", "the server did not finish")
    else:
        rc, out, err = run(bounded(r["command"], opts["timeout"]), r["env"])
    r["wall_s"] = round(time.time() - t0, 3)
    r["cpu_s"] = round(children_cpu() - cpu0, 3)
    ctr.stop()
    r["rc"] = rc
    r["counters"] = ctr.delta()
    if ctr.notes:
        r["counter_notes"] = ctr.notes
    if rc == RC_NOT_FOUND and not out:
        res = readers.result("not_checked", "%s: %s" % (r["command"][0], (err or "not found").strip()))
    elif r["tool"] in ("all_reduce_perf", "torch.distributed"):
        res = readers.nccl_result(r, rc, out, err)
    elif r["tool"] == "ib_write_bw":
        res = readers.perftest_result(r, rc, out, err, server)
    elif r["tool"] == "gdsio":
        res = readers.gdsio_result(r, rc, out, err, ctr.nvfs_delta(), tools["nvfs_loaded"])
    elif r["tool"] == "kvikio":
        res = readers.kvikio_result(r, rc, out, err, ctr.nvfs_delta(), tools["nvfs_loaded"],
                                    _log_tail(r["env"]["CUFILE_LOGFILE_PATH"]) if "CUFILE_LOGFILE_PATH" in r["env"]
                                    else [])
    else:
        res = readers.probe_result(r, rc, out, err, tools["nvfs_loaded"], ctr.nvfs_delta(),
                                   _log_tail(r["env"]["CUFILE_LOGFILE_PATH"]))
    r.update(status=res["status"], reason=res["reason"], verdict=res["verdict"], bandwidth=res["bandwidth"],
             details=res["details"])
    if res["bandwidth"] is None:
        r["metric"] = None
    r["output_tail"] = ((out or "") + (err or ""))[-6000:]
    return r


def _log_tail(path, limit=20):
    """The last lines of cuFile's log of one run (why a call failed), and the log removed for the next run."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
        os.unlink(path)
    except (IOError, OSError, UnicodeDecodeError):
        return []
    return [x.strip() for x in lines if x.strip()][-limit:]


def _base_cufile_json(sr):
    text = sr.read_raw(nvfs_parse.CUFILE_JSON)
    if text is None:
        return {}
    try:
        return nvfs_parse.load_cufile_json(text)
    except nvfs_parse.GdsError:
        return {}


def _versions(sr, facts, doc_runs):
    nccl = next((r["details"].get("nccl_version") for r in doc_runs if (r.get("details") or {}).get("nccl_version")),
                None)
    drv = facts.get("gpu_driver") or {}
    pairs = facts.get("pairing") or []
    fw = sr.read("/sys/class/infiniband/%s/fw_ver" % pairs[0]["ibdev"]) if pairs and pairs[0].get("ibdev") else None
    dmabuf = (facts.get("gpudirect_rdma") or {}).get("dmabuf") or {}
    # the gpudirect fact holds rdma-core's major as a number; the profile wants text
    rdma_core = dmabuf.get("rdma_core")
    return {"nccl": nccl, "rdma_core": str(rdma_core) if rdma_core is not None else None, "driver": drv.get("version"),
            "kernel": facts.get("kernel_release"), "nic_firmware": fw}


def _utc(now):
    return datetime.datetime.utcfromtimestamp(now).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate(sr, run, params, check_mode=False, clock=time.time, facts=None):
    """(validation doc, failures) of this node; raises ``suite.SuiteError`` on bad input before running anything."""
    opts = suite.options(params)
    facts = facts if facts is not None else topology.discover(sr, FACT_SUBSET)
    node = opts["node"] or socket.gethostname().split(".")[0]
    opts["python"] = opts["python"] or sys.executable
    tools = suite.detect(run, opts, facts)
    root = opts["gds_dir"]     # a real path: the commands write there (the sysroot is for what is read)
    if not os.path.isdir(root):
        raise suite.SuiteError("gds_dir %s is not a directory" % opts["gds_dir"])
    # check mode creates nothing: its plan names the work directory as <gds_dir>/gpufabric-validate-check-mode,
    # where a run uses a new private one (mkdtemp: the prefix and a random suffix), removed at the end
    workdir = None if check_mode else tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=root)
    try:
        planned = suite.plan(opts, tools, facts, workdir or os.path.join(root, WORKDIR_PREFIX + "check-mode"))
        if check_mode:
            for r in planned:
                if r["status"] is None:
                    r.update(status="not_checked", reason="check mode: planned, not run")
        else:
            os.mkdir(os.path.join(workdir, "data"), 0o700)
            for name in ("allreduce_torch", "cufile_probe"):
                with open(os.path.join(workdir, name + ".py"), "w") as f:
                    f.write(source(name))
            for r in planned:
                if r["status"] is None:
                    execute(r, run, sr, opts, facts, tools, workdir)
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    versions = _versions(sr, facts, planned)
    prof = baseline.profile(facts, versions={"nccl_version": versions["nccl"], "rdma_core": versions["rdma_core"],
                                             "nic_firmware": versions["nic_firmware"]})
    doc = {"schema": 1, "node": node, "at": _utc(clock()), "profile": prof, "profile_key": prof["key"],
           "versions": versions, "tools": dict((k, v) for k, v in tools.items() if k != "torch"),
           "torch": tools.get("torch"), "runs": planned}
    return doc, suite.failures(doc)


def dumps(doc):
    """The doc as the JSON the judge reads (keys sorted)."""
    return json.dumps(doc, sort_keys=True, indent=1)
