#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_metrics
short_description: Write the GPU fabric evidence as a node_exporter textfile collector file
version_added: 0.1.0
description:
  - Runs on the node and gathers the evidence itself, read-only - the GPU/NIC pairing with the PCIe relation of each
    pair and the ACS control register of every bridge on a paired path (from sysfs and PCI config space), the DCB
    state of every rail (DSCP trust, DSCP to priority map, PFC per priority) with C(dcb -j), the rdma_cm default
    RoCE ToS of every RDMA port (configfs), the nvidia-fs read/write counters, IOMMU mode, NVIDIA driver flavour and
    Fabric Manager state - and writes them in the Prometheus text format to I(textfile_dir)/I(filename), where
    node_exporter's textfile collector exposes them.
  - The file is written atomically (a temporary file in the same directory, renamed) and only when its content
    changes. It carries the time of the check (C(gpufabric_last_check_timestamp_seconds), I(checked_at)), so a run
    with a new time rewrites it.
  - Every series carries the label C(writer="fabric_metrics"); the evidence timer (M(gpufabric.node.fabric_persist)
    O(gpufabric.node.fabric_persist#module:evidence)) writes its own file (C(gpufabric-evidence.prom)) to the same
    directory with C(writer="evidence_timer"), so node_exporter never sees one series from two files.
  - Evidence that cannot be read is left out, never written as zero - nvidia-fs counters when nvidia-fs is not loaded
    or prints no read/write counters (C(rw_stats_enabled=0)), the ToS of a port when C(/sys/kernel/config/rdma_cm)
    itself is missing (rdma_cm not loaded or configfs not mounted), the ACS state of a bridge whose config space
    cannot be read. A rail whose C(dcb) query fails has
    C(gpufabric_rail_dcb_up 0) and no other DCB series.
  - C(gpufabric_gds_active) and C(gpufabric_gds_compat_fallback_detected) come from I(gds) (the result of
    M(gpufabric.node.gds_verify)) because proving GDS takes a test transfer. Without I(gds) they come from the record
    the last proof left on the node (C(/var/lib/gpufabric/gds_verdict.json)), with
    C(gpufabric_gds_verdict_timestamp_seconds); they are absent when there is neither.
  - PCIe link health of every GPU, NIC and bridge on a GPU-NIC path (the number of links per state; width and speed
    of a link below its capability) and the RDMA error and retry counters (summed per port) and CNPs sent and
    handled of every RDMA port (C(/sys/class/infiniband/<dev>/ports/<port>/counters/) and C(hw_counters/)).
    docs/metrics.md lists every metric with its labels.
  - Few series (about 180 on an 8-rail node) - the per-priority PFC state and the DSCP map of a rail only when a
    C(dcb) drift item names the rail, the ACS control register only of a bridge that redirects.
  - "Metrics (every one with the label C(writer)): C(gpufabric_concern_status{concern,status}),
    C(gpufabric_concern_drift_items{concern}), C(gpufabric_node_ok), C(gpufabric_reboot_required),
    C(gpufabric_last_check_timestamp_seconds), C(gpufabric_pair_relation_info{gpu,nic,netdev,relation,cross_numa}),
    C(gpufabric_pair_acs_redirect_clear{gpu,nic}), C(gpufabric_acs_ctrl{bridge,role}), C(gpufabric_rail_dcb_up{rail}),
    C(gpufabric_rail_dcb_info{rail,trust,pfc_priorities}), C(gpufabric_rail_pfc_enabled{rail,priority}),
    C(gpufabric_rail_dscp_priority{rail,dscp}), C(gpufabric_rdma_cm_tos{device,port,rail}),
    C(gpufabric_rdma_port_errors_total{device,port,rail}), C(gpufabric_rdma_port_retries_total),
    C(gpufabric_rdma_port_cnp_sent_total), C(gpufabric_rdma_port_cnp_handled_total), C(gpufabric_gds_active),
    C(gpufabric_gds_compat_fallback_detected), C(gpufabric_gds_verdict_timestamp_seconds), C(gpufabric_nvfs_loaded),
    C(gpufabric_nvfs_rw_stats_enabled), C(gpufabric_nvfs_reads_total), C(gpufabric_nvfs_read_ok_total),
    C(gpufabric_nvfs_read_errors_total), C(gpufabric_nvfs_read_bytes_total), C(gpufabric_nvfs_writes_total),
    C(gpufabric_nvfs_write_ok_total), C(gpufabric_nvfs_write_errors_total), C(gpufabric_nvfs_written_bytes_total),
    C(gpufabric_iommu_identity), C(gpufabric_iommu_mode_info{mode}), C(gpufabric_gpu_driver_open),
    C(gpufabric_gpu_driver_info{flavour,version}), C(gpufabric_fabric_manager_needed),
    C(gpufabric_fabric_manager_running), C(gpufabric_pcie_links{state}), C(gpufabric_pcie_link_width{device,kind,port}),
    C(gpufabric_pcie_link_max_width), C(gpufabric_pcie_link_speed_transfers_per_second),
    C(gpufabric_pcie_link_max_speed_transfers_per_second), C(gpufabric_gpudirect_rdma_mechanism_info{mechanism}),
    C(gpufabric_gpudirect_rdma_dmabuf_usable), C(gpufabric_gpudirect_rdma_peermem_loaded)."
  - "C(gpufabric_concern_status{concern,status}) has one series per managed concern and status (C(ok), C(drift),
    C(error), C(not_checked), C(not_applicable)): 1 for the concern's current status, 0 for the other four. The
    statuses come from I(concerns) (the host fact C(gpufabric_concerns)); a managed concern it does not hold - every
    one when I(concerns) is left out - is C(not_checked), never C(ok)."
  - C(gpufabric_node_ok) is the node verdict the reports show (the same computation as M(gpufabric.node.fabric_report)
    and M(gpufabric.node.fleet_report)) - 1 only when every concern is C(ok) or C(not_applicable), I(reboot_required)
    is false and no warning stands that breaks a data path (translated IOMMU, cross-NUMA GPU/NIC pair, nvidia-fs not
    loaded with I(gds_wanted), NVSwitches without a running Fabric Manager; read from the node by this module). A
    failed GDS proof in I(gds) counts as the C(gds) concern in C(drift) when I(concerns) has no C(gds).
author:
  - gpufabric developers (@gpufabric)
requirements:
  - iproute2 5.12 or later (C(dcb)) for the DCB metrics; without C(dcb) the rails report C(gpufabric_rail_dcb_up 0).
options:
  textfile_dir:
    description:
      - Directory node_exporter's textfile collector reads (C(--collector.textfile.directory)). Created when missing.
      - Default - the node's OS profile's, shared with the evidence timer - C(/var/lib/prometheus/node-exporter) on
        Debian and Ubuntu (their C(prometheus-node-exporter) reads it), C(/var/lib/node_exporter/textfile_collector)
        on EL (EPEL's C(golang-github-prometheus-node-exporter) and upstream's C(/etc/sysconfig/node_exporter)) and on
        a release without a profile.
    type: path
  filename:
    description:
      - Name of the file in I(textfile_dir). Must end in C(.prom) (the collector reads only those) and contain no
        C(/); not C(gpufabric-evidence.prom), the evidence timer's file.
    type: str
    default: gpufabric.prom
  checked_at:
    description:
      - Unix time of the check whose statuses I(concerns) holds, written as C(gpufabric_last_check_timestamp_seconds)
        (the staleness of the file). Default - now.
    type: float
  mode:
    description: Permissions of the file.
    type: raw
    default: '0644'
  rails:
    description:
      - Network interfaces (netdev names) whose DCB state is exported.
      - Defaults to every discovered rail with an Ethernet (RoCE) link layer.
    type: list
    elements: str
  dcb:
    description: Read the DCB state of the rails with C(dcb -j). C(false) leaves the rail DCB metrics out.
    type: bool
    default: true
  gds:
    description:
      - The verdict of M(gpufabric.node.gds_verify) (its registered result, or a dict with C(gds_active) and
        optionally C(compat_fallback_suspected)).
      - A check-mode verdict (C(transfer) present but null - no test transfer was made) proves nothing and is left
        out with a warning.
    type: dict
  concerns:
    description:
      - "The status of every concern of this node, the host fact C(gpufabric_concerns) (C({<concern>: {status,
        reason, items}})). Names and statuses are validated; an error names the concern."
      - Left out, every managed concern is C(not_checked) and C(gpufabric_node_ok) is 0.
    type: dict
  managed_concerns:
    description:
      - The concern names the play manages (each gets C(gpufabric_concern_status) series; concerns in I(concerns)
        beyond these too). Default - the core concerns (C(cmdline), C(acs), C(dcb), C(rdma_cm), C(ecn),
        C(sysctl), C(routing), C(mtu), C(nccl), C(persistence), C(nfs_mounts), C(pcie_link), C(gpudirect_rdma),
        C(fabric_manager)).
    type: list
    elements: str
    choices: [cmdline, acs, dcb, rdma_cm, ecn, sysctl, routing, mtu, nccl, persistence, nfs_mounts, pcie_link,
      gpudirect_rdma, fabric_manager, gds, vendor_client, performance]
  reboot_required:
    description:
      - A reboot is pending (the boot loader has kernel arguments the running kernel lacks, as the C(iommu) and
        C(pcie_acs) roles export); the node verdict is then not ok.
    type: bool
    default: false
  gds_wanted:
    description: GPUDirect Storage is wanted on this node; nvidia-fs not loaded then keeps the node verdict from ok.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode gathers the evidence, renders the file and reports whether it would change; it writes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
    details: Linux; the ACS metrics need root (PCI config space beyond 64 bytes).
