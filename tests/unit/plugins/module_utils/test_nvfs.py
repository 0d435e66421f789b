# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs: parsers, preconditions, verdict and the counted transfer (against a simulated node tree)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from gpufabric_sim import nvfs_proc
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "modules", "fixtures", "gds")

REAL_STATS_RW = (
    "GDS Version: 1.11.1.6 \n"
    "NVFS statistics(ver: 4.0)\n"
    "NVFS Driver(version: 2.22.3)\n"
    "Mellanox PeerDirect Supported: True\n"
    "IO stats: Enabled, peer IO stats: Enabled\n"
    "Logging level: info\n\n"
    "Active Shadow-Buffer (MiB): 0\n"
    "Active Process: 0\n"
    "Batches\t\t\t\t: n=0 ok=0 err=0 Avg-Submit-Latency(usec)=0\n"
    "Reads\t\t\t\t: n=128 ok=127 err=1 readMiB=64 io_state_err=0\n"
    "Reads\t\t\t\t: Bandwidth(MiB/s)=4200 Avg-Latency(usec)=310\n"
    "Sparse Reads\t\t        : n=0 io=0 holes=0 pages=0 \n"
    "Writes\t\t\t\t: n=64 ok=64 err=0 writeMiB=32 io_state_err=0 pg-cache=0 pg-cache-fail=0 pg-cache-eio=0\n"
    "Writes\t\t\t\t: Bandwidth(MiB/s)=2500 Avg-Latency(usec)=800\n"
    "Mmap\t\t\t\t: n=3 ok=3 err=0 munmap=3\n"
    "Bar1-map\t\t\t: n=3 ok=3 err=0 free=3 callbacks=0 active=0 delay-frees=0\n"
    "Error\t\t\t\t: cpu-gpu-pages=0 sg-ext=0 dma-map=0 dma-ref=0\n"
    "Ops\t\t\t\t: Read=0 Write=0 BatchIO=0\n"
    "GPU 0000:1a:00.0 uuid:7a3e0000-5c1d-4a2b-9e3f-000000000001 : Registered_MiB=16 Cache_MiB=0 max_pinned_MiB=16 "
    "cross_root_port(%)=0\n"
    "GPU 0000:3b:00.0 uuid:7a3e0001-5c1d-4a2b-9e3f-000000000001 : Registered_MiB=0 Cache_MiB=2 max_pinned_MiB=0 \n"
)


def sim_stats(rw, counters=None):
    return sim_tree.nvfs_stats_text("2.22.3", "1.11.1.6", rw, counters)


# ------------------------------------------------------------------------------------------------ parsers

STATS_CASES = [
    ("real-rw", REAL_STATS_RW,
     {"reads": 128, "reads_ok": 127, "read_err": 1, "read_mib": 64, "read_io_state_err": 0,
      "writes": 64, "writes_ok": 64, "write_err": 0, "write_mib": 32, "write_io_state_err": 0},
     {"io_stats_enabled": True, "peer_io_stats_enabled": True, "driver_version": "2.22.3", "gds_version": "1.11.1.6",
      "stats_version": "4.0", "peerdirect_supported": True, "logging_level": "info", "active_process": 0}),
    ("sim-rw-off", sim_stats(False, {"read_err": 2}),
     {"reads": None, "reads_ok": None, "read_err": 2, "read_mib": None, "read_io_state_err": 0,
      "writes": None, "writes_ok": None, "write_err": 0, "write_mib": None, "write_io_state_err": 0},
     {"io_stats_enabled": False}),
    ("sim-rw-on", sim_stats(True, {"reads": 5, "reads_ok": 5, "read_mib": 16, "writes": 3, "writes_ok": 3,
                                   "write_mib": 16}),
     {"reads": 5, "reads_ok": 5, "read_err": 0, "read_mib": 16, "read_io_state_err": 0,
      "writes": 3, "writes_ok": 3, "write_err": 0, "write_mib": 16, "write_io_state_err": 0},
     {"io_stats_enabled": True}),
    ("empty", "", dict((k[2], None) for k in nvfs.COUNTER_KEYS), {}),
]


@pytest.mark.parametrize("name,text,want_counters,want_header", STATS_CASES, ids=[c[0] for c in STATS_CASES])
def test_parse_stats(name, text, want_counters, want_header):
    stats = nvfs.parse_stats(text)
    assert nvfs.counters(stats) == want_counters
    for k, v in want_header.items():
        assert stats[k] == v


