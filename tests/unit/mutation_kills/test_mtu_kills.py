# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mtu: what its own tests left unseen (make mutation's survivors): every field of a parsed link, every refusal's
message word for word, the limits at their bounds, devices that take another MTU than the one set (the read-back
error), the whole result of apply, and the RDMA ports' entries and warnings as written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from mtu_kernel import Kernel

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

SHOW = ["ip", "-d", "-j", "link", "show"]
VLAN = {"info_kind": "vlan"}


def dump(links):
    """``ip -d -j link show`` of {name: iproute2 keys}."""
    return json.dumps([dict(link, ifname=name) for name, link in sorted(links.items())])


def parsed(**links):
    return mtu.parse_links(dump(links))


class Ip(object):
    """ip as apply sees it: the dump of ``links``; ``ip link set`` answers ``answers[name]`` (rc, stdout, stderr,
    the MTU the device has afterwards) or, by default, takes the MTU asked for."""

    def __init__(self, links, answers=None):
        self.links, self.answers, self.calls = links, answers or {}, []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv == SHOW:
            return 0, dump(self.links), ""
        rc, out, err, now = self.answers.get(argv[4], (0, "", "", int(argv[6])))
        self.links[argv[4]]["mtu"] = now
        return rc, out, err


def set_call(name, value=9000):
    return ["ip", "link", "set", "dev", name, "mtu", str(value)]


# ------------------------------------------------------------------------------------------------ validation

BELOW = ("mtu is 4199: below 4200, the smallest rail MTU the collection accepts; RoCE needs the netdev MTU to hold "
         "a 4096-byte path MTU plus 96 bytes of RoCE v2 headers (9000 is usual)")


@pytest.mark.parametrize("args, message", [
    ((True,), "mtu must be an integer (got True)"),
    ((9000.0, "rail_network_mtu"), "rail_network_mtu must be an integer (got 9000.0)"),
    (("jumbo",), "mtu must be an integer (got 'jumbo')"),
    ((None, "rail_network_mtu"), "rail_network_mtu must be an integer (got None)"),
    ((4199,), BELOW),
    ((65536,), "mtu is 65536: above 65535, the largest MTU Linux has (ETH_MAX_MTU)"),
    ((65536, "rail_network_mtu"), "rail_network_mtu is 65536: above 65535, the largest MTU Linux has (ETH_MAX_MTU)"),
])
def test_validate_mtu_messages(args, message):
    with pytest.raises(ValueError) as e:
        mtu.validate_mtu(*args)
    assert str(e.value) == message


@pytest.mark.parametrize("rails, message", [
    ({"ens1"}, "rails must list at least one network interface"),
    ({"ens1": 1}, "rails must list at least one network interface"),
    ("ens1", "rails must list at least one network interface"),
    ([], "rails must list at least one network interface"),
    (["ens1", "ens2", "ens1"], "rail ens1 is listed twice"),
])
def test_validate_rails_messages(rails, message):
    with pytest.raises(ValueError) as e:
        mtu.validate_rails(rails)
    assert str(e.value) == message


def test_validate_rails_returns_the_list():
    assert mtu.validate_rails(("ens1", "ens2")) == ["ens1", "ens2"]


# ------------------------------------------------------------------------------------------------ ip -d -j link

def _link(**known):
    """A parsed link: the fields not given are None."""
    link = dict.fromkeys(("ifindex", "mtu", "min_mtu", "max_mtu", "master", "lower", "kind", "slave_kind"))
    link.update(known)
    return link


@pytest.mark.parametrize("data, links", [
    # a full slave after two entries that are not links (skipped, not the end)
    (["junk", {"ifname": 5, "mtu": 1500}, {"mtu": 1500},
      {"ifindex": 2, "ifname": "ens1", "mtu": 9000, "min_mtu": 68, "max_mtu": 9978, "master": "bond0",
       "linkinfo": {"info_slave_kind": "bond"}}],
     {"ens1": _link(ifindex=2, mtu=9000, min_mtu=68, max_mtu=9978, master="bond0", slave_kind="bond")}),
    # values of the wrong type are unknown; max_mtu 0 is no limit
    ([{"ifindex": "3", "ifname": "bond0", "mtu": "9000", "min_mtu": True, "max_mtu": 0, "master": 7, "link": 4,
       "linkinfo": {"info_kind": "bond"}}],
     {"bond0": _link(kind="bond")}),
    ([{"ifindex": False, "ifname": "e", "mtu": 1500.0, "min_mtu": "68", "max_mtu": False, "linkinfo": "vlan"}],
     {"e": _link()}),
    ([{"ifindex": 9, "ifname": "ens1.7", "mtu": 1500, "min_mtu": 0, "max_mtu": 65535, "link": "ens1",
       "linkinfo": VLAN}],
     {"ens1.7": _link(ifindex=9, mtu=1500, min_mtu=0, max_mtu=65535, lower="ens1", kind="vlan")}),
])
def test_parse_links_every_field(data, links):
    assert mtu.parse_links(json.dumps(data)) == links


