# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt sources of the vendor NFS client's builder image (``kmod_build``): the host's apt sources read, the builder's
source lines chosen and every line validated for the one-line ``sources.list`` syntax.

A builder source line is parsed into the fields of a deb822 stanza (type, options, URI, suite, components) by one
``fullmatch`` per token; a line spanning two lines, a control character, an unknown option, a URI scheme other than
http, https or file and a suite without components (other than an exact path ``./``) are refused. Options that turn
apt's signature checks off (``trusted=yes``, ``allow-insecure=yes``, ``allow-weak=yes``,
``allow-downgrade-to-insecure=yes``) are refused unless the caller allows unauthenticated sources explicitly.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import re

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import KmodBuildError

# sources.list(5) options of a one-line entry
SOURCE_OPTIONS = frozenset([
    "arch", "lang", "target", "pdiffs", "by-hash", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure",
    "trusted", "signed-by", "check-valid-until", "valid-until-min", "valid-until-max", "check-date",
    "date-max-future", "inrelease-path", "snapshot",
])
# options that turn signature checking off when set to yes
INSECURE_OPTIONS = ("trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure")
_TRUE = ("yes", "true", "with", "on", "enable", "1")

_OPTION_RE = re.compile(r"(?P<key>[a-z][a-z-]*)(?P<op>[+-]?=)(?P<value>[A-Za-z0-9._,:/+~@-]+)")
# A URI of characters that mean nothing to a shell or to apt's line format (no quote, $, `, ;, space), with
# percent-encoding for anything else; no '.' or '..' path segment (checked by _dot_segment).
_URI_RE = re.compile(r"(?P<scheme>https?|file):(?:[A-Za-z0-9._~:/@+,=-]|%[0-9A-Fa-f]{2})+")
_SUITE_RE = re.compile(r"[A-Za-z0-9._~+/-]+")
_COMPONENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/-]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _dot_segment(value):
    """Whether a URI, suite or component has a '.' or '..' path segment (a way out of the archive's tree)."""
    path = value.split("://", 1)[-1] if "://" in value else value.split(":", 1)[-1] if value.startswith(
        ("file:", "http:", "https:")) else value
    return any(seg in (".", "..") for seg in path.split("/"))


def _refuse(line, why):
    return ValueError("builder source %s is refused: %s" % (ascii(line), why))


def parse_source_line(line):
    """One ``deb [OPTIONS] URI SUITE [COMPONENT...]`` line -> {"type", "options", "uri", "suite", "components"}.

    ``options`` maps each option to its value (``+=``/``-=`` kept in the key as ``arch+``/``arch-``). Raises
    ValueError naming the line.
    """
    if not isinstance(line, str):
        raise ValueError("builder source %r is not a string" % (line,))
    if _CONTROL_RE.search(line):
        raise _refuse(line, "it holds a control character or spans several lines (one apt line per item)")
    text = line.strip()
    options = {}
    m = re.match(r"(?P<type>\S+)[ ]+\[(?P<opts>[^\[\]]*)\][ ]+(?P<rest>[^\[\]]*)\Z", text) or \
        re.match(r"(?P<type>\S+)[ ]+(?P<rest>[^\[\]]*)\Z", text)
    if not m:
        raise _refuse(line, "it is not an apt line 'deb [OPTIONS] URI SUITE COMPONENT...'")
    if m.group("type") != "deb":
        raise _refuse(line, "the builder installs binary packages: the type must be deb, not %s"
                      % ascii(m.group("type")))
    for word in (m.groupdict().get("opts") or "").split():
        om = _OPTION_RE.fullmatch(word)
        if not om or om.group("key") not in SOURCE_OPTIONS:
            raise _refuse(line, "unknown or malformed option %s" % ascii(word))
        key = om.group("key") + ("" if om.group("op") == "=" else om.group("op")[0])
        if key in options:
            raise _refuse(line, "option %s is given twice" % key)
        options[key] = om.group("value")
    words = m.group("rest").split()
    if len(words) < 2:
        raise _refuse(line, "it names no suite")
    uri, suite, components = words[0], words[1], words[2:]
    if not _URI_RE.fullmatch(uri):
        raise _refuse(line, "the URI %s is not http://, https:// or file: (percent-encode other characters)"
                      % ascii(uri))
    # "./" is the flat repository at the URI itself, the one dot segment apt lines use
    for word in [uri] + ([] if suite == "./" else [suite]) + components:
        if _dot_segment(word):
            raise _refuse(line, "%s has a '.' or '..' path segment" % ascii(word))
    if not _SUITE_RE.fullmatch(suite) or suite.startswith("-"):
        raise _refuse(line, "malformed suite %s" % ascii(suite))
    if suite.endswith("/"):
        if components:
            raise _refuse(line, "an exact path suite (ending in /) takes no components")
    elif not components:
        raise _refuse(line, "it names no component")
    for c in components:
        if not _COMPONENT_RE.fullmatch(c):
            raise _refuse(line, "malformed component %s" % ascii(c))
    return {"type": "deb", "options": options, "uri": uri, "suite": suite, "components": components}


