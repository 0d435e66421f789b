# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only health of the GPU<->NIC data path (concerns ``pcie_link`` and ``gpudirect_rdma``): the body of the
``fabric_health`` module.

``run(module, sysroot, facts=None)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule``. Without ``facts`` it discovers the node itself (subsets ``pci``,
``rails``, ``gpu_driver``), as the module does; the one-call check hands it the play's discovery (every subset,
the same code on the same node) when that succeeded. It returns the module's result; ``module.fail_json`` ends
it on failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import check as gdr_check
from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pcie_link, topology
from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

# what the checks read from the facts (topology.discover of these subsets gives them)
SUBSETS = ["pci", "rails", "gpu_driver"]
FACT_KEYS = ("pairing", "rails", "gpu_driver", "gpus", "kernel_release")

ARGUMENT_SPEC = dict(
    pcie_link=dict(type="dict", default={}, options=dict(
        gpu_idle_speed=dict(type="str", choices=["ignore", "check"], default="ignore"),
        slot_limited=dict(type="str", choices=["drift", "ok"], default="drift"))),
    gpudirect_rdma=dict(type="dict", default={}, options=dict(
        mechanism=dict(type="str", choices=["any", "dmabuf", "nvidia_peermem"], default="any"))),
    nccl_log=dict(type="path"),
)


def run(module, sysroot=None, facts=None):
    """Both concerns' status, the links, the mechanism and (with ``nccl_log``) the parsed NCCL log."""
    sr = sysroot or Sysroot()
    if facts is not None and not all(k in facts for k in FACT_KEYS):
        facts = None
    if facts is None:
        try:
            facts = topology.discover(sr, SUBSETS)
        except (OSError, IOError, ValueError) as e:
            msg = "fabric health check failed: discovery: %s" % e
            module.fail_json(msg=msg, concerns={"pcie_link": C.error("pcie_link", msg),
                                                "gpudirect_rdma": C.error("gpudirect_rdma", msg)})
    # each concern's check on its own: an error in one is that concern's error, the other still reports
    failed = []
    try:
        link_doc = pcie_link.check(sr, module.params["pcie_link"], facts=facts)
    except (OSError, IOError, ValueError) as e:
        failed.append("pcie_link: %s" % e)
        link_doc = C.error("pcie_link", "pcie_link check failed: %s" % e)
    try:
        gdr_doc = gdr_check.check(sr, module.params["gpudirect_rdma"], facts)
    except (OSError, IOError, ValueError) as e:
        failed.append("gpudirect_rdma: %s" % e)
        gdr_doc = C.error("gpudirect_rdma", "gpudirect_rdma check failed: %s" % e)
    links = link_doc.pop("links", [])
    mech = gdr_doc.pop("gpudirect", {})
    result = dict(changed=False, concerns={"pcie_link": link_doc, "gpudirect_rdma": gdr_doc}, links=links,
                  gpudirect=mech)
    found = pcie_link.warnings(links) + ([mech["warning"]] if mech.get("warning") else [])
    path = module.params["nccl_log"]
    if path:
        try:
            data, truncated = nccl_log.read(path)
        except nccl_log.LogError as e:
            module.fail_json(msg="cannot read the NCCL log: %s" % e, **result)
        result["nccl"] = nccl_log.parse(data, truncated)
        if result["nccl"]["verdict"]["gpudirect_rdma"] in ("no", "partial"):
            found.append("NCCL log %s: %s" % (path, result["nccl"]["verdict"]["summary"]))
    for w in found:
        module.warn(w)
    result["warnings_found"] = found
    if failed:
        module.fail_json(msg="fabric health check failed: %s" % "; ".join(failed), **result)
    return result
