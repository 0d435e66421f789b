#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_counters
short_description: Per-priority RoCE counters of the rails (snapshot, delta) and the fabric acceptance verdict
version_added: 0.1.0
description:
  - B(Snapshot mode) (O(rails)) reads C(ethtool -S) once per rail (C locale) and returns the mlx5 per-priority
    counters C(rx_prio{p}_bytes|packets|discards), C(tx_prio{p}_bytes|packets) and, for priorities with PFC
    enabled, C(rx_prio{p}_pause) and C(tx_prio{p}_pause), and the congestion counters of the rail's RDMA port
    (C(/sys/class/infiniband/<dev>/ports/<n>/hw_counters/) C(np_ecn_marked_roce_packets), C(np_cnp_sent),
    C(rp_cnp_handled), C(rp_cnp_ignored)). Given O(previous) (the snapshot of an earlier call), it
    also returns the increase since then, and with O(role) the verdict of each rail for that role.
  - B(Evaluate mode) (O(plan) and O(deltas)) runs no command; it judges a whole incast test from the deltas of all
    participants, normally on the controller. Every participant's rail must carry at least O(min_bytes) in
    O(priority) in its data direction (senders tx, receiver and storage client rx), priority 0 must stay within
    O(flat_tolerance_bytes), no other priority may move, the receiver may not discard in the priority, PFC must be
    on for it, and when two or more senders share a receiver rail pause frames must appear on that rail.
  - Failures name the host, the rail, the reason and the likely cause.
author:
  - gpufabric developers (@gpufabric)
