# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ACS on the GPU<->NIC paths: selection, register writes (exactly the path bridges), kernel path form,
state file, on both shipped topologies and on odd layouts in the generic nested form."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import struct

import pytest

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

ACS = {"cap": 0x5F, "ctrl": 0x1D}


# -- layout helpers (generic nested form) -------------------------------------------------------

def dev(kind, bdf, children=(), **kw):
    d = {"bdf": bdf, "kind": kind, "children": list(children)}
    if kind in ("root_port", "switch_down"):
        d["acs"] = dict(ACS)
    d.update(kw)
    return d


def rp(bdf, *children, **kw):
    return dev("root_port", bdf, kw.pop("children", children), **kw)


def up(bdf, *children, **kw):
    return dev("switch_up", bdf, kw.pop("children", children), **kw)


def down(bdf, *children, **kw):
    return dev("switch_down", bdf, kw.pop("children", children), **kw)


def gpu(bdf, **kw):
    return dev("gpu", bdf, **kw)


def nic(bdf, i, **kw):
    return dev("nic", bdf, netdev="ens%dnp0" % (i + 1), ibdev="mlx5_%d" % i, **kw)


def host(*buses, **kw):
    topo = {"name": "odd", "numa_nodes": {0: "0-3", 1: "4-7"}, "fabric_manager": "absent",
            "root_buses": [{"bus": b[0], "numa": b[1], "devices": list(b[2:])} for b in buses]}
    topo.update(kw)
    return topo


def build(path, topo):
    root = str(path)
    build_tree(root, topo)
    return Sysroot(root)


def configs(sr):
    """{bdf: config bytes} of every PCI function."""
    return dict((b, sr.read_bytes("/sys/bus/pci/devices/%s/config" % b))
                for b in sr.listdir("/sys/bus/pci/devices"))


def tree_hash(root):
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            h.update(p.encode())
            if not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def acs_ctrl_offset(sr, bdf):
    return pci.acs_info(sr, bdf)["offset"] + pci.ACS_CTRL_OFFSET


# -- bit names ----------------------------------------------------------------------------------