@pytest.mark.parametrize("text", ["", None, "[]"])
def test_parse_links_of_nothing(text):
    assert mtu.parse_links(text) == {}


@pytest.mark.parametrize("text, message", [
    ("not json", "ip -d -j link show printed no JSON (Expecting value: line 1 column 1 (char 0))"),
    ('{"ifname": "x"}', "ip -d -j link show printed dict, not a list of links"),
    ('"ens1"', "ip -d -j link show printed str, not a list of links"),
])
def test_parse_links_refusals(text, message):
    with pytest.raises(mtu.MtuError) as e:
        mtu.parse_links(text)
    assert str(e.value) == message


@pytest.mark.parametrize("answer, message", [
    ((1, "", 'Object "link" is unknown\n'), 'ip -d -j link show failed (rc=1): Object "link" is unknown'),
    ((2, " stdout says\n", ""), "ip -d -j link show failed (rc=2): stdout says"),
    ((3, "out", "err"), "ip -d -j link show failed (rc=3): err"),
    ((4, "", ""), "ip -d -j link show failed (rc=4): "),
    ((5, None, None), "ip -d -j link show failed (rc=5): "),
])
def test_read_links_failures(answer, message):
    with pytest.raises(mtu.MtuError) as e:
        mtu.read_links(lambda argv: answer)
    assert str(e.value) == message


@pytest.mark.parametrize("links, name, want", [
    ({"ens1.7": {"link": "ens1", "linkinfo": VLAN}, "ens1": {}}, "ens1.7", "ens1"),
    ({"mv0": {"link": "ens1", "linkinfo": {"info_kind": "macvlan"}}, "ens1": {}}, "mv0", "ens1"),
    # a veth's peer is no lower device; a VLAN whose lower is in another namespace has none here
    ({"veth0": {"link": "veth1", "linkinfo": {"info_kind": "veth"}}, "veth1": {}}, "veth0", None),
    ({"ens1.7": {"link": "ens1", "linkinfo": VLAN}}, "ens1.7", None),
    ({"ens1": {"link": "ens2"}, "ens2": {}}, "ens1", None),
])
def test_lower(links, name, want):
    assert mtu.lower(parsed(**links), name) == want


@pytest.mark.parametrize("links, rail, want", [
    # nothing known anywhere: unknown, named after the rail
    ({"bond0": {}, "s1": {"master": "bond0"}, "s2": {"master": "bond0"}}, "bond0", (None, "bond0")),
    ({"bond0": {}, "s1": {"master": "bond0", "max_mtu": 8000}}, "bond0", (8000, "s1")),
    ({"bond0": {"max_mtu": 9000}, "s1": {"master": "bond0", "max_mtu": 9978}}, "bond0", (9000, "bond0")),
    ({"bond0": {"max_mtu": 9978}, "s1": {"master": "bond0", "max_mtu": 9978}}, "bond0", (9978, "bond0")),
    ({"bond0": {"max_mtu": 65535}, "s1": {"master": "bond0", "max_mtu": 8000},
      "s2": {"master": "bond0", "max_mtu": 8000}, "s3": {"master": "bond0"}}, "bond0", (8000, "s1")),
    ({"bond0": {"max_mtu": 65535}, "s1": {"master": "bond0", "max_mtu": 9978},
      "s2": {"master": "bond0", "max_mtu": 8000}}, "bond0", (8000, "s2")),
    ({"ens1": {"max_mtu": 4500}, "ens1.7": {"link": "ens1", "linkinfo": VLAN}}, "ens1.7", (4500, "ens1")),
])
def test_limit(links, rail, want):
    assert mtu.limit(parsed(**links), rail) == want