def test_parse_stats_perf_lines_and_gpus():
    s = nvfs.parse_stats(REAL_STATS_RW)
    assert s["read_perf"] == {"Bandwidth(MiB/s)": 4200, "Avg_Latency(usec)": 310}
    assert s["write_perf"]["Bandwidth(MiB/s)"] == 2500
    assert s["bar1_map"]["delay_frees"] == 0 and s["mmap"]["munmap"] == 3
    assert s["gpus"] == [
        {"bdf": "0000:1a:00.0", "uuid": "7a3e0000-5c1d-4a2b-9e3f-000000000001", "registered_mib": 16,
         "cache_mib": 0, "max_pinned_mib": 16, "cross_root_port_pct": 0},
        {"bdf": "0000:3b:00.0", "uuid": "7a3e0001-5c1d-4a2b-9e3f-000000000001", "registered_mib": 0,
         "cache_mib": 2, "max_pinned_mib": 0},
    ]


@pytest.mark.parametrize("text,want", [
    ("rpcrdma: 4.0.35\n", {"rpcrdma": "4.0.35"}),
    ("nvme: 1\nnvme_rdma: 1\nrpcrdma: (null)\n", {"nvme": "1", "nvme_rdma": "1", "rpcrdma": "(null)"}),
    ("", {}),
    (None, {}),
    ("garbage line\n", {}),
])
def test_parse_modules(text, want):
    assert nvfs.parse_modules(text) == want


@pytest.mark.parametrize("text,want", [("version: 2.22\n", "2.22"), ("version: 2.17", "2.17"), ("", None),
                                       (None, None), ("2.22", None)])
def test_parse_version(text, want):
    assert nvfs.parse_version(text) == want


def test_counter_delta_reset_and_missing():
    before = {"reads": 10, "writes": 5, "read_mib": None}
    after = {"reads": 30, "writes": 2, "read_mib": 4}
    assert nvfs.counter_delta(before, after) == {"reads": 20, "writes": 2, "read_mib": None}


MOUNTINFO = (
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "40 22 0:50 / /mnt/data rw,relatime shared:20 - nfs4 10.100.0.50:/export rw,vers=4.2,rsize=1048576,"
    "proto=rdma,port=20049,addr=10.100.0.50\n"
    "41 22 0:51 / /mnt/tcp\\040data rw,relatime - nfs 10.100.0.50:/export rw,vers=3,proto=tcp\n"
    "42 40 0:52 / /mnt/data/scratch rw - tmpfs tmpfs rw,size=1024k\n"
)


@pytest.mark.parametrize("path,mountpoint,fstype,proto", [
    ("/mnt/data/gds", "/mnt/data", "nfs4", "rdma"),
    ("/mnt/data", "/mnt/data", "nfs4", "rdma"),
    ("/mnt/data/scratch/x", "/mnt/data/scratch", "tmpfs", None),
    ("/mnt/tcp data/x", "/mnt/tcp data", "nfs", "tcp"),
    ("/mnt/datax", "/", "ext4", None),
    ("/root", "/", "ext4", None),
])
def test_mount_for(path, mountpoint, fstype, proto):
    m = nvfs.mount_for(nvfs.parse_mountinfo(MOUNTINFO), path)
    assert (m["mountpoint"], m["fstype"], nvfs.mount_proto(m)) == (mountpoint, fstype, proto)


def test_proc_mounts_shape():
    mounts = nvfs.parse_proc_mounts("10.0.0.1:/e /mnt/e nfs rw,proto=rdma,port=20049 0 0\n/dev/vda / ext4 rw 0 0\n")
    assert nvfs.mount_proto(nvfs.mount_for(mounts, "/mnt/e/f")) == "rdma"


# ------------------------------------------------------------------------------------------------ cufile.json

def test_strip_comments_of_real_cufile_json():
    with open(os.path.join(FIXTURES, "h200-no-nvfs.json")) as f:
        rec = json.load(f)
    cfg = nvfs.load_cufile_json(rec["files"]["/etc/cufile.json"])
    assert cfg["properties"]["max_direct_io_size_kb"] == 16384
    assert "//" not in nvfs.render_cufile_json(cfg).replace("http://", "")


def test_strip_comments_keeps_strings():
    text = '{"a": "http://x/*y*/", /* c */ "b": 1 // tail\n}'
    assert json.loads(nvfs.strip_json_comments(text)) == {"a": "http://x/*y*/", "b": 1}


