#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nccl_config
short_description: Render /etc/nccl.conf for the RoCE rails (HCAs, GID index, traffic class)
version_added: 0.1.0
description:
  - Writes the NCCL configuration file with C(NCCL_IB_HCA) (the rails' RDMA devices in the exact-match form
    C(=mlx5_0:1,mlx5_1:1,...)), C(NCCL_IB_GID_INDEX) (the RoCE v2 GID index holding each rail's IPv4 address,
    discovered from sysfs), C(NCCL_IB_TC) (the IP ToS byte of NCCL's RDMA traffic), and optionally
    C(NCCL_IB_FIFO_TC), C(NCCL_SOCKET_IFNAME) and extra variables.
  - The collection owns the file and rewrites it as a whole; lines it does not render are removed.
  - NCCL applies the file's lines without overwriting variables that are already set, so the process environment and
    C(~/.nccl.conf) take precedence over this file. Containers see it only when it is mounted into them.
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description: Network interfaces of the RoCE rails, in the order NCCL should list the HCAs.
    type: list
    elements: str
    required: true
  path:
    description: The file to write.
    type: path
    default: /etc/nccl.conf
  tc:
    description: C(NCCL_IB_TC), the IP ToS byte (0..255). Use the same value as rdma_cm_tos (106 = DSCP 26 + ECT(0)).
    type: int
    default: 106
  gid_index:
    description:
      - C(NCCL_IB_GID_INDEX). When not given it is discovered, and the module fails when the rails disagree or a rail
        has no RoCE v2 GID with an IPv4 address.
    type: int
  fifo_tc:
    description: C(NCCL_IB_FIFO_TC), the ToS of NCCL's small FIFO control messages (0..255). Not written when omitted.
    type: int
  expected_tos:
    description:
      - The rdma_cm default ToS of the rails (M(gpufabric.node.rdma_cm_tos) I(tos), C(roce_qos_tos)), 0..255. When
        given, I(tc) must agree with it, or the module fails before anything is touched.
      - C(NCCL_IB_TC) is the full traffic class byte (DSCP << 2 | ECN). A different DSCP (C(tc >> 2)) puts NCCL and
        RDMA CM traffic in different classes; the same DSCP with different ECN bits (104 against 106) is the same
        priority, but only the ECN-capable traffic can be ECN-marked for congestion control (DCQCN). Both fail.
      - Not written to the file.
    type: int
  socket_ifname:
    description: C(NCCL_SOCKET_IFNAME) (bootstrap/socket interface selection, NCCL syntax). Not written when omitted.
    type: str
  extra_vars:
    description:
      - Further variables written as C(NAME=value), sorted by name. Names must be upper-case environment variable
        names and must not be one of the variables above.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reports what would change and the drift; writes nothing and runs no mutating command.
  diff_mode:
    support: full
    description: Diff of the NCCL configuration file.
  platform:
    support: full
    platforms: posix
    description: Linux with RDMA devices behind the rails.
"""

EXAMPLES = r"""
- name: NCCL uses the eight rails with DSCP 26 + ECN
  gpufabric.node.nccl_config:
    rails: "{{ rail_netdevs }}"
    tc: 106
    socket_ifname: "=bond0"

- name: Write a per-job file with an explicit GID index
  gpufabric.node.nccl_config:
    rails: [ens1np0, ens2np0]
    path: /opt/jobs/nccl.conf
    gid_index: 3
    extra_vars:
      NCCL_IB_QPS_PER_CONNECTION: 4
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
  sample: /etc/nccl.conf
variables:
  description: The variables in the file, in file order.
  returned: always
  type: dict
  sample: {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}
rails:
  description: Per rail its RDMA device, port and discovered RoCE v2 IPv4 GID index.
  returned: always
  type: list
  elements: dict
  sample: [{"rail": "ens1np0", "device": "mlx5_0", "port": 1, "gid_index": 3}]
concerns:
  description: The status of concern C(nccl) (see C(docs/concerns.md)), keyed by C(nccl), with C(status), C(reason) and C(items);
    C(drift) in check mode when the file differs, C(ok) otherwise (C(corrected) after a real run rewrote it);
    C(error) when the module fails.
  returned: always
  type: dict
  sample: {"nccl": {"status": "ok", "reason": null, "items": []}}
drift:
  description: Variables whose value differs (concern C(nccl), object the file, key the variable; desired null for a
    line that would be removed).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import task as nccl_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=nccl_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**nccl_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
