# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-side validation suite (validate/suite, runs, check/validation): input checks, the plan for what a node has,
missing tools as not_checked, the shipped programs' outputs read, the verdicts and the failures the play stops on.
Commands go to a fake runner that answers from recorded or built outputs (tests/fixtures/validate)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.validate import paths
from ansible_collections.gpufabric.node.plugins.module_utils.validate import runs
from ansible_collections.gpufabric.node.plugins.module_utils.validate import suite
from ansible_collections.gpufabric.node.plugins.module_utils.check import validation as suite_exec

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "validate")
MIB = 1 << 20


def _text(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def _torch_line(ranks, busbw=0.0, correct=True, error=None):
    return runs.TORCH_MARK + json.dumps({"ranks": ranks, "size": 64 * MIB, "iters": 20, "time_us": 100.0,
                                         "algbw": 6.7e11, "busbw": busbw, "correct": correct, "nccl": "2.28.9",
                                         "error": error}) + "\n"


def _facts(gpus=1, rails=0, nvfs=False):
    g = [{"index": i, "bdf": "0000:%02x:00.0" % (0x18 + i), "model": "H200"} for i in range(gpus)]
    r = [{"netdev": "ens%dnp0" % i, "ibdev": "mlx5_%d" % i, "port": 1, "pci_functions": ["0000:%02x:00.0" % (0x40 + i)],
          "roce_v2_ipv4_gid_index": 3} for i in range(rails)]
    pairing = [{"gpu": g[i]["bdf"], "gpu_index": i, "nic": r[i]["pci_functions"][0], "ibdev": r[i]["ibdev"], "port": 1,
                "relation": "PIX"} for i in range(min(gpus, rails))]
    matrix = dict((x["bdf"], dict((y["pci_functions"][0], "PIX" if i == j else "SYS") for j, y in enumerate(r)))
                  for i, x in enumerate(g))
    return {"gpus": g, "rails": r, "pairing": pairing, "matrix": matrix, "nvidia_fs": {"loaded": nvfs},
            "gpu_driver": {"flavour": "open", "version": "580.95.05"}, "kernel_release": "6.18.44"}


def _tools(**kw):
    t = {"python": "/usr/bin/python3", "all_reduce_perf": None, "runtime": None, "torch": None, "ib_write_bw": None,
         "gdsio": None, "kvikio": None, "gpus": [0], "rdma": False, "nvfs_loaded": False}
    t.update(kw)
    return t


def _plan(params=None, facts=None, **tools):
    opts = suite.options(params or {})
    return dict((r["id"], r) for r in suite.plan(opts, _tools(**tools), facts or _facts(), "/var/tmp/w"))


# --- input -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,message", [
    ({"tests": ["nccl", "fio"]}, "fio is not one of"),
    ({"tests": []}, "an empty list"),
    ({"image": "img;rm -rf /"}, "image"),
    ({"image": "localhost/nccl-tests/../x"}, "image"),
    ({"image": "nccl-tests", "nccl_tests_path": "/opt/nccl-tests/build"}, "exclusive"),
    ({"nccl_tests_path": "relative/all_reduce_perf"}, "absolute path"),
    ({"gds_dir": "/var/tmp/../etc"}, "absolute path"),
    ({"python": "/usr/bin/python3\n"}, "absolute path"),
    ({"peer": "10.0.0.1 -x"}, "address"),
    ({"size": 8}, "size must be"),
    ({"timeout": 0}, "timeout must be"),
    ({"gpus": [0, 0]}, "distinct"),
    ({"gpus": [-1]}, "distinct"),
    ({"container_runtime": "lxc"}, "container_runtime"),
])
def test_bad_input_is_refused(params, message):
    with pytest.raises(suite.SuiteError, match=message):
        suite.options(params)


# --- plan --------------------------------------------------------------------------------------------------------

TORCH = {"torch": "2.11.0", "cuda": True, "gpus": 1, "nccl": "2.28.9"}


