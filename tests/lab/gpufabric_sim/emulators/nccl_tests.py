# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EMULATOR of nccl-tests' ``all_reduce_perf`` for simulated nodes (tier 2), one process with ``-g`` GPUs. It moves
no data; it prints what the real tool and NCCL print (the formats of docs/validate.md: nccl-tests 2.19.6
``src/util.cu``/``all_reduce.cu``, NCCL 2.28/2.30 INFO lines, as in tests/fixtures/validate/built-allreduce-*) for
the node's state and the environment it is given:

- GPUs: the NVIDIA 3D controllers of the sysroot in bus order (``nvidia_smi.gpus``), narrowed by
  ``CUDA_VISIBLE_DEVICES``; ``-g`` more than that fails like nccl-tests (``Invalid number of GPUs``).
- Transport between the ranks: with ``NCCL_P2P_DISABLE=1`` and ``NCCL_SHM_DISABLE=1`` the network (``via
  NET/IB/<n>/GDRDMA``; without ``/GDRDMA`` under ``NCCL_NET_GDR_LEVEL=LOC`` or when GPUDirect RDMA is off; ``via
  NET/Socket/<n>`` with ``NCCL_IB_DISABLE=1`` or no RDMA device), else ``P2P/CUMEM/read`` (SHM with
  ``NCCL_P2P_DISABLE=1``). One rank connects no channel.
- ``NCCL_NET=IB`` with IB disabled or no RDMA device: ``NCCL WARN Failed to initialize any NET plugin`` and the
  test fails (rc 1), as recorded on the H200 host (tests/fixtures/validate/h200-microvm/nccl-pinned-ib.log).
- Bus bandwidth per transport (GB/s, the largest sizes; small sizes lower, latency bound): NET with GDR 47, NET
  without GDR 25.6, sockets 1.78 (the built fixtures), P2P over NVLink 360, SHM 19, times the fault knob.

The fault knob (no real node has it): ``<root>/var/lib/gpufabric-sim/nccl/state.json``
``{"gdr": false, "bandwidth_factor": 0.5}``. ``gdr: false`` is GPUDirect RDMA silently off (the NVIDIA/nccl#1676
signature: ``NET/IB : GPU Direct RDMA Disabled for HCA <n> '<dev>'`` and no ``/GDRDMA`` on any channel);
``bandwidth_factor`` scales every bandwidth (a regression after an upgrade). ``write_state`` sets it.
The first line says it is this emulator.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys

from gpufabric_sim.emulators import nvidia_smi

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
STATE_FILE = "var/lib/gpufabric-sim/nccl/state.json"
VERSION = "2.19.6"
NCCL = "2.28.9+cuda13.0"
BUSBW = {"net_gdr": 47.0, "net": 25.6, "socket": 1.78, "p2p": 360.0, "shm": 19.0, "local": 0.0}
CHANNELS = 2
LATENCY_US = {"net_gdr": 20.0, "net": 30.0, "socket": 150.0, "p2p": 8.0, "shm": 12.0, "local": 5.0}
SIZE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class NcclTestError(Exception):
    pass


def write_state(root, gdr=None, bandwidth_factor=None):
    """Set the fault knob of a node (None leaves a field as it is)."""
    path = os.path.join(root, STATE_FILE)
    state = read_state(root)
    if gdr is not None:
        state["gdr"] = bool(gdr)
    if bandwidth_factor is not None:
        state["bandwidth_factor"] = float(bandwidth_factor)
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump(state, f)


def read_state(root):
    try:
        with open(os.path.join(root, STATE_FILE)) as f:
            state = json.load(f)
    except (IOError, OSError, ValueError):
        state = {}
    return {"gdr": state.get("gdr", True), "bandwidth_factor": float(state.get("bandwidth_factor", 1.0))}


def ib_devices(root):
    """[(ibdev, netdev or None)] of the sysroot's RDMA devices, sorted."""
    base = os.path.join(root, "sys/class/infiniband")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for dev in names:
        try:
            nets = sorted(os.listdir(os.path.join(base, dev, "device", "net")))
        except OSError:
            nets = []
        out.append((dev, nets[0] if nets else None))
    return out


