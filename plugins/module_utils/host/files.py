# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files root runs or reads, and systemd unit file state, on the node below a sysroot.

- writing: :func:`write_atomic` (temporary file in the same directory, owner 0:0 and the mode set on the open file,
  fsync, rename, fsync of the directory), :func:`makedirs` (0755, root), :func:`remove`, :func:`restore` (owner and
  mode on the object itself, never through a symlink);
- reading: :func:`lstat`, and a unit's file state as ``systemctl is-enabled`` words, from the file layout
  (:func:`layout_state`, for a node without a running systemd) or from systemctl (:func:`systemctl_state`).

Used by the installer of the boot-time applier (``boot/persist.py``) and by the concerns that write unit and
network files (``mtu``, ``nfs_mounts``). Plain Python, no Ansible imports. Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import stat
import tempfile

from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import TEMP_PREFIX, remove_stale_temps

# systemd's unit search path (system scope), highest priority first: the first entry of a name wins
UNIT_SEARCH = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
               "/usr/lib/systemd/system", "/lib/systemd/system")
CONFIG_DIRS = (("/etc/systemd/system", "enabled", "masked"), ("/run/systemd/system", "enabled-runtime",
                                                              "masked-runtime"))


class PersistError(Exception):
    """A check or a fix that could not be done; the message names the object."""


def lstat(sysroot, path):
    try:
        return os.lstat(sysroot.path(path))
    except OSError:
        return None


def layout_state(sysroot, unit):
    """The unit file state from the file layout, with systemctl is-enabled's words."""
    found = None
    for d in UNIT_SEARCH:
        real = sysroot.path(d, unit)
        if os.path.islink(real) and os.readlink(real) == "/dev/null" or \
                os.path.isfile(real) and os.path.getsize(real) == 0:
            return "masked-runtime" if d.startswith("/run/") else "masked"
        if os.path.isfile(real):
            found = real
            break
    if found is None:
        return "not-found"
    for config, word, _masked in CONFIG_DIRS:
        base = sysroot.path(config)
        for d in sorted(glob.glob(base + "/*.wants") + glob.glob(base + "/*.requires")):
            if os.path.islink(os.path.join(d, unit)):
                return word
    section = None
    with open(found) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Install" and line.split("=", 1)[0].strip() in ("WantedBy", "RequiredBy", "Alias",
                                                                            "Also"):
                return "disabled"
    return "static"


def module_source(mod):
    """The source text of the Python module ``mod``: from its loader (which also reads it inside the AnsiballZ zip),
    else from its file. The programs the collection runs in a process of their own are shipped this way."""
    loader = getattr(mod, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        src = loader.get_source(mod.__name__)
        if src:
            return src
    with open(mod.__file__) as f:
        return f.read()


def systemctl_state(run, systemctl, unit):
    """What ``systemctl is-enabled`` prints (its exit code says nothing more than the word)."""
    rc, out, err = run([systemctl, "is-enabled", unit])
    words = (out or "").split()
    if words:
        return words[0]
    if "No such file" in (err or "") or "not found" in (err or "").lower():
        return "not-found"  # systemd before 249 says it on stderr
    raise PersistError("systemctl is-enabled %s failed (rc=%d): %s" % (unit, rc, (err or "").strip()))


def systemctl_states(run, systemctl, units):
    """{unit: what ``systemctl is-enabled`` prints} for several units with one ``systemctl is-enabled UNIT...``:
    one word per unit, in their order. A systemctl that stops at the first unit it cannot find (before 249 it says
    so on stderr and prints nothing more) answers fewer words: the units it did not answer for are asked one by one
    (:func:`systemctl_state`)."""
    units = list(units)
    _rc, out, _err = run([systemctl, "is-enabled"] + units)
    words = (out or "").split()
    got = dict(zip(units, words)) if len(words) <= len(units) else {}
    for unit in units:
        if unit not in got:
            got[unit] = systemctl_state(run, systemctl, unit)
    return got


def mask_path(unit_state, unit):
    for config, _word, masked in CONFIG_DIRS:
        if unit_state == masked:
            return "%s/%s" % (config, unit)
    return None


# --- writing --------------------------------------------------------------------------------------------

def _fsync_dir(real_dir):
    fd = os.open(real_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs(sysroot, path):
    """Create the missing directories of host path ``path``: 0755, owned by root."""
    missing = []
    p = path
    while not os.path.lexists(sysroot.path(p)) and p != "/":
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        real = sysroot.path(d)
        os.mkdir(real, 0o755)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
        try:
            _own(fd, 0o755)
        finally:
            os.close(fd)
        _fsync_dir(os.path.dirname(real))


def _own(fd, mode):
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (0, 0):
        os.fchown(fd, 0, 0)
    if stat.S_IMODE(st.st_mode) != mode or (st.st_uid, st.st_gid) != (0, 0):
        os.fchmod(fd, mode)


def write_atomic(sysroot, path, content, mode):
    """Temp file in the same directory, owner 0:0 and mode on the open file, fsync, rename, fsync the directory."""
    real = sysroot.path(path)
    d = os.path.dirname(real)
    makedirs(sysroot, os.path.dirname(path))
    data = content.encode("utf-8") if not isinstance(content, bytes) else content
    remove_stale_temps(d)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            _own(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, real)
    except Exception:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(d)


def remove(sysroot, path):
    real = sysroot.path(path)
    if os.path.isdir(real) and not os.path.islink(real):
        raise PersistError("%s is a directory where the collection keeps a file: remove it by hand" % path)
    os.unlink(real)
    _fsync_dir(os.path.dirname(real))


def restore(sysroot, path, mode):
    """Owner 0:0 and ``mode`` on the file or directory itself: opened without following a symlink."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(sysroot.path(path), flags)
    try:
        if not (stat.S_ISREG(os.fstat(fd).st_mode) or stat.S_ISDIR(os.fstat(fd).st_mode)):
            raise PersistError("%s is not a regular file or directory" % path)
        _own(fd, mode)
    finally:
        os.close(fd)
