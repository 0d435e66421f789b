# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vendor_nfs_proof main() against a tmp sysroot with an installed (synthetic) vendor client."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import vendor_nfs_proof
from modrunner import run_module

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor_nfs"))
sys.path.insert(0, FIXTURES)
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

KVER = "6.1.0-56-amd64"
BASE = "/lib/modules/%s/updates/bundle/" % KVER


def fake_podman(argv, env=None):
    answer = vf.builder_image_answer(argv)
    if answer:
        return answer
    if argv[1] == "run":
        out = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")][0]
        os.makedirs(os.path.join(out, "dist"))
        vf.make_deb(os.path.join(out, "dist", "p.deb"), {
            BASE + "sunrpc.ko": vf.make_module_elf("sunrpc", KVER + " SMP", srcversion="S1"),
            BASE + "rpcrdma.ko": vf.make_module_elf("rpcrdma", KVER + " SMP", srcversion="R1",
                                                    exports=[kb.NVFS_SYMBOL])})
    return 0, "", ""


def fake_depmod(root):
    def run(argv, env=None):
        with open(os.path.join(root, "lib", "modules", argv[-1], "modules.dep"), "w") as f:
            f.write("updates/bundle/sunrpc.ko:\nupdates/bundle/rpcrdma.ko:\n")
        return 0, "", ""
    return run


@pytest.fixture
def node(tmp_path, monkeypatch):
    src, digest = vf.make_source_tarball(str(tmp_path))
    cache = str(tmp_path / "cache")
    man = kb.build(fake_podman, {"podman": "podman"}, src, digest, KVER, "4.0.35", "vastnfs", cache, "img")
    root = tmp_path / "root"
    (root / "lib" / "modules" / KVER).mkdir(parents=True)
    sysroot = Sysroot(str(root))
    kb.install(fake_depmod(str(root)), {"depmod": "depmod"}, sysroot, cache, man)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    return sysroot


def booted(sysroot, kver=KVER, sunrpc="S1", param=True, nvfs=None, lifetime=None):
    """``nvfs``: None (no nvidia-fs) or the storage modules' nvidia-fs hooks {name: True | False | errno}."""
    sysroot.write_file_atomic("/proc/sys/kernel/osrelease", kver + "\n")
    sysroot.write_file_atomic("/sys/module/sunrpc/srcversion", sunrpc + "\n")
    if param:
        sysroot.write_file_atomic("/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35\n")
    if nvfs is not None:
        lifetime.load_driver(sysroot.root, nvfs)
        if "rpcrdma" in nvfs:
            sysroot.write_file_atomic("/sys/module/rpcrdma/srcversion", "R1\n")


NOT_LISTED = "rpcrdma is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open"


@pytest.mark.parametrize("args,boot,proven,needle", [
    ({"stage": "installed"}, None, True, None),
    ({"stage": "installed", "version": "4.0.35"}, None, True, None),
    ({"stage": "installed", "version": "5.0"}, None, False, "expected 5.0"),
    ({"stage": "installed", "kernel_release": "6.1.0-57-amd64"}, None, False, "no verified vendor NFS client"),
    ({"stage": "running"}, {}, True, None),
    ({"stage": "running"}, {"kver": "6.1.0-50-amd64"}, False, "running kernel is 6.1.0-50-amd64"),
    ({"stage": "running"}, {"sunrpc": "OTHER"}, False, "in-tree NFS stack is running"),
    ({"stage": "running"}, {"param": False}, False, "nfs_bundle_version is missing"),
    ({"stage": "running"}, {"nvfs": {"nvme": True}}, False, NOT_LISTED + " (listed: nvme, wekafsio)"),
    # the vendor client's rpcrdma lacks the hook / its registration is refused: named
    ({"stage": "running"}, {"nvfs": {"rpcrdma": False}}, False, NOT_LISTED + " (listed: wekafsio): the loaded "
     "rpcrdma does not register with nvidia-fs (it does not export rpcrdma_register_nvfs_dma_ops"),
    ({"stage": "running"}, {"nvfs": {"rpcrdma": -95}}, False, NOT_LISTED),
    # healthy and idle: the file lists no rpcrdma until the proof holds a device open
    ({"stage": "running", "require_loaded": ["sunrpc", "rpcrdma"]}, {"nvfs": {"rpcrdma": True}}, True, None),
    ({"stage": "running", "nvidia_fs": "ignore"}, {"nvfs": {"rpcrdma": False}}, True, None),
    ({"stage": "running", "require_loaded": ["sunrpc", "rpcrdma"]}, {}, False, "rpcrdma is not loaded"),
])
@pytest.mark.parametrize("fail_on_problems", [True, False])
def test_proof(node, monkeypatch, nvfs_lifetime, args, boot, proven, needle, fail_on_problems):
    if boot is not None:
        booted(node, lifetime=nvfs_lifetime, **boot)
        if (boot.get("nvfs") or {}).get("rpcrdma") is True:
            assert node.read_raw("/proc/driver/nvidia-fs/modules") == "wekafsio: 1\n", "the node is idle"
    full = dict({"kernel_release": KVER, "fail_on_problems": fail_on_problems}, **args)
    res = run_module(vendor_nfs_proof, full, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] is False
    assert res["proven"] is proven
    assert bool(res.get("failed")) is (fail_on_problems and not proven)
    vc = res["concerns"]["vendor_client"]
    if needle:
        assert any(needle in p for p in res["problems"]), res["problems"]
        if fail_on_problems:
            assert needle in res["msg"]
        assert res["drift"] and res["drift"][0]["concern"] == "vendor_nfs"
        assert vc["status"] == "drift" and needle in vc["reason"]
        assert [i["current"] for i in vc["items"]] == res["problems"]
        assert set(i["concern"] for i in vc["items"]) == {"vendor_client"}
    else:
        assert res["problems"] == [] and res["drift"] == []
        assert vc["status"] == "ok" and vc["items"] == [] and vc["reason"].startswith("the vendor NFS client is proven")
    if (boot or {}).get("nvfs") and args.get("nvidia_fs") != "ignore":
        assert res["nvidia_fs"]["device"] == "/dev/nvidia-fs0" and res["nvidia_fs"]["held"] is True
        assert ("rpcrdma" in res["nvidia_fs"]["modules"]) is (boot["nvfs"].get("rpcrdma") is True)


