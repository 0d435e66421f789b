# -*- coding: utf-8 -*-
"""playbooks/tasks/concerns.yml's contradiction check, run for real by ansible-playbook: the role variables are
handed over by name (the concern_vars lookup) and judged in Python (role_conflicts), with the roles' defaults
and an inventory's overrides as the play sees them. Local connection; no role runs (gpufabric_fix_roles: []), and
discovery reads a simulated node's tree (GPUFABRIC_SYSROOT), never this host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
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