notes:
  - Runs C(dcb) from C(PATH) with C(LC_ALL=C); it only runs C(dcb -V) and C(dcb -j ... show) commands.
  - Run it from cron or a systemd timer (or each report run) to keep the file fresh; node_exporter exposes the file
    modification time as C(node_textfile_mtime_seconds).
seealso:
  - name: node_exporter textfile collector
    description: How node_exporter reads C(*.prom) files.
    link: https://github.com/prometheus/node_exporter#textfile-collector
  - module: gpufabric.node.gds_verify
  - module: gpufabric.node.fabric_report
"""

EXAMPLES = r"""
- name: Export the fabric evidence for node_exporter
  gpufabric.node.fabric_metrics:

- name: Include the last GDS verdict
  gpufabric.node.fabric_metrics:
    textfile_dir: /srv/node_exporter/textfile
    gds: "{{ gds_verify_result }}"
  when: gds_verify_result is defined

- name: Export the evidence with the concern statuses and the node verdict
  gpufabric.node.fabric_metrics:
    concerns: "{{ gpufabric_concerns | default({}) }}"
    reboot_required: "{{ iommu_reboot_required | default(false) or pcie_acs_reboot_required | default(false) }}"
    gds_wanted: "{{ gds_enabled | default(false) | bool }}"

