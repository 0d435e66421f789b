# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sections of the boot-time record (``/etc/gpufabric/state.json``), one per concern that keeps runtime-only
settings: each defined in its concern's package (``concerns/<name>/boot.py``, a ``boot_record.Section``).

The store (``concerns/state.py``) validates the file by this list, and the boot-time applier
(``boot/applier.py``) applies it by this list; neither names a concern. A concern that gains a boot-time section
adds its line here. The order is the file's (the order the store lists known sections in); the applier applies in
each section's ``order``.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import boot as acs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import boot as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import boot as ecn
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import boot as gds
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import boot as mtu
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import boot as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import boot as routing

SECTIONS = (dcb.SECTION, rdma_cm.SECTION, acs.SECTION, gds.SECTION, routing.SECTION, mtu.SECTION, ecn.SECTION)
KEYS = tuple(s.key for s in SECTIONS)
BY_KEY = dict((s.key, s) for s in SECTIONS)


def in_apply_order(device_run=False):
    """The sections as the applier applies them: every one at boot, the ``device_run`` ones for a device."""
    return sorted((s for s in SECTIONS if s.device_run or not device_run), key=lambda s: s.order)
