# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCB desired state: validation (``normalize_desired``) and the per-rail plan (``plan_rail``).

Plain Python, no Ansible imports, no I/O: ``dcb.py`` reads the rails (``dcb -j``), calls
:func:`plan_rail` with what it read and runs the commands. ``dcb.py`` re-exports every public
name of this file, so ``dcb.normalize_desired``/``dcb.plan_rail`` keep working.

What the plan treats as drift (docs/DESIGN.md section 3):

* Every wanted DSCP must list exactly its priority.
* The **lossless priorities** are the wanted PFC priorities. A DSCP the map does not name that
  is mapped into one of them (DSCP 10 -> priority 3 when only 26 -> 3 is wanted) is drift:
  traffic nobody marked lossless would land in the PFC class. The plan deletes it
  (``dcb app del dev X dscp-prio 10:3``); mlx5 then maps that DSCP to priority 0.
* ``other_app_entries: remove`` also deletes every other APP entry: DSCPs mapped to lossy
  priorities and entries of the other selectors (ethtype, default, stream/dgram port, pcp;
  generic drivers only, mlx5 accepts DSCP entries only). ``keep`` (the default) leaves those.
* PFC must be enabled on exactly the wanted priorities (PFC on priority 4 when only 3 is wanted
  is drift); ``pfc set`` runs only when the enabled set differs, because mlx5 toggles the port
  link on every change of the enable mask.

mlx5 and the DSCP trust switch: the first DSCP entry of a port in PCP trust switches it to DSCP
trust, and the priorities of the DSCPs nobody set then come from the firmware's dscp2prio table,
which ``dcb`` cannot read while the port trusts PCP (upstream ``mlx5e_dcbnl_ieee_setapp`` lists
only the entry added; driver init in DSCP trust and ``mlnx_qos --trust dscp`` list all 64 with
the firmware default ``dscp >> 3``, as the simulator does). So when the plan makes that switch
it writes the whole table in one ``app add``: the wanted entries, every other DSCP at
``dscp >> 3`` (the firmware default) and, for DSCPs the plan must not leave in a lossless
priority (or, with ``remove``, at all), the lowest lossy priority, deleted again by the
following ``app del``. Either driver behaviour then reads back the same, known table. A rail whose
driver cannot be read and that has no apptrust is handled the same way (its trust follows the DSCP
entries, as on mlx5). Not covered: an upstream mlx5 port put in DSCP trust outside gpufabric keeps
unlisted firmware mappings that no ``dcb`` command shows.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_DSCP_MAP = [{"dscp": 26, "priority": 3}]
DEFAULT_PFC_PRIORITIES = [3]
TRUST_CHOICES = ("dscp", "pcp")
TSA_CHOICES = ("strict", "cbs", "ets", "vendor")
OTHER_APP_CHOICES = ("keep", "remove")
DEFAULT_OTHER_APP = "keep"
# DCBX ownership (dcbx.py): host makes the host the owner in IEEE mode, keep leaves the mode alone
DCBX_CHOICES = ("host", "keep")
DEFAULT_DCBX = "host"
MLX5_DRIVERS = ("mlx5_core",)
CONCERN = "dcb"
DSCP_COUNT = 64

# APP selectors other than DSCP: key in ``dcb -j app show`` -> keyword of ``dcb app add|del``. default-prio comes
# last: iproute2 reads every word after it as a priority and fails on the next keyword ("Invalid default priority").
OTHER_SELECTORS = (("ethtype_prio", "ethtype-prio"), ("stream_port_prio", "stream-port-prio"),
                   ("dgram_port_prio", "dgram-port-prio"), ("port_prio", "port-prio"), ("pcp_prio", "pcp-prio"),
                   ("default_prio", "default-prio"))


class DcbValidationError(ValueError):
    """The requested configuration is invalid; raised before anything is touched."""


# ----------------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------------

def _as_int(value, what):
    if isinstance(value, bool):
        raise DcbValidationError("%s must be an integer, not %r" % (what, value))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DcbValidationError("%s must be an integer, not %r" % (what, value))


