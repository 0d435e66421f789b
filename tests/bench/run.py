# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: gpufabric.node against a builtin-modules baseline on simulated fleets (tests/lab).

    .venv/bin/python tests/bench/run.py [--quick] [--sizes 1,8,32,64] [--reps 3] [--forks 16]
    .venv/bin/python tests/bench/run.py --node-profile --name NAME   (the node's cost of one evaluation)

Per fleet size: create a fleet of hgx-h200 nodes, then per repetition (order alternating collection/baseline):
reset the fleet to its pristine state (files restored, simulated reboot), full converge (timed), no-op drift
check (timed: playbooks/drift.yml vs the baseline with --check --diff). Plus fact gathering (gpufabric_facts vs
setup), per-task host times from a callback (tests/bench/callback_plugins), SSH commands per node (-vvv, 1 node),
the modules timed on the node and the module_utils timed in-process. Writes tests/bench/results/latest.json,
latest.md and latest.png. docs/benchmarks.md explains the method.
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LAB = os.path.join(REPO, "tests", "lab")
BUILD = os.path.join(REPO, ".build")
BIN = os.path.dirname(sys.executable)
RESULTS = os.path.join(HERE, "results")
BASELINE = os.path.join(HERE, "baseline", "provision.yml")
RAILS = ["ens%dnp0" % i for i in range(1, 9)]
# directories a real host has and the simulated tree lacks (the baseline's copy/template need them)
HOST_DIRS = ["usr/local/sbin", "etc/sysctl.d", "etc/udev/rules.d", "etc/systemd/system"]
RESET_DIRS = ["etc", "boot", "usr", "var"]

sys.path[:0] = [BUILD, LAB]

COLLECTION_CONCERN = {
    "gpufabric.node.kernel_cmdline": "cmdline", "gpufabric.node.pcie_acs": "acs", "gpufabric.node.dcb_qos": "dcb",
    "gpufabric.node.rdma_cm_tos": "rdma_cm", "gpufabric.node.rail_sysctl": "sysctl",
    "gpufabric.node.nccl_config": "nccl", "gpufabric.node.fabric_persist": "persistence",
    "gpufabric.node.gpufabric_facts": "discovery", "ansible.builtin.setup": "discovery",
    "gpufabric.node.fabric_check": "one-call check (every concern)",
}
BASELINE_CONCERN = [  # task name prefix -> concern
    ("Kernel arguments", "cmdline"), ("Update grub", "cmdline"), ("ACS", "acs"), ("Read ACS", "acs"),
    ("Clear ReqRedir", "acs"), ("Read the DSCP", "dcb"), ("Map DSCP", "dcb"), ("Read PFC", "dcb"),
    ("PFC on", "dcb"), ("Create the rdma_cm", "rdma_cm"), ("Wait for the kernel", "rdma_cm"),
    ("Read the default RoCE", "rdma_cm"), ("Set the default RoCE", "rdma_cm"), ("ARP and rp_filter", "sysctl"),
    ("NCCL", "nccl"), ("Boot-time", "persistence"), ("Udev rule", "persistence"), ("Enable the boot", "persistence"),
    ("Reload systemd", "persistence"), ("Reload udev", "persistence"),
]


def log(msg):
    sys.stderr.write("[bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def box_cpu_s():
    """CPU-seconds the whole machine has spent busy (user, nice, system, irq, softirq, steal from /proc/stat). On
    this machine the simulated nodes run beside the controller, so the box's CPU during a playbook minus the
    controller's is what the nodes (their sshd, shells, modules and emulated tools) cost."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields[:8]) if i not in (3, 4))  # not idle, iowait
    return busy / float(os.sysconf("SC_CLK_TCK"))


def env(extra=None):
    link = os.path.join(BUILD, "ansible_collections", "gpufabric", "node")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link))
        os.symlink(REPO, link)
    e = dict(os.environ)
    e.update(PYTHONPATH=os.pathsep.join([BUILD, LAB]), ANSIBLE_COLLECTIONS_PATH=BUILD,
             ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
             ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
             ANSIBLE_CALLBACKS_ENABLED="bench_timer", PATH=BIN + os.pathsep + e.get("PATH", ""))
    e.update(extra or {})
    return e


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        log("installing matplotlib into %s (benchmark only)" % BIN)
        p = subprocess.run([os.path.join(BIN, "pip"), "install", "-q", "matplotlib"], check=False)
        return p.returncode == 0


def sim(*args):
    p = subprocess.run([sys.executable, "-m", "gpufabric_sim"] + list(args), env=env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if p.returncode != 0:
        raise RuntimeError("gpufabric_sim %s failed: %s %s" % (args[0], p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


class Fleet(object):
    def __init__(self, path, n, topology="hgx-h200"):
        self.path, self.n, self.topology = path, n, topology
        self.inventory = os.path.join(path, "inventory.yml")
        self.nodes = ["sim%d" % i for i in range(1, n + 1)]
        self.pristine = path + ".pristine"

    def create(self):
        self.destroy()
        t0 = time.time()
        out = json.loads(sim("create", "--fleet", self.path, "--nodes", str(self.n), "--topology", self.topology))
        self.create_s = time.time() - t0
        self.nodes = out["nodes"]
        for node in self.nodes:
            root = self.root(node)
            for d in HOST_DIRS:
                os.makedirs(os.path.join(root, d), exist_ok=True)
            # the emulators create their lock files on first use; take the snapshot after that
            for tool in ("dcb", "ethtool"):
                subprocess.run([os.path.join(self.path, node, "bin", tool), "-V"], env=dict(
                    os.environ, GPUFABRIC_SYSROOT=root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            for d in RESET_DIRS:
                dst = os.path.join(self.pristine, node, d)
                shutil.copytree(os.path.join(root, d), dst, symlinks=True)
        return self

    def root(self, node):
        return os.path.join(self.path, node, "root")

    def reset(self):
        """Back to the pristine state: files below etc/boot/usr/var restored, then a simulated reboot."""
        from gpufabric_sim import runtime
        t0 = time.time()
        for node in self.nodes:
            for d in RESET_DIRS:
                runtime.sync_tree(os.path.join(self.pristine, node, d), os.path.join(self.root(node), d))
            runtime.reboot(self.path, node)
        return time.time() - t0

    def destroy(self):
        subprocess.run([sys.executable, "-m", "gpufabric_sim", "destroy", "--fleet", self.path], env=env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self.pristine, ignore_errors=True)
        shutil.rmtree(self.path, ignore_errors=True)


def playbook(fleet, path, args, forks, logdir, tag, verbose=False, extra_env=None):
    fd, timer = tempfile.mkstemp(suffix=".json", prefix="bench-timer-")
    os.close(fd)
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", fleet.inventory, path, "-f", str(forks)] + list(args)
    if verbose:
        cmd.append("-vvv")
    t0 = time.time()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    box0 = box_cpu_s()
    with open(os.path.join(logdir, tag + ".log"), "w") as out:
        p = subprocess.run(cmd, env=env(dict(BENCH_TIMER_OUT=timer, **(extra_env or {}))), stdout=out,
                           stderr=subprocess.STDOUT, cwd=REPO, check=False)
    wall = time.time() - t0
    box = box_cpu_s() - box0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of ansible-playbook and its workers (the controller side; the nodes' processes run under their sshd)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    try:
        with open(timer) as f:
            rec = json.load(f)
    except (IOError, ValueError):
        rec = {"tasks": []}
    os.unlink(timer)
    return {"rc": p.returncode, "wall_s": round(wall, 3), "controller_cpu_s": round(cpu, 2),
            "box_cpu_s": round(box, 2), "nodes_cpu_s": round(max(0.0, box - cpu), 2), "tasks": rec["tasks"],
            "log": out.name}


def run_collection_converge(fleet, forks, logdir, tag):
    return playbook(fleet, os.path.join(REPO, "playbooks", "provision.yml"), [], forks, logdir, tag)


def run_collection_drift(fleet, forks, logdir, tag, verbose=False, extra_env=None):
    return playbook(fleet, os.path.join(REPO, "playbooks", "drift.yml"),
                    ["-e", "gpufabric_report_dir=%s" % os.path.join(logdir, "reports")], forks, logdir, tag,
                    verbose, extra_env)


def run_roles_drift(fleet, forks, logdir, tag, verbose=False):
    """drift.yml's role-based check (-e gpufabric_check=roles): the path before issue 15, as a reference."""
    return playbook(fleet, os.path.join(REPO, "playbooks", "drift.yml"),
                    ["-e", "gpufabric_report_dir=%s" % os.path.join(logdir, "reports-roles"),
                     "-e", "gpufabric_check=roles"], forks, logdir, tag, verbose)


def run_baseline_converge(fleet, forks, logdir, tag):
    return playbook(fleet, BASELINE, ["--diff"], forks, logdir, tag)


def run_baseline_drift(fleet, forks, logdir, tag, verbose=False):
    return playbook(fleet, BASELINE, ["--check", "--diff"], forks, logdir, tag, verbose)


def concern_of(variant, task):
    if variant == "collection":
        return COLLECTION_CONCERN.get(task["action"])
    for prefix, concern in BASELINE_CONCERN:
        if task["task"].startswith(prefix):
            return concern
    return None


def per_concern(variant, runs):
    """Median over runs of the per-host sum of task seconds, per concern."""
    out = {}
    for run in runs:
        sums = {}
        for t in run["tasks"]:
            c = concern_of(variant, t)
            if c:
                sums.setdefault(c, {}).setdefault(t["host"], 0.0)
                sums[c][t["host"]] += t["seconds"]
        for c, hosts in sums.items():
            out.setdefault(c, []).append(statistics.median(hosts.values()))
    return {c: round(statistics.median(v), 3) for c, v in sorted(out.items())}


def task_executions(runs):
    """Median over runs of the module executions per host (loop items count one each)."""
    counts = []
    for run in runs:
        per = {}
        for t in run["tasks"]:
            if t["host"] == "localhost":  # drift.yml's report play
                continue
            if t["status"] == "skipped" or t["action"] in ("ansible.builtin.set_fact", "set_fact",
                                                           "ansible.builtin.assert", "assert",
                                                           "ansible.builtin.debug", "debug",
                                                           "ansible.builtin.include_role", "include_role",
                                                           "ansible.builtin.include_tasks", "include_tasks",
                                                           "ansible.builtin.validate_argument_spec",
                                                           "validate_argument_spec", "ansible.builtin.meta"):
                continue
            per[t["host"]] = per.get(t["host"], 0) + (t["items"] or 1)
        if per:
            counts.append(statistics.median(per.values()))
    return statistics.median(counts) if counts else None


def task_results(runs):
    """Median over runs of the task results per host (every task the controller ran for the host: module
    executions, skipped tasks, set_fact/assert/argument-spec validation; the per-host controller work)."""
    counts = []
    for run in runs:
        per = {}
        for t in run["tasks"]:
            if t["host"] != "localhost":
                per[t["host"]] = per.get(t["host"], 0) + 1
        if per:
            counts.append(statistics.median(per.values()))
    return statistics.median(counts) if counts else None


def ssh_execs(logfile, nodes):
    """SSH commands (exec + file transfers) per node from a -vvv log of a 1-node run."""
    with open(logfile) as f:
        text = f.read()
    execs = len(re.findall(r"SSH: EXEC (ssh|sftp|scp)", text))
    puts = len(re.findall(r"<127\.0\.0\.1> PUT ", text))
    return {"ssh_commands_per_node": round(execs / float(nodes), 1), "file_transfers_per_node":
            round(puts / float(nodes), 1)}


def med(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def marginal(sizes, variant="collection", key="drift_controller_cpu_s"):
    """What each further node adds to ``key`` between consecutive fleet sizes: (cost(n) - cost(m)) / (n - m)."""
    pts = sorted((r["nodes"], r[variant].get(key)) for r in sizes if r.get(variant, {}).get(key) is not None)
    return [{"from": a[0], "to": b[0], "per_node": round((b[1] - a[1]) / float(b[0] - a[0]), 3)}
            for a, b in zip(pts, pts[1:])]


def node_exec(fleet, node, argv):
    p = subprocess.run([sys.executable, "-m", "gpufabric_sim", "exec", "--fleet", fleet.path, "--node", node,
                        "--"] + argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    return p.returncode, p.stdout, p.stderr


MODULE_ARGS = [
    ("gpufabric_facts", {}),
    ("kernel_cmdline", {"present": ["iommu=pt"], "absent": ["iommu.passthrough=0", "intel_iommu=off",
                                                            "amd_iommu=off"]}),
    ("pcie_acs", {"clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"], "pairs": "paired",
                  "persist": "kernel_cmdline"}),
    ("dcb_qos", {"rails": RAILS, "dscp_map": [{"dscp": 26, "priority": 3}], "pfc_priorities": [3],
                 "trust": "dscp"}),
    ("rdma_cm_tos", {"rails": RAILS, "tos": 106, "expected_dscp": 26}),
    ("rail_sysctl", {"rails": RAILS, "arp_ignore": 1, "arp_announce": 2, "rp_filter": 2, "routing": False}),
    ("nccl_config", {"rails": RAILS, "path": "/etc/nccl.conf", "tc": 106}),
    ("fabric_persist", {"state": "present"}),
]


def module_times(fleet, reps):
    """Each module run on the (converged) node in check mode, fresh interpreter per run, median of reps."""
    py = os.path.join(BIN, "python")
    out = {}
    for name, args in MODULE_ARGS:
        runs = []
        for _rep in range(reps):
            rc, so, se = node_exec(fleet, fleet.nodes[0], ["env", "PYTHONPATH=%s" % BUILD, py,
                                                           os.path.join(HERE, "module_timer.py"), name,
                                                           json.dumps(args), "--check"])
            try:
                runs.append(json.loads(so.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                runs.append({"failed": True, "msg": (so + se)[-300:]})
        ok = [r for r in runs if not r.get("failed")]
        out[name] = {"import_s": med([r["import_s"] for r in ok]), "run_s": med([r["run_s"] for r in ok]),
                     "changed": any(r.get("changed") for r in ok),
                     "failed": [r.get("msg") for r in runs if r.get("failed")][:1]}
    return out


def inprocess(fleet, reps):
    rc, so, se = node_exec(fleet, fleet.nodes[0], ["env", "PYTHONPATH=%s:%s" % (BUILD, LAB),
                                                   os.path.join(BIN, "python"), os.path.join(HERE, "inprocess.py"),
                                                   ",".join(RAILS), str(reps)])
    try:
        return json.loads(so.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (so + se)[-500:]}


def check_profile(fleet, reps, host_vars=None, evidence_script=None):
    """The one-call check's evaluation on the node, in-process (tests/bench/check_profile.py): seconds per
    evaluator and the commands it starts, against the desired document of a host with ``host_vars`` (default none).
    With ``evidence_script`` (the installed gpufabric-evidence), also the evidence timer's node profile."""
    sys.path[:0] = [os.path.join(REPO, "tests", "unit"), BUILD]
    try:
        import desired_doc
        doc = desired_doc.resolve(host_vars)
    finally:
        del sys.path[:2]
    fd, path = tempfile.mkstemp(suffix=".json", prefix="bench-desired-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    try:
        rc, so, se = node_exec(fleet, fleet.nodes[0], ["env", "PYTHONPATH=%s:%s" % (BUILD, LAB),
                                                       os.path.join(BIN, "python"),
                                                       os.path.join(HERE, "check_profile.py"), path, str(reps)] +
                               ([evidence_script] if evidence_script else []))
    finally:
        os.unlink(path)
    try:
        return json.loads(so.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (so + se)[-500:]}


# The node's tools as this machine has them (the real C programs), each run as the evaluation runs it, against the
# simulator's Python emulators: (name, argv). ``dcb -j app show dev lo`` fails (lo has no DCB) after the same start,
# netlink socket and request as a read; ``env -i ... sh -c`` is how the GRUB defaults are sourced (real in the
# simulator too); ``systemctl is-enabled`` without a running systemd reads the unit files itself (on a node it asks
# PID 1 over D-Bus instead: a little less in the client, PID 1's share not counted); ``ibv_devinfo`` without an RDMA
# device stops after loading libibverbs and its providers.
REAL_TOOLS = (
    ("dcb", ["dcb", "-j", "app", "show", "dev", "lo"]),
    ("ip", ["ip", "-d", "-j", "link", "show"]),
    ("env", ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "sh", "-c", ". /dev/null; printf x"]),
    ("systemctl", ["systemctl", "is-enabled", "gpufabric-apply.service", "gpufabric-evidence.timer"]),
    ("ibv_devinfo", ["ibv_devinfo"]),
    ("nvidia-smi", ["nvidia-smi", "nvlink", "--status"]),
)


def real_tool_cpu(reps=20):
    """CPU-s of one start of this machine's own programs (REAL_TOOLS; those it has): what a process costs on a real
    node, against the simulator's Python emulators."""
    out = {}
    for name, argv in REAL_TOOLS:
        path = shutil.which(argv[0])
        if not path:
            continue
        cpus = []
        for _i in range(reps):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([path] + argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        out[name] = round(statistics.median(cpus), 4)
    return out


def kernel_dcb_cpu():
    """One DCB read over rtnetlink on this machine's kernel (tests/bench/kernel_dcb_cost.py): per request, per reply
    parsed, per socket."""
    p = subprocess.run([os.path.join(BIN, "python"), os.path.join(HERE, "kernel_dcb_cost.py")], env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (p.stdout + p.stderr)[-500:]}


def node_cost(profile, real, kernel=None):
    """One timer run's CPU-s on the node with the real programs in place of the simulator's emulators: the installed
    script's measured CPU (``process.run_cpu_s``: the interpreter, imports, evaluation, the timer's own reads,
    rendering, and the processes it waited for), minus what its processes cost here (the in-process ``gather`` of the
    same run: the same commands), plus each of them at ``real`` (this machine's program; a program this machine
    lacks stays at the emulator's cost, named in ``emulated``). Goal (issue 23): <= 0.2 CPU-s."""
    np_ = profile.get("node_profile") or {}
    gather, proc = np_.get("gather") or {}, np_.get("process") or {}
    if "run_cpu_s" not in proc or "commands" not in gather:
        return None
    cmds = gather["commands"]
    measured_tools = sum(c["cpu_s"] for c in cmds.values())
    # the script's own CPU (check_profile.py: RUSAGE_SELF at its exit); else the run's minus what its processes cost
    # in the gather (noisier: the emulators' CPU varies between the two runs)
    python = proc.get("run_self_cpu_s") or proc["run_cpu_s"] - measured_tools
    tools, emulated = 0.0, []
    for name, c in sorted(cmds.items()):
        if name.split()[0] in real:   # "dcb -V" is a start of dcb
            tools += c["count"] * real[name.split()[0]]
        else:
            tools += c["cpu_s"]
            emulated.append(name)
    total = python + tools
    out = {"run_cpu_s": proc["run_cpu_s"], "processes": dict((k, c["count"]) for k, c in sorted(cmds.items())),
           "processes_cpu_s_measured": round(measured_tools, 4), "python_cpu_s": round(python, 4),
           "processes_cpu_s_real": round(tools, 4), "emulated": emulated, "cpu_s": round(total, 4),
           "met": total <= 0.2}
    out["kernel_dcb"] = with_kernel_dcb(out, np_, kernel, real)
    return out


def with_kernel_dcb(cost, np_, kernel, real):
    """The same timer run on a host whose kernel answers the DCB reads (concerns/dcb/dcbnl.py; an mlx5 rail's reply
    carries every object the collection reads but ``apptrust``). Measured in the simulator with the reads answered
    in-process (check_profile.py ``SimKernel``, ``gather_kernel_dcb``): its Python against the plain gather's
    (``gather``: each read a dcb process) is what the run's Python saves (spawning, batch files, JSON); the
    processes it still starts are counted at this machine's programs as in ``node_cost``; and each read and rail
    request at this machine's cost (``kernel``: tests/bench/kernel_dcb_cost.py) stands for the kernel's answer."""
    plain, with_k = np_.get("gather") or {}, np_.get("gather_kernel_dcb") or {}
    if not with_k.get("kernel_dcb") or not kernel or "request_cpu_s" not in kernel:
        return None

    counted = with_k["kernel_dcb"]
    saved = plain["python_cpu_s"] - with_k["python_cpu_s"]   # medians of each repetition's own Python
    tools = 0.0
    for name, c in with_k["commands"].items():
        base = name.split()[0]
        tools += c["count"] * real[base] if base in real else c["cpu_s"]
    dcbnl_cpu = counted["reads"] * kernel["socket_cpu_s"] + \
        counted["requests"] * (kernel["request_cpu_s"] + kernel["parse_cpu_s"])
    total = cost["python_cpu_s"] - saved + tools + dcbnl_cpu
    # the evaluation alone (issue 23's figure): the interpreter, the imports, the evaluation's Python and its
    # processes at this machine's programs, its reads at the kernel's cost; not the timer's own reads or rendering
    proc = np_.get("process") or {}
    at = counted.get("evaluate") or {}
    own = with_k.get("own_commands") or {}
    eval_tools = 0.0
    for name, c in with_k["commands"].items():
        n = c["count"] - (own.get(name) or {}).get("count", 0)
        base = name.split()[0]
        eval_tools += n * real[base] if base in real else c["cpu_s"] - (own.get(name) or {}).get("cpu_s", 0.0)
    evaluation = None
    if "interpreter_cpu_s" in proc and at:
        evaluation = round(proc["interpreter_cpu_s"] + proc["imports_cpu_s"] + with_k["evaluate_python_cpu_s"] +
                           eval_tools + at["reads"] * kernel["socket_cpu_s"] +
                           at["requests"] * (kernel["request_cpu_s"] + kernel["parse_cpu_s"]), 4)
    return {"evaluation_cpu_s": evaluation, "evaluation_met": evaluation is not None and evaluation <= 0.2,
            "processes": dict((k, c["count"]) for k, c in sorted(with_k["commands"].items())),
            "reads": counted["reads"], "requests": counted["requests"], "python_saved_cpu_s": round(saved, 4),
            "python_cpu_s": round(cost["python_cpu_s"] - saved, 4), "processes_cpu_s_real": round(tools, 4),
            "dcbnl_cpu_s": round(dcbnl_cpu, 5), "cpu_s": round(total, 4), "met": total <= 0.2}


NODE_PROFILE_IPROUTE2 = ("6.1.0", "6.5.0")


def node_profile(args, logroot):
    """The node's cost of one evaluation and one evidence timer run (issue 23 item 8): per iproute2 release of the
    simulator (6.1: the batch defect of Debian bookworm and Ubuntu 24.04; 6.5: whole batches), a converged
    hgx-h200 node with the evidence timer installed, profiled by check_profile.py."""
    out = {"load_start": loadavg(), "real_tool_cpu_s": real_tool_cpu(), "kernel_dcb_cpu_s": kernel_dcb_cpu(),
           "iproute2": {}}
    with open(os.path.join(LAB, "topologies", "hgx-h200.yml")) as f:
        base = f.read()
    for version in NODE_PROFILE_IPROUTE2:
        topo = os.path.join(args.workdir, "hgx-h200-iproute2-%s.yml" % version)
        os.makedirs(args.workdir, exist_ok=True)
        with open(topo, "w") as f:
            f.write(re.sub(r'(?m)^iproute2_version: .*$', 'iproute2_version: "%s"' % version, base))
        log("node profile, iproute2 %s: creating and converging" % version)
        fleet = Fleet(os.path.join(args.workdir, "np-%s" % version.replace(".", "")), 1, topology=topo)
        fleet.create()
        logdir = os.path.join(logroot, "node-profile-%s" % version)
        os.makedirs(logdir, exist_ok=True)
        try:
            conv = playbook(fleet, os.path.join(REPO, "playbooks", "provision.yml"),
                            ["-e", "persistence_evidence=true"], args.forks, logdir, "converge")
            res = {"converge_rc": conv["rc"]}
            if conv["rc"] == 0:
                script = os.path.join(fleet.root(fleet.nodes[0]), "usr", "local", "sbin", "gpufabric-evidence")
                res.update(check_profile(fleet, args.module_reps, {"persistence_evidence": True}, script))
                res["node_cost"] = node_cost(res, out["real_tool_cpu_s"], out["kernel_dcb_cpu_s"])
            out["iproute2"][version] = res
        finally:
            fleet.destroy()
    out["load_end"] = loadavg()
    return out


def vendor_nfs_cached(reps):
    """vendor_nfs_build's cached path (tests/bench/vendor_nfs_cached.py), goal < 2 s."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "vendor_nfs_cached.py"), str(reps)], env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"measured": False, "why": (p.stdout + p.stderr)[-500:]}
    if "error" in res:
        return {"measured": False, "why": res["error"]}
    res["measured"] = True
    # a 10 MiB vendor tarball hashed once more than the fixture's, plus interpreter start and imports
    res["seconds"] = round(res["median_s"] + res["import_s"] + 10 * res["sha256_s_per_mib"], 3)
    res["met"] = res["seconds"] < 2.0 and not res["changed"]
    return res


def bench_size(n, args, logroot):
    log("fleet of %d node(s): creating" % n)
    fleet = Fleet(os.path.join(args.workdir, "n%d" % n), n)
    fleet.create()
    logdir = os.path.join(logroot, "n%d" % n)
    os.makedirs(logdir, exist_ok=True)
    res = {"nodes": n, "create_s": round(fleet.create_s, 2), "load_start": loadavg(), "runs": []}
    try:
        subprocess.run([os.path.join(BIN, "ansible"), "-i", fleet.inventory, "all", "-m", "ansible.builtin.ping",
                        "-f", str(args.forks)], env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        reps = args.reps if n == 1 else max(1, args.reps_large)
        raw = {"collection": {"converge": [], "drift": []}, "baseline": {"converge": [], "drift": []},
               "roles_check": {"converge": [], "drift": []}}
        variants = {
            "collection": (run_collection_converge, run_collection_drift),
            "baseline": (run_baseline_converge, run_baseline_drift),
        }
        with_baseline = n <= args.baseline_max_nodes
        res["baseline_measured"] = with_baseline
        for r in range(reps):
            order = ["collection", "baseline"] if r % 2 == 0 else ["baseline", "collection"]
            for v in order:
                if v == "baseline" and not with_baseline:
                    continue
                conv, drift = variants[v]
                reset_s = fleet.reset()
                c = conv(fleet, args.forks, logdir, "%s-converge-%d" % (v, r))
                raw[v]["converge"].append(c)
                for k in range(args.drift_reps):
                    d = drift(fleet, args.forks, logdir, "%s-drift-%d-%d" % (v, r, k))
                    raw[v]["drift"].append(d)
                    if v == "collection" and with_baseline:
                        # the role-based check on the same converged fleet, interleaved with the one-call check
                        raw["roles_check"]["drift"].append(
                            run_roles_drift(fleet, args.forks, logdir, "roles-drift-%d-%d" % (r, k)))
                    log("n=%d rep %d %s: converge %.1fs rc=%d, drift %.1fs rc=%d (reset %.1fs, load %s)"
                        % (n, r, v, c["wall_s"], c["rc"], d["wall_s"], d["rc"], reset_s, loadavg()[0]))
                    res["runs"].append({"rep": r, "variant": v, "reset_s": round(reset_s, 2),
                                        "converge_s": c["wall_s"] if k == 0 else None, "converge_rc": c["rc"],
                                        "drift_s": d["wall_s"], "drift_rc": d["rc"], "load1": loadavg()[0]})
        for v in [v for v in raw if raw[v]["converge"]]:
            res[v] = {
                "converge_s": med([x["wall_s"] for x in raw[v]["converge"]]),
                "drift_s": med([x["wall_s"] for x in raw[v]["drift"]]),
                "converge_controller_cpu_s": med([x["controller_cpu_s"] for x in raw[v]["converge"]]),
                "drift_controller_cpu_s": med([x["controller_cpu_s"] for x in raw[v]["drift"]]),
                "drift_nodes_cpu_s": med([x.get("nodes_cpu_s") for x in raw[v]["drift"]]),
                "all_rc_zero": all(x["rc"] == 0 for x in raw[v]["converge"] + raw[v]["drift"]),
                "drift_per_concern_s": per_concern(v, raw[v]["drift"]),
                "converge_per_concern_s": per_concern(v, raw[v]["converge"]),
                "drift_module_executions_per_node": task_executions(raw[v]["drift"]),
                "converge_module_executions_per_node": task_executions(raw[v]["converge"]),
                "drift_task_results_per_node": task_results(raw[v]["drift"]),
                "converge_task_results_per_node": task_results(raw[v]["converge"]),
            }
        if raw["roles_check"]["drift"]:
            rd = raw["roles_check"]["drift"]
            res["roles_check"] = {
                "drift_s": med([x["wall_s"] for x in rd]),
                "drift_controller_cpu_s": med([x["controller_cpu_s"] for x in rd]),
                "drift_controller_cpu_s_per_node": round(med([x["controller_cpu_s"] for x in rd]) / float(n), 3),
                "drift_nodes_cpu_s": med([x.get("nodes_cpu_s") for x in rd]),
                "all_rc_zero": all(x["rc"] == 0 for x in rd),
                "drift_module_executions_per_node": task_executions(rd),
                "drift_task_results_per_node": task_results(rd),
            }
        for v in ("collection", "baseline"):
            if v in res and res[v].get("drift_controller_cpu_s") is not None:
                res[v]["drift_controller_cpu_s_per_node"] = round(res[v]["drift_controller_cpu_s"] / float(n), 3)
            if v in res and res[v].get("drift_nodes_cpu_s") is not None:
                res[v]["drift_nodes_cpu_s_per_node"] = round(res[v]["drift_nodes_cpu_s"] / float(n), 3)
        if not with_baseline:
            res["baseline"] = {"converge_s": None, "drift_s": None, "drift_per_concern_s": {},
                               "converge_per_concern_s": {}, "drift_module_executions_per_node": None,
                               "converge_module_executions_per_node": None,
                               "not_measured": "fleet larger than --baseline-max-nodes %d (time budget)"
                                               % args.baseline_max_nodes}
        for key in ("converge_s", "drift_s"):
            c, b = res["collection"][key], res["baseline"][key]
            res["speedup_" + key.replace("_s", "")] = round(b / c, 2) if c and b else None
        # fact gathering (state does not matter); the fleet is in the last variant's converged state
        facts = [playbook(fleet, os.path.join(HERE, "playbooks", "facts.yml"), [], args.forks, logdir,
                          "facts-%d" % i) for i in range(reps)]
        fr = {}
        for t in [t for run in facts for t in run["tasks"]]:
            fr.setdefault(t["task"], []).append(t["seconds"])
        res["facts_task_s"] = {k: med(v) for k, v in fr.items()}
        if n == 1:
            # converge and drift once more with -vvv to count SSH commands (not timed), then the module timings
            # SSH commands per node from -vvv runs (not timed). The fleet is in the state of the last variant run.
            if with_baseline:
                if order[-1] != "baseline":
                    fleet.reset()
                    run_baseline_converge(fleet, args.forks, logdir, "baseline-converge-for-vvv")
                res["baseline"]["ssh_drift"] = ssh_execs(
                    run_baseline_drift(fleet, args.forks, logdir, "baseline-drift-vvv", verbose=True)["log"], n)
            fleet.reset()
            res["collection"]["ssh_converge"] = ssh_execs(
                playbook(fleet, os.path.join(REPO, "playbooks", "provision.yml"), [], args.forks, logdir,
                         "collection-converge-vvv", verbose=True)["log"], n)
            res["collection"]["ssh_drift"] = ssh_execs(
                run_collection_drift(fleet, args.forks, logdir, "collection-drift-vvv", verbose=True)["log"], n)
            # the fleet is now converged by the collection: module timings in check mode (no-op)
            res["module_host_s"] = module_times(fleet, args.module_reps)
            res["inprocess"] = inprocess(fleet, args.module_reps)
            res["check_profile"] = check_profile(fleet, args.module_reps)
            if args.mitogen:
                res["mitogen"] = mitogen(fleet, args, logdir)
    finally:
        res["load_end"] = loadavg()
        log("fleet of %d node(s): destroying" % n)
        fleet.destroy()
    return res


def mitogen(fleet, args, logdir):
    """The collection's drift check under Mitogen's strategy, from a separate venv (--mitogen-venv)."""
    venv = args.mitogen_venv
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        return {"ok": False, "why": "no venv at %s (python -m venv DIR; DIR/bin/pip install mitogen ansible-core)"
                % venv}
    p = subprocess.run([py, "-c", "import ansible_mitogen, os, ansible, mitogen; print(os.path.dirname("
                        "ansible_mitogen.__file__)); print(ansible.__version__); print('.'.join(map(str, mitogen.__version__)))"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if p.returncode != 0:
        return {"ok": False, "why": p.stderr[-500:]}
    mdir, core, mver = p.stdout.split()
    out = {"ansible_core": core, "mitogen": mver}
    e = env(dict(ANSIBLE_STRATEGY_PLUGINS=os.path.join(mdir, "plugins", "strategy"),
                 ANSIBLE_STRATEGY="mitogen_linear", PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"]))
    t0 = time.time()
    with open(os.path.join(logdir, "mitogen-drift.log"), "w") as f:
        r = subprocess.run([os.path.join(venv, "bin", "ansible-playbook"), "-i", fleet.inventory,
                            os.path.join(REPO, "playbooks", "drift.yml"), "-e",
                            "gpufabric_report_dir=%s" % os.path.join(logdir, "reports")], env=e, stdout=f,
                           stderr=subprocess.STDOUT, cwd=REPO, check=False)
    out["drift_s"] = round(time.time() - t0, 3)
    out["rc"] = r.returncode
    with open(os.path.join(logdir, "mitogen-drift.log")) as f:
        text = f.read()
    out["ok"] = r.returncode == 0
    if not out["ok"]:
        errs = [ln for ln in text.splitlines() if "ERROR" in ln or "Error" in ln or "error" in ln]
        out["error"] = (errs[:3] or text.splitlines()[-5:])
    return out


def goals(results):
    by_n = {r["nodes"]: r for r in results["sizes"]}
    g = []
    one = by_n.get(1)
    if one:
        s = one.get("speedup_drift")
        g.append({"goal": "no-op drift check of one 8-rail node >= 5x faster than the baseline",
                  "value": "%sx" % s, "met": bool(s and s >= 5)})
        for key, label in (("drift_s", "no-op drift check"), ("converge_s", "full converge")):
            for n, r in sorted(by_n.items()):
                if n <= 1:
                    continue
                limit = 1.3 * max(1.0, n / float(results["forks"])) * one["collection"][key]
                val = r["collection"][key]
                g.append({"goal": "%s, %d nodes at forks=%d <= 1.3 x %g x single-node (%.1fs)"
                          % (label, n, results["forks"], max(1.0, n / float(results["forks"])), limit),
                          "value": "%.1fs" % val, "met": val <= limit, "scope_nodes": n})
        inproc = one.get("inprocess", {})
        for name, v in sorted(inproc.items()):
            if isinstance(v, dict) and "median_s" in v and name != "dcb_apply_check_spawn":
                g.append({"goal": "module_utils %s < 100 ms (8 rails, in-process)" % name,
                          "value": "%.1f ms" % (v["median_s"] * 1000), "met": v["median_s"] < 0.1})
        for name, v in sorted(one.get("module_host_s", {}).items()):
            if v.get("run_s") is not None:
                g.append({"goal": "module %s host-side main() < 100 ms (check mode, no-op, sim node)" % name,
                          "value": "%.0f ms (+%.0f ms import)" % (v["run_s"] * 1000, (v["import_s"] or 0) * 1000),
                          "met": v["run_s"] < 0.1})
    # issue 15: the one-call check
    if one:
        execs = one["collection"].get("drift_module_executions_per_node")
        g.append({"goal": "no-op drift check: 1 module execution (+1 discovery at most) per node",
                  "value": str(execs), "met": execs is not None and execs <= 2})
        ssh = one["collection"].get("ssh_drift", {}).get("ssh_commands_per_node")
        g.append({"goal": "no-op drift check: <= 2 SSH commands per node", "value": str(ssh),
                  "met": ssh is not None and ssh <= 2})
        s = one.get("speedup_drift")
        g.append({"goal": "no-op drift check of one node >= 10x faster than the baseline", "value": "%sx" % s,
                  "met": bool(s and s >= 10)})
    for n, r in sorted(by_n.items()):
        cpu = r["collection"].get("drift_controller_cpu_s_per_node")
        g.append({"goal": "controller CPU of the drift check <= 0.5 s per node (%d nodes, whole run / nodes)" % n,
                  "value": "%s s" % cpu, "met": cpu is not None and cpu <= 0.5, "scope_nodes": n})
    for m in marginal(results["sizes"]):
        g.append({"goal": "controller CPU each further node adds to the drift check <= 0.5 s (%d -> %d nodes)"
                          % (m["from"], m["to"]),
                  "value": "%s s" % m["per_node"], "met": m["per_node"] <= 0.5, "scope_nodes": m["to"]})
        if n == 64:
            g.append({"goal": "64 nodes at forks=%d checked in <= 60 s" % results["forks"],
                      "value": "%.1fs" % r["collection"]["drift_s"], "met": r["collection"]["drift_s"] <= 60})
    vn = results.get("vendor_nfs_build_cached", {})
    g.append({"goal": "vendor client rebuild for unchanged (source, kernel) < 2 s",
              "value": ("%.3f s (main %.3f + import %.3f + 10 MiB hash)" % (vn["seconds"], vn["median_s"], vn["import_s"])
                        if vn.get("measured") else "not measured: %s" % vn.get("why")), "met": vn.get("met")})
    return g


def write_md(results, path):
    L = ["# Benchmark: gpufabric.node vs builtin-modules baseline", "",
         "Generated by `tests/bench/run.py` on %s; %s CPU(s); load average at start %s, end %s; forks=%d; "
         "%d repetition(s) for 1 node, %d for more (each: converge + %d no-op drift checks); medians. Method: docs/benchmarks.md."
         % (results["date"], results["cpus"], results["load_start"], results["load_end"], results["forks"],
            results["reps"], results["reps_large"], results["drift_reps"]), "",
         "| nodes | collection converge s | baseline converge s | speedup | collection drift s | "
         "baseline drift s | speedup | load1 during |", "|---|---|---|---|---|---|---|---|"]

    def fmt(v, suffix=""):
        return "not run" if v is None else "%s%s" % (v, suffix)

    for r in results["sizes"]:
        loads = [x["load1"] for x in r["runs"]]
        L.append("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
            r["nodes"], r["collection"]["converge_s"], fmt(r["baseline"]["converge_s"]),
            fmt(r.get("speedup_converge"), "x"), r["collection"]["drift_s"], fmt(r["baseline"]["drift_s"]),
            fmt(r.get("speedup_drift"), "x"), "%.1f-%.1f" % (min(loads), max(loads)) if loads else "-"))
    if any(not r.get("baseline_measured", True) for r in results["sizes"]):
        L += ["", "Baseline not run above %s nodes (time budget: at 8 nodes it already takes ~6x the collection's "
              "time; its cost per node is ~8x the collection's module executions)."
              % results.get("baseline_max_nodes", 8)]
    L += ["", "## No-op drift check: wall time and controller CPU per node", "",
          "| nodes | one-call check s | CPU s/node | role-based check s | CPU s/node | baseline s | CPU s/node |",
          "|---|---|---|---|---|---|---|"]
    for r in results["sizes"]:
        rc_ = r.get("roles_check", {})
        L.append("| %d | %s | %s | %s | %s | %s | %s |" % (
            r["nodes"], r["collection"]["drift_s"], fmt(r["collection"].get("drift_controller_cpu_s_per_node")),
            fmt(rc_.get("drift_s")), fmt(rc_.get("drift_controller_cpu_s_per_node")), fmt(r["baseline"]["drift_s"]),
            fmt(r["baseline"].get("drift_controller_cpu_s_per_node"))))
    L += ["", "## Where the one-call check's CPU goes", "",
          "Controller: ansible-playbook and its children. Nodes: the machine's busy CPU during the run (/proc/stat) "
          "less the controller's, i.e. the simulated nodes' sshd, shells, module and emulated tools, which share this "
          "machine's %s CPUs with the controller." % results["cpus"], "",
          "| nodes | wall s | controller CPU s | per node | nodes' CPU s | per node | wall s x CPUs |",
          "|---|---|---|---|---|---|---|"]
    for r in results["sizes"]:
        c = r["collection"]
        nm = [("not measured" if c.get(k) is None else c[k]) for k in (
            "drift_controller_cpu_s", "drift_controller_cpu_s_per_node", "drift_nodes_cpu_s", "drift_nodes_cpu_s_per_node")]
        L.append("| %d | %s | %s | %s | %s | %s | %s |" % (
            r["nodes"], c["drift_s"], nm[0], nm[1], nm[2], nm[3],
            round(c["drift_s"] * results["cpus"], 1)))
    for key, label in (("drift_controller_cpu_s", "controller"), ("drift_nodes_cpu_s", "nodes'")):
        steps = marginal(results["sizes"], key=key)
        if steps:
            L += ["", "Each further node adds (%s CPU s): %s" % (label, ", ".join(
                "%d->%d nodes: %s" % (m["from"], m["to"], m["per_node"]) for m in steps))]
    L += ["", "## Per concern, no-op drift check (median seconds per host, sum of that concern's tasks)", "",
          "| nodes | concern | collection | baseline |", "|---|---|---|---|"]
    for r in results["sizes"]:
        cc, bc = r["collection"]["drift_per_concern_s"], r["baseline"]["drift_per_concern_s"]
        for c in sorted(set(cc) | set(bc)):
            L.append("| %d | %s | %s | %s |" % (r["nodes"], c, cc.get(c, "-"), bc.get(c, "-")))
    L += ["", "## Module executions and SSH commands per node", "",
          "| nodes | variant | module executions drift | module executions converge | task results drift | "
          "SSH cmds drift | SSH cmds converge | controller CPU s drift | controller CPU s converge |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in results["sizes"]:
        for v in ("collection", "baseline"):
            x = r[v]
            L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["nodes"], v, fmt(x["drift_module_executions_per_node"]),
                fmt(x["converge_module_executions_per_node"]), fmt(x.get("drift_task_results_per_node")),
                x.get("ssh_drift", {}).get("ssh_commands_per_node", "-"),
                x.get("ssh_converge", {}).get("ssh_commands_per_node", "-"),
                fmt(x.get("drift_controller_cpu_s")), fmt(x.get("converge_controller_cpu_s"))))
    L += ["", "## Fact gathering (median seconds per host)", "", "| nodes | task | seconds |", "|---|---|---|"]
    for r in results["sizes"]:
        for k, v in sorted(r.get("facts_task_s", {}).items()):
            L.append("| %d | %s | %s |" % (r["nodes"], k, v))
    one = [r for r in results["sizes"] if r["nodes"] == 1]
    if one:
        one = one[0]
        L += ["", "## Modules on the node (check mode, converged, fresh interpreter; median)", "",
              "| module | import s | main() s |", "|---|---|---|"]
        for k, v in sorted(one.get("module_host_s", {}).items()):
            L.append("| %s | %s | %s |" % (k, v["import_s"], v["run_s"]))
        L += ["", "## module_utils in-process (8 rails, check mode; median)", "",
              "| function | ms | commands run |", "|---|---|---|"]
        for k, v in sorted(one.get("inprocess", {}).items()):
            if isinstance(v, dict) and "median_s" in v:
                L.append("| %s | %.2f | %s |" % (k, v["median_s"] * 1000, v["commands"]))
            elif not isinstance(v, dict):
                L.append("| %s | %.2f | - |" % (k, v * 1000))
        cp = one.get("check_profile") or {}
        if "evaluate_s" in cp:
            L += ["", "## The one-call check on the node (node_check.evaluate in-process, %d reps; median)" % cp["reps"],
                  "", "evaluate: %.3f s wall, %.3f CPU-s (with the commands it starts)"
                  % (cp["evaluate_s"], cp["evaluate_cpu_s"]), "", "| evaluator | s |", "|---|---|"]
            for k, v in sorted(cp["evaluators_s"].items(), key=lambda kv: -kv[1]):
                L.append("| %s | %.4f |" % (k, v))
            L += ["", "| command started | count | s |", "|---|---|---|"]
            for k, v in sorted(cp["commands"].items(), key=lambda kv: -kv[1]["s"]):
                L.append("| %s | %d | %.4f |" % (k, v["count"], v["s"]))
        if "mitogen" in one:
            L += ["", "## Mitogen", "", "```", json.dumps(one["mitogen"], indent=1), "```"]
    L += ["", "## Goals", "", "| goal | value | met |", "|---|---|---|"]
    for g in results["goals"]:
        L.append("| %s | %s | %s |" % (g["goal"], g["value"], {True: "yes", False: "NO", None: "n/a"}[g["met"]]))
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = [r["nodes"] for r in results["sizes"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "converge_s", "full converge"), (axes[1], "drift_s", "no-op drift check")):
        for v, style in (("collection", "o-"), ("baseline", "s--")):
            pts = [(r["nodes"], r[v][key]) for r in results["sizes"] if r[v].get(key) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=v)
        one = [r for r in results["sizes"] if r["nodes"] == 1]
        if one:
            t1 = one[0]["collection"][key]
            ax.plot(ns, [1.3 * max(1.0, n / float(results["forks"])) * t1 for n in ns], ":", color="grey",
                    label="goal: 1.3 x max(1, n/forks) x 1-node")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("nodes (8 rails each, forks=%d)" % results["forks"])
        ax.set_ylabel("seconds (median)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("gpufabric.node vs builtin baseline, simulated hgx-h200 fleet, %d CPUs, load %s"
                 % (results["cpus"], results["load_start"][0]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--quick", action="store_true", help="1 and 8 nodes, 2 repetitions")
    ap.add_argument("--sizes", default="1,8,32,64")
    ap.add_argument("--reps", type=int, default=3, help="repetitions for the 1-node fleet")
    ap.add_argument("--reps-large", type=int, default=1, help="repetitions for fleets of more than 1 node")
    ap.add_argument("--drift-reps", type=int, default=2, help="no-op drift checks after each converge")
    ap.add_argument("--baseline-max-nodes", type=int, default=8,
                    help="run the baseline only on fleets up to this size (its cost grows ~8x faster)")
    ap.add_argument("--module-reps", type=int, default=5)
    ap.add_argument("--forks", type=int, default=16)
    ap.add_argument("--workdir", default="/tmp/gpufabric-bench")
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--name", default="latest")
    ap.add_argument("--mitogen", action="store_true", help="also run the drift check under Mitogen (1 node)")
    ap.add_argument("--mitogen-venv", default="/tmp/mitovenv")
    ap.add_argument("--node-profile", action="store_true",
                    help="only the node profile: one evaluation and one evidence timer run on a converged 8-rail "
                         "node, per simulated iproute2 release (writes NAME.json)")
    ap.add_argument("--replot", metavar="JSON", help="only redraw the plot and the Markdown from a results JSON")
    ap.add_argument("--max-load", type=float, default=None,
                    help="wait (up to 10 min) until the 1-minute load average is below this before starting")
    args = ap.parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            results = json.load(f)
        results["goals"] = goals(results)
        base = os.path.splitext(args.replot)[0]
        write_md(results, base + ".md")
        if ensure_matplotlib():
            plot(results, base + ".png")
        return 0
    if os.geteuid() != 0:
        sys.exit("the benchmark needs root (simulated fleet: network namespaces, sshd)")
    sizes = [1, 8] if args.quick else [int(x) for x in args.sizes.split(",")]
    if args.quick:
        args.reps = min(args.reps, 2)
    have_plot = args.node_profile or ensure_matplotlib()
    if args.max_load is not None:
        deadline = time.time() + 600
        while loadavg()[0] > args.max_load and time.time() < deadline:
            log("load %.2f > %.2f: waiting" % (loadavg()[0], args.max_load))
            time.sleep(20)
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    logroot = tempfile.mkdtemp(prefix="logs-", dir=args.workdir)
    if args.node_profile:
        res = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
               "python": platform.python_version(), "logs": logroot, "node_profile": node_profile(args, logroot)}
        with open(os.path.join(args.out, args.name + ".json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        log("done: %s" % os.path.join(args.out, args.name + ".json"))
        return 0
    import ansible
    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
               "python": platform.python_version(), "ansible_core": ansible.__version__, "forks": args.forks,
               "reps": args.reps, "reps_large": args.reps_large, "drift_reps": args.drift_reps,
               "baseline_max_nodes": args.baseline_max_nodes, "load_start": loadavg(), "logs": logroot,
               "topology": "hgx-h200", "sizes": []}
    t0 = time.time()
    for n in sizes:
        results["sizes"].append(bench_size(n, args, logroot))
    results["vendor_nfs_build_cached"] = vendor_nfs_cached(args.module_reps)
    results["load_end"] = loadavg()
    results["total_s"] = round(time.time() - t0, 1)
    results["goals"] = goals(results)
    with open(os.path.join(args.out, args.name + ".json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    write_md(results, os.path.join(args.out, args.name + ".md"))
    if have_plot:
        plot(results, os.path.join(args.out, args.name + ".png"))
    log("done in %.0fs: %s" % (results["total_s"], os.path.join(args.out, args.name + ".md")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
