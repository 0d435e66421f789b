# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: render gpufabric facts as a readable per-node table (verify.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _numa(v):
    return "?" if v is None or v == -1 else str(v)


def _hex(v):
    return "-" if v is None else "0x%04x" % v


def _table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def fabric_table(facts):
    """Lines of text: GPU<->NIC map with PCIe relation, NUMA, ACS on the path, then the node-wide state."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("fabric_table expects the gpufabric facts dict, got %s" % type(facts).__name__)
    bridges = dict((b.get("bdf"), b) for b in facts.get("path_bridges") or [])
    rows = [("GPU", "GPU BDF", "NUMA", "rail", "RDMA dev", "NIC BDF", "NUMA", "PCIe", "ACS ctrl on path", "note")]
    for p in facts.get("pairing") or []:
        acs = []
        for b in p.get("bridges") or []:
            info = (bridges.get(b) or {}).get("acs") or {}
            acs.append(_hex(info.get("ctrl")) if info.get("present") else "none")
        note = []
        if p.get("cross_numa"):
            note.append("CROSS-NUMA")
        if p.get("relation") in ("PHB", "NODE", "SYS"):
            note.append("through host bridge")
        rows.append((
            "GPU%s" % p.get("gpu_index"), p.get("gpu"), _numa(p.get("gpu_numa")),
            p.get("netdev") or "-", "%s:%s" % (p.get("ibdev") or "-", p.get("port") or "-"), p.get("nic"),
            _numa(p.get("nic_numa")), p.get("relation"), ",".join(acs) or "-", " ".join(note),
        ))
    lines = []
    if len(rows) > 1:
        lines.extend(_table(rows))
    else:
        lines.append("no GPU/NIC pairs found (GPUs: %d, RDMA NICs: %d)"
                     % (len(facts.get("gpus") or []), len(facts.get("rails") or [])))
    iommu = facts.get("iommu") or {}
    drv = facts.get("gpu_driver") or {}
    fm = facts.get("fabric_manager") or {}
    nvfs = facts.get("nvidia_fs") or {}
    lines.append("")
    lines.append("IOMMU: %s%s" % (iommu.get("mode", "unknown"),
                                  "  (translated: GPUDirect Storage fails; use iommu=pt)"
                                  if iommu.get("mode") == "translated" else ""))
    lines.append("GPU driver: %s %s" % (drv.get("flavour", "unknown"), drv.get("version") or ""))
    lines.append("Fabric Manager: %s" % ("not needed" if not fm.get("needed") else
                                         ("running" if fm.get("running") else "NEEDED BUT NOT RUNNING")))
    if nvfs.get("loaded"):
        hooked = ", ".join(sorted(nvfs.get("modules") or {})) or "none"
        lines.append("nvidia-fs: %s, storage modules hooked: %s" % (nvfs.get("version") or "?", hooked))
    else:
        lines.append("nvidia-fs: not loaded")
    cross = [p for p in facts.get("pairing") or [] if p.get("cross_numa")]
    for p in cross:
        lines.append("WARNING: GPU%s (%s, NUMA %s) is paired with %s (NUMA %s): %s, traffic crosses the CPU interconnect"
                     % (p.get("gpu_index"), p.get("gpu"), _numa(p.get("gpu_numa")), p.get("netdev"),
                        _numa(p.get("nic_numa")), p.get("relation")))
    if iommu.get("mode") == "translated":
        lines.append("WARNING: IOMMU in translated mode")
    links = facts.get("pcie_links")
    if links is not None:
        below = [x for x in links if x.get("state") in ("degraded", "slot_limited")]
        idle = [x for x in links if x.get("state") == "idle"]
        lines.append("PCIe links on the GPU<->NIC paths: %d, %d below capability%s"
                     % (len(links), len(below), ", %d idle GPU(s) at a lower speed (not judged)" % len(idle)
                        if idle else ""))
        for x in below:
            lines.append("WARNING: PCIe link %s" % x.get("reason"))
    gdr = facts.get("gpudirect_rdma")
    if gdr:
        lines.append("GPUDirect RDMA: %s" % {"dmabuf": "DMA-BUF", "nvidia_peermem": "nvidia-peermem"}.get(
            gdr.get("mechanism"), "none"))
        if gdr.get("warning"):
            lines.append("WARNING: %s" % gdr["warning"])
    return lines


class FilterModule(object):
    def filters(self):
        return {"fabric_table": fabric_table}
