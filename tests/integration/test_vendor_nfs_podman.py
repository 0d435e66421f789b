# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vendor_nfs_build for real: the vendor-like fixture built in podman for a Debian bookworm kernel.

Runs the module as Ansible runs it (a subprocess with an arguments file). The builder image is the VM lab's
``localhost/gpufabric-kbuild:<kver>`` when its podman storage (``.cache/vm/podman``) has one, else the module creates
it from Debian packages (debootstrap, the host's apt mirror). Kernel: ``GPUFABRIC_KBUILD_KVER``, else the lab's
image kernel, else the newest ``linux-headers-*-amd64`` apt knows for bookworm.

Skipped with the reason when podman, debootstrap or root is missing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "vendor_nfs"))
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

MODULE = os.path.join(REPO, "plugins", "modules", "vendor_nfs_build.py")
# the VM lab's cache (GPUFABRIC_VM_CACHE, as tests/lab/vm/labimage.py resolves it)
LAB_CACHE = os.path.abspath(os.environ.get("GPUFABRIC_VM_CACHE") or os.path.join(REPO, ".cache", "vm"))
LAB_PODMAN = os.path.join(LAB_CACHE, "podman")
TIMINGS = {}

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building in podman with a debootstrapped image needs root"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed (apt-get install podman runc)"),
]


def _env():
    env = dict(os.environ)
    build = os.path.join(REPO, ".build")
    link = os.path.join(build, "ansible_collections", "gpufabric", "node")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO, link)
    env["PYTHONPATH"] = build + os.pathsep + env.get("PYTHONPATH", "")
    return env


