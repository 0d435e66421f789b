# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpufabric-evidence``: what the evidence timer runs on the node, with no Ansible involved.

``gpufabric-evidence.timer`` (installed by ``fabric_persist`` with ``evidence: true``) starts
``gpufabric-evidence.service`` every ``evidence_interval`` seconds; it runs this code from the copy of the module_utils
below ``lib_dir`` (the same copy the boot-time applier runs). One run:

1. refuses to run (exit 3) when its script, that copy or the desired state could be changed by anyone but root
   (``guard.py``: root runs it);
2. reads the desired state the persistence role left in ``/etc/gpufabric/desired.json`` (``evidence.load_desired``)
   and evaluates every concern against it with ``evaluate(desired, sysroot, runner)`` - the one-call, read-only
   check (``node_check.evaluate``), the planners the concern modules use. A missing desired state makes every core
   concern ``not_checked``, an unusable one (or an evaluator that fails as a whole) ``error``, with the reason;
3. gathers the rest of the evidence (``evidence.py``: facts, DCB, ToS, nvidia-fs, PCIe links, RDMA counters, the
   last GDS proof) and renders it with ``prom.py``, the renderer ``fabric_metrics`` uses;
4. writes the textfile atomically (``evidence.write_textfile``) when it differs: ``gpufabric-evidence.prom`` in the OS
   profile's node_exporter textfile directory (``os_profiles.textfile_dir``) unless told otherwise, every series
   labelled ``writer="evidence_timer"``, with the check's time (``gpufabric_last_check_timestamp_seconds``) and the
   timer's interval (``--interval``, ``gpufabric_check_interval_seconds``) for the staleness alert.

Exit codes: 0 written or unchanged, 1 the file could not be written, 2 bad arguments, 3 refused.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import shutil
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence, guard
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host import runner
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

RC_OK = 0
RC_WRITE = 1
RC_ARGS = 2
RC_REFUSED = guard.RC_REFUSED


def default_evaluate(desired, sysroot, run):
    """The one-call check of ``node_check.py``: every core concern (and each concern whose record a playbook left on
    the node: ``node_check.recorded``), on the backend of ``run`` (a
    ``runner.CommandRunner``: the C locale, argv lists, binaries looked up on PATH). ``main`` gives it a
    ``node_check.SnapshotRunner``, so the timer's own DCB reads are the answers the evaluation already had."""
    return node_check.evaluate(desired, sysroot=sysroot, runner=getattr(run, "backend", None),
                               concerns=cm.CORE + node_check.recorded(sysroot))


def _every(status, reason, names=cm.CORE):
    return dict((n, cm.status(status, reason)) for n in names)


def node_status(sysroot, run, evaluate, desired_path=evidence.DESIRED_FILE):
    """(node dict for prom: {concerns, managed, reboot_required, gds_wanted}, facts or None, desired_state bool,
    [warnings])."""
    try:
        desired = evidence.load_desired(sysroot, desired_path)
    except evidence.EvidenceError as e:
        return {"concerns": _every(cm.ERROR, "the desired state is unusable: %s" % e)}, None, False, [str(e)]
    if desired is None:
        why = "no desired state on the node (%s is missing: install it with the persistence role, evidence: true)" \
            % desired_path
        return {"concerns": _every(cm.NOT_CHECKED, why)}, None, False, [why]
    try:
        result = evaluate(desired, sysroot, run)
    except Exception as e:  # the evaluator as a whole failed: every concern says so, the rest is still evidence
        why = "the one-call check failed: %s: %s" % (type(e).__name__, e)
        return {"concerns": _every(cm.ERROR, why)}, None, False, [why]
    docs = dict(result.get("concerns") or {})
    managed = list(cm.CORE) + sorted(n for n in docs if n not in cm.CORE and n in cm.NAMES)
    node = {"concerns": docs, "managed": managed, "reboot_required": bool(result.get("reboot_required")),
            "gds_wanted": bool(result.get("gds_wanted"))}
    warnings = [str(w) for w in result.get("warnings") or []] + [str(e) for e in result.get("errors") or []]
    return node, result.get("facts"), True, warnings


