# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Emulator of ``ethtool -S`` and ``ethtool -i`` for mlx5 rails of a simulated node.

Counters live in ``<root>/var/lib/gpufabric-sim/ethtool/<netdev>.json``. The per-priority
counter names and their order follow mlx5's en_stats.c: ``rx_prio{p}_bytes|packets|discards``
and ``tx_prio{p}_bytes|packets`` for every priority, and the PFC group
(``rx_prio{p}_pause``, ``rx_prio{p}_pause_duration``, ``tx_prio{p}_pause``,
``tx_prio{p}_pause_duration``, ``rx_prio{p}_pause_transition``) only for priorities that have
PFC enabled in the device's DCB state (see ``dcb.py``).

``inject_traffic()`` accounts traffic to the priority the current DCB state maps its DSCP to
(PCP trust: priority 0 for untagged RoCE), and pause frames when the path is congested and PFC is
enabled on that priority; otherwise a congested priority drops (``rx_prio{p}_discards``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import sys

from gpufabric_sim.emulators import dcb as dcb_emu

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
FIRMWARE = "28.39.1002 (MT_0000000838)"
GLOBAL_COUNTERS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_packets_phy",
                   "rx_bytes_phy", "tx_packets_phy", "tx_bytes_phy", "rx_discards_phy",
                   "rx_pause_ctrl_phy", "tx_pause_ctrl_phy")
PRIO_TRAFFIC = ("rx_prio{p}_bytes", "rx_prio{p}_packets", "rx_prio{p}_discards",
                "tx_prio{p}_bytes", "tx_prio{p}_packets")
PRIO_PFC = ("rx_prio{p}_pause", "rx_prio{p}_pause_duration", "tx_prio{p}_pause",
            "tx_prio{p}_pause_duration", "rx_prio{p}_pause_transition")
# 802.3 pause quanta: one quantum is 512 bit times; durations are reported in microseconds.
PAUSE_QUANTA = 0xFFFF
LINK_GBPS = 400


def _path(root, netdev):
    return os.path.join(root, dcb_emu.STATE_DIR, "ethtool", netdev + ".json")


def _manifest(root):
    return dcb_emu._read_json(os.path.join(root, dcb_emu.STATE_DIR, "manifest.json"), {}) or {}


def _empty_prio():
    return {"rx_bytes": 0, "rx_packets": 0, "rx_discards": 0, "tx_bytes": 0, "tx_packets": 0,
            "rx_pause": 0, "rx_pause_duration": 0, "tx_pause": 0, "tx_pause_duration": 0,
            "rx_pause_transition": 0}


def _lock_path(root):
    return os.path.join(root, dcb_emu.STATE_DIR, "ethtool", ".lock")


def init_node(root, iproute2_version=dcb_emu.DEFAULT_VERSION):
    """The state directory and its lock (commands never create files: check-mode tree hashes hold)."""
    dcb_emu.ensure_lock(_lock_path(root))


def init_device(root, netdev, driver="mlx5_core", bus_info=None, firmware=FIRMWARE):
    """Zero counters; driver info from the arguments or the node manifest."""
    if bus_info is None:
        for rail in _manifest(root).get("rails", []):
            if rail.get("netdev") == netdev:
                bus_info = rail.get("bdf")
    st = {"netdev": netdev, "driver": driver, "bus_info": bus_info or "",
          "firmware": firmware,
          "global": dict((k, 0) for k in GLOBAL_COUNTERS),
          "prio": dict((str(p), _empty_prio()) for p in range(8))}
    dcb_emu._write_json(_path(root, netdev), st)
    dcb_emu.ensure_lock(_lock_path(root))
    return st


def reset_device(root, netdev):
    """A driver reload zeroes the hardware counters."""
    st = state(root, netdev)
    if st is None:
        raise KeyError("no ethtool state for %s" % netdev)
    return init_device(root, netdev, st["driver"], st["bus_info"], st["firmware"])


def state(root, netdev):
    return dcb_emu._read_json(_path(root, netdev))


