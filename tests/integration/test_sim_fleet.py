# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real 2-node simulated fleet (hgx-h200 + pcie-4gpu-crossnuma): SSH, Ansible, namespaces, reboot,
device re-registration, destroy. Needs root, ``ip netns`` and openssh-server."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from fleet import why_not

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAB = os.path.join(REPO, "tests", "lab")
if LAB not in sys.path:
    sys.path.insert(0, LAB)

WHY = why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

ANSIBLE_CFG = """\
[defaults]
host_key_checking = False
forks = 16
gathering = explicit
retry_files_enabled = False
[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s
control_path_dir = {cp}
"""


def sim(*args, **kw):
    env = dict(os.environ, PYTHONPATH=LAB + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "gpufabric_sim"] + list(args), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=kw.get("timeout", 300), check=False)
    if kw.get("check", True):
        assert p.returncode == 0, "gpufabric_sim %s: rc=%d\n%s\n%s" % (args[0], p.returncode, p.stdout, p.stderr)
    return p


def node_sh(fleet, node, script, check=True):
    p = sim("exec", "--fleet", fleet, "--node", node, "--", "/bin/sh", "-c", script, check=False)
    if check:
        assert p.returncode == 0, "%s on %s: rc=%d\n%s\n%s" % (script, node, p.returncode, p.stdout, p.stderr)
    return p


class Ansible(object):
    def __init__(self, fleet, tmp):
        self.inventory = os.path.join(fleet, "inventory.yml")
        cfg = os.path.join(tmp, "ansible.cfg")
        with open(cfg, "w") as f:
            f.write(ANSIBLE_CFG.format(cp=os.path.join(tmp, "cp")))
        coll = os.path.join(tmp, "collections")
        os.makedirs(coll, exist_ok=True)
        self.env = dict(os.environ, ANSIBLE_CONFIG=cfg, ANSIBLE_COLLECTIONS_PATH=coll, ANSIBLE_NOCOLOR="1",
                        ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "ansible-local"))
        self.bin = os.path.join(os.path.dirname(sys.executable), "ansible")
        if not os.path.exists(self.bin):
            self.bin = shutil.which("ansible")

    def adhoc(self, pattern, module, args=None):
        argv = [self.bin, "-i", self.inventory, pattern, "-m", module, "-o"]
        if args:
            argv += ["-a", args]
        p = subprocess.run(argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300, check=False)
        assert p.returncode == 0, "ansible %s %s: rc=%d\n%s\n%s" % (pattern, module, p.returncode, p.stdout, p.stderr)
        return p.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("simfleet")
    fleet = str(base / "fleet")
    try:
        sim("create", "--fleet", fleet, "--node", "a=hgx-h200", "--node", "b=pcie-4gpu-crossnuma",
            "--base-port", "23100")
        yield fleet
    finally:
        sim("destroy", "--fleet", fleet, check=False)


def _fleet_processes(fleet):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if fleet in cmd:
            found.append((int(pid), cmd))
    return found


def test_fleet_layout(fleet):
    data = json.load(open(os.path.join(fleet, "fleet.json")))
    assert [n["name"] for n in data["nodes"]] == ["a", "b"]
    assert [len(n["rails"]) for n in data["nodes"]] == [8, 4]
    rows = json.loads(sim("list", "--fleet", fleet, "--json").stdout)
    assert [r["sshd"] for r in rows] == ["running", "running"]
    for n in data["nodes"]:
        for tool in ("dcb", "ethtool", "update-grub", "grub2-mkconfig", "grubby", "systemctl", "udevadm"):
            assert os.access(os.path.join(n["dir"], "bin", tool), os.X_OK)


