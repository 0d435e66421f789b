# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_cm default RoCE ToS through configfs (``/sys/kernel/config/rdma_cm``).

Kernel behaviour this code relies on:

* ``mkdir /sys/kernel/config/rdma_cm/<ibdev>`` creates the device group; the kernel then
  creates ``ports/<n>/default_roce_tos`` (and ``default_roce_mode``) for every port. The
  real kernel does it synchronously; the simulated node does it asynchronously, so we wait
  (bounded) for the port directories.
* ``rmdir`` of the group does not reset the value. The value is reset to 0 whenever the RDMA
  device registers (boot, driver reload, firmware reset): the boot-time applier calls
  :func:`apply_tos` again on the udev ``add`` event of the infiniband device.
* The value lives in the kernel's per-device rdma_cm state, not in the configfs group: rdma_cm sets
  every port to 0 when it adds the device (``cma_add_one``), and the group only exposes it. A device
  without a group therefore runs with ToS 0 (:data:`KERNEL_DEFAULT_TOS`), and :func:`current_tos`
  reads it so; the one case it cannot see is a group that was written and removed again since the
  device registered (its value stays), which a real run uncovers when it creates the group.
  Without ``/sys/kernel/config/rdma_cm`` at all (rdma_cm not loaded or configfs not mounted) the
  ports also start at 0 once rdma_cm loads; that state is reported apart (``configfs``).
* ToS 106 = DSCP 26 << 2 | ECT(0); 104 = DSCP 26 without ECN capability.

Commands (``modprobe``, ``mount``) are passed to the injected runner ``run(argv)`` with the
bare tool name as ``argv[0]``; the caller resolves binaries (``module.get_bin_path`` in a
module, ``shutil.which`` in the applier). Plain Python: no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl.manage import validate_ifname

CONFIGFS = "/sys/kernel/config"
RDMA_CM = CONFIGFS + "/rdma_cm"
IB_CLASS = "/sys/class/infiniband"
DEFAULT_TOS = 106
KERNEL_DEFAULT_TOS = 0
SOURCE_CONFIGFS = "configfs"
SOURCE_NO_GROUP = "kernel default, no configfs group"
SOURCE_NOT_LOADED = "kernel default, no rdma_cm configfs"
DEFAULT_DSCP = 26
PORTS_WAIT_S = 2.0
PORTS_POLL_S = 0.02
_sleep = time.sleep
_clock = time.monotonic
ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}


class RdmaCmError(Exception):
    """A failure the caller reports as is (already phrased for a platform engineer)."""


class RailError(ValueError):
    """A rail name that is illegal, unknown, duplicated or has no RDMA device behind it."""


def rail_devices(sysroot, rails, with_gid_index=False):
    """[(rail, ibdev, port)] (plus the RoCE v2 IPv4 GID index when ``with_gid_index``) in the order given.

    The lookup itself is topology.list_rails (one sysfs walk); this adds the checks and the
    error messages the modules need. Raises RailError naming the rail.
    """
    if not rails:
        raise RailError("rails must list at least one network interface")
    seen = set()
    for rail in rails:
        try:
            validate_ifname(rail)
        except ValueError as e:
            raise RailError(str(e))
        if rail in seen:
            raise RailError("rail %s is listed twice" % rail)
        seen.add(rail)
        if not sysroot.exists("/sys/class/net/%s" % rail):
            raise RailError("rail %s does not exist (no /sys/class/net/%s)" % (rail, rail))
    known = topology.list_rails(sysroot)
    out = []
    for rail in rails:
        ports = [r for r in known if r["netdev"] == rail]
        if not ports:
            raise RailError("rail %s has no RDMA device behind it (no %s/*/ports/* names it): is it a RoCE port "
                            "and is mlx5_ib loaded?" % (rail, IB_CLASS))
        for r in ports:
            if with_gid_index:
                out.append((rail, r["ibdev"], r["port"], r["roce_v2_ipv4_gid_index"]))
            else:
                out.append((rail, r["ibdev"], r["port"]))
    return out


