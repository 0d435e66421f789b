# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufabric_facts through main() with patched module arguments, on simulated hosts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible.module_utils.facts.system.platform import PlatformFactCollector
from ansible.module_utils.testing import patch_module_args

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.modules import gpufabric_facts


def run(monkeypatch, root, args):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            gpufabric_facts.main()
    return exc.value.code


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Build each topology once per module; the module only reads."""
    built = {}

    def get(name):
        if name not in built:
            root = str(tmp_path_factory.mktemp(name) / "root")
            build_tree(root, name)
            built[name] = root
        return built[name]
    return get


@pytest.fixture
def capture(capsys):
    def read():
        return json.loads(capsys.readouterr().out)
    return read


CASES = [
    # (id, topology, args, expected keys, expected warning fragments)
    ("default all", "hgx-h200", {}, {"gpus", "rails", "pairing", "iommu", "gpu_driver", "nvidia_fs"},
     ["translated"]),
    ("check mode", "hgx-h200", {"_ansible_check_mode": True}, {"gpus", "pairing"}, ["translated"]),
    ("rails only", "hgx-h200", {"gather_subset": ["rails"]}, {"rails"}, []),
    ("cross numa", "pcie-4gpu-crossnuma", {"gather_subset": ["pci"]}, {"pairing", "matrix", "pcie_links"},
     ["across NUMA", "across NUMA"]),
    ("downtrained link", "pcie-4gpu-downtrained", {"gather_subset": ["pci"]}, {"pairing", "pcie_links"},
     ["across NUMA", "across NUMA", "trained at x8 of x16"]),
    ("all but pci", "pcie-4gpu-crossnuma", {"gather_subset": ["all", "!pci"]}, {"rails", "iommu"}, ["translated"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_main(trees, monkeypatch, capture, case):
    _name, topo, args, keys, warn_parts = case
    root = trees(topo)
    emitted = []
    real_warn = gpufabric_facts.AnsibleModule.warn

    def warn(self, msg, *a, **kw):
        emitted.append(msg)
        return real_warn(self, msg, *a, **kw)

    monkeypatch.setattr(gpufabric_facts.AnsibleModule, "warn", warn)
    assert run(monkeypatch, root, args) == 0
    out = capture()
    assert out["changed"] is False
    facts = out["ansible_facts"]["gpufabric"]
    assert keys <= set(facts)
    if "pci" not in (args.get("gather_subset") or ["all"]) and args.get("gather_subset"):
        assert "pairing" not in facts
    assert len(out["warnings_found"]) == len(warn_parts)
    for part, w in zip(sorted(warn_parts), sorted(out["warnings_found"])):
        assert part in w
    # every warning found is also raised as an Ansible warning (recorded at the call: ansible-core keeps the
    # emitted warnings process-wide and drops repeats, so the result's "warnings" cannot show them reliably)
    assert set(out["warnings_found"]) <= set(emitted)


def test_pairing_through_module(trees, monkeypatch, capture):
    root = trees("hgx-h200")
    assert run(monkeypatch, root, {"gather_subset": ["pci", "rails"]}) == 0
    facts = capture()["ansible_facts"]["gpufabric"]
    assert [(p["gpu_index"], p["ibdev"], p["relation"]) for p in facts["pairing"]] == \
        [(i, "mlx5_%d" % i, "PIX") for i in range(8)]


def test_bad_subset_fails(trees, monkeypatch, capture):
    root = trees("hgx-h200")
    assert run(monkeypatch, root, {"gather_subset": ["gpus"]}) == 1
    out = capture()
    assert out["failed"] is True and "unknown gather_subset" in out["msg"]


def test_empty_host(tmp_path, monkeypatch, capture):
    assert run(monkeypatch, str(tmp_path), {}) == 0
    facts = capture()["ansible_facts"]["gpufabric"]
    assert facts["gpus"] == [] and facts["iommu"]["mode"] == "off" and facts["gpu_driver"]["flavour"] == "none"


@pytest.mark.parametrize("subset", [["rails"], ["pci", "rails"], ["all"]])
def test_architecture_always_reported(trees, monkeypatch, capture, subset):
    # the iommu role takes the architecture from here instead of a setup call: same value as setup's
    root = trees("hgx-h200")
    assert run(monkeypatch, root, {"gather_subset": subset}) == 0
    facts = capture()["ansible_facts"]["gpufabric"]
    setup_facts = PlatformFactCollector().collect()
    assert facts["architecture"] == setup_facts["architecture"]
