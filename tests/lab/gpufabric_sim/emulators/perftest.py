# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EMULATOR of perftest's ``ib_write_bw`` for simulated nodes (tier 2). It moves no packets.

What it models, and only that, is what the real tool does to the NIC counters a fabric acceptance test reads:

* Marking. In RDMA-CM mode (``-R``) the QP's ToS is ``-T/--tos`` when given, otherwise the rdma_cm default of the
  device, read from the node's configfs ``sys/kernel/config/rdma_cm/<ibdev>/ports/<port>/default_roce_tos`` (0 when
  the group does not exist: the kernel default). perftest applies ``--tclass`` to the GRH only when it connects the
  QPs itself, i.e. without ``-R``; with ``-R`` it is ignored, as here. ``-T`` without ``-R`` is refused like
  perftest does. The DSCP on the wire is ToS >> 2.
* Accounting. The client (sender) accounts the data on its own rail's tx and on the receiving rail's rx of the
  server's node, each through ``ethtool.inject_traffic`` on that node's sysroot, so each card classifies the DSCP
  with its own DCB state. RC write ACKs (one per message) go the other way at the server's ToS (its ``-T`` or its
  device's rdma_cm default). Bytes follow a 400 Gb/s receiver link shared by the senders active at that moment.
* Incast. While two or more clients transfer to one receiving rail, that rail's switch port is congested: the
  switch pauses the senders, so the senders' tx is accounted ``congested`` (``rx_prio{p}_pause`` grows on a sender
  whose PFC is on for that priority; without PFC the switch would drop, which no host counter shows). The
  receiver's card is not overrun (the switch delivers at most its line rate) and sends no pause.
* The switch. ``<fleet>/switch.json`` ``{"pfc": bool, "ecn": bool}`` (default PFC on, no ECN marking; see
  :func:`write_switch`) says what the leaf does for the lossless class. With ``ecn`` it marks CE on ECN-capable
  packets (ToS ECT(0)/ECT(1)) of a congested queue: the receiving port's ``hw_counters/np_ecn_marked_roce_packets``
  grows; where the receiver's notification point is enabled on the packet's priority it sends CNPs
  (``np_cnp_sent``), which the sender handles where its reaction point is enabled (``rp_cnp_handled``, else
  ``rp_cnp_ignored``). A sender that reacts keeps the queue below the pause threshold: no pause frames (DCQCN at
  work). Without ``pfc`` the switch drops instead of pausing: no pause frame anywhere. NP/RP "enabled" is read from
  MLNX_OFED's ``/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>``; a rail without that file (inbox driver)
  counts as enabled, the firmware's choice in this simulator (the host cannot read it there).
* Rendezvous. ``ib_write_bw`` without a server address is the server: it registers a listener for its port under
  ``<root>/var/lib/gpufabric-sim/perftest/`` (an flock held for its lifetime), accepts one client and exits when
  that client is done, like perftest. While a client transfers, the server holds ``active/<netdev>/<port>.lock``;
  clients count the held locks of the receiving rail to detect concurrent senders. A client finds the server's
  node by the server address in the fleet's ``fleet.json`` (the node whose rail has that IPv4 address).

Fleet directory: ``$GPUFABRIC_SIM_FLEET`` when set; else three levels above the wrapper (``<fleet>/<node>/bin/
ib_write_bw``, argv[0]); else two above the sysroot (``<fleet>/<node>/root``). The node's root is
``$GPUFABRIC_SYSROOT``. Output follows perftest's report layout; its first line says it is this emulator.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import errno
import fcntl
import os
import sys
import time
import uuid

from gpufabric_sim.emulators import dcb as dcb_emu
from gpufabric_sim.emulators import ethtool as ethtool_emu

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
FLEET_ENV = "GPUFABRIC_SIM_FLEET"
DEFAULT_PORT = 18515
DEFAULT_ITERS = 5000
DEFAULT_SIZE = 65536
LINK_BYTES_PER_S = 400 * 1000 * 1000 * 1000 // 8
MTU_PAYLOAD = 4096
ROCE_HEADERS = 58  # Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (no VLAN)
ACK_BYTES = 62
STEP_S = 0.25
ACCEPT_TIMEOUT_S = 5.0
BANNER = "# gpufabric-sim ib_write_bw EMULATOR (tier 2): counters accounted, no packets sent\n"
LINE = "-" * 87 + "\n"


