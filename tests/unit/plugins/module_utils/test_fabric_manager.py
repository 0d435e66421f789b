# -*- coding: utf-8 -*-
"""The fabric_manager concern: nvidia-smi's NVLink status parsed, the status from the Fabric Manager facts and the
links, and the read on simulated HGX and PCIe nodes (the body concern_check runs, and the one-call check)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from gpufabric_sim import tree as sim_tree
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.fabric_manager import check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import SYSROOT_ENV
from ansible_collections.gpufabric.node.plugins.modules import concern_check

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures",
                                         "nvlink"))


def fixture(name):
    with open(os.path.join(FIXTURES, name) if "/" not in name else os.path.join(FIXTURES, "..", name)) as f:
        return f.read()


@pytest.mark.parametrize("name,gpus,links,down", [
    ("hgx-h100-all-up.txt", 8, 144, []),
    ("hgx-h100-gpu3-two-down.txt", 8, 144, [(3, 4), (3, 5)]),
    ("pcie-gpu-no-links.txt", 1, 0, []),
])
def test_parse_nvlink_status(name, gpus, links, down):
    parsed = check.parse_nvlink_status(fixture(name))
    assert len(parsed) == gpus
    assert sum(len(g["links"]) for g in parsed) == links
    assert [(g["gpu"], lk["link"]) for g in parsed for lk in g["links"] if lk["state"] != "active"] == down
    for g in parsed:
        assert g["uuid"].startswith("GPU-")
        assert all(lk["gbps"] == 26.562 for lk in g["links"] if lk["state"] == "active")


@pytest.mark.parametrize("text,want", [
    ("", []),
    ("No devices were found\n", []),
    ("  Link 0: 26.562 GB/s\n", []),   # a link before any GPU line belongs to nothing
    ("GPU 0: X (UUID: GPU-1)\n  Link 0: <inactive>\n  Link 1: 25GB/s\n  Link 2: N/A\n",
     [{"gpu": 0, "name": "X", "uuid": "GPU-1", "links": [
         {"link": 0, "state": "inactive", "gbps": None, "raw": "<inactive>"},
         {"link": 1, "state": "active", "gbps": 25.0, "raw": "25GB/s"},
         {"link": 2, "state": "unknown", "gbps": None, "raw": "N/A"}]}]),
    ("GPU 1: NVIDIA H200\n\tLink 17: 26.562 GB/s\n",
     [{"gpu": 1, "name": "NVIDIA H200", "uuid": None,
       "links": [{"link": 17, "state": "active", "gbps": 26.562, "raw": "26.562 GB/s"}]}]),
])
def test_parse_edge_cases(text, want):
    assert check.parse_nvlink_status(text) == want


FM_UP = {"needed": True, "running": True, "pids": [2817]}
FM_DOWN = {"needed": True, "running": False, "pids": []}
NO_SWITCH = {"needed": False, "running": False, "pids": []}


@pytest.mark.parametrize("fm,nvlink,nvsmi,status,reason,keys", [
    (NO_SWITCH, None, None, "not_applicable", "no NVSwitch", []),
    (NO_SWITCH, None, "rc=9: boom", "not_applicable", "no NVSwitch", []),
    (FM_UP, "hgx-h100-all-up.txt", None, "ok", "8 GPU(s), 144 link(s) active", []),
    (FM_UP, None, "missing", "ok", "NVLink state not read: nvidia-smi is not installed (read it with nvidia-smi "
                                   "nvlink --status)", []),
    (FM_DOWN, None, "missing", "drift", "nvidia-fabricmanager is not running: CUDA fails with error 802",
     [("nvidia-fabricmanager", "running")]),
    (FM_UP, "hgx-h100-gpu3-two-down.txt", None, "drift", "GPU 3: NVLink link(s) 4, 5 down",
     [("GPU 3", "nvlink_down")]),
    (FM_DOWN, "hgx-h100-gpu3-two-down.txt", None, "drift", "not running",
     [("nvidia-fabricmanager", "running"), ("GPU 3", "nvlink_down")]),
    (FM_UP, "pcie-gpu-no-links.txt", None, "drift", "GPU 0: no NVLink reported", [("GPU 0", "nvlink")]),
    # recorded on a real H200 without NVLink peers: empty output, rc 0
    (FM_UP, "validate/h200-microvm/nvidia-smi-nvlink-status.txt", None, "drift",
     "nvidia-smi: no GPU with NVLink reported", [("nvidia-smi", "nvlink")]),
    (NO_SWITCH, "validate/h200-microvm/nvidia-smi-nvlink-status.txt", None, "not_applicable", "no NVSwitch", []),
    (FM_UP, None, "rc=255: NVML: Insufficient Permissions", "error", "nvidia-smi nvlink --status failed: rc=255", []),
])
def test_status(fm, nvlink, nvsmi, status, reason, keys):
    parsed = check.parse_nvlink_status(fixture(nvlink)) if nvlink else None
    doc = check.status(fm, parsed, nvsmi)
    assert doc["status"] == status
    assert reason in doc["reason"]
    assert [(i["object"], i["key"]) for i in doc["items"]] == keys
    assert all(i["concern"] == "fabric_manager" for i in doc["items"])


def test_down_links_are_listed_as_current():
    doc = check.status(FM_UP, check.parse_nvlink_status(fixture("hgx-h100-gpu3-two-down.txt")))
    assert doc["items"] == [{"concern": "fabric_manager", "object": "GPU 3", "key": "nvlink_down", "current": [4, 5],
                             "desired": []}]


# --- the read, on simulated nodes --------------------------------------------------------------------------

def fake_nvidia_smi(bindir, output, rc=0):
    """An nvidia-smi on PATH that prints ``output`` for ``nvlink --status`` (the only command the read runs)."""
    path = os.path.join(bindir, "nvidia-smi")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n[ \"$1 $2\" = \"nvlink --status\" ] || exit 64\ncat <<'EOF'\n%sEOF\nexit %d\n"
                % (output, rc))
    os.chmod(path, stat.S_IRWXU)


@pytest.fixture
def node(tmp_path, monkeypatch):
    def make(topology, nvidia_smi=None, rc=0):
        root = str(tmp_path / "node")
        sim_tree.build_tree(root, topology)
        bindir = str(tmp_path / "bin")
        os.mkdir(bindir)
        if nvidia_smi is not None:
            fake_nvidia_smi(bindir, nvidia_smi, rc)
        monkeypatch.setenv(SYSROOT_ENV, root)
        monkeypatch.setenv("PATH", bindir + os.pathsep + "/usr/bin:/bin")
        return root
    return make


def test_hgx_node_with_fabric_manager_and_links_up(node, monkeypatch):
    node("hgx-h200", fixture("hgx-h100-all-up.txt"))
    res = run_module(concern_check, {"concern": "fabric_manager"}, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["changed"] is False
    assert res["fabric_manager"]["needed"] is True and res["fabric_manager"]["running"] is True
    assert res["concerns"]["fabric_manager"]["status"] == "ok"
    assert len(res["nvlink"]) == 8


def test_hgx_node_without_nvidia_smi_says_what_was_not_read(node, monkeypatch):
    node("hgx-h200")
    res = run_module(concern_check, {"concern": "fabric_manager"}, check_mode=True, monkeypatch=monkeypatch)
    doc = res["concerns"]["fabric_manager"]
    assert doc["status"] == "ok" and "not read" in doc["reason"] and res["nvlink"] == []


def test_hgx_node_with_a_link_down_is_drift(node, monkeypatch):
    node("hgx-h200", fixture("hgx-h100-gpu3-two-down.txt"))
    res = run_module(concern_check, {"concern": "fabric_manager"}, monkeypatch=monkeypatch)
    assert res["concerns"]["fabric_manager"]["status"] == "drift" and res["changed"] is False


def test_nvidia_smi_failing_is_an_error_naming_the_command(node, monkeypatch):
    node("hgx-h200", "NVML: Driver/library version mismatch\n", rc=18)
    res = run_module(concern_check, {"concern": "fabric_manager"}, monkeypatch=monkeypatch)
    doc = res["concerns"]["fabric_manager"]
    assert doc["status"] == "error" and "nvidia-smi nvlink --status failed: rc=18" in doc["reason"]


def test_node_without_nvswitch_is_not_applicable(node, monkeypatch):
    node("pcie-4gpu-crossnuma", fixture("hgx-h100-all-up.txt"))
    res = run_module(concern_check, {"concern": "fabric_manager"}, monkeypatch=monkeypatch)
    assert res["concerns"]["fabric_manager"]["status"] == "not_applicable"
    assert res["fabric_manager"]["needed"] is False and res["nvlink"] == []
