# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every string option of every module, fed a hostile value: a clear failure, and a byte-identical node.

The options come from the modules themselves: each module's ``main()`` is run up to its ``AnsibleModule(...)``,
whose argument spec is captured, so a new option (or a new module) is in this table without anyone adding it.
Each string option (a ``str``/``path``/``raw`` option, each element of a list of strings, each suboption, each key
and each string value of a free-form dict) gets a valid value (the module's check-mode case of
``test_check_mode_all``, else the option's default, else ``BASE``) with a hostile piece added: a newline, NUL, a
carriage return, DEL, ``\"\"\"``, ``$(...)``, a backtick, ``%``, quotes, ``;``, a ``..`` component, a trailing
newline. The module runs for real (not in check mode) on the simulated drifted node and must fail with a message
naming the option, and the node's tree must be untouched: every entry's lstat (mode, owner, inode, size, mtime and
ctime) and symlink target as before (``runtime.tree_stamp``; ctime moves with any write, chmod or rename, so this
is stricter than a content hash and needs no file read).

``ALLOWED`` lists the few (option, hostile value) pairs that are valid text for that option; for each of them
``PROOF`` shows, on the files the module wrote, that the value is escaped for their syntax.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import importlib
import json
import os
import re
import shutil
import sys

import pytest

from ansible.module_utils import basic

from gpufabric_sim import runtime as sim_runtime
from modrunner import run_module

from test_check_mode_all import CASES, module_names, template  # noqa: F401 pylint: disable=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.report import markdown

PKG = "ansible_collections.gpufabric.node.plugins.modules."

# (id, function of a valid value -> the hostile value)
HOSTILE = [
    ("newline", lambda v: v + "\nExecStartPre=/bin/sh -c id"),
    ("nul", lambda v: v + "\x00x"),
    ("cr", lambda v: v + "\rx"),
    ("del", lambda v: v + "\x7f"),
    ("tab", lambda v: v + "\tx"),
    ("triple-quote", lambda v: v + '"""; import os; os.system("id"); """'),
    ("command-substitution", lambda v: v + "$(id)"),
    ("backtick", lambda v: v + "`id`"),
    ("percent", lambda v: v + "%n"),
    ("single-quote", lambda v: v + "'"),
    ("double-quote", lambda v: v + '"'),
    ("semicolon", lambda v: v + ";id"),
    ("dotdot", lambda v: v + "/../x"),
    ("trailing-newline", lambda v: v + "\n"),
]
CONTROL = ("newline", "nul", "cr", "del", "tab", "trailing-newline")

# valid values of options that neither the check-mode case nor a default gives one
BASE = {
    ("dcb_qos", "ets"): {"tc_tsa": ["ets", "strict", "strict", "ets", "strict", "strict", "strict", "strict"],
                         "tc_bw": [50, 0, 0, 50, 0, 0, 0, 0], "prio_tc": [0, 1, 2, 3, 4, 5, 6, 7]},
    ("fabric_metrics", "filename"): "gpufabric.prom",
    ("fabric_metrics", "textfile_dir"): "/var/lib/node_exporter/textfile_collector",
    ("fabric_metrics", "mode"): "0644",
    ("fabric_metrics", "concerns"): {"dcb": {"status": "ok", "reason": "all rails match"}},
    ("fabric_metrics", "gds"): {"ok": True, "reasons": ["ok"]},
    ("fabric_counters", "role"): "gpu",
    ("fabric_check", "concerns"): ["dcb"],
    ("fabric_metrics", "managed_concerns"): ["dcb"],
    ("fabric_report", "managed_concerns"): ["dcb"],
    ("fleet_report", "managed_concerns"): ["dcb"],
    ("fabric_counters", "previous"): {"ens1np0": {"rx_bytes": 1}},
    ("fabric_counters", "deltas"): {"ens1np0": {"rx_bytes": 1}},
    ("fabric_counters", "errors"): {"ens1np0": "gone"},
    ("fabric_persist", "python"): "/usr/bin/python3",
    ("fabric_persist", "evidence_textfile_dir"): "/var/lib/prometheus/node-exporter",
    ("fabric_persist", "evidence_desired"): {"dcb": {"rails": ["ens1np0"]}},
    ("fabric_report", "title"): "drift report",
    ("fleet_report", "title"): "fleet report",
    ("fleet_report", "generated"): "2026-01-01T00:00:00Z",
    ("fabric_report", "generated"): "2026-01-01T00:00:00Z",
    ("fabric_report", "also_basenames"): ["drift-report"],
    ("fabric_report", "scope"): {"pattern": "all", "inventory_hosts": ["gone1", "ap1"], "limit": "ap*"},
    ("fleet_report", "scope"): {"pattern": "all", "inventory_hosts": ["gone1", "ap1"], "limit": "ap*"},
    ("fabric_validate", "node"): "gpu-a01",
    ("fabric_validate", "image"): "localhost/nccl-tests:2.19",
    ("fabric_validate", "nccl_tests_path"): "/opt/nccl-tests/build",
    ("fabric_validate", "peer"): "10.0.0.9",
    ("fabric_validate", "python"): "/usr/bin/python3",
    ("validate_judge", "earlier"): {"ap1": None},
    ("validate_judge", "generated"): "2026-01-01T00:00:00Z",
    ("gds_verify", "gdsio_path"): "/usr/local/cuda/gds/tools/gdsio",
    ("gds_verify", "python"): "/usr/bin/python3",
    ("gds_verify", "storage_module"): "rpcrdma",
    ("gpufabric_facts", "gather_subset"): ["all"],
    ("kernel_cmdline", "absent"): ["iommu=off"],
    ("nccl_config", "extra_vars"): {"NCCL_DEBUG": "WARN"},
    ("nccl_config", "socket_ifname"): "eth0",
    ("nccl_config", "path"): "/etc/nccl.conf",
    ("nfs_mounts", "volumes"): [{"path": "/mnt/nfs-rdma", "server": "10.77.0.10", "export": "/srv/nfs", "vers": "4.1",
                                 "options": ["hard"], "remoteports": "10.0.0.1-10.0.0.4",
                                 "localports": "ens1np0~ens2np0", "state": "present"}],
    ("pcie_acs", "bridges"): ["0000:15:01.0"],
    ("pcie_acs", "clear"): ["ReqRedir"],
    ("pcie_acs", "endpoints"): [{"gpu": "0000:18:00.0", "nic": "0000:19:00.0"}],
    ("rail_sysctl", "routing_gateways"): {"ens1np0": "10.0.0.1"},
    ("rdma_cm_tos", "devices"): ["mlx5_0"],
    ("vendor_nfs_build", "builder_extra_packages"): ["make"],
    ("vendor_nfs_build", "builder_sources"): ["deb file:/srv/mirror bookworm main"],
    ("vendor_nfs_build", "builder_image"): "localhost/gpufabric-builder:1",
    ("vendor_nfs_build", "builder_base_image"): "localhost/ubuntu:24.04",
    ("vendor_nfs_build", "builder_containerfile"): "/etc/gpufabric/Containerfile",
    ("vendor_nfs_build", "builder_mirror"): "file:/srv/mirror",
    ("vendor_nfs_build", "builder_suite"): "bookworm",
    ("vendor_nfs_build", "podman_conf_dir"): "/etc/containers",
    ("vendor_nfs_build", "required_modules"): ["nvidia-fs"],
    ("vendor_nfs_build", "signing_cert"): "/etc/keys/signing.crt",
    ("vendor_nfs_build", "signing_key"): "/etc/keys/signing.key",
    ("vendor_nfs_proof", "other_modules"): ["rpcrdma"],
    ("vendor_nfs_proof", "require_loaded"): ["nvidia_fs"],
    ("vendor_nfs_proof", "version"): "2.17.5",
}

# (module, option path) -> hostile ids that are valid text for that option (everything else must fail); PROOF
# checks the escaping in what the module wrote
TEXT_OK = ("triple-quote", "command-substitution", "backtick", "percent", "single-quote", "double-quote",
           "semicolon", "dotdot")
TEXT = TEXT_OK + ("tab", "newline", "cr", "trailing-newline")
# NUL and DEL are refused in any text option (inputs.guard) before a report is built
NODE_DATA_OK = ("newline", "cr", "tab", "triple-quote", "command-substitution", "backtick",
                "percent", "single-quote", "double-quote", "semicolon", "dotdot", "trailing-newline")
ALLOWED = {
    # a node's data is the node's business: a value that breaks its shape makes that node an error of the report,
    # which is still written for the fleet (fabric_report/fleet_report, report.assess_each)
    ("fabric_report", "nodes{value}"): NODE_DATA_OK,
    ("fleet_report", "nodes{value}"): NODE_DATA_OK,
    # read-only: the values are only compared with the node's counters and returned, never written anywhere
    ("fabric_counters", "errors{key}"): TEXT_OK,
    ("fabric_counters", "errors{value}"): TEXT_OK,
    # report text: the Prometheus renderer escapes label values and HELP text (prom.escape_label_value)
    ("fabric_metrics", "concerns{value}"): TEXT,
    # controller-side reports: titles and node names are text, JSON-encoded and HTML-escaped; dest is a
    # directory the controller opens (playbook_dir/../reports), never written into a file
    ("fabric_report", "title"): TEXT_OK,
    ("fabric_report", "dest"): TEXT_OK,
    ("fabric_report", "nodes{key}"): TEXT_OK,
    ("fleet_report", "title"): TEXT_OK,
    ("fleet_report", "dest"): TEXT_OK,
    ("fleet_report", "nodes{key}"): TEXT_OK,
    # what the play targeted (its host pattern, the inventory's host names, --limit): text in the reports' coverage
    ("fabric_report", "scope.pattern"): TEXT_OK,
    ("fabric_report", "scope.inventory_hosts"): TEXT_OK,
    ("fabric_report", "scope.limit"): TEXT_OK,
    ("fleet_report", "scope.pattern"): TEXT_OK,
    ("fleet_report", "scope.inventory_hosts"): TEXT_OK,
    ("fleet_report", "scope.limit"): TEXT_OK,
    # read-only: the one-call check hands the desired values to the concern modules' code in check mode, which
    # refuses a bad one as that concern's error (see PROOF); nothing is written. (A renamed key is a missing one:
    # the module fails naming it.)
    ("fabric_check", "desired{value}"): TEXT_OK,
    # nccl.conf is NCCL's KEY=VALUE file, one variable a line, the value the rest of the line (no shell): any
    # printable value is itself there (NCCL_DEBUG_FILE=/tmp/nccl.%h.%p is a real one)
    ("nccl_config", "extra_vars{value}"): TEXT_OK,
    # the controller's judge of the validation suite: as fabric_report, a node's document is the node's business
    # (a malformed one is that node's error in the report), node names and the title are report text, and the two
    # directories are the controller's own
    ("validate_judge", "nodes{key}"): TEXT_OK,
    ("validate_judge", "nodes{value}"): NODE_DATA_OK,
    ("validate_judge", "earlier{key}"): TEXT_OK,
    ("validate_judge", "earlier{value}"): NODE_DATA_OK,
    ("validate_judge", "title"): TEXT_OK,
    ("validate_judge", "dest"): TEXT_OK,
    ("validate_judge", "baseline_dir"): TEXT_OK,
}
XFAIL = {}


class _Spec(Exception):
    pass


def argument_spec(name):
    """The argument spec a module passes to AnsibleModule, captured from its main()."""
    module = importlib.import_module(PKG + name)

    def capture(self, argument_spec, **_kw):
        raise _Spec(argument_spec)

    orig = basic.AnsibleModule.__init__
    basic.AnsibleModule.__init__ = capture
    try:
        module.main()
    except _Spec as e:
        return e.args[0]
    finally:
        basic.AnsibleModule.__init__ = orig
    raise AssertionError("%s.main() did not construct an AnsibleModule" % name)


def string_targets(spec, prefix=""):
    """(path, kind) of every string place below ``spec``: kind str, list (element 0), dict (free-form), sub."""
    out = []
    for opt in sorted(spec):
        o = spec[opt]
        t = o.get("type", "str")
        path = prefix + opt
        if t in ("str", "path", "raw"):
            out.append((path, "str"))
        elif t == "list" and o.get("elements", "str") in ("str", "path", "raw"):
            out.append((path, "list"))
        elif t == "list" and o.get("elements") == "dict" and "options" in o:
            out.extend((p, k) for p, k in string_targets(o["options"], path + "[0]."))
        elif t == "dict" and "options" in o:
            out.extend(string_targets(o["options"], path + "."))
        elif t == "dict":
            out.extend([(path + "{key}", "dict"), (path + "{value}", "dict")])
    return out


def _params():
    out = []
    for name in module_names():
        for path, kind in string_targets(argument_spec(name)):
            for hid, _f in HOSTILE:
                marks = []
                if name in XFAIL and path.startswith(("builder_", "cache_dir", "podman_conf_dir",
                                                      "required_modules")) and hid not in CONTROL:
                    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[name])]
                out.append(pytest.param(name, path, kind, hid, marks=marks, id="%s-%s-%s" % (name, path, hid)))
    return out


