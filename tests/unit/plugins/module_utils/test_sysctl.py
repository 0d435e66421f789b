# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

CONF = "proc/sys/net/ipv4/conf"
FILE = "etc/sysctl.d/90-gpufabric-rails.conf"


def _w(path, text):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "w") as f:
        f.write(text)


def build(root, rails=("ens1np0", "ens2np0"), values=None, conf_rails=None):
    """Plain-file sysroot: sys/class/net/<if>, proc/sys/net/ipv4/conf/<if>/<key>. values: {(if,key): v}."""
    values = values or {}
    for r in rails:
        os.makedirs(os.path.join(str(root), "sys/class/net", r))
    for iface in ["all", "default"] + list(rails if conf_rails is None else conf_rails):
        for key in sysctl.KEYS:
            _w(os.path.join(str(root), CONF, iface, key), "%d\n" % values.get((iface, key), 0))
    return Sysroot(str(root))


def live(root, iface, key):
    with open(os.path.join(str(root), CONF, iface, key)) as f:
        return int(f.read())


def read_file(root):
    p = os.path.join(str(root), FILE)
    return open(p).read() if os.path.exists(p) else None


ALL_DESIRED = dict(((i, k), v) for i in ("all", "default", "ens1np0", "ens2np0")
                   for k, v in sysctl.DEFAULTS.items())


def _with(key, value):
    d = dict(ALL_DESIRED)
    d[key] = value
    return d


MANAGE_CASES = [
    # id, initial live values, requested values, check mode, expected drift keys, live after (subset)
    ("kernel defaults", {}, {}, False,
     sorted((i, k) for i in ("all", "default", "ens1np0", "ens2np0") for k in sysctl.KEYS),
     {("all", "rp_filter"): 2, ("ens2np0", "arp_ignore"): 1}),
    ("already right", ALL_DESIRED, {}, False, [], {("all", "rp_filter"): 2}),
    ("only one rail differs", _with(("ens2np0", "rp_filter"), 1), {}, False,
     [("ens2np0", "rp_filter")], {("ens2np0", "rp_filter"): 2}),
    ("VAST localports rp_filter 0", ALL_DESIRED, {"rp_filter": 0}, False,
     sorted((i, "rp_filter") for i in ("all", "default", "ens1np0", "ens2np0")), {("all", "rp_filter"): 0}),
    ("check mode writes nothing", {}, {}, True,
     sorted((i, k) for i in ("all", "default", "ens1np0", "ens2np0") for k in sysctl.KEYS),
     {("all", "rp_filter"): 0, ("ens1np0", "arp_ignore"): 0}),
]


@pytest.mark.parametrize("case", MANAGE_CASES, ids=[c[0] for c in MANAGE_CASES])
def test_manage(tmp_path, case):
    _id, initial, requested, check, drift_keys, after = case
    sr = build(tmp_path, values=initial)
    res = sysctl.manage(sr, ["ens1np0", "ens2np0"], requested, check)
    assert sorted((d["object"], d["key"]) for d in res["drift"] if d["object"] != sysctl.SYSCTL_FILE) == drift_keys
    for d in res["drift"]:
        assert d["concern"] == "sysctl"
    for (iface, key), v in after.items():
        assert live(tmp_path, iface, key) == v
    assert res["changed"] is True  # the file did not exist in any case
    if check:
        assert read_file(tmp_path) is None
    else:
        assert read_file(tmp_path) == res["file"]["after"]
        again = sysctl.manage(sr, ["ens1np0", "ens2np0"], requested, False)
        assert again["changed"] is False and again["drift"] == []


def test_write_only_what_differs(tmp_path):
    sr = build(tmp_path, values=_with(("ens1np0", "arp_announce"), 0))
    written = []

    class Recording(Sysroot):
        def write_attr(self, p, value):
            written.append(p)
            Sysroot.write_attr(self, p, value)

    sysctl.manage(Recording(str(tmp_path)), ["ens1np0", "ens2np0"], {}, False)
    assert written == ["/proc/sys/net/ipv4/conf/ens1np0/arp_announce"]
    assert sr.read("/" + CONF + "/ens1np0/arp_announce") == "2"


