# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one-call, read-only drift check of a node: every concern of the list in one execution.

``evaluate(desired)`` runs discovery once and then, in check mode, the body of every concern module the roles run,
with the options the roles derive from their variables. Both come from each concern's spec
(``concerns/<name>/spec.py``, listed in ``concerns/registry.py``): its ``evaluate(ctx)`` runs its module body
through ``Context.task`` with the options its spec derives. So each concern gets the status, items and reason its
role's check gives. Nothing is written: the bodies run in check mode, which writes nothing and takes no node lock.

``desired`` is one document of the roles' variables (their defaults overlaid with the inventory's, resolved once on
the controller by the ``fabric_check`` action plugin; ``node_desired.KEYS`` lists them per concern).

The bodies share one ``host.sysroot.SnapshotSysroot`` (each sysfs or configuration path they read is read once per
evaluation: discovery and several concerns walk the same rails and PCIe paths) and one ``SnapshotRunner``: a
read-only query (``dcb ... show``, ``ip ... show``) that two of them make with the same arguments runs once per
evaluation, and each ``show`` a ``dcb -j -b`` batch answered stands for the
single query ``dcb -j OBJ show dev DEV`` (discovery reads every rail's DCBX in one batch, the ``dcb`` concern its
objects in another; where iproute2 6.1 answers only a batch's first command, the rest are single queries). On the
host those reads go to the kernel over rtnetlink first (``concerns/dcb/dcbnl.py``), and ``dcb`` runs only for what it
did not answer.

``REGISTRY`` holds one entry per concern, built from the specs: the evaluator and the desired keys it reads.
Concerns evaluated by one module run (``sysctl`` and ``routing``: ``rail_sysctl``; ``pcie_link`` and
``gpudirect_rdma``: ``fabric_health``) share an evaluator, which runs once. This file names no concern; a concern
of ``concerns.CONCERNS`` without a spec fails a unit test.

A body that fails gives its concern(s) the module's own ``error`` status; one that raises gives ``error`` naming the
exception; the other concerns still report.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils import contradictions as desired_state
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.check import facts as facts_task
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import batch as dcb_batch
from ansible_collections.gpufabric.node.plugins.module_utils.host import runner as runner_mod
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import SnapshotSysroot, Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import LocalRunner, TaskFailed, TaskModule

# the task name of playbooks/tasks/concerns.yml whose failure the node's result reports
DISCOVERY_TASK = "Discover GPUs, rails, PCIe paths, IOMMU, driver, Fabric Manager, nvidia-fs"
SCHEMA = "gpufabric.check/v1"


# read-only queries whose answers one evaluation reuses: command name -> the verb that makes it a query
SNAPSHOT_QUERIES = {"dcb": "show", "ip": "show"}


class SnapshotRunner(object):
    """The runner of one evaluation: ``runner`` with a repeated read-only query (``dcb ... show``, ``ip ... show``,
    ``dcb -V``, a shell script registered as read-only with ``runner.read_only_script``: same argv, same environment)
    answered from its first run. Every body runs in check mode, so nothing
    those queries read changes during the evaluation; discovery and the ``dcb`` concern read the same DCBX state, two
    concerns the same link list. A ``dcb -j -b FILE`` batch of ``show`` lines runs every time, and what it answered
    is kept as the answers of the single queries, and a batch whose every line is answered already is answered from
    them (comma-separated, as dcb prints a batch). Anything else (a command with input or ``check_rc``, whose failure
    is the runner's own) runs every time."""

    def __init__(self, runner):
        self._runner = runner
        self._answers = {}

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self._runner.get_bin_path(name, required=required, opt_dirs=opt_dirs)

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else None
        verb = SNAPSHOT_QUERIES.get(os.path.basename(argv[0])) if argv else None
        env = tuple(sorted((environ_update or {}).items()))
        if verb is not None and not check_rc and not kw and _dcb_batch_file(argv):
            lines = _show_lines(argv[3])
            if lines:
                keys = [((argv[0], "-j", obj, "show", "dev", dev), env) for obj, dev in lines]
                if all(self._answers.get(k, (1,))[0] == 0 for k in keys):
                    # every line answered already (the timer's own DCB read after the evaluation's): the batch's
                    # answer as dcb prints it, the show objects comma-separated, without a process
                    return 0, ",".join(self._answers[k][1].strip() for k in keys), ""
            answer = self._runner.run_command(args, environ_update=environ_update)
            if lines:
                texts = dcb_batch.batch_texts(answer[0], answer[1], answer[2], len(lines))[0]
                for (obj, dev), text in zip(lines, texts):
                    self._answers.setdefault(((argv[0], "-j", obj, "show", "dev", dev), env), (0, text, ""))
            return answer
        query = verb is not None and (argv[1:] in (["-V"], ["--version"]) or
                                      (verb in argv[1:] and "-b" not in argv and "--batch" not in argv))
        query = query or (argv is not None and runner_mod.runs_read_only_script(argv))
        if not query or check_rc or kw:
            return self._runner.run_command(args, environ_update=environ_update, check_rc=check_rc, **kw)
        key = (tuple(argv), env)
        if key not in self._answers:
            self._answers[key] = self._runner.run_command(args, environ_update=environ_update)
        return self._answers[key]


def _dcb_batch_file(argv):
    """True for ``dcb -j -b FILE`` (the batch ``concerns/dcb/manage.run_batch`` runs), FILE a path."""
    return len(argv) == 4 and os.path.basename(argv[0]) == "dcb" and argv[1:3] == ["-j", "-b"] and argv[3] != "-"


def _show_lines(path):
    """[(object, netdev)] of a batch file whose every line is ``OBJ show dev NETDEV``; None for anything else."""
    try:
        with open(path) as f:
            text = f.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) != 4 or words[1:3] != ["show", "dev"] or "#" in line or "\\" in line or "'" in line or \
                '"' in line:
            return None
        out.append((words[0], words[3]))
    return out or None


class Context(object):
    """What one evaluation shares: the desired state, the node, the runner, discovery (once) and the results."""

    def __init__(self, desired, sysroot, runner):
        self.desired = desired
        self.sysroot = SnapshotSysroot(sysroot)   # read-only: each sysfs path is read once per evaluation
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
        return self.discover().get("architecture") or os.uname().machine   # what platform.machine() returns

    @staticmethod
    def evidence_desired(d):
        """The desired state the evidence timer evaluates (the persistence spec's ``evidence_desired`` option)."""
        return nd.evidence_desired(d)


def entry(evaluate_fn, keys):
    return {"evaluate": evaluate_fn, "keys": tuple(keys)}


# name -> evaluator and the desired keys it reads (concerns/registry.py); concerns sharing an evaluator are evaluated
# by one module run
REGISTRY = dict((s.NAME, entry(s.evaluate, nd.KEYS[s.NAME])) for s in registry.SPECS)


def missing_evaluators():
    """Concerns of the list without an entry in REGISTRY."""
    return [n for n in model.NAMES if n not in REGISTRY]


def recorded(sysroot):
    """The concerns whose status is a record a playbook left on the node (their spec's ``recorded``): the evidence
    timer reports them beside the core ones."""
    return tuple(s.NAME for s in registry.SPECS if getattr(s, "recorded", None) and s.recorded(sysroot))


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
