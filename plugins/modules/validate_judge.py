#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: validate_judge
short_description: Judge the nodes' validation suites against their baselines and write the validation report
version_added: 0.3.0
description:
  - Judges the C(validation) document of M(gpufabric.node.fabric_validate) of every node once, on the controller,
    and returns each node's status of the C(performance) concern (C(ok), C(drift), C(error) or C(not_checked)).
  - Per run that expects the direct path - its path (a pass means fast B(and) on the intended path - a fallback
    is C(drift), a path not exercised or that the output cannot tell is C(not_checked), never a pass) and its
    bandwidth against the baseline of its own hardware profile (the fleet median and the node's own last good run,
    with O(tolerance)). A run on a profile without a baseline starts it and is C(not_checked) "not judged".
  - Per negative test - a run forced off the direct path (C(NCCL_NET_GDR_LEVEL=LOC), C(NCCL_IB_DISABLE=1), the
    remote NIC, host memory, GDS host buffer, compat mode) passes only when its verdict flips to that fallback and
    its bandwidth drops as the topology implies against its configured counterpart (docs/validate.md lists the
    rules and why); a pair that did not run is C(not_checked).
  - With O(earlier) (the canary of C(kernel_upgrade.yml)) - each run is compared with the same node's run before
    the upgrade; a bandwidth below it by more than O(tolerance), host CPU up by more than O(tolerance), a run that
    fails now or a path direct before and not now is C(drift) naming both (C(nodes.<host>.canary)).
  - Records the runs in the baseline store O(baseline_dir) (one JSON file per profile, a directory the user
    versions) and writes C(<basename>.json) and C(<basename>.md) in O(dest). Meant to run once, delegated to the
    controller (C(run_once), delegated to C(localhost)); the action plugin takes the nodes' documents from the
    play hosts' C(gpufabric_validation) when O(nodes) is not given, and joins relative directories to the
    directory C(ansible-playbook) runs in.
author:
  - gpufabric developers (@gpufabric)
options:
  nodes:
    description:
      - Inventory host name to its C(validation) document, or the registered result of
        M(gpufabric.node.fabric_validate) (its C(validation) is taken), or null for a node whose suite did not run
        (C(not_checked)). A result that failed is C(not_checked) with its message.
      - The action plugin fills it in from the play hosts' variable C(gpufabric_validation) when the task does not
        give it; the module itself needs it.
    type: dict
    required: true
  earlier:
    description: Inventory host name to the C(validation) document of the same node's earlier run (the canary's).
    type: dict
    default: {}
  baseline_dir:
    description:
      - The baseline store, a directory the user versions. A relative path is taken from the directory
        C(ansible-playbook) runs in. The action plugin's default is C(gpufabric_baseline_dir), else C(baselines).
    type: path
    required: true
  tolerance:
    description: The fraction a bandwidth may fall below its references (and host CPU rise) before it is drift.
    type: float
    default: 0.1
  record:
    description: Record the runs in the baseline store. Check mode records nothing.
    type: bool
    default: true
  dest:
    description:
      - Directory of the report files. The action plugin's default is C(gpufabric_report_dir), else C(reports).
    type: path
    required: true
  basename:
    description: File name of the report without extension.
    type: str
    default: validate-report
  generated:
    description: When the report was made, ISO 8601. Default - the current time, UTC.
    type: str
  title:
    description: Title of the Markdown report.
    type: str
    default: gpufabric validation report
attributes:
  check_mode:
    support: full
    description: In check mode every node is judged against the store as it is; nothing is recorded or written.
  diff_mode:
    support: none
    description: The report says what the judgement found.
  platform:
    support: N/A
    platforms: posix
    description: Runs on the controller.
  action:
    support: full
    description: The action plugin collects the nodes' documents and resolves relative directories.
"""

EXAMPLES = r"""
- name: Judge every node's validation suite once (the judge play of playbooks/validate.yml)
  gpufabric.node.validate_judge:
    baseline_dir: baselines
    tolerance: 0.1
  register: judged
  run_once: true
  delegate_to: localhost

- name: The canary - judge one node against its run before the upgrade
  gpufabric.node.validate_judge:
    nodes: "{{ {inventory_hostname: after.validation} }}"
    earlier: "{{ {inventory_hostname: before.validation} }}"
    basename: canary-report
  delegate_to: localhost
"""

RETURN = r"""
statuses:
  description: Inventory host name to its C(performance) status (C({status, reason, items})).
  returned: always
  type: dict
