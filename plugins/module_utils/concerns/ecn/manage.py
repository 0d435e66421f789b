# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ECN/DCQCN of the RoCE rails: notification point (NP) and reaction point (RP) on the lossless priority, and the
DSCP and 802.1p priority of the congestion notification packets (CNPs). docs/ecn.md has the sources.

Two kernel interfaces exist, and a rail has at most one of them:

* ``sysfs`` -- MLNX_OFED/DOCA's mlx5 driver: ``/sys/class/net/<if>/ecn/roce_np/enable/<prio>`` and
  ``roce_rp/enable/<prio>`` (``0``/``1``, one file per priority 0..7), ``roce_np/cnp_dscp`` and
  ``roce_np/cnp_802p_prio``. This directory is not in the upstream kernel.
* ``debugfs`` -- the inbox (upstream) mlx5_ib driver: ``/sys/kernel/debug/mlx5/<pci function>/cc_params/``
  (drivers/infiniband/hw/mlx5/cong.c; files mode 0600, read as ``%u\\n``, written with kstrtou32 base 0, one
  firmware MODIFY_CONG_PARAMS per write). It has ``np_cnp_dscp``, ``np_cnp_prio``, ``np_cnp_prio_mode`` and the
  RP rate parameters, but no per-priority NP/RP enable: upstream leaves that to the firmware (it cannot be read
  or set from the host), and the facts say so (``None`` per priority). Writing ``np_cnp_prio`` also sets
  ``np_cnp_prio_mode`` 0 (use that priority); the plan writes the mode explicitly first all the same.
  The directory exists only when debugfs is mounted and the firmware grants cc_query and cc_modify.
  Whether DCQCN runs on the lossless priority there is the firmware's ``ROCE_CC_PRIO_MASK_P<port>``, read with
  mlxconfig/mstconfig where installed (``ecn_host.firmware_prio``): a cleared bit is drift the host cannot fix (the
  item ``firmware_cc_prio:<prio>`` says how), and without the tool the concern is ``not_checked``, never ``ok``.

Under kernel lockdown (integrity or confidentiality mode, as under UEFI Secure Boot) debugfs refuses to open the
0600 ``cc_params`` files (``ecn_host.py`` has the capability table with the kernel source): such a rail is not read
and not written, and the concern is ``not_checked`` with the lockdown mode and how to check, not ``error``.

A rail with neither (Soft-RoCE, virtio, another vendor, an mlx5 rail without either interface) is
``not_applicable`` with the reason. The values are runtime state of the device (lost at driver reload and
reboot).

Plain Python, no Ansible imports: the ``roce_ecn`` module calls ``apply_ecn``; ``concern_status`` is the read-only
check (the one-call drift check). This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import host as ecn_host
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl.manage import validate_ifname

CONCERN = "ecn"
PRIORITIES = tuple(range(8))
SYSFS = "sysfs"
DEBUGFS = "debugfs"
SOURCES = (SYSFS, DEBUGFS)
DEFAULT_PRIORITY = 3
DEFAULT_CNP_DSCP = 48
DEFAULT_CNP_PRIORITY = 6
DEBUGFS_ROOT = "/sys/kernel/debug/mlx5"
MLX5_DRIVERS = ("mlx5_core",)
DESIRED_KEYS = ("rails", "priority", "cnp_dscp", "cnp_priority")
FIRMWARE_KEY = "firmware_cc_prio:%d"
NOT_QUERIED = "DCQCN's per-priority enable (firmware ROCE_CC_PRIO_MASK_P<port>) was not queried"


class EcnError(Exception):
    """A control that cannot be read, holds something unexpected or does not read back; names the rail."""


class EcnUnreadable(EcnError):
    """A control that exists but cannot be opened."""


# ----------------------------------------------------------------------------------------------
# input

def _as_int(value, what, low, high):
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError("%s must be an integer %d..%d, not %r" % (what, low, high, value))
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer %d..%d, not %r" % (what, low, high, value))
    if not low <= v <= high:
        raise ValueError("%s must be %d..%d (got %d)" % (what, low, high, v))
    return v


