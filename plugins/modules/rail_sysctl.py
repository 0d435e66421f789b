#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rail_sysctl
short_description: ARP, reverse-path filter and per-rail source routing for RoCE rails on one subnet
version_added: 0.1.0
description:
  - Sets C(arp_ignore), C(arp_announce) and C(rp_filter) under C(/proc/sys/net/ipv4/conf/) for C(all), C(default)
    and each rail. Values are read first and only differing ones are written.
  - Persists the same settings in C(/etc/sysctl.d/90-gpufabric-rails.conf). The collection owns that file and rewrites
    it as a whole. systemd-sysctl applies it at boot and, through systemd's udev rule for new network interfaces, when
    a rail appears later.
  - The kernel uses C(max(all, <iface>)) for these three settings, so C(all) always gets the same values as the rails.
  - Each setting is written on its own. When one cannot be written or does not read back, the module goes on with
    the others (and with routing), and fails at the end naming every failed setting; C(changed) and RV(results)
    say what was changed. The file keeps the line it had for a failed setting, so the boot applies what the
    interface has.
  - With O(routing=true) each rail gets its own routing table (O(routing_table_base) + position of the rail in
    O(rails)) holding the rail's connected subnet route with the rail address as source (and a default route via
    the rail's gateway when one is given), and an C(ip rule from <rail address> lookup <table>). Routes and rules of
    these tables that are not desired are removed. The desired state is recorded in C(/etc/gpufabric/routing.json)
    (referenced from the C(routing) section of C(/etc/gpufabric/state.json)), from which the collection's boot-time
    applier re-applies it with the same code after a reboot.
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description: Network interfaces of the RoCE rails. Must exist and be legal interface names; no duplicates.
    type: list
    elements: str
    required: true
  arp_ignore:
    description: C(arp_ignore) value; 1 answers ARP only for addresses of the receiving interface.
    type: int
    default: 1
    choices: [0, 1, 2, 3, 4, 5, 6, 7, 8]
  arp_announce:
    description: C(arp_announce) value; 2 always uses the best local source address of the outgoing interface.
    type: int
    default: 2
    choices: [0, 1, 2]
  rp_filter:
    description:
      - C(rp_filter) value. 2 (loose) is the usual choice for RoCE rails on one subnet; 0 is needed by VAST's
        C(localports=) mount option. 1 (strict) drops replies arriving on another rail.
      - Applied to C(all) too, because the kernel uses C(max(all, <iface>)).
    type: int
    default: 2
    choices: [0, 1, 2]
  routing:
    description: Manage per-rail policy routing (tables and rules). When false, existing routing is left alone.
    type: bool
    default: false
  routing_table_base:
    description: Table number of the first rail; rail N gets base + N. The range must avoid tables 253, 254 and 255.
    type: int
    default: 100
  routing_rule_priority:
    description: Priority of the C(from <rail address> lookup <table>) rules, 1..32765.
    type: int
    default: 1000
  routing_gateways:
    description: Optional default gateway per rail (rail name to IPv4 address inside the rail's subnet).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads the live values, netlink routes and rules and the files; writes nothing.
  diff_mode:
    support: full
    description: >-
      Live values before/after, the diff of C(/etc/sysctl.d/90-gpufabric-rails.conf) and, with O(routing), of the
      routing state file and the netlink routes/rules added or removed.
  platform:
    support: full
    platforms: posix
    description: Linux. Run in the network namespace that holds the rails.
requirements:
  - pyroute2 (only with O(routing=true))
notes:
  - Needs root.
"""

EXAMPLES = r"""
- name: ARP and loose reverse-path filtering on all rails, with per-rail source routing
  gpufabric.node.rail_sysctl:
    rails: [ens1np0, ens2np0, ens3np0, ens4np0]
    routing: true

- name: VAST localports needs rp_filter 0
  gpufabric.node.rail_sysctl:
    rails: "{{ rail_netdevs }}"
    rp_filter: 0
"""

RETURN = r"""
settings:
  description: Values after the run per interface (C(all), C(default), rails) and key.
  returned: always
  type: dict
  sample: {"all": {"arp_announce": 2, "arp_ignore": 1, "rp_filter": 2}}
effective_rp_filter:
  description: The reverse-path filter the kernel applies per rail, C(max(all, rail)).
  returned: always
  type: dict
  sample: {"ens1np0": 2}
path:
  description: The sysctl.d file.
  returned: always
  type: str
  sample: /etc/sysctl.d/90-gpufabric-rails.conf
routing:
  description: Per-rail tables (rail, table, address, prefixlen, network, gateway) and the actions taken.
  returned: when O(routing=true)
  type: dict
results:
  description: One entry per setting, also when the module fails; C(object) the sysctl key
    (C(net.ipv4.conf.<iface>.<key>)), C(result) C(changed) (in check mode, would change), C(unchanged) or
    C(failed), C(error), C(changes) (C(key) C(value), C(before), C(after)).
  returned: always
  type: list
  elements: dict
  sample: [{"object": "net.ipv4.conf.ens1np0.rp_filter", "result": "changed", "error": null,
            "changes": [{"key": "value", "before": 1, "after": 2}]}]
concerns:
  description:
    - The status of concerns C(sysctl) and C(routing) (see C(docs/concerns.md)), keyed by C(sysctl) and C(routing).
    - C(routing) is C(not_applicable) with O(routing=false) when nothing of an earlier run's per-rail routing is
      left, C(drift) when C(/etc/gpufabric/routing.json) or the C(routing) section of C(state.json) is still there
      (the boot-time applier re-applies it; this module leaves existing routing alone).
    - C(error) for a concern that failed; C(sysctl) items then carry each setting's C(result) and C(error).
  returned: always
  type: dict
  sample: {"sysctl": {"status": "ok", "reason": null, "items": []},
           "routing": {"status": "not_applicable", "reason": "per-rail routing is off (routing: false) and nothing
                       of an earlier run is left to remove", "items": []}}
drift:
  description: >-
    Deviations found before applying: concern C(sysctl) (object the interface, key the setting; or object the file)
    and concern C(routing) (object the rail or table, key the route or rule).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import task as rail_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

# pyroute2 costs ~100 ms to import: it is loaded only when routing is requested (load_iproute), never for the
# sysctl-only default. Tests may set IPRoute to a factory of their own.
IPRoute = None


def load_iproute():
    """The IPRoute class (or the factory set in IPRoute) and None; (None, traceback) without pyroute2."""
    if IPRoute is not None:
        return IPRoute, None
    return rail_task.import_iproute()


def main():
    module = AnsibleModule(argument_spec=rail_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**rail_task.run(module, Sysroot(), load_iproute))


if __name__ == "__main__":
    main()
