# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl: what its own tests left unseen (make mutation's survivors): every refusal's message word for word, a
write that fails or reads back another value, the whole result of manage, the rendered file line for line, the
effective rp_filter with values missing, and parse_conf on the lines a hand-edited file may hold."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from consumers import write

CONF = "proc/sys/net/ipv4/conf"


def build(root, rails=("ens1np0",), values=None, conf=None):
    """Plain-file sysroot: sys/class/net/<rail> and conf/<iface>/<key> (``values`` {(iface, key): text}, 0 else)."""
    values = values or {}
    for r in rails:
        os.makedirs(os.path.join(str(root), "sys/class/net", r))
    for iface in ["all", "default"] + list(rails if conf is None else conf):
        for key in sysctl.KEYS:
            write(root, os.path.join(CONF, iface, key), values.get((iface, key), "0\n"))
    return Sysroot(str(root))


HEADER = [
    "# Managed by the gpufabric.node collection (module gpufabric.node.rail_sysctl).",
    "# Do not edit: the collection owns this file and rewrites it on every run.",
    "# ARP and reverse-path settings of the RoCE rails. The kernel uses max(all, <iface>)",
    "# for arp_ignore, arp_announce and rp_filter. Rails that appear after boot are covered by",
    "# systemd's udev rule that runs systemd-sysctl for every new network interface.",
]
MEANINGS = [
    "#   arp_ignore=1: reply only if the target IP is configured on the incoming interface",
    "#   arp_announce=2: always use the best local address for the outgoing interface",
    "#   rp_filter=2: loose reverse-path filter",
]
ONE_RAIL = "\n".join(HEADER + MEANINGS + [
    "",
    "# all interfaces",
    "net.ipv4.conf.all.arp_ignore = 1",
    "net.ipv4.conf.all.arp_announce = 2",
    "net.ipv4.conf.all.rp_filter = 2",
    "",
    "# interfaces created later",
    "net.ipv4.conf.default.arp_ignore = 1",
    "net.ipv4.conf.default.arp_announce = 2",
    "net.ipv4.conf.default.rp_filter = 2",
    "",
    "# rail ens1np0",
    "net.ipv4.conf.ens1np0.arp_ignore = 1",
    "net.ipv4.conf.ens1np0.arp_announce = 2",
    "net.ipv4.conf.ens1np0.rp_filter = 2",
]) + "\n"


# ------------------------------------------------------------------------------------------------ refusals

@pytest.mark.parametrize("name,message", [
    (5, "interface name must be a non-empty string (got 5)"),
    (None, "interface name must be a non-empty string (got None)"),
    ("", "interface name must be a non-empty string (got '')"),
    ("a" * 16, "interface name 'aaaaaaaaaaaaaaaa' is longer than 15 characters"),
    (u"\u00e9" * 8, "interface name %r is longer than 15 characters" % (u"\u00e9" * 8)),
    (".", "interface name '.' is not a legal Linux interface name"),
    ("..", "interface name '..' is not a legal Linux interface name"),
    ("ens1:0", "interface name 'ens1:0' is not a legal Linux interface name"),
    ("ens1\x01", "interface name 'ens1\\x01' is not a legal Linux interface name"),
    ("ens1\x7f", "interface name 'ens1\\x7f' is not a legal Linux interface name"),
    ("all", "'all' is not a rail: 'all' and 'default' are always managed"),
    ("default", "'default' is not a rail: 'all' and 'default' are always managed"),
    ("ens1=np0", "interface name 'ens1=np0' cannot be written in a sysctl.d file: '=' ends the key and '*', '?' "
                 "or '[' make it a glob that sets other interfaces (rename the rail)"),
    ("ens?", "interface name 'ens?' cannot be written in a sysctl.d file: '=' ends the key and '*', '?' "
             "or '[' make it a glob that sets other interfaces (rename the rail)"),
])
def test_validate_ifname_messages(name, message):
    with pytest.raises(ValueError) as e:
        sysctl.validate_ifname(name)
    assert str(e.value) == message


@pytest.mark.parametrize("name", ["a" * 15, u"\u00e9" * 7 + "a", "...", ".x", "ens3np0.100", "Default", "DEFAULT"])
def test_validate_ifname_accepts(name):
    assert sysctl.validate_ifname(name) == name


@pytest.mark.parametrize("key,value,message", [
    ("rp_filters", 1, "unknown setting 'rp_filters' (known: arp_ignore, arp_announce, rp_filter)"),
    ("arp_ignore", True, "arp_ignore must be an integer (got True)"),
    ("arp_announce", 2.0, "arp_announce must be an integer (got 2.0)"),
    ("rp_filter", "loose", "rp_filter must be an integer (got 'loose')"),
    ("rp_filter", None, "rp_filter must be an integer (got None)"),
    ("rp_filter", 3, "rp_filter must be one of 0, 1, 2 (got 3)"),
    ("arp_ignore", "9", "arp_ignore must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8 (got '9')"),
])
def test_validate_value_messages(key, value, message):
    with pytest.raises(ValueError) as e:
        sysctl.validate_value(key, value)
    assert str(e.value) == message