CLEAR_CASES = [
    (None, ["ReqRedir", "CmpltRedir", "EgressCtrl"], 0x2C),
    (["ReqRedir"], ["ReqRedir"], 0x04),
    (["egressctrl", "REQREDIR"], ["ReqRedir", "EgressCtrl"], 0x24),
    (["SV", "rr", "Cr", "uf", "EC"], ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl"], 0x3D),
    ("ReqRedir,CmpltRedir", ["ReqRedir", "CmpltRedir"], 0x0C),
    (["UpstreamFwd", "SrcValid"], ["SrcValid", "UpstreamFwd"], 0x11),
]


@pytest.mark.parametrize("names,canonical,mask", CLEAR_CASES)
def test_validate_clear(names, canonical, mask):
    assert acs.validate_clear(names) == (canonical, mask)


CLEAR_BAD = [
    (["ReqRedirect"], "unknown ACS bit name 'ReqRedirect'"),
    (["TransBlk"], "TransBlk is not managed"),
    (["DT"], "DirectTrans is not managed"),
    (["ReqRedir", "rr"], "ReqRedir is listed twice"),
    ([], "at least one"),
    ([""], "unknown ACS bit name"),
]


@pytest.mark.parametrize("names,msg", CLEAR_BAD)
def test_validate_clear_rejects(names, msg):
    with pytest.raises(acs.AcsError, match=msg):
        acs.validate_clear(names)


# -- shipped topologies -------------------------------------------------------------------------

def _hgx_expected():
    """Hand-derived: 4 switches (root port <bus>:01.0, upstream port <bus+1>:00.0 without ACS, downstream ports
    <bus+2>:00.0..03.0 with ACS); GPUs and NICs alternate on the downstream ports, each GPU pairs with the NIC
    next to it, so every downstream port and every upstream port is on a path, no root port is."""
    bridges, paths = {}, []
    for bus in (0x15, 0x37, 0x97, 0xB7):
        bridges["0000:%02x:00.0" % (bus + 1)] = ("upstream", "0000:%02x:01.0/00.0" % bus, False)
        for d in range(4):
            path = "0000:%02x:01.0/00.0/%02x.0" % (bus, d)
            bridges["0000:%02x:%02x.0" % (bus + 2, d)] = ("downstream", path, True)
            paths.append(path)
    return bridges, "pci=disable_acs_redir=" + ";".join(sorted(paths))


def _crossnuma_expected():
    """Hand-derived from pcie-4gpu-crossnuma.yml: GPU0-NIC0 in a switch (PIX), GPU1-NIC1 at root ports of one
    host bridge (PHB), GPU2 (behind a PCIe-to-PCI bridge without ACS) and GPU3 only across sockets."""
    bridges = {
        "0000:17:00.0": ("upstream", "0000:16:01.0/00.0", False),
        "0000:18:00.0": ("downstream", "0000:16:01.0/00.0/00.0", True),
        "0000:18:01.0": ("downstream", "0000:16:01.0/00.0/01.0", True),
        "0000:38:01.0": ("root_port", "0000:38:01.0", True),
        "0000:38:03.0": ("root_port", "0000:38:03.0", True),
        "0000:38:02.0": ("root_port", "0000:38:02.0", True),
        "0000:3a:00.0": ("bridge", "0000:38:02.0/00.0", False),
        "0000:98:01.0": ("root_port", "0000:98:01.0", True),
        "0000:4a:01.0": ("root_port", "0000:4a:01.0", True),
        "0000:98:02.0": ("root_port", "0000:98:02.0", True),
    }
    arg = ("pci=disable_acs_redir=0000:16:01.0/00.0/00.0;0000:16:01.0/00.0/01.0;0000:38:01.0;0000:38:02.0;"
           "0000:38:03.0;0000:4a:01.0;0000:98:01.0;0000:98:02.0")
    return bridges, arg


SHIPPED = [("hgx-h200",) + _hgx_expected(), ("pcie-4gpu-crossnuma",) + _crossnuma_expected()]


@pytest.mark.parametrize("name,expected,arg", SHIPPED, ids=[c[0] for c in SHIPPED])
def test_shipped_topology(tmp_path, name, expected, arg):
    sr = build(tmp_path / "root", name)
    sel = acs.select(sr)
    assert sorted(sel.order) == sorted(expected)

    before = configs(sr)
    h0 = tree_hash(sr.root)
    dry = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR, check_mode=True)
    assert tree_hash(sr.root) == h0, "check mode wrote something"
    with_acs = [b for b, v in expected.items() if v[2]]
    # check mode says what a real run would do: change the bridges with ACS
    assert dry["changed"] is bool(with_acs) and not dry["errors"]
    assert sorted(d["object"] for d in dry["drift"]) == sorted(with_acs)
    assert all(d == {"concern": "acs", "object": d["object"], "key": "acs_ctrl", "current": "0x001d",
                     "desired": "0x0011"} for d in dry["drift"])

    res = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR)
    assert res["changed"] and not res["errors"]
    after = configs(sr)
    changed = sorted(b for b in before if before[b] != after[b])
    assert changed == sorted(with_acs)
    assert len(changed) == len([e for e in res["bridges"] if e["status"] == "cleared"])
    for bdf in changed:
        off = acs_ctrl_offset(sr, bdf)
        diff_at = [i for i in range(len(before[bdf])) if before[bdf][i] != after[bdf][i]]
        assert set(diff_at) <= {off, off + 1}
        assert struct.unpack_from("<H", after[bdf], off)[0] == 0x0011

    for e in res["bridges"]:
        role, path, has_acs = expected[e["bdf"]]
        assert (e["role"], e["kernel_path"], e["acs"]) == (role, path, has_acs)
        if has_acs:
            assert (e["ctrl_before"], e["ctrl_after"], e["acs_cap"]) == ("0x001d", "0x0011", "0x005f")
            assert e["bits_cleared"] == ["ReqRedir", "CmpltRedir"]
            assert e["setpci"] == "setpci -s %s ECAP_ACS+0x6.w=0011" % e["bdf"]
        else:
            assert e["status"] == "no_acs" and e["setpci"] is None
    assert acs.kernel_arg(res["bridges"]) == arg

    again = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR)
    assert not again["changed"] and again["drift"] == []
    assert all(e["status"] in ("ok", "no_acs") for e in again["bridges"])
    assert configs(sr) == after


