# -*- coding: utf-8 -*-
"""Per-node inputs of the fleet report built from the two shipped simulated topologies (shared by its tests)."""
from __future__ import absolute_import, division, print_function

import copy

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as cm
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree

__metaclass__ = type

DRIFT = [{"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]},
         {"concern": "rdma_cm", "object": "mlx5_0/1", "key": "default_roce_tos", "current": 0, "desired": 106}]


def discover_shipped(tmp_path_factory):
    """gpufabric facts of the two shipped simulated topologies, discovered from built trees."""
    out = {}
    for i, name in enumerate(("hgx-h200", "pcie-4gpu-crossnuma"), 1):
        root = str(tmp_path_factory.mktemp(name))
        tree.build_tree(root, sim_topology.load(name), i)
        out[name] = topology.discover(Sysroot(root), ["all"])
    return out


def all_ok(**over):
    """gpufabric_concerns with every core concern ok, ``over`` replacing some."""
    out = dict((n, cm.status(cm.OK)) for n in cm.CORE)
    out.update(over)
    return out


def drifting(items):
    """The status documents of a check run that found ``items``."""
    return dict((n, cm.from_items(n, items, True)) for n in set(i["concern"] for i in items))


def identity(facts):
    """The facts with the IOMMU in identity mode (the simulated HGX node translates)."""
    f = copy.deepcopy(facts)
    f["iommu"] = dict(f.get("iommu") or {}, mode="identity")
    return f


def nodes_of(facts, **over):
    """hgx: every concern ok, IOMMU identity, GDS works (verdict ok); pcie: two concerns drift, cross-NUMA pairs,
    translated IOMMU, GDS failing (attention)."""
    nodes = {"hgx": {"facts": identity(facts["hgx-h200"]), "concerns": all_ok(),
                     "gds": {"ok": True, "reasons": []}},
             "pcie": {"facts": facts["pcie-4gpu-crossnuma"], "concerns": all_ok(**drifting(DRIFT)),
                      "gds": {"ok": False, "reasons": ["IOMMU in translated mode: transfers fail with EIO"]}}}
    for k, v in over.items():
        nodes[k] = v
    return nodes
