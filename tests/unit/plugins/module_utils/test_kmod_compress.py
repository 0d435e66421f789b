# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kmod_compress and the places that read compressed modules: codecs (gzip, xz, zstd through each backend),
module names, inspection, package verification (.ko.zst in a data.tar.zst), signing inside the container."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import lzma
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import stage5_builder as kmod_builder
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import compress as kc

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor_nfs"))
sys.path.insert(0, FIXTURES)
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

KVER = "6.8.0-45-generic"
SYM = kb.NVFS_SYMBOL
ZSTD = shutil.which("zstd")
UNZSTD = shutil.which("unzstd")
needs_zstd = pytest.mark.skipif(not ZSTD, reason="the zstd tool is not installed")
KINDS = ["gzip", "xz", pytest.param("zstd", marks=needs_zstd)]
SUFFIX = {"gzip": ".gz", "xz": ".xz", "zstd": ".zst"}


def no_binding():
    return None, None


def elf(name="rpcrdma", srcversion="R1", signed=False):
    return vf.make_module_elf(name, KVER + " SMP preempt mod_unload modversions", srcversion=srcversion,
                              exports=[SYM] if name == "rpcrdma" else [], params=["p"], signed=signed)


# --------------------------------------------------------------------------- names and magic

@pytest.mark.parametrize("path,kind,stem,name", [
    ("sunrpc.ko", "none", "sunrpc", "sunrpc"),
    ("/lib/modules/K/kernel/net/sunrpc/sunrpc.ko.zst", "zstd", "sunrpc", "sunrpc"),
    ("updates/dkms/nvidia-fs.ko.xz", "xz", "nvidia-fs", "nvidia_fs"),
    ("rpc-rdma.ko.gz", "gzip", "rpc-rdma", "rpc_rdma"),
    ("x.ko.bz2", None, None, None),
    ("x.ko.zst.orig", None, None, None),
    ("modules.dep", None, None, None),
    ("a.kob", None, None, None),
])
def test_module_names(path, kind, stem, name):
    assert kc.module_kind(path) == kind
    assert kc.module_stem(path) == stem
    assert kc.module_name(path) == name
    assert kc.is_module_path(path) is (kind is not None)


@given(stem=st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True), src=st.sampled_from(kc.KINDS),
       dst=st.sampled_from(kc.KINDS))
def test_with_kind_round_trip(stem, src, dst):
    path = "/lib/modules/K/updates/bundle/%s.ko%s" % (stem, kc.SUFFIX[src])
    moved = kc.with_kind(path, dst)
    assert kc.module_kind(moved) == dst and kc.module_stem(moved) == stem
    assert os.path.dirname(moved) == os.path.dirname(path)
    assert sorted(kc.sibling_paths(moved)) == sorted(kc.sibling_paths(path))


@pytest.mark.parametrize("data,kind", [
    (b"\x7fELF\x02\x01", "none"), (b"\x1f\x8b\x08\x00", "gzip"), (b"\xfd7zXZ\x00\x00", "xz"),
    (b"\x28\xb5\x2f\xfd\x04", "zstd"), (b"MZ\x90\x00", None), (b"", None),
])
def test_sniff(data, kind):
    assert kc.sniff(data) == kind


# --------------------------------------------------------------------------- codecs

@pytest.mark.parametrize("kind", KINDS)
def test_decompress_what_the_kernel_tools_write(kind):
    data = elf()
    blob = vf.compress_module(data, kind)
    codecs = kc.Codecs(importer=no_binding)
    assert codecs.decompress(blob) == data
    assert codecs.used[kind] == {"gzip": "python:gzip", "xz": "python:lzma", "zstd": "binary:%s" % ZSTD}[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_compress_is_readable_by_the_real_tools(kind):
    data = elf() * 50
    blob = kc.Codecs(importer=no_binding).compress(data, kind)
    assert kc.sniff(blob) == kind
    tool = {"gzip": ["gzip", "-d", "-c"], "xz": ["xz", "-d", "-c"], "zstd": ["zstd", "-d", "-q", "-c"]}[kind]
    if not shutil.which(tool[0]):
        pytest.skip("%s is not installed" % tool[0])
    assert subprocess.run(tool, input=blob, stdout=subprocess.PIPE, check=True).stdout == data
    if kind == "xz":
        assert lzma.LZMADecompressor().decompress(blob) == data
        assert blob[6:8] == b"\x00\x01", "stream flags: check type CRC32 (what every in-kernel xz decoder checks)"


def test_gzip_and_xz_are_reproducible():
    codecs = kc.Codecs(importer=no_binding)
    data = elf()
    for kind in ("gzip", "xz"):
        assert codecs.compress(data, kind) == codecs.compress(data, kind)
    assert gzip.decompress(codecs.compress(data, "gzip")) == data


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=4096), kind=st.sampled_from(["gzip", "xz"]))
def test_round_trip_stdlib(data, kind):
    codecs = kc.Codecs(importer=no_binding)
    assert codecs.decompress(codecs.compress(data, kind), kind=kind) == data


