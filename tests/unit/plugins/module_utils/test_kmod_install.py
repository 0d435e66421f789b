# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kmod_install / kmod_proof with compressed modules: the target kernel's compression, copy installs in it,
modules.dep naming compressed files, stale variants, and the pre-reboot gate and post-boot proof on .ko.zst trees
(the gate crashed there with "not an ELF file")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import compress as kc
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.module_utils.host import runner

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor_nfs"))
sys.path.insert(0, FIXTURES)
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

KVER = "6.8.0-45-generic"
SYM = kb.NVFS_SYMBOL
BUNDLE = "/lib/modules/%s/updates/bundle/" % KVER
ZSTD = shutil.which("zstd")
needs_zstd = pytest.mark.skipif(not ZSTD, reason="the zstd tool is not installed")
KINDS = ["gzip", "xz", pytest.param("zstd", marks=needs_zstd)]
SUFFIX = {"none": "", "gzip": ".gz", "xz": ".xz", "zstd": ".zst"}


def elf(name, srcversion, kver=KVER):
    return vf.make_module_elf(name, kver + " SMP mod_unload", srcversion=srcversion,
                              exports=[SYM] if name == "rpcrdma" else [], params=["nfs_bundle_version"])


def kernel_tree(root, kind, kver=KVER, n=3):
    """The kernel's own modules, compressed like its CONFIG_MODULE_COMPRESS_* says."""
    for i in range(n):
        p = root / "lib" / "modules" / kver / "kernel" / "drivers" / ("m%d.ko%s" % (i, SUFFIX[kind]))
        p.parent.mkdir(parents=True, exist_ok=True)
        data = elf("m%d" % i, "K%d" % i, kver)
        p.write_bytes(data if kind == "none" else vf.compress_module(data, kind))