def test_ansible_ping_and_node_view(fleet, tmp_path):
    ans = Ansible(fleet, str(tmp_path))
    out = ans.adhoc("all", "ansible.builtin.ping")
    assert out.count("SUCCESS") == 2 and '"ping": "pong"' in out
    out = ans.adhoc("all", "ansible.builtin.shell",
                    'cat "$GPUFABRIC_SYSROOT/proc/cmdline"; cat /proc/sys/net/ipv4/conf/ens1np0/arp_ignore; '
                    'ls /sys/class/net | tr "\\n" " "; command -v dcb')
    lines = dict((line.split(" | ")[0], line) for line in out.splitlines() if " | " in line)
    assert "vmlinuz-6.8.0-45-generic" in lines["a"] and "el9_4" in lines["b"]
    assert "ens8np0" in lines["a"] and "ens8np0" not in lines["b"], "each node sees its own /sys/class/net"
    assert "/a/bin/dcb" in lines["a"] and "/b/bin/dcb" in lines["b"]


def test_per_interface_sysctl_is_per_node(fleet):
    node_sh(fleet, "a", "echo 2 > /proc/sys/net/ipv4/conf/ens1np0/rp_filter")
    assert node_sh(fleet, "a", "cat $GPUFABRIC_SYSROOT/proc/sys/net/ipv4/conf/ens1np0/rp_filter").stdout == "2\n"
    assert node_sh(fleet, "b", "cat /proc/sys/net/ipv4/conf/ens1np0/rp_filter").stdout == "0\n"


def test_rails_of_different_nodes_talk(fleet):
    recv = ("import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.100.0.2',9999));"
            "s.settimeout(10);print(s.recvfrom(64)[0].decode())")
    send = ("import socket,time\nfor i in range(40):\n"
            "    socket.socket(socket.AF_INET,socket.SOCK_DGRAM).sendto(b'hello-rail',('10.100.0.2',9999));"
            "time.sleep(0.1)")
    env = dict(os.environ, PYTHONPATH=LAB)
    listener = subprocess.Popen([sys.executable, "-m", "gpufabric_sim", "exec", "--fleet", fleet, "--node", "b", "--",
                                 sys.executable, "-c", recv], env=env, stdout=subprocess.PIPE,
                                universal_newlines=True)
    try:
        time.sleep(0.5)
        sim("exec", "--fleet", fleet, "--node", "a", "--", sys.executable, "-c", send, check=False, timeout=30)
        out = listener.communicate(timeout=15)[0]
    finally:
        if listener.poll() is None:
            listener.kill()
    assert out.strip() == "hello-rail"


def test_hash_is_stable_and_sees_writes(fleet):
    readonly = "dcb -j app show dev ens1np0 >/dev/null; ethtool -S ens1np0 >/dev/null; systemctl is-active x; true"
    # the dcb/ethtool emulators create their flock file (.lock) on first use, even for a read
    node_sh(fleet, "b", readonly)
    h1 = sim("hash", "--fleet", fleet, "--node", "b").stdout.strip()
    assert sim("hash", "--fleet", fleet, "--node", "b").stdout.strip() == h1
    node_sh(fleet, "b", readonly)
    assert sim("hash", "--fleet", fleet, "--node", "b").stdout.strip() == h1, "read-only tools write nothing"
    node_sh(fleet, "b", "dcb app add dev ens1np0 dscp-prio 26:3")
    assert sim("hash", "--fleet", fleet, "--node", "b").stdout.strip() != h1
    node_sh(fleet, "b", "dcb app del dev ens1np0 dscp-prio 26:3")


UNIT = """[Unit]
Description=gpufabric boot-time applier (test)
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpufabric-apply boot
[Install]
WantedBy=multi-user.target
"""

APPLIER = """#!/bin/sh
# test applier: record the call, create the rdma_cm group of the ibdev (or mlx5_0) and set ToS 106
echo "$*" >> "$GPUFABRIC_SYSROOT/var/lib/applier.calls"
dev=${2:-mlx5_0}
mkdir -p "$GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/$dev"
i=0; while [ ! -e "$GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/$dev/ports/1/default_roce_tos" ] && [ $i -lt 40 ]; do
  sleep 0.05; i=$((i+1)); done
echo 106 > "$GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/$dev/ports/1/default_roce_tos"
"""

RULE = 'SUBSYSTEM=="infiniband", ACTION=="add", KERNEL=="mlx5_0", RUN+="/usr/local/sbin/gpufabric-apply udev %k"\n'


