# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCB (DSCP trust, DSCP->priority APP map, PFC, ETS) of the RoCE rails through iproute2 ``dcb``.

Reading and applying are here; validation of the desired state and the per-rail plan (what is drift, which
commands fix it) are in ``dcb_plan.py``, re-exported here. On the host (a sysroot of ``/``) the rails are read from
the running kernel over rtnetlink (``dcbnl.py``: one request per rail, no process); what it does not answer, and
every rail of a simulated or test tree, is read with ``dcb -j`` (both JSON shapes). Changes always go through ``dcb``.

Plain Python, no Ansible imports: the ``dcb_qos`` module and the boot-time applier both call
``apply_dcb(run, rails, desired, check_mode)`` with a runner ``run(argv) -> (rc, out, err)``.

Facts this code relies on (docs/DESIGN.md section 3):

* ``dcb -j`` JSON: APP entries are ``[pid, prio]`` before iproute2 6.5 and ``[pid, prio, " "]``
  from 6.5 on; entries are read by position.
* mlx5 has no apptrust callbacks: DSCP trust is implied by the presence of DSCP APP entries
  (the first one switches the port to DSCP trust, deleting the last returns it to PCP). In DSCP
  trust the driver lists all 64 DSCP entries; one priority per DSCP (``app add`` replaces).
* mlx5 toggles the port link whenever ``pfc set`` changes pfc_en: ``pfc set`` is only run when
  the enabled set differs.
* ``dcb -j -b FILE`` (iproute2 >= 5.11, dcb.c/lib/utils.c do_batch) runs every line of FILE with
  one JSON writer for the whole process: each ``show`` prints one top-level object and successive
  objects are separated by a comma (``{...},{...}``, then a newline). A failing command prints
  nothing on stdout (its netlink read fails before the object is opened), ``Command failed
  FILE:LINE`` on stderr, and the batch stops there with rc 1. All rails are read with one such
  process; anything unexpected falls back to one process per object, which also yields the
  precise error message.
* ``dcb -V`` is only run when a rail's driver is not mlx5 (the apptrust probe needs iproute2 >=
  6.2) or when the batch read fails (to report a missing or too old iproute2 as such).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx as dcbx_mode
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb.batch import (  # noqa: F401  # pylint: disable=unused-import
    BATCH_DEFECT, batch_answers_all, batch_texts, split_batch_json)
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

# Validation and planning live in dcb_plan.py (plain functions, no I/O); re-exported here.
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb.plan import (  # noqa: F401  # pylint: disable=unused-import
    CONCERN, DCBX_CHOICES, DEFAULT_DCBX, DEFAULT_DSCP_MAP, DEFAULT_OTHER_APP, DEFAULT_PFC_PRIORITIES, MLX5_DRIVERS,
    OTHER_APP_CHOICES,
    OTHER_SELECTORS, TRUST_CHOICES, TSA_CHOICES, DcbValidationError, normalize_desired, plan_rail)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb.plan import dscp_value as _dscp_value

# what each iproute2 release's dcb can do: the table in batch.py
MIN_DCB_APP_VERSION = (5, 12, 0)
MIN_APPTRUST_VERSION = (6, 2, 0)


class DcbError(Exception):
    """dcb could not be run, its output could not be read, or the state did not read back."""


class DcbToolError(DcbError):
    """dcb is missing, cannot be run or is too old: nothing can be read or applied on any rail."""


# ----------------------------------------------------------------------------------------------
# input validation (rails; the desired state: dcb_plan.normalize_desired)
# ----------------------------------------------------------------------------------------------

def validate_rails(sysroot, rails):
    """Rails are netdev names that must exist in /sys/class/net."""
    if not rails:
        raise DcbValidationError("rails must list at least one network interface")
    seen = set()
    missing = []
    for r in rails:
        if not isinstance(r, str) or not r or "/" in r or len(r) >= 16:
            raise DcbValidationError("rail %r is not a valid network interface name" % (r,))
        if r in seen:
            raise DcbValidationError("rails lists %s twice" % r)
        seen.add(r)
        if not sysroot.exists("/sys/class/net/%s" % r):
            missing.append(r)
    if missing:
        raise DcbValidationError("unknown rail(s) %s: no such network interface in "
                                 "/sys/class/net" % ", ".join(missing))
    return list(rails)


def driver_of(sysroot, netdev):
    return sysroot.readlink_name("/sys/class/net/%s/device/driver" % netdev)


