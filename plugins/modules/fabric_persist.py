#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_persist
short_description: Install the boot-time applier that re-applies runtime-only fabric settings
version_added: 0.1.0
description:
  - Installs C(gpufabric-apply), which re-applies what the collection's modules recorded in
    C(/etc/gpufabric/state.json) (DCB, rdma_cm default RoCE ToS, ACS, nvidia-fs C(rw_stats_enabled), per-rail
    routing), the settings the kernel forgets at reboot and, for ToS and DCB, whenever an RDMA device registers again.
  - The applier runs the very module_utils this module was shipped with. The module writes their source, taken from
    its own payload, below O(lib_dir) (C(ansible_collections/gpufabric/node/plugins/module_utils/)), so the node
    always runs the same code as the modules. Files of that directory that are no longer part of the collection are
    removed.
  - Writes a oneshot unit C(gpufabric-apply.service) (enabled, C(WantedBy=multi-user.target)), ordered after
    C(network-online.target) (routing needs the rail addresses) and before remote file systems (NFS over RDMA),
    C(kubelet.service) and C(slurmd.service), so workloads start with the fabric configured.
  - Writes a template unit C(gpufabric-apply@.service) and a udev rule that starts it with
    C(systemctl --no-block restart gpufabric-apply@<ibdev>.service) on every C(add) event of an RDMA device.
    The template passes the instance as it is (C(%i)); the rule starts it for device names of the characters
    C([A-Za-z0-9_.-]) (C(mlx5_0), C(mlx5-bond0), C(rxe-eth0)), the only names the modules record state for.
    The work runs in a service, not in udev's C(RUN) (which udev kills when the event is done and runs in a
    sandbox that forbids mounting configfs); C(restart) rather than C(start) guarantees a fresh run after a
    registration that happens while an earlier run of the same device is still going.
  - Every real run of the applier, like every module that writes node state, holds the node lock
    C(/run/gpufabric/lock) (C(module_utils/nodelock.py)); the units pass C(--lock-wait 120), and a run that cannot
    get the lock in that time fails naming the holder. Their C(TimeoutStartSec) leaves room for that wait.
    This module holds the lock too while it surveys and fixes the installed files.
  - Runs C(systemctl daemon-reload) when a unit changed, C(systemctl unmask) when a mask hides the boot unit,
    C(systemctl enable) when it is not enabled and C(udevadm control --reload) when the rule changed.
  - Every file is written atomically (temp file in the same directory, owner and mode set on it, fsync, rename,
    fsync of the directory) and only when its content, mode or owner differs.
  - Reports the boot-time persistence concern (C(concerns.persistence)). Each of these is a C(drift) item, in check
    mode as in a real run (which corrects it and proves it by reading the node again); a real run changes
    nothing that is already right.
  - C(content) of the script, of each library file, of the units and of the udev rule; C(type) where a symlink or
    anything but a regular file stands in for one of them. A library file that is no longer part of the collection,
    and a symlink planted in the library or in C(/etc/gpufabric), is C(present) where C(absent) is desired (a real
    run removes it; the modules record their state again on their next run).
  - C(unit_file_state) of C(gpufabric-apply.service) when it is not C(enabled) (C(disabled), C(masked),
    C(masked-runtime), C(enabled-runtime), C(static), C(not-found)), as C(systemctl is-enabled) prints it or,
    without systemctl, as the unit file layout says (the first entry of the unit's name in the unit search path,
    a symlink to C(/dev/null) or an empty file being a mask; enablement symlinks in
    C(/etc/systemd/system/*.wants|*.requires), in C(/run/systemd/system/...) for C(enabled-runtime)).
  - C(owner) and C(mode) where anything root runs at boot (the script, the library, its directories and bytecode,
    the units, the rule, C(/etc/gpufabric) and its files) is not owned by 0:0 or is writable by group or others (the
    installed files also have their exact mode, 0755 for the script, 0644 for the rest). Every directory on the way
    from C(/) must be owned by root and not writable by others (nor by a group other than root's). A real run
    restores owner and mode of the collection's own paths (O(lib_dir) and everything below it, C(/etc/gpufabric) and
    its files, the installed files) but never changes a directory the collection does not own (C(/etc),
    C(/usr/local/sbin), the unit and rule directories); those stay C(drift), and the reason names them.
  - The installed applier runs the same check (C(module_utils/guard.py)) on its own script, its library and the
    recorded state before it does anything; it logs one line per file that fails it and exits with code 3.
author:
  - gpufabric developers (@gpufabric)
options:
  state:
    description:
      - C(present) installs, C(absent) disables the boot unit and removes every file this module installs
        (the recorded state in C(/etc/gpufabric) is kept).
    type: str
    choices: [present, absent]
    default: present
  python:
    description:
      - Interpreter of the C(gpufabric-apply) script. Defaults to the interpreter that runs this module (the
        node's Python as Ansible discovered it). It needs C(pyroute2) only when per-rail routing is recorded.
      - It is written into the script's shebang line. Like O(lib_dir), O(script), O(unit_dir) and O(rules_file) it
        must be an absolute, normalized path (no C(.) or C(..) component) of the characters C([A-Za-z0-9._+,:=@-])
        and C(/); anything else (a space, a quote, C(%), C($), a newline, NUL) is refused before anything is read
        or written.
    type: path
  lib_dir:
    description: Directory that receives the copy of the collection's module_utils.
    type: path
    default: /usr/local/lib/gpufabric
  script:
    description: Path of the C(gpufabric-apply) script.
    type: path
    default: /usr/local/sbin/gpufabric-apply
  unit_dir:
    description: Directory of the systemd units.
    type: path
    default: /etc/systemd/system
  rules_file:
    description: The udev rule file.
    type: path
    default: /etc/udev/rules.d/90-gpufabric-rdma.rules
  boot_wait:
    description: Seconds the boot run waits for recorded devices that have not appeared yet before it fails.
    type: int
    default: 60
  device_wait:
    description: Seconds a per-device run (udev) waits for the device's rails and configfs ports.
    type: int
    default: 10
  before_units:
    description:
      - Units the boot run is ordered before (C(Before=)). Units that do not exist on the node are harmless.
      - Each must be a systemd unit name (C(kubelet.service), C(mnt-data\x2d1.mount)); anything else is refused.
    type: list
    elements: str
    default: [remote-fs-pre.target, kubelet.service, slurmd.service]
  enabled:
    description: Enable C(gpufabric-apply.service) (C(state=present) only).
    type: bool
    default: true
  evidence:
    description:
      - Install the evidence timer as well - the script O(evidence_script), C(gpufabric-evidence.service) and
        C(gpufabric-evidence.timer) (enabled and started) - which refreshes the node_exporter textfile
        O(evidence_textfile_dir)/O(evidence_filename) every O(evidence_interval) seconds with no Ansible run - the
        facts, every concern's status against O(evidence_desired), PCIe link health, the age of the last GDS proof and
        the RDMA error, retry and congestion (CNP, ECN) counters (docs/metrics.md). It runs the same copy of the
        module_utils as the applier, and the same guard (it refuses to run when its code or the desired state could
        be changed by anyone but root).
      - C(false) removes those files and C(/etc/gpufabric/desired.json) where present and stops and disables the
        timer. Drift items are the files' C(content), C(type), C(mode), C(owner) as for the applier, and the timer's
        C(unit_file_state) (desired C(enabled)) and C(active_state) (desired C(active)).
    type: bool
    default: false
  evidence_interval:
    description: Seconds between two runs of the evidence timer (C(OnUnitActiveSec)), 10 to 86400.
    type: int
    default: 60
  evidence_textfile_dir:
    description:
      - node_exporter's C(--collector.textfile.directory). The timer creates it (root, 0755) when missing, unless it
        lies below C(/etc) or C(/usr), which the hardened service cannot write (C(ProtectSystem=full)).
      - An absolute, normalized path of the characters C([A-Za-z0-9._+,:=@-]) and C(/).
    type: path
    default: /var/lib/node_exporter/textfile_collector
  evidence_filename:
    description: File name in O(evidence_textfile_dir), ending in C(.prom), not starting with C(.).
    type: str
    default: gpufabric.prom
  evidence_script:
    description: Path of the C(gpufabric-evidence) script (outside O(lib_dir), not O(script)).
    type: path
    default: /usr/local/sbin/gpufabric-evidence
  evidence_desired:
    description:
      - The desired state the timer evaluates every concern against (the document of the one-call check,
        C(node_check.evaluate)); written as C({schema, desired}) to C(/etc/gpufabric/desired.json) (root, 0644).
      - Omitted, the file is removed and the timer reports every core concern C(not_checked) (never C(ok)).
    type: dict
attributes:
  check_mode:
    support: full
    description: Reports what would be written, removed, reloaded or enabled; changes nothing.
  diff_mode:
    support: full
    description: Diff of the unit files, the udev rule and the script (the module_utils copy is summarised).
  platform:
    support: full
    platforms: posix
    description: Linux with systemd and udev.
notes:
  - Needs root. Check mode also works without systemctl (the unit file layout is read, and the udev rule is
    compared with one that runs C(/usr/bin/systemctl)); a real run needs it when a unit changed or the boot unit has
    to be enabled.
  - The modules record what they applied through C(module_utils/state.py); this module only installs the applier.
seealso:
  - module: gpufabric.node.rdma_cm_tos
  - module: gpufabric.node.dcb_qos
  - module: gpufabric.node.pcie_acs
"""

EXAMPLES = r"""
- name: Install the boot-time applier
  gpufabric.node.fabric_persist:

- name: Install it with the platform's Python and a longer boot wait
  gpufabric.node.fabric_persist:
    python: /usr/bin/python3
    boot_wait: 120

- name: Install it with the evidence timer, refreshing the node_exporter textfile every 30 seconds
  gpufabric.node.fabric_persist:
    evidence: true
    evidence_interval: 30
    evidence_desired: "{{ gpufabric_desired }}"

- name: Remove it
  gpufabric.node.fabric_persist:
    state: absent
"""

RETURN = r"""
files:
  description: Every file the module manages, with what happened to it.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Host path.
      type: str
      sample: /etc/systemd/system/gpufabric-apply.service
    action:
      description: >-
        C(created), C(updated), C(removed), C(restored) (owner and mode put back), C(unchanged) (with C(would be ) in
        check mode).
      type: str
      sample: created
module_utils:
  description: Names of the module_utils installed for the applier.
  returned: always
  type: list
  elements: str
  sample: [acs, applier, dcb, guard, pci, rdma_cm, routing, state, sysctl, sysroot, topology]
commands:
  description: The systemctl/udevadm commands run (or that would run in check mode).
  returned: always
  type: list
  elements: str
  sample: ["systemctl daemon-reload", "systemctl enable gpufabric-apply.service", "udevadm control --reload"]
booted_with_systemd:
  description: >-
    False when the host does not boot with systemd (no C(/run/systemd/system), as C(sd_booted(3)) tests; a microVM
    whose agent is PID 1). The module then installs nothing, and the persistence concern is C(not_applicable) when
    no runtime state is recorded, else C(drift) (it would be lost at the next boot).
  returned: when the host does not boot with systemd
  type: bool
  sample: false
pid1:
  description: The command name of PID 1 (C(/proc/1/comm)) on a host that does not boot with systemd.
  returned: when the host does not boot with systemd
  type: str
  sample: process_api
unit_file_state:
  description: >-
    State of C(gpufabric-apply.service) before the module ran, in C(systemctl is-enabled)'s words; null when
    O(enabled=false).
  returned: always
  type: str
  sample: disabled
evidence:
  description: >-
    The evidence timer - whether it is wanted (O(evidence)), its C(unit_file_state) and C(active_state) before the
    module ran (null C(active_state) without systemctl) and the textfile it writes.
  returned: always
  type: dict
  sample: {enabled: true, timer: gpufabric-evidence.timer, unit_file_state: not-found, active_state: inactive,
           textfile: /var/lib/node_exporter/textfile_collector/gpufabric.prom}
drift:
  description: >-
    Deviations found before anything was changed (concern C(persistence)); keys C(content), C(type), C(mode),
    C(owner) (object a path), C(unit_file_state) (object the unit or the evidence timer) and C(active_state) (the
    evidence timer).
  returned: always
  type: list
  elements: dict
  sample:
    - {"concern": "persistence", "object": "/usr/local/sbin/gpufabric-apply", "key": "mode", "current": "0757",
       "desired": "0755"}
    - {"concern": "persistence", "object": "gpufabric-apply.service", "key": "unit_file_state",
       "current": "disabled", "desired": "enabled"}
concerns:
  description: >-
    The status of the C(persistence) concern (see docs/concerns.md): C(drift) in check mode when anything differs,
    C(ok) after a real run that corrected it (with C(corrected) and the items), C(drift) after a real run when a
    directory the collection does not own lets others swap a file (the reason names it).
  returned: always
  type: dict
  contains:
    persistence:
      description: "{status, reason, items[, corrected]}"
      type: dict
  sample:
    persistence:
      status: drift
      reason: "1 item(s) differ from the desired state: gpufabric-apply.service unit_file_state"
      items: [{"concern": "persistence", "object": "gpufabric-apply.service", "key": "unit_file_state",
               "current": "disabled", "desired": "enabled"}]
"""

import os
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import applier, inputs, nodelock, persist
from ansible_collections.gpufabric.node.plugins.module_utils import persist_evidence
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

UNIT = persist.UNIT
TEMPLATE = persist.TEMPLATE
# The applier is imported so that Ansible ships it (and everything it imports) with this module.
APPLIER = applier.__name__.rsplit(".", 1)[-1]


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


def validate(module, p):
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
        persist_evidence.validate(p)
    except ValueError as e:
        module.fail_json(msg=str(e))
    return python


def main():
    module = AnsibleModule(
        argument_spec=dict(
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
            evidence_textfile_dir=dict(type="path", default="/var/lib/node_exporter/textfile_collector"),
            evidence_filename=dict(type="str", default="gpufabric.prom"),
            evidence_script=dict(type="path", default=persist_evidence.DEFAULT_SCRIPT),
            evidence_desired=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    python = validate(module, p)
    present = p["state"] == "present"
    check = module.check_mode
    sysroot = Sysroot()
    unit_path = "%s/%s" % (p["unit_dir"], UNIT)
    template_path = "%s/%s" % (p["unit_dir"], TEMPLATE)
    env = {"LC_ALL": "C", "LANG": "C"}
    systemctl = module.get_bin_path("systemctl")
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
        rc, out, err = module.run_command(argv, environ_update=env)
        if rc != 0:
            module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()), rc=rc,
                             stdout=out, stderr=err, **result)

    def query(unit=UNIT):
        if systemctl:
            return persist.systemctl_state(lambda argv: module.run_command(argv, environ_update=env), systemctl,
                                           unit)
        return persist.layout_state(sysroot, unit)

    def active(unit):
        """``systemctl is-active``'s word; None without systemctl (nothing to ask)."""
        if not systemctl:
            return None
        _rc, out, _err = module.run_command([systemctl, "is-active", unit], environ_update=env)
        return (out or "").split()[0] if (out or "").split() else "unknown"

    if present:
        # a host not booted with systemd (a microVM whose agent is PID 1) never runs the unit or the rule: say so,
        # install nothing
        no_systemd = persist.without_systemd(sysroot)
        if no_systemd is not None:
            result.update(concerns={persist.CONCERN: no_systemd}, drift=no_systemd["items"],
                          booted_with_systemd=False, pid1=persist.pid1(sysroot))
            module.exit_json(**result)
    try:
        sources = persist.module_utils_sources()
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
                run([module.get_bin_path("udevadm", required=not check) or "udevadm", "control", "--reload"])
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
    module.exit_json(**result)


if __name__ == "__main__":
    main()
