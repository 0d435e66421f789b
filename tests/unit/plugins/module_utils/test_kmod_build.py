# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kmod_build: ELF/modinfo parsing, vermagic, collisions, cache key, podman argv, verification, install, proofs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import shutil
import sys
import tarfile

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor_nfs"))
sys.path.insert(0, FIXTURES)
import vendor_fixture as vf  # noqa: E402 pylint: disable=wrong-import-position

KVER = "6.1.0-50-amd64"
OTHER = "6.1.0-56-amd64"
VM = KVER + " SMP preempt mod_unload modversions"
SYM = kb.NVFS_SYMBOL
BUNDLE = "/lib/modules/%s/updates/bundle/" % KVER


# --------------------------------------------------------------------------- ELF

@pytest.mark.parametrize("bits,big,symtab,strings", [
    (64, False, True, True), (64, False, True, False), (64, False, False, True),
    (32, False, True, True), (64, True, True, True), (32, True, False, True),
])
def test_elf_exports_and_modinfo(bits, big, symtab, strings):
    data = vf.make_module_elf("rpcrdma", VM, srcversion="ABC123", exports=[SYM, "other_sym"], params=["p1"],
                              use_symtab=symtab, use_strings=strings, bits=bits, big_endian=big)
    assert kb.exported_symbols(data) == {SYM, "other_sym"}
    info = kb.modinfo_fields(data)
    assert info["vermagic"] == [VM]
    assert info["srcversion"] == ["ABC123"]
    assert info["parm"] == ["p1:test"]


@pytest.mark.parametrize("signed", [True, False])
def test_inspect_module_python_fallback(tmp_path, signed):
    p = tmp_path / "sunrpc.ko"
    p.write_bytes(vf.make_module_elf("sunrpc", VM, params=["nfs_bundle_version"], signed=signed))
    facts = kb.inspect_module(str(p))
    assert facts["name"] == "sunrpc"
    assert facts["vermagic"] == VM
    assert facts["parameters"] == ["nfs_bundle_version"]
    assert facts["signed"] is signed
    assert facts["exports"] == []


def test_not_elf():
    with pytest.raises(kb.KmodBuildError):
        kb.ElfFile(b"MZ\0\0")


@pytest.mark.parametrize("out,expected", [
    ("0000000000000000 r __ksymtab_rpcrdma_register_nvfs_dma_ops\n0000 T init_module\n",
     {"rpcrdma_register_nvfs_dma_ops"}),
    ("0000 r __kstrtab_foo\n0000 n __ksymtab_strings\n", {"foo"}),
    ("0000 T rpcrdma_register_nvfs_dma_ops\n", set()),
])
def test_parse_nm_exports(out, expected):
    assert kb.parse_nm_exports(out) == expected


@pytest.mark.parametrize("text,release,flags", [
    (VM, KVER, ["SMP", "preempt", "mod_unload", "modversions"]),
    ("6.8.0-45-generic SMP preempt mod_unload modversions ", "6.8.0-45-generic",
     ["SMP", "preempt", "mod_unload", "modversions"]),
    ("5.14.0-427.el9.x86_64 SMP mod_unload modversions", "5.14.0-427.el9.x86_64",
     ["SMP", "mod_unload", "modversions"]),
])
def test_parse_vermagic(text, release, flags):
    assert kb.parse_vermagic(text) == {"release": release, "flags": flags}


def test_parse_vermagic_empty():
    with pytest.raises(ValueError):
        kb.parse_vermagic("  ")


# --------------------------------------------------------------------------- validation, collisions, cache key

@pytest.mark.parametrize("value,ok", [
    ("a" * 64, True), ("A" * 64, True), ("sha256:" + "0" * 64, True), ("a" * 63, False), ("g" * 64, False),
    ("", False), (None, False),
])
def test_validate_sha256(value, ok):
    if ok:
        assert kb.validate_sha256(value) == value.lower().replace("sha256:", "")
    else:
        with pytest.raises(ValueError):
            kb.validate_sha256(value)


@pytest.mark.parametrize("value,ok", [
    (KVER, True), ("6.8.0-45-generic", True), ("5.14.0-427.el9.x86_64", True), ("../etc", False),
    ("", False), ("6.1/x", False), ("latest", False),
])
def test_validate_kver(value, ok):
    if ok:
        assert kb.validate_kver(value) == value
    else:
        with pytest.raises(ValueError):
            kb.validate_kver(value)


@pytest.mark.parametrize("names,expected", [
    (["v/Makefile", "v/makefile", "v/build.sh"], [["v/Makefile", "v/makefile"]]),
    (["v/", "v/Makefile", "v/Kbuild"], []),
    (["./v/README", "v/readme", "V/x", "v/x"], [["V/x", "v/x"], ["v/README", "v/readme"]]),
    (["a/B/c", "a/b/C", "a/b/c"], [["a/B/c", "a/b/C", "a/b/c"]]),
])
def test_case_collisions(names, expected):
    assert kb.case_collisions(names) == expected


def test_cache_key_changes_with_each_input():
    img = "sha256:" + "e" * 64
    base = kb.cache_key("a" * 64, "vastnfs", KVER, img)
    assert base == kb.cache_key("A" * 64, "vastnfs", KVER, "E" * 64)
    variants = [kb.cache_key("b" * 64, "vastnfs", KVER, img), kb.cache_key("a" * 64, "kbuild", KVER, img),
                kb.cache_key("a" * 64, "vastnfs", OTHER, img), kb.cache_key("a" * 64, "vastnfs", KVER, img, "c" * 64),
                kb.cache_key("a" * 64, "vastnfs", KVER, "sha256:" + "f" * 64)]
    assert len(set(variants + [base])) == len(variants) + 1