def test_pairs_all_adds_cross_paths(tmp_path):
    sr = build(tmp_path / "root", "pcie-4gpu-crossnuma")
    paired = set(acs.select(sr, pairs="paired").order)
    every = acs.select(sr, pairs="all")
    assert paired < set(every.order)
    assert len(every.endpoint_pairs) == 16
    # every root port of the GPU/NIC complex is on some path now, the NVMe-free host still untouched
    assert "0000:4a:01.0" in every.order and "0000:16:01.0" in every.order


# -- odd layouts --------------------------------------------------------------------------------

TWO_LEVEL = host(("0000:10", 0, rp(
    "0000:10:01.0",
    up("0000:11:00.0", acs={"cap": 0x5F, "ctrl": 0x1D},
       children=[down("0000:12:00.0",
                      up("0000:13:00.0",
                         down("0000:14:00.0", gpu("0000:15:00.0")),
                         down("0000:14:01.0", dev("nvme", "0000:16:00.0")))),
                 down("0000:12:01.0", nic("0000:17:00.0", 0))]))))

NIC_INTERNAL_BRIDGE = host(("0000:20", 0, rp(
    "0000:20:01.0",
    up("0000:21:00.0",
       down("0000:22:00.0", gpu("0000:23:00.0")),
       down("0000:22:01.0",
            up("0000:24:00.0", down("0000:25:00.0", nic("0000:26:00.0", 0), vendor=0x15B3, device=0x1979),
               vendor=0x15B3, device=0x1979))))))

DOWN_NO_ACS = host(("0000:30", 0, rp(
    "0000:30:01.0",
    up("0000:31:00.0",
       down("0000:32:00.0", gpu("0000:33:00.0"), acs=None),
       down("0000:32:01.0", nic("0000:34:00.0", 0))))))

ROOT_PORTS = host(("0000:40", 0,
                   rp("0000:40:01.0", gpu("0000:41:00.0")),
                   rp("0000:40:02.0", nic("0000:42:00.0", 0)),
                   rp("0000:40:03.0", dev("nvme", "0000:43:00.0"), acs={"cap": 0x5F, "ctrl": 0x0000}),
                   rp("0000:40:04.0", dev("nvme", "0000:44:00.0"))))

CAP_LIMITED = host(("0000:50", 0, rp(
    "0000:50:01.0",
    up("0000:51:00.0",
       down("0000:52:00.0", gpu("0000:53:00.0"), acs={"cap": 0x1F, "ctrl": 0x3D}),
       down("0000:52:01.0", nic("0000:54:00.0", 0), acs={"cap": 0x7F, "ctrl": 0x7F})))))

