# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``systemctl`` of the simulated node: just enough systemd for the roles (unit files: units.py; udevadm: udev.py).

They run inside the node (the login's PATH puts them first) and act on units below
``<root>/etc/systemd/system`` (also ``run/``, ``usr/lib/``, ``lib/`` systemd dirs) and rules below
``<root>/etc/udev/rules.d`` (udev.py). Mutating actions are journaled, one line each, in
``<root>/var/lib/gpufabric-sim/actions.log``; runtime unit state (active/failed, loaded unit hashes)
lives in ``<root>/run/gpufabric-sim/systemd.json`` and is cleared by a simulated reboot like /run.
Command output of started units goes to ``<root>/var/log/gpufabric-sim/<unit>.log``.

systemctl verbs: daemon-reload, enable, disable (both with --now; enable also --runtime), mask, unmask (both
with --runtime), is-enabled, is-active, is-failed, start, stop, restart, try-restart, reload-or-restart, show
(-p/--property, --value), status, cat.
Unit files are looked up as systemd does: the first entry of the unit's name in ``UNIT_DIRS`` order wins (``/etc``
before ``/run``, so a runtime mask does not hide a unit file in ``/etc``); an entry that is a symlink to
``/dev/null`` or an empty file masks the unit. ``mask`` refuses to replace a unit file of the same name in the
configuration directory ("already exists"), as systemctl does; ``unmask`` removes the mask and the enablement
symlinks that point at it. ``is-enabled`` prints what systemd prints (enabled, enabled-runtime, static, disabled,
masked, masked-runtime, not-found) with its exit codes (0 for enabled, enabled-runtime and static; 1 for
disabled and masked; 4 for not-found).
Template units: ``a@b.service`` without a file of its own is an instance of ``a@.service`` (its
drop-ins, then those of ``a@b.service.d``); specifiers (``%i``, ``%I``, ``%n``, ``%N``, ``%p``,
``%P``, ``%m``, ``%H``, ``%t``, ``%%``) are resolved in ``Exec*=``, ``Environment*=`` and
``Description=`` of every unit, as systemd does; an unknown specifier fails the start.
Timer units (``*.timer``) are active once started and inactive once stopped; time passes on the node only when
a test elapses it (``systemctl gpufabric-sim-elapse SECONDS``, a verb of the simulator alone, or
``timers.elapse``): every started timer's unit is then started each time it falls due (timers.py), and ``show``
gives NextElapseUSecRealtime / LastTriggerUSec; ``list-timers`` lists them.
Mount units: ``start`` mounts an NFS unit the storage_mounts role wrote (a line in ``proc/self/mountinfo`` as the
kernel shows it, mounts.py) and ``stop`` unmounts it; their state follows mountinfo, as systemd's does. Other mount
units fail to start (no kernel behind the tree can mount them).
``--no-block`` is accepted; the job still runs to its end before ``systemctl`` returns, so a
caller (udev RUN, reregister) sees its effect without polling.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import signal
import subprocess
import sys

from gpufabric_sim import bootsim, mounts, timers
from gpufabric_sim.units import (
    UNIT_DIRS, sysroot, journal, load_state, save_state, unit_name,
    is_mask, mask_of, find_unit, read_unit_sections, _file_hash, CONFIG_DIR,
    RUNTIME_DIR, wants_links, unit_file_state)


