# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one-call, read-only drift check of a node: every concern of the list in one execution.

``evaluate(desired)`` runs discovery once and then, in check mode, the body of every concern module the roles run
(``cmdline_task``, ``acs_task``, ``dcb_task``, ``rdma_cm_task``, ``ecn_task``, ``rail_task``, ``mtu_task``,
``nccl_task``, ``persist_task``, ``nfs_mounts_task``, ``health_task``),
with the options the roles derive from their variables (``node_desired``). So each concern gets the status, items
and reason its role's check gives. Nothing is written: the bodies run in check mode, which writes nothing and
takes no node lock.

``desired`` is one document of the roles' variables (their defaults overlaid with the inventory's, resolved once on
the controller by the ``fabric_check`` action plugin; ``node_desired.KEYS`` lists them per concern).

The bodies share one ``SnapshotRunner``: a read-only query (``dcb ... show``, ``ip ... show``) that two of them make
with the same arguments runs once per evaluation.

``REGISTRY`` holds one entry per concern: the evaluator and the desired keys it reads. Concerns evaluated by one
module run (``sysctl`` and ``routing``: ``rail_sysctl``; ``pcie_link`` and ``gpudirect_rdma``: ``fabric_health``)
share an evaluator, which runs once. A concern of
``concerns.CONCERNS`` without an entry fails a unit test; to add one, write its module body as ``run(module,
sysroot)`` in module_utils and register it here.

A body that fails gives its concern(s) the module's own ``error`` status; one that raises gives ``error`` naming the
exception; the other concerns still report.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform

from ansible_collections.gpufabric.node.plugins.module_utils import concerns as model
from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired_state
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import task as acs_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import task as cmdline_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import task as dcb_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import task as ecn_task
from ansible_collections.gpufabric.node.plugins.module_utils.check import facts as facts_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import task as health_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import kernel_hold
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import task as mtu_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import task as nccl_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import task as nfs_mounts_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import task as persist_task
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import task as rail_task
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import task as rdma_cm_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.check.task_host import LocalRunner, TaskFailed, TaskModule

# the task names of playbooks/tasks/concerns.yml whose failures the node's result reports
DISCOVERY_TASK = "Discover GPUs, rails, PCIe paths, IOMMU, driver, Fabric Manager, nvidia-fs"
SCHEMA = "gpufabric.check/v1"
# the roles' task names that the failure of a concern module is recorded under (concern_error)
ECN_TASK = "ECN/DCQCN on the lossless priority of every rail (NP, RP, CNP DSCP and priority)"
HEALTH_TASK = "Check the PCIe links on the GPU<->NIC paths and the GPUDirect RDMA mechanism"


# read-only queries whose answers one evaluation reuses: command name -> the verb that makes it a query
SNAPSHOT_QUERIES = {"dcb": "show", "ip": "show"}


class SnapshotRunner(object):
    """The runner of one evaluation: ``runner`` with a repeated read-only query (``dcb ... show``, ``ip ... show``:
    same argv, same environment) answered from its first run. Every body runs in check mode, so nothing those
    queries read changes during the evaluation; discovery and the ``dcb`` concern read the same DCBX state, two
    concerns the same link list. Anything else (a batch file, a command with input or ``check_rc``, whose failure is
    the runner's own) runs every time."""

    def __init__(self, runner):
        self._runner = runner
        self._answers = {}

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self._runner.get_bin_path(name, required=required, opt_dirs=opt_dirs)

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else None
        verb = SNAPSHOT_QUERIES.get(os.path.basename(argv[0])) if argv else None
        if verb is None or verb not in argv[1:] or "-b" in argv or "--batch" in argv or check_rc or kw:
            return self._runner.run_command(args, environ_update=environ_update, check_rc=check_rc, **kw)
        key = (tuple(argv), tuple(sorted((environ_update or {}).items())))
        if key not in self._answers:
            self._answers[key] = self._runner.run_command(args, environ_update=environ_update)
        return self._answers[key]


