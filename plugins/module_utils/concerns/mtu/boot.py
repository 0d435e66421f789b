# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``mtu`` section of the boot-time record: the rails whose MTU nobody else keeps and their MTU, set again
at boot and when a driver reload recreates the netdev at its default MTU.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record as br
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu


def _validate_mtu_group(data, what):
    """The rails whose MTU nobody else keeps (no networkd, NetworkManager or netplan owner) and their MTU."""
    br.only_keys(data, what, ("rails", "mtu"))
    value = mtu.validate_mtu(data.get("mtu"), "%s.mtu" % what)
    return {"rails": br.names(data.get("rails"), "%s.rails" % what, br.ifname), "mtu": value}


def _validate_mtu(data):
    return br.grouped("mtu", data, _validate_mtu_group)


def _apply_mtu(ctx, section, only_rails):
    """Each recorded group of rails with its MTU (mtu.apply, the rail_mtu module's code); the rails nobody else
    keeps the MTU of. A driver reload recreates the netdev at its default MTU, so a device run sets its rails."""
    br.apply_rail_groups(ctx, "mtu", section, only_rails, lambda g: g["mtu"],
                         lambda rails, value: mtu.apply(ctx.run, rails, value, ctx.check_mode),
                         (ValueError, mtu.MtuError))


SECTION = br.Section("mtu", "mtu", _validate_mtu,
                     lambda ctx, section, device: _apply_mtu(ctx, section, br.rails_of(device)),
                     order=20, device_run=True)
