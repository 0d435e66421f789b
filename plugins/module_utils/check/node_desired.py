# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From the roles' variables to the options of the concern modules, as the roles' tasks and vars pass them.

The desired state of a node is one document keyed by role variable name: the roles' defaults
(``roles/*/defaults/main.yml``) overlaid with the inventory's variables and templated once on the controller (the
``fabric_check`` action plugin), plus the constant tables of the roles' ``vars/main.yml`` that their tasks read
(``__iommu_mode_args``, ``__iommu_arch_map``, the no-rails messages). Nothing here holds a default of its own: a key
missing from the document is an error (``node_check.evaluate``).

The functions mirror the roles' Jinja: ``rails`` is ``__<role>_rails`` (the role's rails, else the netdevs paired with
GPUs), ``iommu_args`` is ``__iommu_present``/``__iommu_absent``, ``*_params`` are the module options of the roles'
tasks (an option the task omits is left out). The equivalence test of the one-call check holds them to the roles.

Plain Python: no Ansible imports (the evidence timer runs it on the node).
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.argspec import boolean

# the role variables (and role vars tables) each concern's check reads
KEYS = {
    "cmdline": ("iommu_mode", "iommu_extra_kernel_args", "iommu_absent_kernel_args", "iommu_bootloader",
                "__iommu_arch_map", "__iommu_mode_args"),
    "acs": ("pcie_acs_clear", "pcie_acs_pairs", "pcie_acs_endpoints", "pcie_acs_bridges", "pcie_acs_persist",
            "pcie_acs_bootloader"),
    "dcb": ("roce_qos_rails", "roce_qos_dscp", "roce_qos_priority", "roce_qos_dscp_map", "roce_qos_pfc_priorities",
            "roce_qos_trust", "roce_qos_dcbx", "roce_qos_ets", "roce_qos_ecn", "roce_qos_tos", "__roce_qos_no_rails"),
    "rdma_cm": ("roce_qos_rails", "roce_qos_dscp", "roce_qos_priority", "roce_qos_dscp_map",
                "roce_qos_pfc_priorities", "roce_qos_trust", "roce_qos_ecn", "roce_qos_tos", "__roce_qos_no_rails"),
    "sysctl": ("rail_network_rails", "rail_network_arp_ignore", "rail_network_arp_announce", "rail_network_rp_filter",
               "rail_network_routing", "rail_network_routing_table_base", "rail_network_routing_rule_priority",
               "rail_network_routing_gateways", "__rail_network_no_rails"),
    "ecn": ("roce_qos_rails", "roce_qos_dcqcn", "roce_qos_priority", "roce_qos_cnp_dscp", "roce_qos_cnp_priority",
            "__roce_qos_no_rails", "__roce_qos_ecn_off_reason"),
    "mtu": ("rail_network_rails", "rail_network_mtu", "rail_network_mtu_persist", "__rail_network_no_rails"),
    "nfs_mounts": ("storage_mounts_volumes", "storage_mounts_vendor_client", "storage_mounts_unit_dir",
                   "storage_mounts_after_units", "storage_mounts_before_units"),
    "pcie_link": ("fabric_health_gpu_idle_speed", "fabric_health_slot_limited", "fabric_health_gpudirect_mechanism",
                  "fabric_health_nccl_log"),
    "nccl": ("nccl_rails", "nccl_conf_path", "nccl_ib_tc", "nccl_ib_gid_index", "nccl_ib_fifo_tc",
             "nccl_socket_ifname", "nccl_extra_vars", "__nccl_no_rails"),
    "persistence": ("persistence_state", "persistence_python", "persistence_lib_dir", "persistence_script",
                    "persistence_unit_dir", "persistence_udev_rules_file", "persistence_boot_wait",
                    "persistence_device_wait", "persistence_before_units", "persistence_enabled",
                    "persistence_evidence", "persistence_evidence_interval", "persistence_evidence_textfile_dir",
                    "persistence_evidence_filename", "persistence_evidence_script"),
}
KEYS["routing"] = KEYS["sysctl"]
KEYS["gpudirect_rdma"] = KEYS["pcie_link"]  # one fabric_health run evaluates both
# what playbooks/tasks/concerns.yml checks for contradictions before any role runs (conflict_vars)
CONFLICT_KEYS = ("roce_qos_trust", "roce_qos_dscp_map", "roce_qos_pfc_priorities", "roce_qos_dscp",
                 "roce_qos_priority", "roce_qos_ecn", "roce_qos_tos", "nccl_ib_tc", "nccl_ib_fifo_tc")
# the constant tables and messages of roles/<role>/vars/main.yml the checks read (no Jinja in them)
ROLE_VARS = {"iommu": ("__iommu_arch_map", "__iommu_mode_args"),
             "roce_qos": ("__roce_qos_no_rails", "__roce_qos_ecn_off_reason"),
             "rail_network": ("__rail_network_no_rails",), "nccl": ("__nccl_no_rails",)}


class DesiredError(ValueError):
    """A desired-state document the check cannot read."""


def _int(value):
    """Jinja's ``int`` filter: the integer of a number or numeric string, 0 otherwise."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _unique(values):
    out = []
    for v in values:
        if v and v not in out:
            out.append(v)
    return out


def rails(role_rails, pairing):
    """``__<role>_rails``: the role's rails when given, else the netdevs of the RDMA NICs paired with GPUs."""
    if role_rails:
        return list(role_rails)
    return _unique(p.get("netdev") for p in pairing or [])


def roce_qos_rails(desired, pairing):
    """(``__roce_qos_rails``, ``__roce_qos_dcb_rails``): DCB goes on the physical ports of a RoCE LAG rail."""
    given = desired["roce_qos_rails"]
    netdevs = rails(given, pairing)
    if given:
        return netdevs, list(given)
    phys = []
    for p in pairing or []:
        phys.extend(p.get("phys_netdevs") or [])
    return netdevs, _unique(phys) or netdevs


def iommu_args(desired, arch):
    """(``__iommu_present``, ``__iommu_absent``) on ``arch``; DesiredError with the role's assert message when the
    mode is not supported there."""
    arch_map = desired["__iommu_arch_map"]
    modes = desired["__iommu_mode_args"]
    mode = desired["iommu_mode"]
    if arch not in arch_map or mode not in modes.get(arch_map[arch], {}):
        raise DesiredError("iommu_mode=%s is not supported on %s (supported: x86_64 passthrough|translated|off, "
                           "aarch64 passthrough|translated)" % (mode, arch))
    args = modes[arch_map[arch]][mode]
    extra = list(desired["iommu_extra_kernel_args"])
    absent = list(desired["iommu_absent_kernel_args"])
    user_keys = [re.sub(r"=.*", "", str(a)) for a in extra + absent]
    present = list(args["present"]) + extra
    absent = [v for k, v in (args.get("absent") or {}).items() if k not in user_keys] + absent
    return present, absent


def _omit_empty(params, **optional):
    for k, v in optional.items():
        if v:
            params[k] = v
    return params


def _omit_none(params, **optional):
    for k, v in optional.items():
        if v is not None:
            params[k] = v
    return params


def acs_params(d):
    return _omit_empty({"clear": d["pcie_acs_clear"], "pairs": d["pcie_acs_pairs"], "persist": d["pcie_acs_persist"]},
                       endpoints=d["pcie_acs_endpoints"], bridges=d["pcie_acs_bridges"])


def dscp_map(d):
    """``__roce_qos_dscp_map``: the map when set, else the lossless entry in DSCP trust (none in PCP)."""
    if d["roce_qos_dscp_map"] is not None:
        return d["roce_qos_dscp_map"]
    if d["roce_qos_trust"] == "dscp":
        return [{"dscp": _int(d["roce_qos_dscp"]), "priority": _int(d["roce_qos_priority"])}]
    return []


def dcb_params(d, dcb_rails):
    return _omit_empty({"rails": dcb_rails, "dscp_map": dscp_map(d), "pfc_priorities": d["roce_qos_pfc_priorities"],
                        "trust": d["roce_qos_trust"], "dcbx": d["roce_qos_dcbx"]}, ets=d["roce_qos_ets"])


def ecn_params(d, dcb_rails):
    """roce_ecn as the role calls it: on the DCB rails (the physical ports of a RoCE LAG), the lossless priority."""
    return {"rails": dcb_rails, "priority": _int(d["roce_qos_priority"]), "cnp_dscp": d["roce_qos_cnp_dscp"],
            "cnp_priority": d["roce_qos_cnp_priority"]}


def truthy(value):
    """The ``bool`` filter the roles' conditions use: a boolean, or a string such as yes/on/true/1."""
    return boolean(value, strict=False)


def rdma_cm_params(d, rails_):
    return {"rails": rails_, "tos": _int(d["roce_qos_tos"]), "expected_dscp": _int(d["roce_qos_dscp"])}


def rail_network_params(d, rails_):
    p = {"rails": rails_}
    for k in ("arp_ignore", "arp_announce", "rp_filter", "routing", "routing_table_base", "routing_rule_priority",
              "routing_gateways"):
        p[k] = d["rail_network_" + k]
    return p


def mtu_params(d, rails_):
    return {"rails": rails_, "mtu": d["rail_network_mtu"], "persist": d["rail_network_mtu_persist"]}


def nfs_mounts_params(d):
    keys = ("volumes", "vendor_client", "unit_dir", "after_units", "before_units")
    return dict((k, d["storage_mounts_" + k]) for k in keys)


def fabric_health_params(d):
    return _omit_empty({"pcie_link": {"gpu_idle_speed": d["fabric_health_gpu_idle_speed"],
                                      "slot_limited": d["fabric_health_slot_limited"]},
                        "gpudirect_rdma": {"mechanism": d["fabric_health_gpudirect_mechanism"]}},
                       nccl_log=d["fabric_health_nccl_log"])


def nccl_params(d, rails_):
    return _omit_none({"rails": rails_, "path": d["nccl_conf_path"], "tc": d["nccl_ib_tc"],
                       "extra_vars": d["nccl_extra_vars"]},
                      gid_index=d["nccl_ib_gid_index"], fifo_tc=d["nccl_ib_fifo_tc"],
                      socket_ifname=d["nccl_socket_ifname"])


def evidence_desired(d):
    """The desired state the evidence timer evaluates on the node (fabric_persist's ``evidence_desired``): the keys
    of ``d`` the check of the core concerns reads (``CONFLICT_KEYS`` and ``KEYS``), nothing else. Derived the same
    way on the controller (the fabric_persist action) and on the node (its own persistence check), so the
    document installed and the one compared are the same."""
    keys = list(CONFLICT_KEYS)
    for names in KEYS.values():
        keys.extend(k for k in names if k not in keys)
    missing = [k for k in keys if k not in d]
    if missing:
        raise DesiredError("the desired state lacks %s" % ", ".join(missing))
    return dict((k, d[k]) for k in keys)


def persistence_params(d):
    p = dict((k, d["persistence_" + k]) for k in ("state", "lib_dir", "script", "unit_dir", "boot_wait",
                                                  "device_wait", "before_units", "enabled", "evidence",
                                                  "evidence_interval", "evidence_textfile_dir",
                                                  "evidence_filename", "evidence_script"))
    p["rules_file"] = d["persistence_udev_rules_file"]
    if d["persistence_python"]:
        p["python"] = d["persistence_python"]
    if p["evidence"] and p["state"] == "present":
        p["evidence_desired"] = evidence_desired(d)
    return p


def conflict_vars(d):
    """The role variables playbooks/tasks/concerns.yml hands ``desired_conflicts`` before any role runs."""
    dmap = d["roce_qos_dscp_map"]
    if dmap is None:
        dmap = ([{"dscp": d["roce_qos_dscp"], "priority": d["roce_qos_priority"]}]
                if d["roce_qos_trust"] == "dscp" else [])
    out = dict((k, d[k]) for k in CONFLICT_KEYS)
    out["roce_qos_dscp_map"] = dmap
    return out
