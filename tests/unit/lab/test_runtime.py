# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pieces of the simulated-node runtime that need neither root nor namespaces."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist
from gpufabric_sim import bootsim, configfs_watch, runtime, services, udev, units

# --------------------------------------------------------------------------------------------
# argument parsing

SPEC_CASES = [
    ("default", None, [], None, [("sim1", "hgx-h200")]),
    ("count", 3, [], "pcie-4gpu-crossnuma",
     [("sim1", "pcie-4gpu-crossnuma"), ("sim2", "pcie-4gpu-crossnuma"), ("sim3", "pcie-4gpu-crossnuma")]),
    ("mixed", None, ["a=hgx-h200", "b=pcie-4gpu-crossnuma"], None,
     [("a", "hgx-h200"), ("b", "pcie-4gpu-crossnuma")]),
    ("name only uses --topology", None, ["x"], "pcie-4gpu-crossnuma", [("x", "pcie-4gpu-crossnuma")]),
    ("path topology", None, ["n1=/tmp/t.yml"], None, [("n1", "/tmp/t.yml")]),
]


@pytest.mark.parametrize("title,nodes,node_args,topology,expected", SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_parse_node_specs(title, nodes, node_args, topology, expected):
    assert runtime.parse_node_specs(nodes, node_args, topology) == expected


SPEC_ERRORS = [
    ("both forms", 2, ["a=hgx-h200"], "either --nodes"),
    ("duplicate", None, ["a=hgx-h200", "a=hgx-h200"], "twice"),
    ("bad name", None, ["Node_1=hgx-h200"], "bad node name"),
    ("zero", 0, [], "at least 1"),
    ("empty topology", None, ["a="], "empty topology"),
    ("too many", 251, [], "at most 250"),
]


@pytest.mark.parametrize("title,nodes,node_args,needle", SPEC_ERRORS, ids=[c[0] for c in SPEC_ERRORS])
def test_parse_node_specs_errors(title, nodes, node_args, needle):
    with pytest.raises(runtime.SimError) as e:
        runtime.parse_node_specs(nodes, node_args, None)
    assert needle in str(e.value)


def test_cli_parser_exec_keeps_command():
    args = runtime.build_parser().parse_args(["exec", "--fleet", "F", "--node", "a", "--", "sh", "-c", "echo x"])
    assert args.argv[-3:] == ["sh", "-c", "echo x"]
    args = runtime.build_parser().parse_args(["create", "--fleet", "F", "--node", "a=x", "--node", "b=y"])
    assert args.node == ["a=x", "b=y"] and args.nodes is None


def test_names():
    assert runtime.node_ns("abc123", "sim1") == "gf-abc123-sim1"
    assert runtime.leaf_ns("abc123") == "gf-abc123.leaf"
    assert len(runtime.peer_name(250, 7)) <= 15
    assert runtime.fleet_id("/tmp/a") == runtime.fleet_id("/tmp/a/")
    assert runtime.fleet_id("/tmp/a") != runtime.fleet_id("/tmp/b")


# --------------------------------------------------------------------------------------------
# rendering

FLEET_DATA = {
    "python": "/venv/bin/python",
    "nodes": [
        {"name": "sim1", "port": 22200, "topology": "hgx-h200", "root": "/f/sim1/root"},
        {"name": "sim2", "port": 22201, "topology": "pcie-4gpu-crossnuma", "root": "/f/sim2/root"},
    ],
}


def test_inventory_rendering():
    inv = yaml.safe_load(runtime.render_inventory("/f", FLEET_DATA))
    hosts = inv["all"]["children"]["gpufabric_sim"]["hosts"]
    assert sorted(hosts) == ["sim1", "sim2"]
    h = hosts["sim2"]
    assert h["ansible_host"] == "127.0.0.1"
    assert h["ansible_port"] == 22201
    assert h["ansible_user"] == "root"
    assert h["ansible_ssh_private_key_file"] == "/f/id_ed25519"
    assert "StrictHostKeyChecking=no" in h["ansible_ssh_common_args"]
    assert "UserKnownHostsFile=/dev/null" in h["ansible_ssh_common_args"]
    assert h["ansible_python_interpreter"] == "/venv/bin/python"  # a fleet made before node-python
    with_node_python = dict(FLEET_DATA, node_python="/f/node-python/bin/python3")
    inv = yaml.safe_load(runtime.render_inventory("/f", with_node_python))
    assert inv["all"]["children"]["gpufabric_sim"]["hosts"]["sim1"]["ansible_python_interpreter"] == \
        "/f/node-python/bin/python3"
    assert h["gpufabric_sim_topology"] == "pcie-4gpu-crossnuma"


def test_sshd_config_and_enter():
    cfg = runtime.render_sshd_config("/f", "/f/sim1", 22207)
    lines = dict(line.split(" ", 1) for line in cfg.splitlines() if line and not line.startswith("#"))
    assert lines["Port"] == "22207"
    assert lines["ListenAddress"] == "127.0.0.1"
    assert lines["ForceCommand"] == "/f/sim1/enter"
    assert lines["PidFile"] == "/f/sim1/sshd.pid"
    assert lines["UsePAM"] == "no" and lines["StrictModes"] == "no"
    assert lines["PermitRootLogin"] == "prohibit-password"
    assert int(lines["MaxSessions"]) >= 16 and int(lines["MaxStartups"].split(":")[0]) >= 16
    enter = runtime.render_enter("/f/sim1", "gf-abc-sim1", "/usr/sbin/ip")
    assert "GPUFABRIC_SYSROOT=/f/sim1/root" in enter
    assert "PATH=/f/sim1/bin:" in enter
    assert 'netns exec gf-abc-sim1 /bin/sh -c "$SSH_ORIGINAL_COMMAND"' in enter


def test_enter_script_runs_command_with_node_env(tmp_path):
    """The generated login script, with a fake 'ip' that just execs the command after 'netns exec NS'."""
    fake_ip = tmp_path / "ip"
    fake_ip.write_text('#!/bin/sh\nshift 3\nexec "$@"\n')
    fake_ip.chmod(0o755)
    node = tmp_path / "n1"
    node.mkdir()
    (node / "enter").write_text(runtime.render_enter(str(node), "gf-x-n1", str(fake_ip)))
    (node / "enter").chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "SSH_ORIGINAL_COMMAND": 'printf "%s|%s|%s" "$GPUFABRIC_SYSROOT" "${PATH%%:*}" \'a b\''}
    out = subprocess.run([str(node / "enter")], env=env, stdout=subprocess.PIPE, universal_newlines=True,
                         check=False).stdout
    assert out == "%s|%s|a b" % (node / "root", node / "bin")


