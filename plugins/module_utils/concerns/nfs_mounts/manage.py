# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NFS over RDMA storage volumes as systemd mount units: the validated plan (concern ``nfs_mounts``).

A volume is ``{path, server, export, vers, nconnect, port, options, remoteports, localports, state}``.
``plan(desired, vendor_installed)`` validates every value for the syntax it lands in and renders, per volume, the
mount unit ``<systemd-escape --path PATH>.mount``:

- ``What=<server>:<export>`` (an IPv6 server in brackets), ``Where=<path>``, ``Type=nfs``;
- ``Options=proto=rdma,port=20049,vers=<vers>[,nconnect=N][,remoteports=...,localports=...][,<options>]``;
  ``proto=rdma6`` for an IPv6 server address (nfs-utils takes the address family from the netid: ``rdma`` is IPv4
  only, so a host name is looked up as IPv4; give the IPv6 address to mount over IPv6), and the kernel shows the
  netid it uses (``rdma6``, ``tcp6``: ``rpc_peeraddr2str(RPC_DISPLAY_NETID)`` in nfs_show_mount_options);
- ``After=`` the boot-time applier (``gpufabric-apply.service``: lossless class, ToS and rail routes in place before
  the first RPC) and network-online.target, ``Before=`` the targets workloads wait for (default remote-fs.target),
  ``WantedBy=remote-fs.target``.

Values are refused, never escaped: paths are ``inputs.safe_path`` (portable characters only), a server is a DNS
name, an IPv4 or an IPv6 address (no zone: ``%`` is a systemd specifier), an option is ``name`` or ``name=value``
with no comma, white space, quote, backslash, ``%`` or control character, and the options the module owns
(``proto``, ``port``, ``vers``...) cannot be given again. The vendor client's multipath options (``remoteports``,
``localports``; VAST's syntax: ``~``-separated addresses or ``A-B`` ranges, interface names for localports,
``remoteports=dns``) and an ``nconnect`` above the kernel's 16 are accepted only when the vendor client is the one
installed for the running kernel (``/etc/gpufabric/vendor_nfs.json``, written by ``vendor_nfs_build``; its option
set: ``nfs_client_caps.OPTION_SETS``): the in-tree client refuses unknown options and more connections at mount
time.

Plain Python: no Ansible imports. This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.gpufabric.node.plugins.module_utils import inputs
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nfs_mounts import client_caps as caps

CONCERN = "nfs_mounts"
UNIT_DIR = "/etc/systemd/system"
APPLIER_UNIT = "gpufabric-apply.service"   # persist.UNIT; named here so this file needs none of persist's imports
RDMA_PORT = 20049
DEFAULT_VERS = "4.2"
DEFAULT_AFTER = (APPLIER_UNIT,)
DEFAULT_BEFORE = ("remote-fs.target",)
VERSIONS = ("3", "4", "4.0", "4.1", "4.2")
# the kernel's version flags beside vers= (fs/nfs/fs_context.c: v2, v3, v4, v4.0, v4.1, v4.2, all Opt_v, the last
# one given wins): folded into the one vers= the unit writes, never written themselves
VERSION_FLAGS = {"v2": "2", "v3": "3", "v4": "4", "v4.0": "4.0", "v4.1": "4.1", "v4.2": "4.2"}
NCONNECT_MAX = caps.nconnect_max(caps.IN_TREE)     # the kernel's NFS_MAX_CONNECTIONS; the vendor's: OPTION_SETS
UNIT_NAME_MAX = 255
VENDOR_CLIENT = ("auto", "required", "in_tree")
HEADER = "# Managed by gpufabric.node (nfs_mounts): do not edit, rerun the storage_mounts role.\n"
# options the module renders itself; giving them again in ``options`` would contradict the volume's settings
OWNED = frozenset(("proto", "port", "vers", "nfsvers", "minorversion", "nconnect", "remoteports", "localports",
                   "rdma", "tcp", "udp", "mountproto", "mountport"))
_OPTION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
_OPTION_VALUE = re.compile(r"[A-Za-z0-9._+:/@~=-]{1,255}\Z")
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)\Z")
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}\Z")
# systemd's unit name characters kept as they are by unit_name_escape (src/basic/unit-name.c VALID_CHARS less '-'
# and '\\', which it escapes)
_UNESCAPED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")
VOLUME_KEYS = ("path", "server", "export", "vers", "nconnect", "port", "options", "remoteports", "localports",
               "state")


class MountInputError(inputs.InputError):
    """A volume setting that cannot be used; the message names the volume and the key."""


# --- systemd-escape --path -------------------------------------------------------------------------------

