# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS on the GPU<->NIC paths: select the bridges, clear the redirect bits, persist the choice.

NVIDIA's guidance for GPUDirect RDMA: change ACS only on the bridges a GPU<->NIC peer-to-peer transfer
crosses (the switch's downstream ports and upstream port, or the root ports when the pair meets at the
root complex), never on every device. Plain Python over ``pci`` (config space, ACS register) and
``topology`` (sysfs scan, pairing, path bridges); used by the ``pcie_acs`` module and by the boot-time
applier.

Public API:

``validate_clear(names) -> (names, mask)``
    ``ReqRedir``/``CmpltRedir``/``EgressCtrl``/``SrcValid``/``UpstreamFwd`` (case-insensitive, or the
    short forms ``RR`` ``CR`` ``EC`` ``SV`` ``UF``); ``AcsError`` on unknown, unmanaged or repeated names.
``select(sysroot, endpoints=None, bridges=None, pairs='paired', scan=None) -> Selection``
    Validates explicit endpoints / bridges (before anything is touched) or discovers the GPU<->NIC pairs,
    and returns the union of the path bridges with the pairs each serves.
``apply_acs(sysroot, bridges, clear_bits, check_mode=False, scan=None, all_or_nothing=False) -> dict``
    Clears ``clear_bits`` (names or a mask, restricted to what each ACS capability implements) in the ACS
    control register of each bridge (BDF, kernel path form, or ``{bdf, kernel_path}``), read-modify-write
    through sysfs ``config`` with read-back. Returns ``{changed, bridges: [...], drift: [...], errors}``.
``kernel_arg(entries) -> 'pci=disable_acs_redir=<path>;<path>' | None``
``off_path_clear(sysroot, selected, scan=None) -> [...]``: bridges not on any path whose ACS bits the
    kernel would have set (IOMMU on) are clear (information only).
``state_document`` / ``write_state`` / ``read_state`` / ``remove_state`` / ``apply_state``:
    ``/etc/gpufabric/acs.json`` for the boot-time applier (path forms survive bus renumbering).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology

STATE_FILE = "/etc/gpufabric/acs.json"
STATE_SCHEMA = "gpufabric.acs/v1"

# lspci's names of the ACS control bits this module manages, in register order
BIT_NAMES = (("SrcValid", "SV"), ("ReqRedir", "RR"), ("CmpltRedir", "CR"), ("UpstreamFwd", "UF"),
             ("EgressCtrl", "EC"))
LONG_OF_SHORT = dict((s, n) for n, s in BIT_NAMES)
ALL_NAMES = dict((n, s) for n, s in BIT_NAMES)
UNMANAGED = {"TRANSBLK": "TransBlk", "TB": "TransBlk", "DIRECTTRANS": "DirectTrans", "DT": "DirectTrans"}
DEFAULT_CLEAR = ["ReqRedir", "CmpltRedir", "EgressCtrl"]
# pci=disable_acs_redir= clears exactly these (drivers/pci/pci.c: RR | CR | EC)
KERNEL_REDIR_MASK = pci.ACS_BIT["RR"] | pci.ACS_BIT["CR"] | pci.ACS_BIT["EC"]
# with an IOMMU the kernel enables SV | RR | CR | UF as far as implemented (pci_std_enable_acs)
KERNEL_DEFAULT_MASK = pci.ACS_BIT["SV"] | pci.ACS_BIT["RR"] | pci.ACS_BIT["CR"] | pci.ACS_BIT["UF"]


class AcsError(ValueError):
    """Bad input or a device state the module must not touch; the message is for a platform engineer."""


def hex16(value):
    return None if value is None else "0x%04x" % value


def names_of(mask):
    """Long names of the managed bits set in ``mask``, in register order."""
    return [n for n, s in BIT_NAMES if mask & pci.ACS_BIT[s]]


def validate_clear(names):
    """(canonical long names, bit mask) of the bits to clear."""
    if names is None:
        names = list(DEFAULT_CLEAR)
    if isinstance(names, str):
        names = [n for n in names.replace("|", ",").split(",") if n.strip()]
    if not names:
        raise AcsError("clear must name at least one ACS bit (%s)" % ", ".join(n for n, _s in BIT_NAMES))
    out, mask = [], 0
    by_upper = dict((n.upper(), n) for n, _s in BIT_NAMES)
    for raw in names:
        key = str(raw).strip()
        up = key.upper()
        if up in by_upper:
            name = by_upper[up]
        elif up in LONG_OF_SHORT:
            name = LONG_OF_SHORT[up]
        elif up in UNMANAGED:
            raise AcsError("ACS bit %s is not managed by this module (it is unrelated to peer-to-peer routing "
                           "between GPU and NIC); choose from %s" % (UNMANAGED[up], ", ".join(n for n, _s in BIT_NAMES)))
        else:
            raise AcsError("unknown ACS bit name %r in clear (choose from %s)"
                           % (raw, ", ".join(n for n, _s in BIT_NAMES)))
        if name in out:
            raise AcsError("ACS bit %s is listed twice in clear" % name)
        out.append(name)
        mask |= pci.ACS_BIT[ALL_NAMES[name]]
    return names_of(mask), mask


