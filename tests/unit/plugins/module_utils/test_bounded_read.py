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

from ansible_collections.gpufabric.node.plugins.module_utils import bounded_read as B

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