def counters(root, netdev):
    """The ``ethtool -S`` counters as an ordered list of (name, value)."""
    st = state(root, netdev)
    dst = dcb_emu.state(root, netdev)
    pfc = dcb_emu.pfc_enabled(dst) if dst else []
    out = [(k, st["global"][k]) for k in GLOBAL_COUNTERS]
    for p in range(8):
        c = st["prio"][str(p)]
        for name in PRIO_TRAFFIC:
            out.append((name.format(p=p), c[name.replace("_prio{p}", "")]))
    for p in pfc:
        c = st["prio"][str(p)]
        for name in PRIO_PFC:
            out.append((name.format(p=p), c[name.replace("_prio{p}", "")]))
    if pfc:
        out.append(("tx_pause_storm_warning_events", 0))
        out.append(("tx_pause_storm_error_events", 0))
    return out


def inject_traffic(root, netdev, direction, dscp, nbytes, npackets, congested=False):
    """Account traffic of one DSCP on a rail; returns the priority it was accounted to.

    direction: "rx" or "tx". When congested, a PFC-enabled priority sends (rx) or receives (tx)
    pause frames, one per packet burst of 10 packets; without PFC a congested rx drops packets.
    """
    if direction not in ("rx", "tx"):
        raise ValueError("direction must be rx or tx")
    if not 0 <= int(dscp) <= 63:
        raise ValueError("dscp must be 0..63")
    path = _path(root, netdev)
    lock = open(_lock_path(root), "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        st = state(root, netdev)
        if st is None:
            raise KeyError("no ethtool state for %s" % netdev)
        dst = dcb_emu.state(root, netdev)
        prio = dcb_emu.dscp_priority(dst, int(dscp)) if dst else 0
        pfc_on = bool(dst) and prio in dcb_emu.pfc_enabled(dst)
        c = st["prio"][str(prio)]
        g = st["global"]
        delivered = npackets
        if congested and direction == "rx" and not pfc_on:
            dropped = max(1, npackets // 10)
            c["rx_discards"] += dropped
            g["rx_discards_phy"] += dropped
            delivered = npackets - dropped
        dbytes = nbytes * delivered // npackets if npackets else nbytes
        c[direction + "_bytes"] += dbytes
        c[direction + "_packets"] += delivered
        g[direction + "_bytes"] += dbytes
        g[direction + "_packets"] += delivered
        g[direction + "_bytes_phy"] += nbytes
        g[direction + "_packets_phy"] += npackets
        if congested and pfc_on:
            frames = max(1, npackets // 10)
            usec = frames * PAUSE_QUANTA * 512 // (LINK_GBPS * 1000)
            # rx congestion: we send pause (tx_pause); tx congestion: the peer pauses us.
            side = "tx" if direction == "rx" else "rx"
            c[side + "_pause"] += frames
            c[side + "_pause_duration"] += usec
            if side == "rx":
                c["rx_pause_transition"] += 1
        dcb_emu._write_json(path, st)
        return prio
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _kernel_release(root):
    rel = _manifest(root).get("kernel_release")
    if rel:
        return rel
    try:
        with open(os.path.join(root, "proc/sys/kernel/osrelease")) as f:
            return f.read().strip()
    except (IOError, OSError):
        return os.uname()[2]


def run(argv, root=None):
    if root is None:
        root = os.environ.get(SYSROOT_ENV) or "/"
    bad = ("ethtool: bad command line argument(s)\n"
           "For more information run ethtool -h\n")
    if len(argv) == 1 and argv[0] in ("--version",):
        return 0, "ethtool version 6.1\n", ""
    if len(argv) != 2 or argv[0] not in ("-S", "--statistics", "-i", "--driver"):
        return 1, "", bad
    dev = argv[1]
    st = state(root, dev)
    if argv[0] in ("-S", "--statistics"):
        if st is None:
            return 96, "", "Cannot get stats strings information: No such device\n"
        lines = ["NIC statistics:\n"]
        lines.extend("     %s: %d\n" % (k, v) for k, v in counters(root, dev))
        return 0, "".join(lines), ""
    if st is None:
        return 71, "", "Cannot get driver information: No such device\n"
    out = ("driver: %s\nversion: %s\nfirmware-version: %s\nexpansion-rom-version: \n"
           "bus-info: %s\nsupports-statistics: yes\nsupports-test: yes\n"
           "supports-eeprom-access: no\nsupports-register-dump: no\nsupports-priv-flags: yes\n"
           % (st["driver"], _kernel_release(root), st["firmware"], st["bus_info"]))
    return 0, out, ""


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    rc, out, err = run(argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    sys.stderr.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
