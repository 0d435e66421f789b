# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery of the node (GPUs, rails, PCIe paths, IOMMU, driver, Fabric Manager, nvidia-fs, OS profile): the body of
the ``gpufabric_facts`` module.

``run(module, sysroot)`` is called by the module with its AnsibleModule and by the one-call check
(``node_check``) with a ``task_host.TaskModule``. It returns the module's result; ``module.fail_json`` ends it on
failure.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import os_profiles
from ansible_collections.gpufabric.node.plugins.module_utils.check import qos_facts
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict(gather_subset=dict(type="list", elements="str", default=["all"]))


def run(module, sysroot=None):
    """The gpufabric facts and the warnings found in them (each also given to ``module.warn``)."""
    sysroot = sysroot or Sysroot()
    try:
        topology.normalize_subset(module.params["gather_subset"])
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        facts = topology.discover(sysroot, module.params["gather_subset"])
    except (OSError, IOError, ValueError) as e:
        module.fail_json(msg="GPU fabric discovery failed: %s" % e)
    if "qos" in topology.normalize_subset(module.params["gather_subset"]):
        if "rails" not in facts:
            facts["rails"] = topology.discover(sysroot, ["rails"])["rails"]

        run = CommandRunner(module)
        qos_facts.annotate(sysroot, facts["rails"], run, run.bin_path)
    profile, why = os_profiles.detect(sysroot)
    facts["os_profile"] = os_profiles.facts(profile) if profile else None
    facts["os_profile_reason"] = why
    found = topology.warnings(facts)
    for w in found:
        module.warn(w)
    return dict(changed=False, ansible_facts={"gpufabric": facts}, warnings_found=found)
