# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builder image modes other than debootstrap (issue 12 item 2): a user-named image, a Containerfile per family
built with podman, and the identity and package versions recorded for every build (issue 13 item 6). podman is a
recording fake here: what these tests cover is the argv, the Containerfile and the build context."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import pipeline as kb

KVER = "6.8.0-45-generic"
DIGEST = "sha256:" + "ab" * 32
TOOLS = {"podman": "/usr/bin/podman"}


@pytest.mark.parametrize("ref,ok", [
    ("localhost/gpufabric-kbuild:6.1.0-50-amd64", True),
    ("registry.example:5000/team/kbuild:%s" % KVER, True),
    ("registry.example/team/kbuild@" + DIGEST, True),
    ("registry.example/team/kbuild:1@" + DIGEST, True),
    ("ubuntu", True),
    ("registry.example/Team/kbuild", False),
    ("registry.example/kbuild:", False),
    ("registry.example/kbuild@sha256:abc", False),
    ("a b", False), ("x;rm -rf /", False), ("x\n", False), ("", False), ("-x", False),
])
def test_validate_image_ref(ref, ok):
    if ok:
        assert kb.validate_image_ref(ref) == ref
    else:
        with pytest.raises(ValueError):
            kb.validate_image_ref(ref)


def test_validate_image_ref_digest_required():
    with pytest.raises(ValueError, match="not pinned by digest"):
        kb.validate_image_ref("registry.example/kbuild:1", require_digest=True)
    assert kb.validate_image_ref("r.example/k@" + DIGEST, require_digest=True)


@pytest.mark.parametrize("name,ok", [
    ("bc", True), ("libelf-dev", True), ("g++", True), ("gcc-12=12.2.0-14", True), ("python3.11", True),
    ("a;b", False), ("$(x)", False), ("a b", False), ("-x", False), ("a\n", False),
])
def test_validate_package_name(name, ok):
    if ok:
        assert kb.validate_package_name(name) == name
    else:
        with pytest.raises(ValueError):
            kb.validate_package_name(name)


class FakePodman(object):
    def __init__(self, exists=False, rc=0):
        self.exists, self.rc, self.calls, self.seen = exists, rc, [], {}

    def __call__(self, argv, env=None):
        self.calls.append(list(argv))
        if argv[1:3] == ["image", "exists"]:
            return (0 if self.exists else 1), "", ""
        if argv[1] == "build":
            cf = argv[argv.index("-f") + 1]
            with open(cf) as f:
                self.seen["containerfile"] = f.read()
            with open(os.path.join(argv[-1], "builder.list")) as f:
                self.seen["list"] = f.read()
            return self.rc, "", "E: Unable to locate package" if self.rc else ""
        if argv[1] == "pull":
            return self.rc, "", "manifest unknown" if self.rc else ""
        return 127, "", "unexpected"


def build_args_of(argv):
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")


@pytest.mark.parametrize("family,header,manager", [
    ("ubuntu", '"linux-headers-${KVER}"', "apt-get -q ${PKG_OPTIONS} install"),
    ("el", '"kernel-devel-${KVER}"', "dnf -y ${PKG_OPTIONS}"),
])
def test_containerfile_build(tmp_path, family, header, manager):
    fake = FakePodman()
    base = "registry.example/base/%s@%s" % (family, DIGEST)
    img, created, _s = kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "localhost/k:1", family,
                                                     base, extra_packages=["bc"])
    assert (img, created) == ("localhost/k:1", True)
    argv = fake.calls[-1]
    assert argv[:3] == ["/usr/bin/podman", "build", "--pull=missing"] and argv[argv.index("-t") + 1] == img
    args = build_args_of(argv)
    assert args["BASE_IMAGE"] == base and args["KVER"] == KVER and args["EXTRA_PACKAGES"] == "bc"
    assert "gpgcheck=True" in args["PKG_OPTIONS"] if family == "el" else \
        "APT::Get::AllowUnauthenticated=false" in args["PKG_OPTIONS"]
    assert "libssl3" not in args["BASE_PACKAGES"]
    cf = fake.seen["containerfile"]
    for needle in ("ARG BASE_IMAGE", "FROM ${BASE_IMAGE}", "ARG KVER", header, manager, "/lib/modules/${KVER}"):
        assert needle in cf
    # the base image is always the user's: the one FROM names the build argument, no image of its own
    assert re.findall(r"^FROM .*$", cf, re.M) == ["FROM ${BASE_IMAGE}"]
    assert fake.seen["list"] == ""
    assert not os.listdir(str(tmp_path))


def test_containerfile_build_with_sources_and_own_file(tmp_path):
    fake = FakePodman()
    own = tmp_path / "Containerfile.mine"
    own.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "localhost/k:1", "ubuntu", "ubuntu:24.04",
                                  containerfile=str(own), sources=["deb http://m.invalid/u noble-proposed main"])
    assert fake.seen["containerfile"] == own.read_text()
    assert fake.seen["list"] == "deb http://m.invalid/u noble-proposed main\n"


