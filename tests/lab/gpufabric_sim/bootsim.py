# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the simulated node's kernel, systemd and udev do at boot and at device registration.

Plain functions over a node's sysroot, no namespaces or processes, so they are unit-testable:

* kernel command line tokenising (``next_arg`` semantics: double quotes group, ``--`` ends kernel args),
* ``pci=disable_acs_redir=`` device matching with the kernel's own syntax (drivers/pci/pci.c
  ``pci_dev_str_match``: path form ``[dddd:]bb:dd.f[/dd.f]*`` walking upstream bridges, and
  ``pci:vvvv:dddd[:ssss:ssss]`` with 0 as wildcard; entries separated by ``;``),
* PCIe ACS control register access in the tree's 4 KiB config space files,
* IOMMU mode from the command line,
* systemd unit parsing (``ExecStart`` with prefixes and quoting, ``Environment``), udev rule parsing
  (``SUBSYSTEM``/``ACTION``/``KERNEL``/``ATTR{}``/``ENV{}`` matches, ``RUN`` with ``%k``/``$kernel``),
* ``sysctl.d`` parsing (only ``net.*`` keys are ever applied by the simulator: nothing else is namespaced).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import glob
import os
import re
import shlex

# --------------------------------------------------------------------------------------------
# kernel command line

PCI_ACS_EXT_CAP_ID = 0x000D
PCI_ACS_CAP = 0x04
PCI_ACS_CTRL = 0x06
PCI_ACS_SV = 0x01
PCI_ACS_RR = 0x04
PCI_ACS_CR = 0x08
PCI_ACS_EC = 0x20
ACS_REDIR_BITS = PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC


def cmdline_args(cmdline):
    """Split a kernel command line like the kernel's next_arg(): [(param, value-or-None)].

    Whitespace separates arguments unless inside double quotes; a quote pair around the value
    (or the whole argument) is removed; ``--`` ends the kernel's arguments (the rest goes to init).
    """
    args = []
    s = cmdline.strip()
    i = 0
    n = len(s)
    while i < n:
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        in_quote = False
        while i < n and (in_quote or not s[i].isspace()):
            if s[i] == '"':
                in_quote = not in_quote
            i += 1
        token = s[start:i]
        if token == "--":
            break
        if token.startswith('"'):
            token = token[1:]
            if token.endswith('"'):
                token = token[:-1]
        if "=" in token:
            param, value = token.split("=", 1)
            if value.startswith('"'):
                value = value[1:]
                if value.endswith('"'):
                    value = value[:-1]
            args.append((param, value))
        else:
            args.append((token, None))
    return args


def _param_eq(a, b):
    """The kernel's parameq(): '-' and '_' are the same in parameter names."""
    return a.replace("-", "_") == b.replace("-", "_")


def pci_options(cmdline):
    """Every ``pci=`` option in order, each ``pci=`` value split at ',' like pci_setup()."""
    opts = []
    for param, value in cmdline_args(cmdline):
        if param == "pci" and value is not None:
            opts.extend(o for o in value.split(",") if o)
    return opts


def disable_acs_redir_param(cmdline):
    """The value the kernel keeps for ``pci=disable_acs_redir=`` (the last one wins), or None."""
    found = None
    for opt in pci_options(cmdline):
        if opt.startswith("disable_acs_redir="):
            found = opt[len("disable_acs_redir="):]
    return found


def iommu_mode(cmdline):
    """'off', 'identity' or 'translated' as the command line selects (later arguments win).

    ``iommu=off``, ``intel_iommu=off`` and ``amd_iommu=off`` switch the IOMMU off; ``iommu=pt`` and
    ``iommu.passthrough=1`` select identity (passthrough) default domains; ``iommu=nopt``,
    ``iommu.passthrough=0`` select translated ones.
    """
    off = False
    passthrough = False
    for param, value in cmdline_args(cmdline):
        v = (value or "").lower()
        if param in ("intel_iommu", "amd_iommu"):
            opts = v.split(",")
            if "off" in opts:
                off = True
            elif "on" in opts:
                off = False
        elif param == "iommu":
            for opt in v.split(","):
                if opt == "off":
                    off = True
                elif opt in ("on", "force"):
                    off = False
                elif opt == "pt":
                    passthrough = True
                elif opt == "nopt":
                    passthrough = False
        elif _param_eq(param, "iommu.passthrough"):
            passthrough = v in ("1", "y", "yes", "on", "true")
    if off:
        return "off"
    return "identity" if passthrough else "translated"