# ----------------------------------------------------------------------------------------------
# dcb output parsing
# ----------------------------------------------------------------------------------------------

def parse_version(text):
    """'dcb utility, iproute2-6.1.0' -> (6, 1, 0); also 'iproute2-v6.5.0-12-g…'."""
    m = re.search(r"iproute2-v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not m:
        raise DcbError("cannot read the iproute2 version from %r" % (text or "").strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def _loads(text, what):
    text = (text or "").strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise DcbError("cannot parse the JSON of %s: %s" % (what, e))
    if not isinstance(data, dict):
        raise DcbError("unexpected JSON from %s: %r" % (what, data))
    return data


def _list(data, key, what):
    """data[key] as a list ([] when absent or null); DcbError for anything else."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DcbError("unexpected %s in %s: %r" % (key, what, value))
    return value


def _number(value):
    """An integer from a JSON number or digits; ValueError for a bool, a float, null or anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError
    return int(value)


def _numbers(data, key, what):
    try:
        return [_number(v) for v in _list(data, key, what)]
    except ValueError:
        raise DcbError("unexpected %s in %s: %r" % (key, what, data.get(key)))


def _entries(data, key, what, pid_type=_number):
    """[(pid, prio)] of an app table. Entries by position: [pid, prio] (< 6.5) or [pid, prio, " "] (>= 6.5)."""
    out = []
    for e in _list(data, key, what):
        try:
            if not isinstance(e, list) or len(e) < 2:
                raise ValueError
            out.append((pid_type(e[0]), _number(e[1])))
        except ValueError:
            raise DcbError("unexpected %s entry %r in %s" % (key, e, what))
    return out


def parse_app(text):
    """``dcb -j app show dev X`` -> {"dscp": {dscp: [prios]}, "pcp": {pcp: [prios]}, "count",
    "other": {key: {pid: [prios]}}}.

    ``other`` holds the non-DSCP selectors by their JSON key (``ethtype_prio``, ``default_prio``,
    ``stream_port_prio``, ``dgram_port_prio``, ``port_prio``, ``pcp_prio``); ``default_prio`` is
    a plain list of priorities in the JSON and is keyed by pid None. ``count`` counts DSCP entries.
    """
    data = _loads(text, "dcb app show")
    dscp = {}
    for pid, prio in _entries(data, "dscp_prio", "dcb app show"):
        dscp.setdefault(pid, []).append(prio)
    other = {}
    for key, _word in OTHER_SELECTORS:
        table = {}
        if key == "default_prio":
            for prio in _list(data, key, "dcb app show"):
                if isinstance(prio, bool) or not isinstance(prio, int):
                    raise DcbError("unexpected default_prio entry %r in dcb app show" % (prio,))
                table.setdefault(None, []).append(prio)
        else:
            for pid, prio in _entries(data, key, "dcb app show", str if key == "pcp_prio" else _number):
                table.setdefault(pid, []).append(prio)
        for v in table.values():
            v.sort()
        if table:
            other[key] = table
    for v in dscp.values():
        v.sort()
    return {"dscp": dscp, "pcp": dict(other.get("pcp_prio", {})), "other": other,
            "count": sum(len(v) for v in dscp.values())}


def parse_pfc(text):
    data = _loads(text, "dcb pfc show")
    if "prio_pfc" not in data:
        raise DcbError("dcb pfc show printed no prio_pfc: %r" % (text or "").strip())
    prio_pfc = [bool(v) for v in _list(data, "prio_pfc", "dcb pfc show")]
    return {"pfc_cap": data.get("pfc_cap"), "delay": data.get("delay"),
            "macsec_bypass": data.get("macsec_bypass"), "prio_pfc": prio_pfc,
            "enabled": [i for i, v in enumerate(prio_pfc) if v],
            "requests": data.get("requests"), "indications": data.get("indications")}


def parse_ets(text):
    data = _loads(text, "dcb ets show")
    for key in ("tc_tsa", "tc_bw", "prio_tc"):
        if key not in data:
            raise DcbError("dcb ets show printed no %s" % key)
    return {"tc_tsa": _list(data, "tc_tsa", "dcb ets show"), "tc_bw": _numbers(data, "tc_bw", "dcb ets show"),
            "prio_tc": _numbers(data, "prio_tc", "dcb ets show"), "willing": data.get("willing")}


def parse_apptrust(text):
    data = _loads(text, "dcb apptrust show")
    return [str(s) for s in _list(data, "order", "dcb apptrust show")]


def trust_of(app, apptrust):
    """Effective trust: apptrust order where the driver has it, else DSCP entries (mlx5)."""
    if apptrust is not None:
        for sel in apptrust:
            if sel in TRUST_CHOICES:
                return sel
        return "pcp"
    return "dscp" if app["dscp"] else "pcp"


# ----------------------------------------------------------------------------------------------
# read / plan / apply
# ----------------------------------------------------------------------------------------------

def _run(run, argv):
    try:
        rc, out, err = run(argv)
    except OSError as e:
        raise DcbToolError("cannot run %s: %s" % (argv[0], e))
    return rc, out, err


def _query(run, argv):
    rc, out, err = _run(run, argv)
    if rc != 0:
        raise DcbError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out or "").strip()))
    return out


