# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-interface IPv4 sysctls of the RoCE rails (ARP flux and reverse-path filter).

Several rails on one flat subnet answer each other's ARP requests and filter each other's
replies unless ``arp_ignore=1``, ``arp_announce=2`` and a loose (2) or disabled (0, VAST
``localports=``) ``rp_filter``. The kernel uses max(conf/all, conf/<iface>) for all three, so
``all`` is managed together with ``default`` (interfaces created later) and each rail.

Applied live through ``/proc/sys/net/ipv4/conf/<iface>/<key>`` (read first, write only what
differs) and persisted in one file owned by the collection,
``/etc/sysctl.d/90-gpufabric-rails.conf``. systemd-sysctl applies it at boot and, through
systemd's udev rule for new network interfaces, again when a rail appears later.
Plain Python: no Ansible imports. This file is private to the collection: no stable API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

CONF_DIR = "/proc/sys/net/ipv4/conf"
NET_CLASS = "/sys/class/net"
SYSCTL_FILE = "/etc/sysctl.d/90-gpufabric-rails.conf"
KEYS = ("arp_ignore", "arp_announce", "rp_filter")
DEFAULTS = {"arp_ignore": 1, "arp_announce": 2, "rp_filter": 2}
# Values the kernel accepts (Documentation/networking/ip-sysctl.rst).
ALLOWED = {
    "arp_ignore": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "arp_announce": (0, 1, 2),
    "rp_filter": (0, 1, 2),
}
MEANING = {
    ("arp_ignore", 1): "reply only if the target IP is configured on the incoming interface",
    ("arp_announce", 2): "always use the best local address for the outgoing interface",
    ("rp_filter", 0): "no source validation (VAST localports=)",
    ("rp_filter", 1): "strict reverse-path filter",
    ("rp_filter", 2): "loose reverse-path filter",
}
_IFNAME_BAD = re.compile(r"[/:\s]")

HEADER = """\
# Managed by the gpufabric.node collection (module gpufabric.node.rail_sysctl).
# Do not edit: the collection owns this file and rewrites it on every run.
# ARP and reverse-path settings of the RoCE rails. The kernel uses max(all, <iface>)
# for arp_ignore, arp_announce and rp_filter. Rails that appear after boot are covered by
# systemd's udev rule that runs systemd-sysctl for every new network interface.
"""


class SysctlError(Exception):
    """A failure phrased for a platform engineer."""


def validate_ifname(name):
    """Kernel rules for interface names (dev_valid_name): 1..15 bytes, no '/', ':' or space, not . or .."""
    if not isinstance(name, str) or not name:
        raise ValueError("interface name must be a non-empty string (got %r)" % (name,))
    if len(name.encode("utf-8")) > 15:
        raise ValueError("interface name %r is longer than 15 characters" % name)
    if name in (".", "..") or _IFNAME_BAD.search(name):
        raise ValueError("interface name %r is not a legal Linux interface name" % name)
    if name in ("all", "default"):
        raise ValueError("%r is not a rail: 'all' and 'default' are always managed" % name)
    return name


def validate_value(key, value):
    if key not in ALLOWED:
        raise ValueError("unknown setting %r (known: %s)" % (key, ", ".join(KEYS)))
    if isinstance(value, (bool, float)):
        raise ValueError("%s must be an integer (got %r)" % (key, value))
    try:
        ivalue = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer (got %r)" % (key, value))
    if ivalue not in ALLOWED[key]:
        raise ValueError("%s must be one of %s (got %r)" % (key, ", ".join(str(v) for v in ALLOWED[key]), value))
    return ivalue


def validate_rails(sysroot, rails):
    """Check names, duplicates and existence under /sys/class/net; returns the rails as given."""
    if not rails:
        raise ValueError("rails must list at least one network interface")
    seen = set()
    for rail in rails:
        validate_ifname(rail)
        if rail in seen:
            raise ValueError("rail %s is listed twice" % rail)
        seen.add(rail)
    missing = [r for r in rails if not sysroot.exists("%s/%s" % (NET_CLASS, r))]
    if missing:
        raise ValueError("rail(s) %s do not exist (no %s/<name>)" % (", ".join(missing), NET_CLASS))
    return list(rails)


def desired_settings(rails, values):
    """Ordered list of (iface, key, value): all, default, then the rails in the order given."""
    vals = {}
    for key in KEYS:
        vals[key] = validate_value(key, values.get(key, DEFAULTS[key]))
    out = []
    for iface in ["all", "default"] + list(rails):
        for key in KEYS:
            out.append((iface, key, vals[key]))
    return out


def _attr(iface, key):
    return "%s/%s/%s" % (CONF_DIR, iface, key)


