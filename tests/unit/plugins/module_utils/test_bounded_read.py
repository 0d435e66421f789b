# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bounded_read.py: what root reads from a place others can write is a regular file, not followed, and bounded."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import time

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read as B

LIMIT = 1 << 20


def _regular(d):
    p = os.path.join(d, "f.prom")
    with open(p, "wb") as f:
        f.write(b"a 1\n")
    return p


def _link_to_zero(d):
    p = os.path.join(d, "zero.prom")
    os.symlink("/dev/zero", p)
    return p


def _link_to_regular(d):
    target = _regular(d)
    p = os.path.join(d, "link.prom")
    os.symlink(target, p)
    return p


def _fifo(d):
    p = os.path.join(d, "fifo.prom")
    os.mkfifo(p)
    return p


def _directory(d):
    p = os.path.join(d, "dir.prom")
    os.mkdir(p)
    return p


def _sparse(size):
    def make(d):
        p = os.path.join(d, "big.prom")
        with open(p, "wb") as f:
            f.truncate(size)
        return p
    return make


CASES = [
    # id, maker, errno or None (read), what the message says
    ("regular file", _regular, None, None),
    ("at the limit exactly", _sparse(LIMIT), None, None),
    ("symlink to /dev/zero", _link_to_zero, errno.ELOOP, "symbolic link"),
    ("symlink to a regular file", _link_to_regular, errno.ELOOP, "symbolic link"),
    ("FIFO nobody writes", _fifo, errno.EINVAL, "a FIFO"),
    ("directory", _directory, errno.EINVAL, "a directory"),
    ("character device itself", lambda d: "/dev/null", errno.EINVAL, "a character device"),
    ("one byte over the limit", _sparse(LIMIT + 1), errno.EFBIG, "over the"),
    ("missing", lambda d: os.path.join(d, "absent.prom"), errno.ENOENT, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_read_regular(tmp_path, case):
    _id, make, want, words = case
    path = make(str(tmp_path))
    t0 = time.monotonic()
    if want is None:
        data, st = B.read_regular(path, LIMIT, with_stat=True)
        assert len(data) == st.st_size <= LIMIT
    else:
        with pytest.raises(OSError) as e:
            B.read_regular(path, LIMIT)
        assert e.value.errno == want
        if words:
            assert isinstance(e.value, B.BoundedReadError) and words in str(e.value)
    assert time.monotonic() - t0 < 1.0


def test_a_file_that_grows_while_read_is_cut_at_the_limit(tmp_path, monkeypatch):
    path = _regular(str(tmp_path))
    real_read = os.read
    monkeypatch.setattr(B.os, "read", lambda fd, n: real_read(fd, n) or b"x" * n)   # never ends, like /dev/zero
    with pytest.raises(B.BoundedReadError) as e:
        B.read_regular(path, 4096)
    assert e.value.errno == errno.EFBIG and "grew" in str(e.value)


@pytest.mark.parametrize("limit", [-1, B.MAX_LIMIT + 1])
def test_limit_is_bounded(tmp_path, limit):
    with pytest.raises(ValueError):
        B.read_regular(_regular(str(tmp_path)), limit)


def _tree(tmp_path, mode, owner=None):
    """tmp/d (``mode``, ``owner``) holding ``via`` -> tmp/real, and tmp/real/f.prom."""
    real = tmp_path / "real"
    real.mkdir()
    _regular(str(real))
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(str(real), str(d / "via"))
    os.chmod(str(d), mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        os.chown(str(d), owner, -1)
    os.chmod(str(tmp_path), 0o755)
    return str(d / "via" / "f.prom")


@pytest.mark.parametrize("mode,owner,followed", [
    (0o755, None, True),            # a root-owned directory only root writes: /var/run -> /run
    (0o1777, None, False),          # sticky and world-writable, as /tmp
    (0o775, None, False),           # group-writable
    (0o755, 1000, False),           # a user's own directory
], ids=["root-only", "tmp-like", "group-writable", "user-owned"])
def test_a_link_on_the_way_is_followed_only_in_a_directory_no_one_else_writes(tmp_path, mode, owner, followed):
    path = _tree(tmp_path, mode, owner)
    if followed:
        assert B.read_regular(path, LIMIT) == b"a 1\n"
    else:
        with pytest.raises(B.BoundedReadError) as e:
            B.read_regular(path, LIMIT)
        assert e.value.errno == errno.ELOOP
        assert "via is a symbolic link in a directory others can write: not followed" in str(e.value)


def test_a_link_loop_stops_at_the_kernels_limit(tmp_path):
    os.symlink(str(tmp_path / "b"), str(tmp_path / "a"))
    os.symlink(str(tmp_path / "a"), str(tmp_path / "b"))
    os.chmod(str(tmp_path), 0o755)
    with pytest.raises(B.BoundedReadError, match="more than 40 symbolic links"):
        B.read_regular(str(tmp_path / "a" / "f"), LIMIT)


@pytest.mark.parametrize("rel,code", [("missing/f.prom", errno.ENOENT), ("f.prom/x", errno.ENOTDIR),
                                      ("sub/../f.prom", None), ("./sub/./../f.prom", None)])
def test_plain_errors_and_dot_components(tmp_path, rel, code):
    _regular(str(tmp_path))
    (tmp_path / "sub").mkdir()
    path = str(tmp_path) + "/" + rel
    if code is None:
        assert B.read_regular(path, LIMIT) == b"a 1\n"
        return
    with pytest.raises(OSError) as e:
        B.read_regular(path, LIMIT)
    assert e.value.errno == code and e.value.filename == path
