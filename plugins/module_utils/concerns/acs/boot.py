# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``acs`` section of the boot-time record: the ACS bits to clear on the GPU<->NIC path bridges (kernel path
form, which survives bus renumbering), re-applied at boot; the pcie_acs module's own acs.json when state.json
has no section.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci


_PATH_RE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](/[0-9a-fA-F]{2}\.[0-7])*\Z")


def _validate_acs(data):
    """ACS in acs.py's shape: bridges [{kernel_path, bdf}] and the long names of the bits to clear."""
    br.only_keys(data, "acs", ("bridges", "clear"))
    bridges = data.get("bridges")
    if isinstance(bridges, (str, dict)) or not isinstance(bridges, (list, tuple)) or not bridges:
        raise ValueError("acs.bridges must be a non-empty list of {kernel_path, bdf} (got %r)" % (bridges,))
    out = []
    seen = set()
    for b in bridges:
        if not isinstance(b, dict) or set(b) - {"kernel_path", "bdf"} or not (b.get("kernel_path") or b.get("bdf")):
            raise ValueError("acs.bridges entries must be {kernel_path: <kernel path form>, bdf: <address>} "
                             "(got %r)" % (b,))
        path = None
        if b.get("kernel_path"):
            path = str(b["kernel_path"]).strip().lower()
            if not _PATH_RE.match(path):
                raise ValueError("acs bridge path %r is not in the kernel's path form "
                                 "<domain>:<bus>:<dev>.<fn>[/<dev>.<fn>...]" % (b["kernel_path"],))
        bdf = pci.normalize_bdf(b["bdf"]) if b.get("bdf") else None
        key = path or bdf
        if key in seen:
            raise ValueError("acs.bridges lists %s twice" % key)
        seen.add(key)
        out.append({"kernel_path": path, "bdf": bdf})
    try:
        names, _mask = acs.validate_clear(data.get("clear"))
    except acs.AcsError as e:
        raise ValueError("acs: %s" % e)
    return {"bridges": sorted(out, key=lambda e: e["kernel_path"] or e["bdf"]), "clear": names}


def _apply_acs(ctx, section, done=None):
    try:
        res = acs.apply_acs(ctx.sysroot, section["bridges"], section["clear"], ctx.check_mode)
    except (ValueError, OSError, IOError) as e:
        ctx.error("acs", str(e))
        return
    ctx.log_results("acs", res["results"])
    done = done if done is not None else {"changed": False, "bridges": [], "results": []}
    done["changed"] = done["changed"] or res["changed"]
    done["bridges"].extend(b.get("bdf") for b in res["bridges"])
    done["results"].extend(res["results"])
    ctx.concerns["acs"] = done


def _acs_fallback(ctx):
    """The pcie_acs module's own record (acs.json) when state.json has no acs section: each group of bridges with
    the bits recorded for it (a bridge whose clear failed keeps its earlier record)."""
    try:
        doc = acs.read_state(ctx.sysroot)
    except acs.AcsError as e:
        ctx.error("acs", str(e))
        return
    done = {"changed": False, "bridges": [], "results": []}
    for bridges, clear in acs.state_groups(doc or {}):
        _apply_acs(ctx, {"bridges": bridges, "clear": clear}, done)


SECTION = br.Section("acs", "acs", _validate_acs, lambda ctx, section, device: _apply_acs(ctx, section), order=10,
                     legacy_file=acs.STATE_FILE, fallback=_acs_fallback)
