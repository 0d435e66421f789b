# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit files of the simulated node, looked up as systemd does (services.py's systemctl acts on them).

The first entry of a unit's name in ``UNIT_DIRS`` order wins; a symlink to ``/dev/null`` or an empty file masks
it; ``a@b.service`` without a file of its own is an instance of ``a@.service``; specifiers are resolved as
systemd does (``resolve_specifiers``); enablement is read from the ``.wants``/``.requires`` links. Also the node's
runtime unit state (``run/gpufabric-sim/systemd.json``) and the journal of mutating actions.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import re

from gpufabric_sim import bootsim

UNIT_DIRS = ("etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system",
             "usr/lib/systemd/system", "lib/systemd/system")


def sysroot():
    root = os.environ.get("GPUFABRIC_SYSROOT")
    if not root or not os.path.isdir(root) or os.path.abspath(root) == "/":
        raise SystemExit("gpufabric-sim: GPUFABRIC_SYSROOT must name a simulated node's root")
    return os.path.abspath(root)


def journal(root, line):
    d = os.path.join(root, "var", "lib", "gpufabric-sim")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "actions.log"), "a") as f:
        f.write(line.rstrip("\n") + "\n")


def _state_path(root):
    return os.path.join(root, "run", "gpufabric-sim", "systemd.json")


