# -*- coding: utf-8 -*-
"""inputs.py: the control-character walk over a module's options, and the renderers for shebang, ExecStart=,
unit names and udev rule values."""
from __future__ import absolute_import, division, print_function

import fnmatch
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils import inputs

__metaclass__ = type

SPEC = {"rails": {"type": "list", "elements": "str"}, "extra_vars": {"type": "dict"}, "path": {"type": "path"},
        "endpoints": {"type": "list", "elements": "dict", "options": {"gpu": {"type": "str"}}},
        "nodes": {"type": "dict"}, "count": {"type": "int"}}


@pytest.mark.parametrize("params,where", [
    ({"rails": ["ens1np0", "ens2np0\n"]}, "rails[1]"),
    ({"extra_vars": {"NCCL_DEBUG\n": "WARN"}}, "extra_vars key"),
    ({"extra_vars": {"NCCL_DEBUG": "WARN\x00"}}, "extra_vars.NCCL_DEBUG"),
    ({"path": "/etc/nccl.conf\r"}, "path"),
    ({"path": "/etc/nccl.conf\x7f"}, "path"),
    ({"endpoints": [{"gpu": "0000:18:00.0"}, {"gpu": "\x1b[31m"}]}, "endpoints[1].gpu"),
    ({"nodes": {"ap1": {"errors": ["a\x00b"]}}}, "nodes.ap1.errors[0]"),
    ({"nodes": {"ap1\n": {}}}, "nodes key"),
])
def test_control_characters_are_refused_naming_the_option(params, where):
    with pytest.raises(inputs.InputError) as e:
        inputs.check_params(SPEC, params, text=("nodes",))
    assert str(e.value).startswith(where + ":"), str(e.value)


def test_report_text_may_hold_newline_and_tab_only_in_values():
    inputs.check_params(SPEC, {"nodes": {"ap1": {"errors": ["line 1\nline 2\twith a tab\r\n"]}}, "count": 3},
                        text=("nodes",))
    with pytest.raises(inputs.InputError):
        inputs.check_params(SPEC, {"nodes": {"ap1": {"errors": ["line 1\nline 2"]}}})


def test_printable_values_pass():
    inputs.check_params(SPEC, {"rails": ["ens1np0"], "extra_vars": {"NCCL_DEBUG": "WARN"}, "path": "/etc/x",
                               "endpoints": [{"gpu": "0000:18:00.0"}], "count": 1, "nodes": None})


@pytest.mark.parametrize("value", [
    "relative/path", "/a//b", "/a/./b", "/a/../b", "/a/b/", "/a b", "/a\nb", "/a\x00b", '/a"""b', "/a$(id)",
    "/a`id`", "/a%n", "/a'b", '/a"b', "/a;b", "/a\\b", "", "/a/..",
])
def test_safe_path_refuses(value):
    with pytest.raises(inputs.InputError):
        inputs.safe_path(value, "script")


@pytest.mark.parametrize("value", ["/", "/usr/local/sbin/gpufabric-apply", "/opt/py-3.11/bin/python3.11",
                                   "/a/b+c,d:e=f@g_h.i"])
def test_safe_path_accepts(value):
    assert inputs.safe_path(value, "script") == value


def test_shebang():
    assert inputs.shebang("/usr/bin/python3") == "#!/usr/bin/python3\n"
    for bad in ("/usr/bin/python3\nimport os", "/usr/bin/env python3", "/usr/bin/python3 -I", "/" + "a" * 255):
        with pytest.raises(inputs.InputError):
            inputs.shebang(bad)


@pytest.mark.parametrize("word,out", [
    ("/usr/local/sbin/gpufabric-apply", "/usr/local/sbin/gpufabric-apply"),
    ("/opt/50%/x", "/opt/50%%/x"),
    ("/opt/$HOME/x", "/opt/$$HOME/x"),
    ("a b", '"a b"'),
    ('a"b\\c', '"a\\"b\\\\c"'),
    ("-x", '"-x"'),
    ("", '""'),
])
def test_systemd_exec_arg(word, out):
    assert inputs.systemd_exec_arg(word) == out


@pytest.mark.parametrize("word", ["a\nb", "a\x00", "a\rb"])
def test_systemd_exec_arg_refuses_control_characters(word):
    with pytest.raises(inputs.InputError):
        inputs.systemd_exec_arg(word)


@pytest.mark.parametrize("name,ok", [
    ("kubelet.service", True), ("remote-fs-pre.target", True), ("mnt-data\\x2d1.mount", True),
    ("getty@tty1.service", True), ("kubelet service", False), ("kubelet", False), ("a/b.service", False),
    ("kubelet.service\n", False), ("a%n.service", False), ("a\\b.service", False), ("a$b.service", False),
    ("a;b.service", False), ("x.unknown", False),
])
def test_systemd_unit_name(name, ok):
    if ok:
        assert inputs.systemd_unit_name(name, "before_units") == name
    else:
        with pytest.raises(inputs.InputError):
            inputs.systemd_unit_name(name, "before_units")


def test_udev_value():
    assert inputs.udev_value("/usr/bin/systemctl", "systemctl") == "/usr/bin/systemctl"
    assert inputs.udev_value("/opt/a%k$kernel", "systemctl") == "/opt/a%%k$$kernel"
    for bad in ('/a"b', "/a\\b", "/a\nb"):
        with pytest.raises(inputs.InputError):
            inputs.udev_value(bad, "systemctl")


@pytest.mark.parametrize("dev", ["mlx5_0", "mlx5-bond0", "rxe-eth0.1", "ibp23s0"])
def test_instance_names_are_unit_instances_as_they_are(dev):
    """For these names systemd's escaping is the identity, except for '-' which %i keeps (only %I unescapes
    it): the template's %i gives the device name back."""
    assert inputs.instance_name(dev) == dev
    assert not fnmatch.fnmatchcase(dev, inputs.UDEV_UNIT_UNSAFE_GLOB)


@pytest.mark.skipif(shutil.which("systemd-escape") is None, reason="systemd-escape is not installed")
@pytest.mark.parametrize("dev", ["mlx5_0", "rxe0", "ibp23s0", "mlx5.1"])
def test_names_without_dash_are_what_systemd_escape_gives(dev):
    out = subprocess.run(["systemd-escape", dev], stdout=subprocess.PIPE, check=True, universal_newlines=True)
    assert out.stdout.strip() == dev


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x17f), min_size=1, max_size=63))
def test_udev_glob_refuses_exactly_the_names_that_are_no_instance_name(name):
    unsafe = fnmatch.fnmatchcase(name, inputs.UDEV_UNIT_UNSAFE_GLOB)
    try:
        inputs.instance_name(name)
        safe = True
    except inputs.InputError:
        safe = False
    assert unsafe is not safe or name in (".", "..")