def normalize_desired(desired):
    """{"priority": 0..7, "cnp_dscp": 0..63 or None (left alone), "cnp_priority": 0..7 or None} with defaults 3,
    48, 6; "rails" (when present) a list of distinct interface names. ValueError names the setting."""
    desired = dict(desired or {})
    unknown = sorted(set(desired) - set(DESIRED_KEYS))
    if unknown:
        raise ValueError("unknown ECN settings: %s" % ", ".join(unknown))
    out = {"priority": _as_int(desired.get("priority", DEFAULT_PRIORITY), "priority", 0, 7)}
    dscp = desired.get("cnp_dscp", DEFAULT_CNP_DSCP)
    out["cnp_dscp"] = None if dscp is None else _as_int(dscp, "cnp_dscp", 0, 63)
    prio = desired.get("cnp_priority", DEFAULT_CNP_PRIORITY)
    out["cnp_priority"] = None if prio is None else _as_int(prio, "cnp_priority", 0, 7)
    if "rails" in desired:
        out["rails"] = validate_rails(desired["rails"])
    return out


def validate_rails(rails):
    if not rails or not isinstance(rails, (list, tuple)):
        raise ValueError("rails must list at least one network interface")
    seen = []
    for r in rails:
        validate_ifname(r)
        if r in seen:
            raise ValueError("rail %s is listed twice" % r)
        seen.append(r)
    return seen


# ----------------------------------------------------------------------------------------------
# where the controls are

def _sysfs_dir(netdev):
    return "/sys/class/net/%s/ecn" % netdev


def rail_function(sysroot, netdev):
    """The PCI function (BDF) behind a netdev, or None (virtual netdev, virtio: its device is not a PCI
    function)."""
    dev = sysroot.realpath("/sys/class/net/%s/device" % netdev)
    if not sysroot.exists("/sys/class/net/%s/device" % netdev):
        return None
    name = dev.rstrip("/").split("/")[-1]
    if sysroot.exists("/sys/bus/pci/devices/%s" % name):
        return name
    return None


def driver_of(sysroot, netdev):
    return sysroot.readlink_name("/sys/class/net/%s/device/driver" % netdev)


def locate(sysroot, netdev):
    """(source, base, reason): ``source`` sysfs/debugfs with the directory of the controls, or (None, None,
    why not)."""
    driver = driver_of(sysroot, netdev)
    if sysroot.isdir(_sysfs_dir(netdev) + "/roce_np/enable"):
        return SYSFS, _sysfs_dir(netdev), None
    bdf = rail_function(sysroot, netdev)
    if bdf and sysroot.exists("%s/%s/cc_params/np_cnp_dscp" % (DEBUGFS_ROOT, bdf)):
        return DEBUGFS, "%s/%s/cc_params" % (DEBUGFS_ROOT, bdf), None
    if driver not in MLX5_DRIVERS:
        what = (("driver %s" % driver) if driver
                else "no device driver (a virtual or software netdev, e.g. under Soft-RoCE)")
        return None, None, ("rail %s: %s exposes no ECN/DCQCN controls (no %s, no mlx5 cc_params)"
                            % (netdev, what, _sysfs_dir(netdev)))
    return None, None, ("rail %s: mlx5 without ECN controls: no %s (MLNX_OFED/DOCA driver) and no %s/%s/cc_params "
                        "(inbox driver: debugfs not mounted, or the firmware denies congestion-control query/modify)"
                        % (netdev, _sysfs_dir(netdev), DEBUGFS_ROOT, bdf or "<function>"))


def _read_int(sysroot, path, rail):
    raw = sysroot.read(path)
    if raw is None:
        raise EcnUnreadable("rail %s: cannot read %s" % (rail, path))
    try:
        return int(raw, 0)
    except ValueError:
        raise EcnError("rail %s: unexpected content %r in %s" % (rail, raw, path))


def _flag(sysroot, path, rail):
    v = _read_int(sysroot, path, rail)
    if v not in (0, 1):
        raise EcnError("rail %s: %s holds %d, expected 0 or 1" % (rail, path, v))
    return bool(v)


