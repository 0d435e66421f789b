# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What reading one rail's DCB over rtnetlink (concerns/dcb/dcbnl.py) costs in CPU on this machine.

usage: python kernel_dcb_cost.py [REPS]

* ``request_cpu_s``: one RTM_GETDCB request and its answer through this machine's kernel (``lo``: it has no dcbnl
  ops, so the kernel answers with EOPNOTSUPP after the same socket, request, lookup and receive as a read; the DCB
  answer itself is a few hundred bytes more);
* ``parse_cpu_s``: reading the kernel's answer for a rail in DSCP trust (64 APP entries, ETS, PFC, DCBX: the
  recording tests/fixtures/dcbnl/bookworm-6.1-dcbtest.json) into the objects the collection reads;
* ``socket_cpu_s``: opening and closing the socket (once per read of all rails).
Prints JSON.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import json
import os
import statistics
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.join(HERE, "..", "fixtures", "dcbnl", "bookworm-6.1-dcbtest.json")


def cpu():
    return time.process_time()   # this process's user + system CPU, at the clock's full resolution


def per_call(fn, reps, batch=200):
    samples = []
    for _r in range(reps):
        c0 = cpu()
        for _i in range(batch):
            fn()
        samples.append((cpu() - c0) / batch)
    return round(statistics.median(samples), 7)


def main(argv):
    reps = int(argv[1]) if len(argv) > 1 else 20
    with open(RECORDING) as f:
        rec = json.load(f)
    reply = binascii.unhexlify(rec["steps"][-1]["rails"]["dcb0"]["ieee_get"]["datagrams"][0])
    payload = [m for m in dcbnl.messages(reply) if m[0] == dcbnl.RTM_GETDCB][0][3]
    sock = dcbnl.netlink_socket()
    seq = [0]

    def request():
        seq[0] += 1
        try:
            dcbnl.talk(sock, dcbnl.DCB_CMD_IEEE_GET, "lo", seq[0])
        except dcbnl.DcbnlError as e:
            if e.errno is None:
                raise

    def parse():
        dcbnl.rail_objects(dcbnl.reply_attributes(payload))

    def socket_open_close():
        dcbnl.netlink_socket().close()
    out = {"request_cpu_s": per_call(request, reps), "parse_cpu_s": per_call(parse, reps),
           "socket_cpu_s": per_call(socket_open_close, reps)}
    sock.close()
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
