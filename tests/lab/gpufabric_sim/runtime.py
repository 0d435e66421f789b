# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleets of simulated HGX nodes that Ansible reaches over SSH like real hosts.

``python -m gpufabric_sim create|destroy|list|exec|hash|reboot|reregister`` (see ``main``).

A fleet is a directory::

    <fleet>/fleet.json            nodes, ports, pids, namespaces (destroy works from it, or without it)
    <fleet>/inventory.yml         group gpufabric_sim, one host per node
    <fleet>/id_ed25519[.pub]      the fleet's login key; ssh_host_ed25519_key: the host key of every sshd
    <fleet>/configfs-watch.pid    the rdma_cm configfs watcher (configfs_watch.py)
    <fleet>/nvfs-proc.pid         the server of every node's /proc/driver/nvidia-fs/modules (nvfs_proc.py)
    <fleet>/node-python/          the nodes' Python (``ansible_python_interpreter``): a venv of the base
                                  interpreter without pip or site-packages, so, as on a real node, it cannot
                                  import ``ansible`` (``make_node_python``)
    <fleet>/<node>/root/          the sysroot (tree.build_tree)
    <fleet>/<node>/bin/           dcb ethtool systemctl udevadm ib_write_bw, and the boot loader's tools:
                                  update-grub grub-mkconfig grub2-mkconfig grubby (bootloader grub/grubby),
                                  bootctl (systemd-boot/uki), none on a microVM (bootloader none)
    <fleet>/<node>/enter          sshd ForceCommand: env + ``ip netns exec`` into the node
    <fleet>/<node>/sshd_config    one sshd per node on 127.0.0.1:<port>
    <fleet>/<node>/topology.json  the expanded topology (reboot rebuilds sys/ proc/ run/ from it: the
                                  tree builder is deterministic; ACS values the kernel sets at enumeration)

Network: namespace ``gf-<fleet id>-<node>`` per node with one veth per rail (manifest name, MAC and
IPv4 in a flat /16) and ``lo`` up; the peers sit in ``gf-<fleet id>.leaf`` on bridge ``br0``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

from gpufabric_sim import bootloaders, bootsim

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOPOLOGY = "hgx-h200"
DEFAULT_BASE_PORT = 22200
NODE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
VOLATILE_DIRS = ("sys", "proc", "run")
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server")

# name in <node>/bin -> (module, pass argv[0]?)
WRAPPERS = {
    "dcb": ("gpufabric_sim.emulators.dcb", "main", False),
    "ethtool": ("gpufabric_sim.emulators.ethtool", "main", False),
    "update-grub": ("gpufabric_sim.emulators.grub", "main", True),
    "grub-mkconfig": ("gpufabric_sim.emulators.grub", "main", True),
    "grub2-mkconfig": ("gpufabric_sim.emulators.grub", "main", True),
    "grubby": ("gpufabric_sim.emulators.grub", "main", True),
    "systemctl": ("gpufabric_sim.services", "systemctl_main", True),
    "udevadm": ("gpufabric_sim.udev", "udevadm_main", True),
    "ib_write_bw": ("gpufabric_sim.emulators.perftest", "main", True),
    # nccl-tests' all-reduce as validate.yml runs it (NCCL INFO channel lines for the node's state and env)
    "all_reduce_perf": ("gpufabric_sim.emulators.nccl_tests", "main", False),
    "bootctl": ("gpufabric_sim.emulators.bootctl", "main", False),
    "ibv_devinfo": ("gpufabric_sim.emulators.ibv_devinfo", "main", False),
    # the NVLink state the fabric_manager concern reads (nvlink --status only)
    "nvidia-smi": ("gpufabric_sim.emulators.nvidia_smi", "main", False),
    # mstflint's firmware settings tool (the DCQCN priority mask ECN reads on the inbox driver)
    "mstconfig": ("gpufabric_sim.emulators.mstconfig", "main", False),
    "dpkg-query": ("gpufabric_sim.emulators.pkg", "main", True),
    "apt-mark": ("gpufabric_sim.emulators.pkg", "main", True),
    "apt-get": ("gpufabric_sim.emulators.pkg", "main", True),
    "unattended-upgrade": ("gpufabric_sim.emulators.pkg", "main", True),
    "rpm": ("gpufabric_sim.emulators.pkg", "main", True),
    "dnf": ("gpufabric_sim.emulators.pkg", "main", True),
}
APT_TOOLS = ("dpkg-query", "apt-mark", "apt-get", "unattended-upgrade")
DNF_TOOLS = ("rpm", "dnf")
GRUB_TOOLS = bootloaders.GRUB_TOOLS
BOOTLOADERS = bootloaders.KINDS


def node_tools(topo):
    """The emulated tools of a node: its boot loader's, and its package manager's (apt on Debian/Ubuntu, dnf on EL)."""
    el = topo.get("os") in ("rhel", "rocky")
    return dict((k, v) for k, v in bootloaders.node_tools(topo, WRAPPERS).items()
                if k not in (APT_TOOLS if el else DNF_TOOLS))


class SimError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# small helpers


def log(msg):
    sys.stderr.write("gpufabric-sim: %s\n" % msg)
    sys.stderr.flush()


def fleet_id(fleet):
    """6 hex digits naming a fleet's namespaces (from its absolute path)."""
    return hashlib.sha256(os.path.abspath(fleet).encode()).hexdigest()[:6]


def node_ns(fid, node):
    return "gf-%s-%s" % (fid, node)


def leaf_ns(fid):
    return "gf-%s.leaf" % fid


def peer_name(index, rail):
    return "n%dr%d" % (index, rail)


def ip_bin():
    for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"):
        if os.path.exists(p):
            return p
    found = shutil.which("ip")
    if not found:
        raise SimError("iproute2 'ip' not found")
    return found


