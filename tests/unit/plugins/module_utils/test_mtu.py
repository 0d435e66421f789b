# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rail MTU live: validation, the plan from ip -d -j link, set and read back (bonds too), RDMA ports' active MTU."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given, strategies as st

from mtu_kernel import Kernel

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.mtu import manage as mtu
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


@pytest.mark.parametrize("value, ok", [
    (9000, 9000), ("9000", 9000), (4200, 4200), (65535, 65535),
    (4199, "below 4200"), (1500, "below 4200"), (65536, "above 65535"), (True, "must be an integer"),
    (9000.0, "must be an integer"), ("jumbo", "must be an integer"), (None, "must be an integer"),
])
def test_validate_mtu(value, ok):
    if isinstance(ok, int):
        assert mtu.validate_mtu(value) == ok
    else:
        with pytest.raises(ValueError, match=ok):
            mtu.validate_mtu(value, "rail_network_mtu")


def test_a_low_mtu_error_names_the_variable_and_why():
    with pytest.raises(ValueError) as e:
        mtu.validate_mtu(1500, "rail_network_mtu")
    assert "rail_network_mtu is 1500" in str(e.value) and "4096" in str(e.value)


@pytest.mark.parametrize("netdev, path", [
    (1500, 1024), (4191, 2048), (4192, 4096), (4200, 4096), (9000, 4096), (351, None), (352, 256), (2144, 2048),
])
def test_iboe_mtu_follows_the_kernel(netdev, path):
    assert mtu.iboe_mtu(netdev) == path


@given(st.integers(min_value=0, max_value=70000))
def test_iboe_mtu_is_the_largest_ib_mtu_that_fits(netdev):
    got = mtu.iboe_mtu(netdev)
    fits = [m for m in mtu.IB_MTUS if m + mtu.IBOE_HEADERS <= netdev]
    assert got == (max(fits) if fits else None)


@pytest.mark.parametrize("rails, msg", [
    ([], "at least one"), ("ens1", "at least one"), (["ens1", "ens1"], "twice"), (["a/b"], "not a legal"),
    (["x" * 16], "longer than 15"),
])
def test_validate_rails(rails, msg):
    with pytest.raises(ValueError, match=msg):
        mtu.validate_rails(rails)


def test_parse_links_reads_the_iproute2_keys():
    k = Kernel({"bond0": {"kind": "bond", "mtu": 1500}, "ens1": {"master": "bond0"}, "ens2": {"master": "bond0"}})
    links = mtu.parse_links(k(["ip", "-d", "-j", "link", "show"])[1])
    assert links["bond0"]["kind"] == "bond" and links["bond0"]["max_mtu"] == 65535
    assert links["ens1"]["master"] == "bond0" and links["ens1"]["slave_kind"] == "bond"
    assert mtu.slaves(links, "bond0") == ["ens1", "ens2"]
    # old iproute2 without min/max: unknown, not refused
    assert mtu.parse_links('[{"ifname": "e", "mtu": 1500}]')["e"]["max_mtu"] is None


@pytest.mark.parametrize("text", ["not json", '{"ifname": "x"}'])
def test_parse_links_refuses_what_is_not_a_link_list(text):
    with pytest.raises(mtu.MtuError):
        mtu.parse_links(text)


@pytest.mark.parametrize("links, rails, want, result", [
    # a plain rail at 1500
    ({"ens1": {}}, ["ens1"], 9000, [("ens1", 1500)]),
    # already right
    ({"ens1": {"mtu": 9000}}, ["ens1"], 9000, []),
    # a bond: the bond and every slave that differs
    ({"bond0": {"kind": "bond"}, "s1": {"master": "bond0"}, "s2": {"master": "bond0", "mtu": 9000}},
     ["bond0"], 9000, [("bond0", 1500), ("s1", 1500)]),
    # above the device's max_mtu
    ({"ens1": {"max_mtu": 4500}}, ["ens1"], 9000, "max_mtu 4500"),
    # a bond is limited by its slaves
    ({"bond0": {"kind": "bond"}, "s1": {"master": "bond0", "max_mtu": 8000}}, ["bond0"], 9000,
     "max_mtu 8000 of its slave s1"),
    ({"ens1": {}}, ["ens9"], 9000, "does not exist"),
])
def test_plan(links, rails, want, result):
    k = Kernel(links)
    parsed = mtu.read_links(k)
    if isinstance(result, str):
        with pytest.raises(ValueError, match=result):
            mtu.plan(parsed, rails, want)
        return
    items = mtu.plan(parsed, rails, want)
    assert [(i["object"], i["current"]) for i in items] == result
    assert all(i["concern"] == "mtu" and i["key"] == "mtu" and i["desired"] == want for i in items)


