# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The compat tier's smoke run on one ansible-core minor (tests/compat/run.sh): a one-node simulated fleet driven
by the ansible-playbook beside this interpreter.

1. ``provision.yml``: rc 0, no host failed;
2. ``provision.yml`` again: rc 0 and nothing changed (idempotence, as molecule's idempotence step judges it);
3. ``drift.yml``: rc 0 (the one-call check finds every concern as provisioned, and the report renders).
The fleet is destroyed afterwards whatever happened. Exit status 0 when all three hold; otherwise the failing
step's output is printed and the status is 1.
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import re
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def sim(*args):
    return subprocess.run([sys.executable, "-m", "gpufabric_sim"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)


def playbook(inventory, name):
    t0 = time.time()
    p = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, os.path.join(REPO, "playbooks", name)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    recap = dict((m.group(1), [int(m.group(i)) for i in range(2, 6)]) for m in RECAP.finditer(p.stdout))
    return p.returncode, recap, p.stdout, time.time() - t0


def judge(step, rc, recap, want_unchanged=False):
    """The reason the step failed, or None."""
    if rc != 0:
        return "%s: rc=%d" % (step, rc)
    if not recap:
        return "%s: no PLAY RECAP" % step
    for host, (_ok, changed, unreachable, failed) in sorted(recap.items()):
        if unreachable or failed:
            return "%s: %s unreachable=%d failed=%d" % (step, host, unreachable, failed)
        if want_unchanged and changed:
            return "%s: %s changed=%d on the second run (not idempotent)" % (step, host, changed)
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--fleet", required=True, help="directory of the throw-away fleet")
    ap.add_argument("--topology", default="hgx-h200")
    args = ap.parse_args(argv)
    fleet = os.path.abspath(args.fleet)
    sim("destroy", "--fleet", fleet)
    p = sim("create", "--fleet", fleet, "--node", "c1=%s" % args.topology)
    if p.returncode != 0:
        print(p.stdout)
        print("smoke: the fleet could not be created", file=sys.stderr)
        return 1
    inventory = os.path.join(fleet, "inventory.yml")
    try:
        for step, name, unchanged in (("provision", "provision.yml", False), ("idempotence", "provision.yml", True),
                                      ("drift check", "drift.yml", False)):
            rc, recap, out, took = playbook(inventory, name)
            why = judge(step, rc, recap, unchanged)
            print("smoke: %s %s in %.0f s" % (step, "failed" if why else "passed", took))
            if why:
                print(out[-20000:])
                print("smoke: %s" % why, file=sys.stderr)
                return 1
    finally:
        sim("destroy", "--fleet", fleet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
