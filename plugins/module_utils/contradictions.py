# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Settings of the desired state that contradict each other, found before anything is touched.

One desired-state document (a dict, every key optional; None means "not given"):

=================  ==========================  ==========================================
key                role variable               module option(s)
=================  ==========================  ==========================================
trust              roce_qos_trust              dcb_qos trust
dscp_map           roce_qos_dscp_map           dcb_qos dscp_map
pfc_priorities     roce_qos_pfc_priorities     dcb_qos pfc_priorities
expected_dscp      roce_qos_dscp               rdma_cm_tos expected_dscp
expected_priority  roce_qos_priority           (role only: the default map's priority)
ecn                roce_qos_ecn                (role only: the ECN bits of roce_qos_tos)
tos                roce_qos_tos                rdma_cm_tos tos, nccl_config expected_tos
nccl_ib_tc         nccl_ib_tc                  nccl_config tc
nccl_ib_fifo_tc    nccl_ib_fifo_tc             nccl_config fifo_tc
=================  ==========================  ==========================================

:func:`contradictions` returns one message per contradiction, naming both settings by their role
variable and module option; every module calls it with what it sees, the filter
``gpufabric.node.desired_conflicts`` with the roles' variables. What counts (docs/desired.md):

* ``trust`` pcp with a non-empty ``dscp_map`` (PCP trust ignores the DSCP).
* In DSCP trust (``trust`` absent means dscp, the default of dcb_qos and roce_qos):
  PFC on priority 0 (every DSCP without an APP entry lands there: mlx5 resets a deleted DSCP to 0);
  a PFC priority no ``dscp_map`` entry maps a DSCP to (only mapped DSCPs reach a PFC priority: dcb_qos
  removes every other DSCP from it); ``expected_dscp`` missing from the map, mapped to another priority
  than ``expected_priority``, or to a priority without PFC; the DSCP of ``tos`` / ``nccl_ib_tc``
  (``tos >> 2``) missing from the map or mapped to a priority without PFC; the DSCP of ``nccl_ib_fifo_tc``
  missing from the map while its mlx5 default priority (``dscp >> 3``) has PFC (dcb_qos would move it out).
* ``tos >> 2`` other than ``expected_dscp``; ECN bits of ``tos`` against ``ecn``.
* ``nccl_ib_tc`` against ``tos``: NCCL_IB_TC is the full traffic class byte (DSCP << 2 | ECN), compared
  as DSCP (different DSCPs: different classes) and then as ECN bits (same DSCP, same priority, but only
  the ECN-capable one can be ECN-marked for DCQCN). Without ``tos``: its DSCP against ``expected_dscp``
  and its ECN bits against ``ecn``.
* An empty ``pfc_priorities`` means a lossy fabric (no lossless class): the lossless checks are skipped.

Values that cannot be read are skipped here (the modules report them precisely);
:func:`unreadable` lists them for the filter. Plain Python, no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# doc key -> (role variable, module options; a string when there is no module option)
SETTINGS = (
    ("trust", "roce_qos_trust", ("dcb_qos trust",)),
    ("dscp_map", "roce_qos_dscp_map", ("dcb_qos dscp_map",)),
    ("pfc_priorities", "roce_qos_pfc_priorities", ("dcb_qos pfc_priorities",)),
    ("expected_dscp", "roce_qos_dscp", ("rdma_cm_tos expected_dscp",)),
    ("expected_priority", "roce_qos_priority", "role only: the priority of the default roce_qos_dscp_map"),
    ("ecn", "roce_qos_ecn", "role only: the ECN bits of the default roce_qos_tos"),
    ("tos", "roce_qos_tos", ("rdma_cm_tos tos", "nccl_config expected_tos")),
    ("nccl_ib_tc", "nccl_ib_tc", ("nccl_config tc",)),
    ("nccl_ib_fifo_tc", "nccl_ib_fifo_tc", ("nccl_config fifo_tc",)),
)
KEYS = tuple(k for k, _v, _o in SETTINGS)
ROLE_VARS = dict((v, k) for k, v, _o in SETTINGS)
ECN_NAMES = ("Not-ECT", "ECT(1)", "ECT(0)", "CE")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def name(key):
    """'roce_qos_tos (rdma_cm_tos tos, nccl_config expected_tos)'."""
    for k, var, opts in SETTINGS:
        if k == key:
            return "%s (%s)" % (var, opts if isinstance(opts, str) else ", ".join(opts))
    raise KeyError(key)


# ----------------------------------------------------------------------------------------------
# reading the document
# ----------------------------------------------------------------------------------------------

class _Unreadable(ValueError):
    pass


def _int(value, lo, hi, what):
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Unreadable("%s is not an integer %d..%d" % (what, lo, hi))
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]+", value.strip()):
            raise _Unreadable("%s is not an integer %d..%d" % (what, lo, hi))
        value = int(value.strip())
    if not lo <= value <= hi:
        raise _Unreadable("%s is out of range %d..%d" % (what, lo, hi))
    return value


