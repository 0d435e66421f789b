# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``nfs_mounts`` concern: what the node mounts (``/proc/self/mountinfo``), how it differs from the plan
(``nfs_mounts.plan``), and the fix.

``evaluate(sysroot, run, desired, systemctl=None)`` is the read-only check (the one-call drift check and check mode
use it): the concern's status document. ``apply(sysroot, run, desired, check_mode, systemctl)`` is the module's run.

What is compared, per present volume (one drift item each, ``{concern: nfs_mounts, object, key, current,
desired}``):

- the unit file (``content``: missing or differs; ``owner_mode``: anything but root-owned and not writable by
  group or others, since systemd runs it as root at boot) and its enablement (``unit_file_state``: ``enabled``);
- the mount, from the last mountinfo entry at the mount point (the one on top): ``mounted``, ``fstype`` (``nfs4``
  for NFSv4.x, ``nfs`` for v3), ``source`` (``server:/export`` as the kernel shows it), the super options
  ``proto`` (``rdma``, ``rdma6`` for an IPv6 server), ``port``, ``vers`` (a wanted ``4`` accepts any negotiated
  4.x), ``nconnect`` (the kernel prints it only when the client got it: not over RDMA for NFSv4 before 6.9, see
  ``nfs_client_caps``; a volume's ``not_effective`` lists it then) and, when given, ``remoteports``/``localports``;
- the volume's extra ``options``, each by the state the kernel shows for it (``nfs_mount_options``: ``hard``,
  ``noatime``, ``timeo=``, ...; key ``option:<name>``); options the kernel keeps no record of, or that this model
  does not know, are listed in the volume's ``options_not_compared``, never taken as matching;
- where the vendor client is wanted, ``nfs_client``: the ``sunrpc`` in memory has ``nfs_bundle_version`` (only the
  vendor's bundle has it) and the loaded ``rpcrdma`` has the srcversion recorded for the running kernel in
  ``/etc/gpufabric/vendor_nfs.json``; otherwise the in-tree stack carries the mount (``vendor_nfs_proof`` stage
  running, ``nvfs._vendor_checks`` make the same reading).

An absent volume is drift while the unit the collection wrote for it (its header, ``ownership``) exists or is
mounted. A unit at that path that is not the collection's (an admin's own, a mask linking to ``/dev/null``) or a
mount with no unit of the collection's behind it is left alone, and the volume says so (``ownership: not_ours``,
``ownership_reason``; the concern's reason when nothing else differs). A mount point that
``/etc/fstab`` also names is refused before anything is touched (two definitions of one mount).

The fix writes the units (``files.write_atomic``: root-owned, fsync of file and directory), runs ``systemctl
daemon-reload``, enables them, and mounts (``systemctl start``) or remounts (``systemctl restart``: a tcp mount or one
of another source at the path) every volume that differs; absent volumes are stopped (unmounted), disabled and their
units removed. Then mountinfo is read again: what still differs fails the module (a busy mount, a server that refuses
RDMA, NFSv4 trunking that reused a TCP client, the in-tree client where the vendor's is wanted: that one needs the
reboot of ``kernel_upgrade.yml``). Check mode runs only ``systemctl is-enabled``.

Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils.host import files
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import client_caps as caps
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import options as mount_options
from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs.common import BUNDLE_PARAM, read_record
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts.manage import CONCERN, HEADER, MountInputError, plan
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.gds.parse import parse_mountinfo, parse_proc_mounts

MOUNTINFO = "/proc/self/mountinfo"
FSTAB = "/etc/fstab"
BUNDLE = "/sys/module/sunrpc/parameters/%s" % BUNDLE_PARAM
NFS_TYPES = ("nfs", "nfs4")
MOUNT_KEYS = ("fstype", "source", "proto", "port", "vers", "nconnect", "remoteports", "localports")
NO_VOLUMES = "no storage volumes are configured (storage_mounts_volumes is empty)"


class MountError(Exception):
    """A check or a fix that could not be done; the message names the volume. ``actions``: the systemctl commands
    run before it (a fix that failed half way changed the node)."""

    def __init__(self, msg, actions=()):
        Exception.__init__(self, msg)
        self.actions = list(actions)


