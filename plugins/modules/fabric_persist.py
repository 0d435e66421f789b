#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_persist
short_description: Install the boot-time applier that re-applies runtime-only fabric settings
version_added: 0.1.0
description:
  - Installs C(gpufabric-apply), which re-applies what the collection's modules recorded in
    C(/etc/gpufabric/state.json) (DCB, rdma_cm default RoCE ToS, ACS, nvidia-fs C(rw_stats_enabled), per-rail
    routing), the settings the kernel forgets at reboot and, for ToS and DCB, whenever an RDMA device registers again.
  - The applier runs the very module_utils this module was shipped with. The module writes their source, taken from
    its own payload, below O(lib_dir) (C(ansible_collections/gpufabric/node/plugins/module_utils/)), so the node
    always runs the same code as the modules. What it writes is the node payload, an explicit list
    (C(module_utils/boot/node_payload.py)) of every file the applier and the evidence timer import, none of which
    imports Ansible, since they run with the node's own Python. Files of that directory that are not in the list
    are removed.
  - Writes a oneshot unit C(gpufabric-apply.service) (enabled, C(WantedBy=multi-user.target)), ordered after
    C(network-online.target) (routing needs the rail addresses) and before remote file systems (NFS over RDMA),
    C(kubelet.service) and C(slurmd.service), so workloads start with the fabric configured.
  - Writes a template unit C(gpufabric-apply@.service) and a udev rule that starts it with
    C(systemctl --no-block restart gpufabric-apply@<ibdev>.service) on every C(add) event of an RDMA device.
    The template passes the instance as it is (C(%i)); the rule starts it for device names of the characters
    C([A-Za-z0-9_.-]) (C(mlx5_0), C(mlx5-bond0), C(rxe-eth0)), the only names the modules record state for.
    The work runs in a service, not in udev's C(RUN) (which udev kills when the event is done and runs in a
    sandbox that forbids mounting configfs); C(restart) rather than C(start) guarantees a fresh run after a
    registration that happens while an earlier run of the same device is still going.
  - Every real run of the applier, like every module that writes node state, holds the node lock
    C(/run/gpufabric/lock) (C(module_utils/host/nodelock.py)); the units pass C(--lock-wait 120), and a run that cannot
    get the lock in that time fails naming the holder. Their C(TimeoutStartSec) leaves room for that wait.
    This module holds the lock too while it surveys and fixes the installed files.
  - Runs C(systemctl daemon-reload) when a unit changed, C(systemctl unmask) when a mask hides the boot unit,
    C(systemctl enable) when it is not enabled and C(udevadm control --reload) when the rule changed.
  - Every file is written atomically (temp file in the same directory, owner and mode set on it, fsync, rename,
    fsync of the directory) and only when its content, mode or owner differs.
  - Reports the boot-time persistence concern (C(concerns.persistence)). Each of these is a C(drift) item, in check
    mode as in a real run (which corrects it and proves it by reading the node again); a real run changes
    nothing that is already right.
  - C(content) of the script, of each library file, of the units and of the udev rule; C(type) where a symlink or
    anything but a regular file stands in for one of them. A library file that is no longer part of the collection,
    and a symlink planted in the library or in C(/etc/gpufabric), is C(present) where C(absent) is desired (a real
    run removes it; the modules record their state again on their next run).
  - C(unit_file_state) of C(gpufabric-apply.service) when it is not C(enabled) (C(disabled), C(masked),
    C(masked-runtime), C(enabled-runtime), C(static), C(not-found)), as C(systemctl is-enabled) prints it or,
    without systemctl, as the unit file layout says (the first entry of the unit's name in the unit search path,
    a symlink to C(/dev/null) or an empty file being a mask; enablement symlinks in
    C(/etc/systemd/system/*.wants|*.requires), in C(/run/systemd/system/...) for C(enabled-runtime)).
  - C(owner) and C(mode) where anything root runs at boot (the script, the library, its directories and bytecode,
    the units, the rule, C(/etc/gpufabric) and its files) is not owned by 0:0 or is writable by group or others (the
    installed files also have their exact mode, 0755 for the script, 0644 for the rest). Every directory on the way
    from C(/) must be owned by root and not writable by others (nor by a group other than root's). A real run
    restores owner and mode of the collection's own paths (O(lib_dir) and everything below it, C(/etc/gpufabric) and
    its files, the installed files) but never changes a directory the collection does not own (C(/etc),
    C(/usr/local/sbin), the unit and rule directories); those stay C(drift), and the reason names them.
  - The installed applier runs the same check (C(module_utils/concerns/persistence/guard.py)) on its own script, its library and the
    recorded state before it does anything; it logs one line per file that fails it and exits with code 3.
author:
  - gpufabric developers (@gpufabric)
options:
  state:
    description:
      - C(present) installs, C(absent) disables the boot unit and removes every file this module installs
        (the recorded state in C(/etc/gpufabric) is kept).
    type: str
    choices: [present, absent]
    default: present
  python:
    description:
      - Interpreter of the C(gpufabric-apply) script. Defaults to the interpreter that runs this module (the
        node's Python as Ansible discovered it). It needs C(pyroute2) only when per-rail routing is recorded.
      - It is written into the script's shebang line. Like O(lib_dir), O(script), O(unit_dir) and O(rules_file) it
        must be an absolute, normalized path (no C(.) or C(..) component) of the characters C([A-Za-z0-9._+,:=@-])
        and C(/); anything else (a space, a quote, C(%), C($), a newline, NUL) is refused before anything is read
        or written.
    type: path
  lib_dir:
    description: Directory that receives the copy of the collection's module_utils.
    type: path
    default: /usr/local/lib/gpufabric
  script:
    description: Path of the C(gpufabric-apply) script.
    type: path
    default: /usr/local/sbin/gpufabric-apply
  unit_dir:
    description: Directory of the systemd units.
    type: path
    default: /etc/systemd/system
  rules_file:
    description: The udev rule file.
    type: path
    default: /etc/udev/rules.d/90-gpufabric-rdma.rules
  boot_wait:
    description: Seconds the boot run waits for recorded devices that have not appeared yet before it fails.
    type: int
    default: 60
  device_wait:
    description: Seconds a per-device run (udev) waits for the device's rails and configfs ports.
    type: int
    default: 10
  before_units:
    description:
      - Units the boot run is ordered before (C(Before=)). Units that do not exist on the node are harmless.
      - Each must be a systemd unit name (C(kubelet.service), C(mnt-data\x2d1.mount)); anything else is refused.
    type: list
    elements: str
    default: [remote-fs-pre.target, kubelet.service, slurmd.service]
  enabled:
    description: Enable C(gpufabric-apply.service) (C(state=present) only).
    type: bool
    default: true
  evidence:
    description:
      - Install the evidence timer as well - the script O(evidence_script), C(gpufabric-evidence.service) and
        C(gpufabric-evidence.timer) (enabled and started) - which refreshes the node_exporter textfile
        O(evidence_textfile_dir)/O(evidence_filename) every O(evidence_interval) seconds with no Ansible run - the
        facts, every concern's status against O(evidence_desired), PCIe link health, the time of the last GDS proof
        and the RDMA error, retry and CNP counters (docs/metrics.md). It runs the same copy of the
        module_utils as the applier, and the same guard (it refuses to run when its code or the desired state could
        be changed by anyone but root).
      - C(false) removes those files and C(/etc/gpufabric/desired.json) where present and stops and disables the
        timer. Drift items are the files' C(content), C(type), C(mode), C(owner) as for the applier, and the timer's
        C(unit_file_state) (desired C(enabled)) and C(active_state) (desired C(active)).
    type: bool
    default: false
  evidence_interval:
    description:
      - Seconds between two runs of the evidence timer (C(OnUnitActiveSec)), 10 to 86400.
      - One run costs an 8-rail node up to about 0.3 CPU-s, so the default spends at most about 0.05 % of one core on it.
    type: int
    default: 600
  evidence_textfile_dir:
    description:
      - node_exporter's C(--collector.textfile.directory). The timer creates it (root, 0755) when missing, unless it
        lies below C(/etc) or C(/usr), which the hardened service cannot write (C(ProtectSystem=full)).
      - Default - the node's OS profile's, the directory M(gpufabric.node.fabric_metrics) writes to as well -
        C(/var/lib/prometheus/node-exporter) on Debian and Ubuntu (read by their C(prometheus-node-exporter)),
        C(/var/lib/node_exporter/textfile_collector) on EL (EPEL's and upstream's C(/etc/sysconfig/node_exporter))
        and on a release without a profile.
      - An absolute, normalized path of the characters C([A-Za-z0-9._+,:=@-]) and C(/).
    type: path
  evidence_filename:
    description:
      - File name in O(evidence_textfile_dir), ending in C(.prom), not starting with C(.).
      - It must differ from the file of M(gpufabric.node.fabric_metrics) (C(gpufabric.prom)) in the same directory;
        the series of the two files differ in their label C(writer) (C(evidence_timer) here).
    type: str
    default: gpufabric-evidence.prom
  evidence_script:
    description: Path of the C(gpufabric-evidence) script (outside O(lib_dir), not O(script)).
    type: path
    default: /usr/local/sbin/gpufabric-evidence
  evidence_desired:
    description:
      - The desired state the timer evaluates every concern against (the document of the one-call check,
        C(node_check.evaluate)); written as C({schema, desired}) to C(/etc/gpufabric/desired.json) (root, 0644).
      - Omitted, the file is removed and the timer reports every core concern C(not_checked) (never C(ok)).
    type: dict
attributes:
  check_mode:
    support: full
    description: Reports what would be written, removed, reloaded or enabled; changes nothing.
  diff_mode:
    support: full
    description: Diff of the unit files, the udev rule and the script (the module_utils copy is summarised).
  platform:
    support: full
    platforms: posix
    description: Linux with systemd and udev.
notes:
  - Needs root. Check mode also works without systemctl (the unit file layout is read, and the udev rule is
    compared with one that runs C(/usr/bin/systemctl)); a real run needs it when a unit changed or the boot unit has
    to be enabled.
  - The modules record what they applied through C(module_utils/concerns/state.py); this module only installs the applier.
seealso:
  - module: gpufabric.node.rdma_cm_tos
  - module: gpufabric.node.dcb_qos
  - module: gpufabric.node.pcie_acs
"""

EXAMPLES = r"""
- name: Install the boot-time applier
  gpufabric.node.fabric_persist:

- name: Install it with the platform's Python and a longer boot wait
  gpufabric.node.fabric_persist:
    python: /usr/bin/python3
    boot_wait: 120

- name: Install it with the evidence timer, refreshing the node_exporter textfile every 30 seconds
  gpufabric.node.fabric_persist:
    evidence: true
    evidence_interval: 30
    evidence_desired: "{{ gpufabric_desired }}"

- name: Remove it
  gpufabric.node.fabric_persist:
    state: absent
"""

RETURN = r"""
files:
  description: Every file the module manages, with what happened to it.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Host path.
      type: str
      sample: /etc/systemd/system/gpufabric-apply.service
    action:
      description: >-
        C(created), C(updated), C(removed), C(restored) (owner and mode put back), C(unchanged) (with C(would be ) in
        check mode).
      type: str
      sample: created
module_utils:
  description: Names of the module_utils installed for the applier.
  returned: always
  type: list
  elements: str
  sample: [acs, applier, dcb, guard, pci, rdma_cm, routing, state, sysctl, sysroot, topology]
commands:
  description: The systemctl/udevadm commands run (or that would run in check mode).
  returned: always
  type: list
  elements: str
  sample: ["systemctl daemon-reload", "systemctl enable gpufabric-apply.service", "udevadm control --reload"]
booted_with_systemd:
  description: >-
    False when the host does not boot with systemd (no C(/run/systemd/system), as C(sd_booted(3)) tests; a microVM
    whose agent is PID 1). The module then installs nothing, and the persistence concern is C(not_applicable) when
    no runtime state is recorded, else C(drift) (it would be lost at the next boot).
  returned: when the host does not boot with systemd
  type: bool
  sample: false
pid1:
  description: The command name of PID 1 (C(/proc/1/comm)) on a host that does not boot with systemd.
  returned: when the host does not boot with systemd
  type: str
  sample: process_api
unit_file_state:
  description: >-
    State of C(gpufabric-apply.service) before the module ran, in C(systemctl is-enabled)'s words; null when
    O(enabled=false).
  returned: always
  type: str
  sample: disabled
evidence:
  description: >-
    The evidence timer - whether it is wanted (O(evidence)), its C(unit_file_state) and C(active_state) before the
    module ran (null C(active_state) without systemctl) and the textfile it writes.
  returned: always
  type: dict
  sample: {enabled: true, timer: gpufabric-evidence.timer, unit_file_state: not-found, active_state: inactive,
           textfile: /var/lib/prometheus/node-exporter/gpufabric-evidence.prom}
drift:
  description: >-
    Deviations found before anything was changed (concern C(persistence)); keys C(content), C(type), C(mode),
    C(owner) (object a path), C(unit_file_state) (object the unit or the evidence timer) and C(active_state) (the
    evidence timer).
  returned: always
  type: list
  elements: dict
  sample:
    - {"concern": "persistence", "object": "/usr/local/sbin/gpufabric-apply", "key": "mode", "current": "0757",
       "desired": "0755"}
    - {"concern": "persistence", "object": "gpufabric-apply.service", "key": "unit_file_state",
       "current": "disabled", "desired": "enabled"}
concerns:
  description: >-
    The status of the C(persistence) concern (see docs/concerns.md): C(drift) in check mode when anything differs,
    C(ok) after a real run that corrected it (with C(corrected) and the items), C(drift) after a real run when a
    directory the collection does not own lets others swap a file (the reason names it).
  returned: always
  type: dict
  contains:
    persistence:
      description: "{status, reason, items[, corrected]}"
      type: dict
  sample:
    persistence:
      status: drift
      reason: "1 item(s) differ from the desired state: gpufabric-apply.service unit_file_state"
      items: [{"concern": "persistence", "object": "gpufabric-apply.service", "key": "unit_file_state",
               "current": "disabled", "desired": "enabled"}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
# the node payload's entry points: importing them makes AnsiballZ ship every file of node_payload.NODE_PAYLOAD,
# whose sources the persistence concern installs and checks
# pylint: disable-next=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier, evidence_timer  # noqa: F401
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import task as persist_task
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def main():
    module = AnsibleModule(argument_spec=persist_task.ARGUMENT_SPEC, supports_check_mode=True)
    inputs.guard(module)
    module.exit_json(**persist_task.run(module, Sysroot()))


if __name__ == "__main__":
    main()
