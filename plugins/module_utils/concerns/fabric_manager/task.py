# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``fabric_manager`` concern's read: discovery's Fabric Manager facts and, where nvidia-smi is installed, the
NVLink state. The body ``concern_check`` runs for this concern (``concern: fabric_manager``); read-only, the same in
check mode and in a real run. Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.fabric_manager import check
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host.runner import CommandRunner

ARGUMENT_SPEC = dict()


def run(module, sysroot=None, facts=None):
    """{"changed": False, "concerns": {"fabric_manager": status}, "fabric_manager": facts, "nvlink": [...]}; the
    play's discovery ``facts`` are used when they carry the Fabric Manager facts."""
    sr = sysroot or Sysroot()
    if facts is None or "fabric_manager" not in facts:
        try:
            facts = topology.discover(sr, ["fabric_manager"])
        except (OSError, IOError, ValueError) as e:
            msg = "Fabric Manager check failed: discovery: %s" % e
            module.fail_json(msg=msg, concerns={check.NAME: check.model.error(check.NAME, msg)})
    fm = facts["fabric_manager"]
    nvlink, nvsmi = None, None
    if fm.get("needed"):
        run = CommandRunner(module)
        smi = run.bin_path("nvidia-smi")
        if smi is None:
            nvsmi = "missing"
        else:
            rc, out, err = run([smi] + list(check.NVLINK_ARGS))
            if rc == 0:
                nvlink = check.parse_nvlink_status(out)
            else:
                nvsmi = "rc=%d: %s" % (rc, check.model.one_line((err or out or "").strip(), 200))
    return {"changed": False, "concerns": {check.NAME: check.status(fm, nvlink, nvsmi)}, "fabric_manager": fm,
            "nvlink": nvlink or []}