@pytest.mark.parametrize("facts,tools,rid,status,reason,tool,env_has,env_lacks", [
    # the H200 host: one GPU, PyTorch, no RDMA device: one rank, not pinned, no negative variant possible
    (_facts(1, 0), dict(torch=TORCH), "nccl.configured", None, None, "torch.distributed",
     {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH,ENV,P2P", "CUDA_VISIBLE_DEVICES": "0"},
     ("NCCL_NET", "NCCL_P2P_DISABLE")),
    (_facts(1, 0), dict(torch=TORCH), "nccl.gdr_loc", "not_checked", "one rank", None, {}, ()),
    (_facts(1, 0), dict(torch=TORCH), "nccl_intra.configured", "not_checked", "one GPU", None, {}, ()),
    # two GPUs and RDMA NICs: pinned to IB, the ranks talk through the NICs
    (_facts(2, 2), dict(all_reduce_perf="/usr/bin/all_reduce_perf", gpus=[0, 1], rdma=True), "nccl.configured",
     None, None, "all_reduce_perf", {"NCCL_NET": "IB", "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, ()),
    (_facts(2, 2), dict(all_reduce_perf="/usr/bin/all_reduce_perf", gpus=[0, 1], rdma=True), "nccl.gdr_loc",
     None, None, "all_reduce_perf", {"NCCL_NET": "IB", "NCCL_NET_GDR_LEVEL": "LOC"}, ()),
    (_facts(2, 2), dict(all_reduce_perf="/usr/bin/all_reduce_perf", gpus=[0, 1], rdma=True), "nccl.socket",
     None, None, "all_reduce_perf", {"NCCL_IB_DISABLE": "1"}, ("NCCL_NET",)),
    (_facts(2, 2), dict(all_reduce_perf="/usr/bin/all_reduce_perf", gpus=[0, 1], rdma=True), "nccl_intra.host_memory",
     None, None, "all_reduce_perf", {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}, ("NCCL_SHM_DISABLE",)),
    (_facts(2, 0), dict(all_reduce_perf="/usr/bin/all_reduce_perf", gpus=[0, 1]), "nccl.socket", "not_checked",
     "no RDMA device", None, {}, ()),
    # nothing to run NCCL with: what to install
    (_facts(1, 0), {}, "nccl.configured", "not_checked", "install nccl-tests", None, {}, ()),
    (_facts(1, 0), dict(torch={"torch": "2.11.0", "cuda": False, "gpus": 0}), "nccl.configured", "not_checked",
     "sees no CUDA GPU", None, {}, ()),
    (_facts(0, 0), dict(gpus=[], torch=TORCH), "nccl.configured", "not_checked", "no GPU", None, {}, ()),
    # perftest
    (_facts(1, 1), dict(rdma=True), "perftest.local_nic", "not_checked", "install perftest", "ib_write_bw", {}, ()),
    (_facts(1, 0), dict(ib_write_bw="/usr/bin/ib_write_bw"), "perftest.local_nic", "not_checked",
     "no RDMA device", "ib_write_bw", {}, ()),
    (_facts(1, 1), dict(ib_write_bw="/usr/bin/ib_write_bw", rdma=True), "perftest.gpu0.remote_nic", "not_checked",
     "no NIC away from GPU 0", "ib_write_bw", {}, ()),
    (_facts(1, 2), dict(ib_write_bw="/usr/bin/ib_write_bw", rdma=True), "perftest.gpu0.remote_nic", None, None,
     "ib_write_bw", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, ()),
    # GDS
    (_facts(1, 0), {}, "gds.compat_on", None, None, "cufile_probe",
     {"CUFILE_ALLOW_COMPAT_MODE": "true", "CUFILE_FORCE_COMPAT_MODE": "true"}, ()),
    (_facts(1, 0), {}, "gds.compat_off", None, None, "cufile_probe",
     {"CUFILE_ALLOW_COMPAT_MODE": "false", "CUFILE_FORCE_COMPAT_MODE": "false"}, ()),
    (_facts(1, 0), dict(gdsio="/usr/local/cuda/gds/tools/gdsio"), "gds.host_buffer", None, None, "gdsio", {}, ()),
    # KvikIO: its own compat mode is the host leg; compat_off forbids KvikIO's and cuFile's compat modes
    (_facts(1, 0), dict(kvikio="26.10.0"), "gds.compat_on", None, None, "kvikio", {"KVIKIO_COMPAT_MODE": "ON"},
     ("CUFILE_ENV_PATH_JSON",)),
    (_facts(1, 0), dict(kvikio="26.10.0"), "gds.compat_off", None, None, "kvikio",
     {"KVIKIO_COMPAT_MODE": "OFF", "CUFILE_ALLOW_COMPAT_MODE": "false"}, ()),
])
def test_plan(facts, tools, rid, status, reason, tool, env_has, env_lacks):
    r = _plan(facts=facts, **tools)[rid]
    assert r["status"] == status
    if reason:
        assert reason in r["reason"]
    else:
        assert r["reason"] is None and r["command"]
    assert r["tool"] == tool
    for k, v in env_has.items():
        assert r["env"][k] == v
    for k in env_lacks:
        assert k not in r["env"]


def test_plan_commands():
    p = _plan(facts=_facts(2, 2), all_reduce_perf="/opt/nt/all_reduce_perf", ib_write_bw="/usr/bin/ib_write_bw",
              gdsio="/usr/local/cuda/gds/tools/gdsio", gpus=[0, 1], rdma=True)
    assert p["nccl.configured"]["command"] == ["/opt/nt/all_reduce_perf", "-b", str(64 * MIB), "-e", str(64 * MIB),
                                               "-f", "2", "-g", "2", "-n", "20", "-w", "5", "-c", "1"]
    assert p["nccl.configured"]["metric"] == "nccl.configured.busbw" and p["nccl.configured"]["expect"] == "direct"
    assert [p["gds.gds_direct"]["command"][i] for i in (-4, -1)] == ["0", "-V"]
    assert [p["gds.host_buffer"]["command"][i] for i in (-4, -1)] == ["2", "-V"]
    local = p["perftest.gpu1.local_nic"]
    # the server holds GPU 1's buffer behind its own NIC; the client sends from host memory through the other NIC
    assert local["server_command"][:5] == ["/usr/bin/ib_write_bw", "-d", "mlx5_1", "-i", "1"]
    assert "--use_cuda=1" in local["server_command"] and "-x" in local["server_command"]
    assert local["command"][2] == "mlx5_0" and not any(a.startswith("--use_cuda") for a in local["command"])
    assert local["command"][-1] == "127.0.0.1"
    assert p["perftest.gpu1.remote_nic"]["server_command"][2] == "mlx5_0"
    assert p["perftest.gpu1.remote_nic"]["relation"] == "SYS"


def test_plan_container_and_peer():
    p = _plan({"image": "localhost/nccl-tests:2.19", "peer": "10.0.0.9"}, _facts(2, 2), runtime="/usr/bin/podman",
              ib_write_bw="/usr/bin/ib_write_bw", gpus=[0, 1], rdma=True)
    argv = p["nccl.gdr_loc"]["command"]
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"] and "--device=nvidia.com/gpu=all" in argv
    assert "NCCL_NET_GDR_LEVEL=LOC" in argv and argv[argv.index("localhost/nccl-tests:2.19") + 1] == "all_reduce_perf"
    assert p["nccl.gdr_loc"]["env"] == {}
    local = p["perftest.gpu0.local_nic"]
    assert local["server_command"] is None and local["command"][-1] == "10.0.0.9" and "--use_cuda=0" in local["command"]
    p = _plan({"image": "nccl-tests"}, _facts(1, 0))
    assert "neither podman nor docker" in p["nccl.configured"]["reason"]


def test_negative_false_plans_only_the_direct_runs():
    p = _plan({"negative": False}, _facts(2, 2), all_reduce_perf="/x/all_reduce_perf", gpus=[0, 1], rdma=True)
    assert sorted(k for k in p if k.startswith("nccl")) == ["nccl.configured", "nccl_intra.configured"]


# --- reading what ran --------------------------------------------------------------------------------------------

H200_LOG = "h200-microvm/nccl-configured.log"


@pytest.mark.parametrize("tool,text,rc,status,state,fallback,bw,reason", [
    # the H200 log (one rank, PyTorch) with the program's line: not exercised, no bandwidth for one rank
    ("torch.distributed", _text(H200_LOG) + _torch_line(1), 0, "ok", "not_exercised", None, None, "one rank"),
    # pinned to IB on a host without an IB device: NCCL fails instead of falling back
    ("torch.distributed", _text("h200-microvm/nccl-pinned-ib.log") + runs.TORCH_MARK + '{"error": "DistBackendError"}',
     1, "error", "not_exercised", None, None, "failed instead of falling back"),
    ("torch.distributed", _text("built-allreduce-2nodes-direct-2.30.log") + _torch_line(2, 3.9e10), 0, "ok",
     "direct", None, 3.9e10, "4 of 4 network channels"),
    ("torch.distributed", _text(H200_LOG) + _torch_line(1, correct=False, error="wrong"), 1, "error",
     "not_exercised", None, None, None),
    ("all_reduce_perf", _text("built-allreduce-2nodes-direct-2.30.log"), 0, "ok", "direct", None, 38.4375e9, None),
    ("all_reduce_perf", _text("built-allreduce-2nodes-gdr-loc-2.30.log"), 0, "ok", "fallback", "no_gdr", None, None),
    ("all_reduce_perf", _text("built-allreduce-2nodes-socket-2.30.log"), 0, "ok", "fallback", "socket", None, None),
    ("all_reduce_perf", "", 124, "error", "unknown", None, None, "timed out"),
])
def test_nccl_result(tool, text, rc, status, state, fallback, bw, reason):
    res = runs.nccl_result({"test": "nccl", "tool": tool}, rc, text, "")
    assert res["status"] == status
    assert res["verdict"]["state"] == state and res["verdict"]["fallback"] == fallback
    if bw is not None:
        assert res["bandwidth"] == pytest.approx(bw)
    elif state != "fallback":
        assert res["bandwidth"] is None
    if reason:
        assert reason in res["reason"] or reason in res["verdict"]["reason"]


def test_torch_line_prefers_the_result():
    text = _torch_line(2, 1e10) + runs.TORCH_MARK + '{"error": "ProcessRaisedException"}\nnoise\n'
    assert runs.torch_line(text)["ranks"] == 2
    assert runs.torch_line("nothing") is None


def _io(done, err=None):
    return {"requested": 16 * MIB, "done": done, "error": err, "elapsed_s": 0.01, "calls": [done]}


OK_REP = {"ok": True, "data_matched": True, "driver_open": {"err": 0, "name": "CU_FILE_SUCCESS"},
          "write": _io(16 * MIB), "read": _io(16 * MIB), "error": None}
NVFS_DOWN = {"ok": False, "data_matched": False, "error": None,
             "driver_open": {"err": 5010, "name": "CU_FILE_NVFS_DRIVER_ERROR"}}
HANDLE_FAIL = {"ok": False, "data_matched": False, "error": "cuFileHandleRegister failed: CU_FILE_IO_NOT_SUPPORTED",
               "driver_open": {"err": 0, "name": "CU_FILE_SUCCESS"},
               "handle_register": {"err": 5008, "name": "CU_FILE_IO_NOT_SUPPORTED"}}


@pytest.mark.parametrize("rep,compat,nvfs,delta,state,fallback,reason", [
    (OK_REP, True, False, None, "fallback", "host_memory", "cuFile compat mode"),
    (OK_REP, False, False, None, "fallback", "host_memory", "although allow_compat_mode was false"),
    (NVFS_DOWN, False, False, None, "not_exercised", None, "GDS unavailable: nvidia-fs not loaded (cuFileDriverOpen"),
    (HANDLE_FAIL, False, False, None, "not_exercised", None, "GDS unavailable: nvidia-fs not loaded "
                                                             "(cuFileHandleRegister: CU_FILE_IO_NOT_SUPPORTED)"),
    (HANDLE_FAIL, False, True, None, "not_exercised", None, "did not complete: cuFileHandleRegister"),
    (OK_REP, False, True, {"reads": 1, "writes": 1}, "direct", None, "nvidia-fs counted"),
    (OK_REP, True, True, {"reads": 0, "writes": 0}, "fallback", "host_memory", "did not move"),
    (OK_REP, False, True, None, "unknown", None, "cannot be excluded"),
])
def test_probe_verdict(rep, compat, nvfs, delta, state, fallback, reason):
    v = runs.probe_verdict(rep, compat, nvfs, delta)
    assert (v["state"], v["fallback"]) == (state, fallback)
    assert reason in v["reason"]
    if state in ("direct", "fallback"):
        assert v["bandwidth"] == pytest.approx(16 * MIB / 0.01)


@pytest.mark.parametrize("variant,rc,out,nvfs,status,label", [
    ("compat_on", 0, json.dumps(OK_REP), False, "ok", "fallback: host memory"),
    ("compat_off", 0, json.dumps(NVFS_DOWN), False, "ok", "not exercised"),
    ("compat_off", 0, json.dumps(HANDLE_FAIL), True, "error", "not exercised"),
    ("compat_on", 0, json.dumps({"error": "cannot load libcufile", "ok": False}), False, "not_checked", None),
    ("compat_on", -11, "", False, "error", "not exercised"),
])
def test_probe_result(variant, rc, out, nvfs, status, label):
    res = runs.probe_result({"variant": variant}, rc, out, "", nvfs, None)
    assert res["status"] == status
    assert (paths.label(res["verdict"]) if res["verdict"] else None) == label
    if status == "not_checked":
        assert "install the cuFile library" in res["reason"]


def test_perftest_reads_the_servers_gpu_buffer():
    host = _text("built-perftest-host-mib-26.04.txt")
    cuda = _text("built-perftest-cuda-mib-26.04.txt")
    assert runs.perftest_result({}, 0, host, "", server=(0, cuda, ""))["verdict"]["state"] == "direct"
    res = runs.perftest_result({}, 0, host, "", server=(0, host, ""))
    assert (res["verdict"]["state"], res["verdict"]["fallback"]) == ("fallback", "host_memory")
    assert runs.perftest_result({}, 1, "", "Couldn't connect", server=None)["status"] == "error"


# --- failures -----------------------------------------------------------------------------------------------------

def _r(rid, expect, state, status="ok", ranks=2, fallback=None):
    test, variant = rid.split(".")
    v = paths.verdict("nccl", state, "why", fallback=fallback) if state else None
    return {"id": rid, "test": test, "variant": variant, "expect": expect, "status": status, "ranks": ranks,
            "verdict": v, "reason": "r"}


@pytest.mark.parametrize("doc_runs,expected", [
    ([_r("nccl.configured", "direct", "direct"), _r("nccl.gdr_loc", "fallback", "fallback", fallback="no_gdr")], []),
    ([_r("nccl.configured", "direct", "direct"), _r("nccl.gdr_loc", "fallback", "direct")], ["did not flip"]),
    ([_r("nccl.configured", "direct", "fallback", fallback="socket"),
      _r("nccl.gdr_loc", "fallback", "fallback", fallback="no_gdr")],
     ["expected the direct path"]),
    ([_r("nccl.configured", "direct", "not_exercised", status="error")], ["nccl.configured failed"]),
    # one rank cannot exercise the network: reported, not a failure
    ([_r("nccl.configured", "direct", "not_exercised", ranks=1)], []),
    ([_r("nccl.configured", "direct", None, status="not_checked")], []),
    ([_r("nccl.configured", "direct", "direct"), _r("nccl.socket", "fallback", None, status="error")],
     ["nccl.socket (forced fallback) failed"]),
])
def test_failures(doc_runs, expected):
    got = suite.failures({"runs": doc_runs})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert e in g


# --- the whole suite on a fake node -------------------------------------------------------------------------------

class FakeRunner(object):
    """Answers the suite's commands like the H200 host (PyTorch, one GPU, no nvidia-fs)."""

    def __init__(self, probe_loads=True):
        self.calls = []
        self.probe_loads = probe_loads

    def bin_path(self, name, required=None):
        return name if name.startswith("/") else {"timeout": "/usr/bin/timeout"}.get(name)

    def __call__(self, argv, env=None):
        self.calls.append((list(argv), dict(env or {})))
        a = argv[4:] if argv[0] == "timeout" else argv
        if a[1] == "-c":
            if "torch" in a[2]:
                return 0, json.dumps(TORCH) + "\n", ""
            return 1, "", "ModuleNotFoundError: No module named 'kvikio'"
        if a[1].endswith("allreduce_torch.py"):
            return 0, _text(H200_LOG) + _torch_line(1), ""
        if a[1].endswith("cufile_probe.py"):
            if not self.probe_loads:
                return 0, json.dumps({"ok": False, "error": "cannot load libcufile"}), ""
            with open(env["CUFILE_ENV_PATH_JSON"]) as f:
                allowed = json.load(f)["properties"]["allow_compat_mode"]
            rep = OK_REP if allowed and env["CUFILE_ALLOW_COMPAT_MODE"] == "true" else NVFS_DOWN
            return 0, json.dumps(rep) + "\n", ""
        return 127, "", "%s: not found" % a[0]


def test_suite_on_a_one_gpu_host(tmp_path):
    fake = FakeRunner()
    doc, failures = suite_exec.validate(Sysroot(), fake, {"gds_dir": str(tmp_path), "node": "gpuhost"},
                                        facts=_facts(1, 0), clock=lambda: 0)
    by = dict((r["id"], r) for r in doc["runs"])
    assert doc["node"] == "gpuhost" and doc["at"] == "1970-01-01T00:00:00Z" and doc["schema"] == 1
    assert doc["profile_key"] == doc["profile"]["key"] and doc["versions"]["nccl"] == "2.28.9"
    assert paths.label(by["nccl.configured"]["verdict"]) == "not exercised"
    assert paths.label(by["gds.compat_on"]["verdict"]) == "fallback: host memory"
    assert by["gds.compat_off"]["verdict"]["reason"].startswith("GDS unavailable: nvidia-fs not loaded")
    assert by["perftest.local_nic"]["status"] == "not_checked" and "perftest" in by["perftest.local_nic"]["reason"]
    for rid in ("nccl.configured", "gds.compat_on", "gds.compat_off"):
        assert by[rid]["status"] == "ok" and by[rid]["cpu_s"] is not None and by[rid]["wall_s"] is not None
        assert by[rid]["counters"] == {}
    assert by["gds.compat_on"]["metric"] == "gds.compat_on.bw" and by["gds.compat_off"]["metric"] is None
    assert by["nccl.configured"]["metric"] is None
    assert failures == []
    ran = [c for c in fake.calls if c[0][0] == "timeout"]
    assert all(c[0][:4] == ["timeout", "-k", "10", "300"] for c in ran) and len(ran) == 3
    assert os.listdir(str(tmp_path)) == []   # the work directory is gone


def test_check_mode_runs_nothing(tmp_path):
    fake = FakeRunner()
    doc, _f = suite_exec.validate(Sysroot(), fake, {"gds_dir": str(tmp_path), "tests": ["gds"]}, check_mode=True,
                                  facts=_facts(1, 0))
    assert [(r["id"], r["status"], r["reason"]) for r in doc["runs"]] == [
        ("gds.compat_on", "not_checked", "check mode: planned, not run"),
        ("gds.compat_off", "not_checked", "check mode: planned, not run")]
    assert not [c for c in fake.calls if c[0][0] == "timeout"]


def test_missing_cufile_library_is_not_checked(tmp_path):
    params = {"gds_dir": str(tmp_path), "tests": ["gds"]}
    doc, _f = suite_exec.validate(Sysroot(), FakeRunner(probe_loads=False), params, facts=_facts(1, 0))
    assert [r["status"] for r in doc["runs"]] == ["not_checked", "not_checked"]


# --- the simulator's all_reduce_perf, read by the suite -----------------------------------------------------------

def _sim_root(tmp_path, gpus=2, ibdevs=2, state=None):
    from gpufabric_sim.emulators import nccl_tests as emu
    root = str(tmp_path)
    for i in range(gpus):
        d = os.path.join(root, "sys/bus/pci/devices/0000:%02x:00.0" % (0x18 + i))
        os.makedirs(d)
        for name, value in (("vendor", "0x10de"), ("device", "0x2335"), ("class", "0x030200")):
            with open(os.path.join(d, name), "w") as f:
                f.write(value + "\n")
    for i in range(ibdevs):
        os.makedirs(os.path.join(root, "sys/class/infiniband/mlx5_%d/device/net/ens%dnp0" % (i, i)))
    if state:
        emu.write_state(root, **state)
    return root


SIM_NET = dict(suite.NCCL_DEBUG, NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")


@pytest.mark.parametrize("env,ranks,ibdevs,state,rc,verdict,intra,bw_range", [
    (dict(SIM_NET, NCCL_NET="IB"), 2, 2, None, 0, ("direct", None), False, (40e9, 48e9)),
    (dict(SIM_NET, NCCL_NET="IB", NCCL_NET_GDR_LEVEL="LOC"), 2, 2, None, 0, ("fallback", "no_gdr"), False,
     (20e9, 26e9)),
    (dict(SIM_NET, NCCL_IB_DISABLE="1"), 2, 2, None, 0, ("fallback", "socket"), False, (1e9, 1.8e9)),
    (dict(SIM_NET, NCCL_NET="IB", NCCL_IB_DISABLE="1"), 2, 2, None, 1, ("not_exercised", None), False, None),
    (dict(SIM_NET, NCCL_NET="IB"), 2, 0, None, 1, ("not_exercised", None), False, None),
    # the fault knob: GDR silently off after an "upgrade", then a slower fabric
    (dict(SIM_NET, NCCL_NET="IB"), 2, 2, {"gdr": False}, 0, ("fallback", "no_gdr"), False, (20e9, 26e9)),
    (dict(SIM_NET, NCCL_NET="IB"), 2, 2, {"bandwidth_factor": 0.5}, 0, ("direct", None), False, (20e9, 24e9)),
    (dict(suite.NCCL_DEBUG_INTRA), 2, 2, None, 0, ("direct", None), True, (100e9, 400e9)),
    (dict(suite.NCCL_DEBUG_INTRA, NCCL_P2P_DISABLE="1"), 2, 2, None, 0, ("fallback", "host_memory"), True,
     (5e9, 20e9)),
    (dict(SIM_NET), 1, 2, None, 0, ("not_exercised", None), False, None),
])
def test_simulated_all_reduce_perf(tmp_path, env, ranks, ibdevs, state, rc, verdict, intra, bw_range):
    from gpufabric_sim.emulators import nccl_tests as emu
    import io
    root = _sim_root(tmp_path, 2, ibdevs, state)
    out = io.StringIO()
    args = emu.parse(["-b", "64M", "-e", "256M", "-f", "2", "-g", str(ranks)])
    try:
        got = emu.run(args, env, root, out, "sim-a01", 4242)
    except emu.NcclTestError:
        got = 1
    assert got == rc
    res = runs.nccl_result({"test": "nccl_intra" if intra else "nccl", "tool": "all_reduce_perf"}, got,
                           out.getvalue(), "")
    assert (res["verdict"]["state"], res["verdict"]["fallback"]) == verdict
    assert res["status"] == ("ok" if rc == 0 else "error")
    if bw_range:
        assert bw_range[0] <= res["bandwidth"] <= bw_range[1]
    else:
        assert res["bandwidth"] is None


# --- recorded on the real H200 host: validate.yml as a user runs it (tests/fixtures/validate/h200-microvm) ---------

H200 = os.path.join(FIX, "h200-microvm")


def _h200_doc():
    with open(os.path.join(H200, "validate-gpuhost.json")) as f:
        return json.load(f)


def test_h200_recorded_verdicts():
    doc = _h200_doc()
    by = dict((r["id"], r) for r in doc["runs"])
    assert doc["schema"] == 1 and doc["versions"]["nccl"] == "2.28.9" and doc["profile_key"] == doc["profile"]["key"]
    nccl = by["nccl.configured"]
    assert (nccl["status"], nccl["tool"], nccl["details"]["program"]["ranks"]) == ("ok", "torch.distributed", 1)
    assert paths.label(nccl["verdict"]) == "not exercised" and "one rank" in nccl["verdict"]["reason"]
    assert "NCCL_NET" not in nccl["env"]          # no RDMA device on the host: not pinned
    off = by["gds.compat_off"]
    assert off["status"] == "ok" and off["verdict"]["state"] == "not_exercised"
    assert off["verdict"]["reason"].startswith("GDS unavailable: nvidia-fs not loaded")
    # compat mode on: cuFile itself refused the file there (no udev database in the microVM), nothing moved
    on = by["gds.compat_on"]
    assert (on["status"], on["verdict"]["state"]) == ("error", "not_exercised")
    assert any("unable to get volume attributes" in x for x in on["details"]["cufile_log_tail"])
    for r in (nccl, on, off):
        assert r["cpu_s"] > 0 and r["wall_s"] > 0 and r["rc"] == 0 and r["counters"] == {}
    assert [r["id"] for r in doc["runs"] if r["status"] == "not_checked"] == [
        "nccl.gdr_loc", "nccl.socket", "nccl_intra.configured", "nccl_intra.host_memory", "perftest.local_nic",
        "perftest.remote_nic"]
    with open(os.path.join(H200, "validate-playbook.log")) as f:
        log = f.read()
    assert "nccl.configured (torch.distributed, expect direct): not exercised" in log
    assert "GDS unavailable:\n        nvidia-fs not loaded" in log and "failed=0" in log


def test_h200_recorded_outputs_replay():
    """The readers give the same verdicts again from the recorded outputs (the log, the cuFile reports and logs)."""
    by = dict((r["id"], r) for r in _h200_doc()["runs"])
    for rid in ("nccl.configured", "gds.compat_on", "gds.compat_off"):
        r = by[rid]
        if r["tool"] == "cufile_probe":
            res = runs.probe_result(r, r["rc"], r["output_tail"], "", False, None, r["details"]["cufile_log_tail"])
        else:
            res = runs.nccl_result(r, r["rc"], r["output_tail"], "")
        assert (res["status"], res["verdict"]["state"]) == (r["status"], r["verdict"]["state"])
    res = runs.probe_result(by["gds.compat_on"], 0, by["gds.compat_on"]["output_tail"], "", False, None,
                            by["gds.compat_on"]["details"]["cufile_log_tail"])
    assert "without a udev database" in res["verdict"]["reason"] and "ID_FS_USAGE vda" in res["verdict"]["reason"]


def test_h200_recorded_kvikio_verdicts():
    """The same host with KvikIO 26.10 carried as wheels (validate.yml as a user runs it, judge play included): the
    three verdicts the issue asks for, from the playbook - NCCL single rank not exercised, KvikIO's compat mode
    fallback: host memory (data moved, 1.49 GB/s), both compat modes off GDS unavailable: nvidia-fs not loaded."""
    with open(os.path.join(H200, "validate-gpuhost-kvikio.json")) as f:
        doc = json.load(f)
    by = dict((r["id"], r) for r in doc["runs"])
    assert doc["tools"]["kvikio"] == "26.10.00" and doc["tools"]["nvfs_loaded"] is False
    assert paths.label(by["nccl.configured"]["verdict"]) == "not exercised"
    on, off = by["gds.compat_on"], by["gds.compat_off"]
    assert (on["status"], on["tool"], on["env"]["KVIKIO_COMPAT_MODE"]) == ("ok", "kvikio", "ON")
    assert paths.label(on["verdict"]) == "fallback: host memory" and 1e9 < on["bandwidth"] < 2e9
    assert (off["status"], off["verdict"]["state"], off["env"]["KVIKIO_COMPAT_MODE"]) == ("ok", "not_exercised", "OFF")
    assert off["verdict"]["reason"].startswith("GDS unavailable: nvidia-fs not loaded")
    for r in (on, off):      # the readers give the same again from the recorded output
        res = runs.kvikio_result(r, r["rc"], r["output_tail"], "", None, False, [])
        assert (res["status"], res["verdict"]["state"]) == (r["status"], r["verdict"]["state"])
    with open(os.path.join(H200, "validate-playbook-kvikio.log")) as f:
        log = f.read()
    assert "gds.compat_on (kvikio, expect fallback): fallback: host memory" in log
    assert "gds.compat_off (kvikio, expect direct): not exercised - GDS unavailable: nvidia-fs" in log
    assert re.search(r"gpuhost +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0", log)


@pytest.mark.parametrize("argv,rc", [
    (["--gpus", "0", "--size", "1024", "--store", "/"], 2),
    (["--gpus", "1", "--size", "8", "--store", "/"], 2),
    (["--gpus", "1", "--size", "1024", "--store", "/nonexistent-dir"], 2),
])
def test_torch_program_refuses_bad_arguments(argv, rc, capsys):
    from ansible_collections.gpufabric.node.plugins.module_utils.validate import allreduce_torch
    assert allreduce_torch.main(argv) == rc
    line = runs.torch_line(capsys.readouterr().out)
    assert line and line["error"].startswith("bad arguments")


@pytest.mark.parametrize("ranks,factor", [(1, 0.0), (2, 1.0), (8, 1.75)])
def test_torch_program_bus_factor(ranks, factor):
    from ansible_collections.gpufabric.node.plugins.module_utils.validate import allreduce_torch
    assert allreduce_torch.bus_factor(ranks) == pytest.approx(factor)


KVIKIO_BANNER = """!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
   WARNING - KvikIO compat mode
      libcufile.so not used
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
GPU               | NVIDIA H200
GDS driver        | N/A (Compatibility Mode)
cufile read       |   2.10 GiB/s
cufile write      | 901.62 MiB/s
"""


@pytest.mark.parametrize("variant,rc,out,nvfs_loaded,status,state,reason", [
    # KvikIO's own compat mode moved the data: the host path, as the variant expects
    ("compat_on", 0, KVIKIO_BANNER, False, "ok", "fallback", "KvikIO compat mode"),
    # both compat modes off and no nvidia-fs: KvikIO cannot open cuFile's driver; the run says why, it is no error
    ("compat_off", 1, "RuntimeError: cuFile error at: ... cuFileDriverOpen", False, "ok", "not_exercised",
     "GDS unavailable: nvidia-fs not loaded"),
    # the same failure with nvidia-fs loaded is an error of the run
    ("compat_off", 1, "RuntimeError: cuFile error at: ... cuFileDriverOpen", True, "error", "not_exercised",
     "kvikio failed (rc 1)"),
])
def test_kvikio_result(variant, rc, out, nvfs_loaded, status, state, reason):
    from ansible_collections.gpufabric.node.plugins.module_utils.validate import runs
    res = runs.kvikio_result({"variant": variant}, rc, out, "", None, nvfs_loaded, [])
    assert (res["status"], res["verdict"]["state"]) == (status, state)
    assert reason in res["reason"]
    if state == "fallback":
        assert res["verdict"]["fallback"] == "host_memory" and res["bandwidth"] == 2.10 * 2 ** 30