# ------------------------------------------------------------------------------------------------ plan

def _item(name, current, desired=9000):
    return {"concern": "mtu", "object": name, "key": "mtu", "current": current, "desired": desired}


@pytest.mark.parametrize("links, rails, want, items", [
    # at max_mtu and at min_mtu: taken
    ({"ens1": {"mtu": 1500, "max_mtu": 9000}}, ["ens1"], 9000, [_item("ens1", 1500)]),
    ({"ens1": {"mtu": 1500, "min_mtu": 9000}}, ["ens1"], 9000, [_item("ens1", 1500)]),
    # no min_mtu nor max_mtu known
    ({"ens1": {"mtu": 1500}}, ["ens1"], 9000, [_item("ens1", 1500)]),
    # a rail and a slave above the MTU are lowered to it; a lower device above it is left alone
    ({"ens1": {"mtu": 9216}}, ["ens1"], 9000, [_item("ens1", 9216)]),
    ({"bond0": {"mtu": 9000}, "s1": {"master": "bond0", "mtu": 9216}}, ["bond0"], 9000, [_item("s1", 9216)]),
    ({"ens1": {"mtu": 9216}, "ens1.7": {"mtu": 1500, "link": "ens1", "linkinfo": VLAN}}, ["ens1.7"], 9000,
     [_item("ens1.7", 1500)]),
    ({"ens1": {"mtu": 1500}, "ens1.7": {"mtu": 9000, "link": "ens1", "linkinfo": VLAN}}, ["ens1.7"], 9000,
     [_item("ens1", 1500)]),
    # an MTU the dump does not show differs
    ({"ens1": {}, "ens1.7": {"link": "ens1", "linkinfo": VLAN}}, ["ens1.7"], 9000,
     [_item("ens1", None), _item("ens1.7", None)]),
])
def test_plan_items(links, rails, want, items):
    assert mtu.plan(parsed(**links), rails, want) == items


@pytest.mark.parametrize("links, rail, message", [
    ({"ens1": {}}, "ens9", "rail ens9 does not exist in this network namespace (ip link show dev ens9)"),
    ({"ens1": {"max_mtu": 8999}}, "ens1",
     "mtu 9000 is above the largest MTU rail ens1 takes: max_mtu 8999 (ip -d link show dev ens1)"),
    ({"bond0": {"max_mtu": 65535}, "s1": {"master": "bond0", "max_mtu": 8000}}, "bond0",
     "mtu 9000 is above the largest MTU rail bond0 takes: max_mtu 8000 of its slave s1 (ip -d link show dev s1)"),
    ({"ens1": {"max_mtu": 4500}, "ens1.7": {"link": "ens1", "max_mtu": 65535, "linkinfo": VLAN}}, "ens1.7",
     "mtu 9000 is above the largest MTU rail ens1.7 takes: max_mtu 4500 of its lower device ens1 "
     "(ip -d link show dev ens1)"),
    ({"ens1": {"mtu": 1500, "min_mtu": 9001}}, "ens1", "mtu 9000 is below the min_mtu 9001 of rail ens1"),
])
def test_plan_refusals(links, rail, message):
    with pytest.raises(ValueError) as e:
        mtu.plan(parsed(**links), [rail], 9000)
    assert str(e.value) == message


# ------------------------------------------------------------------------------------------------ apply

def _result(name, result="changed", error=None, changes=()):
    return {"object": name, "result": result, "error": error,
            "changes": [{"key": k, "before": b, "after": a} for k, b, a in changes]}


