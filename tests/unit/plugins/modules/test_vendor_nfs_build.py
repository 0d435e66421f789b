# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vendor_nfs_build main(): a podman stand-in on PATH records its argv and writes a package of synthetic modules;
the real dpkg-deb/modinfo/nm/depmod of the host read and install it into a tmp sysroot."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.modules import vendor_nfs_build
from modrunner import run_module

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor_nfs"))
sys.path.insert(0, FIXTURES)
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

KVER = "6.1.0-50-amd64"

FAKE_PODMAN = r'''#!%(python)s
import json, os, sys
sys.path.insert(0, %(fixtures)r)
import vendor_fixture as vf
with open(%(log)r, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if args[:2] == ["image", "exists"]:
    sys.exit(0 if os.environ.get("FAKE_PODMAN_IMAGE", "1") == "1" else 1)
if args[:2] == ["image", "inspect"]:
    print(json.dumps([{"Id": os.environ.get("FAKE_PODMAN_ID", "sha256:" + "1" * 64), "Digest": "sha256:" + "2" * 64,
                       "RepoDigests": []}]))
    sys.exit(0)
if args[0] in ("pull", "build"):
    sys.exit(int(os.environ.get("FAKE_PODMAN_CREATE_RC", "0")))
if args[0] == "run" and not any(a.endswith(":/out:rw") for a in args):
    sys.stdout.write("installed\tgcc-12\t12.2.0-14\tamd64\ngpufabric-headers\tyes\n")
    sys.exit(0)
if args[0] == "run":
    out = [a.split(":")[0] for a in args if a.endswith(":/out:rw")][0]
    kver = [a.split("=", 1)[1] for a in args if a.startswith("KVER=")][0]
    base = "/lib/modules/%%s/updates/bundle/" %% kver
    os.makedirs(os.path.join(out, "dist"))
    vf.make_deb(os.path.join(out, "dist", "vastnfs-modules_1_amd64.deb"), {
        base + "sunrpc.ko": vf.make_module_elf("sunrpc", kver + " SMP", srcversion="S1", params=["nfs_bundle_version"]),
        base + "rpcrdma.ko": vf.make_module_elf("rpcrdma", kver + " SMP", srcversion="R1",
                                                exports=["rpcrdma_register_nvfs_dma_ops"]),
    })
    sys.exit(0)
sys.exit(2)
'''