def _sets(k):
    return [c for c in k.calls if c[:3] == ["ip", "link", "set"]]


def test_apply_sets_reads_back_and_a_second_run_changes_nothing():
    k = Kernel({"ens1": {}, "ens2": {"mtu": 9000}, "eth0": {}})
    res = mtu.apply(k, ["ens1", "ens2"], 9000, False)
    assert res["changed"] and k.links["ens1"]["mtu"] == 9000 and k.links["eth0"]["mtu"] == 1500
    assert _sets(k) == [["ip", "link", "set", "dev", "ens1", "mtu", "9000"]]
    assert [r["result"] for r in res["results"]] == ["changed", "unchanged"]
    assert res["results"][0]["changes"] == [{"key": "mtu", "before": 1500, "after": 9000}]
    again = mtu.apply(k, ["ens1", "ens2"], 9000, False)
    assert not again["changed"] and not again["drift"] and len(_sets(k)) == 1


def test_check_mode_changes_nothing_and_predicts_the_run():
    k = Kernel({"ens1": {}})
    res = mtu.apply(k, ["ens1"], 9000, True)
    assert res["changed"] and k.links["ens1"]["mtu"] == 1500 and not _sets(k)
    assert res["after"] == {"ens1": 9000} and res["results"][0]["result"] == "changed"


def test_bond_mtu_goes_on_the_bond_and_the_kernel_sets_the_slaves():
    k = Kernel({"bond0": {"kind": "bond"}, "s1": {"master": "bond0"}, "s2": {"master": "bond0"}})
    res = mtu.apply(k, ["bond0"], 9000, False)
    assert _sets(k) == [["ip", "link", "set", "dev", "bond0", "mtu", "9000"]]
    assert res["after"] == {"bond0": 9000, "s1": 9000, "s2": 9000}
    assert res["results"][0]["changes"][1:] == [{"key": "mtu s1", "before": 1500, "after": 9000},
                                                {"key": "mtu s2", "before": 1500, "after": 9000}]


def test_a_slave_changed_on_its_own_is_set_directly():
    # setting the bond to the MTU it has does nothing in the kernel: the slave needs its own set
    k = Kernel({"bond0": {"kind": "bond", "mtu": 9000}, "s1": {"master": "bond0", "mtu": 1500},
                "s2": {"master": "bond0", "mtu": 9000}})
    res = mtu.apply(k, ["bond0"], 9000, False)
    assert _sets(k) == [["ip", "link", "set", "dev", "s1", "mtu", "9000"]]
    assert k.links["s1"]["mtu"] == 9000 and res["results"][0]["result"] == "changed"


def test_a_refused_set_fails_that_rail_and_the_others_are_set():
    k = Kernel({"ens1": {}, "ens2": {}}, fail_set=["ens1"])
    res = mtu.apply(k, ["ens1", "ens2"], 9000, False)
    assert [r["result"] for r in res["results"]] == ["failed", "changed"]
    assert "ip link set dev ens1 mtu 9000 failed" in res["results"][0]["error"]
    assert k.links["ens2"]["mtu"] == 9000


def test_a_bond_whose_slave_refuses_rolls_back_and_fails():
    k = Kernel({"bond0": {"kind": "bond"}, "s1": {"master": "bond0"}, "s2": {"master": "bond0"}}, fail_set=["s2"])
    res = mtu.apply(k, ["bond0"], 9000, False)
    assert res["results"][0]["result"] == "failed"
    assert k.links["s1"]["mtu"] == 1500 and k.links["bond0"]["mtu"] == 1500


def test_an_ip_that_cannot_be_read_is_an_error():
    with pytest.raises(mtu.MtuError, match="ip -d -j link show failed"):
        mtu.read_links(lambda argv: (1, "", "Object \"link\" is unknown"))