class PerftestError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# node and fleet lookups


def _state(root, *parts):
    return os.path.join(root, dcb_emu.STATE_DIR, "perftest", *parts)


def _manifest(root):
    return dcb_emu._read_json(os.path.join(root, dcb_emu.STATE_DIR, "manifest.json"), {}) or {}


def rail_of(root, ibdev, port=1):
    """The manifest rail (netdev, ibdev, ipv4, ...) of an RDMA device port."""
    for r in _manifest(root).get("rails", []):
        if r.get("ibdev") == ibdev and int(r.get("port", 1)) == int(port):
            return r
    return None


def first_ibdev(root):
    rails = sorted(_manifest(root).get("rails", []), key=lambda r: r.get("ibdev", ""))
    return rails[0]["ibdev"] if rails else None


def configfs_tos(root, ibdev, port):
    path = os.path.join(root, "sys/kernel/config/rdma_cm", ibdev, "ports", str(port), "default_roce_tos")
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (IOError, OSError, ValueError):
        return 0


def gid_valid(root, ibdev, port, index):
    path = os.path.join(root, "sys/class/infiniband", ibdev, "ports", str(port), "gids", str(index))
    try:
        with open(path) as f:
            return f.read().strip().replace(":", "").strip("0") != ""
    except (IOError, OSError):
        return False


def find_fleet(argv0, root):
    cands = []
    if os.environ.get(FLEET_ENV):
        cands.append(os.environ[FLEET_ENV])
    if argv0:
        cands.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(argv0)))))
    if root:
        cands.append(os.path.dirname(os.path.dirname(os.path.abspath(root))))
    for c in cands:
        if os.path.isfile(os.path.join(c, "fleet.json")):
            return c
    return None


def find_server(fleet, address):
    """(node name, root, rail) of the fleet node that owns ``address`` on one of its rails."""
    data = dcb_emu._read_json(os.path.join(fleet, "fleet.json"), {}) or {}
    for n in data.get("nodes", []):
        for r in n.get("rails", []):
            if str(r.get("ipv4", "")).split("/", 1)[0] == address:
                return n["name"], n["root"], r
    return None


def write_switch(fleet, pfc=True, ecn=False):
    """What the simulated leaf does for the lossless class (see the module docstring)."""
    dcb_emu._write_json(os.path.join(fleet, "switch.json"), {"pfc": bool(pfc), "ecn": bool(ecn)})


def switch_config(fleet):
    data = dcb_emu._read_json(os.path.join(fleet, "switch.json"), {}) if fleet else {}
    return {"pfc": bool((data or {}).get("pfc", True)), "ecn": bool((data or {}).get("ecn", False))}


def ecn_enabled(root, netdev, point, prio):
    path = os.path.join(root, "sys/class/net", netdev, "ecn", "roce_" + point, "enable", str(prio))
    try:
        with open(path) as f:
            return f.read().strip() == "1"
    except (IOError, OSError):
        return True


