# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_check.evaluate on the simulated drifted HGX node: the concern modules' own answers, in one read-only call."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import shutil
import sys

import pytest

import desired_doc
from gpufabric_sim import runtime as sim_runtime
from modrunner import run_module
from mtu_kernel import Kernel
from test_check_mode_all import template  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as model
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import task as mtu_task
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import registry as S
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import common
from ansible_collections.gpufabric.node.plugins.module_utils.host.task_host import LocalRunner

PKG = "ansible_collections.gpufabric.node.plugins.modules."


@pytest.fixture
def node(template, tmp_path, monkeypatch):  # noqa: F811
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
    # the rails' netdevs for ip link / ibv_devinfo (the tree has no network namespace): at 1500, as they boot
    rails = template[1]["rails"]
    kernel = Kernel(dict((r["netdev"], {}) for r in rails), ports=dict(((r["ibdev"], 1), (r["netdev"], 4096))
                                                                       for r in rails))
    monkeypatch.setattr(mtu_task, "make_runner", lambda module: kernel)
    return {"root": root, "manifest": template[1], "desired": desired_doc.resolve({"inventory_hostname": "ap1"})}


def _check(node, **kw):
    return node_check.evaluate(node["desired"], node["root"], LocalRunner(), **kw)


def _module_params(node):
    """(module, concern names, options) of every concern module as the roles call it on this node."""
    d = node["desired"]
    facts = _check(node)["facts"]
    rails, dcb_rails = S.dcb.roce_qos_rails(d, facts["pairing"])
    present, absent = S.cmdline.iommu_args(d, facts["architecture"])
    return [
        ("kernel_cmdline", ["cmdline"], {"present": present, "absent": absent, "bootloader": d["iommu_bootloader"]}),
        ("dcb_qos", ["dcb"], S.dcb.params(d, dcb_rails)),
        ("rdma_cm_tos", ["rdma_cm"], S.rdma_cm.params(d, rails)),
        ("rail_sysctl", ["sysctl", "routing"],
         S.sysctl.params(d, common.rails(d["rail_network_rails"], facts["pairing"]))),
        ("nccl_config", ["nccl"], S.nccl.params(d, common.rails(d["nccl_rails"], facts["pairing"]))),
        ("fabric_persist", ["persistence"], S.persistence.params(d, nd.evidence_desired)),
        ("pcie_acs", ["acs"], S.acs.params(d)),
        ("roce_ecn", ["ecn"], S.ecn.params(d, dcb_rails)),
        ("rail_mtu", ["mtu"], S.mtu.params(d, common.rails(d["rail_network_rails"], facts["pairing"]))),
        ("nfs_mounts", ["nfs_mounts"], S.nfs_mounts.params(d)),
        ("fabric_health", ["pcie_link", "gpudirect_rdma"], S.pcie_link.params(d)),
    ]


def test_every_concern_of_the_list_has_an_evaluator(monkeypatch):
    assert node_check.missing_evaluators() == []
    assert sorted(node_check.REGISTRY) == sorted(model.NAMES)
    # a concern added to the list without an entry is named
    monkeypatch.setattr(model, "NAMES", model.NAMES + ("ecn_new",))
    assert node_check.missing_evaluators() == ["ecn_new"]
    with pytest.raises(model.ConcernError, match="no evaluator for concern.*ecn_new"):
        node_check.evaluate({}, "/nonexistent", LocalRunner())


def test_every_desired_key_comes_from_the_roles():
    doc = desired_doc.resolve({"inventory_hostname": "ap1"})
    keys = node_check.desired_keys(model.NAMES)
    assert [k for k in keys if k not in doc] == []
    assert "roce_qos_tos" in keys and doc["roce_qos_tos"] == 106


# the drifted node as it boots (see test_check_mode_all): every core concern it manages drifts but routing, which
# is off; no storage volumes; its links and GPUDirect RDMA mechanism are healthy (idle GPUs are not judged); its
# Fabric Manager runs (the NVLink state is not read: no nvidia-smi)
DRIFTED = {"cmdline": model.DRIFT, "acs": model.DRIFT, "dcb": model.DRIFT, "rdma_cm": model.DRIFT,
           "ecn": model.DRIFT, "sysctl": model.DRIFT, "routing": model.NOT_APPLICABLE, "mtu": model.DRIFT,
           "nccl": model.DRIFT, "persistence": model.DRIFT, "nfs_mounts": model.NOT_APPLICABLE,
           "pcie_link": model.OK, "gpudirect_rdma": model.OK, "fabric_manager": model.OK}


