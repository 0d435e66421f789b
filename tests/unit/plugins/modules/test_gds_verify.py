# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gds_verify run in-process: simulated node tree, a stand-in for the cuFile program, and the replay of the record
taken on a real H200 host without nvidia-fs (fixtures/gds/h200-no-nvfs.json, from tests/device/gds_device_check.py).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys

import pytest

from gpufabric_sim import nvfs_proc
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs
from ansible_collections.gpufabric.node.plugins.modules import gds_verify

RECORD = os.path.join(os.path.dirname(__file__), "fixtures", "gds", "h200-no-nvfs.json")


def put(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(p)):
        os.makedirs(os.path.dirname(p))
    if os.path.exists(p):
        os.chmod(p, 0o644)
    with open(p, "w") as f:
        f.write(text)


def read(root, path):
    with open(os.path.join(root, path.lstrip("/"))) as f:
        return f.read()


@pytest.fixture
def node(tmp_path, monkeypatch, nvfs_lifetime):
    root = str(tmp_path / "root")
    sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    os.makedirs(os.path.join(root, "mnt/data"))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    return root


FAKE_PROGRAM = r'''#!%(python)s
# stands in for "python cufile_probe.py ...": records its argv/env, moves the counters, prints the report
import json, os, sys
root = os.environ["GPUFABRIC_SYSROOT"]
sys.path.insert(0, %(lab)r)
from gpufabric_sim import tree
with open(os.path.join(root, "sys/module/nvidia_fs/parameters/rw_stats_enabled")) as f:
    rw = f.read().strip() == "1"
with open(%(spec)r) as f:
    spec = json.load(f)
with open(os.path.join(%(tmp)r, "seen.json"), "w") as f:
    json.dump({"argv": sys.argv, "rw": rw, "env": dict((k, v) for k, v in os.environ.items() if k.startswith("CUFILE")),
               "config": json.load(open(os.environ["CUFILE_ENV_PATH_JSON"]))}, f)
if rw:
    with open(os.path.join(root, "proc/driver/nvidia-fs/stats"), "w") as f:
        f.write(tree.nvfs_stats_text("2.22.3", "1.11.1.6", True, spec["move"]))
sys.stdout.write(json.dumps(spec["report"]) + "\n")
sys.exit(spec.get("rc", 0))
'''


def fake_program(tmp_path, report, move, rc=0):
    spec = str(tmp_path / "spec.json")
    with open(spec, "w") as f:
        json.dump({"report": report, "move": move, "rc": rc}, f)
    lab = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab"))
    path = str(tmp_path / "fake-python")
    with open(path, "w") as f:
        f.write(FAKE_PROGRAM % {"python": sys.executable, "lab": lab, "spec": spec, "tmp": str(tmp_path)})
    os.chmod(path, stat.S_IRWXU)
    return path


def good_report(size):
    chk = {"matches": True, "first_mismatch": None, "mismatched_bytes": 0}
    io = {"requested": size, "done": size, "calls": [size], "short": False, "error": None}
    return {"ok": True, "error": None, "driver_open": {"err": 0, "name": "CU_FILE_SUCCESS", "cu_err": 0},
            "handle_register": {"err": 0, "name": "CU_FILE_SUCCESS", "cu_err": 0}, "write": io, "read": io,
            "file_check": chk, "gpu_check": chk, "data_matched": True}


def hook_rpcrdma(root, hook=True):
    """The vendor client's rpcrdma loaded; with its nvidia-fs hook it registers while a device is held open."""
    nvfs_proc.load_module(root, "rpcrdma", hook=hook)
    put(root, nvfs.STATS, sim_tree.nvfs_stats_text("2.22.3", "1.11.1.6", True))