# (id, topology, {bridge: (role, kernel path, ctrl before, ctrl after or None without ACS)}, kernel arg)
ODD_CASES = [
    ("two-level switches", TWO_LEVEL, {
        "0000:14:00.0": ("downstream", "0000:10:01.0/00.0/00.0/00.0/00.0", "0x001d", "0x0011"),
        "0000:13:00.0": ("upstream", "0000:10:01.0/00.0/00.0/00.0", None, None),
        "0000:12:00.0": ("downstream", "0000:10:01.0/00.0/00.0", "0x001d", "0x0011"),
        "0000:11:00.0": ("upstream", "0000:10:01.0/00.0", "0x001d", "0x0011"),
        "0000:12:01.0": ("downstream", "0000:10:01.0/00.0/01.0", "0x001d", "0x0011"),
    }, "pci=disable_acs_redir=0000:10:01.0/00.0;0000:10:01.0/00.0/00.0;0000:10:01.0/00.0/00.0/00.0/00.0;"
       "0000:10:01.0/00.0/01.0"),
    ("nic with internal bridge", NIC_INTERNAL_BRIDGE, {
        "0000:22:00.0": ("downstream", "0000:20:01.0/00.0/00.0", "0x001d", "0x0011"),
        "0000:21:00.0": ("upstream", "0000:20:01.0/00.0", None, None),
        "0000:22:01.0": ("downstream", "0000:20:01.0/00.0/01.0", "0x001d", "0x0011"),
        "0000:24:00.0": ("upstream", "0000:20:01.0/00.0/01.0/00.0", None, None),
        "0000:25:00.0": ("downstream", "0000:20:01.0/00.0/01.0/00.0/00.0", "0x001d", "0x0011"),
    }, "pci=disable_acs_redir=0000:20:01.0/00.0/00.0;0000:20:01.0/00.0/01.0;0000:20:01.0/00.0/01.0/00.0/00.0"),
    ("downstream port without ACS", DOWN_NO_ACS, {
        "0000:32:00.0": ("downstream", "0000:30:01.0/00.0/00.0", None, None),
        "0000:31:00.0": ("upstream", "0000:30:01.0/00.0", None, None),
        "0000:32:01.0": ("downstream", "0000:30:01.0/00.0/01.0", "0x001d", "0x0011"),
    }, "pci=disable_acs_redir=0000:30:01.0/00.0/01.0"),
    ("pair meets at root ports", ROOT_PORTS, {
        "0000:40:01.0": ("root_port", "0000:40:01.0", "0x001d", "0x0011"),
        "0000:40:02.0": ("root_port", "0000:40:02.0", "0x001d", "0x0011"),
    }, "pci=disable_acs_redir=0000:40:01.0;0000:40:02.0"),
    # only implemented bits matter: cap 0x1f has no EgressCtrl, so ctrl's stray EC bit stays
    ("capability limits the bits", CAP_LIMITED, {
        "0000:52:00.0": ("downstream", "0000:50:01.0/00.0/00.0", "0x003d", "0x0031"),
        "0000:51:00.0": ("upstream", "0000:50:01.0/00.0", None, None),
        "0000:52:01.0": ("downstream", "0000:50:01.0/00.0/01.0", "0x007f", "0x0053"),
    }, "pci=disable_acs_redir=0000:50:01.0/00.0/00.0;0000:50:01.0/00.0/01.0"),
]


@pytest.mark.parametrize("case", ODD_CASES, ids=[c[0] for c in ODD_CASES])
def test_odd_layouts(tmp_path, case):
    _id, topo, expected, arg = case
    sr = build(tmp_path / "root", topo)
    sel = acs.select(sr)
    assert sorted(sel.order) == sorted(expected)
    before = configs(sr)
    res = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR)
    assert not res["errors"]
    got = dict((e["bdf"], e) for e in res["bridges"])
    for bdf, (role, path, ctrl_before, ctrl_after) in expected.items():
        e = got[bdf]
        assert (e["role"], e["kernel_path"], e["ctrl_before"], e["ctrl_after"]) == (role, path, ctrl_before, ctrl_after)
        assert e["status"] == ("no_acs" if ctrl_before is None else
                               ("ok" if ctrl_before == ctrl_after else "cleared"))
        if ctrl_after is not None:
            assert pci.acs_info(sr, bdf)["ctrl"] == int(ctrl_after, 16)
    after = configs(sr)
    touched = sorted(b for b in before if before[b] != after[b])
    assert touched == sorted(b for b, v in expected.items() if v[2] is not None and v[2] != v[3])
    assert acs.kernel_arg(res["bridges"]) == arg
    assert res["changed"] is bool(touched)


def test_explicit_endpoints_any_function(tmp_path):
    """The VM lab: an NVMe device stands in for the GPU."""
    sr = build(tmp_path / "root", TWO_LEVEL)
    sel = acs.select(sr, endpoints=[{"gpu": "16:00.0", "nic": "0000:17:00.0"}])
    assert sel.endpoint_pairs == [("0000:16:00.0", "0000:17:00.0")]
    assert sorted(sel.order) == ["0000:11:00.0", "0000:12:00.0", "0000:12:01.0", "0000:13:00.0", "0000:14:01.0"]
    assert sel.pairs["0000:14:01.0"] == [["0000:16:00.0", "0000:17:00.0"]]


def test_explicit_bridges_are_added(tmp_path):
    sr = build(tmp_path / "root", ROOT_PORTS)
    sel = acs.select(sr, bridges=["0000:40:04.0"])
    assert sel.order == ["0000:40:04.0"] and sel.endpoint_pairs == []
    sel = acs.select(sr, endpoints=[{"gpu": "0000:41:00.0", "nic": "0000:42:00.0"}], bridges=["40:04.0"])
    assert sel.sorted() == ["0000:40:01.0", "0000:40:02.0", "0000:40:04.0"]


