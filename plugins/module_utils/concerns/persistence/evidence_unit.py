# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The evidence timer ``fabric_persist`` installs with ``evidence: true``: what it is, how the node differs, the fix.

Installed next to the boot-time applier, from the same copy of the module_utils below ``lib_dir``:

- the script ``gpufabric-evidence`` (0755), which runs ``evidence_timer.main`` from that copy;
- ``gpufabric-evidence.service`` (oneshot, hardened: ``ProtectSystem=full``, ``ProtectHome=read-only``,
  ``PrivateTmp``, ``NoNewPrivileges``; the textfile directory stays writable; capped by ``persist.service_limits``
  with ``CPUQuota``) and ``gpufabric-evidence.timer``
  (``OnBootSec``, then ``OnUnitActiveSec=<interval>s``; ``WantedBy=timers.target``), both 0644;
- the desired-state document ``/etc/gpufabric/desired.json`` (0644, ``evidence.desired_document``) the concerns
  are evaluated against, when one is given; without one the timer reports every core concern ``not_checked``.

The textfile directory is node_exporter's (by default the OS profile's, shared with ``fabric_metrics``; the timer's
file is ``gpufabric-evidence.prom``, ``fabric_metrics``' is ``gpufabric.prom``): the timer creates it (root, 0755) on its first write when it is missing
(a directory below ``/etc`` or ``/usr``, read-only to the hardened service, must exist).

The files go through ``persist.Installer`` with the applier's (content, type, mode and owner drift; atomic
writes). The timer's own drift items are ``unit_file_state`` (desired ``enabled``) and ``active_state`` (desired
``active``: a timer that is enabled but not started would wait for the next boot), fixed with ``systemctl enable``
and ``systemctl start`` (``restart`` when its unit file changed). With ``evidence: false`` every one of these files
that is present is drift (``present`` where ``absent`` is desired) and the timer is stopped and disabled.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence, install as persist
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles

SERVICE = "gpufabric-evidence.service"
TIMER = "gpufabric-evidence.timer"
DEFAULT_SCRIPT = "/usr/local/sbin/gpufabric-evidence"
# one run costs an 8-rail node 0.23-0.31 CPU-s with its C tools (docs/benchmarks.md, the node profile): every
# 600 s that is at most 0.05 % of one core (issue 23: at most 0.1 %; 300 s would be 0.08-0.10 %)
DEFAULT_INTERVAL = 600
MIN_INTERVAL, MAX_INTERVAL = 10, 86400
# the module_utils the script runs (one of node_payload.ENTRY_POINTS, so it is in the library copy)
ENTRY = "boot.evidence_timer"
SUMMARY = ("gpufabric-evidence: write the gpufabric node_exporter textfile (facts, concern status, PCIe links, "
           "RDMA counters, GDS proof age).")
OPTIONS = ("evidence", "evidence_interval", "evidence_textfile_dir", "evidence_filename", "evidence_script",
           "evidence_desired")


def validate(p, sysroot):
    """Normalise and check the evidence options of ``p`` (fabric_persist's params); ValueError names the option.
    Checked also with ``evidence: false`` so that a bad value never waits for the day it is turned on. An
    ``evidence_textfile_dir`` of None becomes the node's OS profile's node_exporter textfile directory
    (``os_profiles.textfile_dir``: the one ``fabric_metrics`` writes to as well)."""
    if p["evidence_textfile_dir"] is None:
        p["evidence_textfile_dir"] = os_profiles.textfile_dir(sysroot)[0]
    interval = p["evidence_interval"]
    if isinstance(interval, bool) or not isinstance(interval, int) or not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        raise ValueError("evidence_interval must be %d..%d seconds (got %r)" % (MIN_INTERVAL, MAX_INTERVAL, interval))
    for key in ("evidence_textfile_dir", "evidence_script"):
        if len(p[key]) > 1:
            p[key] = p[key].rstrip("/") or "/"
    try:
        inputs.safe_path(p["evidence_textfile_dir"], "evidence_textfile_dir")
        inputs.file_name(p["evidence_filename"], "evidence_filename")
        evidence.textfile_path(p["evidence_textfile_dir"], p["evidence_filename"])
        inputs.safe_path(p["evidence_script"], "evidence_script")
    except inputs.InputError as e:
        raise ValueError(str(e))
    if p["evidence_textfile_dir"] == "/":
        raise ValueError("evidence_textfile_dir must not be /")
    if p["evidence_filename"] == evidence.REPORT_FILENAME:
        raise ValueError("evidence_filename must not be %s, the file fabric_metrics (report.yml) writes to the same "
                         "directory" % evidence.REPORT_FILENAME)
    if p["evidence_script"] in (p["script"], p["lib_dir"]) or p["evidence_script"].startswith(p["lib_dir"] + "/"):
        raise ValueError("evidence_script %r must differ from script and lie outside lib_dir %r"
                         % (p["evidence_script"], p["lib_dir"]))
    if p["evidence_desired"] is not None:
        if not p["evidence"] or p["state"] != "present":
            raise ValueError("evidence_desired is the evidence timer's desired state: it needs evidence: true and "
                             "state: present")
        try:
            evidence.desired_document(p["evidence_desired"])
        except ValueError as e:
            raise ValueError("evidence_desired: %s" % e)


