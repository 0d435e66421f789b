# -*- coding: utf-8 -*-
"""The mtu concern's netplan file read by netplan, and what netplan makes of it read by networkd's and
NetworkManager's own parsers.

mtu_persist.record writes /etc/netplan/90-gpufabric-mtu.yaml into a node root that holds the operator's netplan
definitions (rails matched by MAC or name, dual-port, a bond, ids with '@' and ':', some rendered by
NetworkManager). ``netplan generate --root-dir`` must accept the merge and put the MTU into every generated
``10-netplan-<id>.network`` and ``netplan-<id>.nmconnection``; the keyfiles are then read by NetworkManager's
reader through libnm (nm_keyfile_check.py, bookworm's NetworkManager 1.42 has no ``nmcli --offline``). The
NetworkManager owner's ``nmcli connection modify`` target (mtu_persist.NM_KEY) is checked against libnm too.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import re
import sys

import pytest

import consumers
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import persist as mtu_persist
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"
BASE = """\
network:
  version: 2
  renderer: networkd
  ethernets:
    rail0:
      match: {macaddress: "02:00:00:00:01:00"}
      set-name: rail0
      addresses: [10.0.0.2/24]
    "rail@1:p1":
      match: {name: enp1s0f1np1}
      addresses: [10.0.1.2/24]
    nmrail:
      renderer: NetworkManager
      match: {name: enp2s0np0}
      addresses: [10.0.2.2/24]
    "nm@rail:3":
      renderer: NetworkManager
      match: {name: enp3s0np0}
    bond-port0: {match: {name: enp4s0f0np0}}
    bond-port1: {match: {name: enp4s0f1np1}}
  bonds:
    bond0:
      interfaces: [bond-port0, bond-port1]
      parameters: {mode: 802.3ad}
      addresses: [10.0.4.2/24]
  vlans:
    vlan100: {id: 100, link: rail0, addresses: [10.0.5.2/24]}
"""
NETWORKD = ["rail0", "rail@1:p1", "bond0"]
NM_RENDERED = ["nmrail", "nm@rail:3"]


def owners(ids, kinds=None):
    return [{"rail": "r%d" % i, "owner": "netplan", "netplan_id": ident, "kind": (kinds or {}).get(ident),
             "network_file": None, "nm_uuid": None} for i, ident in enumerate(ids)]


def no_nmcli(argv):
    raise AssertionError("no NetworkManager owner here, nothing may run: %r" % (argv,))


def node(tmp_path, ids, mtu):
    """A node root with the operator's netplan file and the collection's, written by mtu_persist.record."""
    root = str(tmp_path / "root")
    consumers.write(root, "/etc/netplan/50-rails.yaml", BASE, 0o600)
    rec = mtu_persist.record(Sysroot(root), no_nmcli, owners(ids), mtu, False)
    assert [f["path"] for f in rec["files"] if f["changed"]][:1] == [mtu_persist.NETPLAN_FILE]
    return root


def generate(root):
    netplan, = consumers.need("netplan")
    return consumers.run([netplan, "generate", "--root-dir", root])


def link_mtu(network_file):
    """MTUBytes= of the [Link] section of a networkd file, as networkd reads it (last assignment wins)."""
    section, mtu = None, None
    with open(network_file) as f:
        for line in f:
            line = line.strip()
            if re.fullmatch(r"\[[A-Za-z]+\]", line):
                section = line[1:-1]
            elif section == "Link" and line.startswith("MTUBytes="):
                mtu = int(line.split("=", 1)[1])
    return mtu


def nm_read(*paths):
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        consumers.unavailable("%s is not there" % SYSTEM_PYTHON)
    rc, out, err = consumers.run([SYSTEM_PYTHON, "-I", os.path.join(HERE, "nm_keyfile_check.py")] + list(paths))
    if rc != 0 and ("gi.repository" in err or "Namespace NM not available" in err or "No module named 'gi'" in err):
        consumers.unavailable("libnm's introspection data or python3-gi is missing: %s" % err.strip()[-200:])
    assert rc == 0, err
    return json.loads(out)


GOOD = [
    # id, netplan ids the rails' owners name, MTU
    ("networkd and NetworkManager rails, jumbo", NETWORKD + NM_RENDERED, 9000),
    ("ids with '@' and ':' only", ["rail@1:p1", "nm@rail:3"], 4200),
    ("the bond alone, largest MTU", ["bond0"], 9216),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_netplan_and_networkmanager_read_the_mtu(tmp_path, case):
    _id, ids, mtu = case
    root = node(tmp_path, ids, mtu)
    rc, out, err = generate(root)
    assert (rc, err.strip()) == (0, ""), out
    for ident in [i for i in ids if i not in NM_RENDERED]:
        assert link_mtu("%s/run/systemd/network/10-netplan-%s.network" % (root, ident)) == mtu
    keyfiles = ["%s/run/NetworkManager/system-connections/netplan-%s.nmconnection" % (root, i)
                for i in ids if i in NM_RENDERED]
    for path, got in nm_read(*keyfiles).items() if keyfiles else []:
        assert (got["error"], got["warnings"], got["mtu"]) == (None, [], mtu), path


BROKEN_YAML = [
    # id, the collection's file as it must not be, netplan's error
    ("a bond merged as an ethernet", {"network": {"version": 2, "ethernets": {"bond0": {"mtu": 9000}}}},
     "Updated definition 'bond0' changes device type"),
    ("an MTU that is not a number", {"network": {"version": 2, "ethernets": {"rail0": {"mtu": "jumbo"}}}},
     "invalid unsigned int value 'jumbo'"),
]


@pytest.mark.parametrize("case", BROKEN_YAML, ids=[c[0] for c in BROKEN_YAML])
def test_netplan_rejects_a_broken_file(tmp_path, case):
    _id, doc, error = case
    root = node(tmp_path, ["rail0"], 9000)
    consumers.write(root, mtu_persist.NETPLAN_FILE, mtu_persist.HEADER + json.dumps(doc) + "\n", 0o600)
    rc, out, err = generate(root)
    assert rc != 0 and error in err, (rc, out, err)


def test_without_pyyaml_each_rail_is_typed_by_its_link_kind(tmp_path, monkeypatch):
    """A node without PyYAML cannot read the operator's files: the type comes from the link's kind (a VLAN rail
    written under ethernets broke ``netplan generate`` at the next boot, issue 21 item 20)."""
    monkeypatch.setitem(sys.modules, "yaml", None)
    root = str(tmp_path / "root")
    consumers.write(root, "/etc/netplan/50-rails.yaml", BASE, 0o600)
    ids = ["vlan100", "rail0", "bond0"]
    mtu_persist.record(Sysroot(root), no_nmcli, owners(ids, {"vlan100": "vlan", "bond0": "bond"}), 9000, False)
    rc, out, err = generate(root)
    assert (rc, err.strip()) == (0, ""), out
    for ident in ids:
        assert link_mtu("%s/run/systemd/network/10-netplan-%s.network" % (root, ident)) == 9000


@pytest.mark.parametrize("types,kind,want", [
    ({}, None, "ethernets"), ({}, "vlan", "vlans"), ({}, "bond", "bonds"), ({}, "bridge", "bridges"),
    ({"x": "vlans"}, None, "vlans"),            # the operator's own definition wins over the kind
    ({}, "macvlan", None), ({"y": "bonds"}, "vxlan", None)])
def test_netplan_type(types, kind, want):
    o = {"netplan_id": "x", "kind": kind}
    if want:
        assert mtu_persist.netplan_type(types, "r0", o) == want
    else:
        with pytest.raises(ValueError, match="rail r0: netplan id 'x' is a %s link" % kind):
            mtu_persist.netplan_type(types, "r0", o)


def test_the_collection_types_a_bond_as_netplan_does(tmp_path):
    """mtu_persist looks the type up in the operator's files; netplan accepts the bond only under bonds."""
    root = node(tmp_path, ["bond0"], 9000)
    with open(os.path.join(root, mtu_persist.NETPLAN_FILE.lstrip("/"))) as f:
        assert json.loads(f.read().split("\n", 1)[1])["network"]["bonds"] == {"bond0": {"mtu": 9000}}