- name: Only two rails, no DCB queries
  gpufabric.node.fabric_metrics:
    rails: [ens1np0, ens2np0]
    dcb: false
"""

RETURN = r"""
changed:
  description: Whether the file was (or, in check mode, would be) written.
  returned: always
  type: bool
path:
  description: The textfile collector file.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/gpufabric.prom
samples:
  description: Number of samples in the file.
  returned: always
  type: int
  sample: 180
families:
  description: Names of the metric families in the file, sorted.
  returned: always
  type: list
  elements: str
  sample: [gpufabric_acs_redirect_clear, gpufabric_rail_pfc_enabled]
rails:
  description: Rails whose DCB state was read, with C(dcb_up) and the error when the read failed.
  returned: always
  type: list
  elements: dict
  sample: [{rail: ens1np0, dcb_up: true, error: null}]
verdict:
  description: The node verdict written as C(gpufabric_node_ok) (C(status) C(ok) or C(attention), C(reasons)).
  returned: always
  type: dict
  sample: {status: attention, reasons: ["reboot pending: the boot loader has kernel arguments the running kernel lacks"]}
concerns:
  description: The status of every managed concern, as written to C(gpufabric_concern_status).
  returned: always
  type: dict
  sample: {cmdline: {status: ok, reason: null, items: []}, acs: {status: not_checked, reason: "no result", items: []}}
dcb_version:
  description: iproute2 version of the dcb binary; null when dcb was not run or not found.
  returned: always
  type: str
  sample: 6.1.0