def test_drifted_node_read_only(node):
    before = sim_runtime.tree_hash(node["root"])
    res = _check(node)
    assert sim_runtime.tree_hash(node["root"]) == before, "the check wrote below the sysroot"
    assert dict((n, d["status"]) for n, d in res["concerns"].items()) == DRIFTED
    assert res["errors"] == [] and res["facts"]["pairing"]
    assert res["schema"] == node_check.SCHEMA


class CountingRunner(LocalRunner):
    def __init__(self):
        super(CountingRunner, self).__init__()
        self.argvs = []

    def run_command(self, args, environ_update=None, check_rc=False, **kw):
        self.argvs.append([os.path.basename(args[0])] + list(args[1:]))
        return super(CountingRunner, self).run_command(args, environ_update, check_rc, **kw)


def test_one_evaluation_asks_each_read_only_query_once(node):
    """Discovery and the dcb concern read the same DCBX state: one dcb process per query and rail, not two."""
    runner = CountingRunner()
    res = node_check.evaluate(node["desired"], node["root"], runner)
    assert dict((n, d["status"]) for n, d in res["concerns"].items()) == DRIFTED
    shows = [tuple(a) for a in runner.argvs if a[0] in node_check.SNAPSHOT_QUERIES and "show" in a]
    assert shows and len(shows) == len(set(shows)), sorted(shows)
    assert any(a[:3] == ["dcb", "-j", "dcbx"] for a in runner.argvs)


@pytest.mark.parametrize("argv,reused", [
    (["dcb", "-j", "app", "show", "dev", "ens1"], True),
    (["ip", "-d", "-j", "link", "show"], True),
    (["dcb", "-j", "-b", "/tmp/x.batch"], False),          # a batch reads a file that may differ
    (["dcb", "app", "add", "dev", "ens1", "dscp-prio", "26:3"], False),
    (["systemctl", "is-enabled", "x.service"], False),
])
def test_snapshot_runner_reuses_only_read_only_queries(argv, reused):
    calls = []

    class Fake(object):
        def run_command(self, args, environ_update=None, check_rc=False, **kw):
            calls.append(list(args))
            return 0, "answer %d" % len(calls), ""

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return "/usr/sbin/" + name

    r = node_check.SnapshotRunner(Fake())
    first = r.run_command(argv)
    second = r.run_command(argv)
    assert len(calls) == (1 if reused else 2) and (first == second) == reused
    assert r.run_command(argv, environ_update={"LC_ALL": "C"}) and len(calls) == (2 if reused else 3)
    assert r.get_bin_path("dcb") == "/usr/sbin/dcb"


def test_snapshot_runner_keeps_the_runners_failure_for_check_rc():
    class Failing(object):
        def run_command(self, args, environ_update=None, check_rc=False, **kw):
            if check_rc:
                raise RuntimeError("%s failed" % args[0])
            return 1, "", "Attribute not found"

    r = node_check.SnapshotRunner(Failing())
    assert r.run_command(["dcb", "-j", "pfc", "show", "dev", "x"]) == (1, "", "Attribute not found")
    with pytest.raises(RuntimeError, match="dcb failed"):
        r.run_command(["dcb", "-j", "pfc", "show", "dev", "x"], check_rc=True)


def test_same_answers_as_each_module_in_check_mode(node, monkeypatch):
    res = _check(node)
    for name, names, params in _module_params(node):
        out = run_module(importlib.import_module(PKG + name), params, check_mode=True, monkeypatch=monkeypatch)
        assert not out.get("failed"), (name, out.get("msg"))
        for n in names:
            if n == "acs":  # the check merges the ACS kernel argument into acs, as the role does
                own = out["concerns"]["acs"]["items"]
                assert own == res["concerns"]["acs"]["items"][:len(own)]
                continue
            assert model.normalize(n, out["concerns"][n]) == res["concerns"][n], n


