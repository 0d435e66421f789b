# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs_modules: what its own tests left unseen (make mutation's survivors): a version holding a colon, lines without
a name, the reasons of storage_check word for word, and read_held on the running host's own /dev."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules as nm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


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


_CHILD = r"""
import os, sys
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules as nm
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
os.setsid()                                   # a session leader without a controlling terminal, as a daemon is
res = nm.read_held(Sysroot(sys.argv[1]))
try:
    os.close(os.open("/dev/tty", os.O_RDONLY))
    print("held=%s ctty=yes" % res["held"])
except OSError:
    print("held=%s ctty=no" % res["held"])
"""


@pytest.mark.skipif(not os.path.exists("/dev/ptmx"), reason="no pseudo-terminals on this host")
def test_holding_the_device_never_makes_it_the_controlling_terminal(tmp_path):
    """O_NOCTTY: whatever /dev/nvidia-fs0 turns out to be (here a pseudo-terminal), opening it to hold it must not
    give the (root) process a controlling terminal that the terminal's owner could then signal."""
    import subprocess
    import sys
    master, slave = os.openpty()
    try:
        os.makedirs(str(tmp_path / "dev"))
        os.symlink(os.ttyname(slave), str(tmp_path / "dev" / "nvidia-fs0"))
        os.makedirs(str(tmp_path / "proc" / "driver" / "nvidia-fs"))
        (tmp_path / "proc" / "driver" / "nvidia-fs" / "modules").write_text("rpcrdma: (null)\n")
        # here too, so that make mutation's test selection (it runs the tests that call read_held) picks this test;
        # pytest is no session leader, so this open could not take a controlling terminal either way
        assert nm.read_held(Sysroot(str(tmp_path)))["held"] is True
        out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                             timeout=60, stdin=subprocess.DEVNULL, check=False)
    finally:
        os.close(slave)
        os.close(master)
    assert out.stdout.decode().strip() == "held=True ctty=no", out.stderr.decode()