# --- reading the node -------------------------------------------------------------------------------------

def read_mounts(sysroot):
    """(entries, source file): mountinfo as the kernel writes it, else /proc/mounts; MountError when neither."""
    text = sysroot.read_raw(MOUNTINFO)
    if text:
        return parse_mountinfo(text), MOUNTINFO
    text = sysroot.read_raw("/proc/mounts")
    if text:
        return parse_proc_mounts(text), "/proc/mounts"
    raise MountError("neither %s nor /proc/mounts can be read: the mounts cannot be checked" % MOUNTINFO)


def _unescape_fstab(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and len(text) >= i + 4 and all(c in "01234567" for c in text[i + 1:i + 4]):
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def fstab_mount_points(sysroot):
    """Mount points named in /etc/fstab (fields separated by white space, ``\\040`` escapes, ``#`` comments)."""
    out = []
    for line in (sysroot.read_raw(FSTAB) or "").splitlines():
        fields = line.split()
        if len(fields) >= 2 and not fields[0].startswith("#"):
            out.append(os.path.normpath(_unescape_fstab(fields[1])))
    return out


def client_state(sysroot):
    """Which NFS client carries RDMA mounts now, and whether the vendor's is installed for the running kernel."""
    kver = sysroot.read("/proc/sys/kernel/osrelease", "") or ""
    doc, _problem = read_record(sysroot)
    kernels = doc.get("kernels")
    rec = kernels.get(kver) if isinstance(kernels, dict) else None
    rec = rec if isinstance(rec, dict) else None
    mods = (rec or {}).get("modules") or {}
    loaded = sysroot.isdir("/sys/module/rpcrdma")
    live = sysroot.read("/sys/module/rpcrdma/srcversion") if loaded else None
    want = (mods.get("rpcrdma") or {}).get("srcversion")
    bundle = sysroot.read(BUNDLE)
    if not loaded:
        in_use = "not_loaded"
    elif bundle is not None and live is not None and (want is None or live == want):
        in_use = "vendor"
    else:
        in_use = "in_tree"
    return {"kernel_release": kver, "installed": bool(mods), "version": (rec or {}).get("version"),
            "nfs_bundle_version": bundle, "rpcrdma_loaded": loaded, "rpcrdma_srcversion": live,
            "rpcrdma_srcversion_installed": want, "in_use": in_use}


def top_entry(mounts, path):
    """The last mountinfo entry at ``path``: the one on top, what a reader of the path gets (None: nothing)."""
    top = None
    for m in mounts:
        if m["mountpoint"] == path:
            top = m
    return top


def observe(mounts, path, top=False):
    """What the kernel mounts at ``path`` (the last entry there: the one on top; ``top``: that entry, when the caller
    has looked it up)."""
    if top is False:
        top = top_entry(mounts, path)
    if top is None:
        return {"path": path, "mounted": False}
    o = top["options"]
    out = {"path": path, "mounted": True, "fstype": top["fstype"], "source": top["source"]}
    for key in MOUNT_KEYS[2:]:
        v = o.get(key)
        out[key] = v if isinstance(v, str) else None
    return out


def nfs_mounts(mounts):
    """Every NFS mount of the node, for the facts."""
    return [observe(mounts, m["mountpoint"]) for m in mounts if m["fstype"] in NFS_TYPES]


def unit_state(sysroot, run, systemctl, unit):
    if systemctl is None or run is None:
        return files.layout_state(sysroot, unit)
    try:
        return files.systemctl_state(run, systemctl, unit)
    except files.PersistError as e:
        raise MountError(str(e))


# --- comparing --------------------------------------------------------------------------------------------

def _item(obj, key, current, desired):
    return {"concern": CONCERN, "object": obj, "key": key, "current": current, "desired": desired}


def ownership(sysroot, vol, obs):
    """Whose the mount unit at an absent volume's path is: ``(ours|not_ours|none, reason)``. Ours is a regular file
    that starts with the header the plan writes (``nfs_mounts.HEADER``); a link (a masked unit: ``/dev/null``) or an
    admin's own unit is not ours, and neither is a mount with no unit of ours behind it. Only ours is stopped,
    disabled and removed."""
    real = sysroot.path(vol["unit_path"])
    try:
        st = os.lstat(real)
    except OSError:
        st = None
    if st is None:
        if obs["mounted"]:
            return "not_ours", ("%s is mounted (%s) but %s does not exist: not a unit the collection wrote, left "
                                "alone" % (vol["path"], obs.get("fstype"), vol["unit_path"]))
        return "none", None
    if not stat.S_ISREG(st.st_mode):
        what = "a link to %s (masked)" % os.readlink(real) if stat.S_ISLNK(st.st_mode) else "not a regular file"
        return "not_ours", "%s is %s: not a unit the collection wrote, left alone" % (vol["unit_path"], what)
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        head = f.read(len(HEADER))
    if head != HEADER.encode("utf-8"):
        return "not_ours", ("%s has no '%s' header: an admin's own unit, left alone (remove it by hand if it is to go)"
                            % (vol["unit_path"], HEADER.strip()))
    return "ours", None


def not_effective(vol, obs, client):
    """The volume's settings the client in use ignores, so the mount cannot show them (``nfs_client_caps``):
    ``[{key, option, status: not_applicable|not_checked, reason}]``. A mount that shows them is judged as usual."""
    if vol["state"] != "present" or not obs["mounted"] or vol["nconnect"] is None or obs.get("nconnect") is not None:
        return []
    effect, why = caps.nconnect_effect(client["kernel_release"], vol["vers"], obs.get("proto"), client["in_use"])
    if effect:
        return []
    return [{"key": "nconnect", "option": "nconnect=%d" % vol["nconnect"], "reason": why,
             "status": concerns.NOT_APPLICABLE if effect is False else concerns.NOT_CHECKED}]


def mount_items(vol, obs, client, vendor_wanted, option_items=(), skip=(), owned=True):
    """The items of one volume's mount; ``option_items`` are its extra options the mount shows otherwise
    (``nfs_mount_options.judge``); ``skip``: keys the client in use cannot show (``not_effective``); ``owned``: an
    absent volume's unit is the collection's (``ownership``)."""
    path = vol["path"]
    if vol["state"] == "absent":
        return [_item(path, "mounted", "mounted", "absent")] if obs["mounted"] and owned else []
    if not obs["mounted"]:
        return [_item(path, "mounted", "absent", "mounted")]
    want = {"fstype": "nfs" if vol["vers"] == "3" else "nfs4", "source": vol["source"], "proto": vol["proto"],
            "port": str(vol["port"]), "vers": vol["vers"],
            "nconnect": str(vol["nconnect"]) if vol["nconnect"] is not None else None,
            "remoteports": vol["remoteports"], "localports": vol["localports"]}
    out = []
    for key in MOUNT_KEYS:
        cur = obs.get(key)
        if key in skip or (key in ("remoteports", "localports") and want[key] is None):
            continue
        if key == "vers" and vol["vers"] == "4" and (cur or "").startswith("4"):
            continue
        if key == "port" and cur is None and vol["vers"] != "3" and vol["port"] == 2049:
            continue   # NFSv4 shows port= only when it is not 2049 (nfs_show_mount_options)
        if cur != want[key]:
            out.append(_item(path, key, cur, want[key]))
    out.extend(_item(path, "option:%s" % name, cur, desired) for name, cur, desired in option_items)
    if vendor_wanted and client["in_use"] != "vendor":
        out.append(_item(path, "nfs_client", client["in_use"], "vendor"))
    return out


def unit_items(sysroot, run, systemctl, vol, owned=True):
    if vol["state"] == "absent":
        return [_item(vol["unit_path"], "content", "present", "absent")] if owned else []
    real = sysroot.path(vol["unit_path"])
    text = sysroot.read_raw(vol["unit_path"])
    out = []
    if text is None:
        out.append(_item(vol["unit_path"], "content", "missing", "managed"))
    elif text != vol["unit_text"]:
        out.append(_item(vol["unit_path"], "content", "differs", "managed"))
    if text is not None:
        st = os.lstat(real)
        mode = stat.S_IMODE(st.st_mode)
        if (st.st_uid, st.st_gid) != (0, 0) or mode & 0o022 or not stat.S_ISREG(st.st_mode):
            out.append(_item(vol["unit_path"], "owner_mode", "%d:%d %04o" % (st.st_uid, st.st_gid, mode),
                             "0:0 0644"))
    state = unit_state(sysroot, run, systemctl, vol["unit"])
    if state != "enabled":
        out.append(_item(vol["unit"], "unit_file_state", state, "enabled"))
    return out


def survey(sysroot, run, desired, systemctl=None):
    """The plan, the node's state and the items that differ; read-only. Raises MountInputError / MountError."""
    client = client_state(sysroot)
    p = plan(desired, client["installed"])
    fstab = fstab_mount_points(sysroot)
    clash = [v["path"] for v in p["volumes"] if v["path"] in fstab]
    if clash:
        raise MountError("%s also in %s: remove those entries, the storage_mounts role manages these mount points "
                         "with mount units (two definitions of one mount)" % (", ".join(clash), FSTAB))
    mounts, source = (read_mounts(sysroot) if p["volumes"] else ([], None))
    vols, items = [], []
    for v in p["volumes"]:
        entry = top_entry(mounts, v["path"])
        obs = observe(mounts, v["path"], entry)
        differ, unchecked = (mount_options.judge(v.get("extra_options") or [], entry) if entry is not None
                             else ([], []))
        ignored = not_effective(v, obs, client)
        owner, why = ownership(sysroot, v, obs) if v["state"] == "absent" else ("ours", None)
        mi = mount_items(v, obs, client, p["vendor_wanted"], differ, set(n["key"] for n in ignored),
                         owner == "ours")
        ui = unit_items(sysroot, run, systemctl, v, owner == "ours")
        vols.append(dict(obs, unit=v["unit"], state=v["state"], desired_source=v.get("source"),
                         ok=not (mi or ui), options_not_compared=unchecked, not_effective=ignored,
                         ownership=owner, ownership_reason=why))
        items.extend(ui + mi)
    return {"plan": p, "client": client, "volumes": vols, "items": items, "mounts_source": source,
            "nfs_mounts": nfs_mounts(mounts)}


def evaluate(sysroot, run, desired, systemctl=None):
    """The status document of concern ``nfs_mounts`` from a read-only survey (drift = what a fix would change)."""
    try:
        s = survey(sysroot, run, desired, systemctl)
    except (MountInputError, MountError, OSError, IOError) as e:
        return concerns.error(CONCERN, str(e))
    if not s["plan"]["volumes"]:
        return concerns.status(concerns.NOT_APPLICABLE, NO_VOLUMES)
    return concerns.from_items(CONCERN, s["items"], True, _notes(s["volumes"], s["items"]))


def _notes(volumes, items):
    """The reason an ok concern carries when a volume asks for something its client ignores (None: nothing, or
    items to report: their reason comes first)."""
    if items:
        return None
    notes = ["%s %s: %s: %s" % (v["path"], n["option"], n["status"], n["reason"])
             for v in volumes for n in v.get("not_effective") or []]
    notes += ["%s (absent): not ours: %s" % (v["path"], v["ownership_reason"])
              for v in volumes if v.get("ownership") == "not_ours"]
    return "; ".join(notes) or None


# --- fixing -----------------------------------------------------------------------------------------------

def _systemctl(run, systemctl, actions, *args):
    argv = [systemctl] + list(args)
    rc, out, err = run(argv)
    actions.append({"argv": argv, "rc": rc})
    if rc != 0:
        raise MountError("%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out or "").strip()))


def _fix(sysroot, run, systemctl, s, actions):
    keys = {}
    for i in s["items"]:
        keys.setdefault(i["object"], set()).add(i["key"])
    reload_needed, remount = False, set()
    for v, obs in zip(s["plan"]["volumes"], s["volumes"]):
        if v["state"] == "absent":
            # only what the survey found to be ours is an item (ownership): an admin's unit or mask is left alone
            if "mounted" in keys.get(v["path"], ()):
                _systemctl(run, systemctl, actions, "stop", v["unit"])
            if "content" in keys.get(v["unit_path"], ()):
                _systemctl(run, systemctl, actions, "disable", v["unit"])
                files.remove(sysroot, v["unit_path"])
                reload_needed = True
        elif keys.get(v["unit_path"]):
            if _mount_settings(sysroot.read_raw(v["unit_path"])) != _mount_settings(v["unit_text"]):
                remount.add(v["path"])
            files.write_atomic(sysroot, v["unit_path"], v["unit_text"], 0o644)
            reload_needed = True
    if reload_needed:
        _systemctl(run, systemctl, actions, "daemon-reload")
    for v, obs in zip(s["plan"]["volumes"], s["volumes"]):
        if v["state"] != "present":
            continue
        if "unit_file_state" in keys.get(v["unit"], ()):
            _systemctl(run, systemctl, actions, "enable", v["unit"])
        mount_keys = keys.get(v["path"], set()) - {"nfs_client"}
        if not obs["mounted"]:
            _systemctl(run, systemctl, actions, "start", v["unit"])
        elif mount_keys or v["path"] in remount:
            # a mount of other options or another source, or one made before its mount settings changed: mount it
            # again (a unit change that leaves What/Where/Type/Options as they were remounts nothing)
            _systemctl(run, systemctl, actions, "restart", v["unit"])


def _mount_settings(text):
    """The [Mount] settings of a unit text that decide what the mount is (None for no unit)."""
    if text is None:
        return None
    return sorted(line.strip() for line in text.splitlines()
                  if line.strip().split("=", 1)[0] in ("What", "Where", "Type", "Options"))


def apply(sysroot, run, desired, check_mode, systemctl):
    """Check (check_mode) or fix the volumes. Returns {changed, items, volumes, client, nfs_mounts, actions,
    diff}; raises MountInputError for bad input (nothing touched) and MountError when the fix did not hold."""
    s = survey(sysroot, run, desired, systemctl)
    out = {"changed": bool(s["items"]), "items": s["items"], "actions": [], "diff": _diff(sysroot, s)}
    if s["items"] and not check_mode:
        if systemctl is None:
            raise MountError("systemctl is not installed: the storage volumes are systemd mount units")
        try:
            _fix(sysroot, run, systemctl, s, out["actions"])
            after = survey(sysroot, run, desired, systemctl)
        except (OSError, IOError, files.PersistError, MountError) as e:
            raise MountError("fixing the storage volumes failed: %s" % e, out["actions"])
        if after["items"]:
            raise MountError("after the fix the volumes still differ: %s%s" % (
                "; ".join("%s %s is %s, not %s" % (i["object"], i["key"], i["current"], i["desired"])
                          for i in after["items"]), _hint(after["items"])), out["actions"])
        s = after
    out.update(volumes=s["volumes"], client=s["client"], nfs_mounts=s["nfs_mounts"],
               mounts_source=s["mounts_source"], vendor_wanted=s["plan"]["vendor_wanted"])
    if not s["plan"]["volumes"]:
        out["status"] = concerns.status(concerns.NOT_APPLICABLE, NO_VOLUMES)
    else:
        out["status"] = concerns.from_items(CONCERN, out["items"], check_mode, _notes(s["volumes"], out["items"]))
    return out


def _hint(items):
    keys = set(i["key"] for i in items)
    if "nfs_client" in keys:
        return (" (the in-tree NFS client is in memory where the vendor's is wanted: boot into the vendor client, "
                "playbooks/kernel_upgrade.yml)")
    if "proto" in keys:
        return (" (an NFSv4 mount of the same server and minor version over TCP makes the kernel reuse that "
                "client: unmount it or use another vers)")
    return ""


def _diff(sysroot, s):
    before, after = [], []
    for v, seen in zip(s["plan"]["volumes"], s["volumes"]):
        if seen.get("ownership") == "not_ours":
            continue     # left alone: nothing of it changes
        cur = sysroot.read_raw(v["unit_path"])
        if cur is not None:
            before.append("# %s\n%s" % (v["unit_path"], cur))
        if v["state"] == "present":
            after.append("# %s\n%s" % (v["unit_path"], v["unit_text"]))
    return {"before": "\n".join(before), "after": "\n".join(after), "before_header": "mount units",
            "after_header": "mount units"}
