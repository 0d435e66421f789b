#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_cm_tos
short_description: Set the rdma_cm default RoCE ToS of the RDMA devices behind the rails
version_added: 0.1.0
description:
  - Writes C(/sys/kernel/config/rdma_cm/<ibdev>/ports/<port>/default_roce_tos) for every port of the RDMA devices
    behind the given rails (or of the given RDMA devices), so that connections set up through RDMA CM (NFS over
    RDMA, MPI, NCCL's connection setup) carry the DSCP of the lossless class.
  - When C(/sys/kernel/config/rdma_cm) is missing the module loads C(configfs) and C(rdma_cm) with C(modprobe -a) and
    mounts configfs on C(/sys/kernel/config); in check mode it only reports that it would.
  - Creates the configfs device group with C(mkdir) when needed (the kernel then creates C(ports/<n>/) showing the
    device's current value), writes the value when it differs, reads it back and fails when it differs. Creating the
    group alone is not a change (it only exposes the value), so a device without a group whose wanted ToS is 0 is
    C(ok).
  - A port without a configfs group runs with the kernel's default ToS 0 (rdma_cm sets it when it adds the device);
    check mode and RV(drift) read it so and RV(ports[].source) says where the value came from.
  - Each port is set on its own. When a device group cannot be created, its ports do not appear, or a value cannot
    be written or does not read back, the module goes on with the other ports and fails at the end naming every
    failed port; C(changed) and RV(results) say what was changed. A rail (or device) with a failed port keeps
    what C(state.json) recorded for it before.
  - The value is not persistent. It is reset to 0 whenever the RDMA device registers (boot, driver reload, firmware
    reset); removing the configfs group does not reset it. The module records the rails (or devices) and the ToS
    in the C(rdma_cm) section of C(/etc/gpufabric/state.json); the collection's boot-time applier re-applies them
    on the udev C(add) event of the RDMA device, using the same code.
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description:
      - Network interfaces of the RoCE rails (C(ens1np0)...). Every RDMA device port whose GID table names the rail is
        configured.
      - Mutually exclusive with O(devices); one of them is required.
    type: list
    elements: str
  devices:
    description:
      - RDMA device names (C(mlx5_0)...); every port of each device is configured.
      - Mutually exclusive with O(rails).
    type: list
    elements: str
  tos:
    description:
      - The IP ToS byte, 0..255. The DSCP is C(tos >> 2), the low two bits are ECN.
      - 106 is DSCP 26 with ECT(0) (ECN capable), 104 is DSCP 26 without ECN.
    type: int
    default: 106
  expected_dscp:
    description:
      - The DSCP the fabric's lossless class uses (C(dcb app ... dscp-prio)). When given and C(tos >> 2) differs,
        the module fails before anything is touched, naming both settings (C(roce_qos_tos)/I(tos) and
        C(roce_qos_dscp)/I(expected_dscp)). The filter P(gpufabric.node.desired_conflicts#filter) checks the same
        rule at the start of a play, together with the DSCP map and PFC priorities of M(gpufabric.node.dcb_qos).
    type: int
attributes:
  check_mode:
    support: full
    description: Reads the current values; writes nothing, loads no module, mounts nothing and creates no configfs
      group (ports whose group does not exist yet are reported with an unknown C(before)).
  diff_mode:
    support: full
    description: Before and after value of every configured port.
  platform:
    support: full
    platforms: posix
    description: Linux with RDMA devices and rdma_cm configfs support (C(CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS)).
notes:
  - Needs root.
"""

EXAMPLES = r"""
- name: Mark RDMA CM traffic of all rails with DSCP 26 and ECN
  gpufabric.node.rdma_cm_tos:
    rails: "{{ rail_netdevs }}"
    tos: 106
    expected_dscp: 26

- name: Configure two RDMA devices by name
  gpufabric.node.rdma_cm_tos:
    devices: [mlx5_0, mlx5_1]
    tos: 104
"""

RETURN = r"""
ports:
  description: One entry per configured device port.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: RDMA device.
      type: str
      sample: mlx5_0
    port:
      description: Port number.
      type: int
      sample: 1
    rail:
      description: The rail (network interface) of this port, when O(rails) was given.
      type: str
      sample: ens1np0
    before:
      description: Value before (the kernel default 0 for a port without a configfs group); null when the port failed
        before it could be read.
      type: int
      sample: 0
    source:
      description: Where RV(ports[].before) comes from - C(configfs), C(kernel default, no configfs group) or
        C(kernel default, no rdma_cm configfs) (check mode before loading rdma_cm); null when the port failed before
        it could be read.
      type: str
      sample: configfs
    after:
      description: Value after (in check mode, the value that would be set); as read back when the port failed.
      type: int
      sample: 106
    error:
      description: Why the port failed (naming C(<ibdev>/<port>)); null otherwise.
      type: str
results:
  description: One entry per port C(<ibdev>/<port>), also when the module fails; C(result) C(changed) (in check
    mode, would change), C(unchanged) or C(failed), C(error), C(changes) (C({key, before, after})).
  returned: always
  type: list
  elements: dict
  sample: [{"object": "mlx5_0/1", "result": "changed", "error": null,
            "changes": [{"key": "default_roce_tos", "before": 0, "after": 106}]}]
concerns:
  description: The status of concern C(rdma_cm) (see C(docs/concerns.md)), keyed by C(rdma_cm), with C(status), C(reason) and C(items);
    C(error) when the module fails, its items then carrying each port's C(result) and C(error).
  returned: always
  type: dict
  sample:
    rdma_cm:
      status: drift
      reason: "1 item(s) differ from the desired state: mlx5_0/1 default_roce_tos"
      items: [{"concern": "rdma_cm", "object": "mlx5_0/1", "key": "default_roce_tos", "current": 0, "desired": 106}]
configfs:
  description: C(present), C(loaded) (the module loaded rdma_cm/mounted configfs) or C(would load) (check mode).
  returned: always
  type: str
  sample: present
drift:
  description: Deviations found before applying (concern C(rdma_cm), object C(<ibdev>/<port>), key C(default_roce_tos)).
  returned: always
  type: list
  elements: dict
  sample: [{"concern": "rdma_cm", "object": "mlx5_0/1", "key": "default_roce_tos", "current": 0, "desired": 106}]
state_file:
  description: >-
    The collection's desired-state store; its C(rdma_cm) section records the rails or devices and the ToS given to
    this module, so the boot-time applier re-applies them after boot or driver reload.
  returned: always
  type: str
  sample: /etc/gpufabric/state.json
actions:
  description: What was done (or, in check mode, would be done), in words; C(created <group>) is listed but is not
    a change by itself.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import task as rdma_cm_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=rdma_cm_task.ARGUMENT_SPEC, mutually_exclusive=rdma_cm_task.MUTUALLY_EXCLUSIVE,
                           required_one_of=rdma_cm_task.REQUIRED_ONE_OF, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**rdma_cm_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