def _install_applier(fleet, node):
    root = os.path.join(fleet, node, "root")
    for d in ("usr/local/sbin", "etc/systemd/system", "etc/udev/rules.d"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "usr/local/sbin/gpufabric-apply"), "w") as f:
        f.write(APPLIER)
    os.chmod(os.path.join(root, "usr/local/sbin/gpufabric-apply"), 0o755)
    with open(os.path.join(root, "etc/systemd/system/gpufabric-apply.service"), "w") as f:
        f.write(UNIT)
    with open(os.path.join(root, "etc/udev/rules.d/90-gpufabric.rules"), "w") as f:
        f.write(RULE)
    node_sh(fleet, node, "systemctl daemon-reload && systemctl enable gpufabric-apply.service")
    return root


def _read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def _acs_ctrl(root, bdf):
    from gpufabric_sim import bootsim
    return bootsim.read_acs_ctrl(root, bdf)


def test_reboot_hgx(fleet):
    root = _install_applier(fleet, "a")
    # desired boot parameters through the node's own update-grub
    node_sh(fleet, "a", "sed -i 's|^GRUB_CMDLINE_LINUX_DEFAULT=.*|GRUB_CMDLINE_LINUX_DEFAULT=\"iommu=pt "
                        "pci=disable_acs_redir=0000:15:01.0/00.0/01.0\"|' $GPUFABRIC_SYSROOT/etc/default/grub"
                        " && update-grub")
    # runtime state the reboot must lose
    node_sh(fleet, "a", "echo 1 > /proc/sys/net/ipv4/conf/ens2np0/rp_filter; ip route add 10.200.0.0/16 dev ens2np0;"
                        "dcb app add dev ens1np0 dscp-prio 26:3; mkdir $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_5")
    from gpufabric_sim import bootsim
    bootsim.write_acs_ctrl(root, "0000:17:03.0", 0)
    assert "iommu=pt" not in _read(root, "proc/cmdline")
    rep = json.loads(sim("reboot", "--fleet", fleet, "--node", "a").stdout)
    assert rep["degraded"] is False, rep
    cmdline = _read(root, "proc/cmdline")
    assert "iommu=pt pci=disable_acs_redir=0000:15:01.0/00.0/01.0" in cmdline
    assert _acs_ctrl(root, "0000:17:01.0") == 0x11, "RR|CR|EC cleared on the path-selected downstream port"
    assert _acs_ctrl(root, "0000:17:03.0") == 0x1D, "runtime ACS change lost, enumeration value back"
    assert _acs_ctrl(root, "0000:15:01.0") == 0x1D
    groups = os.listdir(os.path.join(root, "sys/kernel/iommu_groups"))
    assert groups and all(_read(root, "sys/kernel/iommu_groups/%s/type" % g) == "identity\n" for g in groups)
    out = node_sh(fleet, "a", "cat /proc/sys/net/ipv4/conf/ens2np0/rp_filter /proc/sys/net/ipv4/conf/ens1np0/rp_filter;"
                              " ip -4 route show 10.200.0.0/16; dcb -j app show dev ens1np0;"
                              " systemctl is-active gpufabric-apply; ip -br link show ens8np0").stdout.splitlines()
    assert out[0:2] == ["0", "0"], "per-interface sysctls back to defaults"
    assert out[2] == "{}", "routes gone, DCB back to driver defaults"
    assert out[3] == "active"
    assert out[4].startswith("ens8np0") and "UP" in out[4]
    cm = os.listdir(os.path.join(root, "sys/kernel/config/rdma_cm"))
    assert cm == ["mlx5_0"], "old groups gone; the applier (udev coldplug + unit) recreated mlx5_0"
    assert _read(root, "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos") == "106\n"
    assert _read(root, "var/lib/applier.calls").splitlines() == ["udev mlx5_0", "boot"]


