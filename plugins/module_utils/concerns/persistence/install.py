# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``fabric_persist`` installs for the boot-time applier, how the node differs from it, and the fix.

The installed applier is: the script ``gpufabric-apply``, its library (a copy of the module_utils of
``node_payload.NODE_PAYLOAD`` below ``lib_dir``), the oneshot unit ``gpufabric-apply.service`` (enabled), the
template ``gpufabric-apply@.service``, the udev rule that starts it on every RDMA device ``add``, and the state it
applies (``/etc/gpufabric``, written by the modules). :class:`Installer` compares the node with that and returns
one drift item per difference (``{concern: persistence, object, key, current, desired}``):

- ``content`` of a file (sha256 prefix, ``missing``; ``present`` for a file that should not be there);
- ``mode`` and ``owner`` of a file or directory (anything root runs at boot is owned by 0:0 and not writable by
  group or others, ``guard.py``), ``type`` where a symlink or something else stands in for it;
- ``unit_file_state`` of the boot unit: what ``systemctl is-enabled`` says (or, without systemctl, what the unit
  file layout says: the first entry in the unit search path, a mask being a symlink to /dev/null or an empty file,
  enablement symlinks in ``/etc`` or ``/run/systemd/system/*.wants|*.requires``), desired ``enabled``.

:meth:`Installer.fix` corrects every item it can: files are rewritten atomically (temp file in the same directory,
owner 0:0 and mode set on the open file, fsync, rename, fsync of the directory), owner and mode restored on the
open file or directory (never through a symlink), the unit unmasked and enabled. Directories on the way that the
collection does not own (``/``, ``/etc``, ``/usr/local/sbin``, the unit and rule directories) are reported but never
changed: only ``lib_dir``, the directories below it and the state directory are the collection's.
Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import stat
import sys

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns
from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.persistence import guard
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import state
from ansible_collections.gpufabric.node.plugins.module_utils.host import nodelock
from ansible_collections.gpufabric.node.plugins.module_utils.host import files
# the file and unit helpers live in host/files.py; the installer's names for them
# pylint: disable-next=unused-import
from ansible_collections.gpufabric.node.plugins.module_utils.host.files import (  # noqa: F401
    CONFIG_DIRS, UNIT_SEARCH, PersistError, layout_state, makedirs, mask_path, remove, restore, systemctl_state,
    systemctl_states, write_atomic)

CONCERN = "persistence"
PKG = guard.PKG
PKG_PATH = PKG.replace(".", "/")
# module_utils packages whose __init__.py holds code (none: ansible-test wants them empty)
PACKAGES_WITH_CODE = ()
UNIT = "gpufabric-apply.service"
TEMPLATE = "gpufabric-apply@.service"
HEADER = "Managed by gpufabric.node (fabric_persist): do not edit, rerun the persistence role."
DEFAULT_SYSTEMCTL = "/usr/bin/systemctl"
# how long a run of the applier waits for the node lock (a module or another run holding it) before it fails naming
# the holder; the units' TimeoutStartSec leaves room for it, so the applier, not systemd, ends a run that waited
LOCK_WAIT_S = int(nodelock.DEFAULT_TIMEOUT_S)
# every service the collection installs runs as root and reads files others can write (textfiles, sysfs, the state
# directory): it gets a memory, task and file cap, so a reader gone wrong is killed by its cgroup, not the node's OOM
# killer (systemd.resource-control(5), systemd.exec(5)). The applier and the evidence run take well under 100 MiB.
MEMORY_MAX = "512M"
TASKS_MAX = 64
NOFILE_MAX = 4096


def service_limits(cpu_quota=None):
    """The ``[Service]`` lines of resource limits every service of the collection carries."""
    return ("MemoryMax=%s\n"
            "MemorySwapMax=0\n"
            "TasksMax=%d\n"
            "LimitNOFILE=%d\n" % (MEMORY_MAX, TASKS_MAX, NOFILE_MAX)
            + ("CPUQuota=%d%%\n" % cpu_quota if cpu_quota else ""))


# --- what is installed ---------------------------------------------------------------------------------

def module_utils_sources(names, modules=None, importer=None):
    """{name: source} of the collection's module_utils ``names`` (``node_payload.NODE_PAYLOAD``, dotted names below
    module_utils), read through the loaders of this process's modules (a module's source comes from the AnsiballZ
    payload it was shipped in). A name this process has not loaded yet is imported by name (``importer``,
    default importlib): the module that reads the payload imports its entry points, so AnsiballZ ships every
    file. PersistError names a module that cannot be imported or whose source cannot be read."""
    modules = sys.modules if modules is None else modules
    importer = importer or importlib.import_module
    out = {}
    for name in names:
        full = "%s.%s" % (PKG, name)
        mod = modules.get(full)
        if mod is None:
            try:
                mod = importer(full)
            except ImportError as e:
                raise PersistError("module_utils.%s of the node payload cannot be imported (%s): the module that "
                                   "installs the payload must import its entry points, so that Ansible ships "
                                   "it" % (name, e))
        loader = getattr(mod, "__loader__", None)
        source = loader.get_source(mod.__name__) if loader is not None and hasattr(loader, "get_source") else None
        if source is None:
            raise PersistError("cannot read the source of %s from %r" % (mod.__name__, loader))
        out[name] = source
    return out


APPLY_SUMMARY = "gpufabric-apply: re-apply the runtime-only fabric settings recorded in /etc/gpufabric/state.json."


def render_script(python, script, lib_dir, entry="boot.applier", summary=APPLY_SUMMARY):
    """A script that runs ``main`` of the module_utils ``entry`` (``gpufabric-apply``: the applier) from the
    installed copy: the interpreter through :func:`inputs.shebang`, the library directory as a Python literal
    (``repr``) relative to the script; no option value is written anywhere else (``entry`` and ``summary`` are the
    collection's own constants)."""
    inputs.safe_path(script, "script")
    inputs.safe_path(lib_dir, "lib_dir")
    rel = os.path.relpath(lib_dir, os.path.dirname(script))
    return (
        inputs.shebang(python) +
        "# %s\n"
        "\"\"\"%s\n\n"
        "Runs the copy of the gpufabric.node module_utils installed by fabric_persist (lib_dir; the directory is\n"
        "found relative to this script, so it also works below a simulated node's root). It refuses to run when\n"
        "this script, that copy or the recorded state could be changed by anyone but root. --help for the options.\n"
        "\"\"\"\n"
        "import os\n"
        "import sys\n\n"
        "sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), %s)))\n\n"
        "from ansible_collections.gpufabric.node.plugins.module_utils.%s import main  # noqa: E402\n\n"
        "raise SystemExit(main(script=__file__))\n" % (HEADER, summary, repr(str(rel)), entry))


def render_unit(script, boot_wait, before_units):
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Re-apply gpufabric runtime fabric settings (DCB, RoCE ToS, ACS, nvidia-fs, rail routing)\n"
        "Documentation=man:systemd.service(5)\n"
        "# Rail addresses must be configured before per-rail routes can be added with their source address.\n"
        "Wants=network-online.target\n"
        "After=network-online.target systemd-modules-load.service\n"
        "# Lossless class and ToS in place before NFS over RDMA mounts and before workloads start.\n"
        "Before=%s\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart=%s --wait %d --lock-wait %d\n"
        "TimeoutStartSec=%d\n"
        "%s\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
        % (HEADER, " ".join(inputs.systemd_unit_name(u, "before_units") for u in before_units),
           inputs.systemd_exec_arg(inputs.safe_path(script, "script")), int(boot_wait), LOCK_WAIT_S,
           int(boot_wait) + LOCK_WAIT_S + 120, service_limits()))


def render_template(script, device_wait):
    return (
        "# %s\n"
        "[Unit]\n"
        "Description=Re-apply gpufabric DCB and RoCE ToS of RDMA device %%i\n"
        "# At boot, let the full run go first; both (and the modules) serialise on %s anyway.\n"
        "After=gpufabric-apply.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "# %%i, not %%I: the udev rule starts an instance only for a device name that is a unit instance name as\n"
        "# it is (systemd would unescape '-' of mlx5-bond0 into '/' in %%I).\n"
        "ExecStart=%s --device %%i --wait %d --lock-wait %d\n"
        "TimeoutStartSec=%d\n"
        "%s"
        % (HEADER, nodelock.LOCK_FILE, inputs.systemd_exec_arg(inputs.safe_path(script, "script")), int(device_wait),
           LOCK_WAIT_S, int(device_wait) + LOCK_WAIT_S + 60, service_limits()))


def render_rule(systemctl):
    """The udev rule: ``systemctl --no-block restart gpufabric-apply@<ibdev>.service`` on every RDMA device add.

    The instance is the kernel name as it is (the template reads it with ``%i``), so the rule matches only names
    of the characters a unit instance keeps unchanged (``inputs.INSTANCE_CHARS``: ``mlx5_0``, ``rxe-eth0``,
    ``mlx5-bond0``); the applier records no other device name (state.py), so no recorded device is left out."""
    sc = inputs.udev_value(inputs.safe_path(systemctl, "systemctl"), "systemctl")
    return (
        "# %s\n"
        "# An RDMA device registered (boot, driver reload, firmware reset): its ToS is 0 again and its rail's DCB\n"
        "# may be gone. Start the work as a service: udev kills RUN programs when the event is done.\n"
        "ACTION==\"add\", SUBSYSTEM==\"infiniband\", KERNEL!=\"%s\", "
        "RUN+=\"%s --no-block restart gpufabric-apply@%%k.service\"\n" % (HEADER, inputs.UDEV_UNIT_UNSAFE_GLOB, sc))


def module_path(name):
    """The file of module_utils ``name`` (dotted) below the package: ``concerns`` is a package, its code in
    ``concerns/__init__.py``."""
    rel = name.replace(".", "/")
    return rel + "/__init__.py" if name in PACKAGES_WITH_CODE else rel + ".py"


def lib_files(lib_dir, sources):
    """{path: content} of the module_utils copy, with an empty __init__.py on every package level up to
    module_utils and on every sub-package the sources need (unless the package has code of its own)."""
    files = {}
    parts = PKG_PATH.split("/")
    for i in range(1, len(parts) + 1):
        files["%s/%s/__init__.py" % (lib_dir, "/".join(parts[:i]))] = ""
    for name in sources:
        pkg = name.split(".")[:-1]
        for i in range(1, len(pkg) + 1):
            files.setdefault("%s/%s/%s/__init__.py" % (lib_dir, PKG_PATH, "/".join(pkg[:i])), "")
    for name, src in sources.items():
        files["%s/%s/%s" % (lib_dir, PKG_PATH, module_path(name))] = src
    return files


def package_dirs(lib_dir):
    parts = PKG_PATH.split("/")
    return ["%s/%s" % (lib_dir, "/".join(parts[:i])) for i in range(1, len(parts) + 1)]


def in_library(lib_dir, path):
    """True for a path below the module_utils directory of the copy (a file an earlier version installed)."""
    return path.startswith("%s/%s/" % (lib_dir, PKG_PATH))


# --- reading the node -------------------------------------------------------------------------------------

def sha(data):
    import hashlib   # only for a drifted file: loading OpenSSL is most of what importing hashlib costs a timer run
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def _octal(mode):
    return "%04o" % mode


# --- writing --------------------------------------------------------------------------------------------

# --- the comparison and the fix ---------------------------------------------------------------------------

def item(obj, key, current, desired):
    return {"concern": CONCERN, "object": obj, "key": key, "current": current, "desired": desired}


class Installer(object):
    """Compare the node with the applier ``files`` ({path: (content, mode, diff)}) and fix it.

    unit_path: where the boot unit's file is installed (a mask there is replaced by writing the file).
    unit: the boot unit's name, or None when its enablement is not managed (``enabled: false``).
    The collection's own directories are ``lib_dir`` and ``state_dir``, with everything below them.
    """

    def __init__(self, sysroot, files, lib_dir, unit_path, unit=UNIT, state_dir=state.STATE_DIR):
        self.sysroot = sysroot
        self.files = files
        self.lib_dir = lib_dir
        self.unit_path = unit_path
        self.unit = unit
        self.state_dir = state_dir
        self.owned = [lib_dir, state_dir]

    def _is_owned(self, path):
        return any(path == o or path.startswith(o.rstrip("/") + "/") for o in self.owned)

    def tree(self, top):
        """Host paths of everything below ``top`` (not following symlinks), top first."""
        out = []
        real_top = self.sysroot.path(top)
        if not os.path.isdir(real_top) or os.path.islink(real_top):
            return [top] if os.path.lexists(real_top) else []
        for dirpath, dirnames, filenames in os.walk(real_top):
            host = self.sysroot.unroot(dirpath)
            out.append(host)
            for n in sorted(filenames) + sorted(d for d in dirnames if os.path.islink(os.path.join(dirpath, d))):
                out.append(host.rstrip("/") + "/" + n)
            dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        return out

    def survey(self, unit_state=None):
        """(items, actions, foreign): the drift items, the fixes, the items no real run changes."""
        items, actions, foreign = [], [], []
        for path in sorted(self.files):
            content, mode, diff = self.files[path]
            self._file(path, content, mode, diff, items, actions)
        stale = set()
        pkg = set(package_dirs(self.lib_dir))
        extra = []
        for path in self.tree(self.lib_dir) + self.tree(self.state_dir):
            if path in self.files:
                continue
            st = files.lstat(self.sysroot, path)
            if st is None:
                continue
            if (os.path.dirname(path) in pkg or in_library(self.lib_dir, path)) and path.endswith(".py") or \
                    stat.S_ISLNK(st.st_mode) and self._is_owned(os.path.dirname(path)):
                stale.add(path)
            else:
                extra.append(path)
        for path in sorted(stale):
            if files.lstat(self.sysroot, path) is not None:
                items.append(item(path, "content", "present", "absent"))
                actions.append({"op": "remove", "path": path})
        checked = [p for p in list(self.files) + extra if p not in stale]
        for f in guard.findings(self.sysroot, checked):
            if f["path"] in self.files or f["path"] in stale:
                continue  # looked at above (content, exact mode, owner)
            self._finding(f, items, actions, foreign)
        if self.unit is not None and unit_state is not None and unit_state != "enabled":
            items.append(item(self.unit, "unit_file_state", unit_state, "enabled"))
            mask = mask_path(unit_state, self.unit)
            if mask is not None and mask != self.unit_path:
                actions.append({"op": "unmask", "runtime": mask.startswith("/run/")})
            actions.append({"op": "enable"})
        return items, actions, foreign

    def _file(self, path, content, mode, diff, items, actions):
        st = files.lstat(self.sysroot, path)
        want = content.encode("utf-8")
        before = None
        write = False
        if st is None:
            items.append(item(path, "content", "missing", sha(want)))
            write = True
        elif not stat.S_ISREG(st.st_mode):
            target = os.readlink(self.sysroot.path(path)) if stat.S_ISLNK(st.st_mode) else None
            items.append(item(path, "type", "symlink to %s" % target if target else guard.kind(st), "file"))
            write = True
        else:
            with open(self.sysroot.path(path), "rb") as f:
                have = f.read()
            before = have.decode("utf-8", "replace")
            if have != want:
                items.append(item(path, "content", sha(have), sha(want)))
                write = True
            if stat.S_IMODE(st.st_mode) != mode:
                items.append(item(path, "mode", _octal(stat.S_IMODE(st.st_mode)), _octal(mode)))
            if (st.st_uid, st.st_gid) != (0, 0):
                items.append(item(path, "owner", "%d:%d" % (st.st_uid, st.st_gid), "0:0"))
        if write:
            actions.append({"op": "write", "path": path, "content": content, "mode": mode, "diff": diff,
                            "before": before, "created": st is None})
        elif st is not None and (stat.S_IMODE(st.st_mode) != mode or (st.st_uid, st.st_gid) != (0, 0)):
            actions.append({"op": "restore", "path": path, "mode": mode})

    def _finding(self, f, items, actions, foreign):
        path = f["path"]
        mine = f["managed"] and self._is_owned(path)
        codes = set(f["codes"])
        found = []
        if codes & {"symlink", "special", "not_dir", "loop"}:
            found.append(item(path, "type", "%s%s" % (f["kind"], " to %s" % f["target"] if f["target"] else ""),
                              "directory" if "not_dir" in codes else "file"))
            mine = False
        else:
            if codes & {"owner", "group"}:
                found.append(item(path, "owner", "%d:%d" % (f["uid"], f["gid"]),
                                  "0:%d" % (0 if mine else f["gid"])))
            if codes & {"others_write", "group_write"}:
                clear = (0o002 if "others_write" in codes else 0) | (0o020 if "group_write" in codes else 0)
                found.append(item(path, "mode", _octal(f["mode"]), _octal(f["mode"] & ~clear)))
        items.extend(found)
        if mine:
            actions.append({"op": "restore", "path": path, "mode": f["mode"] & ~0o022})
        else:
            foreign.extend(found)

    def survey_absent(self, paths):
        """(items, actions) of removing ``paths`` (state=absent)."""
        items, actions = [], []
        for path in paths:
            if files.lstat(self.sysroot, path) is not None:
                items.append(item(path, "content", "present", "absent"))
                actions.append({"op": "remove", "path": path})
        return items, actions

    def fix_files(self, actions, check_mode=False):
        """Carry out the file actions of :meth:`survey`: owner/mode first (directories top down, so nothing is
        written into a directory others can still change), then removals, then writes. {path: action word} of
        what was (in check mode: would be) done."""
        if check_mode:
            return dict((a["path"], "restored" if a["op"] == "restore" else "removed" if a["op"] == "remove"
                         else "created" if a["created"] else "updated")
                        for a in actions if a["op"] in ("restore", "remove", "write"))
        done = {}
        order = {"restore": 0, "remove": 1, "write": 2}
        file_ops = sorted((a for a in actions if a["op"] in order),
                          key=lambda a: (order[a["op"]], a["path"].count("/"), a["path"]))
        for a in file_ops:
            try:
                if a["op"] == "restore":
                    restore(self.sysroot, a["path"], a["mode"])
                    done[a["path"]] = "restored"
                elif a["op"] == "remove":
                    remove(self.sysroot, a["path"])
                    done[a["path"]] = "removed"
                else:
                    write_atomic(self.sysroot, a["path"], a["content"], a["mode"])
                    done[a["path"]] = "created" if a["created"] else "updated"
            except (OSError, IOError) as e:
                raise PersistError("%s: %s failed: %s" % (a["path"], a["op"], e))
        return done

    def fix_unit(self, actions, run, systemctl, query, check_mode=False):
        """Unmask and enable the boot unit as ``actions`` say; ``run(argv)`` runs systemctl (in check mode it only
        records the command), ``query()`` reads the unit file state again after a command (a file written may
        have changed it too). A real run proves the result by reading it back."""
        if not any(a["op"] in ("unmask", "enable") for a in actions):
            return
        if not systemctl and not check_mode:
            raise PersistError("%s is not enabled and systemctl is not installed: cannot enable it" % self.unit)
        systemctl = systemctl or DEFAULT_SYSTEMCTL
        now = None if not check_mode else "unknown"
        for a in actions:
            if a["op"] == "unmask":
                now = now or query()
                if now in ("masked", "masked-runtime", "unknown"):
                    run([systemctl, "unmask"] + (["--runtime"] if a["runtime"] else []) + [self.unit])
                    now = now if check_mode else None
        now = now or query()
        if now != "enabled":
            run([systemctl, "enable", self.unit])
            if not check_mode:
                now = query()
                if now != "enabled":
                    raise PersistError("%s is %s after systemctl enable, not enabled" % (self.unit, now))


def status(items, foreign, check_mode):
    """The persistence concern's status document (``concerns.from_items``); items a real run does not change
    (directories the collection does not own) keep it at drift, and the reason names them."""
    if not foreign:
        return concerns.from_items(CONCERN, items, check_mode)
    paths = []
    for i in foreign:
        if i["object"] not in paths:
            paths.append(i["object"])
    note = "not the collection's, so never changed by fabric_persist (fix by hand): %s" % ", ".join(paths)
    if check_mode:
        doc = concerns.from_items(CONCERN, items, True)
        doc["reason"] = concerns.one_line("%s; %s" % (doc["reason"], note))
        return doc
    fixed = len(items) - len(foreign)
    return concerns.from_items(CONCERN, foreign, True,
                               reason="corrected %d item(s); %d left: %s" % (fixed, len(foreign), note))


# ------------------------------------------------------------------------------------------------
# Hosts that do not boot with systemd (a microVM whose agent is PID 1): nothing there runs the unit or the udev rule.

def booted_with_systemd(sysroot):
    """sd_booted(3): systemd creates /run/systemd/system early at boot, and nothing else does."""
    return sysroot.isdir("/run/systemd/system")


def pid1(sysroot):
    comm = sysroot.read("/proc/1/comm")
    return comm.strip() if comm else None


def recorded_runtime_state(sysroot):
    """The sections of runtime state that the applier would re-apply at boot (state.json, acs.json, routing.json)."""
    out = []
    try:
        doc = state.load(sysroot)
    except state.StateError as e:
        return ["state.json (unreadable: %s)" % e]
    out.extend(sorted(k for k in doc if k not in ("version",)))
    for path in (state.STATE_DIR + "/acs.json", state.ROUTING_STATE_FILE):
        if sysroot.exists(path):
            out.append(path.rsplit("/", 1)[-1])
    return out


def without_systemd(sysroot):
    """The persistence concern on a host not booted with systemd, or None where systemd runs.

    not_applicable when there is no runtime state to keep; drift when there is (DCB, ToS, ACS or routing would be
    lost at the next boot and nothing would re-apply them)."""
    if booted_with_systemd(sysroot):
        return None
    init = pid1(sysroot) or "unknown"
    recorded = recorded_runtime_state(sysroot)
    why = ("this host does not boot with systemd (PID 1 is %s; no /run/systemd/system), so the boot-time applier's "
           "unit and udev rule would never run" % init)
    if not recorded:
        return concerns.status(concerns.NOT_APPLICABLE, why + "; no runtime state is recorded for it to re-apply")
    items = [item("init", "pid1", init, "systemd")]
    return concerns.status(concerns.DRIFT, why + ": the recorded %s would be lost at the next boot; re-run "
                           "provision.yml after each boot or start gpufabric-apply from this host's own init"
                           % ", ".join(recorded), items)
