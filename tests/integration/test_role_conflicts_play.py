# -*- coding: utf-8 -*-
"""playbooks/tasks/concerns.yml's contradiction check, run for real by ansible-playbook: the role variables are
handed over by name (the concern_vars lookup) and judged in Python (role_conflicts), with the roles' defaults
and an inventory's overrides as the play sees them. Local connection; no role runs (gpufabric_fix_roles: []), and
discovery reads a simulated node's tree (GPUFABRIC_SYSROOT), never this host.

A role run with a variable the role does not know (the unknown_role_vars lookup, the first task of every role):
roce_qos on two local hosts with an empty tree, so the role stops at its rail check after the warning, or at the
check itself with gpufabric_strict_vars."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest

import fleet
from gpufabric_sim import tree as sim_tree

PLAY = """
- name: The contradiction check of the concerns, as provision, drift and report run it
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    gpufabric_fix_roles: []
  tasks:
    - name: The concerns
      ansible.builtin.import_tasks: %s
    - name: What the check found
      ansible.builtin.copy:
        content: "{{ {'conflicts': __gpufabric_conflicts, 'concerns': gpufabric_concerns} | to_json }}"
        dest: %s
        mode: "0600"
"""


@pytest.fixture
def play(tmp_path):
    root = str(tmp_path / "node")
    sim_tree.build_tree(root, "hgx-h200")
    out = str(tmp_path / "out.json")
    path = str(tmp_path / "play.yml")
    with open(path, "w") as f:
        f.write(PLAY % (os.path.join(fleet.REPO, "playbooks", "tasks", "concerns.yml"), out))

    def run(*extra):
        e = fleet.env()
        e["GPUFABRIC_SYSROOT"] = root
        argv = [os.path.join(fleet.BIN, "ansible-playbook"), "-i", "localhost,", path,
                "-e", "ansible_python_interpreter=" + sys.executable]
        p = subprocess.run(argv + list(extra),
                           env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=600, check=False)
        assert p.returncode == 0 and "rescued=0" in p.stdout, p.stdout[-3000:]
        with open(out) as f:
            return json.load(f)
    return run


def test_the_role_defaults_agree(play):
    got = play()
    assert got["conflicts"] == []
    assert got["concerns"] == {}   # no role ran: nothing recorded, nothing marked


def test_a_contradiction_fails_every_concern_before_any_role(play):
    got = play("-e", "nccl_ib_tc=98")
    assert got["conflicts"] and all("nccl_ib_tc" in m for m in got["conflicts"])
    assert got["concerns"] and all(c["status"] == "error" and "contradict" in c["reason"]
                                   for c in got["concerns"].values())


def test_the_dscp_map_the_roles_derive_follows_the_dscp(play):
    """roce_qos_dscp_map unset: the lossless entry follows roce_qos_dscp (derived in the dcb spec, not in Jinja), so
    moving the DSCP alone contradicts the ToS, and moving both agrees."""
    assert play("-e", "roce_qos_dscp=24")["conflicts"]
    assert play("-e", '{"roce_qos_dscp": 24, "roce_qos_tos": 98, "nccl_ib_tc": 98}')["conflicts"] == []


ROLE_PLAY = """
- name: A role run with a variable the role does not know
  hosts: all
  connection: local
  gather_facts: false
  tasks:
    - name: The role
      ansible.builtin.include_role:
        name: gpufabric.node.roce_qos
"""
WARNING = ("[WARNING]: roce_qos_pfc_priority is not a variable of the role gpufabric.node.roce_qos (not an option in "
           "its meta/argument_specs.yml); did you mean roce_qos_pfc_priorities?")


@pytest.mark.parametrize("strict", [False, True])
def test_a_misspelled_role_variable_warns_once_or_fails_in_strict_mode(tmp_path, strict):
    root = tmp_path / "node"
    root.mkdir()
    path = tmp_path / "play.yml"
    path.write_text(ROLE_PLAY)
    e = fleet.env()
    e["GPUFABRIC_SYSROOT"] = str(root)
    extra = {"roce_qos_pfc_priority": [4], "gpufabric_strict_vars": strict}
    p = subprocess.run([os.path.join(fleet.BIN, "ansible-playbook"), "-i", "node1,node2", str(path),
                        "-e", "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(extra)],
                       env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=600, check=False)
    out = " ".join(p.stdout.split())
    assert p.returncode == 2, p.stdout[-3000:]
    if strict:
        # the role stops at its first task, naming the variable and the option meant, before it reads the node
        assert "Unknown role variables (gpufabric_strict_vars is true): roce_qos_pfc_priority is not" in out
        assert "[WARNING]" not in out and "Discover the rails" not in out, p.stdout[-3000:]
    else:
        # one warning for the run (both hosts), then the role goes on without the variable: no rails in the tree
        assert out.count(WARNING) == 1, p.stdout[-3000:]
        assert "No rails: no RDMA NIC is paired" in out and "Unknown role variables" not in out
        assert re.findall(r"(node[12]) : ok=3 changed=0 unreachable=0 failed=1", out) == ["node1", "node2"], out