def translated_type(cmdline):
    """Default domain type string of a translated IOMMU: DMA with iommu.strict=1, else DMA-FQ."""
    strict = None
    for param, value in cmdline_args(cmdline):
        if _param_eq(param, "iommu.strict"):
            strict = (value or "").lower() in ("1", "y", "yes", "on", "true")
    return "DMA" if strict else "DMA-FQ"


_HEX = re.compile(r"\s*(?:0[xX])?([0-9a-fA-F]+)")


def _scan_hex(s, pos):
    """Emulate one sscanf %x at pos: (value, new_pos) or (None, pos)."""
    m = _HEX.match(s, pos)
    if not m:
        return None, pos
    return int(m.group(1), 16), m.end()


def _scanf(s, fmt):
    """A tiny sscanf for formats made of %x and literal characters, ending in %c.

    Returns the list of converted values (the kernel compares the count) like sscanf does.
    """
    values = []
    pos = 0
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            conv = fmt[i + 1]
            i += 2
            if conv == "x":
                v, pos = _scan_hex(s, pos)
                if v is None:
                    return values
                values.append(v)
            elif conv == "c":
                if pos >= len(s):
                    return values
                values.append(s[pos])
                pos += 1
        else:
            if pos >= len(s) or s[pos] != fmt[i]:
                return values
            pos += 1
            i += 1
    return values


class PciDev(object):
    """What pci_dev_str_match needs of a device."""

    def __init__(self, bdf, vendor=0, device=0, subsystem_vendor=0, subsystem_device=0, upstream=None):
        dom, bus, devfn = bdf.split(":")
        slot, fn = devfn.split(".")
        self.bdf = bdf
        self.domain = int(dom, 16)
        self.bus = int(bus, 16)
        self.devfn = (int(slot, 16) << 3) | int(fn, 16)
        self.vendor = vendor
        self.device = device
        self.subsystem_vendor = subsystem_vendor
        self.subsystem_device = subsystem_device
        self.upstream = upstream  # PciDev of the upstream bridge, None on a root bus

    def __repr__(self):
        return "PciDev(%s)" % self.bdf


class ParamError(ValueError):
    pass


def pci_devfn(slot, fn):
    """PCI_DEVFN(): the kernel masks slot to 5 and function to 3 bits."""
    return ((slot & 0x1F) << 3) | (fn & 0x07)


def _match_path(dev, spec):
    """pci_dev_str_match_path: returns (matched: bool, rest) or raises ParamError."""
    end = spec.find(";")
    if end < 0:
        end = len(spec)
    wpath = spec[:end]
    rest = spec[end:]
    while True:
        p = wpath.rfind("/")
        if p < 0:
            break
        vals = _scanf(wpath[p:], "/%x.%x%c")
        if len(vals) != 2:
            raise ParamError("bad path element %r" % wpath[p:])
        if dev.devfn != pci_devfn(vals[0], vals[1]):
            return False, rest
        dev = dev.upstream
        if dev is None:
            return False, rest
        wpath = wpath[:p]
    vals = _scanf(wpath, "%x:%x:%x.%x%c")
    if len(vals) != 4:
        vals = _scanf(wpath, "%x:%x.%x%c")
        if len(vals) != 3:
            raise ParamError("bad device address %r" % wpath)
        seg, bus, slot, fn = 0, vals[0], vals[1], vals[2]
    else:
        seg, bus, slot, fn = vals
    return (seg == dev.domain and bus == dev.bus and dev.devfn == pci_devfn(slot, fn)), rest


def _match_ids(dev, spec):
    """The ``pci:vvvv:dddd[:ssss:ssss]`` form (spec without 'pci:')."""
    m = re.match(r"\s*(?:0[xX])?([0-9a-fA-F]+):\s*(?:0[xX])?([0-9a-fA-F]+)"
                 r"(?::\s*(?:0[xX])?([0-9a-fA-F]+):\s*(?:0[xX])?([0-9a-fA-F]+))?", spec)
    if not m:
        raise ParamError("bad id form %r" % spec)
    ids = [int(g, 16) & 0xFFFF if g is not None else 0 for g in m.groups()]
    vendor, device, svid, sdid = ids
    ok = ((not vendor or vendor == dev.vendor) and (not device or device == dev.device)
          and (not svid or svid == dev.subsystem_vendor) and (not sdid or sdid == dev.subsystem_device))
    return ok, spec[m.end():]