def _check_dscp_map(dscp_map):
    """List of {dscp, priority} -> dict dscp -> priority."""
    if dscp_map is None:
        return None
    if isinstance(dscp_map, dict):
        raise DcbValidationError("dscp_map must be a list of {dscp, priority} items")
    out = {}
    for i, item in enumerate(dscp_map):
        if not isinstance(item, dict) or set(item) != {"dscp", "priority"}:
            raise DcbValidationError(
                "dscp_map item %d must have exactly the keys dscp and priority, got %r" % (i, item))
        dscp = _as_int(item["dscp"], "dscp_map item %d dscp" % i)
        prio = _as_int(item["priority"], "dscp_map item %d priority" % i)
        if not 0 <= dscp <= 63:
            raise DcbValidationError("DSCP %d is out of range: DSCP values are 0..63" % dscp)
        if not 0 <= prio <= 7:
            raise DcbValidationError(
                "priority %d for DSCP %d is out of range: priorities are 0..7" % (prio, dscp))
        if dscp in out and out[dscp] != prio:
            raise DcbValidationError(
                "DSCP %d is mapped to two priorities (%d and %d): a DSCP can carry one priority"
                % (dscp, out[dscp], prio))
        out[dscp] = prio
    return out


def _check_pfc(pfc_priorities):
    if pfc_priorities is None:
        pfc_priorities = DEFAULT_PFC_PRIORITIES
    out = []
    for p in pfc_priorities:
        p = _as_int(p, "pfc_priorities item")
        if not 0 <= p <= 7:
            raise DcbValidationError("PFC priority %d is out of range: priorities are 0..7" % p)
        if p in out:
            raise DcbValidationError("pfc_priorities lists priority %d twice" % p)
        out.append(p)
    return sorted(out)


def _check_ets(ets):
    if ets is None:
        return None
    if not isinstance(ets, dict):
        raise DcbValidationError("ets must be a dict with tc_tsa, tc_bw and prio_tc")
    unknown = set(ets) - {"tc_tsa", "tc_bw", "prio_tc"}
    missing = {"tc_tsa", "tc_bw", "prio_tc"} - set(ets)
    if unknown:
        raise DcbValidationError("ets has unknown keys: %s" % ", ".join(sorted(unknown)))
    if missing:
        raise DcbValidationError("ets needs tc_tsa, tc_bw and prio_tc; missing: %s"
                                 % ", ".join(sorted(missing)))
    out = {}
    for key in ("tc_tsa", "tc_bw", "prio_tc"):
        v = ets[key]
        if not isinstance(v, (list, tuple)) or len(v) != 8:
            raise DcbValidationError("ets.%s must list 8 values (one per traffic class or "
                                     "priority), got %r" % (key, v))
    tsa = [str(t) for t in ets["tc_tsa"]]
    for t in tsa:
        if t not in TSA_CHOICES:
            raise DcbValidationError("ets.tc_tsa value %r is not one of %s"
                                     % (t, ", ".join(TSA_CHOICES)))
    bw = [_as_int(b, "ets.tc_bw item") for b in ets["tc_bw"]]
    for tc, b in enumerate(bw):
        if not 0 <= b <= 100:
            raise DcbValidationError("ets.tc_bw for TC %d is %d%%: percentages are 0..100" % (tc, b))
    total = sum(bw)
    if "ets" in tsa and total != 100:
        raise DcbValidationError("ets.tc_bw sums to %d%%; the bandwidths must sum to 100" % total)
    if "ets" not in tsa and total not in (0, 100):
        raise DcbValidationError("ets.tc_bw sums to %d%%; with no ETS traffic class the "
                                 "bandwidths must sum to 0 or 100" % total)
    prio_tc = [_as_int(p, "ets.prio_tc item") for p in ets["prio_tc"]]
    for p, tc in enumerate(prio_tc):
        if not 0 <= tc <= 7:
            raise DcbValidationError("ets.prio_tc maps priority %d to TC %d: TCs are 0..7" % (p, tc))
    out.update(tc_tsa=tsa, tc_bw=bw, prio_tc=prio_tc)
    return out


