# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The netdev MTU of the RoCE rails, live, and the active MTU of their RDMA ports.

RoCE carries at most the largest InfiniBand MTU (256..4096) that fits in the netdev MTU once the RoCE v2
headers are taken off: the kernel's ``iboe_get_mtu`` (include/rdma/ib_verbs.h) subtracts GRH 40 + UDP 8 +
BTH 12 + XRC ETH 4 + AtomicETH 28 + ICRC 4 = 96 bytes, so a 4096-byte path MTU needs a netdev MTU of at least
4192. The collection asks for at least ``ROCE_MIN_MTU`` (4200) and defaults to 9000.

Read: one ``ip -d -j link show`` (iproute2, netlink): ``mtu``, ``min_mtu``/``max_mtu`` (IFLA_MIN_MTU/MAX_MTU,
which sysfs does not show), ``master`` and ``linkinfo`` (a bond's ``info_kind``). Set:
``ip link set dev <rail> mtu <n>``, read back from a second dump.
Bonds (RoCE LAG): the MTU goes on the bond. The kernel's ``bond_change_mtu`` sets it on every slave (and rolls
back when one refuses), and ``bond_enslave`` gives a new slave the bond's MTU. A slave changed on its own keeps its
MTU (setting the bond to the MTU it already has does nothing), so a slave that still differs after the bond is
right is set directly. A bond's own ``max_mtu`` is ETH_MAX_MTU: the limit is the smallest ``max_mtu`` of its
slaves. A VLAN rail cannot exceed its lower device's MTU: a lower device below the MTU is raised first (one above
it is left alone).
RDMA ports: mainline sysfs has no MTU attribute under ``/sys/class/infiniband/<dev>/ports/<n>/`` and the rdma
tool's netlink attributes carry none; ``ibv_devinfo`` (rdma-core, ibv_query_port) prints ``max_mtu`` and
``active_mtu``: once for every device, then ``-d <dev> -i <port>`` for a port that listing lacks. A port whose
active MTU is below 4096 although its netdev MTU is large enough is reported: something below the netdev (the
port's max MTU, firmware) holds the path MTU down.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl.manage import validate_ifname

CONCERN = "mtu"
DEFAULT_MTU = 9000
ROCE_PATH_MTU = 4096
IBOE_HEADERS = 96
ROCE_MIN_MTU = 4200
ETH_MAX_MTU = 65535
IB_MTUS = (256, 512, 1024, 2048, 4096)
STACKED = ("vlan", "macvlan", "ipvlan")
_DEVINFO_MTU = re.compile(r"^\s*(max_mtu|active_mtu):\s*(\d+)\s*\((\d)\)\s*\Z")
_DEVINFO_PORT = re.compile(r"^\s*port:\s*(\d+)\s*\Z")


class MtuError(Exception):
    """A failure phrased for a platform engineer (the object is named)."""


def validate_mtu(value, what="mtu"):
    """The desired MTU as an int; ValueError naming ``what`` (the option or role variable) otherwise."""
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError("%s must be an integer (got %r)" % (what, value))
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer (got %r)" % (what, value))
    if v < ROCE_MIN_MTU:
        raise ValueError("%s is %d: below %d, the smallest rail MTU the collection accepts; RoCE needs the netdev MTU "
                         "to hold a %d-byte path MTU plus %d bytes of RoCE v2 headers (9000 is usual)"
                         % (what, v, ROCE_MIN_MTU, ROCE_PATH_MTU, IBOE_HEADERS))
    if v > ETH_MAX_MTU:
        raise ValueError("%s is %d: above %d, the largest MTU Linux has (ETH_MAX_MTU)" % (what, v, ETH_MAX_MTU))
    return v


def iboe_mtu(netdev_mtu):
    """The RoCE path MTU the kernel derives from a netdev MTU (iboe_get_mtu), None below 256 + headers."""
    fits = [m for m in IB_MTUS if m <= int(netdev_mtu) - IBOE_HEADERS]
    return fits[-1] if fits else None


def validate_rails(rails):
    if isinstance(rails, str) or not isinstance(rails, (list, tuple)) or not rails:
        raise ValueError("rails must list at least one network interface")
    seen = []
    for r in rails:
        validate_ifname(r)
        if r in seen:
            raise ValueError("rail %s is listed twice" % r)
        seen.append(r)
    return seen


# --- ip -d -j link -----------------------------------------------------------------------------------

def _int_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _limit_or_none(value):
    """max_mtu 0 means no limit (dev_validate_mtu checks it only when > 0: loopback, some virtual devices)."""
    value = _int_or_none(value)
    return value if value else None


def parse_links(text):
    """{ifname: {"ifindex", "mtu", "min_mtu", "max_mtu", "master", "kind", "slave_kind"}} of ``ip -d -j link``."""
    try:
        data = json.loads(text or "[]")
    except ValueError as e:
        raise MtuError("ip -d -j link show printed no JSON (%s)" % e)
    if not isinstance(data, list):
        raise MtuError("ip -d -j link show printed %s, not a list of links" % type(data).__name__)
    out = {}
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        info = link.get("linkinfo") if isinstance(link.get("linkinfo"), dict) else {}
        out[link["ifname"]] = {
            "ifindex": _int_or_none(link.get("ifindex")), "mtu": _int_or_none(link.get("mtu")),
            "min_mtu": _int_or_none(link.get("min_mtu")), "max_mtu": _limit_or_none(link.get("max_mtu")),
            "master": link.get("master") if isinstance(link.get("master"), str) else None,
            "lower": link.get("link") if isinstance(link.get("link"), str) else None,
            "kind": info.get("info_kind"), "slave_kind": info.get("info_slave_kind")}
    return out


def read_links(run):
    rc, out, err = run(["ip", "-d", "-j", "link", "show"])
    if rc != 0:
        raise MtuError("ip -d -j link show failed (rc=%d): %s" % (rc, (err or out or "").strip()))
    return parse_links(out)


def slaves(links, name):
    """The netdevs enslaved to ``name`` (a bond's ports), sorted."""
    return sorted(n for n, link in links.items() if link["master"] == name)


def lower(links, name):
    """The device a VLAN (macvlan, ipvlan) rail sits on, in this namespace; None for other rails. The kernel
    refuses an upper MTU above its lower device's (vlan_dev_change_mtu), so the lower is raised first."""
    link = links[name]
    if link["kind"] in STACKED and link.get("lower") in links:
        return link["lower"]
    return None


def _group(links, rail):
    lw = lower(links, rail)
    return ([lw] if lw else []) + [rail] + slaves(links, rail)


def _wants(links, rail, name, mtu):
    """Whether ``name`` of the rail's group differs: the rail and its slaves must equal ``mtu``, a lower device
    must carry at least ``mtu``."""
    cur = links[name]["mtu"]
    return cur < mtu if name == lower(links, rail) and cur is not None else cur != mtu


def limit(links, rail):
    """(largest MTU the rail takes or None when unknown, the netdev that sets it)."""
    best = (links[rail]["max_mtu"], rail)
    for s in [n for n in _group(links, rail) if n != rail]:
        m = links[s]["max_mtu"]
        if m is not None and (best[0] is None or m < best[0]):
            best = (m, s)
    return best


def plan(links, rails, mtu):
    """Drift items (object the rail or a bond's slave, key ``mtu``); ValueError for a rail that does not exist or
    that cannot take ``mtu`` (above the max_mtu of the device or of a bond's slave), before anything is touched."""
    items = []
    for rail in rails:
        if rail not in links:
            raise ValueError("rail %s does not exist in this network namespace (ip link show dev %s)" % (rail, rail))
        top, who = limit(links, rail)
        if top is not None and mtu > top:
            raise ValueError("mtu %d is above the largest MTU rail %s takes: max_mtu %d%s (ip -d link show dev %s)"
                             % (mtu, rail, top, "" if who == rail else " of its %s %s" % (
                                 "lower device" if who == lower(links, rail) else "slave", who), who))
        lo = links[rail]["min_mtu"]
        if lo is not None and mtu < lo:
            raise ValueError("mtu %d is below the min_mtu %d of rail %s" % (mtu, lo, rail))
        for name in _group(links, rail):
            if _wants(links, rail, name, mtu):
                items.append({"concern": CONCERN, "object": name, "key": "mtu", "current": links[name]["mtu"],
                              "desired": mtu})
    return items


def _set(run, name, mtu):
    rc, out, err = run(["ip", "link", "set", "dev", name, "mtu", str(mtu)])
    if rc != 0:
        return "ip link set dev %s mtu %d failed (rc=%d): %s" % (name, mtu, rc, (err or out or "").strip())
    return None


def apply(run, rails, mtu, check_mode, links=None):
    """Plan, set (unless check mode) and read back. Returns {"changed", "drift", "results" (one per rail, its
    slaves' changes included), "before", "after" ({netdev: mtu} of the rails and slaves), "links"}.
    Raises ValueError (bad input, nothing touched) or MtuError (ip cannot be read)."""
    rails = validate_rails(rails)
    mtu = validate_mtu(mtu)
    links = read_links(run) if links is None else links
    drift = plan(links, rails, mtu)
    names = [n for r in rails for n in _group(links, r)]
    before = dict((n, links[n]["mtu"]) for n in names)
    errors = {}
    after_links = links
    if drift and not check_mode:
        for rail in rails:
            for name in [n for n in (lower(links, rail), rail) if n]:
                if rail not in errors and _wants(links, rail, name, mtu):
                    err = _set(run, name, mtu)
                    if err:
                        errors[rail] = err
        after_links = read_links(run)
        # a slave changed on its own keeps its MTU: set it directly (the kernel allows it)
        fix = [(r, s) for r in rails if r not in errors for s in slaves(after_links, r)
               if after_links[s]["mtu"] != mtu]
        for rail, s in fix:
            err = _set(run, s, mtu)
            if err:
                errors[rail] = err
        if fix:
            after_links = read_links(run)
    after = {}
    out = []
    for rail in rails:
        group = _group(links, rail)
        changes = []
        for n in group:
            now = mtu if check_mode and _wants(links, rail, n, mtu) else (after_links.get(n) or {}).get("mtu")
            after[n] = now
            if now != before[n]:
                changes.append(results.change("mtu" if n == rail else "mtu %s" % n, before[n], now))
        error = errors.get(rail)
        if error is None and not check_mode:
            wrong = [n for n in group if (after[n] is None or after[n] < mtu if n == lower(links, rail)
                                          else after[n] != mtu)]
            if wrong:
                error = "set mtu %d but %s read%s back %s" % (
                    mtu, ", ".join(wrong), "s" if len(wrong) == 1 else "",
                    ", ".join("%s" % after[n] for n in wrong))
        if error:
            out.append(results.result(rail, results.FAILED, error, changes))
        else:
            out.append(results.result(rail, results.CHANGED if changes else results.UNCHANGED, changes=changes))
    return {"changed": results.changed(out), "drift": drift, "results": out, "before": before, "after": after,
            "links": after_links}


# --- RDMA ports ---------------------------------------------------------------------------------------

def parse_devinfo(text):
    """{port: {"max_mtu": int, "active_mtu": int}} from ``ibv_devinfo`` output."""
    out = {}
    port = None
    for line in (text or "").splitlines():
        m = _DEVINFO_PORT.match(line)
        if m:
            port = int(m.group(1))
            out[port] = {}
            continue
        m = _DEVINFO_MTU.match(line)
        if m and port is not None:
            out[port][m.group(1)] = int(m.group(2))
    return out


def parse_devinfo_all(text):
    """{ibdev: {port: {"max_mtu", "active_mtu"}}} from the output of ``ibv_devinfo`` for every device (one
    ``hca_id:`` block per device; a device it could not open has no block)."""
    out, name, block = {}, None, []
    for line in (text or "").splitlines() + ["hca_id:"]:
        if line.startswith("hca_id:"):
            if name:
                out[name] = parse_devinfo("\n".join(block))
            name, block = line.split(":", 1)[1].strip(), []
        else:
            block.append(line)
    return out


def rdma_ports(sysroot, run, rails, netdev_mtu):
    """One entry per RDMA port of the rails: {"rail", "ibdev", "port", "max_mtu", "active_mtu", "expected",
    "readable", "reason"}; ``expected`` the path MTU the netdev MTU allows (iboe_get_mtu, capped by max_mtu).

    One ``ibv_devinfo`` lists every device and port; a rail's port it does not show (a device it failed to open)
    is asked for on its own (``-d DEV -i PORT``), which gives that device's own error."""
    out = []
    known = topology.list_rails(sysroot)
    ports = [(rail, r) for rail in rails for r in known if r.get("netdev") == rail]
    listed, listing_rc = {}, 0
    if ports:
        listing_rc, text, _err = run(["ibv_devinfo"])
        listed = parse_devinfo_all(text) if listing_rc == 0 else {}
    for rail, r in ports:
        entry = {"rail": rail, "ibdev": r["ibdev"], "port": r["port"], "max_mtu": None, "active_mtu": None,
                 "expected": None, "readable": False, "reason": None}
        got = listed.get(r["ibdev"], {}).get(r["port"], {})
        rc, err = listing_rc, ""
        if "active_mtu" not in got and listing_rc != 127:
            rc, text, err = run(["ibv_devinfo", "-d", r["ibdev"], "-i", str(r["port"])])
            got = parse_devinfo(text).get(r["port"], {}) if rc == 0 else {}
        if "active_mtu" not in got:
            entry["reason"] = ("ibv_devinfo is not installed (rdma-core's ibverbs-utils)" if rc == 127 else
                               "ibv_devinfo -d %s -i %d gave no active_mtu (rc=%d): %s"
                               % (r["ibdev"], r["port"], rc, (err or "").strip()[:200]))
        else:
            entry.update(readable=True, active_mtu=got["active_mtu"], max_mtu=got.get("max_mtu"))
            mtu = netdev_mtu.get(rail)
            exp = iboe_mtu(mtu) if mtu else None
            if exp is not None and entry["max_mtu"]:
                exp = min(exp, entry["max_mtu"])
            entry["expected"] = exp
        out.append(entry)
    return out


def port_warnings(ports, netdev_mtu):
    """Drift items of ports whose active MTU is below 4096 although their netdev MTU carries 4096."""
    items = []
    for p in ports:
        mtu = netdev_mtu.get(p["rail"])
        if not p["readable"] or not mtu or (iboe_mtu(mtu) or 0) < ROCE_PATH_MTU:
            continue
        if p["active_mtu"] < ROCE_PATH_MTU:
            why = (" (the port's max_mtu is %d)" % p["max_mtu"]) if p["max_mtu"] and p["max_mtu"] < 4096 else ""
            items.append({"concern": CONCERN, "object": "%s/%d" % (p["ibdev"], p["port"]), "key": "active_mtu",
                          "current": p["active_mtu"], "desired": ROCE_PATH_MTU,
                          "note": "RDMA port %s/%d of rail %s: active MTU %d although the rail's MTU %d carries %d%s"
                                  % (p["ibdev"], p["port"], p["rail"], p["active_mtu"], mtu, ROCE_PATH_MTU, why)})
    return items