def test_effective_rp_filter_is_max(tmp_path):
    values = {("all", "rp_filter"): 1, ("ens1np0", "rp_filter"): 0, ("ens2np0", "rp_filter"): 2}
    assert sysctl.effective_rp_filter(values, ["ens1np0", "ens2np0"]) == {"ens1np0": 1, "ens2np0": 2}


def test_file_is_deterministic_and_complete():
    settings = sysctl.desired_settings(["ens2np0", "ens1np0", "ens3np0.100"], {"rp_filter": 0})
    text = sysctl.render_conf(settings)
    assert text == sysctl.render_conf(list(settings))
    assert text.startswith("# Managed by the gpufabric.node collection")
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert body[:3] == ["net.ipv4.conf.all.arp_ignore = 1", "net.ipv4.conf.all.arp_announce = 2",
                        "net.ipv4.conf.all.rp_filter = 0"]
    assert "net.ipv4.conf.default.rp_filter = 0" in body
    assert body.index("net.ipv4.conf.ens2np0.arp_ignore = 1") < body.index("net.ipv4.conf.ens1np0.arp_ignore = 1")
    assert "net/ipv4/conf/ens3np0.100/rp_filter = 0" in body
    assert len(body) == 5 * 3


def test_file_drift_when_edited(tmp_path):
    sr = build(tmp_path, values=ALL_DESIRED)
    sysctl.manage(sr, ["ens1np0", "ens2np0"], {}, False)
    with open(os.path.join(str(tmp_path), FILE), "a") as f:
        f.write("net.ipv4.conf.all.rp_filter = 1\n")
    res = sysctl.manage(sr, ["ens1np0", "ens2np0"], {}, True)
    assert res["changed"] and not res["live_changed"]
    assert res["drift"] == [{"concern": "sysctl", "object": sysctl.SYSCTL_FILE, "key": "content",
                             "current": "differs", "desired": "managed"}]


BAD = [
    ("rp_filter 3", ["ens1np0"], {"rp_filter": 3}, ValueError, "rp_filter must be one of 0, 1, 2"),
    ("arp_announce 5", ["ens1np0"], {"arp_announce": 5}, ValueError, "arp_announce must be one of"),
    ("arp_ignore text", ["ens1np0"], {"arp_ignore": "one"}, ValueError, "arp_ignore must be an integer"),
    ("unknown rail", ["ens9np0"], {}, ValueError, "ens9np0 do not exist"),
    ("duplicate rail", ["ens1np0", "ens1np0"], {}, ValueError, "listed twice"),
    ("illegal name", ["ens1/np0"], {}, ValueError, "not a legal Linux interface name"),
    ("too long", ["a" * 16], {}, ValueError, "longer than 15"),
    # legal kernel names that sysctl.d cannot name (systemd-sysctl and sysctl -p, test_consumers_sysctl.py)
    ("= ends the sysctl.d key", ["ens1=np0"], {}, ValueError, "cannot be written in a sysctl.d file"),
    ("glob [ sets another rail", ["ens[1]np0"], {}, ValueError, "make it a glob"),
    ("glob * sets every rail", ["ens*"], {}, ValueError, "make it a glob"),
    ("all is not a rail", ["all"], {}, ValueError, "not a rail"),
    ("no rails", [], {}, ValueError, "at least one"),
    ("rail without ipv4 conf", ["ens3np0"], {}, sysctl.SysctlError, "ens3np0 does not exist"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_touches_nothing(tmp_path, case):
    _id, rails, values, exc, msg = case
    sr = build(tmp_path, rails=("ens1np0", "ens2np0", "ens3np0"), conf_rails=("ens1np0", "ens2np0"))
    with pytest.raises(exc, match=msg):
        sysctl.manage(sr, rails, values, False)
    assert live(tmp_path, "all", "arp_ignore") == 0
    assert read_file(tmp_path) is None


def test_unreadable_value_fails_clearly(tmp_path):
    sr = build(tmp_path)
    os.unlink(os.path.join(str(tmp_path), CONF, "ens1np0", "rp_filter"))
    with pytest.raises(sysctl.SysctlError, match="cannot read /proc/sys/net/ipv4/conf/ens1np0/rp_filter"):
        sysctl.manage(sr, ["ens1np0"], {}, False)
    assert live(tmp_path, "all", "arp_ignore") == 0