@pytest.mark.parametrize("image_id", [None, "", "latest", "sha256:" + "1" * 63, "1" * 64 + "\n"])
def test_cache_key_refuses_a_missing_builder_id(image_id):
    with pytest.raises(kb.KmodBuildError, match="builder image ID"):
        kb.cache_key("a" * 64, "vastnfs", KVER, image_id)


def test_verify_source(tmp_path):
    path, digest = vf.make_source_tarball(str(tmp_path))
    assert kb.verify_source(path, digest) == digest
    with pytest.raises(kb.KmodBuildError) as e:
        kb.verify_source(path, "0" * 64)
    assert e.value.details["actual"] == digest
    with pytest.raises(kb.KmodBuildError):
        kb.verify_source(str(tmp_path / "missing.tar.xz"), digest)


def test_extract_source_reports_collisions(tmp_path):
    path, _d = vf.make_source_tarball(str(tmp_path))
    top, collisions = kb.extract_source(path, str(tmp_path / "x"))
    assert os.path.basename(top) == "vastnfs-4.0.35-gf1"
    assert collisions == [["vastnfs-4.0.35-gf1/Makefile", "vastnfs-4.0.35-gf1/makefile"]]
    with open(os.path.join(top, "Makefile")) as a, open(os.path.join(top, "makefile")) as b:
        assert a.read() != b.read()
    assert os.access(os.path.join(top, "build.sh"), os.X_OK)


@pytest.mark.parametrize("member,linkname", [("../evil", None), ("/abs", None), ("v/link", "/etc/passwd"),
                                             ("v/link", "../../y")])
def test_extract_source_rejects_escapes(tmp_path, member, linkname):
    tb = tmp_path / "bad.tar"
    with tarfile.open(str(tb), "w") as tf:
        ti = tarfile.TarInfo(member)
        if linkname:
            ti.type, ti.linkname = tarfile.SYMTYPE, linkname
            tf.addfile(ti)
        else:
            ti.size = 1
            tf.addfile(ti, io.BytesIO(b"x"))
    with pytest.raises(kb.KmodBuildError):
        kb.extract_source(str(tb), str(tmp_path / "x"))


def test_is_case_sensitive(tmp_path):
    assert kb.is_case_sensitive(str(tmp_path)) is True


# --------------------------------------------------------------------------- podman, apt sources

@pytest.mark.parametrize("profile,sign,needles", [
    ("vastnfs", False, ["'./build.sh' 'bin'", "dist/*.deb"]),
    ("kbuild", False, ['"/lib/modules/$KVER/build"', "M=/tmp/gpufabric-build"]),
    ("vastnfs", True, ["sign-file", "/keys/signing.key", "dpkg-deb --root-owner-group -b"]),
])
@pytest.mark.parametrize("is_rootless,user", [(False, "--user 65534:65534"), (True, "--userns keep-id")])
def test_podman_run_argv(profile, sign, needles, is_rootless, user):
    argv = kb.podman_run_argv("/usr/bin/podman", "img:1", "/s", "/o", KVER, profile,
                              sign_dir="/k" if sign else None, is_rootless=is_rootless)
    assert argv[:4] == ["/usr/bin/podman", "run", "--rm", "--pull=never"]
    joined = " ".join(argv[:-1])
    assert "--network none" in joined and "--cap-drop all" in joined and "no-new-privileges" in joined
    assert user in joined and "--user 0" not in joined and "HOME=/tmp" in argv
    assert "--privileged" not in argv
    assert "/s:/src:ro" in argv and "/o:/out:rw" in argv and "KVER=%s" % KVER in argv
    assert ("/k:/keys:ro" in argv) is sign
    assert argv[-4:-1] == ["img:1", "/bin/sh", "-c"]
    for n in needles:
        assert n in argv[-1]


def test_podman_env_writes_quirks_and_keeps_storage(tmp_path):
    env = kb.podman_env(str(tmp_path))
    conf = open(env["CONTAINERS_CONF"]).read()
    assert 'runtime = "runc"' in conf and "nofile=20000:20000" in conf and 'cgroup_manager = "cgroupfs"' in conf
    assert str(tmp_path / "graph") in open(env["CONTAINERS_STORAGE_CONF"]).read()
    other = tmp_path / "o"
    other.mkdir()
    (other / "storage.conf").write_text("[storage]\ngraphroot = \"/elsewhere\"\n")
    env2 = kb.podman_env(str(other))
    assert "/elsewhere" in open(env2["CONTAINERS_STORAGE_CONF"]).read()


def apt_host(tmp_path, texts):
    """A host root whose apt sources are ``texts`` (deb822 ``.sources`` or one-line ``.list`` files)."""
    d = tmp_path / "host" / "etc" / "apt" / "sources.list.d"
    d.mkdir(parents=True)
    for i, t in enumerate(texts):
        (d / ("%d.%s" % (i, "sources" if "Types:" in t else "list"))).write_text(t)
    return Sysroot(str(tmp_path / "host"))


