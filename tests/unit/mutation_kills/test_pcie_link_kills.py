# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pcie_link: what its own tests left unseen (make mutation's survivors): the width bounds, the PCI Express
capability decoded field by field, whole link documents for every judgement with their reasons word for word,
the port's values used where the device's own cannot be read, the path walk (SR-IOV VFs, conventional bridges,
PCI order), and the status documents and warnings as written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import struct

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link

GPU, PORT = "0000:15:00.0", "0000:14:00.0"
FIX_HEAD = "software cannot retrain a PCIe link for good"


class _Dev(object):
    def __init__(self, chain, gpu=False, nic=False, physfn=None):
        self.chain, self.is_gpu, self.is_nic, self.physfn = chain, gpu, nic, physfn


class _Sr(object):
    def __init__(self, files):
        self.files = files

    def read(self, path, default=None):
        return self.files.get(path, default)


class _Scan(object):
    def __init__(self, files=None, devices=None, roles=None, configs=None):
        self.sysroot = _Sr(files or {})
        self.devices, self.roles, self.configs = devices or {}, roles or {}, configs or {}

    def get(self, bdf):
        return self.devices.get(bdf)

    def role(self, bdf):
        return self.roles.get(bdf, "endpoint")

    def config(self, bdf):
        return self.configs.get(bdf)


def sysfs(bdf, values):
    """The four link files of ``bdf``: (current speed, current width, max speed, max width), None for absent."""
    return dict(("/sys/bus/pci/devices/%s/%s" % (bdf, f), v) for f, v in zip(pcie_link.FILES, values)
                if v is not None)


def space(size=4096, version=2, devcap=0, devctl=0, lnkcap=0, lnksta=0, lnkcap2=0, off=0x40):
    """Config space with one PCI Express capability at ``off`` (the only one in the list)."""
    data = bytearray(size)
    struct.pack_into("<H", data, 0x06, 0x0010)
    data[0x34], data[off] = off, pci.PCI_CAP_ID_EXP
    for fmt, at, value in (("<H", 2, version), ("<I", 4, devcap), ("<H", 8, devctl), ("<I", 12, lnkcap),
                           ("<H", 18, lnksta), ("<I", 44, lnkcap2)):
        struct.pack_into(fmt, data, off + at, value)
    return pci.ConfigSpace(bytes(data))


G5, G4, G1 = "32.0 GT/s PCIe", "16.0 GT/s PCIe", "2.5 GT/s PCIe"


# ------------------------------------------------------------------------------------------------ small readers

@pytest.mark.parametrize("text,value", [("1", 1), ("32", 32), ("33", None), (" 4\n", 4)])
def test_parse_width_bounds(text, value):
    assert pcie_link.parse_width(text) == value


@pytest.mark.parametrize("value,text", [(None, None), (2.5, "2.5 GT/s"), (32.0, "32 GT/s"), (8, "8 GT/s")])
def test_fmt_speed(value, text):
    assert pcie_link._fmt_speed(value) == text


def test_normalize_desired_skips_none_and_goes_on():
    assert pcie_link.normalize_desired({"gpu_idle_speed": None, "slot_limited": "ok"}) == {
        "gpu_idle_speed": "ignore", "slot_limited": "ok"}
    assert pcie_link.normalize_desired(None) == {"gpu_idle_speed": "ignore", "slot_limited": "drift"}


@pytest.mark.parametrize("desired,message", [
    ({"zz": 1, "aa": 2}, "pcie_link: unknown setting(s) aa, zz (known: gpu_idle_speed, slot_limited)"),
    ({"slot_limited": "never"}, "pcie_link: slot_limited must be one of drift, ok, got 'never'"),
])
def test_normalize_desired_messages(desired, message):
    with pytest.raises(ValueError) as e:
        pcie_link.normalize_desired(desired)
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ config space

def _regs(max_speed, max_width, cur_speed, cur_width, mps=128, mrrs=128, mpss=128):
    return {"max_speed": max_speed, "max_width": max_width, "current_speed": cur_speed, "current_width": cur_width,
            "max_payload": mps, "max_read_request": mrrs, "max_payload_supported": mpss}


