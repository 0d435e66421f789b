# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Captures (module_utils/report/capture.py) of simulated nodes replay through discovery with the facts of the live pass."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import tarfile

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from sysfs_host import build, gpu, nic, rbus, virtio_nic

from ansible_collections.gpufabric.node.plugins.module_utils.report import capture as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

MICROVM_RXE = {"nodes": {0: "0-15"}, "buses": [rbus(
    "0000:00", -1, {"bdf": "0000:00:00.0", "kind": "other", "class": 0x060000},
    virtio_nic("0000:00:03.0", "eth0"), gpu("0000:00:06.0"))],
    "soft_rdma": [{"name": "rxe0", "netdev": "eth0", "ipv4": "10.0.0.5"}]}
SIW = dict(MICROVM_RXE, soft_rdma=[{"name": "siw0", "type": "siw", "netdev": "eth0"}])
SRIOV_PF = {"nodes": {0: "0-7"}, "buses": [rbus(
    "0000:10", 0, gpu("0000:10:00.0"),
    nic("0000:11:00.0", "ens1np0", "mlx5_0", ipv4="10.1.0.1",
        vfs=[{"bdf": "0000:11:00.2", "netdev": "ens1v0", "ibdev": "mlx5_2"}]))]}


def _sim(name):
    def make(root):
        sim_tree.build_tree(root, sim_topology.load(name))
        return Sysroot(root)
    return make


def _host(model):
    def make(root):
        return build(root, model)
    return make


NODES = [
    ("hgx-h200", _sim("hgx-h200")),
    ("hgx-h200-sriov", _sim("hgx-h200-sriov")),
    ("pcie-4gpu-crossnuma", _sim("pcie-4gpu-crossnuma")),
    ("microvm rxe over virtio", _host(MICROVM_RXE)),
    ("microvm siw found by node guid", _host(SIW)),
    ("sriov pf with a vf", _host(SRIOV_PF)),
]


def _replay(tmp_path, cap):
    path = str(tmp_path / "cap.tar.gz")
    with open(path, "wb") as f:
        f.write(C.tarball(cap))
    dest = str(tmp_path / "replay")
    os.mkdir(dest)
    C.unpack(path, dest)
    return T.discover(Sysroot(dest)), path


@pytest.mark.parametrize("mask", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("name,make", NODES, ids=[n[0] for n in NODES])
def test_replay_gives_the_live_facts(tmp_path, name, make, mask):
    live_root = str(tmp_path / "live")
    os.mkdir(live_root)
    sr = make(live_root)
    live = T.discover(sr)
    cap = C.capture(sr, mask=mask)
    if not mask:
        assert cap["facts"] == live
    replayed, path = _replay(tmp_path, cap)
    assert replayed == cap["facts"]
    assert json.loads(C.facts_json(cap)) == json.loads(json.dumps(replayed))
    # the same node gives the same bytes
    assert C.tarball(C.capture(sr, mask=mask)) == C.tarball(cap)
    with tarfile.open(path) as tar:
        C.check_members(tar)
        for m in tar.getmembers():
            assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "root", "root", 0)
    if mask:
        assert replayed["rails"] == [] or all(r.get("ipv4") in (None,) or r["ipv4"].startswith("10.0.")
                                              for r in replayed["rails"])
        assert [r["netdev"] for r in replayed["rails"]] == [r["netdev"] for r in live["rails"]]


def test_links_stay_links_and_config_is_binary(tmp_path):
    sr = _sim("hgx-h200-sriov")(str(tmp_path))
    cap = C.capture(sr, mask=False)
    e = cap["entries"]
    links = dict((p, v[1]) for p, v in e.items() if v[0] == "link")
    assert links, "no links recorded"
    assert all(not t.startswith("/") for t in links.values())
    assert any(p.startswith("/sys/bus/pci/devices/") for p in links)
    assert any(p.endswith("/physfn") for p in links) and any("/virtfn" in p for p in links)
    # the config spaces discovery read (the path bridges' ACS) are kept as their bytes; others are listed names only
    configs = [p for p in e if p.endswith("/config") and p.startswith("/sys/devices/") and e[p][1]]
    assert configs and all(len(e[p][1]) == 4096 for p in configs)
    with open(sr.path(configs[0]), "rb") as f:
        assert e[configs[0]][1] == f.read()
    # nothing else: every file with content is one discovery read (after resolving links)
    rec = C.RecordingSysroot(str(tmp_path))
    T.discover(rec)
    col = C._Collector(rec)
    read = set(col.resolve(p) for p in rec.touched)
    assert [p for p, v in e.items() if v[0] == "file" and v[1] and p not in read] == []


def test_masking_is_consistent_and_keeps_pairs():
    m = C.Masker("gpu-node-17.example")
    mac = "b8:3f:d2:11:22:33"
    assert m.text(mac) == m.text(mac.upper()) == "02:00:00:00:00:01"
    assert m.text("ff:ff:ff:ff:ff:ff") == "ff:ff:ff:ff:ff:ff" and m.text("00:00:00:00:00:00") == "00:00:00:00:00:00"
    eui = "ba3f:d2ff:fe11:2233"                  # EUI-64 of the MAC: masked from the masked MAC
    masked = m.text(eui)
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery.rails import guid_to_mac
    assert guid_to_mac(masked) == "02:00:00:00:00:01"
    gid = "0000:0000:0000:0000:0000:ffff:0a64:0001"
    assert m.text(gid) == "0000:0000:0000:0000:0000:ffff:0a00:0001"
    assert m.text("ipv4 10.100.0.1 and 1.2.3.4") == "ipv4 10.0.0.1 and 1.2.3.4"      # only IPs seen in a GID
    assert m.text("fe80:0000:0000:0000:ba3f:d2ff:fe11:2233") == "fe80:0000:0000:0000:" + masked
    assert m.text("2001:0db8:0001:0002:0c42:a103:0065:1234").startswith("fd00:0000:0000:0001:0200:0000:")
    assert m.text("host gpu-node-17 gpu-node-17.example x-gpu-node-17y") == "host node-0 node-0 x-gpu-node-17y"
    assert m.text("6.8.0-45-generic 550.127.05") == "6.8.0-45-generic 550.127.05"


