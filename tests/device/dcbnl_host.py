# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the running kernel of a real host answers to the collection's DCB reads (concerns/dcb/dcbnl.py), beside
iproute2's dcb where the host has it. Run with the host's own Python, the collection on PYTHONPATH, no Ansible:

    PYTHONPATH=DIR python3 tests/device/dcbnl_host.py > OUT.json

For every network interface: each object the collection reads, as the kernel answered it or why it did not, and
`dcb -j OBJ show dev IF` (exit status, output). Also the CPU of one request and of the socket on this kernel.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl

__metaclass__ = type

OBJECTS = ("ets", "pfc", "app", "apptrust", "dcbx")


def main():
    netdevs = sorted(os.listdir("/sys/class/net"))
    kernel = dcbnl.KernelDcb()
    got = kernel.answers([(obj, dev) for dev in netdevs for obj in OBJECTS])
    dcb = shutil.which("dcb")
    out = {"kernel": os.uname().release, "python": sys.version.split()[0], "dcb": dcb, "netdevs": {}}
    for dev in netdevs:
        entry = {"kernel": dict((obj, got[(obj, dev)].value) for obj in OBJECTS if (obj, dev) in got),
                 "kernel_error": kernel.errors.get(dev), "dcb": {}}
        if dcb:
            for obj in OBJECTS:
                p = subprocess.run([dcb, "-j", obj, "show", "dev", dev], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, LC_ALL="C"),
                                   check=False)
                entry["dcb"][obj] = {"rc": p.returncode, "out": p.stdout.strip(), "err": p.stderr.strip()}
        out["netdevs"][dev] = entry
    sock = dcbnl.netlink_socket()
    c0 = time.process_time()
    for seq in range(1, 2001):
        try:
            dcbnl.talk(sock, dcbnl.DCB_CMD_IEEE_GET, "lo", seq)
        except dcbnl.DcbnlError:
            pass
    out["request_cpu_s"] = (time.process_time() - c0) / 2000
    sock.close()
    c0 = time.process_time()
    for _i in range(2000):
        dcbnl.netlink_socket().close()
    out["socket_cpu_s"] = (time.process_time() - c0) / 2000
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