"""

import math
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner


def make_runner(module):
    return CommandRunner(module)


def parse_mode(mode):
    if isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
    else:
        try:
            value = int(str(mode), 8)
        except ValueError:
            raise ValueError("mode must be an octal permission such as '0644', not %r" % (mode,))
    if not 0 <= value <= 0o7777:
        raise ValueError("mode %o is out of range" % value)
    return value


def validate_filename(name):
    if not name or "/" in name or name in (".", "..") or not name.endswith(".prom") or name == ".prom":
        raise ValueError("filename must be a plain file name ending in .prom (node_exporter reads only those), "
                         "not %r" % (name,))
    if name == evidence.DEFAULT_FILENAME:
        raise ValueError("filename must not be %s, the evidence timer's file in the same directory" % name)
    return name


def gds_evidence(gds):
    """(evidence dict or None, warning or None) from a gds_verify result."""
    if gds is None:
        return None, None
    if "gds_active" not in gds:
        raise ValueError("gds must be the result of gds_verify (a dict with gds_active), got keys %s"
                         % ", ".join(sorted(gds)))
    if "transfer" in gds and gds["transfer"] is None:
        return None, ("the gds verdict comes from check mode (no test transfer was made): gpufabric_gds_active is "
                      "left out")
    return {"gds_active": bool(gds["gds_active"]),
            "compat_fallback_suspected": (None if gds.get("compat_fallback_suspected") is None
                                          else bool(gds["compat_fallback_suspected"]))}, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            textfile_dir=dict(type="path"),
            filename=dict(type="str", default=evidence.REPORT_FILENAME),
            checked_at=dict(type="float"),
            mode=dict(type="raw", default="0644"),
            rails=dict(type="list", elements="str"),
            dcb=dict(type="bool", default=True),
            gds=dict(type="dict"),
            concerns=dict(type="dict"),
            managed_concerns=dict(type="list", elements="str", choices=list(concerns.NAMES)),
            reboot_required=dict(type="bool", default=False),
            gds_wanted=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    inputs.guard(module, text=("concerns", "gds"))
    p = module.params
    sysroot = Sysroot()
    try:
        filename = validate_filename(p["filename"])
        mode = parse_mode(p["mode"])
        gds, gds_warning = gds_evidence(p["gds"])
        textfile_dir = p["textfile_dir"] or os_profiles.textfile_dir(sysroot)[0]
        inputs.safe_path(textfile_dir, "textfile_dir")
        checked_at = time.time() if p["checked_at"] is None else p["checked_at"]
        if not math.isfinite(checked_at) or checked_at < 0:
            raise ValueError("checked_at must be a Unix time, not %r" % (checked_at,))
        node = {"concerns": p["concerns"], "managed": p["managed_concerns"], "reboot_required": p["reboot_required"],
                "gds_wanted": p["gds_wanted"]}
        host = socket.gethostname() or "this node"
        concerns.assess(dict(node, facts={}), p["managed_concerns"], host)  # bad statuses fail before any read
    except ValueError as e:  # ConcernError is a ValueError
        module.fail_json(msg=str(e))
    facts = topology.discover(sysroot)
    rails = p["rails"] if p["rails"] is not None else evidence.default_rails(facts)
    if p["rails"] is not None:
        try:
            dcb.validate_rails(sysroot, rails)
        except dcb.DcbValidationError as e:
            module.fail_json(msg=str(e))
    dcb_state, dcb_version = {}, None
    if p["dcb"] and rails:
        dcb_state, dcb_version = evidence.read_dcb(sysroot, make_runner(module), rails, module.get_bin_path("dcb"))
    if gds is None and p["gds"] is None:
        # no verdict passed: the last proof gds_verify recorded on the node, with its age
        gds, record_warning = evidence.read_gds_verdict(sysroot)
        gds_warning = gds_warning or record_warning
    ev = {"facts": facts, "dcb": dcb_state, "rdma_cm": evidence.read_tos(sysroot, facts),
          "nvfs": evidence.read_nvfs(sysroot, facts), "gds": gds, "node": node,
          "rdma_ports": evidence.rdma_port_counters(sysroot, facts), "now": checked_at,
          "writer": evidence.REPORT_WRITER}
    assessment = prom.assess(ev, host)
    families = [f for f in prom.families_from_evidence(ev, assessment) if f.samples]
    text = prom.render(families)
    path = os.path.join(textfile_dir, filename)
    before, before_mode = evidence.current_file(sysroot, path)
    after = text.encode("utf-8")
    changed = before != after or before_mode != mode
    if changed and not module.check_mode:
        try:
            evidence.write_textfile(sysroot, path, text, mode)
        except (IOError, OSError) as e:
            module.fail_json(msg="cannot write %s: %s" % (path, e))
    if gds_warning:
        module.warn(gds_warning)
    rail_results = []
    for rail in sorted(dcb_state):
        err = dcb_state[rail].get("error")
        if err:
            module.warn("DCB state of rail %s could not be read: %s" % (rail, err))
        rail_results.append({"rail": rail, "dcb_up": not err, "error": err})
    out = dict(changed=changed, path=path, samples=sum(len(f.samples) for f in families),
               families=sorted(f.name for f in families), rails=rail_results, dcb_version=dcb_version,
               verdict=assessment["verdict"], concerns=assessment["concerns"])
    if module._diff:
        out["diff"] = dict(before="" if before is None else before.decode("utf-8", "replace"), after=text,
                           before_header=path, after_header=path)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