def test_every_module_has_string_options_in_the_table():
    names = set(p.values[0] for p in _params())
    assert names == set(module_names()), sorted(set(module_names()) - names)


@pytest.fixture(scope="module")
def work(template, tmp_path_factory):  # noqa: F811
    """One copy of the drifted node for all cases: a case must leave it as it was, and when one did not (it
    failed, or a value it accepts wrote a file), the next case gets a fresh copy. The tree is hashed once per case,
    after the module ran: that hash is the next case's "before" (``state``); a case that stopped before hashing
    leaves ``state`` unknown, and the next case starts from a fresh copy."""
    top = str(tmp_path_factory.mktemp("hostile"))
    bindir = os.path.join(top, "bin")
    os.makedirs(bindir)
    for tool, (mod, func, argv0) in sorted(sim_runtime.WRAPPERS.items()):
        path = os.path.join(bindir, tool)
        with open(path, "w") as f:
            f.write(sim_runtime.render_wrapper(sys.executable, mod, func, argv0))
        os.chmod(path, 0o755)
    w = {"template": template, "root": os.path.join(top, "root"), "bindir": bindir, "args": {}}
    _fresh(w)
    return w


def _fresh(w):
    if os.path.lexists(w["root"]):
        shutil.rmtree(w["root"])
    shutil.copytree(w["template"][0], w["root"], symlinks=True)
    node = {"root": w["root"], "manifest": w["template"][1]}
    w["args"] = dict((name, CASES[name].args(node)) for name in module_names())
    w["hash"] = w["state"] = sim_runtime.tree_stamp(w["root"])


