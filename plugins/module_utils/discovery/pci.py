# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI config space, capability walks, ACS and the device chain, read through a Sysroot.

Public API (plain Python, no Ansible imports):

* ``normalize_bdf(text) -> '0000:1a:00.0'`` (accepts ``1a:00.0`` with domain 0000), ``parse_bdf``
  -> ``(domain, bus, dev, fn)``; both raise ``ValueError`` on bad input.
* ``read_config(sysroot, bdf) -> ConfigSpace``; ``ConfigSpace`` gives ``header_type``,
  ``is_bridge``, ``capabilities()``, ``extended_capabilities()``, ``find_capability(id)``,
  ``find_ext_capability(id)``, ``port_type`` / ``port_type_name`` (PCI Express device/port type),
  ``bus_numbers()`` for bridges. Walks are bounded and loop protected.
* ``acs_info(sysroot, bdf, config=None) -> dict``: ``present``, ``offset``, ``cap``, ``ctrl``,
  ``cap_bits``, ``ctrl_bits`` (bit names).
* ``decode_acs(value) -> ['SV', ...]``, ``encode_acs(['SV', 'RR']) -> int``.
* ``write_acs_ctrl(sysroot, bdf, value) -> (before, after)``: read-modify-write of the 16-bit
  control register at ECAP_ACS+6 through ``Sysroot.write_at``, then read back.
* ``device_chain(sysroot, bdf) -> (root_bus, [bdf, ...])`` from the root bus down to the device,
  from the realpath of ``/sys/bus/pci/devices/<bdf>``.
* ``kernel_path(sysroot, bdf) -> '0000:15:01.0/00.0/00.0'``: the path form understood by
  ``pci=disable_acs_redir=`` / ``pci=config_acs=`` (drivers/pci/pci.c ``pci_dev_str_match_path``):
  the first element ``<domain>:<bus>:<dev>.<fn>`` is the device on the root bus, each following
  ``<dev>.<fn>`` the next device downstream, ending at the device itself.

Errors reading hardware raise ``PciError`` (a ``ValueError``) with a message for a platform engineer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import re
import struct

PCI_CFG_SPACE_SIZE = 256
PCI_CFG_SPACE_EXP_SIZE = 4096

PCI_CAP_ID_PM = 0x01
PCI_CAP_ID_MSI = 0x05
PCI_CAP_ID_EXP = 0x10
PCI_CAP_ID_MSIX = 0x11
PCI_EXT_CAP_ID_ERR = 0x0001
PCI_EXT_CAP_ID_ACS = 0x000D

ACS_CAP_OFFSET = 0x04
ACS_CTRL_OFFSET = 0x06

# ACS capability / control bits, in register order
ACS_BITS = (("SV", 0x01), ("TB", 0x02), ("RR", 0x04), ("CR", 0x08), ("UF", 0x10), ("EC", 0x20), ("DT", 0x40))
ACS_BIT = dict(ACS_BITS)
ACS_ALL = 0x7F

PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream",
    0x6: "downstream",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}

_CAP_TTL = 48          # as the kernel's PCI_FIND_CAP_TTL
_BDF_RE = re.compile(r"^(?:([0-9a-fA-F]{1,4}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\Z")
_ROOT_BUS_RE = re.compile(r"^pci([0-9a-fA-F]{4,}):([0-9a-fA-F]{2})\Z")


class PciError(ValueError):
    pass


def parse_bdf(text):
    """'0000:1a:00.0' or '1a:00.0' -> (domain, bus, dev, fn); ValueError when malformed."""
    return _parse_bdf(str(text))


# one discovery parses the same few hundred addresses thousands of times (sysfs names, links, chains)
@functools.lru_cache(maxsize=4096)
def _parse_bdf(text):
    m = _BDF_RE.match(text.strip())
    if not m:
        raise ValueError("%r is not a PCI address (want 0000:1a:00.0 or 1a:00.0)" % (text,))
    dom = int(m.group(1) or "0", 16)
    bus, dev, fn = int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)
    if dev > 0x1F:
        raise ValueError("%r: device number %#x above 0x1f" % (text, dev))
    return dom, bus, dev, fn


def normalize_bdf(text):
    """Canonical lower-case '0000:1a:00.0'."""
    return "%04x:%02x:%02x.%x" % parse_bdf(text)


def is_bdf(text):
    try:
        parse_bdf(text)
        return True
    except ValueError:
        return False


def config_path(bdf):
    return "/sys/bus/pci/devices/%s/config" % normalize_bdf(bdf)