def gather(sysroot, run, evaluate=default_evaluate, which=shutil.which, clock=time.time,
           desired_path=evidence.DESIRED_FILE, interval=None):
    """(evidence dict for ``prom.families_from_evidence``, [warnings]); ``interval``: the timer's, in seconds."""
    now = clock()
    node, facts, desired_ok, warnings = node_status(sysroot, run, evaluate, desired_path)
    if not facts or "rails" not in facts:
        facts = topology.discover(sysroot)
    rails = evidence.default_rails(facts)
    dcb_state = evidence.read_dcb(sysroot, run, rails, which("dcb"))[0] if rails else {}
    for rail in sorted(dcb_state):
        if dcb_state[rail].get("error"):
            warnings.append("DCB state of rail %s could not be read: %s" % (rail, dcb_state[rail]["error"]))
    gds, gds_warning = evidence.read_gds_verdict(sysroot)
    if gds_warning:
        warnings.append(gds_warning)
    ports = evidence.rdma_port_counters(sysroot, facts)
    for p in ports:
        if p["unreadable"]:
            warnings.append("RDMA %s port %s: unreadable counters %s"
                            % (p["device"], p["port"], ", ".join(p["unreadable"])))
    ev = {"facts": facts, "dcb": dcb_state, "rdma_cm": evidence.read_tos(sysroot, facts),
          "nvfs": evidence.read_nvfs(sysroot, facts), "gds": gds, "node": node,
          "rdma_ports": ports, "now": now, "interval": interval, "writer": evidence.WRITER,
          "desired_state": desired_ok}
    return ev, warnings


def render(ev):
    """(text, families with samples, assessment)."""
    assessment = prom.assess(ev)
    families = [f for f in prom.families_from_evidence(ev, assessment) if f.samples]
    return prom.render(families), families, assessment


def main(argv=None, out=None, err=None, script=None, evaluate=default_evaluate, sysroot=None, run=None,
         clock=time.time):
    parser = argparse.ArgumentParser(
        prog="gpufabric-evidence",
        description="Write the gpufabric node_exporter textfile (facts, every concern's status against %s, PCIe "
                    "links, RDMA counters, the last GDS proof) with the gpufabric.node module code."
                    % evidence.DESIRED_FILE)
    parser.add_argument("--desired", default=evidence.DESIRED_FILE, metavar="FILE",
                        help="desired-state document (default %(default)s)")
    parser.add_argument("--textfile-dir", metavar="DIR",
                        help="node_exporter --collector.textfile.directory (default: the OS profile's, %s on Debian "
                             "and Ubuntu, %s on EL)" % (os_profiles.TEXTFILE_DIRS["debian"],
                                                        os_profiles.TEXTFILE_DIRS["el"]))
    parser.add_argument("--filename", default=evidence.DEFAULT_FILENAME, metavar="NAME",
                        help="file name, ending in .prom (default %(default)s)")
    parser.add_argument("--interval", type=int, metavar="SECONDS",
                        help="the timer's interval, exported as gpufabric_check_interval_seconds (the staleness "
                             "alert fires after three)")
    parser.add_argument("--stdout", action="store_true", help="print the metrics instead of writing the file")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    err = err or sys.stderr
    sysroot = sysroot or Sysroot()
    textfile_dir, why = (args.textfile_dir, None) if args.textfile_dir else os_profiles.textfile_dir(sysroot)
    try:
        inputs.safe_path(args.desired, "--desired")
        path = evidence.textfile_path(textfile_dir, args.filename)
        if args.interval is not None and args.interval <= 0:
            raise inputs.InputError("--interval must be a positive number of seconds, not %d" % args.interval)
    except inputs.InputError as e:
        err.write("error: %s\n" % e)
        return RC_ARGS

    def log(line):
        (err if line.startswith("error:") else out).write(line + "\n")

    if why:
        log("warning: %s" % why)
    # root runs this: refuse code or a desired state that anyone but root could have changed
    reasons = guard.check_applier(sysroot, guard.running_code(None, script),
                                  guard.STATE_PATHS + (args.desired,))
    if reasons:
        for r in reasons:
            log("error: refusing to run: %s" % r)
        return RC_REFUSED
    run = run or runner.CommandRunner(node_check.SnapshotRunner(runner.LocalBackend()))   # one run's snapshot
    ev, warnings = gather(sysroot, run, evaluate=evaluate, clock=clock, desired_path=args.desired,
                          interval=args.interval)
    for w in warnings:
        log("warning: %s" % w)
    text, families, assessment = render(ev)
    if args.stdout:
        out.write(text)
        return RC_OK
    try:
        written = evidence.write_textfile(sysroot, path, text)
    except (IOError, OSError) as e:
        log("error: cannot write %s: %s" % (path, e))
        return RC_WRITE
    for name in sorted(assessment["concerns"]):
        doc = assessment["concerns"][name]
        if doc["status"] not in (cm.OK, cm.NOT_APPLICABLE):
            log("concern %s: %s: %s" % (name, doc["status"], doc.get("reason")))
    counts = cm.counts(assessment["concerns"])
    log("gpufabric-evidence: %s %s (%d samples; node %s; %s)"
        % ("wrote" if written else "unchanged", path, sum(len(f.samples) for f in families),
           assessment["verdict"]["status"], ", ".join("%s %d" % (k, counts[k]) for k in cm.STATUSES if counts.get(k))))
    out.flush()
    return RC_OK


if __name__ == "__main__":
    raise SystemExit(main(script=__file__))
