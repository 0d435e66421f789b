# -*- coding: utf-8 -*-
"""The dcb and ethtool emulators: syntax, output shapes, error texts and mlx5 semantics."""
from __future__ import absolute_import, division, print_function

import hashlib
import json
import os

import pytest

from gpufabric_sim.emulators import dcb
from gpufabric_sim.emulators import ethtool

__metaclass__ = type

DEV = "ens1np0"


@pytest.fixture
def node(tmp_path):
    def make(version="6.1.0", driver="mlx5_core"):
        root = str(tmp_path)
        dcb.init_node(root, version)
        dcb.init_device(root, DEV, driver=driver)
        ethtool.init_device(root, DEV, bus_info="0000:1a:00.0")
        (tmp_path / "sys" / "class" / "net" / "veth0").mkdir(parents=True)
        return root
    return make


def sh(root, cmd):
    return dcb.run(cmd.split(), root=root)


def dscp_table(root):
    rc, out, err = sh(root, "-j app show dev %s" % DEV)
    assert rc == 0, err
    return dict((e[0], e[1]) for e in json.loads(out).get("dscp_prio", []))


# Each case: command sequence run in order on a fresh mlx5 node (6.1), then expectations on the state.
SEQUENCES = [
    ("boot", [], dict(trust="pcp", n=0, hw26=3)),
    ("first-dscp-entry", ["app add dev %s dscp-prio 26:3" % DEV], dict(trust="dscp", n=64, hw26=3)),
    ("override-on-first-add", ["app add dev %s dscp-prio 26:5" % DEV], dict(trust="dscp", n=64, hw26=5)),
    ("add-new-prio-replaces", ["app add dev %s dscp-prio 26:3" % DEV, "app add dev %s dscp-prio 26:6" % DEV],
     dict(trust="dscp", n=64, hw26=6)),
    ("del-keeps-rest", ["app add dev %s dscp-prio 26:3" % DEV, "app del dev %s dscp-prio 26:3" % DEV],
     dict(trust="dscp", n=63, hw26=0)),
    ("flush-returns-to-pcp", ["app add dev %s dscp-prio 26:3" % DEV, "app flush dev %s dscp-prio" % DEV],
     dict(trust="pcp", n=0, hw26=0)),
    ("names-accepted", ["app add dev %s dscp-prio AF31:4" % DEV], dict(trust="dscp", n=64, hw26=4)),
    ("all-keyword", ["app add dev %s dscp-prio all:2" % DEV], dict(trust="dscp", n=64, hw26=2)),
    ("replace-same", ["app add dev %s dscp-prio 26:3" % DEV, "app replace dev %s dscp-prio 26:3" % DEV],
     dict(trust="dscp", n=64, hw26=3)),
]


@pytest.mark.parametrize("case", SEQUENCES, ids=[c[0] for c in SEQUENCES])
def test_mlx5_app_sequences(node, case):
    _id, cmds, exp = case
    root = node()
    for c in cmds:
        rc, out, err = sh(root, c)
        assert rc == 0, (c, err)
    st = dcb.state(root, DEV)
    assert st["trust"] == exp["trust"]
    assert len(dscp_table(root)) == exp["n"]
    assert st["dscp2prio"][26] == exp["hw26"]
    table = dscp_table(root)
    if exp["n"] == 64:
        assert table[26] == exp["hw26"]
        assert all(table[d] == d >> 3 for d in range(64) if d != 26) or _id == "all-keyword"


# upstream mlx5e_dcbnl_ieee_setapp: the trust switch lists only the entry added; the firmware keeps the rest
UPSTREAM = [
    ("first-entry-only", ["app add dev %s dscp-prio 26:3" % DEV], dict(trust="dscp", listed={26: 3}, hw24=3)),
    ("hidden-entry-cannot-be-deleted", ["app add dev %s dscp-prio 26:3" % DEV, "app del dev %s dscp-prio 24:3" % DEV],
     dict(trust="dscp", listed={26: 3}, hw24=3, fails=1)),
    ("explicit-entry-listed", ["app add dev %s dscp-prio 26:3 24:0" % DEV],
     dict(trust="dscp", listed={26: 3, 24: 0}, hw24=0)),
    ("flush-keeps-firmware-table", ["app add dev %s dscp-prio 26:3" % DEV, "app flush dev %s dscp-prio" % DEV,
                                    "app add dev %s dscp-prio 10:1" % DEV],
     dict(trust="dscp", listed={10: 1}, hw24=3)),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c[0] for c in UPSTREAM])