class ConfigSpace(object):
    """A device's config space bytes with bounded capability walks."""

    def __init__(self, data, bdf=None):
        self.data = bytes(data)
        self.bdf = bdf

    def __len__(self):
        return len(self.data)

    def u8(self, off):
        return self.data[off] if 0 <= off < len(self.data) else None

    def u16(self, off):
        if off < 0 or off + 2 > len(self.data):
            return None
        return struct.unpack_from("<H", self.data, off)[0]

    def u32(self, off):
        if off < 0 or off + 4 > len(self.data):
            return None
        return struct.unpack_from("<I", self.data, off)[0]

    @property
    def vendor(self):
        return self.u16(0x00)

    @property
    def device(self):
        return self.u16(0x02)

    @property
    def header_type(self):
        """Header layout without the multi-function bit: 0 endpoint, 1 PCI-PCI bridge, 2 CardBus."""
        h = self.u8(0x0E)
        return None if h is None else h & 0x7F

    @property
    def is_bridge(self):
        return self.header_type == 1

    def bus_numbers(self):
        """(primary, secondary, subordinate) of a type 1 header, else None."""
        if not self.is_bridge:
            return None
        return self.u8(0x18), self.u8(0x19), self.u8(0x1A)

    def capabilities(self):
        """[(cap_id, offset)] of the standard capability list (bounded, loop protected)."""
        status = self.u16(0x06)
        if status is None or not status & 0x0010:
            return []
        pos = self.u8(0x34)
        caps, seen = [], set()
        ttl = _CAP_TTL
        while pos and ttl > 0:
            pos &= 0xFC
            if pos < 0x40 or pos + 2 > min(len(self.data), PCI_CFG_SPACE_SIZE) or pos in seen:
                break
            seen.add(pos)
            cap_id = self.u8(pos)
            if cap_id == 0xFF:
                break
            caps.append((cap_id, pos))
            pos = self.u8(pos + 1)
            ttl -= 1
        return caps

    def find_capability(self, cap_id):
        for cid, off in self.capabilities():
            if cid == cap_id:
                return off
        return None

    @property
    def has_extended(self):
        return len(self.data) >= PCI_CFG_SPACE_EXP_SIZE

    def extended_capabilities(self):
        """[(cap_id, version, offset)] from 0x100 (bounded, loop protected).

        Raises PciError when only the first 256 (or 64) bytes could be read.
        """
        if not self.has_extended:
            raise PciError(
                "config space of %s is only %d bytes: the extended capabilities (ACS) live above 0x100 and "
                "only root can read the full 4096 bytes (run the task with become: true)"
                % (self.bdf or "the device", len(self.data)))
        pos = 0x100
        caps, seen = [], set()
        ttl = (PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) // 8
        while ttl > 0:
            header = self.u32(pos)
            if header is None or header in (0, 0xFFFFFFFF):
                break
            caps.append((header & 0xFFFF, (header >> 16) & 0xF, pos))
            seen.add(pos)
            nxt = (header >> 20) & 0xFFC
            if nxt < PCI_CFG_SPACE_SIZE or nxt in seen or nxt + 4 > len(self.data):
                break
            pos = nxt
            ttl -= 1
        return caps

    def find_ext_capability(self, cap_id):
        for cid, _ver, off in self.extended_capabilities():
            if cid == cap_id:
                return off
        return None

    @property
    def port_type(self):
        """PCI Express device/port type (0 endpoint, 4 root port, 5 upstream, 6 downstream...), or None."""
        off = self.find_capability(PCI_CAP_ID_EXP)
        if off is None:
            return None
        flags = self.u16(off + 2)
        return None if flags is None else (flags >> 4) & 0xF

    @property
    def port_type_name(self):
        pt = self.port_type
        if pt is None:
            return "pci_bridge" if self.is_bridge else "pci"
        return PORT_TYPES.get(pt, "type_%d" % pt)


def read_config(sysroot, bdf):
    """Read the config space of a device through the sysroot."""
    bdf = normalize_bdf(bdf)
    try:
        data = sysroot.read_bytes(config_path(bdf))
    except (IOError, OSError) as e:
        raise PciError("cannot read the config space of %s (%s): %s" % (bdf, config_path(bdf), e))
    if len(data) < 64:
        raise PciError("config space of %s is only %d bytes" % (bdf, len(data)))
    return ConfigSpace(data, bdf)


def decode_acs(value):
    """Names of the ACS bits set in a capability or control value, in register order."""
    return [name for name, bit in ACS_BITS if value & bit]


