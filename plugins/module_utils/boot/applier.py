# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time applier: re-apply the recorded runtime-only state with the modules' own code.

``/etc/gpufabric/state.json`` (``concerns/state.py``) holds what the modules applied. At boot
(``gpufabric-apply.service``) and whenever an RDMA device registers (udev ``add`` of
``SUBSYSTEM=="infiniband"``, ``gpufabric-apply@<ibdev>.service``) this code applies it again by
calling the same functions the modules call: ``dcb.apply_dcb``, ``rdma_cm.apply_tos``, ``ecn.apply_ecn``,
``acs.apply_acs``, ``routing.apply``, ``mtu.apply``. There is no second implementation of any of them. Each
section of the file says how it is applied, in its concern's package (``concerns/<name>/boot.py``, listed in
``concerns/sections.py``); this file iterates that list and names no concern.

* Full run (``only_device`` None): the MTU of the recorded rails (those no network manager keeps it for), DCB on
  every recorded rail, ToS on every recorded device,
  ACS on the recorded bridges, nvidia-fs ``rw_stats_enabled`` when its module parameter exists
  (the module may load later: that is not an error), per-rail routing from ``routing.json``.
  Until the modules record into state.json, the pcie_acs module's ``/etc/gpufabric/acs.json`` and the
  routing code's ``/etc/gpufabric/routing.json`` are applied when state.json has no such section.
* Device run (``only_device`` = an ibdev from the udev event): MTU and DCB on that device's rails and
  ToS on that device only; nothing else is touched. A registration resets ToS (and a driver reload
  recreates the netdev, resetting DCB); PCIe bridges, nvidia-fs and routing tables are not reset by it.

Devices that have not appeared yet are waited for, up to ``wait_timeout`` seconds in total;
whatever is still missing then is reported as an error, the rest is applied. Every rail, device
port and bridge is applied on its own: one that fails gets an error line naming it and the others
are applied all the same. Each recorded group of objects gets its own settings (after a partial
apply of a module, state.json keeps a failed object on what it had). One log line per object and
key changed, as read back (``log``), journald-friendly; the return code is 0 when everything
recorded was applied (or already in place), 1 when something could not be applied, 2 when the
state file is unusable.
The node lock (``nodelock.py``, ``/run/gpufabric/lock``) serialises the boot run, the per-device runs and the
modules that write node state; a run that cannot get it within ``--lock-wait`` seconds fails naming the holder
(return code 1). Check mode takes no lock.

CLI: ``python -m ansible_collections.gpufabric.node.plugins.module_utils.boot.applier
[--device IBDEV] [--check] [--wait SECONDS] [--lock-wait SECONDS] [--json]``; the ``persistence`` role installs it as
``/usr/local/sbin/gpufabric-apply``. Plain Python: no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils import inputs, results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import guard
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record, sections, state
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm.manage import IB_CLASS
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock, runner
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DEFAULT_WAIT_S = 30.0
POLL_S = 0.25
RC_OK = 0
RC_FAILED = 1
RC_STATE = 2


def command_runner(extra_env=None):
    """run(argv) -> (rc, out, err): the one command runner (``host/runner.py``) on this machine: argv[0] looked up
    in PATH, the C locale, never a shell."""
    return runner.local(environ_update=extra_env)


class _Run(object):
    """One applier run: collects change lines, errors and skips; logs as it goes. It is the ``ctx`` each section's
    apply function gets (concerns/<name>/boot.py)."""

    def __init__(self, sysroot, run, check_mode, log, wait_timeout, sleep, clock, ipr_factory=None):
        self.sysroot = sysroot
        self.ipr_factory = ipr_factory
        self.run = run
        self.check_mode = check_mode
        self.log = log
        self.sleep = sleep
        self.clock = clock
        self.deadline = clock() + max(0.0, wait_timeout)
        self.changes = []
        self.errors = []
        self.skipped = []
        self.concerns = {}

    def change(self, concern, text):
        line = "%s%s: %s" % ("would change " if self.check_mode else "", concern, text)
        self.changes.append(line)
        self.log(line)

    def drift(self, concern, entries):
        for d in entries:
            text = "%s %s %s -> %s" % (d.get("object"), d.get("key"), _fmt(d.get("current")), _fmt(d.get("desired")))
            self.change(concern, text)

    def log_results(self, concern, entries):
        """One line per object and key that changed (check mode: would change), as read back, failed objects
        included (they may have changed in part); one error line per failed object."""
        for line in results.change_lines(entries):
            self.change(concern, line)
        for r in results.failed(entries):
            self.error(concern, r["error"] if r["object"] in r["error"] else "%s: %s" % (r["object"], r["error"]))

    def error(self, concern, text):
        line = "error: %s: %s" % (concern, text)
        self.errors.append(line)
        self.log(line)

    def skip(self, concern, text):
        line = "skipped: %s: %s" % (concern, text)
        self.skipped.append(line)
        self.log(line)

    def wait(self, missing_fn):
        """Poll ``missing_fn() -> list`` until it is empty or the shared deadline passes; the last list."""
        while True:
            missing = missing_fn()
            if not missing or self.clock() >= self.deadline:
                return missing
            self.sleep(POLL_S)