def read_rail(sysroot, netdev):
    """The ECN state of one rail: {"rail", "source", "reason", "priorities": {"0".."7": {"np", "rp"}} (None where
    the interface does not expose it), "np_enabled", "rp_enabled" (lists; None: not exposed), "cnp_dscp",
    "cnp_priority", "cnp_priority_mode" (debugfs; 0 = cnp_priority is used), "not_checked" (why the controls the
    rail has cannot be read: kernel lockdown; None when they were read), "base"}."""
    source, base, reason = locate(sysroot, netdev)
    st = {"rail": netdev, "source": source, "reason": reason, "priorities": {}, "np_enabled": None,
          "rp_enabled": None, "cnp_dscp": None, "cnp_priority": None, "cnp_priority_mode": None, "base": base,
          "not_checked": None}
    if source is None:
        return st
    if source == DEBUGFS:
        st["priorities"] = dict((str(p), {"np": None, "rp": None}) for p in PRIORITIES)
        st["not_checked"] = ecn_host.debugfs_refused(sysroot)
        if st["not_checked"]:
            return st
        try:
            st["cnp_dscp"] = _read_int(sysroot, base + "/np_cnp_dscp", netdev)
            st["cnp_priority"] = _read_int(sysroot, base + "/np_cnp_prio", netdev)
            st["cnp_priority_mode"] = _read_int(sysroot, base + "/np_cnp_prio_mode", netdev)
        except EcnUnreadable:
            st["not_checked"] = ecn_host.debugfs_refused(sysroot, read_failed=True)
            if not st["not_checked"]:
                raise
            st["cnp_dscp"] = st["cnp_priority"] = st["cnp_priority_mode"] = None
        return st
    if source == SYSFS:
        np, rp = [], []
        for p in PRIORITIES:
            n = _flag(sysroot, "%s/roce_np/enable/%d" % (base, p), netdev)
            r = _flag(sysroot, "%s/roce_rp/enable/%d" % (base, p), netdev)
            st["priorities"][str(p)] = {"np": n, "rp": r}
            if n:
                np.append(p)
            if r:
                rp.append(p)
        st["np_enabled"], st["rp_enabled"] = np, rp
        st["cnp_dscp"] = _read_int(sysroot, base + "/roce_np/cnp_dscp", netdev)
        st["cnp_priority"] = _read_int(sysroot, base + "/roce_np/cnp_802p_prio", netdev)
    return st


def facts(sysroot, netdev):
    """The facts of one rail (gpufabric_facts rails[].ecn): read_rail without the internal path, errors as
    ``error``."""
    try:
        st = read_rail(sysroot, netdev)
    except EcnError as e:
        return {"source": None, "error": str(e)}
    st = dict(st)
    st.pop("base", None)
    st.pop("rail", None)
    return st


# ----------------------------------------------------------------------------------------------
# plan / apply

def plan_rail(st, desired):
    """(writes [(path, value)], drift items) that make the rail match; nothing for a rail without controls."""
    rail, base = st["rail"], st["base"]
    writes, drift = [], []

    def item(key, cur, want):
        drift.append({"concern": CONCERN, "object": rail, "key": key, "current": cur, "desired": want})

    if st["source"] is None or st.get("not_checked"):
        return writes, drift
    p = desired["priority"]
    if st["source"] == SYSFS:
        cur = st["priorities"][str(p)]
        for point in ("np", "rp"):
            if not cur[point]:
                item("%s_enable:%d" % (point, p), cur[point], True)
                writes.append(("%s/roce_%s/enable/%d" % (base, point, p), 1))
        if desired["cnp_dscp"] is not None and st["cnp_dscp"] != desired["cnp_dscp"]:
            item("cnp_dscp", st["cnp_dscp"], desired["cnp_dscp"])
            writes.append((base + "/roce_np/cnp_dscp", desired["cnp_dscp"]))
        if desired["cnp_priority"] is not None and st["cnp_priority"] != desired["cnp_priority"]:
            item("cnp_priority", st["cnp_priority"], desired["cnp_priority"])
            writes.append((base + "/roce_np/cnp_802p_prio", desired["cnp_priority"]))
        return writes, drift
    if desired["cnp_dscp"] is not None and st["cnp_dscp"] != desired["cnp_dscp"]:
        item("cnp_dscp", st["cnp_dscp"], desired["cnp_dscp"])
        writes.append((base + "/np_cnp_dscp", desired["cnp_dscp"]))
    if desired["cnp_priority"] is not None:
        if st["cnp_priority_mode"] != 0:
            item("cnp_priority_mode", st["cnp_priority_mode"], 0)
        if st["cnp_priority"] != desired["cnp_priority"]:
            item("cnp_priority", st["cnp_priority"], desired["cnp_priority"])
        if st["cnp_priority_mode"] != 0 or st["cnp_priority"] != desired["cnp_priority"]:
            writes.append((base + "/np_cnp_prio_mode", 0))
            writes.append((base + "/np_cnp_prio", desired["cnp_priority"]))
    return writes, drift


