# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``persistence`` concern's spec: the persistence role's variables as ``fabric_persist`` options (with the
desired state the evidence timer evaluates, which the check hub derives), and the concern's evaluation in the
one-call check.

Plain Python, no Ansible imports (the evidence timer runs it on the node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import task as persist_task

NAME = "persistence"
KEYS = ("persistence_state", "persistence_python", "persistence_lib_dir", "persistence_script",
        "persistence_unit_dir", "persistence_udev_rules_file", "persistence_boot_wait", "persistence_device_wait",
        "persistence_before_units", "persistence_enabled", "persistence_evidence", "persistence_evidence_interval",
        "persistence_evidence_textfile_dir", "persistence_evidence_filename", "persistence_evidence_script")
TASK = "Install the boot-time applier"


def params(d, evidence_desired):
    """fabric_persist's options; ``evidence_desired(d)``: the document the evidence timer evaluates (the check
    hub's ``node_desired.evidence_desired``, which knows every concern's keys)."""
    p = dict((k, d["persistence_" + k]) for k in ("state", "lib_dir", "script", "unit_dir", "boot_wait",
                                                  "device_wait", "before_units", "enabled", "evidence",
                                                  "evidence_interval", "evidence_textfile_dir",
                                                  "evidence_filename", "evidence_script"))
    p["rules_file"] = d["persistence_udev_rules_file"]
    p["evidence_textfile_dir"] = p["evidence_textfile_dir"] or None   # the OS profile's, as the role passes it
    if d["persistence_python"]:
        p["python"] = d["persistence_python"]
    if p["evidence"] and p["state"] == "present":
        p["evidence_desired"] = evidence_desired(d)
    return p


def evaluate(ctx):
    return common.run_body(ctx, ["persistence"], "fabric_persist", persist_task,
                           params(ctx.desired, ctx.evidence_desired), TASK)