@pytest.mark.parametrize("base,compat,props,want_props", [
    ({}, False, None, {"allow_compat_mode": False}),
    ({"properties": {"allow_compat_mode": True, "max_direct_io_size_kb": 16384}}, False, None,
     {"allow_compat_mode": False, "max_direct_io_size_kb": 16384}),
    ({}, True, {"rdma_dev_addr_list": ["10.100.0.1", "10.100.1.1"]},
     {"allow_compat_mode": True, "rdma_dev_addr_list": ["10.100.0.1", "10.100.1.1"]}),
    ({"properties": {"x": 1}}, None, {"y": 2}, {"x": 1, "y": 2}),
])
def test_cufile_config_render(base, compat, props, want_props):
    text = nvfs.render_cufile_json(nvfs.cufile_config(base, compat, props))
    assert json.loads(text)["properties"] == want_props
    assert text.endswith("}\n")


def test_load_cufile_json_rejects_garbage():
    with pytest.raises(nvfs.GdsError):
        nvfs.load_cufile_json("{broken")
    with pytest.raises(nvfs.GdsError):
        nvfs.load_cufile_json("[1, 2]")


# ------------------------------------------------------------------------------------------------ preconditions

@pytest.fixture
def node(tmp_path, nvfs_lifetime):
    root = str(tmp_path / "root")
    sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    os.makedirs(os.path.join(root, "mnt/data"))
    return root