DEB822 = """Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main contrib

Types: deb-src
URIs: http://src.invalid/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://sec.invalid/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.mark.parametrize("texts,suite,expected", [
    ([DEB822], "bookworm", "http://mirror.invalid/debian"),
    ([DEB822], "bookworm-security", "http://sec.invalid/debian-security"),
    (["# c\ndeb [arch=amd64] http://one.invalid/debian bookworm main\n"], "bookworm", "http://one.invalid/debian"),
    (["deb http://one.invalid/debian bookworm contrib\n", DEB822], "bookworm", "http://mirror.invalid/debian"),
    (["deb-src http://one.invalid/debian bookworm main\n"], "bookworm", None),
])
def test_host_mirror(tmp_path, texts, suite, expected):
    host = apt_host(tmp_path, texts)
    if expected is None:
        with pytest.raises(kb.KmodBuildError):
            kb.host_mirror(host, suite)
    else:
        assert kb.host_mirror(host, suite) == expected


def test_debootstrap_argv():
    argv = kb.debootstrap_argv("/usr/sbin/debootstrap", "/r", "bookworm", "http://m.invalid/d", ["bc"], "/c")
    assert argv[1] == "--variant=minbase"
    assert "build-essential" in argv[2] and argv[2].endswith(",bc") and "linux-headers" not in argv[2]
    assert argv[3] == "--cache-dir=/c" and argv[4] == "--force-check-gpg"
    assert argv[-3:] == ["bookworm", "/r", "http://m.invalid/d"]
    assert "libssl3" not in argv[2]  # a virtual package on trixie and noble: debootstrap --include refuses it
    lax = kb.debootstrap_argv("/usr/sbin/debootstrap", "/r", "bookworm", "http://m.invalid/d",
                              allow_unauthenticated=True, base_packages=["gcc"])
    assert "--force-check-gpg" not in lax and lax[2] == "--include=gcc"


NO_UPDATES = """Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://sec.invalid/debian-security
Suites: bookworm-security
Components: main
"""


@pytest.mark.parametrize("texts,mirror,expected", [
    # the host's suite + -security (+ -updates when present), base suite first
    ([NO_UPDATES], None, ["deb http://mirror.invalid/debian bookworm main",
                          "deb http://sec.invalid/debian-security bookworm-security main"]),
    ([DEB822], None, ["deb http://mirror.invalid/debian bookworm main",
                      "deb http://mirror.invalid/debian bookworm-updates main",
                      "deb http://sec.invalid/debian-security bookworm-security main"]),
    # an explicit mirror replaces the base suite's URI only
    ([NO_UPDATES], "http://other.invalid/d", ["deb http://other.invalid/d bookworm main",
                                              "deb http://sec.invalid/debian-security bookworm-security main"]),
    # a host without companion suites: the base suite alone
    (["deb http://one.invalid/debian bookworm main\n"], None, ["deb http://one.invalid/debian bookworm main"]),
    # a companion the builder cannot use (mirror+file:) is left out, the next one of that suite taken
    (["deb http://one.invalid/debian bookworm main\ndeb mirror+file:/etc/apt/m.list bookworm-security main\n"
      "deb http://s.invalid/ds bookworm-security main\n"], None,
     ["deb http://one.invalid/debian bookworm main", "deb http://s.invalid/ds bookworm-security main"]),
    # security without main is not a source of headers
    (["deb http://one.invalid/debian bookworm main\ndeb http://s.invalid/ds bookworm-security contrib\n"], None,
     ["deb http://one.invalid/debian bookworm main"]),
])
def test_builder_sources(tmp_path, texts, mirror, expected):
    assert kb.builder_sources(apt_host(tmp_path, texts), "bookworm", mirror) == expected


def test_builder_sources_base_mirror_scheme_refused(tmp_path):
    host = apt_host(tmp_path, ["deb mirror+file:/etc/apt/m.list bookworm main\n"])
    with pytest.raises(kb.KmodBuildError, match="pass builder_mirror"):
        kb.builder_sources(host, "bookworm")


class FakeBuilderHost(object):
    """Records the builder-image commands; debootstrap makes a rootfs, apt 'installs' the headers it knows."""

    def __init__(self, image_exists=False, headers_available=True, debootstrap_rc=0):
        self.calls = []
        self.image_exists = image_exists
        self.headers_available = headers_available
        self.debootstrap_rc = debootstrap_rc
        self.sources = None

    def __call__(self, argv, env=None):
        self.calls.append(list(argv))
        if argv[1:3] == ["image", "exists"]:
            return (0 if self.image_exists else 1), "", ""
        if argv[0].endswith("debootstrap"):
            root = argv[-2]
            os.makedirs(os.path.join(root, "etc", "apt"))
            os.makedirs(os.path.join(root, "var", "lib", "apt", "lists"))
            return self.debootstrap_rc, "", "E: boom" if self.debootstrap_rc else ""
        if argv[0].endswith("chroot"):
            root = argv[1]
            with open(os.path.join(root, "etc", "apt", "sources.list")) as f:
                self.sources = f.read()
            if "install" in argv:
                if not self.headers_available:
                    return 100, "", "E: Unable to locate package %s" % argv[-1]
                os.makedirs(os.path.join(root, "usr", "src", argv[-1]))
            return 0, "", ""
        return 0, "", ""


TOOLS = {"podman": "/usr/bin/podman", "debootstrap": "/usr/sbin/debootstrap", "chroot": "/usr/sbin/chroot",
         "tar": "/bin/tar"}


def test_ensure_builder_image_creates_with_security_headers(tmp_path):
    fake = FakeBuilderHost()
    kver = "6.1.0-57-amd64"
    image, created, _secs = kb.ensure_builder_image(fake, TOOLS, kver, {}, str(tmp_path), suite="bookworm",
                                                    sysroot=apt_host(tmp_path, [DEB822]))
    assert (image, created) == ("localhost/gpufabric-kbuild:%s" % kver, True)
    names = [c[0] if not c[0].endswith("chroot") else " ".join(c[2:4]) for c in fake.calls]
    assert names == ["/usr/bin/podman", "/usr/sbin/debootstrap", "/usr/bin/apt-get -q", "/usr/bin/apt-get -q",
                     "/usr/bin/apt-get -q", "/bin/tar", "/usr/bin/podman"]
    assert fake.calls[2][-1] == "update" and fake.calls[3][-1] == "linux-headers-%s" % kver
    assert "APT::Get::AllowUnauthenticated=false" in fake.calls[3] and "--force-check-gpg" in fake.calls[1]
    assert "bookworm-security main" in fake.sources and "deb http://mirror.invalid/debian bookworm main" in fake.sources
    assert fake.calls[-1][1:3] == ["import", "-q"] and fake.calls[-1][-1] == image
    assert [d for d in os.listdir(str(tmp_path)) if d.startswith("gpufabric-kbuild-")] == []


@pytest.mark.parametrize("fake,tools,needle", [
    (FakeBuilderHost(headers_available=False), TOOLS, "installing linux-headers-6.1.0-57-amd64"),
    (FakeBuilderHost(debootstrap_rc=1), TOOLS, "debootstrap of the builder image's base system"),
    (FakeBuilderHost(), dict(TOOLS, chroot=None), "chroot is not installed"),
    (FakeBuilderHost(), dict(TOOLS, debootstrap=None), "debootstrap is not installed"),
])
def test_ensure_builder_image_failures(tmp_path, fake, tools, needle):
    with pytest.raises(kb.KmodBuildError) as e:
        kb.ensure_builder_image(fake, tools, "6.1.0-57-amd64", {}, str(tmp_path), suite="bookworm",
                                sysroot=apt_host(tmp_path, [DEB822]))
    assert needle in str(e.value)
    assert not any(c[1:2] == ["import"] for c in fake.calls)


def test_ensure_builder_image_exists_is_noop(tmp_path):
    fake = FakeBuilderHost(image_exists=True)
    assert kb.ensure_builder_image(fake, TOOLS, KVER, {}, str(tmp_path), suite="bookworm")[:2] == \
        ("localhost/gpufabric-kbuild:%s" % KVER, False)
    assert len(fake.calls) == 1


def test_ensure_builder_image_explicit_sources(tmp_path):
    fake = FakeBuilderHost()
    src = ["deb [arch=amd64] file:/srv/kernels bookworm main"]
    kb.ensure_builder_image(fake, TOOLS, KVER, {}, str(tmp_path), suite="bookworm",
                            sysroot=apt_host(tmp_path, [DEB822]), sources=src)
    assert "file:/srv/kernels" in fake.sources and "security" not in fake.sources
    assert fake.calls[1][-1] == "http://mirror.invalid/debian"


@pytest.mark.parametrize("allow", [False, True])
def test_ensure_builder_image_unauthenticated_source_needs_the_option(tmp_path, allow):
    fake = FakeBuilderHost()
    src = ["deb [trusted=yes] file:/srv/kernels ./"]
    if not allow:
        with pytest.raises(kb.KmodBuildError) as e:
            kb.ensure_builder_image(fake, TOOLS, KVER, {}, str(tmp_path), suite="bookworm",
                                    sysroot=apt_host(tmp_path, [DEB822]), sources=src)
        assert "trusted=yes" in str(e.value) and "builder_allow_unauthenticated" in str(e.value)
        assert len(fake.calls) == 1  # nothing but the image lookup ran
        return
    kb.ensure_builder_image(fake, TOOLS, KVER, {}, str(tmp_path), suite="bookworm",
                            sysroot=apt_host(tmp_path, [DEB822]), sources=src, allow_unauthenticated=True)
    assert "deb [trusted=yes] file:/srv/kernels ./" in fake.sources
    assert "--force-check-gpg" not in fake.calls[1]
    assert not any("APT::Get::AllowUnauthenticated=false" in c for c in fake.calls)


def test_ensure_builder_image_signed_by_must_be_in_the_rootfs(tmp_path):
    fake = FakeBuilderHost()
    src = ["deb [signed-by=/usr/share/keyrings/vendor.gpg] http://k.invalid/d bookworm main"]
    with pytest.raises(kb.KmodBuildError) as e:
        kb.ensure_builder_image(fake, TOOLS, KVER, {}, str(tmp_path), suite="bookworm",
                                sysroot=apt_host(tmp_path, [DEB822]), sources=src)
    assert "/usr/share/keyrings/vendor.gpg" in str(e.value)
    assert not any(c[0].endswith("chroot") for c in fake.calls)


# --------------------------------------------------------------------------- verification of outputs

def good_modules(kver=KVER, export=True, signed=False):
    return {
        "/lib/modules/%s/updates/bundle/sunrpc.ko" % kver:
            vf.make_module_elf("sunrpc", kver + " SMP", srcversion="S1", params=["nfs_bundle_version"],
                               signed=signed),
        "/lib/modules/%s/updates/bundle/rpcrdma.ko" % kver:
            vf.make_module_elf("rpcrdma", kver + " SMP", srcversion="R1", exports=[SYM] if export else ["x"],
                               signed=signed),
    }


@pytest.mark.parametrize("files,signing,problem", [
    (good_modules(), False, None),
    (good_modules(signed=True), True, None),
    (good_modules(), True, "no module signature"),
    (good_modules(export=False), False, "does not export %s" % SYM),
    (dict((k.replace(OTHER, KVER), v) for k, v in good_modules(kver=OTHER).items()), False, "not for kernel"),
    ({"/lib/modules/%s/updates/bundle/sunrpc.ko" % KVER: good_modules()[BUNDLE + "sunrpc.ko"]}, False,
     "no rpcrdma module"),
    ({"/usr/share/doc/vastnfs/README": b"x"}, False, "produced no kernel modules"),
])
def test_verify_outputs(tmp_path, files, signing, problem):
    dist = tmp_path / "dist"
    dist.mkdir()
    vf.make_deb(str(dist / "vastnfs-modules_1_amd64.deb"), files)
    artifacts, modules, problems = kb.verify_outputs(str(dist), KVER, "vastnfs", require_signature=signing)
    if problem is None:
        assert problems == []
        assert sorted(m["name"] for m in modules) == ["rpcrdma", "sunrpc"]
        assert artifacts[0]["kind"] == "deb" and len(artifacts[0]["modules"]) == 2
    else:
        assert any(problem in p for p in problems), problems
    assert os.listdir(str(dist)) == ["vastnfs-modules_1_amd64.deb"]


def test_verify_outputs_no_package(tmp_path):
    (tmp_path / "dist").mkdir()
    _a, _m, problems = kb.verify_outputs(str(tmp_path / "dist"), KVER, "vastnfs")
    assert problems == ["the build produced no package (dist/*.deb or dist/*.rpm)"]


@pytest.mark.parametrize("paths,rels,n", [
    (["/lib/modules/K/updates/bundle/a.ko"], ["/lib/modules/K/updates/bundle/a.ko"], 0),
    ([], ["/lib/modules/K/updates/bundle/a.ko"], 1),
    (["/opt/a.ko"], ["/opt/a.ko"], 1),
])
def test_verify_package_lists(paths, rels, n):
    assert len(kb.verify_package_lists(paths, rels, "K")) == n


def test_parse_dpkg_contents():
    out = ("drwxr-xr-x root/root         0 2026-01-01 00:00 ./\n"
           "-rw-r--r-- root/root      4242 2026-01-01 00:00 ./lib/modules/K/updates/bundle/rpcrdma.ko\n"
           "lrwxrwxrwx root/root         0 2026-01-01 00:00 ./lib/x.ko -> bundle/rpcrdma.ko\n")
    assert kb.parse_dpkg_contents(out) == ["/", "/lib/modules/K/updates/bundle/rpcrdma.ko", "/lib/x.ko"]


# --------------------------------------------------------------------------- build() with a recorded fake podman

IMAGE_ID = "sha256:" + "1" * 64
PACKAGES = "installed\tgcc-12\t12.2.0-14\tamd64\ninstalled\tkmod\t30+20221128-1\tamd64\n" \
           "config-files\told\t1\tamd64\ngpufabric-headers\tyes\n"


class FakePodman(object):
    """Runner standing in for podman: records argv, describes the image, writes a package into the /out mount."""

    def __init__(self, files, rc=0, packages=PACKAGES, image_id=IMAGE_ID):
        self.files, self.rc, self.calls, self.packages, self.image_id = files, rc, [], packages, image_id

    def __call__(self, argv, env=None):
        self.calls.append(list(argv))
        if argv[1:3] == ["image", "exists"]:
            return 0, "", ""
        if argv[1:3] == ["image", "inspect"]:
            return 0, json.dumps([{"Id": self.image_id, "Digest": "sha256:" + "2" * 64, "RepoDigests": []}]), ""
        if argv[1] == "run" and not any(a.endswith(":/out:rw") for a in argv):
            return 0, self.packages, ""
        if argv[1] == "run":
            out = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")][0]
            if self.rc == 0:
                os.makedirs(os.path.join(out, "dist"))
                vf.make_deb(os.path.join(out, "dist", "vastnfs-modules_1_amd64.deb"), self.files)
            return self.rc, "built\n", "" if self.rc == 0 else "make: *** error\n"
        return 127, "", "unexpected %s" % argv


def test_build_then_cache_hit(tmp_path):
    src, digest = vf.make_source_tarball(str(tmp_path))
    fake = FakePodman(good_modules())
    tools = {"podman": "podman"}
    cache = str(tmp_path / "cache")
    man = kb.build(fake, tools, src, digest, KVER, "4.0.35", "vastnfs", cache, "img", builder_mode="image")
    assert man["cache_hit"] is False and len([c for c in fake.calls if c[1] == "run"]) == 2
    assert man["builder"]["id"] == IMAGE_ID and man["builder"]["mode"] == "image"
    assert man["builder"]["packages"] == ["gcc-12=12.2.0-14 amd64", "kmod=30+20221128-1 amd64"]
    listing = open(os.path.join(cache, man["key"], "builder-packages.txt")).read()
    assert "# id: %s" % IMAGE_ID in listing and "\ngcc-12=12.2.0-14 amd64\n" in listing
    assert man["collisions"] == [["vastnfs-4.0.35-gf1/Makefile", "vastnfs-4.0.35-gf1/makefile"]]
    run_argv = [c for c in fake.calls if c[1] == "run" and any(a.endswith(":/out:rw") for a in c)][0]
    assert [a for a in run_argv if a.endswith(":/src:ro")][0].split(":")[0].endswith("vastnfs-4.0.35-gf1")
    again = kb.build(fake, tools, src, digest, KVER, "4.0.35", "vastnfs", cache, "img")
    assert again["cache_hit"] is True and again["key"] == man["key"]
    assert len([c for c in fake.calls if c[1] == "run"]) == 2
    # A tampered artifact invalidates the cache entry.
    art = os.path.join(cache, man["key"], man["artifacts"][0]["file"])
    with open(art, "ab") as f:
        f.write(b"x")
    assert kb.load_cached(cache, man["key"]) is None
    assert sorted(e for e in os.listdir(cache) if e.startswith(".build-")) == []


def test_build_again_in_a_changed_builder_image(tmp_path):
    """Issue 21 item 22: the same source, profile and kernel built in a rebuilt builder image is a new build."""
    src, digest = vf.make_source_tarball(str(tmp_path))
    fake = FakePodman(good_modules())
    cache = str(tmp_path / "cache")
    first = kb.build(fake, {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", cache, "img")
    same = kb.build(fake, {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", cache, "img")
    assert same["cache_hit"] and same["key"] == first["key"]
    fake.image_id = "sha256:" + "9" * 64
    changed = kb.build(fake, {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", cache, "img")
    assert not changed["cache_hit"] and changed["key"] != first["key"]
    assert changed["builder"]["id"] == fake.image_id
    assert len([c for c in fake.calls if any(a.endswith(":/out:rw") for a in c)]) == 2
    # a host without podman (an entry copied there) takes the newest entry built from the same inputs
    for key, built_at in ((first["key"], 1000), (changed["key"], 2000)):
        path = os.path.join(cache, key, "manifest.json")
        with open(path) as f:
            doc = json.load(f)
        with open(path, "w") as f:
            json.dump(dict(doc, built_at=built_at), f)
    assert kb.find_cached(cache, digest, "vastnfs", KVER)["key"] == changed["key"]
    assert kb.find_cached(cache, digest, "vastnfs", OTHER) is None
    assert kb.find_cached(cache, digest, "vastnfs", KVER, "c" * 64) is None
    # an entry whose name is not the key of its own manifest does not count
    shutil.rmtree(os.path.join(cache, first["key"]))
    os.rename(os.path.join(cache, changed["key"]), os.path.join(cache, first["key"]))
    assert kb.find_cached(cache, digest, "vastnfs", KVER) is None


@pytest.mark.parametrize("files,rc,needle", [
    ({"/usr/share/doc/x": b"x"}, 0, "no kernel modules"),
    (good_modules(), 2, "container build failed"),
    (good_modules(export=False), 0, "does not export"),
])
def test_build_fails_loudly(tmp_path, files, rc, needle):
    src, digest = vf.make_source_tarball(str(tmp_path))
    cache = str(tmp_path / "cache")
    with pytest.raises(kb.KmodBuildError) as e:
        kb.build(FakePodman(files, rc), {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", cache, "img")
    assert needle in str(e.value)
    assert "Makefile/vastnfs-4.0.35-gf1/makefile" in str(e.value)
    assert [d for d in os.listdir(cache) if not d.startswith(".")] == []


def test_build_refuses_wrong_sha_before_anything(tmp_path):
    src, _d = vf.make_source_tarball(str(tmp_path))
    fake = FakePodman(good_modules())
    with pytest.raises(kb.KmodBuildError):
        kb.build(fake, {"podman": "podman"}, src, "1" * 64, KVER, "1", "vastnfs", str(tmp_path / "c"), "img")
    assert fake.calls == []
    assert not os.path.exists(str(tmp_path / "c"))


# --------------------------------------------------------------------------- install + proofs on a tmp sysroot

class FakeDepmod(object):
    def __init__(self, root):
        self.root, self.calls = root, []

    def __call__(self, argv, env=None):
        self.calls.append(list(argv))
        if os.path.basename(argv[0]) == "depmod":
            kver = argv[-1]
            base = os.path.join(self.root, "lib", "modules", kver)
            lines = []
            for dp, _dn, fns in os.walk(base):
                for fn in sorted(fns):
                    if fn.endswith(".ko"):
                        lines.append(os.path.relpath(os.path.join(dp, fn), base) + ":")
            with open(os.path.join(base, "modules.dep"), "w") as f:
                f.write("\n".join(lines) + "\n")
            return 0, "", ""
        return 127, "", "unexpected"


@pytest.fixture
def built(tmp_path):
    src, digest = vf.make_source_tarball(str(tmp_path))
    cache = str(tmp_path / "cache")
    man = kb.build(FakePodman(good_modules()), {"podman": "podman"}, src, digest, KVER, "4.0.35", "vastnfs",
                   cache, "img")
    root = tmp_path / "root"
    (root / "lib" / "modules" / KVER / "kernel").mkdir(parents=True)
    return man, cache, Sysroot(str(root))


def test_install_copy_depmod_record_idempotent(built):
    man, cache, sysroot = built
    fake = FakeDepmod(sysroot.root)
    tools = {"depmod": "depmod"}
    assert kb.prove_installed(sysroot, KVER)["proven"] is False
    planned = kb.install(fake, tools, sysroot, cache, man, check_mode=True)
    assert planned["actions"] == ["copy", "depmod", "record"] and fake.calls == []
    assert not sysroot.exists(BUNDLE + "rpcrdma.ko")
    res = kb.install(fake, tools, sysroot, cache, man)
    assert res["method"] == "copy" and res["actions"] == ["copy", "depmod", "record"]
    assert fake.calls == [["depmod", "-b", sysroot.root, KVER]]
    rec = json.loads(sysroot.read_raw(kb.STATE_FILE))
    assert rec["kernels"][KVER]["key"] == man["key"]
    proof = kb.prove_installed(sysroot, KVER, version="4.0.35")
    assert proof["proven"], proof["problems"]
    again = kb.install(fake, tools, sysroot, cache, man)
    assert again["actions"] == [] and len(fake.calls) == 1


def test_install_package_method_needs_real_root(built):
    man, cache, sysroot = built
    with pytest.raises(kb.KmodBuildError):
        kb.install(FakeDepmod(sysroot.root), {"depmod": "depmod"}, sysroot, cache, man, method="package")


@pytest.mark.parametrize("damage,needle", [
    ("file", "differs from the verified build"),
    ("missing", "is missing"),
    ("dep", "would load"),
    ("nodep", "depmod %s has not run" % KVER),
    ("version", "expected 9.9"),
])
def test_prove_installed_problems(built, damage, needle):
    man, cache, sysroot = built
    fake = FakeDepmod(sysroot.root)
    kb.install(fake, {"depmod": "depmod"}, sysroot, cache, man)
    version = None
    if damage == "file":
        with open(sysroot.path(BUNDLE + "sunrpc.ko"), "ab") as f:
            f.write(b"\0")
    elif damage == "missing":
        os.unlink(sysroot.path(BUNDLE + "rpcrdma.ko"))
    elif damage == "dep":
        sysroot.write_file_atomic("/lib/modules/%s/modules.dep" % KVER,
                                  "kernel/net/sunrpc/sunrpc.ko:\nupdates/bundle/rpcrdma.ko:\n")
    elif damage == "nodep":
        os.unlink(sysroot.path("/lib/modules/%s/modules.dep" % KVER))
    elif damage == "version":
        version = "9.9"
    proof = kb.prove_installed(sysroot, KVER, version=version)
    assert proof["proven"] is False
    assert any(needle in p for p in proof["problems"]), proof["problems"]


def boot(sysroot, kver, loaded, param=True, nvfs=None, lifetime=None):
    """``nvfs``: None (no nvidia-fs) or the storage modules' hooks {name: True | False | errno} (nvfs_kernel)."""
    sysroot.write_file_atomic("/proc/sys/kernel/osrelease", kver + "\n")
    for name, srcv in loaded.items():
        sysroot.makedirs("/sys/module/%s" % name)
        if srcv is not None:
            sysroot.write_file_atomic("/sys/module/%s/srcversion" % name, srcv + "\n")
    if param:
        sysroot.write_file_atomic("/sys/module/sunrpc/parameters/nfs_bundle_version", "4.0.35\n")
    if nvfs is not None:
        lifetime.load_driver(sysroot.root, nvfs)


