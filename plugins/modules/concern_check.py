#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: concern_check
short_description: Check one read-only concern of a node by name
version_added: 0.4.0
description:
  - Runs the check of a read-only concern (one whose spec in C(plugins/module_utils/concerns/<name>/spec.py) has a
    read-only body) and returns its status, so such a concern needs no module of its own. The one-call check
    (M(gpufabric.node.fabric_check)) runs the same body.
  - The read-only concerns are C(pcie_link) and C(gpudirect_rdma) (the M(gpufabric.node.fabric_health) body, which
    gives both) and C(fabric_manager) (Fabric Manager running and the NVLink state on a node with NVSwitches).
  - O(options) are the body's own options, validated before it runs.
  - Check mode and a real run behave the same; C(changed) is always false.
author:
  - gpufabric developers (@gpufabric)
options:
  concern:
    description: The name of a read-only concern (see C(docs/concerns.md)).
    type: str
    required: true
  options:
    description: The options of the concern's read-only body (for C(pcie_link), those of M(gpufabric.node.fabric_health)).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux with sysfs and procfs.
"""

EXAMPLES = r"""
- name: Fabric Manager and the NVLink state
  gpufabric.node.concern_check:
    concern: fabric_manager
  register: fm

- name: PCIe links, judging the GPUs' speed too
  gpufabric.node.concern_check:
    concern: pcie_link
    options:
      pcie_link:
        gpu_idle_speed: check
"""

RETURN = r"""
concerns:
  description: The status of the concern (and of any other concern the same body gives) - C(status), C(reason), C(items).
  returned: always
  type: dict
  sample: {"pcie_link": {"status": "ok", "reason": null, "items": []},
           "gpudirect_rdma": {"status": "ok", "reason": "DMA-BUF (usable: dmabuf)", "items": []}}
fabric_manager:
  description: For C(fabric_manager), the discovery facts - C(needed) (NVSwitches present), C(running), C(pids).
  returned: when O(concern=fabric_manager)
  type: dict
nvlink:
  description: For C(fabric_manager), each GPU's links from C(nvidia-smi nvlink --status) - C(gpu), C(name), C(uuid),
    C(links) (C(link), C(state) active, inactive or unknown, C(gbps), C(raw)); empty when it was not read.
  returned: when O(concern=fabric_manager)
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.check import concern_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=concern_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**concern_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