@pytest.mark.parametrize("cfg,regs", [
    # LNKCAP2 (version 2) names Gen5 where LNKCAP's own code says Gen3; DEVCTL MPS 256, MRRS 1024; DEVCAP 512
    (space(devcap=0x2, devctl=(1 << 5) | (3 << 12), lnkcap=3 | (16 << 4), lnksta=4 | (8 << 4), lnkcap2=0x3E),
     _regs(32.0, 16, 16.0, 8, 256, 1024, 512)),
    # a version 1 capability has no LNKCAP2: what lies there is not read
    (space(version=1, lnkcap=4 | (16 << 4), lnksta=4 | (16 << 4), lnkcap2=0x7E), _regs(16.0, 16, 16.0, 16)),
    # bit 0 of LNKCAP2 is reserved: a vector with only it falls back to LNKCAP
    (space(lnkcap=2 | (4 << 4), lnksta=1 | (4 << 4), lnkcap2=0x01), _regs(5.0, 4, 2.5, 4)),
    # a vector with only 2.5 GT/s; no width in LNKCAP or LNKSTA
    (space(lnkcap=5, lnksta=1, lnkcap2=0x02), _regs(2.5, None, 2.5, None)),
    # exactly the first 256 bytes (what a non-root reader gets) are enough
    (space(256, devcap=0x1, lnkcap=4 | (16 << 4), lnksta=4 | (16 << 4)), _regs(16.0, 16, 16.0, 16, mpss=256)),
    (space(255, lnkcap=4 | (16 << 4), lnksta=4 | (16 << 4)), None),
    (None, None),
], ids=["lnkcap2", "v1", "bit0", "gen1", "256", "255", "none"])
def test_decode_pcie_whole(cfg, regs):
    assert pcie_link.decode_pcie(cfg) == regs


def test_read_end_whole():
    files = sysfs(GPU, (G4, "8", G5, "16"))
    cfg = space(devcap=0x2, devctl=(2 << 5) | (2 << 12), lnkcap=5 | (16 << 4), lnksta=5 | (16 << 4))
    scan = _Scan(files, roles={GPU: "downstream"}, configs={GPU: cfg, PORT: cfg})
    raw = {"current_link_speed": G4, "current_link_width": "8", "max_link_speed": G5, "max_link_width": "16"}
    assert pcie_link.read_end(scan, GPU) == {
        "bdf": GPU, "role": "downstream", "source": "sysfs", "raw": raw, "current_speed": 16.0, "current_width": 8,
        "max_speed": 32.0, "max_width": 16, "max_payload": 512, "max_read_request": 512,
        "max_payload_supported": 512}
    assert pcie_link.read_end(scan, PORT) == {
        "bdf": PORT, "role": "endpoint", "source": "config", "raw": dict((f, None) for f in pcie_link.FILES),
        "current_speed": 32.0, "current_width": 16, "max_speed": 32.0, "max_width": 16, "max_payload": 512,
        "max_read_request": 512, "max_payload_supported": 512}
    assert pcie_link.read_end(_Scan(), GPU) == {
        "bdf": GPU, "role": "endpoint", "source": None, "raw": dict((f, None) for f in pcie_link.FILES),
        "current_speed": None, "current_width": None, "max_speed": None, "max_width": None, "max_payload": None,
        "max_read_request": None, "max_payload_supported": None}


# ------------------------------------------------------------------------------------------------ judgement

BASE = {"device": GPU, "kind": "gpu", "port": PORT, "pairs": ["0000:15:00.0", "0000:ab:00.0"],
        "current_speed": 32.0, "current_width": 16, "max_speed": 32.0, "max_width": 16, "device_max_speed": 32.0,
        "device_max_width": 16, "port_max_speed": 32.0, "port_max_width": 16, "generation": 5, "source": "sysfs",
        "max_payload": None, "port_max_payload": None, "max_read_request": None, "max_payload_supported": None,
        "notes": [], "state": "ok", "reason": None}
OBJ = "gpu link 0000:15:00.0 <- 0000:14:00.0"
SLOT_X8 = "GPU 0000:15:00.0 can do x16 but its port 0000:14:00.0 only x8: the slot limits the link"


def _item(key, current, desired, obj=OBJ):
    return {"concern": "pcie_link", "object": obj, "key": key, "current": current, "desired": desired}