def _mask(clear_bits):
    if isinstance(clear_bits, int):
        return clear_bits & pci.ACS_ALL
    return validate_clear(clear_bits)[1]


def setpci_command(bdf, value):
    return "setpci -s %s ECAP_ACS+0x6.w=%04x" % (bdf, value)


# ------------------------------------------------------------------------------------------------
# selection


class Selection(object):
    """The bridges chosen for ACS changes: ``order`` (PCI order), ``pairs`` {bdf: [[gpu, nic], ...]}."""

    def __init__(self, scan):
        self.scan = scan
        self.order = []
        self.pairs = {}
        self.explicit = set()
        self.endpoint_pairs = []

    def add(self, bdf, pair=None):
        if bdf not in self.pairs:
            self.pairs[bdf] = []
            self.order.append(bdf)
        if pair is not None and list(pair) not in self.pairs[bdf]:
            self.pairs[bdf].append(list(pair))

    def sorted(self):
        return sorted(self.order, key=pci.parse_bdf)


def _norm(text, what):
    if not isinstance(text, str) or not text.strip():
        raise AcsError("%s must be a PCI address like 0000:1a:00.0, got %r" % (what, text))
    try:
        return pci.normalize_bdf(text)
    except ValueError:
        raise AcsError("%s %r is not a PCI address (want 0000:1a:00.0 or 1a:00.0)" % (what, text))


def _exists(scan, bdf, what):
    if scan.get(bdf) is None:
        raise AcsError("%s %s not found: no /sys/bus/pci/devices/%s" % (what, bdf, bdf))


def is_bridge(scan, bdf):
    """Type 1 header, or a PCI Express port type of a bridge."""
    cfg = scan.config(bdf)
    if isinstance(cfg, pci.ConfigSpace):
        if cfg.is_bridge:
            return True
        return cfg.port_type in (0x4, 0x5, 0x6, 0x7, 0x8)
    dev = scan.get(bdf)
    return bool(dev is not None and dev.is_bridge_class)


def validate_endpoints(scan, endpoints):
    """[(gpu, nic)] normalized; AcsError on malformed, missing, equal, duplicated or nested endpoints."""
    out = []
    seen = {}
    if not isinstance(endpoints, (list, tuple)):
        raise AcsError("endpoints must be a list of {gpu: <bdf>, nic: <bdf>}")
    for i, ep in enumerate(endpoints):
        if not isinstance(ep, dict):
            raise AcsError("endpoints[%d] must be a mapping {gpu: <bdf>, nic: <bdf>}, got %r" % (i, ep))
        extra = sorted(set(ep) - set(("gpu", "nic")))
        if extra:
            raise AcsError("endpoints[%d]: unknown key(s) %s (only gpu and nic)" % (i, ", ".join(extra)))
        gpu = _norm(ep.get("gpu"), "endpoints[%d].gpu" % i)
        nic = _norm(ep.get("nic"), "endpoints[%d].nic" % i)
        if gpu == nic:
            raise AcsError("endpoints[%d]: gpu and nic are the same device %s" % (i, gpu))
        key = frozenset((gpu, nic))
        if key in seen:
            raise AcsError("endpoints[%d] repeats endpoints[%d] (%s <-> %s)" % (i, seen[key], gpu, nic))
        seen[key] = i
        _exists(scan, gpu, "endpoints[%d].gpu" % i)
        _exists(scan, nic, "endpoints[%d].nic" % i)
        for a, b in ((gpu, nic), (nic, gpu)):
            dev = scan.get(b)
            if a in dev.chain[:-1]:
                raise AcsError("endpoints[%d]: %s is a bridge above %s; endpoints must be two devices, "
                               "neither below the other" % (i, a, b))
        out.append((gpu, nic))
    return out


