# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's evidence for node_exporter's textfile collector, gathered with the modules' own code.

``fabric_metrics`` (when ``report.yml`` runs) and the evidence timer that ``fabric_persist`` installs
(``gpufabric-evidence.timer`` running ``gpufabric-evidence``, no Ansible involved) both gather here and render with
``prom.py``; nothing else renders metrics.

What is gathered (``gather``):

- the facts: ``topology.discover`` (pairing, path bridges with ACS, rails, IOMMU, GPU driver, Fabric Manager,
  nvidia-fs);
- the DCB state of the rails (``dcb.read_each``: on the host, the running kernel over rtnetlink (``dcbnl.py``);
  what it did not answer, one ``dcb -j -b`` batch where iproute2 answers whole batches, else ``dcb -j`` per
  object), the rdma_cm ToS of the rail ports, the nvidia-fs counters;
- every concern's status: the desired-state document (``DESIRED_FILE``, written by ``fabric_persist``) evaluated
  by ``evaluate(desired, sysroot, runner)`` - the one-call check of ``node_check.py``, the same planners the concern
  modules run, read-only. Without a desired state every concern is ``not_checked`` (never ``ok``);
- PCIe link health comes with the facts (``topology.discover``: ``pcie_links``, judged by ``pcie_link.py``), not
  from a reader of its own here;
- the RDMA error, retry and congestion (CNP/ECN) counters of every port (``rdma_port_counters``): the files of
  ``/sys/class/infiniband/<dev>/ports/<port>/counters/`` (IB PMA) and ``hw_counters/`` (driver: mlx5, rxe) that
  ``RDMA_COUNTERS`` names;
- the last GDS proof (``GDS_VERDICT_FILE``, written by ``gds_verify``): its verdict and its age.

