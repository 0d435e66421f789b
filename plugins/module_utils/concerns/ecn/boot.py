# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``ecn`` section of the boot-time record: ECN/DCQCN per group of rails (lost at reboot and driver reload),
re-applied with the roce_ecn module's own code.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import manage as ecn


def _validate_ecn_group(data, what):
    """The roce_ecn options (ecn.normalize_desired) with the rails."""
    br.only_keys(data, what, ("rails",) + ecn.DESIRED_KEYS[1:])
    rails = br.names(data.get("rails"), "%s.rails" % what, br.ifname)
    try:
        want = ecn.normalize_desired(dict((k, v) for k, v in data.items() if k != "rails"))
    except ValueError as e:
        raise ValueError("%s: %s" % (what, e))
    return dict(want, rails=rails)


def _validate_ecn(data):
    """One group per set of ECN settings: a run on some rails keeps the others' record (merge)."""
    return br.grouped("ecn", data, _validate_ecn_group)


def _apply_ecn(ctx, section, only_rails):
    """ECN/DCQCN of each recorded group of rails (lost at reboot and driver reload), with ecn.apply_ecn."""
    br.apply_rail_groups(ctx, "ecn", section, only_rails,
                         lambda g: dict((k, v) for k, v in g.items() if k != "rails"),
                         lambda rails, desired: ecn.apply_ecn(ctx.sysroot, rails, desired, ctx.check_mode),
                         (ValueError, OSError, IOError))


SECTION = br.Section("ecn", "ecn", _validate_ecn,
                     lambda ctx, section, device: _apply_ecn(ctx, section, br.rails_of(device)),
                     order=50, device_run=True)
