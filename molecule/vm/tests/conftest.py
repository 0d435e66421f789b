# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers of the `vm` scenario's verify tests: the guest is reached by testinfra over the scenario's inventory;
playbooks run from the controller with the same inventory (drift.yml, a second roce_qos run)."""
from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import time

import pytest

__metaclass__ = type

PROJECT = os.environ.get('MOLECULE_PROJECT_DIRECTORY') or os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SCENARIO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
WORK = os.environ.get('GPUFABRIC_VM_MOLECULE') or os.path.join(PROJECT, '.cache', 'vm-molecule')
INVENTORY = os.path.join(WORK, 'inventory')


def log(msg):
    sys.stderr.write('[vm-verify] %s\n' % msg)
    sys.stderr.flush()


def playbook(path, *extra, **kw):
    """ansible-playbook PATH against the lab node; returns (rc, output). Bounded by `timeout` seconds."""
    env = dict(os.environ)
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(PROJECT, '.build'))
    env['ANSIBLE_HOST_KEY_CHECKING'] = 'False'
    env['ANSIBLE_PIPELINING'] = 'True'
    env['ANSIBLE_FORCE_COLOR'] = 'False'
    env['ANSIBLE_NOCOLOR'] = 'True'
    # per-task wall times in the output, kept below WORK/playbooks/ (where a VM run's minutes go)
    env['ANSIBLE_CALLBACKS_ENABLED'] = 'ansible.posix.profile_tasks'
    binary = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    argv = [binary if os.path.exists(binary) else 'ansible-playbook', '-i', INVENTORY, path] + list(extra)
    start = time.time()
    proc = subprocess.run(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=kw.get('timeout', 600), check=False)
    out = proc.stdout.decode('utf-8', 'replace')
    logs = os.path.join(WORK, 'playbooks')
    os.makedirs(logs, exist_ok=True)
    saved = os.path.join(logs, '%s-%d.log' % (os.path.basename(path), len(os.listdir(logs)) + 1))
    with open(saved, 'w') as f:
        f.write(' '.join(argv) + '\n' + out)
    log('%s %s: rc=%d in %.1f s (output: %s)'
        % (os.path.basename(path), ' '.join(extra), proc.returncode, time.time() - start, saved))
    return proc.returncode, out


def recap(out, host):
    """The PLAY RECAP counters of one host as a dict."""
    for line in out.splitlines():
        if line.startswith(host + ' ') and 'ok=' in line:
            return dict((k, int(v)) for k, v in (f.split('=') for f in line.split(':', 1)[1].split()))
    raise AssertionError('no PLAY RECAP line for %s in:\n%s' % (host, out[-3000:]))


def wait_for(probe, timeout, interval=1.0):
    """Call probe() until it returns a true value or timeout seconds pass; returns the last value."""
    deadline = time.time() + timeout
    value = probe()
    while not value and time.time() < deadline:
        time.sleep(interval)
        value = probe()
    return value


@pytest.fixture(scope='session')
def lab_vars(request):
    """The lab host's variables (inventory + group_vars), as Ansible sees them."""
    out = subprocess.check_output(['ansible-inventory', '-i', INVENTORY, '--list'],
                                  env=dict(os.environ, ANSIBLE_NOCOLOR='True'))
    data = json.loads(out.decode('utf-8'))
    hosts = data['lab']['hosts']
    assert len(hosts) == 1, hosts
    host = hosts[0]
    hv = dict(data['_meta']['hostvars'][host])
    hv['inventory_hostname'] = host
    return hv


@pytest.fixture(scope='session')
def rails(lab_vars):
    return list(lab_vars['gpufabric_lab_rails'])


@pytest.fixture(scope='session', autouse=True)
def evidence_start(lab_vars):
    """The evidence timer's finished runs this boot and the timestamp node_exporter serves, read when verify starts.
    test_70 waits for a run after this point: the timer (every persistence_evidence_interval s) has made one long
    before test_70 runs, so the tests in between overlap that wait instead of adding to it (up to one interval,
    300 s, of the VM lab's time)."""
    import testinfra
    import test_70_evidence as ev
    host = testinfra.get_host('ansible://%s' % lab_vars['inventory_hostname'], ansible_inventory=INVENTORY)
    start = {'runs': ev.runs(host), 'stamp': ev.served_stamp(host), 'at': time.time()}
    log('evidence at the start of verify: runs this boot %s, served timestamp %s' % (start['runs'], start['stamp']))
    return start