def load_state(root):
    try:
        with open(_state_path(root)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    state.setdefault("loaded", {})
    state.setdefault("units", {})
    return state


def save_state(root, state):
    path = _state_path(root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.rename(tmp, path)


def unit_name(name):
    return name if "." in name else name + ".service"


def is_mask(path):
    """A mask: a symlink to /dev/null or an empty file."""
    if os.path.islink(path):
        return os.readlink(path) == "/dev/null"
    return os.path.isfile(path) and os.path.getsize(path) == 0


def _entry(root, name):
    """The entry of ``name`` that systemd uses: the first one in search path order (a dangling symlink is
    skipped)."""
    for d in UNIT_DIRS:
        p = os.path.join(root, d, name)
        if is_mask(p) or os.path.isfile(p):
            return p
    return None


def _find_file(root, name):
    p = _entry(root, name)
    return None if p is None or is_mask(p) else p


def mask_of(root, unit):
    """Host path of the mask in effect for ``unit`` (its own name, then its template's), or None."""
    for name in [unit] + ([template_of(unit)] if template_of(unit) else []):
        p = _entry(root, name)
        if p is not None:
            return "/" + os.path.relpath(p, root) if is_mask(p) else None
    return None


def split_instance(unit):
    """(prefix, instance, suffix) of an instance name ``prefix@instance.suffix``, else None."""
    base, dot, suffix = unit.rpartition(".")
    if not dot or "@" not in base:
        return None
    prefix, instance = base.split("@", 1)
    if not prefix or not instance:
        return None
    return prefix, instance, suffix


def template_of(unit):
    """``a@.service`` for ``a@b.service``; None when ``unit`` is not an instance name."""
    parts = split_instance(unit)
    return "%s@.%s" % (parts[0], parts[2]) if parts else None


def find_unit(root, unit):
    """The unit file of ``unit``: its own file, else (for ``a@b.service``) the template ``a@.service``."""
    path = _find_file(root, unit)
    if path is None and template_of(unit):
        path = _find_file(root, template_of(unit))
    return path


def unit_unescape(text):
    """systemd's unit name unescaping: ``-`` is ``/``, ``\\xNN`` a byte."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "-":
            out += b"/"
        elif text.startswith("\\x", i) and re.match(r"[0-9a-fA-F]{2}$", text[i + 2:i + 4]):
            out.append(int(text[i + 2:i + 4], 16))
            i += 3
        else:
            out += text[i].encode("utf-8")
        i += 1
    return out.decode("utf-8", "replace")


def _first_line(root, rel):
    try:
        with open(os.path.join(root, rel)) as f:
            return f.readline().strip()
    except OSError:
        return ""


def specifier_table(root, unit):
    """The values of the unit specifiers this emulator resolves for ``unit``."""
    base = unit.rpartition(".")[0] or unit
    parts = split_instance(unit)
    prefix, instance = (parts[0], parts[1]) if parts else (base, "")
    return {"i": instance, "I": unit_unescape(instance), "n": unit, "N": base, "p": prefix,
            "P": unit_unescape(prefix), "m": _first_line(root, "etc/machine-id"),
            "H": _first_line(root, "etc/hostname"), "t": "/run"}


_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]*$")


def _quoted(value, quote):
    """``value`` as one literal piece of a shell-like word at a place with the given open quote."""
    if quote == "'":
        return value.replace("'", "'\"'\"'")
    if quote == '"':
        return value.replace("\\", "\\\\").replace('"', '\\"')
    return value if _SAFE.match(value) else "'" + value.replace("'", "'\"'\"'") + "'"


def resolve_specifiers(value, table, mode="raw"):
    """Replace the ``%x`` specifiers of a unit setting.

    systemd resolves specifiers in each word after splitting, so a value never splits or unescapes.
    ``mode="shell"`` (Environment=, split later with shell-like quoting) quotes substituted values for
    where they land; ``mode="exec"`` (Exec*=, for ``bootsim.parse_exec``) also keeps ``%%`` and doubles
    each ``%`` of a value, since parse_exec turns ``%%`` into ``%`` after splitting.
    """
    out = []
    quote = None
    i = 0
    while i < len(value):
        c = value[i]
        if c == "%":
            if i + 1 >= len(value):
                raise ValueError("a lone '%%' at the end of %r" % value)
            spec = value[i + 1]
            if spec == "%":
                out.append("%%" if mode == "exec" else "%")
            elif spec in table:
                v = table[spec].replace("%", "%%") if mode == "exec" else table[spec]
                out.append(_quoted(v, quote) if mode != "raw" else v)
            else:
                raise ValueError("unknown specifier %%%s in %r" % (spec, value))
            i += 2
            continue
        out.append(c)
        if mode != "raw":
            if c == "\\" and quote != "'" and i + 1 < len(value):
                out.append(value[i + 1])
                i += 1
            elif quote is None and c in "'\"":
                quote = c
            elif c == quote:
                quote = None
        i += 1
    return "".join(out)


SPECIFIER_KEYS = {"Unit": ("Description",), "Service": ("EnvironmentFile",)}


def read_unit_sections(root, unit, path):
    """Parsed sections of ``unit`` from ``path`` (its file or its template) with drop-ins and specifiers."""
    sections = bootsim.read_unit(path)
    if os.path.basename(path) != unit:
        for d in UNIT_DIRS:
            for dropin in sorted(glob.glob(os.path.join(root, d, unit + ".d", "*.conf"))):
                with open(dropin) as f:
                    for sec, items in bootsim.parse_unit_text(f.read()).items():
                        sections.setdefault(sec, []).extend(items)
    table = specifier_table(root, unit)
    out = {}
    for sec, items in sections.items():
        resolved = []
        for k, v in items:
            if sec == "Service" and k.startswith("Exec"):
                v = resolve_specifiers(v, table, "exec")
            elif sec == "Service" and k == "Environment":
                v = resolve_specifiers(v, table, "shell")
            elif k in SPECIFIER_KEYS.get(sec, ()):
                v = resolve_specifiers(v, table)
            resolved.append((k, v))
        out[sec] = resolved
    return out


def _file_hash(path):
    h = hashlib.sha256()
    for p in [path] + sorted(glob.glob(path + ".d/*.conf")):
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


CONFIG_DIR = "etc/systemd/system"
RUNTIME_DIR = "run/systemd/system"


def wants_links(root, unit, config=CONFIG_DIR):
    """Host-absolute paths of the enablement symlinks of ``unit`` below ``config`` (/etc or /run)."""
    out = []
    base = os.path.join(root, config)
    for d in sorted(glob.glob(os.path.join(base, "*.wants")) + glob.glob(os.path.join(base, "*.requires"))):
        link = os.path.join(d, unit)
        if os.path.islink(link):
            out.append("/" + os.path.relpath(link, root))
    return out


def enabled_units(root):
    """Units enabled in <root>/etc/systemd/system/*.wants|*.requires (and /run's), sorted, without duplicates;
    masked ones are left out (systemd does not start them)."""
    units = set()
    for config in (CONFIG_DIR, RUNTIME_DIR):
        base = os.path.join(root, config)
        for d in glob.glob(os.path.join(base, "*.wants")) + glob.glob(os.path.join(base, "*.requires")):
            for name in os.listdir(d):
                if os.path.islink(os.path.join(d, name)) and not mask_of(root, name):
                    units.add(name)
    return sorted(units)


def unit_file_state(root, unit, sections=None):
    """What ``systemctl is-enabled`` prints for ``unit``: enabled, enabled-runtime, static, disabled, masked,
    masked-runtime or not-found."""
    mask = mask_of(root, unit)
    if mask:
        return "masked-runtime" if mask.startswith("/run/") else "masked"
    path = find_unit(root, unit)
    if not path:
        return "not-found"
    if wants_links(root, unit):
        return "enabled"
    if wants_links(root, unit, RUNTIME_DIR):
        return "enabled-runtime"
    sec = sections if sections is not None else bootsim.read_unit(path)
    if not (bootsim.unit_values(sec, "Install", "WantedBy") or bootsim.unit_values(sec, "Install", "RequiredBy")):
        return "static"
    return "disabled"
