# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe link health (module_utils/discovery/pcie_link.py) on simulated layouts, on the real H200 host's link files and on
generated link values."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link as L
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ACS = {"cap": 0x5F, "ctrl": 0x1D}


@pytest.mark.parametrize("text,value", [
    ("32.0 GT/s PCIe", 32.0), ("2.5 GT/s PCIe", 2.5), ("16 GT/s", 16.0), ("8 GT/s", 8.0), ("2.5 GT/s", 2.5),
    ("64.0 GT/s PCIe\n", 64.0), ("Unknown", None), ("Unknown speed", None), ("", None), (None, None),
    ("33 MHz PCI", None), ("32.0 GT/s PCIe; rm -rf /", None),
])
def test_parse_speed(text, value):
    assert L.parse_speed(text) == value


@pytest.mark.parametrize("text,value", [("16", 16), ("8\n", 8), ("0", None), ("", None), (None, None),
                                        ("x16", None), ("64", None)])
def test_parse_width(text, value):
    assert L.parse_width(text) == value


@pytest.mark.parametrize("desired,msg", [({"gpu_idle_speed": "never"}, "gpu_idle_speed must be one of"),
                                         ({"bogus": 1}, "unknown setting")])
def test_bad_desired_is_refused(desired, msg):
    with pytest.raises(ValueError, match=msg):
        L.normalize_desired(desired)


def _switch_host(gpu_kw=None, nic_kw=None, rp_kw=None, down_kw=None):
    gpu = dict({"bdf": "0000:15:00.0", "kind": "gpu"}, **(gpu_kw or {}))
    nic = dict({"bdf": "0000:16:00.0", "kind": "nic", "netdev": "ens1np0", "ibdev": "mlx5_0"}, **(nic_kw or {}))
    down0 = dict({"bdf": "0000:14:00.0", "kind": "switch_down", "acs": dict(ACS), "children": [gpu]},
                 **(down_kw or {}))
    down1 = {"bdf": "0000:14:01.0", "kind": "switch_down", "acs": dict(ACS), "children": [nic]}
    up = {"bdf": "0000:13:00.0", "kind": "switch_up", "children": [down0, down1]}
    rp = dict({"bdf": "0000:10:01.0", "kind": "root_port", "acs": dict(ACS), "children": [up]}, **(rp_kw or {}))
    return {"name": "odd", "numa_nodes": {0: "0-7"}, "fabric_manager": "absent",
            "root_buses": [{"bus": "0000:10", "numa": 0, "devices": [rp]}]}


def _check(tmp_path, topo, desired=None):
    root = str(tmp_path / "root")
    build_tree(root, topo, 1)
    return L.check(Sysroot(root), desired)


def _states(doc):
    return dict((link["device"], link["state"]) for link in doc["links"])