HOOKED = {"rpcrdma": True}
NOT_LISTED = "rpcrdma is not listed in /proc/driver/nvidia-fs/modules while /dev/nvidia-fs0 is held open"


@pytest.mark.parametrize("kver,loaded,param,nvfs,mode,needle", [
    (KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, True, {"rpcrdma": True, "nvme": True}, "auto", None),
    (KVER, {"sunrpc": "S1"}, True, None, "auto", None),
    (OTHER, {"sunrpc": "S1"}, True, None, "auto", "running kernel is %s" % OTHER),
    (KVER, {"sunrpc": "IN-TREE"}, True, None, "auto", "in-tree NFS stack is running"),
    (KVER, {"sunrpc": None}, True, None, "auto", "without a srcversion"),
    (KVER, {}, False, None, "auto", "sunrpc is not loaded"),
    (KVER, {"sunrpc": "S1"}, False, None, "auto", "nfs_bundle_version is missing"),
    # rpcrdma loaded without the hook (only nvme registers): named, with the symbol it lacks
    (KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, True, {"nvme": True}, "auto", NOT_LISTED + " (listed: nvme, wekafsio)"),
    (KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, True, {"rpcrdma": False}, "auto", "does not export "
     "rpcrdma_register_nvfs_dma_ops"),
    # exports the hook, but its registration is refused
    (KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, True, {"rpcrdma": -95}, "auto", NOT_LISTED),
    # nvidia-fs loaded, rpcrdma not (no NFS over RDMA mount yet)
    (KVER, {"sunrpc": "S1"}, True, {}, "auto", NOT_LISTED + " (listed: wekafsio)"),
    (KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, True, {"nvme": True}, "ignore", None),
    (KVER, {"sunrpc": "S1"}, True, None, "required", "nvidia-fs is not loaded"),
])
def test_prove_running(built, nvfs_lifetime, kver, loaded, param, nvfs, mode, needle):
    man, cache, sysroot = built
    kb.install(FakeDepmod(sysroot.root), {"depmod": "depmod"}, sysroot, cache, man)
    boot(sysroot, kver, loaded, param, nvfs, nvfs_lifetime)
    proof = kb.prove_running(sysroot, KVER, nvidia_fs=mode)
    if needle is None:
        assert proof["proven"], proof["problems"]
        assert proof["nfs_bundle_version"] == "4.0.35"
    else:
        assert not proof["proven"]
        assert any(needle in p for p in proof["problems"]), proof["problems"]
    if nvfs is not None and mode != "ignore":
        assert proof["nvidia_fs"]["device"] == "/dev/nvidia-fs0" and proof["nvidia_fs"]["held"] is True


