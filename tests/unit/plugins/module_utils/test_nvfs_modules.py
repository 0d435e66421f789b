# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs_modules: the nvidia-fs modules file read while a device is held open, and proof_concerns' status docs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim import nvfs_proc

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import nvfs_modules as nm
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proofs as pc
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


def test_devices_lowest_minor_first(tmp_path):
    d = tmp_path / "dev"
    d.mkdir()
    for n in ("nvidia-fs10", "nvidia-fs2", "nvidia-fs0x", "nvidia-fs", "nvidia0", "nvidia-fs1"):
        (d / n).write_text("")
    assert nm.devices(Sysroot(str(tmp_path))) == ["/dev/nvidia-fs1", "/dev/nvidia-fs2", "/dev/nvidia-fs10"]
    assert nm.devices(Sysroot(str(tmp_path / "none"))) == []


def _fds_on(path):
    real = os.path.realpath(path)
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == real:
                out.append(fd)
        except OSError:
            pass
    return out


def test_read_held_holds_during_the_read_only(tmp_path, nvfs_lifetime):
    root = str(tmp_path)
    nvfs_lifetime.load_driver(root, {"rpcrdma": True})
    sr = Sysroot(root)
    seen = []
    real = Sysroot.read_raw

    def spy(self, p, default=None):
        seen.append(_fds_on(sr.path("/dev/nvidia-fs0")))
        return real(self, p, default)

    sr.read_raw = spy.__get__(sr, Sysroot)
    held = nm.read_held(sr)
    assert seen and seen[0], "the device was open while the file was read"
    assert _fds_on(sr.path("/dev/nvidia-fs0")) == [], "and closed afterwards"
    assert held == {"device": "/dev/nvidia-fs0", "held": True, "error": None, "text": "wekafsio: 1\nrpcrdma: (null)\n",
                    "modules": {"wekafsio": "1", "rpcrdma": "(null)"}}
    assert nm.storage(held["modules"]) == {"rpcrdma": "(null)"}


@pytest.mark.parametrize("damage,held,error", [
    ("no-dev", False, "no /dev/nvidia-fs<N> device exists to hold open"),
    ("dangling", False, "/dev/nvidia-fs0 cannot be opened: No such file or directory"),
    ("no-file", True, "/proc/driver/nvidia-fs/modules cannot be read"),
])
def test_read_held_errors(tmp_path, nvfs_lifetime, damage, held, error):
    root = str(tmp_path)
    nvfs_lifetime.load_driver(root, {"rpcrdma": True})
    if damage in ("no-dev", "dangling"):
        for n in os.listdir(os.path.join(root, "dev")):
            os.unlink(os.path.join(root, "dev", n))
    if damage == "dangling":
        os.symlink("gone", os.path.join(root, "dev", "nvidia-fs0"))
    if damage == "no-file":
        os.unlink(os.path.join(root, nvfs_proc.MODULES_REL))
    res = nm.read_held(Sysroot(root))
    assert res["held"] is held and res["error"].startswith(error) and res["modules"] == {}
    ok, reason = nm.storage_check(res, "rpcrdma")
    assert ok is False and reason.startswith(error) and "whether nvidia-fs registers rpcrdma is unknown" in reason


CHECK_CASES = [
    ({"wekafsio": "1", "rpcrdma": "(null)"}, "rpcrdma", True, "rpcrdma is listed in"),
    ({"wekafsio": "1"}, "rpcrdma", False, "(listed: wekafsio): the loaded rpcrdma does not register"),
    ({}, "rpcrdma", False, "(listed: none)"),
    ({"wekafsio": "1", "nvme": "(null)"}, "lnet", False, "lustre_v1_register_nvfs_dma_ops"),
    ({"wekafsio": "1"}, "myfs", False, "its nvidia-fs registration function"),
    ({"wekafsio": "1"}, "wekafsio", True, "wekafsio is listed"),
]


@pytest.mark.parametrize("mods,module,ok,part", CHECK_CASES)
def test_storage_check(mods, module, ok, part):
    got_ok, reason = nm.storage_check({"device": "/dev/nvidia-fs0", "held": True, "error": None, "modules": mods},
                                      module)
    assert got_ok is ok and part in reason and module in reason and "/dev/nvidia-fs0 is held open" in reason


# ------------------------------------------------------------------------------------------------ proof_concerns

def _pcs(*failed):
    return [{"name": n, "status": "fail" if n in failed else "ok", "reason": "%s reason" % n} for n in
            ("nvidia_fs_loaded", "nvidia_fs_storage_module")]


GDS_CASES = [
    # (result, check_mode, status, reason start)
    ({"gds_active": True, "size": 16 << 20, "preconditions": _pcs()}, False, "ok", "a 16 MiB test transfer"),
    ({"gds_active": False, "size": 16 << 20, "preconditions": _pcs(), "reasons": ["The counters did not move."]},
     False, "drift", "GDS is not active: The counters did not move."),
    ({"gds_active": False, "size": 16 << 20, "preconditions": _pcs()}, True, "not_checked", "check mode: every"),
    ({"gds_active": False, "size": 16 << 20, "preconditions": _pcs("nvidia_fs_storage_module")}, True, "drift",
     "check mode: 1 precondition(s) fail: nvidia_fs_storage_module: nvidia_fs_storage_module reason"),
]


@pytest.mark.parametrize("result,check_mode,status,reason", GDS_CASES)
def test_gds_status(result, check_mode, status, reason):
    items = [{"concern": "gds", "object": "x", "key": "precondition", "current": "c", "desired": "ok"}]
    doc = pc.gds_status(result, items, check_mode)
    assert doc["status"] == status and doc["reason"].startswith(reason)
    assert doc["items"] == ([] if status in ("ok", "not_checked") else items)


@pytest.mark.parametrize("proven,stage,status,reason", [
    (True, "running", "ok", "the vendor NFS client is proven running on K"),
    (True, "installed", "ok", "the vendor NFS client is proven installed for K"),
    (False, "running", "drift", "the vendor NFS client is not proven running on K: p1; p2"),
])
def test_vendor_client_status(proven, stage, status, reason):
    res = {"proven": proven, "stage": stage, "kernel_release": "K", "problems": [] if proven else ["p1", "p2"]}
    doc = pc.vendor_client_status(res, [] if proven else [{"current": "p1"}, {"current": "p2"}])
    assert doc["status"] == status and doc["reason"] == reason
    assert len(doc["items"]) == (0 if proven else 2)
    assert pc.failed("vendor_client", "boom")["status"] == "error"