def test_wrapper_rendering_calls_emulator(tmp_path):
    text = runtime.render_wrapper(sys.executable, "gpufabric_sim.services", "systemctl_main", True)
    assert text.startswith("#!" + sys.executable + "\n")
    assert "sys.exit(_main(sys.argv))" in text
    assert runtime.LAB_DIR in text
    text = runtime.render_wrapper(sys.executable, "gpufabric_sim.emulators.dcb", "main", False)
    assert "sys.exit(_main(sys.argv[1:]))" in text
    compile(text, "dcb", "exec")


# --------------------------------------------------------------------------------------------
# tree hash and sync


def _tree(base):
    (base / "a" / "b").mkdir(parents=True)
    (base / "a" / "b" / "f").write_text("one\n")
    (base / "g").write_text("two\n")
    os.symlink("/proc/sys/net", str(base / "net"))
    os.symlink("a/b/f", str(base / "rel"))
    return base


def test_tree_hash_stable_and_sensitive(tmp_path):
    root = _tree(tmp_path / "r")
    h0 = runtime.tree_hash(str(root))
    assert runtime.tree_hash(str(root)) == h0
    assert runtime.tree_hash(str(_tree(tmp_path / "r2"))) == h0, "same content, other location"
    (root / "g").write_text("two\n")
    assert runtime.tree_hash(str(root)) == h0, "rewriting the same bytes is no change"
    changes = [
        lambda: (root / "g").write_text("TWO\n"),
        lambda: os.chmod(str(root / "g"), 0o600),
        (root / "a" / "new").mkdir,
        lambda: (os.unlink(str(root / "rel")), os.symlink("a/b", str(root / "rel"))),
        lambda: (root / "a" / "b" / "f").rename(root / "a" / "b" / "f2"),
    ]
    seen = {h0}
    for change in changes:
        change()
        h = runtime.tree_hash(str(root))
        assert h not in seen
        seen.add(h)


def test_tree_hash_does_not_follow_symlinks(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text("1")
    os.symlink(str(outside), str(root / "link"))
    h = runtime.tree_hash(str(root))
    (outside / "x").write_text("2")
    assert runtime.tree_hash(str(root)) == h


def test_tree_stamp_sees_every_touch_and_no_read(tmp_path):
    """tree_stamp (the hostile-input test's witness): reads, listing and following nothing change it; any write,
    even of the same bytes, a chmod, a chown, a new or removed entry, a rename, a swapped link target and a file
    created and deleted again do."""
    root = _tree(tmp_path / "r")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), str(root / "out"))
    s0 = runtime.tree_stamp(str(root))
    (root / "g").read_text()
    os.listdir(str(root / "a"))
    (outside / "x").write_text("not in the tree")
    with open(str(root / "g"), "r+"):
        pass
    assert runtime.tree_stamp(str(root)) == s0
    changes = [
        lambda: (root / "g").write_text("two\n"),
        lambda: os.chmod(str(root / "g"), 0o600),
        lambda: os.lchown(str(root / "a" / "b" / "f"), os.getuid(), os.getgid()),
        (root / "a" / "new").mkdir,
        lambda: (os.unlink(str(root / "rel")), os.symlink("a/b", str(root / "rel"))),
        lambda: (root / "a" / "b" / "f").rename(root / "a" / "b" / "f2"),
        lambda: ((root / "a" / "tmp").write_text(""), os.unlink(str(root / "a" / "tmp"))),
    ]
    seen = {s0}
    for change in changes:
        time.sleep(0.01)    # coarse file-system clocks: each change gets a later timestamp
        change()
        s = runtime.tree_stamp(str(root))
        assert s not in seen, change
        seen.add(s)


def test_sync_tree(tmp_path):
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "a").mkdir()
    inode = os.stat(str(dst / "a")).st_ino
    (dst / "extra").write_text("gone")
    (dst / "g").write_text("changed")
    (dst / "a" / "b").write_text("file where a dir belongs")
    runtime.sync_tree(str(src), str(dst))
    assert runtime.tree_hash(str(dst)) == runtime.tree_hash(str(src))
    assert os.stat(str(dst / "a")).st_ino == inode, "unchanged directories keep their inode (inotify watches)"


