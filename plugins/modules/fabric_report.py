#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_report
short_description: Write the fleet drift report (JSON and Markdown) from the modules' drift lists
description:
  - Aggregates the C(drift) lists that the gpufabric modules return per node (concern, object, setting, current,
    desired) into one fleet report, written as JSON and Markdown.
  - "Meant to run once on the controller (C(delegate_to: localhost), C(run_once: true)) at the end of C(drift.yml)."
  - Files are written atomically and only when their content changes.
version_added: 0.1.0
author:
  - gpufabric developers (@gpufabric)
options:
  nodes:
    description:
      - Mapping of inventory host name to its results.
      - Each value may hold C(drift) (list of drift items), C(reboot_required) (bool), C(errors) (list of strings)
        and C(unreachable) (bool).
    type: dict
    required: true
  dest:
    description: Directory the report files are written to (created when missing).
    type: path
    required: true
  basename:
    description: File name without extension.
    type: str
    default: drift-report
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
      - The drift lists come from a fix run; the items are what was corrected (nodes are marked C(FIXED)).
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
    nodes: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '__gpufabric_node_result'))) }}"
    dest: "{{ playbook_dir }}/../reports"
  delegate_to: localhost
  run_once: true
  register: report

- name: Fail when any node drifted
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
      description: Nodes with drift, errors or unreachable.
      type: list
      elements: str
    drift_items:
      description: Number of drift items over all nodes.
      type: int
    reboot_required:
      description: Nodes whose kernel command line awaits a reboot.
      type: list
      elements: str
  sample: {"nodes": 2, "drifted_nodes": ["sim1"], "drift_items": 5, "reboot_required": []}
report:
  description: The whole report (schema C(gpufabric.drift/v1)).
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


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils import report as rpt
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", required=True),
            dest=dict(type="path", required=True),
            basename=dict(type="str", default="drift-report"),
            formats=dict(type="list", elements="str", choices=["json", "markdown"], default=["json", "markdown"]),
            title=dict(type="str", default="gpufabric drift report"),
            fixed=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["basename"] or "/" in p["basename"]:
        module.fail_json(msg="basename must be a plain file name without '/', got %r" % p["basename"])
    try:
        report = rpt.build(p["nodes"])
    except rpt.ReportError as e:
        module.fail_json(msg="cannot build the drift report: %s" % e)
    markdown = rpt.to_markdown(report, p["title"], fixed=p["fixed"])
    contents = {"json": rpt.to_json(report), "markdown": markdown}
    ext = {"json": ".json", "markdown": ".md"}
    try:
        files, changed = rpt.write_files(Sysroot("/"), p["dest"], p["basename"],
                                         dict((f, contents[f]) for f in p["formats"]), ext, module.check_mode)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write the report files in %s: %s" % (p["dest"], e))
    module.exit_json(changed=changed, summary=report["summary"], report=report, files=files, markdown=markdown)


if __name__ == "__main__":
    main()
