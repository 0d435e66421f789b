# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kmod_source: safe extraction of crafted tarballs, on the PEP 706 ``data`` filter path and on the fallback path
(forced even on a Python that has the filter), and the promise that a failed extraction leaves nothing behind."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import shutil
import stat
import tarfile
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import stage1_source as ks
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import KmodBuildError

PATHS = [pytest.param(True, id="data_filter", marks=pytest.mark.skipif(
    not ks.HAS_DATA_FILTER, reason="this Python has no tarfile.data_filter")),
    pytest.param(False, id="fallback")]


def member(name, kind="file", data=b"x", link=None, mode=None, uid=0, uname=""):
    ti = tarfile.TarInfo(name)
    ti.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
               "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    if link is not None:
        ti.linkname = link
    if mode is not None:
        ti.mode = mode
    elif kind == "dir":
        ti.mode = 0o755
    ti.uid, ti.uname = uid, uname
    if kind == "chr":
        ti.devmajor, ti.devminor = 1, 3
    return ti, (data if kind == "file" else None)


def tarball(path, members):
    with tarfile.open(str(path), "w", format=tarfile.GNU_FORMAT) as tf:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            else:
                tf.addfile(ti)
    return str(path)


def snapshot(top, skip=()):
    """Every path below ``top`` (links not followed), but the ones below ``skip``."""
    out = set()
    for dp, dns, fns in os.walk(top):
        for n in dns + fns:
            p = os.path.join(dp, n)
            if not any(p == s or p.startswith(s + os.sep) for s in skip):
                out.add(os.path.relpath(p, top))
    return out


@pytest.fixture
def deep(tmp_path):
    """An extraction directory 5 levels below tmp_path, so an escape of 4 levels still lands in tmp_path."""
    d = tmp_path / "w" / "x" / "y" / "z"
    d.mkdir(parents=True)
    return tmp_path, d / "dest"


# The chain of issue 13: each link is harmless lexically, yet on disk a/l is the extraction directory, so
# a/l/e0 is one level above it, a/l/e0/e1 two, ... and the file lands four levels above.
SYMLINK_CHAIN = [member("a", "dir"), member("a/l", "sym", link=".."), member("a/l/e0", "sym", link=".."),
                 member("a/l/e0/e1", "sym", link=".."), member("a/l/e0/e1/e2", "sym", link=".."),
                 member("a/l/e0/e1/e2/e3", "sym", link=".."), member("a/l/e0/e1/e2/e3/escaped", data=b"pwned")]

ESCAPES = [
    ("dotdot", [member("v", "dir"), member("v/../../../../escaped", data=b"pwned")], "'..'"),
    ("absolute", [member("/tmp/gpufabric-escaped", data=b"pwned")], "absolute path"),
    ("symlink_chain", SYMLINK_CHAIN, "outside"),
    ("symlink_absolute", [member("v", "dir"), member("v/etc", "sym", link="/etc"),
                          member("v/etc/escaped", data=b"pwned")], "absolute path '/etc'"),
    ("symlink_dotdot", [member("v", "dir"), member("v/up", "sym", link="../../.."),
                        member("v/up/escaped", data=b"pwned")], "outside"),
    ("hardlink_outside", [member("v", "dir"), member("v/h", "hard", link="../../secret")], "outside"),
    ("hardlink_absolute", [member("v", "dir"), member("v/h", "hard", link="/etc/hostname")], "absolute path"),
    ("hardlink_dangling", [member("v", "dir"), member("v/h", "hard", link="v/missing")], "not in the extracted tree"),
    ("hardlink_through_symlink", [member("v", "dir"), member("v/s", "sym", link="."),
                                  member("v/h", "hard", link="v/s/../../secret")], "outside"),
    ("device_chr", [member("v", "dir"), member("v/null", "chr")], "device node"),
    ("device_blk", [member("v", "dir"), member("v/sda", "blk")], "device node"),
    ("fifo", [member("v", "dir"), member("v/pipe", "fifo")], "FIFO"),
    # a link checked once cannot be re-pointed: d is replaced by "d -> ." and x -> d/.. would then be outside
    ("repoint", [member("sub/deep", "dir"), member("d", "sym", link="sub/deep"), member("x", "sym", link="d/.."),
                 member("d", "sym", link="."), member("x/escaped", data=b"pwned")], "would replace"),
    ("control_char", [member("v", "dir"), member("v/bad\nname", data=b"x")], "control character"),
    ("symlink_loop", [member("v", "dir"), member("v/a", "sym", link="b"), member("v/b", "sym", link="a"),
                      member("v/a/f", data=b"x")], "symbolic links"),
]