# --------------------------------------------------------------------------------------------
# kernel command line and disable_acs_redir

CMDLINE_CASES = [
    ("plain", "ro quiet iommu=pt", [("ro", None), ("quiet", None), ("iommu", "pt")]),
    ("quoted value", 'a="x y" b', [("a", "x y"), ("b", None)]),
    ("init args after --", "ro -- single", [("ro", None)]),
    ("quoted whole", '"foo=bar baz"', [("foo", "bar baz")]),
]


@pytest.mark.parametrize("title,cmdline,expected", CMDLINE_CASES, ids=[c[0] for c in CMDLINE_CASES])
def test_cmdline_args(title, cmdline, expected):
    assert bootsim.cmdline_args(cmdline) == expected


PARAM_CASES = [
    ("none", "ro quiet", None),
    ("simple", "pci=disable_acs_redir=0000:15:01.0", "0000:15:01.0"),
    ("comma splits pci options", "pci=noaer,disable_acs_redir=0000:15:01.0;0000:37:01.0,realloc",
     "0000:15:01.0;0000:37:01.0"),
    ("last wins", "pci=disable_acs_redir=0000:15:01.0 pci=disable_acs_redir=pci:1000:c030", "pci:1000:c030"),
    ("quoted", 'pci="disable_acs_redir=0000:15:01.0/00.0;pci:10de:0"', "0000:15:01.0/00.0;pci:10de:0"),
]


@pytest.mark.parametrize("title,cmdline,expected", PARAM_CASES, ids=[c[0] for c in PARAM_CASES])
def test_disable_acs_redir_param(title, cmdline, expected):
    assert bootsim.disable_acs_redir_param(cmdline) == expected


def _chain():
    """root port 0000:15:01.0 -> switch up 0000:16:00.0 -> down 0000:17:01.0 -> NIC 0000:19:00.0."""
    rp = bootsim.PciDev("0000:15:01.0", 0x8086, 0x352A)
    up = bootsim.PciDev("0000:16:00.0", 0x1000, 0xC030, 0x1000, 0x100B, upstream=rp)
    down = bootsim.PciDev("0000:17:01.0", 0x1000, 0xC030, 0x1000, 0x100B, upstream=up)
    nic = bootsim.PciDev("0000:19:00.0", 0x15B3, 0x1021, upstream=down)
    other = bootsim.PciDev("0001:17:01.0", 0x1000, 0xC030, upstream=None)
    return {"rp": rp, "up": up, "down": down, "nic": nic, "other": other}


MATCH_CASES = [
    ("bdf", "0000:17:01.0", {"down"}),
    ("bdf without domain", "17:01.0", {"down"}),
    ("hex case and leading zeros", "0000:17:1.0", {"down"}),
    ("domain must match", "0001:17:01.0", {"other"}),
    ("path to downstream port", "0000:15:01.0/00.0/01.0", {"down"}),
    ("path to NIC", "0000:15:01.0/00.0/01.0/00.0", {"nic"}),
    ("path with wrong root", "0000:15:02.0/00.0/01.0", set()),
    ("path too long for device", "0000:16:00.0/01.0/00.0/00.0", set()),
    ("list with ;", "0000:15:01.0;0000:16:00.0", {"rp", "up"}),
    ("ids", "pci:1000:c030", {"up", "down", "other"}),
    ("ids wildcard device", "pci:15b3:0", {"nic"}),
    ("ids with subsystem", "pci:1000:c030:1000:100b", {"up", "down"}),
    ("ids then , then bdf", "pci:15b3:1021,0000:15:01.0", {"nic", "rp"}),
    ("comma after bdf is a parse error", "0000:15:01.0,0000:16:00.0", set()),
    ("garbage stops the walk", "zz;0000:15:01.0", set()),
    ("trailing garbage on element", "0000:17:01.0x", set()),
]


@pytest.mark.parametrize("title,param,expected", MATCH_CASES, ids=[c[0] for c in MATCH_CASES])
def test_pci_dev_str_match(title, param, expected):
    devs = _chain()
    assert {k for k, d in devs.items() if bootsim.pci_dev_str_match(d, param)} == expected


def _config_with_acs(ctrl, acs_offset=0x148):
    cfg = bytearray(4096)
    # AER at 0x100 -> ACS at acs_offset
    cfg[0x100:0x104] = (0x0001 | (1 << 16) | (acs_offset << 20)).to_bytes(4, "little")
    cfg[acs_offset:acs_offset + 4] = (0x000D | (1 << 16)).to_bytes(4, "little")
    cfg[acs_offset + 4:acs_offset + 6] = (0x5F).to_bytes(2, "little")
    cfg[acs_offset + 6:acs_offset + 8] = ctrl.to_bytes(2, "little")
    return bytes(cfg)


def _pci_root(tmp_path):
    """A small sysfs: rp 0000:15:01.0 -> up 16:00.0 -> down 17:01.0 -> NIC 19:00.0 (no ACS)."""
    root = tmp_path / "root"
    chain = [("0000:15:01.0", 0x1D), ("0000:16:00.0", 0x1D), ("0000:17:01.0", 0x1D), ("0000:19:00.0", None)]
    parent = root / "sys" / "devices" / "pci0000:15"
    parent.mkdir(parents=True)
    devices = root / "sys" / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    for bdf, ctrl in chain:
        d = parent / bdf
        d.mkdir()
        (d / "config").write_bytes(_config_with_acs(ctrl) if ctrl is not None else bytes(4096))
        for attr, val in (("vendor", "0x1000"), ("device", "0xc030"), ("subsystem_vendor", "0x1000"),
                          ("subsystem_device", "0x100b")):
            (d / attr).write_text(val + "\n")
        os.symlink(os.path.relpath(str(d), str(devices)), str(devices / bdf))
        parent = d
    return str(root)


