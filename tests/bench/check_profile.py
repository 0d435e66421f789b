# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the one-call check's time goes on a node (run inside it: gpufabric_sim exec).

usage: python check_profile.py DESIRED_JSON [REPS]
Runs ``node_check.evaluate`` in this process, as the fabric_check module does, with a runner that records every
command it starts. Prints JSON: the whole evaluation's median and its CPU (this process and its children), the
seconds of each evaluator (discovery included in the first that needs it, as in the module), and each command
name with its count and seconds. Read-only: the evaluation runs every concern body in check mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import resource
import statistics
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import LocalRunner


class RecordingRunner(LocalRunner):
    """LocalRunner that keeps (command name, seconds) of every command it runs."""

    def __init__(self):
        super(RecordingRunner, self).__init__()
        self.commands = []

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        t0 = time.perf_counter()
        try:
            return super(RecordingRunner, self).run_command(args, environ_update, check_rc, **kw)
        finally:
            self.commands.append((os.path.basename(str(list(args)[0])), time.perf_counter() - t0))


def timed_registry(times):
    """The registry's evaluators wrapped to add their seconds to ``times`` (keyed by the concerns they serve)."""
    names = {}
    for n, e in node_check.REGISTRY.items():
        names.setdefault(e["evaluate"], []).append(n)
    wrapped = {}
    for fn, ns in names.items():
        def timed(ctx, fn=fn, key="+".join(ns)):
            t0 = time.perf_counter()
            try:
                return fn(ctx)
            finally:
                times[key] = times.get(key, 0.0) + time.perf_counter() - t0
        wrapped[fn] = timed
    return dict((n, dict(e, evaluate=wrapped[e["evaluate"]])) for n, e in node_check.REGISTRY.items())


def cpu_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv):
    with open(argv[1]) as f:
        desired = json.load(f)
    reps = int(argv[2]) if len(argv) > 2 else 3
    original = node_check.REGISTRY
    walls, cpus, per_eval, per_cmd, statuses = [], [], {}, {}, {}
    for _rep in range(reps):
        times, runner = {}, RecordingRunner()
        node_check.REGISTRY = timed_registry(times)
        c0, t0 = cpu_s(), time.perf_counter()
        try:
            res = node_check.evaluate(desired, Sysroot(), runner)   # the node's root (GPUFABRIC_SYSROOT on the sim)
        finally:
            node_check.REGISTRY = original
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
        for k, v in times.items():
            per_eval.setdefault(k, []).append(v)
        rep_cmd = {}
        for name, s in runner.commands:
            c = rep_cmd.setdefault(name, [0, 0.0])
            c[0] += 1
            c[1] += s
        for name, (count, s) in rep_cmd.items():
            per_cmd.setdefault(name, []).append((count, s))
        statuses = dict((n, d["status"]) for n, d in res["concerns"].items())
    out = {
        "reps": reps,
        "evaluate_s": round(statistics.median(walls), 4),
        "evaluate_cpu_s": round(statistics.median(cpus), 4),
        "evaluators_s": dict((k, round(statistics.median(v), 4)) for k, v in sorted(per_eval.items())),
        "commands": dict((k, {"count": v[0][0], "s": round(statistics.median([x[1] for x in v]), 4)})
                         for k, v in sorted(per_cmd.items())),
        "statuses": statuses,
    }
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
