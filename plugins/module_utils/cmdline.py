# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line: parse, validate, merge, and the bootloader backends that persist it.

Plain Python (no AnsibleModule), used by ``kernel_cmdline`` and by unit tests directly.

Semantics (kernel facts they rest on):

* The kernel splits its command line on unquoted blanks; double quotes group and are
  dropped (``key="a b"``).  GRUB script words (what ``GRUB_CMDLINE_LINUX`` turns into
  inside grub.cfg) also honour single quotes and backslashes, and treat ``;``, ``|``,
  ``&``, ``<``, ``>`` as command separators, so such arguments are single-quoted when we
  write them for GRUB.
* Early parameters such as ``iommu=`` and ``pci=`` are handled for *every* occurrence,
  so a conflicting earlier value (``iommu=off``) must be removed, not merely shadowed.
* ``pci=`` carries comma-separated sub-options (drivers/pci/pci.c ``pci_setup``:
  ``strchr(str, ',')``), so ``pci=`` is merged per sub-option:
  ``pci=realloc`` + ``pci=disable_acs_redir=X`` -> ``pci=realloc,disable_acs_redir=X``.
  The ``disable_acs_redir`` device list is therefore separated by ``;``.
* ``iommu=`` on x86 takes a comma-separated list of the options documented in
  Documentation/admin-guide/kernel-parameters.txt (``off force noforce biomerge panic
  nopanic merge nomerge soft pt nopt``).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufabric.node.plugins.module_utils.sysroot import Sysroot

PROC_CMDLINE = "/proc/cmdline"
OS_RELEASE = "/etc/os-release"
GRUB_DEFAULT = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
GRUB_DROPIN_NAME = "99-gpufabric.cfg"
GRUB_DROPIN = GRUB_DROPIN_DIR + "/" + GRUB_DROPIN_NAME
GRUB_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")

# Keys whose occurrences add up instead of replacing each other (several consoles, memory
# maps, huge page pools, ip= for several interfaces): "present" only adds the exact argument.
CUMULATIVE_KEYS = frozenset(["console", "memmap", "hugepagesz", "hugepages", "ip"])
# Keys whose value is a comma-separated list of sub-options merged one by one.
SUBOPTION_KEYS = frozenset(["pci"])
# iommu= on x86 (kernel-parameters.txt, arch/x86/kernel/pci-dma.c iommu_setup()).
IOMMU_X86_OPTIONS = ("off", "force", "noforce", "biomerge", "panic", "nopanic",
                     "merge", "nomerge", "soft", "pt", "nopt")
BOOL_PARAM_VALUES = ("0", "1", "y", "n", "Y", "N", "on", "off")
BOOL_KEYS = frozenset(["iommu.passthrough", "iommu.strict"])
X86_ARCHES = frozenset(["x86_64", "amd64", "i386", "i486", "i586", "i686", "x86"])

# pci_dev_str_match() formats (kernel-parameters.txt, "pci=" section):
#   [<domain>:]<bus>:<dev>.<func>[/<dev>.<func>]*   and   pci:<vendor>:<device>[:<subvendor>:<subdevice>]
_PCI_PATH_RE = re.compile(
    r"^(?:[0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}\.[0-7](?:/[0-9a-fA-F]{1,2}\.[0-7])*$")
_PCI_ID_RE = re.compile(r"^pci:[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4})?$")
_GRUB_SPECIAL = re.compile(r"[\s;|&<>$'\"\\{}#`()]")

EL_IDS = frozenset(["rhel", "centos", "rocky", "almalinux", "alma", "fedora", "ol", "oracle"])
DEBIAN_IDS = frozenset(["debian", "ubuntu", "linuxmint", "pop", "raspbian"])


class CmdlineError(ValueError):
    """Bad input or a state the module must not touch; the message is for a platform engineer."""


class CommandError(CmdlineError):
    """A bootloader command failed."""

    def __init__(self, msg, argv=None, rc=None, out="", err=""):
        super(CommandError, self).__init__(msg)
        self.argv = argv
        self.rc = rc
        self.out = out
        self.err = err


# --------------------------------------------------------------------------- parsing