def test_boot_acs_on_tree(tmp_path):
    root = _pci_root(tmp_path)
    devs = bootsim.pci_devices(root)
    assert devs["0000:19:00.0"].upstream.bdf == "0000:17:01.0"
    assert devs["0000:15:01.0"].upstream is None
    bootsim.write_acs_ctrl(root, "0000:16:00.0", 0)  # runtime change, lost at reboot
    enum = {"0000:15:01.0": 0x1D, "0000:16:00.0": 0x1D, "0000:17:01.0": 0x1D}
    written = bootsim.boot_acs(root, enum, "ro pci=disable_acs_redir=0000:15:01.0/00.0/01.0")
    assert written == {"0000:15:01.0": 0x1D, "0000:16:00.0": 0x1D, "0000:17:01.0": 0x11}
    assert bootsim.read_acs_ctrl(root, "0000:17:01.0") == 0x11
    assert bootsim.read_acs_ctrl(root, "0000:19:00.0") is None
    assert bootsim.write_acs_ctrl(root, "0000:19:00.0", 0) is False
    bootsim.boot_acs(root, enum, "ro")
    assert bootsim.read_acs_ctrl(root, "0000:17:01.0") == 0x1D


IOMMU_CASES = [
    ("default", "ro", "translated", "DMA-FQ"),
    ("pt", "ro iommu=pt", "identity", "DMA-FQ"),
    ("passthrough param", "iommu.passthrough=1", "identity", "DMA-FQ"),
    ("intel off", "intel_iommu=off iommu=pt", "off", "DMA-FQ"),
    ("iommu off", "iommu=off", "off", "DMA-FQ"),
    ("intel on after off", "intel_iommu=off intel_iommu=on", "translated", "DMA-FQ"),
    ("strict", "iommu.strict=1", "translated", "DMA"),
    ("nopt after pt", "iommu=pt iommu=nopt", "translated", "DMA-FQ"),
]


@pytest.mark.parametrize("title,cmdline,mode,ttype", IOMMU_CASES, ids=[c[0] for c in IOMMU_CASES])
def test_iommu_mode(title, cmdline, mode, ttype):
    assert bootsim.iommu_mode(cmdline) == mode
    assert bootsim.translated_type(cmdline) == ttype


def test_apply_iommu_off_and_on(tmp_path):
    root = _pci_root(tmp_path)
    groups = {"0": ["0000:15:01.0"], "1": ["0000:16:00.0"], "2": ["0000:17:01.0"], "3": ["0000:19:00.0"]}
    runtime.apply_iommu(root, groups, "translated", "DMA-FQ", {"0000:19:00.0": "identity"})
    g = os.path.join(root, "sys", "kernel", "iommu_groups")
    assert open(os.path.join(g, "2", "type")).read() == "DMA-FQ\n"
    assert open(os.path.join(g, "3", "type")).read() == "identity\n"
    nic = os.path.realpath(os.path.join(root, "sys", "bus", "pci", "devices", "0000:19:00.0"))
    assert os.path.realpath(os.path.join(nic, "iommu_group")) == os.path.join(g, "3")
    assert os.path.realpath(os.path.join(g, "3", "devices", "0000:19:00.0")) == nic
    runtime.apply_iommu(root, groups, "off", "DMA-FQ")
    assert os.listdir(g) == []
    assert not os.path.lexists(os.path.join(nic, "iommu_group"))
    runtime.apply_iommu(root, groups, "identity", "DMA-FQ")
    assert open(os.path.join(g, "0", "type")).read() == "identity\n"


def test_acs_enumeration_from_topology():
    topo = {"root_buses": [{"devices": [
        {"bdf": "0000:15:01.0", "acs": {"cap": 0x5F, "ctrl": 0x1D}, "children": [
            {"bdf": "0000:16:00.0", "acs": None, "children": [{"bdf": "0000:17:00.0", "acs": {"ctrl": 0}}]}]}]}]}
    assert runtime.acs_enumeration(topo) == {"0000:15:01.0": 0x1D, "0000:17:00.0": 0}


# --------------------------------------------------------------------------------------------
# systemd units, udev rules, sysctl.d

EXEC_CASES = [
    ("plain", "/usr/local/sbin/gpufabric-apply --boot", (["/usr/local/sbin/gpufabric-apply", "--boot"], False)),
    ("ignore failure", "-/usr/bin/true", (["/usr/bin/true"], True)),
    ("quotes", '/bin/sh -c "echo a b; exit 0"', (["/bin/sh", "-c", "echo a b; exit 0"], False)),
    ("privileged prefixes", "+!/usr/bin/x 'y z'", (["/usr/bin/x", "y z"], False)),
    ("at prefix", "@/usr/bin/python3 applier --once", (["/usr/bin/python3", "--once"], False)),
    ("percent escape", "/usr/bin/printf 100%%", (["/usr/bin/printf", "100%"], False)),
]