def escape_path(path):
    """What ``systemd-escape --path PATH`` prints: the path without its leading and trailing ``/``, every ``/`` a
    ``-``, every byte outside ``[A-Za-z0-9:_.]`` (and a leading ``.``) as ``\\xNN``; ``/`` itself is ``-``.
    ``path`` must be absolute and normalized (no ``.``, ``..`` or empty component): systemd refuses others."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise MountInputError("path %r is not an absolute path" % (path,))
    parts = path.split("/")[1:]
    if path != "/" and ("" in parts or "." in parts or ".." in parts):
        raise MountInputError("path %r is not normalized (an empty, '.' or '..' component)" % (path,))
    if path == "/":
        return "-"
    out = []
    data = path.strip("/").encode("utf-8", "surrogateescape")
    for i, byte in enumerate(bytearray(data)):
        c = chr(byte)
        if c == "/":
            out.append("-")
        elif c in _UNESCAPED and not (i == 0 and c == "."):
            out.append(c)
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


def unit_name(path):
    """The mount unit systemd requires for mount point ``path`` (``/mnt/nfs-rdma`` -> ``mnt-nfs\\x2drdma.mount``)."""
    name = escape_path(path) + ".mount"
    if len(name) > UNIT_NAME_MAX:
        raise MountInputError("path %r gives the unit name %s, longer than systemd's %d characters"
                              % (path, name, UNIT_NAME_MAX))
    return name


# --- values ------------------------------------------------------------------------------------------------

def server_source(server, what):
    """The host part of a mount source: a DNS name or IPv4 as given (lower-case), an IPv6 address in brackets."""
    if not isinstance(server, str) or not server:
        raise MountInputError("%s: server must be a host name, an IPv4 or an IPv6 address (got %r)" % (what, server))
    if inputs.CONTROL_RE.search(server):
        raise MountInputError("%s: server %r contains a control character" % (what, server))
    if "%" in server:
        raise MountInputError("%s: server %r: an IPv6 zone (%%eth0) cannot be used ('%%' is a systemd specifier); "
                              "give a global or unique local address" % (what, server))
    bracketed = server.startswith("[") and server.endswith("]")
    text = server[1:-1] if bracketed else server
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        addr = None
    if addr is not None and (addr.version == 6 or not bracketed):
        return "[%s]" % addr.compressed if addr.version == 6 else addr.compressed
    if bracketed:
        raise MountInputError("%s: server %r is not an IPv6 address (a zone such as %%eth0 cannot be used)"
                              % (what, server))
    name = server.rstrip(".") if server.endswith(".") else server
    labels = name.split(".")
    if len(name) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise MountInputError("%s: server %r is not a host name (labels of letters, digits and '-', at most 63 "
                              "characters each), an IPv4 or an IPv6 address" % (what, server))
    if re.match(r"[0-9.]+\Z", name):
        raise MountInputError("%s: server %r is neither an IPv4 address nor a host name" % (what, server))
    return name.lower()


def netid(transport, host):
    """The netid of ``transport`` (rdma, tcp) to server ``host`` (as ``server_source`` gives it): ``rdma6``/``tcp6``
    for an IPv6 address, which nfs-utils and the kernel's mountinfo spell that way."""
    return transport + "6" if host.startswith("[") else transport


def option(text, what):
    """``(name, value or None)`` of one extra mount option ``name`` or ``name=value``."""
    if not isinstance(text, str) or not text:
        raise MountInputError("%s: a mount option must be a non-empty string (got %r)" % (what, text))
    name, sep, value = text.partition("=")
    if not _OPTION_NAME.match(name):
        raise MountInputError("%s: option %r: the name must be letters, digits, '_', '.' and '-'" % (what, text))
    if sep and not _OPTION_VALUE.match(value):
        raise MountInputError("%s: option %r: a value must be 1-255 characters of [A-Za-z0-9._+:/@~=-] (no comma, "
                              "white space, quote, backslash, '%%' or control character)" % (what, text))
    if name.lower() in OWNED:
        raise MountInputError("%s: option %r is set by the volume's own keys (proto, port, vers, nconnect, "
                              "remoteports, localports): give it there" % (what, text))
    return name, (value if sep else None)


def version(given, flags, what):
    """The one NFS version of a volume: ``vers`` (None: not given) and the version flags of its options (``v3``,
    ``v4.1``...) must agree (``4`` with one 4.x gives that 4.x); default 4.2. A contradiction is refused: the kernel
    would take the last one, and the check would compare with another."""
    stated = ([("vers=%s" % given, str(given))] if given is not None else []) + \
        [(f, VERSION_FLAGS[f.lower()]) for f in flags]
    for text, v in stated:
        if v not in VERSIONS:
            raise MountInputError("%s: %s must be one of %s (got %r); NFS over RDMA needs NFSv3 or NFSv4.x"
                                  % (what, "vers" if text.startswith("vers=") else "the version of option " + text,
                                     ", ".join(VERSIONS), v))
    if not stated:
        return DEFAULT_VERS
    values = set(v for _t, v in stated)
    specific = values - {"4"}
    if len(specific) > 1 or ("4" in values and specific and not list(specific)[0].startswith("4.")):
        raise MountInputError("%s: %s contradict each other: give one NFS version (vers, or one version flag)"
                              % (what, " and ".join(t for t, _v in stated)))
    return specific.pop() if specific else "4"


