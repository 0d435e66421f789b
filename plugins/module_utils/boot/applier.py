# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time applier: re-apply the recorded runtime-only state with the modules' own code.

``/etc/gpufabric/state.json`` (``state.py``) holds what the modules applied. At boot
(``gpufabric-apply.service``) and whenever an RDMA device registers (udev ``add`` of
``SUBSYSTEM=="infiniband"``, ``gpufabric-apply@<ibdev>.service``) this code applies it again by
calling the same functions the modules call: ``dcb.apply_dcb``, ``rdma_cm.apply_tos``, ``ecn.apply_ecn``,
``acs.apply_acs``, ``routing.apply``, ``mtu.apply``. There is no second implementation of any of them.

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
import os
import shutil
import subprocess
import sys
import time

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn
from ansible_collections.gpufabric.node.plugins.module_utils.boot import guard, state
from ansible_collections.gpufabric.node.plugins.module_utils import inputs, results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

DEFAULT_WAIT_S = 30.0
POLL_S = 0.25
NVFS_PARAM = "/sys/module/nvidia_fs/parameters/rw_stats_enabled"
RC_OK = 0
RC_FAILED = 1
RC_STATE = 2


def command_runner(extra_env=None):
    """run(argv) -> (rc, out, err): argv[0] looked up in PATH, LC_ALL=C, never a shell."""
    env = dict(os.environ)
    env.update({"LC_ALL": "C", "LANG": "C"})
    env.update(extra_env or {})

    def run(argv):
        exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=env.get("PATH"))
        if not exe:
            return 127, "", "%s: command not found in PATH (%s)" % (argv[0], env.get("PATH", ""))
        try:
            p = subprocess.Popen([exe] + list(argv[1:]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, universal_newlines=True)
        except OSError as e:
            return 126, "", "%s: %s" % (exe, e)
        out, err = p.communicate()
        return p.returncode, out, err
    return run


class _Run(object):
    """One applier run: collects change lines, errors and skips; logs as it goes."""

    def __init__(self, sysroot, run, check_mode, log, wait_timeout, sleep, clock):
        self.sysroot = sysroot
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


def _netdev_present(sysroot, rail):
    return sysroot.exists("/sys/class/net/%s" % rail)


def _rails_by_ibdev(sysroot):
    """{ibdev: [netdev, ...]} and {netdev: [ibdev, ...]} from topology.list_rails."""
    by_dev = {}
    by_rail = {}
    for r in topology.list_rails(sysroot):
        if r.get("netdev"):
            by_dev.setdefault(r["ibdev"], []).append(r["netdev"])
            by_rail.setdefault(r["netdev"], []).append(r["ibdev"])
    return by_dev, by_rail


# --- concerns --------------------------------------------------------------------------------------

def _apply_rail_groups(ctx, concern, section, only_rails, settings_of, apply_one, errors):
    """Each recorded group of rails of ``concern`` (state.json keeps a rail whose apply failed, or that a run did not
    name, on its earlier settings) with its settings: ``settings_of(group)`` gives them, ``apply_one(rails,
    settings)`` applies them (a result dict with "changed" and "results"; ``errors`` are the exceptions it may
    raise). A rail that does not appear is an error of its own; the other rails are still applied."""
    groups = [([r for r in g["rails"] if only_rails is None or r in only_rails], settings_of(g))
              for g in state.groups_of(section)]
    groups = [(rails, settings) for rails, settings in groups if rails]
    if not groups:
        ctx.skip(concern, "no recorded rail belongs to this device")
        return
    everyone = [r for rails, _s in groups for r in rails]
    missing = ctx.wait(lambda: [r for r in everyone if not _netdev_present(ctx.sysroot, r)])
    for r in missing:
        ctx.error(concern, "rail %s did not appear (no /sys/class/net/%s)" % (r, r))
    done = {"changed": False, "rails": [], "results": []}
    for rails, settings in groups:
        present = [r for r in rails if r not in missing]
        if not present:
            continue
        try:
            res = apply_one(present, settings)
        except errors as e:
            ctx.error(concern, "rail(s) %s: %s" % (", ".join(present), e))
            continue
        done["changed"] = done["changed"] or res["changed"]
        done["rails"].extend(present)
        done["results"].extend(res["results"])
        ctx.log_results(concern, res["results"])
    if done["rails"]:
        ctx.concerns[concern] = done


def _apply_dcb(ctx, section, only_rails):
    """DCB of each recorded group of rails, with dcb.apply_dcb (the dcb_qos module's code)."""
    _apply_rail_groups(ctx, "dcb", section, only_rails, state.dcb_desired,
                       lambda rails, desired: dcb.apply_dcb(ctx.run, rails, desired, ctx.check_mode,
                                                            sysroot=ctx.sysroot),
                       (dcb.DcbValidationError, dcb.DcbError, OSError, IOError))


def _apply_mtu(ctx, section, only_rails):
    """Each recorded group of rails with its MTU (mtu.apply, the rail_mtu module's code); the rails nobody else
    keeps the MTU of. A driver reload recreates the netdev at its default MTU, so a device run sets its rails."""
    _apply_rail_groups(ctx, "mtu", section, only_rails, lambda g: g["mtu"],
                       lambda rails, value: mtu.apply(ctx.run, rails, value, ctx.check_mode),
                       (ValueError, mtu.MtuError))


def _apply_ecn(ctx, section, only_rails):
    """ECN/DCQCN of each recorded group of rails (lost at reboot and driver reload), with ecn.apply_ecn."""
    _apply_rail_groups(ctx, "ecn", section, only_rails,
                       lambda g: dict((k, v) for k, v in g.items() if k != "rails"),
                       lambda rails, desired: ecn.apply_ecn(ctx.sysroot, rails, desired, ctx.check_mode),
                       (ValueError, OSError, IOError))


def _tos_pairs(ctx, section, only_device, by_dev, by_rail):
    """(ibdev, port) pairs to configure, and messages naming the recorded objects still missing."""
    if "devices" in section:
        wanted = section["devices"] if only_device is None else [d for d in section["devices"] if d == only_device]
        gone = [d for d in wanted if not ctx.sysroot.isdir("%s/%s" % (rdma_cm.IB_CLASS, d))]
        return ([(d, None) for d in wanted if d not in gone],
                ["RDMA device %s did not appear (no %s/%s)" % (d, rdma_cm.IB_CLASS, d) for d in gone])
    rails = section["rails"]
    if only_device is not None:
        rails = [r for r in rails if r in by_dev.get(only_device, [])]
    present = [r for r in rails if r in by_rail]
    missing = ["rail %s has no registered RDMA device (none of %s/*/ports/* names it)" % (r, rdma_cm.IB_CLASS)
               for r in rails if r not in by_rail]
    pairs = []
    if present:
        for _rail, ibdev, port in rdma_cm.rail_devices(ctx.sysroot, present):
            if only_device is None or ibdev == only_device:
                pairs.append((ibdev, port))
    return pairs, missing


def _apply_tos(ctx, section, only_device):
    """Each recorded group (rails or devices with their ToS; a failed one may keep an earlier ToS)."""
    done = {"changed": False, "ports": [], "results": []}
    found = [_apply_tos_group(ctx, group, only_device, done) for group in state.groups_of(section)]
    if only_device is not None and not any(found) and not ctx.errors:
        ctx.skip("rdma_cm", "device %s is not in the recorded ToS set" % only_device)
    if done["ports"]:
        ctx.concerns["rdma_cm"] = done


def _apply_tos_group(ctx, section, only_device, done):
    holder = {"pairs": []}

    def missing_now():
        try:
            holder["pairs"], missing = _tos_pairs(ctx, section, only_device, *_rails_by_ibdev(ctx.sysroot))
        except (ValueError, rdma_cm.RdmaCmError) as e:
            holder["pairs"], missing = [], [str(e)]
        return missing

    for m in ctx.wait(missing_now):
        ctx.error("rdma_cm", m)
    pairs = holder["pairs"]
    if not pairs:
        return False
    try:
        res = rdma_cm.apply_tos(ctx.sysroot, pairs, section["tos"], ctx.check_mode, run=ctx.run)
    except (ValueError, rdma_cm.RdmaCmError, OSError, IOError) as e:
        ctx.error("rdma_cm", "default_roce_tos: %s" % e)
        return True
    if res["configfs"] in ("loaded", "would load"):
        ctx.change("rdma_cm", "configfs/rdma_cm %s" % res["configfs"])
    done["changed"] = done["changed"] or res["changed"]
    done["ports"].extend("%s/%d" % (p["device"], p["port"]) for p in res["ports"])
    done["results"].extend(res["results"])
    ctx.log_results("rdma_cm", res["results"])
    return True


def _apply_acs(ctx, section, done=None):
    try:
        res = acs.apply_acs(ctx.sysroot, section["bridges"], section["clear"], ctx.check_mode)
    except (ValueError, OSError, IOError) as e:
        ctx.error("acs", str(e))
        return
    ctx.log_results("acs", res["results"])
    done = done if done is not None else {"changed": False, "bridges": [], "results": []}
    done["changed"] = done["changed"] or res["changed"]
    done["bridges"].extend(b.get("bdf") for b in res["bridges"])
    done["results"].extend(res["results"])
    ctx.concerns["acs"] = done


def _acs_fallback(ctx):
    """The pcie_acs module's own record (acs.json) when state.json has no acs section: each group of bridges with
    the bits recorded for it (a bridge whose clear failed keeps its earlier record)."""
    try:
        doc = acs.read_state(ctx.sysroot)
    except acs.AcsError as e:
        ctx.error("acs", str(e))
        return
    done = {"changed": False, "bridges": [], "results": []}
    for bridges, clear in acs.state_groups(doc or {}):
        _apply_acs(ctx, {"bridges": bridges, "clear": clear}, done)


def _apply_nvidia_fs(ctx, section):
    want = section["rw_stats_enabled"]
    raw = ctx.sysroot.read(NVFS_PARAM)
    if raw is None:
        ctx.skip("nvidia_fs", "%s does not exist (nvidia_fs not loaded): nothing to set" % NVFS_PARAM)
        return
    try:
        cur = int(raw)
    except ValueError:
        ctx.error("nvidia_fs", "unexpected content %r in %s" % (raw, NVFS_PARAM))
        return
    changed = cur != want
    if changed and not ctx.check_mode:
        try:
            ctx.sysroot.write_attr(NVFS_PARAM, "%d\n" % want)
        except (OSError, IOError) as e:
            ctx.error("nvidia_fs", "cannot write %s: %s" % (NVFS_PARAM, e))
            return
        after = ctx.sysroot.read(NVFS_PARAM)
        if after is None or after.strip() != str(want):
            ctx.error("nvidia_fs", "wrote %d to %s but it reads back %r" % (want, NVFS_PARAM, after))
            return
    ctx.concerns["nvidia_fs"] = {"changed": changed}
    if changed:
        ctx.change("nvidia_fs", "rw_stats_enabled %d -> %d" % (cur, want))


def _default_iproute():
    try:
        from pyroute2 import IPRoute
    except ImportError:
        raise routing.RoutingError("pyroute2 is not installed for %s: per-rail routing cannot be applied "
                                   "(install python3-pyroute2)" % sys.executable)
    return IPRoute()


def _apply_routing(ctx, section, ipr_factory):
    path = section["state_file"]
    try:
        st = routing.load_state(ctx.sysroot, path)
    except routing.RoutingError as e:
        ctx.error("routing", str(e))
        return
    if st is None:
        ctx.error("routing", "routing is recorded but %s does not exist: rerun the rail network role" % path)
        return
    try:
        tables = routing.desired_from_state(st)
        ipr = ipr_factory()
    except (routing.RoutingError, ValueError, KeyError) as e:
        ctx.error("routing", str(e))
        return
    try:
        def missing_now():
            try:
                have = dict((r, (a, p)) for r, a, p in routing.rail_ipv4(ipr, [t["rail"] for t in tables]))
            except routing.RoutingError as e:
                return [str(e)]
            return ["rail %s has %s/%d, recorded %s/%d" % (t["rail"], have[t["rail"]][0], have[t["rail"]][1],
                                                           t["address"], t["prefixlen"])
                    for t in tables if have[t["rail"]] != (t["address"], t["prefixlen"])]

        missing = ctx.wait(missing_now)
        if missing:
            for m in missing:
                ctx.error("routing", m)
            return
        res = routing.apply(ipr, tables, st["rule_priority"], ctx.check_mode)
    except Exception as e:  # netlink errors (pyroute2 NetlinkError and friends) are reported, not raised
        ctx.error("routing", "%s: %s" % (type(e).__name__, e))
        return
    finally:
        close = getattr(ipr, "close", None)
        if close:
            close()
    ctx.concerns["routing"] = {"changed": res["changed"]}
    ctx.drift("routing", res["drift"])


# --- entry points -------------------------------------------------------------------------------------

def run_applier(sysroot, run, only_device=None, check_mode=False, log=None, wait_timeout=DEFAULT_WAIT_S,
                sleep=None, clock=None, ipr_factory=None, state_path=state.STATE_FILE, lock_timeout=None):
    """Apply the recorded state. Returns (rc, summary).

    ``lock_timeout``: seconds to wait for the node lock (``nodelock.py``), None for its default.
    summary: {"changed", "check_mode", "device", "changes": [lines], "errors": [lines],
    "skipped": [lines], "concerns": {concern: {...}}}.
    """
    log = log or (lambda line: None)
    ctx = _Run(sysroot, run, check_mode, log, wait_timeout, sleep or time.sleep, clock or time.monotonic)
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
        return done(_apply_recorded(ctx, sysroot, only_device, state_path, ipr_factory))
    finally:
        lock.release()


def _apply_recorded(ctx, sysroot, only_device, state_path, ipr_factory):
    """The applier's work under the node lock; the return code."""
    try:
        desired = state.load(sysroot, state_path)
    except state.StateError as e:
        ctx.error("state", str(e))
        return RC_STATE
    recorded = [c for c in state.CONCERNS if c in desired]
    if not recorded and not sysroot.exists(acs.STATE_FILE) and not sysroot.exists(routing.STATE_FILE):
        ctx.skip("state", "nothing recorded in %s" % state_path)
        return RC_OK
    if only_device is not None:
        if not sysroot.isdir("%s/%s" % (rdma_cm.IB_CLASS, only_device)):
            ctx.error("device", "RDMA device %s does not exist (no %s/%s): removed again?"
                      % (only_device, rdma_cm.IB_CLASS, only_device))
            return RC_FAILED
        by_dev, _by_rail = _rails_by_ibdev(sysroot)
        dev_rails = by_dev.get(only_device, [])
        if "mtu" in desired:
            _apply_mtu(ctx, desired["mtu"], dev_rails)
        if "dcb" in desired:
            _apply_dcb(ctx, desired["dcb"], dev_rails)
        if "rdma_cm" in desired:
            _apply_tos(ctx, desired["rdma_cm"], only_device)
        if "ecn" in desired:
            _apply_ecn(ctx, desired["ecn"], dev_rails)
    else:
        if "acs" in desired:
            _apply_acs(ctx, desired["acs"])
        else:
            _acs_fallback(ctx)
        if "mtu" in desired:
            _apply_mtu(ctx, desired["mtu"], None)
        if "dcb" in desired:
            _apply_dcb(ctx, desired["dcb"], None)
        if "rdma_cm" in desired:
            _apply_tos(ctx, desired["rdma_cm"], None)
        if "ecn" in desired:
            _apply_ecn(ctx, desired["ecn"], None)
        if "nvidia_fs" in desired:
            _apply_nvidia_fs(ctx, desired["nvidia_fs"])
        if "routing" in desired:
            _apply_routing(ctx, desired["routing"], ipr_factory or _default_iproute)
        elif sysroot.exists(routing.STATE_FILE):
            _apply_routing(ctx, {"state_file": routing.STATE_FILE}, ipr_factory or _default_iproute)
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