def put(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    if os.path.exists(p):
        os.chmod(p, 0o644)
    with open(p, "w") as f:
        f.write(text)


def healthy(root):
    """Turn the field-state simulated node into one where every precondition holds."""
    for g in os.listdir(os.path.join(root, "sys/kernel/iommu_groups")):
        put(root, "/sys/kernel/iommu_groups/%s/type" % g, "identity\n")
    nvfs_proc.load_module(root, "rpcrdma", hook=True)  # the vendor client's rpcrdma registers while a device is open
    put(root, nvfs.BUNDLE_PARAM, "4.0.35\n")
    put(root, "/sys/module/rpcrdma/srcversion", "ABCDEF0123456789ABCDEF0\n")
    put(root, "/proc/self/mountinfo", MOUNTINFO)
    # /proc/driver/nvidia-fs/stats is generated on read; once rw_stats_enabled=1 it prints the counters
    put(root, nvfs.STATS, sim_stats(True))


def modinfo_runner(srcversion="ABCDEF0123456789ABCDEF0", rc=0):
    calls = []

    def run(argv, env=None):
        calls.append(argv)
        err = "" if rc == 0 else "modinfo: ERROR: Module rpcrdma not found."
        return rc, (srcversion + "\n") if srcversion else "", err
    run.calls = calls
    return run


def rm(root, path):
    import shutil
    p = os.path.join(root, path.lstrip("/"))
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.unlink(p)


PRE_CASES = [
    ("all-ok", lambda r: None, {}, {}),
    ("proprietary-driver", lambda r: put(r, "/proc/driver/nvidia/version",
                                         "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue\n"),
     {}, {"gpu_driver_open": "fail"}),
    ("no-driver", lambda r: (rm(r, "/proc/driver/nvidia"), rm(r, "/sys/module/nvidia")), {},
     {"gpu_driver_open": "fail"}),
    ("nvfs-missing", lambda r: (rm(r, nvfs.NVFS_PROC), rm(r, "/sys/module/nvidia_fs")), {},
     {"nvidia_fs_loaded": "fail", "nvidia_fs_stats": "fail", "nvidia_fs_storage_module": "fail"}),
    ("no-rw-param", lambda r: rm(r, nvfs.RW_STATS_PARAM), {}, {"nvidia_fs_stats": "fail"}),
    ("rpcrdma-lacks-hook", lambda r: nvfs_proc.load_module(r, "rpcrdma", hook=False), {},
     {"nvidia_fs_storage_module": "fail"}),
    ("rpcrdma-registration-refused", lambda r: nvfs_proc.load_module(r, "rpcrdma", hook=-95), {},
     {"nvidia_fs_storage_module": "fail"}),
    ("other-storage-module", lambda r: nvfs_proc.load_module(r, "nvme", hook=True), {"storage_module": "nvme"}, {}),
    ("no-nvfs-device", lambda r: rm(r, "/dev"), {}, {"nvidia_fs_storage_module": "fail"}),
    ("iommu-translated", lambda r: [put(r, "/sys/kernel/iommu_groups/%s/type" % g, "DMA-FQ\n")
                                    for g in os.listdir(os.path.join(r, "sys/kernel/iommu_groups"))], {},
     {"iommu_mode": "fail"}),
    ("iommu-off", lambda r: rm(r, "/sys/kernel/iommu_groups"), {}, {}),
    ("in-tree-sunrpc", lambda r: rm(r, nvfs.BUNDLE_PARAM), {}, {"vendor_client_bundle": "fail"}),
    ("rpcrdma-not-loaded", lambda r: rm(r, "/sys/module/rpcrdma"), {},
     {"vendor_client_srcversion": "fail", "nvidia_fs_storage_module": "fail"}),
    ("rpcrdma-builtin", lambda r: rm(r, "/sys/module/rpcrdma/srcversion"), {}, {"vendor_client_srcversion": "fail"}),
    ("srcversion-mismatch", lambda r: None, {"run": modinfo_runner("0000000000000000000000A")},
     {"vendor_client_srcversion": "fail"}),
    ("modinfo-no-file", lambda r: None, {"run": modinfo_runner(None, rc=1)}, {"vendor_client_srcversion": "fail"}),
    ("no-modinfo", lambda r: None, {"modinfo": None}, {}),
    ("tcp-mount", lambda r: None, {"path": "/mnt/tcp data/x"}, {"mount_proto_rdma": "fail"}),
    ("local-disk", lambda r: None, {"path": "/mnt"}, {"mount_proto_rdma": "fail"}),
    ("local-disk-nfs-rdma-off", lambda r: None, {"path": "/mnt", "nfs_rdma": False},
     {"mount_proto_rdma": "skip", "vendor_client_bundle": "skip", "vendor_client_srcversion": "skip"}),
    ("proc-mounts-fallback", lambda r: (rm(r, "/proc/self/mountinfo"), put(
        r, "/proc/mounts", "10.0.0.1:/e /mnt/data nfs4 rw,proto=rdma 0 0\n/dev/vda / ext4 rw 0 0\n")), {}, {}),
    ("cufile-json-broken", lambda r: put(r, nvfs.CUFILE_JSON, "{\"properties\": {,}"), {}, {"cufile_json": "fail"}),
    ("cufile-json-comments", lambda r: put(r, nvfs.CUFILE_JSON, "{ // c\n \"properties\": {}\n}\n"), {}, {}),
]


@pytest.mark.parametrize("name,mutate,kwargs,want_fail", PRE_CASES, ids=[c[0] for c in PRE_CASES])
def test_preconditions(node, name, mutate, kwargs, want_fail):
    healthy(node)
    mutate(node)
    kw = {"path": "/mnt/data", "run": modinfo_runner(), "modinfo": "/sbin/modinfo"}
    kw.update(kwargs)
    pcs = nvfs.preconditions(Sysroot(node), **kw)
    names = [p["name"] for p in pcs]
    assert names == ["gpu_driver_open", "nvidia_fs_loaded", "nvidia_fs_stats", "nvidia_fs_storage_module",
                     "iommu_mode", "vendor_client_bundle", "vendor_client_srcversion", "mount_proto_rdma",
                     "cufile_json"]
    got = dict((p["name"], p["status"]) for p in pcs if p["status"] != "ok")
    assert got == want_fail
    for p in pcs:
        assert p["reason"] and p["ok"] is {"ok": True, "fail": False, "skip": None}[p["status"]]


STORAGE_CASES = [
    # (hook of rpcrdma, storage_module, ok, reason parts)
    (True, "rpcrdma", True, ["rpcrdma is listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open "
                             "(rpcrdma: (null))"]),
    (False, "rpcrdma", False, ["rpcrdma is not listed", "while /dev/nvidia-fs0 is held open (listed: wekafsio)",
                               "does not export rpcrdma_register_nvfs_dma_ops"]),
    (-95, "rpcrdma", False, ["rpcrdma is not listed", "nvfs registration failed"]),
    (True, "nvme", False, ["nvme is not listed", "(listed: rpcrdma, wekafsio)", "nvme_v1_register_nvfs_dma_ops"]),
]


@pytest.mark.parametrize("hook,module,ok,parts", STORAGE_CASES)
def test_storage_module_read_while_held(node, hook, module, ok, parts):
    """An idle node's modules file lists no storage module; the check holds /dev/nvidia-fs0 open while it reads."""
    healthy(node)
    nvfs_proc.load_module(node, "rpcrdma", hook=hook)
    sr = Sysroot(node)
    assert nvfs.parse_modules(sr.read_raw(nvfs.MODULES)) == {"wekafsio": "1"}, "idle: nothing registered"
    pc = [p for p in nvfs.preconditions(sr, "/mnt/data", storage_module=module)
          if p["name"] == "nvidia_fs_storage_module"][0]
    assert pc["ok"] is ok
    for part in parts:
        assert part in pc["reason"]
    assert pc["value"]["device"] == "/dev/nvidia-fs0" and pc["value"]["held"] is True
    assert ("rpcrdma" in pc["value"]["listed"]) is (hook is True)
    assert nvfs.parse_modules(sr.read_raw(nvfs.MODULES)) == {"wekafsio": "1"}, "closed again: unregistered"


# ------------------------------------------------------------------------------------------------ verdict

SIZE = 16 * nvfs.MIB
EXP = nvfs.expected_movement(SIZE)
C0 = {"reads": 100, "reads_ok": 100, "read_err": 0, "read_mib": 50, "read_io_state_err": 0,
      "writes": 10, "writes_ok": 10, "write_err": 0, "write_mib": 5, "write_io_state_err": 0}


def moved(**d):
    out = dict(C0)
    for k, v in d.items():
        out[k] += v
    return out


GOOD_MOVE = moved(reads=4, reads_ok=4, read_mib=16, writes=4, writes_ok=4, write_mib=16)


def io(done=SIZE, calls=None, short=False, error=None):
    return {"requested": SIZE, "done": done, "calls": calls or [done], "short": short, "error": error}


def transfer(**kw):
    opened = {"call": "cuFileDriverOpen", "err": 0, "name": "CU_FILE_SUCCESS"}
    t = {"method": "probe", "ok": True, "error": None, "driver_open": opened,
         "handle_register": {"err": 0, "name": "CU_FILE_SUCCESS"}, "write": io(), "read": io(),
         "file_check": {"matches": True, "first_mismatch": None, "mismatched_bytes": 0},
         "gpu_check": {"matches": True, "first_mismatch": None, "mismatched_bytes": 0}, "data_matched": True}
    t.update(kw)
    return t


BAD = {"matches": False, "first_mismatch": 4096, "mismatched_bytes": 512}
VERDICT_CASES = [
    ("all-good", transfer(), C0, GOOD_MOVE, True, True, [], False, []),
    ("data-mismatch", transfer(gpu_check=BAD, data_matched=False, ok=False), C0, GOOD_MOVE, True, False,
     ["GPU buffer read back by cuFileRead differs from the pattern: 512 bytes differ, the first at offset 4096"],
     False, []),
    ("file-mismatch", transfer(file_check=BAD, data_matched=False, ok=False), C0, GOOD_MOVE, True, False,
     ["file written by cuFileWrite differs"], False, []),
    ("counters-not-moving", transfer(), C0, dict(C0), True, False,
     ["did not move enough", "fell back to POSIX I/O"], True, []),
    ("counters-short", transfer(), C0, moved(reads=1, read_mib=8, writes=1, write_mib=16), True, False,
     ["readMiB moved by 8, at least 16 expected"], False, []),
    ("short-write-completed", transfer(write=io(calls=[4 * nvfs.MIB, 12 * nvfs.MIB], short=True)), C0, GOOD_MOVE,
     True, True, [], False, ["cuFileWrite returned short counts"]),
    ("short-write-incomplete", transfer(write=io(done=4 * nvfs.MIB, calls=[4 * nvfs.MIB, 0], short=True,
                                                 error={"name": "NO_PROGRESS", "message": "no progress"}),
                                        file_check=BAD, data_matched=False, ok=False),
     C0, moved(writes=1, write_mib=4), True, False, ["cuFileWrite moved 4194304 of 16777216 bytes (NO_PROGRESS"],
     False, []),
    ("compat-without-nvfs", transfer(), None, None, False, False, ["although nvidia-fs is not loaded"], True, []),
    ("counters-unavailable", transfer(), dict((k, None) for k in C0), dict((k, None) for k in C0), True, False,
     ["counters are not available"], False, []),
    ("io-errors-counted", transfer(), C0, moved(reads=4, read_mib=16, writes=4, write_mib=16, write_err=2), True,
     True, [], False, ["counted 2 read/write errors"]),
    ("driver-open-fails", transfer(driver_open={"err": 5001, "name": "CU_FILE_DRIVER_NOT_INITIALIZED"},
                                   handle_register={"err": 5001, "name": "CU_FILE_DRIVER_NOT_INITIALIZED"},
                                   write=None, read=None, file_check=None, gpu_check=None, data_matched=False,
                                   ok=False, error="cuFileHandleRegister failed: CU_FILE_DRIVER_NOT_INITIALIZED"),
     None, None, False, False, ["cuFileDriverOpen failed with compat mode off: CU_FILE_DRIVER_NOT_INITIALIZED (5001)",
                                "nvidia-fs is not loaded"], False, []),
    ("probe-crashed", {"method": "probe", "ok": False, "error": "the cuFile test program exited with rc=-11 "
                       "(killed by signal 11)", "data_matched": False}, C0, dict(C0), True, False,
     ["killed by signal 11"], False, []),
]


@pytest.mark.parametrize("name,t,before,after,loaded,active,reason_parts,compat,warn_parts", VERDICT_CASES,
                         ids=[c[0] for c in VERDICT_CASES])
def test_verdict(name, t, before, after, loaded, active, reason_parts, compat, warn_parts):
    got_active, reasons, warns, got_compat = nvfs.verdict(t, before, after, EXP, loaded)
    assert got_active is active
    assert got_compat is compat
    text = " | ".join(reasons)
    for part in reason_parts:
        assert part in text
    if active:
        assert reasons == []
    else:
        assert reasons
    for part in warn_parts:
        assert part in " | ".join(warns)


def test_verdict_counts_nvfs_errors_when_not_active():
    _a, reasons, _w, _c = nvfs.verdict(transfer(), C0, moved(reads=4, read_mib=8, writes=4, write_mib=16, read_err=3),
                                       EXP, True)
    assert any("3 read/write errors" in r for r in reasons)


# ------------------------------------------------------------------------------------------------ verify


class FakeTransfer(object):
    """Runner standing in for the cuFile program: moves the simulated nvidia-fs counters and prints a report."""

    def __init__(self, root, report, move=None, raise_exc=None, rc=0):
        self.root, self.report, self.move, self.raise_exc, self.rc = root, report, move, raise_exc, rc
        self.calls = []
        self.rw_during = None

    def __call__(self, argv, env=None):
        self.calls.append((argv, env))
        self.rw_during = Sysroot(self.root).read(nvfs.RW_STATS_PARAM)
        if argv and argv[0] == "/sbin/modinfo":
            return 0, "ABCDEF0123456789ABCDEF0\n", ""
        cfg = json.load(open(env["CUFILE_ENV_PATH_JSON"]))
        assert cfg["properties"]["allow_compat_mode"] is False
        assert env["CUFILE_ALLOW_COMPAT_MODE"] == "false"
        if self.raise_exc:
            raise self.raise_exc
        if self.move is not None:
            put(self.root, nvfs.STATS, sim_stats(self.rw_during == "1", self.move))
        return self.rc, json.dumps(self.report) + "\n", ""


def test_verify_good_transfer_restores_rw_stats(node):
    healthy(node)
    put(node, nvfs.CUFILE_JSON, '{"properties": {"allow_compat_mode": true, "rdma_dev_addr_list": ["10.100.0.1"]}}')
    run = FakeTransfer(node, transfer(), move={"reads": 4, "reads_ok": 4, "read_mib": 16, "writes": 4,
                                               "writes_ok": 4, "write_mib": 16})
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="/usr/bin/python3", modinfo="/sbin/modinfo")
    assert res["gds_active"] is True, res["reasons"]
    assert res["reasons"] == [] and res["preconditions_ok"] is True
    assert run.rw_during == "1"
    assert Sysroot(node).read(nvfs.RW_STATS_PARAM) == "0"
    assert res["rw_stats_enabled"]["restored"] is True
    assert res["counters"]["delta"]["write_mib"] == 16
    argv, env = [c for c in run.calls if c[0][0] != "/sbin/modinfo"][0]
    assert argv[0] == "/usr/bin/python3" and argv[1].endswith("cufile_probe.py") and "--dir" in argv
    assert os.listdir(os.path.join(node, "mnt/data")) == []   # work dir removed


