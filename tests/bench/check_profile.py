# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the one-call check's and the evidence timer's time goes on a node (run inside it: gpufabric_sim exec).

usage: python check_profile.py DESIRED_JSON [REPS] [EVIDENCE_SCRIPT]

Runs ``node_check.evaluate`` in this process, as the fabric_check module does, with a runner that records every
command it starts. Prints JSON: the whole evaluation's median and its CPU (this process and its children), the
seconds of each evaluator (discovery included in the first that needs it, as in the module), and each command
name with its count and seconds. Read-only: the evaluation runs every concern body in check mode.

With EVIDENCE_SCRIPT (the ``gpufabric-evidence`` script ``fabric_persist`` installed on the node), also the node
profile of the evidence timer (``node_profile``):

* ``gather``: ``evidence_timer.gather`` + ``render`` in this process (the evaluation and the timer's own evidence:
  discovery only when the evaluation gave no facts, the DCB state, ToS, counters), CPU split into the evaluation,
  the timer's own reading, and the child processes by command;
* ``imports``: a fresh interpreter of the node's Python (the script's shebang) with ``-I -S`` (no site, no
  environment: what the node has, no Ansible) importing ``boot.evidence_timer`` from the installed copy (lib_dir),
  against the same interpreter doing nothing;
* ``run``: the installed script as the timer runs it (``python3 -I -S SCRIPT --stdout``), its CPU and its
  children's (the tools it starts): one timer interval's cost on this node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import resource
import statistics
import subprocess
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.boot import evidence_timer
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl, dcbx
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb_manage
from gpufabric_sim.emulators import dcb as dcb_emu

PARSE = {"ets": dcb_manage.parse_ets, "pfc": dcb_manage.parse_pfc, "app": dcb_manage.parse_app,
         "dcbx": dcbx.parse}
from ansible_collections.gpufabric.node.plugins.module_utils.host import runner as runner_mod
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import LocalRunner


class RecordingRunner(LocalRunner):
    """LocalRunner that keeps (command name, seconds, CPU-s of the child) of every command it runs."""

    def __init__(self):
        super(RecordingRunner, self).__init__()
        self.commands = []

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        t0, c0 = time.perf_counter(), children_cpu_s()
        try:
            return super(RecordingRunner, self).run_command(args, environ_update, check_rc, **kw)
        finally:
            name = os.path.basename(str(list(args)[0]))
            if name == "dcb" and [str(a) for a in list(args)[1:]] == ["-V"]:
                name = "dcb -V"   # not a read: still run where the kernel answers every read (dcbnl.py)
            self.commands.append((name, time.perf_counter() - t0, children_cpu_s() - c0))


class CountingKernel(dcbnl.KernelDcb):
    """Where a host's running kernel is asked for DCB (``dcbnl.for_sysroot`` on a real root), counts the reads and
    the rails asked, and answers nothing: the simulator's ``dcb`` still reads every object (the simulated node has no
    kernel DCB), and ``run.py`` puts a real request's cost in place of those processes."""

    def __init__(self, counts):
        super(CountingKernel, self).__init__()
        self.counts = counts

    def answers(self, lines):
        self.counts["reads"] += 1
        self.counts["requests"] += len(set(dev for _obj, dev in lines))
        return {}


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


def children_cpu_s():
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def command_table(per_rep):
    """[[(name, seconds, cpu)] per repetition] -> {name: {count, s, cpu_s}} (medians over repetitions)."""
    per_cmd = {}
    for commands in per_rep:
        rep = {}
        for name, s, c in commands:
            e = rep.setdefault(name, [0, 0.0, 0.0])
            e[0] += 1
            e[1] += s
            e[2] += c
        for name, v in rep.items():
            per_cmd.setdefault(name, []).append(v)
    return dict((k, {"count": v[0][0], "s": round(statistics.median([x[1] for x in v]), 4),
                     "cpu_s": round(statistics.median([x[2] for x in v]), 4)}) for k, v in sorted(per_cmd.items()))


def med(values):
    return round(statistics.median(values), 4)


