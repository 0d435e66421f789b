# -*- coding: utf-8 -*-
"""Testinfra checks of a converged simulated node: every concern read back from the node itself.

The nodes are reached through the fleet inventory (SSH on loopback); their kernel interfaces live below
$GPUFABRIC_SYSROOT and their tools (dcb, ethtool) are the emulators on the login PATH.
"""
from __future__ import absolute_import, division, print_function

import json
import os

__metaclass__ = type


def _root(host):
    return host.check_output("printenv GPUFABRIC_SYSROOT")


def _facts(host):
    # the fleet's interpreter is the nodes' Python (no Ansible, gpufabric_sim.runtime.make_node_python); the
    # collection's module_utils are plain Python, exposed under the repository's .build
    py = host.ansible.get_variables()["ansible_python_interpreter"]
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    build = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or repo, ".build")
    out = host.check_output(
        "%s -c 'import json,sys; sys.path.insert(0, \"%s\"); "
        "from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology; "
        "from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot; "
        "print(json.dumps(topology.discover(Sysroot())))'" % (py, build))
    return json.loads(out)


def _rails(host):
    return sorted(set(p["netdev"] for p in _facts(host)["pairing"]))


def test_dcb_on_every_rail(host):
    for rail in _rails(host):
        app = json.loads(host.check_output("dcb -j app show dev %s" % rail))
        prio = dict((e[0], e[1]) for e in app["dscp_prio"])
        assert prio.get(26) == 3, rail
        pfc = json.loads(host.check_output("dcb -j pfc show dev %s" % rail))
        assert [i for i, on in enumerate(pfc["prio_pfc"]) if on] == [3], rail


def test_rdma_cm_tos(host):
    root = _root(host)
    facts = _facts(host)
    for p in facts["pairing"]:
        tos = host.file("%s/sys/kernel/config/rdma_cm/%s/ports/%s/default_roce_tos" % (root, p["ibdev"], p["port"]))
        assert tos.content_string.strip() == "106", p["ibdev"]


def test_rail_sysctls(host):
    for rail in _rails(host) + ["all", "default"]:
        assert host.check_output("sysctl -n net.ipv4.conf.%s.arp_ignore" % rail) == "1"
        assert host.check_output("sysctl -n net.ipv4.conf.%s.arp_announce" % rail) == "2"
        assert host.check_output("sysctl -n net.ipv4.conf.%s.rp_filter" % rail) == "2"
    conf = host.file(_root(host) + "/etc/sysctl.d/90-gpufabric-rails.conf")
    assert conf.exists and "arp_ignore" in conf.content_string


def test_nccl_conf(host):
    conf = host.file(_root(host) + "/etc/nccl.conf").content_string
    assert "NCCL_IB_TC=106" in conf
    assert "NCCL_IB_GID_INDEX=3" in conf
    assert "NCCL_IB_HCA==mlx5_0:1" in conf


def test_kernel_cmdline_next_boot(host):
    root = _root(host)
    osr = host.file(root + "/etc/os-release").content_string
    if "ID_LIKE" in osr and "rhel" in osr:
        args = host.check_output("grubby --info=DEFAULT")
    else:
        args = host.file(root + "/boot/grub/grub.cfg").content_string
    assert "iommu=pt" in args


def test_acs_clear_on_every_path_bridge(host):
    bridges = [b for b in _facts(host)["path_bridges"] if b["acs"]["present"]]
    assert bridges
    for b in bridges:
        # ReqRedir | CmpltRedir | EgressCtrl
        assert b["acs"]["ctrl"] & 0x2c == 0, (b["bdf"], hex(b["acs"]["ctrl"]))


def test_boot_time_applier_installed(host):
    root = _root(host)
    assert host.file(root + "/etc/systemd/system/gpufabric-apply.service").exists
    assert host.file(root + "/usr/local/sbin/gpufabric-apply").exists
    rules = host.check_output("cat %s/etc/udev/rules.d/*gpufabric*.rules" % root)
    assert 'SUBSYSTEM=="infiniband"' in rules and "gpufabric-apply@" in rules
    state = json.loads(host.file(root + "/etc/gpufabric/state.json").content_string)
    assert state["dcb"]["rails"] and state["rdma_cm"]["tos"] == 106
