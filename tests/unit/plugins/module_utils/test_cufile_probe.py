# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cufile_probe: the parts that run without a GPU (pattern, compare, I/O loop, CLI, missing libraries)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import subprocess
import sys

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.discovery import cufile_probe as cp
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import proof as nvfs


@pytest.mark.parametrize("code,name", [(0, "CU_FILE_SUCCESS"), (5001, "CU_FILE_DRIVER_NOT_INITIALIZED"),
                                       (-5027, "CU_FILE_HANDLE_NOT_REGISTERED"), (5999, "CU_FILE_ERROR_5999")])
def test_error_name(code, name):
    assert cp.error_name(code) == name


def test_pattern_reproducible_and_not_zero():
    a, b = cp.make_pattern(1 << 16, 7), cp.make_pattern(1 << 16, 7)
    assert a == b and len(a) == 1 << 16 and a != bytes(1 << 16) and a != cp.make_pattern(1 << 16, 8)


@pytest.mark.parametrize("expected,actual,want", [
    (b"abcd", b"abcd", {"matches": True, "first_mismatch": None, "mismatched_bytes": 0}),
    (b"abcd", b"abXd", {"matches": False, "first_mismatch": 2, "mismatched_bytes": 1}),
    (b"abcd", b"ab", {"matches": False, "first_mismatch": 2, "mismatched_bytes": 2}),
    (b"abcd", b"", {"matches": False, "first_mismatch": 0, "mismatched_bytes": 4}),
])
def test_compare(expected, actual, want):
    assert cp.compare(expected, actual) == want


class FakeIO(object):
    def __init__(self, returns):
        self.returns = list(returns)
        self.asked = []

    def __call__(self, fh, dev, size, file_off, dev_off):
        self.asked.append((size, file_off, dev_off))
        return self.returns.pop(0)


def _probe():
    p = cp.Probe.__new__(cp.Probe)
    p.steps = []
    return p


@pytest.mark.parametrize("returns,size,done,short,err,asked", [
    ([100], 100, 100, False, None, [(100, 0, 0)]),
    ([40, 60], 100, 100, True, None, [(100, 0, 0), (60, 40, 40)]),
    ([40, 0], 100, 40, True, "NO_PROGRESS", [(100, 0, 0), (60, 40, 40)]),
    ([-5010], 100, 0, False, "CU_FILE_NVFS_DRIVER_ERROR", [(100, 0, 0)]),
])
def test_io_loop_continues_short_writes(returns, size, done, short, err, asked):
    fn = FakeIO(returns)
    res = _probe().io_loop(fn, "cuFileWrite", None, None, size)
    assert (res["done"], res["short"], (res["error"] or {}).get("name"), fn.asked) == (done, short, err, asked)
    assert res["calls"] == returns


def test_io_loop_errno():
    def fn(*a):
        import ctypes
        ctypes.set_errno(5)
        return -1
    res = _probe().io_loop(fn, "cuFileRead", None, None, 10)
    assert res["error"]["name"] == "EIO" and res["done"] == 0


def test_missing_library_reports_json(tmp_path):
    rep = cp.run_probe(str(tmp_path), 4096, libcufile="/nonexistent/libcufile.so.0",
                       libcudart="/nonexistent/libcudart.so")
    assert rep["ok"] is False and rep["error"] == "cannot load libcufile" and rep["load_errors"]


def test_cli_prints_one_json_document(tmp_path):
    p = subprocess.run([sys.executable, cp.__file__, "--dir", str(tmp_path), "--size", "4096",
                        "--libcufile", "/nonexistent/libcufile.so.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       check=False)
    assert p.returncode == 0
    doc = json.loads(p.stdout.decode())
    assert doc["ok"] is False and doc["probe_version"] == cp.PROBE_VERSION
    rep = nvfs.parse_probe_output(p.returncode, p.stdout.decode(), p.stderr.decode())
    assert rep["method"] == "probe" and rep["error"] == "cannot load libcufile"


@pytest.mark.parametrize("args", [["--size", "0"], ["--gpu", "-1"], ["--dir", "/nonexistent/dir"]])
def test_cli_bad_arguments(tmp_path, args):
    argv = ["--dir", str(tmp_path)] + args
    assert cp.main(argv) == 2


def test_probe_source_is_this_file():
    src = nvfs.probe_source()
    assert "def run_probe(" in src and src == open(cp.__file__).read()


@pytest.mark.parametrize("rc,out,want", [
    (-11, "", "killed by signal 11"),
    (0, "garbage\n", "printed no report"),
    (1, '{"ok": false}\n', "rc=1"),
])
def test_parse_probe_output_failures(rc, out, want):
    rep = nvfs.parse_probe_output(rc, out, "Segmentation fault")
    assert want in rep["error"] and rep["data_matched"] is False and rep["stderr"] == "Segmentation fault"
