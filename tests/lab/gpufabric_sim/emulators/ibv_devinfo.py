# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EMULATOR of rdma-core's ``ibv_devinfo`` for simulated nodes (tier 2): the RDMA devices of the node's sysroot
(``sys/class/infiniband``) in the real tool's layout, ``-d DEV``, ``-i PORT``, ``-l``; ``-v`` adds nothing here.

What it models is the port MTU a RoCE device reports (``ibv_query_port``): ``max_mtu`` 4096 (mlx5's RoCE ports) and
``active_mtu`` the kernel's ``iboe_get_mtu`` of the port's netdev MTU (the largest IB MTU that fits after 96 bytes of
RoCE v2 headers), capped by ``max_mtu``. The netdev MTU is the real one: the node's rails are veths in its network
namespace, and ``/sys/class/net/<netdev>/mtu`` there is the kernel's; outside the namespace (unit tests) the sysroot's
file stands in. A test may lower a port's ``max_mtu`` (firmware that caps it) in the simulator's own state,
``var/lib/gpufabric-sim/ibv/<ibdev>/<port>/max_mtu`` (no such file exists in a real sysfs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import os
import sys

from gpufabric_sim.emulators.files import read_attr as _read

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
IB_MTU = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
IBOE_HEADERS = 96
PORT_STATES = {"1: DOWN": "PORT_DOWN (1)", "2: INIT": "PORT_INIT (2)", "3: ARMED": "PORT_ARMED (3)",
               "4: ACTIVE": "PORT_ACTIVE (4)"}


def iboe_mtu(netdev_mtu):
    fits = [m for m in sorted(IB_MTU) if m <= netdev_mtu - IBOE_HEADERS]
    return fits[-1] if fits else 256


def netdev_mtu(root, netdev):
    for base in ("/sys/class/net", os.path.join(root, "sys/class/net")):
        raw = _read(os.path.join(base, netdev, "mtu"))
        if raw and raw.isdigit():
            return int(raw)
    return 1500


def port_info(root, ibdev, port):
    pdir = os.path.join(root, "sys/class/infiniband", ibdev, "ports", str(port))
    netdev = _read(os.path.join(pdir, "gid_attrs/ndevs/0"))
    max_mtu = int(_read(os.path.join(root, "var/lib/gpufabric-sim/ibv", ibdev, str(port), "max_mtu"), "4096"))
    active = min(iboe_mtu(netdev_mtu(root, netdev)), max_mtu) if netdev else max_mtu
    return {"state": PORT_STATES.get(_read(os.path.join(pdir, "state"), ""), "PORT_DOWN (1)"),
            "max_mtu": max_mtu, "active_mtu": active,
            "link_layer": _read(os.path.join(pdir, "link_layer"), "Ethernet")}


def render(root, ibdev, only_port=None):
    ddir = os.path.join(root, "sys/class/infiniband", ibdev)
    ports = sorted(int(p) for p in os.listdir(os.path.join(ddir, "ports")) if p.isdigit())
    out = ["hca_id:\t%s" % ibdev,
           "\ttransport:\t\t\tInfiniBand (0)",
           "\tfw_ver:\t\t\t\t%s" % _read(os.path.join(ddir, "fw_ver"), ""),
           "\tnode_guid:\t\t\t%s" % _read(os.path.join(ddir, "node_guid"), ""),
           "\tsys_image_guid:\t\t\t%s" % _read(os.path.join(ddir, "sys_image_guid"), ""),
           "\tboard_id:\t\t\t%s" % _read(os.path.join(ddir, "board_id"), ""),
           "\tphys_port_cnt:\t\t\t%d" % len(ports)]
    for port in ports:
        if only_port is not None and port != only_port:
            continue
        info = port_info(root, ibdev, port)
        out += ["\t\tport:\t%d" % port,
                "\t\t\tstate:\t\t\t%s" % info["state"],
                "\t\t\tmax_mtu:\t\t%d (%d)" % (info["max_mtu"], IB_MTU[info["max_mtu"]]),
                "\t\t\tactive_mtu:\t\t%d (%d)" % (info["active_mtu"], IB_MTU[info["active_mtu"]]),
                "\t\t\tsm_lid:\t\t\t0",
                "\t\t\tport_lid:\t\t0",
                "\t\t\tport_lmc:\t\t0x00",
                "\t\t\tlink_layer:\t\t%s" % info["link_layer"]]
    return "\n".join(out) + "\n\n"


def run(argv, root):
    p = argparse.ArgumentParser(prog="ibv_devinfo", add_help=False)
    p.add_argument("-d", "--ib-dev")
    p.add_argument("-i", "--ib-port", type=int)
    p.add_argument("-l", "--list", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    try:
        args = p.parse_args(argv)
    except SystemExit:
        return 255, "", "ibv_devinfo: bad arguments\n"
    base = os.path.join(root, "sys/class/infiniband")
    devs = sorted(os.listdir(base)) if os.path.isdir(base) else []
    if args.list:
        return 0, "%d HCA%s found:\n%s" % (len(devs), "" if len(devs) == 1 else "s",
                                           "".join("\t%s\n" % d for d in devs)), ""
    if not devs:
        return 255, "", "No IB devices found\n"
    if args.ib_dev is not None:
        if args.ib_dev not in devs:
            return 255, "", "IB device '%s' wasn't found\n" % args.ib_dev
        devs = [args.ib_dev]
    return 0, "".join(render(root, d, args.ib_port) for d in devs), ""


def main(argv=None):
    root = os.environ.get(SYSROOT_ENV)
    if not root:
        sys.stderr.write("ibv_devinfo emulator: %s is not set\n" % SYSROOT_ENV)
        return 2
    rc, out, err = run(list(sys.argv[1:] if argv is None else argv), root)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc
