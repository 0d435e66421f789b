# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Config space parsing, capability walks, ACS read/write, device chain and kernel path form."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import struct

import pytest

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


@pytest.fixture(scope="module")
def hgx(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hgx") / "root")
    build_tree(root, "hgx-h200")
    return Sysroot(root)


BDF_CASES = [
    ("0000:1a:00.0", "0000:1a:00.0"),
    ("1a:00.0", "0000:1a:00.0"),
    ("0000:1A:1F.7", "0000:1a:1f.7"),
    ("10:0:1", None),
    ("0000:1a:00.8", None),
    ("0000:1a:20.0", None),
    ("zz:00.0", None),
    ("", None),
    ("0001:00:01.0", "0001:00:01.0"),
]


@pytest.mark.parametrize("text,expected", BDF_CASES)
def test_normalize_bdf(text, expected):
    if expected is None:
        with pytest.raises(ValueError):
            pci.normalize_bdf(text)
        assert not pci.is_bdf(text)
    else:
        assert pci.normalize_bdf(text) == expected


ACS_CODEC = [
    (0x001D, ["SV", "RR", "CR", "UF"]),
    (0x005F, ["SV", "TB", "RR", "CR", "UF", "DT"]),
    (0x0000, []),
    (0x007F, ["SV", "TB", "RR", "CR", "UF", "EC", "DT"]),
]


@pytest.mark.parametrize("value,names", ACS_CODEC)
def test_acs_codec(value, names):
    assert pci.decode_acs(value) == names
    assert pci.encode_acs(names) == value
    assert pci.encode_acs(",".join(n.lower() for n in names)) == value


def test_encode_acs_rejects_unknown():
    with pytest.raises(ValueError, match="unknown ACS bit"):
        pci.encode_acs(["SV", "XX"])


def _cfg(size=4096, status=0x10, caps=None, ext=None, header=0):
    """Build a config space: caps = [(offset, id, next)], ext = [(offset, u32 header)]."""
    b = bytearray(4096)
    struct.pack_into("<H", b, 0x06, status)
    b[0x0E] = header
    if caps:
        b[0x34] = caps[0][0]
        for off, cid, nxt in caps:
            b[off], b[off + 1] = cid, nxt
    for off, hdr in ext or []:
        struct.pack_into("<I", b, off, hdr)
    return pci.ConfigSpace(bytes(b[:size]), "0000:01:00.0")


CAP_WALK_CASES = [
    ("plain list", dict(caps=[(0x40, 1, 0x50), (0x50, 0x10, 0)]), [(1, 0x40), (0x10, 0x50)]),
    ("loop", dict(caps=[(0x40, 1, 0x50), (0x50, 0x10, 0x40)]), [(1, 0x40), (0x10, 0x50)]),
    ("pointer into header", dict(caps=[(0x40, 1, 0x10)]), [(1, 0x40)]),
    ("no cap list bit", dict(status=0, caps=[(0x40, 1, 0)]), []),
    ("unaligned pointer masked", dict(caps=[(0x40, 1, 0x53), (0x50, 5, 0)]), [(1, 0x40), (5, 0x50)]),
    ("64 byte reader", dict(size=64, caps=[(0x40, 1, 0)]), []),
]


@pytest.mark.parametrize("case", CAP_WALK_CASES, ids=[c[0] for c in CAP_WALK_CASES])
def test_capability_walk(case):
    _name, kw, expected = case
    assert _cfg(**kw).capabilities() == expected


def _hdr(cap_id, nxt, ver=1):
    return cap_id | (ver << 16) | (nxt << 20)


EXT_WALK_CASES = [
    ("chain", [(0x100, _hdr(1, 0x148, 2)), (0x148, _hdr(0xD, 0))], [(1, 2, 0x100), (0xD, 1, 0x148)]),
    ("loop to start", [(0x100, _hdr(1, 0x148)), (0x148, _hdr(0xD, 0x100))], [(1, 1, 0x100), (0xD, 1, 0x148)]),
    ("self loop", [(0x100, _hdr(1, 0x100))], [(1, 1, 0x100)]),
    ("next below 0x100", [(0x100, _hdr(1, 0x40))], [(1, 1, 0x100)]),
    ("all ones", [(0x100, 0xFFFFFFFF)], []),
    ("empty", [], []),
    ("last dword", [(0x100, _hdr(1, 0xFFC)), (0xFFC, _hdr(0xD, 0))], [(1, 1, 0x100), (0xD, 1, 0xFFC)]),
]


@pytest.mark.parametrize("case", EXT_WALK_CASES, ids=[c[0] for c in EXT_WALK_CASES])
def test_ext_capability_walk(case):
    _name, ext, expected = case
    assert _cfg(ext=ext).extended_capabilities() == expected


@pytest.mark.parametrize("size", [64, 256])
def test_short_config_space_says_root(size):
    with pytest.raises(pci.PciError, match="only root"):
        _cfg(size=size).extended_capabilities()


def test_acs_at_end_of_space_cut_off():
    cfg = _cfg(ext=[(0x100, _hdr(1, 0xFFC)), (0xFFC, _hdr(0xD, 0))])
    with pytest.raises(pci.PciError, match="cut off"):
        pci.acs_info(None, "0000:01:00.0", cfg)


DEVICE_CASES = [
    # bdf, header type, port type, acs present
    ("0000:15:01.0", 1, "root_port", True),
    ("0000:16:00.0", 1, "upstream", False),
    ("0000:17:01.0", 1, "downstream", True),
    ("0000:18:00.0", 0, "endpoint", False),
    ("0000:19:00.0", 0, "endpoint", False),
]


@pytest.mark.parametrize("bdf,header,ptype,acs", DEVICE_CASES)
def test_device_config(hgx, bdf, header, ptype, acs):
    cfg = pci.read_config(hgx, bdf)
    assert len(cfg) == 4096
    assert cfg.header_type == header
    assert cfg.port_type_name == ptype
    assert cfg.extended_capabilities()[0][0] == pci.PCI_EXT_CAP_ID_ERR
    info = pci.acs_info(hgx, bdf)
    assert info["present"] is acs
    if acs:
        assert info["cap"] == 0x5F and info["ctrl"] == 0x1D and info["offset"] % 4 == 0


def test_bridge_bus_numbers(hgx):
    assert pci.read_config(hgx, "0000:15:01.0").bus_numbers() == (0x15, 0x16, 0x1B)
    assert pci.read_config(hgx, "0000:16:00.0").bus_numbers() == (0x16, 0x17, 0x1B)
    assert pci.read_config(hgx, "0000:17:03.0").bus_numbers() == (0x17, 0x1B, 0x1B)
    assert pci.read_config(hgx, "0000:18:00.0").bus_numbers() is None


def test_read_config_missing_device(hgx):
    with pytest.raises(pci.PciError, match="cannot read"):
        pci.read_config(hgx, "0000:ee:00.0")


WRITE_CASES = [
    # value written, expected read-back (reserved bits kept)
    (0x0011, 0x0011),
    (0x0000, 0x0000),
    (0x001D, 0x001D),
    (0xFF7F, 0x007F),
]


@pytest.mark.parametrize("value,after", WRITE_CASES)
def test_write_acs_ctrl(tmp_path, value, after):
    root = str(tmp_path / "root")
    build_tree(root, "hgx-h200")
    sr = Sysroot(root)
    before, got = pci.write_acs_ctrl(sr, "17:01.0", value)
    assert before == 0x1D and got == after
    assert pci.acs_info(sr, "0000:17:01.0")["ctrl"] == after


def test_write_acs_ctrl_only_touches_two_bytes(tmp_path):
    root = str(tmp_path / "root")
    build_tree(root, "hgx-h200")
    sr = Sysroot(root)
    path = "/sys/bus/pci/devices/0000:17:01.0/config"
    old = sr.read_bytes(path)
    off = pci.acs_info(sr, "0000:17:01.0")["offset"] + 6
    pci.write_acs_ctrl(sr, "0000:17:01.0", 0)
    new = sr.read_bytes(path)
    assert len(new) == 4096
    assert [i for i in range(4096) if old[i] != new[i]] == [off]


def test_write_acs_ctrl_without_acs(hgx):
    with pytest.raises(pci.PciError, match="no ACS"):
        pci.write_acs_ctrl(hgx, "0000:16:00.0", 0)


CHAIN_CASES = [
    ("0000:18:00.0", "pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"],
     "0000:15:01.0/00.0/00.0/00.0"),
    ("0000:17:03.0", "pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:03.0"], "0000:15:01.0/00.0/03.0"),
    ("0000:05:02.0", "pci0000:05", ["0000:05:02.0"], "0000:05:02.0"),
    ("b7:01.0", "pci0000:b7", ["0000:b7:01.0"], "0000:b7:01.0"),
]


@pytest.mark.parametrize("bdf,root_bus,chain,kpath", CHAIN_CASES)
def test_device_chain_and_kernel_path(hgx, bdf, root_bus, chain, kpath):
    assert pci.device_chain(hgx, bdf) == (root_bus, chain)
    assert pci.kernel_path(hgx, bdf) == kpath
    first, rest = pci.parse_kernel_path(kpath)
    assert first == chain[0] and len(rest) == len(chain) - 1


def test_device_chain_unknown(hgx):
    with pytest.raises(pci.PciError, match="not found"):
        pci.device_chain(hgx, "0000:ee:00.0")


@pytest.mark.parametrize("text", ["0000:15:01.0/0.0.0", "zz/00.0", "0000:15:01.0/00.9"])
def test_parse_kernel_path_rejects(text):
    with pytest.raises(ValueError):
        pci.parse_kernel_path(text)
