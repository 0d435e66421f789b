# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who keeps a rail's MTU across reboots, the record there, and the ``mtu`` concern's status.

Each rail has one owner, found from what the network managers themselves say, never from a guess at their
matching rules:

- ``networkd``: ``/run/systemd/netif/links/<ifindex>`` (written by systemd-networkd for every link it manages) names
  the ``NETWORK_FILE``. The MTU goes into the drop-in ``/etc/systemd/network/<file>.network.d/gpufabric-mtu.conf``
  (``[Link]`` ``MTUBytes=``); drop-ins are read after the file, so it wins over an ``MTUBytes=`` there.
- ``netplan``: that network file is netplan's (``/run/systemd/network/10-netplan-<id>.network``), or the
  NetworkManager connection of the rail is netplan's keyfile (``netplan-<id>.nmconnection``). netplan regenerates
  both at boot, so the MTU goes into ``/etc/netplan/90-gpufabric-mtu.yaml`` (mode 0600, as netplan wants), which
  netplan merges into the definition ``<id>`` of the same device type. It is written as JSON, a subset of YAML whose
  quoting ``json.dumps`` does for every value.
- ``networkmanager``: ``nmcli -g GENERAL.CON-UUID device show <rail>`` names the connection; its
  ``802-3-ethernet.mtu`` is set with ``nmcli connection modify`` (not re-activated: the MTU is already live).
- ``ifupdown``: ifupdown is installed (``/sbin/ifup``) and ``/etc/network/interfaces`` (with its ``source`` and
  ``source-directory`` files) has an ``iface <rail>`` stanza. The collection does not edit that file: it is the
  admin's, and interfaces(5) has no drop-in that adds an option to another file's stanza. ``ifup`` sets an MTU only
  where the stanza has an ``mtu`` option, so the MTU is recorded for the boot-time applier (as for ``applier``),
  and a stanza whose ``mtu`` differs is drift the module does not change, naming the file and the line to write.
- ``applier``: nobody else; ``state.json`` gets ``{"mtu": {"rails": [...], "mtu": N}}`` and the boot-time applier
  sets it with :func:`mtu.apply`, the code the module uses.

The live MTU is set with ``ip``; an owner whose record changed is then told the owner's way, so its own state
agrees before the next boot: ``networkctl reload`` after a drop-in was written (systemd-networkd compares the
files and drop-ins of each .network, ``stats_by_path`` in src/network/networkd-network.c ``network_reload``
(systemd v250 and later), and reconfigures the links of those that changed); ``nmcli device reapply <rail>`` after
``nmcli connection modify`` (modify goes through the daemon, which saves the profile itself, so there is no file
for ``nmcli connection load``/``reload`` to re-read; what lags is the device's applied connection, and
NetworkManager reapplies ``802-3-ethernet.mtu`` without re-activating: ``can_reapply_change`` in
src/core/devices/nm-device-ethernet.c). netplan is not applied (``netplan apply`` re-renders every definition and
may bounce links): its file takes effect at the next boot. Check mode writes nothing and runs no command that
changes anything.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as live
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host import files