nodes:
  description:
    - Inventory host name to its judgement - C(status) (the performance concern), C(runs) (one row per run - id,
      expect, verdict, bandwidth, host CPU, baseline comparison, status, reason), C(negative) (the negative tests
      with their rule and why), C(canary) (the comparison with O(earlier), null without), C(profile_key),
      C(recorded) (the profile keys written to the store) and C(record) (the document to leave on the node in
      C(/var/lib/gpufabric/performance_verdict.json)).
  returned: always
  type: dict
regressed:
  description:
    - Nodes whose performance is C(drift) or C(error) (a regression, a fallback, a failed negative test). (Not
      C(failed), which would mark the task itself failed.)
  returned: always
  type: list
  elements: str
not_judged:
  description: Nodes whose performance is C(not_checked) (a new profile, a missing tool, no suite result).
  returned: always
  type: list
  elements: str
canary_failed:
  description: Nodes whose comparison with O(earlier) is C(drift) (the canary stops the rollout on these).
  returned: always
  type: list
  elements: str
files:
  description: Paths of the report files.
  returned: always
  type: list
  elements: str
markdown:
  description: The Markdown report.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import record as node_record
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.report import drift as rpt
from ansible_collections.gpufabric.node.plugins.module_utils.report import validate_md
from ansible_collections.gpufabric.node.plugins.module_utils.validate import baseline, judge


def _document(host, value):
    """(validation document or None, why not)."""
    if value is None:
        return None, None
    if isinstance(value, dict) and "schema" not in value and ("validation" in value or value.get("failed")
                                                              or value.get("skipped") or value.get("unreachable")):
        if value.get("unreachable"):
            return None, "not judged: the node was unreachable"
        if value.get("failed") or value.get("skipped"):
            return None, "not judged: the suite %s on the node: %s" % (
                "failed" if value.get("failed") else "was skipped", C.one_line(value.get("msg") or "no message"))
        value = value["validation"]
    return value, None


def judge_all(nodes, earlier, store, tolerance, record):
    """{host: judgement} of every node, in host order."""
    out = {}
    for host in sorted(nodes):
        doc, why = _document(host, nodes[host])
        if doc is None:
            out[host] = judge.missing(host, why)
            continue
        before = (earlier or {}).get(host)
        try:
            out[host] = judge.judge_node(doc, store, tolerance, earlier=before, record=record, host=host)
        except (judge.JudgeError, baseline.BaselineError) as e:
            out[host] = judge.unusable(host, e)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", required=True),
            earlier=dict(type="dict", default={}),
            baseline_dir=dict(type="path", required=True),
            tolerance=dict(type="float", default=baseline.DEFAULT_TOLERANCE),
            record=dict(type="bool", default=True),
            dest=dict(type="path", required=True),
            basename=dict(type="str", default="validate-report"),
            generated=dict(type="str"),
            title=dict(type="str", default="gpufabric validation report"),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module, text=("nodes", "earlier"))
    p = module.params
    p["dest"], p["baseline_dir"] = os.path.abspath(p["dest"]), os.path.abspath(p["baseline_dir"])
    try:
        inputs.file_name(p["basename"], "basename")
        if p["generated"] is not None:
            inputs.timestamp(p["generated"], "generated")
        if not 0 <= p["tolerance"] < 1:
            raise inputs.InputError("tolerance must be a fraction in [0, 1), not %r" % p["tolerance"])
        store = baseline.Store(p["baseline_dir"])
    except (inputs.InputError, baseline.BaselineError) as e:
        module.fail_json(msg=str(e))
    now = time.time()
    generated = p["generated"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    judged = judge_all(p["nodes"], p["earlier"], store, p["tolerance"], p["record"] and not module.check_mode)
    doc = judge.report(judged, generated, p["tolerance"], p["baseline_dir"])
    markdown = validate_md.to_markdown(doc, p["title"])
    try:
        files, changed = rpt.write_files(Sysroot("/"), p["dest"], p["basename"],
                                         {"json": rpt.to_json(doc), "markdown": markdown},
                                         {"json": ".json", "markdown": ".md"}, module.check_mode)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write the validation report in %s: %s" % (p["dest"], e))
    changed = changed or any(j["recorded"] for j in judged.values())   # each profile written got a run
    for j in judged.values():
        j["record"] = node_record.document(j["status"], now, j["profile_key"], files[0])
    module.exit_json(changed=changed, statuses=dict((h, j["status"]) for h, j in judged.items()), nodes=judged,
                     regressed=doc["failed"], not_judged=doc["not_judged"],
                     canary_failed=sorted(h for h, j in judged.items()
                                          if (j.get("canary") or {}).get("status") == C.DRIFT),
                     files=files, markdown=markdown)


if __name__ == "__main__":
    main()
