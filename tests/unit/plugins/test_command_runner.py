# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one command runner (module_utils/host/runner.py): what it does, and that nothing else in plugins/ runs a
command or sets the locale on its own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.host import runner as rn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(REPO, "plugins")
RUNNER = os.path.join(PLUGINS, "module_utils", "host", "runner.py")
# methods that hand run_command on to the backend they wrap, unchanged (the AnsibleModule stand-ins)
FORWARDERS = {"run_command"}
LOCALE_VARS = {"LC_ALL", "LANG", "LC_MESSAGES", "LC_CTYPE", "LANGUAGE"}


class FakeBackend(object):
    """AnsibleModule's two methods, recording what the runner asked for."""

    def __init__(self, bins, fail_missing=False):
        self.bins = bins
        self.calls = []
        self.lookups = []
        self.fail_missing = fail_missing

    def get_bin_path(self, name, required=False, opt_dirs=None):
        self.lookups.append((name, required, tuple(opt_dirs or ())))
        if name not in self.bins and required and self.fail_missing:
            raise RuntimeError("fail_json: %s missing" % name)
        return self.bins.get(name)

    def run_command(self, args, environ_update=None, check_rc=False, data=None):
        self.calls.append({"args": list(args), "env": dict(environ_update or {}), "check_rc": check_rc, "data": data})
        return 0, "out", ""


def _py_files():
    for d, _dirs, files in os.walk(PLUGINS):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def _offences(path):
    """(line, what) of every command run or locale set outside the runner."""
    tree = ast.parse(open(path).read(), path)
    found = []
    forwarders = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in FORWARDERS:
            forwarders.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in forwarders:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "run_command":
                found.append((node.lineno, "calls run_command"))
            if isinstance(f, ast.Attribute) and f.attr in ("Popen", "run", "check_output", "call") and \
                    isinstance(f.value, ast.Name) and f.value.id == "subprocess":
                found.append((node.lineno, "calls subprocess.%s" % f.attr))
            for kw in node.keywords:
                if kw.arg in LOCALE_VARS:
                    found.append((node.lineno, "sets %s" % kw.arg))
        if isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and k.value in LOCALE_VARS:
                    found.append((node.lineno, "sets %s" % k.value))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.split("=", 1)[0] in LOCALE_VARS and "=" in node.value:
            found.append((node.lineno, "sets %s" % node.value))
    return found


def test_no_command_is_run_outside_the_runner():
    bad = []
    for path in _py_files():
        if path == RUNNER:
            continue
        bad.extend("%s:%d %s" % (os.path.relpath(path, REPO), line, what) for line, what in _offences(path))
    assert not bad, "commands run or the locale set outside module_utils/host/runner.py:\n" + "\n".join(bad)


@pytest.mark.parametrize("src,want", [
    ('module.run_command(["x"])', "calls run_command"),
    ('subprocess.Popen(["x"])', "calls subprocess.Popen"),
    ('env = {"LC_ALL": "C"}', "sets LC_ALL"),
    ('dict(os.environ, LANG="C")', "sets LANG"),
    ('argv = ["env", "-i", "LC_ALL=C"]', "sets LC_ALL=C"),
])
def test_the_guard_finds_each_kind(tmp_path, src, want):
    p = tmp_path / "m.py"
    p.write_text(src + "\n")
    assert [w for _l, w in _offences(str(p))] == [want]


def test_the_guard_leaves_forwarders_alone(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("class M:\n    def run_command(self, args, **kw):\n        return self._r.run_command(args, **kw)\n")
    assert _offences(str(p)) == []


@pytest.mark.parametrize("argv,env,want_args,want_env", [
    (["dcb", "-j", "app", "show", "dev", "eth0"], None, ["/sbin/dcb", "-j", "app", "show", "dev", "eth0"],
     {"LC_ALL": "C", "LANG": "C"}),
    (["/opt/x/tool", "--v"], None, ["/opt/x/tool", "--v"], {"LC_ALL": "C", "LANG": "C"}),
    (["ip", "link"], {"FOO": "1"}, ["/sbin/ip", "link"], {"LC_ALL": "C", "LANG": "C", "FOO": "1"}),
    (["ip", 7], {"LC_ALL": "POSIX"}, ["/sbin/ip", "7"], {"LC_ALL": "POSIX", "LANG": "C"}),
])
def test_runs_in_the_c_locale_with_the_binary_looked_up(argv, env, want_args, want_env):
    b = FakeBackend({"dcb": "/sbin/dcb", "ip": "/sbin/ip"})
    assert rn.CommandRunner(b)(argv, env=env) == (0, "out", "")
    assert b.calls == [{"args": want_args, "env": want_env, "check_rc": False, "data": None}]


def test_runner_environment_then_call_environment():
    b = FakeBackend({"podman": "/usr/bin/podman"})
    run = rn.CommandRunner(b, environ_update={"TMPDIR": "/var/tmp", "A": "1"})
    run(["podman", "info"], env={"A": "2"}, data="in")
    assert b.calls[0]["env"] == {"LC_ALL": "C", "LANG": "C", "TMPDIR": "/var/tmp", "A": "2"}
    assert b.calls[0]["data"] == "in"


def test_missing_program_answers_127_unless_required():
    b = FakeBackend({}, fail_missing=True)
    rc, out, err = rn.CommandRunner(b)(["nvidia-smi", "nvlink", "-s"])
    assert (rc, out) == (127, "") and "nvidia-smi" in err and not b.calls
    with pytest.raises(RuntimeError, match="nvidia-smi missing"):
        rn.CommandRunner(b, required=True)(["nvidia-smi"])


def test_binaries_are_looked_up_once_per_runner():
    b = FakeBackend({"dcb": "/sbin/dcb"})
    run = rn.CommandRunner(b, opt_dirs=["/opt/bin"])
    for _i in range(3):
        run(["dcb", "app", "show"])
    assert b.lookups == [("dcb", False, ("/opt/bin",))]
    assert run.bin_path("/usr/bin/env") == "/usr/bin/env"


def test_local_backend_runs_without_a_shell_in_the_c_locale(monkeypatch):
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    run = rn.local(environ_update={"GPUFABRIC_X": "y z"})
    rc, out, _err = run(["sh", "-c", 'printf "%s|%s|%s" "$LC_ALL" "$GPUFABRIC_X" "$1"', "sh", "a;b $(c)"])
    assert (rc, out) == (0, "C|y z|a;b $(c)")


def test_local_backend_stdin_closed_data_given_bytes_replaced():
    run = rn.local()
    assert run(["cat"]) == (0, "", "")
    assert run(["cat"], data="x\n")[1] == "x\n"
    assert run(["printf", "\\377ok"])[1] == u"\ufffdok"


def test_local_backend_failures():
    b = rn.LocalBackend(path="/nonexistent")
    assert rn.CommandRunner(b)(["sh", "-c", "true"])[0] in (0, 127)  # sh may be in an sbin directory
    assert rn.CommandRunner(rn.LocalBackend(path=""))(["no-such-program-gpufabric"])[0] == rn.RC_NOT_FOUND
    with pytest.raises(rn.CommandFailed) as e:
        rn.CommandRunner(rn.LocalBackend())(["sh", "-c", "echo no >&2; exit 3"], check_rc=True)
    assert e.value.result["rc"] == 3 and e.value.result["stderr"] == "no\n"
    with pytest.raises(rn.CommandFailed):
        rn.LocalBackend().get_bin_path("no-such-program-gpufabric", required=True)
