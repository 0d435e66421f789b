# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufabric.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A capture of the lab node (playbooks/capture.yml, masked as users share it) replays on the controller through
discovery to the facts the node's own discovery pass gave: the real Debian kernel's sysfs (virtio NICs, Soft-RoCE,
emulated root ports) survives the tarball. The capture is kept in the scenario's work directory
(``captures/``); tests/fixtures/captures/vm-lab.* is a copy of one."""
from __future__ import absolute_import, division, print_function

import json
import os
import platform

from conftest import PROJECT, WORK, log, playbook

from ansible_collections.gpufabric.node.plugins.module_utils.report import capture as C
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology as T
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type


def test_capture_replays_to_the_live_facts(tmp_path, lab_vars):
    out_dir = os.path.join(WORK, 'captures')
    rc, out = playbook(os.path.join(PROJECT, 'playbooks', 'capture.yml'), '-e', 'gpufabric_capture_dir=%s' % out_dir)
    assert rc == 0, out[-3000:]
    prefix = os.path.join(out_dir, lab_vars['inventory_hostname'])
    with open(prefix + '.facts.json') as f:
        live = json.load(f)
    root = C.unpack(prefix + '.tar.gz', str(tmp_path))
    with open(os.path.join(root, C.MANIFEST)) as f:
        manifest = json.load(f)
    replayed = json.loads(json.dumps(T.discover(Sysroot(root), manifest['gather_subset'])))
    if manifest['architecture'] != platform.machine():
        replayed['architecture'] = manifest['architecture']
    size = os.path.getsize(prefix + '.tar.gz')
    log('capture %s.tar.gz: %d bytes, %d rails' % (prefix, size, len(live.get('rails') or [])))
    assert replayed == live
    assert live.get('rails'), 'the lab node has rails; a capture without them is not the node'
