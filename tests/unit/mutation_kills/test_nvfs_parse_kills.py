# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvfs_parse: what its own tests left unseen (make mutation's survivors): the nvidia-fs stats lines one by one,
mountinfo and /proc/mounts lines at their shortest, mount_for's ties and trailing slashes, cufile.json comments
at the edges, and the rendered cufile.json byte for byte."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds import parse as p


# ------------------------------------------------------------------------------------------------ stats

def test_parse_stats_line_by_line():
    text = ("GDS Version: 1.11.1:rc2\n"
            "Active Shadow-Buffer (MiB): 5\n"
            "Active Process: 2\n"
            "Foo: n=9\n"                                     # an unknown counter line is skipped, not filed
            "Reads\n"                                        # a known name without a colon says nothing
            "Batches: n=1 ok=1: err=0\n"                     # the name ends at the first colon
            "Reads: Bandwidth(MiB/s)=5\n"                    # one perf value is enough for the perf line
            "Writes: Avg_Latency(usec)=7\n"
            "Writes: n=4 ok=4 err=0\n"
            "GPU 0000:1A:00.0 uuid:7A3E0000-5c1d : Registered_MiB=16 Future_Field=3 cross_root_port(%)=1\n")
    assert p.parse_stats(text) == {
        "gds_version": "1.11.1:rc2", "active_shadow_buffer_mib": 5, "active_process": 2,
        "batches": {"n": 1, "ok": 1, "err": 0},
        "read_perf": {"Bandwidth(MiB/s)": 5}, "write_perf": {"Avg_Latency(usec)": 7},
        "writes": {"n": 4, "ok": 4, "err": 0},
        "gpus": [{"bdf": "0000:1a:00.0", "uuid": "7a3e0000-5c1d", "registered_mib": 16, "Future_Field": 3,
                  "cross_root_port_pct": 1}]}


# ------------------------------------------------------------------------------------------------ mounts

def test_parse_mountinfo_shortest_lines_and_ids():
    text = ("junk without the separator\n"
            "1 2 3 - too short\n"
            "36 35 98:0 /sub /mnt/a\\040b rw,noatime - ext4 /dev/sda1\n"       # no superblock options field
            "x7 35 0:52 / /data rw shared:5 - nfs4 srv:/export rw,vers=4.2,proto=rdma\n")
    assert p.parse_mountinfo(text) == [
        {"mount_id": 36, "root": "/sub", "mountpoint": "/mnt/a b", "fstype": "ext4", "source": "/dev/sda1",
         "options": {"rw": True, "noatime": True}, "mount_options": {"rw": True, "noatime": True}},
        {"mount_id": "x7", "root": "/", "mountpoint": "/data", "fstype": "nfs4", "source": "srv:/export",
         "options": {"rw": True, "vers": "4.2", "proto": "rdma"}, "mount_options": {"rw": True}},
    ]


def test_parse_proc_mounts_shortest_lines():
    text = "short line\nsrv:/e\\040x /mnt/n\\011t nfs4 rw,,proto=rdma\n/dev/sda1 / ext4 rw 0 0\n"
    assert p.parse_proc_mounts(text) == [
        {"mount_id": None, "root": "/", "mountpoint": "/mnt/n\tt", "fstype": "nfs4", "source": "srv:/e x",
         "options": {"rw": True, "proto": "rdma"}},
        {"mount_id": None, "root": "/", "mountpoint": "/", "fstype": "ext4", "source": "/dev/sda1",
         "options": {"rw": True}},
    ]


def _m(mp, tag):
    return {"mountpoint": mp, "tag": tag, "options": {}}


@pytest.mark.parametrize("mounts,path,tag", [
    ([_m("/", "root"), _m("/data/", "data")], "/data/x", "data"),        # a mount point written with a slash
    ([_m("/", "root"), _m("/data/XX", "xx")], "/data/y", "root"),        # only slashes are stripped
    ([_m("/", "root"), _m("/data", "old"), _m("/data", "new")], "/data/f", "new"),   # over-mounted: the last
    ([_m("/", "root"), _m("/data", "data")], "/", "root"),
    ([_m("/data", "data")], "/datax/f", None),
    ([_m("/", "root"), _m("/data", "data")], "/data ", "root"),          # a name ending in a space is another
    ([_m("/", "root"), _m("/data", "data")], "/dataX", "root"),
])
def test_mount_for(mounts, path, tag):
    got = p.mount_for(mounts, path)
    assert (got or {}).get("tag") == tag


def test_mount_proto_is_a_value_never_a_flag():
    assert p.mount_proto({"options": {"proto": True}}) is None
    assert p.mount_proto({"options": {"proto": "rdma"}}) == "rdma"


def test_options_skip_empty_items():
    assert p.parse_proc_mounts("s /m nfs ,rw,,hard,\n")[0]["options"] == {"rw": True, "hard": True}


# ------------------------------------------------------------------------------------------------ cufile.json

@pytest.mark.parametrize("text,out", [
    ('{"a": 1} // end without a newline', '{"a": 1} '),
    ('{"a": /* x */ 1 /* y */}', '{"a":  1 }'),
    ('{"a": /*/ c */ 1}', '{"a":  1}'),                   # "/*/" does not close the comment it opens
    ('{"a": /**/ 1}', '{"a":  1}'),
    ('{"a": /* never closed', '{"a": '),
    (r'{"a": "q\"//in the string", "b": "\\"} // c', r'{"a": "q\"//in the string", "b": "\\"} '),
    ('"a\\', '"a\\'),                                      # a backslash as the very last character
    (r'"\a"/**/', r'"\a"'),
])
def test_strip_json_comments(text, out):
    assert p.strip_json_comments(text) == out


def test_load_cufile_json_messages():
    with pytest.raises(p.GdsError) as e:
        p.load_cufile_json("[1, 2]")
    assert str(e.value) == "cufile.json must hold a JSON object"
    with pytest.raises(p.GdsError) as e:
        p.load_cufile_json('{"a": 1,}')
    assert str(e.value).startswith("cufile.json is not valid JSON: Expecting property name")


def test_cufile_config_merges_and_leaves_out_what_is_not_given():
    base = {"properties": {"max_direct_io_size_kb": 16384}, "logging": {"level": "ERROR"}}
    assert p.cufile_config(base, properties={}) == base
    assert p.cufile_config({"logging": {}}, properties={}) == {"logging": {}}
    assert p.cufile_config(base, allow_compat_mode=False, log_dir="/var/log/cufile") == {
        "properties": {"max_direct_io_size_kb": 16384, "allow_compat_mode": False},
        "logging": {"level": "ERROR", "dir": "/var/log/cufile"}}


def test_render_cufile_json_is_sorted_with_four_spaces():
    assert p.render_cufile_json({"z": 1, "a": {"y": True, "b": [1]}}) == (
        '{\n    "a": {\n        "b": [\n            1\n        ],\n        "y": true\n    },\n    "z": 1\n}\n')