def dcb_version(run):
    """iproute2 version of the dcb binary; fails when missing or older than 5.12."""
    rc, out, err = _run(run, ["dcb", "-V"])
    if rc != 0:
        raise DcbToolError("dcb -V failed (rc=%s): %s; install iproute2 >= 5.12"
                           % (rc, (err or out or "").strip()))
    try:
        version = parse_version(out or err)
    except DcbError as e:
        raise DcbToolError(str(e))
    if version < MIN_DCB_APP_VERSION:
        raise DcbToolError("dcb of iproute2 %s is too old: 'dcb app' needs iproute2 >= 5.12"
                           % ".".join(str(v) for v in version))
    return version


def probe_apptrust(run, netdev, driver, version, kernel=None):
    """True when ``dcb apptrust`` works on this device (tried once, never on mlx5): its driver answers the trust
    table (asked of ``kernel`` where given, else of ``dcb apptrust show``) and this dcb can set it."""
    if driver in MLX5_DRIVERS or version < MIN_APPTRUST_VERSION:
        return False
    if kernel is not None:
        answered = kernel.answers([("apptrust", netdev), ("app", netdev)])
        if ("app", netdev) in answered:   # the kernel answered this rail: the trust table is there or not
            return ("apptrust", netdev) in answered
    rc, out, err = _run(run, ["dcb", "-j", "apptrust", "show", "dev", netdev])
    if rc != 0:
        return False
    try:
        parse_apptrust(out)
    except DcbError:
        return False
    return True


def _read_objects(netdev, with_ets, apptrust, with_dcbx=False):
    objs = [("app", netdev), ("pfc", netdev)]
    if with_ets:
        objs.append(("ets", netdev))
    if apptrust:
        objs.append(("apptrust", netdev))
    if with_dcbx:
        objs.append(("dcbx", netdev))
    return objs


class _Unreadable(object):
    """An object the driver does not answer (``dcbx`` of a driver without getdcbx): not an error of the rail."""

    def __init__(self, error):
        self.error = error


def _dcbx_query(run, netdev):
    rc, out, err = _run(run, ["dcb", "-j", "dcbx", "show", "dev", netdev])
    if rc != 0:
        return _Unreadable("dcb dcbx show dev %s failed (rc=%s): %s" % (netdev, rc, (err or out or "").strip()))
    return out


def _parsed(value, parse):
    """An object's state: what the kernel answered (``dcbnl.Parsed``), else ``parse`` of dcb's JSON text."""
    return value.value if isinstance(value, dcbnl.Parsed) else parse(value)


def _rail_state(parsed):
    app = _parsed(parsed["app"], parse_app)
    pfc = _parsed(parsed["pfc"], parse_pfc)
    ets = _parsed(parsed["ets"], parse_ets) if "ets" in parsed else None
    order = _parsed(parsed["apptrust"], parse_apptrust) if "apptrust" in parsed else None
    st = {"app": app, "pfc": pfc, "ets": ets, "apptrust": order, "trust": trust_of(app, order)}
    if "dcbx" in parsed:
        st["dcbx"], st["dcbx_error"] = None, None
        if isinstance(parsed["dcbx"], _Unreadable):
            st["dcbx_error"] = parsed["dcbx"].error
        elif isinstance(parsed["dcbx"], dcbnl.Parsed):
            st["dcbx"] = parsed["dcbx"].value
        else:
            try:
                st["dcbx"] = dcbx_mode.parse(parsed["dcbx"])
            except dcbx_mode.DcbxError as e:
                st["dcbx_error"] = str(e)
    return st