def test_prove_running_idle_node_reads_while_held(built, nvfs_lifetime):
    """The healthy node is idle: its modules file lists no rpcrdma, yet the proof holds (it holds a device open)."""
    man, cache, sysroot = built
    kb.install(FakeDepmod(sysroot.root), {"depmod": "depmod"}, sysroot, cache, man)
    boot(sysroot, KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, nvfs=HOOKED, lifetime=nvfs_lifetime)
    assert kb.parse_nvfs_modules(sysroot.read_raw("/proc/driver/nvidia-fs/modules")) == {"wekafsio": "1"}
    proof = kb.prove_running(sysroot, KVER, require_loaded=["sunrpc", "rpcrdma"])
    assert proof["proven"], proof["problems"]
    assert proof["nvidia_fs"]["modules"] == {"wekafsio": "1", "rpcrdma": "(null)"}
    assert kb.parse_nvfs_modules(sysroot.read_raw("/proc/driver/nvidia-fs/modules")) == {"wekafsio": "1"}, \
        "the device is closed again: nvidia-fs unregistered rpcrdma"


@pytest.mark.parametrize("damage,needle", [
    ("no_devices", "no /dev/nvidia-fs<N> device exists to hold open"),
    ("dangling", "/dev/nvidia-fs0 cannot be opened: No such file or directory"),
])
def test_prove_running_cannot_hold(built, nvfs_lifetime, damage, needle):
    man, cache, sysroot = built
    kb.install(FakeDepmod(sysroot.root), {"depmod": "depmod"}, sysroot, cache, man)
    boot(sysroot, KVER, {"sunrpc": "S1", "rpcrdma": "R1"}, nvfs=HOOKED, lifetime=nvfs_lifetime)
    for n in os.listdir(sysroot.path("/dev")):
        os.unlink(sysroot.path("/dev/" + n))
    if damage == "dangling":
        os.symlink("nowhere", sysroot.path("/dev/nvidia-fs0"))
    proof = kb.prove_running(sysroot, KVER)
    assert not proof["proven"]
    assert [p for p in proof["problems"] if needle in p and "whether nvidia-fs registers rpcrdma is unknown" in p]