# id, device files, port files (None: no port), kind, desired, note, what differs from BASE, items
JUDGED = [
    ("ok", (G5, "16", G5, "16"), (G5, "16", G5, "16"), "gpu", None, None, {}, []),
    ("port_current", ("Unknown", "0", G5, "16"), (G4, "8", G5, "16"), "gpu", None, None,
     {"current_speed": 16.0, "current_width": 8, "generation": 4, "state": "degraded",
      "reason": "GPU 0000:15:00.0 trained at x8 of x16"}, [_item("width", "x8", "x16")]),
    ("port_only", (), (G5, "16", G5, "16"), "gpu", None, None,
     {"device_max_speed": None, "device_max_width": None}, []),
    ("no_port", (G5, "8", G5, "16"), None, "gpu", None, None,
     {"port": None, "port_max_speed": None, "port_max_width": None, "current_width": 8, "state": "degraded",
      "reason": "GPU 0000:15:00.0 trained at x8 of x16"}, [_item("width", "x8", "x16", "gpu link 0000:15:00.0")]),
    ("unknown_nic", (None, None, G5, "16"), (None, None, G5, "16"), "nic", None, None,
     {"kind": "nic", "current_speed": None, "current_width": None, "generation": None, "state": "unknown",
      "reason": "NIC 0000:15:00.0: the link's speed or width is not readable (link down, device powered off in "
                "D3cold, or no PCI Express link registers)"}, []),
    ("idle_gpu", (G1, "16", G5, "16"), (G1, "16", G5, "16"), "gpu", None, "a note", {
        "current_speed": 2.5, "generation": 1, "state": "idle", "notes": ["a note"],
        "reason": "GPU 0000:15:00.0 at 2.5 GT/s of 32 GT/s with its full width x16: an idle GPU lowers its link "
                  "speed (power management); judged under load with gpu_idle_speed: check"}, []),
    ("busy_gpu_slow", (G1, "16", G5, "16"), (G1, "16", G5, "16"), "gpu", {"gpu_idle_speed": "check"}, None,
     {"current_speed": 2.5, "generation": 1, "state": "degraded",
      "reason": "GPU 0000:15:00.0 trained at 2.5 GT/s of 32 GT/s"}, [_item("speed", "2.5 GT/s", "32 GT/s")]),
    ("switch_slow", (G1, "16", G5, "16"), (G1, "16", G5, "16"), "switch", None, None,
     {"kind": "switch", "current_speed": 2.5, "generation": 1, "state": "degraded",
      "reason": "switch 0000:15:00.0 trained at 2.5 GT/s of 32 GT/s"},
     [_item("speed", "2.5 GT/s", "32 GT/s", "switch link 0000:15:00.0 <- 0000:14:00.0")]),
    ("slot_width", (G5, "8", G5, "16"), (G5, "8", G5, "8"), "gpu", None, None,
     {"current_width": 8, "max_width": 8, "port_max_width": 8, "state": "slot_limited", "reason": SLOT_X8},
     [_item("slot_width", "x8", "x16")]),
    ("idle_in_slot", (G1, "8", G5, "16"), (G1, "8", G5, "8"), "gpu", None, None,
     {"current_speed": 2.5, "current_width": 8, "max_width": 8, "port_max_width": 8, "generation": 1,
      "state": "slot_limited", "reason": SLOT_X8}, [_item("slot_width", "x8", "x16")]),
    ("slot_speed", (G4, "16", G5, "16"), (G4, "16", G4, "16"), "gpu", None, None,
     {"current_speed": 16.0, "max_speed": 16.0, "port_max_speed": 16.0, "generation": 4, "state": "slot_limited",
      "reason": "GPU 0000:15:00.0 can do 32 GT/s but its port 0000:14:00.0 only 16 GT/s: the slot limits the link"},
     [_item("slot_speed", "16 GT/s", "32 GT/s")]),
    ("slot_speed_narrow", (G4, "8", G5, "8"), (G4, "8", G4, "16"), "gpu", None, None,
     {"current_speed": 16.0, "max_speed": 16.0, "port_max_speed": 16.0, "generation": 4, "current_width": 8,
      "max_width": 8, "device_max_width": 8, "state": "slot_limited",
      "reason": "GPU 0000:15:00.0 can do 32 GT/s but its port 0000:14:00.0 only 16 GT/s: the slot limits the link"},
     [_item("slot_speed", "16 GT/s", "32 GT/s")]),
    ("slot_allowed", (G4, "16", G5, "16"), (G4, "16", G4, "16"), "nic", {"slot_limited": "ok"}, None,
     {"kind": "nic", "current_speed": 16.0, "max_speed": 16.0, "port_max_speed": 16.0, "generation": 4,
      "notes": ["NIC 0000:15:00.0 can do 32 GT/s but its port 0000:14:00.0 only 16 GT/s: the slot limits the link"]},
     []),
]


@pytest.mark.parametrize("name,dev,port,kind,desired,note,diff,items", JUDGED, ids=[j[0] for j in JUDGED])
def test_judge_whole_link(name, dev, port, kind, desired, note, diff, items):
    files = sysfs(GPU, dev)
    files.update(sysfs(PORT, port or ()))
    scan = _Scan(files, roles={PORT: "downstream"})
    link = pcie_link._judge(scan, GPU, PORT if port is not None else None, kind, ["0000:ab:00.0", GPU],
                            pcie_link.normalize_desired(desired), note)
    assert link == dict(BASE, **diff), name
    assert pcie_link._items(link) == items


