# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render ``/etc/nccl.conf`` for the RoCE rails.

NCCL reads ``~/.nccl.conf`` (or the file named by ``NCCL_CONF_FILE`` instead) and then
``/etc/nccl.conf`` and applies each ``KEY=VALUE`` line with ``setenv(key, value, 0)``: the
process environment wins over ``~/.nccl.conf``, which wins over ``/etc/nccl.conf``. The collection owns the whole file:
lines it does not render are removed (put site additions in ``extra_vars``).
Plain Python: no Ansible imports. This file is private to the collection: no stable API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

NCCL_CONF = "/etc/nccl.conf"
DEFAULT_TC = 106
_VAR = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")
MANAGED = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_FIFO_TC", "NCCL_SOCKET_IFNAME")

HEADER = """\
# Managed by the gpufabric.node collection (module gpufabric.node.nccl_config).
# The collection owns this file: any line it does not render is removed on the next run.
# NCCL applies these lines with setenv(..., overwrite=0): a variable already set in the
# process environment wins, then ~/.nccl.conf (or the file named by NCCL_CONF_FILE, read
# instead of it), then this file. Values are taken verbatim after the first '=': no quoting,
# no spaces around '='.
# Containers see this file only when it is mounted into them (e.g. -v /etc/nccl.conf:/etc/nccl.conf:ro).
"""


class NcclError(Exception):
    """A failure phrased for a platform engineer."""


def _int_in(name, value, lo, hi):
    if isinstance(value, (bool, float)):
        raise ValueError("%s must be an integer %d..%d (got %r)" % (name, lo, hi, value))
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer %d..%d (got %r)" % (name, lo, hi, value))
    if not lo <= v <= hi:
        raise ValueError("%s must be %d..%d (got %d)" % (name, lo, hi, v))
    return v


def validate_extra_vars(extra):
    """{NAME: value} with NCCL-style names; values single-line strings; managed names refused."""
    out = {}
    for k, v in (extra or {}).items():
        if not isinstance(k, str) or not _VAR.match(k):
            raise ValueError("extra_vars key %r is not an environment variable name (A-Z, 0-9, _)" % (k,))
        if k in MANAGED:
            raise ValueError("extra_vars must not set %s: use the module option for it" % k)
        if isinstance(v, bool):
            v = "1" if v else "0"
        v = "%s" % (v,)
        if "\n" in v or "\r" in v:
            raise ValueError("extra_vars %s: value must be a single line" % k)
        if v != v.strip():
            raise ValueError("extra_vars %s: value must not start or end with white space" % k)
        out[k] = v
    return out


def hca_value(devices_ports):
    """'=mlx5_0:1,mlx5_1:1': exact-match form (a leading '=' stops NCCL's prefix matching)."""
    if not devices_ports:
        raise NcclError("no RDMA devices for NCCL_IB_HCA")
    seen = []
    for ibdev, port in devices_ports:
        item = "%s:%d" % (ibdev, int(port))
        if item not in seen:
            seen.append(item)
    return "=" + ",".join(seen)


def choose_gid_index(per_rail, explicit=None):
    """The one RoCE v2 IPv4 GID index shared by all rails.

    ``per_rail``: [(rail, index or None)]. ``explicit`` (0..255) wins when given.
    Raises NcclError when the rails disagree, or some or all have none.
    """
    if explicit is not None:
        return _int_in("gid_index", explicit, 0, 255)
    found = dict((r, i) for r, i in per_rail if i is not None)
    missing = [r for r, i in per_rail if i is None]
    if not found:
        raise NcclError("no rail has a RoCE v2 GID with an IPv4 address (rails: %s): assign the rails their IPv4 "
                        "addresses or pass gid_index" % ", ".join(r for r, _i in per_rail))
    values = sorted(set(found.values()))
    if len(values) > 1:
        raise NcclError("rails disagree on the RoCE v2 IPv4 GID index (%s): NCCL_IB_GID_INDEX is one value for all "
                        "HCAs; pass gid_index explicitly or make the rails consistent"
                        % ", ".join("%s=%d" % (r, found[r]) for r in sorted(found)))
    if missing:
        raise NcclError("rail(s) %s have no RoCE v2 GID with an IPv4 address (the others use index %d): give them "
                        "their IPv4 addresses or pass gid_index" % (", ".join(missing), values[0]))
    return values[0]


def desired_vars(hca, gid_index, tc=DEFAULT_TC, fifo_tc=None, socket_ifname=None, extra=None):
    """Ordered [(NAME, value)]: managed variables first, then extra_vars sorted by name."""
    tc = _int_in("tc", tc, 0, 255)
    out = [("NCCL_IB_HCA", hca), ("NCCL_IB_GID_INDEX", "%d" % _int_in("gid_index", gid_index, 0, 255)),
           ("NCCL_IB_TC", "%d" % tc)]
    if fifo_tc is not None:
        out.append(("NCCL_IB_FIFO_TC", "%d" % _int_in("fifo_tc", fifo_tc, 0, 255)))
    if socket_ifname:
        if re.search(r"\s", socket_ifname):
            raise ValueError("socket_ifname must not contain white space (got %r)" % socket_ifname)
        out.append(("NCCL_SOCKET_IFNAME", socket_ifname))
    extra = validate_extra_vars(extra)
    for k in sorted(extra):
        out.append((k, extra[k]))
    return out


def render(variables):
    return HEADER + "\n" + "".join("%s=%s\n" % (k, v) for k, v in variables)


def parse(text):
    """{NAME: value} of a nccl.conf text as NCCL reads it: lines starting with '#' and lines without
    '=' are skipped, the name is everything before the first '=', the value everything after it
    (verbatim). A name set twice keeps its first value (setenv without overwrite)."""
    out = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out.setdefault(k, v)
    return out


def drift(before_text, variables, path):
    """One entry per variable whose value differs, plus unmanaged lines that would be removed."""
    cur = parse(before_text) if before_text is not None else {}
    want = dict(variables)
    out = []
    for k, v in variables:
        if cur.get(k) != v:
            out.append({"concern": "nccl", "object": path, "key": k, "current": cur.get(k), "desired": v})
    for k in sorted(set(cur) - set(want)):
        out.append({"concern": "nccl", "object": path, "key": k, "current": cur[k], "desired": None})
    return out


def write_conf(sysroot, variables, check_mode, path=NCCL_CONF):
    """Render, compare, write atomically. Returns {"changed","drift","before","after","path"}."""
    content = render(variables)
    before = sysroot.read_raw(path, None)
    changed = before != content
    d = drift(before, variables, path)
    if changed and not d:
        d.append({"concern": "nccl", "object": path, "key": "content",
                  "current": "differs" if before is not None else "missing", "desired": "managed"})
    if changed and not check_mode:
        sysroot.write_file_atomic(path, content, 0o644)
    return {"changed": changed, "drift": d, "before": before or "", "after": content, "path": path}
