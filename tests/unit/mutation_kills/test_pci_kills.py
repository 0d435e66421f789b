# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pci: what its own tests left unseen (make mutation's survivors): the config space readers at their bounds, the
capability walks at the kernel's limits (48 standard, 480 extended capabilities), ACS read and write word for
word, and device chains that resolve somewhere unexpected."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import struct

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

BDF = "0000:16:00.0"


def space(size=4096, status=0x0010, cap_ptr=0, caps=(), ext=()):
    """Config space bytes: ``caps`` [(offset, id, next)] of the standard list, ``ext`` [(offset, header)]."""
    data = bytearray(size)
    struct.pack_into("<H", data, 0x06, status)
    if size > 0x34:
        data[0x34] = cap_ptr
    for off, cid, nxt in caps:
        data[off], data[off + 1] = cid, nxt
    for off, header in ext:
        struct.pack_into("<I", data, off, header)
    return data


def ext_header(cap_id, nxt, version=1):
    return cap_id | (version << 16) | (nxt << 20)


# ------------------------------------------------------------------------------------------------ addresses

@pytest.mark.parametrize("text,out", [
    ("abcd:1a:00.0", (0xABCD, 0x1A, 0, 0)),
    ("0010:1f:1f.7", (0x10, 0x1F, 0x1F, 7)),
])
def test_parse_bdf_reads_hex(text, out):
    assert pci.parse_bdf(text) == out


@pytest.mark.parametrize("text,message", [
    ("zz:00.0", "'zz:00.0' is not a PCI address (want 0000:1a:00.0 or 1a:00.0)"),
    ("1a:20.0", "'1a:20.0': device number 0x20 above 0x1f"),
])
def test_parse_bdf_messages(text, message):
    with pytest.raises(ValueError) as e:
        pci.parse_bdf(text)
    assert str(e.value) == message


def test_parse_kernel_path():
    assert pci.parse_kernel_path("0000:15:01.0/0A.1/1f.7") == ("0000:15:01.0", [(10, 1), (31, 7)])
    with pytest.raises(ValueError) as e:
        pci.parse_kernel_path("0000:15:01.0/100.0")
    assert str(e.value) == "'0000:15:01.0/100.0': path element '100.0' is not <dev>.<fn>"


def test_encode_acs_message():
    with pytest.raises(ValueError) as e:
        pci.encode_acs(["SV", "XX"])
    assert str(e.value) == "unknown ACS bit 'XX' (known: SV, TB, RR, CR, UF, EC, DT)"


# ------------------------------------------------------------------------------------------------ readers

def test_readers_at_their_bounds():
    cfg = pci.ConfigSpace(bytes(range(8)))
    assert (cfg.u8(0), cfg.u8(7), cfg.u8(8), cfg.u8(-1)) == (0, 7, None, None)
    assert (cfg.u16(0), cfg.u16(6), cfg.u16(7), cfg.u16(-1)) == (0x0100, 0x0706, None, None)
    assert (cfg.u32(0), cfg.u32(4), cfg.u32(5), cfg.u32(6), cfg.u32(-1)) == (
        0x03020100, 0x07060504, None, None, None)
    assert pci.ConfigSpace(b"\xff\xff").u16(0) == 0xFFFF


def test_standard_capabilities_need_the_list_bit():
    assert pci.ConfigSpace(space(256, status=0x0001, cap_ptr=0x40, caps=[(0x40, 0x10, 0)])).capabilities() == []
    assert pci.ConfigSpace(space(256, cap_ptr=0x40, caps=[(0x40, 0x10, 0)])).capabilities() == [(0x10, 0x40)]


def test_standard_capability_list_at_its_longest_and_its_ends():
    offs = list(range(0x40, 0x100, 4))                                      # every aligned place: 48
    caps = [(o, 0x09, offs[i + 1] if i + 1 < len(offs) else 0) for i, o in enumerate(offs)]
    assert pci.ConfigSpace(space(256, cap_ptr=0x40, caps=caps)).capabilities() == [(0x09, o) for o in offs]
    # a capability whose two bytes end exactly at the end of what was read is still read
    assert pci.ConfigSpace(space(0x42, cap_ptr=0x40, caps=[(0x40, 0x05, 0)])).capabilities() == [(0x05, 0x40)]
    # 0xff (an unreadable device) ends the list, keeping what came before
    caps = [(0x40, 0x01, 0x50), (0x50, 0xFF, 0x60), (0x60, 0x10, 0)]
    assert pci.ConfigSpace(space(256, cap_ptr=0x40, caps=caps)).capabilities() == [(0x01, 0x40)]


