# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's module_utils import graph, read from the source (ast), for the layer and node payload tests.

Names are dotted paths below ``plugins/module_utils`` (``host.sysroot``); a package's ``__init__.py`` is empty.
``from P.concerns.dcb import plan`` is an edge to ``concerns.dcb.plan`` when that is a module, else to
``concerns.dcb`` (a name imported from the package). Imports inside functions count: they run too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

PKG = "ansible_collections.gpufabric.node.plugins.module_utils"
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "module_utils"))


def modules(root=ROOT):
    """{dotted name: file path} of every module_utils file."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if not f.endswith(".py"):
                continue
            if f == "__init__.py" and os.path.getsize(os.path.join(dirpath, f)) == 0:
                continue   # an empty package marker (ansible-test wants them empty): no code, no edges
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].replace(os.sep, ".")
            if rel.endswith("__init__"):
                rel = rel[:-len(".__init__")] if rel != "__init__" else ""
            out[rel] = os.path.join(dirpath, f)
    return out


def imports(path, known):
    """[(dotted target, lineno, guarded by try/except ImportError, absolute module name)] of one file."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    guarded_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        guarded_lines.add(n.lineno)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((_local(a.name, known), node.lineno, node.lineno in guarded_lines, a.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.append((None, node.lineno, False, "." * node.level + (node.module or "")))
                continue
            mod = node.module or ""
            base = _local(mod, known)
            if base is None:
                out.append((None, node.lineno, node.lineno in guarded_lines, mod))
                continue
            for a in node.names:
                sub = (base + "." if base else "") + a.name
                target = sub if sub in known else base
                out.append((target, node.lineno, node.lineno in guarded_lines, mod))
    return out


def _catches_import_error(handler):
    t = handler.type
    names = [t] if not isinstance(t, ast.Tuple) else list(t.elts)
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception") for n in names)


def _local(mod, known):
    """The dotted module_utils name of an absolute module name, or None when it is not one of ours."""
    if mod == PKG:
        return ""
    if mod.startswith(PKG + "."):
        return mod[len(PKG) + 1:]
    return None


def graph(root=ROOT):
    """{module: set of module_utils modules it imports}."""
    known = modules(root)
    return dict((name, set(t for t, _l, _g, _m in imports(path, known) if t is not None and t != name))
                for name, path in known.items())


def closure(g, starts):
    seen = set()
    todo = list(starts)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(g.get(n, ()))
        # importing a submodule runs every package __init__ above it
        parts = n.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in g:
                todo.append(parent)
    return seen


def cycles(g):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out
