# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one list of concerns and the status model every playbook, report and metric reads.

A concern is one thing the collection manages on a node (the kernel command line, ACS on the GPU<->NIC paths, DCB on
the rails, ...). Every concern of a node has exactly one status:

- ``ok``: checked, and the node has the desired state;
- ``drift``: checked, and the node differs (the ``items`` say where);
- ``error``: the check (or the fix) failed; the ``reason`` says how;
- ``not_checked``: nothing looked at it (node unreachable, the play stopped before it, nothing to check);
- ``not_applicable``: it does not apply to this node (no boot loader the collection drives, routing turned off).

Anything but ``ok`` carries a one-line ``reason``. A node is ``ok`` only when every concern is ``ok`` or
``not_applicable``, no reboot is pending and no warning stands that breaks a data path; otherwise it needs attention,
with the reasons listed.

``CONCERNS`` is the single list of concerns (each one's behaviour is its spec, ``concerns/<name>/spec.py``, listed
in the same order in ``concerns/registry.py``). ``playbooks/tasks/concerns.yml`` imports one role per entry (a unit test holds the
two in step); the roles record each concern's status in the host fact ``gpufabric_concerns``; ``report``,
``fleet_report``, ``prom`` and the playbooks read the list from here.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

OK = "ok"
DRIFT = "drift"
ERROR = "error"
NOT_CHECKED = "not_checked"
NOT_APPLICABLE = "not_applicable"
STATUSES = (OK, DRIFT, ERROR, NOT_CHECKED, NOT_APPLICABLE)
# worst first: the order a summary ranks statuses in
SEVERITY = (ERROR, DRIFT, NOT_CHECKED, NOT_APPLICABLE, OK)
FACT = "gpufabric_concerns"

# name, title, role, core: core concerns are managed by provision, drift and report on every node; the others only
# where the play runs them (gds: the gds role's proof; vendor_client: kernel_upgrade.yml and vendor_nfs_client;
# performance: validate.yml's suite judged on the controller, no role: a role cannot correct it).
CONCERNS = (
    dict(name="cmdline", title="Kernel command line", role="iommu", core=True),
    dict(name="acs", title="PCIe ACS", role="pcie_acs", core=True),
    dict(name="dcb", title="DCB (trust, DSCP map, PFC)", role="roce_qos", core=True),
    dict(name="rdma_cm", title="rdma_cm ToS", role="roce_qos", core=True),
    dict(name="ecn", title="ECN/DCQCN", role="roce_qos", core=True),
    dict(name="sysctl", title="Rail sysctls", role="rail_network", core=True),
    dict(name="routing", title="Rail routing", role="rail_network", core=True),
    dict(name="mtu", title="Rail MTU", role="rail_network", core=True),
    dict(name="nccl", title="NCCL defaults", role="nccl", core=True),
    dict(name="persistence", title="Boot-time persistence", role="persistence", core=True),
    dict(name="nfs_mounts", title="NFS over RDMA mounts", role="storage_mounts", core=True),
    # read-only: a check and a real run say the same, nothing is corrected (the fabric_health role)
    dict(name="pcie_link", title="PCIe link health", role="fabric_health", core=True),
    dict(name="gpudirect_rdma", title="GPUDirect RDMA mechanism", role="fabric_health", core=True),
    dict(name="fabric_manager", title="Fabric Manager and NVLink", role="fabric_health", core=True),
    dict(name="gds", title="GPUDirect Storage", role="gds", core=False),
    dict(name="vendor_client", title="Vendor NFS client", role="vendor_nfs_client", core=False),
    dict(name="performance", title="Performance (validation suite)", role=None, core=False),
)
NAMES = tuple(c["name"] for c in CONCERNS)
CORE = tuple(c["name"] for c in CONCERNS if c["core"])
TITLES = dict((c["name"], c["title"]) for c in CONCERNS)
ITEM_KEYS = ("concern", "object", "key", "current", "desired")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class ConcernError(ValueError):
    """A status document that does not follow the model."""


def roles():
    """The roles in the order the playbooks import them (each once)."""
    out = []
    for c in CONCERNS:
        if c["role"] and c["role"] not in out:
            out.append(c["role"])
    return out


def of_role(role):
    return [c["name"] for c in CONCERNS if c["role"] == role]