def normalize_desired(desired):
    """Validate the desired configuration (option-shaped, JSON-friendly) and normalise it.

    ``desired``: {"dscp_map": [{"dscp", "priority"}] or None, "pfc_priorities": [int] or None,
    "trust": "dscp"|"pcp", "ets": dict or None, "other_app_entries": "keep"|"remove", "dcbx": "host"|"keep"}. Missing
    keys take the defaults. Returns {"dscp_map": {dscp: prio}, "pfc": [sorted prios], "trust": str,
    "ets": dict or None, "other_app_entries": str}.
    """
    if desired is None:
        desired = {}
    if not isinstance(desired, dict):
        raise DcbValidationError("desired DCB configuration must be a dict")
    unknown = set(desired) - {"dscp_map", "pfc_priorities", "trust", "ets", "other_app_entries", "dcbx"}
    if unknown:
        raise DcbValidationError("unknown DCB settings: %s" % ", ".join(sorted(unknown)))
    trust = desired.get("trust") or "dscp"
    if trust not in TRUST_CHOICES:
        raise DcbValidationError("trust must be one of %s, not %r" % (", ".join(TRUST_CHOICES), trust))
    other = desired.get("other_app_entries") or DEFAULT_OTHER_APP
    if other not in OTHER_APP_CHOICES:
        raise DcbValidationError("other_app_entries must be one of %s, not %r"
                                 % (", ".join(OTHER_APP_CHOICES), other))
    dscp_map = _check_dscp_map(desired.get("dscp_map"))
    if dscp_map is None:
        dscp_map = _check_dscp_map(DEFAULT_DSCP_MAP) if trust == "dscp" else {}
    if trust == "dscp" and not dscp_map:
        raise DcbValidationError("trust dscp needs at least one dscp_map entry (on mlx5 the "
                                 "DSCP entries are what switches the port to DSCP trust)")
    if trust == "pcp" and dscp_map:
        raise DcbValidationError("trust pcp cannot be combined with dscp_map entries: PCP trust "
                                 "means the port ignores DSCP; give an empty dscp_map")
    dcbx = desired.get("dcbx") or DEFAULT_DCBX
    if dcbx not in DCBX_CHOICES:
        raise DcbValidationError("dcbx must be one of %s, not %r" % (", ".join(DCBX_CHOICES), dcbx))
    return {"dscp_map": dscp_map, "pfc": _check_pfc(desired.get("pfc_priorities")),
            "trust": trust, "ets": _check_ets(desired.get("ets")), "other_app_entries": other, "dcbx": dcbx}


# ----------------------------------------------------------------------------------------------
# plan
# ----------------------------------------------------------------------------------------------

def _ets_matches(cur, want):
    if cur is None:
        return False
    if cur["tc_tsa"] != want["tc_tsa"] or cur["prio_tc"] != want["prio_tc"]:
        return False
    # Drivers report non-ETS classes' bandwidth differently (mlx5: 100%): compare ETS ones.
    return all(cur["tc_bw"][tc] == want["tc_bw"][tc]
               for tc in range(8) if want["tc_tsa"][tc] == "ets")


def dscp_value(prios):
    """Drift/summary value of a DSCP's priorities: None (no entry), the priority, or the list."""
    if not prios:
        return None
    return prios[0] if len(prios) == 1 else list(prios)


def lossy_fallback(lossless):
    """The lowest priority without PFC (0 unless PFC is on priority 0); 0 when every priority has PFC."""
    for p in range(8):
        if p not in lossless:
            return p
    return 0


def _pid_text(key, pid):
    if key == "ethtype_prio":
        return "0x%x" % pid
    return "%s" % (pid,)


def _plan_dscp(current, desired, pin_on_switch, add_drift):
    """(add_entries, del_entries, remap) for the DSCP table of a rail that should trust DSCP."""
    want = desired["dscp_map"]
    lossless = set(desired["pfc"])
    remove = desired.get("other_app_entries") == "remove"
    cur = current["app"]["dscp"]
    adds = []
    remap = False
    for dscp in sorted(want):
        prio = want[dscp]
        have = cur.get(dscp, [])
        if have != [prio]:
            add_drift("dscp_prio:%d" % dscp, dscp_value(have), prio)
            adds.append((dscp, prio))
            remap = remap or bool(have)
    dels = []
    for dscp in sorted(set(cur) - set(want)):
        prios = cur[dscp]
        gone = [p for p in prios if remove or p in lossless]
        if gone:
            add_drift("dscp_prio:%d" % dscp, dscp_value(prios), dscp_value([p for p in prios if p not in gone]))
            dels.extend((dscp, p) for p in gone)
    if pin_on_switch and not cur:
        # PCP -> DSCP trust switch: write the whole table so that no unknown firmware mapping stays behind.
        fallback = lossy_fallback(lossless)
        adds = []
        for dscp in range(DSCP_COUNT):
            if dscp in want:
                adds.append((dscp, want[dscp]))
            elif remove or (dscp >> 3) in lossless:
                adds.append((dscp, fallback))
                dels.append((dscp, fallback))
            else:
                adds.append((dscp, dscp >> 3))
    return adds, dels, remap


