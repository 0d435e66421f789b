# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry of concern specs: one line per concern of ``concern_model.CONCERNS``, in its order.

Each concern's spec (``concerns/<name>/spec.py``) says what its role variables mean and how the one-call check
evaluates it:

- ``NAME``; ``KEYS``: the role variables (and role vars tables) its evaluation reads;
- ``ROLE_VARS``: the constant tables of its role's ``vars/main.yml`` it reads (optional);
- ``CONFLICT_KEYS`` and ``conflict_vars(d)``: the settings it contributes to the contradiction check that runs
  before any role (optional);
- ``evaluate(ctx)``: its status (``{name: status}``) from its module body in check mode, with the options its
  role derives (``ctx`` is ``check/node_check.Context``); concerns that one module run gives share one function.

The hubs (``check/node_check.py``, ``check/node_desired.py``) iterate ``SPECS`` and name no concern. A concern's
boot-time record section is its ``boot.py`` (``concerns/sections.py``). ``tests/unit/plugins/test_concern_specs.py``
holds this list to ``concern_model.CONCERNS``.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import spec as acs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.cmdline import spec as cmdline
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import spec as dcb
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import spec as ecn
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.fabric_manager import spec as fabric_manager
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import spec as gds
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import spec as gpudirect_rdma
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import spec as mtu
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import spec as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import spec as nfs_mounts
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.pcie_link import spec as pcie_link
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import spec as performance
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import spec as persistence
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.rdma_cm import spec as rdma_cm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import spec as routing
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import spec as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import spec as vendor_client

SPECS = (cmdline, acs, dcb, rdma_cm, ecn, sysctl, routing, mtu, nccl, persistence, nfs_mounts, pcie_link,
         gpudirect_rdma, fabric_manager, gds, vendor_client, performance)
BY_NAME = dict((s.NAME, s) for s in SPECS)
