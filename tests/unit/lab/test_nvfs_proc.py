# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's nvidia-fs modules file: registered storage modules only while a dev/nvidia-fs* is held open
(gpufabric_sim/nvfs_proc.py), as computed, as served through the FIFO, and as the unit-test fake delivers it.

Reads of a served FIFO go through ``cat`` with a timeout or through ``guarded`` (which unblocks a reader left
without an answer), so a broken server fails a test instead of hanging it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from gpufabric_sim import nvfs_proc, runtime
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree

import nvfs_kernel

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

IDLE = "wekafsio: 1\n"


@pytest.fixture
def root(tmp_path):
    r = str(tmp_path / "root")
    nvfs_kernel.load_driver(r)
    return r


def hold(root, minor=0):
    """A process that holds dev/nvidia-fs<minor> open until it is killed."""
    p = subprocess.Popen(["sh", "-c", 'exec 3<"$1"; echo held; exec sleep 60', "sh",
                          os.path.join(root, "dev", "nvidia-fs%d" % minor)], stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"held\n"
    return p


def cat(path):
    return subprocess.run(["cat", path], stdout=subprocess.PIPE, timeout=10, check=True,
                          universal_newlines=True).stdout


def guarded(path, fn, timeout=10.0):
    """fn() in this process; a reader still blocked on the FIFO after ``timeout`` is released with EOF."""
    done = threading.Event()

    def release():
        if not done.wait(timeout):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    t = threading.Thread(target=release)
    t.start()
    try:
        return fn()
    finally:
        done.set()
        t.join()


# ------------------------------------------------------------------------------------------------ content

TEXT_CASES = [
    # (hooks {name: hook}, held, content)
    ({}, False, IDLE),
    ({}, True, IDLE),
    ({"rpcrdma": True}, False, IDLE),
    ({"rpcrdma": True}, True, "wekafsio: 1\nrpcrdma: (null)\n"),
    ({"rpcrdma": False}, True, IDLE),                 # loaded without the hook
    ({"rpcrdma": -95}, True, IDLE),                   # the hook refuses the registration
    ({"rpcrdma": True, "nvme": True, "scsi_mod": True}, True,
     "nvme: (null)\nwekafsio: 1\nrpcrdma: (null)\nscsi_mod: 0\n"),   # modules_list[] order, static versions
]


@pytest.mark.parametrize("hooks,held,want", TEXT_CASES)
def test_modules_text(root, hooks, held, want):
    for name, hook in hooks.items():
        nvfs_proc.load_module(root, name, hook)
    assert nvfs_proc.modules_text(root, held=held) == want


def test_unloaded_module_is_not_registered(root):
    nvfs_proc.load_module(root, "rpcrdma", True)
    os.rmdir(os.path.join(root, "sys", "module", "rpcrdma"))
    assert nvfs_proc.modules_text(root, held=True) == IDLE


def test_load_module_refuses_names_the_driver_does_not_probe(root):
    with pytest.raises(ValueError):
        nvfs_proc.load_module(root, "wekafsio", True)


def test_holders_follow_open_and_close(root):
    assert nvfs_proc.holders(root) == []
    assert nvfs_proc.modules_text(root) == IDLE
    nvfs_proc.load_module(root, "rpcrdma", True)
    p = hold(root, 7)
    try:
        assert p.pid in nvfs_proc.holders(root)
        assert nvfs_proc.modules_text(root) == "wekafsio: 1\nrpcrdma: (null)\n"
    finally:
        p.kill()
        p.wait()
    assert nvfs_proc.holders(root) == []
    fd = os.open(os.path.join(root, "dev", "nvidia-fs0"), os.O_RDONLY)
    try:
        assert nvfs_proc.holders(root) == [os.getpid()]
    finally:
        os.close(fd)
    assert nvfs_proc.modules_text(root) == IDLE


def test_tree_builds_the_idle_driver(tmp_path):
    r = str(tmp_path / "t")
    topo = sim_topology.load("hgx-h200")
    topo["nvidia_fs"]["modules"] = {"rpcrdma": 0, "nvme": -95}
    sim_tree.build_tree(r, topo)
    assert sorted(os.listdir(os.path.join(r, "dev")), key=lambda n: int(n[9:])) == \
        ["nvidia-fs%d" % i for i in range(16)]
    assert stat.S_IMODE(os.stat(os.path.join(r, "dev", "nvidia-fs0")).st_mode) == 0o666
    with open(os.path.join(r, nvfs_proc.MODULES_REL)) as f:
        assert f.read() == IDLE
    with open(os.path.join(r, "proc/driver/nvidia-fs/devcount")) as f:
        assert f.read() == "16\n"
    assert nvfs_proc.read_hooks(r) == {"rpcrdma": 0, "nvme": -95}
    assert nvfs_proc.modules_text(r, held=True) == "wekafsio: 1\nrpcrdma: (null)\n"


# ------------------------------------------------------------------------------------------------ the FIFO server

@pytest.fixture
def served(root, tmp_path):
    scratch = str(tmp_path / "scratch")
    os.mkdir(scratch)
    srv = nvfs_proc.Server(lambda: [root], scratch)
    srv.scan()
    yield srv
    srv.stop()
    assert os.listdir(scratch) == []


def test_server_answers_with_the_holders_at_each_read(root, served):
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o444
    nvfs_proc.load_module(root, "rpcrdma", True)
    assert cat(path) == IDLE
    p = hold(root)
    try:
        assert cat(path) == "wekafsio: 1\nrpcrdma: (null)\n"
        assert cat(path) == "wekafsio: 1\nrpcrdma: (null)\n"
    finally:
        p.kill()
        p.wait()
    assert cat(path) == IDLE
    nvfs_proc.load_module(root, "rpcrdma", -95)
    p = hold(root)
    try:
        assert cat(path) == IDLE
    finally:
        p.kill()
        p.wait()


def test_production_read_held_against_the_fifo(root, served):
    """nvfs_modules.read_held holds the device while the server computes the answer: the sim path is real."""
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    nvfs_proc.load_module(root, "rpcrdma", True)
    sr = Sysroot(root)
    held = guarded(path, lambda: nvfs_modules.read_held(sr))
    assert held == {"device": "/dev/nvidia-fs0", "held": True, "error": None,
                    "text": "wekafsio: 1\nrpcrdma: (null)\n", "modules": {"wekafsio": "1", "rpcrdma": "(null)"}}
    assert nvfs_modules.storage_check(held, "rpcrdma")[0] is True
    assert guarded(path, lambda: sr.read_raw(nvfs_modules.MODULES)) == IDLE, "closed again"


def test_fake_and_fifo_give_the_same_answer(root, served, monkeypatch):
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    nvfs_proc.load_module(root, "rpcrdma", True)
    fd = os.open(os.path.join(root, "dev", "nvidia-fs3"), os.O_RDONLY)
    try:
        fifo = guarded(path, lambda: Sysroot(root).read_raw(nvfs_modules.MODULES))
        with monkeypatch.context() as m:
            nvfs_kernel.install(m)
            fake = Sysroot(root).read_raw(nvfs_modules.MODULES)
    finally:
        os.close(fd)
    assert fifo == fake == "wekafsio: 1\nrpcrdma: (null)\n"


def test_lingering_reader_gets_eof_not_a_second_answer(root, served):
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    first = guarded(path, lambda: open(path))
    try:
        assert first.read() == IDLE
        assert cat(path) == IDLE          # the next reader is answered on a fresh FIFO
        assert first.read() == ""         # the first one still reads EOF
    finally:
        first.close()


def test_server_takes_a_replaced_file_over_and_drops_an_unloaded_driver(root, served):
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    os.unlink(path)                        # a reboot's tree sync writes a regular file
    with open(path, "w") as f:
        f.write(IDLE)
    served.scan()
    assert stat.S_ISFIFO(os.lstat(path).st_mode) and cat(path) == IDLE
    import shutil
    shutil.rmtree(os.path.dirname(path))   # nvidia-fs unloaded
    served.scan()
    assert served.served == {}
    os.makedirs(os.path.dirname(path))     # loaded again, without a modules file yet
    served.scan()
    assert cat(path) == IDLE


def test_stop_puts_back_a_regular_idle_file(root, tmp_path):
    srv = nvfs_proc.Server(lambda: [root])
    srv.scan()
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    srv.stop()
    assert stat.S_ISREG(os.lstat(path).st_mode)
    with open(path) as f:
        assert f.read() == IDLE
    assert sorted(os.listdir(os.path.dirname(path))) == ["modules"]


def test_server_process_of_a_fleet(root, tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "fleet.json").write_text(json.dumps({"nodes": [{"root": root}]}))
    env = dict(os.environ, PYTHONPATH=runtime.LAB_DIR)
    p = subprocess.Popen([sys.executable, "-m", "gpufabric_sim.nvfs_proc", "--fleet", str(fleet)], env=env)
    path = os.path.join(root, nvfs_proc.MODULES_REL)
    try:
        deadline = time.time() + 20
        while not (fleet / nvfs_proc.READY).exists():
            assert p.poll() is None and time.time() < deadline, "the server did not get ready"
            time.sleep(0.05)
        assert stat.S_ISFIFO(os.lstat(path).st_mode)
        nvfs_proc.load_module(root, "rpcrdma", True)
        h = hold(root, 15)
        try:
            assert cat(path) == "wekafsio: 1\nrpcrdma: (null)\n"
        finally:
            h.kill()
            h.wait()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    assert stat.S_ISREG(os.lstat(path).st_mode) and cat(path) == IDLE
    assert not (fleet / nvfs_proc.READY).exists()