def test_off_path_information(tmp_path):
    sr = build(tmp_path / "root", ROOT_PORTS)
    sel = acs.select(sr)
    info = acs.off_path_clear(sr, sel.order)
    assert info == [{"bdf": "0000:40:03.0", "role": "root_port", "acs_cap": "0x005f", "ctrl": "0x0000",
                     "kernel_default": "0x001d", "bits_clear": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}]
    # the bridges we cleared ourselves are on a path and not reported
    acs.apply_acs(sr, sel.order, acs.DEFAULT_CLEAR)
    assert [i["bdf"] for i in acs.off_path_clear(sr, sel.order)] == ["0000:40:03.0"]
    # without an IOMMU the kernel sets nothing: nothing to report
    sr2 = build(tmp_path / "off", dict(ROOT_PORTS, iommu="off"))
    assert acs.off_path_clear(sr2, []) == []


def test_extra_bits_and_warnings(tmp_path):
    sr = build(tmp_path / "root", ROOT_PORTS)
    names, mask = acs.validate_clear(["ReqRedir", "CmpltRedir", "EgressCtrl", "SrcValid", "UpstreamFwd"])
    res = acs.apply_acs(sr, ["0000:40:01.0"], mask)
    assert res["bridges"][0]["ctrl_after"] == "0x0000"
    assert res["bridges"][0]["bits_cleared"] == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    w = acs.persist_warnings(names, "kernel_cmdline")
    assert len(w) == 1 and "SrcValid, UpstreamFwd" in w[0] and "applier" in w[0]
    assert acs.persist_warnings(names, "applier") == []
    assert acs.persist_warnings(acs.DEFAULT_CLEAR, "kernel_cmdline") == []
    assert "next boot" in acs.persist_warnings(acs.DEFAULT_CLEAR, "none")[0]


def test_readback_mismatch_is_an_error(tmp_path, monkeypatch):
    sr = build(tmp_path / "root", ROOT_PORTS)
    h0 = tree_hash(sr.root)
    monkeypatch.setattr(Sysroot, "write_at", lambda self, p, off, data: None)   # the write does not stick
    res = acs.apply_acs(sr, ["0000:40:01.0", "0000:40:02.0"], acs.DEFAULT_CLEAR)
    assert len(res["errors"]) == 2 and "reads back 0x001d" in res["errors"][0]
    assert [e["status"] for e in res["bridges"]] == ["error", "error"]
    assert not res["changed"] and tree_hash(sr.root) == h0


def test_unreadable_bridge_writes_nothing_when_all_or_nothing(tmp_path):
    topo = host(("0000:10", 0,
                 rp("0000:10:01.0", gpu("0000:11:00.0"), config_size=256),
                 rp("0000:10:02.0", nic("0000:12:00.0", 0))))
    sr = build(tmp_path / "root", topo)
    h0 = tree_hash(sr.root)
    sel = acs.select(sr)
    res = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR, all_or_nothing=True)
    assert "become" in res["errors"][0]
    assert [e["status"] for e in res["bridges"]] == ["error", "not_written"]
    assert tree_hash(sr.root) == h0
    res = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR)
    assert [e["status"] for e in res["bridges"]] == ["error", "cleared"]


# -- state file and the boot-time applier -------------------------------------------------------

def test_state_roundtrip_survives_renumbering(tmp_path):
    sr = build(tmp_path / "a", NIC_INTERNAL_BRIDGE)
    sel = acs.select(sr)
    res = acs.apply_acs(sr, sel.sorted(), acs.DEFAULT_CLEAR, check_mode=True)
    doc = acs.state_document(res["bridges"], acs.DEFAULT_CLEAR)
    assert acs.write_state(sr, doc) is True
    assert acs.write_state(sr, doc) is False
    assert acs.read_state(sr) == doc
    assert json.loads(sr.read_raw(acs.STATE_FILE))["bridges"][0] == {
        "bdf": "0000:22:00.0", "kernel_path": "0000:20:01.0/00.0/00.0"}

    # the same hardware after a renumbering below the root port (a card added elsewhere)
    renumbered = host(("0000:20", 0, rp(
        "0000:20:01.0",
        up("0000:41:00.0",
           down("0000:42:00.0", gpu("0000:43:00.0")),
           down("0000:42:01.0",
                up("0000:44:00.0", down("0000:45:00.0", nic("0000:46:00.0", 0))))))))
    sr2 = build(tmp_path / "b", renumbered)
    sr2.write_file_atomic(acs.STATE_FILE, acs.render_state(doc))
    out = acs.apply_state(sr2)
    assert not out["errors"]
    assert sorted(e["bdf"] for e in out["bridges"] if e["status"] == "cleared") == \
        ["0000:42:00.0", "0000:42:01.0", "0000:45:00.0"]
    assert acs.apply_state(sr2)["changed"] is False


