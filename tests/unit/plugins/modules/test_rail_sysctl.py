# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rail_sysctl run in-process against a plain-file sysroot (never the host's /proc/sys), and with routing
against a network namespace created for the test (root only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from modrunner import run_module

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state as state_store
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl import manage as sysctl
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot
from ansible_collections.gpufabric.node.plugins.modules import rail_sysctl

CONF = "proc/sys/net/ipv4/conf"
RAILS = ["rail0", "rail1"]


def _w(path, text):
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = str(tmp_path / "root")
    for name in RAILS + ["eth9"]:
        os.makedirs(os.path.join(r, "sys/class/net", name))
    for iface in ["all", "default"] + RAILS:
        for key, v in (("arp_ignore", 0), ("arp_announce", 0), ("rp_filter", 1)):
            _w(os.path.join(r, CONF, iface, key), "%d\n" % v)
    monkeypatch.setenv("GPUFABRIC_SYSROOT", r)
    return r


def val(root, iface, key):
    with open(os.path.join(root, CONF, iface, key)) as f:
        return int(f.read())


def sysctl_file(root):
    p = os.path.join(root, sysctl.SYSCTL_FILE.lstrip("/"))
    return open(p).read() if os.path.exists(p) else None


def test_apply_diff_idempotent(root, monkeypatch):
    res = run_module(rail_sysctl, {"rails": RAILS}, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] is True
    assert len([d for d in res["drift"] if d["concern"] == "sysctl" and d["object"] != sysctl.SYSCTL_FILE]) == 12
    assert res["settings"]["rail1"] == {"arp_announce": 2, "arp_ignore": 1, "rp_filter": 2}
    assert res["effective_rp_filter"] == {"rail0": 2, "rail1": 2}
    assert val(root, "all", "rp_filter") == 2 and val(root, "rail0", "arp_ignore") == 1
    assert "net.ipv4.conf.rail0.rp_filter = 1" in res["diff"][0]["before"]
    assert "net.ipv4.conf.rail0.rp_filter = 2" in res["diff"][0]["after"]
    assert res["diff"][1]["after"] == sysctl_file(root)
    assert "net.ipv4.conf.rail1.rp_filter = 2" in sysctl_file(root)
    again = run_module(rail_sysctl, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["drift"] == []


def test_check_mode(root, monkeypatch):
    res = run_module(rail_sysctl, {"rails": RAILS, "rp_filter": 0}, check_mode=True, monkeypatch=monkeypatch)
    assert res["changed"] is True
    assert val(root, "all", "rp_filter") == 1
    assert sysctl_file(root) is None
    assert {"concern": "sysctl", "object": "all", "key": "rp_filter", "current": 1, "desired": 0} in res["drift"]


BAD = [
    ("rp_filter 3", {"rails": RAILS, "rp_filter": 3}, "value of rp_filter must be one of"),
    ("unknown rail", {"rails": ["rail7"]}, "rail7 do not exist"),
    ("duplicate rails", {"rails": ["rail0", "rail0"]}, "listed twice"),
    ("illegal name", {"rails": ["rail 0"]}, "not a legal Linux interface name"),
    ("rail without IPv4 conf", {"rails": ["eth9"]}, "/proc/sys/net/ipv4/conf/eth9 does not exist"),
    ("table base covers main", {"rails": RAILS, "routing": True, "routing_table_base": 253}, "reserved table"),
    ("table base 0", {"rails": RAILS, "routing": True, "routing_table_base": 0}, "must lie in"),
    ("priority 0", {"rails": RAILS, "routing": True, "routing_rule_priority": 0}, "1..32765"),
    ("gateway for another rail", {"rails": RAILS, "routing": True, "routing_gateways": {"eth9": "10.0.0.1"}},
     "not in rails"),
    ("gateway without routing", {"rails": RAILS, "routing_gateways": {"rail0": "10.0.0.1"}}, "needs routing"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input(root, monkeypatch, case):
    _id, args, msg = case
    res = run_module(rail_sysctl, args, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert msg in res["msg"]
    assert val(root, "all", "arp_ignore") == 0
    assert sysctl_file(root) is None


def _can_netns():
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.fixture
def netns(monkeypatch):
    if not _can_netns():
        pytest.skip("needs root and iproute2 to create a network namespace")
    pyroute2 = pytest.importorskip("pyroute2")
    ns = "gfm-%s" % uuid.uuid4().hex[:8]
    subprocess.check_call(["ip", "netns", "add", ns])
    try:
        for i, name in enumerate(RAILS):
            subprocess.check_call(["ip", "-n", ns, "link", "add", name, "type", "veth", "peer", "name", name + "p"])
            subprocess.check_call(["ip", "-n", ns, "link", "set", name, "up"])
            subprocess.check_call(["ip", "-n", ns, "link", "set", name + "p", "up"])
            subprocess.check_call(["ip", "-n", ns, "addr", "add", "10.100.%d.1/16" % i, "dev", name])
        monkeypatch.setattr(rail_sysctl, "IPRoute", functools.partial(pyroute2.IPRoute, netns=ns))
        yield ns
    finally:
        subprocess.call(["ip", "netns", "del", ns])


def test_routing_in_netns(root, netns, monkeypatch):
    args = {"rails": RAILS, "routing": True, "routing_table_base": 200, "routing_rule_priority": 900}
    check = run_module(rail_sysctl, args, check_mode=True, monkeypatch=monkeypatch)
    assert check["changed"] is True
    assert "lookup 200" not in subprocess.check_output(["ip", "-n", netns, "rule"]).decode()
    res = run_module(rail_sysctl, args, diff=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert [t["table"] for t in res["routing"]["tables"]] == [200, 201]
    rules = subprocess.check_output(["ip", "-n", netns, "rule"]).decode()
    assert "900:\tfrom 10.100.1.1 lookup 201" in rules
    state = json.loads(open(os.path.join(root, "etc/gpufabric/routing.json")).read())
    assert [r["rail"] for r in state["rails"]] == RAILS
    assert state_store.load(Sysroot(root))["routing"] == {"state_file": "/etc/gpufabric/routing.json"}
    again = run_module(rail_sysctl, args, monkeypatch=monkeypatch)
    assert again["changed"] is False and again["drift"] == []


def test_routing_rail_without_address_fails_before_sysctls(root, netns, monkeypatch):
    subprocess.check_call(["ip", "-n", netns, "addr", "flush", "dev", "rail1"])
    res = run_module(rail_sysctl, {"rails": RAILS, "routing": True}, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert "rail rail1 has no IPv4 address" in res["msg"]
    assert val(root, "all", "arp_ignore") == 0


# pyroute2 is imported only for routing: true. A fresh interpreter runs the module's main() the way AnsiballZ
# does (sysctl only, check mode) and reports whether pyroute2 ended up in sys.modules.
PROBE = r"""
import json, sys
sys.argv = ["rail_sysctl"]
from ansible.module_utils import basic
basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": dict(json.loads(sys.stdin.read()),
                                  _ansible_check_mode=True, _ansible_remote_tmp="/tmp")}).encode()
basic._ANSIBLE_PROFILE = "legacy"
from ansible_collections.gpufabric.node.plugins.modules import rail_sysctl
try:
    rail_sysctl.main()
except SystemExit:
    pass
sys.stderr.write("PYROUTE2_LOADED=%s\n" % ("pyroute2" in sys.modules))
"""

LAZY = [
    ("sysctl only", {"rails": RAILS}, False),
    ("routing requested", {"rails": RAILS, "routing": True}, True),
]


@pytest.mark.parametrize("case", LAZY, ids=[c[0] for c in LAZY])
def test_pyroute2_imported_only_for_routing(root, case):
    pytest.importorskip("pyroute2")
    _id, args, loaded = case
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps(args).encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    assert ("PYROUTE2_LOADED=%s" % loaded) in proc.stderr.decode(), proc.stderr.decode()


def test_routing_without_pyroute2_fails_cleanly(root, monkeypatch):
    # None in sys.modules makes "import pyroute2" raise ImportError, as on a node without the library.
    monkeypatch.setitem(sys.modules, "pyroute2", None)
    monkeypatch.setattr(rail_sysctl, "IPRoute", None)
    res = run_module(rail_sysctl, {"rails": RAILS, "routing": True}, check_mode=True, monkeypatch=monkeypatch)
    assert res.get("failed") is True
    assert "pyroute2" in res["msg"] and "Failed to import the required Python library" in res["msg"]
    assert val(root, "all", "arp_ignore") == 0
    assert sysctl_file(root) is None


def test_sysctl_only_without_pyroute2_works(root, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyroute2", None)
    monkeypatch.setattr(rail_sysctl, "IPRoute", None)
    res = run_module(rail_sysctl, {"rails": RAILS}, check_mode=True, monkeypatch=monkeypatch)
    assert not res.get("failed"), res
    assert res["changed"] is True


class RefusingSysroot(Sysroot):
    """The kernel refuses writes to the settings listed (EINVAL), as for an interface being torn down."""
    refuse = ()

    def write_attr(self, p, value):
        if any(p.endswith("/%s/%s" % (iface, key)) for iface, key in self.refuse):
            raise IOError(22, "Invalid argument")
        Sysroot.write_attr(self, p, value)


def test_refused_setting_goes_on_and_keeps_its_file_line(root, monkeypatch):
    # a first run with rp_filter 0 puts its values in the file
    assert not run_module(rail_sysctl, {"rails": RAILS, "rp_filter": 0}, monkeypatch=monkeypatch).get("failed")
    monkeypatch.setattr(RefusingSysroot, "refuse", (("rail1", "rp_filter"),))
    monkeypatch.setattr(rail_sysctl, "Sysroot", RefusingSysroot)
    res = run_module(rail_sysctl, {"rails": RAILS}, monkeypatch=monkeypatch)
    assert res["failed"] is True and res["changed"] is True
    assert res["msg"].startswith("rail sysctls failed on setting(s) net.ipv4.conf.rail1.rp_filter: "
                                 "net.ipv4.conf.rail1.rp_filter: cannot write 2 to")
    by = dict((r["object"], r) for r in res["results"])
    assert by["net.ipv4.conf.rail1.rp_filter"]["result"] == "failed"
    assert by["net.ipv4.conf.rail0.rp_filter"] == {"object": "net.ipv4.conf.rail0.rp_filter", "result": "changed",
                                                   "error": None,
                                                   "changes": [{"key": "value", "before": 0, "after": 2}]}
    assert by["net.ipv4.conf.rail1.arp_ignore"]["result"] == "unchanged"
    assert val(root, "rail0", "rp_filter") == 2 and val(root, "rail1", "rp_filter") == 0
    # the file says what the interfaces have: the refused setting keeps the line of the first run
    text = sysctl_file(root)
    assert "net.ipv4.conf.rail0.rp_filter = 2" in text and "net.ipv4.conf.rail1.rp_filter = 0" in text
    st = res["concerns"]["sysctl"]
    assert st["status"] == "error"
    assert [i["result"] for i in st["items"] if i["object"] == "rail1"] == ["failed"]
    assert res["concerns"]["routing"]["status"] == "not_applicable"


ROUTING_OFF = [
    # id, what an earlier run left, status
    ("nothing left", {}, "not_applicable"),
    ("routing.json left", {"etc/gpufabric/routing.json": '{"version": 1, "rails": []}\n'}, "drift"),
    ("state.json points at it", {"etc/gpufabric/state.json": json.dumps(
        {"version": 1, "routing": {"state_file": "/etc/gpufabric/routing.json"}})}, "drift"),
]


@pytest.mark.parametrize("left,status", [c[1:] for c in ROUTING_OFF], ids=[c[0] for c in ROUTING_OFF])
def test_routing_off_status(root, monkeypatch, left, status):
    for rel, text in left.items():
        _w(os.path.join(root, rel), text)
    for check in (True, False):
        res = run_module(rail_sysctl, {"rails": RAILS}, check_mode=check, monkeypatch=monkeypatch)
        assert not res.get("failed"), res
        st = res["concerns"]["routing"]
        assert st["status"] == status and st["reason"]
        assert [i["object"] for i in st["items"]] == [
            "/" + rel for rel in left]
    assert res["concerns"]["sysctl"]["status"] == "ok"


def test_routing_failure_after_sysctls_says_what_changed(root, monkeypatch):
    class Broken(object):
        """IPRoute whose dumps work until the routes are read (a netlink error mid-run)."""

        def __init__(self):
            self.closed = False

        def get_links(self):
            return [Msg({"IFLA_IFNAME": n}, index=i + 2) for i, n in enumerate(RAILS)]

        def get_addr(self, index, family):
            return [Msg({"IFA_ADDRESS": "10.100.%d.1" % (index - 2)}, flags=0, prefixlen=16)]

        def get_routes(self, family):
            raise OSError(16, "Device or resource busy")

        def close(self):
            self.closed = True

    monkeypatch.setattr(rail_sysctl, "IPRoute", Broken)
    res = run_module(rail_sysctl, {"rails": RAILS, "routing": True}, monkeypatch=monkeypatch)
    assert res["failed"] is True and res["changed"] is True
    assert "per-rail routing failed: OSError" in res["msg"]
    assert res["concerns"]["sysctl"]["status"] == "ok" and res["concerns"]["sysctl"].get("corrected")
    assert res["concerns"]["routing"]["status"] == "error"
    assert val(root, "all", "arp_ignore") == 1


class Msg(dict):
    """Just enough of a pyroute2 message: attributes by name, fields by key."""

    def __init__(self, attrs, **fields):
        dict.__init__(self, fields)
        self.attrs = attrs

    def get_attr(self, name):
        return self.attrs.get(name)