def validate_bridges(scan, bridges):
    out = []
    for i, b in enumerate(bridges):
        bdf = _norm(b, "bridges[%d]" % i)
        if bdf in out:
            raise AcsError("bridges lists %s twice" % bdf)
        _exists(scan, bdf, "bridges[%d]" % i)
        if not is_bridge(scan, bdf):
            raise AcsError("bridges[%d] %s is not a bridge (%s): ACS redirect is set on switch ports and root "
                           "ports" % (i, bdf, scan.role(bdf)))
        out.append(bdf)
    return out


def discovered_pairs(scan, pairs="paired"):
    """GPU<->NIC pairs of the host: the GPU<->rail pairing, or every GPU with every RDMA NIC."""
    if pairs not in ("paired", "all"):
        raise AcsError("pairs must be paired or all, not %r" % (pairs,))
    facts = topology.discover(scan.sysroot, gather_subset=["pci"])
    if pairs == "paired":
        return [(p["gpu"], p["nic"]) for p in facts["pairing"]]
    nics = [n["bdf"] for n in facts["nics"] if n["rdma"]]
    return [(g["bdf"], n) for g in facts["gpus"] for n in nics]


def select(sysroot, endpoints=None, bridges=None, pairs="paired", scan=None):
    """The bridges on the GPU<->NIC paths (plus explicit bridges). Validates everything first."""
    scan = scan or topology.PciScan.of(sysroot)
    sel = Selection(scan)
    explicit = validate_bridges(scan, bridges or [])
    if endpoints:
        pair_list = validate_endpoints(scan, endpoints)
    elif bridges:
        pair_list = []
    else:
        pair_list = discovered_pairs(scan, pairs)
    sel.endpoint_pairs = pair_list
    for gpu, nic in pair_list:
        for entry in topology.path_bridges(scan.sysroot, gpu, nic, scan=scan):
            sel.add(entry["bdf"], (gpu, nic))
    for bdf in explicit:
        sel.add(bdf)
        sel.explicit.add(bdf)
    return sel


# ------------------------------------------------------------------------------------------------
# apply


def resolve(scan, spec):
    """BDF of a bridge given as a BDF, a kernel path form or ``{bdf, kernel_path}`` (path wins).

    Path semantics as the kernel's ``pci_dev_str_match_path``: the last ``<dev>.<fn>`` is the device,
    each earlier one its upstream bridge, the first carries domain and bus.
    """
    if isinstance(spec, dict):
        spec = spec.get("kernel_path") or spec.get("bdf")
    try:
        first, rest = pci.parse_kernel_path(spec)
    except ValueError as e:
        raise AcsError("bad bridge %r: %s" % (spec, e))
    if not rest:
        _exists(scan, first, "bridge")
        return first
    found = []
    for bdf, dev in scan.devices.items():
        chain = dev.chain
        if len(chain) < len(rest) + 1 or chain[-(len(rest) + 1)] != first:
            continue
        tail = [tuple(pci.parse_bdf(b)[2:]) for b in chain[-len(rest):]]
        if tail == rest:
            found.append(bdf)
    if not found:
        raise AcsError("no PCI device matches the path %s (the PCI tree changed: run pcie_acs again)" % spec)
    if len(found) > 1:
        raise AcsError("path %s matches several devices: %s" % (spec, ", ".join(sorted(found))))
    return found[0]


def _entry(scan, bdf):
    try:
        kpath = pci.kernel_path(scan.sysroot, bdf)
    except pci.PciError:
        kpath = None
    return {"bdf": bdf, "kernel_path": kpath, "role": scan.role(bdf), "acs": False, "acs_cap": None,
            "acs_cap_bits": [], "ctrl_before": None, "ctrl_after": None, "bits_cleared": [],
            "setpci": None, "status": None}


def plan_bridge(scan, bdf, mask):
    """(entry, desired ctrl or None) for one bridge from its current config space."""
    e = _entry(scan, bdf)
    try:
        info = pci.acs_info(scan.sysroot, bdf)      # fresh read: the scan caches config spaces
    except pci.PciError as err:
        raise AcsError("cannot read the ACS capability of %s: %s" % (bdf, err))
    if not info["present"]:
        e["status"] = "no_acs"
        return e, None
    cap, ctrl = info["cap"], info["ctrl"]
    effective = mask & cap
    desired = ctrl & ~effective & 0xFFFF
    e.update({"acs": True, "acs_cap": hex16(cap), "acs_cap_bits": names_of(cap),
              "ctrl_before": hex16(ctrl), "ctrl_after": hex16(desired),
              "bits_cleared": names_of(ctrl & effective),
              "setpci": setpci_command(bdf, desired),
              "status": "ok" if desired == ctrl else "clear"})
    return e, desired


