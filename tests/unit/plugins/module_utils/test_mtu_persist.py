# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mtu concern on a simulated HGX tree: who owns each rail (networkd, netplan, NetworkManager, the applier), the
record there, the RDMA ports' active MTU, the status document, the one-call check and the boot-time applier."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest
import yaml

from gpufabric_sim import runtime as sim_runtime
from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from mtu_kernel import Kernel

from ansible_collections.gpufabric.node.plugins.module_utils.boot import applier
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

UUID = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mtu") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    return root, manifest


@pytest.fixture
def node(template, tmp_path):
    import shutil
    root = str(tmp_path / "root")
    shutil.copytree(template[0], root, symlinks=True)
    rails = [r["netdev"] for r in template[1]["rails"]][:2]
    ports = dict(((r["ibdev"], 1), (r["netdev"], 4096)) for r in template[1]["rails"][:2])
    return {"root": root, "sr": Sysroot(root), "rails": rails, "ports": ports}


def _write(root, path, text):
    real = os.path.join(root, path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(real)):
        os.makedirs(os.path.dirname(real))
    with open(real, "w") as f:
        f.write(text)


def _kernel(node, **kw):
    return Kernel(dict((r, {}) for r in node["rails"]), ports=node["ports"], **kw)


def _networkd(node, k, rail, network_file):
    _write(node["root"], "%s/%d" % (mtu_persist.NETIF_LINKS, k.links[rail]["ifindex"]),
           "# This is private data. Do not parse.\nADMIN_STATE=configured\nNETWORK_FILE=%s\n" % network_file)


def test_no_owner_records_for_the_applier_and_a_second_run_changes_nothing(node):
    k = _kernel(node)
    res = mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert [o["owner"] for o in res["owners"]] == ["applier", "applier"]
    assert res["changed"] and res["status"]["status"] == "ok" and res["status"].get("corrected")
    assert state.load(node["sr"])["mtu"] == {"rails": sorted(node["rails"]), "mtu": 9000}
    assert all(k.links[r]["mtu"] == 9000 for r in node["rails"])
    assert [p["active_mtu"] for p in res["ports"]] == [4096, 4096] and not res["port_items"]
    again = mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert not again["changed"] and again["drift"] == []
    assert again["status"] == {"status": "ok", "reason": None, "items": []}


def test_check_mode_writes_nothing_and_reports_drift(node):
    k = _kernel(node)
    before = sim_runtime.tree_hash(node["root"])
    res = mtu_persist.manage(node["sr"], k, node["rails"], 9000, True)
    assert sim_runtime.tree_hash(node["root"]) == before
    assert res["status"]["status"] == "drift" and res["changed"]
    assert not [c for c in k.calls if c[:3] == ["ip", "link", "set"]]
    keys = sorted(set((i["key"]) for i in res["drift"]))
    assert keys == ["mtu"]
    assert [i for i in res["drift"] if i["object"] == state.STATE_FILE]


def _reloads(k):
    return [c for c in k.calls if c[0] == "networkctl" or c[:3] == ["nmcli", "device", "reapply"]]


def test_networkd_owner_gets_a_dropin(node):
    k = _kernel(node, networkctl_rc=0)
    rail = node["rails"][0]
    _networkd(node, k, rail, "/etc/systemd/network/20-rails.network")
    assert mtu_persist.manage(node["sr"], k, [rail], 9000, True)["changed"] and _reloads(k) == []
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert res["owners"][0]["owner"] == "networkd"
    path = "/etc/systemd/network/20-rails.network.d/gpufabric-mtu.conf"
    text = node["sr"].read_raw(path)
    assert text.endswith("[Link]\nMTUBytes=9000\n") and text.startswith("# Managed by the gpufabric.node")
    st = os.stat(node["sr"].path(path))
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == 0
    assert "mtu" not in state.load(node["sr"])
    # issue 21 item 21: networkd re-reads its files once the drop-in changed, and only then
    assert _reloads(k) == [["networkctl", "reload"]]
    assert ["systemd-networkd (networkctl reload)", "changed"] in [[r["object"], r["result"]] for r in res["results"]]
    assert not mtu_persist.manage(node["sr"], k, [rail], 9000, False)["changed"]
    assert _reloads(k) == [["networkctl", "reload"]]
    mtu_persist.manage(node["sr"], k, [rail], 4200, False)
    assert _reloads(k) == [["networkctl", "reload"]] * 2