def read_current(sysroot, settings):
    """{(iface, key): int or None}."""
    cur = {}
    for iface, key, _value in settings:
        raw = sysroot.read(_attr(iface, key))
        try:
            cur[(iface, key)] = int(raw) if raw is not None else None
        except ValueError:
            cur[(iface, key)] = None
    return cur


def effective_rp_filter(values, rails):
    """{rail: max(all, rail)} from a {(iface, key): value} map."""
    out = {}
    for rail in rails:
        a = values.get(("all", "rp_filter"))
        r = values.get((rail, "rp_filter"))
        out[rail] = max(a or 0, r or 0) if (a is not None or r is not None) else None
    return out


def apply_live(sysroot, settings, check_mode):
    """Write each differing value; returns {"changed", "drift", "before", "after"} (maps keyed 'iface.key')."""
    current = read_current(sysroot, settings)
    missing = [_attr(i, k) for (i, k), v in current.items() if v is None]
    if missing:
        raise SysctlError("cannot read %s (is the interface in this network namespace?)" % ", ".join(missing))
    drift = []
    after = dict(current)
    for iface, key, value in settings:
        cur = current[(iface, key)]
        if cur == value:
            continue
        drift.append({"concern": "sysctl", "object": iface, "key": key, "current": cur, "desired": value})
        if not check_mode:
            sysroot.write_attr(_attr(iface, key), "%d\n" % value)
            got = read_current(sysroot, [(iface, key, value)])[(iface, key)]
            if got != value:
                raise SysctlError("wrote %d to %s but it reads back %r" % (value, _attr(iface, key), got))
        after[(iface, key)] = value
    return {
        "changed": bool(drift),
        "drift": drift,
        "before": current,
        "after": after,
    }


def sysctl_key(iface, key):
    """sysctl.d key; slash form when the interface name contains a dot (VLANs), as sysctl.d(5) allows."""
    if "." in iface:
        return "net/ipv4/conf/%s/%s" % (iface, key)
    return "net.ipv4.conf.%s.%s" % (iface, key)


def render_conf(settings):
    """The whole sysctl.d file: header, meaning of the chosen values, one block per interface."""
    lines = [HEADER.rstrip("\n")]
    chosen = []
    for _iface, key, value in settings:
        if (key, value) in MEANING and "%s=%d: %s" % (key, value, MEANING[(key, value)]) not in chosen:
            chosen.append("%s=%d: %s" % (key, value, MEANING[(key, value)]))
    lines.extend("#   " + c for c in chosen)
    last = None
    for iface, key, value in settings:
        if iface != last:
            lines.append("")
            lines.append("# %s" % {"all": "all interfaces", "default": "interfaces created later"}.get(
                iface, "rail " + iface))
            last = iface
        lines.append("%s = %d" % (sysctl_key(iface, key), value))
    return "\n".join(lines) + "\n"


def persist(sysroot, content, check_mode, path=SYSCTL_FILE):
    """Write the file atomically if it differs. Returns {"changed", "before", "after", "path"}."""
    before = sysroot.read_raw(path, None)
    changed = before != content
    if changed and not check_mode:
        sysroot.write_file_atomic(path, content, 0o644)
    return {"changed": changed, "before": before if before is not None else "", "after": content, "path": path}


def manage(sysroot, rails, values, check_mode, path=SYSCTL_FILE):
    """Validate, apply live and persist. Raises ValueError (bad input, nothing touched) or SysctlError."""
    rails = validate_rails(sysroot, rails)
    settings = desired_settings(rails, values)
    for iface in ["all", "default"] + rails:
        if not sysroot.isdir("%s/%s" % (CONF_DIR, iface)):
            raise SysctlError("%s/%s does not exist: the rail is not in this network namespace or IPv4 is "
                              "disabled on it" % (CONF_DIR, iface))
    live = apply_live(sysroot, settings, check_mode)
    content = render_conf(settings)
    filed = persist(sysroot, content, check_mode, path)
    settings_out = {}
    for (iface, key), value in sorted(live["after"].items()):
        settings_out.setdefault(iface, {})[key] = value
    live_text = {}
    for side in ("before", "after"):
        live_text[side] = "".join("%s = %s\n" % (sysctl_key(i, k), live[side][(i, k)]) for i, k, _v in settings)
    return {
        "live_before": live_text["before"],
        "live_after": live_text["after"],
        "changed": live["changed"] or filed["changed"],
        "live_changed": live["changed"],
        "file_changed": filed["changed"],
        "drift": live["drift"] + ([{"concern": "sysctl", "object": path, "key": "content",
                                    "current": "differs" if filed["before"] else "missing",
                                    "desired": "managed"}] if filed["changed"] else []),
        "settings": settings_out,
        "effective_rp_filter": effective_rp_filter(live["after"], rails),
        "file": filed,
    }