@needs_zstd
@settings(max_examples=10, deadline=None)
@given(data=st.binary(max_size=2048))
def test_round_trip_zstd_binary(data):
    codecs = kc.Codecs(tools={"zstd": ZSTD}, importer=no_binding)
    assert codecs.decompress(codecs.compress(data, "zstd"), kind="zstd") == data


@pytest.mark.skipif(not UNZSTD, reason="unzstd is not installed")
def test_unzstd_when_zstd_is_missing():
    data = elf()
    codecs = kc.Codecs(tools={"zstd": None, "unzstd": UNZSTD}, importer=no_binding)
    assert codecs.decompress(vf.compress_module(data, "zstd")) == data
    assert codecs.used["zstd"] == "binary:%s" % UNZSTD
    with pytest.raises(kb.KmodBuildError, match="must be compressed with zstd and this host has no zstd"):
        codecs.compress(data, "zstd")


@needs_zstd
def test_zstandard_package_backend():
    zstandard = pytest.importorskip("zstandard")
    data = elf() * 20
    codecs = kc.Codecs(tools={"zstd": None, "unzstd": None})
    assert codecs.zstd_backend()[0] in ("python:zstandard", "python:compression.zstd")
    assert codecs.decompress(vf.compress_module(data, "zstd")) == data
    # a frame without its content size (what a streaming compressor writes) decompresses too
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert codecs.decompress(streamed) == data
    assert codecs.decompress(codecs.compress(data, "zstd")) == data


def test_no_zstd_at_all_says_what_to_install():
    codecs = kc.Codecs(tools={"zstd": None, "unzstd": None}, importer=no_binding)
    blob = b"\x28\xb5\x2f\xfd" + b"\0" * 16
    with pytest.raises(kb.KmodBuildError) as e:
        codecs.decompress(blob, what="/lib/modules/K/updates/dkms/nvidia.ko.zst")
    msg = str(e.value)
    assert "nvidia.ko.zst is compressed with zstd" in msg and "zstd tool" in msg and "zstandard" in msg


@pytest.mark.parametrize("kind,blob", [("gzip", b"\x1f\x8b\x08garbage"), ("xz", b"\xfd7zXZ\x00garbage")])
def test_corrupt_data_is_a_clear_error(kind, blob):
    with pytest.raises(kb.KmodBuildError, match="is %s-compressed but does not decompress" % kind):
        kc.Codecs(importer=no_binding).decompress(blob, what="m.ko" + SUFFIX[kind])


def test_find_tool_looks_in_sbin(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "zstd").write_text("#!/bin/sh\n")
    assert kc.find_tool("zstd") is None, "not executable"
    (tmp_path / "zstd").chmod(0o755)
    assert kc.find_tool("zstd") == str(tmp_path / "zstd")
    assert kc.find_tool("definitely-not-a-tool-gpufabric") is None


# --------------------------------------------------------------------------- inspection

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("with_tools", [False, True])
def test_inspect_compressed_module(tmp_path, kind, with_tools):
    data = elf(signed=True)
    plain = tmp_path / "rpcrdma.ko"
    plain.write_bytes(data)
    packed = tmp_path / ("rpcrdma.ko" + SUFFIX[kind])
    packed.write_bytes(vf.compress_module(data, kind))
    run = tools = None
    calls = []
    if with_tools:
        def real_run(argv, env=None):
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
            if os.path.basename(argv[0]) in ("modinfo", "nm"):
                assert kc.module_kind(argv[-1]) == "none", "modinfo/nm read the decompressed copy"
                calls.append(argv[0])
            return p.returncode, p.stdout, p.stderr
        run = real_run
        tools = {"modinfo": shutil.which("modinfo") or shutil.which("modinfo", path="/usr/sbin:/sbin"),
                 "nm": shutil.which("nm"), "zstd": ZSTD}
    a = kb.inspect_module(str(plain), run, tools)
    b = kb.inspect_module(str(packed), run, tools)
    assert b["compression"] == kind and a["compression"] == "none"
    assert b["file_sha256"] != a["file_sha256"] and b["sha256"] == a["sha256"] == a["file_sha256"]
    for key in ("name", "vermagic", "srcversion", "exports", "parameters", "signed"):
        assert a[key] == b[key], key
    assert b["name"] == "rpcrdma" and SYM in b["exports"] and b["signed"] is True
    assert bool(calls) is with_tools
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".gpufabric")]