def _ipv4(text):
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        return None


def multipath(value, key, what):
    """A VAST multipath list: ``~``-separated IPv4 addresses or ``A-B`` ranges (localports: also interface names);
    ``remoteports=dns``: every address the server's name resolves to."""
    if not isinstance(value, str) or not value:
        raise MountInputError("%s: %s must be a non-empty string (got %r)" % (what, key, value))
    if key == "remoteports" and value == "dns":
        return value
    for item in value.split("~"):
        lo, sep, hi = item.partition("-")
        if sep and _ipv4(lo) is not None:
            if _ipv4(hi) is None or _ipv4(hi) < _ipv4(lo):
                raise MountInputError("%s: %s item %r is not an IPv4 range A-B with A <= B" % (what, key, item))
        elif _ipv4(item) is None and not (key == "localports" and _IFNAME.match(item)):
            raise MountInputError("%s: %s item %r is not an IPv4 address%s or an A-B range (items separated by '~'%s)"
                                  % (what, key, item, " or an interface name" if key == "localports" else "",
                                     "; or dns alone" if key == "remoteports" else ""))
    return value


def _int(value, what, lo, hi):
    if isinstance(value, (bool, float)):
        raise MountInputError("%s must be an integer %d..%d (got %r)" % (what, lo, hi, value))
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise MountInputError("%s must be an integer %d..%d (got %r)" % (what, lo, hi, value))
    if not lo <= v <= hi:
        raise MountInputError("%s must be an integer %d..%d (got %r)" % (what, lo, hi, value))
    return v


# --- the plan ------------------------------------------------------------------------------------------------

def volume(raw, index, vendor_installed):
    """One validated volume with its rendered ``unit``, ``unit_path``-less name, ``source`` and ``options``.
    ``vendor_installed``: the vendor client is the one in use, so its option set applies (``nfs_client_caps``)."""
    client = caps.VENDOR if vendor_installed else caps.IN_TREE
    if not isinstance(raw, dict):
        raise MountInputError("volumes[%d] must be a mapping (got %r)" % (index, raw))
    unknown = sorted(set(raw) - set(VOLUME_KEYS))
    if unknown:
        raise MountInputError("volumes[%d]: unknown key(s) %s (one of %s)"
                              % (index, ", ".join(unknown), ", ".join(VOLUME_KEYS)))
    path = raw.get("path")
    what = "volumes[%d] (%s)" % (index, path)
    try:
        inputs.safe_path(path, "%s path" % what)
    except inputs.InputError as e:
        raise MountInputError(str(e))
    if path == "/":
        raise MountInputError("%s: / cannot be an NFS mount point" % what)
    state = raw.get("state") or "present"
    if state not in ("present", "absent"):
        raise MountInputError("%s: state must be present or absent (got %r)" % (what, state))
    out = {"path": path, "unit": unit_name(path), "state": state}
    if state == "absent":
        return out
    for key in ("server", "export"):
        if raw.get(key) in (None, ""):
            raise MountInputError("%s: %s is required for a present volume" % (what, key))
    host = server_source(raw["server"], what)
    try:
        export = inputs.safe_path(raw["export"], "%s export" % what)
    except inputs.InputError as e:
        raise MountInputError(str(e))
    extra = raw.get("options") or []
    if not isinstance(extra, list):
        raise MountInputError("%s: options must be a list of mount options (got %r)" % (what, extra))
    more, flags, seen = [], [], set()
    for i, text in enumerate(extra):
        name, value = option(text, "%s options[%d]" % (what, i))
        if name in seen:
            raise MountInputError("%s: option %s is given twice" % (what, name))
        seen.add(name)
        if name.lower() in VERSION_FLAGS:
            if value is not None:
                raise MountInputError("%s: option %r: the version flag %s takes no value" % (what, text, name))
            flags.append(name)
        else:
            more.append((name, value))
    vers = version(raw.get("vers"), flags, what)
    port = _int(raw.get("port") if raw.get("port") is not None else RDMA_PORT, "%s port" % what, 1, 65535)
    nconnect = raw.get("nconnect")
    if nconnect is not None:
        top = caps.nconnect_max(client)
        nconnect = _int(nconnect, "%s nconnect (the %s NFS client's bound%s)"
                        % (what, "vendor" if client == caps.VENDOR else "in-tree",
                           "" if client == caps.VENDOR else
                           "; the vendor client's is %d" % caps.nconnect_max(caps.VENDOR)), 1, top)
    proto = netid("rdma", host)
    opts = [("proto", proto), ("port", str(port)), ("vers", vers)]
    if nconnect is not None:
        opts.append(("nconnect", str(nconnect)))
    # the syntax first, then whether the client installed can take them
    ports = [(key, multipath(raw[key], key, what)) for key in ("remoteports", "localports")
             if raw.get(key) not in (None, "")]
    if ports and not set(k for k, _v in ports) <= caps.OPTION_SETS[client]["options"]:
        raise MountInputError("%s: %s is an option of the vendor NFS client, which is not the client installed for "
                              "the running kernel (/etc/gpufabric/vendor_nfs.json has no record of it): the in-tree "
                              "client refuses the mount" % (what, " and ".join(k for k, _v in ports)))
    opts.extend(ports + more)
    out.update(server=host, export=export, source="%s:%s" % (host, export), vers=vers, port=port, proto=proto,
               nconnect=nconnect, options=opts, extra_options=more, remoteports=raw.get("remoteports") or None,
               localports=raw.get("localports") or None)
    return out