class Context(object):
    """What one evaluation shares: the desired state, the node, the runner, discovery (once) and the results."""

    def __init__(self, desired, sysroot, runner):
        self.desired = desired
        self.sysroot = sysroot
        self.runner = SnapshotRunner(runner)
        self.facts = None
        self.discovery_failed = False
        self.warnings_found = []
        self.module_warnings = []
        self.errors = []
        self.reboot = {}
        self._rail_facts = None

    def task(self, name, body, params, **kw):
        """Run a concern module body in check mode; its result, or TaskFailed with what it would have failed with."""
        spec_kw = dict((k, v) for k, v in kw.items() if k in ("mutually_exclusive", "required_one_of"))
        extra = dict((k, v) for k, v in kw.items() if k not in spec_kw)
        mod = TaskModule(name, body.ARGUMENT_SPEC, params, self.runner, check_mode=True, **spec_kw)
        try:
            inputs.guard(mod)  # the module's own input guard (control characters) before its body
            return body.run(mod, self.sysroot, **extra)
        finally:
            self.module_warnings.extend("%s: %s" % (name, w) for w in mod.warnings)

    def discover(self):
        """The play's discovery (gpufabric_facts, every subset); on failure the play-level error the play reports."""
        if self.facts is None:
            try:
                res = self.task("gpufabric_facts", facts_task, {"gather_subset": ["all"]})
                self.facts = res["ansible_facts"]["gpufabric"]
                self.warnings_found = list(res.get("warnings_found") or [])
            except TaskFailed as e:
                self.facts = {}
                self.discovery_failed = True
                self.errors.append("%s: %s" % (DISCOVERY_TASK, e.result.get("msg") or "failed"))
        return self.facts

    def pairing(self):
        """The GPU<->rail pairing the roles derive their rails from: the play's discovery, else (when it failed)
        what each role then discovers itself (gather_subset pci, rails)."""
        facts = self.discover()
        if "pairing" in facts:
            return facts["pairing"]
        if self._rail_facts is None:
            res = self.task("gpufabric_facts", facts_task, {"gather_subset": ["pci", "rails"]})
            self._rail_facts = res["ansible_facts"]["gpufabric"]
        return self._rail_facts.get("pairing") or []

    def architecture(self):
        return self.discover().get("architecture") or platform.machine()


def _failed(names, e, task=None):
    """Statuses of ``names`` when their module body failed in the role's task ``task``, as the role ends up
    recording them: the module's own status where its failed result gave one (the role's rescue records
    ``concern_error``, then its export step lays the registered result's ``concerns`` over it), else what the
    rescue recorded (``concerns.task_error``: ``error`` with the message and per-object results, naming the task)."""
    own = e.result.get("concerns") or {}
    return dict((n, model.normalize(n, own[n]) if isinstance(own.get(n), dict) else model.task_error(e.result, n, task))
                for n in names)


# ---- evaluators: one per module run, each mirrors its role's tasks ---------------------------------------------

def _cmdline(ctx):
    d = ctx.desired
    try:
        present, absent = nd.iommu_args(d, ctx.architecture())
    except nd.DesiredError as e:
        task = "Check that the IOMMU mode is supported on this architecture"
        return {"cmdline": model.error("cmdline", str(e), task)}
    try:
        params = {"present": present, "absent": absent, "bootloader": d["iommu_bootloader"]}
        res = ctx.task("kernel_cmdline", cmdline_task, params)
    except TaskFailed as e:
        return _failed(["cmdline"], e, "Ensure the IOMMU kernel arguments for the next boot")
    ctx.reboot["cmdline"] = bool(res.get("reboot_required"))
    return dict(res["concerns"])