def test_elf_error_names_compression():
    with pytest.raises(kb.KmodBuildError, match="it is zstd-compressed"):
        kb.modinfo_fields(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    with pytest.raises(kb.KmodBuildError, match="neither ELF nor"):
        kb.read_module_bytes(os.devnull)


# --------------------------------------------------------------------------- package verification

def compressed_modules(kind, kver=KVER):
    base = "/lib/modules/%s/updates/bundle/" % kver
    out = {}
    for name, srcv in (("sunrpc", "S1"), ("rpcrdma", "R1")):
        data = elf(name, srcv)
        out[base + name + ".ko" + SUFFIX.get(kind, "")] = data if kind == "none" else vf.compress_module(data, kind)
    return out


@pytest.mark.parametrize("kind", ["none"] + KINDS)
@pytest.mark.parametrize("data_compression", ["gz", "xz", pytest.param("zst", marks=needs_zstd)])
def test_verify_outputs_compressed_package(tmp_path, kind, data_compression):
    dist = tmp_path / "dist"
    dist.mkdir()
    vf.make_deb(str(dist / "vastnfs-modules_1_amd64.deb"), compressed_modules(kind),
                data_compression=data_compression)
    codecs = kc.Codecs(importer=no_binding)
    artifacts, modules, problems = kb.verify_outputs(str(dist), KVER, "vastnfs", codecs=codecs)
    assert problems == []
    assert sorted(m["name"] for m in modules) == ["rpcrdma", "sunrpc"]
    assert set(m["compression"] for m in modules) == {kind}
    assert sorted(artifacts[0]["modules"]) == sorted(compressed_modules(kind))
    if data_compression == "zst" or kind == "zstd":
        assert codecs.used["zstd"] == "binary:%s" % ZSTD


@needs_zstd
def test_verify_outputs_bare_compressed_and_duplicates(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "sunrpc.ko.zst").write_bytes(vf.compress_module(elf("sunrpc", "S1"), "zstd"))
    (dist / "rpcrdma.ko").write_bytes(elf("rpcrdma", "R1"))
    artifacts, modules, problems = kb.verify_outputs(str(dist), KVER, "kbuild")
    assert problems == []
    art = dict((a["file"], a) for a in artifacts)
    assert art["dist/sunrpc.ko.zst"]["sha256"] == kb.sha256_file(str(dist / "sunrpc.ko.zst"))
    assert art["dist/sunrpc.ko.zst"]["modules"] == ["/lib/modules/%s/updates/bundle/sunrpc.ko.zst" % KVER]
    (dist / "rpcrdma.ko.xz").write_bytes(vf.compress_module(elf("rpcrdma", "R1"), "xz"))
    _a, _m, problems = kb.verify_outputs(str(dist), KVER, "kbuild")
    assert [p for p in problems if "module rpcrdma is in the build twice" in p]


def test_package_zstd_data_without_any_zstd(tmp_path, monkeypatch):
    if not ZSTD:
        pytest.skip("the zstd tool is needed to write the fixture")
    deb = tmp_path / "p.deb"
    vf.make_deb(str(deb), compressed_modules("none"), data_compression="zst")
    monkeypatch.setattr(kc, "_import_zstd", no_binding)
    monkeypatch.setattr(kc, "find_tool", lambda name, extra_dirs=None: None)
    with pytest.raises(kb.KmodBuildError, match="this host has no zstd"):
        kb.package_contents(str(deb))


# --------------------------------------------------------------------------- signing inside the container

@pytest.mark.parametrize("kind", KINDS)
def test_container_signs_compressed_modules(tmp_path, kind):
    """The container script's gf_sign, run here with a stand-in sign-file: decompress, sign, compress again."""
    if not shutil.which({"gzip": "gzip", "xz": "xz", "zstd": "zstd"}[kind]):
        pytest.skip("%s is not installed" % kind)
    sign = tmp_path / "sign-file"
    sign.write_text("#!/bin/sh\n# sign-file HASH KEY CERT MODULE\nprintf '~Module signature appended~\\n' >> \"$4\"\n")
    sign.chmod(0o755)
    data = elf()
    ko = tmp_path / ("rpcrdma.ko" + SUFFIX[kind])
    ko.write_bytes(vf.compress_module(data, kind))
    script = "\n".join(["set -eu", "S=%s" % sign] + kmod_builder.SIGN_FUNCTION + ['gf_sign "%s"' % ko]) + "\n"
    subprocess.run(["/bin/sh", "-c", script], check=True)
    assert sorted(os.listdir(str(tmp_path))) == sorted(["sign-file", ko.name])
    raw = ko.read_bytes()
    assert kc.sniff(raw) == kind
    facts = kb.inspect_module(str(ko))
    assert facts["signed"] is True and facts["compression"] == kind
    assert kc.Codecs().decompress(raw) == data + kb.SIGNATURE_MAGIC


def test_container_script_signs_every_suffix():
    script = kb.container_script("vastnfs", sign=True)
    assert "for ko in *.ko *.ko.gz *.ko.xz *.ko.zst" in script
    assert "-name '*.ko.zst'" in script and "gf_sign()" in script
    assert subprocess.run(["/bin/sh", "-n"], input=script.encode(), check=False).returncode == 0
    assert "xz-utils" in kb.BUILDER_PACKAGES and "zstd" in kb.BUILDER_PACKAGES