def split_cmdline(text, grub=False):
    """Split a command line into arguments with quotes removed.

    ``grub=False``: kernel rules (only double quotes group).  ``grub=True``: GRUB script word
    rules (single quotes, double quotes and backslash escapes).  Unbalanced quotes raise.
    """
    tokens = []
    cur = []
    in_tok = False
    quote = None
    i = 0
    text = text or ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = None
            elif grub and quote == '"' and c == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$':
                i += 1
                cur.append(text[i])
            else:
                cur.append(c)
        elif c in " \t\n\r":
            if in_tok:
                tokens.append("".join(cur))
                cur = []
                in_tok = False
        elif c == '"' or (grub and c == "'"):
            quote = c
            in_tok = True
        elif grub and c == "\\" and i + 1 < len(text):
            i += 1
            cur.append(text[i])
            in_tok = True
        else:
            cur.append(c)
            in_tok = True
        i += 1
    if quote:
        raise CmdlineError("malformed quotes in command line %r: %s quote not closed" % (text, quote))
    if in_tok:
        tokens.append("".join(cur))
    return tokens


def arg_key(token):
    """``key=value`` -> ``key``; a flag is its own key."""
    return token.split("=", 1)[0]


def arg_value(token):
    """``key=value`` -> ``value`` (may itself contain ``=``); a flag -> None."""
    parts = token.split("=", 1)
    return parts[1] if len(parts) == 2 else None


def split_suboptions(value):
    return [s for s in (value or "").split(",") if s != ""]


def format_kernel_arg(token):
    """One argument as the kernel/grubby sees it (double quotes only when it holds blanks)."""
    if re.search(r"\s", token):
        if "=" in token:
            return '%s="%s"' % (arg_key(token), arg_value(token))
        return '"%s"' % token
    return token


def format_grub_word(token):
    """One argument as a GRUB script word: single-quoted when it holds GRUB-special characters."""
    if not _GRUB_SPECIAL.search(token):
        return token
    return "'" + token.replace("'", "'\\''") + "'"


def join_kernel(tokens):
    return " ".join(format_kernel_arg(t) for t in tokens)


def join_grub(tokens):
    return " ".join(format_grub_word(t) for t in tokens)