@pytest.mark.parametrize("dev_mps,port_mps,notes", [
    (1, 2, ["MaxPayload 256 on 0000:15:00.0 but 512 on its port 0000:14:00.0"]),
    (1, 1, []),
])
def test_judge_payload_of_both_ends(dev_mps, port_mps, notes):
    files = sysfs(GPU, (G5, "16", G5, "16"))
    files.update(sysfs(PORT, (G5, "16", G5, "16")))
    lnk = 5 | (16 << 4)
    configs = {GPU: space(devcap=3, devctl=(dev_mps << 5) | (5 << 12), lnkcap=lnk, lnksta=lnk),
               PORT: space(devcap=2, devctl=port_mps << 5, lnkcap=lnk, lnksta=lnk)}
    link = pcie_link._judge(_Scan(files, configs=configs), GPU, PORT, "gpu", [], pcie_link.normalize_desired(None),
                            None)
    assert link == dict(BASE, pairs=[], max_payload=128 << dev_mps, port_max_payload=128 << port_mps,
                        max_read_request=4096, max_payload_supported=1024, notes=notes)


# ------------------------------------------------------------------------------------------------ the path walk

@pytest.mark.parametrize("dev,role,kind", [
    (_Dev([GPU], gpu=True), "endpoint", "gpu"), (_Dev([GPU], nic=True), "endpoint", "nic"),
    (_Dev([GPU]), "upstream", "switch"), (None, "upstream", "switch"), (None, "bridge", "bridge"),
    (_Dev([GPU]), "bridge", "bridge"), (None, "endpoint", "device"), (None, None, "device"),
])
def test_kind(dev, role, kind):
    assert pcie_link._kind(dev, role) == kind


def test_path_functions_whole():
    facts = {"pairing": [
        {"gpu": "G1", "nic": "N1", "nic_functions": ["N1", "N1b"], "bridges": ["B", "B"]},
        {"gpu": "G2", "nic": "N2", "nic_functions": [], "bridges": ["B"]},
        {"gpu": "G3", "nic": None, "nic_functions": [], "bridges": None},
    ]}
    assert pcie_link._path_functions(facts) == {"G1": ["G1"], "N1": ["G1"], "N1b": ["G1"], "B": ["G1", "G2"],
                                                "G2": ["G2"], "N2": ["G2"], "G3": ["G3"]}


RP, UP, D0, D1, NIC, VF = "0000:10:01.0", "0000:13:00.0", PORT, "0000:14:01.0", "0000:16:00.0", "0000:16:00.2"
# a conventional PCI bridge and the GPU behind it, written in upper case: PCI order is not text order
BR, G2 = "0000:0a:00.0", "0000:0B:00.0"
DEVICES = {RP: _Dev([RP]), UP: _Dev([RP, UP]), D0: _Dev([RP, UP, D0]), D1: _Dev([RP, UP, D1]),
           GPU: _Dev([RP, UP, D0, GPU], gpu=True), NIC: _Dev([RP, UP, D1, NIC], nic=True),
           VF: _Dev([RP, UP, D1, VF], nic=True, physfn=NIC), BR: _Dev([BR]), G2: _Dev([BR, G2], gpu=True)}
ROLES = {RP: "root_port", UP: "upstream", D0: "downstream", D1: "downstream", BR: "bridge"}
VF_NOTE = "SR-IOV VF 0000:16:00.2: its PF 0000:16:00.0's link is read"

WALKS = [
    ("pf_and_vf", [{"gpu": GPU, "nic": NIC, "nic_functions": [NIC, VF], "bridges": [D0, UP, D1, RP]},
                   {"gpu": G2, "nic": None, "nic_functions": [], "bridges": [BR]}],
     [(BR, "bridge", None, [G2], []), (G2, "gpu", BR, [G2], []), (UP, "switch", RP, [GPU], []),
      (GPU, "gpu", D0, [GPU], []), (NIC, "nic", D1, [GPU], [])]),
    ("vf_only", [{"gpu": GPU, "nic": VF, "nic_functions": [VF], "bridges": []}],
     [(GPU, "gpu", D0, [GPU], []), (NIC, "nic", D1, [GPU], [VF_NOTE])]),
    # two GPUs on one NIC link, one through the PF, one through its VF: the link names both
    ("pf_and_vf_of_two_gpus", [{"gpu": GPU, "nic": NIC, "nic_functions": [NIC], "bridges": []},
                               {"gpu": G2, "nic": VF, "nic_functions": [VF], "bridges": []}],
     [(G2, "gpu", BR, [G2], []), (GPU, "gpu", D0, [GPU], []), (NIC, "nic", D1, [G2, GPU], [])]),
]


