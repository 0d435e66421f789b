#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: roce_ecn
short_description: ECN/DCQCN of RoCE rails - notification and reaction point on the lossless priority, CNP class
version_added: 0.2.0
description:
  - Enables the ECN notification point (NP, the receiver that answers ECN-marked packets with CNPs) and reaction
    point (RP, the sender that slows down on CNPs) of DCQCN on the lossless priority of every rail, and sets the DSCP
    and 802.1p priority of the CNPs, where the driver exposes them. Only the lossless priority is managed; the NP/RP
    state of the other priorities is left as it is (and reported).
  - MLNX_OFED/DOCA's mlx5 driver exposes C(/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>) and
    C(roce_np/cnp_dscp), C(roce_np/cnp_802p_prio). The inbox (upstream) mlx5 driver exposes the CNP DSCP and
    priority in debugfs, C(/sys/kernel/debug/mlx5/<pci function>/cc_params/np_cnp_dscp), C(np_cnp_prio),
    C(np_cnp_prio_mode), and no per-priority NP/RP enable. There DCQCN runs on the priorities set in the firmware's
    C(ROCE_CC_PRIO_MASK_P<port>), which the module reads (never writes) with C(mlxconfig) (NVIDIA MFT) or
    C(mstconfig) (mstflint) where installed. The bit of I(priority) cleared is drift the module cannot fix (item
    C(firmware_cc_prio:<prio>), with the C(mlxconfig set) and firmware reset it needs); without either tool the
    concern C(ecn) is C(not_checked) with how to check. See C(docs/ecn.md).
  - A rail with neither (Soft-RoCE, virtio, another vendor's NIC, an inbox mlx5 rail without debugfs) is skipped;
    when no rail has the controls the concern C(ecn) is C(not_applicable) with the reason.
  - Under kernel lockdown (integrity or confidentiality mode, as under UEFI Secure Boot) debugfs refuses the inbox
    driver's C(cc_params) files; such a rail is neither read nor written, RV(rails[].not_checked) says why, and the
    concern C(ecn) is C(not_checked) (not an error) with the lockdown mode and how to check.
  - Each rail is configured on its own; every written value is read back. A rail that cannot be read, written or
    does not read back fails and the module goes on with the others, then fails naming every failed rail.
  - The values are runtime state of the device, lost at reboot and driver reload. The module records the rails and
    settings in the C(ecn) section of C(/etc/gpufabric/state.json) (not after a failed rail, nor when no rail has
    ECN controls); the collection's
    boot-time applier re-applies them at boot and on the udev C(add) event of the RDMA device, with the same code.
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description: Network interfaces (netdev names of the physical functions) of the RoCE rails.
    type: list
    elements: str
    required: true
  priority:
    description: The lossless priority (the one with PFC) whose NP and RP are enabled.
    type: int
    default: 3
  cnp_dscp:
    description: DSCP of the CNPs the notification point sends, 0..63. Left alone when null.
    type: int
    default: 48
  cnp_priority:
    description: 802.1p priority of the CNPs, 0..7 (on the inbox driver also sets C(np_cnp_prio_mode) 0, so the
      priority is used). Left alone when null.
    type: int
    default: 6
attributes:
  check_mode:
    support: full
    description: Reads every control and reports what would change; writes nothing.
  diff_mode:
    support: full
    description: The managed controls of every rail before and after, and the C(ecn) section of the state file.
  platform:
    support: full
    platforms: posix
    description: Linux with mlx5 RoCE rails.
notes:
  - Needs root (the inbox driver's debugfs files are mode 0600).
"""

EXAMPLES = r"""
- name: DCQCN on priority 3, CNPs on DSCP 48 / priority 6
  gpufabric.node.roce_ecn:
    rails: "{{ rail_netdevs }}"

- name: Report ECN drift only
  gpufabric.node.roce_ecn:
    rails: [ens1np0, ens2np0]
  check_mode: true
  register: ecn_state
"""

RETURN = r"""
rails:
  description: One entry per rail.
  returned: always
  type: list
  elements: dict
  contains:
    rail:
      description: Netdev name.
      type: str
    source:
      description: C(sysfs) (MLNX_OFED/DOCA), C(debugfs) (inbox mlx5 cc_params) or null (no controls).
      type: str
    reason:
      description: Why the rail has no controls; null otherwise.
      type: str
    not_checked:
      description: What could not be read on the rail and how to check it (kernel lockdown; on the inbox driver the
        firmware's per-priority enable when mlxconfig/mstconfig is missing or fails); null otherwise.
      type: str
    firmware:
      description: Inbox driver only (null otherwise) - the firmware's per-priority DCQCN enable as read
        (C(status) ok/not_checked, C(enabled), C(mask), C(key), C(tool), C(reason)).
      type: dict
    before:
      description: The managed controls as read before (C(np_enable:<prio>), C(rp_enable:<prio>), C(cnp_dscp),
        C(cnp_priority), C(cnp_priority_mode) on debugfs; null means not exposed).
      type: dict
    after:
      description: As read back (in check mode, predicted).
      type: dict
    error:
      description: Why the rail failed; null otherwise.
      type: str
  sample: [{"rail": "ens1np0", "source": "sysfs", "reason": null, "error": null,
            "before": {"source": "sysfs", "np_enable:3": false, "rp_enable:3": true, "cnp_dscp": 48, "cnp_priority": 6},
            "after": {"source": "sysfs", "np_enable:3": true, "rp_enable:3": true, "cnp_dscp": 48, "cnp_priority": 6}}]
drift:
  description: Deviations found before applying (concern C(ecn), object the rail, key C(np_enable:<prio>),
    C(rp_enable:<prio>), C(cnp_dscp), C(cnp_priority), C(cnp_priority_mode); object the state file, key C(ecn),
    when the recorded settings differ).
  returned: always
  type: list
  elements: dict
  sample: [{"concern": "ecn", "object": "ens1np0", "key": "np_enable:3", "current": false, "desired": true}]
results:
  description: One entry per rail, also when the module fails (C(object), C(result) changed/unchanged/failed,
    C(error), C(changes)).
  returned: always
  type: list
  elements: dict
state_file:
  description: The collection's desired-state store whose C(ecn) section the boot-time applier re-applies.
  returned: always
  type: str
  sample: /etc/gpufabric/state.json
concerns:
  description: The status of concern C(ecn) (see C(docs/concerns.md)), keyed by C(ecn), with C(status), C(reason) and
    C(items); C(not_applicable) when no rail has ECN controls, C(error) when the module fails.
  returned: always
  type: dict
  sample: {"ecn": {"status": "ok", "reason": "corrected 1 item(s)", "items": [], "corrected": true}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import task as ecn_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=ecn_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**ecn_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
