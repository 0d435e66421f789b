# -*- coding: utf-8 -*-
"""The node payload (node_payload.NODE_PAYLOAD): what fabric_persist installs below lib_dir for the code that runs on
the node outside an Ansible module, with the node's Python, which has no Ansible.

- every import of every payload file is in the payload, the standard library, or an optional library imported under
  ``try``; nothing imports ``ansible``;
- the payload, installed as fabric_persist installs it into a temporary root, runs every node-side entry point
  (gpufabric-apply: the boot and the udev-triggered per-device run; gpufabric-evidence: the timer's run) with
  ``python3 -I -S``, which sees the standard library and that copy only;
- a payload without one of its files fails that run (the check can fail)."""
from __future__ import absolute_import, division, print_function

import importlib
import os
import subprocess
import sys

import desired_doc
import import_graph
import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import node_payload
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import evidence, install as persist, evidence_unit as persist_evidence
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_desired as nd

__metaclass__ = type

PKG = persist.PKG
MODULES = import_graph.modules()
LIB = "/usr/local/lib/gpufabric"
APPLY = "/usr/local/sbin/gpufabric-apply"
EVIDENCE = "/usr/local/sbin/gpufabric-evidence"
PROM = "/var/lib/node_exporter/textfile_collector/gpufabric-evidence.prom"   # no os-release: upstream's directory
# third-party libraries a payload file may use when the node has them, imported where their absence is handled
OPTIONAL = {"pyroute2": "python3-pyroute2 (per-rail routing)", "yaml": "python3-yaml (netplan definitions)"}
PYTHONS = [sys.executable] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]


def imports(name):
    """[(dotted module_utils name or None, line, inside a try that handles ImportError, module imported)] of
    payload file ``name`` (import_graph resolves ``from P.pkg import mod`` to the module)."""
    return import_graph.imports(MODULES[name], MODULES)


def test_every_import_of_the_payload_is_in_it_and_none_is_ansible():
    payload = set(node_payload.NODE_PAYLOAD)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    problems = []
    for name in sorted(payload):
        assert name in MODULES, "%s: no such module_utils file" % name
        for local, line, guarded, mod in imports(name):
            where = "%s:%d imports %s" % (name, line, mod)
            top = mod.split(".")[0]
            if local is not None:
                if local not in payload:
                    problems.append(where + ": not in the node payload (%s)" % (local or "the package"))
            elif top in ("ansible", "ansible_collections") or mod.startswith("."):
                problems.append(where + ": the node's Python has no Ansible")
            elif top in OPTIONAL:
                if not guarded:
                    problems.append(where + ": an optional library imported outside try/except ImportError")
            elif top not in stdlib:
                problems.append(where + ": neither the standard library nor an optional library")
    assert problems == []


def test_the_payload_is_what_the_entry_points_import():
    """No file more than the entry points reach: the closure of their imports (and of the package __init__ files
    above them) is the list, the list file itself included."""
    seen = import_graph.closure(import_graph.graph(), node_payload.ENTRY_POINTS) | {"node_payload"}
    assert sorted(seen) == sorted(node_payload.NODE_PAYLOAD)
    assert persist_evidence.ENTRY in node_payload.ENTRY_POINTS and "boot.applier" in node_payload.ENTRY_POINTS


def test_a_file_that_cannot_be_imported_is_named():
    with pytest.raises(persist.PersistError, match="module_utils.no_such_file of the node payload cannot be imported"):
        persist.module_utils_sources(node_payload.NODE_PAYLOAD + ("no_such_file",))


def test_a_file_not_loaded_yet_is_imported_by_name():
    """What the module reading the payload has not imported yet is imported (AnsiballZ shipped it with the entry
    points); the source is the module's own."""
    calls = []
    mods = {}

    def importer(name):
        calls.append(name)
        return importlib.import_module(name)

    out = persist.module_utils_sources(("host.sysroot",), modules=mods, importer=importer)
    assert calls == [PKG + ".host.sysroot"]
    with open(MODULES["host.sysroot"]) as f:
        assert out == {"host.sysroot": f.read()}


# --- the payload on a node -----------------------------------------------------------------------------