def test_mlx5_upstream_setapp(tmp_path, case):
    _id, cmds, exp = case
    root = str(tmp_path)
    dcb.init_node(root, "6.5.0")
    dcb.init_device(root, DEV, first_app_lists_table=False)
    failed = 0
    for c in cmds:
        rc, _out, err = sh(root, c)
        failed += rc != 0
        assert rc == 0 or err == "Attribute write: No such file or directory\n", err
    st = dcb.state(root, DEV)
    assert failed == exp.get("fails", 0)
    assert st["trust"] == exp["trust"] and dscp_table(root) == exp["listed"]
    assert dcb.dscp_priority(st, 24) == exp["hw24"]
    dcb.reset_device(root, DEV)
    assert dcb.state(root, DEV)["first_app_lists_table"] is False


@pytest.mark.parametrize("version,entry", [("6.1.0", [26, 3]), ("6.5.0", [26, 3, " "])])
def test_json_shapes(node, version, entry):
    root = node(version)
    sh(root, "app add dev %s dscp-prio 26:3" % DEV)
    rc, out, err = sh(root, "-j app show dev %s dscp-prio" % DEV)
    assert rc == 0
    assert entry in json.loads(out)["dscp_prio"]
    assert out.endswith("}\n")


@pytest.mark.parametrize("version,text", [
    ("6.1.0", '{"dscp_prio":[[26,3]]}\n'),
    ("6.5.0", '{"dscp_prio":[[26,3," "]]}\n'),
])
def test_generic_exact_json(node, version, text):
    root = node(version, driver="other")
    sh(root, "app add dev %s dscp-prio 26:3" % DEV)
    assert sh(root, "-j app show dev %s" % DEV) == (0, text, "")


def test_text_and_numeric_and_pretty(node):
    root = node(driver="other")
    sh(root, "app add dev %s dscp-prio 26:3 0:0 46:5" % DEV)
    assert sh(root, "app show dev %s" % DEV)[1] == "dscp-prio default:0 AF31:3 EF:5 \n"
    assert sh(root, "-N app show dev %s" % DEV)[1] == "dscp-prio 0:0 26:3 46:5 \n"
    assert sh(root, "-j -p app show dev %s" % DEV)[1] == \
        '{\n    "dscp_prio": [ [ 0,0 ],[ 26,3 ],[ 46,5 ] ]\n}\n'


def test_empty_app_table(node):
    root = node()
    assert sh(root, "app show dev %s" % DEV) == (0, "", "")
    assert sh(root, "-j app show dev %s" % DEV) == (0, "{}\n", "")


ERRORS = [
    # cmd, rc, stdout, stderr (prefix)
    ("app show dev nosuch", 1, "", "Attribute read: No such device\n"),
    ("-j app show dev nosuch", 1, "\n", "Attribute read: No such device\n"),
    ("app add dev nosuch dscp-prio 26:3", 1, "", "Attribute write: No such device\n"),
    ("app show dev veth0", 1, "", "Attribute read: Operation not supported\n"),
    ("pfc set dev veth0 prio-pfc 3:on", 1, "", "Attribute read: Operation not supported\n"),
    ("app add dev %s dscp-prio 64:3" % DEV, 1, "",
     "In DSCP:PRIO mapping, DSCP is expected to be 0..63\nInvalid mapping 64\n"),
    ("app add dev %s dscp-prio 26:8" % DEV, 1, "",
     "In DSCP:PRIO mapping, PRIO is expected to be 0..7\nInvalid mapping 26\n"),
    ("app add dev %s dscp-prio 26" % DEV, 1, "", 'What is "26"?\nUsage: dcb app { add | del | replace }'),
    ("app add dev %s pcp-prio 3:3" % DEV, 1, "", 'What is "pcp-prio"?\n'),
    ("app add dev %s ethtype-prio 0x8915:3" % DEV, 1, "", "Attribute write: Invalid argument\n"),
    ("app show dev", 255, "", 'Command line is not complete. Try option "help"\n'),
    ("app show dev %s foo" % DEV, 1, "", 'What is "foo"?\nUsage: dcb app { show | flush }'),
    ("pfc set dev %s prio-pfc 3:maybe" % DEV, 1, "",
     'Error: argument of "PFC" must be one of "off", "on", not "maybe"\nInvalid pfc mapping 3\n'),
    ("ets set dev %s tc-bw 0:50 1:60" % DEV, 1, "", "Bandwidth percentages in tc-bw sum to 710%, expected 0%\n"),
    ("apptrust show dev %s" % DEV, 1, "", 'Object "apptrust" is unknown\n'),
    ("foo", 1, "", 'Object "foo" is unknown\n'),
    ("-V", 0, "dcb utility, iproute2-6.1.0\n", ""),
    ("app show dev %s" % ("x" * 16), 255, "", 'Error: argument "%s" is wrong: not a valid ifname\n' % ("x" * 16)),
    ("-x app show dev %s" % DEV, 1, "", "dcb: invalid option -- 'x'\nUnknown option.\n"),
    ("app del dev %s dscp-prio 26:3" % DEV, 1, "", "Attribute write: No such file or directory\n"),
]