BROKEN_KEYFILE = [
    # id, edit of a keyfile netplan generated (old, new), what NetworkManager's reader says
    ("an MTU that is not a number", ("mtu=9000", "mtu=jumbo"), "warning",
     "invalid setting: value cannot be interpreted as integer"),
    ("a connection type NetworkManager does not know", ("type=ethernet", "type=ethernets"), "error",
     "connection type 'ethernets' is not valid"),
]


@pytest.mark.parametrize("case", BROKEN_KEYFILE, ids=[c[0] for c in BROKEN_KEYFILE])
def test_networkmanager_rejects_a_broken_keyfile(tmp_path, case):
    _id, (old, new), kind, message = case
    root = node(tmp_path, NM_RENDERED, 9000)
    rc, out, err = generate(root)
    assert rc == 0, err
    path = "%s/run/NetworkManager/system-connections/netplan-nmrail.nmconnection" % root
    with open(path) as f:
        text = f.read()
    assert old in text
    consumers.write(root, path[len(root):], text.replace(old, new), 0o600)
    got = nm_read(path)[path]
    assert message in ((got["error"] or "") if kind == "error" else " ".join(got["warnings"])), got


@pytest.mark.parametrize("value,error", [("9000", None), ("jumbo", "invalid literal")])
def test_networkmanager_knows_what_nmcli_is_told_to_modify(value, error):
    """mtu_persist runs ``nmcli connection modify uuid U 802-3-ethernet.mtu N`` for a NetworkManager rail."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        consumers.unavailable("%s is not there" % SYSTEM_PYTHON)
    rc, out, err = consumers.run([SYSTEM_PYTHON, "-I", os.path.join(HERE, "nm_keyfile_check.py"), "--property",
                                  mtu_persist.NM_KEY, value])
    if rc != 0 and "gi" in err:
        consumers.unavailable("libnm's introspection data or python3-gi is missing")
    got = json.loads(out)
    assert (got["error"] is None) == (error is None) and (error is None or error in got["error"]), got
    assert got.get("value") == (int(value) if error is None else None)
