# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired-state store of the runtime-only settings: ``/etc/gpufabric/state.json``.

Runtime-only state (DCB, rdma_cm ``default_roce_tos``, ACS applied at runtime, nvidia-fs
``rw_stats_enabled``) is lost at reboot and ToS also at every RDMA device registration. The
modules that apply such state call :func:`record` after applying; the boot-time applier
(``applier.py``) reads the file with :func:`load` and applies it again with the same module_utils.
The file says what each object has: after a partial apply (``record(..., keep=failed)``) the objects
that were applied get the new settings and each failed one keeps what was recorded for it, so the
applier never re-applies older settings to an object that got the new ones. A module that configures
only the objects it is given (``dcb_qos``) records with ``merge``: the objects it does not name keep their record,
and an object leaves the record only when a run removes it explicitly (``removed``).

Schema (``version`` 1), one section per concern, each optional::

    {"version": 1,
     "dcb":       {"rails": ["ens1np0", ...], "dscp_map": [{"dscp": 26, "priority": 3}],
                   "pfc_priorities": [3], "trust": "dscp", "ets": null},
     "rdma_cm":   {"rails": ["ens1np0", ...]  or  "devices": ["mlx5_0", ...], "tos": 106},
     "acs":       {"bridges": [{"kernel_path": "0000:15:01.0/00.0", "bdf": "0000:16:00.0"}, ...],
                   "clear": ["ReqRedir", "CmpltRedir", "EgressCtrl"]},
     "nvidia_fs": {"rw_stats_enabled": 1},
     "routing":   {"state_file": "/etc/gpufabric/routing.json"},
     "mtu":       {"rails": ["ens1np0", ...], "mtu": 9000},
     "ecn":       {"rails": ["ens1np0", ...], "priority": 3, "cnp_dscp": 48, "cnp_priority": 6}}

``dcb`` holds the ``dcb_qos`` options (validated by ``dcb.normalize_desired``, the same code the
module uses; :func:`dcb_groups` turns the section back into ``apply_dcb``'s arguments).
``dcb`` and ``rdma_cm`` take a second form after a partial apply left some objects on earlier
settings: ``{"groups": [<section>, <section>, ...]}``, each group of the form above, no object in
two groups (:func:`groups_of`). One group is always stored in the first form, so a file written
before groups existed, or without a partial apply, reads and renders as it did.
``rdma_cm`` keeps what the module was given: rail names survive RDMA device renames, device
names are used as they are. ``acs`` keeps each bridge in the kernel's path form (survives bus
renumbering) and the BDF it had when recorded, in the shape ``acs.apply_acs`` takes. ``routing`` only points at the routing module's
own state file (``routing.py`` owns its format); the applier loads that file.

Every section is validated and normalised (sorted, de-duplicated) before it is stored, so the
same desired state always renders to the same bytes and :func:`record` reports ``changed``
only when the desired state really changed. The file is written atomically and a lock file
serialises concurrent writers. Plain Python: no Ansible imports.
This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import errno
import json
import os

from ansible_collections.gpufabric.node.plugins.module_utils.concerns import sections
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.boot_record import groups_of, objects_key
# the dcb and routing sections' names that callers of the store know
# pylint: disable=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb.boot import (  # noqa: F401
    DCB_KEYS, dcb_desired, dcb_groups)
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.routing.boot import (  # noqa: F401
    ROUTING_STATE_FILE)
# pylint: enable=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.host import bounded_read

try:
    import fcntl
except ImportError:  # pragma: no cover - every Linux Python has it
    fcntl = None

STATE_DIR = "/etc/gpufabric"
STATE_FILE = STATE_DIR + "/state.json"
LOCK_FILE = STATE_DIR + "/.state.lock"
SCHEMA_VERSION = 1
# the sections of the file (concerns/sections.py), in the order the store lists them
CONCERNS = sections.KEYS


class StateError(Exception):
    """The state file exists but cannot be used (unreadable, not JSON, unknown version, invalid)."""


# --- validation ------------------------------------------------------------------------------------

