# -*- coding: utf-8 -*-
"""module_utils is layered, and a layer imports only from the layers below it (docs/DEVELOPING.md).

From the bottom:

- base: the files directly in module_utils (the status model ``concern_model.py``, input checks, results,
  argspec, OS profiles, the node payload list); they import nothing of the collection but each other;
- host: access to the node (``host/``: sysroot, bounded reads, the node lock);
- discovery: what the node is (``discovery/``: PCI, rails, pairing, link and GPUDirect facts);
- validate: what the data-moving tools measured (``validate/``: their output parsers, the per-path verdicts, the
  baselines per hardware profile);
- vendor_nfs: the vendor NFS client pipeline (``vendor_nfs/``, its stages named in pipeline order);
- concerns: one package per concern (``concerns/<name>/``);
- check: the one-call check and the facts module's body (``check/``);
- report: the reports and the metrics renderer (``report/``), and the upgrade helpers (``upgrade/``);
- boot: what runs on the node at boot and from the timer (``boot/``: applier, state, guard, evidence, installer).

The import graph is read from the source (``import_graph``), imports inside functions included. The test fails on
any cycle, on any import from a higher layer that is not in ``UPWARD`` (each with the reason it still exists), on
an entry of ``UPWARD`` that no longer exists, and on more than 15 files directly in module_utils.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import import_graph

LAYERS = ("base", "host", "discovery", "validate", "vendor_nfs", "concerns", "check", "report", "boot")
PACKAGES = {"host": "host", "discovery": "discovery", "validate": "validate", "vendor_nfs": "vendor_nfs",
            "concerns": "concerns", "check": "check", "report": "report", "upgrade": "report", "boot": "boot"}

# imports from a higher layer that are known and not yet removed: (importer, imported) -> why
UPWARD = {}


def layer(name):
    if "." not in name:
        return "base"   # module_utils/x.py
    return PACKAGES[name.split(".")[0]]


def test_every_package_has_a_layer():
    unknown = sorted(n for n in import_graph.modules() if "." in n and n.split(".")[0] not in PACKAGES)
    assert unknown == []


def test_no_import_cycle():
    assert import_graph.cycles(import_graph.graph()) == []


def test_imports_go_only_downward():
    g = import_graph.graph()
    upward = set()
    for a in sorted(g):
        for b in sorted(g[a]):
            if LAYERS.index(layer(b)) > LAYERS.index(layer(a)):
                upward.add((a, b))
    assert sorted(upward - set(UPWARD)) == [], "imports from a higher layer"
    assert sorted(set(UPWARD) - upward) == [], "UPWARD lists imports that no longer exist: remove them"


def test_the_base_layer_is_small():
    base = sorted(n for n in import_graph.modules() if "." not in n and n)
    assert len(base) <= 15, base


def test_the_graph_reads_package_imports():
    """The reader resolves ``from P.pkg import mod`` to the module, so the tests above see real edges."""
    g = import_graph.graph()
    assert "host.sysroot" in g["discovery.topology"]
    assert "concern_model" in g["host.nodelock"]
    assert import_graph.cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_package_markers_are_empty():
    """ansible-test's empty-init (ansible-core 2.16 to 2.18, the compat tier): a module_utils __init__.py holds no
    code."""
    full = []
    for dirpath, _dirs, files in os.walk(import_graph.ROOT):
        if "__init__.py" in files and os.path.getsize(os.path.join(dirpath, "__init__.py")):
            full.append(dirpath)
    assert full == []