@pytest.mark.parametrize("title,value,expected", EXEC_CASES, ids=[c[0] for c in EXEC_CASES])
def test_parse_exec(title, value, expected):
    assert bootsim.parse_exec(value) == expected


@pytest.mark.parametrize("value", ["", "-", '/bin/sh -c "unbalanced', "@/usr/bin/x"])
def test_parse_exec_errors(value):
    with pytest.raises(ValueError):
        bootsim.parse_exec(value)


UNIT = """\
[Unit]
Description=Re-apply gpufabric runtime state
# comment
[Service]
Type=oneshot
Environment="MODE=boot" LEVEL=2
ExecStartPre=-/bin/true
ExecStart=/usr/local/sbin/gpufabric-apply --mode $MODE \\
    --level ${LEVEL}
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
"""


def test_unit_exec_commands(tmp_path):
    root = tmp_path / "root"
    (root / "usr" / "local" / "sbin").mkdir(parents=True)
    (root / "usr" / "local" / "sbin" / "gpufabric-apply").write_text("#!/bin/sh\n")
    unit_dir = root / "etc" / "systemd" / "system"
    unit_dir.mkdir(parents=True)
    (unit_dir / "gpufabric-apply.service").write_text(UNIT)
    dropin = unit_dir / "gpufabric-apply.service.d"
    dropin.mkdir()
    (dropin / "10-level.conf").write_text("[Service]\nEnvironment=LEVEL=3\n")
    sec = bootsim.read_unit(str(unit_dir / "gpufabric-apply.service"))
    assert bootsim.unit_value(sec, "Unit", "Description") == "Re-apply gpufabric runtime state"
    cmds = bootsim.unit_exec_commands(sec, str(root))
    assert cmds == [
        (["/bin/true"], True),
        ([str(root / "usr/local/sbin/gpufabric-apply"), "--mode", "boot", "--level", "3"], False),
    ]


def test_exec_start_reset_by_empty_assignment():
    sec = bootsim.parse_unit_text("[Service]\nExecStart=/bin/a\nExecStart=\nExecStart=/bin/b\n")
    assert bootsim.unit_values(sec, "Service", "ExecStart") == ["/bin/b"]


RULES = """\
# re-apply on RDMA device registration
ACTION!="add", GOTO="gpufabric_end"
SUBSYSTEM=="infiniband", KERNEL=="mlx5_*", \\
  RUN+="/usr/local/sbin/gpufabric-apply --ibdev %k", RUN+="/bin/logger $kernel added"
SUBSYSTEM=="net", RUN+="/bin/false"
SUBSYSTEM=="infiniband", ATTR{node_type}=="1: CA", RUN+="/bin/echo ca %%k"
SUBSYSTEM=="infiniband", DRIVERS=="mlx5_core", RUN+="/bin/unknown-key-never-matches"
LABEL="gpufabric_end"
"""


def test_udev_run_commands():
    rules = bootsim.parse_udev_rules(RULES)
    event = {"ACTION": "add", "SUBSYSTEM": "infiniband", "KERNEL": "mlx5_3", "DEVPATH": "/devices/x", "ENV": {}}
    attrs = {"node_type": "1: CA\n"}
    assert bootsim.udev_run_commands(rules, event, attrs.get) == [
        ["/usr/local/sbin/gpufabric-apply", "--ibdev", "mlx5_3"],
        ["/bin/logger", "mlx5_3", "added"],
        ["/bin/echo", "ca", "%k"],
    ]
    assert bootsim.udev_run_commands(rules, dict(event, ACTION="remove"), attrs.get) == []
    assert bootsim.udev_run_commands(rules, dict(event, KERNEL="irdma0"), {}.get) == []


def test_udev_rule_parse_error():
    with pytest.raises(ValueError):
        bootsim.parse_udev_rules('SUBSYSTEM=="infiniband" RUN+=/bin/x\n')


def test_sysctl_d(tmp_path):
    root = tmp_path / "root"
    (root / "etc" / "sysctl.d").mkdir(parents=True)
    (root / "usr" / "lib" / "sysctl.d").mkdir(parents=True)
    (root / "usr" / "lib" / "sysctl.d" / "50-default.conf").write_text("net.ipv4.conf.all.rp_filter = 2\n")
    (root / "usr" / "lib" / "sysctl.d" / "90-over.conf").write_text("net.ipv4.conf.all.rp_filter = 9\n")
    (root / "etc" / "sysctl.d" / "90-over.conf").write_text(
        "# /etc wins over /usr/lib for the same name\n"
        "net.ipv4.conf.ens1np0.arp_ignore = 1\n"
        "-net/ipv4/conf/eth0.100/rp_filter=0\n"
        "kernel.panic = 5\n")
    assert bootsim.boot_net_sysctls(str(root)) == [
        ("net/ipv4/conf/all/rp_filter", "2", False),
        ("net/ipv4/conf/ens1np0/arp_ignore", "1", False),
        ("net/ipv4/conf/eth0.100/rp_filter", "0", True),
    ]


# --------------------------------------------------------------------------------------------
# systemctl / udevadm emulators (run in-process against a tmp sysroot)


def _unit_root(tmp_path, unit_text, script):
    root = tmp_path / "root"
    (root / "usr" / "local" / "sbin").mkdir(parents=True)
    s = root / "usr" / "local" / "sbin" / "gpufabric-apply"
    s.write_text(script)
    s.chmod(0o755)
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "systemd" / "system" / "gpufabric-apply.service").write_text(unit_text)
    return root


