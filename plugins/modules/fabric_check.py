#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_check
short_description: Check every concern of a GPU node in one read-only module execution
version_added: 0.2.0
description:
  - Discovers the node once (what M(gpufabric.node.gpufabric_facts) reports) and evaluates every concern of the
    collection's concern list with the code of the concern modules (M(gpufabric.node.kernel_cmdline),
    M(gpufabric.node.pcie_acs), M(gpufabric.node.dcb_qos), M(gpufabric.node.rdma_cm_tos),
    M(gpufabric.node.roce_ecn), M(gpufabric.node.rail_sysctl), M(gpufabric.node.rail_mtu),
    M(gpufabric.node.nccl_config), M(gpufabric.node.fabric_persist), M(gpufabric.node.nfs_mounts),
    M(gpufabric.node.fabric_health)) in check mode, with the options the roles pass them. Each concern gets the
    status, reason and items its role's check gives.
  - The desired state is the roles' variables, resolved once on the controller by the action plugin (every role's
    C(defaults/main.yml) overlaid with the host's variables and templated, plus the constant tables of the roles'
    C(vars/main.yml) the checks read). O(desired) replaces that document when given.
  - Read-only, always. It writes nothing, runs no command that changes the node and takes no node lock, in check
    mode or not; C(changed) is always false, because nothing is ever changed. Fix drift with the roles
    (C(playbooks/drift.yml -e gpufabric_fix=true) runs them for the drifted concerns only).
  - A concern whose module code fails gets its own C(error) status; the other concerns still report. Settings that
    contradict each other make every concern C(error) before anything is read. The module fails only on a
    desired-state document it cannot read.
  - The GPUDirect Storage and vendor NFS client proofs move data; when O(concerns) asks for C(gds) or
    C(vendor_client) they are C(not_checked). C(performance) (the validation suite of C(playbooks/validate.yml))
    moves data too; when asked for, it is the status C(validate.yml) recorded on the node, with its age, and
    C(not_checked) without a record.
author:
  - gpufabric developers (@gpufabric)
options:
  desired:
    description:
      - The desired state, keyed by role variable name (C(iommu_mode), C(roce_qos_dscp), ...) plus the roles'
        constant tables (C(__iommu_mode_args), ...). The action plugin fills it in from the roles' defaults and the
        host's variables when it is not given.
    type: dict
  concerns:
    description: The concerns to check (names of the concern list); default the core concerns.
    type: list
    elements: str
  gds_wanted:
    description:
      - Whether GPUDirect Storage is wanted on the node (a missing nvidia-fs is then a warning of the report). The
        action plugin takes it from C(gpufabric_gds_wanted) when not given and returns it; the node never sees it.
    type: bool
attributes:
  check_mode:
    support: full
    description: The module never changes anything; check mode changes nothing about what it does.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff; the items of each concern say what differs.
  platform:
    support: full
    platforms: posix
    description: Linux nodes (sysfs, configfs, iproute2).
  action:
    support: full
    description: The action plugin resolves the desired state on the controller.
notes:
  - Needs root to read what the concern modules read (configfs, DCB, the boot loader's configuration).
"""

EXAMPLES = r"""
- name: Check every concern of the node in one call
  gpufabric.node.fabric_check:
  register: check

- name: Check two concerns against a given desired state
  gpufabric.node.fabric_check:
    concerns: [dcb, rdma_cm]
    desired: "{{ my_desired_document }}"
"""

RETURN = r"""
concerns:
  description: The status of each checked concern (see C(docs/concerns.md)), C({status, reason, items}).
  returned: always
  type: dict
  sample: {"dcb": {"status": "drift", "reason": "1 item(s) differ from the desired state: ens1np0 pfc",
                   "items": [{"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}]}}
facts:
  description: The node's gpufabric facts (what M(gpufabric.node.gpufabric_facts) returns as C(gpufabric)).
  returned: always
  type: dict
warnings:
  description: Discovery's warnings (what M(gpufabric.node.gpufabric_facts) returns as C(warnings_found)).
  returned: always
  type: list
  elements: str
module_warnings:
  description: The warnings the concern modules' code gave, each prefixed with the module's name.
  returned: always
  type: list
  elements: str
reboot_required:
  description: The boot loader has kernel arguments the running kernel lacks (iommu or ACS).
  returned: always
  type: bool
errors:
  description: Play-level failures the report lists (discovery).
  returned: always
  type: list
  elements: str
gds_wanted:
  description: O(gds_wanted), as the action plugin resolved it.
  returned: always
  type: bool
schema:
  description: The result's schema.
  returned: always
  type: str
  sample: gpufabric.check/v1
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
# the node payload's entry points: importing them makes AnsiballZ ship every file of node_payload.NODE_PAYLOAD,
# whose sources the persistence concern installs and checks
# pylint: disable-next=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier, evidence_timer  # noqa: F401
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired
from ansible_collections.gpufabric.node.plugins.module_utils.concern_model import ConcernError
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def shown_warnings(res):
    """Each warning once: discovery's, then the concern bodies' own; discovery's warnings again as the facts body's
    (``gpufabric_facts: ...``, from the check's discovery) are not repeated."""
    found = set(res["warnings"])
    out = []
    for w in res["warnings"] + res["module_warnings"]:
        name, _sep, text = w.partition(": ")
        if w in out or (name == "gpufabric_facts" and text in found):
            continue
        out.append(w)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            desired=dict(type="dict"),
            concerns=dict(type="list", elements="str"),
            gds_wanted=dict(type="bool"),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    if p["desired"] is None:
        module.fail_json(msg="desired is missing: run the module through its action plugin, which resolves it")
    try:
        res = node_check.evaluate(p["desired"], Sysroot(), module, p["concerns"])
    except (node_desired.DesiredError, ConcernError) as e:
        module.fail_json(msg=str(e))
    for w in shown_warnings(res):
        module.warn(w)
    module.exit_json(changed=False, gds_wanted=bool(p["gds_wanted"]), **res)


if __name__ == "__main__":
    main()
