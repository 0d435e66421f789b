# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node payload: the module_utils that ``fabric_persist`` installs below ``lib_dir``, and nothing else.

What runs on a node outside an Ansible module runs from that copy, with the node's own Python, which has no Ansible:

- ``gpufabric-apply`` (``boot.applier.main``): the boot-time run (``gpufabric-apply.service``) and the per-device
  runs the udev rule starts (``gpufabric-apply@<ibdev>.service``);
- ``gpufabric-evidence`` (``boot.evidence_timer.main``): what ``gpufabric-evidence.timer`` starts.

``NODE_PAYLOAD`` is the explicit list of every file these entry points import, directly or not, as dotted names
below ``plugins/module_utils`` (``concerns`` is ``concerns/__init__.py``). It is a list of names and imports
nothing, so no layer depends on the payload for what Ansible ships: the modules that read the payload's sources
(``fabric_persist``, ``fabric_check``) import the two entry points, which makes AnsiballZ pack every file below them,
and ``persist.module_utils_sources`` reads each file by name. Unit tests
(``tests/unit/plugins/module_utils/test_node_payload.py``) hold the list to the closure of the entry points' imports,
keep every ``ansible`` import out of it, and run each entry point with ``python3 -I`` from a copy of just these
files. Plain Python: no imports at all. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the module_utils whose ``main`` the installed scripts run (persist.render_script's ``entry``)
ENTRY_POINTS = ("boot.applier", "boot.evidence_timer")

NODE_PAYLOAD = (
    "argspec", "boot.applier", "boot.evidence_timer", "check.facts", "check.node_check", "check.node_desired",
    "check.qos_facts", "concern_model", "concerns.acs.boot", "concerns.acs.manage", "concerns.acs.spec",
    "concerns.acs.task", "concerns.boot_record", "concerns.cmdline.args", "concerns.cmdline.detect",
    "concerns.cmdline.grub", "concerns.cmdline.grubby", "concerns.cmdline.manage", "concerns.cmdline.spec",
    "concerns.cmdline.task", "concerns.common", "concerns.dcb.batch", "concerns.dcb.boot", "concerns.dcb.dcbnl",
    "concerns.dcb.dcbx", "concerns.dcb.manage", "concerns.dcb.plan", "concerns.dcb.spec", "concerns.dcb.task",
    "concerns.ecn.boot", "concerns.ecn.host", "concerns.ecn.manage", "concerns.ecn.spec", "concerns.ecn.task",
    "concerns.fabric_manager.check", "concerns.fabric_manager.spec", "concerns.fabric_manager.task",
    "concerns.gds.boot", "concerns.gds.parse", "concerns.gds.spec", "concerns.gpudirect_rdma.check",
    "concerns.gpudirect_rdma.spec", "concerns.gpudirect_rdma.task", "concerns.mtu.boot", "concerns.mtu.manage",
    "concerns.mtu.persist", "concerns.mtu.spec", "concerns.mtu.task", "concerns.nccl.manage", "concerns.nccl.spec",
    "concerns.nccl.task", "concerns.nfs_mounts.check", "concerns.nfs_mounts.client_caps",
    "concerns.nfs_mounts.manage", "concerns.nfs_mounts.options", "concerns.nfs_mounts.spec",
    "concerns.nfs_mounts.task", "concerns.pcie_link.spec", "concerns.performance.record", "concerns.performance.spec",
    "concerns.persistence.evidence", "concerns.persistence.evidence_unit", "concerns.persistence.guard",
    "concerns.persistence.install", "concerns.persistence.spec", "concerns.persistence.task", "concerns.rdma_cm.boot",
    "concerns.rdma_cm.manage", "concerns.rdma_cm.spec", "concerns.rdma_cm.task", "concerns.registry",
    "concerns.routing.boot", "concerns.routing.manage", "concerns.routing.spec", "concerns.sections",
    "concerns.state", "concerns.sysctl.manage", "concerns.sysctl.spec", "concerns.sysctl.task",
    "concerns.vendor_client.hold", "concerns.vendor_client.spec", "contradictions", "discovery.gpudirect",
    "discovery.nvfs_modules", "discovery.pairing", "discovery.pci", "discovery.pci_scan", "discovery.pcie_link",
    "discovery.rails", "discovery.topology", "host.bounded_read", "host.files", "host.nodelock", "host.runner",
    "host.sysroot", "host.task_host", "inputs", "node_payload", "os_profiles", "report.prom", "results",
    "validate.nccl_log", "vendor_nfs.common",
)