def _plan_others(current, add_drift):
    """del arguments for every non-DSCP APP entry (other_app_entries: remove)."""
    args = []
    other = current["app"].get("other") or {}
    for key, word in OTHER_SELECTORS:
        table = other.get(key) or {}
        if not table:
            continue
        args.append(word)
        for pid in sorted(table):
            prios = table[pid]
            add_drift(key if pid is None else "%s:%s" % (key, _pid_text(key, pid)), dscp_value(prios), None)
            if pid is None:
                args.extend("%d" % p for p in prios)
            else:
                args.extend("%s:%d" % (_pid_text(key, pid), p) for p in prios)
    return args


def plan_rail(netdev, current, desired, driver=None, apptrust=False):
    """Return (commands, drift) for one rail; commands are argv lists, minimal and ordered.

    ``current``: the state ``dcb.read_rail`` returns; ``desired``: ``normalize_desired``'s result.
    Order: ``app add|replace`` (wanted entries first, so mlx5 never drops to PCP trust in between),
    ``app del`` (entries that must go), ``app flush`` (to PCP trust), ``apptrust set``, ``pfc set``
    (only when the enabled set differs), ``ets set``.
    """
    cmds = []
    drift = []
    mlx5 = driver in MLX5_DRIVERS

    def add_drift(key, cur, want):
        drift.append({"concern": CONCERN, "object": netdev, "key": key,
                      "current": cur, "desired": want})

    app = current["app"]
    if current["trust"] != desired["trust"]:
        add_drift("trust", current["trust"], desired["trust"])
    dels = []
    if desired["trust"] == "dscp":
        # mlx5, and a rail whose driver is unknown and has no apptrust (trust follows the DSCP entries, as on mlx5)
        pin = mlx5 or (driver is None and not apptrust)
        adds, dels, remap = _plan_dscp(current, desired, pin, add_drift)
        if adds:
            # mlx5 keeps one priority per DSCP (add replaces in hardware); the generic dcbnl table
            # keeps every (dscp, prio) pair, so a remap there needs "replace".
            verb = "add" if (mlx5 or not remap) else "replace"
            cmds.append(["dcb", "app", verb, "dev", netdev, "dscp-prio"] + ["%d:%d" % e for e in adds])
    others = _plan_others(current, add_drift) if desired.get("other_app_entries") == "remove" else []
    if dels or others:
        cmds.append(["dcb", "app", "del", "dev", netdev]
                    + (["dscp-prio"] + ["%d:%d" % e for e in sorted(dels)] if dels else []) + others)
    if desired["trust"] == "pcp" and app["dscp"]:
        if current["trust"] == desired["trust"]:
            # a port that already trusts PCP (apptrust) but keeps DSCP entries: each is drift (they classify by
            # DSCP again as soon as the trust order changes), removed with the flush
            for d in sorted(app["dscp"]):
                add_drift("dscp_prio:%d" % d, app["dscp"][d], None)
        cmds.append(["dcb", "app", "flush", "dev", netdev, "dscp-prio"])
    if apptrust and current["trust"] != desired["trust"]:
        cmds.append(["dcb", "apptrust", "set", "dev", netdev, "order", desired["trust"]])
    if current["pfc"]["enabled"] != desired["pfc"]:
        add_drift("pfc", current["pfc"]["enabled"], desired["pfc"])
        cmds.append(["dcb", "pfc", "set", "dev", netdev, "prio-pfc", "all:off"]
                    + ["%d:on" % p for p in desired["pfc"]])
    want_ets = desired.get("ets")
    if want_ets is not None and not _ets_matches(current.get("ets"), want_ets):
        cur = current.get("ets")
        add_drift("ets", None if cur is None else {k: cur[k] for k in ("tc_tsa", "tc_bw", "prio_tc")},
                  want_ets)
        cmds.append(["dcb", "ets", "set", "dev", netdev]
                    + ["tc-tsa"] + ["%d:%s" % (tc, t) for tc, t in enumerate(want_ets["tc_tsa"])]
                    + ["tc-bw"] + ["%d:%d" % (tc, b) for tc, b in enumerate(want_ets["tc_bw"])]
                    + ["prio-tc"] + ["%d:%d" % (p, tc) for p, tc in enumerate(want_ets["prio_tc"])])
    return cmds, drift
