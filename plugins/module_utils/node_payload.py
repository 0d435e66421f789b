# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node payload: the module_utils that ``fabric_persist`` installs below ``lib_dir``, and nothing else.

What runs on a node outside an Ansible module runs from that copy, with the node's own Python, which has no Ansible:

- ``gpufabric-apply`` (``applier.main``): the boot-time run (``gpufabric-apply.service``) and the per-device runs
  the udev rule starts (``gpufabric-apply@<ibdev>.service``);
- ``gpufabric-evidence`` (``evidence_timer.main``): what ``gpufabric-evidence.timer`` starts.

``NODE_PAYLOAD`` lists every file these entry points import, directly or not. Each is imported here by name, so that
Ansible ships it with ``fabric_persist`` (AnsiballZ packs what a module imports) and ``persist.module_utils_sources``
reads it from there; a name missing from the list fails the module with the name, never a node at its next boot.
Unit tests (``tests/unit/plugins/module_utils/test_node_payload.py``) hold the list to the imports of its files, keep
every ``ansible`` import out of it, and run each entry point with ``python3 -I`` from a copy of just these files.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

# pylint: disable=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils import (  # noqa: F401
    acs, acs_task, applier, argspec, bounded_read, cmdline, cmdline_args, cmdline_detect, cmdline_grub,
    cmdline_grubby, cmdline_task, concerns, dcb, dcb_plan, dcb_task, dcbx, desired, ecn, ecn_host, ecn_task, evidence,
    evidence_timer, facts_task, gpudirect, guard, health_task, inputs, kernel_hold, kmod_common, mtu, mtu_persist,
    mtu_task, nccl, nccl_log, nccl_task, nfs_client_caps, nfs_mount_options, nfs_mounts, nfs_mounts_check,
    nfs_mounts_task, node_check, node_desired, nodelock, nvfs_modules, nvfs_parse, os_profiles, pci, pcie_link,
    persist, persist_evidence, persist_task, prom, qos_facts, rail_task, rdma_cm, rdma_cm_task, results, routing,
    state, sysctl, sysroot, task_host, topology, topology_pairing, topology_pci, topology_rails)


def _name(module_name):
    return module_name.rsplit(".", 1)[-1]


# the module_utils whose ``main`` the installed scripts run (persist.render_script's ``entry``)
ENTRY_POINTS = (_name(applier.__name__), _name(evidence_timer.__name__))

# every module_utils imported above, by name, and this file: the import statement is the one list (AnsiballZ reads
# it to pack the module, this reads it back from the module's namespace)
# pylint: enable=unused-import
_PKG = __name__.rsplit(".", 1)[0] + "."
NODE_PAYLOAD = tuple(sorted([_name(__name__)] + [
    _name(obj.__name__) for obj in list(globals().values())
    if type(obj) is type(sys) and obj.__name__.startswith(_PKG)]))