def read_rail(run, netdev, with_ets=False, apptrust=False, with_dcbx=False):
    """Current DCB state of one rail: one dcb process per object."""
    parsed = {}
    for obj, dev in _read_objects(netdev, with_ets, apptrust, with_dcbx):
        parsed[obj] = _dcbx_query(run, dev) if obj == "dcbx" else _query(run, ["dcb", "-j", obj, "show", "dev", dev])
    return _rail_state(parsed)


def _batch_lines(rails_objects):
    lines = []
    for ro in rails_objects:
        lines.extend(_read_objects(*ro))
    return lines


def run_batch(run, lines):
    """One ``dcb -j -b FILE`` process for ``lines`` [(object, netdev)].

    Returns (texts, usable): ``texts`` the JSON texts of the commands that answered, in order (all of them when the
    batch ran cleanly, a prefix when iproute2 6.1's batch defect stopped it), ``usable`` False when the output cannot
    be trusted (the caller then reads object by object, after the version check).
    """
    if not lines:
        return [], True
    fd, path = tempfile.mkstemp(prefix="gpufabric-dcb-", suffix=".batch")
    try:
        with os.fdopen(fd, "w") as f:
            f.write("".join("%s show dev %s\n" % (obj, dev) for obj, dev in lines))
        rc, out, err = _run(run, ["dcb", "-j", "-b", path])
    finally:
        os.unlink(path)
    return batch_texts(rc, out, err, len(lines))


def read_rails(run, rails_objects, need_version, version=None, kernel=None):
    """Current DCB state of several rails: what ``kernel`` (a ``dcbnl.KernelDcb``, the running kernel over
    rtnetlink: no process) answers, the rest in one batch process; what that did not answer, one process per object.

    ``need_version()`` runs ``dcb -V`` at most once (missing or too old iproute2 fails there); it is not needed when
    the batch answered at least its first command (the tool runs and knows the objects). A rail whose batch answers
    do not parse is read again object by object, so its errors are the precise ones. ``version``, when the caller
    already knows it: no batch where it would answer only its first command (``BATCH_DEFECT``)."""
    lines = _batch_lines(rails_objects)
    known = kernel.answers(lines) if kernel is not None else {}
    rest = [line for line in lines if line not in known]
    if not rest:
        texts = []
    elif version is not None and not batch_answers_all(version):
        texts = []   # such a batch would answer its first command only: one process per object instead
    else:
        texts, usable = run_batch(run, rest)
        if not usable or not texts:
            need_version()
            texts = []
    known.update(zip(rest, texts))
    states = {}
    for ro in rails_objects:
        netdev = ro[0]
        objects = _read_objects(*ro)
        parsed = dict((obj, known.get((obj, dev))) for obj, dev in objects)
        if all(parsed.values()):
            try:
                states[netdev] = _rail_state(parsed)
                continue
            except DcbError:
                pass
        reread = all(parsed.values())   # the batch answered every object of this rail, but they did not parse
        for obj, dev in objects:
            if obj == "dcbx" and (reread or parsed[obj] is None):
                parsed[obj] = _dcbx_query(run, dev)
            elif reread or parsed[obj] is None:
                parsed[obj] = _query(run, ["dcb", "-j", obj, "show", "dev", dev])
        states[netdev] = _rail_state(parsed)
    return states


def summarize(current, desired):
    """Readable per-rail view used for before/after and the diff."""
    out = {"trust": current["trust"],
           "dscp_prio": dict((str(d), _dscp_value(current["app"]["dscp"].get(d, [])))
                             for d in sorted(desired["dscp_map"])),
           "dscp_entries": current["app"]["count"],
           "pfc": current["pfc"]["enabled"]}
    if current.get("apptrust") is not None:
        out["apptrust"] = current["apptrust"]
    if current.get("ets") is not None:
        out["ets"] = dict((k, current["ets"][k]) for k in ("tc_tsa", "tc_bw", "prio_tc"))
    return out


def read_each(run, rails_objects, need_version, version=None, kernel=None):
    """read_rails; when that fails, each rail on its own: ({netdev: state}, {netdev: error}). Only a missing or too
    old dcb (DcbToolError) fails the whole run."""
    try:
        return read_rails(run, rails_objects, need_version, version, kernel), {}
    except DcbToolError:
        raise
    except DcbError as e:
        if len(rails_objects) < 2:
            return {}, dict((ro[0], str(e)) for ro in rails_objects)
    states, errors = {}, {}
    for ro in rails_objects:
        st, err = read_each(run, [ro], need_version, version, kernel)
        states.update(st)
        errors.update(err)
    return states, errors