def test_extended_capabilities_need_the_full_space():
    with pytest.raises(pci.PciError) as e:
        pci.ConfigSpace(space(256)).extended_capabilities()
    assert str(e.value) == ("config space of the device is only 256 bytes: the extended capabilities (ACS) live above "
                            "0x100 and only root can read the full 4096 bytes (run the task with become: true)")


def test_extended_capability_walk_stops_where_the_kernel_does():
    """pci_find_next_ext_capability: ttl = (PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) / 8 = 480 steps."""
    offs = list(range(0x100, 0x1000, 4))[:600]
    ext = [(o, ext_header(0x0B, offs[i + 1] if i + 1 < len(offs) else 0)) for i, o in enumerate(offs)]
    got = pci.ConfigSpace(space(ext=ext)).extended_capabilities()
    assert len(got) == 480 and got[-1] == (0x0B, 1, offs[479])


def test_extended_next_pointer_drops_its_low_bits():
    ext = [(0x100, ext_header(0x01, 0x111)), (0x110, ext_header(0x0D, 0))]
    assert pci.ConfigSpace(space(ext=ext)).extended_capabilities() == [(0x01, 1, 0x100), (0x0D, 1, 0x110)]


# ------------------------------------------------------------------------------------------------ ACS

def test_acs_info_whole_documents():
    assert pci.acs_info(None, BDF, pci.ConfigSpace(space(ext=[(0x100, ext_header(0x01, 0))]), BDF)) == {
        "present": False, "offset": None, "cap": None, "ctrl": None, "cap_bits": [], "ctrl_bits": []}
    data = space(ext=[(0x100, ext_header(0x0D, 0))])
    struct.pack_into("<HH", data, 0x104, 0x005F, 0x0015)
    assert pci.acs_info(None, BDF, pci.ConfigSpace(data, BDF)) == {
        "present": True, "offset": 0x100, "cap": 0x5F, "ctrl": 0x15, "cap_bits": ["SV", "TB", "RR", "CR", "UF", "DT"],
        "ctrl_bits": ["SV", "RR", "UF"]}


def test_acs_cut_off_is_named():
    data = space(4098, ext=[(0x100, ext_header(0x0D, 0xFFC)), (0xFFC, ext_header(0x0D, 0))])
    cfg = pci.ConfigSpace(data, BDF)
    # the first ACS capability is whole; one whose control register lies past the end is refused
    assert pci.acs_info(None, BDF, cfg)["offset"] == 0x100
    cut = pci.ConfigSpace(space(4098, ext=[(0x100, ext_header(0x01, 0xFFC)), (0xFFC, ext_header(0x0D, 0))]), BDF)
    with pytest.raises(pci.PciError) as e:
        pci.acs_info(None, BDF, cut)
    assert str(e.value) == "ACS capability of %s at 0xffc is cut off" % BDF


def _device(root, data, bdf=BDF):
    d = os.path.join(root, "sys/devices/pci0000:15/0000:15:01.0", bdf)
    os.makedirs(d)
    with open(os.path.join(d, "config"), "wb") as f:
        f.write(bytes(data))
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"), exist_ok=True)
    os.symlink(os.path.relpath(d, os.path.join(root, "sys/bus/pci/devices")),
               os.path.join(root, "sys/bus/pci/devices", bdf))


def _acs_space(ctrl):
    data = space(ext=[(0x100, ext_header(0x0D, 0))])
    struct.pack_into("<HH", data, 0x104, 0x007F, ctrl)
    return data