@pytest.mark.parametrize("links, answers, rail, calls, result", [
    # the set is refused: ip's own words (stderr, else stdout), nothing changed
    ({"ens1": {"mtu": 1500}}, {"ens1": (2, "", "RTNETLINK answers: Operation not supported\n", 1500)}, "ens1",
     [set_call("ens1")],
     _result("ens1", "failed", "ip link set dev ens1 mtu 9000 failed (rc=2): RTNETLINK answers: Operation not "
                               "supported")),
    ({"ens1": {"mtu": 1500}}, {"ens1": (2, " said on stdout\n", "", 1500)}, "ens1", [set_call("ens1")],
     _result("ens1", "failed", "ip link set dev ens1 mtu 9000 failed (rc=2): said on stdout")),
    ({"ens1": {"mtu": 1500}}, {"ens1": (3, "out", "err", 1500)}, "ens1", [set_call("ens1")],
     _result("ens1", "failed", "ip link set dev ens1 mtu 9000 failed (rc=3): err")),
    ({"ens1": {"mtu": 1500}}, {"ens1": (4, "", "", 1500)}, "ens1", [set_call("ens1")],
     _result("ens1", "failed", "ip link set dev ens1 mtu 9000 failed (rc=4): ")),
    # the set is taken but another MTU is read back: one device reads, two read
    ({"ens1": {"mtu": 1500}}, {"ens1": (0, "", "", 1500)}, "ens1", [set_call("ens1")],
     _result("ens1", "failed", "set mtu 9000 but ens1 reads back 1500")),
    ({"ens1": {"mtu": 1500}}, {"ens1": (0, "", "", 9216)}, "ens1", [set_call("ens1")],
     _result("ens1", "failed", "set mtu 9000 but ens1 reads back 9216", [("mtu", 1500, 9216)])),
    ({"bond0": {"mtu": 1500}, "s1": {"master": "bond0", "mtu": 1500}, "s2": {"master": "bond0", "mtu": 1400}},
     {"s1": (0, "", "", 1500), "s2": (0, "", "", 1400)}, "bond0",
     [set_call("bond0"), set_call("s1"), set_call("s2")],
     _result("bond0", "failed", "set mtu 9000 but s1, s2 read back 1500, 1400", [("mtu", 1500, 9000)])),
    # a lower device that stays below the MTU; one above it is right
    ({"ens1": {"mtu": 1500}, "ens1.7": {"mtu": 1500, "link": "ens1", "linkinfo": VLAN}},
     {"ens1": (0, "", "", 1500)}, "ens1.7", [set_call("ens1"), set_call("ens1.7")],
     _result("ens1.7", "failed", "set mtu 9000 but ens1 reads back 1500", [("mtu", 1500, 9000)])),
    ({"ens1": {"mtu": 1500}, "ens1.7": {"mtu": 1500, "link": "ens1", "linkinfo": VLAN}},
     {"ens1": (0, "", "", 9216)}, "ens1.7", [set_call("ens1"), set_call("ens1.7")],
     _result("ens1.7", changes=[("mtu ens1", 1500, 9216), ("mtu", 1500, 9000)])),
    # a slave changed on its own that refuses its own set: its error, not the read-back
    ({"bond0": {"mtu": 9000}, "s1": {"master": "bond0", "mtu": 1500}},
     {"s1": (2, "", "RTNETLINK answers: Operation not supported", 1500)}, "bond0", [set_call("s1")],
     _result("bond0", "failed", "ip link set dev s1 mtu 9000 failed (rc=2): RTNETLINK answers: Operation not "
                                "supported")),
])
def test_apply_reports_what_the_device_did(links, answers, rail, calls, result):
    links = copy.deepcopy(links)            # the fake sets MTUs in it: keep the table as written for the next run
    ip = Ip(links, answers)
    res = mtu.apply(ip, [rail], 9000, False)
    assert [c for c in ip.calls if c != SHOW] == calls
    assert res["results"] == [result]
    assert res["changed"] == bool(result["changes"])
    assert res["after"] == dict((n, link["mtu"]) for n, link in links.items())
    assert res["links"] == mtu.parse_links(dump(links))


def test_apply_whole_result():
    k = Kernel({"ens1": {}, "ens2": {"mtu": 9000}, "ens3": {"mtu": 9216},
                "ens3.7": {"kind": "vlan", "lower": "ens3"}})
    res = mtu.apply(k, ["ens1", "ens2", "ens3.7"], 9000, False)
    assert res == {
        "changed": True, "drift": [_item("ens1", 1500), _item("ens3.7", 1500)],
        "results": [_result("ens1", changes=[("mtu", 1500, 9000)]), _result("ens2", "unchanged"),
                    _result("ens3.7", changes=[("mtu", 1500, 9000)])],
        "before": {"ens1": 1500, "ens2": 9000, "ens3": 9216, "ens3.7": 1500},
        "after": {"ens1": 9000, "ens2": 9000, "ens3": 9216, "ens3.7": 9000},
        "links": mtu.read_links(k)}