def _as_int(value, what):
    """int() of an int or a decimal string; bools and floats are refused."""
    if isinstance(value, (bool, float)):
        raise ValueError("%s (got %r)" % (what, value))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("%s (got %r)" % (what, value))


def validate_tos(tos):
    """Return ``tos`` as an int in 0..255 or raise ValueError."""
    value = _as_int(tos, "tos must be an integer 0..255")
    if not 0 <= value <= 255:
        raise ValueError("tos must be 0..255 (got %d); e.g. 106 = DSCP 26 << 2 | ECT(0)" % value)
    return value


def validate_dscp(dscp):
    """Return ``dscp`` as an int in 0..63 or raise ValueError."""
    value = _as_int(dscp, "expected_dscp must be an integer 0..63")
    if not 0 <= value <= 63:
        raise ValueError("expected_dscp must be 0..63 (got %r)" % (dscp,))
    return value


def describe_tos(tos):
    """'106 (DSCP 26, ECT(0))'."""
    return "%d (DSCP %d, %s)" % (tos, tos >> 2, ECN_NAMES[tos & 3])


def tos_warnings(tos, expected_dscp=None):
    """Warnings for a ToS that is legal but probably not what the fabric expects."""
    warnings = []
    if expected_dscp is not None and (tos >> 2) != expected_dscp:
        warnings.append(
            "tos %s carries DSCP %d but the fabric expects DSCP %d (tos %d, or %d with ECN): "
            "RDMA CM traffic will not land in the lossless priority"
            % (describe_tos(tos), tos >> 2, expected_dscp, expected_dscp << 2, (expected_dscp << 2) | 2))
    if tos & 3 == 3:
        warnings.append("tos %s sets ECN CE (congestion experienced) on every packet; use ECT(0) (| 2)"
                        % describe_tos(tos))
    return warnings


def device_ports(sysroot, ibdev):
    """Port numbers (ints, sorted) of an RDMA device from /sys/class/infiniband/<ibdev>/ports."""
    ports = []
    for name in sysroot.listdir("%s/%s/ports" % (IB_CLASS, ibdev)):
        if name.isdigit():
            ports.append(int(name))
    return sorted(ports)


def validate_devices_ports(sysroot, devices_ports):
    """Normalise ``devices_ports`` to a sorted list of (ibdev, port) and check they exist.

    Accepts (ibdev, port) pairs; ``port`` None means every port of the device.
    Raises RdmaCmError naming the missing device or port.
    """
    out = []
    seen = set()
    for ibdev, port in devices_ports:
        if not ibdev or "/" in ibdev or ibdev in (".", ".."):
            raise RdmaCmError("invalid RDMA device name %r" % (ibdev,))
        if not sysroot.isdir("%s/%s" % (IB_CLASS, ibdev)):
            raise RdmaCmError("RDMA device %s does not exist (no %s/%s)" % (ibdev, IB_CLASS, ibdev))
        available = device_ports(sysroot, ibdev)
        if not available:
            raise RdmaCmError("RDMA device %s has no ports under %s/%s/ports" % (ibdev, IB_CLASS, ibdev))
        wanted = available if port is None else [port]
        for p in wanted:
            try:
                p = _as_int(p, "port")
            except ValueError:
                raise RdmaCmError("invalid port %r for RDMA device %s" % (p, ibdev))
            if p not in available:
                raise RdmaCmError("RDMA device %s has no port %d (ports: %s)"
                                  % (ibdev, p, ", ".join(str(a) for a in available)))
            if (ibdev, p) not in seen:
                seen.add((ibdev, p))
                out.append((ibdev, p))
    return sorted(out)


def _configfs_mounted(sysroot):
    mounts = sysroot.read_raw("/proc/mounts", "") or ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == CONFIGFS and fields[2] == "configfs":
            return True
    return False