def test_check_mode_preconditions_only(node, tmp_path, monkeypatch):
    prog = fake_program(tmp_path, good_report(16 << 20), {"writes": 9})
    before = read(node, nvfs.RW_STATS_PARAM)
    res = run_module(gds_verify, {"path": "/mnt/data", "python": prog}, check_mode=True, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["changed"] is False
    assert res["transfer"] is None and res["gds_active"] is False
    assert not os.path.exists(str(tmp_path / "seen.json"))
    assert read(node, nvfs.RW_STATS_PARAM) == before
    failed = set(p["name"] for p in res["preconditions"] if p["status"] == "fail")
    # the field state of the simulated HGX node: IOMMU translated, nvidia-fs not hooked to any NFS client
    assert {"iommu_mode", "nvidia_fs_storage_module", "vendor_client_bundle", "mount_proto_rdma"} <= failed
    assert set(d["object"] for d in res["drift"]) == failed
    assert all(d["concern"] == "gds" for d in res["drift"])
    gds = res["concerns"]["gds"]
    assert gds["status"] == "drift" and gds["items"] == res["drift"]
    assert gds["reason"].startswith("check mode: %d precondition(s) fail: " % len(failed))


def test_transfer_counted_and_rw_stats_restored(node, tmp_path, monkeypatch):
    hook_rpcrdma(node)
    size = 32 << 20
    prog = fake_program(tmp_path, good_report(size), {"reads": 2, "reads_ok": 2, "read_mib": 32, "writes": 2,
                                                      "writes_ok": 2, "write_mib": 32})
    res = run_module(gds_verify, {"path": "/mnt/data", "python": prog, "size_mib": 32, "nfs_rdma": False},
                     monkeypatch=monkeypatch)
    assert res["gds_active"] is True, res["reasons"]
    assert res["counters"]["delta"]["read_mib"] == 32 and res["changed"] is False
    assert read(node, nvfs.RW_STATS_PARAM).strip() == "0"
    seen = json.load(open(str(tmp_path / "seen.json")))
    assert seen["rw"] is True
    assert seen["env"]["CUFILE_ALLOW_COMPAT_MODE"] == "false"
    assert seen["config"]["properties"]["allow_compat_mode"] is False
    assert seen["argv"][seen["argv"].index("--size") + 1] == str(size)
    assert os.listdir(os.path.join(node, "mnt/data")) == []
    # preconditions still fail (IOMMU translated in the simulated field state): reported, verdict decided by data
    assert res["preconditions_ok"] is False
    assert [d["key"] for d in res["drift"]] == ["precondition"] * len(res["drift"])
    assert res["concerns"] == {"gds": {"status": "ok", "items": [], "reason": "a 32 MiB test transfer with compat "
                                       "mode off moved through nvidia-fs and its data matched"}}
    storage = [p for p in res["preconditions"] if p["name"] == "nvidia_fs_storage_module"][0]
    assert storage["status"] == "ok" and storage["value"]["listed"] == {"wekafsio": "1", "rpcrdma": "(null)"}


def test_compat_fallback_is_not_active(node, tmp_path, monkeypatch):
    hook_rpcrdma(node)
    prog = fake_program(tmp_path, good_report(16 << 20), {})
    res = run_module(gds_verify, {"path": "/mnt/data", "python": prog}, monkeypatch=monkeypatch)
    assert not res.get("failed")
    assert res["gds_active"] is False and res["compat_fallback_suspected"] is True
    assert any("fell back to POSIX I/O" in r for r in res["reasons"])
    assert {"concern": "gds", "object": "/mnt/data", "key": "gds_active", "current": False,
            "desired": True} in res["drift"]
    assert res["concerns"]["gds"]["status"] == "drift" and "fell back to POSIX I/O" in res["concerns"]["gds"]["reason"]
    assert res["concerns"]["gds"]["items"] == res["drift"]


def test_program_crash_restores_and_reports(node, tmp_path, monkeypatch):
    hook_rpcrdma(node)
    prog = fake_program(tmp_path, {}, {"writes": 1}, rc=139)
    res = run_module(gds_verify, {"path": "/mnt/data", "python": prog}, monkeypatch=monkeypatch)
    assert res["gds_active"] is False and any("rc=139" in r for r in res["reasons"])
    assert read(node, nvfs.RW_STATS_PARAM).strip() == "0"


@pytest.mark.parametrize("args,msg", [
    ({"path": "/mnt/data", "size_mib": 0}, "at least 1"),
    ({"path": "/mnt/data", "size_mib": 100000}, "too large"),
    ({"path": "/mnt/missing"}, "not a directory"),
    ({"path": "/mnt/data", "gpu": -2}, "GPU index"),
    ({"path": "/mnt/data", "method": "gdsio", "gdsio_path": None}, "gdsio"),
])
def test_bad_input_fails(node, monkeypatch, args, msg):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(gds_verify.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    res = run_module(gds_verify, args, monkeypatch=monkeypatch)
    assert res.get("failed") and msg in res["msg"]
    if "concerns" in res:  # the gdsio lookup fails before any check
        assert res["concerns"]["gds"]["status"] == "error" and msg in res["concerns"]["gds"]["reason"]


NOT_LISTED = ("rpcrdma is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open "
              "(listed: wekafsio)")


@pytest.mark.parametrize("hook,status,needle", [
    (True, "not_checked", "check mode: every precondition holds, but no test transfer was made"),
    (False, "drift", NOT_LISTED),     # the client's rpcrdma lacks the hook
    (-95, "drift", NOT_LISTED),       # it has the hook, its registration is refused
])
def test_storage_module_on_idle_node(node, tmp_path, monkeypatch, hook, status, needle):
    """A healthy node is idle: its modules file lists no rpcrdma, yet the check passes (it holds a device open);
    an rpcrdma that does not register fails, named."""
    for g in os.listdir(os.path.join(node, "sys/kernel/iommu_groups")):
        put(node, "/sys/kernel/iommu_groups/%s/type" % g, "identity\n")
    hook_rpcrdma(node, hook)
    assert nvfs.parse_modules(read(node, nvfs.MODULES)) == {"wekafsio": "1"}
    assert nvfs.parse_modules(nvfs.Sysroot(node).read_raw(nvfs.MODULES)) == {"wekafsio": "1"}, "idle"
    res = run_module(gds_verify, {"path": "/mnt/data", "nfs_rdma": False}, check_mode=True, monkeypatch=monkeypatch)
    pre = dict((p["name"], p) for p in res["preconditions"])
    assert pre["nvidia_fs_storage_module"]["ok"] is (hook is True)
    gds = res["concerns"]["gds"]
    assert gds["status"] == status and needle in (gds["reason"] if hook is True else pre["nvidia_fs_storage_module"]
                                                  ["reason"])
    if hook is not True:
        assert needle in gds["reason"] and [i["object"] for i in gds["items"]] == ["nvidia_fs_storage_module"]


# ------------------------------------------------------------------------------------------------ H200 record replay

def load_record():
    with open(RECORD) as f:
        return json.load(f)


def record_sysroot(root, rec):
    for path, text in rec["files"].items():
        put(root, path, text)
    for g, t in rec["iommu_groups"].items():
        put(root, "/sys/kernel/iommu_groups/%s/type" % g, (t or "") + "\n")
    os.makedirs(os.path.join(root, rec["test_dir"].lstrip("/")))


def test_replay_h200_without_nvidia_fs(tmp_path, monkeypatch):
    rec = load_record()
    root = str(tmp_path / "root")
    record_sysroot(root, rec)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    probe_out = [r for r in rec["verify_runs"] if r["argv"][1].endswith(nvfs.PROBE_FILE)][0]
    out_file = str(tmp_path / "probe.out")
    with open(out_file, "w") as f:
        f.write(probe_out["stdout"])
    prog = str(tmp_path / "replay-python")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\ncat %s\nexit %d\n" % (out_file, probe_out["rc"]))
    os.chmod(prog, stat.S_IRWXU)
    monkeypatch.setattr(gds_verify.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    res = run_module(gds_verify, {"path": rec["test_dir"], "python": prog}, monkeypatch=monkeypatch)
    assert not res.get("failed")
    assert res["gds_active"] is False and res["compat_fallback_suspected"] is False
    want = rec["verify"]
    assert res["reasons"] == want["reasons"]
    assert [(p["name"], p["status"]) for p in res["preconditions"]] == \
        [(p["name"], p["status"]) for p in want["preconditions"]]
    assert res["transfer"]["driver_open"]["name"] == "CU_FILE_DRIVER_NOT_INITIALIZED"
    assert res["reasons"][0] == "cuFileDriverOpen failed with compat mode off: CU_FILE_DRIVER_NOT_INITIALIZED (5001)."
    assert any("nvidia-fs is not loaded" in r for r in res["reasons"])
    pre = dict((p["name"], p) for p in res["preconditions"])
    assert pre["gpu_driver_open"]["status"] == "ok" and pre["iommu_mode"]["value"] == "off"
    assert pre["mount_proto_rdma"]["value"]["fstype"] == "ext4"


def test_record_compat_on_opens_driver_without_nvidia_fs():
    """DESIGN: cuFileDriverOpen succeeds without nvidia-fs when compat mode is allowed; with it off it does not."""
    rec = load_record()
    runs = dict(((r["compat"], r["mode"]), nvfs.parse_probe_output(r["rc"], r["stdout"], r["stderr"]))
                for r in rec["probe_runs"])
    assert runs[(True, "open")]["driver_open"]["name"] == "CU_FILE_SUCCESS"
    assert runs[(True, "open")]["parameters"]["allow_compat_mode"] is True
    assert runs[(False, "open")]["driver_open"]["name"] == "CU_FILE_DRIVER_NOT_INITIALIZED"
    assert runs[(False, "open")]["parameters"]["allow_compat_mode"] is False
    assert runs[(True, "open")]["driver_properties"]["supported"] == []
    for compat in (True, False):
        active, reasons, _w, _c = nvfs.verdict(runs[(compat, "transfer")], None, None,
                                               nvfs.expected_movement(16 << 20), False)
        assert active is False and reasons
    # with compat allowed the driver opens, but on this microVM (no udev) cuFile cannot describe the volume, so the
    # file handle is refused on ext4 and on tmpfs alike; with compat off the driver itself is not initialised
    extra = [(r["dir"], r["compat"], nvfs.parse_probe_output(r["rc"], r["stdout"], r["stderr"]))
             for r in rec["probe_runs_extra"]]
    for d, compat, rep in extra + [(rec["test_dir"], c, runs[(c, "transfer")]) for c in (True, False)]:
        assert rep["driver_open"]["name"] == ("CU_FILE_SUCCESS" if compat else "CU_FILE_DRIVER_NOT_INITIALIZED"), d
        assert rep["handle_register"]["name"] == ("CU_FILE_HANDLE_NOT_REGISTERED" if compat
                                                  else "CU_FILE_DRIVER_NOT_INITIALIZED"), d


# ------------------------------------------------------------------------------------------------ the gds role

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE_PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: gpufabric.node.gds
      vars:
        gds_profile: %(profile)s
        gds_cufile_properties: {rdma_dev_addr_list: ["10.100.0.1"]}
        gds_cufile_sections: {logging: {level: ERROR}, properties: {max_direct_io_size_kb: 16384}}
        gds_nvfs_module_options: %(opts)s
        gds_verify: false
"""


def play_role(tmp_path, root, profile, opts):
    import subprocess
    play = str(tmp_path / "play.yml")
    with open(play, "w") as f:
        f.write(ROLE_PLAY % {"profile": profile, "opts": json.dumps(opts)})
    env = dict(os.environ, GPUFABRIC_SYSROOT=root, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default")
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    p = subprocess.run([exe, "-c", "local", "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                        play], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    out = p.stdout.decode("utf-8", "replace")
    assert p.returncode == 0, out
    return out


def test_role_cufile_policy_and_modprobe(tmp_path):
    root = str(tmp_path / "root")
    os.makedirs(os.path.join(root, "etc", "modprobe.d"))
    put(root, "/etc/cufile.json", '{\n  // NVIDIA sample comment\n  "properties": {"allow_compat_mode": false}\n}\n')
    out = play_role(tmp_path, root, "production", {"rw_stats_enabled": 1, "peer_stats_enabled": True})
    assert "changed=2" in out
    cfg = json.loads(read(root, "/etc/cufile.json"))          # clean JSON, comments gone
    assert cfg == {"logging": {"level": "ERROR"}, "properties": {"allow_compat_mode": True,
                                                                 "max_direct_io_size_kb": 16384,
                                                                 "rdma_dev_addr_list": ["10.100.0.1"]}}
    assert read(root, "/etc/modprobe.d/nvidia-fs.conf").splitlines()[-1] == \
        "options nvidia_fs peer_stats_enabled=1 rw_stats_enabled=1"
    assert "changed=0" in play_role(tmp_path, root, "production", {"rw_stats_enabled": 1, "peer_stats_enabled": True})
    play_role(tmp_path, root, "test", {})
    assert json.loads(read(root, "/etc/cufile.json"))["properties"]["allow_compat_mode"] is False
    assert not os.path.exists(os.path.join(root, "etc/modprobe.d/nvidia-fs.conf"))
