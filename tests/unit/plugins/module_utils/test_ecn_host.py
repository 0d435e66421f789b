# -*- coding: utf-8 -*-
"""ecn_host: the kernel lockdown mode and its capability table, across the kernels of the OS profiles."""
from __future__ import absolute_import, division, print_function

import os

import pytest

import lockdown_kernel as lk

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.ecn import host as ecn_host
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type


@pytest.mark.parametrize("text, mode", [
    ("[none] integrity confidentiality\n", "none"),
    ("none [integrity] confidentiality", "integrity"),
    ("none integrity [confidentiality]", "confidentiality"),
])
def test_parse_lockdown(text, mode):
    assert ecn_host.parse_lockdown(text) == mode


@pytest.mark.parametrize("text", ["", "none integrity confidentiality", "[none] [integrity]", "[paranoid] none",
                                  "none [integrity] confidentiality\nextra [x]", "[none]x integrity"])
def test_parse_lockdown_refuses_anything_else(text):
    with pytest.raises(ValueError):
        ecn_host.parse_lockdown(text)


# the kernels of the OS profiles (os_profiles.py) and the edges of the table
@pytest.mark.parametrize("release, restricted", [
    ("6.1.0-27-amd64", True),            # Debian 12
    ("6.12.12-amd64", True),             # Debian 13
    ("5.15.0-126-generic", True),        # Ubuntu 22.04
    ("6.8.0-51-generic", True),          # Ubuntu 24.04
    ("5.14.0-503.14.1.el9_5.x86_64", True),  # EL 9
    ("5.4.0-42-generic", True),          # the release that brought the restriction
    ("4.19.0-27-amd64", False),          # before lockdown
    ("4.18.0-553.el8_10.x86_64", False),
    ("garbage", True),                   # unknown: believed to have it
])
def test_lockdown_debugfs_capability_by_release(release, restricted):
    assert ecn_host.has("lockdown_debugfs", ecn_host.parse_release(release)) is restricted


@pytest.mark.parametrize("mode, release, read_failed, refused", [
    ("integrity", "6.8.0-51-generic", False, True),
    ("confidentiality", "5.14.0-503.el9.x86_64", False, True),
    ("none", "6.8.0-51-generic", False, False),
    (None, "6.8.0-51-generic", True, False),         # no lockdown LSM: a failed read is not put down to it
    ("integrity", "4.18.0-553.el8.x86_64", False, False),   # backport: tried first
    ("integrity", "4.18.0-553.el8.x86_64", True, True),     # ... and a refused read is lockdown
])
def test_debugfs_refused(tmp_path, mode, release, read_failed, refused):
    sr = Sysroot(str(tmp_path))
    lk.write_lockdown(str(tmp_path), mode)
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(release + "\n")
    why = ecn_host.debugfs_refused(sr, read_failed=read_failed)
    assert bool(why) is refused
    if refused:
        assert "[%s]" % mode in why and "cat /sys/kernel/security/lockdown" in why and "fs/debugfs/file.c" in why


def test_unknown_capability_is_refused():
    with pytest.raises(ValueError):
        ecn_host.has("nope", (6, 1))


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "mlxconfig")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


@pytest.mark.parametrize("name, key, mask", [
    ("query_prio_mask_p1_255.txt", "ROCE_CC_PRIO_MASK_P1", 255),
    ("query_prio_mask_p2_247.txt", "ROCE_CC_PRIO_MASK_P2", 247),
])
def test_parse_prio_mask_fixtures(name, key, mask):
    assert ecn_host.parse_prio_mask(fixture(name), key) == mask


@pytest.mark.parametrize("text, needle", [
    (fixture("query_prio_mask_p1_255.txt"), "ROCE_CC_PRIO_MASK_P2 is not in the output"),
    ("Configurations:      Next Boot\n        ROCE_CC_PRIO_MASK_P2   256\n", "expected a priority bit mask"),
    ("Configurations:      Next Boot\n        ROCE_CC_PRIO_MASK_P2   True(1)\n", "expected a priority bit mask"),
    ("        ROCE_CC_PRIO_MASK_P2   8\n", "is not in the output"),   # no Configurations: header
])
def test_parse_prio_mask_refuses(text, needle):
    with pytest.raises(ValueError) as e:
        ecn_host.parse_prio_mask(text, "ROCE_CC_PRIO_MASK_P2")
    assert needle in str(e.value)


@pytest.mark.parametrize("bdf, port", [("0000:11:00.0", 1), ("0000:11:00.1", 2), ("0000:11:00.2", None),
                                       ("0000:11:00", None), (None, None)])
def test_port_of(bdf, port):
    assert ecn_host.port_of(bdf) == port


def tool(outputs, installed=("mlxconfig",)):
    calls = []

    def run(argv):
        calls.append(argv)
        return outputs
    return run, (lambda name: "/usr/bin/" + name if name in installed else None), calls


# id, bdf, priority, run output, installed tools, status, enabled, reason needles
FIRMWARE_CASES = [
    ("default-mask", "0000:11:00.0", 3, (0, fixture("query_prio_mask_p1_255.txt"), ""), ("mlxconfig",), "ok", True,
     []),
    ("bit-3-clear", "0000:12:00.1", 3, (0, fixture("query_prio_mask_p2_247.txt"), ""), ("mlxconfig",), "ok", False,
     ["DCQCN is off for priority 3", "mlxconfig -d 0000:12:00.1 set ROCE_CC_PRIO_MASK_P2=255", "mlxfwreset"]),
    ("bit-0-set-in-247", "0000:12:00.1", 0, (0, fixture("query_prio_mask_p2_247.txt"), ""), ("mlxconfig",), "ok",
     True, []),
    ("mstconfig-only", "0000:12:00.1", 3, (0, fixture("query_prio_mask_p2_247.txt"), ""), ("mstconfig",), "ok", False,
     ["mstconfig -d 0000:12:00.1 set"]),
    ("no-tool", "0000:11:00.0", 3, (0, "", ""), (), "not_checked", None,
     ["neither mlxconfig", "check: mlxconfig -d 0000:11:00.0 query ROCE_CC_PRIO_MASK_P1 (bit 3 must be set"]),
    ("query-fails", "0000:11:00.0", 3, (3, "", "-E- Failed to open device: 0000:11:00.0"), ("mlxconfig",),
     "not_checked", None, ["rc=3", "Failed to open device", "check: mlxconfig"]),
    ("garbage", "0000:11:00.0", 3, (0, "nothing useful", ""), ("mlxconfig",), "not_checked", None,
     ["is not in the output", "check: mlxconfig"]),
    ("unknown-port", "0000:11:00.4", 3, (0, "", ""), ("mlxconfig",), "not_checked", None,
     ["port of 0000:11:00.4 is not known"]),
]


@pytest.mark.parametrize("case", FIRMWARE_CASES, ids=[c[0] for c in FIRMWARE_CASES])
def test_firmware_prio(case):
    _id, bdf, prio, output, installed, status, enabled, needles = case
    run, which, calls = tool(output, installed)
    fw = ecn_host.firmware_prio(run, which, bdf, prio)
    assert (fw["status"], fw["enabled"]) == (status, enabled)
    for n in needles:
        assert n in fw["reason"]
    if status == "ok" and enabled:
        assert fw["reason"] is None
    if calls:
        assert calls == [["/usr/bin/" + installed[0], "-d", bdf, "query", fw["key"]]], "a read-only query"
