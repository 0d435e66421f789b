# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_persist in-process on a simulated node tree, with the simulator's systemctl/udevadm/dcb as commands."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

import pytest

from gpufabric_sim import bootsim, udev
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from gpufabric_sim.emulators import dcb as dcb_emu
from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist
from ansible_collections.gpufabric.node.plugins.modules import fabric_persist

LAB = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab"))
WRAPPER = """#!%s
import sys
sys.path.insert(0, %r)
from %s import %s
sys.exit(%s())
"""
LIB = "/usr/local/lib/gpufabric/ansible_collections/gpufabric/node/plugins/module_utils"


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    dcb_emu.init_node(root, manifest["iproute2_version"])
    for r in manifest["rails"]:
        dcb_emu.init_device(root, r["netdev"])
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    for name, mod, fn in (("systemctl", "gpufabric_sim.services", "systemctl_main"),
                          ("udevadm", "gpufabric_sim.udev", "udevadm_main"),
                          ("dcb", "gpufabric_sim.emulators.dcb", "main")):
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            f.write(WRAPPER % (sys.executable, LAB, mod, fn, fn))
        os.chmod(path, 0o755)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ["PATH"])
    return root, manifest, bindir


def actions(root):
    try:
        with open(os.path.join(root, "var/lib/gpufabric-sim/actions.log")) as f:
            return f.read().splitlines()
    except IOError:
        return []