@pytest.mark.parametrize("rails,message", [
    ([], "rails must list at least one network interface"),
    (["ens1np0", "ens2np0", "ens1np0"], "rail ens1np0 is listed twice"),
    (["ens8np0", "ens1np0", "ens9np0"], "rail(s) ens8np0, ens9np0 do not exist (no /sys/class/net/<name>)"),
])
def test_validate_rails_messages(tmp_path, rails, message):
    sr = build(tmp_path, rails=("ens1np0", "ens2np0"))
    with pytest.raises(ValueError) as e:
        sysctl.validate_rails(sr, rails)
    assert str(e.value) == message


def test_manage_without_ipv4_conf_says_which(tmp_path):
    sr = build(tmp_path, rails=("ens1np0", "ens3np0"), conf=("ens1np0",))
    with pytest.raises(sysctl.SysctlError) as e:
        sysctl.manage(sr, ["ens1np0", "ens3np0"], {}, False)
    assert str(e.value) == ("/proc/sys/net/ipv4/conf/ens3np0 does not exist: the rail is not in this network "
                            "namespace or IPv4 is disabled on it")


def test_apply_live_names_every_unreadable_setting(tmp_path):
    sr = build(tmp_path, values={("all", "rp_filter"): "", ("ens1np0", "arp_announce"): "two\n"})
    os.unlink(os.path.join(str(tmp_path), CONF, "ens1np0", "rp_filter"))
    with pytest.raises(sysctl.SysctlError) as e:
        sysctl.apply_live(sr, sysctl.desired_settings(["ens1np0"], {}), False)
    assert str(e.value) == ("cannot read /proc/sys/net/ipv4/conf/all/rp_filter, "
                            "/proc/sys/net/ipv4/conf/ens1np0/arp_announce, /proc/sys/net/ipv4/conf/ens1np0/rp_filter"
                            " (is the interface in this network namespace?)")


def test_read_current_unparsable_is_none(tmp_path):
    sr = build(tmp_path, values={("all", "rp_filter"): "loose\n", ("all", "arp_ignore"): "1\n"})
    settings = [("all", "arp_ignore", 1), ("all", "rp_filter", 2), ("nothere", "rp_filter", 2)]
    assert sysctl.read_current(sr, settings) == {("all", "arp_ignore"): 1, ("all", "rp_filter"): None,
                                                 ("nothere", "rp_filter"): None}


# ------------------------------------------------------------------------------------------------ apply_live

class FailingWrite(Sysroot):
    """A setting the kernel refuses to take."""

    def write_attr(self, p, value):
        raise OSError("Permission denied")


class WrongReadBack(Sysroot):
    """The kernel takes another value than the one written (as a clamped or refused write would leave it)."""

    def write_attr(self, p, value):
        Sysroot.write_attr(self, p, "1\n")


RP = "/proc/sys/net/ipv4/conf/all/rp_filter"


@pytest.mark.parametrize("cls,check,after,result", [
    (FailingWrite, False, 0,
     {"object": "net.ipv4.conf.all.rp_filter", "result": "failed", "changes": [],
      "error": "cannot write 2 to %s: Permission denied" % RP}),
    (WrongReadBack, False, 1,
     {"object": "net.ipv4.conf.all.rp_filter", "result": "failed",
      "changes": [{"key": "value", "before": 0, "after": 1}],
      "error": "wrote 2 to %s but it reads back 1" % RP}),
    (Sysroot, False, 2,
     {"object": "net.ipv4.conf.all.rp_filter", "result": "changed", "error": None,
      "changes": [{"key": "value", "before": 0, "after": 2}]}),
    (FailingWrite, True, 2,
     {"object": "net.ipv4.conf.all.rp_filter", "result": "changed", "error": None,
      "changes": [{"key": "value", "before": 0, "after": 2}]}),
])
def test_apply_live_whole_result(tmp_path, cls, check, after, result):
    build(tmp_path, values={("all", "arp_ignore"): "1\n"})
    sr = cls(str(tmp_path))
    settings = [("all", "arp_ignore", 1), ("all", "rp_filter", 2)]
    failed = [("all", "rp_filter")] if result["result"] == "failed" else []
    assert sysctl.apply_live(sr, settings, check) == {
        "changed": bool(result["changes"]),
        "drift": [{"concern": "sysctl", "object": "all", "key": "rp_filter", "current": 0, "desired": 2}],
        "before": {("all", "arp_ignore"): 1, ("all", "rp_filter"): 0},
        "after": {("all", "arp_ignore"): 1, ("all", "rp_filter"): after},
        "results": [{"object": "net.ipv4.conf.all.arp_ignore", "result": "unchanged", "error": None,
                     "changes": []}, result],
        "failed": failed,
    }