def _systemctl(monkeypatch, root, *argv):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    rc = services.systemctl_main(["systemctl"] + list(argv))
    monkeypatch.undo()
    return rc, out.getvalue(), err.getvalue()


def test_systemctl_enable_start(tmp_path, monkeypatch):
    script = '#!/bin/sh\necho "$1" > "$GPUFABRIC_SYSROOT/applied"\n'
    unit = ("[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/gpufabric-apply boot\n"
            "[Install]\nWantedBy=multi-user.target\n")
    root = _unit_root(tmp_path, unit, script)
    assert _systemctl(monkeypatch, root, "is-enabled", "gpufabric-apply")[:2] == (1, "disabled\n")
    rc, _out, err = _systemctl(monkeypatch, root, "enable", "gpufabric-apply.service")
    assert rc == 0 and "Created symlink" in err
    link = root / "etc/systemd/system/multi-user.target.wants/gpufabric-apply.service"
    assert os.readlink(str(link)) == "/etc/systemd/system/gpufabric-apply.service"
    assert _systemctl(monkeypatch, root, "enable", "gpufabric-apply")[2] == "", "second enable changes nothing"
    assert units.enabled_units(str(root)) == ["gpufabric-apply.service"]
    assert _systemctl(monkeypatch, root, "is-active", "gpufabric-apply")[:2] == (3, "inactive\n")
    assert _systemctl(monkeypatch, root, "start", "gpufabric-apply")[0] == 0
    assert (root / "applied").read_text() == "boot\n"
    assert _systemctl(monkeypatch, root, "is-active", "gpufabric-apply")[:2] == (0, "active\n")
    rc, out, _err = _systemctl(monkeypatch, root, "show", "gpufabric-apply", "-p", "ActiveState,UnitFileState")
    assert out == "ActiveState=active\nUnitFileState=enabled\n"
    assert _systemctl(monkeypatch, root, "disable", "gpufabric-apply")[0] == 0
    assert not os.path.lexists(str(link))
    log = (root / "var/lib/gpufabric-sim/actions.log").read_text().splitlines()
    assert log == ["systemctl enable gpufabric-apply.service (multi-user.target.wants)",
                   "systemctl start gpufabric-apply.service",
                   "systemctl disable gpufabric-apply.service (multi-user.target.wants)"]


def test_systemctl_queries_write_nothing(tmp_path, monkeypatch):
    root = _unit_root(tmp_path, "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/gpufabric-apply\n"
                      "[Install]\nWantedBy=multi-user.target\n", "#!/bin/sh\n")
    before = runtime.tree_hash(str(root))
    for argv in (["is-enabled", "gpufabric-apply"], ["is-active", "gpufabric-apply"], ["show", "gpufabric-apply"],
                 ["status", "gpufabric-apply"], ["cat", "gpufabric-apply"]):
        _systemctl(monkeypatch, root, *argv)
    assert runtime.tree_hash(str(root)) == before


def test_systemctl_failures(tmp_path, monkeypatch):
    root = _unit_root(tmp_path, "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/gpufabric-apply\n",
                      "#!/bin/sh\nexit 4\n")
    rc, _o, err = _systemctl(monkeypatch, root, "start", "gpufabric-apply")
    assert rc == 1 and "failed" in err
    assert _systemctl(monkeypatch, root, "is-failed", "gpufabric-apply")[:2] == (0, "failed\n")
    assert _systemctl(monkeypatch, root, "start", "nope")[0] == 5
    assert _systemctl(monkeypatch, root, "is-enabled", "gpufabric-apply")[:2] == (0, "static\n")
    assert _systemctl(monkeypatch, root, "frobnicate", "x")[0] == 1


def test_systemctl_refuses_host_root(monkeypatch):
    monkeypatch.setenv("GPUFABRIC_SYSROOT", "/")
    with pytest.raises(SystemExit):
        services.systemctl_main(["systemctl", "daemon-reload"])


TEMPLATE = ("[Unit]\nDescription=Re-apply RDMA device %I\n[Service]\nType=oneshot\n"
            "Environment=DEV=%i\n"
            "ExecStart=/usr/local/sbin/gpufabric-apply --device %I --unit %n --raw %i --pct 100%% --env $DEV\n")
ARGV_SCRIPT = '#!/bin/sh\nprintf "%s\\n" "$@" >> "$GPUFABRIC_SYSROOT/argv"\n'


def _template_root(tmp_path, template=TEMPLATE):
    root = _unit_root(tmp_path, "[Service]\nExecStart=/bin/true\n", ARGV_SCRIPT)
    (root / "etc/systemd/system/gpufabric-apply@.service").write_text(template)
    return root


def test_find_unit_falls_back_to_template(tmp_path):
    root = _template_root(tmp_path)
    tpl = str(root / "etc/systemd/system/gpufabric-apply@.service")
    assert units.find_unit(str(root), "gpufabric-apply@mlx5_3.service") == tpl
    assert units.find_unit(str(root), "gpufabric-apply@.service") == tpl
    assert units.find_unit(str(root), "other@mlx5_3.service") is None
    assert units.find_unit(str(root), "gpufabric-apply.service").endswith("/gpufabric-apply.service")
    own = root / "etc/systemd/system/gpufabric-apply@mlx5_9.service"
    own.write_text("[Service]\nExecStart=/bin/true\n")
    assert units.find_unit(str(root), "gpufabric-apply@mlx5_9.service") == str(own), "own file wins"
    assert units.template_of("a@b.c.service") == "a@.service"
    assert units.template_of("a.service") is None and units.template_of("a@.service") is None