@pytest.mark.parametrize("family,base,sources,allow,needle", [
    ("ubuntu", None, [], False, "no base image was given"),
    ("ubuntu", "a b", [], False, "not an image reference"),
    ("ubuntu", "ubuntu:24.04", ["deb [trusted=yes] file:/r ./"], False, "trusted=yes"),
    ("ubuntu", "ubuntu:24.04", ["deb http://m.invalid/u noble main\ndeb file:/x ./"], True, "several lines"),
    ("el", "rockylinux:9", ["deb http://m.invalid/u noble main"], False, "installs with dnf"),
    ("suse", "x:1", [], False, "unknown builder family"),
])
def test_containerfile_refusals_before_podman_build(tmp_path, family, base, sources, allow, needle):
    fake = FakePodman()
    with pytest.raises(kb.KmodBuildError) as e:
        kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "localhost/k:1", family, base,
                                      sources=sources, allow_unauthenticated=allow)
    assert needle in str(e.value)
    assert not any(c[1] == "build" for c in fake.calls)


def test_containerfile_unauthenticated_allowed_drops_the_apt_enforcement(tmp_path):
    fake = FakePodman()
    kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "localhost/k:1", "ubuntu", "ubuntu:24.04",
                                  sources=["deb [trusted=yes] file:/r ./"], allow_unauthenticated=True)
    assert build_args_of(fake.calls[-1])["PKG_OPTIONS"] == ""
    assert fake.seen["list"] == "deb [trusted=yes] file:/r ./\n"


def test_containerfile_existing_image_and_failure(tmp_path):
    fake = FakePodman(exists=True)
    assert kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "l/k:1", "el", None)[:2] == \
        ("l/k:1", False)
    fake = FakePodman(rc=1)
    with pytest.raises(kb.KmodBuildError, match="podman build of builder image l/k:1"):
        kb.ensure_containerfile_image(fake, TOOLS, KVER, {}, str(tmp_path), "l/k:1", "el", "rockylinux:9")
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("exists,rc,pulled,needle", [
    (True, 0, False, None), (False, 0, True, None), (False, 1, None, "podman pull of it failed"),
])
def test_named_image(exists, rc, pulled, needle):
    fake = FakePodman(exists=exists, rc=rc)
    ref = "registry.example/team/kbuild@" + DIGEST
    if needle:
        with pytest.raises(kb.KmodBuildError, match=needle):
            kb.ensure_named_image(fake, TOOLS, ref, {})
        return
    assert kb.ensure_named_image(fake, TOOLS, ref, {})[:2] == (ref, pulled)
    assert (["/usr/bin/podman", "pull", "-q", ref] in fake.calls) is pulled


def test_named_image_bad_reference_runs_nothing():
    fake = FakePodman()
    with pytest.raises(ValueError):
        kb.ensure_named_image(fake, TOOLS, "x;y", {})
    assert fake.calls == []


@pytest.mark.parametrize("out,packages,headers", [
    ("installed\tgcc\t4:12.2.0-3\tamd64\ndeinstall\told\t1\tamd64\ngpufabric-headers\tyes\n",
     ["gcc=4:12.2.0-3 amd64"], True),
    ("installed\tkernel-devel\t5.14.0-427.el9\tx86_64\ninstalled\tgcc\t11.4.1-3.el9\tx86_64\n",
     ["gcc=11.4.1-3.el9 x86_64", "kernel-devel=5.14.0-427.el9 x86_64"], False),
    ("", [], False),
])
def test_parse_package_list(out, packages, headers):
    assert kb.parse_package_list(out) == (packages, headers)


@pytest.mark.parametrize("inspect_rc,inspect_out,query_rc,needle", [
    (125, "", 0, "image inspect"),
    (0, "not json", 0, "no image description"),
    (0, json.dumps([{"Id": "sha256:1"}]), 7, "listing the packages"),
])
def test_builder_identity_failures(inspect_rc, inspect_out, query_rc, needle):
    def run(argv, env=None):
        if argv[1:3] == ["image", "inspect"]:
            return inspect_rc, inspect_out, "no such image"
        return query_rc, "gpufabric-headers\tyes\n", ""
    with pytest.raises(kb.KmodBuildError, match=needle):
        kb.builder_identity(run, "podman", "img", KVER, {}, ["--user", "65534:65534"])


def test_builder_identity_query_container_is_locked_down():
    calls = []

    def run(argv, env=None):
        calls.append(argv)
        if argv[1:3] == ["image", "inspect"]:
            return 0, json.dumps([{"Id": "sha256:1", "Digest": DIGEST, "RepoDigests": ["r/k@" + DIGEST]}]), ""
        return 0, "installed\tgcc\t12\tamd64\ngpufabric-headers\tyes\n", ""
    rec = kb.builder_identity(run, "podman", "img", KVER, {}, ["--userns", "keep-id"], "image")
    assert rec["id"] == "sha256:1" and rec["digest"] == DIGEST and rec["repo_digests"] == ["r/k@" + DIGEST]
    assert rec["packages"] == ["gcc=12 amd64"] and len(rec["packages_sha256"]) == 64
    q = " ".join(calls[1][:-1])
    assert "--network none" in q and "--cap-drop all" in q and "--userns keep-id" in q and "-v" not in calls[1]
    assert "dpkg-query" in calls[1][-1] and "rpm -qa" in calls[1][-1]
    text = kb.builder_record_text(rec)
    assert text.splitlines()[:3] == ["# builder mode: image", "# image: img", "# id: sha256:1"]
    assert text.endswith("gcc=12 amd64\n")
