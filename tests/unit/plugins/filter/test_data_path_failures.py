# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify.yml's failure list, templated from the playbook's own text: a failing proof fails the node (issue 21 item
13: verify printed "GPUDirect Storage fails with EIO" for a translated IOMMU where GDS is wanted and exited 0)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.node.plugins.filter.concerns import data_path_failures

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
EIO = "IOMMU is translated: GPUDirect Storage fails with EIO and peer-to-peer DMA goes through the IOMMU"
LINK = "GPU 0000:39:00.0 trained at x8 of x16"

# A fresh interpreter with Ansible's collection finder installed before anything imports ansible_collections, as
# ansible-playbook does, so that the playbook's FQCN filter resolves; it templates verify.yml's own expression.
TEMPLATE = """
import json, os, sys
import yaml
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[os.path.join(sys.argv[1], ".build")])._install()
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
try:
    from ansible.template import trust_as_template
except ImportError:
    def trust_as_template(value):
        return value
with open(os.path.join(sys.argv[1], "playbooks", "verify.yml")) as f:
    plays = yaml.safe_load(f)
tasks = [t for p in plays for t in p.get("tasks") or [] if "__verify_failures" in (t.get("vars") or {})]
assert len(tasks) == 1 and tasks[0]["ansible.builtin.assert"]["that"] == "__verify_failures | length == 0"
expr = trust_as_template(tasks[0]["vars"]["__verify_failures"])
out = [list(Templar(loader=DataLoader(), variables=v).template(expr)) for v in json.load(sys.stdin)]
print(json.dumps(out))
"""


def _failures(cases):
    variables = [dict({"__verify_health": {"concerns": {"pcie_link": {"status": link, "reason": LINK}}},
                       "ansible_facts": {"gpufabric": facts}}, **extra) for facts, link, extra in cases]
    p = subprocess.run([sys.executable, "-c", TEMPLATE, REPO], input=json.dumps(variables), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


TRANSLATED_GDS = {"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": True}}


CASES = [
    (TRANSLATED_GDS, "ok", {}, [EIO]),                                   # nvidia-fs loaded: GDS is wanted
    (TRANSLATED_GDS, "ok", {"gpufabric_gds_wanted": "false"}, []),       # the play says it is not
    ({"iommu": {"mode": "translated"}, "nvidia_fs": {"loaded": False}}, "ok", {"gpufabric_gds_wanted": "true"},
     [EIO, "nvidia-fs is not loaded although GPUDirect Storage is wanted"]),
    ({"iommu": {"mode": "identity"}, "nvidia_fs": {"loaded": True}}, "ok", {}, []),
    (TRANSLATED_GDS, "drift", {}, [LINK, EIO]),
    ({"iommu": {"mode": "identity"}}, "drift", {}, [LINK]),
]


def test_verify_fails_a_node_whose_proof_fails():
    """All cases in one interpreter (one start-up); each case's list is what the assert joins into its message."""
    assert _failures([c[:3] for c in CASES]) == [c[3] for c in CASES]


def test_the_filter_refuses_what_is_not_the_facts():
    with pytest.raises(AnsibleFilterError, match="gpufabric facts"):
        data_path_failures(["not", "facts"])