@pytest.fixture
def node(work, monkeypatch):
    if work["state"] != work["hash"]:
        _fresh(work)
    # unknown until this case hashes the tree after its module ran (node_after)
    work["state"] = None
    monkeypatch.setenv("GPUFABRIC_SYSROOT", work["root"])
    monkeypatch.setenv("PATH", work["bindir"] + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
    return {"root": work["root"], "manifest": work["template"][1], "args": work["args"], "work": work}


def node_after(node):
    """The node's tree stamp now (runtime.tree_stamp), which the next case starts from."""
    node["work"]["state"] = sim_runtime.tree_stamp(node["root"])
    return node["work"]["state"]


def _base(name, opt, spec, args, root):
    if (name, opt) in BASE:
        v = BASE[(name, opt)]
        return json.loads(json.dumps(v).replace("{root}", root))
    if opt in args:
        return args[opt]
    return spec[opt].get("default")


def _inject(name, spec, args, path, kind, hostile, root):
    """``args`` with the hostile value at ``path``; returns (args, the option named in the message)."""
    args = json.loads(json.dumps(args))
    if "." in path and not path.endswith(("{key}", "{value}")):
        top, rest = path.split(".", 1)
        top = top.replace("[0]", "")
        base = _base(name, top, spec, args, root)
        base = json.loads(json.dumps(base))
        holder = base[0] if isinstance(base, list) else base
        sub = holder[rest]
        holder[rest] = [hostile(sub[0])] + sub[1:] if isinstance(sub, list) else hostile(sub)
        args[top] = base
        return args, rest
    opt = path.replace("{key}", "").replace("{value}", "")
    base = _base(name, opt, spec, args, root)
    assert base is not None, "no valid value for %s %s: add one to BASE" % (name, opt)
    if kind == "str":
        args[opt] = hostile(str(base))
    elif kind == "list":
        assert base, "no valid value for %s %s: add one to BASE" % (name, opt)
        args[opt] = [hostile(str(base[0]))] + list(base[1:])
    elif path.endswith("{key}"):
        k = sorted(base)[0]
        base = dict(base)
        base[hostile(k)] = base.pop(k)
        args[opt] = base
    else:
        args[opt] = _deep_inject(base, hostile)
    return args, opt


def _deep_inject(value, hostile):
    """The first string leaf of a nested value, made hostile."""
    if isinstance(value, str):
        return hostile(value)
    if isinstance(value, dict):
        value = dict(value)
        for k in sorted(value):
            if isinstance(value[k], (str, dict, list)):
                value[k] = _deep_inject(value[k], hostile)
                return value
        value["x"] = hostile("x")
        return value
    if isinstance(value, list) and value:
        return [_deep_inject(value[0], hostile)] + value[1:]
    return hostile("x")


@pytest.mark.parametrize("name,path,kind,hid", _params())
def test_hostile_value_fails_before_anything_is_touched(name, path, kind, hid, node, monkeypatch):
    module = importlib.import_module(PKG + name)
    spec = argument_spec(name)
    args = node["args"][name]
    hostile = dict(HOSTILE)[hid]
    bad, opt = _inject(name, spec, args, path, kind, hostile, node["root"])
    # the fresh copy's hash, or the previous case's "after" (the same tree: nothing ran in between)
    before = node["work"]["hash"]
    res = run_module(module, bad, monkeypatch=monkeypatch)
    after = node_after(node)
    allowed = hid in ALLOWED.get((name, path), ())
    if allowed:
        assert not res.get("failed"), res.get("msg")
        PROOF.get(name, _read_only)(node, bad, path, hostile, res, before, after)
        return
    assert res.get("failed"), "%s accepted %s=%r" % (name, path, bad.get(opt, bad))
    piece = hostile("")
    named = opt.split("[")[0] in res["msg"] or piece in res["msg"] or repr(piece)[1:-1] in res["msg"]
    assert named, "the message names neither %s nor the value: %s" % (opt, res["msg"])
    assert after == before, "%s changed the node before refusing %s" % (name, path)


def _read_only(node, args, option, hostile, res, before, after):
    assert after == before, "a read-only module changed the node"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _report_files(node, args, option, hostile, res, before, after):
    """JSON holds the value exactly; HTML has it escaped, never raw; Markdown has it escaped, on one line."""
    piece = hostile("")
    assert res.get("files"), res
    if option == "nodes{value}":
        nodes = res["report"]["nodes"]
        assert sorted(nodes) == sorted(args["nodes"])
        for host, n in nodes.items():
            unusable = n["errors"] and n["errors"][0].startswith("node data unusable: ") and host in n["errors"][0]
            assert not n["errors"] or unusable, n["errors"]
        return
    if option.startswith("scope."):
        full = args["scope"][option.split(".", 1)[1]]
        full = full[0] if isinstance(full, list) else full
    else:
        full = args["title"] if option == "title" else next((k for k in args.get("nodes", {}) if piece in k), None)
    for f in res["files"]:
        path = f if isinstance(f, str) else f.get("path")
        if option == "dest":
            # a directory the controller opens, taken as it is: the files are in it
            assert os.path.realpath(os.path.dirname(path)) == os.path.realpath(args["dest"]), (path, args["dest"])
            continue
        with open(path) as fh:
            text = fh.read()
        if path.endswith(".json") and option != "title":
            assert full in set(_strings(json.loads(text))), "%s lost %r" % (path, full)
        elif path.endswith(".html"):
            assert html.escape(full, quote=True) in text, "%s lacks %r escaped" % (path, full)
            if html.escape(full, quote=True) != full:
                assert full not in text, "%s has %r unescaped" % (path, full)
        elif path.endswith(".md"):
            # escaped as literal Markdown text (markdown.inline), on one line
            assert any(markdown.inline(full) in line for line in text.splitlines()), \
                "%s lacks %r escaped on one line" % (path, full)
            for line in text.splitlines():
                if line.startswith("|"):
                    assert line.rstrip().endswith("|"), "%s: a table row was split: %r" % (path, line)


def _judge_files(node, args, option, hostile, res, before, after):
    """validate_judge: every node judged with a status and a reason; the reports as fabric_report's (JSON exact,
    Markdown escaped on one line, in dest)."""
    assert sorted(res["statuses"]) == sorted(args["nodes"]), res["statuses"]
    for st in res["statuses"].values():
        assert st["status"] in ("ok", "drift", "error", "not_checked") and st["reason"], st
    if option in ("nodes{value}", "earlier{key}", "earlier{value}", "baseline_dir"):
        return
    _report_files(node, args, option, hostile, res, before, after)


def _prom_file(node, args, option, hostile, res, before, after):
    """Every line of the textfile is a comment or a sample: no value broke out of its label or HELP text."""
    sample = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? \S+\Z')
    path = os.path.join(node["root"], res["path"].lstrip("/"))
    assert os.path.exists(path), res
    with open(path) as f:
        for line in f.read().splitlines():
            assert line.startswith("# ") or sample.match(line), "%s: %r" % (path, line)


def _nccl_conf(node, args, option, hostile, res, before, after):
    with open(os.path.join(node["root"], "etc/nccl.conf")) as f:
        lines = f.read().splitlines()
    assert "NCCL_DEBUG=WARN%s" % hostile("") in lines, lines


def _check_result(node, args, option, hostile, res, before, after):
    """fabric_check: nothing written, and every concern has a status of the model (a refused value is an error
    with a reason, never a crash)."""
    assert after == before, "the read-only check changed the node"
    assert res["changed"] is False and res["concerns"], res
    for name, doc in res["concerns"].items():
        assert doc["status"] in ("ok", "drift", "error", "not_checked", "not_applicable"), (name, doc)
        assert doc["status"] == "ok" or doc["reason"], (name, doc)


PROOF = {"fabric_check": _check_result, "fabric_report": _report_files, "fleet_report": _report_files, "fabric_metrics": _prom_file,
         "nccl_config": _nccl_conf, "validate_judge": _judge_files}