@pytest.mark.parametrize("use_filter", PATHS)
@pytest.mark.parametrize("name,members,needle", ESCAPES, ids=[e[0] for e in ESCAPES])
def test_escapes_are_refused_and_leave_nothing(deep, use_filter, name, members, needle):
    top, dest = deep
    secret = top / "w" / "x" / "secret"
    secret.write_text("secret")
    tb = tarball(top / "bad.tar", members)
    before = snapshot(str(top))
    with pytest.raises(KmodBuildError) as e:
        ks.safe_extract(tb, str(dest), use_filter=use_filter)
    msg = str(e.value)
    assert "member" in msg and needle in msg, msg
    assert snapshot(str(top)) == before, "the failed extraction left something behind or wrote outside"
    assert not os.path.exists("/tmp/gpufabric-escaped")
    assert os.stat(str(secret)).st_nlink == 1


@pytest.mark.parametrize("use_filter", PATHS)
def test_symlink_chain_names_the_member(deep, use_filter):
    """The exact chain of issue 13: the member that would leave is named, the file is nowhere."""
    top, dest = deep
    with pytest.raises(KmodBuildError) as e:
        ks.safe_extract(tarball(top / "chain.tar", SYMLINK_CHAIN), str(dest), use_filter=use_filter)
    assert e.value.details.get("member") in ("a/l/e0", "a/l/e0/e1")
    assert [p for p in snapshot(str(top)) if p.endswith("escaped")] == []


@pytest.mark.parametrize("use_filter", PATHS)
def test_modes_ownership_and_links_inside(deep, use_filter):
    top, dest = deep
    tb = tarball(top / "ok.tar", [
        member("v", "dir", mode=0o2775), member("v/suid", mode=0o4755, uid=4242, uname="nobody-here"),
        member("v/sgid", mode=0o2644), member("v/sticky", "dir", mode=0o1777), member("v/ro", mode=0o444),
        member("v/build.sh", mode=0o755, data=b"#!/bin/sh\n"), member("v/Makefile", data=b"obj-m := x.o\n"),
        member("v/link", "sym", link="Makefile"), member("v/sub", "dir"), member("v/sub/up", "sym", link="../build.sh"),
        member("v/hard", "hard", link="v/Makefile"), member("v/dangling", "sym", link="not-there"),
    ])
    names = ks.safe_extract(tb, str(dest), use_filter=use_filter)
    assert "v/suid" in names
    v = dest / "v"
    for p in ("suid", "sgid", "sticky", "ro", "build.sh", "Makefile", "sub", "."):
        mode = os.lstat(str(v / p)).st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), p
        assert not mode & 0o022, p
        assert mode & 0o600 == 0o600, p
        assert os.lstat(str(v / p)).st_uid == os.geteuid(), p
    assert os.access(str(v / "build.sh"), os.X_OK) and not os.lstat(str(v / "Makefile")).st_mode & 0o111
    assert (v / "link").read_text() == "obj-m := x.o\n" and os.readlink(str(v / "link")) == "Makefile"
    assert (v / "sub" / "up").read_bytes() == b"#!/bin/sh\n"
    assert os.stat(str(v / "hard")).st_ino == os.stat(str(v / "Makefile")).st_ino
    assert os.path.islink(str(v / "dangling"))
    assert stat.S_IMODE(os.stat(str(dest)).st_mode) == 0o700, "the private directory was moved into place"
    assert [e for e in os.listdir(str(dest.parent)) if e.startswith(".extract-")] == []


@pytest.mark.parametrize("use_filter", PATHS)
def test_package_extraction_skips_links(deep, use_filter):
    top, dest = deep
    tb = tarball(top / "pkg.tar", [member(".", "dir"), member("./lib", "dir"), member("./lib/m.ko", data=b"\x7fELF"),
                                   member("./lib/abs", "sym", link="/usr/share/doc"),
                                   member("./lib/h", "hard", link="./lib/m.ko")])
    ks.safe_extract(tb, str(dest), "package p.deb", use_filter=use_filter, files_only=True)
    assert sorted(os.listdir(str(dest / "lib"))) == ["m.ko"]


def test_destination_rules(tmp_path):
    tb = tarball(tmp_path / "ok.tar", [member("f", data=b"1")])
    (tmp_path / "empty").mkdir()
    ks.safe_extract(tb, str(tmp_path / "empty"))
    assert (tmp_path / "empty" / "f").read_bytes() == b"1"
    with pytest.raises(KmodBuildError, match="already exists"):
        ks.safe_extract(tb, str(tmp_path / "empty"))
    with pytest.raises(KmodBuildError, match="cannot read"):
        ks.safe_extract(str(tmp_path / "missing.tar"), str(tmp_path / "m"))
    (tmp_path / "junk.tar").write_bytes(b"\0garbage" * 100)
    with pytest.raises(KmodBuildError, match="cannot read"):
        ks.safe_extract(str(tmp_path / "junk.tar"), str(tmp_path / "j"))
    assert not (tmp_path / "j").exists() and not (tmp_path / "m").exists()


