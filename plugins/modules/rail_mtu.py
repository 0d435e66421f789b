#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rail_mtu
short_description: MTU of the RoCE rails, live and persisted, and the active MTU of their RDMA ports
version_added: 0.1.0
description:
  - Sets the netdev MTU of every rail with C(ip link set dev <rail> mtu <n>) when it differs, and reads it back. A
    RoCE LAG bond gets it on the bond (the kernel passes it on to the slaves); a slave that still differs is set
    directly.
  - Refuses, before anything is touched, an MTU below 4200 (RoCE needs the netdev MTU to hold a 4096-byte path MTU
    plus 96 bytes of RoCE v2 headers), above the device's C(max_mtu) (C(ip -d link show); for a bond, its slaves'),
    or a rail that does not exist.
  - Persists it where the rail's owner keeps it. systemd-networkd (its runtime state names the rail's network
    file) gets the drop-in C(/etc/systemd/network/<file>.network.d/gpufabric-mtu.conf) with C([Link] MTUBytes=),
    then C(networkctl reload) when the drop-in changed.
    netplan (the network file or the NetworkManager keyfile is netplan's) gets C(/etc/netplan/90-gpufabric-mtu.yaml).
    NetworkManager gets C(802-3-ethernet.mtu) on the rail's connection (C(nmcli connection modify)), then
    C(nmcli device reapply <rail>) so the device's applied connection agrees (no re-activation). A rail nobody
    owns is recorded in C(/etc/gpufabric/state.json) for the boot-time applier, which sets it with the same code.
    So is a rail of ifupdown (installed, with an C(iface) stanza for the rail in C(/etc/network/interfaces) or a
    file it sources); the module does not edit that file, and a stanza whose C(mtu) option differs makes the
    concern C(drift), naming the line to write there.
  - Reads the active MTU of each rail's RDMA port with C(ibv_devinfo) (mainline sysfs has no MTU attribute for
    ports). A port whose active MTU is below 4096 although its netdev MTU carries 4096 makes the concern C(drift), as
    nothing this module sets can fix it (the port's max MTU or firmware holds it down).
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description: Network interfaces of the RoCE rails (a bond for a RoCE LAG). Must exist; no duplicates.
    type: list
    elements: str
    required: true
  mtu:
    description: The netdev MTU of every rail, 4200..65535 and at most the device's C(max_mtu).
    type: int
    default: 9000
  persist:
    description:
      - Record the MTU where the rail's owner keeps it (or for the boot-time applier).
      - False sets it live only and leaves what an earlier run recorded as it is.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads the links, the owners' state and the files; writes nothing and changes nothing.
  diff_mode:
    support: full
    description: The live MTU before and after and the diff of every file written.
  platform:
    support: full
    platforms: posix
    description: Linux. Run in the network namespace that holds the rails.
requirements:
  - iproute2 (C(ip) with C(-j)); C(ibv_devinfo) to read the RDMA ports' active MTU; C(nmcli) where NetworkManager
    owns a rail.
notes:
  - Needs root. The live MTU is set now; networkd and NetworkManager are told as above, netplan is not applied
    (its file takes effect at the next boot).
"""

EXAMPLES = r"""
- name: Jumbo frames on all rails
  gpufabric.node.rail_mtu:
    rails: [ens1np0, ens2np0, ens3np0, ens4np0]

- name: A smaller MTU that still carries a 4096-byte RoCE path MTU, live only
  gpufabric.node.rail_mtu:
    rails: "{{ rail_netdevs }}"
    mtu: 4200
    persist: false
"""

RETURN = r"""
mtu:
  description: The MTU of every rail and bond slave after the run (in check mode, as it would be).
  returned: always
  type: dict
  sample: {"ens1np0": 9000}
owners:
  description: Who keeps each rail's MTU across reboots (C(networkd), C(netplan), C(networkmanager), C(ifupdown),
    C(applier)), with the network file, netplan id, NetworkManager connection UUID or ifupdown file
    (C(interfaces_file)) and its C(mtu) option (C(interfaces_mtu), null without one).
  returned: when O(persist=true)
  type: list
  elements: dict
  sample: [{"rail": "ens1np0", "owner": "applier", "network_file": null, "netplan_id": null, "nm_uuid": null,
            "interfaces_file": null, "interfaces_mtu": null, "kind": null}]
rdma_ports:
  description: The RDMA ports of the rails with C(max_mtu), C(active_mtu) (null with C(reason) where C(ibv_devinfo)
    cannot read them) and C(expected), the path MTU the netdev MTU allows.
  returned: always
  type: list
  elements: dict
  sample: [{"rail": "ens1np0", "ibdev": "mlx5_0", "port": 1, "max_mtu": 4096, "active_mtu": 4096, "expected": 4096,
            "readable": true, "reason": null}]
warnings_mtu:
  description: One line per RDMA port whose active MTU is below 4096 although its netdev MTU carries 4096.
  returned: always
  type: list
  elements: str
files:
  description: The files the module manages (path, changed).
  returned: always
  type: list
  elements: dict
results:
  description: One entry per rail (and NetworkManager connection), also when the module fails; C(result) C(changed)
    (in check mode, would change), C(unchanged) or C(failed), C(error), C(changes).
  returned: always
  type: list
  elements: dict
concerns:
  description: The status of concern C(mtu) (see C(docs/concerns.md)).
  returned: always
  type: dict
  sample: {"mtu": {"status": "ok", "reason": null, "items": []}}
drift:
  description: Deviations found before applying (object the rail, slave, file or RDMA port; key C(mtu),
    C(MTUBytes), C(NetworkManager 802-3-ethernet.mtu), C(active_mtu) or the state section).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import task as mtu_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=mtu_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**mtu_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
