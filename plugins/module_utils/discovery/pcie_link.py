# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe link health on the GPU<->NIC paths: each link's trained speed and width against what both of its ends
can do, and the MaxPayload / MaxReadReq the kernel programmed. Read-only: the concern ``pcie_link``.

What the kernel shows, and how it is read here (no simulator shape):

* ``current_link_speed`` / ``current_link_width`` / ``max_link_speed`` / ``max_link_width`` exist on every PCI
  Express function (drivers/pci/pci-sysfs.c, ``pcie_dev_attrs_are_visible``). The speed text changed over the
  years: ``"32.0 GT/s PCIe"`` (``pci_speed_string`` since 5.x), ``"16 GT/s"``, ``"8 GT/s"``, ``"2.5 GT/s"`` (4.x),
  ``"Unknown"`` / ``"Unknown speed"`` when the register holds no known code; the width is ``"%u"``, ``0`` when
  the link is down. A conventional PCI function has none of them; then the PCI Express capability in config
  space is decoded instead, where it can be read, else the link is ``unknown``.
* The files show the function's *own* Link Status register. On an endpoint or a switch's upstream port that
  is the link above it; on a root port or a switch's downstream port it is the link below it. So a physical
  link is (downstream-facing port, the function below it); its capability is the lower of the two ends' maxima
  (a Gen5 GPU in a Gen4 slot can only train to Gen4). This module walks every upstream-facing function on a
  GPU<->NIC path (the GPU, the NIC functions, the switches' upstream ports) and pairs it with its parent port.
  The link between a switch's upstream port and its downstream ports is internal to the switch and not a link.
* An SR-IOV VF has no link of its own (its Link registers are reserved): its PF's link is the one read.
* GPUs lower their link speed when idle (dynamic link speed power management: an idle H100/H200 sits at
  2.5 GT/s and goes back to 32 GT/s under load), while their width stays. So by default a GPU link below its
  speed but at full width is ``idle``, not degraded; set ``gpu_idle_speed: check`` to judge the speed too,
  in a run made while the GPUs are busy. The width is always judged.
* MaxPayload (DEVCTL bits 7:5, ``128 << n``), MaxReadReq (DEVCTL bits 14:12) and the supported MaxPayload
  (DEVCAP bits 2:0) come from the PCI Express capability (include/uapi/linux/pci_regs.h ``PCI_EXP_DEVCTL`` at
  +8, ``PCI_EXP_DEVCAP`` at +4, ``PCI_EXP_LNKCAP`` +12, ``PCI_EXP_LNKSTA`` +18, ``PCI_EXP_LNKCAP2`` +44); the
  capability lives in the first 256 bytes, which only root can read beyond the first 64. They are reported,
  and two ends of a link with different MaxPayload are noted; the kernel chose them (pcie_bus_* policy).

No software on the node can make a link train wider or faster for good: a degraded link is a card, riser,
cable or slot matter (reseat, check the BIOS link settings, reboot). The concern is reported as drift and is
never "fixed" by a run.

Public API: ``parse_speed``, ``parse_width``, ``decode_pcie``, ``path_links(scan, facts, desired)``,
``warnings(links)``, ``normalize_desired(desired)``, ``check(sysroot, desired=None, facts=None, scan=None)``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci

CONCERN = "pcie_link"
PCI_DEVICES = "/sys/bus/pci/devices"
FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
# Link speed codes of LNKSTA/LNKCAP (PCI_EXP_LNKSTA_CLS_*) and the bit of LNKCAP2's vector (bit n: code n)
CODE_SPEED = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
GENERATION = dict((v, k) for k, v in CODE_SPEED.items())
_SPEED = re.compile(r"(\d+(?:\.\d+)?) GT/s(?: PCIe)?\Z")
DEFAULTS = {"gpu_idle_speed": "ignore", "slot_limited": "drift"}
CHOICES = {"gpu_idle_speed": ("ignore", "check"), "slot_limited": ("drift", "ok")}
FIX = ("software cannot retrain a PCIe link for good: reseat the card or cable, check the slot, riser and the "
       "BIOS PCIe link settings, then reboot")


def parse_speed(text):
    """GT/s of a sysfs link speed ("32.0 GT/s PCIe", "8 GT/s"), None for "Unknown", absent or other text."""
    m = _SPEED.match((text or "").strip())
    return float(m.group(1)) if m else None


def parse_width(text):
    """Lanes of a sysfs link width ("16"); None for 0 (link down), absent or other text."""
    t = (text or "").strip()
    return int(t) if t.isdigit() and 0 < int(t) <= 32 else None


def normalize_desired(desired):
    """The desired-state dict with defaults; ValueError on an unknown key or value."""
    desired = dict(desired or {})
    unknown = sorted(k for k in desired if k not in DEFAULTS)
    if unknown:
        raise ValueError("pcie_link: unknown setting(s) %s (known: %s)" % (", ".join(unknown), ", ".join(DEFAULTS)))
    out = dict(DEFAULTS)
    for k, v in desired.items():
        if v is None:
            continue
        if v not in CHOICES[k]:
            raise ValueError("pcie_link: %s must be one of %s, got %r" % (k, ", ".join(CHOICES[k]), v))
        out[k] = v
    return out


def decode_pcie(cfg):
    """Link and device control fields of a ConfigSpace's PCI Express capability, or None without one."""
    if not isinstance(cfg, pci.ConfigSpace) or len(cfg) < pci.PCI_CFG_SPACE_SIZE:
        return None
    off = cfg.find_capability(pci.PCI_CAP_ID_EXP)
    if off is None:
        return None
    flags, devcap, devctl = cfg.u16(off + 2), cfg.u32(off + 4), cfg.u16(off + 8)
    lnkcap, lnksta = cfg.u32(off + 12), cfg.u16(off + 18)
    if None in (flags, devcap, devctl, lnkcap, lnksta):
        return None
    lnkcap2 = cfg.u32(off + 44) if (flags & 0xF) >= 2 else 0
    vector = (lnkcap2 or 0) & 0xFE
    if vector:                                   # as pcie_get_speed_cap: LNKCAP2's highest supported speed
        max_code = max(n for n in range(1, 8) if vector & (1 << n))
    else:
        max_code = lnkcap & 0xF
    width_cap, width = (lnkcap >> 4) & 0x3F, (lnksta >> 4) & 0x3F
    return {"max_speed": CODE_SPEED.get(max_code), "max_width": width_cap or None,
            "current_speed": CODE_SPEED.get(lnksta & 0xF), "current_width": width or None,
            "max_payload": 128 << ((devctl >> 5) & 0x7), "max_read_request": 128 << ((devctl >> 12) & 0x7),
            "max_payload_supported": 128 << (devcap & 0x7)}


def read_end(scan, bdf):
    """One function's view of its link: speeds/widths from sysfs (else config space), MPS/MRRS."""
    sr = scan.sysroot
    base = "%s/%s" % (PCI_DEVICES, bdf)
    raw = dict((f, sr.read(base + "/" + f)) for f in FILES)
    regs = decode_pcie(scan.config(bdf))
    end = {"bdf": bdf, "role": scan.role(bdf), "source": None, "raw": raw}
    if any(v is not None for v in raw.values()):
        end.update(source="sysfs", current_speed=parse_speed(raw["current_link_speed"]),
                   current_width=parse_width(raw["current_link_width"]),
                   max_speed=parse_speed(raw["max_link_speed"]), max_width=parse_width(raw["max_link_width"]))
    elif regs:
        end.update(source="config", **dict((k, regs[k]) for k in
                                           ("current_speed", "current_width", "max_speed", "max_width")))
    else:
        end.update(current_speed=None, current_width=None, max_speed=None, max_width=None)
    for k in ("max_payload", "max_read_request", "max_payload_supported"):
        end[k] = regs[k] if regs else None
    return end


def _low(*values):
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _fmt_speed(v):
    return None if v is None else ("%g GT/s" % v)


def _kind(dev, role):
    if dev is not None and dev.is_gpu:
        return "gpu"
    if dev is not None and dev.is_nic:
        return "nic"
    return "switch" if role == "upstream" else ("bridge" if role == "bridge" else "device")


def _path_functions(facts):
    """{bdf: [gpu bdfs whose path it is on]} of the GPUs, NIC functions and bridges of the pairing."""
    out = {}
    for p in facts.get("pairing") or []:
        for b in [p["gpu"]] + list(p.get("nic_functions") or [p["nic"]]) + list(p.get("bridges") or []):
            if b and p["gpu"] not in out.setdefault(b, []):
                out[b].append(p["gpu"])
    return out


def path_links(scan, facts, desired=None):
    """The links on the GPU<->NIC paths of ``facts`` (gpufabric pairing), each judged; in PCI order."""
    desired = normalize_desired(desired)
    funcs = _path_functions(facts)
    ends, order = {}, []                        # a link's lower end -> its device, role, note and GPUs
    for bdf in sorted(funcs, key=pci.parse_bdf):
        dev = scan.get(bdf)
        lower = bdf
        note = None
        if dev is not None and dev.physfn:
            lower, note = dev.physfn, "SR-IOV VF %s: its PF %s's link is read" % (bdf, dev.physfn)
            dev = scan.get(lower)
        role = scan.role(lower)
        if role in ("root_port", "downstream"):
            continue                                # the upper end of a link; its lower end is on the path
        if lower not in ends:
            ends[lower] = (dev, role, note, set())
            order.append(lower)
        ends[lower][3].update(funcs[bdf])       # the PF and its VFs share one link: it carries all their GPUs
    links = []
    for lower in order:
        dev, role, note, pairs = ends[lower]
        port = None
        above = dev.chain[-2] if dev is not None and len(dev.chain) >= 2 else None
        if above and scan.role(above) in ("root_port", "downstream", "bridge"):
            port = above
        links.append(_judge(scan, lower, port, _kind(dev, role), pairs, desired, note))
    return links


def _judge(scan, bdf, port, kind, pairs, desired, note):
    d = read_end(scan, bdf)
    p = read_end(scan, port) if port else None
    cur_s = d["current_speed"] if d["current_speed"] is not None else (p or {}).get("current_speed")
    cur_w = d["current_width"] if d["current_width"] is not None else (p or {}).get("current_width")
    cap_s = _low(d["max_speed"], (p or {}).get("max_speed"))
    cap_w = _low(d["max_width"], (p or {}).get("max_width"))
    link = {"device": bdf, "kind": kind, "port": port, "pairs": sorted(pairs),
            "current_speed": cur_s, "current_width": cur_w, "max_speed": cap_s, "max_width": cap_w,
            "device_max_speed": d["max_speed"], "device_max_width": d["max_width"],
            "port_max_speed": (p or {}).get("max_speed"), "port_max_width": (p or {}).get("max_width"),
            "generation": GENERATION.get(cur_s), "source": d["source"] or (p or {}).get("source"),
            "max_payload": d["max_payload"], "port_max_payload": (p or {}).get("max_payload"),
            "max_read_request": d["max_read_request"], "max_payload_supported": d["max_payload_supported"],
            "notes": [note] if note else []}
    if d["max_payload"] and link["port_max_payload"] and d["max_payload"] != link["port_max_payload"]:
        link["notes"].append("MaxPayload %d on %s but %d on its port %s"
                             % (d["max_payload"], bdf, link["port_max_payload"], port))
    name = "%s %s" % (kind.upper() if kind in ("gpu", "nic") else kind, bdf)
    slot = [x for x in (("width", d["max_width"], (p or {}).get("max_width")),
                        ("speed", d["max_speed"], (p or {}).get("max_speed"))) if x[1] and x[2] and x[1] > x[2]]
    if cur_s is None or cur_w is None or cap_s is None or cap_w is None:
        state, reason = "unknown", ("%s: the link's speed or width is not readable (link down, device powered "
                                    "off in D3cold, or no PCI Express link registers)" % name)
    elif cur_w < cap_w:
        state, reason = "degraded", "%s trained at x%d of x%d" % (name, cur_w, cap_w)
    elif cur_s < cap_s and kind == "gpu" and desired["gpu_idle_speed"] == "ignore":
        state, reason = "idle", ("%s at %s of %s with its full width x%d: an idle GPU lowers its link speed "
                                 "(power management); judged under load with gpu_idle_speed: check"
                                 % (name, _fmt_speed(cur_s), _fmt_speed(cap_s), cur_w))
    elif cur_s < cap_s:
        state, reason = "degraded", "%s trained at %s of %s" % (name, _fmt_speed(cur_s), _fmt_speed(cap_s))
    else:
        state, reason = "ok", None
    if slot and state in ("ok", "idle"):
        what, dev_max, port_max = slot[0]
        fmt = (lambda v: "x%d" % v) if what == "width" else _fmt_speed
        text = ("%s can do %s but its port %s only %s: the slot limits the link"
                % (name, fmt(dev_max), port, fmt(port_max)))
        if desired["slot_limited"] == "drift":
            state, reason = "slot_limited", text
        else:
            link["notes"].append(text)
    link.update(state=state, reason=reason)
    return link


def warnings(links):
    """Operator warnings of the links below their capability."""
    return ["PCIe link below capability: %s (%s)" % (link["reason"], FIX.split(":", maxsplit=1)[0])
            for link in links or [] if link["state"] in ("degraded", "slot_limited")]


def _items(link):
    out = []
    obj = "%s link %s" % (link["kind"], link["device"]) + (" <- %s" % link["port"] if link["port"] else "")
    if link["state"] == "degraded" and link["current_width"] < link["max_width"]:
        out.append(("width", "x%d" % link["current_width"], "x%d" % link["max_width"]))
    elif link["state"] == "degraded":
        out.append(("speed", _fmt_speed(link["current_speed"]), _fmt_speed(link["max_speed"])))
    elif link["state"] == "slot_limited":
        if link["device_max_width"] and link["port_max_width"] and link["device_max_width"] > link["port_max_width"]:
            out.append(("slot_width", "x%d" % link["port_max_width"], "x%d" % link["device_max_width"]))
        else:
            out.append(("slot_speed", _fmt_speed(link["port_max_speed"]), _fmt_speed(link["device_max_speed"])))
    return [{"concern": CONCERN, "object": obj, "key": k, "current": c, "desired": w} for k, c, w in out]


def status_of(links, paired=True):
    """The pcie_link concern's status document from judged links (read-only: check and real run alike)."""
    if not paired:
        return concerns.status(concerns.NOT_APPLICABLE, "no GPU<->NIC path on this node", links=[])
    items = []
    for link in links:
        items.extend(_items(link))
    unknown = [link for link in links if link["state"] == "unknown"]
    if items:
        bad = [link["reason"] for link in links if link["state"] in ("degraded", "slot_limited")]
        more = "" if len(bad) <= 2 else " and %d more" % (len(bad) - 2)
        return concerns.status(concerns.DRIFT, "%d PCIe link(s) below capability: %s%s; %s"
                               % (len(bad), "; ".join(bad[:2]), more, FIX), items, links=links)
    if links and len(unknown) == len(links):
        return concerns.status(concerns.NOT_CHECKED, "no link on the GPU<->NIC paths could be read: %s"
                               % unknown[0]["reason"], links=links)
    idle = [link for link in links if link["state"] == "idle"]
    reason = None
    if unknown or idle:
        parts = []
        if idle:
            parts.append("%d idle GPU link(s) below their speed at full width (not judged)" % len(idle))
        if unknown:
            parts.append("%d link(s) not readable" % len(unknown))
        reason = "; ".join(parts)
    return concerns.status(concerns.OK, reason, [], links=links)


def check(sysroot, desired=None, facts=None, scan=None):
    """The pcie_link concern of the node: discovery (unless ``facts`` with a pairing are given), the links on
    every GPU<->NIC path, their judgement. Pure read; the same in check mode and in a real run."""
    desired = normalize_desired(desired)
    from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci_scan as topology_pci
    if scan is None:
        scan = topology_pci.PciScan.of(sysroot)
    if facts is None or "pairing" not in facts:
        from ansible_collections.gpufabric.node.plugins.module_utils.discovery import (
            pairing as topology_pairing, rails as topology_rails)
        net = topology_rails.NetScan.of(scan)
        facts = topology_pairing.pci_facts(scan, topology_rails.rails_of(topology_rails.rdma_devices(scan, net)),
                                           net)
    if not facts.get("pairing"):
        return status_of([], paired=False)
    return status_of(path_links(scan, facts, desired))