def _acs(ctx):
    d = ctx.desired
    try:
        res = ctx.task("pcie_acs", acs_task, nd.acs_params(d))
    except TaskFailed as e:
        return _failed(["acs"], e, "Clear ACS redirection on the GPU<->NIC path bridges")
    docs = [res["concerns"]["acs"]]
    cmd = None
    if d["pcie_acs_persist"] == "kernel_cmdline" and res.get("kernel_arg") is not None:
        cmd = {"present": [res["kernel_arg"]], "bootloader": d["pcie_acs_bootloader"]}
    elif d["pcie_acs_persist"] == "applier":
        cmd = {"absent": ["pci=disable_acs_redir"], "bootloader": d["pcie_acs_bootloader"]}
    if cmd is not None:
        try:
            c = ctx.task("kernel_cmdline", cmdline_task, cmd)
        except TaskFailed as e:
            own = (e.result.get("concerns") or {}).get("cmdline")
            docs.append(own if isinstance(own, dict) else model.error("acs", e.result.get("msg")))
        else:
            docs.append(c["concerns"]["cmdline"])
            ctx.reboot["acs"] = bool(c.get("reboot_required"))
    return {"acs": model.merge("acs", docs)}


def _no_rails(names, reason):
    return dict((n, model.status(model.NOT_CHECKED, reason)) for n in names)


def _dcb(ctx):
    rails, dcb_rails = nd.roce_qos_rails(ctx.desired, ctx.pairing())
    if not rails:
        return _no_rails(["dcb"], ctx.desired["__roce_qos_no_rails"])
    try:
        res = ctx.task("dcb_qos", dcb_task, nd.dcb_params(ctx.desired, dcb_rails))
    except TaskFailed as e:
        return _failed(["dcb"], e, "DCB on every rail (trust, DSCP to priority, PFC)")
    return dict(res["concerns"])


def _rdma_cm(ctx):
    rails, _dcb_rails = nd.roce_qos_rails(ctx.desired, ctx.pairing())
    if not rails:
        return _no_rails(["rdma_cm"], ctx.desired["__roce_qos_no_rails"])
    try:
        res = ctx.task("rdma_cm_tos", rdma_cm_task, nd.rdma_cm_params(ctx.desired, rails),
                       mutually_exclusive=rdma_cm_task.MUTUALLY_EXCLUSIVE, required_one_of=rdma_cm_task.REQUIRED_ONE_OF)
    except TaskFailed as e:
        return _failed(["rdma_cm"], e, "Default rdma_cm ToS on every RDMA device of the rails")
    return dict(res["concerns"])


def _rail_network(ctx):
    rails = nd.rails(ctx.desired["rail_network_rails"], ctx.pairing())
    if not rails:
        return _no_rails(["sysctl", "routing"], ctx.desired["__rail_network_no_rails"])
    try:
        res = ctx.task("rail_sysctl", rail_task, nd.rail_network_params(ctx.desired, rails))
    except TaskFailed as e:
        return _failed(["sysctl", "routing"], e, "ARP and rp_filter sysctls (and policy routing) for the rails")
    return dict(res["concerns"])


def _ecn(ctx):
    """roce_ecn on the DCB rails, when the role manages ECN/DCQCN (roce_qos_dcqcn) and there are rails."""
    d = ctx.desired
    rails, dcb_rails = nd.roce_qos_rails(d, ctx.pairing())
    if not rails:
        return _no_rails(["ecn"], d["__roce_qos_no_rails"])
    if not nd.truthy(d["roce_qos_dcqcn"]):
        return {"ecn": model.status(model.NOT_APPLICABLE, d["__roce_qos_ecn_off_reason"])}
    try:
        res = ctx.task("roce_ecn", ecn_task, nd.ecn_params(d, dcb_rails))
    except TaskFailed as e:
        return _failed(["ecn"], e, ECN_TASK)
    return dict(res["concerns"])