STATE_BAD = [
    ("not json", "{", "is not JSON"),
    ("wrong schema", json.dumps({"schema": "x", "bridges": []}), "is not a gpufabric.acs/v1"),
    ("bridges not a list", json.dumps({"schema": acs.STATE_SCHEMA, "bridges": {}}), "is not a gpufabric.acs/v1"),
]


@pytest.mark.parametrize("name,text,msg", STATE_BAD, ids=[c[0] for c in STATE_BAD])
def test_state_rejects_garbage(tmp_path, name, text, msg):
    sr = build(tmp_path / "root", ROOT_PORTS)
    sr.write_file_atomic(acs.STATE_FILE, text)
    with pytest.raises(acs.AcsError, match=msg):
        acs.read_state(sr)


def test_state_absent_and_stale_path(tmp_path):
    sr = build(tmp_path / "root", ROOT_PORTS)
    assert acs.apply_state(sr) is None
    assert acs.remove_state(sr) is False
    doc = {"schema": acs.STATE_SCHEMA, "clear": ["ReqRedir"],
           "bridges": [{"bdf": "0000:40:01.0", "kernel_path": "0000:40:01.0"},
                       {"bdf": "0000:40:09.0", "kernel_path": "0000:40:09.0/00.0"}]}
    acs.write_state(sr, doc)
    out = acs.apply_state(sr)
    assert out["bridges"][0]["status"] == "cleared" and out["bridges"][0]["ctrl_after"] == "0x0019"
    assert "no PCI device matches the path 0000:40:09.0/00.0" in out["errors"][0]
    assert acs.remove_state(sr, check_mode=True) is True and sr.exists(acs.STATE_FILE)
    assert acs.remove_state(sr) is True and not sr.exists(acs.STATE_FILE)


# -- bad inputs ---------------------------------------------------------------------------------

BAD_INPUTS = [
    ("malformed gpu", {"endpoints": [{"gpu": "15:00", "nic": "0000:17:00.0"}]}, "is not a PCI address"),
    ("device number too big", {"endpoints": [{"gpu": "0000:15:20.0", "nic": "0000:17:00.0"}]},
     "is not a PCI address"),
    ("gpu not found", {"endpoints": [{"gpu": "0000:99:00.0", "nic": "0000:17:00.0"}]},
     r"endpoints\[0\].gpu 0000:99:00.0 not found"),
    ("nic not found", {"endpoints": [{"gpu": "0000:15:00.0", "nic": "0000:98:00.0"}]},
     r"endpoints\[0\].nic 0000:98:00.0 not found"),
    ("gpu equals nic", {"endpoints": [{"gpu": "0000:15:00.0", "nic": "15:00.0"}]}, "the same device 0000:15:00.0"),
    ("duplicate pair", {"endpoints": [{"gpu": "0000:15:00.0", "nic": "0000:17:00.0"},
                                      {"gpu": "0000:17:00.0", "nic": "15:00.0"}]}, r"endpoints\[1\] repeats endpoints\[0\]"),
    ("nested endpoints", {"endpoints": [{"gpu": "0000:13:00.0", "nic": "0000:15:00.0"}]},
     "0000:13:00.0 is a bridge above 0000:15:00.0"),
    ("missing nic key", {"endpoints": [{"gpu": "0000:15:00.0"}]}, r"endpoints\[0\].nic must be a PCI address"),
    ("unknown endpoint key", {"endpoints": [{"gpu": "0000:15:00.0", "nic": "0000:17:00.0", "via": "x"}]},
     "unknown key"),
    ("bridge is an endpoint", {"bridges": ["0000:17:00.0"]}, "0000:17:00.0 is not a bridge"),
    ("bridge not found", {"bridges": ["0000:10:05.0"]}, "bridges.0. 0000:10:05.0 not found"),
    ("bridge malformed", {"bridges": ["bridge0"]}, "'bridge0' is not a PCI address"),
    ("bridge twice", {"bridges": ["0000:12:00.0", "12:00.0"]}, "lists 0000:12:00.0 twice"),
    ("bad pairs", {"pairs": "some"}, "pairs must be paired or all"),
]