@pytest.mark.parametrize("cmd,rc,out,err", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(node, cmd, rc, out, err):
    root = node()
    got = sh(root, cmd)
    assert got[0] == rc and got[1] == out
    assert got[2].startswith(err)


def test_apptrust_by_version_and_driver(node, tmp_path):
    root = node("6.5.0")
    rc, out, err = sh(root, "apptrust show dev %s" % DEV)
    assert rc == 1 and "Operation not supported" in err
    assert sh(root, "apptrust set dev %s order dscp" % DEV) == \
        (1, "", "Attribute write: Operation not supported\n")
    assert sh(root, "app add dev %s pcp-prio 3nd:3" % DEV)[2] == "Attribute write: Invalid argument\n"


def test_apptrust_generic(node):
    root = node("6.5.0", driver="other")
    assert sh(root, "-j apptrust show dev %s" % DEV) == (0, '{"order":["pcp"]}\n', "")
    assert sh(root, "apptrust set dev %s order dscp pcp" % DEV)[0] == 0
    assert sh(root, "apptrust show dev %s" % DEV)[1] == "order: dscp pcp \n\n"
    assert sh(root, "apptrust set dev %s order dscp dscp" % DEV)[2] == \
        "Duplicate selector: dscp\nInvalid list of selectors\n"
    assert sh(root, "app add dev %s pcp-prio 3nd:3" % DEV)[0] == 0
    assert json.loads(sh(root, "-j app show dev %s" % DEV)[1]) == {"pcp_prio": [["3nd", 3, " "]]}
    assert json.loads(sh(root, "-j -N app show dev %s" % DEV)[1]) == {"pcp_prio": [[3, 3, " "]]}


def test_generic_app_semantics(node):
    root = node(driver="other")
    assert sh(root, "app add dev %s dscp-prio 26:3" % DEV)[0] == 0
    assert sh(root, "app add dev %s dscp-prio 26:3" % DEV) == (1, "", "Attribute write: File exists\n")
    sh(root, "app add dev %s dscp-prio 26:5" % DEV)
    assert json.loads(sh(root, "-j app show dev %s" % DEV)[1]) == {"dscp_prio": [[26, 3], [26, 5]]}
    assert sh(root, "app replace dev %s dscp-prio 26:4" % DEV) == (0, "", "")
    assert json.loads(sh(root, "-j app show dev %s" % DEV)[1]) == {"dscp_prio": [[26, 4]]}


def test_mlx5_replace_quirk(node):
    # iproute2 "replace" adds the new entry (mlx5 already swaps it) then deletes the old one, which mlx5
    # no longer has: error text, but dcb_cmd_app_replace() returns 0.
    root = node()
    sh(root, "app add dev %s dscp-prio 26:3" % DEV)
    rc, out, err = sh(root, "app replace dev %s dscp-prio 26:5" % DEV)
    assert rc == 0
    assert err == "Attribute write: No such file or directory\nCould not remove replaced APP entries\n"
    assert dscp_table(root)[26] == 5


def test_pfc_toggles_and_counters(node):
    root = node()
    assert sh(root, "pfc show dev %s" % DEV)[1] == (
        "pfc-cap 8 macsec-bypass off delay 7 \nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off \n")
    sh(root, "pfc set dev %s prio-pfc all:off 3:on" % DEV)
    sh(root, "pfc set dev %s prio-pfc all:off 3:on" % DEV)
    c = dcb.state(root, DEV)["counters"]
    assert (c["pfc_set_calls"], c["pfc_en_changes"], c["link_toggles"]) == (2, 1, 1)
    pfc = json.loads(sh(root, "-j pfc show dev %s" % DEV)[1])
    assert pfc == {"pfc_cap": 8, "macsec_bypass": False, "delay": 7,
                   "prio_pfc": [False, False, False, True, False, False, False, False]}
    assert sh(root, "pfc show dev %s prio-pfc" % DEV)[1] == \
        "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
    assert sh(root, "pfc set dev %s" % DEV)[0] == 0  # usage only
    assert dcb.state(root, DEV)["counters"]["pfc_set_calls"] == 2


def test_pfc_stats_follow_ethtool(node):
    root = node()
    sh(root, "app add dev %s dscp-prio 26:3" % DEV)
    sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)
    assert ethtool.inject_traffic(root, DEV, "rx", 26, 10 ** 6, 1000, congested=True) == 3
    assert ethtool.inject_traffic(root, DEV, "tx", 26, 10 ** 6, 1000, congested=True) == 3
    data = json.loads(sh(root, "-j -s pfc show dev %s" % DEV)[1])
    assert data["requests"][3] == 100 and data["indications"][3] == 100
    assert sum(data["requests"]) == 100
    text = sh(root, "-s pfc show dev %s requests" % DEV)[1]
    assert text == "requests 0:0 1:0 2:0 3:100 4:0 5:0 6:0 7:0 \n"


