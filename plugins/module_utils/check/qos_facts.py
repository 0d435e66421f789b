# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` facts of the rails (gpufabric_facts ``gather_subset: qos``): ECN/DCQCN per priority (ecn.py), who
owns DCB (``dcb dcbx``, dcbx.py) and the NIC firmware's LLDP/DCBX settings (mlxconfig, where installed).

Plain Python: ``run(argv) -> (rc, out, err)`` and ``which(name) -> path or None`` are injected (the module passes
run_command in the C locale and get_bin_path). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn

# SR-IOV VFs and software devices have no DCB or ECN of their own: their PF (or lower device) carries them
KINDS = ("pf", "bond", "subfunction", "unknown")


def annotate(sysroot, rails, run, which):
    """Add ``ecn``, ``dcbx`` and ``firmware_dcbx`` to every rail of ``KINDS`` (in place); returns ``rails``."""
    dcb = which("dcb")
    for r in rails:
        netdev = r.get("netdev")
        if not netdev or r.get("kind", "pf") not in KINDS:
            continue
        r["ecn"] = ecn.facts(sysroot, netdev)
        if dcb is None:
            r["dcbx"] = {"owner": None, "flags": None, "error": "dcb (iproute2) is not installed: not read"}
        else:
            state, err = dcbx.read(lambda argv: run([dcb] + list(argv[1:])), netdev)
            r["dcbx"] = dict(state, error=None) if state else {"owner": None, "flags": None, "error": err}
        r["firmware_dcbx"] = dcbx.firmware_facts(run, which, r.get("bdf"))
    return rails