def _read_one(key, value):
    if key == "trust":
        if value not in ("dscp", "pcp"):
            raise _Unreadable("%r is not dscp or pcp" % (value,))
        return value
    if key == "ecn":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise _Unreadable("%r is not a boolean" % (value,))
    if key == "dscp_map":
        if not isinstance(value, (list, tuple)):
            raise _Unreadable("is not a list of {dscp, priority} items")
        out = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict) or set(item) != {"dscp", "priority"}:
                raise _Unreadable("item %d is not {dscp, priority}: %r" % (i, item))
            d = _int(item["dscp"], 0, 63, "item %d dscp %r" % (i, item["dscp"]))
            p = _int(item["priority"], 0, 7, "item %d priority %r" % (i, item["priority"]))
            if out.get(d, p) != p:
                raise _Unreadable("maps DSCP %d to two priorities (%d and %d)" % (d, out[d], p))
            out[d] = p
        return out
    if key == "pfc_priorities":
        if not isinstance(value, (list, tuple)):
            raise _Unreadable("is not a list of priorities")
        return sorted(set(_int(p, 0, 7, "priority %r" % (p,)) for p in value))
    lo, hi = {"expected_dscp": (0, 63), "expected_priority": (0, 7)}.get(key, (0, 255))
    return _int(value, lo, hi, "%r" % (value,))


def _read(doc):
    if not isinstance(doc, dict):
        raise TypeError("the desired-state document must be a dict, not %s" % type(doc).__name__)
    unknown = sorted(set(doc) - set(KEYS))
    if unknown:
        raise KeyError("unknown desired-state key(s) %s (known: %s)" % (", ".join(unknown), ", ".join(KEYS)))
    values, errors = {}, []
    for key in KEYS:
        if doc.get(key) is None:
            continue
        try:
            values[key] = _read_one(key, doc[key])
        except _Unreadable as e:
            errors.append("%s: %s" % (name(key), e))
    return values, errors


def unreadable(doc):
    """Messages for the values of ``doc`` that cannot be read (wrong type, out of range)."""
    return _read(doc)[1]


# ----------------------------------------------------------------------------------------------
# contradictions
# ----------------------------------------------------------------------------------------------

def describe_tos(tos):
    """'106 (DSCP 26, ECT(0))'."""
    return "%d (DSCP %d, %s)" % (tos, tos >> 2, ECN_NAMES[tos & 3])


def _map_text(m):
    return ", ".join("%d->%d" % (d, m[d]) for d in sorted(m)) or "empty"


def _ecn_problem(ecn, tos):
    """Why the ECN bits of ``tos`` contradict ``ecn``, or None."""
    bits = tos & 3
    if ecn and bits == 0:
        return "switches cannot ECN-mark Not-ECT packets, so DCQCN never sees congestion; use %d (ECT(0))" % (tos | 2)
    if ecn and bits == 3:
        return "CE marks every packet as congestion experienced; use %d (ECT(0))" % ((tos & ~3) | 2)
    if not ecn and bits:
        return "the packets are ECN-capable while ECN is off; use %d" % (tos & ~3)
    return None