def one_line(text, limit=400):
    """A reason as one readable line: control characters and runs of white space folded, long text cut."""
    text = " ".join(_CONTROL.sub(" ", str(text)).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def status(value, reason=None, items=None, **extra):
    """One concern's status document; a reason is required for anything but ok."""
    if value not in STATUSES:
        raise ConcernError("status %r is not one of %s" % (value, ", ".join(STATUSES)))
    if value != OK and not reason:
        raise ConcernError("status %s needs a reason" % value)
    doc = {"status": value, "reason": one_line(reason) if reason else None, "items": list(items or [])}
    doc.update(extra)
    return doc


def from_items(concern, items, check_mode, reason=None):
    """The status after a module compared the node with the desired state.

    items: the deviations found before anything was applied. In check mode they are drift; in a real run the module
    corrected them and proved it by read-back (a module that could not fails instead), so the concern is ok and the
    items say what was corrected.
    """
    items = [i for i in items or [] if (i.get("concern") or concern) == concern]
    if not items:
        return status(OK, reason, [])
    if check_mode:
        return status(DRIFT, reason or _drift_reason(items), items)
    return status(OK, reason or "corrected %d item(s)" % len(items), items, corrected=True)


def _drift_reason(items):
    keys = []
    for i in items:
        k = "%s %s" % (i.get("object"), i.get("key"))
        if k not in keys:
            keys.append(k)
    more = "" if len(keys) <= 3 else " and %d more" % (len(keys) - 3)
    return "%d item(s) differ from the desired state: %s%s" % (len(items), ", ".join(keys[:3]), more)


def error(concern, message, task=None, items=None):
    """The status of a concern whose check or fix failed; ``items`` may carry the per-object results."""
    text = message or "failed"
    if task:
        text = "%s: %s" % (task, text)
    return status(ERROR, text, items or [])


def failed_items(result):
    """Per-object results a failed module returned, as concern items: its ``results`` (one entry per rail, port,
    bridge or setting) when it has them, else the older per-object lists."""
    out = []
    keys = ("results",) if (result or {}).get("results") else ("rails", "devices", "bridges")
    for key in keys:
        for r in (result or {}).get(key) or []:
            if not isinstance(r, dict):
                continue
            obj = r.get("object") or r.get("rail") or r.get("device") or r.get("bdf") or r.get("name")
            if obj is None:
                continue
            res = r.get("result") or ("failed" if r.get("failed") or r.get("error") else
                                      "changed" if r.get("changed") else "unchanged")
            item = {"concern": None, "object": obj, "key": r.get("key") or "result", "current": res,
                    "desired": None, "result": res}
            if r.get("error"):
                item["error"] = str(r["error"])
            out.append(item)
    return out


def task_error(result, concern, task=None):
    """The status of a concern whose task (named ``task``) failed with ``result``, as the roles record it (the
    ``concern_error`` filter) and the one-call check gives it: the module's own ``error`` status when it returned
    one (its reason prefixed with the task's name), else ``error`` with the failure message and the per-object
    results as items."""
    result = result if isinstance(result, dict) else {}
    msg = result.get("msg") or ("unreachable" if result.get("unreachable") else "failed")
    own = (result.get("concerns") or {}).get(concern)
    if isinstance(own, dict) and own.get("status") == ERROR:
        doc = normalize(concern, own)
        if task and not (doc["reason"] or "").startswith(task):
            doc["reason"] = one_line("%s: %s" % (task, doc["reason"] or msg))
        return doc
    items = failed_items(result)
    for i in items:
        i["concern"] = concern
    return error(concern, msg, task, items)


_MERGE_ORDER = (ERROR, DRIFT, NOT_CHECKED, OK, NOT_APPLICABLE)


def merge(name, docs):
    """One concern's status from the results of several modules (pcie_acs: the runtime ACS state and the kernel
    argument that keeps it across reboots). The worst status wins (error, drift, not_checked, ok); the concern is
    not_applicable only when every part is. Items of all parts are kept, filed under ``name``."""
    docs = [d for d in docs if d]
    if not docs:
        return status(NOT_CHECKED, "no result")
    present = [d.get("status") for d in docs]
    for s in present:
        if s not in STATUSES:
            raise ConcernError("%s: status %r is not one of %s" % (name, s, ", ".join(STATUSES)))
    value = [s for s in _MERGE_ORDER if s in present][0]
    reasons = []
    for d in docs:
        if d.get("status") == value and d.get("reason") and d["reason"] not in reasons:
            reasons.append(d["reason"])
    items = []
    for d in docs:
        for i in d.get("items") or []:
            i = dict(i)
            i["concern"] = name
            items.append(i)
    extra = {}
    if value == OK and any(d.get("corrected") for d in docs):
        extra["corrected"] = True
    return status(value, "; ".join(reasons) or None, items, **extra)


def normalize(name, doc, host="node"):
    """Validate a status document from a node; returns a clean copy."""
    if name not in NAMES:
        raise ConcernError("%s: unknown concern %r (one of %s)" % (host, name, ", ".join(NAMES)))
    if not isinstance(doc, dict):
        raise ConcernError("%s: concern %s must be a mapping with a status, got %r" % (host, name, doc))
    value = doc.get("status")
    if value not in STATUSES:
        raise ConcernError("%s: concern %s has status %r (one of %s)" % (host, name, value, ", ".join(STATUSES)))
    reason = doc.get("reason")
    if value != OK and not reason:
        reason = "no reason given"
    items = []
    for i in doc.get("items") or []:
        if not isinstance(i, dict):
            raise ConcernError("%s: concern %s: an item must be a mapping, got %r" % (host, name, i))
        item = dict((k, i.get(k)) for k in ITEM_KEYS)
        item["concern"] = item["concern"] or name
        for k in ("result", "error"):
            if k in i:
                item[k] = i[k]
        items.append(item)
    out = {"status": value, "reason": one_line(reason) if reason else None, "items": items}
    if doc.get("corrected"):
        out["corrected"] = True
    return out


def complete(node_concerns, managed=None, unreachable=False, why=None):
    """Every managed concern of a node with a status: the ones the node reported, the rest not_checked.

    managed: the concern names the play manages (default: the core ones plus any the node reported).
    """
    node_concerns = node_concerns or {}
    if not isinstance(node_concerns, dict):
        raise ConcernError("concerns must be a mapping of concern name to status")
    names = list(managed if managed is not None else CORE)
    for n in node_concerns:
        if n not in names:
            names.append(n)
    out = {}
    for n in NAMES:
        if n not in names:
            continue
        if unreachable:
            out[n] = status(NOT_CHECKED, why or "the node was unreachable")
        elif n in node_concerns and node_concerns[n] is not None:
            out[n] = normalize(n, node_concerns[n])
        else:
            out[n] = status(NOT_CHECKED, why or "no result: the play did not reach this concern on the node")
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ConcernError("unknown concern(s) %s (one of %s)" % (", ".join(unknown), ", ".join(NAMES)))
    return out


def _data_path(facts, gds_wanted):
    """``[(sentence, breaks_a_wanted_proof)]`` of the data path from the gpufabric facts."""
    facts = facts or {}
    out = []
    mode = (facts.get("iommu") or {}).get("mode")
    if mode in ("translated", "mixed"):
        out.append(("IOMMU is %s: GPUDirect Storage fails with EIO and peer-to-peer DMA goes through the IOMMU"
                    % mode, bool(gds_wanted)))
    for p in facts.get("pairing") or []:
        if p.get("cross_numa"):
            out.append(("GPU %s and its NIC %s are on different NUMA nodes (SYS): RDMA crosses the CPU interconnect"
                        % (p.get("gpu"), p.get("netdev") or p.get("ibdev") or p.get("nic")), False))
    nvfs = facts.get("nvidia_fs")
    if gds_wanted and nvfs is not None and not nvfs.get("loaded"):
        out.append(("nvidia-fs is not loaded although GPUDirect Storage is wanted", True))
    return out


def data_path_warnings(facts, gds_wanted=False):
    """Warnings that break a data path, from the gpufabric facts: a translated IOMMU, a cross-NUMA GPU/NIC pair,
    nvidia-fs missing where GDS is wanted."""
    return [text for text, _fails in _data_path(facts, gds_wanted)]


def gds_wanted_on(facts, wanted=None):
    """Whether GPUDirect Storage is wanted on the node: ``wanted`` when the play says (``gpufabric_gds_wanted``),
    else whether nvidia-fs is loaded (a node that loads GDS's kernel module runs GDS)."""
    if wanted is not None:
        return bool(wanted)
    return bool(((facts or {}).get("nvidia_fs") or {}).get("loaded"))


def data_path_failures(facts, gds_wanted=None):
    """The data path warnings that make a wanted proof fail (verify.yml fails the node on them): with GDS wanted
    (``gds_wanted_on``), a translated or mixed IOMMU (GDS I/O fails with EIO) and nvidia-fs not loaded. A cross-NUMA
    pair slows RDMA and stays a warning."""
    return [text for text, fails in _data_path(facts, gds_wanted_on(facts, gds_wanted)) if fails]


def node_verdict(concerns, reboot_required=False, warnings=(), unreachable=False):
    """{"status": ok|attention|unreachable, "reasons": [...]} for one node from its completed concerns."""
    reasons = []
    if unreachable:
        reasons.append("unreachable: no concern was checked")
    for n in NAMES:
        c = concerns.get(n)
        if c is None or c["status"] in (OK, NOT_APPLICABLE):
            continue
        if unreachable:
            continue
        reasons.append("%s: %s (%s)" % (TITLES[n], c["status"], c.get("reason") or "no reason given"))
    if reboot_required:
        reasons.append("reboot pending: the boot loader has kernel arguments the running kernel lacks")
    reasons.extend(warnings or [])
    if unreachable:
        value = "unreachable"
    else:
        value = "attention" if reasons else OK
    return {"status": value, "reasons": reasons}


def counts(concerns):
    out = dict((s, 0) for s in STATUSES)
    for c in concerns.values():
        out[c["status"]] += 1
    return out


def worst(concerns):
    present = set(c["status"] for c in concerns.values())
    for s in SEVERITY:
        if s in present:
            return s
    return OK


# ------------------------------------------------------------------------------------------------
# The one assessment of a node that the reports (report, fleet_report) and the metrics (prom) show.

FABRIC_MANAGER_WARNING = ("NVSwitches are present but nvidia-fabricmanager is not running: CUDA fails with error 802 "
                          "and NVLink carries no traffic")
LEGACY_REASON = "not reported: an old caller passed only a drift list, which does not say it was checked"


def managed_names(names=None, what="managed concerns"):
    """The concern names a play manages, validated, in the order of ``CONCERNS`` (default: ``CORE``)."""
    if names is None:
        return CORE
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ConcernError("%s must be a list of concern names, got %r" % (what, names))
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ConcernError("%s: unknown concern(s) %s (one of %s)"
                           % (what, ", ".join(repr(n) for n in unknown), ", ".join(NAMES)))
    return tuple(n for n in NAMES if n in names)


def node_warnings(facts, gds_wanted=False):
    """The warnings that stop a node from being ok: ``data_path_warnings`` and NVSwitches without a running
    nvidia-fabricmanager (no CUDA, no NVLink)."""
    out = data_path_warnings(facts, gds_wanted)
    fm = (facts or {}).get("fabric_manager") or {}
    if fm.get("needed") and not fm.get("running"):
        out.append(FABRIC_MANAGER_WARNING)
    return out


def from_drift(drift, fixed=False, host="node"):
    """Statuses from an old caller's flat ``drift`` list: every concern with items is drift (in a fix run: ok,
    corrected); the list says nothing about the others, which ``complete`` then marks not_checked."""
    if not isinstance(drift, list):
        raise ConcernError("%s: drift must be a list of items, got %r" % (host, drift))
    by = {}
    for i in drift:
        if not isinstance(i, dict):
            raise ConcernError("node %s: a drift item must be a mapping, got %r" % (host, i))
        missing = [k for k in ("concern", "object", "key") if k not in i]
        if missing:
            raise ConcernError("node %s: drift item %r lacks %s" % (host, i, ", ".join(missing)))
        if i["concern"] not in NAMES:
            raise ConcernError("node %s: drift item of unknown concern %r (one of %s)"
                               % (host, i["concern"], ", ".join(NAMES)))
        item = dict((k, i.get(k)) for k in ITEM_KEYS)
        if item not in by.setdefault(i["concern"], []):
            by[i["concern"]].append(item)
    out = {}
    for name, items in by.items():
        items.sort(key=lambda x: (str(x["object"]), str(x["key"])))
        if fixed:
            out[name] = status(OK, "corrected %d item(s)" % len(items), items, corrected=True)
        else:
            out[name] = status(DRIFT, _drift_reason(items), items)
    return out


def _gds_concern(gds):
    """The gds concern from an old caller's GDS verdict ``{ok, reasons}``."""
    reasons = [one_line(r) for r in gds.get("reasons") or []]
    if gds.get("ok"):
        return status(OK)
    return status(DRIFT, "the GDS proof failed" + (": " + "; ".join(reasons) if reasons else ""))


def _flag(data, key, host):
    v = data.get(key)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise ConcernError("node %s: %s must be true or false, got %r" % (host, key, v))
    return v


def _strings(data, key, host):
    v = data.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConcernError("node %s: %s must be a list of strings, got %r" % (host, key, v))
    return [one_line(x) for x in v]


def assess(data, managed=None, host="node", fixed=False):
    """Everything the reports and the metrics say about one node, computed once.

    data: what the playbooks hand the reports for the node: ``{"concerns": gpufabric_concerns, "facts":
    ansible_facts.gpufabric, "warnings": [str], "reboot_required": bool, "gds_wanted": bool, "errors": [str],
    "unreachable": bool}``; every key may be missing. Old callers' ``drift`` (a flat item list) is used only without
    ``concerns`` (``from_drift``), and a GDS verdict ``gds: {ok, reasons}`` stands for the gds concern when the node
    reported none.
    managed: the concern names the play manages (default ``CORE``); concerns a node reports beyond them are included.
    Returns ``{"concerns": every concern with its status (``complete``), "verdict": ``node_verdict`` (play-level
    errors are reasons too), "blocking": the warnings that keep the node from ok (``node_warnings``), "source":
    "concerns" | "drift" | "none", "errors", "warnings", "reboot_required", "gds_wanted", "unreachable"}``.
    Raises ConcernError naming the host (and the concern) for input that does not follow the model.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConcernError("node %s: its data must be a mapping, got %r" % (host, data))
    managed = managed_names(managed)
    unreachable = _flag(data, "unreachable", host)
    errors = _strings(data, "errors", host)
    facts = data.get("facts")
    facts = {} if facts is None else facts
    if not isinstance(facts, dict):
        raise ConcernError("node %s: facts must be the gpufabric facts mapping, got %r" % (host, type(facts).__name__))
    raw = data.get("concerns")
    if raw is not None:
        if not isinstance(raw, dict):
            raise ConcernError("node %s: concerns must be a mapping of concern name to status (gpufabric_concerns), "
                               "got %r" % (host, raw))
        reported = dict((n, normalize(n, doc, host)) for n, doc in raw.items() if doc is not None)
        source, why = "concerns", None
    elif data.get("drift") is not None:
        reported, source, why = from_drift(data["drift"], fixed, host), "drift", LEGACY_REASON
    else:
        reported, source, why = {}, "none", None
    gds = data.get("gds")
    if gds is not None:
        if not isinstance(gds, dict) or "ok" not in gds:
            raise ConcernError("node %s: gds must be {ok: bool, reasons: [str]}, got %r" % (host, gds))
        if "gds" not in reported:
            reported["gds"] = _gds_concern(gds)
    if unreachable:
        done = complete(reported, managed, unreachable=True)
    elif why:
        done = complete(reported, managed, why=why)
    else:
        done = complete(reported, managed)
    gds_wanted = _flag(data, "gds_wanted", host)
    reboot = _flag(data, "reboot_required", host)
    blocking = [] if unreachable else node_warnings(facts, gds_wanted)
    verdict = node_verdict(done, reboot_required=reboot and not unreachable,
                           warnings=blocking + ["play error: %s" % e for e in errors], unreachable=unreachable)
    return {"concerns": done, "verdict": verdict, "blocking": blocking, "source": source, "errors": errors,
            "warnings": _strings(data, "warnings", host), "reboot_required": reboot, "gds_wanted": gds_wanted,
            "unreachable": unreachable}


LABELS = {OK: "ok", DRIFT: "drift", ERROR: "error", NOT_CHECKED: "not checked", NOT_APPLICABLE: "not applicable"}


def describe(doc, fixed=False):
    """(label, detail) of one concern for people. "as desired" is said of ok alone; in a fix run an ok concern whose
    items were corrected is "fixed" and a concern still drifting is "not fixed"."""
    value = doc["status"]
    n = len(doc.get("items") or [])
    if value == OK:
        if doc.get("corrected"):
            return ("fixed" if fixed else "corrected"), "corrected %d item(s)" % n
        return "ok", "as desired"
    if value == DRIFT and fixed:
        return "not fixed", doc.get("reason") or "still differs after the fix run"
    return LABELS[value], doc.get("reason") or "no reason given"