def keep_previous(previous, new, failed):
    """The section to record after a partial apply: ``new``'s settings for its objects that were applied, and for
    each object in ``failed`` the settings ``previous`` recorded for it (nothing when it had none), so the boot-time
    applier re-applies what each object really has. Both sections validated; None when nothing is left."""
    failed = set(failed or ())
    if not failed or new is None:
        return new
    key = objects_key(groups_of(new)[0])
    groups = []
    wanted = set()
    for g in groups_of(new):
        wanted.update(g[key])
        rest = [o for o in g[key] if o not in failed]
        if rest:
            groups.append(dict(g, **{key: rest}))
    # a previous record by the other kind of name (devices, now rails) is not kept: it could cover a port that
    # got the new settings
    for g in groups_of(previous):
        kept = [o for o in g.get(key) or [] if o in failed and o in wanted]
        if kept:
            groups.append(dict(g, **{key: kept}))
    if not groups:
        return None
    return groups[0] if len(groups) == 1 else {"groups": groups}


def merge_previous(previous, new, failed=(), removed=(), key="rails"):
    """The section to record when a run names only some objects (rails): ``new``'s settings for the objects it names
    that were applied, the settings ``previous`` recorded for every object the run does not name and for each named
    one in ``failed``, and nothing for the objects in ``removed`` (removal is explicit). ``new`` None: only the
    removal. Both sections validated; None when nothing is left. Groups by the other kind of name are dropped, as in
    keep_previous."""
    failed, removed = set(failed or ()), set(removed or ())
    if new is not None:
        key = objects_key(groups_of(new)[0])
    groups, named = [], set()
    for g in groups_of(new):
        named.update(g[key])
        rest = [o for o in g[key] if o not in failed and o not in removed]
        if rest:
            groups.append(dict(g, **{key: rest}))
    for g in groups_of(previous):
        kept = [o for o in g.get(key) or [] if o not in removed and (o not in named or o in failed)]
        if kept:
            groups.append(dict(g, **{key: kept}))
    if not groups:
        return None
    return groups[0] if len(groups) == 1 else {"groups": groups}


def validate_section(concern, data):
    """Normalised copy of one section (its concern's validator, concerns/sections.py); ValueError naming the
    concern and the bad key."""
    if concern not in sections.BY_KEY:
        raise ValueError("unknown concern %r (known: %s)" % (concern, ", ".join(CONCERNS)))
    return sections.BY_KEY[concern].validate(copy.deepcopy(data))


def validate(state):
    """Normalised copy of a whole state document; ValueError when anything is off."""
    if not isinstance(state, dict):
        raise ValueError("state must be a JSON object")
    if state.get("version") != SCHEMA_VERSION:
        raise ValueError("unknown state version %r (this code reads version %d)"
                         % (state.get("version"), SCHEMA_VERSION))
    unknown = sorted(set(state) - set(CONCERNS) - {"version"})
    if unknown:
        raise ValueError("unknown section(s) %s (known: %s)" % (", ".join(unknown), ", ".join(CONCERNS)))
    out = {"version": SCHEMA_VERSION}
    for concern in CONCERNS:
        if state.get(concern) is not None:
            out[concern] = validate_section(concern, state[concern])
    return out


# --- file --------------------------------------------------------------------------------------------

def empty():
    return {"version": SCHEMA_VERSION}


def render(state):
    """Canonical text of a (validated) state document."""
    return json.dumps(state, indent=2, sort_keys=True) + "\n"


# the state file is a few KiB; one larger than this is not one the collection wrote
MAX_STATE = 4 << 20
# what a state file that cannot be used raises while it is parsed and validated: bad JSON (ValueError), nesting
# deeper than the parser's recursion limit (RecursionError), and any wrong shape the validators meet
_UNPARSABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)


def read_text(sysroot, path=STATE_FILE):
    """The state file's text, or None when there is none; StateError when it cannot be read (not a regular file,
    a symlink, over ``MAX_STATE``, not UTF-8)."""
    try:
        return bounded_read.read_regular(sysroot.path(path), MAX_STATE).decode("utf-8")
    except (IOError, OSError) as e:
        if getattr(e, "errno", None) == errno.ENOENT:
            return None
        raise StateError("cannot read %s: %s" % (path, e))
    except UnicodeDecodeError as e:
        raise StateError("%s is not UTF-8 text (%s): rerun the playbook to rewrite it" % (path, e))