def insecure_options(entry):
    """The options of a parsed entry that turn apt's signature checks off."""
    return [k for k in INSECURE_OPTIONS if entry["options"].get(k, "").lower() in _TRUE]


def format_source_line(entry):
    opts = " ".join("%s%s=%s" % (k.rstrip("+-"), k[-1] if k[-1] in "+-" else "", v)
                    for k, v in sorted(entry["options"].items()))
    return " ".join(["deb"] + (["[%s]" % opts] if opts else []) + [entry["uri"], entry["suite"]] +
                    entry["components"])


def validate_source_line(line, allow_unauthenticated=False):
    """The normalised apt line of one builder source; raises ValueError naming the line.

    Sources that turn apt's signature checks off are refused unless ``allow_unauthenticated``.
    """
    entry = parse_source_line(line)
    bad = insecure_options(entry)
    if bad and not allow_unauthenticated:
        raise _refuse(line, "%s turns apt's signature checks off; the builder installs only from sources signed "
                            "by a key of the distribution's keyring (builder_allow_unauthenticated allows it)"
                      % ", ".join("%s=%s" % (k, entry["options"][k]) for k in bad))
    return format_source_line(entry)


def signed_by_paths(lines):
    """The ``signed-by`` keyring paths the (validated) lines name."""
    out = []
    for line in lines:
        for k in parse_source_line(line)["options"].get("signed-by", "").split(","):
            if k and k not in out:
                out.append(k)
    return out


def parse_apt_sources(files_text):
    """[(uri, suite, components)] from deb822 ``.sources`` and one-line ``sources.list`` texts."""
    entries = []
    for text in files_text:
        if re.search(r"^\s*Types:", text, re.M):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if "deb" not in fields.get("types", "").split():
                    continue
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    for suite in fields.get("suites", "").split():
                        entries.append((uri, suite, fields.get("components", "").split()))
        else:
            for line in text.splitlines():
                line = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(line) >= 3 and line[0] == "deb":
                    entries.append((line[1], line[2], line[3:]))
    return entries


def host_apt_texts(sysroot):
    texts = []
    for pattern in ("/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list"):
        for p in sorted(glob.glob(sysroot.path(pattern))):
            try:
                with open(p) as f:
                    texts.append(f.read())
            except (OSError, IOError):
                continue
    return texts


def host_mirror(sysroot, suite):
    """The mirror URI the host's apt already uses for ``suite`` ``main`` (never a hard-coded host)."""
    for uri, s, comps in parse_apt_sources(host_apt_texts(sysroot)):
        if s == suite and "main" in comps:
            return uri
    raise KmodBuildError("no apt source of the host serves %s main: pass the builder mirror explicitly" % suite)


# Debian publishes new kernel ABIs (linux-headers-6.1.0-<abi>-amd64) in <suite>-security and <suite>-updates long
# before a point release moves them to <suite>: a builder for a target kernel needs those suites too.
COMPANION_SUITES = ("-updates", "-security")


def builder_sources(sysroot, suite, mirror=None):
    """apt source lines of the builder image: ``suite`` main (from ``mirror`` or the host's apt) and the host's
    ``<suite>-updates`` / ``<suite>-security`` main sources when it has them. Returns a list of
    ``deb URI SUITE main`` lines, the base suite first.

    The host's options (``signed-by``, ``trusted``) are not carried over: apt in the builder checks these sources
    with the keyring of the distribution installed there.
    """
    entries = parse_apt_sources(host_apt_texts(sysroot))
    base = "deb %s %s main" % (mirror or host_mirror(sysroot, suite), suite)
    try:
        lines = [validate_source_line(base)]
    except ValueError as e:
        raise KmodBuildError("%s (the build host's apt source for %s; pass builder_mirror)" % (e, suite))
    for tail in COMPANION_SUITES:
        for uri, s, comps in entries:
            if s == suite + tail and "main" in comps:
                try:
                    line = validate_source_line("deb %s %s main" % (uri, s))
                except ValueError:
                    continue  # a scheme the builder does not take (mirror+file:, cdrom:): not a companion
                if line not in lines:
                    lines.append(line)
                break
    return lines


def validate_mirror(value):
    """A mirror URI for the builder (http, https or file); raises ValueError."""
    if not isinstance(value, str) or not _URI_RE.fullmatch(value) or _dot_segment(value):
        raise ValueError("builder mirror %s is not an http://, https:// or file: URI without '.' or '..' segments "
                         "(percent-encode characters other than letters, digits and ._~:/@+,=-)" % ascii(value))
    return value


def validate_suite(value):
    """A distribution suite name (``bookworm``, ``noble-updates``); raises ValueError."""
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9][a-z0-9._+~-]*", value):
        raise ValueError("builder suite %s is not a suite name" % ascii(value))
    return value