def test_ets_set_and_show(node):
    root = node()
    cmd = ("ets set dev %s tc-tsa all:strict 0:ets 3:ets tc-bw all:0 0:50 3:50 prio-tc all:0 3:3" % DEV)
    assert sh(root, cmd) == (0, "", "")
    ets = json.loads(sh(root, "-j ets show dev %s" % DEV)[1])
    assert ets["tc_tsa"] == ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"]
    assert ets["tc_bw"] == [50, 100, 100, 50, 100, 100, 100, 100]
    assert ets["prio_tc"] == [0, 0, 0, 3, 0, 0, 0, 0]
    assert dcb.state(root, DEV)["counters"]["ets_set_calls"] == 1
    assert sh(root, "ets set dev %s" % DEV)[0] == 1


def test_reset_device(node):
    root = node()
    sh(root, "app add dev %s dscp-prio 26:5" % DEV)
    sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)
    dcb.reset_device(root, DEV)
    st = dcb.state(root, DEV)
    assert st["trust"] == "pcp" and st["apps"] == [] and st["pfc"]["pfc_en"] == 0
    assert st["dscp2prio"][26] == 3 and st["counters"]["resets"] == 1
    assert st["counters"]["pfc_set_calls"] == 1


def test_main_uses_env(node, monkeypatch, capsys):
    root = node()
    monkeypatch.setenv("GPUFABRIC_SYSROOT", root)
    assert dcb.main(["-j", "pfc", "show", "dev", DEV]) == 0
    assert json.loads(capsys.readouterr().out)["pfc_cap"] == 8
    assert dcb.main(["app", "show", "dev", "nosuch"]) == 1
    assert capsys.readouterr().err == "Attribute read: No such device\n"


# --------------------------------------------------------------------------------------------
# ethtool
# --------------------------------------------------------------------------------------------

def _stats(root):
    rc, out, err = ethtool.run(["-S", DEV], root=root)
    assert rc == 0 and out.startswith("NIC statistics:\n")
    return dict((line.split(":")[0].strip(), int(line.split(":")[1])) for line in out.splitlines()[1:])


