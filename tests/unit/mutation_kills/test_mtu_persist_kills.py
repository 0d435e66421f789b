# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mtu_persist: what its own tests left unseen (make mutation's survivors): interfaces(5) read line by line (comments,
continuations, wildcards, loops and the depth limit), the owner record of each way a rail is kept, every refusal's
message, netplan's types and file as written, the NetworkManager lookup, and the status, manage and check documents
whole."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from gpufabric_sim import topology as sim_topology
from gpufabric_sim import tree as sim_tree
from mtu_kernel import Kernel

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils import results
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

UUID = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
IFACES = "/etc/network/interfaces"
NET = "/etc/network/"
IP_SHOW = ["ip", "-d", "-j", "link", "show"]
DEV_SHOW = ("nmcli", "-t", "-g", "GENERAL.CON-UUID", "device", "show", "r0")
CON_SHOW = ("nmcli", "-t", "-f", "UUID,FILENAME", "connection", "show")
BELOW = ("mtu is 1500: below 4200, the smallest rail MTU the collection accepts; RoCE needs the netdev MTU to hold "
         "a 4096-byte path MTU plus 96 bytes of RoCE v2 headers (9000 is usual)")


def _write(root, path, text):
    real = os.path.join(str(root), path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(real)):
        os.makedirs(os.path.dirname(real))
    with open(real, "w") as f:
        f.write(text)


def _tree(root, files):
    for path, text in files.items():
        _write(root, path, text)
    return Sysroot(str(root))


class Run(object):
    """A command runner answering exact argv tuples; anything else is not installed."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.answers.get(tuple(argv), (127, "", "%s: not found" % argv[0]))


# ------------------------------------------------------------------------------------------------ interfaces(5)

def _chain(last):
    """interfaces sources d1, d1 sources d2, ... up to ``last``, which has the rail's stanza and sources one more."""
    files = {IFACES: "source d1\n"}
    for n in range(1, last):
        files[NET + "d%d" % n] = "source d%d\n" % (n + 1)
    files[NET + "d%d" % last] = "iface r%d inet manual\nsource d%d\n" % (last, last + 1)
    files[NET + "d%d" % (last + 1)] = "iface r%d inet manual\n" % (last + 1)
    return files


def _chain_lines(last):
    """The source lines of _chain(last) down to the file with the rail's stanza, each listed before what it brings."""
    return [(IFACES, ["source", "d1"])] + [(NET + "d%d" % n, ["source", "d%d" % (n + 1)]) for n in range(1, last)]


@pytest.mark.parametrize("files, expected", [
    ({}, []),
    ({IFACES: ""}, []),
    # continuations join however many lines, a backslash right after a word included
    ({IFACES: "iface r0 \\\ninet \\\nmanual\nmtu\\\n9000\n"},
     [(IFACES, ["iface", "r0", "inet", "manual"]), (IFACES, ["mtu", "9000"])]),
    # a comment of one word or more is skipped, the next line is not
    ({IFACES: "#iface r0 inet manual\n# x\n#\nauto\n"}, [(IFACES, ["auto"])]),
    # a file sourcing itself (through another one) is read once
    ({IFACES: "source loop.cfg\n", NET + "loop.cfg": "source loop.cfg\nsource /etc/network/interfaces\nauto r0\n"},
     [(IFACES, ["source", "loop.cfg"]), (NET + "loop.cfg", ["source", "loop.cfg"]),
      (NET + "loop.cfg", ["source", "/etc/network/interfaces"]), (NET + "loop.cfg", ["auto", "r0"])]),
    # glob(3): * matches no dotfile, a pattern starting with a dot does; only names the pattern matches
    ({IFACES: "source more/*.cfg\nsource more/.h*\n", NET + "more/a.cfg": "auto a\n", NET + "more/.h.cfg": "auto h\n",
      NET + "more/c.txt": "auto c\n"},
     [(IFACES, ["source", "more/*.cfg"]), (NET + "more/a.cfg", ["auto", "a"]), (IFACES, ["source", "more/.h*"]),
      (NET + "more/.h.cfg", ["auto", "h"])]),
    # an absolute source; source-directory in name order
    ({IFACES: "source-directory /etc/net.d\nsource /etc/x.cfg\n", "/etc/net.d/b": "auto b\n",
      "/etc/net.d/a": "auto a\n", "/etc/x.cfg": "auto x\n"},
     [(IFACES, ["source-directory", "/etc/net.d"]), ("/etc/net.d/a", ["auto", "a"]), ("/etc/net.d/b", ["auto", "b"]),
      (IFACES, ["source", "/etc/x.cfg"]), ("/etc/x.cfg", ["auto", "x"])]),
    # sourced files nest 8 deep below the interfaces file, and no deeper
    (_chain(8), _chain_lines(8) + [(NET + "d8", ["iface", "r8", "inet", "manual"]), (NET + "d8", ["source", "d9"])]),
    (_chain(4), _chain_lines(4) + [(NET + "d4", ["iface", "r4", "inet", "manual"]), (NET + "d4", ["source", "d5"]),
                                   (NET + "d5", ["iface", "r5", "inet", "manual"])]),
])
def test_interfaces_lines(tmp_path, files, expected):
    assert mtu_persist._interfaces_lines(_tree(tmp_path, files), IFACES) == expected


