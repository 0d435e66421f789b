# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command line arguments: parse, validate, merge, compare (no boot loader knowledge here).

Plain Python (no AnsibleModule), used by ``cmdline`` (the entry point of ``kernel_cmdline``), the boot loader
backends ``cmdline_grub`` and ``cmdline_grubby``, and unit tests directly.

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

import re

PROC_CMDLINE = "/proc/cmdline"
OS_RELEASE = "/etc/os-release"

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
    r"(?:[0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}\.[0-7](?:/[0-9a-fA-F]{1,2}\.[0-7])*")
_PCI_ID_RE = re.compile(r"pci:[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4})?")
# control characters other than the blanks the whitespace check names (NUL, ESC, DEL, ...)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
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


def shell_dquote_body(value):
    """``value`` for the inside of a POSIX shell double-quoted string: backslash, double quote, dollar and
    backquote escaped (single quotes stay literal there, so GRUB-quoted words read as an admin writes them)."""
    return re.sub(r'([\\"$`])', r"\\\1", value)


# --------------------------------------------------------------------------- validation

def normalize_arg(raw, where):
    """Validate one user-given argument and return it with kernel quotes removed."""
    if not isinstance(raw, str):
        raw = str(raw)
    if _CONTROL.search(raw):
        raise CmdlineError("%s: %r contains a control character; give printable kernel arguments only"
                           % (where, raw))
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
            if _PCI_PATH_RE.fullmatch(sub) or _PCI_ID_RE.fullmatch(sub):
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
        if not (_PCI_PATH_RE.fullmatch(dev) or _PCI_ID_RE.fullmatch(dev)):
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
                vals = [s for s in split_suboptions(arg_value(t)) if arg_key(s) == sub]
                # one argument giving a sub-option twice (the kernel's pci_setup applies the last) is refused too
                differ = [v for v in vals if v != vals[0]]
                if differ:
                    raise CmdlineError("present: %s is given twice with different values (%s and %s)"
                                       % (ident, vals[0], differ[0]))
                val = vals[0]   # every sub-option of the argument is one of its identities: never empty
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
        if merge(tokens, [token], []) != list(tokens):
            cur = [t for t in tokens if arg_key(t) == key]
            out.append((key, " ".join(cur) if cur else None, token))
    for spec in absent:
        if _apply_absent(tokens, [spec]) != list(tokens):
            key = arg_key(spec)
            cur = [t for t in tokens if arg_key(t) == key]
            out.append((key, " ".join(cur), None))
    return out


def reboot_required(proc_tokens, present, absent, next_tokens=None):
    """True when the running kernel (``/proc/cmdline``) lacks a present arg or still has an absent one.

    With ``next_tokens`` (the next boot's command line): only when a reboot would fix one of those, so a
    deviation the next boot keeps too (an admin's conflicting argument) asks for no reboot that changes nothing.
    """
    running = deviations(proc_tokens, present, absent)
    if next_tokens is None:
        return bool(running)
    still = set((key, want) for key, _cur, want in deviations(next_tokens, present, absent))
    return any((key, want) not in still for key, _cur, want in running)


def has_arg(tokens, token):
    """Whether ``tokens`` carry ``token``: the exact argument, or for ``pci=`` every one of its sub-options."""
    key = arg_key(token)
    if key in SUBOPTION_KEYS and arg_value(token) is not None:
        have = sub_options(tokens, key)
        return all(s in have for s in split_suboptions(arg_value(token)))
    return token in tokens


def sub_options(tokens, key):
    """Every sub-option of every ``key=`` argument (``pci=a pci=b,c`` -> [a, b, c])."""
    out = []
    for t in tokens:
        if arg_key(t) == key and arg_value(t) is not None:
            out.extend(split_suboptions(arg_value(t)))
    return out


def missing_args(have, wanted):
    """The arguments to append to ``have`` so that it carries every one of ``wanted``, without repeating
    what it has: exact arguments once, and for ``pci=`` one argument with the missing sub-options only
    (the kernel applies every ``pci=`` occurrence: ``pci=realloc pci=disable_acs_redir=X`` sets both)."""
    out = []
    for token in wanted:
        key = arg_key(token)
        if key in SUBOPTION_KEYS and arg_value(token) is not None:
            have_subs = sub_options(have, key)
            lacking = [sub for sub in split_suboptions(arg_value(token)) if sub not in have_subs]
            if not lacking:
                continue
            token = "%s=%s" % (key, ",".join(lacking))
        elif token in have:
            continue
        if token not in out:
            out.append(token)
    return out


def conflicts(tokens, present, absent):
    """The arguments of ``tokens`` that contradict the request: (argument, key, desired) per conflict.

    An argument conflicts when an ``absent`` item matches it (desired None), when it gives another value of a
    present key (``iommu=off`` against ``iommu=pt``; cumulative keys never conflict), or when a ``pci=``
    argument gives another value of a requested sub-option (``pci=realloc,disable_acs_redir=Y`` against
    ``pci=disable_acs_redir=X``: the whole argument is named, since the operator edits it as one word).
    """
    out = []
    seen = set()
    for t in tokens:
        if t in seen:
            continue
        seen.add(t)
        key = arg_key(t)
        for spec in absent:
            if _apply_absent([t], [spec]) != [t]:
                out.append((t, arg_key(spec), None))
                break
        else:
            for p in present:
                pkey = arg_key(p)
                if pkey != key or pkey in CUMULATIVE_KEYS:
                    continue
                if pkey in SUBOPTION_KEYS and arg_value(p) is not None:
                    want = dict((arg_key(s), s) for s in split_suboptions(arg_value(p)))
                    if any(arg_key(s) in want and s != want[arg_key(s)] for s in split_suboptions(arg_value(t))):
                        out.append((t, pkey, p))
                        break
                elif t != p:
                    out.append((t, pkey, p))
                    break
    return out


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


# --------------------------------------------------------------------------- shared by the backends

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
        # drift items the backend cannot correct (an admin's conflicting argument): reported, never overridden
        self.conflicts = []

    @property
    def diff(self):
        return {"before": self.diff_before, "after": self.diff_after,
                "before_header": "%s (before)" % self.header,
                "after_header": "%s (after)" % self.header}