def paths(p):
    """{role: host path} of every file the evidence timer consists of (present or not)."""
    return {"script": p["evidence_script"], "service": "%s/%s" % (p["unit_dir"], SERVICE),
            "timer": "%s/%s" % (p["unit_dir"], TIMER), "desired": evidence.DESIRED_FILE}


CPU_QUOTA = 50   # percent of one CPU


def render_service(p):
    exec_start = " ".join(inputs.systemd_exec_arg(w) for w in (
        p["evidence_script"], "--desired", evidence.DESIRED_FILE, "--textfile-dir", p["evidence_textfile_dir"],
        "--filename", p["evidence_filename"], "--interval", str(int(p["evidence_interval"]))))
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Refresh the gpufabric node_exporter textfile (facts, concern status, PCIe links, RDMA "
        "counters, GDS proof age)\n"
        "Documentation=man:systemd.timer(5)\n"
        "After=gpufabric-apply.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "ExecStart=%s\n"
        "TimeoutStartSec=%d\n"
        "Nice=10\n"
        "IOSchedulingClass=idle\n"
        "# read-only but for the textfile directory; root is needed for PCI config space beyond 64 bytes (ACS)\n"
        "ProtectSystem=full\n"
        "ProtectHome=read-only\n"
        "PrivateTmp=yes\n"
        "NoNewPrivileges=yes\n"
        "ReadWritePaths=-%s\n"
        "# a background refresh: capped in memory, tasks and CPU (a textfile reader gone wrong cannot take the node)\n"
        "%s"
        % (persist.HEADER, exec_start, max(60, p["evidence_interval"]),
           inputs.safe_path(p["evidence_textfile_dir"], "evidence_textfile_dir"), persist.service_limits(CPU_QUOTA)))


def render_timer(p):
    interval = int(p["evidence_interval"])
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Refresh the gpufabric node_exporter textfile every %d s\n"
        "Documentation=man:systemd.timer(5)\n\n"
        "[Timer]\n"
        "# started after boot time has passed (systemctl start), OnBootSec elapses at once\n"
        "OnBootSec=%ds\n"
        "OnUnitActiveSec=%ds\n"
        "AccuracySec=1s\n"
        "Unit=%s\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n" % (persist.HEADER, interval, min(interval, 60), interval, SERVICE))


def files(p, python):
    """{path: (content, mode, diff)} of what ``evidence: true`` installs (``persist.Installer``'s shape)."""
    where = paths(p)
    out = {where["script"]: (persist.render_script(python, p["evidence_script"], p["lib_dir"], entry=ENTRY,
                                                   summary=SUMMARY), 0o755, True),
           where["service"]: (render_service(p), 0o644, True),
           where["timer"]: (render_timer(p), 0o644, True)}
    if p["evidence_desired"] is not None:
        out[where["desired"]] = (evidence.desired_document(p["evidence_desired"]), 0o644, True)
    return out


def unwanted(p):
    """Host paths that must be absent: all of them with ``evidence: false`` (or state absent), the desired-state
    document when none is given."""
    where = paths(p)
    if p["state"] != "present" or not p["evidence"]:
        return [where[k] for k in ("timer", "service", "script", "desired")]
    return [] if p["evidence_desired"] is not None else [where["desired"]]


def survey_timer(wanted, unit_state, active_state):
    """(items, actions) of the timer's enablement. ``unit_state``: ``systemctl is-enabled`` (or the layout);
    ``active_state``: ``systemctl is-active``, None when it cannot be asked (no systemctl)."""
    items, actions = [], []
    if wanted:
        if unit_state != "enabled":
            items.append(persist.item(TIMER, "unit_file_state", unit_state, "enabled"))
            actions.append({"op": "enable"})
        if active_state is not None and active_state != "active":
            items.append(persist.item(TIMER, "active_state", active_state, "active"))
            actions.append({"op": "start"})
    else:
        if unit_state in ("enabled", "enabled-runtime"):
            items.append(persist.item(TIMER, "unit_file_state", unit_state, "disabled"))
            actions.append({"op": "disable"})
        if active_state in ("active", "activating", "reloading"):
            items.append(persist.item(TIMER, "active_state", active_state, "inactive"))
            actions.append({"op": "stop"})
    return items, actions


def fix_timer(actions, run, systemctl, changed_file):
    """Carry out ``survey_timer``'s actions with ``run(argv)`` (it records, and runs unless in check mode);
    ``changed_file``: the timer's unit file was written, so a running timer is restarted to take it."""
    sc = systemctl or persist.DEFAULT_SYSTEMCTL
    ops = [a["op"] for a in actions]
    if "stop" in ops or "disable" in ops:
        run([sc, "disable", "--now", TIMER] if "disable" in ops else [sc, "stop", TIMER])
        return
    if "enable" in ops:
        run([sc, "enable", TIMER])
    if "start" in ops:
        run([sc, "start", TIMER])
    elif changed_file:
        run([sc, "restart", TIMER])