NETIF_LINKS = "/run/systemd/netif/links"
NETWORKD_ETC = "/etc/systemd/network"
DROPIN = "gpufabric-mtu.conf"
NETPLAN_FILE = "/etc/netplan/90-gpufabric-mtu.yaml"
NETPLAN_DIRS = ("/lib/netplan", "/usr/lib/netplan", "/run/netplan", "/etc/netplan")
NETPLAN_TYPES = ("ethernets", "bonds", "vlans", "bridges")
# netplan's definition type of a link, from the kernel's rtnetlink IFLA_INFO_KIND (``ip -d -j link``'s info_kind;
# a physical NIC has none). netplan refuses a definition merged under another type ("Updated definition '...'
# changes device type"), so a rail the operator's files cannot be read for (no PyYAML on the node) is typed by this.
NETPLAN_KIND = {None: "ethernets", "vlan": "vlans", "bond": "bonds", "bridge": "bridges"}
HEADER = "# Managed by the gpufabric.node collection (rail_mtu): the RoCE rail MTU. Rerun the rail_network role.\n"
NM_KEY = "802-3-ethernet.mtu"
_NETWORK_FILE = re.compile(r"[A-Za-z0-9_.@+-]{1,200}\.network\Z")
_NETPLAN_GEN = re.compile(r"10-netplan-([A-Za-z0-9_.@:+-]{1,200})\.network\Z")
_NETPLAN_NM = re.compile(r"netplan-([A-Za-z0-9_.@:+-]{1,200})\.nmconnection\Z")
_UUID = re.compile(r"[0-9a-fA-F-]{36}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
IFUPDOWN_FILE = "/etc/network/interfaces"
IFUPDOWN_BINS = ("/sbin/ifup", "/usr/sbin/ifup")
# interfaces(5) and ifupdown's config.c (read_interfaces_defn): the words that start a stanza or end the one before
_IFUPDOWN_STANZAS = ("iface", "mapping", "auto", "source", "source-directory", "rename", "no-auto-down",
                     "no-scripts")
_SOURCE_DIRECTORY_NAME = re.compile(r"[A-Za-z0-9_-]+")
_IFUPDOWN_DEPTH = 8


def _state_file(sysroot, ifindex):
    """KEY=VALUE pairs of networkd's runtime file of a link ({} when networkd does not manage it)."""
    if ifindex is None:
        return {}
    out = {}
    for line in (sysroot.read_raw("%s/%d" % (NETIF_LINKS, ifindex), "") or "").splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _nm(run, rail):
    """(uuid, keyfile) of the NetworkManager connection active on the rail, (None, None) without one."""
    rc, out, _err = run(["nmcli", "-t", "-g", "GENERAL.CON-UUID", "device", "show", rail])
    uuid = (out or "").strip() if rc == 0 else ""
    if not _UUID.match(uuid):
        return None, None
    rc, out, _err = run(["nmcli", "-t", "-f", "UUID,FILENAME", "connection", "show"])
    for line in (out or "").splitlines() if rc == 0 else []:
        if line.startswith(uuid + ":"):
            return uuid, line[len(uuid) + 1:].replace("\\:", ":")
    return uuid, None


def _interfaces_lines(sysroot, path, depth=0, seen=None):
    """[(file, words)] of an interfaces(5) file and the files it sources, in ifupdown's order: ``\\`` continues
    a line, a line starting with ``#`` is a comment, ``source`` takes wildcards (in the file name), relative to the
    file's directory, ``source-directory`` the names of only letters, digits, ``_`` and ``-``. A source line is
    listed before the lines it brings in (it ends the stanza open before it)."""
    seen = set() if seen is None else seen
    if depth > _IFUPDOWN_DEPTH or path in seen:
        return []
    seen.add(path)
    raw = sysroot.read_raw(path, None)
    out = []
    logical = ""
    for line in (raw or "").splitlines():
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        words, logical = (logical + line).split(), ""
        if not words or words[0].startswith("#"):
            continue
        if words[0] in ("source", "source-directory"):
            out.append((path, words))
            for arg in words[1:]:
                target = arg if arg.startswith("/") else os.path.join(os.path.dirname(path), arg)
                if words[0] == "source":
                    base, pattern = os.path.split(os.path.normpath(target))
                    names = [n for n in sysroot.listdir(base) if fnmatch.fnmatchcase(n, pattern)
                             and (pattern.startswith(".") or not n.startswith("."))]  # glob(3)'s rule
                else:
                    base = os.path.normpath(target)
                    names = [n for n in sysroot.listdir(base) if _SOURCE_DIRECTORY_NAME.fullmatch(n)]
                for name in sorted(names):
                    out.extend(_interfaces_lines(sysroot, base + "/" + name, depth + 1, seen))
        else:
            out.append((path, words))
    return out


def ifupdown_stanza(sysroot, rail):
    """{"file", "mtu"} of the rail's ``iface`` stanza when ifupdown is installed and has one (``mtu`` the value of
    its ``mtu`` option as written, None without one), else None."""
    if not any(sysroot.exists(b) for b in IFUPDOWN_BINS):
        return None
    found, inside, last = None, False, None
    for path, words in _interfaces_lines(sysroot, IFUPDOWN_FILE):
        # ifupdown reads each file, and the rest of a file after a source line, outside any stanza
        inside, last = inside and path == last, path
        if words[0] in _IFUPDOWN_STANZAS or words[0].startswith("allow-"):
            inside = words[0] == "iface" and len(words) > 1 and words[1] == rail
            if inside and found is None:
                found = {"file": path, "mtu": None}
        elif inside and words[0] == "mtu" and len(words) == 2:
            found.update(file=path, mtu=words[1])
    return found


def owner(sysroot, run, rail, link):
    """{"rail", "owner", "network_file", "netplan_id", "nm_uuid", "interfaces_file", "interfaces_mtu"} of one rail
    (``link`` from mtu.parse_links)."""
    out = {"rail": rail, "owner": "applier", "network_file": None, "netplan_id": None, "nm_uuid": None,
           "interfaces_file": None, "interfaces_mtu": None, "kind": link.get("kind"), "netplan_type": None}
    nd = _state_file(sysroot, link.get("ifindex"))
    path = nd.get("NETWORK_FILE") or ""
    if path and nd.get("ADMIN_STATE") != "unmanaged":
        name = os.path.basename(path)
        gen = _NETPLAN_GEN.match(name)
        if gen and path.startswith("/run/systemd/network/"):
            out.update(owner="netplan", netplan_id=gen.group(1), network_file=path)
            out["netplan_type"] = netplan_type(_netplan_types(sysroot), rail, out)
        elif _NETWORK_FILE.match(name) and not _CONTROL.search(path):
            out.update(owner="networkd", network_file=path)
        else:
            raise ValueError("rail %s: networkd names the network file %r, which the collection cannot name a "
                             "drop-in after" % (rail, path))
        return out
    uuid, keyfile = _nm(run, rail)
    if uuid:
        gen = _NETPLAN_NM.match(os.path.basename(keyfile or ""))
        if gen:
            out.update(owner="netplan", netplan_id=gen.group(1), nm_uuid=uuid)
            out["netplan_type"] = netplan_type(_netplan_types(sysroot), rail, out)
        else:
            out.update(owner="networkmanager", nm_uuid=uuid)
        return out
    stanza = ifupdown_stanza(sysroot, rail)
    if stanza:
        out.update(owner="ifupdown", interfaces_file=stanza["file"], interfaces_mtu=stanza["mtu"])
    return out


# --- networkd ------------------------------------------------------------------------------------------

def dropin_path(network_file):
    return "%s/%s.d/%s" % (NETWORKD_ETC, os.path.basename(network_file), DROPIN)


def render_dropin(mtu):
    return HEADER + "[Link]\nMTUBytes=%d\n" % live.validate_mtu(mtu)


# --- netplan -------------------------------------------------------------------------------------------

def _netplan_types(sysroot):
    """{id: device type} of the netplan definitions on the node (PyYAML when the node has it; else {})."""
    try:
        import yaml
    except ImportError:
        return {}
    out = {}
    for d in NETPLAN_DIRS:
        for name in sysroot.listdir(d):
            if not name.endswith(".yaml") or d + "/" + name == NETPLAN_FILE:
                continue
            try:
                doc = yaml.safe_load(sysroot.read_raw(d + "/" + name, "") or "") or {}
            except yaml.YAMLError:
                continue
            net = doc.get("network") if isinstance(doc, dict) else None
            for t in NETPLAN_TYPES:
                defs = net.get(t) if isinstance(net, dict) else None
                if isinstance(defs, dict):
                    for k in defs:
                        out[str(k)] = t
    return out


def netplan_type(types, rail, o):
    """The netplan type the collection's file must define ``o``'s netplan id under: the operator's own (``types``
    from _netplan_types), else the link's kind. ValueError when neither tells (a kind netplan types otherwise, on
    a node without PyYAML): refused before anything is touched."""
    found = types.get(o["netplan_id"]) or NETPLAN_KIND.get(o.get("kind") or None)
    if not found:
        raise ValueError("rail %s: netplan id %r is a %s link and the node's netplan files cannot be read (no "
                         "PyYAML) to find its definition type; the collection writes ethernets, bonds, vlans or "
                         "bridges only" % (rail, o["netplan_id"], o.get("kind")))
    return found


def render_netplan(entries, mtu):
    """The collection's netplan file: ``entries`` [(type, id)]; JSON (valid YAML) so every id is quoted safely."""
    mtu = live.validate_mtu(mtu)
    net = {"version": 2}
    for kind, ident in entries:
        if kind not in NETPLAN_TYPES or _CONTROL.search(ident):
            raise ValueError("netplan definition %r of type %r cannot be written" % (ident, kind))
        net.setdefault(kind, {})[ident] = {"mtu": mtu}
    return HEADER + json.dumps({"network": net}, indent=2, sort_keys=True) + "\n"


# --- files ---------------------------------------------------------------------------------------------

def _file(sysroot, path, content, mode, check_mode):
    """{"path", "before", "after", "changed"}; writes atomically (root-owned) unless check mode; None removes."""
    before = sysroot.read_raw(path, None)
    changed = before != content
    if changed and not check_mode:
        if content is None:
            files.remove(sysroot, path)
        else:
            files.write_atomic(sysroot, path, content, mode)
    return {"path": path, "before": before or "", "after": content or "", "changed": changed}


def _item(obj, key, current, desired):
    return {"concern": live.CONCERN, "object": obj, "key": key, "current": current, "desired": desired}


def record(sysroot, run, owners, mtu, check_mode):
    """Write the MTU where each rail's owner keeps it. Returns {"files", "drift", "results", "applier_rails"}.
    A rail whose live set failed is recorded all the same: the record says what is desired, and the boot applies
    it to a netdev the driver has just created."""
    files = []
    drift = []
    out = []
    by_file = {}
    for o in owners:
        if o["owner"] == "networkd":
            by_file.setdefault(dropin_path(o["network_file"]), []).append(o["rail"])
    for path in sorted(by_file):
        f = _file(sysroot, path, render_dropin(mtu), 0o644, check_mode)
        files.append(f)
        if f["changed"]:
            drift.append(_item(path, "MTUBytes", "differs" if f["before"] else "missing", mtu))
    if any(f["changed"] for f in files) and not check_mode:
        rc, _o, err = run(["networkctl", "reload"])
        error = None if rc == 0 else "networkctl reload failed (rc=%d): %s; the drop-in takes effect at the next " \
            "boot or networkctl reload" % (rc, (err or "").strip())
        out.append(results.result("systemd-networkd (networkctl reload)", results.FAILED if error else
                                  results.CHANGED, error))
    netplan = [o for o in owners if o["owner"] == "netplan"]
    if netplan or sysroot.exists(NETPLAN_FILE):
        types = _netplan_types(sysroot) if netplan else {}
        entries = sorted(set((netplan_type(types, o["rail"], o), o["netplan_id"]) for o in netplan))
        f = _file(sysroot, NETPLAN_FILE, render_netplan(entries, mtu) if entries else None, 0o600, check_mode)
        files.append(f)
        if f["changed"]:
            drift.append(_item(NETPLAN_FILE, "mtu", "differs" if f["before"] else "missing",
                               mtu if entries else "absent"))
    for o in [o for o in owners if o["owner"] == "networkmanager"]:
        rc, cur, err = run(["nmcli", "-g", NM_KEY, "connection", "show", "uuid", o["nm_uuid"]])
        cur = (cur or "").strip()
        error = None
        if rc != 0:
            error = "nmcli connection show uuid %s failed (rc=%d): %s" % (o["nm_uuid"], rc, (err or "").strip())
        elif cur != str(mtu):
            drift.append(_item(o["rail"], "NetworkManager %s" % NM_KEY, cur or "auto", mtu))
            if not check_mode:
                rc, _o, err = run(["nmcli", "connection", "modify", "uuid", o["nm_uuid"], NM_KEY, str(mtu)])
                if rc != 0:
                    error = "nmcli connection modify uuid %s %s %d failed (rc=%d): %s" % (
                        o["nm_uuid"], NM_KEY, mtu, rc, (err or "").strip())
                else:
                    rc, _o, err = run(["nmcli", "device", "reapply", o["rail"]])
                    if rc != 0:
                        error = "nmcli device reapply %s failed (rc=%d): %s; the profile has %s %d, the device " \
                            "takes it at its next activation" % (o["rail"], rc, (err or "").strip(), NM_KEY, mtu)
        out.append(results.result("%s (NetworkManager %s)" % (o["rail"], o["nm_uuid"]),
                                  results.FAILED if error else (results.CHANGED if cur != str(mtu)
                                                                else results.UNCHANGED), error))
    held = []
    for o in [o for o in owners if o["owner"] == "ifupdown" and o["interfaces_mtu"] not in (None, str(mtu))]:
        held.append(dict(_item(o["rail"], "ifupdown mtu", o["interfaces_mtu"], mtu), note=(
            "ifupdown's stanza iface %s in %s sets mtu %s at ifup, the rails want %d: write 'mtu %d' there (the "
            "collection does not edit that file)" % (o["rail"], o["interfaces_file"], o["interfaces_mtu"], mtu, mtu))))
    applier = [o["rail"] for o in owners if o["owner"] in ("applier", "ifupdown")]
    section = {"rails": applier, "mtu": mtu} if applier else None
    before, after, st_item = state.record_with_drift(sysroot, "mtu", section, check_mode)
    if st_item:
        drift.append(st_item)
    files.append({"path": state.STATE_FILE, "before": before, "after": after, "changed": bool(st_item)})
    return {"files": files, "drift": drift, "results": out, "applier_rails": applier, "held_items": held}


# --- the concern ------------------------------------------------------------------------------------------

def manage(sysroot, run, rails, mtu, check_mode, persist_mtu=True):
    """Validate, set live, record where the owner keeps it, read the RDMA ports. ValueError (bad input) and
    mtu.MtuError (ip unreadable) before anything is touched. Returns {"changed", "drift", "results", "owners",
    "files", "ports", "port_items", "mtu": {netdev: mtu after}, "before", "status"}."""
    rails = live.validate_rails(rails)
    mtu = live.validate_mtu(mtu)
    links = live.read_links(run)
    live.plan(links, rails, mtu)       # refuses a rail that cannot take the MTU before anything is touched
    owners = [owner(sysroot, run, r, links[r]) for r in rails] if persist_mtu else []
    res = live.apply(run, rails, mtu, check_mode, links=links)
    rec = record(sysroot, run, owners, mtu, check_mode) if persist_mtu else {
        "files": [], "drift": [], "results": [], "applier_rails": [], "held_items": []}
    now = dict((r, res["before"][r] if check_mode else res["after"].get(r)) for r in rails)
    ports = live.rdma_ports(sysroot, run, rails, now)
    port_items = live.port_warnings(ports, now) + rec["held_items"]
    drift = res["drift"] + rec["drift"]
    every = res["results"] + rec["results"]
    out = {"changed": res["changed"] or bool(rec["drift"]), "drift": drift, "results": every, "owners": owners,
           "files": rec["files"], "ports": ports, "port_items": port_items, "mtu": res["after"],
           "before": res["before"], "applier_rails": rec["applier_rails"]}
    out["status"] = status(drift, every, port_items, check_mode)
    return out


def status(drift, every, port_items, check_mode):
    """The concern's status: error when an object failed, drift for RDMA ports held below 4096 or an ifupdown
    stanza setting another MTU (``port_items``: nothing the module can change), else concerns.from_items."""
    if results.failed(every):
        return concerns.error(live.CONCERN, results.failure_message("rail MTU", "rail(s)", every),
                              items=results.annotate(drift, every))
    if port_items:
        ports = "; ".join(i["note"] for i in port_items if i["key"] == "active_mtu")
        reasons = ["RDMA port active MTU below %d: %s" % (live.ROCE_PATH_MTU, ports)] if ports else []
        reasons += [i["note"] for i in port_items if i["key"] != "active_mtu"]
        clean = [dict((k, i[k]) for k in concerns.ITEM_KEYS) for i in port_items]
        return concerns.status(concerns.DRIFT, "; ".join(reasons), drift + clean)
    return concerns.from_items(live.CONCERN, drift, check_mode)


def check(sysroot, run, desired):
    """The read-only check of the concern (the one-call drift check): ``desired`` {"rails": [...], "mtu": int,
    "persist": bool}; the status document (drift where the node differs, error when it cannot be read)."""
    try:
        res = manage(sysroot, run, desired.get("rails"), desired.get("mtu", live.DEFAULT_MTU), True,
                     desired.get("persist", True))
    except (ValueError, live.MtuError, state.StateError) as e:
        return concerns.error(live.CONCERN, str(e))
    return res["status"]
