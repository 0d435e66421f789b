# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time applier (script, units, udev rule, library copy): the body of the ``fabric_persist`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule`` in check mode. It returns the module's result;
``module.fail_json`` ends it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils import node_payload
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence_unit as persist_evidence
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    python=dict(type="path"),
    lib_dir=dict(type="path", default="/usr/local/lib/gpufabric"),
    script=dict(type="path", default="/usr/local/sbin/gpufabric-apply"),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    rules_file=dict(type="path", default="/etc/udev/rules.d/90-gpufabric-rdma.rules"),
    boot_wait=dict(type="int", default=60),
    device_wait=dict(type="int", default=10),
    before_units=dict(type="list", elements="str", default=["remote-fs-pre.target", "kubelet.service",
                                                            "slurmd.service"]),
    enabled=dict(type="bool", default=True),
    evidence=dict(type="bool", default=False),
    evidence_interval=dict(type="int", default=persist_evidence.DEFAULT_INTERVAL),
    evidence_textfile_dir=dict(type="path"),
    evidence_filename=dict(type="str", default=evidence.DEFAULT_FILENAME),
    evidence_script=dict(type="path", default=persist_evidence.DEFAULT_SCRIPT),
    evidence_desired=dict(type="dict"),
)

UNIT = persist.UNIT
TEMPLATE = persist.TEMPLATE


def library_sources(modules=None):
    """{name: source} of the library copy: the node payload (``node_payload.NODE_PAYLOAD``), the files the
    installed scripts run, as this process loaded them."""
    return persist.module_utils_sources(node_payload.NODE_PAYLOAD, modules)


def desired_files(p, python, systemctl, sources, unit_path, template_path):
    """{path: (content, mode, diff)} of what state=present installs."""
    files = dict((path, (content, 0o644, False))
                 for path, content in persist.lib_files(p["lib_dir"], sources).items())
    files[p["script"]] = (persist.render_script(python, p["script"], p["lib_dir"]), 0o755, True)
    files[unit_path] = (persist.render_unit(p["script"], p["boot_wait"], p["before_units"]), 0o644, True)
    files[template_path] = (persist.render_template(p["script"], p["device_wait"]), 0o644, True)
    files[p["rules_file"]] = (persist.render_rule(systemctl or persist.DEFAULT_SYSTEMCTL), 0o644, True)
    return files


def diff_of(actions, lib_dir, sysroot):
    """Diffs of the files written or removed (the library copy is left out: files lists it)."""
    diffs = []
    for a in actions:
        if a["op"] == "write" and a["diff"]:
            diffs.append({"before": a["before"] or "", "after": a["content"], "before_header": a["path"],
                          "after_header": a["path"]})
        elif a["op"] == "remove" and not a["path"].startswith(lib_dir + "/"):
            diffs.append({"before": sysroot.read_raw(a["path"], ""), "after": "", "before_header": a["path"],
                          "after_header": a["path"]})
    return diffs


def validate(module, p, sysroot):
    """Every value the applier's files are rendered from, checked for the syntax it goes into (shebang, Python
    source, ExecStart=, Before=, udev RUN): absolute normalized paths of portable characters, unit names."""
    python = p["python"] or sys.executable
    try:
        for key in ("lib_dir", "script", "unit_dir", "rules_file"):
            if len(p[key]) > 1:
                p[key] = p[key].rstrip("/") or "/"
            inputs.safe_path(p[key], key)
        inputs.shebang(python)
        for unit in p["before_units"]:
            inputs.systemd_unit_name(unit, "before_units")
    except inputs.InputError as e:
        module.fail_json(msg=str(e))
    if p["lib_dir"] == "/" or p["script"] == "/" or p["rules_file"] == "/" or \
            p["lib_dir"] == p["script"] or p["script"].startswith(p["lib_dir"] + "/"):
        module.fail_json(msg="lib_dir %r and script %r must be distinct paths below /, the script outside lib_dir"
                         % (p["lib_dir"], p["script"]))
    for key in ("boot_wait", "device_wait"):
        if not 0 <= p[key] <= 3600:
            module.fail_json(msg="%s must be 0..3600 seconds (got %d)" % (key, p[key]))
    try:
        persist_evidence.validate(p, sysroot)
    except ValueError as e:
        module.fail_json(msg=str(e))
    return python