CLI (the timer's command): ``gpufabric-evidence [--desired FILE] [--textfile-dir DIR] [--filename NAME] [--interval S]
[--stdout]``; the directory defaults to the OS profile's node_exporter textfile directory
(``os_profiles.textfile_dir``), the one ``fabric_metrics`` writes ``gpufabric.prom`` to; the timer's file is
``gpufabric-evidence.prom``.
The file is written atomically (temp file in the same directory, fsync, rename, fsync of the directory), mode 0644,
owned by root, and only when its content differs. Plain Python: no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import stat
import time

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import parse as nvfs_parse
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import manage as rdma_cm

# node_exporter's textfile directory is the OS profile's (os_profiles.textfile_dir), shared by both writers; each
# writes its own file, and every series carries the label writer, so the two files never hold the same series
DEFAULT_FILENAME = "gpufabric-evidence.prom"
REPORT_FILENAME = "gpufabric.prom"
WRITER = "evidence_timer"
REPORT_WRITER = "fabric_metrics"
FILE_MODE = 0o644
DESIRED_FILE = state.STATE_DIR + "/desired.json"
DESIRED_SCHEMA = "gpufabric.desired/v1"
GDS_VERDICT_FILE = "/var/lib/gpufabric/gds_verdict.json"
# the most of an existing textfile read to compare it with the new one (ours are a few hundred KiB on 16 rails)
MAX_TEXTFILE = 16 << 20
GDS_VERDICT_SCHEMA = "gpufabric.gds-verdict/v1"
PCI_DEVICES = "/sys/bus/pci/devices"
IB_CLASS = rdma_cm.IB_CLASS
COUNTER_DIRS = ("counters", "hw_counters")

# counter file name -> category. counters/: the IB PMA port counters (drivers/infiniband/core/sysfs.c);
# hw_counters/: mlx5 (drivers/infiniband/hw/mlx5/counters.c: retrans_q_cnts, out_of_seq_q_cnts, extended_err_cnts,
# roce_accl_cnts, cong_cnts, ext_ppcnt_cnts, basic_q_cnts' out_of_buffer) and rxe (sw/rxe/rxe_hw_counters.c).
# Not counters and never read: hw_counters/lifespan (the cache lifetime in ms), the traffic counters.
ERROR, RETRY, CONGESTION = "error", "retry", "congestion"
RDMA_COUNTERS = dict(
    [(n, ERROR) for n in (
        "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
        "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
        "VL15_dropped", "out_of_buffer", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
        "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
        "resp_cqe_flush_error", "req_cqe_flush_error", "rx_icrc_encapsulated", "req_transport_retries_exceeded",
        "req_rnr_retries_exceeded", "send_err", "retry_exceeded_err", "retry_rnr_exceeded_err")] +
    [(n, RETRY) for n in (
        "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
        "local_ack_timeout_err", "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart",
        "roce_slow_restart_trans", "out_of_seq_request", "rcvd_rnr_err", "send_rnr_err", "rcvd_seq_err",
        "completer_retry_err")] +
    [(n, CONGESTION) for n in ("np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored",
                               "roce_slow_restart_cnps")])

# pci_speed_string() of drivers/pci/probe.c: "<n> GT/s PCIe" (older kernels without " PCIe"), "Unknown" otherwise
_SPEED = re.compile(r"(\d+(?:\.\d+)?) GT/s(?: PCIe)?\Z")
_WIDTH = re.compile(r"\d{1,2}\Z")
_COUNT = re.compile(r"\d{1,20}\Z")
_PORT = re.compile(r"\d{1,3}\Z")


class EvidenceError(Exception):
    """Evidence that cannot be gathered or written; the message names the object."""


# --- PCIe link health -------------------------------------------------------------------------------------

def parse_speed(text):
    """GT/s as a float from ``current_link_speed``/``max_link_speed``; None for ``Unknown`` or anything else."""
    m = _SPEED.match((text or "").strip())
    return float(m.group(1)) if m else None


def parse_width(text):
    m = _WIDTH.match((text or "").strip())
    return int(m.group(0)) if m else None


def path_devices(facts):
    """[(bdf, kind)] of every GPU, NIC and bridge on a GPU<->NIC path of the facts, each once, in that order."""
    out = []
    roles = dict((b["bdf"], b.get("role") or "bridge") for b in facts.get("path_bridges") or [])
    for p in facts.get("pairing") or []:
        for bdf, kind in [(p.get("gpu"), "gpu"), (p.get("nic"), "nic")] + \
                [(b, "bridge") for b in p.get("bridges") or []]:
            if bdf and bdf not in [o[0] for o in out]:
                out.append((bdf, kind))
    return [(bdf, kind, roles.get(bdf, "") if kind == "bridge" else "") for bdf, kind in out]


# --- RDMA port counters -----------------------------------------------------------------------------------

def rdma_port_counters(sysroot, facts=None):
    """[{device, port, rail, counters: [{dir, name, category, value}], unreadable: [dir/name]}] of every RDMA
    device port (category: ``RDMA_COUNTERS``).

    Only the files ``RDMA_COUNTERS`` names are read; a file the driver refuses to read (EINVAL, EOPNOTSUPP on some
    ports) or whose content is not a decimal count is listed in ``unreadable``."""
    rails = dict(((r.get("ibdev"), str(r.get("port"))), r.get("netdev")) for r in (facts or {}).get("rails") or [])
    out = []
    for dev in sysroot.listdir(IB_CLASS):
        for port in sysroot.listdir("%s/%s/ports" % (IB_CLASS, dev)):
            if not _PORT.match(port):
                continue
            entry = {"device": dev, "port": port, "rail": rails.get((dev, port)) or "", "counters": [],
                     "unreadable": []}
            for d in COUNTER_DIRS:
                base = "%s/%s/ports/%s/%s" % (IB_CLASS, dev, port, d)
                for name in sysroot.listdir(base):
                    if name not in RDMA_COUNTERS:
                        continue
                    text = sysroot.read(base + "/" + name)
                    if text is None or not _COUNT.match(text):
                        entry["unreadable"].append("%s/%s" % (d, name))
                        continue
                    entry["counters"].append({"dir": d, "name": name, "category": RDMA_COUNTERS[name],
                                              "value": int(text)})
            out.append(entry)
    return out


# --- the last GDS proof -----------------------------------------------------------------------------------

def gds_verdict_document(result, now):
    """The record ``gds_verify`` leaves on the node after a proof that made its test transfer; None otherwise
    (a check-mode run or one that stopped at the preconditions proves nothing either way: the last record stays)."""
    if result.get("transfer") is None:
        return None
    compat = result.get("compat_fallback_suspected")
    return {"schema": GDS_VERDICT_SCHEMA, "time": float(now), "gds_active": bool(result.get("gds_active")),
            "compat_fallback_suspected": None if compat is None else bool(compat),
            "path": result.get("path"), "size_mib": result.get("size_mib")}


def record_gds_verdict(sysroot, result, now=None, path=GDS_VERDICT_FILE):
    """Write the record of a proof (atomic, root-owned, 0644); the document written, or None when there is none."""
    doc = gds_verdict_document(result, time.time() if now is None else now)
    if doc is not None:
        persist.write_atomic(sysroot, path, json.dumps(doc, indent=2, sort_keys=True) + "\n", FILE_MODE)
    return doc


def read_gds_verdict(sysroot, path=GDS_VERDICT_FILE):
    """(record or None, warning or None): None without a record; a record that does not parse is a warning."""
    raw = sysroot.read_raw(path)
    if raw is None:
        return None, None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        return None, "%s is not JSON: %s" % (path, e)
    if not isinstance(doc, dict) or doc.get("schema") != GDS_VERDICT_SCHEMA or \
            not isinstance(doc.get("gds_active"), bool) or isinstance(doc.get("time"), bool) or \
            not isinstance(doc.get("time"), (int, float)) or not math.isfinite(doc["time"]):
        return None, "%s is not a %s record" % (path, GDS_VERDICT_SCHEMA)
    return doc, None


# --- DCB, ToS, nvidia-fs (also fabric_metrics' readers) ---------------------------------------------------

def default_rails(facts):
    """Every discovered rail with an Ethernet (RoCE) link layer, each netdev once."""
    out = []
    for r in facts.get("rails") or []:
        if r.get("netdev") and r.get("link_layer") == "Ethernet" and r["netdev"] not in out:
            out.append(r["netdev"])
    return out


def read_dcb(sysroot, run, rails, binary):
    """({rail: dcb.read_each state or {error}}, iproute2 version string or None). ``run(argv)`` runs ``binary``
    (the dcb found on PATH, None when there is none) with the rest of argv."""
    if binary is None:
        err = "dcb (iproute2 >= 5.12) was not found in PATH"
        return dict((r, {"error": err}) for r in rails), None

    def dcb_run(argv):
        return run([binary] + list(argv[1:]))
    try:
        version = dcb.dcb_version(dcb_run)
    except dcb.DcbError as e:
        return dict((r, {"error": str(e)}) for r in rails), None
    out, probed = {}, []
    kernel = dcbnl.for_sysroot(sysroot)   # the running kernel over rtnetlink first: no dcb process
    for rail in rails:
        try:
            probed.append((rail, False, dcb.probe_apptrust(dcb_run, rail, dcb.driver_of(sysroot, rail), version,
                                                           kernel)))
        except dcb.DcbError as e:
            out[rail] = {"error": str(e)}
    try:   # what the kernel did not answer: one batch where the release answers whole batches, else one per object
        states, errors = dcb.read_each(dcb_run, probed, lambda: version, version, kernel)
    except dcb.DcbError as e:
        states, errors = {}, dict((ro[0], str(e)) for ro in probed)
    out.update(states)
    out.update((r, {"error": e}) for r, e in errors.items())
    return dict((r, out[r]) for r in rails), ".".join(str(v) for v in version)


def read_tos(sysroot, facts):
    """ToS per rail port: the configfs value, 0 (kernel default) without a group, None without rdma_cm configfs."""
    out = []
    for r in facts.get("rails") or []:
        try:
            tos, source = rdma_cm.current_tos(sysroot, r["ibdev"], r["port"])
        except rdma_cm.RdmaCmError:
            tos, source = None, None
        if source == rdma_cm.SOURCE_NOT_LOADED:
            tos = None
        out.append({"device": r["ibdev"], "port": r["port"], "rail": r.get("netdev"), "tos": tos})
    return out


def read_nvfs(sysroot, facts):
    if not (facts.get("nvidia_fs") or {}).get("loaded"):
        return None
    text = sysroot.read_raw(nvfs_parse.STATS)
    if not text:
        return None
    return nvfs_parse.counters(nvfs_parse.parse_stats(text))


# --- the desired state on the node ------------------------------------------------------------------------

def desired_document(desired):
    """The file ``fabric_persist`` writes: ``{schema, desired}``; ValueError for anything JSON cannot hold."""
    if not isinstance(desired, dict):
        raise ValueError("the desired state must be a dict, not %s" % type(desired).__name__)
    try:
        text = json.dumps({"schema": DESIRED_SCHEMA, "desired": desired}, indent=2, sort_keys=True,
                          allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError("the desired state cannot be written as JSON: %s" % e)
    return text + "\n"


def load_desired(sysroot, path=DESIRED_FILE):
    """The desired state (dict), None when the file is missing; EvidenceError when it is unusable."""
    raw = sysroot.read_raw(path)
    if raw is None:
        if sysroot.exists(path):
            raise EvidenceError("%s cannot be read" % path)
        return None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise EvidenceError("%s is not JSON: %s" % (path, e))
    if not isinstance(doc, dict) or doc.get("schema") != DESIRED_SCHEMA or not isinstance(doc.get("desired"), dict):
        raise EvidenceError("%s is not a %s document" % (path, DESIRED_SCHEMA))
    return doc["desired"]


# --- writing the file -------------------------------------------------------------------------------------

def textfile_path(textfile_dir, filename):
    inputs.safe_path(textfile_dir, "textfile_dir")
    if not filename or "/" in filename or not filename.endswith(".prom") or filename == ".prom" or \
            filename.startswith("."):
        raise inputs.InputError("filename must be a plain file name ending in .prom, not starting with a dot "
                                "(node_exporter reads only those), not %r" % (filename,))
    inputs.file_name(filename, "filename")
    return os.path.join(textfile_dir, filename)


def current_file(sysroot, path):
    """(bytes or None, mode or None) of the file now. The textfile directory is node_exporter's, so the file is read
    with ``bounded_read`` (no symlink followed, regular files only, at most ``MAX_TEXTFILE`` bytes): anything else
    there counts as no file, and the write replaces it (the rename replaces a symlink itself, not its target)."""
    try:
        content, st = bounded_read.read_regular(sysroot.path(path), MAX_TEXTFILE, with_stat=True)
    except (IOError, OSError):
        return None, None
    return content, stat.S_IMODE(st.st_mode)


def write_textfile(sysroot, path, text, mode=FILE_MODE):
    """Write ``text`` when it or the mode differs; True when written. The temp file is a dot file in the same
    directory (node_exporter reads only ``*.prom``), renamed over the old file."""
    before, before_mode = current_file(sysroot, path)
    data = text.encode("utf-8")
    if before == data and before_mode == mode:
        return False
    persist.write_atomic(sysroot, path, data, mode)
    return True