@pytest.mark.parametrize("name,kwargs,msg", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_touch_nothing(tmp_path, name, kwargs, msg):
    sr = build(tmp_path / "root", TWO_LEVEL)
    h0 = tree_hash(sr.root)
    with pytest.raises(acs.AcsError, match=msg):
        acs.select(sr, **kwargs)
    assert tree_hash(sr.root) == h0


def test_resolve_forms(tmp_path):
    sr = build(tmp_path / "root", TWO_LEVEL)
    scan = T.PciScan(sr)
    assert acs.resolve(scan, "0000:10:01.0/00.0/00.0/00.0/00.0") == "0000:14:00.0"
    assert acs.resolve(scan, {"bdf": "0000:77:00.0", "kernel_path": "0000:10:01.0/00.0/01.0"}) == "0000:12:01.0"
    assert acs.resolve(scan, "12:01.0") == "0000:12:01.0"
    # the kernel matches from any upstream device, not only the root port
    assert acs.resolve(scan, "0000:11:00.0/00.0/00.0/00.0") == "0000:14:00.0"
    with pytest.raises(acs.AcsError, match="not <dev>.<fn>"):
        acs.resolve(scan, "0000:10:01.0/zz")


def _e(bdf, status, acs_present=True):
    return {"bdf": bdf, "kernel_path": "0000:%s/00.0" % bdf[5:], "acs": acs_present, "status": status}


RR_CR_EC = ["ReqRedir", "CmpltRedir", "EgressCtrl"]
MORE = ["SrcValid", "ReqRedir", "CmpltRedir", "EgressCtrl"]
PREV = {"schema": acs.STATE_SCHEMA, "clear": RR_CR_EC,
        "bridges": [{"bdf": "0000:17:00.0", "kernel_path": "0000:17:00.0/00.0"},
                    {"bdf": "0000:17:01.0", "kernel_path": "0000:17:01.0/00.0"}]}
STATE_DOC_CASES = [
    # id, entries, clear, previous, bridges recorded (bdf, own clear or None)
    ("all applied", [_e("0000:17:00.0", "cleared"), _e("0000:17:01.0", "ok")], MORE, PREV,
     [("0000:17:00.0", None), ("0000:17:01.0", None)]),
    ("a failed bridge keeps its bits", [_e("0000:17:00.0", "cleared"), _e("0000:17:01.0", "error")], MORE, PREV,
     [("0000:17:00.0", None), ("0000:17:01.0", RR_CR_EC)]),
    ("a failed bridge with the same bits needs no own clear",
     [_e("0000:17:00.0", "cleared"), _e("0000:17:01.0", "not_written")], RR_CR_EC, PREV,
     [("0000:17:00.0", None), ("0000:17:01.0", None)]),
    ("a failed bridge never recorded is left out", [_e("0000:17:00.0", "cleared"), _e("0000:18:00.0", "error")],
     MORE, PREV, [("0000:17:00.0", None)]),
    ("no previous document", [_e("0000:17:00.0", "error")], MORE, None, []),
    ("bridges without ACS are not recorded", [_e("0000:17:00.0", "no_acs", False)], MORE, PREV, []),
]


@pytest.mark.parametrize("entries,clear,previous,expected", [c[1:] for c in STATE_DOC_CASES],
                         ids=[c[0] for c in STATE_DOC_CASES])
def test_state_document_keeps_failed_bridges(entries, clear, previous, expected):
    doc = acs.state_document(entries, clear, previous)
    assert doc["clear"] == clear
    assert [(b["bdf"], b.get("clear")) for b in doc["bridges"]] == expected
    groups = acs.state_groups(doc)
    assert sorted(b["bdf"] for bridges, _c in groups for b in bridges) == [bdf for bdf, _c in expected]
    assert all(c == (own or clear) for bridges, c in groups for b in bridges for bdf, own in expected
               if bdf == b["bdf"])