@pytest.fixture
def env(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "podman.log"
    p = bindir / "podman"
    p.write_text(FAKE_PODMAN % {"python": sys.executable, "fixtures": FIXTURES, "log": str(log)})
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin")))
    root = tmp_path / "root"
    (root / "lib" / "modules" / KVER / "kernel").mkdir(parents=True)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", str(root))
    src, digest = vf.make_source_tarball(str(tmp_path))
    args = {"src": src, "sha256": digest, "version": "4.0.35", "kernel_release": KVER,
            "cache_dir": str(tmp_path / "cache"), "builder_create": False}

    def calls():
        if not log.exists():
            return []
        return [json.loads(x) for x in log.read_text().splitlines()]
    return {"args": args, "calls": calls, "root": root, "digest": digest, "tmp": tmp_path}


@pytest.mark.parametrize("override,needle", [
    ({"sha256": "xyz"}, "sha256 must be 64 hexadecimal characters"),
    ({"sha256": "0" * 64}, "refusing to build it"),
    ({"kernel_release": "../../etc"}, "does not look like a kernel release"),
    ({"version": "1 0"}, "version"),
    ({"profile": "nope"}, "value of profile must be one of"),
    ({"signing_key": "/nonexistent.key"}, "parameters are required together"),
    # issue 13: a value spanning two lines, including [trusted=yes]
    ({"builder_sources": ["deb http://m.invalid/d bookworm main\ndeb [trusted=yes] http://e.invalid/d bookworm main"]},
     "builder_sources[0]: 'deb http://m.invalid/d bookworm main\\ndeb [trusted=yes]"),
    ({"builder_sources": ["deb [trusted=yes] file:/srv/repo ./"]}, "builder_allow_unauthenticated allows it"),
    ({"builder_extra_packages": ["bc; rm -rf /"]}, "is not a package name"),
    ({"builder_image": "bad image"}, "is not an image reference"),
    ({"builder_base_image": "x\ny"}, "builder_base_image: 'x\\ny' contains a control character"),
    ({"builder_base_image": "x y"}, "is not an image reference"),
    ({"builder_mirror": "ftp://m.invalid/d"}, "builder mirror"),
    ({"builder_suite": "bookworm main"}, "builder suite"),
    ({"builder_mode": "image"}, "builder_mode=image needs builder_image"),
    ({"builder_mode": "containerfile", "builder_containerfile": "/nonexistent/Containerfile"}, "does not exist"),
])
def test_bad_input_fails_before_podman(env, monkeypatch, override, needle):
    res = run_module(vendor_nfs_build, dict(env["args"], **override), monkeypatch=monkeypatch)
    assert res["failed"] and needle in res["msg"], res["msg"]
    assert env["calls"]() == []


def test_missing_builder_image_without_create(env, monkeypatch):
    monkeypatch.setenv("FAKE_PODMAN_IMAGE", "0")
    res = run_module(vendor_nfs_build, env["args"], monkeypatch=monkeypatch)
    assert res["failed"] and "builder_create is false" in res["msg"]
    assert [c[0] for c in env["calls"]()] == ["image"]


def test_check_mode_builds_nothing(env, monkeypatch):
    res = run_module(vendor_nfs_build, env["args"], check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] and not res["built"] and "would build" in res["msg"]
    # the builder image is read (its ID is part of the cache key), nothing runs or is made
    assert sorted(set(tuple(c[:2]) for c in env["calls"]())) == [("image", "exists"), ("image", "inspect")]


def test_changed_builder_image_builds_again(env, monkeypatch):
    """Issue 21 item 22: the builder image's ID is part of the cache key."""
    first = run_module(vendor_nfs_build, env["args"], monkeypatch=monkeypatch)
    assert not first.get("failed"), first.get("msg")
    same = run_module(vendor_nfs_build, env["args"], monkeypatch=monkeypatch)
    assert same["cache_hit"] and same["key"] == first["key"] and not same["changed"]
    monkeypatch.setenv("FAKE_PODMAN_ID", "sha256:" + "7" * 64)
    check = run_module(vendor_nfs_build, env["args"], check_mode=True, monkeypatch=monkeypatch)
    assert check["changed"] and "would build" in check["msg"]
    rebuilt = run_module(vendor_nfs_build, env["args"], monkeypatch=monkeypatch)
    assert not rebuilt.get("failed"), rebuilt.get("msg")
    assert rebuilt["built"] and not rebuilt["cache_hit"] and rebuilt["key"] != first["key"]
    assert rebuilt["builder"]["id"] == "sha256:" + "7" * 64
    assert len([c for c in env["calls"]() if c[0] == "run" and any(a.endswith(":/out:rw") for a in c)]) == 2
    # no builder image and none may be made (a cache entry copied to this host): the newest entry of these inputs
    monkeypatch.setenv("FAKE_PODMAN_IMAGE", "0")
    copied = run_module(vendor_nfs_build, env["args"], monkeypatch=monkeypatch)
    assert not copied.get("failed"), copied.get("msg")
    assert copied["cache_hit"] and copied["key"] in (first["key"], rebuilt["key"]) and not copied["built"]


def test_build_cache_install_idempotent(env, monkeypatch):
    args = dict(env["args"], install=True)
    first = run_module(vendor_nfs_build, args, monkeypatch=monkeypatch)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] and first["built"] and not first["cache_hit"]
    runs = [c for c in env["calls"]() if c[0] == "run" and any(a.endswith(":/out:rw") for a in c)]
    assert len(runs) == 1
    assert "--network" in runs[0] and runs[0][runs[0].index("--network") + 1] == "none"
    assert "--privileged" not in runs[0]
    assert ("--user" in runs[0]) is (os.geteuid() == 0) and ("--userns" in runs[0]) is (os.geteuid() != 0)
    assert first["builder"]["id"] == "sha256:" + "1" * 64 and first["builder"]["packages"] == 1
    assert "gcc-12=12.2.0-14 amd64" in open(first["builder"]["packages_file"]).read()
    assert first["collisions"] == [["vastnfs-4.0.35-gf1/Makefile", "vastnfs-4.0.35-gf1/makefile"]]
    assert first["install"]["method"] == "copy"
    assert sorted(d["object"] for d in first["drift"]) == ["%s/rpcrdma" % KVER, "%s/sunrpc" % KVER]
    bundle = env["root"] / "lib" / "modules" / KVER / "updates" / "bundle"
    assert sorted(os.listdir(str(bundle))) == ["rpcrdma.ko", "sunrpc.ko"]
    assert "updates/bundle/rpcrdma.ko" in (env["root"] / "lib" / "modules" / KVER / "modules.dep").read_text()
    rec = json.loads((env["root"] / "etc" / "gpufabric" / "vendor_nfs.json").read_text())
    assert rec["kernels"][KVER]["version"] == "4.0.35"

    second = run_module(vendor_nfs_build, args, monkeypatch=monkeypatch)
    assert not second.get("failed"), second.get("msg")
    assert not second["changed"] and second["cache_hit"] and not second["built"]
    assert second["install"]["actions"] == [] and second["drift"] == []
    assert len([c for c in env["calls"]() if c[0] == "run"]) == 2

    # A module replaced behind our back is drift and is repaired.
    (bundle / "sunrpc.ko").write_bytes(b"in-tree")
    third = run_module(vendor_nfs_build, args, check_mode=True, monkeypatch=monkeypatch)
    assert third["changed"] and [d["object"] for d in third["drift"]] == ["%s/sunrpc" % KVER]
    assert (bundle / "sunrpc.ko").read_bytes() == b"in-tree"
    fourth = run_module(vendor_nfs_build, args, monkeypatch=monkeypatch)
    assert fourth["changed"] and (bundle / "sunrpc.ko").read_bytes() != b"in-tree"