def test_ethtool_counters_follow_dcb(node):
    root = node()
    s = _stats(root)
    for p in range(8):
        for n in ("rx_prio%d_bytes", "rx_prio%d_packets", "rx_prio%d_discards", "tx_prio%d_bytes",
                  "tx_prio%d_packets"):
            assert n % p in s
    assert not any("pause" in k and "prio" in k for k in s)
    # PCP trust: untagged RoCE lands on priority 0
    assert ethtool.inject_traffic(root, DEV, "tx", 26, 4096, 4) == 0
    assert _stats(root)["tx_prio0_bytes"] == 4096
    sh(root, "app add dev %s dscp-prio 26:3" % DEV)
    sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)
    s = _stats(root)
    assert "rx_prio3_pause" in s and "rx_prio3_pause_transition" in s and "rx_prio2_pause" not in s
    ethtool.inject_traffic(root, DEV, "rx", 26, 10000, 10, congested=True)
    s = _stats(root)
    assert s["rx_prio3_bytes"] == 10000 and s["tx_prio3_pause"] == 1 and s["rx_prio3_discards"] == 0
    # congestion without PFC on that priority drops instead of pausing
    ethtool.inject_traffic(root, DEV, "rx", 10, 10000, 10, congested=True)
    s = _stats(root)
    assert s["rx_prio1_discards"] == 1 and s["rx_prio1_packets"] == 9


def test_ethtool_line_format_and_errors(node):
    root = node()
    out = ethtool.run(["-S", DEV], root=root)[1]
    assert "\n     rx_prio0_bytes: 0\n" in out
    assert ethtool.run(["-S", "nosuch"], root=root) == \
        (96, "", "Cannot get stats strings information: No such device\n")
    assert ethtool.run(["-i", "nosuch"], root=root)[0] == 71
    assert ethtool.run(["-S"], root=root)[0] == 1
    info = ethtool.run(["-i", DEV], root=root)[1]
    assert "driver: mlx5_core\n" in info and "bus-info: 0000:1a:00.0\n" in info


def test_ethtool_reset(node):
    root = node()
    ethtool.inject_traffic(root, DEV, "tx", 0, 100, 1)
    ethtool.reset_device(root, DEV)
    assert _stats(root)["tx_prio0_bytes"] == 0


# --------------------------------------------------------------------------------------------
# read-only commands leave the node tree alone (check-mode hash proofs)
# --------------------------------------------------------------------------------------------

def _tree(root):
    out = {}
    for d, _dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


READ_ONLY = ["app show dev %s" % DEV, "-j app show dev %s" % DEV, "-j -p pfc show dev %s" % DEV,
             "pfc show dev %s" % DEV, "ets show dev %s" % DEV, "-j ets show dev %s" % DEV,
             "apptrust show dev %s" % DEV, "app show dev nosuch", "-j pfc show dev veth0"]


def test_init_creates_locks_and_reads_create_nothing(node):
    root = node()
    ethtool.init_node(root, "6.1.0")
    before = _tree(root)
    assert {"var/lib/gpufabric-sim/dcb/.lock", "var/lib/gpufabric-sim/ethtool/.lock"} <= set(before)
    for cmd in READ_ONLY:
        sh(root, cmd)
    for argv in (["-S", DEV], ["-i", DEV], ["-S", "nosuch"], ["--version"]):
        ethtool.run(argv, root=root)
    assert _tree(root) == before
    assert sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)[0] == 0
    after = _tree(root)
    assert set(after) == set(before), "a write changes the state file, adds none"
    assert [k for k in after if after[k] != before[k]] == ["var/lib/gpufabric-sim/dcb/%s.json" % DEV]


def test_init_device_alone_creates_its_lock(tmp_path):
    root = str(tmp_path)
    dcb.init_device(root, DEV)
    ethtool.init_device(root, DEV, bus_info="0000:1a:00.0")
    assert sorted(k for k in _tree(root) if k.endswith(".lock")) == [
        "var/lib/gpufabric-sim/dcb/.lock", "var/lib/gpufabric-sim/ethtool/.lock"]


