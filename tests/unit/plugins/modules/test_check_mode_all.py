# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module in plugins/modules, in check mode, on one drifted simulated HGX node.

Ansible's convention: in check mode ``changed`` says whether a real run would change something, and nothing is
written. Each module file must have a case here (a new module cannot skip it): modules that manage state must say
``changed: true`` on the drifted node, read-only modules ``changed: false``; for all of them the sysroot tree hashes
byte-identical afterwards (gpufabric_sim.runtime.tree_hash: names, modes, contents, symlink targets).

The drifted node is the simulator's HGX H200 tree as it boots: ACS redirect bits set on the path bridges, DCB in PCP
trust without PFC, no rdma_cm groups (ToS 0), the kernel's ARP/rp_filter defaults, no nccl.conf, no iommu=pt, no
boot-time applier, no metrics or reports, no vendor NFS build in the cache.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import importlib
import os
import shutil
import sys

import pytest

import desired_doc
from gpufabric_sim import runtime as sim_runtime
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from gpufabric_sim.emulators import ethtool as ethtool_emu
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
MODULE_DIR = os.path.join(REPO, "plugins", "modules")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "vendor_nfs")
NCCL_LOGS = os.path.join(REPO, "tests", "fixtures", "nccl")
CONF = "proc/sys/net/ipv4/conf"

# writes: the module manages state (a real run on the drifted node changes it); False: read-only.
# xfail: the fix that makes a failing case pass, naming its owner (strict: the integrator sees it flip).
Case = collections.namedtuple("Case", "args writes xfail")


def _case(args, writes, xfail=None):
    return Case(args, writes, xfail)


def _rails(node):
    return [r["netdev"] for r in node["manifest"]["rails"]]


def _vendor_args(node):
    sys.path.insert(0, FIXTURES)
    try:
        import vendor_fixture as vf
    finally:
        sys.path.remove(FIXTURES)
    src_dir = os.path.join(node["root"], "srv")
    os.makedirs(src_dir)
    src, digest = vf.make_source_tarball(src_dir)
    return {"src": src, "sha256": digest, "version": "4.0.35", "kernel_release": node["manifest"]["kernel_release"],
            "cache_dir": os.path.join(node["root"], "var/cache/gpufabric/vendor_nfs"), "builder_create": False}


def _nfs_args(node):
    path = os.path.join(node["root"], "proc/self/mountinfo")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(sim_tree.mountinfo_text([]))
    return {"volumes": [{"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1"}]}


CASES = {
    # state-managing modules: a real run would change the drifted node
    "dcb_qos": _case(lambda n: {"rails": _rails(n)}, True),
    "fabric_capture": _case(lambda n: {"dest": os.path.join(n["root"], "capture")}, True),
    "fabric_metrics": _case(lambda n: {"rails": _rails(n)}, True),
    "fabric_persist": _case(lambda n: {}, True),
    "fabric_report": _case(lambda n: {"nodes": {"ap1": {"drift": [
        {"concern": "dcb", "object": "ens1np0", "key": "pfc", "current": [], "desired": [3]}]}},
        "dest": os.path.join(n["root"], "reports")}, True),
    "fleet_report": _case(lambda n: {"nodes": {"ap1": {"drift": []}}, "dest": os.path.join(n["root"], "reports")},
                          True),
    "kernel_cmdline": _case(lambda n: {"present": ["iommu=pt"]}, True),
    # the node's kernel is not held yet (apt-mark, the simulator's package database)
    "kernel_hold": _case(lambda n: {"kernel_releases": [n["manifest"]["kernel_release"]]}, True),
    "nccl_config": _case(lambda n: {"rails": _rails(n)}, True),
    # the node mounts nothing over NFS (its mountinfo has the base mounts only): the unit and the mount are missing
    "nfs_mounts": _case(_nfs_args, True),
    "pcie_acs": _case(lambda n: {}, True),
    "rail_sysctl": _case(lambda n: {"rails": _rails(n)}, True),
    # the test's own loopback (MTU 65536, no max_mtu): check mode reads it with the real ip and changes nothing
    "rail_mtu": _case(lambda n: {"rails": ["lo"], "mtu": 9000}, True),
    "rdma_cm_tos": _case(lambda n: {"rails": _rails(n)}, True),
    # hgx-h200 boots with DCQCN off on every priority (MLNX_OFED sysfs)
    "roce_ecn": _case(lambda n: {"rails": _rails(n)}, True),
    "vendor_nfs_build": _case(_vendor_args, True),
    # the controller's judge: a real run records the node's runs in the store and writes the report
    "validate_judge": _case(lambda n: {"nodes": {"ap1": None}, "baseline_dir": os.path.join(n["root"], "baselines"),
                                       "dest": os.path.join(n["root"], "reports")}, True),
    # read-only modules: nothing to change, in check mode or not
    "concern_check": _case(lambda n: {"concern": "pcie_link", "options": {"pcie_link": {"gpu_idle_speed": "check"}}},
                           False),
    "fabric_check": _case(lambda n: {"desired": desired_doc.resolve({"inventory_hostname": "ap1"})}, False),
    "fabric_counters": _case(lambda n: {"rails": _rails(n)}, False),
    # moves test data in a private directory it removes, changes no configuration: check mode returns the plan
    "fabric_validate": _case(lambda n: {"tests": ["nccl", "nccl_intra", "perftest", "gds"]}, False),
    "fabric_health": _case(lambda n: {"pcie_link": {"gpu_idle_speed": "ignore", "slot_limited": "drift"},
                                      "gpudirect_rdma": {"mechanism": "any"},
                                      "nccl_log": os.path.join(NCCL_LOGS, "nccl-1rank-h200.log")}, False),
    "gds_verify": _case(lambda n: {"path": "/mnt/data"}, False),
    "gpufabric_facts": _case(lambda n: {}, False),
    "vendor_nfs_proof": _case(lambda n: {"stage": "running", "kernel_release": n["manifest"]["kernel_release"],
                                         "fail_on_problems": False}, False),
}