def test_bad_kernel_release(node, monkeypatch):
    res = run_module(vendor_nfs_proof, {"stage": "running", "kernel_release": "x"}, monkeypatch=monkeypatch)
    assert res["failed"] and "does not look like a kernel release" in res["msg"]
    assert res["concerns"]["vendor_client"]["status"] == "error"
    assert "does not look like a kernel release" in res["concerns"]["vendor_client"]["reason"]


def with_other_module(sysroot, name, kver):
    """A site driver (like DKMS would install it) under updates/dkms and listed in modules.dep."""
    rel = "updates/dkms/%s.ko" % name
    sysroot.write_file_atomic("/lib/modules/%s/%s" % (KVER, rel), vf.make_module_elf(name, kver + " SMP mod_unload"))
    dep = sysroot.read_raw("/lib/modules/%s/modules.dep" % KVER)
    sysroot.write_file_atomic("/lib/modules/%s/modules.dep" % KVER, dep + rel + ":\n")


@pytest.mark.parametrize("present,built_for,names,proven,needle", [
    (["dcbtest"], KVER, ["dcbtest"], True, None),
    (["nvidia_fs"], KVER, ["nvidia-fs"], True, None),           # modprobe's - and _ are one
    ([], KVER, ["nvidia"], False, "modprobe nvidia on kernel %s finds no module" % KVER),
    (["nvidia"], "6.1.0-50-amd64", ["nvidia"], False, "not for kernel %s" % KVER),
])
def test_other_modules_gate(node, monkeypatch, present, built_for, names, proven, needle):
    for name in present:
        with_other_module(node, name, built_for)
    res = run_module(vendor_nfs_proof, {"stage": "installed", "kernel_release": KVER, "other_modules": names,
                                        "fail_on_problems": False}, monkeypatch=monkeypatch)
    assert res["proven"] is proven, res["problems"]
    assert sorted(res["other_modules"]) == sorted(names)
    if needle:
        assert any(needle in p for p in res["problems"]), res["problems"]


@pytest.mark.parametrize("args,needle", [
    ({"stage": "installed", "other_modules": ["nvidia; rm -rf /"]}, "is not a kernel module name"),
    ({"stage": "running", "other_modules": ["nvidia"]}, "checked at stage=installed"),
])
def test_other_modules_bad_input(node, monkeypatch, args, needle):
    res = run_module(vendor_nfs_proof, dict(args, kernel_release=KVER), monkeypatch=monkeypatch)
    assert res["failed"] and needle in res["msg"]


@pytest.mark.skipif(not shutil.which("zstd"), reason="the zstd tool is not installed")
def test_gate_on_a_ko_zst_tree(node, monkeypatch):
    """Ubuntu 24.04's DKMS installs nvidia.ko.zst: the gate failed with "not an ELF file"; it now reads it with
    the host's zstd and says so in the result."""
    rel = "updates/dkms/nvidia.ko.zst"
    node.write_file_atomic("/lib/modules/%s/%s" % (KVER, rel),
                           vf.compress_module(vf.make_module_elf("nvidia", KVER + " SMP mod_unload"), "zstd"))
    dep = node.read_raw("/lib/modules/%s/modules.dep" % KVER)
    node.write_file_atomic("/lib/modules/%s/modules.dep" % KVER, dep + rel + ":\n")
    res = run_module(vendor_nfs_proof, {"stage": "installed", "kernel_release": KVER, "other_modules": ["nvidia"]},
                     monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["proven"] and res["other_modules"]["nvidia"]["compression"] == "zstd"
    assert res["compression"]["codecs"]["zstd"] in ("binary:%s" % shutil.which("zstd"), "python:zstandard",
                                                    "python:compression.zstd")


def test_gate_without_any_zstd_is_an_error_saying_what_to_install(node, monkeypatch):
    from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import compress as kmod_compress
    rel = "updates/dkms/nvidia.ko.zst"
    node.write_file_atomic("/lib/modules/%s/%s" % (KVER, rel), b"\x28\xb5\x2f\xfd" + b"\0" * 32)
    dep = node.read_raw("/lib/modules/%s/modules.dep" % KVER)
    node.write_file_atomic("/lib/modules/%s/modules.dep" % KVER, dep + rel + ":\n")
    monkeypatch.setattr(kmod_compress, "_import_zstd", lambda: (None, None))
    monkeypatch.setenv("PATH", "/nonexistent")
    from ansible.module_utils import basic
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    res = run_module(vendor_nfs_proof, {"stage": "installed", "kernel_release": KVER, "other_modules": ["nvidia"]},
                     monkeypatch=monkeypatch)
    assert res["failed"] and "could not be read" in res["msg"] and "install the zstd tool" in res["msg"]
    assert res["concerns"]["vendor_client"]["status"] == "error"