class Systemctl(object):
    def __init__(self, root, out=None, err=None, runner=None):
        self.root = root
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.runner = runner

    # -- helpers
    def _unit_state(self, state, unit):
        u = state["units"].get(unit, {})
        st = u.get("state", "inactive")
        if unit.endswith(".mount"):
            path = find_unit(self.root, unit)
            sec = bootsim.read_unit(path) if path else {}
            where = dict(sec.get("Mount", [])).get("Where") or mounts.unit_where(unit)
            return "active" if mounts.mounted(self.root, where) else ("failed" if st == "failed" else "inactive")
        pid = u.get("pid")
        if st == "active" and pid:
            try:
                os.kill(pid, 0)
            except OSError:
                st = "inactive"
        return st

    def _sections(self, unit):
        """(unit file path, sections) for queries and enable: a specifier that does not resolve
        leaves the raw value there (only a start fails on it, like systemd's job)."""
        path = find_unit(self.root, unit)
        if not path:
            return None, None
        try:
            return path, read_unit_sections(self.root, unit, path)
        except ValueError:
            return path, bootsim.read_unit(path)

    def _ensure_loaded(self, state, unit, path):
        h = _file_hash(path)
        key = os.path.basename(path)
        old = state["loaded"].get(key)
        if old is None:
            state["loaded"][key] = h
        elif old != h:
            self.err.write("Warning: The unit file, source configuration file or drop-ins of %s changed on "
                           "disk. Run 'systemctl daemon-reload' to reload units.\n" % unit)

    def _log(self, unit):
        d = os.path.join(self.root, "var", "log", "gpufabric-sim")
        os.makedirs(d, exist_ok=True)
        return open(os.path.join(d, unit + ".log"), "ab")

    # -- verbs
    def daemon_reload(self, _units):
        state = load_state(self.root)
        loaded = {}
        for d in UNIT_DIRS:
            for p in sorted(glob.glob(os.path.join(self.root, d, "*.service"))):
                loaded.setdefault(os.path.basename(p), _file_hash(p))
        state["loaded"] = loaded
        save_state(self.root, state)
        journal(self.root, "systemctl daemon-reload")
        return 0

    def enable(self, units, now=False, runtime=False):
        rc = 0
        for unit in units:
            if mask_of(self.root, unit):
                self.err.write("Failed to enable unit: Unit file %s is masked.\n" % mask_of(self.root, unit))
                rc = 1
                continue
            path, sec = self._sections(unit)
            if not path:
                self.err.write("Failed to enable unit: Unit file %s does not exist.\n" % unit)
                rc = 1
                continue
            targets = [("%s.wants" % t) for v in bootsim.unit_values(sec, "Install", "WantedBy") for t in v.split()]
            targets += [("%s.requires" % t) for v in bootsim.unit_values(sec, "Install", "RequiredBy")
                        for t in v.split()]
            if not targets:
                self.err.write("The unit files have no installation config (WantedBy=, RequiredBy=, Also=,\n"
                               "Alias= settings in the [Install] section, and DefaultInstance= for template\n"
                               "units). This means they are not meant to be enabled or disabled using systemctl.\n")
                continue
            target_path = "/" + os.path.relpath(path, self.root)
            for t in targets:
                d = os.path.join(self.root, RUNTIME_DIR if runtime else CONFIG_DIR, t)
                link = os.path.join(d, unit)
                if os.path.islink(link) and os.readlink(link) == target_path:
                    continue
                os.makedirs(d, exist_ok=True)
                if os.path.lexists(link):
                    os.unlink(link)
                os.symlink(target_path, link)
                self.err.write("Created symlink /%s \u2192 %s.\n" % (os.path.relpath(link, self.root), target_path))
                journal(self.root, "systemctl enable %s%s (%s)" % ("--runtime " if runtime else "", unit, t))
            if now:
                rc = max(rc, self.start([unit]))
        return rc

    def disable(self, units, now=False):
        rc = 0
        for unit in units:
            links = wants_links(self.root, unit) + wants_links(self.root, unit, RUNTIME_DIR)
            if not find_unit(self.root, unit) and not mask_of(self.root, unit) and not links:
                self.err.write("Failed to disable unit: Unit file %s does not exist.\n" % unit)
                rc = 1
                continue
            for link in links:
                os.unlink(os.path.join(self.root, link.lstrip("/")))
                self.err.write('Removed "%s".\n' % link)
                journal(self.root, "systemctl disable %s (%s)" % (unit, os.path.basename(os.path.dirname(link))))
            if now:
                rc = max(rc, self.stop([unit]))
        return rc

    def is_enabled(self, units):
        """systemd >= 249: "not-found" on stdout and exit code 4 when no unit has a file."""
        enabled = False
        found = False
        for unit in units:
            _path, sec = self._sections(unit)
            st = unit_file_state(self.root, unit, sec)
            self.out.write(st + "\n")
            found = found or st != "not-found"
            enabled = enabled or st in ("enabled", "enabled-runtime", "static")
        return 0 if enabled else (1 if found else 4)

    def mask(self, units, runtime=False, now=False):
        rc = 0
        config = RUNTIME_DIR if runtime else CONFIG_DIR
        for unit in units:
            path = os.path.join(self.root, config, unit)
            host = "/" + os.path.relpath(path, self.root)
            if os.path.islink(path) and os.readlink(path) == "/dev/null":
                continue
            if os.path.lexists(path):
                if os.path.islink(path):
                    self.err.write("Failed to mask unit: File %s already exists and is a symlink to %s.\n"
                                   % (host, os.readlink(path)))
                else:
                    self.err.write("Failed to mask unit: File %s already exists.\n" % host)
                rc = 1
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink("/dev/null", path)
            self.err.write("Created symlink %s \u2192 /dev/null.\n" % host)
            journal(self.root, "systemctl mask %s%s" % ("--runtime " if runtime else "", unit))
            if now:
                self.stop([unit])
        return rc

    def unmask(self, units, runtime=False):
        config = RUNTIME_DIR if runtime else CONFIG_DIR
        for unit in units:
            path = os.path.join(self.root, config, unit)
            if not is_mask(path):
                continue
            host = "/" + os.path.relpath(path, self.root)
            os.unlink(path)
            self.err.write('Removed "%s".\n' % host)
            # like systemd, also the enablement symlinks that point at the removed mask
            for link in wants_links(self.root, unit) + wants_links(self.root, unit, RUNTIME_DIR):
                real = os.path.join(self.root, link.lstrip("/"))
                if os.readlink(real) == host:
                    os.unlink(real)
                    self.err.write('Removed "%s".\n' % link)
            journal(self.root, "systemctl unmask %s%s" % ("--runtime " if runtime else "", unit))
        return 0

    def is_active(self, units):
        state = load_state(self.root)
        rc = 3
        for unit in units:
            st = self._unit_state(state, unit)
            self.out.write(st + "\n")
            if st == "active":
                rc = 0
        return rc

    def is_failed(self, units):
        state = load_state(self.root)
        rc = 1
        for unit in units:
            st = self._unit_state(state, unit)
            self.out.write(st + "\n")
            if st == "failed":
                rc = 0
        return rc

    def _mount(self, state, unit, path):
        """Mount a mount unit (mounts.py); False (and the unit failed) when it cannot be mounted."""
        journal(self.root, "systemctl start %s" % unit)
        try:
            mounts.mount(self.root, unit, path, read_unit_sections(self.root, unit, path))
        except (mounts.MountFailed, ValueError, OSError) as e:
            with self._log(unit) as log:
                log.write(("%s\n" % e).encode())
            self.err.write("Job for %s failed: %s\nSee \"/var/log/gpufabric-sim/%s.log\" for details.\n"
                           % (unit, e, unit))
            state["units"][unit] = {"state": "failed", "result": "exit-code", "status": 32}
            return False
        state["units"][unit] = {"state": "active", "result": "success"}
        return True

    def start(self, units):
        rc = 0
        timers_started = False
        state = load_state(self.root)
        for unit in units:
            path = find_unit(self.root, unit)
            if mask_of(self.root, unit):
                self.err.write("Failed to start %s: Unit %s is masked.\n" % (unit, unit))
                rc = 1
                continue
            if not path:
                self.err.write("Failed to start %s: Unit %s not found.\n" % (unit, unit))
                rc = 5
                continue
            self._ensure_loaded(state, unit, path)
            if self._unit_state(state, unit) == "active":
                continue
            if unit.endswith(".mount"):
                if not self._mount(state, unit, path):
                    rc = 1
                continue
            journal(self.root, "systemctl start %s" % unit)
            if unit.endswith(".timer"):
                # active (waiting) until stopped; timers.elapse starts its unit when it falls due
                try:
                    spec = timers.timer_spec(unit, read_unit_sections(self.root, unit, path), self.err.write)
                except ValueError as e:
                    self.err.write("Failed to start %s: %s\n" % (unit, e))
                    state["units"][unit] = {"state": "failed", "result": "resources"}
                    rc = 1
                    continue
                rec = dict(state["units"].get(unit, {}), state="active", result="success")
                state["units"][unit] = timers.started(self.root, unit, spec, rec)
                timers_started = True
                continue
            try:
                sec = read_unit_sections(self.root, unit, path)
                svc_type = bootsim.unit_value(sec, "Service", "Type", "simple")
                remain = (bootsim.unit_value(sec, "Service", "RemainAfterExit", "no").lower()
                          in ("yes", "true", "1", "on"))
                cmds = bootsim.unit_exec_commands(sec, self.root)
                env = dict(os.environ)
                env.update(bootsim.unit_environment(sec, self.root))
            except (ValueError, OSError) as e:
                self.err.write("Failed to start %s: %s\n" % (unit, e))
                state["units"][unit] = {"state": "failed", "result": "resources"}
                rc = 1
                continue
            result = {"state": "inactive", "result": "success"}
            # the timestamps OnUnitActiveSec= / OnUnitInactiveSec= count from (no time passes during a run)
            stamps = {"exit_mono": timers.now(self.root)[1]}
            with self._log(unit) as log:
                for i, (argv, ignore) in enumerate(cmds):
                    last_main = svc_type != "oneshot" and i == len(cmds) - 1
                    try:
                        if last_main:
                            p = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=log, start_new_session=True)
                            result = {"state": "active", "result": "success", "pid": p.pid}
                            continue
                        code = subprocess.call(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=log)
                    except OSError as e:
                        log.write(("%s: %s\n" % (argv[0], e)).encode())
                        code = 203
                    if code != 0 and not ignore:
                        result = {"state": "failed", "result": "exit-code", "status": code}
                        break
                else:
                    if svc_type == "oneshot":
                        result = {"state": "active" if remain else "inactive", "result": "success"}
            if result["state"] != "active":
                stamps["enter_mono"] = stamps["exit_mono"]
            state["units"][unit] = dict(result, **stamps)
            if result["state"] == "failed":
                self.err.write("Job for %s failed because the control process exited with error code.\n"
                               "See \"%s\" for details.\n" % (unit, "/var/log/gpufabric-sim/%s.log" % unit))
                rc = 1
        save_state(self.root, state)
        if timers_started:
            timers.elapse(self, 0)   # what is due already (OnBootSec= long past) runs at once, as in systemd
        return rc

    def stop(self, units):
        state = load_state(self.root)
        for unit in units:
            if unit.endswith(".mount"):
                path = find_unit(self.root, unit)
                sec = read_unit_sections(self.root, unit, path) if path else {}
                if mounts.unmount(self.root, unit, sec):
                    journal(self.root, "systemctl stop %s" % unit)
                state["units"][unit] = {"state": "inactive", "result": "success"}
                continue
            u = state["units"].get(unit)
            if not u:
                continue
            if u.get("pid"):
                try:
                    os.killpg(u["pid"], signal.SIGTERM)
                except OSError:
                    pass
            journal(self.root, "systemctl stop %s" % unit)
            kept = dict((k, u[k]) for k in ("exit_mono", "enter_mono", "triggers") if k in u)
            if u.get("state") == "active" and not unit.endswith(".timer"):
                kept["enter_mono"] = timers.now(self.root)[1]
            state["units"][unit] = dict(kept, state="inactive", result="success")
        save_state(self.root, state)
        return 0

    def restart(self, units):
        self.stop(units)
        return self.start(units)

    def try_restart(self, units):
        state = load_state(self.root)
        active = [u for u in units if self._unit_state(state, u) == "active"]
        return self.restart(active) if active else 0

    def properties(self, unit):
        path, sec = self._sections(unit)
        state = load_state(self.root)
        st = self._unit_state(state, unit)
        u = state["units"].get(unit, {})
        masked = mask_of(self.root, unit)
        if path or masked:
            ufs = unit_file_state(self.root, unit, sec)
        else:
            ufs = ""
        if path:
            loaded = state["loaded"].get(os.path.basename(path))
            need_reload = "yes" if loaded and loaded != _file_hash(path) else "no"
        else:
            need_reload = "no"
        sub = {"active": "running" if u.get("pid") else "exited", "failed": "failed"}.get(st, "dead")
        if st == "active" and unit.endswith((".timer", ".mount")):
            sub = "waiting" if unit.endswith(".timer") else "mounted"
        props = [
            ("Type", bootsim.unit_value(sec, "Service", "Type", "simple") if sec else "simple"),
            ("Id", unit), ("Names", unit),
            ("Description", bootsim.unit_value(sec, "Unit", "Description", unit) if sec else unit),
            ("LoadState", "masked" if masked else ("loaded" if path else "not-found")),
            ("ActiveState", st), ("SubState", sub),
            ("FragmentPath", "/" + os.path.relpath(path, self.root) if path else ""),
            ("UnitFileState", ufs), ("NeedDaemonReload", need_reload),
            ("Result", u.get("result", "success")), ("ExecMainStatus", str(u.get("status", 0))),
            ("MainPID", str(u.get("pid", 0)) if st == "active" else "0"),
        ]
        if path and unit.endswith(".timer"):
            props += timers.properties(self, unit, path, state)
        if path and unit.endswith(".mount"):
            props += [(k, v) for k, v in (sec or {}).get("Mount", []) if k in ("What", "Where", "Type", "Options")]
        return props

    def show(self, units, props=None, value_only=False):
        for i, unit in enumerate(units):
            if i:
                self.out.write("\n")
            for k, v in self.properties(unit):
                if props and k not in props:
                    continue
                self.out.write((v if value_only else "%s=%s" % (k, v)) + "\n")
        return 0

    def status(self, units):
        rc = 0
        for unit in units:
            p = dict(self.properties(unit))
            if p["LoadState"] == "not-found":
                self.err.write("Unit %s could not be found.\n" % unit)
                rc = 4
                continue
            self.out.write("* %s - %s\n     Loaded: loaded (%s; %s)\n     Active: %s (%s)\n"
                           % (unit, p["Description"], p["FragmentPath"], p["UnitFileState"], p["ActiveState"],
                              p["SubState"]))
            if p["ActiveState"] != "active":
                rc = max(rc, 3)
        return rc

    def cat(self, units):
        rc = 0
        for unit in units:
            path = find_unit(self.root, unit)
            if not path:
                self.err.write("No files found for %s.\n" % unit)
                rc = 1
                continue
            for p in [path] + sorted(glob.glob(path + ".d/*.conf")):
                self.out.write("# /%s\n" % os.path.relpath(p, self.root))
                with open(p) as f:
                    self.out.write(f.read())
        return rc