def pci_dev_str_match(dev, param):
    """True when the kernel would select ``dev`` for a ``disable_acs_redir=`` value.

    Walks the ';'- (or, after an id form, ',')-separated list like pci_disable_acs_redir(); a parse
    error stops the walk with no match (the kernel logs "Can't parse disable_acs_redir parameter").
    """
    p = param
    while p:
        try:
            if p.startswith("pci:"):
                ok, p = _match_ids(dev, p[4:])
            else:
                ok, p = _match_path(dev, p)
        except ParamError:
            return False
        if ok:
            return True
        if not p or p[0] not in ";,":
            return False
        p = p[1:]
    return False


# --------------------------------------------------------------------------------------------
# PCI tree of a sysroot


def _read_hex_attr(path):
    try:
        with open(path) as f:
            return int(f.read().strip(), 16)
    except (OSError, ValueError):
        return 0


def pci_devices(root):
    """{bdf: PciDev} for every device below <root>/sys/bus/pci/devices, upstream links resolved."""
    base = os.path.join(root, "sys", "bus", "pci", "devices")
    bdf_re = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
    devs = {}
    parents = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if not bdf_re.match(name):
            continue
        d = os.path.join(base, name)
        devs[name] = PciDev(name, _read_hex_attr(os.path.join(d, "vendor")),
                            _read_hex_attr(os.path.join(d, "device")),
                            _read_hex_attr(os.path.join(d, "subsystem_vendor")),
                            _read_hex_attr(os.path.join(d, "subsystem_device")))
        link = os.path.join(base, name)
        target = os.readlink(link) if os.path.islink(link) else ""
        parent = os.path.basename(os.path.dirname(target.rstrip("/")))
        parents[name] = parent if bdf_re.match(parent) else None
    for name, parent in parents.items():
        devs[name].upstream = devs.get(parent)
    return devs


def config_path(root, bdf):
    return os.path.join(root, "sys", "bus", "pci", "devices", bdf, "config")