def _stanza(tmp_path, files):
    files = dict(files, **{"/sbin/ifup": "#!/bin/sh\n"})
    return mtu_persist.ifupdown_stanza(_tree(tmp_path, files), "r0")


@pytest.mark.parametrize("files, expected", [
    # an allow- line ends the stanza: the mtu after it is no option of r0's
    ({IFACES: "iface r0 inet manual\nallow-hotplug x\n  mtu 1500\n"}, {"file": IFACES, "mtu": None}),
    # a bare iface (no name) is no stanza of r0's; an iface without method still is
    ({IFACES: "iface\n  mtu 1400\niface r0 inet manual\n"}, {"file": IFACES, "mtu": None}),
    ({IFACES: "iface r0\n  mtu 1500\n"}, {"file": IFACES, "mtu": "1500"}),
    # an option before any stanza belongs to none
    ({IFACES: "mtu 1500\niface r0 inet manual\n"}, {"file": IFACES, "mtu": None}),
    # the rail's second stanza (inet6) in another file sets the mtu: that file is named
    ({IFACES: "iface r0 inet manual\nsource-directory d\n", NET + "d/v6": "iface r0 inet6 manual\n  mtu 9000\n"},
     {"file": NET + "d/v6", "mtu": "9000"}),
    # ifupdown's config.c: a source line ends the stanza, also when it sources nothing; each sourced file starts
    # outside any stanza and so does the rest of the file that sourced it: these mtu lines are misplaced options
    ({IFACES: "iface r0 inet manual\nsource-directory d\n  mtu 1500\n"}, {"file": IFACES, "mtu": None}),
    ({IFACES: "iface r0 inet manual\nsource-directory d\n", NET + "d/x": "  mtu 1500\n"},
     {"file": IFACES, "mtu": None}),
    ({IFACES: "source d/x\n  mtu 1500\n", NET + "d/x": "iface r0 inet manual\n"}, {"file": NET + "d/x", "mtu": None}),
    # so do no-auto-down and no-scripts lines
    ({IFACES: "iface r0 inet manual\nno-auto-down r0\n  mtu 1500\n"}, {"file": IFACES, "mtu": None}),
    ({IFACES: "iface r0 inet manual\nno-scripts r0\n  mtu 1500\n"}, {"file": IFACES, "mtu": None}),
])
def test_ifupdown_stanza(tmp_path, files, expected):
    assert _stanza(tmp_path, files) == expected


# ------------------------------------------------------------------------------------------------ netplan

def test_netplan_types_reads_every_yaml_but_the_collections_own(tmp_path):
    pytest.importorskip("yaml")
    sr = _tree(tmp_path, {
        "/etc/netplan/00-notes.txt": "network:\n  bonds:\n    txt: {}\n",
        "/etc/netplan/01-old.yml": "network:\n  bonds:\n    yml: {}\n",
        "/etc/netplan/10-bad.yaml": "network: [\n",
        "/etc/netplan/20-list.yaml": "- a\n",
        "/etc/netplan/30-scalar.yaml": "network: [1]\n",
        "/etc/netplan/40-empty.yaml": "",
        "/etc/netplan/50-rails.yaml": "network:\n  vlans:\n    v0: {}\n  ethernets:\n    e0: {}\n    7: {}\n",
        mtu_persist.NETPLAN_FILE: '{"network": {"bridges": {"own": {"mtu": 9000}}}}\n',
        "/lib/netplan/00-vendor.yaml": "network:\n  bonds:\n    b0: {}\n",
    })
    assert mtu_persist._netplan_types(sr) == {"b0": "bonds", "v0": "vlans", "e0": "ethernets", "7": "ethernets"}