def apply_acs(sysroot, bridges, clear_bits, check_mode=False, scan=None, all_or_nothing=False):
    """Clear ``clear_bits`` on each bridge; see the module docstring.

    Every bridge is resolved and read first. A bridge that cannot be resolved or read gets
    ``status: error`` and its message in ``errors``; the others are still written unless
    ``all_or_nothing`` (then nothing is written when any bridge failed). A failed write or read-back
    is recorded the same way. Never raises for one bridge's failure.
    """
    scan = scan or topology.PciScan.of(sysroot)
    mask = _mask(clear_bits)
    result = {"changed": False, "bridges": [], "drift": [], "errors": []}
    planned = []
    for spec in bridges:
        try:
            bdf = resolve(scan, spec)
            entry, desired = plan_bridge(scan, bdf, mask)
        except AcsError as e:
            result["errors"].append(str(e))
            result["bridges"].append({"bdf": spec.get("bdf") if isinstance(spec, dict) else spec,
                                      "status": "error", "error": str(e)})
            continue
        result["bridges"].append(entry)
        if desired is not None and entry["status"] != "ok":
            result["drift"].append({"concern": "acs", "object": bdf, "key": "acs_ctrl",
                                    "current": entry["ctrl_before"], "desired": entry["ctrl_after"]})
            planned.append((entry, desired))
    if result["errors"] and all_or_nothing:
        for entry, _desired in planned:
            entry["status"] = "not_written"
            entry["error"] = "not written: another bridge could not be read, and then none is written"
        result["results"] = bridge_results(result["bridges"])
        return result
    for entry, desired in planned:
        if check_mode:
            entry["status"] = "would_clear"
            result["changed"] = True
            continue
        try:
            before, after = pci.write_acs_ctrl(sysroot, entry["bdf"], desired)
        except (pci.PciError, IOError, OSError) as e:
            entry["status"] = "error"
            entry["error"] = str(e)
            result["errors"].append(str(e))
            continue
        entry["ctrl_before"], entry["ctrl_after"] = hex16(before), hex16(after)
        entry["bits_cleared"] = names_of(before & ~after & pci.ACS_ALL)
        entry["setpci"] = setpci_command(entry["bdf"], after)
        entry["status"] = "cleared"
        result["changed"] = result["changed"] or before != after
    result["results"] = bridge_results(result["bridges"])
    return result


def bridge_results(entries):
    """One results.result per bridge entry of apply_acs (object: the BDF)."""
    out = []
    for e in entries:
        if e["status"] in ("error", "not_written"):
            out.append(results.result(e["bdf"], results.FAILED, e.get("error") or e["status"]))
        elif e["status"] in ("cleared", "would_clear") and e["ctrl_before"] != e["ctrl_after"]:
            out.append(results.result(e["bdf"], results.CHANGED,
                                      changes=[results.change("acs_ctrl", e["ctrl_before"], e["ctrl_after"])]))
        else:
            out.append(results.result(e["bdf"], results.UNCHANGED))
    return out


# ------------------------------------------------------------------------------------------------
# persistence and reporting


def kernel_arg(entries):
    """``pci=disable_acs_redir=<path>;...`` for the bridges whose ACS implements RR, CR or EC; None if none."""
    paths = set()
    for e in entries:
        if not e.get("acs") or not e.get("kernel_path"):
            continue
        if int(e["acs_cap"], 16) & KERNEL_REDIR_MASK:
            paths.add(e["kernel_path"])
    if not paths:
        return None
    return "pci=disable_acs_redir=" + ";".join(sorted(paths))


def persist_warnings(clear_names, persist):
    extra = [n for n in clear_names if pci.ACS_BIT[ALL_NAMES[n]] & ~KERNEL_REDIR_MASK]
    if persist == "kernel_cmdline" and extra:
        return ["pci=disable_acs_redir= only clears ReqRedir, CmpltRedir and EgressCtrl at boot; %s were cleared "
                "now but will be set again by the kernel at the next boot (use persist: applier to keep them clear)"
                % ", ".join(extra)]
    if persist == "none":
        return ["persist is none: the kernel sets the ACS bits again at the next boot"]
    return []


def iommu_on(sysroot):
    return any(g.isdigit() for g in sysroot.listdir("/sys/kernel/iommu_groups"))