options:
  rails:
    description: Network interfaces to read (snapshot mode).
    type: list
    elements: str
  previous:
    description: A snapshot returned by an earlier call (its C(snapshot)); the result then has C(delta).
    type: dict
  role:
    description:
      - Role of this node in the test; with O(previous) each rail gets a verdict for it.
      - C(sender) checks tx, C(receiver) rx, C(storage) rx (the array's marking) and that tx priority 0 stays flat.
    type: str
    choices: [sender, receiver, storage]
  plan:
    description:
      - Evaluate mode. One entry per rail of the test, C({rail, participants}) where each participant is
        C({host, netdev, role}).
    type: list
    elements: dict
  deltas:
    description: Evaluate mode. Host name to the C(delta) its snapshot call returned.
    type: dict
  errors:
    description: Evaluate mode. Host name to a mapping of netdev to the message of a test tool that failed on it.
    type: dict
    default: {}
  priority:
    description: The lossless priority the traffic must land in.
    type: int
    default: 3
  min_bytes:
    description: Least number of bytes in O(priority) a participant's rail must show.
    type: int
    default: 1048576
  flat_tolerance_bytes:
    description: Bytes priority 0 (and any other priority) may move without failing the test.
    type: int
    default: 1048576
  expect_pause:
    description:
      - Require a congestion signal on rails where two or more senders share one receiver (incast) - pause frames
        in O(priority) on any participant, or ECN activity (CE-marked RoCE packets received and CNPs sent, summed
        over the participants' RDMA ports), since DCQCN that works keeps the queue below the pause threshold. A rail
        with neither fails (C(no_pause_under_incast)).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: The module only reads counters; it behaves the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux with mlx5 ports (C(ethtool -S) per-priority counters).
notes:
  - mlx5 shows pause counters only for priorities with PFC enabled; their absence fails the test with C(pfc_off).
  - A counter that went down between the snapshots means the device was reset; the rail fails with
    C(counters_reset).
"""

EXAMPLES = r"""
- name: Counters before the test
  gpufabric.node.fabric_counters:
    rails: [ens1np0, ens2np0]
  register: before

- name: Counters after the test, with the delta and this sender's verdict
  gpufabric.node.fabric_counters:
    rails: [ens1np0, ens2np0]
    previous: "{{ before.snapshot }}"
    role: sender
  register: after

- name: Judge the whole incast test on the controller
  gpufabric.node.fabric_counters:
    plan:
      - rail: rail0
        participants:
          - {host: node1, netdev: ens1np0, role: receiver}
          - {host: node2, netdev: ens1np0, role: sender}
          - {host: node3, netdev: ens1np0, role: sender}
    deltas: "{{ dict(['node1', 'node2', 'node3'] | zip(['node1', 'node2', 'node3'] | map('extract', hostvars, ['after', 'delta']))) }}"
  delegate_to: localhost
  run_once: true
  register: acceptance
"""

RETURN = r"""
snapshot:
  description: Snapshot mode. C({schema, time, rails{netdev{prio{"0".."7"{rx_bytes, rx_packets, rx_discards, tx_bytes,
    tx_packets, rx_pause, tx_pause, ...}}, pfc_counters, rdma{np_ecn_marked_roce_packets, np_cnp_sent,
    rp_cnp_handled, rp_cnp_ignored} (null with C(rdma_error) when unreadable)}}}).
  returned: when O(rails) is given
  type: dict
delta:
  description: Increase since O(previous), same shape plus C(reset) (and C(rdma_reset)) per rail and C(interval_s).
  returned: when O(previous) is given
  type: dict
verdict:
  description: Maps each rail to its failures for O(role), a list of dicts with C(reason) and C(detail); an empty
    list means the rail passed.
  returned: when O(previous) and O(role) are given
  type: dict
acceptance:
  description: Evaluate mode. C({ok, priority, rails[{rail, ok, incast, pause_frames, participants[{host, netdev,
    role, ok, failures, hint, bytes_in_priority, bytes_in_priority0, pauses, congestion}], failures,
    congestion{np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, rp_cnp_ignored, read, ecn_acted}}],
    failures[{rail, host,
    netdev, role, reasons, message}], failed["host/netdev"]}).
  returned: when O(plan) is given
  type: dict
markdown:
  description: Evaluate mode. The verdict as a Markdown table.
  returned: when O(plan) is given
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import counters
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            rails=dict(type="list", elements="str"),
            previous=dict(type="dict"),
            role=dict(type="str", choices=list(counters.ROLES)),
            plan=dict(type="list", elements="dict"),
            deltas=dict(type="dict"),
            errors=dict(type="dict", default={}),
            priority=dict(type="int", default=3),
            min_bytes=dict(type="int", default=counters.DEFAULT_MIN_BYTES),
            flat_tolerance_bytes=dict(type="int", default=counters.DEFAULT_FLAT_TOLERANCE),
            expect_pause=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("rails", "plan"), ("previous", "plan"), ("role", "plan")],
        required_one_of=[("rails", "plan")],
        required_together=[("plan", "deltas")],
        supports_check_mode=True,
    )
    inputs.guard(module)
    p = module.params
    if not 0 <= p["priority"] <= 7:
        module.fail_json(msg="priority must be 0..7, got %d" % p["priority"])
    if p["min_bytes"] < 0 or p["flat_tolerance_bytes"] < 0:
        module.fail_json(msg="min_bytes and flat_tolerance_bytes must not be negative")
    if p["plan"] is not None:
        try:
            result = counters.evaluate(p["plan"], p["deltas"], p["priority"], p["min_bytes"],
                                       p["flat_tolerance_bytes"], p["expect_pause"], p["errors"])
        except (counters.CountersError, KeyError, TypeError) as e:
            module.fail_json(msg="cannot judge the acceptance test: %s" % e)
        module.exit_json(changed=False, acceptance=result, markdown=counters.to_markdown(result))

    run = CommandRunner(module, required=True)

    try:
        counters.validate_rails(p["rails"])
        snap = counters.snapshot(run, p["rails"], sysroot=Sysroot())
    except counters.CountersError as e:
        module.fail_json(msg=str(e))
    out = dict(changed=False, snapshot=snap)
    if p["previous"] is not None:
        try:
            out["delta"] = counters.delta(p["previous"], snap)
        except (counters.CountersError, KeyError, TypeError, ValueError) as e:
            module.fail_json(msg="previous is not a snapshot of this module: %s" % e)
        if p["role"]:
            out["verdict"] = dict(
                (rail, counters.check_rail(out["delta"]["rails"].get(rail), p["role"], p["priority"],
                                           p["min_bytes"], p["flat_tolerance_bytes"]))
                for rail in p["rails"])
    module.exit_json(**out)


if __name__ == "__main__":
    main()