@pytest.mark.parametrize("types, kind, expected", [
    ({}, "vlan", "vlans"),
    ({}, "bridge", "bridges"),
    ({}, None, "ethernets"),
    ({}, "", "ethernets"),
    ({"a": "bonds"}, "vlan", "bonds"),
])
def test_netplan_type(types, kind, expected):
    assert mtu_persist.netplan_type(types, "r0", {"netplan_id": "a", "kind": kind}) == expected


def test_netplan_type_refusal():
    with pytest.raises(ValueError) as e:
        mtu_persist.netplan_type({}, "r0", {"netplan_id": "a", "kind": "macvlan"})
    assert str(e.value) == ("rail r0: netplan id 'a' is a macvlan link and the node's netplan files cannot be read (no "
                            "PyYAML) to find its definition type; the collection writes ethernets, bonds, vlans or "
                            "bridges only")


def test_render_netplan_text():
    assert mtu_persist.render_netplan([("vlans", "b"), ("ethernets", "a"), ("vlans", "a")], "9000") == (
        mtu_persist.HEADER + '{\n  "network": {\n    "ethernets": {\n      "a": {\n        "mtu": 9000\n      }\n'
        '    },\n    "version": 2,\n    "vlans": {\n      "a": {\n        "mtu": 9000\n      },\n      "b": {\n'
        '        "mtu": 9000\n      }\n    }\n  }\n}\n')


@pytest.mark.parametrize("entries, message", [
    ([("tunnels", "a")], "netplan definition 'a' of type 'tunnels' cannot be written"),
    ([("ethernets", "a\tb")], "netplan definition 'a\\tb' of type 'ethernets' cannot be written"),
])
def test_render_netplan_refusals(entries, message):
    with pytest.raises(ValueError) as e:
        mtu_persist.render_netplan(entries, 9000)
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ NetworkManager

KEYFILE = "/run/NetworkManager/system-connections/netplan-a:b.nmconnection"


@pytest.mark.parametrize("answers, expected", [
    ({DEV_SHOW: (0, UUID + "\n", ""),
      CON_SHOW: (0, "1111:x\n%s:%s\n" % (UUID, KEYFILE.replace(":", "\\:")), "")}, (UUID, KEYFILE)),
    ({DEV_SHOW: (0, UUID + "\n", ""), CON_SHOW: (0, "other:x\n", "")}, (UUID, None)),
    # a failed command's output is not believed
    ({DEV_SHOW: (1, UUID + "\n", "")}, (None, None)),
    ({DEV_SHOW: (0, UUID + "\n", ""), CON_SHOW: (1, "%s:/x.nmconnection\n" % UUID, "")}, (UUID, None)),
    ({DEV_SHOW: (0, "--\n", "")}, (None, None)),
])
def test_nm(answers, expected):
    assert mtu_persist._nm(Run(answers), "r0") == expected


# ------------------------------------------------------------------------------------------------ owner

def _owner(**changed):
    out = {"rail": "r0", "owner": "applier", "network_file": None, "netplan_id": None, "nm_uuid": None,
           "interfaces_file": None, "interfaces_mtu": None, "kind": "vlan", "netplan_type": None}
    out.update(changed)
    return out


def _links_file(admin, network_file):
    return {mtu_persist.NETIF_LINKS + "/7": "# private\nADMIN_STATE=%s\nNETWORK_FILE=%s\n" % (admin, network_file)}


NM_NETPLAN = {DEV_SHOW: (0, UUID + "\n", ""), CON_SHOW: (0, "%s:/run/x/netplan-r0.nmconnection\n" % UUID, "")}