def _mtu(ctx):
    rails = nd.rails(ctx.desired["rail_network_rails"], ctx.pairing())
    if not rails:
        return _no_rails(["mtu"], ctx.desired["__rail_network_no_rails"])
    try:
        res = ctx.task("rail_mtu", mtu_task, nd.mtu_params(ctx.desired, rails))
    except TaskFailed as e:
        return _failed(["mtu"], e, "MTU of the rails, live and where their owner keeps it")
    return dict(res["concerns"])


def _nfs_mounts(ctx):
    try:
        res = ctx.task("nfs_mounts", nfs_mounts_task, nd.nfs_mounts_params(ctx.desired))
    except TaskFailed as e:
        return _failed(["nfs_mounts"], e, "Mount the storage volumes over RDMA")
    return dict(res["concerns"])


def _fabric_health(ctx):
    """fabric_health (read-only) for pcie_link and gpudirect_rdma. The module discovers the node itself (subsets
    pci, rails, gpu_driver); the play's discovery is the same code on the same node, so it is handed over when
    it succeeded and the body discovers only when it did not."""
    facts = None if ctx.discovery_failed else ctx.discover()
    try:
        res = ctx.task("fabric_health", health_task, nd.fabric_health_params(ctx.desired), facts=facts)
    except TaskFailed as e:
        return _failed(["pcie_link", "gpudirect_rdma"], e, HEALTH_TASK)
    return dict(res["concerns"])


def _nccl(ctx):
    rails = nd.rails(ctx.desired["nccl_rails"], ctx.pairing())
    if not rails:
        return _no_rails(["nccl"], ctx.desired["__nccl_no_rails"])
    try:
        res = ctx.task("nccl_config", nccl_task, nd.nccl_params(ctx.desired, rails))
    except TaskFailed as e:
        return _failed(["nccl"], e, "Write the NCCL defaults")
    return dict(res["concerns"])


def _persistence(ctx):
    try:
        res = ctx.task("fabric_persist", persist_task, nd.persistence_params(ctx.desired))
    except TaskFailed as e:
        return _failed(["persistence"], e, "Install the boot-time applier")
    return dict(res["concerns"])


def _proof(name, what):
    def evaluate_proof(ctx):
        return {name: model.status(model.NOT_CHECKED, "the one-call check makes no %s; run the %s role (verify.yml)"
                                   % (what, model.CONCERNS[model.NAMES.index(name)]["role"]))}
    return evaluate_proof


def _vendor_client(ctx):
    """The vendor client's proof needs a mount (not_checked here), but the kernel hold it set is read: its status
    when one is recorded (kernel_hold.hold_status)."""
    def run(argv):
        binary = ctx.runner.get_bin_path(argv[0])
        if binary is None:
            return 127, "", "%s: not found in PATH" % argv[0]
        return ctx.runner.run_command([binary] + list(argv[1:]), environ_update={"LC_ALL": "C", "LANG": "C"})
    hold = kernel_hold.hold_status(ctx.sysroot, run, os_profiles.detect(ctx.sysroot)[0])
    return {"vendor_client": hold} if hold else _proof("vendor_client", "vendor NFS client proof")(ctx)


def entry(evaluate_fn, keys):
    return {"evaluate": evaluate_fn, "keys": tuple(keys)}


# name -> evaluator and the desired keys it reads; concerns sharing an evaluator are evaluated by one module run
REGISTRY = {
    "cmdline": entry(_cmdline, nd.KEYS["cmdline"]),
    "acs": entry(_acs, nd.KEYS["acs"]),
    "dcb": entry(_dcb, nd.KEYS["dcb"]),
    "rdma_cm": entry(_rdma_cm, nd.KEYS["rdma_cm"]),
    "sysctl": entry(_rail_network, nd.KEYS["sysctl"]),
    "routing": entry(_rail_network, nd.KEYS["routing"]),
    "ecn": entry(_ecn, nd.KEYS["ecn"]),
    "mtu": entry(_mtu, nd.KEYS["mtu"]),
    "nccl": entry(_nccl, nd.KEYS["nccl"]),
    "persistence": entry(_persistence, nd.KEYS["persistence"]),
    "nfs_mounts": entry(_nfs_mounts, nd.KEYS["nfs_mounts"]),
    "pcie_link": entry(_fabric_health, nd.KEYS["pcie_link"]),
    "gpudirect_rdma": entry(_fabric_health, nd.KEYS["gpudirect_rdma"]),
    # the two proofs move data (a counted GDS transfer, an NFS mount): a read-only check cannot make them; the
    # vendor client's kernel hold is read
    "gds": entry(_proof("gds", "GPUDirect Storage transfer"), ()),
    "vendor_client": entry(_vendor_client, ()),
}


