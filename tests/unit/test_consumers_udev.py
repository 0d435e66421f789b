# -*- coding: utf-8 -*-
"""The applier's udev rule, read and run by udev's own rules engine: ``udevadm test`` on an RDMA device ``add``.

Debian 12 has systemd 252; ``udevadm verify`` came with 253 and no newer udev is in the suites CI installs from.
So the rule (rendered by persist.render_rule) is bind-mounted over /etc/udev/rules.d in a private mount namespace
(``unshare -m``), and a tmpfs over /sys holds one infiniband device (``uevent``, ``subsystem`` link), which
``udevadm test --action=add`` processes with every rule of the host plus ours (SYSTEMD_DEVICE_VERIFY_SYSFS=0 lets
sd-device take a /sys that is not sysfs). udevadm prints a parse error as ``<rules file>:<line> <message>`` and
exits 0, so the rule is accepted only without such a line, and it must produce exactly the expected RUN.
"""
from __future__ import absolute_import, division, print_function

import os
import re

import pytest

import consumers
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import install as persist

__metaclass__ = type

RULES = "/etc/udev/rules.d/90-gpufabric-rdma.rules"
SCRIPT = r"""set -e
mount --make-rprivate /
mount -t tmpfs gpufabric-rules /etc/udev/rules.d
cp "$1" %s
mount -t tmpfs gpufabric-sys /sys
dev=/sys/devices/virtual/infiniband/$2
mkdir -p "$dev" /sys/class/infiniband
printf 'NAME=%%s\n' "$2" > "$dev/uevent"
ln -s ../../../../class/infiniband "$dev/subsystem"
exec udevadm test --action=add "$dev"
""" % RULES


def udev_test(tmp_path, rule, device):
    """(rc, diagnostics about our file, RUN programs) of udevadm test on ``device`` with ``rule`` installed."""
    consumers.need_root("udevadm test in a private mount namespace")
    unshare, _udevadm = consumers.need("unshare", "udevadm")
    path = os.path.join(str(tmp_path), "rule")
    with open(path, "w") as f:
        f.write(rule)
    env = dict(os.environ, SYSTEMD_DEVICE_VERIFY_SYSFS="0", SYSTEMD_LOG_LEVEL="info")
    rc, out, err = consumers.run([unshare, "-m", "sh", "-c", SCRIPT, "udev-test", path, device], env=env)
    lines = (out + err).splitlines()
    diag = [ln for ln in lines if re.match(re.escape(RULES) + r":\d+ ", ln)]
    runs = [m.group(1) for m in (re.fullmatch(r"run: '(.*)'", ln) for ln in lines) if m]
    return rc, diag, runs, "\n".join(lines)


def start(systemctl, device):
    return "%s --no-block restart gpufabric-apply@%s.service" % (systemctl, device)


GOOD = [
    # id, systemctl path given to the collection, device name, RUN expected (None: the rule must not fire)
    ("mlx5_0", persist.DEFAULT_SYSTEMCTL, "mlx5_0", start("/usr/bin/systemctl", "mlx5_0")),
    ("bonded dual-port", persist.DEFAULT_SYSTEMCTL, "mlx5-bond0", start("/usr/bin/systemctl", "mlx5-bond0")),
    ("soft-RoCE with a dot", persist.DEFAULT_SYSTEMCTL, "rxe.eth0", start("/usr/bin/systemctl", "rxe.eth0")),
    ("systemctl path of every allowed character", "/opt/gpu=fabric/sys+ctl,1@a:b/systemctl", "mlx5_1",
     start("/opt/gpu=fabric/sys+ctl,1@a:b/systemctl", "mlx5_1")),
    # names a unit instance would change (':' and '@'): the template reads %i, so the rule must not start one
    ("a name with ':' starts nothing", persist.DEFAULT_SYSTEMCTL, "rdma:0", None),
    ("a name with '@' starts nothing", persist.DEFAULT_SYSTEMCTL, "rxe@eth0", None),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_udev_runs_the_rule(tmp_path, case):
    _id, systemctl, device, expected = case
    rc, diag, runs, text = udev_test(tmp_path, persist.render_rule(systemctl), device)
    assert rc == 0 and diag == [], text
    ours = [r for r in runs if "gpufabric-apply" in r]
    assert ours == ([expected] if expected else []), text


def _broken(old, new):
    rule = persist.render_rule(persist.DEFAULT_SYSTEMCTL)
    assert old in rule
    return rule.replace(old, new)


BROKEN = [
    # id, rule, diagnostic udev must print about our file
    ("assignment where a match belongs", _broken('SUBSYSTEM=="infiniband"', 'SUBSYSTEM="infiniband"'),
     "Invalid operator for SUBSYSTEM"),
    ("a key udev does not know", _broken('SUBSYSTEM==', 'SUBSYSTEMX=='), "Invalid key 'SUBSYSTEMX'"),
    ("an unterminated value", _broken('.service"\n', '.service\n'), "Invalid key/value pair, ignoring"),
    ("an undoubled %", _broken("@%k.service", "@%q.service"), "invalid substitution type"),
]


@pytest.mark.parametrize("case", BROKEN, ids=[c[0] for c in BROKEN])
def test_udev_rejects_a_broken_rule(tmp_path, case):
    _id, rule, diagnostic = case
    _rc, diag, _runs, text = udev_test(tmp_path, rule, "mlx5_0")
    assert [d for d in diag if diagnostic in d], text