# ------------------------------------------------------------------------------------------------ manage

ZEROS = dict.fromkeys(sysctl.KEYS, 0)


def _live_text(values):
    return "".join("net.ipv4.conf.%s.%s = %d\n" % (i, k, values[k])
                   for i in ("all", "default", "ens1np0") for k in sysctl.KEYS)


def test_manage_whole_result_with_own_path(tmp_path):
    sr = build(tmp_path)
    path = "/etc/sysctl.d/50-rails.conf"
    res = sysctl.manage(sr, ["ens1np0"], {}, False, path=path)
    results = [{"object": "net.ipv4.conf.%s.%s" % (i, k), "result": "changed", "error": None,
                "changes": [{"key": "value", "before": 0, "after": sysctl.DEFAULTS[k]}]}
               for i in ("all", "default", "ens1np0") for k in sysctl.KEYS]
    drift = [{"concern": "sysctl", "object": i, "key": k, "current": 0, "desired": sysctl.DEFAULTS[k]}
             for i in ("all", "default", "ens1np0") for k in sysctl.KEYS]
    assert res == {
        "live_before": _live_text(ZEROS),
        "live_after": _live_text(sysctl.DEFAULTS),
        "changed": True,
        "live_changed": True,
        "file_changed": True,
        "drift": drift + [{"concern": "sysctl", "object": path, "key": "content", "current": "missing",
                           "desired": "managed"}],
        "settings": {"all": dict(sysctl.DEFAULTS), "default": dict(sysctl.DEFAULTS),
                     "ens1np0": dict(sysctl.DEFAULTS)},
        "effective_rp_filter": {"ens1np0": 2},
        "file": {"changed": True, "before": "", "after": ONE_RAIL, "path": path},
        "results": results,
        "errors": [],
    }
    with open(os.path.join(str(tmp_path), path.lstrip("/"))) as f:
        assert f.read() == ONE_RAIL
    assert not os.path.exists(os.path.join(str(tmp_path), sysctl.SYSCTL_FILE.lstrip("/")))


def test_manage_file_drift_differs_and_failed_write_keeps_old_line(tmp_path):
    build(tmp_path)
    write(tmp_path, sysctl.SYSCTL_FILE, "net.ipv4.conf.all.rp_filter = 1\n")
    res = sysctl.manage(FailingWrite(str(tmp_path)), ["ens1np0"], {}, False)
    assert res["drift"][-1] == {"concern": "sysctl", "object": sysctl.SYSCTL_FILE, "key": "content",
                                "current": "differs", "desired": "managed"}
    assert res["errors"] == ["cannot write %d to /proc/sys/net/ipv4/conf/%s/%s: Permission denied"
                             % (sysctl.DEFAULTS[k], i, k) for i in ("all", "default", "ens1np0") for k in sysctl.KEYS]
    body = [line for line in res["file"]["after"].splitlines() if line and not line.startswith("#")]
    assert body == ["net.ipv4.conf.all.rp_filter = 1"]
    assert res["live_after"] == res["live_before"] == _live_text(ZEROS)


def test_manage_empty_file_is_reported_as_differing_not_missing(tmp_path):
    """An empty file the collection's path names exists: its drift says "differs", as for any other content."""
    build(tmp_path)
    write(tmp_path, sysctl.SYSCTL_FILE, "")
    res = sysctl.manage(Sysroot(str(tmp_path)), ["ens1np0"], {}, True)
    assert res["drift"][-1] == {"concern": "sysctl", "object": sysctl.SYSCTL_FILE, "key": "content",
                                "current": "differs", "desired": "managed"}


# ------------------------------------------------------------------------------------------------ persist

def test_persist_writes_mode_0644_and_reports_before(tmp_path):
    sr = Sysroot(str(tmp_path))
    path = "/etc/sysctl.d/t.conf"
    real = os.path.join(str(tmp_path), "etc/sysctl.d/t.conf")
    assert sysctl.persist(sr, "a = 1\n", True, path) == {"changed": True, "before": "", "after": "a = 1\n",
                                                         "path": path}
    assert not os.path.exists(real)
    assert sysctl.persist(sr, "a = 1\n", False, path) == {"changed": True, "before": "", "after": "a = 1\n",
                                                          "path": path}
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o644
    assert sysctl.persist(sr, "a = 1\n", False, path) == {"changed": False, "before": "a = 1\n",
                                                          "after": "a = 1\n", "path": path}


# ------------------------------------------------------------------------------------------------ effective rp_filter

