#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dcb_qos
short_description: DSCP trust, DSCP to priority map, PFC and ETS of RoCE rails with iproute2 dcb
version_added: 0.1.0
description:
  - Reads the DCB state of every rail from the running kernel over rtnetlink (one C(RTM_GETDCB) IEEE request per
    rail, in the module's process, reading what C(dcb -j) reads without a process). What the kernel does not
    answer (no such device, a driver without DCB) is read with one C(dcb -j -b) batch process (one process per
    object and rail only when the batch fails, which also yields the precise error). It compares that with the
    requested state and runs the fewest C(dcb) commands that make them equal, then reads every changed rail back
    the same way and fails when it does not read back as requested.
  - C(dcb -V) runs only when a rail's driver is not mlx5 (the C(dcb apptrust) probe needs the version) or when the
    batch read fails (to report a missing or too old iproute2 as such).
  - C(dcb pfc set) is never run on a rail whose enabled PFC priorities already equal I(pfc_priorities), because on mlx5
    a change of the PFC enable mask toggles the port link. PFC on a priority I(pfc_priorities) does not list is drift
    (the priority should be lossy), fixed by that one C(pfc set) to exactly I(pfc_priorities).
  - The priorities in I(pfc_priorities) are the lossless priorities. A DSCP that I(dscp_map) does not name but the rail
    maps into a lossless priority (DSCP 10 on priority 3 when only 26 -> 3 is wanted; traffic nobody marked lossless
    would land in the PFC class) is always drift, one item per DSCP, removed with C(dcb app del dev X dscp-prio 10:3);
    mlx5 then maps that DSCP to priority 0. What happens to the other APP entries is I(other_app_entries).
  - "Settings that contradict each other fail before anything is touched, with a message naming both settings:
    I(trust=pcp) with DSCP entries; in DSCP trust, PFC on priority 0 (every DSCP without an entry lands there) and a PFC
    priority that no I(dscp_map) entry maps a DSCP to (only mapped DSCPs reach it, dcb_qos removes any other). The
    filter P(gpufabric.node.desired_conflicts#filter) checks the same rules across roles at the start of a play."
  - On mlx5 the port trusts DSCP as soon as it has a DSCP APP entry (the driver then lists all 64 DSCP entries,
    priority = DSCP >> 3 by default); C(dcb apptrust) is not supported by that driver. When the module switches an mlx5
    port from PCP to DSCP trust it writes the whole table in one C(dcb app add) (the wanted entries, every other DSCP
    at DSCP >> 3, the firmware default) and deletes what must not stay in a lossless priority, because the firmware
    mapping of the DSCPs nobody set cannot be read while the port trusts PCP, and upstream mlx5 lists only the entries
    added. Where the driver supports C(dcb apptrust) (iproute2 6.2 or later), the module also sets the trust order.
  - Each rail is configured on its own. When a rail cannot be read, a command fails on it or it does not read back
    as requested, the module goes on with the other rails and fails at the end with a message naming every failed
    rail; C(changed) then says whether any rail was changed and RV(results) what happened to each.
  - The module records the requested state in the C(dcb) section of C(/etc/gpufabric/state.json), merged per rail;
    the rails of this run get the new settings, every other recorded rail keeps its record (a run on 2 of 4 rails
    leaves the other 2 as they were recorded), and a rail that failed keeps what was recorded for it before, so the
    boot-time applier re-applies to every rail what it has. A rail leaves the record only with I(state=absent).
  - The DCB state is runtime state, lost at reboot and driver reload; the boot-time applier re-applies it with the
    same code.
author:
  - gpufabric developers (@gpufabric)
requirements:
  - iproute2 5.12 or later (C(dcb app)); 6.2 or later for C(dcb apptrust).
options:
  rails:
    description: Network interfaces (netdev names) of the RoCE rails.
    type: list
    elements: str
    required: true
  dscp_map:
    description:
      - DSCP to priority entries. A DSCP can appear once.
      - DSCP entries the list does not name are removed when they map into a priority of I(pfc_priorities) (always),
        and otherwise kept or removed as I(other_app_entries) says.
      - Defaults to DSCP 26 on priority 3 when I(trust=dscp) and to no entries when I(trust=pcp).
    type: list
    elements: dict
    suboptions:
      dscp:
        description: DSCP value, 0..63.
        type: int
        required: true
      priority:
        description: IEEE 802.1p priority, 0..7.
        type: int
        required: true
  pfc_priorities:
    description: Priorities that have PFC enabled; every other priority has PFC disabled. An empty list disables PFC.
    type: list
    elements: int
    default: [3]
  other_app_entries:
    description:
      - What to do with the APP entries I(dscp_map) does not name, other than DSCPs mapped into a lossless priority
        (a priority of I(pfc_priorities)), which are always drift and removed.
      - C(keep) leaves DSCPs mapped to lossy priorities and the entries of the other selectors (ethtype, default,
        stream/dgram port, pcp) alone; they do not classify traffic into the PFC class. With I(trust=dscp) a driver
        with C(dcb apptrust) is set to trust only DSCP, so the other selectors do not classify at all.
      - C(remove) makes the APP table exactly I(dscp_map) (C(dcb app del) of every other entry, one drift item each).
        mlx5 accepts DSCP entries only, and maps a deleted DSCP to priority 0.
    type: str
    choices: [keep, remove]
    default: keep
  trust:
    description:
      - C(dscp) classifies by the DSCP of the IP header (RoCE v2), C(pcp) by the VLAN tag.
      - With C(pcp) the DSCP APP entries are removed (on mlx5 that is what returns the port to PCP trust).
    type: str
    choices: [dscp, pcp]
    default: dscp
  dcbx:
    description:
      - Who owns DCB on the rail. C(host) makes the host the owner in IEEE mode (C(dcb dcbx set dev X host ieee)), so
        that neither a switch's DCBX nor the NIC firmware's LLDP agent can replace PFC and trust; a rail whose mode
        lacks C(host) or C(ieee), or has C(lld-managed), is drift (key C(dcbx)). A C(cee) bit beside C(host ieee) is
        left alone (mlx5 reports it after every driver load). The host takes over first, before the other commands;
        a rail taken over is read again and the rest is planned from that read (the handover can change ETS, PFC and
        APP). Check mode takes nothing over.
      - On mlx5 a rail the host does not own shows C(cee ieee) (the firmware's DCBX agent is in charge); the driver
        refuses C(lld-managed). A driver that does not answer C(dcb dcbx show) is left alone (RV(rails[].dcbx_error)
        says why).
      - C(keep) leaves the DCBX mode alone.
    type: str
    choices: [host, keep]
    default: host
  state:
    description:
      - C(present) configures the rails and records them for the boot-time applier.
      - C(absent) removes the rails from the record in C(/etc/gpufabric/state.json), so the boot-time applier no
        longer re-applies DCB to them; it runs no C(dcb) command and leaves their runtime DCB as it is. The rails need
        not exist (a NIC that was removed can be forgotten); the other options are ignored.
    type: str
    choices: [present, absent]
    default: present
  ets:
    description:
      - ETS configuration. Left alone when omitted.
    type: dict
    suboptions:
      tc_tsa:
        description: Transmission selection algorithm of TC 0..7 (C(strict), C(ets), C(cbs), C(vendor)).
        type: list
        elements: str
        required: true
      tc_bw:
        description: Bandwidth percentage of TC 0..7; must sum to 100 when any TC uses C(ets).
        type: list
        elements: int
        required: true
      prio_tc:
        description: Traffic class of priority 0..7.
        type: list
        elements: int
        required: true
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode reads the state and reports the commands it would run; it runs no C(dcb) command that writes.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
    details: Linux with DCB-capable NICs (mlx5) and iproute2 C(dcb).
notes:
  - Runs C(dcb) from C(PATH) with C(LC_ALL=C).
  - I(other_app_entries) is not yet recorded in C(/etc/gpufabric/state.json), so the boot-time applier re-applies with
    C(keep); a rebooted mlx5 port then keeps the firmware-default entries of lossy priorities until the next run of
    this module with C(remove).
  - On upstream mlx5, a port switched to DSCP trust outside this module keeps firmware mappings for DSCPs it does not
    list, which C(dcb) cannot read; the module sees (and fixes) only listed entries there.
seealso:
  - name: dcb-app(8)
    description: iproute2 dcb app manual page.
    link: https://man7.org/linux/man-pages/man8/dcb-app.8.html
"""

EXAMPLES = r"""
- name: RoCE v2 on DSCP 26 / priority 3 with PFC on priority 3 on all rails
  gpufabric.node.dcb_qos:
    rails: "{{ rail_netdevs }}"

- name: Report drift only
  gpufabric.node.dcb_qos:
    rails: [ens1np0, ens2np0]
  check_mode: true
  register: dcb_state

- name: The APP table holds exactly the map (no other DSCP or selector entries)
  gpufabric.node.dcb_qos:
    rails: "{{ rail_netdevs }}"
    other_app_entries: remove

- name: DSCP 26 and 48 with ETS 50/50 between TC 0 and TC 3
  gpufabric.node.dcb_qos:
    rails: [ens1np0]
    dscp_map:
      - {dscp: 26, priority: 3}
      - {dscp: 48, priority: 6}
    pfc_priorities: [3]
    ets:
      tc_tsa: [ets, strict, strict, ets, strict, strict, strict, strict]
      tc_bw: [50, 0, 0, 50, 0, 0, 0, 0]
      prio_tc: [0, 1, 2, 3, 4, 5, 6, 7]

- name: The boot-time applier no longer configures a removed NIC's rail
  gpufabric.node.dcb_qos:
    rails: [ens4np0]
    state: absent
"""

RETURN = r"""
changed:
  description: Whether any dcb command was run (or, in check mode, would be run).
  returned: always
  type: bool
state_file:
  description: The collection's desired-state store whose C(dcb) section the boot-time applier re-applies.
  returned: always
  type: str
  sample: /etc/gpufabric/state.json
commands:
  description: Every dcb command run (or that check mode would run), as argument lists; after a failure, the
    commands run up to and including the failing one on each rail.
  returned: always
  type: list
  elements: list
  sample: [["dcb", "app", "add", "dev", "ens1np0", "dscp-prio", "26:3"]]
rails:
  description: Per-rail result.
  returned: always
  type: list
  elements: dict
  contains:
    rail:
      description: Netdev name.
      type: str
    driver:
      description: Driver of the netdev from sysfs, null when unknown.
      type: str
    apptrust_supported:
      description: Whether dcb apptrust works on this rail.
      type: bool
    before:
      description: State read before applying (trust, dscp_prio of the requested DSCPs, dscp_entries, pfc, ets, and dcbx,
        the DCBX flags as C(dcb dcbx show) prints them, null when not read).
      type: dict
    dcbx_error:
      description: Why the DCBX mode of the rail could not be read (the driver has no getdcbx); null otherwise.
      type: str
    after:
      description: State read back after applying (in check mode, the predicted state).
      type: dict
    commands:
      description: dcb commands planned for this rail.
      type: list
      elements: list
    changed:
      description: Whether this rail was changed (in check mode, would be), also in part before a failure.
      type: bool
    result:
      description: C(changed) (in check mode, would change), C(unchanged) or C(failed).
      type: str
    error:
      description: Why the rail failed (naming the rail and the command); null otherwise.
      type: str
    changes:
      description: What changed on the rail as read back (in check mode, what would), C({key, before, after}).
      type: list
      elements: dict
  sample:
    - rail: ens1np0
      driver: mlx5_core
      apptrust_supported: false
      before: {trust: pcp, dscp_prio: {"26": null}, dscp_entries: 0, pfc: []}
      after: {trust: dscp, dscp_prio: {"26": 3}, dscp_entries: 64, pfc: [3]}
      commands: [["dcb", "app", "add", "dev", "ens1np0", "dscp-prio", "26:3"],
                 ["dcb", "pfc", "set", "dev", "ens1np0", "prio-pfc", "all:off", "3:on"]]
      changed: true
results:
  description: One entry per rail, also when the module fails. C(object) the rail, C(result) C(changed) (in check
    mode, would change), C(unchanged) or C(failed), C(error) null or why it failed, C(changes) what changed on it as
    read back (C({key, before, after}); a failed rail may have changed in part).
  returned: always
  type: list
  elements: dict
  sample:
    - {object: ens1np0, result: changed, error: null, changes: [{key: pfc, before: [], after: [3]}]}
    - {object: ens5np0, result: failed, changes: [],
       error: "dcb pfc set dev ens5np0 prio-pfc all:off 3:on failed on rail ens5np0 (rc=1): Attribute write: ..."}
concerns:
  description:
    - The status of concern C(dcb) (see C(docs/concerns.md)), keyed by C(dcb), with C(status), C(reason) and C(items).
    - C(drift) in check mode when something differs, C(ok) otherwise (with C(corrected) after a real run corrected
      items), C(error) when the module fails; after a partial apply its items carry each rail's C(result) and
      C(error).
  returned: always
  type: dict
  sample: {"dcb": {"status": "ok", "reason": "corrected 2 item(s)", "items": [], "corrected": true}}
drift:
  description:
    - Deviations found before applying, one per rail and key (dcbx, trust, dscp_prio:<dscp>, pfc, ets; with
      I(other_app_entries=remove) also <selector>_prio:<pid> such as ethtype_prio:0x8915, port_prio:4791, pcp_prio:3nd
      and default_prio).
    - An extra DSCP in a lossless priority has C(desired) null (no entry), or the priorities it keeps on a generic
      driver that lists several for one DSCP.
  returned: always
  type: list
  elements: dict
  sample:
    - {concern: dcb, object: ens1np0, key: "dscp_prio:26", current: null, desired: 3}
    - {concern: dcb, object: ens1np0, key: pfc, current: [], desired: [3]}
    - {concern: dcb, object: ens2np0, key: "dscp_prio:10", current: 3, desired: null}
    - {concern: dcb, object: ens2np0, key: pfc, current: [3, 4], desired: [3]}
lldpad:
  description:
    - A host lldpad (open-lldp DCBX agent) that can rewrite the rails' DCB - C(pids) of running processes and
      C(enabled) systemd unit links; null when there is none. When found the concern C(dcb) is C(drift) (also after a
      fix run) with a drift item of object and key C(lldpad); the module does not stop it.
  returned: always
  type: dict
  sample: {"pids": [812], "enabled": []}
dcb_version:
  description:
    - iproute2 version of the dcb binary, when it was queried (C(dcb -V)); null when no rail needed it (all rails
      mlx5 and the batch read worked).
  returned: always
  type: str
  sample: 6.1.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import task as dcb_task
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=dcb_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**dcb_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