def ensure_configfs(sysroot, check_mode, run=None):
    """Make /sys/kernel/config/rdma_cm available. Returns 'present', 'loaded' or 'would load'."""
    if sysroot.isdir(RDMA_CM):
        return "present"
    if check_mode:
        return "would load"
    if run is None:
        raise RdmaCmError("%s is missing and no command runner was given to load configfs/rdma_cm" % RDMA_CM)
    # -a: several modules; without it modprobe reads 'rdma_cm' as a parameter of configfs.
    rc, out, err = run(["modprobe", "-a", "configfs", "rdma_cm"])
    if rc != 0:
        raise RdmaCmError("modprobe -a configfs rdma_cm failed (rc=%d): %s" % (rc, (err or out).strip()))
    if not sysroot.isdir(RDMA_CM) and not _configfs_mounted(sysroot):
        rc, out, err = run(["mount", "-t", "configfs", "none", sysroot.path(CONFIGFS)])
        if rc != 0:
            raise RdmaCmError("mounting configfs on %s failed (rc=%d): %s" % (CONFIGFS, rc, (err or out).strip()))
    if not sysroot.isdir(RDMA_CM):
        raise RdmaCmError("%s still missing after loading rdma_cm and mounting configfs: the kernel may be built "
                          "without CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS" % RDMA_CM)
    return "loaded"


def _tos_attr(ibdev, port):
    return "%s/%s/ports/%d/default_roce_tos" % (RDMA_CM, ibdev, port)


def wait_for_ports(sysroot, ibdev, ports, timeout=PORTS_WAIT_S, sleep=None, clock=None):
    """Wait until ``ports/<n>/default_roce_tos`` exists for each port; RdmaCmError on timeout."""
    sleep = sleep or _sleep
    clock = clock or _clock
    deadline = clock() + timeout
    while True:
        missing = [p for p in ports if not sysroot.exists(_tos_attr(ibdev, p))]
        if not missing:
            return
        if clock() >= deadline:
            raise RdmaCmError(
                "port(s) %s did not appear under %s/%s/ports/ within %.1f s: is %s a registered RDMA device "
                "(rdma link show)?" % (", ".join(str(p) for p in missing), RDMA_CM, ibdev, timeout, ibdev))
        sleep(PORTS_POLL_S)


def _read_tos(sysroot, ibdev, port):
    raw = sysroot.read(_tos_attr(ibdev, port))
    if raw is None:
        raise RdmaCmError("cannot read %s" % _tos_attr(ibdev, port))
    try:
        return int(raw)
    except ValueError:
        raise RdmaCmError("unexpected content %r in %s" % (raw, _tos_attr(ibdev, port)))


def current_tos(sysroot, ibdev, port):
    """(tos, source) in effect on ``ibdev``/``port``; the read facts, drift and check mode share.

    ``source`` is :data:`SOURCE_CONFIGFS` (read from the group), :data:`SOURCE_NO_GROUP` (no group for the
    device: the kernel default 0) or :data:`SOURCE_NOT_LOADED` (no ``/sys/kernel/config/rdma_cm``: 0 once
    rdma_cm loads). RdmaCmError when the group exists but the port's attribute is missing or unreadable.
    """
    if not sysroot.isdir(RDMA_CM):
        return KERNEL_DEFAULT_TOS, SOURCE_NOT_LOADED
    if not sysroot.isdir("%s/%s" % (RDMA_CM, ibdev)):
        return KERNEL_DEFAULT_TOS, SOURCE_NO_GROUP
    return _read_tos(sysroot, ibdev, port), SOURCE_CONFIGFS


def _port_result(entry, tos, error=None):
    obj = "%s/%d" % (entry["device"], entry["port"])
    changes = [results.change("default_roce_tos", entry["before"], entry["after"])] \
        if entry["after"] != entry["before"] else []
    if error:
        return results.result(obj, results.FAILED, error, changes if entry["after"] is not None else [])
    return results.result(obj, results.CHANGED if entry["before"] != tos else results.UNCHANGED, changes=changes)


