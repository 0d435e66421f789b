#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_report
short_description: Write the fleet drift report (JSON and Markdown) from every node's concern statuses
description:
  - Builds one fleet report from the status of every concern of every node (C(gpufabric_concerns) - C(ok),
    C(drift), C(error), C(not_checked), C(not_applicable), each with a one-line reason and its items) and writes it
    as JSON (schema C(gpufabric.drift/v2)) and Markdown.
  - Every report says when it was made (O(generated), UTC ISO 8601) and which inventory hosts it covers out of how
    many (C(coverage), from O(scope)); a report of a C(--limit) run names the hosts it left out.
  - Every managed concern a node did not report is C(not_checked); an unreachable node has every concern
    C(not_checked). Only C(ok) reads as "as desired".
  - A node's verdict is C(ok) only when every concern is C(ok) or C(not_applicable), no reboot is pending and no
    warning stands that breaks a data path (translated IOMMU, cross-NUMA GPU/NIC pair, nvidia-fs missing where GDS
    is wanted, NVSwitches without a running Fabric Manager); otherwise it needs attention, with the reasons listed.
    The statuses and the verdict are the ones M(gpufabric.node.fleet_report) and M(gpufabric.node.fabric_metrics)
    show (one shared computation).
  - "Meant to run once on the controller (C(delegate_to: localhost), C(run_once: true)) at the end of C(drift.yml)."
  - Files are written atomically and only when their content changes (the time stamp is part of the content).
version_added: 0.1.0
extends_documentation_fragment:
  - gpufabric.node.report_scope
author:
  - gpufabric developers (@gpufabric)
options:
  nodes:
    description:
      - Mapping of inventory host name to its data; every key is optional.
      - "C(concerns) (dict) - the host fact C(gpufabric_concerns), C({<concern>: {status, reason, items[,
        corrected]}}). Concern names and statuses are validated. A node whose data is wrongly shaped
        (a concern, the facts the report reads, a flag) is reported as an error naming what was wrong, with a
        warning; every other node is reported as it is."
      - C(facts) (dict) - C(ansible_facts.gpufabric); the data-path warnings of the verdict come from it.
      - "C(reboot_required) (bool), C(gds_wanted) (bool), C(errors) (list of str, play-level failures),
        C(warnings) (list of str), C(unreachable) (bool; an unreachable node may pass only C({unreachable: true}))."
      - C(drift) (list of drift items) - old callers only, used when C(concerns) is missing - the concerns with items
        are C(drift) (with I(fixed), C(ok) and corrected) and every other managed concern C(not_checked).
    type: dict
    required: true
  managed_concerns:
    description:
      - The concern names the play manages; each node gets a status for every one of them (C(not_checked) when it
        reported none). Concerns a node reports beyond these are included too.
      - Default - the core concerns (C(cmdline), C(acs), C(dcb), C(rdma_cm), C(ecn), C(sysctl), C(routing),
        C(mtu), C(nccl), C(persistence), C(nfs_mounts), C(pcie_link), C(gpudirect_rdma),
        C(fabric_manager)).
    type: list
    elements: str
    choices: [cmdline, acs, dcb, rdma_cm, ecn, sysctl, routing, mtu, nccl, persistence, nfs_mounts, pcie_link,
      gpudirect_rdma, fabric_manager, gds, vendor_client, performance]
  dest:
    description:
      - Directory the report files are written to (created when missing); a relative path is taken from the
        current directory (for a task delegated to the controller, the one C(ansible-playbook) runs in).
    type: path
    required: true
  basename:
    description: File name without extension.
    type: str
    default: drift-report
  also_basenames:
    description:
      - Further file names (without extension) the same report is written to, for example the check's
        C(drift-report) in a fix run, so that no older report there is left standing beside the newer one.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  generated:
    description:
      - When the report was made, ISO 8601 (for example C(2026-01-01T00:00:00Z)). Default - the current time, UTC.
    type: str
    version_added: 0.2.0
  formats:
    description: Which files to write.
    type: list
    elements: str
    choices: [json, markdown]
    default: [json, markdown]
  title:
    description: Title of the Markdown report.
    type: str
    default: gpufabric drift report
  fixed:
    description:
      - The data come from a fix run - items of concerns with C(corrected) read as fixed (a node with nothing else
        left is marked C(FIXED)), and a concern still in C(drift) reads as not fixed (C(NOT FIXED)).
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the report is built and returned but no file is written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

EXAMPLES = r"""
- name: Write the fleet drift report
  gpufabric.node.fabric_report:
    nodes: >-
      {{ dict(groups['all'] | zip(groups['all'] | map('extract', hostvars)
         | map(attribute='__gpufabric_node_result', default={'unreachable': true}))) }}
    managed_concerns: [cmdline, acs, dcb, rdma_cm, sysctl, routing, nccl, persistence]
    dest: reports
    scope:
      pattern: all
      inventory_hosts: "{{ query('ansible.builtin.inventory_hostnames', 'all') }}"
      limit: "{{ ansible_limit | default(omit) }}"
  delegate_to: localhost
  run_once: true
  register: report

- name: Fail when any node drifted, failed a check or was not checked
  ansible.builtin.fail:
    msg: "Drift on {{ report.summary.drifted_nodes | join(', ') }}"
  when: report.summary.drifted_nodes | length > 0
  run_once: true
"""