def test_url_source_file_scheme(env, monkeypatch):
    args = dict(env["args"], src="file://" + env["args"]["src"])
    res = run_module(vendor_nfs_build, args, monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["built"]


@pytest.mark.parametrize("override,first_create", [
    ({"builder_mode": "image", "builder_image": "registry.example/team/kbuild@sha256:" + "a" * 64}, "pull"),
    ({"builder_mode": "containerfile", "builder_family": "el",
      "builder_base_image": "registry.example/el/base:9"}, "build"),
    ({"builder_mode": "containerfile", "builder_base_image": "registry.example/u/base:24.04",
      "builder_sources": ["deb [trusted=yes] file:/srv/k ./"], "builder_allow_unauthenticated": True}, "build"),
])
def test_builder_modes_create_the_missing_image(env, monkeypatch, override, first_create):
    monkeypatch.setenv("FAKE_PODMAN_IMAGE", "0")
    res = run_module(vendor_nfs_build, dict(env["args"], builder_create=True, **override), monkeypatch=monkeypatch)
    assert not res.get("failed"), res.get("msg")
    assert res["builder"]["mode"] == override["builder_mode"] and res["builder"]["created"]
    verbs = [c[0] for c in env["calls"]()]
    assert verbs[:2] == ["image", first_create] and verbs.count("run") == 2
    if first_create == "build":
        build = [c for c in env["calls"]() if c[0] == "build"][0]
        assert "BASE_IMAGE=%s" % override["builder_base_image"] in build


def test_builder_mode_containerfile_needs_a_base_image(env, monkeypatch):
    monkeypatch.setenv("FAKE_PODMAN_IMAGE", "0")
    res = run_module(vendor_nfs_build, dict(env["args"], builder_create=True, builder_mode="containerfile"),
                     monkeypatch=monkeypatch)
    assert res["failed"] and "builder_base_image" in res["msg"]
    assert [c[0] for c in env["calls"]()] == ["image"]