# Batch mode (dcb -b FILE / -b -, -f): one JSON writer for the whole process (dcb_init/dcb_fini), so successive
# top-level objects are comma-separated; do_batch stops at the first failing command unless -f and prints
# "Command failed FILE:LINE"; lines are counted with continuation lines, '#' starts a comment.
BATCH = [
    ("two shows", ["-j"], "app show dev {dev}\npfc show dev {dev}\n", 0, 2, ""),
    ("comment and blank line", ["-j"], "# header\n\npfc show dev {dev} # trailing\n", 0, 1, ""),
    ("continuation line", ["-j"], "pfc show \\\n dev {dev}\napp show dev {dev}\n", 0, 2, ""),
    ("stops at failure", ["-j"], "app show dev {dev}\npfc show dev veth0\npfc show dev {dev}\n", 1, 1,
     "Attribute read: Operation not supported\nCommand failed {name}:2\n"),
    ("force goes on", ["-j", "-f"], "app show dev {dev}\npfc show dev veth0\npfc show dev {dev}\n", 1, 2,
     "Attribute read: Operation not supported\nCommand failed {name}:2\n"),
    ("line number counts continuations", ["-j"], "app \\\n show dev {dev}\npfc show dev nope0\n", 1, 1,
     "Attribute read: No such device\nCommand failed {name}:3\n"),
    ("unknown object", ["-j"], "maxi show dev {dev}\n", 1, 0, 'Object "maxi" is unknown\nCommand failed {name}:1\n'),
]


@pytest.mark.parametrize("case", BATCH, ids=[c[0] for c in BATCH])
@pytest.mark.parametrize("from_stdin", [False, True], ids=["file", "stdin"])
def test_batch_json(node, tmp_path, case, from_stdin):
    import io
    _id, opts, text, rc_want, objects, err_want = case
    root = node("6.5.0")   # whole batches answered (6.1's defect: test_batch_61_answers_only_the_first_command)
    (tmp_path / "sys" / "class" / "net" / "veth0").mkdir(parents=True, exist_ok=True)
    text = text.format(dev=DEV)
    if from_stdin:
        name = "-"
        rc, out, err = dcb.run(opts + ["-b", "-"], root=root, stdin=io.StringIO(text))
    else:
        name = str(tmp_path / "cmds.batch")
        with open(name, "w") as f:
            f.write(text)
        rc, out, err = dcb.run(opts + ["-b", name], root=root)
    assert rc == rc_want
    assert err == err_want.format(name=name)
    assert out.endswith("\n")
    got = json.loads("[" + out.strip() + "]")
    assert len(got) == objects and all(isinstance(o, dict) for o in got)
    # the same commands one by one print the same objects
    singles = []
    for line in text.replace("\\\n", "").splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        one = dcb.run(["-j"] + words, root=root)
        if one[0] != 0:
            if "-f" not in opts:
                break
            continue
        singles.append(json.loads(one[1]))
    assert got == singles


BATCH_CLI = [
    ("missing file", ["-j", "-b", "/nonexistent/x"], 1, "\n",
     'Cannot open file "/nonexistent/x" for reading: No such file or directory\n'),
    ("missing file, text mode", ["-b", "/nonexistent/x"], 1, "",
     'Cannot open file "/nonexistent/x" for reading: No such file or directory\n'),
    ("no file name", ["-j", "-b"], 1, "", "dcb: option requires an argument -- 'b'\nUnknown option.\n"),
    ("long option with =", ["--json", "--batch=/nonexistent/x"], 1, "\n", 'Cannot open file "/nonexistent/x"'),
]


@pytest.mark.parametrize("case", BATCH_CLI, ids=[c[0] for c in BATCH_CLI])
def test_batch_command_line(node, case):
    _id, argv, rc_want, out_want, err_start = case
    rc, out, err = dcb.run(argv, root=node())
    assert (rc, out) == (rc_want, out_want)
    assert err.startswith(err_start)


def test_batch_text_mode_and_writes(node, tmp_path):
    import io
    root = node("6.5.0")
    rc, out, err = dcb.run(["-b", "-"], root=root, stdin=io.StringIO(
        "app add dev %s dscp-prio 26:3\npfc set dev %s prio-pfc all:off 3:on\npfc show dev %s prio-pfc\n"
        % (DEV, DEV, DEV)))
    assert (rc, err) == (0, "")
    assert out == "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
    assert dcb.pfc_enabled(dcb.state(root, DEV)) == [3]


