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
  - Builds one report of the fleet from each node's concern statuses (the host fact C(gpufabric_concerns)), its
    C(gpufabric) facts, the pending reboot, whether GDS is wanted, warnings and play-level errors.
  - Every concern has one status - C(ok), C(drift), C(error), C(not_checked) or C(not_applicable) - with a one-line
    reason for all but C(ok); every managed concern a node did not report is C(not_checked) (an unreachable node -
    all of them). Only C(ok) reads as "as desired"; C(not_applicable) shows its reason, C(error) the error.
  - A node is C(ok) only when every concern is C(ok) or C(not_applicable), no reboot is pending and no warning stands
    that breaks a data path (translated IOMMU, cross-NUMA GPU/NIC pair, nvidia-fs missing where GDS is wanted,
    NVSwitches without a running Fabric Manager); any other node needs attention, with the reasons listed. The
    statuses and the verdict are computed by the code M(gpufabric.node.fabric_report) and
    M(gpufabric.node.fabric_metrics) use.
  - The HTML page is self-contained (inline CSS and SVG, no script, no external assets). At the top it says when it
    was made and which inventory hosts it covers, then one row per node with its verdict and a badge per concern,
    problem nodes first (unreachable, error, drift, not checked, other attention) and the ok nodes collapsed after
    them, with a filter by concern and status (radio buttons and CSS; it works in the static file). Per problem
    node (and per ok node, collapsed, while there are at most 50 of them) it lists the verdict's reasons, the status
    of every concern, the deviations, the GDS verdict with its reasons, the GPU kernel module flavour and the
    Fabric Manager state, draws the GPU/NIC/NUMA map (NUMA nodes as boxes, GPUs and RDMA NICs inside, one line per
    GPU/NIC pair coloured by the PCIe relation PIX/PXB/PHB/NODE/SYS, cross-NUMA pairs dashed) and lists the pairs
    with the ACS control of the bridges on their path. The layout holds from 1024 px wide up.
  - What changed since the last report (verdict, concern statuses, pairs, deviations, driver, Fabric Manager, IOMMU,
    GDS) is computed against the previous JSON report of the same name in O(dest); a C(gpufabric.fleet/v1) report
    is read too (it holds no concern statuses, so those are compared from the next report on).
  - Meant to run once on the controller (delegated to localhost, run once); see C(playbooks/report.yml).
  - The drift report of C(drift.yml) is M(gpufabric.node.fabric_report); both reports carry the same
    C(nodes.<host>.concerns) and C(nodes.<host>.verdict).
extends_documentation_fragment:
  - gpufabric.node.report_scope
author:
  - gpufabric developers (@gpufabric)
options:
  nodes:
    description:
      - Inventory host name to its data; every key is optional.
      - "C(concerns) (dict) - the host fact C(gpufabric_concerns), C({<concern>: {status, reason, items[,
        corrected]}}). Concern names and statuses are validated. A node whose data is wrongly shaped
        (a concern, the facts the report reads, a flag) is reported as an error naming what was wrong, with a
        warning; every other node is reported as it is."
      - C(facts) (dict) - the C(gpufabric) facts of M(gpufabric.node.gpufabric_facts); the map, the pairs and the
        data-path warnings of the verdict come from them.
      - "C(reboot_required) (bool), C(gds_wanted) (bool), C(errors) (list of str, play-level failures), C(warnings)
        (list of str, shown), C(unreachable) (bool; an unreachable node may pass only C({unreachable: true}))."
      - C(gds) (C({ok, reasons})) - the GDS verdict, shown with its reasons; it stands for the C(gds) concern when
        C(concerns) has none (C(ok), or C(drift) when the proof failed).
      - C(drift) (list of drift items) - old callers only, used when C(concerns) is missing - the concerns with items
        are C(drift), every other managed concern C(not_checked).
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
      - Directory of the report files (created when missing); a relative path is taken from the current directory
        (for a task delegated to the controller, the one C(ansible-playbook) runs in).
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
    description:
      - When the report was made, ISO 8601 (for example C(now(utc=true\))). Default - the current time, UTC (every
        report says when it was made).
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
      {{ dict(groups['all'] | zip(groups['all'] | map('extract', hostvars)
         | map(attribute='__report_node', default={'unreachable': true}))) }}
    managed_concerns: [cmdline, acs, dcb, rdma_cm, sysctl, routing, nccl, persistence, gds]
    dest: reports
    generated: "{{ now(utc=true).strftime('%Y-%m-%dT%H:%M:%SZ') }}"
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
  description:
    - C(nodes) (count), C(ok) and C(attention) (host names by verdict; unreachable nodes are in C(attention)),
      C(statuses) (how many concerns over the fleet have each status), C(drift_items), C(cross_numa_pairs),
      C(reboot_required) (host names).
  returned: always
  type: dict
  sample: {"nodes": 2, "ok": ["a"], "attention": ["b"], "drift_items": 3, "cross_numa_pairs": 2,
           "statuses": {"ok": 13, "drift": 2, "error": 0, "not_checked": 1, "not_applicable": 0},
           "reboot_required": ["b"]}
