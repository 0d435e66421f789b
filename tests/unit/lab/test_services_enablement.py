# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's systemctl: enablement as systemd has it (enable/disable/mask/unmask, is-enabled words and codes)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from gpufabric_sim import units
from test_runtime import _systemctl

UNIT = "gpufabric-apply.service"
INSTALL = "[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"


def root_with(tmp_path, unit_dir="etc/systemd/system", text=INSTALL):
    root = tmp_path / "root"
    (root / unit_dir).mkdir(parents=True)
    (root / unit_dir / UNIT).write_text(text)
    return root


def sc(*argv):
    return lambda mp, root: _systemctl(mp, root, *argv)


def rm(rel):
    return lambda mp, root: os.unlink(str(root / rel))


# title, unit dir, steps, is-enabled (stdout, rc)
CASES = [
    ("disabled", "etc/systemd/system", [], ("disabled", 1)),
    ("enabled", "etc/systemd/system", [sc("enable", UNIT)], ("enabled", 0)),
    ("enabled for this boot", "etc/systemd/system", [sc("enable", "--runtime", UNIT)], ("enabled-runtime", 0)),
    ("enabled both ways", "etc/systemd/system", [sc("enable", "--runtime", UNIT), sc("enable", UNIT)],
     ("enabled", 0)),
    ("disabled again", "etc/systemd/system", [sc("enable", UNIT), sc("disable", UNIT)], ("disabled", 1)),
    ("masked after the unit file was removed", "etc/systemd/system",
     [sc("enable", UNIT), rm("etc/systemd/system/" + UNIT), sc("mask", UNIT)], ("masked", 1)),
    ("unit in /usr masked in /etc", "usr/lib/systemd/system", [sc("enable", UNIT), sc("mask", UNIT)],
     ("masked", 1)),
    ("unit in /usr masked in /run", "usr/lib/systemd/system", [sc("enable", UNIT), sc("mask", "--runtime", UNIT)],
     ("masked-runtime", 1)),
    ("a runtime mask does not hide a unit file in /etc", "etc/systemd/system",
     [sc("enable", UNIT), sc("mask", "--runtime", UNIT)], ("enabled", 0)),
    ("unmasked: links to the unit file stay", "usr/lib/systemd/system",
     [sc("enable", UNIT), sc("mask", UNIT), sc("unmask", UNIT)], ("enabled", 0)),
    ("unmasked: links to the mask go with it", "etc/systemd/system",
     [sc("enable", UNIT), rm("etc/systemd/system/" + UNIT), sc("mask", UNIT), sc("unmask", UNIT)],
     ("not-found", 4)),
    ("runtime unmask", "usr/lib/systemd/system",
     [sc("mask", "--runtime", UNIT), sc("unmask", "--runtime", UNIT)], ("disabled", 1)),
    ("not found", "etc/systemd/system", [rm("etc/systemd/system/" + UNIT)], ("not-found", 4)),
]


@pytest.mark.parametrize("unit_dir,steps,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_is_enabled(tmp_path, monkeypatch, unit_dir, steps, expected):
    root = root_with(tmp_path, unit_dir)
    for step in steps:
        res = step(monkeypatch, root)
        assert res is None or res[0] == 0, res
    rc, out, _err = _systemctl(monkeypatch, root, "is-enabled", UNIT)
    assert (out.strip(), rc) == expected
    rc, out, _err = _systemctl(monkeypatch, root, "show", UNIT, "-p", "UnitFileState", "--value")
    assert out.strip() == ("" if expected[0] == "not-found" else expected[0])


def test_static(tmp_path, monkeypatch):
    root = root_with(tmp_path, text="[Service]\nExecStart=/bin/true\n")
    assert _systemctl(monkeypatch, root, "is-enabled", UNIT)[:2] == (0, "static\n")


def test_mask_refuses_to_replace_a_unit_file(tmp_path, monkeypatch):
    root = root_with(tmp_path)
    rc, _out, err = _systemctl(monkeypatch, root, "mask", UNIT)
    assert rc == 1 and "Failed to mask unit: File /etc/systemd/system/%s already exists." % UNIT in err
    assert not os.path.islink(str(root / "etc/systemd/system" / UNIT))


def test_masked_unit_cannot_start_or_enable_and_is_not_started_at_boot(tmp_path, monkeypatch):
    root = root_with(tmp_path, "usr/lib/systemd/system")
    assert _systemctl(monkeypatch, root, "enable", UNIT)[0] == 0
    assert units.enabled_units(str(root)) == [UNIT]
    rc, _out, err = _systemctl(monkeypatch, root, "mask", UNIT)
    assert rc == 0 and "Created symlink /etc/systemd/system/%s \u2192 /dev/null." % UNIT in err
    assert os.readlink(str(root / "etc/systemd/system" / UNIT)) == "/dev/null"
    rc, _out, err = _systemctl(monkeypatch, root, "start", UNIT)
    assert rc == 1 and "Unit %s is masked." % UNIT in err
    rc, _out, err = _systemctl(monkeypatch, root, "enable", UNIT)
    assert rc == 1 and "is masked" in err
    assert units.enabled_units(str(root)) == [], "a simulated boot does not start a masked unit"
    rc, _out, _err = _systemctl(monkeypatch, root, "show", UNIT, "-p", "LoadState", "--value")
    assert _out.strip() == "masked"
    log = (root / "var/lib/gpufabric-sim/actions.log").read_text().splitlines()
    assert log[-1] == "systemctl mask %s" % UNIT
