# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl (the nccl.conf planner): what its own tests left unseen (make mutation's survivors): the range bounds of the
integer options, every refusal's exact message, booleans and carriage returns in extra_vars, and a missing file with
nothing managed in it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot


@pytest.mark.parametrize("kwargs,key,value", [
    ({"gid_index": 0}, "NCCL_IB_GID_INDEX", "0"),
    ({"gid_index": 255}, "NCCL_IB_GID_INDEX", "255"),
    ({"gid_index": 3, "fifo_tc": 0}, "NCCL_IB_FIFO_TC", "0"),
    ({"gid_index": 3, "fifo_tc": 255}, "NCCL_IB_FIFO_TC", "255"),
    ({"gid_index": 3, "tc": 0}, "NCCL_IB_TC", "0"),
    ({"gid_index": 3, "tc": 255}, "NCCL_IB_TC", "255"),
])
def test_integer_options_accept_their_bounds(kwargs, key, value):
    assert dict(nccl.desired_vars("=mlx5_0:1", **kwargs))[key] == value


@pytest.mark.parametrize("kwargs,message", [
    ({"gid_index": 256}, "gid_index must be 0..255 (got 256)"),
    ({"gid_index": -1}, "gid_index must be 0..255 (got -1)"),
    ({"gid_index": "x"}, "gid_index must be an integer 0..255 (got 'x')"),
    ({"gid_index": None}, "gid_index must be an integer 0..255 (got None)"),
    ({"gid_index": True}, "gid_index must be an integer 0..255 (got True)"),
    ({"gid_index": 3, "fifo_tc": 256}, "fifo_tc must be 0..255 (got 256)"),
    ({"gid_index": 3, "tc": 256}, "tc must be 0..255 (got 256)"),
    ({"gid_index": 3, "socket_ifname": "ens1 ens2"}, "socket_ifname must not contain white space (got 'ens1 ens2')"),
    ({"gid_index": 3, "extra": {"nccl_debug": "INFO"}},
     "extra_vars key 'nccl_debug' is not an environment variable name (A-Z, 0-9, _)"),
    ({"gid_index": 3, "extra": {"NCCL_IB_HCA": "mlx5"}},
     "extra_vars must not set NCCL_IB_HCA: use the module option for it"),
    ({"gid_index": 3, "extra": {"NCCL_DEBUG": "INFO\rX"}}, "extra_vars NCCL_DEBUG: value must be a single line"),
    ({"gid_index": 3, "extra": {"NCCL_DEBUG": "INFO\nX"}}, "extra_vars NCCL_DEBUG: value must be a single line"),
    ({"gid_index": 3, "extra": {"NCCL_DEBUG": " INFO"}},
     "extra_vars NCCL_DEBUG: value must not start or end with white space"),
])
def test_refusals_name_the_option(kwargs, message):
    with pytest.raises(ValueError) as e:
        nccl.desired_vars("=mlx5_0:1", **kwargs)
    assert str(e.value) == message


def test_boolean_extra_vars_are_one_and_zero():
    assert nccl.validate_extra_vars({"NCCL_A": True, "NCCL_B": False, "NCCL_C": 0}) == \
        {"NCCL_A": "1", "NCCL_B": "0", "NCCL_C": "0"}


@pytest.mark.parametrize("per_rail,message", [
    ([], "no rail has a RoCE v2 GID with an IPv4 address (rails: ): assign the rails their IPv4 addresses or pass "
         "gid_index"),
    ([("ens1", None), ("ens2", None)], "no rail has a RoCE v2 GID with an IPv4 address (rails: ens1, ens2): assign "
                                       "the rails their IPv4 addresses or pass gid_index"),
    ([("ens2", 3), ("ens1", 5)], "rails disagree on the RoCE v2 IPv4 GID index (ens1=5, ens2=3): NCCL_IB_GID_INDEX is "
                                 "one value for all HCAs; pass gid_index explicitly or make the rails consistent"),
    ([("ens1", 3), ("ens2", None), ("ens3", None)],
     "rail(s) ens2, ens3 have no RoCE v2 GID with an IPv4 address (the others use index 3): give them their IPv4 "
     "addresses or pass gid_index"),
])
def test_gid_index_refusals(per_rail, message):
    with pytest.raises(nccl.NcclError) as e:
        nccl.choose_gid_index(per_rail)
    assert str(e.value) == message


def test_no_rdma_device_for_the_hca_list():
    with pytest.raises(nccl.NcclError) as e:
        nccl.hca_value([])
    assert str(e.value) == "no RDMA devices for NCCL_IB_HCA"


def test_a_missing_file_with_nothing_managed_is_content_drift(tmp_path):
    sr = Sysroot(str(tmp_path))
    res = nccl.write_conf(sr, [], check_mode=False)
    assert res["drift"] == [{"concern": "nccl", "object": nccl.NCCL_CONF, "key": "content", "current": "missing",
                             "desired": "managed"}]
    path = os.path.join(str(tmp_path), nccl.NCCL_CONF.lstrip("/"))
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    assert nccl.write_conf(sr, [], check_mode=False)["changed"] is False