def test_a_failed_networkd_reload_is_an_error_naming_the_way_out(node):
    k = _kernel(node, networkctl_rc=1)
    rail = node["rails"][0]
    _networkd(node, k, rail, "/etc/systemd/network/20-rails.network")
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert res["status"]["status"] == "error" and "networkctl reload failed" in res["status"]["reason"]
    assert node["sr"].exists("/etc/systemd/network/20-rails.network.d/gpufabric-mtu.conf")


def test_an_unmanaged_networkd_link_is_not_networkds(node):
    k = _kernel(node)
    rail = node["rails"][0]
    _write(node["root"], "%s/%d" % (mtu_persist.NETIF_LINKS, k.links[rail]["ifindex"]), "ADMIN_STATE=unmanaged\n")
    assert mtu_persist.manage(node["sr"], k, [rail], 9000, True)["owners"][0]["owner"] == "applier"


@pytest.mark.parametrize("defined_as, kind", [("ethernets", "ethernets"), ("bonds", "bonds")])
def test_netplan_owner_through_networkd_gets_the_netplan_file(node, defined_as, kind):
    k = _kernel(node)
    rail = node["rails"][0]
    _write(node["root"], "/etc/netplan/50-rails.yaml",
           "network:\n  version: 2\n  %s:\n    rail-a:\n      match: {name: %s}\n" % (defined_as, rail))
    _networkd(node, k, rail, "/run/systemd/network/10-netplan-rail-a.network")
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert res["owners"][0]["owner"] == "netplan" and res["owners"][0]["netplan_id"] == "rail-a"
    text = node["sr"].read_raw(mtu_persist.NETPLAN_FILE)
    doc = yaml.safe_load(text)
    assert doc == {"network": {"version": 2, kind: {"rail-a": {"mtu": 9000}}}}
    assert stat.S_IMODE(os.stat(node["sr"].path(mtu_persist.NETPLAN_FILE)).st_mode) == 0o600


def test_a_netplan_id_with_yaml_syntax_is_quoted(node):
    text = mtu_persist.render_netplan([("ethernets", 'a: "b" #c')], 9000)
    assert yaml.safe_load(text)["network"]["ethernets"] == {'a: "b" #c': {"mtu": 9000}}
    with pytest.raises(ValueError):
        mtu_persist.render_netplan([("ethernets", "a\nb")], 9000)


def test_networkmanager_owner_is_modified_with_nmcli(node):
    rail = node["rails"][0]
    nm = {"devices": {rail: UUID}, "files": {UUID: "/etc/NetworkManager/system-connections/rail.nmconnection"},
          "mtu": {UUID: "auto"}}
    k = _kernel(node, nm=nm)
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, True)
    assert res["owners"][0]["owner"] == "networkmanager" and nm["mtu"][UUID] == "auto"
    assert [i for i in res["drift"] if i["key"] == "NetworkManager 802-3-ethernet.mtu"]
    assert _reloads(k) == [] and "applied" not in nm
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert nm["mtu"][UUID] == "9000" and res["status"]["status"] == "ok"
    # issue 21 item 21: the device's applied connection takes the profile's MTU (no re-activation)
    assert nm["applied"] == {rail: "9000"} and _reloads(k) == [["nmcli", "device", "reapply", rail]]
    assert not mtu_persist.manage(node["sr"], k, [rail], 9000, False)["changed"]
    assert len(_reloads(k)) == 1


