# -*- coding: utf-8 -*-
"""The collection's own records under /etc/gpufabric (acs.json, routing.json, vendor_nfs.json), read by root in
modules and at boot, are read through bounded_read (issue 21): a symlink (to /dev/zero), a FIFO nobody writes,
one over bounded_read.RECORD_LIMIT, one nested beyond the parser's limit, one that is not UTF-8 or not an object
are each refused with the file named, within a second, never followed, never hanging; the recording functions
replace such a record. Before, each was read with open().read(): the link to /dev/zero grew without bound, the
FIFO hung the reader, deep nesting raised RecursionError out of kmod_install and kernel_hold."""
from __future__ import absolute_import, division, print_function

import json
import os
import signal

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.acs import manage as acs
from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.vendor_client import hold as kernel_hold
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import (
    common as kmod_common, stage7_install as kmod_install)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import check as nfs_mounts_check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing import manage as routing
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type


def _link(path):
    os.symlink("/dev/zero", path)


def _fifo(path):
    os.mkfifo(path, 0o600)


def _text(text):
    def make(path):
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    return make


BAD = [
    # id, how the record is made, what the refusal names
    ("symlink to /dev/zero", _link, "symbolic link"),
    ("FIFO", _fifo, "a FIFO"),
    ("over the record limit", _text('{"a": "%s"}' % ("x" * bounded_read.RECORD_LIMIT)), "bytes"),
    ("nested 100,000 deep", _text("[" * 100000 + "]" * 100000), ""),
    ("not UTF-8", _text(b'{"a": "\xff"}'), "utf-8"),
]

READERS = [
    # id, record path, reader(sysroot) -> raises or returns (doc, problem), the error it raises or None
    ("acs.json", acs.STATE_FILE, acs.read_state, acs.AcsError),
    ("routing.json", routing.STATE_FILE, routing.load_state, routing.RoutingError),
    ("vendor_nfs.json: kernel_hold", kmod_common.STATE_FILE, kernel_hold.read_record, kernel_hold.HoldError),
    ("vendor_nfs.json: kmod_common", kmod_common.STATE_FILE, kmod_common.read_record, None),
]


class _Slow(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Slow("the reader did not return within 2 s")


@pytest.fixture
def within_2s():
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(2)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def root(tmp_path):
    os.makedirs(str(tmp_path / "etc" / "gpufabric"))
    os.makedirs(str(tmp_path / "proc" / "sys" / "kernel"))
    with open(str(tmp_path / "proc" / "sys" / "kernel" / "osrelease"), "w") as f:
        f.write("6.1.0-27-amd64\n")
    return str(tmp_path)


@pytest.mark.parametrize("bad", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("reader", READERS, ids=[r[0] for r in READERS])
def test_a_record_root_cannot_use_is_refused_naming_it(root, within_2s, bad, reader):
    _id, make, why = bad
    _rid, path, read, error = reader
    make(root + path)
    if error is None:
        doc, problem = read(Sysroot(root))
        assert doc == {} and path in problem and why.lower() in problem.lower(), problem
    else:
        with pytest.raises(error) as e:
            read(Sysroot(root))
        assert path in str(e.value) and why.lower() in str(e.value).lower(), str(e.value)


@pytest.mark.parametrize("bad", BAD, ids=[b[0] for b in BAD])
def test_the_vendor_record_is_replaced_and_the_mount_check_goes_on(root, within_2s, bad):
    """kmod_install and kernel_hold start a new record; the NFS check reads no record (in-tree client)."""
    make = bad[1]
    make(root + kmod_common.STATE_FILE)
    sr = Sysroot(root)
    assert kmod_install.read_state(sr) == {"version": 1, "kernels": {}}
    assert nfs_mounts_check.client_state(sr)["installed"] is False
    assert kernel_hold.record(sr, ["6.1.0-27-amd64"], "held") is True
    assert kernel_hold.read_record(sr) == ["6.1.0-27-amd64"]
    assert not os.path.islink(root + kmod_common.STATE_FILE)


@pytest.mark.parametrize("doc,want", [
    ({"version": 1, "kernels": []}, {"version": 1, "kernels": {}}),    # a wrong shape inside: kernels start again
    ([1, 2], {"version": 1, "kernels": {}}),
    ({"version": 1, "kernels": {"k": {}}}, {"version": 1, "kernels": {"k": {}}}),
])
def test_kmod_install_keeps_a_good_record_and_mends_a_wrong_shape(root, doc, want):
    _text(json.dumps(doc))(root + kmod_common.STATE_FILE)
    assert kmod_install.read_state(Sysroot(root)) == want


def test_absent_records_are_none_or_empty(root):
    sr = Sysroot(root)
    assert acs.read_state(sr) is None and routing.load_state(sr) is None
    assert kmod_common.read_record(sr) == ({}, None) and kernel_hold.read_record(sr) == []
