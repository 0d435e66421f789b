# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Baseline helper: what `setpci -s BDF ECAP_ACS+6.w=VALUE:MASK` does, for the simulated sysfs config files.

usage: acs_clear.py CONFIG_FILE MASK [--write]
Prints the ACS control register (hex) before and "set"/"clear" for MASK; with --write clears MASK and prints "changed" when it did.
Exit 3 when the device has no ACS extended capability.
"""
import struct
import sys


def main(argv):
    path, mask, write = argv[1], int(argv[2], 0), "--write" in argv[3:]
    with open(path, "r+b" if write else "rb") as f:
        cfg = f.read(4096)
        off = 0x100
        while off and off + 8 <= len(cfg):
            hdr = struct.unpack_from("<I", cfg, off)[0]
            if hdr & 0xFFFF == 0x000D:
                ctrl = struct.unpack_from("<H", cfg, off + 6)[0]
                print("%04x %s" % (ctrl, "set" if ctrl & mask else "clear"))
                if write and ctrl & mask:
                    f.seek(off + 6)
                    f.write(struct.pack("<H", ctrl & ~mask & 0xFFFF))
                    print("changed")
                return 0
            off = (hdr >> 20) & 0xFFC
    sys.stderr.write("%s: no ACS capability\n" % path)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
