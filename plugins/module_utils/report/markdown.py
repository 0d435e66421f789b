# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Escaping for the Markdown reports: a node's strings (host names, reasons, errors, versions, drift values) are
text, never Markdown or HTML.

:func:`inline` makes any value one line of literal text for CommonMark/GFM (the spec's sections 2.4 backslash
escapes, 4 leaf blocks, 6.6 raw HTML): every run of whitespace (newlines included) becomes one space, so a value
never starts a line of its own (no forged heading, list, quote or code block); ``&``, ``<`` and ``>`` become entity
references (no raw HTML such as ``<script>``, no autolink, no entity of the node's choosing); the inline markup
characters ``\\ ` * [ | ~`` (a ``]`` without its ``[`` opens nothing) and a ``_`` not inside a word are backslash-
escaped (no emphasis, code span, link, image, strikethrough or table cell break); and a value that begins with a
block marker (``#``, ``+``, ``-``, ``=``, ``1.`` or ``1)`` before a space) has that marker escaped, for the places
where it opens a list item or a heading. :func:`cell` is the same for a table cell (``None`` as ``-``, a mapping or
list as its JSON).
Plain Python. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(u"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INLINE = re.compile(r"([\\`*\[|~])")
# ``_`` between two letters or digits opens and closes nothing (CommonMark 6.2, flanking rules): kept as is there,
# so names like default_roce_tos stay readable
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
# an ordered list marker needs a space or the end after it (CommonMark 5.2); the others are escaped as they are
_BLOCK_START = re.compile(r"([#+=-])|(\d{1,9})([.)])(?!\S)")


def inline(value):
    """``value`` (anything; ``str()`` of it) as literal inline Markdown text on one line."""
    text = _SPACE.sub(" ", _CONTROL.sub(" ", str(value))).strip()
    for raw, entity in _ENTITIES:
        text = text.replace(raw, entity)
    text = _INLINE.sub(r"\\\1", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    m = _BLOCK_START.match(text)
    if m and m.group(1):
        text = "\\" + text
    elif m:
        text = m.group(2) + "\\" + text[len(m.group(2)):]
    return text


def cell(value):
    """A table cell: ``None`` as ``-``, a mapping or list as JSON, anything else as :func:`inline`."""
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    return inline(value)


def join(values, sep=", "):
    """Several values, each :func:`inline`, joined."""
    return sep.join(inline(v) for v in values)
