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

from ansible_collections.gpufabric.node.plugins.module_utils import results

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
# dev_valid_name refuses '/', ':' and white space; control characters too, which no file or log should carry
_IFNAME_BAD = re.compile(r"[/:\s\x00-\x1f\x7f]")
# legal in a kernel interface name, but not nameable in a sysctl.d key: '=' ends the key, and systemd-sysctl and
# procps sysctl both read a key with '*', '?' or '[' as a glob (``r[1]`` would set ``r1``): refused
_SYSCTL_D_BAD = re.compile(r"[=*?\[]")

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
    if _SYSCTL_D_BAD.search(name):
        raise ValueError("interface name %r cannot be written in a sysctl.d file: '=' ends the key and '*', '?' "
                         "or '[' make it a glob that sets other interfaces (rename the rail)" % name)
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
    """Write each differing value, each setting on its own; returns {"changed", "drift", "before", "after",
    "results", "failed"} (maps keyed (iface, key); ``results`` one results.result per setting, object its sysctl key;
    ``failed`` the (iface, key) whose write failed or did not read back)."""
    current = read_current(sysroot, settings)
    missing = [_attr(i, k) for (i, k), v in current.items() if v is None]
    if missing:
        raise SysctlError("cannot read %s (is the interface in this network namespace?)" % ", ".join(missing))
    drift = []
    after = dict(current)
    out = []
    failed = []
    for iface, key, value in settings:
        cur = current[(iface, key)]
        obj = sysctl_key(iface, key)
        if cur == value:
            out.append(results.result(obj, results.UNCHANGED))
            continue
        drift.append({"concern": "sysctl", "object": iface, "key": key, "current": cur, "desired": value})
        error = None
        if not check_mode:
            try:
                sysroot.write_attr(_attr(iface, key), "%d\n" % value)
            except (IOError, OSError) as e:
                error = "cannot write %d to %s: %s" % (value, _attr(iface, key), e)
            got = read_current(sysroot, [(iface, key, value)])[(iface, key)]
            if error is None and got != value:
                error = "wrote %d to %s but it reads back %r" % (value, _attr(iface, key), got)
            after[(iface, key)] = got
        else:
            after[(iface, key)] = value
        changes = [results.change("value", cur, after[(iface, key)])] if after[(iface, key)] != cur else []
        if error:
            failed.append((iface, key))
            out.append(results.result(obj, results.FAILED, error, changes))
        else:
            out.append(results.result(obj, results.CHANGED, changes=changes))
    return {
        "changed": results.changed(out),
        "drift": drift,
        "before": current,
        "after": after,
        "results": out,
        "failed": failed,
    }


def parse_conf(text):
    """{(iface, key): value} of the settings a sysctl.d file of ours holds (dotted or slash form)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, value = [x.strip() for x in line.split("=", 1)]
        parts = name.split("/") if "/" in name else name.split(".")
        if "/" not in name and len(parts) > 5:
            continue        # a dotted interface name is only written in the slash form
        if len(parts) == 5 and parts[:3] == ["net", "ipv4", "conf"] and parts[4] in KEYS:
            try:
                out[(parts[3], parts[4])] = int(value)
            except ValueError:
                continue
    return out


def recorded_settings(settings, failed, previous_text):
    """The settings the file records after applying: the desired ones, except that a setting whose write failed
    keeps the value the file had for it (and is left out when it had none), so systemd-sysctl applies at boot what
    the interface has."""
    if not failed:
        return list(settings)
    prev = parse_conf(previous_text)
    out = []
    for iface, key, value in settings:
        if (iface, key) in failed:
            if (iface, key) in prev:
                out.append((iface, key, prev[(iface, key)]))
            continue
        out.append((iface, key, value))
    return out


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
    """Validate, apply live and persist. Raises ValueError (bad input, nothing touched) or SysctlError (an interface
    or setting that cannot be read: nothing touched). A setting whose write fails is in ``errors`` and ``results``
    (the others are written all the same) and keeps its earlier line in the file."""
    rails = validate_rails(sysroot, rails)
    settings = desired_settings(rails, values)
    for iface in ["all", "default"] + rails:
        if not sysroot.isdir("%s/%s" % (CONF_DIR, iface)):
            raise SysctlError("%s/%s does not exist: the rail is not in this network namespace or IPv4 is "
                              "disabled on it" % (CONF_DIR, iface))
    live = apply_live(sysroot, settings, check_mode)
    prior = sysroot.read_raw(path, None)
    content = render_conf(recorded_settings(settings, live["failed"], prior))
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
                                    "current": "missing" if prior is None else "differs",
                                    "desired": "managed"}] if filed["changed"] else []),
        "settings": settings_out,
        "effective_rp_filter": effective_rp_filter(live["after"], rails),
        "file": filed,
        "results": live["results"],
        "errors": [r["error"] for r in results.failed(live["results"])],
    }