def find_ext_cap(config, cap_id):
    """Offset of an extended capability in a config space image, or None."""
    pos = 0x100
    seen = set()
    while pos and pos + 4 <= len(config) and pos not in seen:
        seen.add(pos)
        header = int.from_bytes(config[pos:pos + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return pos
        pos = (header >> 20) & 0xFFC
    return None


def read_acs_ctrl(root, bdf):
    """ACS control register of a device, or None without ACS capability."""
    with open(config_path(root, bdf), "rb") as f:
        config = f.read()
    pos = find_ext_cap(config, PCI_ACS_EXT_CAP_ID)
    if pos is None:
        return None
    return int.from_bytes(config[pos + PCI_ACS_CTRL:pos + PCI_ACS_CTRL + 2], "little")


def write_acs_ctrl(root, bdf, value):
    """Write the ACS control register in place (like setpci); False without ACS capability."""
    path = config_path(root, bdf)
    with open(path, "r+b") as f:
        config = f.read()
        pos = find_ext_cap(config, PCI_ACS_EXT_CAP_ID)
        if pos is None:
            return False
        f.seek(pos + PCI_ACS_CTRL)
        f.write(int(value & 0xFFFF).to_bytes(2, "little"))
    return True


def boot_acs(root, enumeration_ctrl, cmdline):
    """Set every ACS control register as the kernel leaves it after boot.

    ``enumeration_ctrl``: {bdf: ctrl} as the kernel's ACS setup writes it (the topology's value);
    then ``pci=disable_acs_redir=`` clears RR|CR|EC on the devices it selects.
    Returns {bdf: value written}.
    """
    param = disable_acs_redir_param(cmdline)
    devs = pci_devices(root) if param else {}
    written = {}
    for bdf, ctrl in sorted(enumeration_ctrl.items()):
        value = ctrl
        if param and bdf in devs and pci_dev_str_match(devs[bdf], param):
            value &= ~ACS_REDIR_BITS
        if write_acs_ctrl(root, bdf, value):
            written[bdf] = value
    return written


# --------------------------------------------------------------------------------------------
# systemd units

EXEC_PREFIX_CHARS = "-@+!:|"


def parse_unit_text(text):
    """Parse a unit file into {section: [(key, value), ...]} keeping order and repeats."""
    sections = {}
    current = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        if current is None or "=" not in line:
            continue
        key, value = line.split("=", 1)
        sections[current].append((key.strip(), value.strip()))
    return sections


def read_unit(path):
    """Parse a unit file and its drop-ins (<unit>.d/*.conf in name order)."""
    with open(path) as f:
        sections = parse_unit_text(f.read())
    for dropin in sorted(glob.glob(path + ".d/*.conf")):
        with open(dropin) as f:
            for sec, items in parse_unit_text(f.read()).items():
                sections.setdefault(sec, []).extend(items)
    return sections


def unit_values(sections, section, key):
    """Values of a list-type setting: an empty assignment resets the list, like systemd."""
    out = []
    for k, v in sections.get(section, []):
        if k == key:
            if v == "":
                out = []
            else:
                out.append(v)
    return out


def unit_value(sections, section, key, default=None):
    vals = unit_values(sections, section, key)
    return vals[-1] if vals else default


def parse_exec(value):
    """Parse one Exec*= value: (argv, ignore_failure). Raises ValueError when empty or unbalanced.

    Prefixes ``-`` (failure ignored), ``@`` (argv[0] given separately), ``+``, ``!``, ``!!``, ``:``
    and ``|`` are understood; arguments are split with shell-like quoting; ``%%`` becomes ``%``.
    """
    v = value.strip()
    ignore = False
    at = False
    while v and v[0] in EXEC_PREFIX_CHARS:
        if v[0] == "-":
            ignore = True
        elif v[0] == "@":
            at = True
        v = v[1:]
    try:
        argv = shlex.split(v, posix=True)
    except ValueError as e:
        raise ValueError("cannot parse %r: %s" % (value, e))
    if not argv:
        raise ValueError("empty command line in %r" % value)
    argv = [a.replace("%%", "%") for a in argv]
    if at:
        if len(argv) < 2:
            raise ValueError("'@' needs a path and argv[0] in %r" % value)
        argv = [argv[0]] + argv[2:]
    return argv, ignore


def unit_environment(sections, root):
    """Environment= and EnvironmentFile= (resolved in the sysroot) of a unit's [Service]."""
    env = {}
    for spec in unit_values(sections, "Service", "EnvironmentFile"):
        optional = spec.startswith("-")
        path = os.path.join(root, spec.lstrip("-").lstrip("/"))
        try:
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith(("#", ";")) and "=" in line:
                        k, val = line.split("=", 1)
                        env[k.strip()] = val.strip().strip('"').strip("'")
        except OSError:
            if not optional:
                raise
    for spec in unit_values(sections, "Service", "Environment"):
        for item in shlex.split(spec):
            if "=" in item:
                k, val = item.split("=", 1)
                env[k] = val
    return env


def expand_env(argv, env):
    """$VAR / ${VAR} in arguments, like systemd's Exec expansion (unset variables expand to ''; ``$$`` is a
    literal ``$``)."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1) or m.group(2), "")
    return [re.sub(r"\$\$|\$\{(\w+)\}|\$(\w+)", sub, a) for a in argv]


def resolve_executable(root, path):
    """A host-absolute executable of the node: below the sysroot when installed there, else the host's."""
    if os.path.isabs(path):
        inside = os.path.join(root, path.lstrip("/"))
        if os.path.exists(inside):
            return inside
    return path


def unit_exec_commands(sections, root):
    """[(argv, ignore_failure)] to run for a start: ExecStartPre, ExecStart, ExecStartPost."""
    env = unit_environment(sections, root)
    cmds = []
    for key in ("ExecStartPre", "ExecStart", "ExecStartPost"):
        for value in unit_values(sections, "Service", key):
            argv, ignore = parse_exec(value)
            argv = expand_env(argv, env)
            argv[0] = resolve_executable(root, argv[0])
            cmds.append((argv, ignore))
    return cmds


# --------------------------------------------------------------------------------------------
# udev rules

_UDEV_TOKEN = re.compile(r'\s*([A-Za-z_]+(?:\{[^}]*\})?)\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_udev_rules(text):
    """Parse udev rules text into a list of rules, each a list of (key, op, value)."""
    rules = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line.startswith("#"):
            continue
        tokens = []
        pos = 0
        while pos < len(line):
            m = _UDEV_TOKEN.match(line, pos)
            if not m:
                raise ValueError("cannot parse udev rule %r at %r" % (line, line[pos:]))
            tokens.append((m.group(1), m.group(2), m.group(3)))
            pos = m.end()
        rules.append(tokens)
    return rules


def _udev_glob(pattern, value):
    return any(fnmatch.fnmatchcase(value, alt) for alt in pattern.split("|"))


def udev_substitute(value, kernel, devpath):
    """%k/$kernel, %p/$devpath, %%/$$ substitutions of a RUN/PROGRAM value."""
    out = []
    i = 0
    subs = {"%k": kernel, "$kernel": kernel, "%p": devpath, "$devpath": devpath, "%%": "%", "$$": "$"}
    keys = sorted(subs, key=len, reverse=True)
    while i < len(value):
        for k in keys:
            if value.startswith(k, i):
                out.append(subs[k])
                i += len(k)
                break
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def udev_run_commands(rules, event, attr_reader=None):
    """RUN commands of ``rules`` for an ``event`` dict (ACTION, SUBSYSTEM, KERNEL, DEVPATH, ENV...).

    Match keys understood: ACTION, SUBSYSTEM, KERNEL, DEVPATH, ENV{x}, ATTR{x} (read through
    ``attr_reader(name)``). A rule with any other match key does not match. GOTO/LABEL are honoured.
    Returns a list of argv lists (udev splits RUN values at spaces with quote grouping, no shell).
    """
    runs = []
    goto = None
    for rule in rules:
        if goto is not None:
            if any(k == "LABEL" and v == goto for k, _op, v in rule):
                goto = None
            else:
                continue
        matched = True
        for key, op, value in rule:
            if op not in ("==", "!="):
                continue
            if key in ("ACTION", "SUBSYSTEM", "KERNEL", "DEVPATH"):
                actual = event.get(key, "")
            elif key.startswith("ENV{"):
                actual = event.get("ENV", {}).get(key[4:-1], "")
            elif key.startswith("ATTR{") and attr_reader is not None:
                actual = attr_reader(key[5:-1])
                actual = "" if actual is None else actual.strip()
            else:
                matched = False
                break
            ok = _udev_glob(value, actual)
            if (op == "==") != ok:
                matched = False
                break
        if not matched:
            continue
        for key, op, value in rule:
            if key == "RUN" or key.startswith("RUN{"):
                if op in ("=", ":="):
                    runs = []
                cmd = udev_substitute(value, event.get("KERNEL", ""), event.get("DEVPATH", ""))
                runs.append(shlex.split(cmd))
            elif key == "GOTO":
                goto = value
    return runs


# --------------------------------------------------------------------------------------------
# sysctl.d


def sysctl_d_files(root):
    """Config files systemd-sysctl reads, in application order (same basename: /etc wins)."""
    dirs = ["etc/sysctl.d", "run/sysctl.d", "usr/local/lib/sysctl.d", "usr/lib/sysctl.d", "lib/sysctl.d"]
    chosen = {}
    for d in dirs:
        for path in glob.glob(os.path.join(root, d, "*.conf")):
            chosen.setdefault(os.path.basename(path), path)
    files = [chosen[k] for k in sorted(chosen)]
    legacy = os.path.join(root, "etc", "sysctl.conf")
    if os.path.exists(legacy):
        files.append(legacy)
    return files


def parse_sysctl_conf(text):
    """[(key as path relative to /proc/sys, value, ignore_failure)] of one sysctl.d file.

    Keys may use '.' or '/' as separator: when the first separator is '/', dots are literal
    (interface names like 'eth0.100'); otherwise '/' inside an element would be written as '.'.
    """
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip()
        ignore = key.startswith("-")
        key = key.lstrip("-")
        first = re.search(r"[./]", key)
        if first and first.group(0) == "/":
            rel = key
        else:
            rel = "/".join(part.replace("/", ".") for part in key.split("."))
        out.append((rel.strip("/"), value.strip(), ignore))
    return out


def boot_net_sysctls(root):
    """The net.* settings a boot applies from the node's sysctl.d files, last value wins per key."""
    settings = []
    for path in sysctl_d_files(root):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        for rel, value, ignore in parse_sysctl_conf(text):
            if rel.startswith("net/"):
                settings.append((rel, value, ignore))
    return settings