def test_after_the_modules_fixed_the_node_every_concern_is_ok(node, monkeypatch):
    """Each module's real run, then the check: ok. rdma_cm_tos needs the simulator's configfs watcher (the kernel's
    side of mkdir in configfs), which a unit test has not: that concern stays in drift."""
    for name, _names, params in _module_params(node):
        if name == "rdma_cm_tos":
            continue
        out = run_module(importlib.import_module(PKG + name), params, monkeypatch=monkeypatch)
        assert not out.get("failed"), (name, out.get("msg"))
    acs = _check(node, concerns=["acs"])["concerns"]["acs"]
    if acs["status"] != model.OK:  # the ACS kernel argument (the role's second kernel_cmdline task)
        arg = [i["desired"] for i in acs["items"] if i.get("object") == "bootloader"]
        run_module(importlib.import_module(PKG + "kernel_cmdline"), {"present": arg}, monkeypatch=monkeypatch)
    res = _check(node)
    bad = dict((n, d["status"]) for n, d in res["concerns"].items()
               if d["status"] not in (model.OK, model.NOT_APPLICABLE))
    assert bad == {"rdma_cm": model.DRIFT}


def test_a_planner_that_raises_fails_its_own_concern_only(node, monkeypatch):
    def boom(ctx):
        raise RuntimeError("disk on fire")
    monkeypatch.setitem(node_check.REGISTRY, "nccl", node_check.entry(boom, nd.KEYS["nccl"]))
    res = _check(node)
    assert res["concerns"]["nccl"]["status"] == model.ERROR
    assert "RuntimeError: disk on fire" in res["concerns"]["nccl"]["reason"]
    others = dict((n, d["status"]) for n, d in res["concerns"].items() if n != "nccl")
    assert others == dict((n, s) for n, s in DRIFTED.items() if n != "nccl")


@pytest.mark.parametrize("over,what", [
    ({"roce_qos_tos": 104}, "nccl_ib_tc"),
    ({"roce_qos_trust": "pcp", "roce_qos_dscp_map": [{"dscp": 26, "priority": 3}]}, "roce_qos_trust"),
])
def test_contradicting_settings_fail_every_concern_before_anything_is_read(node, over, what):
    node["desired"].update(over)
    res = _check(node)
    assert set(d["status"] for d in res["concerns"].values()) == {model.ERROR}
    assert all(what in d["reason"] for d in res["concerns"].values())
    assert res["facts"] == {}


def test_bad_desired_documents(node):
    d = dict(node["desired"])
    del d["nccl_ib_tc"]
    with pytest.raises(nd.DesiredError, match="lacks nccl_ib_tc"):
        node_check.evaluate(d, node["root"], LocalRunner())
    with pytest.raises(nd.DesiredError, match="mapping"):
        node_check.evaluate([], node["root"], LocalRunner())
    with pytest.raises(model.ConcernError, match="unknown concern"):
        _check(node, concerns=["dcb", "nope"])


def test_a_module_failure_is_that_concerns_error(node):
    node["desired"]["nccl_conf_path"] = "relative/nccl.conf"
    node["desired"]["iommu_mode"] = "sideways"
    res = _check(node)
    assert res["concerns"]["nccl"]["status"] == model.ERROR and "path" in res["concerns"]["nccl"]["reason"]
    assert res["concerns"]["cmdline"]["status"] == model.ERROR
    assert "iommu_mode=sideways is not supported" in res["concerns"]["cmdline"]["reason"]
    assert res["concerns"]["dcb"]["status"] == model.DRIFT


@pytest.mark.parametrize("host_vars,key,value", [
    ({}, "roce_qos_tos", 106),
    ({"roce_qos_dscp": 24, "roce_qos_ecn": False}, "roce_qos_tos", 96),  # a default templated with the host's vars
    ({"roce_qos_tos": 104}, "roce_qos_tos", 104),  # the host's value wins over the default
    ({"nccl_rails": ["ens1np0"]}, "nccl_rails", ["ens1np0"]),
    ({"iommu_mode": "translated"}, "iommu_mode", "translated"),
    ({}, "__iommu_mode_args", None),  # the role's vars table, read from roles/iommu/vars/main.yml
])
def test_the_action_plugin_resolves_the_roles_defaults_with_the_hosts_variables(host_vars, key, value):
    doc = desired_doc.resolve(dict(host_vars, inventory_hostname="ap1"))
    if value is None:
        assert doc[key]["x86_64"]["passthrough"]["present"] == ["iommu=pt"]
    else:
        assert doc[key] == value
    assert "gds_node_name" not in doc  # only the roles of the concerns checked (the core ones)
