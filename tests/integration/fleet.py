# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for integration tests on a simulated fleet: create/destroy, run inside a node, run playbooks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAB = os.path.join(REPO, "tests", "lab")
BUILD = os.path.join(REPO, ".build")
BIN = os.path.dirname(sys.executable)


def why_not():
    """Reason the simulated fleet cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd)"
    ip = shutil.which("ip") or "/usr/sbin/ip"
    try:
        p = subprocess.run([ip, "netns", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError:
        return "iproute2 'ip' not installed"
    if p.returncode != 0:
        return "'ip netns' unavailable: %s" % p.stderr.decode().strip()
    if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")):
        return "openssh-server not installed (tests/lab/apt-packages.txt)"
    if not os.path.exists(os.path.join(BIN, "ansible-playbook")):
        return "ansible-playbook not installed beside %s" % sys.executable
    return None


def env():
    link = os.path.join(BUILD, "ansible_collections", "gpufabric", "node")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link))
        os.symlink(REPO, link)
    e = dict(os.environ)
    e.update(
        PYTHONPATH=os.pathsep.join([BUILD, LAB]),
        ANSIBLE_COLLECTIONS_PATH=BUILD,
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
        PATH=BIN + os.pathsep + e.get("PATH", ""),
    )
    return e


def sim(*args, **kw):
    p = subprocess.run([sys.executable, "-m", "gpufabric_sim"] + list(args), env=env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=kw.get("timeout", 600), check=False)
    if kw.get("check", True):
        assert p.returncode == 0, "gpufabric_sim %s: rc=%d\n%s\n%s" % (args[0], p.returncode, p.stdout, p.stderr)
    return p


@contextlib.contextmanager
def created(path, nodes, base_port):
    """``nodes`` simulated nodes of the default topology at ``path``, their SSH ports from ``base_port``; destroyed
    on leaving. The test is skipped when they cannot be created (the reason is gpufabric_sim's)."""
    p = sim("create", "--fleet", path, "--nodes", str(nodes), "--base-port", str(base_port), check=False)
    if p.returncode != 0:
        pytest.skip("simulated nodes could not be created: %s" % p.stderr[-1500:])
    try:
        yield path
    finally:
        sim("destroy", "--fleet", path, check=False)


class Fleet(object):
    def __init__(self, path, nodes, bootloaders=None):
        self.path = path
        self.nodes = nodes  # {name: topology}
        self.bootloaders = bootloaders or {}  # {name: grub|grubby|systemd-boot|uki|none}
        self.inventory = os.path.join(path, "inventory.yml")

    def create(self):
        args = ["create", "--fleet", self.path]
        for name, topo in sorted(self.nodes.items()):
            args += ["--node", "%s=%s" % (name, topo)]
        for name, kind in sorted(self.bootloaders.items()):
            args += ["--bootloader", "%s=%s" % (name, kind)]
        sim(*args)
        return self

    def destroy(self):
        sim("destroy", "--fleet", self.path, check=False)

    def sh(self, node, script, check=True):
        p = sim("exec", "--fleet", self.path, "--node", node, "--", "/bin/sh", "-c", script, check=False)
        if check:
            assert p.returncode == 0, "%s on %s: rc=%d\n%s\n%s" % (script, node, p.returncode, p.stdout, p.stderr)
        return p

    def hash(self, node):
        return sim("hash", "--fleet", self.path, "--node", node).stdout.strip()

    def root(self, node):
        return os.path.join(self.path, node, "root")

    def playbook(self, playbook, *extra, **kw):
        """``kw``: ``timeout``; ``env``: variables added to the environment of ansible-playbook."""
        cmd = [os.path.join(BIN, "ansible-playbook"), "-i", self.inventory, os.path.join(REPO, "playbooks", playbook)]
        cmd += list(extra)
        e = env()
        e.update(kw.get("env", {}))
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=kw.get("timeout", 900), check=False)
        return p.returncode, p.stdout

    def ansible(self, pattern, module, args, *extra):
        """Ad-hoc module call; returns (rc, {host: result})."""
        e = env()
        e.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
        cmd = [os.path.join(BIN, "ansible"), "-i", self.inventory, pattern, "-m", module]
        if args:
            cmd += ["-a", json.dumps(args)]
        cmd += list(extra)
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=300, check=False)
        data = json.loads(p.stdout)
        results = {}
        for play in data.get("plays", []):
            for task in play.get("tasks", []):
                results.update(task.get("hosts", {}))
        return p.returncode, results


RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(output):
    """{host: {"ok", "changed", "unreachable", "failed"}} from a playbook's PLAY RECAP."""
    out = {}
    for m in RECAP.finditer(output):
        out[m.group(1)] = dict(ok=int(m.group(2)), changed=int(m.group(3)), unreachable=int(m.group(4)),
                               failed=int(m.group(5)))
    return out
