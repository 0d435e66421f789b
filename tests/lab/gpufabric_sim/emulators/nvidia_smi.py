# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EMULATOR of ``nvidia-smi nvlink --status`` (``-s``) for simulated nodes (tier 2), the one command the
``fabric_manager`` concern runs.

What it models, from the node's sysroot:

- the GPUs are the NVIDIA display/3D controllers of ``sys/bus/pci/devices`` in bus order, numbered from 0 as
  nvidia-smi numbers them (by PCI bus id);
- on a node with NVSwitches (NVIDIA bridge-class devices), each GPU prints ``GPU <n>: <name> (UUID: GPU-...)``
  and its 18 NVLink 4 links (Hopper), tab-indented, ``Link <k>: 26.562 GB/s`` when trained and ``Link <k>:
  <inactive>`` when not. Fabric Manager trains them: while no ``nv-fabricmanager`` process runs (the sysroot's
  ``proc/<pid>/comm``, what discovery reads), every link is ``<inactive>``. A test takes single links down in the
  simulator's own state, ``var/lib/gpufabric-sim/nvlink/down`` (lines ``<gpu> <link>``; no real node has it);
- a GPU without NVLink peers prints nothing and nvidia-smi exits 0: recorded on a real H200 host
  (``tests/fixtures/validate/h200-microvm/nvidia-smi-nvlink-status.txt``).

Any other command exits 2 with a message: the emulator does not pretend to more than it models.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import sys

from gpufabric_sim.emulators.files import read_attr as _read

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
LINKS_PER_GPU = 18          # NVLink 4 on Hopper (H100/H200 SXM)
LINK_GBPS = "26.562"        # per-link speed nvidia-smi prints for NVLink 4
NAMES = {"0x2330": "NVIDIA H100 80GB HBM3", "0x2335": "NVIDIA H200"}
DOWN_FILE = "var/lib/gpufabric-sim/nvlink/down"
FM_COMM = "nv-fabricmanage"


def _devices(root):
    base = os.path.join(root, "sys/bus/pci/devices")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for bdf in names:
        d = os.path.join(base, bdf)
        out.append((bdf, _read(os.path.join(d, "vendor"), ""), _read(os.path.join(d, "device"), ""),
                    _read(os.path.join(d, "class"), "")))
    return out


def gpus(root):
    return [(bdf, dev) for bdf, ven, dev, cls in _devices(root)
            if ven.lower() == "0x10de" and cls.lower()[:6] in ("0x0300", "0x0302")]


def has_nvswitch(root):
    return any(ven.lower() == "0x10de" and cls.lower()[:6] == "0x0680" for _b, ven, _d, cls in _devices(root))


def fm_running(root):
    proc = os.path.join(root, "proc")
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return False
    return any((_read(os.path.join(proc, p, "comm"), "") or "").startswith(FM_COMM) for p in pids)


def down_links(root):
    text = _read(os.path.join(root, DOWN_FILE), "") or ""
    down = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            down.add((int(parts[0]), int(parts[1])))
    return down


def nvlink_status(root):
    if not has_nvswitch(root):
        return ""
    trained = fm_running(root)
    down = down_links(root)
    lines = []
    for n, (bdf, dev) in enumerate(gpus(root)):
        uuid = hashlib.sha1(bdf.encode("ascii")).hexdigest()
        uuid = "-".join((uuid[:8], uuid[8:12], uuid[12:16], uuid[16:20], uuid[20:32]))
        lines.append("GPU %d: %s (UUID: GPU-%s)" % (n, NAMES.get(dev.lower(), "NVIDIA GPU"), uuid))
        for k in range(LINKS_PER_GPU):
            up = trained and (n, k) not in down
            lines.append("\t Link %d: %s" % (k, LINK_GBPS + " GB/s" if up else "<inactive>"))
    return "".join(line + "\n" for line in lines)


def run(argv, root):
    if argv[:2] in (["nvlink", "--status"], ["nvlink", "-s"]) and len(argv) == 2:
        return 0, nvlink_status(root), ""
    return 2, "", "nvidia-smi emulator: only 'nvlink --status' is modelled, not %r\n" % " ".join(argv)


def main(argv=None):
    root = os.environ.get(SYSROOT_ENV)
    if not root:
        sys.stderr.write("nvidia-smi emulator: %s is not set\n" % SYSROOT_ENV)
        return 2
    rc, out, err = run(list(sys.argv[1:] if argv is None else argv), root)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc
