# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery stage 3: GPUs, NICs, the relation matrix, GPU<->rail pairing and the path bridges as facts.

Private to the collection; the public names are re-exported by ``topology``.

Pairing works on rails (one RDMA port), not on PCI functions, so a dual-port function gives two rails and a
RoCE LAG bond one rail over two PFs (the PF nearest the GPU is the one the pair reports). Each GPU is paired with
one rail; a rail left over on a card (PCI device, any function) whose other rail a GPU has is that GPU's too (its
pair's ``ports``): NCCL uses every port of a dual-port NIC, so those ports are not "unpaired". Only hardware
rails of a physical function take part: SR-IOV VFs and software RDMA devices (rxe, siw) are reported with
the reason they are left out. Everything is ordered by PCI address and name, never by directory order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci_scan as tpci
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import rails as trails

RANK = tpci.RANK

GPU_MODELS = {
    0x2335: "H200 SXM",
    0x233B: "H200 NVL",
    0x2330: "H100 SXM5 80GB",
    0x2331: "H100 PCIe",
    0x2321: "H100 NVL",
    0x20B5: "A100 SXM4 80GB",
    0x20B2: "A100 SXM4 80GB",
    0x20F1: "A100 PCIe 40GB",
}


def greedy(gpus, units, rank):
    """{gpu: (unit, shared)}: globally closest pairs first, one-to-one while units last.

    ``gpus`` and ``units`` are in tie-break order; ``rank(g, u)`` is comparable (lower is closer). GPUs
    left over when there are more GPUs than units share their closest unit (``shared`` True).
    """
    cand = sorted((rank(g, u), gi, ui) for gi, g in enumerate(gpus) for ui, u in enumerate(units))
    out, used = {}, set()
    for _rank, gi, ui in cand:
        g, u = gpus[gi], units[ui]
        if g in out or ui in used:
            continue
        out[g] = (u, False)
        used.add(ui)
    for _rank, gi, ui in cand:
        g = gpus[gi]
        if g not in out:
            out[g] = (units[ui], True)
    return out


def pair_gpus(gpu_bdfs, nic_bdfs, relation):
    """Closest NIC per GPU; one-to-one while NICs last; ties broken by PCI order.

    ``relation(gpu, nic)`` returns one of RELATIONS. Returns ``{gpu: nic}``.
    """
    gpu_bdfs, nic_bdfs = tpci.sort_bdf(gpu_bdfs), tpci.sort_bdf(nic_bdfs)
    got = greedy(gpu_bdfs, nic_bdfs, lambda g, n: RANK[relation(g, n)])
    return dict((g, u) for g, (u, _shared) in got.items())


def _hex4(v):
    return "0x%04x" % v


def _unit_key(rail):
    return (min(pci.parse_bdf(f) for f in rail["pci_functions"]), trails.natural(rail["ibdev"]), rail["port"])


def _nic_entries(scan, net, rails):
    devs = scan.devices
    by_fn = net.by_function()
    nics = []
    for bdf in tpci.sort_bdf(devs):
        d = devs[bdf]
        if not d.is_nic:
            continue
        mine = [r for r in rails if bdf in r["pci_functions"] or r["bdf"] == bdf]
        hard = [r for r in mine if r["kind"] != "software"]
        soft = [r for r in mine if r["kind"] == "software"]
        bonds = sorted(set(r["bond"] for r in hard if r["bond"]))
        nics.append({
            "bdf": bdf, "vendor": _hex4(d.vendor), "device": _hex4(d.device), "class": "0x%06x" % d.klass,
            "numa": d.numa, "driver": d.driver, "netdevs": list(by_fn.get(bdf, [])),
            "ibdevs": sorted(set(r["ibdev"] for r in hard), key=trails.natural),
            "rdma": any(r["pairable"] for r in hard), "root_bus": d.root_bus,
            "numa_source": d.numa_source, "physfn": d.physfn, "vfs": list(d.virtfns),
            "bond": bonds[0] if bonds else None, "card_bridges": scan.card_bridges(bdf),
            "soft_ibdevs": sorted(set(r["ibdev"] for r in soft), key=trails.natural),
        })
    return nics


def _why_no_rail(nics, rails):
    """Sentence: why no rail can be paired on this host."""
    parts = []
    if not rails:
        parts.append("no RDMA device in /sys/class/infiniband")
    else:
        kinds = {}
        for r in rails:
            kinds.setdefault(r["kind"], []).append(r["ibdev"])
        labels = {"vf": "SR-IOV virtual functions", "software": "software RDMA (no PCI function)",
                  "subfunction": "sub-devices of a function (scalable functions)",
                  "unknown": "without a known PCI function"}
        parts.append("the RDMA devices are " + "; ".join(
            "%s: %s" % (labels.get(k, k), ", ".join(sorted(set(v), key=trails.natural)))
            for k, v in sorted(kinds.items())))
    plain = [n for n in nics if not n["rdma"] and not n["physfn"]]
    if plain:
        parts.append("NICs without RDMA: " + ", ".join(
            "%s (%s%s)" % (n["bdf"], n["driver"] or "no driver",
                           ", " + "/".join(n["netdevs"]) if n["netdevs"] else "") for n in plain))
    return "no RDMA NIC to pair with: " + "; ".join(parts)


def _card(bdf):
    """The card of a PCI function: its domain:bus:device (a dual-port NIC's ports are functions 0 and 1)."""
    return bdf.rsplit(".", 1)[0]


def _port(rail):
    return {"ibdev": rail["ibdev"], "port": rail["port"], "netdev": rail["netdev"], "nic": rail["bdf"]}


def _card_ports(pairing, units, used):
    """Give each rail left over on a paired rail's card to that card's GPU (the first in GPU order)."""
    owner = {}
    for p in pairing:
        for f in p["nic_functions"]:
            owner.setdefault(_card(f), p)
    for u in units:
        if (u["ibdev"], u["port"]) in used:
            continue
        cards = [owner[_card(f)] for f in u["pci_functions"] if _card(f) in owner]
        if cards:
            cards[0]["ports"].append(_port(u))
            used.add((u["ibdev"], u["port"]))


def pci_facts(scan, rails, net=None):
    """gpus, nvswitches, nics, matrix, pairing, path_bridges, unpaired, pairing_reason."""
    net = net or trails.NetScan.of(scan)
    devs = scan.devices
    gpus, nvswitches = [], []
    for bdf in tpci.sort_bdf(devs):
        d = devs[bdf]
        if d.is_gpu:
            gpus.append({"index": len(gpus), "bdf": bdf, "vendor": _hex4(d.vendor), "device": _hex4(d.device),
                         "class": "0x%06x" % d.klass, "model": GPU_MODELS.get(d.device), "numa": d.numa,
                         "driver": d.driver, "root_bus": d.root_bus, "numa_source": d.numa_source})
        elif d.is_nvswitch:
            nvswitches.append({"bdf": bdf, "device": _hex4(d.device), "numa": d.numa, "driver": d.driver})
    nics = _nic_entries(scan, net, rails)
    rdma_nics = [n["bdf"] for n in nics if n["rdma"]]
    matrix = {}
    for g in gpus:
        matrix[g["bdf"]] = dict((n, tpci.relation(scan, devs[g["bdf"]], devs[n])) for n in rdma_nics)

    units = sorted((r for r in rails if r["pairable"] and all(f in devs for f in r["pci_functions"])), key=_unit_key)

    def nearest(g, u):
        return min((RANK[matrix[g][f]], pci.parse_bdf(f), f) for f in u["pci_functions"])

    assigned = greedy([g["bdf"] for g in gpus], units, lambda g, u: nearest(g, u)[0])
    pairing, bridges, used = [], {}, set()
    for g in gpus:
        if g["bdf"] not in assigned:
            continue
        rail, shared = assigned[g["bdf"]]
        used.add((rail["ibdev"], rail["port"]))
        nic = nearest(g["bdf"], rail)[2]
        gd, nd = devs[g["bdf"]], devs[nic]
        path = tpci.path_bdfs(gd, nd)
        for b in path:
            bridges.setdefault(b, []).append(g["bdf"])
        rel = matrix[g["bdf"]][nic]
        pairing.append({
            "gpu": g["bdf"], "gpu_index": g["index"], "nic": nic, "netdev": rail["netdev"],
            "ibdev": rail["ibdev"], "port": rail["port"], "relation": rel,
            "gpu_numa": gd.numa, "nic_numa": nd.numa,
            "cross_numa": rel == "SYS" and gd.numa is not None and nd.numa is not None and gd.numa != nd.numa,
            "bridges": path,
            "nic_functions": list(rail["pci_functions"]), "bond": rail["bond"],
            "phys_netdevs": list(rail["phys_netdevs"]),
            "switch": tpci.meeting_switch(scan, gd, nd), "shared": shared, "ports": [_port(rail)],
        })
    _card_ports(pairing, units, used)

    if not gpus and not units:
        reason = "no GPU and no RDMA rail to pair" if not rails else "no GPU on this host"
    elif not units:
        reason = _why_no_rail(nics, rails)
    elif not gpus:
        reason = "no GPU on this host: the RDMA rails stay unpaired"
    elif len(gpus) > len(units):
        reason = ("more GPUs (%d) than RDMA rails (%d): the GPUs left over share their closest rail"
                  % (len(gpus), len(units)))
    else:
        reason = None
    unpaired = {"gpus": [{"gpu": g["bdf"], "gpu_index": g["index"], "reason": reason}
                         for g in gpus if g["bdf"] not in assigned],
                "rails": []}
    for r in rails:
        if (r["ibdev"], r["port"]) in used:
            continue
        why = r["reason"]
        if why is None:
            why = "no GPU on this host" if not gpus else "every GPU is paired with a rail at least as close"
        unpaired["rails"].append({"ibdev": r["ibdev"], "port": r["port"], "netdev": r["netdev"], "nic": r["bdf"],
                                  "kind": r["kind"], "reason": why})

    cards = {}
    for n in nics:
        for b in n["card_bridges"]:
            cards.setdefault(b, n["bdf"])
    path_list = []
    for b in tpci.sort_bdf(bridges):
        entry = tpci.bridge_entry(scan, b)
        entry["pairs"] = bridges[b]
        entry["nic_card"] = cards.get(b)
        path_list.append(entry)
    return {"gpus": gpus, "nvswitches": nvswitches, "nics": nics, "matrix": matrix,
            "pairing": pairing, "path_bridges": path_list, "unpaired": unpaired, "pairing_reason": reason}
