# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The builder's apt source lines: one line each, the sources.list(5) syntax, no signature-less source unless the
explicit option allows it (issue 13 item 6)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import stage2_apt as ka


@pytest.mark.parametrize("line,normal", [
    ("deb http://m.invalid/debian bookworm-security main", "deb http://m.invalid/debian bookworm-security main"),
    ("  deb https://m.invalid/debian bookworm main contrib  ", "deb https://m.invalid/debian bookworm main contrib"),
    ("deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.invalid/d bookworm main",
     "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.invalid/d bookworm main"),
    ("deb [arch+=arm64] file:/srv/repo bookworm main", "deb [arch+=arm64] file:/srv/repo bookworm main"),
    ("deb file:/srv/repo ./", "deb file:/srv/repo ./"),
    ("deb [trusted=no] file:/srv/repo ./", "deb [trusted=no] file:/srv/repo ./"),
])
def test_valid_lines(line, normal):
    assert ka.validate_source_line(line) == normal


@pytest.mark.parametrize("line,needle", [
    # issue 13: a value spanning two lines, including [trusted=yes]
    ("deb http://m.invalid/debian bookworm main\ndeb [trusted=yes] http://evil.invalid/d bookworm main",
     "spans several lines"),
    ("deb http://m.invalid/debian bookworm main\r", "control character"),
    ("deb http://m.invalid/debian bookworm\tmain", "control character"),
    ("deb [trusted=yes] file:/srv/repo ./ main", "takes no components"),
    ("deb [trusted=yes] file:/srv/repo ./", "trusted=yes turns apt's signature checks off"),
    ("deb [allow-insecure=yes] http://m.invalid/d bookworm main", "allow-insecure=yes"),
    ("deb [allow-weak=true] http://m.invalid/d bookworm main", "allow-weak=true"),
    ("deb [allow-downgrade-to-insecure=yes] http://m.invalid/d bookworm main", "allow-downgrade-to-insecure"),
    ("deb [TRUSTED=yes] http://m.invalid/d bookworm main", "unknown or malformed option"),
    ("deb [foo=bar] http://m.invalid/d bookworm main", "unknown or malformed option"),
    ("deb [arch=amd64 arch=i386] http://m.invalid/d bookworm main", "given twice"),
    ("deb [arch=amd64]http://m.invalid/d bookworm main", "is not an apt line"),
    ("deb [arch=a] [trusted=yes] http://m.invalid/d bookworm main", "is not an apt line"),
    ("deb-src http://m.invalid/debian bookworm main", "type must be deb"),
    ("deb http://m.invalid/debian bookworm", "names no component"),
    ("deb http://m.invalid/debian", "names no suite"),
    ("deb ftp://m.invalid/debian bookworm main", "is not http://"),
    ("deb cdrom:[Debian]/ bookworm main", "is not an apt line"),
    ("deb http://m.invalid/debian -bookworm main", "malformed suite"),
    ("deb http://m.invalid/debian bookworm ma;in", "malformed component"),
    ("rm -rf /", "type must be deb"),
    ("", "is not an apt line"),
])
def test_refused_lines(line, needle):
    with pytest.raises(ValueError) as e:
        ka.validate_source_line(line)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("line", [
    "deb [trusted=yes] file:/srv/repo ./",
    "deb [allow-insecure=yes arch=amd64] http://m.invalid/d bookworm main",
])
def test_unauthenticated_sources_need_the_explicit_option(line):
    with pytest.raises(ValueError):
        ka.validate_source_line(line)
    assert ka.validate_source_line(line, allow_unauthenticated=True).startswith("deb [")


def test_multi_line_refused_even_when_unauthenticated_is_allowed():
    with pytest.raises(ValueError, match="spans several lines"):
        ka.validate_source_line("deb file:/a ./\ndeb file:/b ./", allow_unauthenticated=True)