# (gpu, nic, root port, downstream port) keys, desired, status, states of the links
CASES = [
    ("idle_gpu", {}, {}, {}, {}, None, "ok",
     {"0000:15:00.0": "idle", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("busy_gpu", {"busy": True}, {}, {}, {}, None, "ok",
     {"0000:15:00.0": "ok", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("idle_gpu_checked", {}, {}, {}, {}, {"gpu_idle_speed": "check"}, "drift",
     {"0000:15:00.0": "degraded", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("gpu_x8", {"link_current": [5, 8]}, {}, {}, {}, None, "drift",
     {"0000:15:00.0": "degraded", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("nic_gen4_on_gen5", {}, {"link_current": [4, 16]}, {}, {}, None, "drift",
     {"0000:15:00.0": "idle", "0000:16:00.0": "degraded", "0000:13:00.0": "ok"}),
    ("gen4_only_nic", {}, {"link": [4, 16]}, {}, {}, None, "ok",
     {"0000:15:00.0": "idle", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("switch_uplink_x8", {"busy": True}, {}, {}, {}, None, "ok", None),
    ("gpu_in_x8_slot", {"busy": True}, {}, {}, {"link": [5, 8]}, None, "drift",
     {"0000:15:00.0": "slot_limited", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("gpu_in_x8_slot_allowed", {"busy": True}, {}, {}, {"link": [5, 8]}, {"slot_limited": "ok"}, "ok",
     {"0000:15:00.0": "ok", "0000:16:00.0": "ok", "0000:13:00.0": "ok"}),
    ("gen4_root_port", {"busy": True}, {}, {"link": [4, 16]}, {}, None, "drift",
     {"0000:15:00.0": "ok", "0000:16:00.0": "ok", "0000:13:00.0": "slot_limited"}),
]


@pytest.mark.parametrize("name,gpu,nic,rp,down,desired,status,states", CASES, ids=[c[0] for c in CASES])
def test_switch_layouts(tmp_path, name, gpu, nic, rp, down, desired, status, states):
    doc = _check(tmp_path, _switch_host(gpu, nic, rp, down), desired)
    assert doc["status"] == status, doc
    if states is not None:
        assert _states(doc) == states
    if status == "drift":
        assert "software cannot retrain a PCIe link" in doc["reason"]
        assert doc["items"] and all(i["concern"] == "pcie_link" for i in doc["items"])
    else:
        assert doc["items"] == []


def test_degraded_width_item_and_port_view(tmp_path):
    doc = _check(tmp_path, _switch_host({"link_current": [5, 8]}))
    (item,) = doc["items"]
    assert item == {"concern": "pcie_link", "object": "gpu link 0000:15:00.0 <- 0000:14:00.0", "key": "width",
                    "current": "x8", "desired": "x16"}
    root = str(tmp_path / "root")
    # the downstream port shows the same link (its Link Status is the link below it)
    assert open(os.path.join(root, "sys/bus/pci/devices/0000:14:00.0/current_link_width")).read().strip() == "8"
    gpu = [link for link in doc["links"] if link["device"] == "0000:15:00.0"][0]
    assert (gpu["max_payload"], gpu["max_read_request"], gpu["source"]) == (512, 512, "sysfs")  # DEVCTL 0x2950


def test_config_space_is_read_where_the_files_are_missing(tmp_path):
    root = str(tmp_path / "root")
    build_tree(root, _switch_host({"link_current": [5, 8]}), 1)
    for bdf in ("0000:15:00.0", "0000:14:00.0"):
        for f in L.FILES:
            os.unlink(os.path.join(root, "sys/bus/pci/devices", bdf, f))
    doc = L.check(Sysroot(root))
    gpu = [link for link in doc["links"] if link["device"] == "0000:15:00.0"][0]
    assert (gpu["source"], gpu["current_width"], gpu["max_width"], gpu["state"]) == ("config", 8, 16, "degraded")


def test_unreadable_links_are_not_judged(tmp_path):
    root = str(tmp_path / "root")
    build_tree(root, _switch_host(), 1)
    for link in L.check(Sysroot(root))["links"]:
        for bdf in filter(None, (link["device"], link["port"])):
            d = os.path.join(root, "sys/bus/pci/devices", bdf)
            for f in L.FILES:
                with open(os.path.join(d, f), "w") as fh:
                    fh.write("Unknown\n" if "speed" in f else "0\n")
    doc = L.check(Sysroot(root))
    assert doc["status"] == "not_checked" and "not readable" in doc["reason"]


def test_no_pairing_is_not_applicable(tmp_path):
    topo = _switch_host()
    topo["root_buses"][0]["devices"][0]["children"][0]["children"].pop()     # no NIC
    doc = _check(tmp_path, topo)
    assert doc["status"] == "not_applicable"


def test_shipped_downtrained_layout_has_its_gpu_flagged(tmp_path):
    with open(os.path.join(REPO, "tests", "lab", "topologies", "pcie-4gpu-downtrained.yml")) as f:
        topo = yaml.safe_load(f)
    root = str(tmp_path / "root")
    build_tree(root, topo, 1)
    facts = T.discover(Sysroot(root))
    doc = L.check(Sysroot(root), facts=facts)
    assert doc["status"] == "drift"
    assert [i["object"] for i in doc["items"]] == ["gpu link 0000:39:00.0 <- 0000:38:01.0"]
    assert any("0000:39:00.0 trained at x8 of x16" in w for w in L.warnings(doc["links"]))


@pytest.mark.parametrize("topology", ["hgx-h200.yml", "hgx-h200-sriov.yml", "pcie-4gpu-crossnuma.yml"])
def test_shipped_hgx_layouts_are_healthy_with_idle_gpus(tmp_path, topology):
    with open(os.path.join(REPO, "tests", "lab", "topologies", topology)) as f:
        topo = yaml.safe_load(f)
    root = str(tmp_path / "root")
    build_tree(root, topo, 1)
    doc = L.check(Sysroot(root))
    assert doc["status"] == "ok", doc["reason"]
    assert "idle GPU link" in doc["reason"]
    assert set(_states(doc).values()) == {"ok", "idle"}


def _real_h200(tmp_path):
    """A sysroot from the link files and config space recorded on the device host (tests/fixtures/pcie)."""
    text = open(os.path.join(REPO, "tests", "fixtures", "pcie", "pcie-h200.txt")).read()
    root = tmp_path / "h200"
    block = text.split("== ", 1)[1]
    path = block.splitlines()[0].strip()
    ddir = root / path.lstrip("/")
    ddir.mkdir(parents=True)
    head, cfg = block.split("config:\n", 1)
    for line in head.splitlines()[1:]:
        k, v = line.split(": ", 1)
        if v != "<absent>":
            (ddir / k).write_text(v + "\n")
    (ddir / "config").write_bytes(bytes(int(x, 16) for x in re.findall(r"\b[0-9a-f]{2}\b", cfg)))
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink(os.path.relpath(str(ddir), str(root / "sys/bus/pci/devices")),
               str(root / "sys/bus/pci/devices" / os.path.basename(path)))
    return Sysroot(str(root)), os.path.basename(path)


def test_real_h200_gpu_link(tmp_path):
    sr, bdf = _real_h200(tmp_path)
    assert len(sr.read_bytes("/sys/bus/pci/devices/%s/config" % bdf)) == 4096
    scan = T.PciScan(sr)
    links = L.path_links(scan, {"pairing": [{"gpu": bdf, "nic": None, "nic_functions": [], "bridges": []}]})
    (link,) = links
    # the microVM puts the GPU straight on the root bus: no port above it, the GPU's own maxima are the link's
    assert (link["kind"], link["port"], link["current_speed"], link["current_width"]) == ("gpu", None, 32.0, 16)
    assert (link["max_speed"], link["max_width"], link["state"], link["generation"]) == (32.0, 16, "ok", 5)
    regs = L.decode_pcie(scan.config(bdf))
    assert regs["max_speed"] == 32.0 and regs["max_width"] == 16     # config space agrees with sysfs
    assert regs["max_payload"] in (128, 256, 512) and regs["max_read_request"] in (128, 256, 512, 1024, 2048, 4096)


class _FakeSr(object):
    def __init__(self, files):
        self.files = files

    def read(self, p, default=None):
        return self.files.get(p, default)


class _FakeScan(object):
    def __init__(self, files):
        self.sysroot = _FakeSr(files)

    def config(self, bdf):
        return None

    def role(self, bdf):
        return "downstream" if bdf == "P" else "endpoint"


_SPEEDS = st.sampled_from([None, "2.5 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "Unknown"])
_WIDTHS = st.sampled_from([None, "0", "1", "4", "8", "16"])


@given(kind=st.sampled_from(["gpu", "nic", "switch"]), ends=st.tuples(_SPEEDS, _WIDTHS, _SPEEDS, _WIDTHS),
       port=st.tuples(_SPEEDS, _WIDTHS), idle=st.sampled_from(["ignore", "check"]),
       slot=st.sampled_from(["drift", "ok"]))
def test_judgement_properties(kind, ends, port, idle, slot):
    files = {}
    for bdf, values in (("D", ends), ("P", (None, None) + port)):
        for f, v in zip(L.FILES, values):
            if v is not None:
                files["/sys/bus/pci/devices/%s/%s" % (bdf, f)] = v
    link = L._judge(_FakeScan(files), "D", "P", kind, ["D"], L.normalize_desired(
        {"gpu_idle_speed": idle, "slot_limited": slot}), None)
    doc = L.status_of([link])
    assert link["state"] in ("ok", "idle", "degraded", "slot_limited", "unknown")
    assert (doc["status"] == "drift") == (link["state"] in ("degraded", "slot_limited"))
    assert bool(doc["items"]) == (doc["status"] == "drift")
    if link["state"] == "idle":
        assert kind == "gpu" and idle == "ignore" and link["current_width"] >= link["max_width"]
    if link["state"] == "ok":
        assert link["current_width"] >= link["max_width"] and link["current_speed"] >= link["max_speed"]
    if link["state"] != "unknown" and link["max_width"] is not None:
        assert link["max_width"] <= (L.parse_width(ends[3]) or 99) and link["max_width"] <= (
            L.parse_width(port[1]) or 99)