class FakeDepmod(object):
    """depmod -b ROOT KVER: modules.dep lists every module file (any compression), updates/ before kernel/;
    other commands (zstd) run for real."""

    def __init__(self, root):
        self.root, self.calls = root, []

    def __call__(self, argv, env=None):
        if os.path.basename(argv[0]) != "depmod":
            return runner.local()(argv, env)  # the real zstd of the host
        self.calls.append(list(argv))
        base = os.path.join(self.root, "lib", "modules", argv[-1])
        lines = []
        for top in ("updates", "kernel"):
            for dp, dns, fns in os.walk(os.path.join(base, top)):
                dns.sort()
                lines += [os.path.relpath(os.path.join(dp, f), base) + ":" for f in sorted(fns) if kc.is_module_path(f)]
        with open(os.path.join(base, "modules.dep"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return 0, "", ""


def fake_podman(files, dist_name="p.deb"):
    def run(argv, env=None):
        answer = vf.builder_image_answer(argv)
        if answer:
            return answer
        if argv[1] == "run":
            out = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")][0]
            os.makedirs(os.path.join(out, "dist"))
            for name, data in files.items():
                if name.startswith("/"):
                    continue
                with open(os.path.join(out, "dist", name), "wb") as f:
                    f.write(data)
            pkg = dict((k, v) for k, v in files.items() if k.startswith("/"))
            if pkg:
                vf.make_deb(os.path.join(out, "dist", dist_name), pkg)
            return 0, "", ""
        return runner.local()(argv, env)
    return run


def build(tmp_path, files, profile="vastnfs"):
    src, digest = vf.make_source_tarball(str(tmp_path))
    cache = str(tmp_path / "cache")
    return kb.build(fake_podman(files), {"podman": "podman"}, src, digest, KVER, "4.0.35", profile, cache,
                    "img"), cache


# --------------------------------------------------------------------------- target compression

@pytest.mark.parametrize("tree,config,kind,source", [
    ("zstd", None, "zstd", "/lib/modules/%s/kernel (3 of 3 modules)" % KVER),
    ("xz", "CONFIG_MODULE_COMPRESS_ZSTD=y\n", "xz", "kernel"),        # the kernel's own files win over a config
    ("none", None, "none", "kernel"),
    (None, "CONFIG_MODULE_COMPRESS_NONE=n\nCONFIG_MODULE_COMPRESS_ZSTD=y\n", "zstd", "CONFIG_MODULE_COMPRESS_ZSTD=y"),
    (None, "CONFIG_MODULE_COMPRESS=y\nCONFIG_MODULE_COMPRESS_XZ=y\n", "xz", "/boot/config-%s" % KVER),
    (None, "CONFIG_MODULE_COMPRESS_GZIP=y\n", "gzip", "GZIP"),
    (None, "# CONFIG_MODULE_COMPRESS_ZSTD is not set\nCONFIG_MODULE_COMPRESS_NONE=y\n", "none", "no CONFIG"),
    (None, "CONFIG_MODULE_COMPRESS_ZSTD=yes-not\n", "none", "no CONFIG"),
    (None, None, "none", "default"),
])
def test_target_compression(tmp_path, tree, config, kind, source):
    if tree == "zstd" and not ZSTD:
        pytest.skip("the zstd tool is not installed")
    root = tmp_path / "root"
    (root / "lib" / "modules" / KVER).mkdir(parents=True)
    if tree:
        kernel_tree(root, tree)
    if config:
        (root / "boot").mkdir()
        (root / "boot" / ("config-" + KVER)).write_text(config)
    got = kb.target_compression(Sysroot(str(root)), KVER)
    assert got["compression"] == kind and source in got["source"], got


# --------------------------------------------------------------------------- install + gate + proof

def node(tmp_path, kind):
    root = tmp_path / "root"
    kernel_tree(root, kind)
    return Sysroot(str(root))


@pytest.mark.parametrize("kernel", ["none"] + KINDS)
def test_bare_modules_are_copied_in_the_kernels_compression(tmp_path, kernel):
    """profile kbuild: bare .ko outputs land as the target kernel stores its modules; gate and proof hold."""
    man, cache = build(tmp_path, {"sunrpc.ko": elf("sunrpc", "S1"), "rpcrdma.ko": elf("rpcrdma", "R1")}, "kbuild")
    sysroot = node(tmp_path, kernel)
    depmod = FakeDepmod(sysroot.root)
    tools = {"depmod": "depmod", "zstd": ZSTD}
    plan = kb.install(depmod, tools, sysroot, cache, man, check_mode=True)
    assert plan["compression"]["compression"] == kernel
    assert plan["paths"]["rpcrdma"] == BUNDLE + "rpcrdma.ko" + SUFFIX[kernel] and depmod.calls == []
    res = kb.install(depmod, tools, sysroot, cache, man)
    assert res["actions"] == ["copy", "depmod", "record"]
    raw = open(sysroot.path(BUNDLE + "rpcrdma.ko" + SUFFIX[kernel]), "rb").read()
    assert kc.sniff(raw) == kernel
    assert sorted(os.listdir(sysroot.path(BUNDLE))) == sorted(n + ".ko" + SUFFIX[kernel] for n in ("rpcrdma", "sunrpc"))
    rec = json.loads(sysroot.read_raw(kb.STATE_FILE))["kernels"][KVER]["modules"]
    assert rec["sunrpc"]["path"] == BUNDLE + "sunrpc.ko" + SUFFIX[kernel] and rec["sunrpc"]["compression"] == kernel
    gate = kb.prove_installed(sysroot, KVER, version="4.0.35")
    assert gate["proven"], gate["problems"]
    assert gate["modules"]["rpcrdma"]["compression"] == kernel
    again = kb.install(depmod, tools, sysroot, cache, man)
    assert again["actions"] == [] and len(depmod.calls) == 1, "idempotent"
    sysroot.write_file_atomic("/proc/sys/kernel/osrelease", KVER + "\n")
    for name, srcv in (("sunrpc", "S1"), ("rpcrdma", "R1")):
        sysroot.write_file_atomic("/sys/module/%s/srcversion" % name, srcv + "\n")
    sysroot.write_file_atomic("/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35\n")
    proof = kb.prove_running(sysroot, KVER, require_loaded=["sunrpc", "rpcrdma"])
    assert proof["proven"], proof["problems"]
    assert proof["modules"]["rpcrdma"]["srcversion_installed"] == "R1"
    sysroot.write_file_atomic("/sys/module/rpcrdma/srcversion", "INTREE\n")
    proof = kb.prove_running(sysroot, KVER, require_loaded=["sunrpc", "rpcrdma"])
    assert [p for p in proof["problems"] if "loaded rpcrdma has srcversion INTREE" in p]


@pytest.mark.parametrize("kind", KINDS)
def test_package_modules_land_as_the_package_has_them(tmp_path, kind):
    files = dict((BUNDLE + n + ".ko" + SUFFIX[kind], vf.compress_module(elf(n, s), kind))
                 for n, s in (("sunrpc", "S1"), ("rpcrdma", "R1")))
    man, cache = build(tmp_path, files)
    assert set(m["compression"] for m in man["modules"]) == {kind}
    sysroot = node(tmp_path, "none")          # an uncompressed kernel: the package still decides
    depmod = FakeDepmod(sysroot.root)
    res = kb.install(depmod, {"depmod": "depmod", "zstd": ZSTD}, sysroot, cache, man)
    assert res["method"] == "copy" and sorted(res["paths"].values()) == sorted(files)
    for p, data in files.items():
        assert open(sysroot.path(p), "rb").read() == data
    assert kb.prove_installed(sysroot, KVER)["proven"]
    assert kb.install(depmod, {"depmod": "depmod"}, sysroot, cache, man)["actions"] == []


@needs_zstd
def test_stale_variant_is_drift_and_removed(tmp_path):
    man, cache = build(tmp_path, {"sunrpc.ko": elf("sunrpc", "S1"), "rpcrdma.ko": elf("rpcrdma", "R1")}, "kbuild")
    sysroot = node(tmp_path, "zstd")
    depmod = FakeDepmod(sysroot.root)
    kb.install(depmod, {"depmod": "depmod"}, sysroot, cache, man)
    # an older uncompressed install of sunrpc next to ours: depmod could pick it
    sysroot.write_file_atomic(BUNDLE + "sunrpc.ko", elf("sunrpc", "OLD"))
    places = kb.placements(man, "copy", "zstd")
    drift = kb.install_drift(sysroot, man, places)
    assert [(d["object"], d["stale"]) for d in drift] == [("%s/sunrpc" % KVER, [BUNDLE + "sunrpc.ko"])]
    actions, problems = kb.install_plan(sysroot, man, "copy")
    assert "copy" in actions and [p for p in problems if "sunrpc.ko is also there" in p]
    kb.install(depmod, {"depmod": "depmod"}, sysroot, cache, man)
    assert not sysroot.exists(BUNDLE + "sunrpc.ko") and sysroot.exists(BUNDLE + "sunrpc.ko.zst")
    assert kb.install_drift(sysroot, man, places) == []
    assert kb.prove_installed(sysroot, KVER)["proven"]


def test_modules_dep_names_compressed_files(tmp_path):
    sysroot = Sysroot(str(tmp_path))
    sysroot.write_file_atomic("/lib/modules/%s/modules.dep" % KVER, "\n".join([
        "updates/bundle/sunrpc.ko.zst:",
        "kernel/net/sunrpc/sunrpc.ko.zst:",
        "kernel/net/sunrpc/xprtrdma/rpcrdma.ko.xz: kernel/net/sunrpc/sunrpc.ko.zst",
        "updates/dkms/nvidia-fs.ko.gz:",
        "/abs/path/x.ko:",
        "garbage line",
        "kernel/README:",
    ]) + "\n")
    assert kb.modules_dep_paths(sysroot, KVER) == {
        "sunrpc": "/lib/modules/%s/updates/bundle/sunrpc.ko.zst" % KVER,
        "rpcrdma": "/lib/modules/%s/kernel/net/sunrpc/xprtrdma/rpcrdma.ko.xz" % KVER,
        "nvidia_fs": "/lib/modules/%s/updates/dkms/nvidia-fs.ko.gz" % KVER,
        "x": "/abs/path/x.ko",
    }


@pytest.mark.parametrize("kind", ["none"] + KINDS)
def test_gate_other_modules_on_a_compressed_tree(tmp_path, kind):
    """The pre-reboot gate on a DKMS tree of .ko.zst (Ubuntu 24.04): it read the file as ELF and crashed."""
    sysroot = Sysroot(str(tmp_path))
    rel = "updates/dkms/nvidia.ko" + SUFFIX[kind]
    data = elf("nvidia", "N1")
    sysroot.write_file_atomic("/lib/modules/%s/%s" % (KVER, rel), data if kind == "none" else
                              vf.compress_module(data, kind))
    sysroot.write_file_atomic("/lib/modules/%s/modules.dep" % KVER, rel + ":\n")
    facts, problems = kb.other_modules_problems(sysroot, KVER, ["nvidia"])
    assert problems == []
    assert facts["nvidia"] == {"path": "/lib/modules/%s/%s" % (KVER, rel), "vermagic": KVER + " SMP mod_unload",
                               "compression": kind}
    old = vf.make_module_elf("nvidia", "6.8.0-31-generic SMP")
    sysroot.write_file_atomic("/lib/modules/%s/%s" % (KVER, rel), old if kind == "none" else
                              vf.compress_module(old, kind))
    _f, problems = kb.other_modules_problems(sysroot, KVER, ["nvidia"])
    assert [p for p in problems if "not for kernel %s" % KVER in p]


@pytest.mark.parametrize("listing,names,expected", [
    ("usr/lib/modules/K/kernel/net/sunrpc/sunrpc.ko.zst\n", ["sunrpc"], True),
    ("usr/lib/modules/K/kernel/net/sunrpc/xprtrdma/rpcrdma.ko.gz\n", ["rpcrdma"], True),
    ("usr/lib/modules/K/kernel/fs/nfs/nfs.ko.xz\n", ["sunrpc", "rpcrdma"], False),
    ("usr/lib/modules/K/updates/rpc-rdma.ko\n", ["rpc_rdma"], True),
])
def test_initramfs_has_modules(listing, names, expected):
    def run(argv, env=None):
        return 0, listing, ""
    assert kb.initramfs_has_modules(run, {"lsinitramfs": "lsinitramfs"}, "/boot/initrd.img-K", names) is expected


@needs_zstd
def test_unreadable_module_is_a_problem_missing_zstd_is_an_error(tmp_path, monkeypatch):
    man, cache = build(tmp_path, {"sunrpc.ko": elf("sunrpc", "S1"), "rpcrdma.ko": elf("rpcrdma", "R1")}, "kbuild")
    sysroot = node(tmp_path, "zstd")
    kb.install(FakeDepmod(sysroot.root), {"depmod": "depmod"}, sysroot, cache, man)
    sysroot.write_file_atomic(BUNDLE + "sunrpc.ko.zst", b"\x28\xb5\x2f\xfd not really zstd")
    gate = kb.prove_installed(sysroot, KVER)
    assert not gate["proven"]
    assert [p for p in gate["problems"] if p.startswith(BUNDLE + "sunrpc.ko.zst differs from the verified build")]
    monkeypatch.setattr(kc, "_import_zstd", lambda: (None, None))
    none = kc.Codecs(tools={"zstd": None, "unzstd": None})
    with pytest.raises(kc.CodecUnavailable, match="install the zstd tool"):
        kb.prove_installed(sysroot, KVER, codecs=none)
    with pytest.raises(kc.CodecUnavailable):
        kb.install_plan(sysroot, man, "copy", codecs=none)
