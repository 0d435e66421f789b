# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""In-process timing of the collection's module_utils on a simulated node (run inside it: gpufabric_sim exec).

usage: python inprocess.py RAILS_CSV [REPS]
Prints JSON {name: {"median_s", "min_s", "n", "commands"}}. Check mode only (the node stays as it is).
``dcb_apply_check_inproc`` runs the dcb emulator in this process (no process start per command): the module's
own work. ``dcb_apply_check_spawn`` starts the emulator as a process per command, as the module does on the sim
(each start is a Python interpreter, unlike the C iproute2 dcb of a real host: ``dcb_spawn_per_command_s``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import manage as cmdline
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim.emulators import dcb as dcb_emu

COUNT = {"n": 0}


def run_inproc(argv):
    COUNT["n"] += 1
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = dcb_emu.main(list(argv[1:]))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def run_spawn(argv):
    COUNT["n"] += 1
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       env=dict(os.environ, LC_ALL="C", LANG="C"), check=False)
    return p.returncode, p.stdout, p.stderr


SYSCTL_VALUES = {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2}


def timeit(fn, reps):
    times = []
    for _rep in range(reps):
        COUNT["n"] = 0
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": round(statistics.median(times), 5), "min_s": round(min(times), 5), "n": reps,
            "commands": COUNT["n"]}


def main(argv):
    rails = argv[1].split(",")
    reps = int(argv[2]) if len(argv) > 2 else 5
    sr = Sysroot()
    desired = {"dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3], "trust": "dscp"}
    out = {}

    def acs_check():
        scan = topology.PciScan(sr)
        sel = acs.select(sr, pairs="paired", scan=scan)
        _names, mask = acs.validate_clear(["ReqRedir", "CmpltRedir", "EgressCtrl"])
        res = acs.apply_acs(sr, sel.sorted(), mask, check_mode=True, scan=scan, all_or_nothing=True)
        acs.kernel_arg(res["bridges"])

    def rdma_check():
        pairs = [(ibdev, port) for _r, ibdev, port in rdma_cm.rail_devices(sr, rails)]
        pairs = rdma_cm.validate_devices_ports(sr, pairs)
        rdma_cm.apply_tos(sr, pairs, 106, True, run=run_spawn)

    def nccl_render():
        found = rdma_cm.rail_devices(sr, rails, with_gid_index=True)
        hca = nccl.hca_value([(ibdev, port) for _rail, ibdev, port, _gid in found])
        gid = nccl.choose_gid_index([(rail, g) for rail, _ibdev, _port, g in found], None)
        nccl.render(nccl.desired_vars(hca, gid, 106))

    def cmdline_check():
        cmdline.ensure(["iommu=pt"], ["iommu.passthrough=0", "intel_iommu=off", "amd_iommu=off"], run_spawn,
                       lambda name: name, check_mode=True, sysroot=sr, arch="x86_64")

    cases = [
        ("discover_all", lambda: topology.discover(sr)),
        ("discover_pci_rails", lambda: topology.discover(sr, ["pci", "rails"])),
        ("dcb_apply_check_inproc", lambda: dcb.apply_dcb(run_inproc, rails, desired, True, sysroot=sr)),
        ("dcb_apply_check_spawn", lambda: dcb.apply_dcb(run_spawn, rails, desired, True, sysroot=sr)),
        ("acs_select_apply_check", acs_check),
        ("sysctl_manage_check", lambda: sysctl.manage(sr, rails, SYSCTL_VALUES, True)),
        ("rdma_cm_apply_tos_check", rdma_check),
        ("nccl_render", nccl_render),
        ("cmdline_ensure_check", cmdline_check),
    ]
    for name, fn in cases:
        try:
            out[name] = timeit(fn, reps)
        except Exception as e:  # a broken case is reported, the others still run
            out[name] = {"error": "%s: %s" % (type(e).__name__, e)}
    t = timeit(lambda: run_spawn(["dcb", "-V"]), reps)
    out["dcb_spawn_per_command_s"] = t["median_s"]
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