def test_netplan_owner_through_networkmanager(node):
    rail = node["rails"][0]
    nm = {"devices": {rail: UUID}, "files": {UUID: "/run/NetworkManager/system-connections/netplan-r0.nmconnection"},
          "mtu": {}}
    k = _kernel(node, nm=nm)
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert res["owners"][0]["owner"] == "netplan" and res["owners"][0]["netplan_id"] == "r0"
    assert "r0" in node["sr"].read_raw(mtu_persist.NETPLAN_FILE) and nm["mtu"] == {}


IFACES = "auto lo\niface lo inet loopback\n\nsource-directory interfaces.d\nsource more/*.cfg\n"


@pytest.mark.parametrize("files, ifup, expected", [
    # the rail's stanza in a source-directory file, no mtu option (ifup leaves the MTU alone)
    ({"interfaces.d/rails": "iface r0 inet static\n  address 10.0.0.1/24\n"}, True,
     {"file": "/etc/network/interfaces.d/rails", "mtu": None}),
    # an mtu option split over a continuation line
    ({"interfaces.d/rails": "iface r0 inet manual\n  mtu \\\n 9000\n"}, True,
     {"file": "/etc/network/interfaces.d/rails", "mtu": "9000"}),
    ({"interfaces.d/rails": "auto r0\niface r0 inet manual\n    mtu 1500\n"}, True,
     {"file": "/etc/network/interfaces.d/rails", "mtu": "1500"}),
    # the next stanza ends the rail's options: the mtu below belongs to x
    ({"interfaces.d/rails": "iface r0 inet manual\nallow-hotplug x\niface x inet manual\n  mtu 1500\n"}, True,
     {"file": "/etc/network/interfaces.d/rails", "mtu": None}),
    # source with a wildcard, relative to the file's directory; * matches no dotfile (glob(3))
    ({"interfaces.d/.rails": "iface r0 inet manual\n  mtu 1500\n", "more/r.cfg": "iface r0 inet manual\n"}, True,
     {"file": "/etc/network/more/r.cfg", "mtu": None}),
    # source-directory reads no name with a dot; a commented-out stanza; ifupdown not installed
    ({"interfaces.d/rails.cfg": "iface r0 inet manual\n  mtu 1500\n"}, True, None),
    ({"interfaces.d/rails": "#iface r0 inet manual\n"}, True, None),
    ({"interfaces.d/rails": "iface r0 inet manual\n  mtu 1500\n"}, False, None),
    # a file sourcing itself ends
    ({"more/loop.cfg": "source loop.cfg\niface r0 inet manual\n"}, True,
     {"file": "/etc/network/more/loop.cfg", "mtu": None}),
])
def test_ifupdown_stanza(tmp_path, files, ifup, expected):
    """Issue 21 item 21: ifupdown's own file says which rails it brings up, and with which mtu."""
    root = str(tmp_path)
    _write(root, "/etc/network/interfaces", IFACES)
    for path, text in files.items():
        _write(root, "/etc/network/" + path, text)
    if ifup:
        _write(root, "/sbin/ifup", "#!/bin/sh\n")
    assert mtu_persist.ifupdown_stanza(Sysroot(root), "r0") == expected


@pytest.mark.parametrize("stanza, status", [("iface {rail} inet manual\n", "ok"),
                                            ("iface {rail} inet manual\n  mtu 1500\n", "drift")])
