# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs_modules: what its own tests left unseen (make mutation's survivors): a version holding a colon, lines without
a name, the reasons of storage_check word for word, and read_held on the running host's own /dev."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import nvfs_modules as nm


def test_parse_modules_splits_at_the_first_colon_and_needs_a_name():
    text = "rpcrdma: (null)\nnvme: 2.1:rc3\n: orphan\n   : blank\nno colon here\n\n  lnet :  x  \n"
    assert nm.parse_modules(text) == {"rpcrdma": "(null)", "nvme": "2.1:rc3", "lnet": "x"}
    assert nm.parse_modules(None) == {} and nm.parse_modules("") == {}


HELD = {"device": "/dev/nvidia-fs0", "error": None, "modules": {"rpcrdma": "(null)", "nvme": "1.0"}}


@pytest.mark.parametrize("held,module,expect", [
    (HELD, "rpcrdma", (True, "rpcrdma is listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held "
                             "open (rpcrdma: (null))")),
    (HELD, "lnet", (False, "lnet is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open "
                           "(listed: nvme, rpcrdma): the loaded lnet does not register with nvidia-fs (it does not "
                           "export lustre_v1_register_nvfs_dma_ops - in-tree module or a client built without the "
                           "nvidia-fs hook - or the registration failed, see dmesg 'nvfs registration failed'), so "
                           "GDS cannot use it")),
    (dict(HELD, modules={}), "vastnfs", (
        False, "vastnfs is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open (listed: "
               "none): the loaded vastnfs does not register with nvidia-fs (it does not export its nvidia-fs "
               "registration function - in-tree module or a client built without the nvidia-fs hook - or the "
               "registration failed, see dmesg 'nvfs registration failed'), so GDS cannot use it")),
    (dict(HELD, error="/dev/nvidia-fs0 cannot be opened: Permission denied"), "rpcrdma", (
        False, "/dev/nvidia-fs0 cannot be opened: Permission denied: whether nvidia-fs registers rpcrdma is unknown "
               "(it lists storage modules only while one of its devices is held open)")),
])
def test_storage_check_reasons(held, module, expect):
    assert nm.storage_check(held, module) == expect


@pytest.mark.skipif(any(n.startswith("nvidia-fs") for n in os.listdir("/dev")), reason="this host has nvidia-fs")
def test_read_held_defaults_to_the_running_host():
    assert nm.read_held() == {"device": None, "held": False, "text": None, "modules": {},
                              "error": "no /dev/nvidia-fs<N> device exists to hold open (nvidia-fs creates them when "
                                       "it loads)"}