DEVINFO = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tphys_port_cnt:\t\t\t2
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\tport:\t2
\t\t\tmax_mtu:\t\t2048 (4)
\t\t\tactive_mtu:\t\t2048 (4)
"""


def test_parse_devinfo_per_port():
    assert mtu.parse_devinfo(DEVINFO) == {1: {"max_mtu": 4096, "active_mtu": 1024},
                                          2: {"max_mtu": 2048, "active_mtu": 2048}}
    assert mtu.parse_devinfo("") == {}


def test_parse_devinfo_all_devices():
    two = DEVINFO + "\n" + DEVINFO.replace("mlx5_0", "mlx5_1").replace("1024 (3)", "4096 (5)")
    assert mtu.parse_devinfo_all(two) == {"mlx5_0": {1: {"max_mtu": 4096, "active_mtu": 1024},
                                                     2: {"max_mtu": 2048, "active_mtu": 2048}},
                                          "mlx5_1": {1: {"max_mtu": 4096, "active_mtu": 4096},
                                                     2: {"max_mtu": 2048, "active_mtu": 2048}}}
    assert mtu.parse_devinfo_all("") == {}


def _rails_tree(tmp_path, devs):
    for i, dev in enumerate(devs):
        port = tmp_path / "sys/class/infiniband" / dev / "ports/1"
        (port / "gid_attrs/ndevs").mkdir(parents=True)
        (port / "gid_attrs/ndevs/0").write_text("ens%d\n" % (i + 1))
        (tmp_path / "sys/class/net" / ("ens%d" % (i + 1))).mkdir(parents=True)
    return Sysroot(str(tmp_path))


def test_rdma_ports_list_every_device_once_and_ask_for_a_missing_one(tmp_path):
    """One ibv_devinfo for all the rails; a device the listing lacks (it failed to open) is asked for alone."""
    sr = _rails_tree(tmp_path, ["mlx5_0", "mlx5_1"])
    calls = []

    def run(argv):
        calls.append(argv)
        if argv == ["ibv_devinfo"]:
            return 0, DEVINFO.replace("1024 (3)", "4096 (5)"), "Failed to open device mlx5_1\n"
        if argv[1:3] == ["-d", "mlx5_1"]:
            return 255, "", "Failed to open device\n"
        raise AssertionError(argv)

    assert sorted(r["netdev"] for r in topology.list_rails(sr)) == ["ens1", "ens2"]
    ports = mtu.rdma_ports(sr, run, ["ens1", "ens2"], {"ens1": 9000, "ens2": 9000})
    assert calls == [["ibv_devinfo"], ["ibv_devinfo", "-d", "mlx5_1", "-i", "1"]]
    assert ports[0]["readable"] and ports[0]["active_mtu"] == 4096 and ports[0]["expected"] == 4096
    assert not ports[1]["readable"] and "rc=255" in ports[1]["reason"] and "mlx5_1" in ports[1]["reason"]


def test_rdma_ports_without_ibv_devinfo_say_so_once(tmp_path):
    sr = _rails_tree(tmp_path, ["mlx5_0", "mlx5_1"])
    calls = []
    ports = mtu.rdma_ports(sr, lambda argv: calls.append(argv) or (127, "", ""), ["ens1", "ens2"], {})
    assert calls == [["ibv_devinfo"]] and len(ports) == 2
    assert all("not installed" in p["reason"] for p in ports)


@pytest.mark.parametrize("netdev_mtu, active, max_mtu, flagged", [
    (9000, 4096, 4096, False),
    (9000, 1024, 4096, True),       # something holds the port below what the netdev carries
    (9000, 2048, 2048, True),       # the port cannot do 4096: flagged with its max_mtu
    (1500, 1024, 4096, False),      # the netdev itself is too small: the mtu item says so, not the port
])
def test_port_warnings(netdev_mtu, active, max_mtu, flagged):
    ports = [{"rail": "ens1", "ibdev": "mlx5_0", "port": 1, "readable": True, "active_mtu": active,
              "max_mtu": max_mtu}]
    items = mtu.port_warnings(ports, {"ens1": netdev_mtu})
    assert bool(items) == flagged
    if flagged:
        assert items[0]["object"] == "mlx5_0/1" and items[0]["key"] == "active_mtu"
        assert ("max_mtu is %d" % max_mtu in items[0]["note"]) == (max_mtu < 4096)


def test_a_vlan_rail_raises_its_lower_device_first():
    k = Kernel({"ens1": {}, "ens1.100": {"kind": "vlan", "lower": "ens1"}, "ens2": {"mtu": 9216},
                "ens2.7": {"kind": "vlan", "lower": "ens2"}})
    res = mtu.apply(k, ["ens1.100", "ens2.7"], 9000, False)
    assert _sets(k) == [["ip", "link", "set", "dev", "ens1", "mtu", "9000"],
                        ["ip", "link", "set", "dev", "ens1.100", "mtu", "9000"],
                        ["ip", "link", "set", "dev", "ens2.7", "mtu", "9000"]]
    assert k.links["ens2"]["mtu"] == 9216, "a lower device above the MTU is left alone"
    assert [r["result"] for r in res["results"]] == ["changed", "changed"]
    assert not mtu.apply(k, ["ens1.100", "ens2.7"], 9000, False)["drift"]


def test_a_vlan_rail_is_limited_by_its_lower_device():
    k = Kernel({"ens1": {"max_mtu": 4500}, "ens1.100": {"kind": "vlan", "lower": "ens1", "max_mtu": 65535}})
    with pytest.raises(ValueError, match="max_mtu 4500 of its lower device ens1"):
        mtu.plan(mtu.read_links(k), ["ens1.100"], 9000)