@pytest.mark.parametrize("values,expect", [
    ({}, None),
    ({("all", "rp_filter"): 0, ("ens1np0", "rp_filter"): 0}, 0),
    ({("all", "rp_filter"): 1}, 1),
    ({("ens1np0", "rp_filter"): 2}, 2),
    ({("all", "rp_filter"): 0}, 0),
    ({("ens1np0", "rp_filter"): 0}, 0),
    ({("all", "rp_filter"): 2, ("ens1np0", "rp_filter"): 1}, 2),
])
def test_effective_rp_filter_with_missing_values(values, expect):
    assert sysctl.effective_rp_filter(values, ["ens1np0"]) == {"ens1np0": expect}


# ------------------------------------------------------------------------------------------------ parse_conf

@pytest.mark.parametrize("text,expect", [
    ("garbage without equals\nnet.ipv4.conf.all.rp_filter = 1\n", {("all", "rp_filter"): 1}),
    ("; net.ipv4.conf.all.rp_filter = 1\n# net.ipv4.conf.all.arp_ignore = 1\n\n", {}),
    # the key ends at the first '=': nothing of the value after it is a key
    ("net.ipv4.conf.a=b.rp_filter = 1\nnet.ipv4.conf.all.rp_filter = 1 = 2\nnet.ipv4.conf.all.arp_ignore=1\n",
     {("all", "arp_ignore"): 1}),
    ("net/ipv4/conf/ens3np0.100/rp_filter = 0\nnet.ipv4.conf.ens1np0.rp_filter = 2\n",
     {("ens3np0.100", "rp_filter"): 0, ("ens1np0", "rp_filter"): 2}),
    # a dotted name in the dotted form is skipped, and the next line still counts
    ("net.ipv4.conf.ens3np0.100.rp_filter = 0\nnet.ipv4.conf.all.rp_filter = 2\n", {("all", "rp_filter"): 2}),
    ("net.ipv4.conf.all.rp_filter = loose\nnet.ipv4.conf.all.arp_announce = 2\n", {("all", "arp_announce"): 2}),
    ("net.ipv6.conf.all.arp_ignore = 1\nnet.ipv4.conf.all.forwarding = 1\nnet.ipv4.conf.all.rp_filter = 0\n",
     {("all", "rp_filter"): 0}),
    ("net/ipv4/conf/x/rp_filter/extra = 1\nkernel.x = 1\nnet.ipv4.conf.all.arp_ignore = 2\n",
     {("all", "arp_ignore"): 2}),
    ("", {}),
    (None, {}),
])
def test_parse_conf(text, expect):
    assert sysctl.parse_conf(text) == expect


# ------------------------------------------------------------------------------------------------ recorded settings

@pytest.mark.parametrize("failed,previous,expect", [
    ([], "net.ipv4.conf.all.arp_ignore = 0\n",
     [("all", "arp_ignore", 1), ("all", "rp_filter", 2), ("ens1np0", "rp_filter", 2)]),
    ([("all", "arp_ignore")], "", [("all", "rp_filter", 2), ("ens1np0", "rp_filter", 2)]),
    ([("all", "arp_ignore"), ("ens1np0", "rp_filter")], "net.ipv4.conf.all.arp_ignore = 0\n",
     [("all", "arp_ignore", 0), ("all", "rp_filter", 2)]),
])
def test_recorded_settings_goes_on_after_a_failed_one(failed, previous, expect):
    settings = [("all", "arp_ignore", 1), ("all", "rp_filter", 2), ("ens1np0", "rp_filter", 2)]
    assert sysctl.recorded_settings(settings, failed, previous) == expect


# ------------------------------------------------------------------------------------------------ render_conf

def test_render_conf_one_rail_word_for_word():
    assert sysctl.render_conf(sysctl.desired_settings(["ens1np0"], {})) == ONE_RAIL


def test_render_conf_values_without_meaning_and_repeated_meanings():
    settings = [("all", "arp_ignore", 0), ("all", "rp_filter", 1), ("default", "rp_filter", 1),
                ("ens3np0.100", "rp_filter", 0), ("ens3np0.100", "arp_announce", 0), ("ens1np0", "rp_filter", 1)]
    assert sysctl.render_conf(settings) == "\n".join(HEADER + [
        "#   rp_filter=1: strict reverse-path filter",
        "#   rp_filter=0: no source validation (VAST localports=)",
        "",
        "# all interfaces",
        "net.ipv4.conf.all.arp_ignore = 0",
        "net.ipv4.conf.all.rp_filter = 1",
        "",
        "# interfaces created later",
        "net.ipv4.conf.default.rp_filter = 1",
        "",
        "# rail ens3np0.100",
        "net/ipv4/conf/ens3np0.100/rp_filter = 0",
        "net/ipv4/conf/ens3np0.100/arp_announce = 0",
        "",
        "# rail ens1np0",
        "net.ipv4.conf.ens1np0.rp_filter = 1",
    ]) + "\n"