def systemctl_main(argv=None):
    argv = list(sys.argv if argv is None else argv)[1:]
    root = sysroot()
    sc = Systemctl(root)
    now = False
    runtime = False
    value_only = False
    props = []
    words = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--now":
            now = True
        elif a == "--runtime":
            runtime = True
        elif a == "--value":
            value_only = True
        elif a in ("-p", "--property"):
            i += 1
            props.extend(argv[i].split(","))
        elif a.startswith("--property="):
            props.extend(a.split("=", 1)[1].split(","))
        elif a.startswith("-p") and len(a) > 2:
            props.extend(a[2:].split(","))
        elif a.startswith("-"):
            pass  # --system, --no-pager, --quiet, --no-block, --full, --plain ... change nothing here
        else:
            words.append(a)
        i += 1
    if not words:
        sys.stderr.write("systemctl (gpufabric-sim): a verb is required\n")
        return 1
    verb, units = words[0], [unit_name(u) for u in words[1:]]
    if verb == "daemon-reload":
        return sc.daemon_reload(units)
    if verb == "list-timers":
        return timers.list_timers(sc, sys.stdout)
    if verb == "gpufabric-sim-elapse":
        # the simulator's own verb (no systemctl has it): let SECONDS (a systemd time span) pass on the node
        if len(words) != 2:
            sys.stderr.write("usage: systemctl gpufabric-sim-elapse SECONDS\n")
            return 1
        try:
            usec = timers.parse_timespan(words[1])
        except ValueError as e:
            sys.stderr.write("systemctl (gpufabric-sim): %s\n" % e)
            return 1
        report = timers.elapse(sc, usec)
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
        return 1 if any(t["rc"] for t in report["triggered"]) else 0
    if verb == "show":
        return sc.show(units, props, value_only)
    table = {
        "enable": lambda u: sc.enable(u, now, runtime), "disable": lambda u: sc.disable(u, now),
        "mask": lambda u: sc.mask(u, runtime, now), "unmask": lambda u: sc.unmask(u, runtime),
        "is-enabled": sc.is_enabled, "is-active": sc.is_active, "is-failed": sc.is_failed,
        "start": sc.start, "stop": sc.stop, "restart": sc.restart, "reload-or-restart": sc.restart,
        "try-restart": sc.try_restart, "status": sc.status, "cat": sc.cat,
    }
    if verb not in table:
        sys.stderr.write("systemctl (gpufabric-sim): verb %r is not emulated\n" % verb)
        return 1
    if not units:
        sys.stderr.write("Too few arguments.\n")
        return 1
    return table[verb](units)