@pytest.mark.parametrize("files, answers, expected", [
    (_links_file("configured", "/etc/systemd/network/20-r.network"), {},
     _owner(owner="networkd", network_file="/etc/systemd/network/20-r.network")),
    # netplan's name outside /run/systemd/network is an operator's own .network file
    (_links_file("configured", "/etc/systemd/network/10-netplan-r0.network"), {},
     _owner(owner="networkd", network_file="/etc/systemd/network/10-netplan-r0.network")),
    (_links_file("configured", "/run/systemd/network/10-netplan-r0.network"), {},
     _owner(owner="netplan", network_file="/run/systemd/network/10-netplan-r0.network", netplan_id="r0",
            netplan_type="vlans")),
    # networkd leaves an unmanaged link alone, its NETWORK_FILE notwithstanding
    (_links_file("unmanaged", "/etc/systemd/network/20-r.network"), {}, _owner()),
    ({}, NM_NETPLAN, _owner(owner="netplan", netplan_id="r0", nm_uuid=UUID, netplan_type="vlans")),
    ({}, {DEV_SHOW: (0, UUID + "\n", ""), CON_SHOW: (0, "", "")}, _owner(owner="networkmanager", nm_uuid=UUID)),
    ({IFACES: "iface r0 inet manual\n  mtu 1500\n", "/usr/sbin/ifup": ""}, {},
     _owner(owner="ifupdown", interfaces_file=IFACES, interfaces_mtu="1500")),
])
def test_owner_whole(tmp_path, files, answers, expected):
    assert mtu_persist.owner(_tree(tmp_path, files), Run(answers), "r0", {"ifindex": 7, "kind": "vlan"}) == expected


NETPLAN_MACVLAN = ("rail r0: netplan id 'r0' is a macvlan link and the node's netplan files cannot be read (no "
                   "PyYAML) to find its definition type; the collection writes ethernets, bonds, vlans or bridges only")


@pytest.mark.parametrize("files, answers, message", [
    (_links_file("configured", "/etc/systemd/network/rails.conf"), {},
     "rail r0: networkd names the network file '/etc/systemd/network/rails.conf', which the collection cannot name "
     "a drop-in after"),
    (_links_file("configured", "/run/systemd/network/10-netplan-r0.network"), {}, NETPLAN_MACVLAN),
    ({}, NM_NETPLAN, NETPLAN_MACVLAN),
])
def test_owner_refusals(tmp_path, files, answers, message):
    sr = _tree(tmp_path, files)
    with pytest.raises(ValueError) as e:
        mtu_persist.owner(sr, Run(answers), "r0", {"ifindex": 7, "kind": "macvlan"})
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ status

def _drift(obj, current=1500):
    return {"concern": "mtu", "object": obj, "key": "mtu", "current": current, "desired": 9000}


def test_status_error_names_the_failed_rail_and_annotates_the_items():
    every = [results.result("r0", results.FAILED, "boom"), results.result("r1", results.UNCHANGED)]
    assert mtu_persist.status([_drift("r0")], every, [], False) == {
        "status": "error", "reason": "rail MTU failed on rail(s) r0: r0: boom (unchanged r1)",
        "items": [dict(_drift("r0"), result="failed", error="boom")]}


def _port(obj, note, key="active_mtu"):
    return {"concern": "mtu", "object": obj, "key": key, "current": 1024, "desired": 4096, "note": note}


@pytest.mark.parametrize("port_items, reason", [
    ([_port("m0/1", "p0"), _port("r0", "held", "ifupdown mtu"), _port("m1/1", "p1")],
     "RDMA port active MTU below 4096: p0; p1; held"),
    ([_port("r0", "held", "ifupdown mtu")], "held"),
    ([_port("m0/1", "p0")], "RDMA port active MTU below 4096: p0"),
])
def test_status_of_port_items(port_items, reason):
    clean = [dict((k, v) for k, v in i.items() if k != "note") for i in port_items]
    for check_mode in (False, True):
        assert mtu_persist.status([_drift("r1")], [results.result("r1", results.CHANGED)], port_items,
                                  check_mode) == {"status": "drift", "reason": reason, "items": [_drift("r1")] + clean}


# ------------------------------------------------------------------------------------------------ manage, check