def apply_tos(sysroot, devices_ports, tos, check_mode, run=None, wait_timeout=PORTS_WAIT_S, sleep=None):
    """Set default_roce_tos on every (ibdev, port); the single implementation (module and boot applier).

    ``devices_ports``: iterable of (ibdev, port) with port an int or None (= every port).
    Returns {"changed", "configfs", "ports": [{"device","port","before","after","source"}], "drift", "actions",
    "results", "errors"}. In check mode a port without a configfs group reads as the kernel default 0 (``source``
    says so); a real run creates the group (an action, not a change) and reads the value itself, so
    ``changed`` differs between the two only when a removed group left a value other than 0.
    Each port is set on its own: a device group that cannot be created or whose ports do not appear, a value that
    cannot be written or does not read back fails that device's ports or that port (``results``: one
    ``results.result`` per ``<ibdev>/<port>``; ``errors`` the messages) and the others are set all the same.
    Raises ValueError for bad input and RdmaCmError when configfs/rdma_cm is unavailable (before any write).
    """
    tos = validate_tos(tos)
    pairs = validate_devices_ports(sysroot, devices_ports)
    result = {"changed": False, "configfs": None, "ports": [], "drift": [], "actions": [], "results": [],
              "errors": []}
    result["configfs"] = ensure_configfs(sysroot, check_mode, run)
    if result["configfs"] in ("loaded", "would load"):
        result["changed"] = True
        result["actions"].append("%s configfs/rdma_cm" % result["configfs"])
    by_dev = {}
    for ibdev, port in pairs:
        by_dev.setdefault(ibdev, []).append(port)

    def fail(entry, error):
        msg = "%s/%d: %s" % (entry["device"], entry["port"], error)
        result["errors"].append(msg)
        result["results"].append(_port_result(entry, tos, msg))
        result["ports"].append(dict(entry, error=msg))

    for ibdev in sorted(by_dev):
        ports = by_dev[ibdev]
        group = "%s/%s" % (RDMA_CM, ibdev)
        have_group = result["configfs"] != "would load" and sysroot.isdir(group)
        try:
            if not have_group and not check_mode:
                # Creating the group only exposes the kernel's value (0 unless a removed group left another):
                # not a change by itself, so check mode (which reads the default) predicts the same ``changed``.
                sysroot.mkdir(group)
                result["actions"].append("created %s" % group)
                have_group = True
            if have_group:
                wait_for_ports(sysroot, ibdev, ports, timeout=wait_timeout, sleep=sleep)
        except (RdmaCmError, IOError, OSError) as e:
            for port in ports:
                fail({"device": ibdev, "port": port, "before": None, "after": None, "error": None, "source": None}, e)
            continue
        for port in ports:
            entry = {"device": ibdev, "port": port, "before": None, "after": None, "error": None, "source": None}
            try:
                if have_group:
                    entry["before"], entry["source"] = _read_tos(sysroot, ibdev, port), SOURCE_CONFIGFS
                else:
                    entry["before"] = KERNEL_DEFAULT_TOS
                    entry["source"] = SOURCE_NOT_LOADED if result["configfs"] == "would load" else SOURCE_NO_GROUP
                entry["after"] = entry["before"]
                if entry["before"] != tos:
                    result["drift"].append({"concern": "rdma_cm", "object": "%s/%d" % (ibdev, port),
                                            "key": "default_roce_tos", "current": entry["before"], "desired": tos})
                    if not check_mode:
                        sysroot.write_attr(_tos_attr(ibdev, port), "%d\n" % tos)
                        entry["after"] = _read_tos(sysroot, ibdev, port)
                        if entry["after"] != entry["before"]:
                            result["changed"] = True
                        if entry["after"] != tos:
                            raise RdmaCmError("wrote %d to %s but it reads back %s"
                                              % (tos, _tos_attr(ibdev, port), entry["after"]))
                        result["actions"].append("%s/%d default_roce_tos %s -> %d"
                                                 % (ibdev, port, entry["before"], tos))
                    else:
                        result["changed"] = True
                    entry["after"] = tos
            except (RdmaCmError, IOError, OSError) as e:
                fail(entry, e)
                continue
            result["results"].append(_port_result(entry, tos))
            result["ports"].append(entry)
    return result