@pytest.mark.parametrize("text,expected", [
    ("rpcrdma: 4.0.35\nnvme: 1.0\n", {"rpcrdma": "4.0.35", "nvme": "1.0"}),
    ("", {}),
    ("garbage\n: x\n", {}),
])
def test_parse_nvfs_modules(text, expected):
    assert kb.parse_nvfs_modules(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("  CC [M] x.o\nx.c:3:2: error: #error \"too new\"\nmake: *** [all] Error 2\n", 'x.c:3:2: error: #error "too new"'),
    ("make[1]: *** No rule to make target 'modules'.  Stop.\n", "make[1]: *** No rule to make target 'modules'.  Stop."),
    ("all good\n", ""),
    ("", ""),
])
def test_first_error_line(text, expected):
    assert kb.first_error_line(text) == expected


@pytest.mark.parametrize("packages,needle", [
    ("installed\tgcc\t12\tamd64\n", "has no /lib/modules/%s/build" % KVER),
])
def test_build_refuses_an_image_without_the_headers_before_building(tmp_path, packages, needle):
    src, digest = vf.make_source_tarball(str(tmp_path))
    fake = FakePodman(good_modules(), packages=packages)
    with pytest.raises(kb.KmodBuildError) as e:
        kb.build(fake, {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", str(tmp_path / "c"), "img")
    assert needle in str(e.value)
    assert not any(a.endswith(":/out:rw") for c in fake.calls for a in c)


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the output directory to the build uid needs root")
def test_build_as_root_hands_out_to_nobody_and_takes_it_back(tmp_path):
    src, digest = vf.make_source_tarball(str(tmp_path))
    owners = {}

    class Recording(FakePodman):
        def __call__(self, argv, env=None):
            outs = [a.split(":")[0] for a in argv if a.endswith(":/out:rw")]
            if outs:
                owners["out"] = os.stat(outs[0]).st_uid
                owners["src_mode"] = os.stat([a.split(":")[0] for a in argv if a.endswith(":/src:ro")][0]).st_mode
            return FakePodman.__call__(self, argv, env)

    fake = Recording(good_modules())
    man = kb.build(fake, {"podman": "podman"}, src, digest, KVER, "1", "vastnfs", str(tmp_path / "c"), "img",
                   is_rootless=False)
    assert owners["out"] == 65534 and owners["src_mode"] & 0o005 == 0o005
    assert "--user" in [c for c in fake.calls if any(a.endswith(":/out:rw") for a in c)][0]
    dist = os.path.join(str(tmp_path / "c"), man["key"], "dist")
    assert all(os.stat(os.path.join(dist, f)).st_uid == 0 for f in os.listdir(dist))