def run(module, sysroot=None):
    """Survey and (unless check mode) install or remove the boot-time applier."""
    p = module.params
    sysroot = sysroot or Sysroot()
    python = validate(module, p, sysroot)
    present = p["state"] == "present"
    check = module.check_mode
    unit_path = "%s/%s" % (p["unit_dir"], UNIT)
    template_path = "%s/%s" % (p["unit_dir"], TEMPLATE)
    runner = CommandRunner(module)
    systemctl = runner.bin_path("systemctl")
    sc = systemctl or persist.DEFAULT_SYSTEMCTL
    try:
        inputs.udev_value(inputs.safe_path(sc, "systemctl"), "systemctl")
    except inputs.InputError as e:
        module.fail_json(msg="the udev rule runs systemctl: %s" % e)
    commands = []
    result = dict(changed=False, files=[], commands=commands, drift=[], unit_file_state=None)

    def run(argv):
        """A command that changes the node: recorded, and run unless in check mode."""
        commands.append(" ".join([os.path.basename(argv[0])] + argv[1:]))
        if check:
            return
        if not os.path.isfile(argv[0]):
            module.fail_json(msg="%s is not installed: cannot run %s" % (os.path.basename(argv[0]), " ".join(argv)),
                             **result)
        rc, out, err = runner(argv)
        if rc != 0:
            module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()), rc=rc,
                             stdout=out, stderr=err, **result)

    surveyed = {}

    def query(unit=UNIT):
        """The unit file state of ``unit``: the survey's answer once (both units asked with one systemctl), then
        asked again (after a change)."""
        if unit in surveyed:
            return surveyed.pop(unit)
        if systemctl:
            return persist.systemctl_state(runner, systemctl, unit)
        return persist.layout_state(sysroot, unit)

    def active(unit):
        """``systemctl is-active``'s word; None without systemctl (nothing to ask)."""
        if not systemctl:
            return None
        _rc, out, _err = runner([systemctl, "is-active", unit])
        return (out or "").split()[0] if (out or "").split() else "unknown"

    if present:
        # a host not booted with systemd (a microVM whose agent is PID 1) never runs the unit or the rule: say so,
        # install nothing
        no_systemd = persist.without_systemd(sysroot)
        if no_systemd is not None:
            result.update(concerns={persist.CONCERN: no_systemd}, drift=no_systemd["items"],
                          booted_with_systemd=False, pid1=persist.pid1(sysroot))
            return result
    try:
        sources = library_sources()
    except persist.PersistError as e:
        module.fail_json(msg="cannot collect the applier's module_utils: %s" % e)
    result["module_utils"] = sorted(sources)
    files = desired_files(p, python, systemctl, sources, unit_path, template_path) if present else {}
    ev_paths = persist_evidence.paths(p)
    if present and p["evidence"]:
        files.update(persist_evidence.files(p, python))
    inst = persist.Installer(sysroot, files, p["lib_dir"], unit_path, unit=UNIT if present and p["enabled"] else None)
    foreign = []
    # one writer of node state at a time (nodelock.py), the applier included: from the survey of the node
    # through the fix and its read-back
    with nodelock.for_module(module, sysroot, "fabric_persist", (persist.CONCERN,)):
        try:
            if present and p["enabled"] and systemctl:
                surveyed.update(persist.systemctl_states(runner, systemctl, (UNIT, persist_evidence.TIMER)))
            if present:
                unit_state = query() if p["enabled"] else None
                items, actions, foreign = inst.survey(unit_state)
                gone_items, gone = inst.survey_absent(persist_evidence.unwanted(p))
                items, actions = items + gone_items, actions + gone
            else:
                lib = [x for x in inst.tree(p["lib_dir"]) if x.endswith(".py")]
                items, actions = inst.survey_absent(persist_evidence.unwanted(p) + [p["rules_file"], template_path,
                                                                                    unit_path, p["script"]] + lib)
                unit_state = query() if os.path.lexists(sysroot.path(unit_path)) else None
                if unit_state == "enabled":
                    items.append(persist.item(UNIT, "unit_file_state", unit_state, "disabled"))
            want_timer = present and p["evidence"]
            timer_before = (query(persist_evidence.TIMER), active(persist_evidence.TIMER))
            timer_items, timer_actions = persist_evidence.survey_timer(want_timer, *timer_before)
            items = items + timer_items
            result.update(drift=items, unit_file_state=unit_state)
            diffs = diff_of(actions, p["lib_dir"], sysroot)
            if not present and unit_state == "enabled":
                run([sc, "disable", UNIT])
            if not want_timer:
                persist_evidence.fix_timer(timer_actions, run, systemctl, False)
            done = inst.fix_files(actions, check)
            units = (unit_path, template_path, ev_paths["service"], ev_paths["timer"])
            if any(done[x] != "restored" for x in units if x in done):
                run([sc, "daemon-reload"])
            inst.fix_unit(actions, run, systemctl, query, check)
            if want_timer:
                persist_evidence.fix_timer(timer_actions, run, systemctl,
                                           done.get(ev_paths["timer"]) not in (None, "restored"))
            if p["rules_file"] in done and done[p["rules_file"]] != "restored":
                run([runner.bin_path("udevadm", required=not check) or "udevadm", "control", "--reload"])
            if present and not check and (actions or timer_actions):
                _items, left, _f = inst.survey(query() if p["enabled"] else None)
                left = left + inst.survey_absent(persist_evidence.unwanted(p))[1]
                left = left + [{"path": persist_evidence.TIMER} for _a in persist_evidence.survey_timer(
                    want_timer, query(persist_evidence.TIMER), active(persist_evidence.TIMER))[1]]
                if left:
                    module.fail_json(msg="the boot-time applier still differs after the fix: %s"
                                     % ", ".join(sorted(set(a.get("path", UNIT) for a in left))), **result)
        except persist.PersistError as e:
            module.fail_json(msg="fabric_persist: %s" % e, **result)
        except (IOError, OSError) as e:
            module.fail_json(msg="writing the applier files failed: %s" % e, **result)

    prefix = "would be " if check else ""
    listed = sorted(set(files) | set(done))
    result["files"] = [{"path": x, "action": prefix + done[x] if x in done else "unchanged"} for x in listed]
    result["changed"] = bool(done) or any(c.split(" ")[1:2] in (["enable"], ["disable"], ["unmask"], ["start"],
                                                                ["stop"], ["restart"]) for c in commands)
    result["evidence"] = {"enabled": bool(present and p["evidence"]), "timer": persist_evidence.TIMER,
                          "unit_file_state": timer_before[0], "active_state": timer_before[1],
                          "textfile": "%s/%s" % (p["evidence_textfile_dir"], p["evidence_filename"])}
    result["concerns"] = {persist.CONCERN: persist.status(items, foreign, check)}
    if module._diff:
        result["diff"] = diffs
    return result
