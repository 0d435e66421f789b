# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The molecule `vm` scenario (real kernel under QEMU, tests/lab/vm) step by step, with per-step timings.

Opt-in: it boots a VM and takes 12-20 minutes on 2 cores, so it runs only with GPUFABRIC_VM_SCENARIO=1
(`GPUFABRIC_VM_SCENARIO=1 .venv/bin/pytest -s tests/integration/test_vm_scenario.py`). destroy runs at the end
whatever happened, so QEMU (stopped by its own pidfile) and the overlay never outlive the test.
"""
from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess
import sys
import time

import pytest

__metaclass__ = type

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BIN = os.path.dirname(sys.executable)
STEPS = ['destroy', 'syntax', 'create', 'prepare', 'converge', 'idempotence', 'side_effect', 'verify']
# bounds per step (seconds): create includes a cold image build (about 8 minutes here)
LIMITS = {'create': 1500, 'converge': 1200, 'verify': 1500}


def why_not():
    if os.environ.get('GPUFABRIC_VM_SCENARIO') != '1':
        return 'opt-in: set GPUFABRIC_VM_SCENARIO=1 (boots a QEMU VM, 12-20 minutes)'
    if os.geteuid() != 0:
        return 'needs root (apt-get for the lab packages, debootstrap)'
    if not os.path.exists(os.path.join(BIN, 'molecule')):
        return 'molecule not installed beside %s' % sys.executable
    if not shutil.which('qemu-system-x86_64') and not shutil.which('apt-get'):
        return 'no qemu-system-x86_64 and no apt-get to install it'
    return None


def molecule(step):
    env = dict(os.environ)
    env['PATH'] = BIN + os.pathsep + env.get('PATH', '')
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(REPO, '.build'))
    start = time.time()
    proc = subprocess.run([os.path.join(BIN, 'molecule'), step, '-s', 'vm'], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMITS.get(step, 900), check=False)
    return proc.returncode, proc.stdout.decode('utf-8', 'replace'), time.time() - start


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_vm_scenario():
    os.makedirs(os.path.join(REPO, '.build', 'ansible_collections', 'gpufabric'), exist_ok=True)
    link = os.path.join(REPO, '.build', 'ansible_collections', 'gpufabric', 'node')
    if not os.path.exists(link):
        os.symlink(REPO, link)
    timings = []
    failed = None
    try:
        for step in STEPS:
            rc, out, secs = molecule(step)
            timings.append((step, secs, rc))
            sys.stderr.write('[vm-scenario] %-12s %7.1f s rc=%d\n' % (step, secs, rc))
            if rc != 0:
                failed = (step, out[-8000:])
                break
    finally:
        rc, out, secs = molecule('destroy')
        timings.append(('destroy', secs, rc))
        sys.stderr.write('[vm-scenario] timings:\n' + ''.join(
            '  %-12s %7.1f s rc=%d\n' % t for t in timings) + '  %-12s %7.1f s\n' % (
            'total', sum(t[1] for t in timings)))
    assert failed is None, 'molecule %s failed:\n%s' % failed
    assert rc == 0, 'molecule destroy failed:\n%s' % out[-4000:]
