# -*- coding: utf-8 -*-
"""ecn_host: the kernel lockdown mode and its capability table, across the kernels of the OS profiles."""
from __future__ import absolute_import, division, print_function

import pytest

import lockdown_kernel as lk

from ansible_collections.gpufabric.node.plugins.module_utils import ecn_host
from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

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
