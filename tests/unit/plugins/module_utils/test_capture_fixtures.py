# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every capture of a real node under tests/fixtures/captures replays through discovery to its live facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import platform

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.report import capture as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fixtures", "captures"))
TARBALLS = sorted(glob.glob(os.path.join(CAPTURES, "*.tar.gz")))


def test_every_capture_has_its_facts():
    for tb in TARBALLS:
        assert os.path.isfile(tb[:-len(".tar.gz")] + ".facts.json"), tb


@pytest.mark.skipif(not TARBALLS, reason="no capture in tests/fixtures/captures")
@pytest.mark.parametrize("tarball", TARBALLS, ids=[os.path.basename(t) for t in TARBALLS])
def test_capture_replays_to_the_live_facts(tmp_path, tarball):
    with open(tarball[:-len(".tar.gz")] + ".facts.json") as f:
        live = json.load(f)
    root = C.unpack(tarball, str(tmp_path))
    with open(os.path.join(root, C.MANIFEST)) as f:
        manifest = json.load(f)
    assert manifest["format"] == C.FORMAT
    replayed = json.loads(json.dumps(T.discover(Sysroot(root), manifest["gather_subset"])))
    if manifest["architecture"] != platform.machine():      # the one fact that is not read from the sysroot
        replayed["architecture"] = manifest["architecture"]
    # facts added to discovery after the capture was taken (its tarball lacks the files they read: libibverbs,
    # modules.dep); a capture taken now records those reads too
    for key in ("pcie_links", "gpudirect_rdma"):
        if key not in live:
            replayed.pop(key, None)
    # the rails' live MTU (issue 21) came after the capture too
    if not any("mtu" in r for r in live.get("rails") or []):
        for rail in replayed.get("rails") or []:
            rail.pop("mtu", None)
    # the qos subset (ECN/DCBX of the rails, read with commands, not from the sysroot) came after the capture too
    if "qos" not in live.get("gather_subset", []):
        replayed["gather_subset"] = [s for s in replayed.get("gather_subset", []) if s != "qos"]
    assert replayed == live