def _class_problem(dscp, dmap, pfc):
    """Why traffic with ``dscp`` would not be lossless under ``dmap``/``pfc``, or None."""
    if dscp not in dmap:
        return "does not map DSCP %d, so that traffic gets no lossless priority" % dscp
    if pfc and dmap[dscp] not in pfc:
        return "maps DSCP %d to priority %d, which has no PFC" % (dscp, dmap[dscp])
    return None


def contradictions(doc):
    """Messages, one per pair (or triple) of settings of ``doc`` that contradict each other."""
    v, _errors = _read(doc)
    out = []

    def say(a, b, text):
        out.append("%s and %s contradict each other: %s" % (name(a), name(b), text))

    trust = v.get("trust", "dscp")
    dmap = v.get("dscp_map")
    pfc = v.get("pfc_priorities")
    pfcs = set(pfc or [])
    dscp = v.get("expected_dscp")
    prio = v.get("expected_priority")
    tos = v.get("tos")
    tc = v.get("nccl_ib_tc")
    fifo = v.get("nccl_ib_fifo_tc")
    ecn = v.get("ecn")
    pfc_text = "[%s]" % ", ".join(str(p) for p in pfc or [])

    if trust == "pcp" and dmap:
        say("trust", "dscp_map", "trust pcp cannot be combined with a non-empty DSCP map (%s): PCP trust classifies "
            "by the VLAN priority and ignores the DSCP; give an empty map or trust dscp" % _map_text(dmap))
    dscp_trust = trust == "dscp"
    if dscp_trust and 0 in pfcs:
        say("pfc_priorities", "trust", "PFC on priority 0 in DSCP trust makes every DSCP without an APP entry "
            "lossless (it lands in priority 0; mlx5 resets a deleted DSCP to 0); put the lossless class on another "
            "priority")
    if dscp_trust and dmap and pfc:
        targets = set(dmap.values())
        for p in pfc:
            if p and p not in targets:
                lacking = sorted(d for d in dmap if dmap[d] not in pfcs)
                say("pfc_priorities", "dscp_map", "PFC is on priority %d but the map (%s) sends no DSCP there: in "
                    "DSCP trust only mapped DSCPs reach a PFC priority (dcb_qos removes any other DSCP from it)%s"
                    % (p, _map_text(dmap), ", while DSCP %s has no PFC" % ", ".join(str(d) for d in lacking)
                       if lacking else ""))
    if dscp_trust and dmap and dscp is not None:
        if dscp not in dmap:
            say("expected_dscp", "dscp_map", "the lossless DSCP %d is not in the map (%s)" % (dscp, _map_text(dmap)))
        else:
            if prio is not None and dmap[dscp] != prio:
                say("expected_priority", "dscp_map", "the lossless priority is %d but the map sends DSCP %d to "
                    "priority %d" % (prio, dscp, dmap[dscp]))
            if pfc and dmap[dscp] not in pfcs:
                say("dscp_map", "pfc_priorities", "the map sends the lossless DSCP %d to priority %d, which has no "
                    "PFC (PFC is on %s): the lossless class must have PFC" % (dscp, dmap[dscp], pfc_text))
    if dscp_trust and prio is not None and pfc and prio not in pfcs \
            and not (dmap and dscp is not None and dmap.get(dscp) == prio):
        say("expected_priority", "pfc_priorities", "the lossless priority %d has no PFC (PFC is on %s): the lossless "
            "class must have PFC" % (prio, pfc_text))
    if tos is not None and dscp is not None and tos >> 2 != dscp:
        say("tos", "expected_dscp", "ToS %s carries DSCP %d (tos >> 2) but the lossless DSCP is %d: RDMA CM "
            "traffic (storage) would miss the lossless class; use %d, or %d with ECN"
            % (describe_tos(tos), tos >> 2, dscp, dscp << 2, (dscp << 2) | 2))
    if dscp_trust and dmap and tos is not None:
        why = _class_problem(tos >> 2, dmap, pfcs)
        if why:
            say("tos", "dscp_map", "ToS %s: the map (%s) %s" % (describe_tos(tos), _map_text(dmap), why))
    if ecn is not None and tos is not None:
        why = _ecn_problem(ecn, tos)
        if why:
            say("ecn", "tos", "ECN is %s but ToS %s: %s" % ("on" if ecn else "off", describe_tos(tos), why))
    if tc is not None and tos is not None:
        if tc >> 2 != tos >> 2:
            say("nccl_ib_tc", "tos", "NCCL_IB_TC is the full traffic class byte (DSCP << 2 | ECN); NCCL_IB_TC %s "
                "and the RDMA CM ToS %s carry different DSCPs, so NCCL and RDMA CM traffic would land in different "
                "classes" % (describe_tos(tc), describe_tos(tos)))
        elif tc & 3 != tos & 3:
            say("nccl_ib_tc", "tos", "both carry DSCP %d (same priority), but NCCL_IB_TC is the full traffic class "
                "byte and its ECN bits differ: NCCL %s vs RDMA CM %s; only ECN-capable packets can be ECN-marked, "
                "so congestion control (DCQCN) would cover one and not the other; use the same value"
                % (tc >> 2, describe_tos(tc), describe_tos(tos)))
    if tc is not None and tos is None:
        if dscp is not None and tc >> 2 != dscp:
            say("nccl_ib_tc", "expected_dscp", "NCCL_IB_TC %s carries DSCP %d (tc >> 2) but the lossless DSCP is "
                "%d; use %d, or %d with ECN" % (describe_tos(tc), tc >> 2, dscp, dscp << 2, (dscp << 2) | 2))
        if ecn is not None and _ecn_problem(ecn, tc):
            say("nccl_ib_tc", "ecn", "ECN is %s but NCCL_IB_TC %s: %s" % (
                "on" if ecn else "off", describe_tos(tc), _ecn_problem(ecn, tc)))
    if dscp_trust and dmap and tc is not None and (tos is None or tc >> 2 != tos >> 2):
        why = _class_problem(tc >> 2, dmap, pfcs)
        if why:
            say("nccl_ib_tc", "dscp_map", "NCCL_IB_TC %s: the map (%s) %s" % (describe_tos(tc), _map_text(dmap), why))
    if dscp_trust and dmap and pfc and fifo is not None:
        d = fifo >> 2
        if d not in dmap and (d >> 3) in pfcs:
            say("nccl_ib_fifo_tc", "dscp_map", "NCCL_IB_FIFO_TC %s carries DSCP %d, which the map (%s) does not name; "
                "its mlx5 default priority %d (DSCP >> 3) has PFC, and dcb_qos removes DSCPs the map does not name "
                "from PFC priorities, so the FIFO messages would go to priority 0; map DSCP %d or pick another ToS"
                % (describe_tos(fifo), d, _map_text(dmap), d >> 3, d))
    return out


def conflicts(doc):
    """unreadable(doc) + contradictions(doc): what the filter reports."""
    return unreadable(doc) + contradictions(doc)


def from_role_vars(variables):
    """Document from a dict keyed by role variable names (roce_qos_dscp, nccl_ib_tc, ...)."""
    if not isinstance(variables, dict):
        raise TypeError("expected a dict of role variables, not %s" % type(variables).__name__)
    unknown = sorted(set(variables) - set(ROLE_VARS))
    if unknown:
        raise KeyError("unknown role variable(s) %s (known: %s)"
                       % (", ".join(unknown), ", ".join(v for _k, v, _o in SETTINGS)))
    return dict((ROLE_VARS[k], val) for k, val in variables.items())