def load(sysroot, path=STATE_FILE):
    """The validated state document; ``{"version": 1}`` when the file does not exist.

    Raises StateError (with the path and what is wrong) when it exists but cannot be used: unreadable, oversize,
    not JSON, nested beyond the parser's limit, or not a state document. The recording functions replace such a
    file (:func:`plan_record`); the boot-time applier stops on it.
    """
    raw = read_text(sysroot, path)
    if raw is None:
        return empty()
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise StateError("%s is nested too deeply to be a state document: rerun the playbook to rewrite it" % path)
    except ValueError as e:
        raise StateError("%s is not valid JSON (%s): rerun the playbook to rewrite it" % (path, e))
    try:
        return validate(doc)
    except _UNPARSABLE as e:
        what = e if isinstance(e, ValueError) else "%s: %s" % (type(e).__name__, e)
        raise StateError("%s: %s: rerun the playbook to rewrite it" % (path, what))


class FileLock(object):
    """flock on the store's lock file (no-op in check mode or without fcntl)."""

    def __init__(self, sysroot, enabled, path=LOCK_FILE):
        self.sysroot = sysroot
        self.enabled = enabled and fcntl is not None
        self.path = path
        self.fd = None

    def __enter__(self):
        if self.enabled:
            self.sysroot.makedirs(os.path.dirname(self.path))
            self.fd = os.open(self.sysroot.path(self.path), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        return False


def load_for_record(sysroot, path=STATE_FILE):
    """(document, None) or, for a file that cannot be used, (an empty document, what was wrong): a recording run
    replaces such a file by a valid one holding its section (the modules that own the other sections record them
    again on their next run) and reports it (``record_with_drift``'s item)."""
    try:
        return load(sysroot, path), None
    except StateError as e:
        return empty(), str(e)


def plan_record(sysroot, concern, data, path=STATE_FILE, keep=None, merge=False, removed=()):
    """(changed, before_text, after_text) of recording ``data`` (None removes the section).

    ``keep``: objects (rails, devices) whose apply failed; they keep what the file recorded for them
    (``keep_previous``) while the others get ``data``. ``merge``: ``data`` updates only the objects it names, the
    others keep their record, the objects in ``removed`` are dropped (``merge_previous``; ``data`` None with
    ``removed``: only the removal).
    """
    if concern not in CONCERNS:
        raise ValueError("unknown concern %r (known: %s)" % (concern, ", ".join(CONCERNS)))
    section = None if data is None else validate_section(concern, data)
    current, unusable = load_for_record(sysroot, path)
    try:
        before_text = read_text(sysroot, path)
    except StateError:
        before_text = None
    if unusable and before_text is None:
        before_text = "(unusable: %s)\n" % unusable
    if merge:
        section = merge_previous(current.get(concern), section, keep, removed)
        section = None if section is None else validate_section(concern, section)
    elif keep:
        section = keep_previous(current.get(concern), section, keep)
        section = None if section is None else validate_section(concern, section)
    if section is None and before_text is None:
        return False, "", ""    # nothing to record and no file: nothing to write
    after = copy.deepcopy(current)
    if section is None:
        after.pop(concern, None)
    else:
        after[concern] = section
    after_text = render(after)
    return before_text != after_text, before_text or "", after_text


def record(sysroot, concern, data, check_mode, path=STATE_FILE, keep=None, merge=False, removed=()):
    """Store ``data`` as the desired state of ``concern``; True when the file changed (or would).

    ``data`` None removes the section. ``keep``, ``merge``, ``removed``: see plan_record. ValueError for invalid data
    (nothing is written).
    """
    with FileLock(sysroot, not check_mode):
        changed, _before, after = plan_record(sysroot, concern, data, path, keep, merge, removed)
        if changed and not check_mode:
            sysroot.write_file_atomic(path, after, 0o644)
    return changed


def record_with_drift(sysroot, concern, data, check_mode, keep=None, path=STATE_FILE, merge=False, removed=()):
    """``record`` for a module: (before_text, after_text, drift item or None). The drift item says the recorded state
    differs from (or lacks) what the module would record, which the boot-time applier would otherwise re-apply."""
    unusable = load_for_record(sysroot, path)[1]
    changed, before, after = plan_record(sysroot, concern, data, path, keep, merge, removed)
    record(sysroot, concern, data, check_mode, path, keep, merge, removed)
    item = None
    if changed:
        current = "unusable, replaced: %s" % unusable if unusable else ("differs" if before else "missing")
        item = {"concern": concern, "object": path, "key": concern, "current": current, "desired": "recorded"}
    return before, after, item


def forget(sysroot, concern, check_mode, path=STATE_FILE):
    """Remove the section of ``concern``; True when it was there."""
    return record(sysroot, concern, None, check_mode, path)
