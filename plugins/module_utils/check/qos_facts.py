# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``qos`` facts of the rails (gpufabric_facts ``gather_subset: qos``): ECN/DCQCN per priority (ecn.py), who
owns DCB (on the host the running kernel over rtnetlink, dcbnl.py; else, or for what it did not answer, ``dcb dcbx``,
dcbx.py: every rail in one ``dcb -j -b`` process where iproute2 answers whole batches) and
the NIC firmware's LLDP/DCBX settings (mlxconfig, where installed).

Plain Python: ``run(argv) -> (rc, out, err)`` and ``which(name) -> path or None`` are injected (the module passes
run_command in the C locale and get_bin_path). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbnl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb_manage
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn

# SR-IOV VFs and software devices have no DCB or ECN of their own: their PF (or lower device) carries them
KINDS = ("pf", "bond", "subfunction", "unknown")


def batch_dcbx(dcb_run, netdevs):
    """{netdev: output of ``dcb -j dcbx show``} for the rails one ``dcb -j -b`` process answered: all of them where
    iproute2 answers whole batches, the first where its batch defect stops it (``dcb.BATCH_DEFECT``), none when the
    batch failed otherwise (a rail whose driver has no getdcbx): the rest are read one by one, with their own error."""
    if len(netdevs) < 2:
        return {}
    try:
        texts, usable = dcb_manage.run_batch(dcb_run, [("dcbx", n) for n in netdevs])
    except dcb_manage.DcbError:
        return {}
    return dict(zip(netdevs, texts)) if usable else {}


def annotate(sysroot, rails, run, which):
    """Add ``ecn``, ``dcbx`` and ``firmware_dcbx`` to every rail of ``KINDS`` (in place); returns ``rails``."""
    dcb = which("dcb")
    wanted = [r for r in rails if r.get("netdev") and r.get("kind", "pf") in KINDS]

    def dcb_run(argv):
        return run([dcb] + list(argv[1:]))
    kernel = dcbnl.for_sysroot(sysroot)
    from_kernel = kernel.answers([("dcbx", r["netdev"]) for r in wanted]) if kernel is not None else {}
    rest = [r["netdev"] for r in wanted if ("dcbx", r["netdev"]) not in from_kernel]
    answered = batch_dcbx(dcb_run, rest) if dcb is not None else {}
    for r in wanted:
        netdev = r["netdev"]
        r["ecn"] = ecn.facts(sysroot, netdev)
        if ("dcbx", netdev) in from_kernel:
            r["dcbx"] = dict(from_kernel[("dcbx", netdev)].value, error=None)
        elif dcb is None:
            r["dcbx"] = {"owner": None, "flags": None, "error": "dcb (iproute2) is not installed: not read"}
        else:
            state, err = dcbx.from_output(answered[netdev]) if netdev in answered else dcbx.read(dcb_run, netdev)
            r["dcbx"] = dict(state, error=None) if state else {"owner": None, "flags": None, "error": err}
        r["firmware_dcbx"] = dcbx.firmware_facts(run, which, r.get("bdf"))
    return rails