changes:
  description: Changes since the previous report (C({node, what, change})).
  returned: always
  type: list
  elements: dict
change_lines:
  description: The changes as lines of text naming the node and what changed (C(sim1 concern dcb - ok -> drift)).
  returned: always
  type: list
  elements: str
  sample: ["sim1 concern dcb: ok -> drift", "sim1 status: ok -> attention"]
files:
  description: Paths of the report files.
  returned: always
  type: list
  elements: str
report:
  description:
    - "The report (schema C(gpufabric.fleet/v2)). C(nodes.<host>) holds C(concerns) (C({<concern>: {status, reason,
      items[, corrected]}}) for every managed concern), C(verdict) (C({status, reasons}), status C(ok),
      C(attention) or C(unreachable)), C(status) (the verdict's), C(counts), C(drift) and C(by_concern) (the
      deviations, derived from the concerns), C(blocking) (the warnings that keep it from ok) and the facts the page
      shows. C(generated) says when it was made (UTC ISO 8601), C(coverage) which inventory hosts it covers
      (C({hosts, inventory_hosts, pattern, limit, limited, left_out, complete}), as M(gpufabric.node.fabric_report)
      returns it)."
  returned: always
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as report
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

EXT = {"html": ".html", "json": ".json", "markdown": ".md"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", required=True),
            managed_concerns=dict(type="list", elements="str", choices=list(concerns.NAMES)),
            dest=dict(type="path", required=True),
            basename=dict(type="str", default="fleet-report"),
            title=dict(type="str", default="gpufabric fleet report"),
            generated=dict(type="str"),
            scope=report.SCOPE_SPEC,
            formats=dict(type="list", elements="str", choices=list(EXT), default=list(EXT)),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module, text=("nodes",))
    p = module.params
    # a relative dest is the directory ansible-playbook runs in (the controller's), never the playbook's
    p["dest"] = os.path.abspath(p["dest"])
    try:
        inputs.file_name(p["basename"], "basename")
        if p["generated"] is not None:
            inputs.timestamp(p["generated"], "generated")
    except inputs.InputError as e:
        module.fail_json(msg=str(e))
    root = Sysroot("/")
    json_path = os.path.join(p["dest"], p["basename"] + ".json")
    previous = None
    text = root.read_raw(json_path)
    if text:
        try:
            previous = json.loads(text)
        except ValueError:
            module.warn("the previous report %s is not JSON; no changes are listed" % json_path)
        if previous is not None and (not isinstance(previous, dict)
                                     or previous.get("schema") not in fr.PREVIOUS_SCHEMAS):
            module.warn("%s is not a %s report; no changes are listed" % (json_path, " or ".join(fr.PREVIOUS_SCHEMAS)))
            previous = None
    try:
        rep = fr.build(p["nodes"], previous, p["title"], p["generated"], p["managed_concerns"], p["scope"])
    except fr.FleetReportError as e:
        module.fail_json(msg="cannot build the fleet report: %s" % e)
    for host, error in report.unusable_nodes(rep["nodes"]).items():
        module.warn("%s; the report shows it as an error, every other node as it is" % error)
    contents = {"html": fr.to_html(rep), "json": fr.to_json(rep), "markdown": fr.to_markdown(rep)}
    try:
        files, changed = report.write_files(root, p["dest"], p["basename"],
                                            dict((f, contents[f]) for f in p["formats"]), EXT, module.check_mode)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write the report files in %s: %s" % (p["dest"], e))
    module.exit_json(changed=changed, summary=rep["summary"], changes=rep["changes"],
                     change_lines=[fr.change_text(c) for c in rep["changes"]], files=files, report=rep)


if __name__ == "__main__":
    main()