def bump_hw_counter(root, ibdev, name, n, port=1):
    """Add ``n`` to an RDMA port's hw_counters file, under the node's ethtool lock."""
    path = os.path.join(root, "sys/class/infiniband", ibdev, "ports", str(port), "hw_counters", name)
    if not os.path.exists(path):
        return
    lock = open(ethtool_emu._lock_path(root), "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as f:
            value = int(f.read().strip() or 0)
        with open(path, "w") as f:
            f.write("%d\n" % (value + n))
    finally:
        lock.close()


# ----------------------------------------------------------------------------------------------
# locks


def _lock_path(path):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    return open(path, "a")


def try_lock(path):
    """An exclusively flocked file object, or None when another process holds it."""
    f = _lock_path(path)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return f
    except (IOError, OSError) as e:
        f.close()
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise


def is_held(path):
    if not os.path.exists(path):
        return False
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except (IOError, OSError) as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return True
            raise
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def active_senders(root, netdev):
    d = _state(root, "active", netdev)
    if not os.path.isdir(d):
        return 0
    return sum(1 for name in os.listdir(d) if name.endswith(".lock") and is_held(os.path.join(d, name)))


# ----------------------------------------------------------------------------------------------
# command line


def build_parser():
    p = argparse.ArgumentParser(prog="ib_write_bw", add_help=True, allow_abbrev=False)
    p.add_argument("-d", "--ib-dev")
    p.add_argument("-i", "--ib-port", type=int, default=1)
    p.add_argument("-x", "--gid-index", type=int)
    p.add_argument("-R", "--rdma_cm", action="store_true")
    p.add_argument("-T", "--tos", type=int)
    p.add_argument("--tclass", type=int)
    p.add_argument("-p", "--port", type=int, default=DEFAULT_PORT)
    p.add_argument("-D", "--duration", type=int)
    p.add_argument("-n", "--iters", type=int)
    p.add_argument("-s", "--size", type=int, default=DEFAULT_SIZE)
    p.add_argument("-q", "--qp", type=int, default=1)
    p.add_argument("-m", "--mtu", type=int)
    p.add_argument("-F", "--CPU-freq", action="store_true")
    p.add_argument("--report_gbits", action="store_true")
    p.add_argument("server", nargs="?")
    return p


def parse(argv):
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        if e.code == 0:  # --help was printed
            raise
        raise PerftestError("bad arguments")
    if args.tos is not None and not args.rdma_cm:
        raise PerftestError(" TOS only valid for rdma_cm based QP and RawEth QP")
    for name, v, hi in (("tos", args.tos, 255), ("tclass", args.tclass, 255)):
        if v is not None and not 0 <= v <= hi:
            raise PerftestError(" Invalid %s value %d (0-%d)" % (name, v, hi))
    if args.duration is not None and args.iters is not None:
        raise PerftestError(" Duration mode and iterations are mutually exclusive")
    if args.duration is not None and args.duration <= 0:
        raise PerftestError(" Duration must be positive")
    if args.size <= 0 or args.qp <= 0 or (args.iters is not None and args.iters < 5):
        raise PerftestError(" Invalid size, qp count or iterations")
    return args


def qp_tos(root, args, ibdev):
    """ToS the QPs of this side use (see the module docstring)."""
    if args.rdma_cm:
        return args.tos if args.tos is not None else configfs_tos(root, ibdev, args.ib_port)
    return args.tclass or 0


def header(args, ibdev, tos, role):
    return (BANNER + LINE
            + "                    RDMA_Write BW Test\n"
            + " Dual-port       : OFF\t\tDevice         : %s\n" % ibdev
            + " Number of qps   : %d\t\tTransport type : IB\n" % args.qp
            + " Connection type : RC\t\tUsing SRQ      : OFF\n"
            + " Mtu             : %d[B]\n" % MTU_PAYLOAD
            + " Link type       : Ethernet\n"
            + " GID index       : %s\n" % ("-" if args.gid_index is None else args.gid_index)
            + " rdma_cm QPs\t : %s\n" % ("ON" if args.rdma_cm else "OFF")
            + " Data ex. method : %s\tTOS    : %d\n" % ("rdma_cm" if args.rdma_cm else "Ethernet", tos)
            + " Role            : %s\n" % role
            + LINE)


def result_lines(args, nbytes, seconds):
    iters = nbytes // args.size if args.size else 0
    gbits = nbytes * 8.0 / seconds / 1e9 if seconds > 0 else 0.0
    unit = "Gb/sec" if args.report_gbits else "MB/sec"
    avg = gbits if args.report_gbits else nbytes / seconds / 1e6 if seconds > 0 else 0.0
    rate = iters / seconds / 1e6 if seconds > 0 else 0.0
    return (" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n" % (unit, unit)
            + " %-10d %-14d %-18.2f %-20.2f %.6f\n" % (args.size, iters, avg, avg, rate) + LINE)


# ----------------------------------------------------------------------------------------------
# server


def serve(args, root, out):
    ibdev = args.ib_dev or first_ibdev(root)
    rail = rail_of(root, ibdev, args.ib_port) if ibdev else None
    if rail is None:
        raise PerftestError(" Couldn't find IB device %s port %d on this node" % (ibdev, args.ib_port))
    if args.gid_index is not None and not gid_valid(root, ibdev, args.ib_port, args.gid_index):
        raise PerftestError(" GID index %d of %s port %d is empty" % (args.gid_index, ibdev, args.ib_port))
    listen = try_lock(_state(root, "listen", "%d.lock" % args.port))
    if listen is None:
        raise PerftestError(" Couldn't listen to port %d: Address already in use" % args.port)
    tos = qp_tos(root, args, ibdev)
    req_path = _state(root, "requests", "%d.json" % args.port)
    acc_path = _state(root, "accepted", "%d.json" % args.port)
    for p in (req_path, acc_path):
        if os.path.exists(p):
            os.unlink(p)
    dcb_emu._write_json(_state(root, "listen", "%d.json" % args.port),
                        {"pid": os.getpid(), "ibdev": ibdev, "port": args.port, "tos": tos})
    out.write(header(args, ibdev, tos, "server"))
    out.write("\n************************************\n* Waiting for client to connect... *\n"
              "************************************\n")
    out.flush()
    try:
        while True:
            req = dcb_emu._read_json(req_path)
            if req:
                break
            time.sleep(0.05)
        os.unlink(req_path)
        netdev = req["target_netdev"]
        active = try_lock(_state(root, "active", netdev, "%d.lock" % args.port))
        dcb_emu._write_json(acc_path, {"nonce": req["nonce"], "ack_tos": tos, "pid": os.getpid()})
        try:
            client_lock = _state(root, "clients", "%d.lock" % args.port)
            done_path = _state(root, "done", "%d.json" % args.port)
            deadline = time.time() + 10.0
            while True:
                done = dcb_emu._read_json(done_path)
                if done and done.get("nonce") == req["nonce"]:
                    os.unlink(done_path)
                    break
                if is_held(client_lock):
                    deadline = time.time() + 10.0
                elif time.time() > deadline:
                    raise PerftestError(" Client %s disconnected before the test ended" % req.get("client"))
                time.sleep(0.05)
        finally:
            if active is not None:
                active.close()
        out.write("Remote: %s %s (DSCP %d), %s\n"
                  % (req.get("client"), req.get("client_netdev"), req["tos"] >> 2,
                     "incast" if done.get("congested") else "alone"))
        out.write(result_lines(args, int(done["bytes"]), float(done["seconds"])))
        return 0
    finally:
        listen.close()
        lp = _state(root, "listen", "%d.json" % args.port)
        if os.path.exists(lp):
            os.unlink(lp)


# ----------------------------------------------------------------------------------------------
# client


def _packets(nbytes):
    return max(1, -(-nbytes // MTU_PAYLOAD))


def connect(args, root, fleet):
    server = find_server(fleet, args.server)
    if server is None:
        raise PerftestError(" Failed to resolve RDMA CM address of %s: no rail of the fleet has it\n"
                            " Unable to perform rdma_client function" % args.server)
    node, sroot, srail = server
    if not is_held(_state(sroot, "listen", "%d.lock" % args.port)):
        raise PerftestError(" Connection to %s:%d REJECTED: no server listening (start the server first)\n"
                            " Unable to perform rdma_client function" % (args.server, args.port))
    return node, sroot, srail


def client(args, root, fleet, out, me):
    ibdev = args.ib_dev or first_ibdev(root)
    rail = rail_of(root, ibdev, args.ib_port) if ibdev else None
    if rail is None:
        raise PerftestError(" Couldn't find IB device %s port %d on this node" % (ibdev, args.ib_port))
    if args.gid_index is not None and not gid_valid(root, ibdev, args.ib_port, args.gid_index):
        raise PerftestError(" GID index %d of %s port %d is empty" % (args.gid_index, ibdev, args.ib_port))
    if fleet is None:
        raise PerftestError(" no fleet directory found (set %s): cannot reach %s" % (FLEET_ENV, args.server))
    node, sroot, srail = connect(args, root, fleet)
    tos = qp_tos(root, args, ibdev)
    nonce = uuid.uuid4().hex
    client_lock = try_lock(_state(sroot, "clients", "%d.lock" % args.port))
    if client_lock is None:
        raise PerftestError(" Connection to %s:%d REJECTED: the server is busy with another client"
                            % (args.server, args.port))
    try:
        dcb_emu._write_json(_state(sroot, "requests", "%d.json" % args.port),
                            {"nonce": nonce, "client": me, "client_netdev": rail["netdev"], "tos": tos,
                             "target_netdev": srail["netdev"]})
        acc_path = _state(sroot, "accepted", "%d.json" % args.port)
        deadline = time.time() + ACCEPT_TIMEOUT_S
        acc = None
        while time.time() < deadline:
            acc = dcb_emu._read_json(acc_path)
            if acc and acc.get("nonce") == nonce:
                break
            time.sleep(0.05)
        else:
            raise PerftestError(" The server on %s:%d did not accept the connection" % (args.server, args.port))
        os.unlink(acc_path)
        out.write(header(args, ibdev, tos, "client of %s (%s)" % (args.server, node)))
        out.flush()
        dscp, ack_dscp = tos >> 2, int(acc["ack_tos"]) >> 2
        sw = switch_config(fleet)
        ect = (tos & 3) in (1, 2)
        nothing = {"driver": None, "apptrust": None, "apps": []}
        tx_prio = dcb_emu.dscp_priority(dcb_emu.state(root, rail["netdev"]) or nothing, dscp)
        rx_prio = dcb_emu.dscp_priority(dcb_emu.state(sroot, srail["netdev"]) or nothing, dscp)
        np_on = ecn_enabled(sroot, srail["netdev"], "np", rx_prio)
        rp_on = ecn_enabled(root, rail["netdev"], "rp", tx_prio)
        total = 0
        congested_any = False
        start = time.time()
        budget = None if args.duration else (args.iters or DEFAULT_ITERS) * args.size
        while True:
            if args.duration:
                if time.time() - start >= args.duration:
                    break
                n = max(1, active_senders(sroot, srail["netdev"]))
                chunk = int(LINK_BYTES_PER_S * STEP_S) // n
            else:
                if total >= budget:
                    break
                n = max(1, active_senders(sroot, srail["netdev"]))
                chunk = budget - total
            congested = n >= 2
            congested_any = congested_any or congested
            pk = _packets(chunk)
            wire = chunk + pk * ROCE_HEADERS
            marking = congested and sw["ecn"] and ect
            # DCQCN: CE marks answered by CNPs that the sender acts on keep the queue below the pause threshold
            paused = congested and sw["pfc"] and not (marking and np_on and rp_on)
            if marking:
                marked = max(1, pk // 20)
                bump_hw_counter(sroot, srail["ibdev"], "np_ecn_marked_roce_packets", marked)
                if np_on:
                    cnps = max(1, marked // 4)
                    bump_hw_counter(sroot, srail["ibdev"], "np_cnp_sent", cnps)
                    bump_hw_counter(root, rail["ibdev"], "rp_cnp_handled" if rp_on else "rp_cnp_ignored", cnps)
            ethtool_emu.inject_traffic(root, rail["netdev"], "tx", dscp, wire, pk, congested=paused)
            ethtool_emu.inject_traffic(sroot, srail["netdev"], "rx", dscp, wire, pk)
            acks = max(1, chunk // args.size)
            ethtool_emu.inject_traffic(sroot, srail["netdev"], "tx", ack_dscp, acks * ACK_BYTES, acks)
            ethtool_emu.inject_traffic(root, rail["netdev"], "rx", ack_dscp, acks * ACK_BYTES, acks)
            total += chunk
            if args.duration:
                time.sleep(STEP_S)
        seconds = max(time.time() - start, 1e-6) if args.duration else max(total / float(LINK_BYTES_PER_S), 1e-6)
        dcb_emu._write_json(_state(sroot, "done", "%d.json" % args.port),
                            {"nonce": nonce, "bytes": total, "seconds": seconds, "congested": congested_any})
        out.write(result_lines(args, total, seconds))
        return 0
    finally:
        client_lock.close()


def main(argv=None):
    if argv is None:
        argv = sys.argv
    argv0, rest = (argv[0], list(argv[1:])) if argv else ("", [])
    root = os.environ.get(SYSROOT_ENV) or "/"
    try:
        args = parse(rest)
        me = os.environ.get("GPUFABRIC_SIM_NODE") or os.path.basename(os.path.dirname(os.path.abspath(root)))
        if args.server:
            rc = client(args, root, find_fleet(argv0, root), sys.stdout, me)
        else:
            rc = serve(args, root, sys.stdout)
    except PerftestError as e:
        sys.stdout.flush()
        if str(e):
            sys.stderr.write(str(e) + "\n")
        sys.stderr.flush()
        return 1
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