def _changes(before_drift, after_drift):
    """What changed on a rail, key by key, from its drift before and after applying (read back)."""
    left = dict((d["key"], d["current"]) for d in after_drift)
    out = []
    for d in before_drift:
        now = left.get(d["key"], d["desired"])
        if now != d["current"]:
            out.append(results.change(d["key"], d["current"], now))
    return out


def apply_dcb(run, rails, desired, check_mode, sysroot=None):
    """Validate, read every rail, plan, apply (unless check mode), read back and verify, each rail on its own.

    Returns {"changed", "rails": [per-rail result], "results", "errors", "drift", "commands", "dcb_version"}.
    A rail that cannot be read, whose command fails or that does not read back as requested gets ``result: failed``
    and its ``error`` (also in ``errors``, naming the rail); the other rails are applied all the same. ``results``
    holds one ``results.result`` per rail with what was changed on it as read back. ``commands`` are the commands
    run (check mode: that would run). dcb_version is None when nothing needed it (``dcb -V`` was not run).
    Raises DcbValidationError before anything is run for bad input, DcbToolError when dcb is missing or too old.
    """
    if sysroot is None:
        sysroot = Sysroot()
    want = normalize_desired(desired)
    rails = validate_rails(sysroot, rails)
    versions = []

    def need_version():
        if not versions:
            versions.append(dcb_version(run))
        return versions[0]

    with_ets = want["ets"] is not None
    kernel = dcbnl.for_sysroot(sysroot)   # the running kernel answers the reads; changes go through dcb
    probes = []
    for netdev in rails:
        driver = driver_of(sysroot, netdev)
        # mlx5 never has apptrust: no version query, no probe
        apptrust = driver not in MLX5_DRIVERS and probe_apptrust(run, netdev, driver, need_version(), kernel)
        probes.append((netdev, driver, apptrust))
    # DCBX mode read with the rest (a driver without getdcbx does not answer it: not readable, not a rail error)
    with_dcbx = want["dcbx"] != dcbx_mode.KEEP
    first, read_errors = read_each(run, [(n, with_ets, a, with_dcbx) for n, _d, a in probes], need_version,
                                   kernel=kernel)
    # The host takes DCB over first (dcb dcbx set ... host ieee): until then the firmware's LLDP agent owns ETS, PFC
    # and APP and the handover can change them, so a rail taken over is read again and planned from what it has
    # then. Check mode takes nothing over: its plan is made from the state before the handover.
    takeover, ran, current, failed_takeover = {}, [], dict(first), {}
    for netdev, _d, _a in probes:
        if netdev not in read_errors:
            takeover[netdev] = dcbx_mode.plan(netdev, first[netdev].get("dcbx"), want["dcbx"])
    if not check_mode:
        taken = []
        for netdev, _d, _a in probes:
            for argv in takeover.get(netdev, ([], []))[0]:
                rc, out, err = _run(run, argv)
                ran.append(argv)
                if rc != 0:
                    failed_takeover[netdev] = "%s failed on rail %s (rc=%s): %s" % (
                        " ".join(argv), netdev, rc, (err or out or "").strip())
                    break
            else:
                if takeover.get(netdev, ([], []))[0]:
                    taken.append(netdev)
        again, again_errors = read_each(run, [(n, with_ets, a, with_dcbx) for n, _d, a in probes if n in taken],
                                        need_version, kernel=kernel)
        current.update(again)
        for n, e in again_errors.items():
            read_errors[n] = "after taking DCB over: %s" % e
    rail_res, all_drift = [], []
    for netdev, driver, apptrust in probes:
        res = {"rail": netdev, "driver": driver, "apptrust_supported": apptrust, "before": None, "after": None,
               "dcbx_error": None,
               "commands": [], "changes": [], "error": None, "_drift": [], "_ok": 0}
        rail_res.append(res)
        if netdev in read_errors and netdev not in first:
            res["error"] = "reading the DCB state of rail %s failed: %s" % (netdev, read_errors[netdev])
            continue
        cmds, items = takeover[netdev]
        mode, res["dcbx_error"] = first[netdev].get("dcbx"), first[netdev].get("dcbx_error")
        before = dict(summarize(first[netdev], want), dcbx=" ".join(mode["flags"]) if mode else None)
        res["before"] = before
        res["_ok"] = len(cmds) if cmds and not check_mode and netdev not in failed_takeover else 0
        res["error"] = failed_takeover.get(netdev)
        if netdev in read_errors:
            res["error"] = "reading the DCB state of rail %s failed: %s" % (netdev, read_errors[netdev])
        rest, drift = [], []
        if not res["error"]:
            rest, drift = plan_rail(netdev, current[netdev], want, driver=driver, apptrust=apptrust)
        res["commands"], res["_drift"] = cmds + rest, items + drift
        all_drift.extend(res["_drift"])
        if check_mode:
            after = _predicted(current[netdev], want) if res["commands"] else dict(before)
            after["dcbx"] = " ".join(dcbx_mode.DESIRED_FLAGS) if cmds else before["dcbx"]
            res["after"] = after
            res["changes"] = results.from_drift(netdev, res["_drift"])["changes"]
            continue
        for argv in ([] if res["error"] else rest):
            rc, out, err = _run(run, argv)
            ran.append(argv)
            if rc != 0:
                res["error"] = "%s failed on rail %s (rc=%s): %s" % (" ".join(argv), netdev, rc,
                                                                     (err or out or "").strip())
                break
            res["_ok"] += 1
    touched = [r for r in rail_res if not check_mode and r["commands"] and r["before"] is not None]
    after_all, after_errors = read_each(run, [(r["rail"], with_ets, r["apptrust_supported"], with_dcbx)
                                              for r in touched], need_version, kernel=kernel)
    for res in touched:
        netdev = res["rail"]
        if netdev in after_errors:
            res["error"] = res["error"] or "reading rail %s back failed: %s" % (netdev, after_errors[netdev])
            continue
        left = plan_rail(netdev, after_all[netdev], want, driver=res["driver"], apptrust=res["apptrust_supported"])[1]
        mode = after_all[netdev].get("dcbx")
        left = dcbx_mode.plan(netdev, mode, want["dcbx"])[1] + left
        res["after"] = summarize(after_all[netdev], want)
        res["after"]["dcbx"] = " ".join(mode["flags"]) if mode else None
        res["changes"] = _changes(res["_drift"], left)
        if left and not res["error"]:
            res["error"] = "rail %s does not read back as configured after %s: %s" % (
                netdev, "; ".join(" ".join(c) for c in res["commands"]),
                ", ".join("%s is %r, wanted %r" % (d["key"], d["current"], d["desired"]) for d in left))
    for res in rail_res:
        if res["after"] is None and res["before"] is not None and not res["commands"]:
            res["after"] = res["before"]
        res["result"] = results.FAILED if res["error"] else (results.CHANGED if res["commands"]
                                                             else results.UNCHANGED)
        # a rail whose read-back failed after commands worked on it may have changed: say so
        res["changed"] = res["result"] == results.CHANGED or bool(res["changes"]) or (
            res["_ok"] > 0 and res["after"] is None)
        del res["_drift"], res["_ok"]
    return {"changed": any(r["changed"] for r in rail_res), "rails": rail_res,
            "results": [results.result(r["rail"], r["result"], r["error"], r["changes"]) for r in rail_res],
            "errors": [r["error"] for r in rail_res if r["error"]],
            "drift": all_drift, "commands": [c for r in rail_res for c in r["commands"]] if check_mode else ran,
            "dcb_version": ".".join(str(v) for v in versions[0]) if versions else None}


