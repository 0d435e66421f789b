# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record the kernel's RTM_GETDCB replies beside iproute2's `dcb -j` for the same DCB state (run in the VM lab guest).

Runs as root in the guest with the collection's plugins on PYTHONPATH (plain Python, no Ansible):

    PYTHONPATH=/tmp/gpufabric-src python3 dcbnl_record.py RAIL... > dcbnl-replies.json

For each step (the boot state, then DSCP 26 -> 3 with PFC on 3 and an ETS table, then DCBX host+IEEE, all through
`dcb ... set` on the first rail) and each RAIL it keeps: the datagrams the kernel sent back to one DCB_CMD_IEEE_GET
and one DCB_CMD_GDCBX request (hex, with the request's sequence number), and the stdout, stderr and exit status of
`dcb -j OBJ show dev RAIL` for every object the collection reads. It also asks about `lo` (no dcbnl ops) and a name
no device has. tests/unit/plugins/module_utils/test_dcbnl.py replays the replies through dcbnl.py and compares what
it reads with `manage.parse_*` of dcb's output; tests/fixtures/dcbnl/ holds the recording.
"""
from __future__ import absolute_import, division, print_function

import binascii
import json
import os
import subprocess
import sys

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl

__metaclass__ = type

OBJECTS = ("ets", "pfc", "app", "apptrust", "dcbx")
STEPS = (
    ("boot", []),
    ("dscp_pfc_ets", [["app", "add", "dev", "{rail}", "dscp-prio", "26:3"],
                      ["pfc", "set", "dev", "{rail}", "prio-pfc", "all:off", "3:on"],
                      ["ets", "set", "dev", "{rail}", "tc-tsa", "all:ets", "7:strict", "tc-bw", "all:14", "0:16",
                       "7:0", "prio-tc", "all:0", "3:3"]]),
    ("dcbx_host_ieee", [["dcbx", "set", "dev", "{rail}", "host", "ieee"]]),
)


class Recording(object):
    """A netlink socket that keeps every datagram it receives."""

    def __init__(self, sock):
        self.sock = sock
        self.datagrams = []

    def send(self, data):
        return self.sock.send(data)

    def recv(self, size):
        data = self.sock.recv(size)
        self.datagrams.append(binascii.hexlify(data).decode("ascii"))
        return data

    def close(self):
        self.sock.close()


def ask(cmd, rail, seq):
    rec = Recording(dcbnl.netlink_socket())
    try:
        dcbnl.talk(rec, cmd, rail, seq)
        error = None
    except dcbnl.DcbnlError as e:
        error = {"errno": e.errno, "msg": str(e)}
    finally:
        rec.close()
    return {"seq": seq, "datagrams": rec.datagrams, "error": error}


def dcb(argv):
    env = dict(os.environ, LC_ALL="C")
    proc = subprocess.Popen(["dcb"] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    return {"rc": proc.returncode, "out": out.decode(), "err": err.decode()}


def record(rails):
    version = dcb(["-V"])
    out = {"kernel": os.uname().release, "dcb_version": version["out"].strip(), "steps": []}
    for name, commands in STEPS:
        step = {"step": name, "commands": [], "rails": {}}
        for cmd in commands:
            argv = [w.format(rail=rails[0]) for w in cmd]
            res = dcb(argv)
            step["commands"].append({"argv": argv, "rc": res["rc"], "err": res["err"]})
        for rail in list(rails) + ["lo", "nosuchdev0"]:
            step["rails"][rail] = {
                "ieee_get": ask(dcbnl.DCB_CMD_IEEE_GET, rail, 1),
                "gdcbx": ask(dcbnl.DCB_CMD_GDCBX, rail, 2),
                "dcb": dict((obj, dcb(["-j", obj, "show", "dev", rail])) for obj in OBJECTS),
            }
        out["steps"].append(step)
    return out


if __name__ == "__main__":
    json.dump(record(sys.argv[1:] or ["dcb0", "dcb1"]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
