# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input checks every module runs first, and the renderers of values that go into files root runs.

``check_params(spec, params)`` walks every option of a module's argument spec (list elements, dict keys and
values, suboptions, at any depth) and refuses control characters (NUL, newline, carriage return, the other C0
characters and DEL) in every string, naming the option's path (``extra_vars.NCCL_DEBUG``, ``rails[1]``). Options
named in ``text`` carry report data (drift documents, error messages gathered from hosts) that the report
renderers escape for their formats: their string values may hold tab, newline and carriage return, never another
control character; their dict keys are checked like every other string. ``guard(module)`` runs it on an
AnsibleModule and fails the module before it reads or writes anything.

The renderers, one per syntax:

- ``safe_path``: an absolute, normalized path (no ``.``/``..`` component, no ``//``) of the portable characters
  ``[A-Za-z0-9._+,:=@-]``: safe, unquoted, in a shebang line, a systemd ``ExecStart=``, a udev ``RUN`` value and
  Python source;
- ``shebang(python)``: the ``#!`` line, for a ``safe_path`` of at most 255 bytes (the kernel's limit);
- ``systemd_exec_arg(word)``: one ``ExecStart=`` argument, quoted by systemd's rules (specifiers ``%`` doubled,
  ``$`` doubled against environment expansion, backslash and double quote escaped inside double quotes);
- ``systemd_unit_name(name)``: a unit name for ``Before=``/``After=`` (systemd's unit name characters; ``\\``
  only as the ``\\xNN`` of systemd-escape);
- ``udev_value(text)``: a value inside a udev rule's double quotes (``%`` and ``$`` doubled against udev's
  substitutions; a double quote, a backslash or a control character is refused);
- ``UDEV_UNIT_SAFE_GLOB``: a udev glob of the device names that are a unit instance name as they are (``%i``).

Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# C0 control characters and DEL; report text may hold tab, newline and carriage return
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
TEXT_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PATH_CHARS = "A-Za-z0-9._+,:=@-"
_SAFE_PATH_RE = re.compile(r"(?:/[%s]+)+\Z|/\Z" % _PATH_CHARS)
_UNIT_NAME_RE = re.compile(r"(?:[A-Za-z0-9:_.@-]|\\x[0-9a-f]{2})+\.(?:service|socket|device|mount|automount|swap|"
                           r"target|path|timer|slice|scope)\Z")
SHEBANG_MAX = 255
# the characters of a device name that is a valid unit instance name as it is (%i needs no unescaping)
INSTANCE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
INSTANCE_RE = re.compile(r"[A-Za-z0-9_.-]{1,63}\Z")
# udev glob (fnmatch): a name with any character outside INSTANCE_CHARS; every character listed, no ranges, so
# the collation order of the locale udev runs in cannot widen it
UDEV_UNIT_UNSAFE_GLOB = "*[!%s]*" % INSTANCE_CHARS


class InputError(ValueError):
    """A parameter that cannot be used; the message names the option."""


def _describe(value):
    return repr(value) if len(value) <= 80 else repr(value[:77]) + "..."


def _check_str(value, path, text):
    if (TEXT_CONTROL_RE if text else CONTROL_RE).search(value):
        raise InputError("%s: %s contains a control character (NUL, newline or another character below 0x20, or "
                         "DEL); give printable text only" % (path, _describe(value)))


def _walk(value, path, text):
    if isinstance(value, str):
        _check_str(value, path, text)
    elif isinstance(value, bytes):
        _walk(value.decode("utf-8", "surrogateescape"), path, text)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(v, "%s[%d]" % (path, i), text)
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            key = str(k)
            _check_str(key, "%s key" % path, False)
            _walk(value[k], "%s.%s" % (path, key), text)


def check_params(spec, params, text=()):
    """Refuse control characters in every string of ``params`` below the options of ``spec``.

    ``text``: names of options that carry report text (see the module doc). Raises InputError naming the option.
    """
    for name in sorted(spec):
        if name in params and params[name] is not None:
            _walk(params[name], name, name in text)


def guard(module, text=()):
    """check_params on an AnsibleModule's spec and params; fail_json with the option's path on bad input."""
    try:
        check_params(module.argument_spec, module.params, text)
    except InputError as e:
        module.fail_json(msg=str(e))


# --- renderers ------------------------------------------------------------------------------------------