def test_verify_compat_fallback(node):
    healthy(node)
    run = FakeTransfer(node, transfer(), move={})
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo")
    assert res["gds_active"] is False and res["compat_fallback_suspected"] is True


def test_verify_restores_rw_stats_when_transfer_raises(node):
    healthy(node)
    run = FakeTransfer(node, transfer(), raise_exc=RuntimeError("boom"))
    with pytest.raises(RuntimeError):
        nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo")
    assert run.rw_during == "1"
    assert Sysroot(node).read(nvfs.RW_STATS_PARAM) == "0"
    assert os.listdir(os.path.join(node, "mnt/data")) == []


def test_verify_keeps_rw_stats_already_on(node):
    healthy(node)
    put(node, nvfs.RW_STATS_PARAM, "1\n")
    run = FakeTransfer(node, transfer(), move={"reads": 1, "read_mib": 16, "writes": 1, "write_mib": 16})
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo")
    assert res["gds_active"] is True
    assert res["rw_stats_enabled"] == {"before": "1", "during": "1", "restored": None, "error": None}


def test_verify_counters_unavailable_without_param(node):
    healthy(node)
    put(node, nvfs.STATS, sim_stats(False))
    rm(node, nvfs.RW_STATS_PARAM)
    run = FakeTransfer(node, transfer(), move={"read_err": 0})
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo")
    assert res["gds_active"] is False
    assert any("counters are not available" in r for r in res["reasons"])
    assert any("nvidia_fs_stats" in r for r in res["reasons"])


