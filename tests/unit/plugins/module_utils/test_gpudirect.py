# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which GPUDirect RDMA mechanism a node's RDMA NICs can use (module_utils/discovery/gpudirect.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from gpufabric_sim.tree import build_tree

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gpudirect_rdma import check as GC
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import gpudirect as G
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _topo(name, **over):
    with open(os.path.join(REPO, "tests", "lab", "topologies", name + ".yml")) as f:
        t = yaml.safe_load(f)
    t.update(over)
    return t


OPEN, PROP = {"flavour": "open", "version": "550.127.05"}, {"flavour": "proprietary", "version": "550.127.05"}

CASES = [
    # id, topology overrides, desired, mechanism, usable, status, reason fragment
    ("open_driver_new_kernel", {"nvidia_driver": OPEN}, None, "dmabuf", ["dmabuf"], "ok", "DMA-BUF"),
    ("open_and_peermem", {"nvidia_driver": OPEN, "gpudirect": {"peermem": "loaded"}}, None, "dmabuf",
     ["dmabuf", "nvidia_peermem"], "ok", "usable: dmabuf, nvidia_peermem"),
    ("proprietary_peermem_loaded", {"nvidia_driver": PROP, "gpudirect": {"peermem": "loaded"}}, None,
     "nvidia_peermem", ["nvidia_peermem"], "ok", "nvidia-peermem"),
    ("proprietary_peermem_installed", {"nvidia_driver": PROP, "gpudirect": {"peermem": "installed"}}, None,
     "none", [], "drift", "not loaded (installed)"),
    ("old_kernel", {"nvidia_driver": OPEN, "kernel_release": "5.4.0-150-generic"}, None, "none", [], "drift",
     "kernel 5.4.0-150-generic is older than 5.12"),
    ("old_rdma_core", {"nvidia_driver": OPEN, "gpudirect": {"rdma_core": 28}}, None, "none", [], "drift",
     "rdma-core 28 has no ibv_reg_dmabuf_mr"),
    ("no_rdma_core", {"nvidia_driver": OPEN, "gpudirect": {"rdma_core": None}}, None, "none", [], "drift",
     "no libibverbs"),
    # MLNX_OFED / DOCA-OFED name libibverbs after their package version (issue 21 item 12)
    ("mlnx_ofed_23_10", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.2307mlnx47"}},
     None, "dmabuf", ["dmabuf"], "ok", "DMA-BUF"),
    ("mlnx_ofed_5_7", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.56mlnx40"}},
     None, "dmabuf", ["dmabuf"], "ok", "DMA-BUF"),
    # 54mlnx1: a build counter, not rdma-core 54 (the fork is of rdma-core 35): the name cannot tell
    ("mlnx_ofed_5_4", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.54mlnx1"}},
     None, "unknown", [], "not_checked", "cannot tell the rdma-core release of /usr/lib/x86_64-linux-gnu/"
     "libibverbs.so.1.14.54mlnx1 from its name (check that it exports ibv_reg_dmabuf_mr: nm -D"),
    ("mlnx_ofed_old", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.1.2007mlnx28"}},
     None, "none", [], "drift", "rdma-core 28 has no ibv_reg_dmabuf_mr"),
    ("unknown_name", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.custom"}},
     None, "unknown", [], "not_checked", "cannot tell the rdma-core release of /usr/lib/x86_64-linux-gnu/"
     "libibverbs.so.1.14.custom from its name (check that it exports ibv_reg_dmabuf_mr: nm -D"),
    ("unknown_name_peermem", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.custom",
                                                                   "peermem": "loaded"}},
     None, "nvidia_peermem", ["nvidia_peermem"], "ok", "nvidia-peermem"),
    ("unknown_name_dmabuf_wanted", {"nvidia_driver": OPEN, "gpudirect": {"libibverbs": "libibverbs.so.1.14.custom",
                                                                         "peermem": "loaded"}},
     {"mechanism": "dmabuf"}, "nvidia_peermem", ["nvidia_peermem"], "not_checked", "cannot tell whether DMA-BUF"),
    ("unknown_name_old_kernel", {"nvidia_driver": OPEN, "kernel_release": "5.4.0-150-generic",
                                 "gpudirect": {"libibverbs": "libibverbs.so.1.14.custom"}},
     None, "none", [], "drift", "kernel 5.4.0-150-generic is older than 5.12"),
    ("old_driver", {"nvidia_driver": {"flavour": "open", "version": "510.47.03"}}, None, "none", [], "drift",
     "older than 515"),
    ("peermem_wanted", {"nvidia_driver": OPEN}, {"mechanism": "nvidia_peermem"}, "dmabuf", ["dmabuf"], "drift",
     "nvidia_peermem is not available"),
    ("no_driver", {"nvidia_driver": "none"}, None, "none", [], "drift", "not loaded"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mechanism_on_simulated_nodes(tmp_path, case):
    _id, over, desired, mech, usable, status, fragment = case
    root = str(tmp_path / "root")
    build_tree(root, _topo("hgx-h200", **over), 1)
    sr = Sysroot(root)
    facts = T.discover(sr)
    g = facts["gpudirect_rdma"]
    assert (g["mechanism"], g["usable"]) == (mech, usable)
    doc = GC.check(sr, desired, facts)
    assert doc["status"] == status
    assert fragment in doc["reason"]
    if status == "drift":
        assert doc["items"][0]["key"] == "mechanism"
        if desired is None:
            assert any("no GPUDirect RDMA mechanism" in w for w in T.warnings(facts))
    else:
        assert not any("no GPUDirect RDMA mechanism" in w for w in T.warnings(facts))


@pytest.mark.parametrize("names,expect", [
    (["libibverbs.so.1.14.50.0"], (50, "upstream")),
    (["libibverbs.so.1.14.44.0", "libibverbs.so.1.14.50.0"], (50, "upstream")),
    (["libibverbs.so.1.14.2307mlnx47"], (47, "mlnx")),
    (["libibverbs.so.1.14.2410mlnx54"], (54, "mlnx")),
    # MLNX_OFED 5.x: the number after "mlnx" is the upstream release from 5.5 on, a build counter before
    (["libibverbs.so.1.14.56mlnx40"], (40, "mlnx")),
    (["libibverbs.so.1.14.56mlnx40.0"], (40, "mlnx")),
    (["libibverbs.so.1.14.58mlnx43"], (43, "mlnx")),
    (["libibverbs.so.1.14.54mlnx1"], (None, "mlnx")),
    (["libibverbs.so.1.14.55mlnx28"], (28, "mlnx")),
    (["libibverbs.so.1.14.55mlnx27"], (None, "mlnx")),
    # what MLNX_OFED really installs: the upstream form of the release it is based on (58mlnx43's library)
    (["libibverbs.so.1.14.43.0"], (43, "upstream")),
    (["libibverbs.so.1.14.custom", "libibverbs.so.1.14.2307mlnx47"], (47, "mlnx")),
    (["libibverbs.so.1.14.custom"], (None, "unknown")),
    (["libibverbs.so.1", "libibverbs.so"], None),
])
def test_release_from_the_file_name(tmp_path, names, expect):
    d = tmp_path / "usr" / "lib64"
    d.mkdir(parents=True)
    for n in names:
        (d / n).write_text("")
    libs = G.libibverbs(Sysroot(str(tmp_path)))
    assert (libs[0][:2] if libs else None) == expect


def test_rhel_layout_reads_lib64_and_no_rails_is_not_applicable(tmp_path):
    root = str(tmp_path / "root")
    build_tree(root, _topo("pcie-4gpu-crossnuma"), 1)
    sr = Sysroot(root)
    assert G.rdma_core_release(sr) == (48, "/usr/lib64/libibverbs.so.1.14.48.0")
    facts = T.discover(sr)
    assert GC.check(sr, None, facts)["status"] == "ok"
    facts["rails"] = []
    facts["gpudirect_rdma"] = G.facts(sr, facts)
    assert GC.check(sr, None, facts)["status"] == "not_applicable"


def test_real_h200_host(tmp_path):
    """The device host (tests/fixtures/pcie/gdr-h200.txt): open module 580, kernel 6.18, rdma-core 50, no
    nvidia-peermem, no RDMA NIC: DMA-BUF would serve, and with no rail the concern does not apply."""
    text = open(os.path.join(REPO, "tests", "fixtures", "pcie", "gdr-h200.txt")).read()
    version = text.split("-- version\n", 1)[1].splitlines()[0]
    release = text.splitlines()[0].split(": ", 1)[1]
    lib = [w for w in text.split() if w.startswith("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.")][0]
    assert "ls: cannot access '/sys/module/nvidia_peermem'" in text
    root = tmp_path / "h200"
    for path, content in (("proc/driver/nvidia/version", version + "\n"), ("proc/sys/kernel/osrelease", release),
                          (lib.lstrip("/"), ""), ("sys/module/nvidia/version", "580.159.04\n")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    sr = Sysroot(str(root))
    node = {"gpu_driver": T.gpu_driver_facts(sr), "kernel_release": release, "rails": [],
            "gpus": [{"bdf": "0000:00:06.0"}]}
    g = G.facts(sr, node)
    assert g["dmabuf"]["rdma_core"] == 50 and g["dmabuf"]["driver_flavour"] == "open"
    assert (g["mechanism"], g["peermem"]["loaded"], g["warning"]) == ("dmabuf", False, None)
    assert G.status_of(g, node)["status"] == "not_applicable"


@pytest.mark.parametrize("desired", [{"mechanism": "gdrcopy"}, {"other": 1}])
def test_bad_desired(desired):
    with pytest.raises(ValueError):
        G.normalize_desired(desired)