def test_check_mode_with_links_given_runs_nothing_and_predicts():
    links = parsed(ens2={"mtu": 9216}, **{"ens2.7": {"mtu": 1500, "link": "ens2", "linkinfo": VLAN}})
    calls = []
    res = mtu.apply(lambda argv: calls.append(argv) or (1, "", "no"), ["ens2.7"], 9000, True, links)
    assert calls == []
    assert res == {"changed": True, "drift": [_item("ens2.7", 1500)],
                   "results": [_result("ens2.7", changes=[("mtu", 1500, 9000)])],
                   "before": {"ens2": 9216, "ens2.7": 1500}, "after": {"ens2": 9216, "ens2.7": 9000},
                   "links": links}


def test_check_mode_predicts_a_lower_device_below_the_mtu():
    links = parsed(ens2={"mtu": 1500}, **{"ens2.7": {"mtu": 9000, "link": "ens2", "linkinfo": VLAN}})
    res = mtu.apply(lambda argv: (1, "", "no"), ["ens2.7"], 9000, True, links)
    assert res["after"] == {"ens2": 9000, "ens2.7": 9000}
    assert res["results"] == [_result("ens2.7", changes=[("mtu ens2", 1500, 9000)])]


# ------------------------------------------------------------------------------------------------ RDMA ports

def test_parse_devinfo_ignores_mtus_before_any_port():
    text = "\t\t\tmax_mtu:\t\t4096 (5)\n\t\tport:\t1\n\t\t\tactive_mtu:\t\t1024 (3)\n"
    assert mtu.parse_devinfo(text) == {1: {"active_mtu": 1024}}


def test_parse_devinfo_all_keeps_the_whole_device_name():
    text = "hca_id:\trxe:a:b\n\t\tport:\t1\n\t\t\tactive_mtu:\t\t4096 (5)\n"
    assert mtu.parse_devinfo_all(text) == {"rxe:a:b": {1: {"active_mtu": 4096}}}


def block(dev, port, max_mtu, active):
    enum = {1024: 3, 2048: 4, 4096: 5}
    return ("hca_id:\t%s\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t%d\n\t\t\tmax_mtu:\t\t%d (%d)\n"
            "\t\t\tactive_mtu:\t\t%d (%d)\n" % (dev, port, max_mtu, enum[max_mtu], active, enum[active]))


def _tree(tmp_path, devs):
    for i, dev in enumerate(devs):
        port = tmp_path / "sys/class/infiniband" / dev / "ports/1"
        (port / "gid_attrs/ndevs").mkdir(parents=True)
        (port / "gid_attrs/ndevs/0").write_text("ens%d\n" % (i + 1))
        (tmp_path / "sys/class/net" / ("ens%d" % (i + 1))).mkdir(parents=True)
    return Sysroot(str(tmp_path))


def _port(rail, ibdev, mtus=None, reason=None):
    """An entry of rdma_ports: readable with ``mtus`` (max_mtu, active_mtu, expected), else with ``reason``."""
    max_mtu, active, expected = mtus or (None, None, None)
    return {"rail": rail, "ibdev": ibdev, "port": 1, "max_mtu": max_mtu, "active_mtu": active, "expected": expected,
            "readable": mtus is not None, "reason": reason}


ASK1 = ("-d", "mlx5_1", "-i", "1")  # the arguments of ibv_devinfo for mlx5_1 alone