def test_verify_probe_crash(node):
    healthy(node)
    run = FakeTransfer(node, {}, move={}, rc=-11)
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo")
    assert res["gds_active"] is False
    assert any("signal 11" in r for r in res["reasons"])


def test_verify_check_mode_touches_nothing(node):
    healthy(node)
    run = FakeTransfer(node, transfer(), move={})
    before = open(os.path.join(node, nvfs.RW_STATS_PARAM.lstrip("/"))).read()
    res = nvfs.verify(Sysroot(node), "/mnt/data", 16, run=run, python="py", modinfo="/sbin/modinfo",
                      check_mode=True)
    assert res["transfer"] is None and res["gds_active"] is False
    assert [c for c in run.calls if c[0][0] != "/sbin/modinfo"] == []
    assert open(os.path.join(node, nvfs.RW_STATS_PARAM.lstrip("/"))).read() == before
    assert os.listdir(os.path.join(node, "mnt/data")) == []


@pytest.mark.parametrize("path,size,gpu,method,msg", [
    ("/mnt/data", 0, 0, "probe", "at least 1"),
    ("/mnt/data", 5000, 0, "probe", "too large"),
    ("/mnt/nothere", 16, 0, "probe", "not a directory"),
    ("/etc/cufile.json", 16, 0, "probe", "not a directory"),
    ("/mnt/data", 16, -1, "probe", "GPU index"),
    ("/mnt/data", 16, 0, "gdsio", "gdsio was not found"),
])
def test_verify_bad_input(node, path, size, gpu, method, msg):
    put(node, nvfs.CUFILE_JSON, "{}")
    with pytest.raises(nvfs.GdsError) as e:
        nvfs.verify(Sysroot(node), path, size, gpu=gpu, run=None, python="py", method=method)
    assert msg in str(e.value)


@pytest.mark.parametrize("out,rc,done,xfer,err", [
    ("IoType: WRITE XferType: GPUD Threads: 1 DataSetSize: 16384/16384(KiB) IOSize: 1024(KiB) Throughput: 2.1 "
     "GiB/sec, Avg_Latency: 480.0 usecs ops: 16 total_time 0.01 secs\n", 0, SIZE, "GPUD", False),
    ("IoType: READ XferType: GPUD Threads: 1 DataSetSize: 8192/16384(KiB) IOSize: 1024(KiB)\n", 0, SIZE // 2,
     "GPUD", False),
    ("file register error: GPUDirect Storage not supported on current file\n", 1, 0, None, True),
    ("IoType: READ XferType: GPUD Threads: 1 DataSetSize: 16384/16384(KiB)\nverify failed at offset 0\n", 0, SIZE,
     "GPUD", True),
])
def test_parse_gdsio(out, rc, done, xfer, err):
    r = nvfs.parse_gdsio(rc, out, "", SIZE)
    assert (r["done"], r["xfer_type"], r["error"] is not None) == (done, xfer, err)