def off_path_clear(sysroot, selected, scan=None):
    """Bridges NOT on a path whose ACS lacks bits the kernel would have set (IOMMU on): information only."""
    scan = scan or topology.PciScan.of(sysroot)
    if not iommu_on(sysroot):
        return []
    out = []
    chosen = set(selected)
    for bdf in sorted(scan.devices, key=pci.parse_bdf):
        if bdf in chosen or not is_bridge(scan, bdf):
            continue
        info = scan.acs(bdf)
        if "error" in info or not info["present"]:
            continue
        expected = info["cap"] & KERNEL_DEFAULT_MASK
        missing = expected & ~info["ctrl"]
        if missing:
            out.append({"bdf": bdf, "role": scan.role(bdf), "acs_cap": hex16(info["cap"]),
                        "ctrl": hex16(info["ctrl"]), "kernel_default": hex16(expected),
                        "bits_clear": names_of(missing)})
    return out


def diff_lines(entries, key):
    lines = []
    for e in entries:
        if e.get("acs"):
            lines.append("%s ECAP_ACS+0x6 = %s\n" % (e["bdf"], e[key]))
    return "".join(lines)


APPLIED = ("ok", "cleared", "would_clear")
FAILED = ("error", "not_written")


def _bridge_key(b):
    return b.get("kernel_path") or b.get("bdf")


def state_document(entries, clear_names, previous=None):
    """The acs.json document after applying ``entries`` (apply_acs's bridges): the bridges with ACS that were
    applied (or needed nothing) with ``clear_names``; each failed one keeps its entry in ``previous`` (the document
    read before), with the bits recorded for it then (``clear`` on the entry when they differ from the document's),
    so the boot-time applier re-applies what each bridge really has."""
    clear_names = list(clear_names)
    bridges = [{"bdf": e["bdf"], "kernel_path": e["kernel_path"]} for e in entries
               if e.get("acs") and e.get("status") in APPLIED]
    failed = set(_bridge_key(e) for e in entries if e.get("status") in FAILED) | \
        set(e.get("bdf") for e in entries if e.get("status") in FAILED)
    for b in (previous or {}).get("bridges", []):
        if _bridge_key(b) in failed or b.get("bdf") in failed:
            kept = {"bdf": b.get("bdf"), "kernel_path": b.get("kernel_path")}
            clear = b.get("clear") or previous.get("clear") or DEFAULT_CLEAR
            if list(clear) != clear_names:
                kept["clear"] = list(clear)
            bridges.append(kept)
    bridges.sort(key=lambda x: pci.parse_bdf(x["bdf"]) if x.get("bdf") else (0xFFFF,))
    return {"schema": STATE_SCHEMA, "clear": clear_names, "bridges": bridges}


def state_groups(doc):
    """[(bridges, clear)] of a recorded document: the bridges grouped by the bits recorded for them."""
    groups = []
    for b in doc.get("bridges", []):
        clear = list(b.get("clear") or doc.get("clear") or DEFAULT_CLEAR)
        spec = {"bdf": b.get("bdf"), "kernel_path": b.get("kernel_path")}
        same = [g for g in groups if g[1] == clear]
        if same:
            same[0][0].append(spec)
        else:
            groups.append(([spec], clear))
    return groups


def render_state(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def read_state(sysroot):
    """The recorded document, or None when there is none. AcsError when it is unreadable."""
    try:
        text = bounded_read.read_text(sysroot.path(STATE_FILE))
    except (OSError, ValueError) as e:   # a link, not a regular file, over RECORD_LIMIT, not UTF-8
        raise AcsError("cannot read %s: %s" % (STATE_FILE, e))
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:   # RecursionError: nested deeper than the parser's limit
        raise AcsError("%s is not JSON: %s" % (STATE_FILE, e))
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA or not isinstance(doc.get("bridges"), list):
        raise AcsError("%s is not a %s document" % (STATE_FILE, STATE_SCHEMA))
    return doc


def write_state(sysroot, doc, check_mode=False):
    """Record the selection atomically; True when the file changed (or would)."""
    text = render_state(doc)
    if sysroot.read_raw(STATE_FILE) == text:
        return False
    if not check_mode:
        sysroot.write_file_atomic(STATE_FILE, text, 0o644)
    return True


def remove_state(sysroot, check_mode=False):
    if not sysroot.exists(STATE_FILE):
        return False
    if not check_mode:
        sysroot.remove(STATE_FILE)
    return True


def apply_state(sysroot, check_mode=False):
    """What the boot-time applier runs: apply the recorded selection (None when nothing is recorded)."""
    doc = read_state(sysroot)
    if doc is None:
        return None
    out = {"changed": False, "bridges": [], "drift": [], "errors": [], "results": []}
    for bridges, clear in state_groups(doc):
        res = apply_acs(sysroot, bridges, clear, check_mode)
        out["changed"] = out["changed"] or res["changed"]
        for k in ("bridges", "drift", "errors", "results"):
            out[k].extend(res[k])
    return out