def _state_item(current="missing"):
    return {"concern": "mtu", "object": state.STATE_FILE, "key": "mtu", "current": current, "desired": "recorded"}


def test_manage_without_persisting_records_nothing_and_reads_links_once(tmp_path):
    k = Kernel({"r0": {}})
    sr = Sysroot(str(tmp_path))
    res = mtu_persist.manage(sr, k, ["r0"], 9000, True, persist_mtu=False)
    assert k.calls == [IP_SHOW]
    assert res == {"changed": True, "drift": [_drift("r0")],
                   "results": [results.result("r0", results.CHANGED, changes=[results.change("mtu", 1500, 9000)])],
                   "owners": [], "files": [], "ports": [], "port_items": [], "mtu": {"r0": 9000},
                   "before": {"r0": 1500}, "applier_rails": [],
                   "status": {"status": "drift", "reason": "1 item(s) differ from the desired state: r0 mtu",
                              "items": [_drift("r0")]}}
    assert os.listdir(str(tmp_path)) == [] and k.links["r0"]["mtu"] == 1500


def test_manage_is_changed_by_the_live_set_alone_or_the_record_alone(tmp_path):
    k = Kernel({"r0": {"mtu": 9000}})
    sr = Sysroot(str(tmp_path))
    res = mtu_persist.manage(sr, k, ["r0"], 9000, False)
    assert res["changed"] and res["drift"] == [_state_item()] and res["applier_rails"] == ["r0"]
    assert res["files"] == [{"path": state.STATE_FILE, "before": "", "changed": True,
                             "after": '{\n  "mtu": {\n    "mtu": 9000,\n    "rails": [\n      "r0"\n    ]\n  },\n'
                                      '  "version": 1\n}\n'}]
    k.links["r0"]["mtu"] = 1500
    res = mtu_persist.manage(sr, k, ["r0"], 9000, False)
    assert res["changed"] and res["drift"] == [_drift("r0")] and res["mtu"] == {"r0": 9000}
    assert res["before"] == {"r0": 1500} and [f["changed"] for f in res["files"]] == [False]
    assert not mtu_persist.manage(sr, k, ["r0"], 9000, False)["changed"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mtu_kills") / "root")
    manifest = sim_tree.build_tree(root, sim_topology.load("hgx-h200"))
    return root, manifest["rails"][0]


def test_check_mode_reads_the_ports_at_the_mtu_the_rail_has(template, tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(template[0], root, symlinks=True)
    rail = template[1]
    k = Kernel({rail["netdev"]: {}}, ports={(rail["ibdev"], 1): (rail["netdev"], 4096)})
    res = mtu_persist.manage(Sysroot(root), k, [rail["netdev"]], 9000, True, persist_mtu=False)
    assert [(p["active_mtu"], p["expected"]) for p in res["ports"]] == [(1024, 1024)]
    assert res["port_items"] == [] and res["status"]["status"] == "drift"


def test_check_without_persist_or_mtu_runs_nothing_and_records_nothing(tmp_path):
    k = Kernel({"r0": {}})
    sr = Sysroot(str(tmp_path))
    doc = mtu_persist.check(sr, k, {"rails": ["r0"], "persist": False})
    assert doc == {"status": "drift", "reason": "1 item(s) differ from the desired state: r0 mtu",
                   "items": [_drift("r0")]}
    assert k.links["r0"]["mtu"] == 1500 and os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("desired", [{"rails": ["r0"]}, {"rails": ["r0"], "persist": True, "mtu": 9000}])
def test_check_persists_by_default(tmp_path, desired):
    k = Kernel({"r0": {}})
    sr = Sysroot(str(tmp_path))
    assert mtu_persist.check(sr, k, desired) == {
        "status": "drift", "reason": "2 item(s) differ from the desired state: r0 mtu, %s mtu" % state.STATE_FILE,
        "items": [_drift("r0"), _state_item()]}
    assert k.links["r0"]["mtu"] == 1500 and os.listdir(str(tmp_path)) == []


def test_check_error_says_why():
    k = Kernel({"r0": {}})
    assert mtu_persist.check(Sysroot("/nonexistent-root"), k, {"rails": ["r0"], "mtu": 1500}) == {
        "status": "error", "reason": BELOW, "items": []}