def run(argv, input_text=None, check=True, env=None):
    p = subprocess.run(argv, input=input_text, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env, check=False)
    if check and p.returncode != 0:
        raise SimError("%s failed (rc=%d): %s" % (" ".join(argv[:6]), p.returncode, p.stderr.strip()))
    return p


# what a node's Python has besides the standard library: its distribution's python3-yaml (netplan needs it) and
# python3-pyroute2 (the collection's per-rail routing does); never Ansible
NODE_LIBRARIES = ("yaml", "pyroute2")


def make_node_python(fleet, python):
    """The nodes' Python below ``fleet``: a venv of ``python``'s base interpreter, without pip, without
    site-packages, with ``NODE_LIBRARIES`` linked in from ``python``'s. SimError when it can import ``ansible``."""
    path = os.path.join(fleet, "node-python")
    run([python, "-m", "venv", "--without-pip", path])
    node = os.path.join(path, "bin", "python3")
    purelib = run([node, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    where = json.loads(run([python, "-I", "-c", "import importlib.util, json, sys; print(json.dumps(dict((n, "
                            "importlib.util.find_spec(n).submodule_search_locations[0]) for n in sys.argv[1:])))"]
                           + list(NODE_LIBRARIES)).stdout)
    for name in NODE_LIBRARIES:
        os.symlink(where[name], os.path.join(purelib, name))
    probe = run([node, "-I", "-c", "import ansible"], check=False)
    if "No module named 'ansible'" not in probe.stderr:
        raise SimError("the node Python %s can import ansible (rc=%d): a node's Python has no Ansible"
                       % (node, probe.returncode))
    return node


def ip_batch(lines, ns=None, check=True, force=False):
    if not lines:
        return None
    argv = [ip_bin()] + (["-n", ns] if ns else []) + (["-force"] if force else []) + ["-batch", "-"]
    return run(argv, "\n".join(lines) + "\n", check=check)


def write_file(path, text, mode=0o644):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def load_fleet(fleet):
    path = os.path.join(fleet, "fleet.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        raise SimError("%s is not a fleet (no fleet.json)" % fleet)


def save_fleet(fleet, data):
    write_file(os.path.join(fleet, "fleet.json"), json.dumps(data, indent=1, sort_keys=True) + "\n")


def get_node(data, name):
    for n in data["nodes"]:
        if n["name"] == name:
            return n
    raise SimError("no node %r in fleet (nodes: %s)" % (name, ", ".join(n["name"] for n in data["nodes"])))


def netns_list():
    p = run([ip_bin(), "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def free_ports(count, base):
    """``count`` ports >= base that can be bound on 127.0.0.1 now."""
    ports = []
    port = base
    while len(ports) < count:
        if port > 65000:
            raise SimError("no free ports above %d" % base)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            ports.append(port)
        except OSError:
            pass
        finally:
            s.close()
        port += 1
    return ports


# --------------------------------------------------------------------------------------------
# argument parsing


def parse_node_specs(nodes, node_args, topology):
    """[(name, topology)] from --nodes/--topology or repeated --node NAME=TOPOLOGY."""
    if node_args:
        if nodes is not None:
            raise SimError("give either --nodes/--topology or --node NAME=TOPOLOGY, not both")
        specs = []
        for item in node_args:
            if "=" in item:
                name, topo = item.split("=", 1)
            else:
                name, topo = item, topology or DEFAULT_TOPOLOGY
            specs.append((name, topo))
    else:
        count = 1 if nodes is None else nodes
        if count < 1:
            raise SimError("--nodes must be at least 1")
        specs = [("sim%d" % i, topology or DEFAULT_TOPOLOGY) for i in range(1, count + 1)]
    seen = set()
    for name, topo in specs:
        if not NODE_NAME.match(name):
            raise SimError("bad node name %r (lowercase letters, digits, '-'; up to 31 characters)" % name)
        if name in seen:
            raise SimError("node %r given twice" % name)
        if not topo:
            raise SimError("node %r has an empty topology" % name)
        seen.add(name)
    if len(specs) > 250:
        raise SimError("at most 250 nodes (the node index is the last octet of the rail addresses)")
    return specs


def build_parser():
    p = argparse.ArgumentParser(prog="python -m gpufabric_sim", description="Simulated HGX node fleets.")
    sub = p.add_subparsers(dest="cmd")
    sub.required = True
    c = sub.add_parser("create", help="create a fleet")
    c.add_argument("--fleet", required=True)
    c.add_argument("--topology", help="topology name or YAML path for --nodes (default %s)" % DEFAULT_TOPOLOGY)
    c.add_argument("--nodes", type=int, help="number of nodes sim1..simN (default 1)")
    c.add_argument("--node", action="append", default=[], metavar="NAME=TOPOLOGY",
                   help="a node with its topology (repeat to mix topologies)")
    c.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    c.add_argument("--bootloader", action="append", default=[], metavar="NAME=KIND",
                   help="boot loader of a node, replacing its topology's (%s); repeat per node"
                        % "|".join(BOOTLOADERS))
    d = sub.add_parser("destroy", help="stop and remove a fleet (idempotent)")
    d.add_argument("--fleet", required=True)
    ls = sub.add_parser("list", help="nodes of a fleet, or the shipped topologies without --fleet")
    ls.add_argument("--fleet")
    ls.add_argument("--json", action="store_true")
    e = sub.add_parser("exec", help="run a command inside a node like an SSH login")
    e.add_argument("--fleet", required=True)
    e.add_argument("--node", required=True)
    e.add_argument("argv", nargs=argparse.REMAINDER)
    h = sub.add_parser("hash", help="sha256 over the node's root tree")
    h.add_argument("--fleet", required=True)
    h.add_argument("--node", required=True)
    r = sub.add_parser("reboot", help="simulated reboot of a node")
    r.add_argument("--fleet", required=True)
    r.add_argument("--node", required=True)
    rr = sub.add_parser("reregister", help="RDMA device re-registration (driver reload) of one ibdev")
    rr.add_argument("--fleet", required=True)
    rr.add_argument("--node", required=True)
    rr.add_argument("--ibdev", required=True)
    return p


# --------------------------------------------------------------------------------------------
# rendering


def render_wrapper(python, module, func, with_argv0):
    call = "sys.argv" if with_argv0 else "sys.argv[1:]"
    return ("#!%s\n"
            "# gpufabric-sim node tool: runs %s.%s with the node's GPUFABRIC_SYSROOT.\n"
            "import sys\n"
            "sys.path.insert(0, %r)\n"
            "from %s import %s as _main\n"
            "sys.exit(_main(%s))\n" % (python, module, func, LAB_DIR, module, func, call))


def render_enter(node_dir, ns, ip):
    root = os.path.join(node_dir, "root")
    bindir = os.path.join(node_dir, "bin")
    q = shlex.quote
    return (
        "#!/bin/sh\n"
        "# Login of a gpufabric-sim node (sshd ForceCommand; also used by 'python -m gpufabric_sim exec').\n"
        "GPUFABRIC_SYSROOT=%s; export GPUFABRIC_SYSROOT\n"
        "GPUFABRIC_SIM_NODE=%s; export GPUFABRIC_SIM_NODE\n"
        "PATH=%s:\"${PATH:-%s}\"; export PATH\n"
        "if [ -z \"${SSH_ORIGINAL_COMMAND:-}\" ]; then\n"
        "    exec %s netns exec %s /bin/bash -i\n"
        "fi\n"
        "exec %s netns exec %s /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n"
        % (q(root), q(os.path.basename(node_dir)), q(bindir), LOGIN_PATH, ip, q(ns), ip, q(ns)))


def sftp_server():
    for p in SFTP_SERVERS:
        if os.path.exists(p):
            return p
    return "internal-sftp"


def render_sshd_config(fleet, node_dir, port):
    return "\n".join([
        "# sshd of gpufabric-sim node %s" % os.path.basename(node_dir),
        "ListenAddress 127.0.0.1",
        "Port %d" % port,
        "HostKey %s" % os.path.join(fleet, "ssh_host_ed25519_key"),
        "PidFile %s" % os.path.join(node_dir, "sshd.pid"),
        "AuthorizedKeysFile %s" % os.path.join(fleet, "authorized_keys"),
        "StrictModes no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "AllowAgentForwarding no",
        "PermitTunnel no",
        "MaxStartups 128:30:256",
        "MaxSessions 128",
        "LoginGraceTime 30",
        "LogLevel INFO",
        "Subsystem sftp %s" % sftp_server(),
        "ForceCommand %s" % os.path.join(node_dir, "enter"),
        "",
    ])


def inventory_data(fleet, data):
    hosts = {}
    for n in data["nodes"]:
        hosts[n["name"]] = {
            "ansible_host": "127.0.0.1",
            "ansible_port": n["port"],
            "ansible_user": "root",
            "ansible_ssh_private_key_file": os.path.join(fleet, "id_ed25519"),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                       "-o IdentitiesOnly=yes -o LogLevel=ERROR",
            "ansible_python_interpreter": data.get("node_python") or data["python"],
            "gpufabric_sim_topology": n["topology"],
            "gpufabric_sim_bootloader": n.get("bootloader"),
            "gpufabric_sim_root": n["root"],
            "gpufabric_sim_fleet": fleet,
        }
    return {"all": {"children": {"gpufabric_sim": {"hosts": hosts}}}}


def render_inventory(fleet, data):
    import yaml
    return ("# Generated by python -m gpufabric_sim create; removed by destroy.\n"
            + yaml.safe_dump(inventory_data(fleet, data), default_flow_style=False, sort_keys=True))


# --------------------------------------------------------------------------------------------
# trees


# What ``hash`` leaves out of a node: the node lock's directory (plugins/module_utils/host/nodelock.py), which any
# writer creates under /run, a tmpfs on a host, and which holds nothing while no writer runs: not node state.
RUNTIME_DIRS = ("run/gpufabric",)


def tree_hash(root, exclude=()):
    """sha256 over a tree: relative paths, type+mode, file contents, symlink targets (never followed); the
    relative paths in ``exclude`` (and what is below them) are left out."""
    h = hashlib.sha256()

    def entry(path, rel):
        if rel in exclude:
            return
        st = os.lstat(path)
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        h.update(("%o" % st.st_mode).encode() + b"\0")
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
        elif stat.S_ISREG(st.st_mode):
            fh = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 16), b""):
                    fh.update(chunk)
            h.update(b"F" + fh.digest())
        elif stat.S_ISDIR(st.st_mode):
            h.update(b"D")
            for name in sorted(os.listdir(path)):
                entry(os.path.join(path, name), rel + "/" + name if rel else name)
        else:
            h.update(b"O")
        h.update(b"\n")

    entry(root, "")
    return h.hexdigest()


def tree_stamp(root):
    """sha256 over every entry's lstat below ``root`` (relative path, mode, owner, inode, size, mtime and ctime in
    ns; symlink targets): a cheaper witness than ``tree_hash`` that a tree was not touched at all. Any write, chmod,
    chown, create, delete or rename moves the ctime of the entry or of its directory, and ctime cannot be set from
    user space, so a rewrite with the same bytes shows too (``tree_hash`` would not see that). Only for a tree that
    stays in one place: a copy has new inodes and times."""
    h = hashlib.sha256()

    def walk(path, rel):
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            st = e.stat(follow_symlinks=False)
            r = rel + "/" + e.name if rel else e.name
            fields = (r, st.st_mode, st.st_uid, st.st_gid, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            line = "%s\0%o %d %d %d %d %d %d\n" % fields
            h.update(line.encode("utf-8", "surrogateescape"))
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(e.path).encode("utf-8", "surrogateescape") + b"\0")
            elif stat.S_ISDIR(st.st_mode):
                walk(e.path, r)

    st = os.lstat(root)
    h.update(("%o %d %d %d\n" % (st.st_mode, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)).encode())
    walk(root, "")
    return h.hexdigest()


def sync_tree(src, dst):
    """Make ``dst`` identical to ``src`` (files, modes, symlinks), keeping unchanged directories' inodes."""
    if not os.path.isdir(dst) or os.path.islink(dst):
        if os.path.lexists(dst):
            os.unlink(dst)
        os.mkdir(dst)
    src_names = set(os.listdir(src))
    for name in os.listdir(dst):
        if name not in src_names:
            p = os.path.join(dst, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
    for name in sorted(src_names):
        s = os.path.join(src, name)
        d = os.path.join(dst, name)
        sst = os.lstat(s)
        try:
            dst_st = os.lstat(d)
        except OSError:
            dst_st = None
        if stat.S_ISLNK(sst.st_mode):
            target = os.readlink(s)
            if dst_st is not None and stat.S_ISLNK(dst_st.st_mode) and os.readlink(d) == target:
                continue
            if dst_st is not None:
                shutil.rmtree(d) if stat.S_ISDIR(dst_st.st_mode) else os.unlink(d)
            os.symlink(target, d)
        elif stat.S_ISDIR(sst.st_mode):
            if dst_st is not None and not stat.S_ISDIR(dst_st.st_mode):
                os.unlink(d)
            sync_tree(s, d)
            os.chmod(d, stat.S_IMODE(sst.st_mode))
        else:
            with open(s, "rb") as f:
                content = f.read()
            if dst_st is not None and not stat.S_ISREG(dst_st.st_mode):
                shutil.rmtree(d) if stat.S_ISDIR(dst_st.st_mode) else os.unlink(d)
                dst_st = None
            same = False
            if dst_st is not None and dst_st.st_size == len(content):
                with open(d, "rb") as f:
                    same = f.read() == content
            if not same:
                with open(d, "wb") as f:
                    f.write(content)
            if dst_st is None or stat.S_IMODE(dst_st.st_mode) != stat.S_IMODE(sst.st_mode):
                os.chmod(d, stat.S_IMODE(sst.st_mode))


def acs_enumeration(topology):
    """{bdf: ctrl} the kernel writes at enumeration, from an expanded topology."""
    out = {}
    for rb in topology.get("root_buses", []):
        stack = list(rb.get("devices", []))
        while stack:
            d = stack.pop()
            if d.get("acs"):
                out[d["bdf"].lower()] = int(d["acs"]["ctrl"])
            stack.extend(d.get("children", []))
    return out


def iommu_type_overrides(topology):
    out = {}
    for rb in topology.get("root_buses", []):
        stack = list(rb.get("devices", []))
        while stack:
            d = stack.pop()
            if d.get("iommu_type"):
                out[d["bdf"].lower()] = d["iommu_type"]
            stack.extend(d.get("children", []))
    return out


def read_iommu_groups(root):
    """{group id: [bdf, ...]} of a tree."""
    base = os.path.join(root, "sys", "kernel", "iommu_groups")
    groups = {}
    for gid in os.listdir(base) if os.path.isdir(base) else []:
        devs = os.path.join(base, gid, "devices")
        groups[gid] = sorted(os.listdir(devs)) if os.path.isdir(devs) else []
    return groups


def _rel_link(target, link):
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


def apply_iommu(root, groups, mode, translated, overrides=None):
    """Make sys/kernel/iommu_groups what a boot with IOMMU ``mode`` creates."""
    overrides = overrides or {}
    base = os.path.join(root, "sys", "kernel", "iommu_groups")
    os.makedirs(base, exist_ok=True)
    pci = os.path.join(root, "sys", "bus", "pci", "devices")
    if mode == "off":
        for gid in os.listdir(base):
            shutil.rmtree(os.path.join(base, gid))
        for bdf in os.listdir(pci) if os.path.isdir(pci) else []:
            link = os.path.join(os.path.realpath(os.path.join(pci, bdf)), "iommu_group")
            if os.path.lexists(link):
                os.unlink(link)
        return
    for gid, bdfs in sorted(groups.items()):
        gdir = os.path.join(base, gid)
        os.makedirs(os.path.join(gdir, "devices"), exist_ok=True)
        gtype = next((overrides[b] for b in bdfs if b in overrides), None)
        gtype = gtype or ("identity" if mode == "identity" else translated)
        with open(os.path.join(gdir, "type"), "w") as f:
            f.write(gtype + "\n")
        rr = os.path.join(gdir, "reserved_regions")
        if not os.path.exists(rr):
            with open(rr, "w") as f:
                f.write("0x00000000fee00000 0x00000000feefffff msi\n")
        for bdf in bdfs:
            ddir = os.path.realpath(os.path.join(pci, bdf))
            if not os.path.isdir(ddir):
                continue
            _rel_link(ddir, os.path.join(gdir, "devices", bdf))
            _rel_link(gdir, os.path.join(ddir, "iommu_group"))


# --------------------------------------------------------------------------------------------
# processes


def _proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return None


def _children_map():
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                data = f.read()
            ppid = int(data[data.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def process_tree(pid):
    kids = _children_map()
    out = []
    stack = [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(kids.get(p, []))
    return out


def _protected():
    """This process and its ancestors (never killed, e.g. when reboot runs inside the node)."""
    pids = set()
    pid = os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                data = f.read()
            pid = int(data[data.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            break
    return pids


def kill_pids(pids, timeout=3.0):
    pids = [p for p in set(pids) if p > 1 and p not in _protected()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + timeout
    alive = pids
    while alive and time.time() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    for p in alive:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path, must_contain):
    """pid from a pid file when that process still runs and its command line names ``must_contain``."""
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    cmd = _proc_cmdline(pid)
    if cmd is None or must_contain not in cmd:
        return None
    return pid


def ns_pids(*names):
    """pids of processes whose network namespace is one of the named ones (one pass over /proc)."""
    inodes = set()
    for ns in names:
        try:
            inodes.add(os.stat(os.path.join("/run/netns", ns)).st_ino)
        except OSError:
            pass
    if not inodes:
        return []
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat("/proc/%s/ns/net" % name).st_ino in inodes:
                    pids.append(int(name))
            except OSError:
                pass
    return pids


# --------------------------------------------------------------------------------------------
# node network


def rail_lines(node, leaf):
    """ip -batch lines (host namespace) creating a node's veth rails directly in their namespaces."""
    lines = []
    for r in node["rails"]:
        lines.append("link add name %s address %s netns %s type veth peer name %s netns %s"
                     % (r["netdev"], r["mac"], node["ns"], r["peer"], leaf))
    return lines


def node_ns_lines(node):
    lines = ["link set dev lo up"]
    for r in node["rails"]:
        lines.append("address add %s dev %s" % (r["ipv4"], r["netdev"]))
        lines.append("link set dev %s up" % r["netdev"])
    return lines


# A RoCE leaf switch's ports carry jumbo frames (9216 is the usual switch setting): the node side of each veth keeps
# the MTU its driver gives it (1500) until the collection sets the rail's MTU, and frames up to 9216 then cross.
SWITCH_MTU = 9216


def leaf_lines(node):
    return ["link set dev %s mtu %d master br0 up" % (r["peer"], SWITCH_MTU) for r in node["rails"]]


def setup_node_network(node, leaf):
    ip_batch(rail_lines(node, leaf))
    ip_batch(node_ns_lines(node), ns=node["ns"])
    ip_batch(leaf_lines(node), ns=leaf)


def apply_boot_sysctls(node):
    """What systemd-sysctl does at boot, for net.* keys only (the only ones namespaced)."""
    settings = bootsim.boot_net_sysctls(node["root"])
    if not settings:
        return []
    code = ("import json,sys\n"
            "errs=[]\n"
            "for rel,val,ign in json.load(sys.stdin):\n"
            "    try:\n"
            "        open('/proc/sys/'+rel,'w').write(val+'\\n')\n"
            "    except OSError as e:\n"
            "        errs.append(rel) if not ign else None\n"
            "print(json.dumps(errs))\n")
    p = run([ip_bin(), "netns", "exec", node["ns"], sys.executable, "-c", code], json.dumps(settings))
    return json.loads(p.stdout or "[]")


# --------------------------------------------------------------------------------------------
# node execution


def login_env():
    return {"PATH": LOGIN_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash",
            "LANG": "C.UTF-8"}


def node_exec(node, argv, capture=False, check=False):
    """Run argv inside the node exactly as an SSH login runs a command (enter + sh -c)."""
    env = login_env()
    env["SSH_ORIGINAL_COMMAND"] = " ".join(shlex.quote(a) for a in argv)
    enter = os.path.join(node["dir"], "enter")
    if capture:
        p = subprocess.run([enter], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
    else:
        p = subprocess.run([enter], env=env, check=False)
    if check and p.returncode != 0:
        raise SimError("%s on %s failed (rc=%d): %s" % (" ".join(argv), node["name"], p.returncode,
                                                        (p.stderr or "").strip() if capture else ""))
    return p


# --------------------------------------------------------------------------------------------
# create


def _import_tree():
    from gpufabric_sim import tree
    from gpufabric_sim import topology
    return tree, topology


def _init_emulators(root, manifest):
    from gpufabric_sim.emulators import dcb, ethtool
    dcb.init_node(root, manifest.get("iproute2_version", "6.1.0"))
    if hasattr(ethtool, "init_node"):
        ethtool.init_node(root, manifest.get("iproute2_version", "6.1.0"))
    for r in manifest.get("rails", []):
        dcb.init_device(root, r["netdev"], r.get("driver", "mlx5_core"))
        ethtool.init_device(root, r["netdev"], r.get("driver", "mlx5_core"))


def _reset_emulators(root, netdevs):
    from gpufabric_sim.emulators import dcb, ethtool
    for netdev in netdevs:
        dcb.reset_device(root, netdev)
        if hasattr(ethtool, "reset_device"):
            ethtool.reset_device(root, netdev)


def prepare_node(fleet, python, name, topo_name, index, fid, topo=None):
    """Build a node's directory (root, bin, enter, topology.json); returns its fleet.json entry."""
    tree, topology = _import_tree()
    if topo is None:
        topo = topology.load(topo_name)
    node_dir = os.path.join(fleet, name)
    root = os.path.join(node_dir, "root")
    os.makedirs(root)
    manifest = tree.build_tree(root, topo, index)
    _init_emulators(root, manifest)
    with open(os.path.join(node_dir, "topology.json"), "w") as f:
        json.dump(topo, f, indent=1, sort_keys=True)
    bindir = os.path.join(node_dir, "bin")
    os.makedirs(bindir)
    for tool, (module, func, argv0) in sorted(node_tools(topo).items()):
        write_file(os.path.join(bindir, tool), render_wrapper(python, module, func, argv0), 0o755)
    ns = node_ns(fid, name)
    write_file(os.path.join(node_dir, "enter"), render_enter(node_dir, ns, ip_bin()), 0o755)
    rails = []
    for i, r in enumerate(manifest.get("rails", [])):
        if len(r["netdev"]) > 15:
            raise SimError("rail name %r is longer than 15 characters" % r["netdev"])
        rails.append({"netdev": r["netdev"], "ibdev": r["ibdev"], "mac": r["mac"], "ipv4": r["ipv4"],
                      "peer": peer_name(index, i)})
    return {"name": name, "index": index, "topology": topo_name, "bootloader": topo["bootloader"], "port": None,
            "ns": ns, "fleet": fleet, "dir": node_dir, "root": root, "rails": rails, "sshd_pid": None}


def start_sshd(node):
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    for f in ("sshd.pid", "sshd.log"):
        if os.path.exists(os.path.join(node["dir"], f)):
            os.unlink(os.path.join(node["dir"], f))
    run([sshd, "-f", os.path.join(node["dir"], "sshd_config"), "-E", os.path.join(node["dir"], "sshd.log")])


def _sshd_failed(node):
    """True once the daemonized sshd logged a fatal error (it daemonizes before it binds its port)."""
    try:
        with open(os.path.join(node["dir"], "sshd.log")) as f:
            return "fatal:" in f.read()
    except OSError:
        return False


def wait_pidfiles(nodes, timeout=20.0):
    """Wait for the sshds' pid files; returns the nodes whose sshd failed or never wrote one."""
    deadline = time.time() + timeout
    pending = list(nodes)
    failed = []
    while pending and time.time() < deadline:
        rest = []
        for n in pending:
            pid = read_pid(os.path.join(n["dir"], "sshd.pid"), n["dir"])
            if pid:
                n["sshd_pid"] = pid
            elif _sshd_failed(n):
                failed.append(n)
            else:
                rest.append(n)
        pending = rest
        if pending:
            time.sleep(0.05)
    return failed + pending


def start_sshds(fleet, nodes, base_port, attempts=5):
    """Give every node a free port and a running sshd.

    Ports are chosen right before the sshds start, under a host-wide lock so concurrent creates do not
    pick the same ones; a port taken by anything else in between shows as sshd's fatal bind error (sshd
    daemonizes first, so its exit status cannot tell) and that node is retried on the next free port.
    """
    import fcntl
    os.makedirs("/run/gpufabric-sim", exist_ok=True)
    with open("/run/gpufabric-sim/ports.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pending = list(nodes)
        port = base_port
        for _attempt in range(attempts):
            ports = free_ports(len(pending), port)
            for n, p in zip(pending, ports):
                n["port"] = p
                write_file(os.path.join(n["dir"], "sshd_config"), render_sshd_config(fleet, n["dir"], p), 0o600)
                start_sshd(n)
            pending = wait_pidfiles(pending)
            if not pending:
                return
            port = max(ports) + 1
            log("sshd failed for %s; trying other ports" % ", ".join(n["name"] for n in pending))
        raise SimError("sshd did not start for %s (see <node>/sshd.log)" % ", ".join(n["name"] for n in pending))


def wait_listening(nodes, timeout=20.0):
    deadline = time.time() + timeout
    for n in nodes:
        while True:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(1.0)
            try:
                s.connect(("127.0.0.1", n["port"]))
                s.close()
                break
            except OSError:
                s.close()
                if time.time() > deadline:
                    raise SimError("sshd of %s does not listen on port %d" % (n["name"], n["port"]))
                time.sleep(0.05)


def start_watcher(fleet, python, name="configfs-watch", module="gpufabric_sim.configfs_watch"):
    logf = open(os.path.join(fleet, name + ".log"), "ab")
    env = dict(os.environ)
    env["PYTHONPATH"] = LAB_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.Popen([python, "-m", module, "--fleet", fleet], stdin=subprocess.DEVNULL,
                         stdout=logf, stderr=logf, env=env, start_new_session=True, close_fds=True)
    logf.close()
    write_file(os.path.join(fleet, name + ".pid"), "%d\n" % p.pid)
    return p.pid


def parse_bootloaders(items, specs):
    """{node: kind} from repeated --bootloader NAME=KIND."""
    names = set(n for n, _t in specs)
    out = {}
    for item in items or []:
        name, sep, kind = item.partition("=")
        if not sep or name not in names:
            raise SimError("--bootloader %r: want NAME=KIND for a node of this fleet (%s)"
                           % (item, ", ".join(sorted(names))))
        if kind not in BOOTLOADERS:
            raise SimError("--bootloader %r: KIND is one of %s" % (item, ", ".join(BOOTLOADERS)))
        out[name] = kind
    return out


def start_nvfs_proc(fleet, python, timeout=20.0):
    """The server of the nodes' /proc/driver/nvidia-fs/modules (nvfs_proc.py); returns once it serves every node."""
    from gpufabric_sim import nvfs_proc
    pid = start_watcher(fleet, python, "nvfs-proc", "gpufabric_sim.nvfs_proc")
    ready = os.path.join(fleet, nvfs_proc.READY)
    deadline = time.time() + timeout
    while not os.path.exists(ready):
        if time.time() > deadline or not _alive(pid):
            raise SimError("the nvidia-fs modules server did not start (see %s)" % os.path.join(fleet, "nvfs-proc.log"))
        time.sleep(0.05)
    return pid


def create(fleet, specs, base_port=DEFAULT_BASE_PORT, python=None, bootloader_of=None):
    """Create a fleet; ``bootloader_of`` ({node: kind}) replaces the topologies' boot loader per node."""
    fleet = os.path.abspath(fleet)
    bootloader_of = bootloader_of or {}
    python = python or sys.executable
    if os.path.exists(os.path.join(fleet, "fleet.json")):
        raise SimError("%s already holds a fleet; destroy it first" % fleet)
    for tool in ("ssh-keygen", "sshd"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            raise SimError("%s not found: install openssh-server (tests/lab/apt-packages.txt)" % tool)
    os.makedirs(fleet, exist_ok=True)
    fid = fleet_id(fleet)
    leaf = leaf_ns(fid)
    taken = set(netns_list())
    if leaf in taken or any(node_ns(fid, n) in taken for n, _t in specs):
        raise SimError("namespaces of fleet %s exist already (gf-%s-*); destroy it first" % (fleet, fid))
    data = {"fleet": fleet, "fleet_id": fid, "python": python, "leaf_ns": leaf, "nodes": [],
            "namespaces": [], "created": time.time()}
    save_fleet(fleet, data)
    try:
        t0 = time.time()
        for key, comment in (("id_ed25519", "gpufabric-sim login"), ("ssh_host_ed25519_key", "gpufabric-sim host")):
            path = os.path.join(fleet, key)
            if not os.path.exists(path):
                run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path])
        shutil.copyfile(os.path.join(fleet, "id_ed25519.pub"), os.path.join(fleet, "authorized_keys"))
        t_py = time.time()
        data["node_python"] = make_node_python(fleet, python)
        data["node_python_s"] = round(time.time() - t_py, 3)
        save_fleet(fleet, data)
        ip_batch(["netns add %s" % leaf])
        data["namespaces"].append(leaf)
        save_fleet(fleet, data)
        ip_batch(["link set dev lo up", "link add name br0 type bridge", "link set dev br0 up"], ns=leaf)
        _tree, topology = _import_tree()
        loaded = {}
        for name, topo_name in specs:
            over = {"bootloader": bootloader_of[name]} if name in bootloader_of else {}
            key = (topo_name, tuple(sorted(over.items())))
            if key not in loaded:
                loaded[key] = topology.load(topo_name, **over)
        jobs = [(fleet, python, name, topo_name, i + 1, fid,
                 loaded[(topo_name, (("bootloader", bootloader_of[name]),) if name in bootloader_of else ())])
                for i, (name, topo_name) in enumerate(specs)]
        workers = min(len(jobs), os.cpu_count() or 1, 8)
        if workers > 1:
            # tree building is file-system bound: one worker per core
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(prepare_node, *job) for job in jobs]
                nodes = [f.result() for f in futures]
        else:
            nodes = [prepare_node(*job) for job in jobs]
        data["nodes"].extend(nodes)
        save_fleet(fleet, data)
        t_tree = time.time()
        ip_batch(["netns add %s" % n["ns"] for n in data["nodes"]])
        data["namespaces"].extend(n["ns"] for n in data["nodes"])
        save_fleet(fleet, data)
        for n in data["nodes"]:
            setup_node_network(n, leaf)
        t_net = time.time()
        start_sshds(fleet, data["nodes"], base_port)
        data["watcher_pid"] = start_watcher(fleet, python)
        data["nvfs_proc_pid"] = start_nvfs_proc(fleet, python)
        save_fleet(fleet, data)
        wait_listening(data["nodes"])
        write_file(os.path.join(fleet, "inventory.yml"), render_inventory(fleet, data))
        data["timing"] = {"trees_s": round(t_tree - t0, 3), "network_s": round(t_net - t_tree, 3),
                          "sshd_s": round(time.time() - t_net, 3), "total_s": round(time.time() - t0, 3)}
        save_fleet(fleet, data)
    except BaseException:
        log("create failed; removing the partial fleet")
        try:
            destroy(fleet)
        except Exception as e:  # report the original failure, not the cleanup's
            log("cleanup after failed create: %s" % e)
        raise
    return data


# --------------------------------------------------------------------------------------------
# destroy


def destroy(fleet):
    """Stop every process of a fleet and remove its namespaces and directory. Idempotent."""
    fleet = os.path.abspath(fleet)
    fid = fleet_id(fleet)
    try:
        data = load_fleet(fleet)
    except (SimError, ValueError):
        data = {"nodes": []}
    fid = data.get("fleet_id", fid)
    node_dirs = [n["dir"] for n in data.get("nodes", [])]
    if os.path.isdir(fleet):
        for name in os.listdir(fleet):
            d = os.path.join(fleet, name)
            if os.path.isfile(os.path.join(d, "enter")) and d not in node_dirs:
                node_dirs.append(d)
    t0 = time.time()
    pids = []
    for pidfile in ("configfs-watch.pid", "nvfs-proc.pid"):
        wpid = read_pid(os.path.join(fleet, pidfile), fleet)
        if wpid:
            pids.append(wpid)
    for d in node_dirs:
        spid = read_pid(os.path.join(d, "sshd.pid"), d)
        if spid:
            pids.extend(process_tree(spid))
    prefix = ("gf-%s-" % fid, "gf-%s." % fid)
    namespaces = [ns for ns in netns_list() if ns.startswith(prefix)]
    pids.extend(ns_pids(*namespaces))
    kill_pids(pids)
    t1 = time.time()
    ip_batch(["netns del %s" % ns for ns in namespaces], check=False, force=True)
    t2 = time.time()
    if os.path.isdir(fleet):
        shutil.rmtree(fleet)
    return {"killed": sorted(set(pids)), "namespaces": namespaces,
            "timing": {"kill_s": round(t1 - t0, 3), "netns_s": round(t2 - t1, 3), "rm_s": round(time.time() - t2, 3)}}


# --------------------------------------------------------------------------------------------
# reboot / reregister


def udev_add(node, ibdev):
    """Emulate the udev 'add' event of an RDMA device: run the node's matching RUN commands inside it."""
    from gpufabric_sim import udev
    results = []
    for argv in udev.udev_commands(node["root"], udev.infiniband_event(node["root"], ibdev, "add")):
        p = node_exec(node, argv, capture=True)
        results.append({"argv": argv, "rc": p.returncode, "stderr": p.stderr[-2000:]})
    return results


def reboot(fleet, name):
    from gpufabric_sim.units import enabled_units
    fleet = os.path.abspath(fleet)
    data = load_fleet(fleet)
    node = get_node(data, name)
    root = node["root"]
    # the old system goes down: every process in the namespace ends
    kill_pids(ns_pids(node["ns"]))
    with open(os.path.join(node["dir"], "topology.json")) as f:
        topo = json.load(f)
    cmdline, notes = bootloaders.next_boot(root, topo)
    mode = bootsim.iommu_mode(cmdline)
    # pseudo filesystems and /run come back as the kernel creates them: the tree builder is
    # deterministic, so a scratch build of the same topology is the node's boot state; built with
    # the IOMMU on, it also gives the group layout when this boot turns the IOMMU on
    tree, _topology = _import_tree()
    scratch = tempfile.mkdtemp(prefix="boot-", dir=fleet)
    try:
        boot_topo = dict(topo)
        boot_topo["iommu"] = "translated" if topo.get("iommu") == "off" else topo.get("iommu")
        tree.build_tree(scratch, boot_topo, node["index"])
        groups = read_iommu_groups(scratch)
        if topo.get("iommu") == "off":
            apply_iommu(scratch, {}, "off", "")
        for d in VOLATILE_DIRS:
            src, dst = os.path.join(scratch, d), os.path.join(root, d)
            if os.path.isdir(src):
                sync_tree(src, dst)
            elif os.path.isdir(dst):
                shutil.rmtree(dst)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_file(os.path.join(root, "proc", "cmdline"), cmdline.strip() + "\n", 0o444)
    _wait_nvfs_served(fleet, root)
    acs = bootsim.boot_acs(root, acs_enumeration(topo), cmdline)
    apply_iommu(root, groups, mode, bootsim.translated_type(cmdline), iommu_type_overrides(topo))
    _reset_emulators(root, [r["netdev"] for r in node["rails"]])
    # a fresh network namespace: default sysctls, no routes or rules, rails as the driver creates them
    for r in node["rails"]:
        run([ip_bin(), "-n", node["ns"], "link", "del", "dev", r["netdev"]], check=False)
    run([ip_bin(), "netns", "del", node["ns"]], check=False)
    ip_batch(["netns add %s" % node["ns"]])
    setup_node_network(node, data["leaf_ns"])
    sysctl_errors = apply_boot_sysctls(node)
    # coldplug: udev 'add' for every RDMA device, then the enabled units
    udev = []
    for r in node["rails"]:
        udev.extend(udev_add(node, r["ibdev"]))
    units = []
    for unit in enabled_units(root):
        p = node_exec(node, ["systemctl", "start", unit], capture=True)
        units.append({"unit": unit, "rc": p.returncode, "stderr": p.stderr[-2000:]})
    degraded = bool(sysctl_errors) or any(x["rc"] != 0 for x in udev + units)
    return {"node": name, "cmdline": cmdline.strip(), "iommu": mode, "acs": acs, "udev": udev, "units": units,
            "sysctl_errors": sysctl_errors, "degraded": degraded, "notes": notes}


def _wait_nvfs_served(fleet, root):
    """After the tree sync put back a regular nvidia-fs modules file: wait for the fleet's server to take it over."""
    from gpufabric_sim import nvfs_proc
    if os.path.isdir(os.path.join(root, "proc", "driver", "nvidia-fs")) and \
            read_pid(os.path.join(fleet, "nvfs-proc.pid"), fleet):
        if not nvfs_proc.wait_served(root):
            log("the nvidia-fs modules server did not take %s over again" % root)


def reregister(fleet, name, ibdev):
    fleet = os.path.abspath(fleet)
    data = load_fleet(fleet)
    node = get_node(data, name)
    rails = [r for r in node["rails"] if r["ibdev"] == ibdev]
    if not rails:
        raise SimError("node %s has no RDMA device %r (has: %s)"
                       % (name, ibdev, ", ".join(r["ibdev"] for r in node["rails"])))
    group = os.path.join(node["root"], "sys", "kernel", "config", "rdma_cm", ibdev)
    if os.path.isdir(group):
        shutil.rmtree(group)
    _reset_emulators(node["root"], [r["netdev"] for r in rails])
    return {"node": name, "ibdev": ibdev, "udev": udev_add(node, ibdev)}


# --------------------------------------------------------------------------------------------
# CLI


def node_rows(data):
    rows = []
    for n in data["nodes"]:
        alive = bool(read_pid(os.path.join(n["dir"], "sshd.pid"), n["dir"]))
        rows.append({"name": n["name"], "topology": n["topology"], "port": n["port"], "ns": n["ns"],
                     "sshd": "running" if alive else "stopped", "rails": len(n["rails"]), "root": n["root"]})
    return rows


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "create":
            specs = parse_node_specs(args.nodes, args.node, args.topology)
            data = create(args.fleet, specs, args.base_port, bootloader_of=parse_bootloaders(args.bootloader, specs))
            print(json.dumps({"fleet": data["fleet"], "inventory": os.path.join(data["fleet"], "inventory.yml"),
                              "nodes": [n["name"] for n in data["nodes"]], "timing": data["timing"]}, indent=1))
            return 0
        if args.cmd == "destroy":
            print(json.dumps(destroy(args.fleet)))
            return 0
        if args.cmd == "list":
            if not args.fleet:
                from gpufabric_sim import topology
                names = topology.names()
                print(json.dumps(names) if args.json else "\n".join(names))
                return 0
            rows = node_rows(load_fleet(os.path.abspath(args.fleet)))
            if args.json:
                print(json.dumps(rows, indent=1))
            else:
                for r in rows:
                    print("%(name)-10s %(topology)-22s port=%(port)-6d %(sshd)-8s rails=%(rails)d ns=%(ns)s" % r)
            return 0
        if args.cmd == "exec":
            argv_ = list(args.argv)
            if argv_ and argv_[0] == "--":
                argv_ = argv_[1:]
            data = load_fleet(os.path.abspath(args.fleet))
            node = get_node(data, args.node)
            if not argv_:
                env = login_env()
                os.execve(os.path.join(node["dir"], "enter"), [os.path.join(node["dir"], "enter")], env)
            return node_exec(node, argv_).returncode
        if args.cmd == "hash":
            data = load_fleet(os.path.abspath(args.fleet))
            print(tree_hash(get_node(data, args.node)["root"], RUNTIME_DIRS))
            return 0
        if args.cmd == "reboot":
            print(json.dumps(reboot(args.fleet, args.node), indent=1))
            return 0
        if args.cmd == "reregister":
            print(json.dumps(reregister(args.fleet, args.node, args.ibdev), indent=1))
            return 0
    except (SimError, ValueError) as e:
        log(str(e))
        return 1
    return 2
