# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``dcb`` section of the boot-time record: DCB per group of rails, re-applied at boot and at a device
registration with the dcb_qos module's own code.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import manage as dcb


DCB_KEYS = ("dscp_map", "pfc_priorities", "trust", "ets")  # the dcb_qos options recorded with the rails


def _validate_dcb_group(data, what):
    """DCB as the dcb_qos options (dcb.normalize_desired validates them) plus the rails."""
    br.only_keys(data, what, ("rails",) + DCB_KEYS)
    rails = br.names(data.get("rails"), "%s.rails" % what, br.ifname)
    try:
        want = dcb.normalize_desired(dict((k, data.get(k)) for k in DCB_KEYS))
    except dcb.DcbValidationError as e:
        raise ValueError("%s: %s" % (what, e))
    return {"rails": rails,
            "dscp_map": [{"dscp": d, "priority": want["dscp_map"][d]} for d in sorted(want["dscp_map"])],
            "pfc_priorities": list(want["pfc"]), "trust": want["trust"], "ets": want["ets"]}


def _validate_dcb(data):
    return br.grouped("dcb", data, _validate_dcb_group)


def dcb_desired(section):
    """The ``desired`` argument of dcb.apply_dcb from a recorded dcb section (of one group)."""
    return dict((k, section.get(k)) for k in DCB_KEYS)


def dcb_groups(section):
    """[(rails, desired)] of a recorded dcb section: one entry per group of rails with the same settings."""
    return [(g["rails"], dcb_desired(g)) for g in br.groups_of(section)]


def _apply_dcb(ctx, section, only_rails):
    """DCB of each recorded group of rails, with dcb.apply_dcb (the dcb_qos module's code)."""
    br.apply_rail_groups(ctx, "dcb", section, only_rails, dcb_desired,
                         lambda rails, desired: dcb.apply_dcb(ctx.run, rails, desired, ctx.check_mode,
                                                              sysroot=ctx.sysroot),
                         (dcb.DcbValidationError, dcb.DcbError, OSError, IOError))


SECTION = br.Section("dcb", "dcb", _validate_dcb,
                     lambda ctx, section, device: _apply_dcb(ctx, section, br.rails_of(device)),
                     order=30, device_run=True)
