# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-fs's ``/proc/driver/nvidia-fs/modules`` for unit-test sysroots, with the driver's lifetime.

A simulated fleet serves that file as a FIFO (tests/lab/gpufabric_sim/nvfs_proc.py). A unit-test tree has no
server, so ``install(monkeypatch)`` makes every ``Sysroot.read_raw`` of the file (while it exists in the tree) return
``nvfs_proc.modules_text(root)``: the function the fleet's server answers with, computed at the read from the real
``/proc/<pid>/fd`` holders of the tree's ``dev/nvidia-fs<N>`` and its hook table. Only the delivery differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from gpufabric_sim import nvfs_proc

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def install(monkeypatch):
    real = Sysroot.read_raw

    def read_raw(self, p, default=None):
        if p == nvfs_modules.MODULES and os.path.isfile(self.path(p)):
            return nvfs_proc.modules_text(self.root)
        return real(self, p, default)

    monkeypatch.setattr(Sysroot, "read_raw", read_raw)


def load_driver(root, hooks=None):
    """nvidia-fs loaded in a bare tree (``sys/module/nvidia_fs``, devices, idle modules file) and storage modules
    loaded with their hooks: ``{name: True | False | errno}`` (see ``nvfs_proc.load_module``)."""
    os.makedirs(os.path.join(root, "sys", "module", "nvidia_fs"), exist_ok=True)
    nvfs_proc.install_driver(root)
    for name, hook in sorted((hooks or {}).items()):
        nvfs_proc.load_module(root, name, hook)