@pytest.mark.parametrize("answers, netdev_mtu, asked, ports", [
    # the device the listing lacks answers on its own: its max_mtu caps the expected MTU
    ({(): (0, block("mlx5_0", 1, 4096, 4096), ""), ASK1: (0, block("mlx5_1", 1, 2048, 2048), "")},
     {"ens1": 9000, "ens2": 9000}, ["mlx5_1"],
     [_port("ens1", "mlx5_0", (4096, 4096, 4096)), _port("ens2", "mlx5_1", (2048, 2048, 2048))]),
    # no netdev MTU: nothing expected
    ({(): (0, block("mlx5_0", 1, 4096, 1024), ""), ASK1: (0, block("mlx5_1", 1, 4096, 4096), "")},
     {"ens1": 0}, ["mlx5_1"],
     [_port("ens1", "mlx5_0", (4096, 1024, None)), _port("ens2", "mlx5_1", (4096, 4096, None))]),
    # the device's own answer lacks the port; a failed one says why, cut to 200 characters
    ({(): (0, "", ""), ASK1: (0, block("mlx5_1", 2, 4096, 4096), "")}, {}, ["mlx5_0", "mlx5_1"],
     [_port("ens1", "mlx5_0", reason="ibv_devinfo -d mlx5_0 -i 1 gave no active_mtu (rc=0): "),
      _port("ens2", "mlx5_1", reason="ibv_devinfo -d mlx5_1 -i 1 gave no active_mtu (rc=0): ")]),
    ({(): (0, "", ""), ASK1: (1, block("mlx5_1", 1, 4096, 4096), " " + "x" * 250)}, {}, ["mlx5_0", "mlx5_1"],
     [_port("ens1", "mlx5_0", reason="ibv_devinfo -d mlx5_0 -i 1 gave no active_mtu (rc=0): "),
      _port("ens2", "mlx5_1", reason="ibv_devinfo -d mlx5_1 -i 1 gave no active_mtu (rc=1): " + "x" * 200)]),
    # a listing that failed is not read: each port is asked for
    ({(): (255, block("mlx5_0", 1, 4096, 1024) + block("mlx5_1", 1, 4096, 1024), "Failed to open device"),
      ASK1: (0, block("mlx5_1", 1, 4096, 4096), "")}, {"ens1": 4200, "ens2": 4200}, ["mlx5_0", "mlx5_1"],
     [_port("ens1", "mlx5_0", reason="ibv_devinfo -d mlx5_0 -i 1 gave no active_mtu (rc=0): "),
      _port("ens2", "mlx5_1", (4096, 4096, 4096))]),
    ({(): (127, "", "ibv_devinfo: not found")}, {"ens1": 9000}, [],
     [_port("ens1", "mlx5_0", reason="ibv_devinfo is not installed (rdma-core's ibverbs-utils)"),
      _port("ens2", "mlx5_1", reason="ibv_devinfo is not installed (rdma-core's ibverbs-utils)")]),
])
def test_rdma_ports_entries(tmp_path, answers, netdev_mtu, asked, ports):
    sr = _tree(tmp_path, ["mlx5_0", "mlx5_1"])
    calls = []

    def run(argv):
        calls.append(argv)
        return answers.get(tuple(argv[1:]), (0, "", ""))

    assert mtu.rdma_ports(sr, run, ["ens1", "ens2"], netdev_mtu) == ports
    assert calls == [["ibv_devinfo"]] + [["ibv_devinfo", "-d", dev, "-i", "1"] for dev in asked]


NOTE = "RDMA port %s/1 of rail %s: active MTU %d although the rail's MTU %d carries 4096%s"


@pytest.mark.parametrize("port, netdev_mtu, note", [
    (_port("ens2", "mlx5_1", (2048, 2048, None)), 9000,
     NOTE % ("mlx5_1", "ens2", 2048, 9000, " (the port's max_mtu is 2048)")),
    (_port("ens2", "mlx5_1", (4096, 1024, None)), 4192, NOTE % ("mlx5_1", "ens2", 1024, 4192, "")),
    (_port("ens2", "mlx5_1", (None, 1024, None)), 9000, NOTE % ("mlx5_1", "ens2", 1024, 9000, "")),
    (_port("ens2", "mlx5_1", (4096, 4096, None)), 9000, None),
    (_port("ens2", "mlx5_1", (4096, 1024, None)), 4191, None),
])
def test_port_warnings_after_ports_that_are_skipped(port, netdev_mtu, note):
    """The first ports are skipped (unreadable; no netdev MTU): the last one is still judged."""
    ports = [_port("ens1", "mlx5_0", reason="ibv_devinfo is not installed (rdma-core's ibverbs-utils)"),
             _port("ens3", "mlx5_2", (4096, 1024, None)), port]
    want = [] if note is None else [{"concern": "mtu", "object": "mlx5_1/1", "key": "active_mtu",
                                     "current": port["active_mtu"], "desired": 4096, "note": note}]
    assert mtu.port_warnings(ports, {"ens1": 9000, "ens2": netdev_mtu}) == want