def test_masking_replaces_the_device_serial_number():
    space = bytearray(4096)
    space[0x100:0x104] = (0x0003 | 1 << 16 | 0x140 << 20).to_bytes(4, "little")
    space[0x104:0x10c] = bytes.fromhex("3412650003a1420c")
    space[0x140:0x144] = (0x000D | 1 << 16).to_bytes(4, "little")       # ACS, last
    out = C.Masker().config(bytes(space))
    assert out[0x104:0x10c] == (1).to_bytes(8, "little") and out[:0x104] == bytes(space[:0x104])
    assert out[0x10c:] == bytes(space[0x10c:])
    assert C.Masker().config(bytes(64)) == bytes(64)


def _tar(members):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for ti in members:
            tar.addfile(ti, io.BytesIO(b"") if ti.isfile() else None)
    raw.seek(0)
    return tarfile.open(fileobj=raw)


def _member(name, kind=tarfile.REGTYPE, target=""):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    return ti


@pytest.mark.parametrize("member,ok", [
    (_member("sys/x"), True),
    (_member("sys/bus/pci/devices/0000:00:01.0", tarfile.SYMTYPE, "../../../devices/pci0000:00/0000:00:01.0"), True),
    (_member("sys/a", tarfile.SYMTYPE, "/etc/shadow"), False),
    (_member("sys/a", tarfile.SYMTYPE, "../../etc"), False),
    (_member("../x"), False),
    (_member("/abs"), False),
    (_member("sys/hard", tarfile.LNKTYPE, "sys/x"), False),
    (_member("dev/null", tarfile.CHRTYPE), False),
])
def test_unsafe_members_are_refused(member, ok):
    tar = _tar([member])
    if ok:
        C.check_members(tar)
    else:
        with pytest.raises(C.CaptureError):
            C.check_members(tar)


def test_absolute_and_escaping_links_are_rewritten_relative(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "sys/real/dir"))
    with open(os.path.join(root, "sys/real/dir/f"), "w") as f:
        f.write("x\n")
    os.makedirs(os.path.join(root, "sys/class"))
    os.symlink("/sys/real/dir", os.path.join(root, "sys/class/abs"))
    os.symlink("../../../../../sys/real/dir", os.path.join(root, "sys/class/up"))
    col = C._Collector(C.RecordingSysroot(root))
    for p in ("/sys/class/abs/f", "/sys/class/up/f"):
        col.leaf(col.resolve(p))
    assert col.entries["/sys/class/abs"] == ("link", "../real/dir")
    assert col.entries["/sys/class/up"] == ("link", "../real/dir")
    assert col.entries["/sys/real/dir/f"] == ("file", b"x\n")


HOSTILE_CMDLINE = ('BOOT_IMAGE=/vmlinuz-6.8.0 root=UUID=3f1c9a2e-77d1-4b0e-9c55-0e1d2f3a4b5c ro quiet '
                   'ip=10.20.30.40::10.20.30.1:255.255.255.0:gpu-node-17.corp.example:eth0:off '
                   'nfsroot=192.0.2.9:/exports/roots/gpu-node-17,vers=4.2 '
                   'rd.iscsi.initiator=iqn.2004-10.com.example:gpu-node-17 apikey=s3cr3t-T0ken '
                   'search="corp.example lab.example" hunter2 intel_iommu=on iommu=pt iommu.strict=0 '
                   'pci=realloc,noaer -- initpw=opensesame')
SECRETS = ["3f1c9a2e", "10.20.30.40", "10.20.30.1", "192.0.2.9", "exports", "gpu-node-17", "corp.example",
           "iqn.2004", "s3cr3t", "hunter2", "vmlinuz", "opensesame", "lab.example"]


def test_cmdline_is_masked_by_an_allow_list(tmp_path):
    live_root = str(tmp_path / "live")
    os.mkdir(live_root)
    sr = _host(SRIOV_PF)(live_root)
    with open(sr.path("/proc/cmdline"), "w") as f:
        f.write(HOSTILE_CMDLINE + "\n")
    live = T.discover(sr)
    assert live["iommu"]["cmdline"] == ["intel_iommu=on", "iommu=pt", "iommu.strict=0"]
    cap = C.capture(sr, mask=True)
    text = cap["entries"]["/proc/cmdline"][1].decode()
    assert text == ("BOOT_IMAGE=masked root=masked masked masked ip=masked nfsroot=masked rd.iscsi.initiator=masked "
                    "apikey=masked search=masked masked intel_iommu=on iommu=pt iommu.strict=0 pci=realloc,noaer "
                    "-- masked\n")
    replayed, path = _replay(tmp_path, cap)
    assert replayed == cap["facts"] and replayed["iommu"] == live["iommu"]
    with tarfile.open(path) as tar:
        blob = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    blob += C.facts_json(cap).encode()
    assert [s for s in SECRETS if s.encode() in blob] == []