@pytest.mark.parametrize("text,rc_want,objects,failed_line", [
    ("app show dev {dev}\npfc show dev {dev}\n", 1, 1, 2),
    ("pfc show dev {dev}\napp show dev {dev}\n", 1, 1, 2),
    ("# only a comment\npfc show dev {dev}\npfc show dev {dev}\n", 1, 1, 3),
    ("app show dev {dev}\n", 0, 1, None),
])
def test_batch_61_answers_only_the_first_command(node, tmp_path, text, rc_want, objects, failed_line):
    """bookworm's iproute2 6.1 on a real DCB netdev (the VM lab's driver): the first command of a batch answers,
    every later one fails with 'Attribute not found: Success' and the batch stops, although each works alone."""
    root = node("6.1.0")
    name = str(tmp_path / "b.batch")
    with open(name, "w") as f:
        f.write(text.format(dev=DEV))
    rc, out, err = dcb.run(["-j", "-b", name], root=root)
    assert rc == rc_want
    assert len(json.loads("[" + out.strip() + "]")) == objects
    if failed_line:
        assert err == "Attribute not found: Success\nCommand failed %s:%d\n" % (name, failed_line)
    else:
        assert err == ""


@pytest.mark.parametrize("version,whole", [("5.12.0", True), ("6.0.0", True), ("6.1.0", False), ("6.1.9", False),
                                           ("6.2.0", True), ("6.5.0", True)])
def test_batch_defect_is_61_only(node, tmp_path, version, whole):
    """The defect came with 84c03697 (v6.1.0: NLM_F_ACK, the ACK left in the socket) and went with d0e02f35
    (v6.2.0): releases before and after answer every command of a batch."""
    root = node(version)
    name = str(tmp_path / "b.batch")
    with open(name, "w") as f:
        f.write("pfc show dev {dev}\npfc show dev {dev}\n".format(dev=DEV))
    rc, out, err = dcb.run(["-j", "-b", name], root=root)
    assert (rc, len(json.loads("[" + out.strip() + "]"))) == ((0, 2) if whole else (1, 1))
    assert ("Attribute not found: Success" in err) is not whole


@pytest.mark.parametrize("version,known", [("5.11.0", False), ("5.12.0", True), ("6.1.0", True)])
def test_app_object_needs_512(node, version, known):
    root = node(version)
    rc, _out, err = sh(root, "-j app show dev %s" % DEV)
    assert (rc == 0) is known
    assert ('Object "app" is unknown' in err) is not known


# (object with the fault, errno name, command, counter that still counts the call)
FAULT_CASES = [
    ("pfc", "EBUSY", "pfc set dev %s prio-pfc all:off 3:on" % DEV, "pfc_set_calls", "Device or resource busy"),
    ("app", "EOPNOTSUPP", "app add dev %s dscp-prio 26:3" % DEV, "app_set_calls", "Operation not supported"),
    ("ets", "EIO", "ets set dev %s tc-tsa all:strict tc-bw all:0" % DEV, "ets_set_calls", "Input/output error"),
]


@pytest.mark.parametrize("obj,err,cmd,counter,text", FAULT_CASES, ids=[c[0] for c in FAULT_CASES])
def test_injected_fault_fails_writes_of_that_object_only(node, obj, err, cmd, counter, text):
    root = node()
    before = dcb.state(root, DEV)
    dcb.inject_fault(root, DEV, obj, err)
    assert sh(root, cmd) == (1, "", "Attribute write: %s\n" % text)
    after = dcb.state(root, DEV)
    # the driver refused: the call is counted, the configuration is as it was
    assert after["counters"][counter] == before["counters"][counter] + 1
    assert dict((k, v) for k, v in after.items() if k != "counters") == \
        dict((k, v) for k, v in before.items() if k != "counters")
    # reads and the other objects still work
    assert sh(root, "-j pfc show dev %s" % DEV)[0] == 0
    other = "app add dev %s dscp-prio 26:3" % DEV if obj != "app" else "pfc set dev %s prio-pfc 3:on" % DEV
    assert sh(root, other)[0] == 0


def test_fault_survives_reset_and_clears(node):
    root = node()
    dcb.inject_fault(root, DEV, "pfc")
    dcb.reset_device(root, DEV)
    assert sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)[0] == 1
    dcb.clear_fault(root, DEV)
    assert not os.path.exists(os.path.join(root, "var/lib/gpufabric-sim/dcb/faults", DEV + ".json"))
    assert sh(root, "pfc set dev %s prio-pfc 3:on" % DEV)[0] == 0
    with pytest.raises(ValueError):
        dcb.inject_fault(root, DEV, "buffer")
    with pytest.raises(ValueError):
        dcb.inject_fault(root, DEV, "pfc", "ENOTANERRNO")