def _size(text):
    t = text.strip()
    mult = SIZE.get(t[-1:].upper(), 1)
    digits = t[:-1] if t[-1:].upper() in SIZE else t
    if not digits.isdigit():
        raise NcclTestError("invalid size %r" % text)
    return int(digits) * mult


def parse(argv):
    ap = argparse.ArgumentParser(prog="all_reduce_perf", add_help=False)
    ap.add_argument("-b", "--minbytes", default="32M")
    ap.add_argument("-e", "--maxbytes", default="32M")
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-g", "--ngpus", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=1)
    ap.add_argument("-c", "--check", type=int, default=1)
    args = ap.parse_args(argv)
    args.minbytes, args.maxbytes = _size(args.minbytes), _size(args.maxbytes)
    return args


def _transport(env, ranks, ibdevs, state):
    """(kind, error): kind one of BUSBW's keys; error the NET plugin failure of a pinned network."""
    ib_off = env.get("NCCL_IB_DISABLE") == "1" or not ibdevs
    if env.get("NCCL_NET") == "IB" and ib_off:
        return None, "Failed to initialize any NET plugin"
    if ranks < 2:
        return "local", None
    if env.get("NCCL_P2P_DISABLE") == "1" and env.get("NCCL_SHM_DISABLE") == "1":
        if ib_off:
            return "socket", None
        gdr = state["gdr"] and env.get("NCCL_NET_GDR_LEVEL", "").upper() != "LOC"
        return ("net_gdr" if gdr else "net"), None
    return ("shm" if env.get("NCCL_P2P_DISABLE") == "1" else "p2p"), None


def _via(kind, rank, ibdevs):
    n = rank % max(len(ibdevs), 1)
    return {"net_gdr": "NET/IB/%d/GDRDMA" % n, "net": "NET/IB/%d" % n, "socket": "NET/Socket/%d" % n,
            "p2p": "P2P/CUMEM/read", "shm": "SHM/direct/direct"}[kind]