def test_reboot_rhel_grubby_iommu_off(fleet):
    root = os.path.join(fleet, "b", "root")
    node_sh(fleet, "b", "grubby --update-kernel=ALL --args='intel_iommu=off pci=disable_acs_redir=pci:1000:0'")
    rep = json.loads(sim("reboot", "--fleet", fleet, "--node", "b").stdout)
    assert "intel_iommu=off" in rep["cmdline"] and rep["iommu"] == "off"
    assert os.listdir(os.path.join(root, "sys/kernel/iommu_groups")) == []
    assert _acs_ctrl(root, "0000:18:01.0") == 0x11, "the switch's downstream ports selected by vendor id"
    assert _acs_ctrl(root, "0000:16:01.0") == 0x1D, "Intel root port untouched"
    assert rep["units"] == [] and rep["udev"] == []
    node_sh(fleet, "b", "grubby --update-kernel=ALL --remove-args='intel_iommu pci'")
    rep = json.loads(sim("reboot", "--fleet", fleet, "--node", "b").stdout)
    assert rep["iommu"] == "translated"
    groups = os.listdir(os.path.join(root, "sys/kernel/iommu_groups"))
    assert groups and _read(root, "sys/kernel/iommu_groups/%s/type" % groups[0]) == "DMA-FQ\n"
    assert _acs_ctrl(root, "0000:18:01.0") == 0x1D


def test_reregister(fleet):
    root = os.path.join(fleet, "a", "root")
    node_sh(fleet, "a", "mkdir $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_3 && sleep 0.5 &&"
                        " echo 104 > $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_3/ports/1/default_roce_tos &&"
                        " dcb app add dev ens4np0 dscp-prio 26:3")
    rep = json.loads(sim("reregister", "--fleet", fleet, "--node", "a", "--ibdev", "mlx5_3").stdout)
    assert rep["udev"] == [], "the test rule only matches mlx5_0"
    assert not os.path.exists(os.path.join(root, "sys/kernel/config/rdma_cm/mlx5_3"))
    node_sh(fleet, "a", "mkdir $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_3")
    time.sleep(1.0)
    assert _read(root, "sys/kernel/config/rdma_cm/mlx5_3/ports/1/default_roce_tos") == "0\n"
    assert node_sh(fleet, "a", "dcb -j app show dev ens4np0").stdout.strip() == "{}"
    # mlx5_0 has a udev rule: the applier runs again and restores ToS 106
    node_sh(fleet, "a", "echo 0 > $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos")
    rep = json.loads(sim("reregister", "--fleet", fleet, "--node", "a", "--ibdev", "mlx5_0").stdout)
    assert [u["rc"] for u in rep["udev"]] == [0]
    assert _read(root, "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos") == "106\n"
    assert sim("reregister", "--fleet", fleet, "--node", "a", "--ibdev", "mlx5_42", check=False).returncode == 1


def test_unknown_configfs_group_is_refused(fleet):
    root = os.path.join(fleet, "b", "root")
    node_sh(fleet, "b", "mkdir $GPUFABRIC_SYSROOT/sys/kernel/config/rdma_cm/mlx5_7")
    deadline = time.time() + 2.0
    while os.path.exists(os.path.join(root, "sys/kernel/config/rdma_cm/mlx5_7")) and time.time() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(os.path.join(root, "sys/kernel/config/rdma_cm/mlx5_7")), "b has only mlx5_0..3"


def test_destroy_leaves_nothing(tmp_path):
    """Runs last in this module: a separate 1-node fleet, destroyed twice (idempotent)."""
    fleet = str(tmp_path / "f")
    data = json.loads(sim("create", "--fleet", fleet, "--nodes", "1", "--base-port", "23200").stdout)
    assert data["nodes"] == ["sim1"]
    Ansible(fleet, str(tmp_path)).adhoc("all", "ansible.builtin.ping")
    fid = json.load(open(os.path.join(fleet, "fleet.json")))["fleet_id"]
    sim("destroy", "--fleet", fleet)
    sim("destroy", "--fleet", fleet)
    assert not os.path.exists(fleet)
    names = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, universal_newlines=True,
                           check=False).stdout
    assert "gf-%s" % fid not in names
    deadline = time.time() + 5
    while _fleet_processes(fleet) and time.time() < deadline:
        time.sleep(0.1)
    assert _fleet_processes(fleet) == []
