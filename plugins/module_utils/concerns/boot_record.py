# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every boot-time record section shares: the section spec, the validation helpers and the applier's rail loop.

A concern whose settings are lost at reboot or at an RDMA device registration records them in
``/etc/gpufabric/state.json`` (``concerns/state.py``) and describes its section with a :class:`Section` in its own
package (``concerns/<name>/boot.py``): the key in the file, the validator that normalises it (the same code its
module uses), how the boot-time applier applies it, whether a device re-registration applies it too, and the file
the concern's module kept before state.json had a section for it. ``concerns/sections.py`` lists the sections;
the store and the applier iterate that list and name no concern.

Plain Python, no Ansible imports. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.sysctl.manage import validate_ifname
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import topology

_IBDEV_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}\Z")


class Section(object):
    """One section of state.json, as its concern defines it.

    key: the section's name in the file; concern: the concern it belongs to; validate(data): the normalised copy
    (ValueError naming the bad key); apply(ctx, section, device): re-apply it in an applier run (``ctx`` is the
    run, ``device`` None at boot or a :class:`Device` for a re-registration); device_run: whether a device
    re-registration applies it; order: where the boot run applies it (lower first); legacy_file: the file the
    concern's module kept before state.json had this section, applied by ``fallback(ctx)`` when the section is
    absent.
    """

    def __init__(self, key, concern, validate, apply, order, device_run=False, legacy_file=None, fallback=None):
        self.key = key
        self.concern = concern
        self.validate = validate
        self.apply = apply
        self.order = order
        self.device_run = device_run
        self.legacy_file = legacy_file
        self.fallback = fallback


class Device(object):
    """The scope of a device run: the RDMA device that registered and its rails (netdevs)."""

    def __init__(self, ibdev, rails):
        self.ibdev = ibdev
        self.rails = list(rails)


def rails_of(device):
    """The rails a run covers: every recorded rail at boot (None), the device's rails in a device run."""
    return None if device is None else device.rails


# --- validation ------------------------------------------------------------------------------------

def integer(value, what, lo, hi):
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError("%s must be an integer %d..%d (got %r)" % (what, lo, hi, value))
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer %d..%d (got %r)" % (what, lo, hi, value))
    if not lo <= v <= hi:
        raise ValueError("%s must be %d..%d (got %d)" % (what, lo, hi, v))
    return v


def ifname(name, what):
    try:
        return validate_ifname(name)
    except ValueError as e:
        raise ValueError("%s: %s" % (what, e))


def names(values, what, check):
    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not values:
        raise ValueError("%s must be a non-empty list (got %r)" % (what, values))
    out = []
    for v in values:
        check(v, what)
        if v in out:
            raise ValueError("%s lists %s twice" % (what, v))
        out.append(v)
    return sorted(out, key=natural)


def natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def ibdev(name, what):
    if not isinstance(name, str) or not _IBDEV_RE.match(name) or name in (".", ".."):
        raise ValueError("%s: %r is not an RDMA device name" % (what, name))
    return name


def only_keys(data, concern, allowed):
    if not isinstance(data, dict):
        raise ValueError("%s: state must be a mapping (got %r)" % (concern, data))
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValueError("%s: unknown key(s) %s (known: %s)" % (concern, ", ".join(unknown), ", ".join(allowed)))


def objects_key(group):
    return "devices" if "devices" in group else "rails"


def groups_of(section):
    """The groups of a recorded section: [section] for the one-group form, else its ``groups``."""
    if not section:
        return []
    return list(section["groups"]) if "groups" in section else [section]


def grouped(concern, data, validate_group):
    """A section of one group ({objects, settings}) or of several ({"groups": [...]}), after a partial apply left
    some objects on earlier settings. Groups with equal settings are merged, no object may be in two groups, all
    groups name the same kind of object; one group is stored flat (the form of a section without partial apply)."""
    if isinstance(data, dict) and "groups" in data:
        only_keys(data, concern, ("groups",))
        raw = data["groups"]
        if isinstance(raw, (str, dict)) or not isinstance(raw, (list, tuple)) or not raw:
            raise ValueError("%s.groups must be a non-empty list (got %r)" % (concern, raw))
        groups = [validate_group(g, "%s.groups[%d]" % (concern, i)) for i, g in enumerate(raw)]
    else:
        groups = [validate_group(data, concern)]
    if len(set(objects_key(g) for g in groups)) > 1:
        raise ValueError("%s: the groups mix rails and devices" % concern)
    merged = []
    for g in groups:
        key = objects_key(g)
        same = [m for m in merged if dict(m, **{key: None}) == dict(g, **{key: None})]
        if same:
            same[0][key] = same[0][key] + g[key]
        else:
            merged.append(dict(g))
    seen = set()
    for m in merged:
        key = objects_key(m)
        twice = sorted(set(o for o in m[key] if o in seen or m[key].count(o) > 1))
        if twice:
            raise ValueError("%s: %s %s recorded twice" % (concern, key, ", ".join(twice)))
        seen.update(m[key])
        m[key] = sorted(m[key], key=natural)
    merged.sort(key=lambda m: natural(m[objects_key(m)][0]))
    return merged[0] if len(merged) == 1 else {"groups": merged}


# --- the applier's loop over recorded rails ---------------------------------------------------------

def netdev_present(sysroot, rail):
    return sysroot.exists("/sys/class/net/%s" % rail)


def rails_by_ibdev(sysroot):
    """{ibdev: [netdev, ...]} and {netdev: [ibdev, ...]} from topology.list_rails."""
    by_dev = {}
    by_rail = {}
    for r in topology.list_rails(sysroot):
        if r.get("netdev"):
            by_dev.setdefault(r["ibdev"], []).append(r["netdev"])
            by_rail.setdefault(r["netdev"], []).append(r["ibdev"])
    return by_dev, by_rail


def apply_rail_groups(ctx, concern, section, only_rails, settings_of, apply_one, errors):
    """Each recorded group of rails of ``concern`` (state.json keeps a rail whose apply failed, or that a run did not
    name, on its earlier settings) with its settings: ``settings_of(group)`` gives them, ``apply_one(rails,
    settings)`` applies them (a result dict with "changed" and "results"; ``errors`` are the exceptions it may
    raise). A rail that does not appear is an error of its own; the other rails are still applied."""
    groups = [([r for r in g["rails"] if only_rails is None or r in only_rails], settings_of(g))
              for g in groups_of(section)]
    groups = [(rails, settings) for rails, settings in groups if rails]
    if not groups:
        ctx.skip(concern, "no recorded rail belongs to this device")
        return
    everyone = [r for rails, _s in groups for r in rails]
    missing = ctx.wait(lambda: [r for r in everyone if not netdev_present(ctx.sysroot, r)])
    for r in missing:
        ctx.error(concern, "rail %s did not appear (no /sys/class/net/%s)" % (r, r))
    done = {"changed": False, "rails": [], "results": []}
    for rails, settings in groups:
        present = [r for r in rails if r not in missing]
        if not present:
            continue
        try:
            res = apply_one(present, settings)
        except errors as e:
            ctx.error(concern, "rail(s) %s: %s" % (", ".join(present), e))
            continue
        done["changed"] = done["changed"] or res["changed"]
        done["rails"].extend(present)
        done["results"].extend(res["results"])
        ctx.log_results(concern, res["results"])
    if done["rails"]:
        ctx.concerns[concern] = done
