# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EMULATOR of mstflint's ``mstconfig`` for simulated nodes (tier 2): ``mstconfig -d <bdf> query [KEY...]`` on the
ConnectX functions of the node's sysroot, in the real tool's layout (``Device #1:`` block, then ``Configurations:``
with the ``Next Boot`` column), which ``ecn_host.parse_prio_mask`` and ``dcbx.parse_mlxconfig`` read.

What it models is the firmware's per-priority DCQCN enable, ``ROCE_CC_PRIO_MASK_P<port>``: 255 (every priority) as
the firmware ships it, unless a test sets another mask in the simulator's own state,
``var/lib/gpufabric-sim/firmware/<bdf>.json`` (``{"ROCE_CC_PRIO_MASK_P1": 247}``; no such file exists on a real
node). Only the keys it knows are answered: any other is refused as the real tool refuses an unknown parameter,
and a function that is not a Mellanox/NVIDIA device of the tree cannot be opened. ``set`` is not emulated (the
collection never writes firmware settings; it says how to).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

from gpufabric_sim.emulators.files import read_attr as _read

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
MELLANOX = "0x15b3"
DEFAULTS = {"ROCE_CC_PRIO_MASK_P1": 255, "ROCE_CC_PRIO_MASK_P2": 255}
BDF = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
USAGE = "usage: mstconfig -d <bdf> query [PARAM...]\n"


def settings(root, bdf):
    """The function's firmware settings: the defaults, then the simulator's state file for it."""
    out = dict(DEFAULTS)
    raw = _read(os.path.join(root, "var", "lib", "gpufabric-sim", "firmware", "%s.json" % bdf.lower()))
    if raw:
        out.update((k, int(v)) for k, v in json.loads(raw).items())
    return out


def render(bdf, values):
    lines = ["", "Device #1:", "----------", "", "Device type:        ConnectX7           ",
             "Name:               MCX755106AS-HEA_Ax  ",
             "Description:        NVIDIA ConnectX-7 HHHL Adapter Card; 200GbE (default mode) / NDR200 IB; "
             "Dual-port QSFP112", "Device:             %s        " % bdf, "",
             "Configurations:                                      Next Boot"]
    for key, value in values:
        lines.append("        %-44s%-16s" % (key, value))
    return "\n".join(lines) + "\n\n"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    root = os.environ.get(SYSROOT_ENV, "/")
    bdf = None
    if len(argv) >= 2 and argv[0] == "-d":
        bdf = argv[1]
        argv = argv[2:]
    if not bdf or not argv or argv[0] not in ("q", "query"):
        sys.stderr.write(USAGE)
        return 1
    if not BDF.fullmatch(bdf):
        sys.stderr.write("-E- Failed to open device: %s. No such device\n" % bdf)
        return 1
    dev = os.path.join(root, "sys", "bus", "pci", "devices", bdf.lower())
    if _read(os.path.join(dev, "vendor")) != MELLANOX:
        sys.stderr.write("-E- Failed to open device: %s. No such device\n" % bdf)
        return 1
    known = settings(root, bdf)
    keys = argv[1:] or sorted(known)
    for key in keys:
        if key not in known:
            sys.stderr.write("-E- Unknown Parameter: %s\n" % key)
            return 1
    sys.stdout.write(render(bdf.lower(), [(k, known[k]) for k in keys]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