def test_install_then_idempotent(node, monkeypatch):
    root, _m, bindir = node
    res = run_module(fabric_persist, {}, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] is True
    assert {"boot.applier", "concerns.state", "concerns.dcb.manage", "concerns.rdma_cm.manage", "concerns.acs.manage",
            "concerns.routing.manage", "host.sysroot", "discovery.topology", "concern_model"} <= set(res["module_utils"])
    assert res["commands"] == ["systemctl daemon-reload", "systemctl enable gpufabric-apply.service",
                               "udevadm control --reload"]
    assert actions(root) == ["systemctl daemon-reload",
                             "systemctl enable gpufabric-apply.service (multi-user.target.wants)",
                             "udevadm control --reload"]
    # the applier copy is byte-identical to the collection's module_utils
    here = os.path.join(os.path.dirname(fabric_persist.__file__), "..", "module_utils")
    for name in res["module_utils"]:
        rel = persist.module_path(name)
        with open(os.path.join(here, rel)) as a, open(os.path.join(root, LIB.lstrip("/"), rel)) as b:
            assert a.read() == b.read(), name
    assert os.path.exists(os.path.join(root, "usr/local/lib/gpufabric/ansible_collections/__init__.py"))
    unit = bootsim.read_unit(os.path.join(root, "etc/systemd/system/gpufabric-apply.service"))
    assert bootsim.unit_value(unit, "Service", "Type") == "oneshot"
    assert bootsim.unit_value(unit, "Service", "RemainAfterExit") == "yes"
    assert "kubelet.service" in bootsim.unit_value(unit, "Unit", "Before")
    assert bootsim.unit_value(unit, "Install", "WantedBy") == "multi-user.target"
    assert os.stat(os.path.join(root, "usr/local/sbin/gpufabric-apply")).st_mode & 0o777 == 0o755
    assert any(d["after_header"] == "/etc/udev/rules.d/90-gpufabric-rdma.rules" for d in res["diff"])
    # the udev rule asks systemd for a per-device run of the event's device
    cmds = udev.udev_commands(root, udev.infiniband_event(root, "mlx5_3", "add"))
    assert cmds == [[os.path.join(bindir, "systemctl"), "--no-block", "restart", "gpufabric-apply@mlx5_3.service"]]
    again = run_module(fabric_persist, {}, diff=True, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["commands"] == [] and again["diff"] == []
    assert all(f["action"] == "unchanged" for f in again["files"])


def test_check_mode_writes_nothing(node, monkeypatch):
    root, _m, _b = node
    res = run_module(fabric_persist, {}, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] is True and "systemctl enable gpufabric-apply.service" in res["commands"]
    assert all(f["action"].startswith("would be ") for f in res["files"])
    assert not os.path.exists(os.path.join(root, "usr/local/sbin/gpufabric-apply"))
    assert not os.path.exists(os.path.join(root, "etc/systemd/system/gpufabric-apply.service"))
    assert actions(root) == []


def test_stale_module_utils_removed_and_absent(node, monkeypatch):
    root, _m, _b = node
    run_module(fabric_persist, {}, monkeypatch=monkeypatch)
    stale = os.path.join(root, LIB.lstrip("/"), "old_concern.py")
    with open(stale, "w") as f:
        f.write("")
    res = run_module(fabric_persist, {}, monkeypatch=monkeypatch)
    assert res["changed"] is True and not os.path.exists(stale)
    assert [f["action"] for f in res["files"] if f["path"].endswith("old_concern.py")] == ["removed"]
    gone = run_module(fabric_persist, {"state": "absent"}, monkeypatch=monkeypatch)
    assert gone["changed"] is True
    assert "systemctl disable gpufabric-apply.service" in gone["commands"]
    for p in ("usr/local/sbin/gpufabric-apply", "etc/systemd/system/gpufabric-apply.service",
              "etc/systemd/system/gpufabric-apply@.service", "etc/udev/rules.d/90-gpufabric-rdma.rules",
              LIB.lstrip("/") + "/applier.py"):
        assert not os.path.exists(os.path.join(root, p)), p
    assert not os.path.islink(os.path.join(root, "etc/systemd/system/multi-user.target.wants/gpufabric-apply.service"))
    assert run_module(fabric_persist, {"state": "absent"}, monkeypatch=monkeypatch)["changed"] is False


BAD = [
    ("relative script", {"script": "sbin/gpufabric-apply"}, "script must be an absolute path"),
    ("boot_wait negative", {"boot_wait": -1}, "boot_wait must be 0..3600"),
    ("before unit with space", {"before_units": ["kubelet service"]}, "not a systemd unit name"),
]


@pytest.mark.parametrize("args,msg", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input(node, monkeypatch, args, msg):
    root, _m, _b = node
    res = run_module(fabric_persist, args, monkeypatch=monkeypatch)
    assert res["failed"] and msg in res["msg"]
    assert not os.path.exists(os.path.join(root, "usr/local/sbin"))


def test_boot_unit_runs_installed_applier(node, monkeypatch):
    """systemctl start of the installed unit runs the installed script, which re-applies the recorded state."""
    root, manifest, bindir = node
    sr = Sysroot(root)
    rails = [r["netdev"] for r in manifest["rails"][:2]]
    state.record(sr, "dcb", {"rails": rails, "pfc_priorities": [3]}, False)
    state.record(sr, "rdma_cm", {"devices": ["mlx5_0"], "tos": 106}, False)
    # the configfs group exists (a previous run made it); the registration reset the value
    tos = os.path.join(root, "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos")
    os.makedirs(os.path.dirname(tos))
    with open(tos, "w") as f:
        f.write("0\n")
    res = run_module(fabric_persist, {"boot_wait": 0}, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    env = dict(os.environ)
    rc = subprocess.call([os.path.join(bindir, "systemctl"), "start", "gpufabric-apply.service"], env=env)
    with open(os.path.join(root, "var/log/gpufabric-sim/gpufabric-apply.service.log")) as f:
        log = f.read()
    assert rc == 0, log
    assert "rdma_cm: mlx5_0/1 default_roce_tos 0 -> 106" in log
    assert "0 error(s)" in log
    with open(tos) as f:
        assert f.read().strip() == "106"
    for rail in rails:
        assert dcb_emu.pfc_enabled(dcb_emu.state(root, rail)) == [3]
    assert dcb_emu.pfc_enabled(dcb_emu.state(root, manifest["rails"][2]["netdev"])) == []


def _rename_ibdev(root, old, new):
    """The kernel's rename of an RDMA device (rdma dev set OLD name NEW): class link and device directory."""
    link = os.path.join(root, "sys/class/infiniband", old)
    target = os.readlink(link)
    real = os.path.normpath(os.path.join(os.path.dirname(link), target))
    os.rename(real, os.path.join(os.path.dirname(real), new))
    os.unlink(link)
    os.symlink(os.path.join(os.path.dirname(target), new), os.path.join(root, "sys/class/infiniband", new))


@pytest.mark.parametrize("dev", ["mlx5_1", "mlx5-bond0", "rxe-eth0.1"])
def test_template_instance_reapplies_only_its_device(node, monkeypatch, dev):
    """udev add of ``dev`` -> systemctl restart gpufabric-apply@<dev>.service -> only ``dev`` is touched.

    A name with '-' stays itself: the template reads the instance with %i (systemd's %I would unescape the '-'
    of mlx5-bond0 into '/')."""
    root, _m, bindir = node
    if dev != "mlx5_1":
        _rename_ibdev(root, "mlx5_1", dev)
    sr = Sysroot(root)
    state.record(sr, "rdma_cm", {"devices": ["mlx5_0", dev], "tos": 106}, False)
    paths = {}
    for d in ("mlx5_0", dev):
        paths[d] = os.path.join(root, "sys/kernel/config/rdma_cm/%s/ports/1/default_roce_tos" % d)
        os.makedirs(os.path.dirname(paths[d]))
        with open(paths[d], "w") as f:
            f.write("0\n")
    assert not run_module(fabric_persist, {"device_wait": 0}, monkeypatch=monkeypatch).get("failed")
    unit = bootsim.read_unit(os.path.join(root, "etc/systemd/system/gpufabric-apply@.service"))
    assert bootsim.unit_value(unit, "Unit", "After") == "gpufabric-apply.service"
    assert bootsim.unit_value(unit, "Service", "RemainAfterExit") is None
    cmds = udev.udev_commands(root, udev.infiniband_event(root, dev, "add"))
    instance = "gpufabric-apply@%s.service" % dev
    assert cmds == [[os.path.join(bindir, "systemctl"), "--no-block", "restart", instance]]
    p = subprocess.run(cmds[0], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       check=False)
    with open(os.path.join(root, "var/log/gpufabric-sim/%s.log" % instance)) as f:
        log = f.read()
    assert p.returncode == 0, p.stderr + log
    assert "rdma_cm: %s/1 default_roce_tos 0 -> 106" % dev in log
    with open(paths[dev]) as f:
        assert f.read().strip() == "106"
    with open(paths["mlx5_0"]) as f:
        assert f.read().strip() == "0"


@pytest.mark.parametrize("dev", ["mlx5 1", "mlx5%i", "a$b", "a\\x2d", 'q"x', "a;b", "a*b"])
def test_udev_rule_starts_no_instance_for_unsafe_names(node, monkeypatch, dev):
    """A kernel name outside [A-Za-z0-9_.-] is no instance name as it is: the rule starts nothing for it (the
    modules record no such device, state.py), instead of a unit whose %i would differ from the device."""
    root, _m, _bindir = node
    assert not run_module(fabric_persist, {}, monkeypatch=monkeypatch).get("failed")
    assert udev.udev_commands(root, udev.infiniband_event(root, dev, "add")) == []
    assert udev.udev_commands(root, udev.infiniband_event(root, "mlx5_0", "add")) != []