def _fmt(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return "unset" if value is None else str(value)


# --- concerns --------------------------------------------------------------------------------------

# --- entry points -------------------------------------------------------------------------------------

def run_applier(sysroot, run, only_device=None, check_mode=False, log=None, wait_timeout=DEFAULT_WAIT_S,
                sleep=None, clock=None, ipr_factory=None, state_path=state.STATE_FILE, lock_timeout=None):
    """Apply the recorded state. Returns (rc, summary).

    ``lock_timeout``: seconds to wait for the node lock (``nodelock.py``), None for its default.
    summary: {"changed", "check_mode", "device", "changes": [lines], "errors": [lines],
    "skipped": [lines], "concerns": {concern: {...}}}.
    """
    log = log or (lambda line: None)
    ctx = _Run(sysroot, run, check_mode, log, wait_timeout, sleep or time.sleep, clock or time.monotonic,
               ipr_factory)
    summary = {"changed": False, "check_mode": check_mode, "device": only_device}

    def done(rc):
        summary.update(changed=bool(ctx.changes), changes=ctx.changes, errors=ctx.errors, skipped=ctx.skipped,
                       concerns=ctx.concerns)
        return rc, summary

    # one writer of node state at a time: the boot run, the per-device runs and the modules (nodelock.py), from the
    # read of state.json through the last read-back; check mode reads without it
    owner = "gpufabric-apply" + (" --device %s" % only_device if only_device is not None else "")
    lock = nodelock.NodeLock(sysroot, owner, timeout=lock_timeout, enabled=not check_mode)
    try:
        lock.acquire()
    except nodelock.NodeLockError as e:
        ctx.error("lock", str(e))
        return done(RC_FAILED)
    except (OSError, IOError) as e:
        ctx.error("lock", "cannot take the node lock %s: %s" % (nodelock.LOCK_FILE, e))
        return done(RC_FAILED)
    try:
        return done(_apply_recorded(ctx, sysroot, only_device, state_path))
    finally:
        lock.release()


def _apply_recorded(ctx, sysroot, only_device, state_path):
    """The applier's work under the node lock; the return code. Every section of the record (concerns/sections.py)
    in its order: at boot all of them (a section absent from state.json falls back to the file its module kept
    before, where it has one, by the section's ``fallback``), for a device the ones a re-registration loses."""
    try:
        desired = state.load(sysroot, state_path)
    except state.StateError as e:
        ctx.error("state", str(e))
        return RC_STATE
    recorded = [c for c in state.CONCERNS if c in desired]
    legacy = [s.legacy_file for s in sections.SECTIONS if s.legacy_file and sysroot.exists(s.legacy_file)]
    if not recorded and not legacy:
        ctx.skip("state", "nothing recorded in %s" % state_path)
        return RC_OK
    device = None
    if only_device is not None:
        if not sysroot.isdir("%s/%s" % (IB_CLASS, only_device)):
            ctx.error("device", "RDMA device %s does not exist (no %s/%s): removed again?"
                      % (only_device, IB_CLASS, only_device))
            return RC_FAILED
        by_dev, _by_rail = boot_record.rails_by_ibdev(sysroot)
        device = boot_record.Device(only_device, by_dev.get(only_device, []))
    for section in sections.in_apply_order(device_run=device is not None):
        if section.key in desired:
            section.apply(ctx, desired[section.key], device)
        elif device is None and section.fallback is not None:
            section.fallback(ctx)   # the section's own rule for the file its module kept before
    return RC_FAILED if ctx.errors else RC_OK


def main(argv=None, out=None, err=None, script=None):
    parser = argparse.ArgumentParser(
        prog="gpufabric-apply",
        description="Re-apply the runtime-only fabric settings recorded in %s (rail MTU, DCB, rdma_cm ToS, ACS, "
                    "nvidia-fs rw_stats_enabled, per-rail routing) with the gpufabric.node module code."
                    % state.STATE_FILE)
    parser.add_argument("--device", metavar="IBDEV",
                        help="only the RDMA device IBDEV (udev event): its rails' MTU and DCB and its ToS")
    parser.add_argument("--check", action="store_true", help="report what would change; change nothing")
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="SECONDS",
                        help="wait at most this long for devices that have not appeared yet (default %(default)s)")
    parser.add_argument("--lock-wait", type=float, default=None, metavar="SECONDS",
                        help="wait at most this long for the node lock %s held by a module or another run (default "
                             "$%s or %d)" % (nodelock.LOCK_FILE, nodelock.TIMEOUT_ENV, nodelock.DEFAULT_TIMEOUT_S))
    parser.add_argument("--json", action="store_true", help="print the summary as JSON at the end")
    args = parser.parse_args(argv)
    if args.lock_wait is not None and not 0 <= args.lock_wait <= nodelock.MAX_TIMEOUT_S:  # also false for NaN
        parser.error("--lock-wait must be 0..%d seconds (got %s)" % (nodelock.MAX_TIMEOUT_S, args.lock_wait))
    out = out or sys.stdout
    err = err or sys.stderr
    if args.device is not None:
        try:
            inputs.instance_name(args.device)
        except inputs.InputError as e:
            err.write("error: --device: %s\n" % e)
            return 2

    def log(line):
        stream = err if line.startswith("error:") else out
        stream.write(line + "\n")
        stream.flush()

    # root runs this: refuse code or state that anyone but root could have changed (guard.py)
    refused = guard.refuse(Sysroot(), script, log)
    if refused is not None:
        return refused
    rc, summary = run_applier(Sysroot(), command_runner(), only_device=args.device, check_mode=args.check,
                              log=log, wait_timeout=args.wait, lock_timeout=args.lock_wait)
    scope = "device %s" % args.device if args.device else "all recorded state"
    out.write("gpufabric-apply (%s%s): %d change(s), %d error(s)\n"
              % (scope, ", check mode" if args.check else "", len(summary["changes"]), len(summary["errors"])))
    if args.json:
        out.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    out.flush()
    return rc


if __name__ == "__main__":
    raise SystemExit(main(script=__file__))