def summary(st, priority):
    """What the diff and the per-rail result show: the managed priority and the CNP class."""
    if st.get("source") is None:
        return {"source": None}
    if st.get("not_checked"):
        return {"source": st["source"], "not_checked": st["not_checked"]}
    pr = st["priorities"].get(str(priority)) or {}
    out = {"source": st["source"], "np_enable:%d" % priority: pr.get("np"), "rp_enable:%d" % priority: pr.get("rp"),
           "cnp_dscp": st["cnp_dscp"], "cnp_priority": st["cnp_priority"]}
    if st["source"] == DEBUGFS:
        out["cnp_priority_mode"] = st["cnp_priority_mode"]
    return out


def _rail_status(rail_results):
    """The concern status without drift items: not_applicable when no rail has controls."""
    applicable = [r for r in rail_results if r["source"] is not None]
    if not applicable:
        return concerns.status(concerns.NOT_APPLICABLE, "; ".join(r["reason"] for r in rail_results))
    return None


def _firmware(sysroot, rail, st, priority, firmware):
    """(firmware doc or None, drift items the host cannot fix) of an inbox (debugfs) rail."""
    if st["source"] != DEBUGFS:
        return None, []
    if firmware is None:
        fw = {"status": concerns.NOT_CHECKED, "enabled": None, "mask": None, "key": None, "tool": None,
              "reason": NOT_QUERIED}
    else:
        fw = firmware(rail_function(sysroot, rail), priority)
    items = []
    if fw["status"] == concerns.OK and not fw["enabled"]:
        items.append({"concern": CONCERN, "object": rail, "key": FIRMWARE_KEY % priority, "current": False,
                      "desired": True})
    return fw, items


def apply_ecn(sysroot, rails, desired, check_mode, firmware=None):
    """Read, plan and (unless check mode) write every rail; each rail on its own.

    ``firmware(bdf, priority)``: reads the firmware's per-priority DCQCN enable of an inbox rail
    (``ecn_host.firmware_prio`` with a runner); None: not queried (the rail is then not_checked).
    Returns {"changed", "rails": [{"rail", "source", "reason", "not_checked", "firmware", "before", "after",
    "error"}], "drift", "results",
    "errors", "state": {rail: read_rail of the rail before}}. A rail whose controls cannot be read, written or do
    not read back fails (its ``results`` entry) and the others go on. Raises ValueError for bad input.
    """
    rails = validate_rails(rails)
    want = normalize_desired(dict((k, v) for k, v in (desired or {}).items() if k != "rails"))
    for r in rails:
        if not sysroot.exists("/sys/class/net/%s" % r):
            raise ValueError("rail %s does not exist (no /sys/class/net/%s)" % (r, r))
    out = {"changed": False, "rails": [], "drift": [], "results": [], "errors": [], "state": {}}
    p = want["priority"]
    for rail in rails:
        entry = {"rail": rail, "source": None, "reason": None, "not_checked": None, "firmware": None, "before": None,
                 "after": None, "error": None}
        drift, written, fw_seen = [], [], {}
        try:
            st = read_rail(sysroot, rail)
            out["state"][rail] = st
            entry.update(source=st["source"], reason=st["reason"], not_checked=st["not_checked"],
                         before=summary(st, p))
            writes, drift = plan_rail(st, want)
            fw, fw_items = _firmware(sysroot, rail, st, p, firmware)
            if fw is not None:
                fw_seen[FIRMWARE_KEY % p] = fw["enabled"]
                if fw["status"] != concerns.OK:
                    entry["not_checked"] = "; ".join(w for w in (st["not_checked"], fw["reason"]) if w)
            entry.update(firmware=fw, before=dict(entry["before"], **fw_seen))
            out["drift"].extend(drift + fw_items)
            if writes and not check_mode:
                for path, value in writes:
                    sysroot.write_attr(path, "%d\n" % value)
                    written.append(path)
                after = read_rail(sysroot, rail)
                left = plan_rail(after, want)[1]
                entry["after"] = dict(summary(after, p), **fw_seen)
                if left:
                    raise EcnError("rail %s: %s do(es) not read back as written" % (
                        rail, ", ".join("%s (reads %s, wrote %s)" % (i["key"], i["current"], i["desired"])
                                        for i in left)))
            else:
                entry["after"] = _predicted(entry["before"], drift)
            out["changed"] = out["changed"] or bool(writes)
            out["results"].append(results.from_drift(rail, drift))
        except (EcnError, IOError, OSError) as e:
            msg = str(e) if isinstance(e, EcnError) else "rail %s: %s" % (rail, e)
            entry["error"] = msg
            out["errors"].append(msg)
            changes = []
            if written:
                # a partial failure says what did change: the rail as it reads now against before
                if entry["after"] is None:
                    try:
                        entry["after"] = dict(summary(read_rail(sysroot, rail), p), **fw_seen)
                    except (EcnError, IOError, OSError):
                        pass
                before, after = entry["before"] or {}, entry["after"] or {}
                changes = [results.change(k, before[k], after[k]) for k in sorted(after)
                           if k in before and after[k] != before[k]]
                # unreadable after a write: something may have changed
                out["changed"] = out["changed"] or bool(changes) or entry["after"] is None
            out["results"].append(results.result(rail, results.FAILED, msg, changes))
        out["rails"].append(entry)
    return out