def safe_path(value, what):
    """``value`` when it is an absolute, normalized path of portable characters; InputError otherwise."""
    if not isinstance(value, str) or not value:
        raise InputError("%s must be an absolute path (got %r)" % (what, value))
    _check_str(value, what, False)
    if not value.startswith("/"):
        raise InputError("%s must be an absolute path (got %r)" % (what, value))
    parts = value.split("/")[1:]
    if value != "/" and ("" in parts or "." in parts or ".." in parts):
        raise InputError("%s must be a normalized path without '.', '..' or empty components (got %r)"
                         % (what, value))
    if not _SAFE_PATH_RE.match(value):
        raise InputError("%s: %r has a character outside [%s/]; root runs it at boot, so only these are allowed"
                         % (what, value, _PATH_CHARS))
    return value


def shebang(python):
    """The ``#!`` line (with its newline) of a script run by ``python``."""
    safe_path(python, "python")
    if len(python.encode("utf-8")) > SHEBANG_MAX:
        raise InputError("python: %r is longer than the %d bytes a shebang line can hold" % (python, SHEBANG_MAX))
    return "#!%s\n" % python


def systemd_exec_arg(word):
    """One argument of an ``ExecStart=`` command line, as systemd parses it back to ``word``.

    systemd expands specifiers (``%``) and environment variables (``$``) in ExecStart= and unquotes and
    unescapes each word: ``%%`` and ``$$`` stand for the characters; a word with anything but portable
    characters is written in double quotes with ``\\`` and ``"`` escaped. Control characters are refused."""
    _check_str(word, "ExecStart argument", False)
    out = word.replace("%", "%%").replace("$", "$$")
    if out and re.match(r"[A-Za-z0-9._+,:=@/%$-]+\Z", out) and out[0] not in "@-:+!":
        return out
    return '"%s"' % out.replace("\\", "\\\\").replace('"', '\\"')


def systemd_unit_name(name, what):
    """``name`` when it is a unit name (``kubelet.service``, ``mnt-data\\x2d1.mount``); InputError otherwise."""
    if not isinstance(name, str) or not _UNIT_NAME_RE.match(name) or len(name) > 255:
        raise InputError("%s: %r is not a systemd unit name (e.g. kubelet.service)" % (what, name))
    return name


def udev_value(text, what):
    """``text`` for a udev rule's double-quoted value: ``%`` and ``$`` doubled (udev substitutes them)."""
    _check_str(text, what, False)
    if '"' in text or "\\" in text:
        raise InputError("%s: %r has a double quote or a backslash, which a udev rule value cannot hold"
                         % (what, text))
    return text.replace("%", "%%").replace("$", "$$")


def instance_name(device):
    """``device`` when it is a unit instance name as it is (``%i`` of the template gives it back unchanged)."""
    if not isinstance(device, str) or not INSTANCE_RE.match(device) or device in (".", ".."):
        raise InputError("device: %r is not an RDMA device name of the characters [A-Za-z0-9_.-]" % (device,))
    return device


_FILE_NAME_RE = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,127}\Z")
_TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
                           r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?\Z")
# NCCL_SOCKET_IFNAME: a comma-separated list of interface name prefixes, '^' first excludes them, '=' exact names
_NCCL_IFNAMES_RE = re.compile(r"\^?=?[A-Za-z0-9_.:@-]{1,15}(?:,=?[A-Za-z0-9_.:@-]{1,15})*\Z")


def file_name(value, what):
    """``value`` when it is a plain file name of portable characters (not ``.``/``..``, no ``/``, no leading
    ``.`` or ``-``); InputError otherwise."""
    if not isinstance(value, str) or not _FILE_NAME_RE.match(value):
        raise InputError("%s must be a plain file name of the characters [A-Za-z0-9._+-] not starting with '.' or "
                         "'-' (got %r)" % (what, value))
    return value


def timestamp(value, what):
    """``value`` when it is an ISO 8601 date or date and time (``2026-01-01T00:00:00Z``, ``...+00:00``)."""
    if not isinstance(value, str) or not _TIMESTAMP_RE.match(value):
        raise InputError("%s must be an ISO 8601 time such as 2026-01-01T00:00:00Z (got %r)" % (what, value))
    return value


def nccl_ifnames(value, what):
    """``value`` when it is an NCCL_SOCKET_IFNAME list (``eth0``, ``=bond0``, ``^docker,lo``)."""
    if not isinstance(value, str) or not _NCCL_IFNAMES_RE.match(value):
        raise InputError("%s: %r is not an NCCL interface list (names or prefixes separated by ',', '^' first to "
                         "exclude, '=' for an exact name)" % (what, value))
    return value