def test_forcing_the_filter_without_one(monkeypatch, tmp_path):
    monkeypatch.setattr(ks, "HAS_DATA_FILTER", False)
    with pytest.raises(KmodBuildError, match="no tarfile extraction filters"):
        ks.safe_extract(tarball(tmp_path / "ok.tar", [member("f")]), str(tmp_path / "d"), use_filter=True)


def test_fallback_never_calls_the_data_filter(monkeypatch, tmp_path):
    """The forced fallback is really the hand-written path: tarfile's own filter would raise here."""
    def boom(*_a, **_k):
        raise AssertionError("data_filter called on the fallback path")
    monkeypatch.setattr(tarfile, "data_filter", boom, raising=False)
    ks.safe_extract(tarball(tmp_path / "ok.tar", [member("v", "dir"), member("v/f", mode=0o4755)]),
                    str(tmp_path / "d"), use_filter=False)
    assert stat.S_IMODE(os.stat(str(tmp_path / "d" / "v" / "f")).st_mode) == 0o755


def test_extract_source_case_insensitive_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(ks, "is_case_sensitive", lambda d: False)
    with pytest.raises(KmodBuildError, match="case-insensitive"):
        ks.extract_source(tarball(tmp_path / "ok.tar", [member("v", "dir"), member("v/Makefile")]),
                          str(tmp_path / "d"))
    assert sorted(os.listdir(str(tmp_path))) == ["ok.tar"]


# --------------------------------------------------------------------------- property: nothing ever leaves

COMPONENTS = st.sampled_from(["a", "b", "l", "..", "."])
RELPATH = st.lists(COMPONENTS, min_size=1, max_size=5).map("/".join)
MEMBERS = st.lists(st.tuples(st.sampled_from(["file", "dir", "sym", "hard"]), RELPATH, RELPATH),
                   min_size=1, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=MEMBERS, use_filter=st.booleans())
def test_property_nothing_is_written_outside(spec, use_filter):
    use_filter = use_filter and ks.HAS_DATA_FILTER
    sandbox = tempfile.mkdtemp(prefix="kmod-prop-")
    try:
        dest = os.path.join(sandbox, "p", "q", "r", "dest")
        os.makedirs(os.path.dirname(dest))
        with open(os.path.join(sandbox, "p", "target"), "w") as f:
            f.write("t")
        members = [member(name, kind, link=link if kind in ("sym", "hard") else None)
                   for kind, name, link in spec]
        tb = tarball(os.path.join(sandbox, "t.tar"), members)
        before = snapshot(sandbox)
        try:
            ks.safe_extract(tb, dest, use_filter=use_filter)
        except KmodBuildError:
            assert snapshot(sandbox) == before
        else:
            assert snapshot(sandbox, skip=[dest]) == before
            root = os.path.realpath(dest)
            for rel in snapshot(dest):
                real = os.path.realpath(os.path.join(dest, rel))
                assert real == root or real.startswith(root + os.sep), rel
                mode = os.lstat(os.path.join(dest, rel)).st_mode
                assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)
        assert os.stat(os.path.join(sandbox, "p", "target")).st_nlink == 1
    finally:
        shutil.rmtree(sandbox)


def test_build_with_an_escaping_tarball_runs_nothing_and_leaves_nothing(deep):
    """Issue 13 end to end: the chain tarball fails the build before any container runs, nothing stays behind. The
    one podman call before it is the read-only ``image inspect`` that the cache key needs (issue 21, item 22: the
    builder image's ID is part of the key), which never sees the tarball."""
    import hashlib
    import json
    from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import stage5_builder as kmod_builder
    top, _dest = deep
    tb = tarball(top / "vastnfs-evil.tar", [member("vastnfs-9", "dir")] + [
        member("vastnfs-9/" + ti.name, kind="sym" if ti.issym() else ("dir" if ti.isdir() else "file"),
               link=ti.linkname or None) for ti, _d in SYMLINK_CHAIN])
    with open(tb, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    calls = []
    inspect = json.dumps([{"Id": "sha256:" + "ab" * 32, "Digest": None, "RepoDigests": []}])

    def run(argv, env=None):
        calls.append(argv)
        return (0, inspect, "") if argv[1:3] == ["image", "inspect"] else (0, "", "")
    cache = top / "w" / "x" / "y" / "z" / "cache"
    before = snapshot(str(top))
    with pytest.raises(KmodBuildError, match="vastnfs-9/a/l/e0"):
        kmod_builder.build(run, {"podman": "podman"}, tb, digest, "6.1.0-50-amd64", "1", "vastnfs", str(cache),
                           "img")
    assert calls == [["podman", "image", "inspect", "img"]]
    assert snapshot(str(top), skip=[str(cache)]) == before
    assert os.listdir(str(cache)) == []