def module_names():
    return sorted(f[:-3] for f in os.listdir(MODULE_DIR) if f.endswith(".py") and not f.startswith("_"))


def _params():
    out = []
    for name in module_names():
        case = CASES.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case and case.xfail else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def test_every_module_file_has_a_case():
    names = module_names()
    assert len(names) >= 15
    assert sorted(set(names) - set(CASES)) == [], "modules without a check-mode case in CASES"
    assert sorted(set(CASES) - set(names)) == [], "cases for modules that no longer exist"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The drifted node, built once: the tree, the emulators' device state, plain-file rail sysctls."""
    root = str(tmp_path_factory.mktemp("ap-drifted") / "root")
    manifest = sim_tree.build_tree(root, "hgx-h200")
    dcb_emu.init_node(root, manifest["iproute2_version"])
    ethtool_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"], r["driver"])
        ethtool_emu.init_device(root, r["netdev"], r["driver"])
    # the tree links proc/sys/net to the host's: the rails' sysctls become plain files with the kernel defaults
    os.unlink(os.path.join(root, "proc/sys/net"))
    for iface in ["all", "default"] + [r["netdev"] for r in manifest["rails"]]:
        d = os.path.join(root, CONF, iface)
        os.makedirs(d)
        for key, value in (("arp_ignore", 0), ("arp_announce", 0), ("rp_filter", 0)):
            with open(os.path.join(d, key), "w") as f:
                f.write("%d\n" % value)
    os.makedirs(os.path.join(root, "mnt/data"))
    return root, manifest


@pytest.fixture
def node(template, tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    shutil.copytree(template[0], root, symlinks=True)
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    for tool, (mod, func, argv0) in sorted(sim_runtime.WRAPPERS.items()):
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write(sim_runtime.render_wrapper(sys.executable, mod, func, argv0))
        os.chmod(path, 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
    return {"root": root, "manifest": template[1]}


# modules whose `concerns` is the play's recorded statuses passed through (written out, not found on the node)
REPORTERS = ("fabric_metrics",)


@pytest.mark.parametrize("name", _params())
def test_check_mode(name, node, monkeypatch):
    case = CASES.get(name)
    if case is None:
        pytest.fail("plugins/modules/%s.py has no check-mode case in CASES: add one" % name)
    module = importlib.import_module("ansible_collections.gpufabric.node.plugins.modules.%s" % name)
    args = case.args(node)
    before = sim_runtime.tree_hash(node["root"])
    res = run_module(module, args, check_mode=True, diff=True, monkeypatch=monkeypatch)
    after = sim_runtime.tree_hash(node["root"])
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is case.writes, (
        "%s in check mode on the drifted node says changed=%r; a real run %s" % (
            name, res["changed"], "would change it" if case.writes else "changes nothing"))
    assert after == before, "%s wrote below the sysroot in check mode" % name
    # modules that report concern statuses: valid documents, and drift where a real run would change something
    statuses = dict((c, concerns.normalize(c, doc)["status"]) for c, doc in (res.get("concerns") or {}).items())
    if statuses and case.writes and name not in REPORTERS:
        assert concerns.DRIFT in statuses.values(), statuses