def test_write_acs_ctrl_keeps_the_reserved_bits(tmp_path):
    _device(str(tmp_path), _acs_space(0x815F))
    sr = Sysroot(str(tmp_path))
    assert pci.write_acs_ctrl(sr, BDF, 0) == (0x815F, 0x8100)
    assert pci.acs_info(sr, BDF)["ctrl"] == 0x8100


class _NoWrite(Sysroot):
    def __init__(self, root, error=None):
        Sysroot.__init__(self, root)
        self.error = error

    def write_at(self, p, offset, data):
        if self.error:
            raise self.error


def test_write_acs_ctrl_failures_are_named(tmp_path):
    _device(str(tmp_path), _acs_space(0x005F))
    with pytest.raises(pci.PciError) as e:
        pci.write_acs_ctrl(_NoWrite(str(tmp_path), OSError(1, "Operation not permitted")), BDF, 0)
    assert str(e.value) == "cannot write the ACS control register of %s: [Errno 1] Operation not permitted" % BDF
    with pytest.raises(pci.PciError) as e:
        pci.write_acs_ctrl(_NoWrite(str(tmp_path)), BDF, 0)
    assert str(e.value) == "ACS control of %s reads back 0x005f after writing 0x0000" % BDF


def test_write_acs_ctrl_without_acs(tmp_path):
    _device(str(tmp_path), space(ext=[(0x100, ext_header(0x01, 0))]))
    with pytest.raises(pci.PciError) as e:
        pci.write_acs_ctrl(Sysroot(str(tmp_path)), BDF, 0)
    assert str(e.value) == "%s has no ACS extended capability" % BDF


@pytest.mark.parametrize("size,message", [
    (64, None),
    (63, "config space of %s is only 63 bytes" % BDF),
])
def test_read_config_needs_the_header(tmp_path, size, message):
    _device(str(tmp_path), space(size))
    sr = Sysroot(str(tmp_path))
    if message is None:
        cfg = pci.read_config(sr, BDF)
        assert (len(cfg), cfg.bdf) == (64, BDF)
        return
    with pytest.raises(pci.PciError) as e:
        pci.read_config(sr, BDF)
    assert str(e.value) == message


def test_read_config_names_what_it_could_not_read(tmp_path):
    with pytest.raises(pci.PciError) as e:
        pci.read_config(Sysroot(str(tmp_path)), BDF)
    assert str(e.value).startswith("cannot read the config space of %s (/sys/bus/pci/devices/%s/config): [Errno 2]"
                                   % (BDF, BDF))


# ------------------------------------------------------------------------------------------------ chains

def _link(root, bdf, target):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"), exist_ok=True)
    os.symlink(os.path.join(root, target), os.path.join(root, "sys/bus/pci/devices", bdf))


def test_device_chain_and_kernel_path(tmp_path):
    root = str(tmp_path)
    _link(root, "0000:17:0a.0", "sys/devices/pci0000:15/0000:15:01.0/x:y:z/0000:16:00.0/0000:17:0a.0")
    sr = Sysroot(root)
    assert pci.device_chain(sr, "0000:17:0a.0") == ("pci0000:15", ["0000:15:01.0", "0000:16:00.0", "0000:17:0a.0"])
    assert pci.kernel_path(sr, "0000:17:0a.0") == "0000:15:01.0/00.0/0a.0"


@pytest.mark.parametrize("target", [
    "sys/devices/virtual/0000:16:00.0",                     # no PCI root bus on the way
    "sys/devices/pci0000:15/0000:15:01.0",                  # resolves to another device
    "sys/devices/pci0000:15",                               # to the root bus itself
])
def test_device_chain_refuses_a_link_it_cannot_place(tmp_path, target):
    root = str(tmp_path)
    _link(root, BDF, target)
    with pytest.raises(pci.PciError) as e:
        pci.device_chain(Sysroot(root), BDF)
    assert str(e.value) == "cannot place %s below a PCI root bus (resolved to %s)" % (BDF, target)


def test_device_chain_of_a_missing_device(tmp_path):
    with pytest.raises(pci.PciError) as e:
        pci.device_chain(Sysroot(str(tmp_path)), BDF)
    assert str(e.value) == "PCI device %s not found (/sys/bus/pci/devices/%s)" % (BDF, BDF)