def profile_evaluate(desired, reps):
    original = node_check.REGISTRY
    walls, cpus, per_eval, per_rep, statuses = [], [], {}, [], {}
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
        per_rep.append(runner.commands)
        statuses = dict((n, d["status"]) for n, d in res["concerns"].items())
    commands = command_table(per_rep)
    return {
        "reps": reps,
        "evaluate_s": med(walls),
        "evaluate_cpu_s": med(cpus),
        "evaluate_children_cpu_s": round(sum(c["cpu_s"] for c in commands.values()), 4),
        "evaluators_s": dict((k, med(v)) for k, v in sorted(per_eval.items())),
        "commands": commands,
        "statuses": statuses,
    }


class SimKernel(dcbnl.KernelDcb):
    """Answers as a host's kernel answers an mlx5 rail (every object the collection reads but ``apptrust``), from
    the simulated node's DCB state: its dcb emulator run in this process, each answer parsed the collection's way.
    The CPU that emulation takes is kept in ``counts["emulated_cpu_s"]`` to be taken out; ``run.py`` puts a real
    request's cost (tests/bench/kernel_dcb_cost.py) in its place."""

    def __init__(self, counts):
        super(SimKernel, self).__init__()
        self.counts = counts

    def answers(self, lines):
        c0 = cpu_s()
        out = {}
        for obj, dev in lines:
            if obj == "apptrust":
                continue
            rc, text, _err = dcb_emu.run(["-j", obj, "show", "dev", dev])
            if rc == 0:
                out[(obj, dev)] = dcbnl.Parsed(PARSE[obj](text))
        self.counts["reads"] += 1
        self.counts["requests"] += len(set(dev for _obj, dev in lines))
        self.counts["emulated_cpu_s"] += cpu_s() - c0
        return out


def profile_gather(desired_path, reps, kernel=CountingKernel):
    """evidence_timer.gather + render in this process: the evaluation's and the timer's own share."""
    out = {"cpu_s": [], "evaluate_cpu_s": [], "own_cpu_s": [], "render_cpu_s": [], "wall_s": []}
    per_rep, own_rep, ev, text = [], [], None, ""
    counts = {"reads": 0, "requests": 0, "emulated_cpu_s": 0.0}
    host_kernel = dcbnl.for_sysroot
    dcbnl.for_sysroot = lambda sysroot: kernel(counts)
    try:
        for _rep in range(reps):
            before = dict(counts)
            commands, own, ev, text, at_eval = gather_once(desired_path, out, counts)
            per_rep.append(commands)
            own_rep.append(own)
            for k in ("reads", "requests", "emulated_cpu_s"):
                out.setdefault("evaluate_kernel_" + k, []).append(at_eval[k] - before[k])
            # this repetition's Python: its CPU without the processes it started and the DCB emulation (SimKernel)
            kids = sum(c for _n, _s, c in commands)
            eval_kids = kids - sum(c for _n, _s, c in own)
            out.setdefault("python_cpu_s", []).append(
                out["cpu_s"][-1] - kids - (counts["emulated_cpu_s"] - before["emulated_cpu_s"]))
            out.setdefault("evaluate_python_cpu_s", []).append(
                out["evaluate_cpu_s"][-1] - eval_kids - (at_eval["emulated_cpu_s"] - before["emulated_cpu_s"]))
    finally:
        dcbnl.for_sysroot = host_kernel
    res = dict((k, med(v)) for k, v in out.items() if not k.startswith("evaluate_kernel_"))
    res["commands"] = command_table(per_rep)
    res["own_commands"] = command_table(own_rep)
    res["kernel_dcb"] = {"reads": counts["reads"] // reps, "requests": counts["requests"] // reps,
                         "emulated_cpu_s": round(counts["emulated_cpu_s"] / reps, 5),
                         # the evaluation's share (the rest is the timer's own reads)
                         "evaluate": dict((k, med(out["evaluate_kernel_" + k])) for k in
                                          ("reads", "requests", "emulated_cpu_s"))}
    res["samples"] = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    res["statuses"] = dict((n, d["status"]) for n, d in ev["node"]["concerns"].items())
    return res