def _predicted(before, want):
    """What check mode expects the rail to read back as after applying."""
    s = summarize(before, want)
    s["trust"] = want["trust"]
    for d, p in want["dscp_map"].items():
        s["dscp_prio"][str(d)] = p
    s["pfc"] = list(want["pfc"])
    if want["ets"] is not None:
        s["ets"] = dict(want["ets"])
    if "apptrust" in s and before["trust"] != want["trust"]:
        s["apptrust"] = [want["trust"]]
    s.pop("dscp_entries", None)
    return s


def diff_text(results, key):
    lines = []
    for r in results:
        s = r.get(key) or {}
        lines.append("%s trust=%s pfc=%s %s\n" % (
            r["rail"], s.get("trust"), ",".join(str(p) for p in s.get("pfc", [])) or "none",
            " ".join("dscp%s->%s" % (d, p)
                     for d, p in sorted(s.get("dscp_prio", {}).items(), key=lambda kv: int(kv[0])))))
        if s.get("ets") is not None:
            lines.append("%s ets tsa=%s bw=%s prio_tc=%s\n" % (
                r["rail"], ",".join(s["ets"]["tc_tsa"]), ",".join(str(b) for b in s["ets"]["tc_bw"]),
                ",".join(str(t) for t in s["ets"]["prio_tc"])))
    return "".join(lines)