@pytest.mark.parametrize("verb", [["restart"], ["--no-block", "restart"], ["start", "--no-block"]])
def test_systemctl_template_instance_runs(tmp_path, monkeypatch, verb):
    root = _template_root(tmp_path)
    rc, _out, err = _systemctl(monkeypatch, root, *(verb + ["gpufabric-apply@mlx5_3.service"]))
    assert (rc, err) == (0, "")
    assert (root / "argv").read_text().splitlines() == [
        "--device", "mlx5_3", "--unit", "gpufabric-apply@mlx5_3.service", "--raw", "mlx5_3", "--pct", "100%",
        "--env", "mlx5_3"]
    assert "systemctl start gpufabric-apply@mlx5_3.service" in (root / "var/lib/gpufabric-sim/actions.log").read_text()
    rc, out, _err = _systemctl(monkeypatch, root, "show", "gpufabric-apply@mlx5_3", "-p",
                               "Id,Description,LoadState,FragmentPath,Result,UnitFileState")
    assert out.splitlines() == [
        "Id=gpufabric-apply@mlx5_3.service", "Description=Re-apply RDMA device mlx5_3", "LoadState=loaded",
        "FragmentPath=/etc/systemd/system/gpufabric-apply@.service", "UnitFileState=static", "Result=success"]
    assert _systemctl(monkeypatch, root, "is-active", "gpufabric-apply@mlx5_3")[:2] == (3, "inactive\n")


def test_systemctl_template_unescapes_and_dropins(tmp_path, monkeypatch):
    root = _template_root(tmp_path, "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/gpufabric-apply %i %I %p\n")
    dropin = root / "etc/systemd/system/gpufabric-apply@dev-x\\x2dy.service.d"
    dropin.mkdir()
    (dropin / "10-more.conf").write_text("[Service]\nExecStartPost=/usr/local/sbin/gpufabric-apply post %I\n")
    assert _systemctl(monkeypatch, root, "start", "gpufabric-apply@dev-x\\x2dy.service")[0] == 0
    assert (root / "argv").read_text().splitlines() == ["dev-x\\x2dy", "dev/x-y", "gpufabric-apply", "post", "dev/x-y"]
    (root / "argv").unlink()
    assert _systemctl(monkeypatch, root, "start", "gpufabric-apply@other.service")[0] == 0
    assert (root / "argv").read_text().splitlines() == ["other", "other", "gpufabric-apply"], "drop-in is per instance"


SPEC_TABLE = {"i": "a\\x20b", "I": "a b", "n": "x@a\\x20b.service", "p": "x", "t": "/run", "P": "it's 100% \\ \"q\""}


@pytest.mark.parametrize("title,value,argv", [
    ("plain", "/bin/x %i", ["/bin/x", "a\\x20b"]),
    ("space stays in its word", "/bin/x --dev=%I --tail", ["/bin/x", "--dev=a b", "--tail"]),
    ("inside double quotes", '/bin/x "%I and %p"', ["/bin/x", "a b and x"]),
    ("inside single quotes", "/bin/x '%P'", ["/bin/x", "it's 100% \\ \"q\""]),
    ("unquoted with quotes", "/bin/x %P", ["/bin/x", "it's 100% \\ \"q\""]),
    ("double-quoted with quotes", '/bin/x "<%P>"', ["/bin/x", "<it's 100% \\ \"q\">"]),
    ("percent escape", "/bin/sh -c 'date +%%s' %t", ["/bin/sh", "-c", "date +%s", "/run"]),
    ("escaped quote before", '/bin/x \\"%p', ["/bin/x", '"x']),
])
def test_exec_specifiers_never_split_a_value(title, value, argv):
    assert bootsim.parse_exec(units.resolve_specifiers(value, SPEC_TABLE, "exec"))[0] == argv, title


