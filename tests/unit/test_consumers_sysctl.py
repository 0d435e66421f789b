# -*- coding: utf-8 -*-
"""The rails' sysctl.d file, applied by its readers in a throw-away network namespace (``unshare -n``).

The file (sysctl.render_conf over sysctl.desired_settings) names each rail, so the namespace first gets veth
interfaces of those names (a name with a dot is a VLAN's on a node; the slash form of the key must reach it).
Both readers apply it: ``systemd-sysctl FILE`` (what boot runs) and procps ``sysctl -p FILE``; each must exit 0
without a diagnostic, and every value must then be in that namespace's /proc/sys.
"""
from __future__ import absolute_import, division, print_function

import pytest

import consumers
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl

__metaclass__ = type

READERS = {"systemd-sysctl": ["systemd-sysctl", "{file}"], "sysctl -p": ["sysctl", "-q", "-p", "{file}"]}
SCRIPT = r"""set -e
i=0
for name in %s; do ip link add "$name" type veth peer name "gfpeer$i"; i=$((i+1)); done
set +e
"$@"
rc=$?
echo "rc=$rc"
for f in /proc/sys/net/ipv4/conf/*/arp_ignore /proc/sys/net/ipv4/conf/*/arp_announce \
         /proc/sys/net/ipv4/conf/*/rp_filter; do echo "$f=$(cat "$f")"; done
"""


def apply_in_netns(tmp_path, content, interfaces, reader):
    """(rc, diagnostics, {(iface, key): value}) after ``reader`` applied ``content`` in a new network namespace."""
    consumers.need_root("a throw-away network namespace")
    unshare, _ip = consumers.need("unshare", "ip")
    argv = [consumers.need(w)[0] if i == 0 else w for i, w in enumerate(READERS[reader])]
    path = consumers.write(tmp_path, "/etc/sysctl.d/90-gpufabric-rails.conf", content)
    argv = [w.replace("{file}", path) for w in argv]
    names = " ".join("'%s'" % n for n in interfaces)
    rc, out, err = consumers.run([unshare, "-n", "sh", "-c", SCRIPT % names, "sysctl-test"] + argv)
    assert rc == 0, err
    values, status = {}, None
    for line in out.splitlines():
        if line.startswith("rc="):
            status = int(line[3:])
        elif line.startswith("/proc/sys/net/ipv4/conf/"):
            path, value = line.rsplit("=", 1)
            parts = path.split("/")
            values[(parts[6], parts[7])] = int(value)
    return status, err.strip(), values


GOOD = [
    # id, rails, requested values
    ("two rails, defaults", ["ens1np0", "ens2np0"], {}),
    ("eight rails of dual-port NICs, VAST rp_filter 0",
     ["ens%df%dnp%d" % (n, p, p) for n in (1, 2, 3, 4) for p in (0, 1)], {"rp_filter": 0}),
    ("VLAN rails (slash form) and odd names", ["rail0.100", "rail1.100", "r@il-2", "en+p_3,x"],
     {"arp_ignore": 2, "rp_filter": 1}),
]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_readers_apply_the_file(tmp_path, case, reader):
    _id, rails, values = case
    settings = sysctl.desired_settings(rails, values)
    rc, diag, live = apply_in_netns(tmp_path, sysctl.render_conf(settings), rails, reader)
    assert (rc, diag) == (0, "")
    assert dict(((i, k), live[(i, k)]) for i, k, _v in settings) == dict(((i, k), v) for i, k, v in settings)


BROKEN = [
    # id, edit of the rendered file (old, new), diagnostic of systemd-sysctl, of sysctl -p
    ("a rail that is not there", ("net.ipv4.conf.ens2np0.", "net.ipv4.conf.ens9np0."),
     "Couldn't write '1' to 'net/ipv4/conf/ens9np0/arp_ignore'", "cannot stat /proc/sys/net/ipv4/conf/ens9np0"),
    ("a VLAN rail in dotted form", ("net/ipv4/conf/rail0.100/arp_ignore", "net.ipv4.conf.rail0.100.arp_ignore"),
     "Couldn't write '1' to 'net/ipv4/conf/rail0/100/arp_ignore'",
     "cannot stat /proc/sys/net/ipv4/conf/rail0/100/arp_ignore"),
    ("a value the kernel refuses", ("net.ipv4.conf.all.rp_filter = 2", "net.ipv4.conf.all.rp_filter = loose"),
     "Couldn't write 'loose' to 'net/ipv4/conf/all/rp_filter'", "setting key \"net.ipv4.conf.all.rp_filter\""),
]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", BROKEN, ids=[c[0] for c in BROKEN])
def test_readers_reject_a_broken_file(tmp_path, case, reader):
    _id, (old, new), systemd_diag, procps_diag = case
    rails = ["ens1np0", "ens2np0", "rail0.100"]
    content = sysctl.render_conf(sysctl.desired_settings(rails, {}))
    assert old in content
    rc, diag, _live = apply_in_netns(tmp_path, content.replace(old, new), rails, reader)
    want = systemd_diag if reader == "systemd-sysctl" else procps_diag
    # systemd-sysctl reports a missing key and goes on with rc 0 (it is a boot service); the diagnostic is the proof
    assert want in diag and (rc != 0 or reader == "systemd-sysctl"), (rc, diag)
