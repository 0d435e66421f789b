# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build container for real, without any registry or mirror: a tiny builder image is imported from the host's
own binaries (sh, coreutils, make, dpkg-query and their libraries), so this runs offline. It checks what the unit
tests can only check on the argv: under rootful podman the build runs as nobody (65534) with no network and no
capabilities, writes its outputs into the directory handed to that uid, the outputs come back owned by root, and the
image's identity and package list land in the manifest and builder-packages.txt.

Skipped with the reason when podman, root or one of the host tools is missing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "vendor_nfs"))
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb

KVER = "6.1.0-50-amd64"
BINARIES = ["sh", "cp", "mkdir", "rm", "find", "make", "cat", "id", "head", "ls", "dpkg-query", "touch"]
IMAGE = "localhost/gpufabric-kbuild-smoke:%s" % KVER

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the rootful podman path (build as nobody) needs root"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed"),
    pytest.mark.skipif(any(shutil.which(b) is None for b in BINARIES + ["ldd"]),
                       reason="a host tool for the offline image is missing"),
]

STATUS = "Package: gpufabric-smoke\nStatus: install ok installed\nVersion: 1.0-1\nArchitecture: amd64\n" \
         "Maintainer: none\nDescription: smoke\n\n"
# stand-in for the headers' kbuild: 'make -C /lib/modules/<k>/build M=<tree> modules' builds nothing; the source
# tarball carries prebuilt modules, which the kbuild profile collects
HEADERS_MAKEFILE = "modules:\n\t@id -u > $(M)/uid.txt\n"


def libraries(path):
    out = subprocess.run(["ldd", path], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
    return libs


def rootfs_tar(path):
    files = set()
    for b in BINARIES:
        real = os.path.realpath(shutil.which(b))
        files.add(real)
        files.update(os.path.realpath(x) for x in libraries(real))
        files.update(x for x in libraries(real))
    with tarfile.open(path, "w") as t:
        for d, mode in (("tmp", 0o1777), ("bin", 0o755), ("var/lib/dpkg", 0o755), ("var/lib/dpkg/info", 0o755),
                        ("var/lib/dpkg/updates", 0o755), ("lib/modules/%s/build" % KVER, 0o755)):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, mode
            t.addfile(ti)
        done = set()
        for f in sorted(files):
            real = os.path.realpath(f)
            if real not in done:
                t.add(real, arcname=real.lstrip("/"), recursive=False)
                done.add(real)
            if f != real and f not in done:  # the loader's own path (/lib64/ld-linux...) as a link
                ti = tarfile.TarInfo(f.lstrip("/"))
                ti.type, ti.linkname = tarfile.SYMTYPE, real
                t.addfile(ti)
                done.add(f)
        for b in BINARIES:
            real = os.path.realpath(shutil.which(b))
            if real != "/bin/" + b:
                ti = tarfile.TarInfo("bin/" + b)
                ti.type, ti.linkname = tarfile.SYMTYPE, real
                t.addfile(ti)
        for name, text in (("var/lib/dpkg/status", STATUS),
                           ("lib/modules/%s/build/Makefile" % KVER, HEADERS_MAKEFILE)):
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))


def source_tarball(work):
    path = os.path.join(work, "prebuilt-1.tar")
    mods = {
        "sunrpc.ko": vf.make_module_elf("sunrpc", KVER + " SMP", srcversion="S1", params=["nfs_bundle_version"]),
        "rpcrdma.ko": vf.make_module_elf("rpcrdma", KVER + " SMP", srcversion="R1",
                                         exports=["rpcrdma_register_nvfs_dma_ops"]),
    }
    with tarfile.open(path, "w") as t:
        ti = tarfile.TarInfo("prebuilt-1")
        ti.type, ti.mode = tarfile.DIRTYPE, 0o700  # not world-readable: the build must still read it
        t.addfile(ti)
        for name, data in mods.items():
            ti = tarfile.TarInfo("prebuilt-1/" + name)
            ti.size, ti.mode = len(data), 0o600
            t.addfile(ti, io.BytesIO(data))
    return path, kb.sha256_file(path)


def runner(argv, env=None):
    e = dict(os.environ, LC_ALL="C")
    e.update(env or {})
    p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       check=False)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("smoke"))
    env = kb.podman_env(os.path.join(work, "podman"))
    tar = os.path.join(work, "rootfs.tar")
    rootfs_tar(tar)
    rc, _o, err = runner(["podman", "import", "-q", tar, IMAGE], env)
    assert rc == 0, err
    yield work, env
    runner(["podman", "rmi", "-f", IMAGE], env)
    # the overlay driver keeps its home mounted: unmount what is below this test's directory, nothing else
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for m in reversed(mounts):
        if m.startswith(work + os.sep):
            runner(["umount", m])


def test_build_runs_as_nobody_offline_and_records_the_image(smoke):
    work, env = smoke
    src, digest = source_tarball(work)
    cache = os.path.join(work, "cache")
    tools = {"podman": shutil.which("podman"), "modinfo": shutil.which("modinfo"), "nm": shutil.which("nm")}
    man = kb.build(runner, tools, src, digest, KVER, "1", "kbuild", cache, IMAGE, env=env, builder_mode="image",
                   required_modules=["sunrpc", "rpcrdma"], is_rootless=False)
    assert sorted(m["name"] for m in man["modules"]) == ["rpcrdma", "sunrpc"]
    assert man["builder"]["packages"] == ["gpufabric-smoke=1.0-1 amd64"]
    assert man["builder"]["id"] and man["builder"]["mode"] == "image"
    entry = os.path.join(cache, man["key"])
    assert "gpufabric-smoke=1.0-1 amd64" in open(os.path.join(entry, "builder-packages.txt")).read()
    for f in os.listdir(os.path.join(entry, "dist")):
        assert os.stat(os.path.join(entry, "dist", f)).st_uid == 0


@pytest.mark.parametrize("script,expect", [
    ("id -u", "65534"),
    # no network: only the loopback interface exists
    ("ls /sys/class/net", "lo"),
    # no capabilities at all, and no way to gain any
    ("cat /proc/self/status", "CapEff:\t0000000000000000"),
    ("cat /proc/self/status", "NoNewPrivs:\t1"),
])
def test_the_build_container_is_locked_down(smoke, tmp_path, script, expect):
    _work, env = smoke
    out = tmp_path / "out"
    out.mkdir()
    argv = kb.podman_run_argv("podman", IMAGE, str(tmp_path), str(out), KVER, "kbuild", is_rootless=False)
    argv[-1] = script
    rc, stdout, err = runner(argv, env)
    assert rc == 0, err
    assert expect in stdout.split("\n") or expect in stdout
