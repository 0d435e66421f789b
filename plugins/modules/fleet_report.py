#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_report
short_description: Write the fleet report for people (one static HTML page with SVG maps, JSON, Markdown)
version_added: 0.1.0
description:
  - Builds one report of the fleet from each node's C(gpufabric) facts, the drift items the roles export
    (C(<role>_drift)), an optional GPUDirect Storage verdict and errors.
  - The HTML page is self-contained (inline CSS and SVG, no script, no external assets). Per node it draws the
    GPU/NIC/NUMA map (NUMA nodes as boxes, GPUs and RDMA NICs inside, one line per GPU/NIC pair coloured by the PCIe
    relation PIX/PXB/PHB/NODE/SYS, cross-NUMA pairs dashed), lists the pairs with the ACS control of the bridges on
    their path, the configured state against the desired one per concern, the GDS verdict with its reasons, the GPU
    kernel module flavour and the Fabric Manager state.
  - What changed since the last report is computed against the previous JSON report of the same name in O(dest).
  - Meant to run once on the controller (delegated to localhost, run once); see C(playbooks/report.yml).
  - The drift report of C(drift.yml) is M(gpufabric.node.fabric_report); this module reuses its normalisation.
author:
  - gpufabric developers (@gpufabric)
options:
  nodes:
    description:
      - Inventory host name to its data. Keys per node, all optional; C(facts) (the C(gpufabric) facts of
        M(gpufabric.node.gpufabric_facts)), C(drift) (list of drift items; leave it out when the node was not
        checked), C(gds) (C({ok, reasons})), C(errors) (list of str), C(warnings) (list of str), C(unreachable)
        (bool), C(reboot_required) (bool).
    type: dict
    required: true
  dest:
    description: Directory of the report files (created when missing).
    type: path
    required: true
  basename:
    description: File name without extension.
    type: str
    default: fleet-report
  title:
    description: Title of the report.
    type: str
    default: gpufabric fleet report
  generated:
    description: Time stamp shown in the report (for example C(now(utc=true\))); left out, the report carries none
      and an unchanged fleet gives unchanged files.
    type: str
  formats:
    description: Which files to write.
    type: list
    elements: str
    choices: [html, json, markdown]
    default: [html, json, markdown]
attributes:
  check_mode:
    support: full
    description: In check mode the report is built and returned but no file is written.
  diff_mode:
    support: none
    description: The report files are outputs, not managed configuration.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller.
"""

EXAMPLES = r"""
- name: Write the fleet report
  gpufabric.node.fleet_report:
    nodes: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '__node_report'))) }}
    dest: "{{ playbook_dir }}/../reports"
    generated: "{{ now(utc=true).isoformat() }}"
  delegate_to: localhost
  run_once: true
  register: fleet

- name: Where it is
  ansible.builtin.debug:
    msg: "{{ fleet.files }}"
  run_once: true
"""

RETURN = r"""
summary:
  description: C({nodes, ok, attention, drift_items, cross_numa_pairs}).
  returned: always
  type: dict
  sample: {"nodes": 2, "ok": ["a"], "attention": ["b"], "drift_items": 3, "cross_numa_pairs": 2}
changes:
  description: Changes since the previous report (C({node, what, change})).
  returned: always
  type: list
  elements: dict
files:
  description: Paths of the report files.
  returned: always
  type: list
  elements: str
report:
  description: The report (schema C(gpufabric.fleet/v1)).
  returned: always
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils import fleet_report as fr
from ansible_collections.gpufabric.node.plugins.module_utils import report
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

EXT = {"html": ".html", "json": ".json", "markdown": ".md"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", required=True),
            dest=dict(type="path", required=True),
            basename=dict(type="str", default="fleet-report"),
            title=dict(type="str", default="gpufabric fleet report"),
            generated=dict(type="str"),
            formats=dict(type="list", elements="str", choices=list(EXT), default=list(EXT)),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["basename"] or "/" in p["basename"] or p["basename"] in (".", ".."):
        module.fail_json(msg="basename must be a plain file name without '/', got %r" % p["basename"])
    root = Sysroot("/")
    json_path = os.path.join(p["dest"], p["basename"] + ".json")
    previous = None
    text = root.read_raw(json_path)
    if text:
        try:
            previous = json.loads(text)
        except ValueError:
            module.warn("the previous report %s is not JSON; no changes are listed" % json_path)
        if previous is not None and (not isinstance(previous, dict) or previous.get("schema") != fr.SCHEMA):
            module.warn("%s is not a %s report; no changes are listed" % (json_path, fr.SCHEMA))
            previous = None
    try:
        rep = fr.build(p["nodes"], previous, p["title"], p["generated"])
    except fr.FleetReportError as e:
        module.fail_json(msg="cannot build the fleet report: %s" % e)
    contents = {"html": fr.to_html(rep), "json": fr.to_json(rep), "markdown": fr.to_markdown(rep)}
    try:
        files, changed = report.write_files(root, p["dest"], p["basename"],
                                            dict((f, contents[f]) for f in p["formats"]), EXT, module.check_mode)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write the report files in %s: %s" % (p["dest"], e))
    module.exit_json(changed=changed, summary=rep["summary"], changes=rep["changes"], files=files, report=rep)


if __name__ == "__main__":
    main()