def write(root, path, content, mode):
    real = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(real), mode=0o755, exist_ok=True)
    with open(real, "w") as f:
        f.write(content)
    os.chmod(real, mode)


def install(root, python, names):
    """The library copy of ``names`` and both scripts, as fabric_persist writes them, below ``root``."""
    for path, content in persist.lib_files(LIB, persist.module_utils_sources(names)).items():
        write(root, path, content, 0o644)
    write(root, APPLY, persist.render_script(python, APPLY, LIB), 0o755)
    write(root, EVIDENCE, persist.render_script(python, EVIDENCE, LIB, entry=persist_evidence.ENTRY,
                                                summary=persist_evidence.SUMMARY), 0o755)
    desired = nd.evidence_desired(desired_doc.resolve({"persistence_evidence": True}))
    write(root, evidence.DESIRED_FILE, evidence.desired_document(desired), 0o644)


def run(root, python, script, *args):
    """The installed script run by ``python -I -S``: no PYTHON* variable, no site-packages, no script directory, so
    the standard library and the library copy the script puts on sys.path are all it can import."""
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "GPUFABRIC_SYSROOT": root,
           "LC_ALL": "C"}
    return subprocess.run([python, "-I", "-S", os.path.join(root, script.lstrip("/"))] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                          check=False)


def run_entry_points(root, python):
    """[problem] of running every node-side entry point from the copy below ``root``, each as documented:
    --help; the boot run and the udev-triggered device run in check mode with nothing recorded (exit 0, nothing
    to do); the evidence timer's run against the desired state (exit 0, the textfile written, every core concern
    evaluated)."""
    problems = []

    def expect(res, what, rc, text):
        if res.returncode != rc or text not in res.stdout + res.stderr:
            tail = (res.stderr or res.stdout)[-600:]
            problems.append("%s: rc %d (want %d, %r): %s" % (what, res.returncode, rc, text, tail))

    expect(run(root, python, APPLY, "--help"), "gpufabric-apply --help", 0, "usage: gpufabric-apply")
    expect(run(root, python, APPLY, "--check", "--wait", "0"), "gpufabric-apply --check", 0, "nothing recorded")
    expect(run(root, python, APPLY, "--check", "--wait", "0", "--device", "mlx5_0"),
           "gpufabric-apply --device mlx5_0 --check", 0, "nothing recorded")
    expect(run(root, python, EVIDENCE, "--help"), "gpufabric-evidence --help", 0, "usage: gpufabric-evidence")
    res = run(root, python, EVIDENCE)
    expect(res, "gpufabric-evidence", 0, "gpufabric-evidence: wrote %s" % PROM)
    if res.returncode == 0:
        with open(os.path.join(root, PROM.lstrip("/"))) as f:
            text = f.read()
        if "one-call check failed" in res.stdout + res.stderr or 'concern="dcb"' not in text:
            problems.append("gpufabric-evidence did not evaluate the concerns: %s" % (res.stdout + res.stderr)[-600:])
    return problems


@pytest.fixture
def root(tmp_path):
    r = str(tmp_path / "node")
    os.mkdir(r, 0o755)
    return r


@pytest.mark.parametrize("python", PYTHONS)
def test_every_entry_point_runs_from_the_payload_alone(root, python):
    probe = subprocess.run([python, "-I", "-S", "-c", "import ansible"], stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
    assert probe.returncode == 1 and "No module named 'ansible'" in probe.stderr
    install(root, python, node_payload.NODE_PAYLOAD)
    assert run_entry_points(root, python) == []
    with open(os.path.join(root, PROM.lstrip("/"))) as f:
        assert 'gpufabric_concern_status{concern="persistence"' in f.read()


@pytest.mark.parametrize("missing", ["argspec", "concerns.state", "host.sysroot"])
def test_a_payload_without_one_of_its_files_fails(root, missing):
    install(root, sys.executable, tuple(n for n in node_payload.NODE_PAYLOAD if n != missing))
    problems = run_entry_points(root, sys.executable)
    print("\n".join(problems))
    assert problems and all("No module named" in p or "cannot import name" in p for p in problems), problems
    assert any(p.startswith("gpufabric-evidence:") for p in problems)
