# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition (format 0.0.4) of the gpufabric evidence, for node_exporter's textfile collector.

Plain Python, no Ansible imports, no I/O: the ``fabric_metrics`` module gathers the evidence and writes the file.

Public API:

``escape_label_value(value) -> str`` / ``escape_help(text) -> str``
    Escaping of the exposition format: in label values backslash, double quote and line feed become ``\\\\``,
    ``\\"`` and ``\\n``; in HELP text backslash and line feed.
``format_value(value) -> str``
    ``True``/``False`` -> ``1``/``0``, integers as they are, floats with ``repr`` (``NaN``, ``+Inf``, ``-Inf``).
``Family(name, mtype, help_text)`` with ``add(value, **labels)``
    One metric family; ``ValueError`` for an invalid metric or label name, a counter whose name does not end
    in ``_total``, a second sample with the same labels, or a non-numeric value.
``render(families) -> str``
    Text of the families that have samples (a family without samples is left out entirely: absent, not zero),
    families sorted by name, samples sorted by their label values (numbers inside values in numeric order),
    ``# HELP`` and ``# TYPE`` before each family, no sample timestamps (node_exporter's textfile collector refuses
    them; the time of the check is the metric ``gpufabric_last_check_timestamp_seconds``).
``families_from_evidence(evidence) -> [Family]`` / ``render_evidence(evidence) -> str``
    The gpufabric metrics (``METRICS``) from an evidence dict::

        {"facts": topology.discover(...) result (pairing, path_bridges, rails, iommu, gpu_driver,
                  fabric_manager, nvidia_fs, pcie_links, gpudirect_rdma; any may be missing),
         "dcb": {netdev: dcb.read_rail(...) result, or {"error": str}},
         "rdma_cm": [{"device", "port", "rail", "tos"}]   (tos None: not readable, no sample),
         "nvfs": nvfs.counters(...) dict or None (nvidia-fs stats not readable),
         "gds": {"gds_active": bool, "compat_fallback_suspected": bool, "time": unix time or absent} or None,
         "rdma_ports": evidence.rdma_port_counters(...) [{device, port, rail, counters: [{dir, name, category,
                       value}]}],
         "now": unix time of the check (gpufabric_last_check_timestamp_seconds),
         "interval": the evidence timer's interval in seconds (gpufabric_check_interval_seconds),
         "writer": "evidence_timer" | "fabric_metrics" (the label ``writer`` on every series, so that the two
                   writers' files in one node_exporter directory never hold the same series),
         "desired_state": bool (the evidence timer: the desired state was on the node and evaluated),
         "node": {"concerns": gpufabric_concerns or None, "managed": [concern names] or None (the core ones),
                  "reboot_required": bool, "gds_wanted": bool} or None}

    With ``node`` (``fabric_metrics`` always passes it) the node's assessment - ``concerns.assess``, the code the
    reports use - becomes ``gpufabric_concern_status{concern,status}`` (1 for the current status of every managed
    concern, 0 for the other four; a concern the node did not report is not_checked, never ok), the number of
    drift items of each concern, ``gpufabric_reboot_required`` and ``gpufabric_node_ok`` (the node verdict; the
    data-path warnings come from ``facts``, a GDS verdict from ``gds``).
    ``ConcernError`` for a status document that does not follow the model.

    Series stay few (about 180 on an 8-rail node): the detail of an object comes only where its concern found drift
    - the PFC and DSCP map of a rail that a ``dcb`` drift item names, the width and speed of a PCIe link below its
    capability, the ACS control register of a bridge that redirects; RDMA error and retry counters are summed per
    port (``fabric_counters`` reads each one).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm

PREFIX = "gpufabric_"
TYPES = ("gauge", "counter", "untyped")
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")

# ACS control bits whose setting redirects peer-to-peer TLPs upstream: ReqRedir, CmpltRedir, EgressCtrl
# (the bits pci=disable_acs_redir= clears; pci.ACS_BIT values)
ACS_REDIRECT_MASK = 0x04 | 0x08 | 0x20

# name -> (type, help); every metric this module can emit. Base units (seconds, bytes, transfers per second).
METRICS = {
    "concern_status": ("gauge", "1 for the current status of a managed concern (ok, drift, error, not_checked, "
                                "not_applicable), 0 for the other four; a concern without a reported status is "
                                "not_checked."),
    "concern_drift_items": ("gauge", "Number of drift items (objects and settings that differ from the desired "
                                     "state) of a concern in drift; 0 in any other status."),
    "node_ok": ("gauge", "1 when the node verdict is ok: every concern ok or not applicable, no reboot pending and no "
                         "warning that breaks a data path."),
    "reboot_required": ("gauge", "1 when a reboot is pending: the boot loader has kernel arguments the running kernel "
                                 "lacks."),
    "last_check_timestamp_seconds": ("gauge", "Unix time of the check whose results this file holds."),
    "check_interval_seconds": ("gauge", "Seconds between two runs of the evidence timer (staleness: no check for "
                                        "three intervals)."),
    "evidence_desired_state": ("gauge", "1 when the desired state was on the node and every concern was evaluated "
                                        "against it; 0 when it was missing or unusable (the concerns are "
                                        "not_checked or error)."),
    "pair_relation_info": ("gauge", "GPU-NIC pairing with the PCIe relation of the pair (PIX, PXB, PHB, NODE, SYS) "
                                    "and cross_numa (true when the GPU and the NIC sit on different NUMA nodes)."),
    "pair_acs_redirect_clear": ("gauge", "1 when ReqRedir, CmpltRedir and EgressCtrl are clear on every bridge of the "
                                         "GPU-NIC path (a bridge without ACS capability redirects nothing)."),
    "acs_ctrl": ("gauge", "ACS control register of a bridge on a GPU-NIC path that redirects peer-to-peer traffic "
                          "(only such bridges)."),
    "rail_dcb_up": ("gauge", "1 when the DCB state of the rail could be read with dcb -j."),
    "rail_dcb_info": ("gauge", "DCB state of the rail: trust (dscp or pcp) and the priorities with PFC on "
                               "(pfc_priorities, comma-separated, empty for none)."),
    "rail_pfc_enabled": ("gauge", "1 when PFC is enabled for the priority; only for rails whose DCB is in drift."),
    "rail_dscp_priority": ("gauge", "Priority a DSCP maps to (the lowest when several are listed); the full map "
                                    "only for rails whose DCB is in drift."),
    "rdma_cm_tos": ("gauge", "rdma_cm default RoCE ToS of the RDMA device port (configfs default_roce_tos)."),
    "rdma_port_errors_total": ("counter", "RDMA port errors: the sum of the port's error counters (docs/metrics.md "
                                          "lists them) in counters/ and hw_counters/."),
    "rdma_port_retries_total": ("counter", "RDMA port retransmissions and retries: the sum of the port's retry "
                                           "counters in counters/ and hw_counters/."),
    "rdma_port_cnp_sent_total": ("counter", "Congestion notification packets the RDMA port sent (hw_counters/"
                                            "np_cnp_sent): ECN-marked RoCE packets arrived."),
    "rdma_port_cnp_handled_total": ("counter", "Congestion notification packets the RDMA port handled "
                                               "(hw_counters/rp_cnp_handled): its senders slowed down."),
    "gds_active": ("gauge", "1 when the last GDS proof moved the nvidia-fs counters with compat mode off."),
    "gds_compat_fallback_detected": ("gauge", "1 when the last GDS proof saw cuFile fall back to POSIX I/O "
                                              "(compatibility mode)."),
    "gds_verdict_timestamp_seconds": ("gauge", "Unix time of the last GDS proof with a test transfer "
                                               "(gds_verify's record on the node)."),
    "nvfs_loaded": ("gauge", "1 when the nvidia-fs kernel module is loaded."),
    "nvfs_rw_stats_enabled": ("gauge", "nvidia-fs rw_stats_enabled parameter (read/write counters on)."),
    "nvfs_reads_total": ("counter", "nvidia-fs read operations (stats n=)."),
    "nvfs_read_ok_total": ("counter", "nvidia-fs successful read operations (stats ok=)."),
    "nvfs_read_errors_total": ("counter", "nvidia-fs read errors (stats err=)."),
    "nvfs_read_bytes_total": ("counter", "Bytes read through nvidia-fs (stats readMiB= times 1048576)."),
    "nvfs_writes_total": ("counter", "nvidia-fs write operations (stats n=)."),
    "nvfs_write_ok_total": ("counter", "nvidia-fs successful write operations (stats ok=)."),
    "nvfs_write_errors_total": ("counter", "nvidia-fs write errors (stats err=)."),
    "nvfs_written_bytes_total": ("counter", "Bytes written through nvidia-fs (stats writeMiB= times 1048576)."),
    "iommu_identity": ("gauge", "1 when every IOMMU group is in identity (passthrough) mode."),
    "iommu_mode_info": ("gauge", "IOMMU mode of the node (identity, translated, off, mixed)."),
    "gpu_driver_open": ("gauge", "1 when the NVIDIA open kernel module is loaded."),
    "gpu_driver_info": ("gauge", "NVIDIA kernel module flavour (open, proprietary, none) and version."),
    "fabric_manager_needed": ("gauge", "1 when NVSwitches are present (nvidia-fabricmanager is needed)."),
    "fabric_manager_running": ("gauge", "1 when nvidia-fabricmanager is running."),
    "pcie_links": ("gauge", "Number of PCIe links on GPU-NIC paths in each state (ok, idle, degraded, slot_limited, "
                            "unknown) as the pcie_link concern judges them."),
    "pcie_link_width": ("gauge", "Lanes a PCIe link below its capability trained to (current_link_width)."),
    "pcie_link_max_width": ("gauge", "Lanes a PCIe link below its capability can do: the lower of both ends' "
                                     "max_link_width."),
    "pcie_link_speed_transfers_per_second": ("gauge", "Transfers per second a PCIe link below its capability runs at "
                                                      "(current_link_speed; 32 GT/s is 32e9)."),
    "pcie_link_max_speed_transfers_per_second": ("gauge", "Transfers per second a PCIe link below its capability "
                                                          "can do: the lower of both ends' max_link_speed."),
    "gpudirect_rdma_mechanism_info": ("gauge", "The GPUDirect RDMA mechanism the RDMA NICs can use (dmabuf, "
                                               "nvidia_peermem, none)."),
    "gpudirect_rdma_dmabuf_usable": ("gauge", "1 when DMA-BUF can carry GPUDirect RDMA (open NVIDIA kernel module, "
                                              "kernel 5.12 or later, rdma-core 34 or later)."),
    "gpudirect_rdma_peermem_loaded": ("gauge", "1 when nvidia-peermem (or nv_peer_mem) is loaded."),
}

# the pcie_link judgement's states (discovery/pcie_link.py); below capability: the two that are not fine
PCIE_STATES = ("ok", "idle", "degraded", "slot_limited", "unknown")
PCIE_BELOW = ("degraded", "slot_limited")

# evidence.RDMA_COUNTERS category -> the family that sums the port's counters of that category
RDMA_SUMS = {"error": "rdma_port_errors_total", "retry": "rdma_port_retries_total"}
# counter file (hw_counters/) -> its own family
RDMA_OWN = {"np_cnp_sent": "rdma_port_cnp_sent_total", "rp_cnp_handled": "rdma_port_cnp_handled_total"}

MIB = 1 << 20
# nvfs.counters() key -> (metric, factor to the base unit)
NVFS_COUNTERS = (("reads", "nvfs_reads_total", 1), ("reads_ok", "nvfs_read_ok_total", 1),
                 ("read_err", "nvfs_read_errors_total", 1), ("read_mib", "nvfs_read_bytes_total", MIB),
                 ("writes", "nvfs_writes_total", 1), ("writes_ok", "nvfs_write_ok_total", 1),
                 ("write_err", "nvfs_write_errors_total", 1), ("write_mib", "nvfs_written_bytes_total", MIB))

# the label every series of a file carries: which writer made it (node_exporter refuses one series from two files)
WRITER_LABEL = "writer"
WRITERS = ("evidence_timer", "fabric_metrics")


def escape_label_value(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text):
    return str(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    raise ValueError("metric value %r is not a number" % (value,))


def _natural(text):
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


class Family(object):
    """One metric family: name, type, help and its samples."""

    def __init__(self, name, mtype, help_text):
        if not _METRIC_NAME.match(name or ""):
            raise ValueError("invalid metric name %r" % (name,))
        if mtype not in TYPES:
            raise ValueError("metric type %r is not one of %s" % (mtype, ", ".join(TYPES)))
        if mtype == "counter" and not name.endswith("_total"):
            raise ValueError("counter %s must end in _total" % name)
        self.name = name
        self.mtype = mtype
        self.help = help_text
        self.samples = {}

    def add(self, value, **labels):
        for key in labels:
            if not _LABEL_NAME.match(key) or key.startswith("__"):
                raise ValueError("invalid label name %r for %s" % (key, self.name))
        format_value(value)
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        if key in self.samples:
            raise ValueError("%s has two samples with the labels %s" % (self.name, dict(key)))
        self.samples[key] = value
        return self

    def lines(self):
        out = ["# HELP %s %s" % (self.name, escape_help(self.help)), "# TYPE %s %s" % (self.name, self.mtype)]
        for key in sorted(self.samples, key=lambda k: [(n, _natural(v)) for n, v in k]):
            labels = ",".join('%s="%s"' % (n, escape_label_value(v)) for n, v in key)
            out.append("%s%s %s" % (self.name, "{%s}" % labels if labels else "", format_value(self.samples[key])))
        return out


def render(families):
    names = set()
    lines = []
    for fam in sorted(families, key=lambda f: f.name):
        if fam.name in names:
            raise ValueError("metric family %s is given twice" % fam.name)
        names.add(fam.name)
        if fam.samples:
            lines.extend(fam.lines())
    return "\n".join(lines) + "\n" if lines else ""


# ------------------------------------------------------------------------------------------------
# gpufabric evidence


class _Families(object):
    def __init__(self, common=None):
        self.by_name = {}
        self.common = dict(common or {})

    def add(self, short, value, **labels):
        if value is None:
            return
        fam = self.by_name.get(short)
        if fam is None:
            mtype, help_text = METRICS[short]
            fam = self.by_name[short] = Family(PREFIX + short, mtype, help_text)
        labels.update(self.common)
        fam.add(value, **labels)


def _acs(fams, facts):
    bridges = dict((b["bdf"], b) for b in facts.get("path_bridges") or [])
    redirecting = set()
    for p in facts.get("pairing") or []:
        path = [bridges.get(bdf) for bdf in p.get("bridges") or []]
        if any(b is None or "error" in (b.get("acs") or {}) for b in path):
            continue  # a bridge whose ACS state is unknown: the pair's is too (absent, never 1)
        bad = [b for b in path if (b.get("acs") or {}).get("present")
               and int(b["acs"]["ctrl"]) & ACS_REDIRECT_MASK]
        fams.add("pair_acs_redirect_clear", not bad, gpu=p["gpu"], nic=p["nic"])
        redirecting.update(b["bdf"] for b in bad)
    for bdf in sorted(redirecting):
        fams.add("acs_ctrl", int(bridges[bdf]["acs"]["ctrl"]), bridge=bdf, role=bridges[bdf].get("role") or "")
    for p in facts.get("pairing") or []:
        fams.add("pair_relation_info", 1, gpu=p["gpu"], nic=p["nic"], netdev=p.get("netdev") or "",
                 relation=p["relation"], cross_numa="true" if p.get("cross_numa") else "false")


def _dcb(fams, dcb_state, detail):
    """detail: the rails whose DCB is in drift (their full PFC and DSCP map)."""
    for rail in sorted(dcb_state or {}):
        cur = dcb_state[rail] or {}
        ok = "error" not in cur and "app" in cur and "pfc" in cur
        fams.add("rail_dcb_up", ok, rail=rail)
        if not ok:
            continue
        pfc = cur["pfc"]["prio_pfc"]
        fams.add("rail_dcb_info", 1, rail=rail, trust=cur.get("trust") or "",
                 pfc_priorities=",".join(str(prio) for prio, on in enumerate(pfc) if on))
        if rail not in detail:
            continue
        for prio, on in enumerate(pfc):
            fams.add("rail_pfc_enabled", bool(on), rail=rail, priority=prio)
        dscp = cur["app"]["dscp"]
        for d in sorted(dscp):
            if dscp[d]:
                fams.add("rail_dscp_priority", min(dscp[d]), rail=rail, dscp=d)


def _giga(value):
    return None if value is None else float(value) * 1e9


def _facts(fams, facts):
    iommu = facts.get("iommu")
    if iommu:
        fams.add("iommu_identity", iommu.get("mode") == "identity")
        fams.add("iommu_mode_info", 1, mode=iommu.get("mode") or "")
    drv = facts.get("gpu_driver")
    if drv:
        fams.add("gpu_driver_open", drv.get("flavour") == "open")
        fams.add("gpu_driver_info", 1, flavour=drv.get("flavour") or "", version=drv.get("version") or "")
    fm = facts.get("fabric_manager")
    if fm:
        fams.add("fabric_manager_needed", bool(fm.get("needed")))
        fams.add("fabric_manager_running", bool(fm.get("running")))
    links = facts.get("pcie_links")
    if links is not None:
        for state in PCIE_STATES:
            fams.add("pcie_links", sum(1 for link in links if link.get("state") == state), state=state)
    for link in links or []:
        if link.get("state") not in PCIE_BELOW:
            continue
        labels = dict(device=link["device"], kind=link.get("kind") or "", port=link.get("port") or "")
        fams.add("pcie_link_width", link.get("current_width"), **labels)
        fams.add("pcie_link_max_width", link.get("max_width"), **labels)
        fams.add("pcie_link_speed_transfers_per_second", _giga(link.get("current_speed")), **labels)
        fams.add("pcie_link_max_speed_transfers_per_second", _giga(link.get("max_speed")), **labels)
    gdr = facts.get("gpudirect_rdma")
    if gdr:
        fams.add("gpudirect_rdma_mechanism_info", 1, mechanism=gdr.get("mechanism") or "none")
        fams.add("gpudirect_rdma_dmabuf_usable", bool((gdr.get("dmabuf") or {}).get("usable")))
        fams.add("gpudirect_rdma_peermem_loaded", bool((gdr.get("peermem") or {}).get("loaded")))
    nv = facts.get("nvidia_fs")
    if nv:
        fams.add("nvfs_loaded", bool(nv.get("loaded")))
        if nv.get("rw_stats_enabled") is not None:
            fams.add("nvfs_rw_stats_enabled", int(nv["rw_stats_enabled"]))


def assess(evidence, host="this node"):
    """The node's assessment (``concerns.assess``) from the evidence; None without ``node``."""
    node = evidence.get("node")
    if node is None:
        return None
    data = dict((k, node.get(k)) for k in ("concerns", "reboot_required", "gds_wanted"))
    data["facts"] = evidence.get("facts") or {}
    gds = evidence.get("gds")
    if gds:
        data["gds"] = {"ok": bool(gds.get("gds_active")), "reasons": []}
    return cm.assess(data, node.get("managed"), host)


def drift_objects(assessment, concern):
    """The objects (rails, ports, paths) the drift items of ``concern`` name; empty unless it is in drift."""
    doc = (assessment or {}).get("concerns", {}).get(concern) or {}
    if doc.get("status") != cm.DRIFT:
        return set()
    return set(str(i.get("object")) for i in doc.get("items") or [] if i.get("object") is not None)


def _node(fams, a):
    for name in cm.NAMES:
        doc = a["concerns"].get(name)
        if doc is None:
            continue
        for value in cm.STATUSES:
            fams.add("concern_status", doc["status"] == value, concern=name, status=value)
        fams.add("concern_drift_items", len(doc.get("items") or []) if doc["status"] == cm.DRIFT else 0,
                 concern=name)
    fams.add("node_ok", a["verdict"]["status"] == cm.OK)
    fams.add("reboot_required", bool(a.get("reboot_required")))


def _number(value):
    return None if value is None else float(value)


def families_from_evidence(evidence, assessment=None):
    """The metric families; ``assessment``: ``assess(evidence)`` when the caller made it already."""
    writer = evidence.get("writer")
    if writer is not None and writer not in WRITERS:
        raise ValueError("writer must be one of %s, not %r" % (", ".join(WRITERS), writer))
    fams = _Families({WRITER_LABEL: writer} if writer else None)
    facts = evidence.get("facts") or {}
    a = assessment if assessment is not None else assess(evidence)
    if a is not None:
        _node(fams, a)
    _acs(fams, facts)
    _dcb(fams, evidence.get("dcb"), drift_objects(a, "dcb"))
    for t in evidence.get("rdma_cm") or []:
        if t.get("tos") is not None:
            fams.add("rdma_cm_tos", int(t["tos"]), device=t["device"], port=t["port"], rail=t.get("rail") or "")
    _facts(fams, facts)
    nvfs = evidence.get("nvfs")
    if nvfs:
        for key, short, factor in NVFS_COUNTERS:
            if nvfs.get(key) is not None:
                fams.add(short, int(nvfs[key]) * factor)
    gds = evidence.get("gds")
    if gds:
        fams.add("gds_active", bool(gds.get("gds_active")))
        if gds.get("compat_fallback_suspected") is not None:
            fams.add("gds_compat_fallback_detected", bool(gds["compat_fallback_suspected"]))
        fams.add("gds_verdict_timestamp_seconds", _number(gds.get("time")))
    _rdma_ports(fams, evidence.get("rdma_ports"))
    fams.add("last_check_timestamp_seconds", _number(evidence.get("now")))
    fams.add("check_interval_seconds", _number(evidence.get("interval")))
    if evidence.get("desired_state") is not None:
        fams.add("evidence_desired_state", bool(evidence["desired_state"]))
    return list(fams.by_name.values())


def _rdma_ports(fams, ports):
    """ports: evidence.rdma_port_counters() ({device, port, rail, counters: [{dir, name, category, value}]})."""
    for p in ports or []:
        labels = dict(device=p["device"], port=p["port"], rail=p.get("rail") or "")
        sums = {}
        for c in p.get("counters") or []:
            short = RDMA_SUMS.get(c["category"])
            if short is not None:
                sums[short] = sums.get(short, 0) + int(c["value"])
            own = RDMA_OWN.get(c["name"])
            if own is not None and c["dir"] == "hw_counters":
                fams.add(own, int(c["value"]), **labels)
        for short in sorted(sums):
            fams.add(short, sums[short], **labels)


def render_evidence(evidence):
    return render(families_from_evidence(evidence))