def test_parse_fields():
    e = ka.parse_source_line("deb [arch=amd64 signed-by=/k.gpg] https://m.invalid/u noble-updates main universe")
    assert e == {"type": "deb", "options": {"arch": "amd64", "signed-by": "/k.gpg"}, "uri": "https://m.invalid/u",
                 "suite": "noble-updates", "components": ["main", "universe"]}
    assert ka.signed_by_paths([ka.format_source_line(e)]) == ["/k.gpg"]


@given(st.text(min_size=1, max_size=80))
def test_any_text_is_refused_or_one_valid_line(text):
    try:
        normal = ka.validate_source_line(text)
    except ValueError:
        return
    assert "\n" not in normal and "\r" not in normal
    entry = ka.parse_source_line(normal)
    assert not ka.insecure_options(entry)
    assert ka.validate_source_line(normal) == normal


@given(st.sampled_from(["deb http://m.invalid/d bookworm main", "deb file:/srv/r ./"]),
       st.sampled_from(["\n", "\r", "\x00", "\x1b", "\x7f", "\x0b"]),
       st.sampled_from(["", "deb [trusted=yes] file:/x ./", "x"]))
def test_control_characters_are_always_refused(line, ctl, tail):
    with pytest.raises(ValueError):
        ka.validate_source_line(line + ctl + tail, allow_unauthenticated=True)


@pytest.mark.parametrize("value,ok", [
    ("http://m.invalid/debian", True), ("file:/srv/mirror", True), ("ftp://m.invalid/d", False),
    ("http://m.invalid/d bookworm main", False), ("http://m.invalid/d\n", False),
])
def test_validate_mirror(value, ok):
    if ok:
        assert ka.validate_mirror(value) == value
    else:
        with pytest.raises(ValueError):
            ka.validate_mirror(value)


@pytest.mark.parametrize("value,ok", [
    ("bookworm", True), ("noble-updates", True), ("Bookworm", False), ("-x", False), ("a b", False), ("a\n", False),
])
def test_validate_suite(value, ok):
    if ok:
        assert ka.validate_suite(value) == value
    else:
        with pytest.raises(ValueError):
            ka.validate_suite(value)


_OPTION_VALUES = {"arch": st.sampled_from(["amd64", "arm64", "amd64,i386"]),
                  "signed-by": st.sampled_from(["/usr/share/keyrings/debian-archive-keyring.gpg", "/k.gpg"]),
                  "trusted": st.sampled_from(["yes", "no"]), "allow-insecure": st.sampled_from(["yes", "no"]),
                  "allow-weak": st.sampled_from(["yes", "no"]), "check-valid-until": st.sampled_from(["no"])}


@st.composite
def source_lines(draw):
    keys = draw(st.lists(st.sampled_from(sorted(_OPTION_VALUES)), unique=True, max_size=4))
    opts = dict((k, draw(_OPTION_VALUES[k])) for k in keys)
    uri = draw(st.sampled_from(["http://m.invalid/debian", "https://m.invalid/u", "file:/srv/repo"]))
    if draw(st.booleans()):
        suite, comps = "./", []
    else:
        suite = draw(st.sampled_from(["bookworm", "trixie-security", "noble-updates"]))
        comps = draw(st.lists(st.sampled_from(["main", "contrib", "universe"]), min_size=1, max_size=3, unique=True))
    words = ["deb"] + (["[%s]" % " ".join("%s=%s" % kv for kv in sorted(opts.items()))] if opts else [])
    return " ".join(words + [uri, suite] + comps), opts


@given(source_lines())
def test_generated_lines_accepted_unless_they_turn_checks_off(case):
    line, opts = case
    insecure = any(opts.get(k) == "yes" for k in ("trusted", "allow-insecure", "allow-weak"))
    assert ka.validate_source_line(line, allow_unauthenticated=True) == line
    if insecure:
        with pytest.raises(ValueError, match="turns apt's signature checks off"):
            ka.validate_source_line(line)
    else:
        assert ka.validate_source_line(line) == line