def shell_quote(value):
    """POSIX shell single-quoting, deterministic."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


# --------------------------------------------------------------------------- validation

def normalize_arg(raw, where):
    """Validate one user-given argument and return it with kernel quotes removed."""
    if not isinstance(raw, str):
        raw = str(raw)
    if raw.strip() == "":
        raise CmdlineError("%s: empty kernel argument; remove the empty list item" % where)
    if "'" in raw:
        raise CmdlineError("%s: %r contains a single quote; the kernel does not understand single quotes"
                           % (where, raw))
    if raw.count('"') % 2:
        raise CmdlineError("%s: %r has malformed quotes (a double quote is not closed)" % (where, raw))
    if '"' in raw:
        stripped = split_cmdline(raw)
        if len(stripped) != 1:
            raise CmdlineError("%s: %r contains whitespace; give one kernel argument per list item" % (where, raw))
        raw = stripped[0]
    if re.search(r"\s", raw):
        raise CmdlineError("%s: %r contains whitespace; give one kernel argument per list item" % (where, raw))
    if raw.startswith("="):
        raise CmdlineError("%s: %r has no parameter name before '='" % (where, raw))
    if raw.endswith("=") and raw.count("=") == 1 and where == "absent":
        raise CmdlineError("%s: %r ends with '='; give the key alone to remove it with any value" % (where, raw))
    return raw


def _validate_value(token, where, arch):
    key = arg_key(token)
    value = arg_value(token)
    if key == "iommu" and (arch is None or arch in X86_ARCHES):
        opts = (value or "").split(",")
        bad = [o for o in opts if o not in IOMMU_X86_OPTIONS]
        if value is None or bad:
            raise CmdlineError(
                "%s: %r: iommu= accepts on x86 a comma-separated list of %s; got %r. "
                "For passthrough use iommu=pt (x86) or iommu.passthrough=1 (arm64); to turn the "
                "Intel IOMMU on use intel_iommu=on"
                % (where, token, "|".join(IOMMU_X86_OPTIONS), value if value is not None else ""))
    if key in BOOL_KEYS and value not in BOOL_PARAM_VALUES:
        raise CmdlineError("%s: %r: %s takes a boolean (0 or 1); got %r" % (where, token, key, value))
    if key in SUBOPTION_KEYS:
        subs = value.split(",") if value is not None else []
        if not subs or any(s == "" for s in subs):
            raise CmdlineError("%s: %r: %s= needs comma-separated sub-options without empty items"
                               % (where, token, key))
        for sub in subs:
            if _PCI_PATH_RE.match(sub) or _PCI_ID_RE.match(sub):
                raise CmdlineError(
                    "%s: %r: %r is a device, not a %s= sub-option; the kernel splits %s= on ',' so "
                    "separate disable_acs_redir devices with ';'" % (where, token, sub, key, key))
            if arg_key(sub) == "disable_acs_redir":
                validate_pci_dev_list(arg_value(sub), "%s: %r" % (where, token))


def validate_pci_dev_list(devs, where):
    """``pci=disable_acs_redir=`` device list: ``;``-separated path or id specifiers."""
    if not devs:
        raise CmdlineError("%s: disable_acs_redir= needs at least one device" % where)
    for dev in devs.split(";"):
        if not (_PCI_PATH_RE.match(dev) or _PCI_ID_RE.match(dev)):
            raise CmdlineError(
                "%s: disable_acs_redir device %r is neither a path "
                "([<domain>:]<bus>:<dev>.<fn>[/<dev>.<fn>]...) nor an id (pci:<vendor>:<device>); "
                "separate devices with ';' (a ',' ends the pci= sub-option)" % (where, dev))


def _identities(token):
    """What a present/absent argument speaks about: the key, or ``key=sub-option`` for pci=."""
    key = arg_key(token)
    value = arg_value(token)
    if key in SUBOPTION_KEYS and value is not None:
        return set("%s=%s" % (key, arg_key(s)) for s in split_suboptions(value))
    return set([key])


def _overlaps(a, b):
    for x in a:
        for y in b:
            if x == y or x.startswith(y + "=") or y.startswith(x + "="):
                return True
    return False


def validate(present, absent, arch=None):
    """Validate and normalize; returns (present, absent) lists. Raises CmdlineError."""
    present = [normalize_arg(p, "present") for p in (present or [])]
    absent = [normalize_arg(a, "absent") for a in (absent or [])]
    for t in present:
        _validate_value(t, "present", arch)
    for t in absent:
        if arg_value(t) is not None:
            key = arg_key(t)
            if key in SUBOPTION_KEYS and any(s == "" for s in arg_value(t).split(",")):
                raise CmdlineError("absent: %r has an empty %s= sub-option" % (t, key))
    seen = {}
    for t in present:
        key = arg_key(t)
        if key in CUMULATIVE_KEYS:
            continue
        for ident in _identities(t):
            if key in SUBOPTION_KEYS:
                sub = ident.split("=", 1)[1]
                val = [s for s in split_suboptions(arg_value(t)) if arg_key(s) == sub]
                val = val[-1] if val else None
            else:
                val = t
            if ident in seen and seen[ident] != val:
                raise CmdlineError("present: %s is given twice with different values (%s and %s)"
                                   % (ident, seen[ident], val))
            seen[ident] = val
    for a in absent:
        for p in present:
            if _overlaps(_identities(a), _identities(p)):
                raise CmdlineError("%r is both in present (%r) and absent: decide which one you want"
                                   % (arg_key(a) if arg_value(a) is None else a, p))
    return present, absent


# --------------------------------------------------------------------------- merge

def _sub_matches(existing_sub, spec_sub):
    if arg_value(spec_sub) is None:
        return arg_key(existing_sub) == arg_key(spec_sub)
    return existing_sub == spec_sub


def _apply_absent(tokens, absent):
    out = list(tokens)
    for spec in absent:
        key = arg_key(spec)
        value = arg_value(spec)
        if value is None:
            out = [t for t in out if arg_key(t) != key]
            continue
        if key in SUBOPTION_KEYS:
            spec_subs = split_suboptions(value)
            new = []
            for t in out:
                if arg_key(t) != key or arg_value(t) is None:
                    new.append(t)
                    continue
                subs = [s for s in split_suboptions(arg_value(t))
                        if not any(_sub_matches(s, sp) for sp in spec_subs)]
                if subs:
                    new.append("%s=%s" % (key, ",".join(subs)))
            out = new
        else:
            out = [t for t in out if t != spec]
    return out


def _apply_present_suboptions(out, token):
    key = arg_key(token)
    want = split_suboptions(arg_value(token))
    want_keys = [arg_key(s) for s in want]
    positions = [i for i, t in enumerate(out) if arg_key(t) == key]
    existing = []
    for i in positions:
        existing.extend(split_suboptions(arg_value(out[i])))
    # Satisfied when every wanted sub-option appears exactly once with its value.
    satisfied = all(sum(1 for s in existing if arg_key(s) == arg_key(w)) == 1 and w in existing
                    for w in want)
    if satisfied and positions:
        return out
    merged = []
    placed = set()
    for s in existing:
        k = arg_key(s)
        if k in want_keys:
            if k not in placed:
                merged.append(want[want_keys.index(k)])
                placed.add(k)
            continue
        if s not in merged:
            merged.append(s)
    for w in want:
        if arg_key(w) not in placed:
            merged.append(w)
            placed.add(arg_key(w))
    new_tok = "%s=%s" % (key, ",".join(merged))
    if not positions:
        return out + [new_tok]
    result = []
    for i, t in enumerate(out):
        if i == positions[0]:
            result.append(new_tok)
        elif i not in positions:
            result.append(t)
    return result


def _apply_present(tokens, present):
    out = list(tokens)
    for token in present:
        key = arg_key(token)
        if key in CUMULATIVE_KEYS:
            if token not in out:
                out.append(token)
            continue
        if key in SUBOPTION_KEYS:
            out = _apply_present_suboptions(out, token)
            continue
        positions = [i for i, t in enumerate(out) if arg_key(t) == key]
        if len(positions) == 1 and out[positions[0]] == token:
            continue
        if not positions:
            out.append(token)
            continue
        out = [token if i == positions[0] else t for i, t in enumerate(out) if i == positions[0] or i not in positions]
    return out


def merge(tokens, present, absent):
    """Apply absent then present to a token list; returns the new token list.

    merge(x) == x exactly when x already satisfies present/absent (idempotence).
    """
    return _apply_present(_apply_absent(tokens, absent), present)


def strip_conflicts(tokens, present, absent):
    """For a secondary list (GRUB_CMDLINE_LINUX_DEFAULT): drop absent args and every arg that
    the present list owns (same key, or same pci= sub-option), since they live in the primary list."""
    out = _apply_absent(tokens, absent)
    for token in present:
        key = arg_key(token)
        if key in CUMULATIVE_KEYS:
            out = [t for t in out if t != token]
        elif key in SUBOPTION_KEYS:
            out = _apply_absent(out, ["%s=%s" % (key, ",".join(arg_key(s) for s in split_suboptions(arg_value(token))))])
        else:
            out = [t for t in out if arg_key(t) != key]
    return out


def token_diff(before, after):
    """(added, removed) as multiset differences, in order."""
    rest = list(after)
    removed = []
    for t in before:
        if t in rest:
            rest.remove(t)
        else:
            removed.append(t)
    rest_b = list(before)
    added = []
    for t in after:
        if t in rest_b:
            rest_b.remove(t)
        else:
            added.append(t)
    return added, removed


def deviations(tokens, present, absent):
    """One (key, current, desired) per requested argument the token list does not satisfy."""
    out = []
    for token in present:
        key = arg_key(token)
        if key in SUBOPTION_KEYS:
            if merge(tokens, [token], []) != list(tokens):
                cur = [t for t in tokens if arg_key(t) == key]
                out.append((key, " ".join(cur) if cur else None, token))
            continue
        if merge(tokens, [token], []) != list(tokens):
            cur = [t for t in tokens if arg_key(t) == key]
            out.append((key, " ".join(cur) if cur else None, token))
    for spec in absent:
        if _apply_absent(tokens, [spec]) != list(tokens):
            key = arg_key(spec)
            cur = [t for t in tokens if arg_key(t) == key]
            out.append((key, " ".join(cur), None))
    return out


def reboot_required(proc_tokens, present, absent):
    """True when the running kernel (``/proc/cmdline``) lacks a present arg or still has an absent one."""
    return bool(deviations(proc_tokens, present, absent))


def read_proc_cmdline(sysroot):
    text = sysroot.read(PROC_CMDLINE)
    if text is None:
        raise CmdlineError("cannot read %s" % sysroot.path(PROC_CMDLINE))
    return text


def read_os_release(sysroot):
    data = {}
    text = sysroot.read_raw(OS_RELEASE, "") or sysroot.read_raw("/usr/lib/os-release", "") or ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        try:
            parts = split_cmdline(v, grub=True)
        except CmdlineError:
            parts = [v]
        data[k] = " ".join(parts)
    return data


def os_family(os_release):
    ids = [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split()
    ids = [i.lower() for i in ids if i]
    if any(i in DEBIAN_IDS for i in ids):
        return "debian"
    if any(i in EL_IDS for i in ids):
        return "el"
    return None


# --------------------------------------------------------------------------- backends

def _check(run, argv, what):
    rc, out, err = run(argv)
    if rc != 0:
        raise CommandError("%s failed (rc=%s): %s" % (what, rc, (err or out or "").strip()),
                           argv=argv, rc=rc, out=out, err=err)
    return out


class Plan(object):
    """What a backend found and what it would change; one object drives changed, diff and drift."""

    def __init__(self, before, after, diff_before, diff_after, header):
        self.before = list(before)
        self.after = list(after)
        self.added, self.removed = token_diff(self.before, self.after)
        self.diff_before = diff_before
        self.diff_after = diff_after
        self.header = header
        self.changed = False
        self.actions = []

    @property
    def diff(self):
        return {"before": self.diff_before, "after": self.diff_after,
                "before_header": "%s (before)" % self.header,
                "after_header": "%s (after)" % self.header}


class GrubDropinBackend(object):
    """Debian/Ubuntu: one collection-owned drop-in below /etc/default/grub.d, then update-grub."""

    name = "grub"
    CANDIDATE = "@candidate@"

    def __init__(self, sysroot, run, bin_path, sh="/bin/sh"):
        self.sysroot = sysroot
        self.run = run
        self.bin_path = bin_path
        self.sh = sh

    def _dropins(self):
        names = [n for n in self.sysroot.listdir(GRUB_DROPIN_DIR) if n.endswith(".cfg")]
        # /bin/sh expands grub.d/*.cfg in byte order under LC_ALL=C
        names.sort(key=lambda n: n.encode("utf-8"))
        before = [n for n in names if n.encode("utf-8") < GRUB_DROPIN_NAME.encode("utf-8")]
        after = [n for n in names if n.encode("utf-8") > GRUB_DROPIN_NAME.encode("utf-8")]
        return before, after

    def _source(self, files, candidate=None):
        """Source files in order with /bin/sh in a clean environment; returns {var: value}.

        A file named ``CANDIDATE`` stands for drop-in content not written yet (check mode,
        and the check of later drop-ins): it is evaluated from the environment instead.
        """
        script = ('for f in "$@"; do '
                  'if [ "$f" = "%s" ]; then eval "$GPUFABRIC_CANDIDATE" || exit 3; '
                  'else . "$f" || exit 3; fi; done; '
                  'printf "%%s\\0%%s\\0" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"' % self.CANDIDATE)
        argv = [self.bin_path("env") or "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"]
        if candidate is not None:
            argv.append("GPUFABRIC_CANDIDATE=%s" % candidate)
        argv += [self.sh, "-c", script, "sh"] + list(files)
        rc, out, err = self.run(argv)
        if rc != 0:
            names = [f if f == self.CANDIDATE else self.sysroot.unroot(f) for f in files]
            raise CommandError("sourcing the GRUB defaults (%s) with %s failed (rc=%s): %s"
                               % (" ".join(names), self.sh, rc, (err or "").strip()),
                               argv=argv, rc=rc, out=out, err=err)
        parts = out.split("\0")
        if len(parts) < 3:
            raise CmdlineError("unexpected output while sourcing the GRUB defaults: %r" % out)
        return {"GRUB_CMDLINE_LINUX": parts[0], "GRUB_CMDLINE_LINUX_DEFAULT": parts[1]}

    def _files(self, dropin_real):
        before, after = self._dropins()
        d = self.sysroot.path(GRUB_DROPIN_DIR)
        files = []
        if self.sysroot.exists(GRUB_DEFAULT):
            files.append(self.sysroot.path(GRUB_DEFAULT))
        files += [os.path.join(d, n) for n in before]
        prefix = list(files)
        suffix = [os.path.join(d, n) for n in after]
        return prefix, ([dropin_real] if dropin_real else []), suffix

    @staticmethod
    def render_dropin(values):
        lines = [
            "# Managed by the gpufabric.node Ansible collection (gpufabric.node.kernel_cmdline).",
            "# The collection owns this file and rewrites it as a whole: local edits are lost.",
            "# It assigns the complete kernel command line computed from /etc/default/grub and the",
            "# other drop-ins, with the requested arguments added and conflicting ones removed.",
            "# Change arguments through the collection's variables, then run update-grub.",
        ]
        for var in GRUB_VARS:
            if var in values:
                lines.append("%s=%s" % (var, shell_quote(values[var])))
        return "\n".join(lines) + "\n"

    @staticmethod
    def _effective(values):
        return split_cmdline(values["GRUB_CMDLINE_LINUX"], grub=True) + \
            split_cmdline(values["GRUB_CMDLINE_LINUX_DEFAULT"], grub=True)

    @staticmethod
    def _diff_text(values):
        return "".join('%s="%s"\n' % (v, values[v]) for v in GRUB_VARS)

    def plan(self, present, absent):
        ours = self.sysroot.path(GRUB_DROPIN)
        have_ours = os.path.isfile(ours)
        prefix, mine, suffix = self._files(ours if have_ours else None)
        current = self._source(prefix + mine + suffix)
        try:
            linux = split_cmdline(current["GRUB_CMDLINE_LINUX"], grub=True)
            default = split_cmdline(current["GRUB_CMDLINE_LINUX_DEFAULT"], grub=True)
        except CmdlineError as e:
            raise CmdlineError("effective GRUB_CMDLINE_LINUX/_DEFAULT: %s" % e)
        new_linux = merge(linux, present, absent)
        new_default = strip_conflicts(default, present, absent)
        before = linux + default
        after = new_linux + new_default
        self.new_values = {"GRUB_CMDLINE_LINUX": join_grub(new_linux),
                           "GRUB_CMDLINE_LINUX_DEFAULT": join_grub(new_default)}
        plan = Plan(before, after, self._diff_text(current), self._diff_text(current),
                    "effective GRUB command line")
        self.dropin_content = None
        self.remove_dropin = False
        if new_linux == linux and new_default == default:
            return plan
        plan.diff_after = self._diff_text(self.new_values)
        plan.changed = True
        without = self._source(prefix + suffix)
        try:
            without_eff = {v: split_cmdline(without[v], grub=True) for v in GRUB_VARS}
        except CmdlineError:
            without_eff = {}
        assign = {}
        for var, toks in (("GRUB_CMDLINE_LINUX", new_linux), ("GRUB_CMDLINE_LINUX_DEFAULT", new_default)):
            if without_eff.get(var) != toks:
                assign[var] = self.new_values[var]
        if not assign:
            self.remove_dropin = True
            plan.actions.append("remove %s" % GRUB_DROPIN)
        else:
            self.dropin_content = self.render_dropin(assign)
            plan.actions.append("write %s" % GRUB_DROPIN)
        self._check_suffix(prefix, suffix, after)
        return plan

    def _check_suffix(self, prefix, suffix, after):
        """The drop-ins sorting after ours must leave our result alone, else no write can fix it."""
        if not suffix:
            return
        if self.dropin_content:
            result = self._source(prefix + [self.CANDIDATE] + suffix, candidate=self.dropin_content)
        else:
            result = self._source(prefix + suffix)
        if self._effective(result) != after:
            raise CmdlineError(
                "the drop-in(s) %s sort after %s and change GRUB_CMDLINE_LINUX/_DEFAULT, so the requested "
                "kernel arguments cannot take effect; move their arguments into /etc/default/grub or rename "
                "them to sort before %s" % (", ".join(self.sysroot.unroot(s) for s in suffix),
                                            GRUB_DROPIN, GRUB_DROPIN_NAME))

    def update_command(self):
        p = self.bin_path("update-grub")
        if p:
            return [p]
        for tool, cfgdir in (("grub-mkconfig", "/boot/grub"), ("grub2-mkconfig", "/boot/grub2")):
            p = self.bin_path(tool)
            if p:
                if tool == "grub2-mkconfig" and not self.sysroot.isdir("/boot/grub2"):
                    cfgdir = "/boot/grub"
                return [p, "-o", cfgdir + "/grub.cfg"]
        return None

    def apply(self, plan, update_bootloader=True):
        if not plan.changed:
            return
        if self.remove_dropin:
            self.sysroot.remove(GRUB_DROPIN)
        else:
            self.sysroot.write_file_atomic(GRUB_DROPIN, self.dropin_content)
        if update_bootloader:
            argv = self.update_command()
            if argv is None:
                raise CmdlineError("none of update-grub, grub-mkconfig, grub2-mkconfig found")
            _check(self.run, argv, " ".join(argv))


def parse_grubby_info(text):
    """``grubby --info=...`` output -> list of entry dicts (index as int, quotes removed)."""
    entries = []
    cur = None
    for line in (text or "").splitlines():
        line = line.strip()
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1]
        if k == "index":
            cur = {"index": int(v)}
            entries.append(cur)
        elif cur is not None:
            cur[k] = v
    return entries


class GrubbyBackend(object):
    """EL: read with ``grubby --info=ALL``, change with ``grubby --update-kernel=... --args --remove-args``."""

    name = "grubby"
    max_passes = 3

    def __init__(self, sysroot, run, bin_path):
        self.sysroot = sysroot
        self.run = run
        self.grubby = bin_path("grubby")
        if not self.grubby:
            raise CmdlineError("grubby was not found in PATH; install the grubby package")

    def entries(self):
        out = _check(self.run, [self.grubby, "--info=ALL"], "grubby --info=ALL")
        ents = [e for e in parse_grubby_info(out) if e.get("kernel") and "args" in e]
        if not ents:
            raise CmdlineError("grubby --info=ALL lists no kernel entry")
        for e in ents:
            e["tokens"] = split_cmdline(e["args"])
        return ents

    def default_kernel(self):
        out = _check(self.run, [self.grubby, "--default-kernel"], "grubby --default-kernel")
        return out.strip().splitlines()[-1].strip() if out.strip() else None

    def _default_entry(self, ents):
        dk = self.default_kernel()
        for e in ents:
            if e["kernel"] == dk:
                return e
        return ents[0]

    def plan(self, present, absent):
        ents = self.entries()
        default = self._default_entry(ents)
        self.todo = []
        for e in ents:
            new = merge(e["tokens"], present, absent)
            if new != e["tokens"]:
                added, removed = token_diff(e["tokens"], new)
                self.todo.append((e["kernel"], added, removed))
        new_default = merge(default["tokens"], present, absent)
        plan = Plan(default["tokens"], new_default, 'args="%s"\n' % default["args"],
                    'args="%s"\n' % join_kernel(new_default),
                    "grubby default entry %s" % default["kernel"])
        self.default = default
        plan.changed = bool(self.todo)
        plan.root = default.get("root")
        return plan

    def _commands(self, nents):
        groups = {}
        for kernel, added, removed in self.todo:
            groups.setdefault((tuple(added), tuple(removed)), []).append(kernel)
        cmds = []
        for (added, removed), kernels in sorted(groups.items()):
            targets = ["ALL"] if len(groups) == 1 and len(kernels) == nents else kernels
            for target in targets:
                argv = [self.grubby, "--update-kernel=%s" % target]
                if added:
                    argv.append("--args=%s" % join_kernel(added))
                if removed:
                    argv.append("--remove-args=%s" % join_kernel(removed))
                cmds.append(argv)
        return cmds

    def apply(self, plan, present, absent):
        for _pass in range(self.max_passes):
            ents = self.entries()
            self.todo = []
            for e in ents:
                new = merge(e["tokens"], present, absent)
                if new != e["tokens"]:
                    added, removed = token_diff(e["tokens"], new)
                    self.todo.append((e["kernel"], added, removed))
            if not self.todo:
                # report what grubby really wrote (it appends new arguments at the end)
                for e in ents:
                    if e["kernel"] == self.default["kernel"]:
                        plan.after = list(e["tokens"])
                        plan.added, plan.removed = token_diff(plan.before, plan.after)
                return
            for argv in self._commands(len(ents)):
                plan.actions.append(" ".join(argv[1:]))
                _check(self.run, argv, "grubby")
        left = [k for k, _a, _r in self.todo]
        raise CmdlineError("grubby did not converge after %d passes for %s" % (self.max_passes, ", ".join(left)))


def select_backend(sysroot, run, bin_path, bootloader="auto"):
    if bootloader == "grub":
        return GrubDropinBackend(sysroot, run, bin_path)
    if bootloader == "grubby":
        return GrubbyBackend(sysroot, run, bin_path)
    fam = os_family(read_os_release(sysroot))
    if fam == "debian":
        return GrubDropinBackend(sysroot, run, bin_path)
    if fam == "el":
        return GrubbyBackend(sysroot, run, bin_path)
    if bin_path("grubby"):
        return GrubbyBackend(sysroot, run, bin_path)
    if bin_path("update-grub") or bin_path("grub-mkconfig") or bin_path("grub2-mkconfig"):
        return GrubDropinBackend(sysroot, run, bin_path)
    raise CmdlineError("cannot tell the bootloader tool: %s has no Debian or EL ID/ID_LIKE and neither "
                       "grubby nor update-grub/grub-mkconfig is in PATH; set bootloader=grub or grubby"
                       % OS_RELEASE)


# --------------------------------------------------------------------------- entry point

def ensure(present, absent, run, bin_path, bootloader="auto", update_bootloader=True,
           check_mode=False, sysroot=None, arch=None):
    """Validate, plan and (unless check_mode) apply. Returns a result dict for the module."""
    sysroot = sysroot or Sysroot()
    present, absent = validate(present, absent, arch=arch)
    proc_text = read_proc_cmdline(sysroot)
    proc_tokens = split_cmdline(proc_text)
    backend = select_backend(sysroot, run, bin_path, bootloader)
    if isinstance(backend, GrubDropinBackend) and update_bootloader and backend.update_command() is None:
        raise CmdlineError("update-grub, grub-mkconfig and grub2-mkconfig are all missing; install grub2-common "
                           "or set update_bootloader=false")
    plan = backend.plan(present, absent)
    drift = []
    for key, cur, want in deviations(plan.before, present, absent):
        drift.append({"concern": "cmdline", "object": "bootloader", "key": key, "current": cur, "desired": want})
    for key, cur, want in deviations(proc_tokens, present, absent):
        drift.append({"concern": "cmdline", "object": "running", "key": key, "current": cur, "desired": want})
    if plan.changed and not check_mode:
        if isinstance(backend, GrubbyBackend):
            backend.apply(plan, present, absent)
        else:
            backend.apply(plan, update_bootloader=update_bootloader)
    next_tokens = plan.after
    if isinstance(backend, GrubbyBackend) and getattr(plan, "root", None):
        cmdline_next = join_kernel(["root=%s" % plan.root] + next_tokens)
    else:
        cmdline_next = join_kernel(next_tokens)
    return {
        "changed": plan.changed,
        "bootloader": backend.name,
        "reboot_required": reboot_required(proc_tokens, present, absent),
        "cmdline_current": proc_text,
        "cmdline_next": cmdline_next,
        "args_added": plan.added,
        "args_removed": plan.removed,
        "actions": plan.actions,
        "drift": drift,
        "diff": plan.diff,
    }