def missing_evaluators():
    """Concerns of the list without an entry in REGISTRY."""
    return [n for n in model.NAMES if n not in REGISTRY]


def desired_keys(names=None):
    """Every desired key the evaluation of ``names`` (default CORE) reads: the settings checked for contradictions,
    then each concern's, in registry order."""
    out = list(nd.CONFLICT_KEYS)
    for n in model.managed_names(names):
        for k in REGISTRY[n]["keys"]:
            if k not in out:
                out.append(k)
    return out


def _contradictions(desired):
    """The start of playbooks/tasks/concerns.yml: settings that contradict each other fail every core concern."""
    return desired_state.conflicts(desired_state.from_role_vars(nd.conflict_vars(desired)))


def evaluate(desired, sysroot="/", runner=None, concerns=None):
    """Every concern of ``concerns`` (default CORE) on this node, read-only.

    Returns ``{"schema", "concerns": {name: status doc}, "facts": the gpufabric facts, "warnings": discovery's
    warnings (gpufabric_facts' warnings_found), "module_warnings": the bodies' own warnings, "reboot_required":
    the boot loader has kernel arguments the running kernel lacks, "errors": play-level failures (discovery)}``:
    the node data the reports read (``concerns.assess``).
    """
    names = model.managed_names(concerns, "concerns")
    missing = missing_evaluators()
    if missing:
        raise model.ConcernError("no evaluator for concern(s) %s" % ", ".join(missing))
    if not isinstance(desired, dict):
        raise nd.DesiredError("desired must be a mapping of role variables, got %r" % type(desired).__name__)
    lacking = [k for k in desired_keys(names) if k not in desired]
    if lacking:
        raise nd.DesiredError("the desired state lacks %s" % ", ".join(lacking))
    if not isinstance(sysroot, Sysroot):
        sysroot = Sysroot(sysroot)
    ctx = Context(desired, sysroot, runner or LocalRunner())
    out = {"schema": SCHEMA, "concerns": {}, "reboot_required": False}
    problems = _contradictions(desired)
    if problems:
        reason = "not checked or changed: the desired settings contradict each other: %s" % " | ".join(problems)
        out["concerns"] = dict((n, model.status(model.ERROR, reason)) for n in names)
        out.update(facts={}, warnings=[], module_warnings=[], errors=[])
        return out
    ctx.discover()
    done = {}
    for n in names:
        if n in out["concerns"]:
            continue
        fn = REGISTRY[n]["evaluate"]
        if fn not in done:
            try:
                done[fn] = fn(ctx)
            except Exception as e:  # pylint: disable=broad-except  # a planner that raises fails its concern only
                done[fn] = {"__raised__": "%s: %s" % (type(e).__name__, e)}
        res = done[fn]
        if "__raised__" in res:
            out["concerns"][n] = model.error(n, "the check raised %s" % res["__raised__"])
        elif n in res:
            out["concerns"][n] = model.normalize(n, res[n])
        else:
            out["concerns"][n] = model.status(model.NOT_CHECKED, "its module gave no status")
    out.update(facts=ctx.facts, warnings=ctx.warnings_found, module_warnings=ctx.module_warnings,
               errors=ctx.errors, reboot_required=any(ctx.reboot.values()))
    return out