RETURN = r"""
summary:
  description: Fleet summary.
  returned: always
  type: dict
  contains:
    nodes:
      description: Number of nodes in the report.
      type: int
    drifted_nodes:
      description: Nodes with a concern in C(drift), C(error) or C(not_checked), a play-level error, or unreachable.
      type: list
      elements: str
    drift_items:
      description: Number of deviations found over all nodes (items of concerns in C(drift) and corrected ones).
      type: int
    corrected_items:
      description: Number of those that a fix run corrected (concerns with C(corrected)).
      type: int
    reboot_required:
      description: Nodes whose kernel command line awaits a reboot.
      type: list
      elements: str
    statuses:
      description: How many concerns over all nodes have each status.
      type: dict
    attention:
      description: Nodes whose verdict is not C(ok) (C(attention) or C(unreachable)).
      type: list
      elements: str
  sample: {"nodes": 2, "drifted_nodes": ["sim1"], "drift_items": 5, "corrected_items": 0, "reboot_required": [],
           "statuses": {"ok": 14, "drift": 2, "error": 0, "not_checked": 0, "not_applicable": 0},
           "attention": ["sim1"]}
report:
  description:
    - "The whole report (schema C(gpufabric.drift/v2)). C(generated) says when it was made (UTC ISO 8601);
      C(coverage) which inventory hosts it covers - C({hosts, inventory_hosts, pattern, limit, limited, left_out,
      complete}) (C(hosts) and C(inventory_hosts) are counts, C(left_out) the inventory hosts of the pattern not in
      the report; C(inventory_hosts), C(left_out) and C(complete) are null without O(scope)). C(nodes.<host>) holds C(concerns) (C({<concern>: {status,
      reason, items[, corrected]}}) for every managed concern), C(verdict) (C({status, reasons}), status C(ok),
      C(attention) or C(unreachable)), C(counts) (per status), C(drifted), C(items) and C(by_concern) (the
      deviations, derived from the concerns), C(reboot_required), C(unreachable), C(errors) and C(source)
      (C(concerns), C(drift) for an old caller's list, C(none))."
  returned: always
  type: dict
files:
  description: Paths of the report files.
  returned: always
  type: list
  elements: str
markdown:
  description: The Markdown text of the report.
  returned: always
  type: str
"""


import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as rpt
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", required=True),
            managed_concerns=dict(type="list", elements="str", choices=list(concerns.NAMES)),
            dest=dict(type="path", required=True),
            basename=dict(type="str", default="drift-report"),
            also_basenames=dict(type="list", elements="str", default=[]),
            generated=dict(type="str"),
            scope=rpt.SCOPE_SPEC,
            formats=dict(type="list", elements="str", choices=["json", "markdown"], default=["json", "markdown"]),
            title=dict(type="str", default="gpufabric drift report"),
            fixed=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module, text=("nodes",))
    p = module.params
    # a relative dest is the directory ansible-playbook runs in (the controller's), never the playbook's
    p["dest"] = os.path.abspath(p["dest"])
    try:
        inputs.file_name(p["basename"], "basename")
        for name in p["also_basenames"]:
            inputs.file_name(name, "also_basenames")
        if p["generated"] is not None:
            inputs.timestamp(p["generated"], "generated")
    except inputs.InputError as e:
        module.fail_json(msg=str(e))
    try:
        report = rpt.build(p["nodes"], p["managed_concerns"], fixed=p["fixed"], generated=p["generated"],
                           scope=p["scope"])
    except rpt.ReportError as e:
        module.fail_json(msg="cannot build the drift report: %s" % e)
    for host, error in rpt.unusable_nodes(report["nodes"]).items():
        module.warn("%s; the report shows it as an error, every other node as it is" % error)
    markdown = rpt.to_markdown(report, p["title"], fixed=p["fixed"])
    contents = {"json": rpt.to_json(report), "markdown": markdown}
    ext = {"json": ".json", "markdown": ".md"}
    files, changed = [], False
    try:
        for name in [p["basename"]] + [b for b in p["also_basenames"] if b != p["basename"]]:
            written, differs = rpt.write_files(Sysroot("/"), p["dest"], name,
                                               dict((f, contents[f]) for f in p["formats"]), ext, module.check_mode)
            files.extend(written)
            changed = changed or differs
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write the report files in %s: %s" % (p["dest"], e))
    module.exit_json(changed=changed, summary=report["summary"], report=report, files=files, markdown=markdown)


if __name__ == "__main__":
    main()
