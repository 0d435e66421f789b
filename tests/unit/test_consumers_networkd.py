# -*- coding: utf-8 -*-
"""The mtu concern's systemd-networkd drop-in read by systemd-networkd itself (issue 21 item 21).

mtu_persist.record writes ``/etc/systemd/network/<file>.network.d/gpufabric-mtu.conf`` for a rail whose network
file networkd names; here the operator's file is ``/usr/lib/systemd/network/20-rails.network`` with its own
``MTUBytes=4200``. No offline reader parses a .network file (``systemd-analyze verify`` reads units,
``networkctl`` asks the running daemon, ``systemd-analyze cat-config`` only lists files), so the real daemon runs:
``/lib/systemd/systemd-networkd`` in a private mount and network namespace (``unshare``) holding one veth named
like the rail, with that node root's network directories bound over the host's, ``/run/systemd`` a tmpfs and a
read-only sysfs of the namespace (networkd then configures links without waiting for udev). The MTU the daemon
sets on the veth is what the drop-in says; without the drop-in it is the operator's.
"""
from __future__ import absolute_import, division, print_function

import os

import pytest

import consumers
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

LIB = "/usr/lib/systemd/network"
OPERATOR = "[Match]\nName=rail0\n\n[Link]\nMTUBytes=4200\n\n[Network]\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n"
SCRIPT = r"""set -e
root=$1; networkd=$2; lib=%(lib)s
mount -t sysfs -o ro sysfs /sys
mount -t tmpfs -o mode=0755 tmpfs /run/systemd
mount --bind "$root/etc/systemd/network" /etc/systemd/network
mount --bind "$root$lib" "$lib"
ip link add rail0 type veth peer name gfpeer0
SYSTEMD_LOG_LEVEL=debug SYSTEMD_LOG_TARGET=console "$networkd" >"$root/networkd.log" 2>&1 &
pid=$!
i=0
while [ "$(cat /sys/class/net/rail0/mtu)" = 1500 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "mtu=$(cat /sys/class/net/rail0/mtu)"
kill $pid; wait $pid || true
"""


def networkd_sets(root):
    """The MTU systemd-networkd gives the veth ``rail0`` with ``root``'s network directories."""
    consumers.need_root("systemd-networkd in a private mount and network namespace")
    unshare, _ip, networkd = consumers.need("unshare", "ip", "/lib/systemd/systemd-networkd")
    for d in ("/etc/systemd/network", LIB):
        if not os.path.isdir(d):
            consumers.unavailable("%s is missing: systemd-networkd is not installed as Debian installs it" % d)
    rc, out, err = consumers.run([unshare, "--mount", "--net", "--propagation", "private", "--fork", "--kill-child",
                                  "sh", "-c", SCRIPT % {"lib": LIB}, "networkd-test", root, networkd])
    assert rc == 0, err
    mtu = [int(line[4:]) for line in out.splitlines() if line.startswith("mtu=")]
    with open(os.path.join(root, "networkd.log")) as f:
        log = f.read()
    assert "rail0: Configuring with %s/20-rails.network" % LIB in log, log[-3000:]
    return mtu[0]


@pytest.mark.parametrize("dropin, expected", [(True, 9000), (False, 4200)], ids=["drop-in", "operator's file"])
def test_networkd_reads_the_mtu_dropin(tmp_path, dropin, expected):
    root = str(tmp_path / "root")
    consumers.write(root, LIB + "/20-rails.network", OPERATOR)
    os.makedirs(os.path.join(root, "etc/systemd/network"))
    if dropin:
        reloads = []
        owner = {"rail": "rail0", "owner": "networkd", "network_file": LIB + "/20-rails.network", "netplan_id": None,
                 "nm_uuid": None, "interfaces_file": None, "interfaces_mtu": None, "kind": None}

        def run(argv):
            assert argv == ["networkctl", "reload"], argv
            reloads.append(argv)
            return 0, "", ""
        rec = mtu_persist.record(Sysroot(root), run, [owner], 9000, False)
        assert [f["path"] for f in rec["files"] if f["changed"]][0] == \
            "/etc/systemd/network/20-rails.network.d/" + mtu_persist.DROPIN
        assert len(reloads) == 1
    assert networkd_sets(root) == expected