def gather_once(desired_path, out, counts):
    """One gather + render, its CPU and wall samples appended to ``out``: (commands, the timer's own commands, the
    evidence, the rendered text, ``counts`` as the evaluation left them)."""
    backend = RecordingRunner()
    spent = {}

    def evaluate(d, sysroot, run):
        c0 = cpu_s()
        try:
            return evidence_timer.default_evaluate(d, sysroot, run)
        finally:
            spent["evaluate"] = cpu_s() - c0
            spent["commands"] = len(backend.commands)
            spent["counts"] = dict(counts)
    sysroot = Sysroot()
    c0, t0 = cpu_s(), time.perf_counter()
    # as evidence_timer.main: the evaluation and the timer's own reads share one snapshot
    run = runner_mod.CommandRunner(node_check.SnapshotRunner(backend))
    ev, _warnings = evidence_timer.gather(sysroot, run, evaluate=evaluate, desired_path=desired_path)
    c1 = cpu_s()
    text = evidence_timer.render(ev)[0]
    c2 = cpu_s()
    out["wall_s"].append(time.perf_counter() - t0)
    out["cpu_s"].append(c2 - c0)
    out["evaluate_cpu_s"].append(spent.get("evaluate", 0.0))
    out["own_cpu_s"].append(c1 - c0 - spent.get("evaluate", 0.0))
    out["render_cpu_s"].append(c2 - c1)
    return backend.commands, backend.commands[spent.get("commands", 0):], ev, text, spent.get("counts", counts)


def child_cpu(argv, env=None):
    """(rc, CPU-s of ``argv`` and everything it waited for, wall seconds, stdout, stderr)."""
    c0, t0 = children_cpu_s(), time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                       check=False)
    return p.returncode, children_cpu_s() - c0, time.perf_counter() - t0, p.stdout, p.stderr


def node_python(script):
    with open(script) as f:
        first = f.readline()
    return first[2:].strip().split()[0]


def profile_process(script, desired_path, reps):
    """The installed script as the timer runs it, and its imports in a fresh ``-I -S`` interpreter."""
    python = node_python(script)
    lib = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(script)), "..", "lib", "gpufabric"))
    imp = ("import sys; sys.path.insert(0, %r); "
           "from ansible_collections.gpufabric.node.plugins.module_utils.boot import evidence_timer" % lib)
    # the same run with its own CPU printed at exit (RUSAGE_SELF: the interpreter, imports and Python, not the
    # processes it starts), through runpy as ``python SCRIPT`` runs it
    selfcpu = ("import resource, runpy, sys; sys.argv = [%r, '--desired', %r, '--stdout']\n"
               "try:\n    runpy.run_path(%r, run_name='__main__')\nexcept SystemExit:\n    pass\n"
               "r = resource.getrusage(resource.RUSAGE_SELF)\nsys.stderr.write('SELF_CPU %%r\\n' %% "
               "(r.ru_utime + r.ru_stime))\n" % (script, desired_path, script))
    bare, imports, runs, run_walls, modules, selfs = [], [], [], [], 0, []
    rc = None
    err = ""
    for _rep in range(reps):
        bare.append(child_cpu([python, "-I", "-S", "-c", "pass"])[1])
        imports.append(child_cpu([python, "-I", "-S", "-c", imp])[1])
        rc, cpu, wall, _so, err = child_cpu([python, "-I", "-S", script, "--desired", desired_path, "--stdout"])
        runs.append(cpu)
        run_walls.append(wall)
        err_self = child_cpu([python, "-I", "-S", "-c", selfcpu])[4]
        selfs.extend(float(line.split()[1]) for line in err_self.splitlines() if line.startswith("SELF_CPU "))
    p = subprocess.run([python, "-I", "-S", "-c", imp + "; print(len([m for m in sys.modules "
                        "if m.startswith('ansible_collections.')]))"], stdout=subprocess.PIPE,
                       universal_newlines=True, check=False)
    try:
        modules = int(p.stdout.strip())
    except ValueError:
        modules = None
    return {"python": python, "interpreter_cpu_s": med(bare),
            "imports_cpu_s": med([i - b for i, b in zip(imports, bare)]),
            "collection_modules_imported": modules, "run_rc": rc, "run_cpu_s": med(runs), "run_wall_s": med(run_walls),
            "run_self_cpu_s": med(selfs) if selfs else None,
            "run_stderr_tail": err[-300:]}


def main(argv):
    with open(argv[1]) as f:
        desired = json.load(f)
    reps = int(argv[2]) if len(argv) > 2 else 3
    out = profile_evaluate(desired, reps)
    if len(argv) > 3:
        script = argv[3]
        desired_path = "/etc/gpufabric/desired.json"
        out["node_profile"] = {"gather": profile_gather(desired_path, reps),
                               "gather_kernel_dcb": profile_gather(desired_path, reps, SimKernel),
                               "process": profile_process(script, desired_path, reps)}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