@pytest.mark.parametrize("name,pairing,links", WALKS, ids=[w[0] for w in WALKS])
def test_path_links_walk(name, pairing, links):
    got = pcie_link.path_links(_Scan(devices=DEVICES, roles=ROLES), {"pairing": pairing})
    assert [(x["device"], x["kind"], x["port"], x["pairs"], x["notes"]) for x in got] == links, name
    assert set(x["state"] for x in got) == {"unknown"}


# ------------------------------------------------------------------------------------------------ status documents

def _link(state, reason, device=GPU, **kw):
    link = {"device": device, "kind": "gpu", "port": None, "state": state, "reason": reason, "current_width": 16,
            "max_width": 16, "current_speed": 2.5, "max_speed": 32.0, "device_max_width": 16, "port_max_width": 8,
            "device_max_speed": 32.0, "port_max_speed": 32.0}
    link.update(kw)
    return link


def _speed(device):
    return _item("speed", "2.5 GT/s", "32 GT/s", "gpu link %s" % device)


FIX = pcie_link.FIX
BAD = [_link("degraded", "r%d" % n, "0000:%02x:00.0" % n) for n in range(1, 5)]


@pytest.mark.parametrize("count,reason", [
    (1, "1 PCIe link(s) below capability: r1; " + FIX),
    (2, "2 PCIe link(s) below capability: r1; r2; " + FIX),
    (3, "3 PCIe link(s) below capability: r1; r2 and 1 more; " + FIX),
    (4, "4 PCIe link(s) below capability: r1; r2 and 2 more; " + FIX),
])
def test_status_drift_counts(count, reason):
    links = BAD[:count] + [_link("ok", None)]
    assert pcie_link.status_of(links) == {"status": "drift", "reason": reason,
                                          "items": [_speed(x["device"]) for x in BAD[:count]], "links": links}


def test_status_drift_names_slot_limited_links():
    links = [_link("slot_limited", "s1"), _link("idle", "i1"), _link("degraded", "d1", "0000:16:00.0")]
    doc = pcie_link.status_of(links)
    assert doc["reason"] == "2 PCIe link(s) below capability: s1; d1; " + FIX
    assert doc["items"] == [_item("slot_width", "x8", "x16", "gpu link " + GPU), _speed("0000:16:00.0")]
    assert pcie_link.warnings(links) == ["PCIe link below capability: s1 (%s)" % FIX_HEAD,
                                         "PCIe link below capability: d1 (%s)" % FIX_HEAD]
    assert pcie_link.warnings(None) == []


@pytest.mark.parametrize("states,reason", [
    (["ok"], None),
    ([], None),
    (["ok", "ok", "idle"], "1 idle GPU link(s) below their speed at full width (not judged)"),
    (["idle", "unknown", "unknown"],
     "1 idle GPU link(s) below their speed at full width (not judged); 2 link(s) not readable"),
    (["ok", "unknown"], "1 link(s) not readable"),
])
def test_status_ok_reasons(states, reason):
    links = [_link(s, "u" if s == "unknown" else None) for s in states]
    assert pcie_link.status_of(links) == {"status": "ok", "reason": reason, "items": [], "links": links}


def test_status_nothing_readable_and_not_paired():
    links = [_link("unknown", "u1"), _link("unknown", "u2")]
    assert pcie_link.status_of(links) == {
        "status": "not_checked", "reason": "no link on the GPU<->NIC paths could be read: u1", "items": [],
        "links": links}
    assert pcie_link.status_of(links, paired=False) == {
        "status": "not_applicable", "reason": "no GPU<->NIC path on this node", "items": [], "links": []}


def test_check_uses_the_pairing_it_is_given():
    scan = _Scan(devices=DEVICES, roles=ROLES)
    assert pcie_link.check(None, facts={"pairing": []}, scan=scan) == {
        "status": "not_applicable", "reason": "no GPU<->NIC path on this node", "items": [], "links": []}
    doc = pcie_link.check(None, {"slot_limited": "ok"}, {"pairing": WALKS[1][1]}, scan)
    assert (doc["status"], [x["device"] for x in doc["links"]]) == ("not_checked", [GPU, NIC])