def options_text(opts):
    return ",".join(k if v is None else "%s=%s" % (k, v) for k, v in opts)


def render_unit(vol, after_units, before_units):
    """The mount unit of a present volume; every value was validated (no specifier, no escape needed)."""
    after = ["network-online.target"] + [inputs.systemd_unit_name(u, "after_units") for u in after_units]
    before = [inputs.systemd_unit_name(u, "before_units") for u in before_units]
    return (
        HEADER +
        "[Unit]\n"
        "Description=NFS over RDMA volume %s at %s\n"
        "Documentation=man:systemd.mount(5) man:nfs(5)\n"
        "# The boot-time applier puts the lossless class, RoCE ToS and rail routes in place before the first RPC.\n"
        "Wants=network-online.target\n"
        "After=%s\n"
        "%s"
        "\n[Mount]\n"
        "What=%s\n"
        "Where=%s\n"
        "Type=nfs\n"
        "Options=%s\n"
        "\n[Install]\n"
        "WantedBy=remote-fs.target\n"
        % (vol["source"], vol["path"], " ".join(after), ("Before=%s\n" % " ".join(before)) if before else "",
           vol["source"], vol["path"], options_text(vol["options"])))


def vendor_choice(value):
    if value not in VENDOR_CLIENT:
        raise MountInputError("vendor_client must be one of %s (got %r)" % (", ".join(VENDOR_CLIENT), value))
    return value


def plan(desired, vendor_installed):
    """The validated desired state: ``{"volumes": [...], "unit_dir", "vendor_wanted"}``; raises MountInputError.

    desired: ``{"volumes": [volume], "vendor_client": auto|required|in_tree, "unit_dir", "after_units",
    "before_units"}`` (every key but volumes optional). ``vendor_installed``: the vendor client is recorded as
    installed for the running kernel."""
    desired = desired or {}
    choice = vendor_choice(desired.get("vendor_client") or "auto")
    if choice == "required" and not vendor_installed:
        raise MountInputError("vendor_client is required, but no vendor NFS client is recorded as installed for the "
                              "running kernel (/etc/gpufabric/vendor_nfs.json): run the vendor_nfs_client role and "
                              "reboot into it")
    wanted = choice == "required" or (choice == "auto" and vendor_installed)
    unit_dir = desired.get("unit_dir") or UNIT_DIR
    try:
        inputs.safe_path(unit_dir, "unit_dir")
        after = list(desired.get("after_units") if desired.get("after_units") is not None else DEFAULT_AFTER)
        before = list(desired.get("before_units") if desired.get("before_units") is not None else DEFAULT_BEFORE)
        for u in after:
            inputs.systemd_unit_name(u, "after_units")
        for u in before:
            inputs.systemd_unit_name(u, "before_units")
    except inputs.InputError as e:
        raise MountInputError(str(e))
    raw = desired.get("volumes") or []
    if not isinstance(raw, list):
        raise MountInputError("volumes must be a list of volumes (got %r)" % (raw,))
    vols, paths = [], {}
    for i, r in enumerate(raw):
        v = volume(r, i, wanted)
        if v["path"] in paths:
            raise MountInputError("volumes[%d] and volumes[%d] both mount %s" % (paths[v["path"]], i, v["path"]))
        paths[v["path"]] = i
        v["unit_path"] = "%s/%s" % (unit_dir.rstrip("/"), v["unit"])
        if v["state"] == "present":
            v["unit_text"] = render_unit(v, after, before)
        vols.append(v)
    return {"volumes": vols, "unit_dir": unit_dir, "vendor_wanted": wanted, "vendor_client": choice}