def _predicted(before, drift):
    if before is None:
        return None
    after = dict(before)
    for d in drift:
        after[d["key"]] = d["desired"]
    return after


def _by_reason(rails, key):
    """["rail(s) a, b: reason", ...]: the rails that share a reason named once, in rail order."""
    order, names = [], {}
    for r in rails:
        if r.get(key):
            if r[key] not in names:
                order.append(r[key])
                names[r[key]] = []
            names[r[key]].append(r["rail"])
    return ["rail%s %s: %s" % ("s" if len(names[w]) > 1 else "", ", ".join(names[w]), w) for w in order]


def status_of(res, check_mode):
    """The ecn concern from apply_ecn's result (no failed rail): not_applicable when no rail has controls, else
    concerns.from_items (drift in check mode; ok, corrected, after a fix)."""
    na = _rail_status(res["rails"])
    if na is not None:
        return na
    skipped = [r["reason"] for r in res["rails"] if r["source"] is None]
    unchecked = _by_reason(res["rails"], "not_checked")
    firmware = [d for d in res["drift"] if d.get("concern", CONCERN) == CONCERN and d["key"].startswith("firmware_")]
    doc = concerns.from_items(CONCERN, [d for d in res["drift"] if d not in firmware], check_mode)
    if firmware:
        # drift the host cannot fix (the firmware's configuration): drift in a fix run too, with how to fix it
        off = _by_reason([dict(r, off=(r.get("firmware") or {}).get("reason")) for r in res["rails"]
                          if any(d["object"] == r["rail"] for d in firmware)], "off")
        done = [doc["reason"]] if doc.get("reason") else []
        also = ["not checked: " + "; ".join(unchecked)] if unchecked else []
        extra = dict((k, v) for k, v in doc.items() if k not in ("status", "reason", "items"))
        return concerns.status(concerns.DRIFT, "; ".join(off + done + also), doc["items"] + firmware, **extra)
    if unchecked and doc["status"] == concerns.OK:
        done = [doc["reason"]] if doc.get("reason") else []
        return dict(doc, status=concerns.NOT_CHECKED,
                    reason=concerns.one_line("; ".join(done + ["not checked: " + "; ".join(unchecked)])))
    if unchecked:
        doc["reason"] = concerns.one_line("%s; not checked: %s" % (doc["reason"], "; ".join(unchecked)))
    if skipped and doc["status"] == concerns.OK and not doc.get("reason"):
        doc["reason"] = concerns.one_line("without ECN controls: " + "; ".join(skipped))
    return doc


def concern_status(sysroot, desired, firmware=None):
    """The read-only check of the ecn concern for the one-call drift check: ``desired`` is {"rails": [...],
    "priority", "cnp_dscp", "cnp_priority"} (normalize_desired's keys), ``firmware`` as for apply_ecn. Never writes.
    Returns a status document (error with the reason when a rail's controls cannot be read or the input is bad)."""
    try:
        want = normalize_desired(desired)
        if not want.get("rails"):
            raise ValueError("rails must list at least one network interface")
        res = apply_ecn(sysroot, want["rails"], want, True, firmware)
    except ValueError as e:
        return concerns.error(CONCERN, str(e))
    if res["errors"]:
        return concerns.error(CONCERN, "; ".join(res["errors"]), items=results.annotate(res["drift"],
                                                                                        res["results"]))
    return status_of(res, True)