def podman_images(conf_dir):
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = os.path.join(conf_dir, "containers.conf")
    env["CONTAINERS_STORAGE_CONF"] = os.path.join(conf_dir, "storage.conf")
    if not os.path.exists(env["CONTAINERS_STORAGE_CONF"]):
        return []
    p = subprocess.run(check=False, args=["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.stdout.split() if p.returncode == 0 else []


def pick_kver():
    if os.environ.get("GPUFABRIC_KBUILD_KVER"):
        return os.environ["GPUFABRIC_KBUILD_KVER"]
    for img in podman_images(LAB_PODMAN):
        if img.startswith("localhost/gpufabric-kbuild:"):
            return img.split(":", 1)[1]
    meta = os.path.join(LAB_CACHE, "images")
    for d in sorted(os.listdir(meta)) if os.path.isdir(meta) else []:
        mp = os.path.join(meta, d, "meta.json")
        if os.path.exists(mp):
            with open(mp) as f:
                return json.load(f)["kver"]
    # the builder image is debootstrapped from bookworm main: take the ABI that main's linux-headers-amd64 depends on
    # (the host's apt also sees bookworm-security, whose newer ABIs debootstrap of main cannot install)
    p = subprocess.run(check=False, args=["apt-cache", "madison", "linux-headers-amd64"],
                       stdout=subprocess.PIPE, universal_newlines=True)
    main = [line.split("|")[1].strip() for line in p.stdout.splitlines()
            if line.count("|") >= 2 and "bookworm/main" in line and "-security" not in line and "-updates" not in line]
    if main:
        d = subprocess.run(check=False, args=["apt-cache", "depends", "linux-headers-amd64=%s" % main[0]],
                           stdout=subprocess.PIPE, universal_newlines=True)
        m = re.search(r"linux-headers-(6\.1\.0-\d+-amd64)", d.stdout)
        if m:
            return m.group(1)
    pytest.skip("no bookworm main linux-headers-amd64 known to apt (run apt-get update)")


@pytest.fixture(scope="module")
def kver():
    return pick_kver()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("vendor_nfs")
    yield d
    if TIMINGS:
        sys.stderr.write("\nvendor_nfs podman timings: %s\n" % json.dumps(TIMINGS, sort_keys=True))


def run_module(args, tmp):
    argsfile = os.path.join(str(tmp), "args-%d.json" % int(time.time() * 1000))
    with open(argsfile, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    t0 = time.time()
    p = subprocess.run(check=False, args=[sys.executable, MODULE, argsfile], env=_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=1800)
    took = time.time() - t0
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("module printed no JSON (rc=%d): %s %s"
                             % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return res, took


def base_args(work, kver, tarball, digest):
    conf = LAB_PODMAN if os.path.isdir(LAB_PODMAN) else str(work / "podman")
    return {"src": tarball, "sha256": digest, "version": "4.0.35-gf1", "kernel_release": kver,
            "cache_dir": str(work / "cache"), "podman_conf_dir": conf, "builder_suite": "bookworm"}


def test_build_verify_and_cache(work, kver):
    if not os.path.isdir(LAB_PODMAN) and shutil.which("debootstrap") is None:
        pytest.skip("no builder image of the VM lab and no debootstrap to create one")
    tarball, digest = vf.make_source_tarball(str(work))
    res, took = run_module(base_args(work, kver, tarball, digest), work)
    assert not res.get("failed"), res.get("msg")
    TIMINGS["builder_image_s"] = res["builder"]["seconds"]
    TIMINGS["builder_created"] = res["builder"]["created"]
    TIMINGS["build_s"] = res["timings"]["build"]
    TIMINGS["first_run_s"] = round(took, 2)
    assert res["changed"] and res["built"] and not res["cache_hit"]
    assert res["collisions"] == [["vastnfs-4.0.35-gf1/Makefile", "vastnfs-4.0.35-gf1/makefile"]]
    names = sorted(m["name"] for m in res["modules"])
    assert names == ["nfs", "rpcrdma", "sunrpc"]
    for m in res["modules"]:
        assert m["vermagic"].split()[0] == kver
        assert m["installed_path"] == "/lib/modules/%s/updates/bundle/%s.ko" % (kver, m["name"])
    # Independent read-back of the artifact with the system tools.
    deb = os.path.join(res["artifact_dir"], res["artifacts"][0]["file"])
    listing = subprocess.run(check=False, args=["dpkg-deb", "-c", deb], stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert "./lib/modules/%s/updates/bundle/rpcrdma.ko" % kver in listing
    x = work / "x"
    subprocess.run(["dpkg-deb", "-x", deb, str(x)], check=True)
    ko = str(x / "lib" / "modules" / kver / "updates" / "bundle" / "rpcrdma.ko")
    magic = subprocess.run(check=False, args=["modinfo", "-F", "vermagic", ko], stdout=subprocess.PIPE,
                           universal_newlines=True).stdout.split()
    assert magic[0] == kver
    nm = subprocess.run(check=False, args=["nm", ko], stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert "__ksymtab_rpcrdma_register_nvfs_dma_ops" in nm
    # The pure-Python ELF reader agrees with the tools on a real module.
    sys.path.insert(0, os.path.join(REPO, ".build"))
    from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
    with open(ko, "rb") as f:
        data = f.read()
    assert kb.NVFS_SYMBOL in kb.exported_symbols(data)
    assert kb.modinfo_fields(data)["vermagic"][0].split()[0] == kver

    again, took2 = run_module(base_args(work, kver, tarball, digest), work)
    TIMINGS["cached_rerun_s"] = round(took2, 2)
    assert not again.get("failed"), again.get("msg")
    assert again["cache_hit"] and not again["changed"] and not again["built"]
    assert again["key"] == res["key"]
    assert took2 < 2.0, "cached rerun took %.2f s" % took2


def test_case_insensitive_source_fails_loudly(work, kver):
    tarball, digest = vf.make_source_tarball(str(work), variant="case_insensitive")
    res, _took = run_module(base_args(work, kver, tarball, digest), work)
    assert res.get("failed")
    assert "no kernel modules" in res["msg"]
    assert not os.path.exists(os.path.join(str(work / "cache"), res.get("key", "none")))


def test_missing_symbol_fails(work, kver):
    tarball, digest = vf.make_source_tarball(str(work), variant="no_symbol")
    res, _took = run_module(base_args(work, kver, tarball, digest), work)
    assert res.get("failed")
    assert "does not export rpcrdma_register_nvfs_dma_ops" in res["msg"]


def test_wrong_sha_refused(work, kver):
    tarball, digest = vf.make_source_tarball(str(work))
    res, took = run_module(dict(base_args(work, kver, tarball, digest), sha256="0" * 64), work)
    assert res.get("failed") and "refusing to build" in res["msg"]
    assert res["actual"] == digest


def test_kernel_ceiling_fails_with_the_compiler_error(work, kver):
    """A release that does not support the target kernel yet: the build fails, says why, caches nothing."""
    tarball, digest = vf.make_source_tarball(str(work), variant="kernel_ceiling", max_kernel=(6, 0, 0))
    res, _took = run_module(base_args(work, kver, tarball, digest), work)
    assert res.get("failed")
    blob = json.dumps(res)
    assert "supports kernels up to 6.0.0 only" in blob, blob[-2000:]
    assert not res.get("built") and not os.path.exists(os.path.join(str(work / "cache"), res.get("key", "none")))


def test_signed_build_with_a_real_key(work, kver):
    """Module signing (Secure Boot stays on): a real RSA key and X.509 certificate made here with openssl, sign-file
    from the builder image's kernel headers; the packaged modules carry the signature, modinfo names the signer."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    keys = work / "mok"
    keys.mkdir()
    key, crt = str(keys / "signing.key"), str(keys / "signing.crt")
    subprocess.run(["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-sha256",
                    "-subj", "/CN=gpufabric lab module signing/", "-outform", "PEM", "-keyout", key, "-out", crt,
                    "-addext", "extendedKeyUsage=codeSigning"], check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    tarball, digest = vf.make_source_tarball(str(work))
    res, _took = run_module(dict(base_args(work, kver, tarball, digest), signing_key=key, signing_cert=crt), work)
    assert not res.get("failed"), res.get("msg")
    assert res["built"]
    deb = os.path.join(res["artifact_dir"], res["artifacts"][0]["file"])
    x = work / "signed"
    subprocess.run(["dpkg-deb", "-x", deb, str(x)], check=True)
    for name in ("sunrpc", "rpcrdma", "nfs"):
        ko = str(x / "lib" / "modules" / kver / "updates" / "bundle" / ("%s.ko" % name))
        with open(ko, "rb") as f:
            assert f.read().endswith(b"~Module signature appended~\n"), ko
        signer = subprocess.run(["modinfo", "-F", "signer", ko], check=True, stdout=subprocess.PIPE,
                                universal_newlines=True).stdout.strip()
        assert signer == "gpufabric lab module signing", (ko, signer)
        assert subprocess.run(["modinfo", "-F", "sig_hashalgo", ko], check=True, stdout=subprocess.PIPE,
                              universal_newlines=True).stdout.strip() == "sha256"
    for m in res["modules"]:
        assert m["signed"] and m["signer"] == "gpufabric lab module signing", m