def encode_acs(names):
    """['SV', 'RR'] (or 'SV,RR' / 'SV|RR') -> bit value; ValueError on an unknown name."""
    if isinstance(names, str):
        names = [n for n in re.split(r"[,|+\s]+", names) if n]
    value = 0
    for n in names:
        key = str(n).strip().upper()
        if key not in ACS_BIT:
            raise ValueError("unknown ACS bit %r (known: %s)" % (n, ", ".join(name for name, _bit in ACS_BITS)))
        value |= ACS_BIT[key]
    return value


def acs_info(sysroot, bdf, config=None):
    """ACS state of a device: present, offset, cap, ctrl and their bit names."""
    cfg = config if config is not None else read_config(sysroot, bdf)
    off = cfg.find_ext_capability(PCI_EXT_CAP_ID_ACS)
    if off is None:
        return {"present": False, "offset": None, "cap": None, "ctrl": None, "cap_bits": [], "ctrl_bits": []}
    cap = cfg.u16(off + ACS_CAP_OFFSET)
    ctrl = cfg.u16(off + ACS_CTRL_OFFSET)
    if cap is None or ctrl is None:
        raise PciError("ACS capability of %s at %#x is cut off" % (cfg.bdf, off))
    return {"present": True, "offset": off, "cap": cap, "ctrl": ctrl,
            "cap_bits": decode_acs(cap), "ctrl_bits": decode_acs(ctrl)}


def write_acs_ctrl(sysroot, bdf, value):
    """Write the 16-bit ACS control register; returns (before, after) as read back.

    Bits above 0x7F (reserved) are preserved from the current value. Raises PciError when the
    device has no ACS capability or the read-back differs.
    """
    bdf = normalize_bdf(bdf)
    cfg = read_config(sysroot, bdf)
    info = acs_info(sysroot, bdf, cfg)
    if not info["present"]:
        raise PciError("%s has no ACS extended capability" % bdf)
    before = info["ctrl"]
    new = (before & ~ACS_ALL & 0xFFFF) | (int(value) & ACS_ALL)
    if new != before:
        try:
            sysroot.write_at(config_path(bdf), info["offset"] + ACS_CTRL_OFFSET, struct.pack("<H", new))
        except (IOError, OSError) as e:
            raise PciError("cannot write the ACS control register of %s: %s" % (bdf, e))
    after = acs_info(sysroot, bdf)["ctrl"]
    if after != new:
        raise PciError("ACS control of %s reads back %#06x after writing %#06x" % (bdf, after, new))
    return before, after


def device_chain(sysroot, bdf):
    """(root_bus, [bdf, ...]): the devices from the root bus down to ``bdf`` (inclusive).

    ``root_bus`` is the sysfs host bridge directory name, e.g. ``pci0000:15``.
    """
    bdf = normalize_bdf(bdf)
    link = "/sys/bus/pci/devices/%s" % bdf
    if not sysroot.exists(link):
        raise PciError("PCI device %s not found (%s)" % (bdf, link))
    parts = [p for p in sysroot.realpath(link).split("/") if p]
    root_bus = None
    chain = []
    for p in parts:
        if _ROOT_BUS_RE.match(p):
            root_bus, chain = p, []
        elif root_bus is not None and is_bdf(p) and p.count(":") == 2:
            chain.append(p.lower())
    if root_bus is None or not chain or chain[-1] != bdf:
        raise PciError("cannot place %s below a PCI root bus (resolved to %s)" % (bdf, "/".join(parts)))
    return root_bus, chain


def kernel_path(sysroot, bdf):
    """The kernel's path form of a device: '<domain>:<bus>:<dev>.<fn>/<dev>.<fn>/...'."""
    _root, chain = device_chain(sysroot, bdf)
    first = chain[0]
    rest = ["%02x.%x" % parse_bdf(b)[2:] for b in chain[1:]]
    return "/".join([first] + rest)


def parse_kernel_path(text):
    """'0000:15:01.0/00.0' -> ('0000:15:01.0', [(0, 0)]); ValueError when malformed."""
    parts = str(text).strip().split("/")
    first = normalize_bdf(parts[0])
    rest = []
    for p in parts[1:]:
        m = re.match(r"^([0-9a-fA-F]{1,2})\.([0-7])\Z", p)
        if not m:
            raise ValueError("%r: path element %r is not <dev>.<fn>" % (text, p))
        rest.append((int(m.group(1), 16), int(m.group(2), 16)))
    return first, rest