def run(args, env, root, out, host, pid):
    visible = nvidia_smi.gpus(root)
    if env.get("CUDA_VISIBLE_DEVICES"):
        idx = [int(i) for i in env["CUDA_VISIBLE_DEVICES"].split(",") if i.strip().isdigit()]
        visible = [visible[i] for i in idx if i < len(visible)]
    ranks = args.ngpus
    state = read_state(root)
    ibdevs = ib_devices(root)
    w = out.write
    w("# EMULATOR gpufabric_sim all_reduce_perf (moves no data)\n")
    w("# nccl-tests version %s nccl-headers=22809 nccl-library=22809\n" % VERSION)
    w("# Collective test starting: all_reduce_perf\n")
    w("# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d agg iters: 1 "
      "validation: %d graph: 0 unalign: 0\n#\n# Using devices\n"
      % (ranks, args.minbytes, args.maxbytes, args.stepfactor, args.warmup_iters, args.iters, args.check))
    if ranks < 1 or ranks > len(visible):
        w("%s: Test CUDA failure common.cu:1000 'invalid device ordinal'\n .. %s pid %d: Test failure "
          "common.cu:1100\n" % (host, host, pid))
        raise NcclTestError("Invalid number of GPUs: %d requested, %d visible" % (ranks, len(visible)))
    for r in range(ranks):
        bdf = visible[r][0]
        w("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n"
          % (r, pid, host, r, bdf[:-2], nvidia_smi.NAMES.get(visible[r][1], "NVIDIA GPU")))
    pre = "%s:%d:%d [0] NCCL INFO " % (host, pid, pid + 79)
    w("%sNCCL version %s\n" % (pre, NCCL))
    for k in ("NCCL_NET_GDR_LEVEL", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET"):
        if k in env:
            w("%s%s set by environment to %s%s\n" % (pre, k, env[k], "." if k.endswith("DISABLE") else ""))
    kind, error = _transport(env, ranks, ibdevs, state)
    ib_on = ibdevs and env.get("NCCL_IB_DISABLE") != "1"
    oob = next((n for _d, n in ibdevs if n), "eth0")
    if ib_on:
        w("%sNET/IB : Using %s [RO]; OOB %s:10.0.0.1<0>\n"
          % (pre, " ".join("[%d]%s:1/RoCE" % (i, d) for i, (d, _n) in enumerate(ibdevs)), oob))
        if not state["gdr"]:
            for i, (d, _n) in enumerate(ibdevs):
                w("%sNET/IB : GPU Direct RDMA Disabled for HCA %d '%s'\n" % (pre, i, d))
    else:
        w("%sNET/IB : No device found.\n" % pre)
    if error:
        w("%s:%d:%d [0] plugin/net.cc:379 NCCL WARN %s\n" % (host, pid, pid + 79, error))
        w("%s: Test NCCL failure common.cu:1279 'invalid usage (run with NCCL_DEBUG=WARN for details)'\n" % host)
        raise NcclTestError("")
    w("%sNET/Socket : Using [0]%s:10.0.0.1<0>\n" % (pre, oob) if not ib_on else "")
    w("%sUsing network %s\n" % (pre, "IB" if ib_on else "Socket"))
    for r in range(ranks):
        w("%sncclCommInitRank comm 0x5611c%d rank %d nranks %d cudaDev %d nvmlDev %d busId %s - Init START\n"
          % (pre, r, r, ranks, r, r, visible[r][0].split(":", 1)[1].replace(":", "").replace(".", "")[:5]))
    if ranks > 1:
        for c in range(CHANNELS):
            for r in range(ranks):
                peer = (r + 1) % ranks
                w("%sChannel %02d/0 : %d[%d] -> %d[%d] via %s\n" % (pre, c, r, r, peer, peer, _via(kind, r, ibdevs)))
        w("%sConnected all rings, use ring PXN 0 GDR %d\n" % (pre, 1 if kind == "net_gdr" else 0))
    w("%s%d coll channels, 0 collnet channels, 0 nvls channels, %d p2p channels, 2 p2p channels per peer\n"
      % (pre, CHANNELS, CHANNELS))
    _table(args, ranks, kind, state["bandwidth_factor"], w)
    return 0


def _table(args, ranks, kind, factor, w):
    w("#\n#%62s%35s\n" % ("out-of-place", "in-place"))
    w("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
      "#wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
      "(GB/s)\n")
    bus_factor = 2.0 * (ranks - 1) / ranks
    sizes, s = [], args.minbytes
    while s <= args.maxbytes:
        sizes.append(s)
        s *= max(args.stepfactor, 2)
    total = 0.0
    for size in sizes:
        peak = BUSBW[kind] * factor
        if bus_factor:
            # latency bound at small sizes: time = latency + bytes moved / peak
            t_us = LATENCY_US[kind] + size * bus_factor / (peak * 1e3)
            algbw = size / (t_us * 1e3)
        else:
            t_us = LATENCY_US[kind] + size / 1e6
            algbw = size / (t_us * 1e3)
        busbw = algbw * bus_factor
        total += busbw
        wrong = "0" if args.check else "N/A"
        half = "%9.2f %7.2f %7.2f %7s" % (t_us, algbw, busbw, wrong)
        w("%12d  %12d     float     sum      -1  %s  %s\n" % (size, size // 4, half, half))
    w("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n\n" % (total / len(sizes)))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root = os.environ.get(SYSROOT_ENV) or "/"
    host = os.environ.get("GPUFABRIC_SIM_NODE") or os.path.basename(os.path.dirname(os.path.abspath(root))) or "node"
    try:
        args = parse(argv)
        rc = run(args, dict(os.environ), root, sys.stdout, host, os.getpid())
    except NcclTestError as e:
        sys.stdout.flush()
        if str(e):
            sys.stderr.write("%s\n" % e)
        return 1
    except SystemExit:
        return 2
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