def test_specifier_table_and_unescape(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/machine-id").write_text("abc\n")
    t = units.specifier_table(str(tmp_path), "gpufabric-apply@dev-sda\\x2d1.service")
    assert (t["i"], t["I"], t["p"], t["n"], t["N"], t["m"], t["H"]) == (
        "dev-sda\\x2d1", "dev/sda-1", "gpufabric-apply", "gpufabric-apply@dev-sda\\x2d1.service",
        "gpufabric-apply@dev-sda\\x2d1", "abc", "")
    assert units.specifier_table(str(tmp_path), "plain.service")["i"] == ""
    assert units.resolve_specifiers("Unit %I, 5%%", t) == "Unit dev/sda-1, 5%"
    with pytest.raises(ValueError):
        units.resolve_specifiers("50%", t)


def test_systemctl_unknown_specifier_fails_start(tmp_path, monkeypatch):
    root = _template_root(tmp_path, "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/gpufabric-apply %Q\n")
    rc, _out, err = _systemctl(monkeypatch, root, "start", "gpufabric-apply@mlx5_0.service")
    assert rc == 1 and "unknown specifier %Q" in err
    assert not (root / "argv").exists()
    assert _systemctl(monkeypatch, root, "is-failed", "gpufabric-apply@mlx5_0")[:2] == (0, "failed\n")


def test_udev_rule_restarts_template_instance(tmp_path, monkeypatch):
    """What the persistence role writes (fabric_persist's template unit and udev rule, rendered by the
    module itself): the rule's ``<systemctl> --no-block restart gpufabric-apply@%k.service`` runs the
    template's ExecStart for that device only."""
    root = _template_root(tmp_path, persist.render_template("/usr/local/sbin/gpufabric-apply", 7))
    for ibdev in ("mlx5_2", "mlx5_3"):
        (root / "sys/class/infiniband" / ibdev / "ports/1").mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    systemctl = bindir / "systemctl"
    systemctl.write_text(runtime.render_wrapper(sys.executable, "gpufabric_sim.services", "systemctl_main", True))
    systemctl.chmod(0o755)
    (root / "etc/udev/rules.d").mkdir(parents=True)
    (root / "etc/udev/rules.d/90-gpufabric.rules").write_text(persist.render_rule(str(systemctl)))
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    assert udev.udevadm_main(["udevadm", "trigger", "--action=add", "--sysname-match=mlx5_3"]) == 0
    assert (root / "argv").read_text().split() == ["--device", "mlx5_3", "--wait", "7", "--lock-wait", "120"]
    log = (root / "var/lib/gpufabric-sim/actions.log").read_text()
    assert "systemctl start gpufabric-apply@mlx5_3.service" in log and "mlx5_2" not in log


def test_udevadm_trigger_runs_rules(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "sys/class/infiniband/mlx5_0/ports/1").mkdir(parents=True)
    (root / "sys/class/infiniband/mlx5_1/ports/1").mkdir(parents=True)
    (root / "etc/udev/rules.d").mkdir(parents=True)
    (root / "etc/udev/rules.d/90-gpufabric.rules").write_text(
        'SUBSYSTEM=="infiniband", ACTION=="add", RUN+="/bin/sh -c \'echo %k >> $GPUFABRIC_SYSROOT/seen\'"\n')
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    assert udev.udevadm_main(["udevadm", "control", "--reload"]) == 0
    assert udev.udevadm_main(["udevadm", "trigger"]) == 0
    assert not (root / "seen").exists(), "default action is change"
    assert udev.udevadm_main(["udevadm", "trigger", "--subsystem-match=infiniband", "--action=add"]) == 0
    assert (root / "seen").read_text() == "mlx5_0\nmlx5_1\n"
    assert udev.udevadm_main(["udevadm", "info", "x"]) == 2


# --------------------------------------------------------------------------------------------
# configfs watcher


def _ib_root(tmp_path):
    root = tmp_path / "root"
    (root / "sys/class/infiniband/mlx5_0/ports/1").mkdir(parents=True)
    (root / "sys/kernel/config/rdma_cm").mkdir(parents=True)
    return root


def test_configfs_groups(tmp_path):
    root = _ib_root(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    cm = root / "sys/kernel/config/rdma_cm"
    (cm / "mlx5_0").mkdir()
    (cm / "bogus").mkdir()
    assert configfs_watch.scan_node(str(root), str(staging)) == {"mlx5_0": "ports", "bogus": "removed"}
    assert (cm / "mlx5_0/ports/1/default_roce_tos").read_text() == "0\n"
    assert (cm / "mlx5_0/ports/1/default_roce_mode").read_text() == "RoCE v2\n"
    assert sorted(os.listdir(str(cm))) == ["mlx5_0"]
    (cm / "mlx5_0/ports/1/default_roce_tos").write_text("106\n")
    assert configfs_watch.scan_node(str(root), str(staging)) == {}, "existing groups are left alone"
    assert (cm / "mlx5_0/ports/1/default_roce_tos").read_text() == "106\n"
    assert os.listdir(str(staging)) == []


def test_configfs_watcher_process(tmp_path):
    """The watcher as a process reacts to mkdir within the ~2 s modules wait."""
    import time
    root = _ib_root(tmp_path)
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "fleet.json").write_text(json.dumps({"nodes": [{"root": str(root)}]}))
    env = dict(os.environ, PYTHONPATH=runtime.LAB_DIR)
    p = subprocess.Popen([sys.executable, "-m", "gpufabric_sim.configfs_watch", "--fleet", str(fleet)], env=env)
    try:
        time.sleep(0.5)
        group = root / "sys/kernel/config/rdma_cm/mlx5_0"
        group.mkdir()
        deadline = time.time() + 2.0
        while not (group / "ports/1/default_roce_tos").exists() and time.time() < deadline:
            time.sleep(0.02)
        assert (group / "ports/1/default_roce_tos").read_text() == "0\n"
    finally:
        p.terminate()
        p.wait(5)


def test_node_python_has_no_ansible(tmp_path):
    """The nodes' Python: the base interpreter in a venv of its own, the node's libraries and not Ansible."""
    import subprocess
    import sys
    py = runtime.make_node_python(str(tmp_path), sys.executable)
    assert py == str(tmp_path / "node-python" / "bin" / "python3")
    env = {"PATH": "/usr/bin:/bin"}
    p = subprocess.run([py, "-c", "import ansible"], stderr=subprocess.PIPE, universal_newlines=True, env=env,
                       check=False)
    assert p.returncode == 1 and "No module named 'ansible'" in p.stderr
    p = subprocess.run([py, "-c", "import yaml, pyroute2, sys; print(sys.prefix)"], stdout=subprocess.PIPE,
                       universal_newlines=True, env=env, check=True)
    assert p.stdout.strip() == str(tmp_path / "node-python")