def test_ifupdown_owner(node, stanza, status):
    """Issue 21 item 21: an ifupdown rail is recorded for the boot-time applier; a stanza setting another MTU at
    ifup is drift the module does not change (it does not edit the admin's file), naming the line to write."""
    rail = node["rails"][0]
    _write(node["root"], "/etc/network/interfaces", IFACES)
    _write(node["root"], "/etc/network/interfaces.d/rails", stanza.replace("{rail}", rail))
    _write(node["root"], "/sbin/ifup", "#!/bin/sh\n")
    k = _kernel(node)
    mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    res = mtu_persist.manage(node["sr"], k, [rail], 9000, False)
    assert res["owners"][0]["owner"] == "ifupdown"
    assert res["owners"][0]["interfaces_file"] == "/etc/network/interfaces.d/rails"
    assert state.load(node["sr"])["mtu"] == {"rails": [rail], "mtu": 9000}
    assert res["status"]["status"] == status and not res["changed"], res["status"]
    if status == "drift":
        assert "write 'mtu 9000'" in res["status"]["reason"] and "interfaces.d/rails" in res["status"]["reason"]
        assert [i["key"] for i in res["status"]["items"]] == ["ifupdown mtu"]
        assert node["sr"].read_raw("/etc/network/interfaces.d/rails").endswith("mtu 1500\n")


def test_a_port_held_below_4096_is_drift_even_after_a_real_run(node):
    k = _kernel(node)
    k.ports[list(k.ports)[0]] = (node["rails"][0], 2048)
    res = mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert res["status"]["status"] == "drift" and "max_mtu is 2048" in res["status"]["reason"]
    assert [i["key"] for i in res["status"]["items"] if i["key"] == "active_mtu"] == ["active_mtu"]


def test_a_rail_that_refuses_is_an_error_naming_it(node):
    k = _kernel(node, fail_set=[node["rails"][1]])
    res = mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert res["status"]["status"] == "error" and node["rails"][1] in res["status"]["reason"]


def test_above_max_mtu_touches_nothing(node):
    k = Kernel(dict((r, {"max_mtu": 4500}) for r in node["rails"]), ports=node["ports"])
    with pytest.raises(ValueError, match="max_mtu 4500"):
        mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert not [c for c in k.calls if c[:3] == ["ip", "link", "set"]]
    assert not os.path.exists(node["sr"].path(state.STATE_FILE))


def test_check_is_read_only_and_names_the_drift(node):
    k = _kernel(node)
    before = sim_runtime.tree_hash(node["root"])
    doc = mtu_persist.check(node["sr"], k, {"rails": node["rails"], "mtu": 9000})
    assert doc["status"] == "drift" and sim_runtime.tree_hash(node["root"]) == before
    assert mtu_persist.check(node["sr"], k, {"rails": node["rails"], "mtu": 1500})["status"] == "error"
    mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    assert mtu_persist.check(node["sr"], k, {"rails": node["rails"], "mtu": 9000})["status"] == "ok"


def test_the_applier_sets_the_recorded_mtu_at_boot(node):
    k = _kernel(node)
    mtu_persist.manage(node["sr"], k, node["rails"], 9000, False)
    for r in node["rails"]:
        k.links[r]["mtu"] = 1500          # the reboot: the driver creates the netdev at its default
    rc, summary = applier.run_applier(node["sr"], k, wait_timeout=0)
    assert rc == 0, summary["errors"]
    assert all(k.links[r]["mtu"] == 9000 for r in node["rails"])
    assert summary["concerns"]["mtu"]["changed"]
    assert sum(1 for line in summary["changes"] if line.startswith("mtu: ")) == 2
    rc, summary = applier.run_applier(node["sr"], k, wait_timeout=0)
    assert rc == 0 and not [line for line in summary["changes"] if line.startswith("mtu")]


def test_state_section_is_validated():
    assert state.validate_section("mtu", {"rails": ["b", "a"], "mtu": "9000"}) == {"rails": ["a", "b"], "mtu": 9000}
    for bad in ({"rails": ["a"], "mtu": 1500}, {"rails": [], "mtu": 9000}, {"rails": ["a"], "mtu": 9000, "x": 1}):
        with pytest.raises(ValueError):
            state.validate_section("mtu", bad)
    json.dumps(state.validate_section("mtu", {"rails": ["a"], "mtu": 9000}))
