# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Emulator of iproute2 ``dcb`` talking to an mlx5 (or a generic DCB) driver.

The command line, the output (text, ``-j``, ``-j -p``), batch mode (``-b FILE``/``-b -``, ``-f``:
one JSON writer for the whole batch, so successive top-level objects are comma-separated, and
``Command failed FILE:LINE`` on the first failure; with 6.1 only the first command of a batch is
answered, every later one fails with ``Attribute not found: Success``, as bookworm's iproute2 6.1
does on a real DCB netdev, seen on the VM lab's driver and explained by iproute2's source (84c03697 in v6.1.0 left
the ACK of each request in the socket, d0e02f35 in v6.2.0 fixed it: see ``_batch``); other releases answer whole
batches, which was read in the source, not checked against a real 6.2+), the error texts and the exit codes
follow iproute2's dcb/*.c and lib/utils.c do_batch() of the version recorded for the node in
``<root>/var/lib/gpufabric-sim/iproute2.json`` (6.1: no ``apptrust``/``pcp-prio``; 6.2+:
both; 6.5+: every JSON APP entry gains a trailing ``" "`` string element).

The "kernel" side is one JSON document per netdev in ``<root>/var/lib/gpufabric-sim/dcb/``.
It models dcbnl plus the driver's callbacks:

* ``mlx5_core``: boots in PCP trust with an empty APP table. The first DSCP APP entry switches
  the port to DSCP trust and the driver then lists all 64 DSCP entries of its hardware
  ``dscp2prio`` table (default ``prio = dscp >> 3``) with the requested override: what driver
  init in DSCP trust and ``mlnx_qos --trust dscp`` produce. ``init_device(...,
  first_app_lists_table=False)`` models upstream ``mlx5e_dcbnl_ieee_setapp`` instead: the switch
  lists only the entry added, and every other DSCP keeps its (unlisted) ``dscp2prio`` priority,
  which the hardware still applies (:func:`dscp_priority`). One priority
  per DSCP (adding another priority for a DSCP replaces it). Deleting an entry resets that DSCP
  to priority 0 in hardware and drops it from the list; deleting the last one returns to PCP
  trust. Only DSCP APP entries are accepted (others: EINVAL). No apptrust callbacks (show:
  attribute missing, set: EOPNOTSUPP). ``ieee_setpfc`` toggles the port link when pfc_en
  changes; ``delay`` is the cable length (7 m by default).
* ``other``: the generic dcbnl APP table (several priorities per selector/protocol, EEXIST on
  an exact duplicate, ENOENT on deleting a missing entry) and a driver with apptrust.

``dcb dcbx`` (who owns DCB: host or the firmware's LLDP agent, IEEE or CEE) is in dcb_dcbx.py.

Counters (``counters`` in the state) let tests prove what was or was not touched.

Faults: ``inject_fault(root, netdev, obj, "EBUSY")`` writes ``<root>/var/lib/gpufabric-sim/dcb/faults/<netdev>.json``;
from then on every write of ``obj`` (``app`` add/del/replace/flush, ``pfc``, ``ets``, ``apptrust`` set) on that
netdev fails in the driver callback with that errno, as mlx5 does when firmware refuses a setting (EBUSY,
EOPNOTSUPP, EIO, ...): dcbnl returns the error, dcb prints ``Attribute write: <strerror>`` and exits 1, the device
keeps its state (the call is counted). Reads are not affected. A fault survives ``reset_device`` (it models the
device, not its configuration); ``clear_fault`` removes it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import sys
import tempfile

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
STATE_DIR = "var/lib/gpufabric-sim"
DEFAULT_VERSION = "6.1.0"

SEL_ETHERTYPE = 1
SEL_STREAM = 2
SEL_DGRAM = 3
SEL_ANY = 4
SEL_DSCP = 5
SEL_PCP = 255

TSA_NAMES = ["strict", "cbs", "ets"]  # index 255 is "vendor"
TSA_VENDOR = 255
PCP_NAMES = ["0nd", "1nd", "2nd", "3nd", "4nd", "5nd", "6nd", "7nd",
             "0de", "1de", "2de", "3de", "4de", "5de", "6de", "7de"]
SELECTOR_NAMES = {SEL_ETHERTYPE: "ethtype", SEL_STREAM: "stream-port", SEL_DGRAM: "dgram-port",
                  SEL_ANY: "port", SEL_DSCP: "dscp", SEL_PCP: "pcp"}

# /etc/iproute2/rt_dsfield as shipped by iproute2 (dsfield value -> name).
RT_DSFIELD = {0x00: "default", 0x28: "AF11", 0x30: "AF12", 0x38: "AF13", 0x48: "AF21",
              0x50: "AF22", 0x58: "AF23", 0x68: "AF31", 0x70: "AF32", 0x78: "AF33",
              0x88: "AF41", 0x90: "AF42", 0x98: "AF43", 0x20: "CS1", 0x40: "CS2",
              0x60: "CS3", 0x80: "CS4", 0xA0: "CS5", 0xC0: "CS6", 0xE0: "CS7", 0xB8: "EF"}

MLX5_CABLE_LEN = 7
DRIVERS = ("mlx5_core", "other")


# ----------------------------------------------------------------------------------------------
# paths and state
# ----------------------------------------------------------------------------------------------

def _sim_dir(root):
    return os.path.join(root, STATE_DIR)


def _dev_path(root, netdev):
    return os.path.join(_sim_dir(root), "dcb", netdev + ".json")


def _ethtool_path(root, netdev):
    return os.path.join(_sim_dir(root), "ethtool", netdev + ".json")


def _write_json(path, data):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.rename(tmp, path)


def _read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return default


def _version_tuple(v):
    out = []
    for part in str(v).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    while len(out) < 3:
        out.append(0)
    return tuple(out[:3])


def _lock_path(root):
    return os.path.join(_sim_dir(root), "dcb", ".lock")


def ensure_lock(path):
    """Create an (empty) lock file once, when the node or a device is set up: commands only open it,
    so a read-only command never adds a file to the node's tree."""
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    if not os.path.exists(path):
        with open(path, "a"):
            pass


def init_node(root, iproute2_version=DEFAULT_VERSION):
    """Record the iproute2 version of the node (selects dcb output shape and features); create the lock."""
    _write_json(os.path.join(_sim_dir(root), "iproute2.json"), {"version": str(iproute2_version)})
    ensure_lock(_lock_path(root))


def node_version(root):
    data = _read_json(os.path.join(_sim_dir(root), "iproute2.json"), {}) or {}
    return str(data.get("version") or DEFAULT_VERSION)


def _default_ets(driver):
    if driver == "mlx5_core":
        # mlx5e_ets_init(): every TC vendor, prio 0 -> TC 1, prio 1 -> TC 0.
        return {"willing": False, "ets_cap": 8, "cbs": False,
                "tc_bw": [100] * 8, "pg_bw": [0] * 8, "tc_tsa": [TSA_VENDOR] * 8,
                "prio_tc": [1, 0, 2, 3, 4, 5, 6, 7],
                "reco_tc_bw": [0] * 8, "reco_tc_tsa": [0] * 8, "reco_prio_tc": [0] * 8}
    return {"willing": False, "ets_cap": 8, "cbs": False,
            "tc_bw": [0] * 8, "pg_bw": [0] * 8, "tc_tsa": [0] * 8, "prio_tc": [0] * 8,
            "reco_tc_bw": [0] * 8, "reco_tc_tsa": [0] * 8, "reco_prio_tc": [0] * 8}


def _fresh_config(driver):
    return {
        "trust": "pcp",
        "dscp2prio": [d >> 3 for d in range(64)],
        "apps": [],
        "apptrust": ["pcp"] if driver != "mlx5_core" else [],
        "pfc": {"pfc_cap": 8, "pfc_en": 0, "mbc": False,
                "delay": MLX5_CABLE_LEN if driver == "mlx5_core" else 0},
        "ets": _default_ets(driver),
    }


def _fresh_counters():
    return {"link_toggles": 0, "pfc_set_calls": 0, "pfc_en_changes": 0, "app_set_calls": 0,
            "app_del_calls": 0, "ets_set_calls": 0, "apptrust_set_calls": 0, "resets": 0}


def init_device(root, netdev, driver="mlx5_core", first_app_lists_table=True):
    """Create the DCB state of a netdev as the driver has it right after boot.

    ``first_app_lists_table`` (mlx5 only): whether the PCP -> DSCP trust switch lists the whole
    hardware table (True) or only the entry added (False, upstream setapp)."""
    if driver not in DRIVERS:
        raise ValueError("driver must be one of %s" % ", ".join(DRIVERS))
    st = {"netdev": netdev, "driver": driver, "counters": _fresh_counters(),
          "first_app_lists_table": bool(first_app_lists_table)}
    st.update(_fresh_config(driver))
    _write_json(_dev_path(root, netdev), st)
    ensure_lock(_lock_path(root))
    return st


def reset_device(root, netdev):
    """State after a driver reload or reboot: configuration lost, counters kept."""
    st = state(root, netdev)
    if st is None:
        raise KeyError("no DCB state for %s" % netdev)
    st.update(_fresh_config(st["driver"]))
    st["counters"]["resets"] += 1
    from gpufabric_sim.emulators import dcb_dcbx
    dcb_dcbx.reload_caps(st)
    _write_json(_dev_path(root, netdev), st)
    return st


def state(root, netdev):
    """The device's emulated kernel/driver state (dict) or None."""
    return _read_json(_dev_path(root, netdev))


FAULT_OBJECTS = ("app", "pfc", "ets", "apptrust", "dcbx")


def _fault_path(root, netdev):
    return os.path.join(_sim_dir(root), "dcb", "faults", netdev + ".json")


def inject_fault(root, netdev, obj, err="EBUSY"):
    """Make every write of ``obj`` on ``netdev`` fail with errno ``err`` (a name such as EBUSY or EOPNOTSUPP)."""
    if obj not in FAULT_OBJECTS:
        raise ValueError("obj must be one of %s" % ", ".join(FAULT_OBJECTS))
    if not isinstance(getattr(errno, err, None), int):
        raise ValueError("%r is not an errno name" % (err,))
    faults = _read_json(_fault_path(root, netdev), {}) or {}
    faults[obj] = err
    _write_json(_fault_path(root, netdev), faults)


def clear_fault(root, netdev, obj=None):
    """Remove the fault of ``obj`` (every fault when None) from ``netdev``."""
    path = _fault_path(root, netdev)
    faults = _read_json(path, {}) or {}
    for o in ([obj] if obj else list(faults)):
        faults.pop(o, None)
    if faults:
        _write_json(path, faults)
    elif os.path.exists(path):
        os.unlink(path)


def fault_errno(root, netdev, obj):
    """The errno a write of ``obj`` on ``netdev`` fails with (0: none injected)."""
    name = (_read_json(_fault_path(root, netdev), {}) or {}).get(obj)
    return getattr(errno, name, errno.EIO) if name else 0


def write_state(root, netdev, st):
    """Replace the device's emulated state with ``st`` (a dict of :func:`state`'s shape): tests set up
    states that would take long command sequences (hidden mlx5 dscp2prio values, other selectors)."""
    _write_json(_dev_path(root, netdev), st)
    ensure_lock(_lock_path(root))


def dscp_priority(st, dscp):
    """Priority the hardware gives an untagged packet with this DSCP (PCP trust: 0)."""
    if st.get("driver") == "mlx5_core":
        if st.get("trust") == "dscp":
            return st["dscp2prio"][dscp]
        return 0
    if (st.get("apptrust") or [None])[0] == "dscp":
        prios = [a[2] for a in st["apps"] if a[0] == SEL_DSCP and a[1] == dscp]
        if prios:
            return max(prios)
    return 0


def pfc_enabled(st):
    return [p for p in range(8) if st["pfc"]["pfc_en"] & (1 << p)]


# ----------------------------------------------------------------------------------------------
# output: a port of iproute2's json_writer / json_print semantics
# ----------------------------------------------------------------------------------------------

class _Out(object):
    def __init__(self, json_mode, pretty):
        self.json = json_mode
        self.pretty = pretty
        self.buf = []
        self.depth = 0
        self.sep = ""

    # json_writer.c
    def _w(self, s):
        self.buf.append(s)

    def _indent(self):
        self._w("    " * self.depth)

    def _eol(self):
        if self.pretty:
            self._w("\n")
            self._indent()

    def _eor(self):
        if self.sep:
            self._w(self.sep)
        self.sep = ","

    def _begin(self, c):
        self._eor()
        self._w(c)
        self.depth += 1
        self.sep = ""

    def _end(self, c):
        self.depth -= 1
        if self.sep:
            self._eol()
        self._w(c)
        self.sep = ","

    def _name(self, name):
        self._eor()
        self._eol()
        self.sep = ""
        self._w(json.dumps(name))
        self._w(": " if self.pretty else ":")

    def _value(self, key, text):
        if key is not None:
            self._name(key)
        self._eor()
        self._w(text)

    # json_print.c
    def open_object(self):
        if self.json:
            self._begin("{")

    def close_object(self):
        if self.json:
            self._end("}")

    def open_array(self, key):
        if self.json:
            if key is not None:
                self._name(key)
            self._begin("[")
            if self.pretty:
                self._w(" ")

    def close_array(self):
        if self.json:
            if self.pretty and self.sep:
                self._w(" ")
            self.sep = ""
            self._end("]")

    def uint(self, kind, key, fmt, value):
        if self.json and kind in ("any", "json"):
            self._value(key, "%d" % value)
        elif not self.json and kind in ("any", "fp"):
            self._w(fmt % value)

    def string(self, kind, key, fmt, value):
        if self.json and kind in ("any", "json"):
            self._value(key, json.dumps(value))
        elif not self.json and kind in ("any", "fp"):
            self._w(fmt % value if "%" in fmt else fmt)

    def on_off(self, kind, key, fmt, value):
        if self.json and kind in ("any", "json"):
            self._value(key, "true" if value else "false")
        elif not self.json and kind in ("any", "fp"):
            self._w(fmt % ("on" if value else "off"))

    def nl(self):
        if not self.json:
            self._w("\n")

    def text(self):
        return "".join(self.buf)


# ----------------------------------------------------------------------------------------------
# command line helpers (lib/utils.c)
# ----------------------------------------------------------------------------------------------

class _Exit(Exception):
    def __init__(self, rc):
        Exception.__init__(self, rc)
        self.rc = rc


class _Ctx(object):
    def __init__(self, root, version, json_mode, pretty, numeric, stats):
        self.root = root
        self.version = version
        self.vt = _version_tuple(version)
        self.json = json_mode
        self.pretty = pretty
        self.numeric = numeric
        self.stats = stats
        self.out = _Out(json_mode, pretty)
        self.err = []

    @property
    def has_app(self):
        return self.vt >= (5, 12, 0)

    @property
    def has_apptrust(self):
        return self.vt >= (6, 2, 0)

    @property
    def app_trailing_space(self):
        return self.vt >= (6, 5, 0)

    def eprint(self, s):
        self.err.append(s)


def _matches(prefix, string):
    """iproute2 matches(): True when prefix does NOT abbreviate string."""
    if not prefix:
        return True
    return not string.startswith(prefix)


def _is(arg, word):
    return not _matches(arg, word)


def _incomplete(ctx):
    ctx.eprint('Command line is not complete. Try option "help"\n')
    raise _Exit(255)


def _get_unsigned(s, maxval):
    """strtoul(s, &end, 0) with full-string and range checks (get_u8/get_u16/get_u32)."""
    if s is None or s == "" or s.strip() != s or s.startswith("-") or s.startswith("+"):
        return None
    try:
        if s.lower().startswith("0x"):
            v = int(s[2:], 16) if s[2:] else None
        elif len(s) > 1 and s.startswith("0"):
            v = int(s[1:], 8)
        else:
            v = int(s, 10)
    except ValueError:
        return None
    if v is None or v > maxval:
        return None
    return v


def _parse_one_of(ctx, msg, value, names):
    for i, n in enumerate(names):
        if n is not None and _is(value, n):
            return i
    ctx.eprint('Error: argument of "%s" must be one of %snot "%s"\n'
               % (msg, "".join('"%s", ' % n for n in names if n is not None), value))
    return None


def _parse_mapping(ctx, args, i, key_cb, value_cb):
    """parse_mapping_gen(): consume KEY:VALUE words from args[i:]. Returns (i, ok, badkey)."""
    while i < len(args):
        word = args[i]
        if ":" not in word:
            break
        key, value = word.split(":", 1)
        k = key_cb(key)
        if k is None:
            return i, False, key
        if not value_cb(k, value):
            return i, False, key
        i += 1
    return i, True, None


def _num_all(key):
    if _is(key, "all"):
        return -1
    return _get_unsigned(key, 0xFFFFFFFF)


def _dcb_parse_mapping(ctx, what_key, key, max_key, what_value, value, max_value, setter):
    if key != -1 and key > max_key:
        ctx.eprint("In %s:%s mapping, %s is expected to be 0..%d\n"
                   % (what_key, what_value, what_key, max_key))
        return False
    if value > max_value:
        ctx.eprint("In %s:%s mapping, %s is expected to be 0..%d\n"
                   % (what_key, what_value, what_value, max_value))
        return False
    if key == -1:
        for k in range(max_key + 1):
            setter(k, value)
    else:
        setter(key, value)
    return True


def _check_ifname(name):
    if not name or len(name) >= 16:
        return False
    return not any(c == "/" or c.isspace() for c in name)


# ----------------------------------------------------------------------------------------------
# the "kernel": dcbnl + driver callbacks on the state file
# ----------------------------------------------------------------------------------------------

class _Kernel(object):
    """Opened per command; holds an exclusive lock on the device's state while it runs."""

    def __init__(self, ctx, dev):
        self.ctx = ctx
        self.dev = dev
        self.path = _dev_path(ctx.root, dev)
        self.lockf = None
        self.st = None

    def __enter__(self):
        lock = _lock_path(self.ctx.root)
        # init_node/init_device made the lock; without it there is no device state to guard either
        if os.path.exists(lock):
            self.lockf = open(lock, "r")
            fcntl.flock(self.lockf, fcntl.LOCK_EX)
        self.st = _read_json(self.path)
        return self

    def __exit__(self, *exc):
        if self.lockf is not None:
            fcntl.flock(self.lockf, fcntl.LOCK_UN)
            self.lockf.close()
        return False

    def _errno_of_lookup(self):
        if self.st is not None:
            return 0
        if os.path.exists(os.path.join(self.ctx.root, "sys/class/net", self.dev)):
            return errno.EOPNOTSUPP
        return errno.ENODEV

    def _fail(self, what, err):
        self.ctx.eprint("%s: %s\n" % (what, os.strerror(err)))
        raise _Exit(1)

    def read(self):
        err = self._errno_of_lookup()
        if err:
            self._fail("Attribute read", err)
        return self.st

    def write_begin(self):
        err = self._errno_of_lookup()
        if err:
            self._fail("Attribute write", err)
        return self.st

    def save(self):
        _write_json(self.path, self.st)

    def _injected(self, obj):
        """An injected fault of the driver callback: the call was made (counted), nothing changed."""
        err = fault_errno(self.ctx.root, self.dev, obj)
        if err:
            self.save()
            self._fail("Attribute write", err)

    @property
    def mlx5(self):
        return self.st["driver"] == "mlx5_core"

    # --- APP -----------------------------------------------------------------------------
    def app_table(self):
        return [tuple(a) for a in self.st["apps"]]

    def app_set(self, apps):
        st = self.write_begin()
        st["counters"]["app_set_calls"] += 1
        self._injected("app")
        err = 0
        for sel, proto, prio in apps:
            err = self._mlx5_setapp(sel, proto, prio) if self.mlx5 else self._generic_setapp(
                sel, proto, prio)
            if err:
                break
        self.save()
        if err:
            self._fail("Attribute write", err)

    def app_del(self, apps):
        st = self.write_begin()
        st["counters"]["app_del_calls"] += 1
        self._injected("app")
        err = 0
        for sel, proto, prio in apps:
            err = self._mlx5_delapp(sel, proto, prio) if self.mlx5 else self._generic_delapp(
                sel, proto, prio)
            if err:
                break
        self.save()
        if err:
            self._fail("Attribute write", err)

    def _generic_setapp(self, sel, proto, prio):
        if [sel, proto, prio] in self.st["apps"]:
            return errno.EEXIST
        self.st["apps"].append([sel, proto, prio])
        return 0

    def _generic_delapp(self, sel, proto, prio):
        if [sel, proto, prio] not in self.st["apps"]:
            return errno.ENOENT
        self.st["apps"].remove([sel, proto, prio])
        return 0

    def _dscp_entries(self):
        return [a for a in self.st["apps"] if a[0] == SEL_DSCP]

    def _mlx5_setapp(self, sel, proto, prio):
        st = self.st
        if sel != SEL_DSCP or proto >= 64:
            return errno.EINVAL
        if not self._dscp_entries():
            # PCP -> DSCP trust; the driver lists its whole dscp2prio table (upstream setapp: only this entry).
            st["trust"] = "dscp"
            st["apps"] = [a for a in st["apps"] if a[0] != SEL_DSCP]
            if st.get("first_app_lists_table", True):
                st["apps"].extend([SEL_DSCP, d, st["dscp2prio"][d]] for d in range(64))
        st["dscp2prio"][proto] = prio
        st["apps"] = [a for a in st["apps"] if not (a[0] == SEL_DSCP and a[1] == proto)]
        st["apps"].append([SEL_DSCP, proto, prio])
        return 0

    def _mlx5_delapp(self, sel, proto, prio):
        st = self.st
        if sel != SEL_DSCP or proto >= 64:
            return errno.EINVAL
        if not self._dscp_entries():
            return errno.ENOENT
        if st["dscp2prio"][proto] != prio or [SEL_DSCP, proto, prio] not in st["apps"]:
            return errno.ENOENT
        st["apps"].remove([SEL_DSCP, proto, prio])
        st["dscp2prio"][proto] = 0
        if not self._dscp_entries():
            st["trust"] = "pcp"
        return 0

    # --- PFC -----------------------------------------------------------------------------
    def pfc_get(self):
        st = self.read()
        pfc = dict(st["pfc"])
        eth = _read_json(_ethtool_path(self.ctx.root, self.dev), {}) or {}
        prio = eth.get("prio", {})
        pfc["requests"] = [int(prio.get(str(p), {}).get("tx_pause", 0)) for p in range(8)]
        pfc["indications"] = [int(prio.get(str(p), {}).get("rx_pause", 0)) for p in range(8)]
        return pfc

    def pfc_set(self, pfc):
        st = self.write_begin()
        c = st["counters"]
        c["pfc_set_calls"] += 1
        self._injected("pfc")
        if pfc["pfc_en"] != st["pfc"]["pfc_en"]:
            c["pfc_en_changes"] += 1
            if self.mlx5:
                c["link_toggles"] += 1
        st["pfc"]["pfc_en"] = pfc["pfc_en"]
        st["pfc"]["mbc"] = bool(pfc["mbc"])
        st["pfc"]["delay"] = pfc["delay"]
        self.save()

    # --- ETS -----------------------------------------------------------------------------
    def ets_get(self):
        ets = dict(self.read()["ets"])
        if self.mlx5:
            # The driver reads TC bandwidth back from hardware: 100% for non-ETS TCs.
            ets["tc_bw"] = [bw if tsa == 2 else 100 for bw, tsa in zip(ets["tc_bw"], ets["tc_tsa"])]
        return ets

    def ets_set(self, ets):
        st = self.write_begin()
        st["counters"]["ets_set_calls"] += 1
        self._injected("ets")
        if self.mlx5:
            if any(p >= 8 for p in ets["prio_tc"]):
                self.save()
                self._fail("Attribute write", errno.EINVAL)
            bw_sum = sum(bw for bw, tsa in zip(ets["tc_bw"], ets["tc_tsa"]) if tsa == 2)
            if bw_sum not in (0, 100):
                self.save()
                self._fail("Attribute write", errno.EINVAL)
        new = dict(ets)
        new["ets_cap"] = 8
        st["ets"] = new
        self.save()

    # --- apptrust --------------------------------------------------------------------------
    def apptrust_get(self):
        st = self.read()
        if self.mlx5:
            # No dcbnl_getapptrust: the reply carries no DCB_ATTR_DCB_APP_TRUST_TABLE.
            self.ctx.eprint("Attribute not found: %s\n" % os.strerror(errno.EOPNOTSUPP))
            raise _Exit(1)
        return list(st["apptrust"])

    def apptrust_set(self, order):
        st = self.write_begin()
        st["counters"]["apptrust_set_calls"] += 1
        self._injected("apptrust")
        if self.mlx5:
            self.save()
            self._fail("Attribute write", errno.EOPNOTSUPP)
        st["apptrust"] = list(order)
        self.save()


# ----------------------------------------------------------------------------------------------
# help texts
# ----------------------------------------------------------------------------------------------

def _help_main(ctx):
    objs = "app | apptrust | buffer | dcbx | ets | maxrate | pfc | rewr" if ctx.vt >= (6, 5, 0) \
        else ("app | apptrust | buffer | dcbx | ets | maxrate | pfc" if ctx.has_apptrust
              else "app | buffer | dcbx | ets | maxrate | pfc")
    ctx.eprint("Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }\n"
               "       dcb [ -f | --force ] { -b | --batch } filename [ -n | --netns ] netnsname\n"
               "where  OBJECT := { %s }\n"
               "       OPTIONS := [ -V | --Version | -i | --iec | -j | --json\n"
               "                  | -N | --Numeric | -p | --pretty\n"
               "                  | -s | --statistics | -v | --verbose]\n" % objs)


def _help_app_add(ctx):
    pcp = ctx.has_apptrust
    ctx.eprint("Usage: dcb app { add | del | replace } dev STRING\n"
               "           [ default-prio PRIO ]\n"
               "           [ ethtype-prio ET:PRIO ]\n"
               "           [ stream-port-prio PORT:PRIO ]\n"
               "           [ dgram-port-prio PORT:PRIO ]\n"
               "           [ port-prio PORT:PRIO ]\n"
               "           [ dscp-prio INTEGER:PRIO ]\n"
               + ("           [ pcp-prio PCP:PRIO ]\n" if pcp else "") +
               "\n"
               " where PRIO := { 0 .. 7 }\n"
               "       ET := { 0x600 .. 0xffff }\n"
               "       PORT := { 1 .. 65535 }\n"
               "       DSCP := { 0 .. 63 }\n"
               + ("       PCP := { 0(nd/de) .. 7(nd/de) }\n" if pcp else "") +
               "\n")


def _help_app_show(ctx):
    ctx.eprint("Usage: dcb app { show | flush } dev STRING\n"
               "           [ default-prio ]\n"
               "           [ ethtype-prio ]\n"
               "           [ stream-port-prio ]\n"
               "           [ dgram-port-prio ]\n"
               "           [ port-prio ]\n"
               "           [ dscp-prio ]\n"
               + ("           [ pcp-prio ]\n" if ctx.has_apptrust else "") +
               "\n")


def _help_app(ctx):
    ctx.eprint("Usage: dcb app help\n\n")
    _help_app_show(ctx)
    _help_app_add(ctx)


def _help_pfc_set(ctx):
    ctx.eprint("Usage: dcb pfc set dev STRING\n"
               "           [ prio-pfc PFC-MAP ]\n"
               "           [ macsec-bypass { on | off } ]\n"
               "           [ delay INTEGER ]\n"
               "\n"
               " where PFC-MAP := [ PFC-MAP ] PFC-MAPPING\n"
               "       PFC-MAPPING := { all | TC }:PFC\n"
               "       TC := { 0 .. 7 }\n"
               "       PFC := { on | off }\n"
               "\n")


def _help_pfc_show(ctx):
    ctx.eprint("Usage: dcb [ -s ] pfc show dev STRING\n"
               "           [ pfc-cap ] [ prio-pfc ] [ macsec-bypass ]\n"
               "           [ delay ] [ requests ] [ indications ]\n"
               "\n")


def _help_pfc(ctx):
    ctx.eprint("Usage: dcb pfc help\n\n")
    _help_pfc_show(ctx)
    _help_pfc_set(ctx)


def _help_ets_set(ctx):
    ctx.eprint("Usage: dcb ets set dev STRING\n"
               "           [ willing { on | off } ]\n"
               "           [ { tc-tsa | reco-tc-tsa } TSA-MAP ]\n"
               "           [ { pg-bw | tc-bw | reco-tc-bw } BW-MAP ]\n"
               "           [ { prio-tc | reco-prio-tc } PRIO-MAP ]\n"
               "\n"
               " where TSA-MAP := [ TSA-MAP ] TSA-MAPPING\n"
               "       TSA-MAPPING := { all | TC }:{ strict | cbs | ets | vendor }\n"
               "       BW-MAP := [ BW-MAP ] BW-MAPPING\n"
               "       BW-MAPPING := { all | TC }:INTEGER\n"
               "       PRIO-MAP := [ PRIO-MAP ] PRIO-MAPPING\n"
               "       PRIO-MAPPING := { all | PRIO }:TC\n"
               "       TC := { 0 .. 7 }\n"
               "       PRIO := { 0 .. 7 }\n"
               "\n")


def _help_ets_show(ctx):
    ctx.eprint("Usage: dcb ets show dev STRING\n"
               "           [ willing ] [ ets-cap ] [ cbs ] [ tc-tsa ]\n"
               "           [ reco-tc-tsa ] [ pg-bw ] [ tc-bw ] [ reco-tc-bw ]\n"
               "           [ prio-tc ] [ reco-prio-tc ]\n"
               "\n")


def _help_ets(ctx):
    ctx.eprint("Usage: dcb ets help\n\n")
    _help_ets_show(ctx)
    _help_ets_set(ctx)


def _help_apptrust_set(ctx):
    ctx.eprint("Usage: dcb apptrust set dev STRING\n"
               "       [ order [ ethtype | stream-port | dgram-port | port | dscp | pcp ] ]\n"
               "\n")


def _help_apptrust_show(ctx):
    ctx.eprint("Usage: dcb apptrust show dev STRING\n"
               "       [ order ]\n"
               "\n")


def _help_apptrust(ctx):
    ctx.eprint("Usage: dcb apptrust help\n\n")
    _help_apptrust_show(ctx)
    _help_apptrust_set(ctx)


# ----------------------------------------------------------------------------------------------
# dcb_cmd_parse_dev
# ----------------------------------------------------------------------------------------------

def _parse_dev(ctx, args, and_then, helpf):
    if not args or _is(args[0], "help"):
        helpf(ctx)
        return 0
    if _is(args[0], "dev"):
        if len(args) < 2:
            _incomplete(ctx)
        dev = args[1]
        if not _check_ifname(dev):
            ctx.eprint('Error: argument "%s" is wrong: not a valid ifname\n' % dev)
            raise _Exit(255)
        return and_then(ctx, dev, args[2:])
    ctx.eprint("Expected `dev DEV', not `%s'" % args[0])
    helpf(ctx)
    return 1


# ----------------------------------------------------------------------------------------------
# dcb app
# ----------------------------------------------------------------------------------------------

def _dsfield_a2n(arg):
    for val, name in RT_DSFIELD.items():
        if name == arg:
            return val
    try:
        v = int(arg, 16)
    except ValueError:
        return None
    if v > 255 or arg.strip() != arg or arg.startswith(("-", "+")):
        return None
    return v


def _parse_app_args(ctx, args):
    """dcb_cmd_app_parse_add_del(); returns (rc, apps) with rc None on success."""
    apps = []
    if not args:
        _help_app_add(ctx)
        return 0, None
    i = 0

    def push(sel):
        def setter(k, v):
            apps.append((sel, k, v))
        return setter

    while i < len(args):
        word = args[i]
        if _is(word, "help"):
            _help_app_add(ctx)
            return 0, None
        kind = None
        for name in ("ethtype-prio", "default-prio", "dscp-prio", "stream-port-prio",
                     "dgram-port-prio", "port-prio"):
            if _is(word, name):
                kind = name
                break
        if kind is None and ctx.has_apptrust and word == "pcp-prio":
            kind = "pcp-prio"
        if kind is None:
            ctx.eprint('What is "%s"?\n' % word)
            _help_app_add(ctx)
            return 1, None
        if i + 1 >= len(args):
            _incomplete(ctx)
        i += 1
        if kind == "default-prio":
            while i < len(args):
                v = _get_unsigned(args[i], 255)
                if v is None:
                    break
                apps.append((SEL_ETHERTYPE, 0, v))
                i += 1
            else:
                continue
            ctx.eprint("Invalid default priority %s\n" % args[i])
            return 1, None

        def prio_cb(what, sel, maxkey, key_check=None):
            def cb(k, value):
                if key_check is not None and not key_check(k):
                    return False
                p = _get_unsigned(value, 255)
                if p is None:
                    return False
                return _dcb_parse_mapping(ctx, what, k, maxkey, "PRIO", p, 7, push(sel))
            return cb

        def ethtype_check(k):
            if k != -1 and k < 0x600:
                ctx.eprint("Protocol IDs < 0x600 are reserved for EtherType\n")
                return False
            return True

        def port_check(k):
            if k == 0:
                ctx.eprint("Port ID of 0 is invalid\n")
                return False
            return True

        def dscp_key(key):
            v = _num_all(key)
            if v is not None:
                return v
            v = _dsfield_a2n(key)
            if v is None:
                return None
            if v & 0x03:
                ctx.eprint("The values `%s' uses non-DSCP bits.\n" % key)
                return None
            return v >> 2

        def pcp_key(key):
            return PCP_NAMES.index(key) if key in PCP_NAMES else None

        def plain_key(key):
            return _get_unsigned(key, 0xFFFFFFFF)

        if kind == "dscp-prio":
            i, ok, bad = _parse_mapping(ctx, args, i, dscp_key, prio_cb("DSCP", SEL_DSCP, 63))
        elif kind == "pcp-prio":
            i, ok, bad = _parse_mapping(ctx, args, i, pcp_key, prio_cb("PCP", SEL_PCP, 15))
        elif kind == "ethtype-prio":
            i, ok, bad = _parse_mapping(ctx, args, i, plain_key,
                                        prio_cb("ETHTYPE", SEL_ETHERTYPE, 0xFFFF, ethtype_check))
        else:
            sel = {"stream-port-prio": SEL_STREAM, "dgram-port-prio": SEL_DGRAM,
                   "port-prio": SEL_ANY}[kind]
            i, ok, bad = _parse_mapping(ctx, args, i, plain_key,
                                        prio_cb("PORT", sel, 0xFFFF, port_check))
        if not ok:
            ctx.eprint("Invalid mapping %s\n" % bad)
            return 1, None
    return None, apps


def _app_add(ctx, dev, args):
    rc, apps = _parse_app_args(ctx, args)
    if rc is not None:
        return rc
    if not apps:
        return 0
    with _Kernel(ctx, dev) as k:
        k.app_set(apps)
    return 0


def _app_del(ctx, dev, args):
    rc, apps = _parse_app_args(ctx, args)
    if rc is not None:
        return rc
    if not apps:
        return 0
    with _Kernel(ctx, dev) as k:
        k.app_del(apps)
    return 0


def _app_replace(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        k.read()
        orig = k.app_table()
        rc, tab = _parse_app_args(ctx, args)
        if rc is not None:
            # dcb_cmd_app_replace() returns 0 whatever went wrong after reading.
            return 0
        new = [a for a in tab if a not in orig]
        if new:
            try:
                k.app_set(new)
            except _Exit:
                ctx.eprint("Could not add new APP entries\n")
                return 0
        keys = set((a[0], a[1]) for a in tab)
        obsolete = [a for a in orig if (a[0], a[1]) in keys and a not in tab]
        if obsolete:
            try:
                k.app_del(obsolete)
            except _Exit:
                ctx.eprint("Could not remove replaced APP entries\n")
                return 0
    return 0


def _app_flush(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        k.read()
        tab = k.app_table()
        filters = {"ethtype-prio": lambda a: a[0] == SEL_ETHERTYPE and a[1] != 0,
                   "default-prio": lambda a: a[0] == SEL_ETHERTYPE and a[1] == 0,
                   "dscp-prio": lambda a: a[0] == SEL_DSCP}
        if ctx.has_apptrust:
            filters["pcp-prio"] = lambda a: a[0] == SEL_PCP
        if not args:
            if tab:
                k.app_del(tab)
            return 0
        for word in args:
            if _is(word, "help"):
                _help_app_show(ctx)
                return 0
            f = None
            for name in ("ethtype-prio", "default-prio", "dscp-prio"):
                if _is(word, name):
                    f = filters[name]
                    break
            if f is None and word == "pcp-prio" and ctx.has_apptrust:
                f = filters["pcp-prio"]
            if f is None:
                ctx.eprint('What is "%s"?\n' % word)
                _help_app_show(ctx)
                return 1
            sel = [a for a in tab if f(a)]
            if sel:
                k.app_del(sel)
    return 0


def _print_apps(ctx, tab, filt, json_name, fp_name, pid_fmt):
    out = ctx.out
    first = True
    for app in tab:
        if not filt(app):
            continue
        if first:
            out.open_array(json_name)
            out.string("fp", None, "%s ", fp_name)
            first = False
        out.open_array(None)
        pid_fmt(app[1])
        if ctx.app_trailing_space:
            out.uint("any", None, ":%d", app[2])
            out.string("any", None, "%s", " ")
        else:
            out.uint("any", None, "%d ", app[2])
        out.close_array()
    if not first:
        out.close_array()
        out.nl()


def _app_show(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        k.read()
        tab = sorted(k.app_table(), key=lambda a: (a[1], a[2]))
    out = ctx.out
    colon = "" if ctx.app_trailing_space else ":"

    def pid_dec(p):
        out.uint("any", None, "%d" + colon, p)

    def pid_hex(p):
        out.uint("any", None, "%x" + colon, p)

    def pid_dscp(p):
        name = RT_DSFIELD.get(p << 2)
        if not ctx.json and name is not None:
            out.string("fp", None, "%s" + colon, name)
        else:
            out.uint("any", None, "%d" + colon, p)

    def pid_pcp(p):
        if p > 15:
            out.uint("any", None, "%d" + colon, p)
        else:
            out.string("any", None, "%s" + colon, PCP_NAMES[p])

    def ethtype():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_ETHERTYPE and a[1] != 0, "ethtype_prio",
                    "ethtype-prio", pid_hex)

    def default():
        first = True
        for a in tab:
            if not (a[0] == SEL_ETHERTYPE and a[1] == 0):
                continue
            if first:
                out.open_array("default_prio")
                out.string("fp", None, "default-prio ", None)
                first = False
            out.uint("any", None, "%d ", a[2])
        if not first:
            out.close_array()
            out.nl()

    def dscp():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_DSCP, "dscp_prio", "dscp-prio",
                    pid_dec if ctx.numeric else pid_dscp)

    def stream():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_STREAM, "stream_port_prio",
                    "stream-port-prio", pid_dec)

    def dgram():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_DGRAM, "dgram_port_prio",
                    "dgram-port-prio", pid_dec)

    def port():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_ANY, "port_prio", "port-prio", pid_dec)

    def pcp():
        _print_apps(ctx, tab, lambda a: a[0] == SEL_PCP, "pcp_prio", "pcp-prio",
                    pid_dec if ctx.numeric else pid_pcp)

    out.open_object()
    rc = 0
    if not args:
        ethtype()
        default()
        dscp()
        stream()
        dgram()
        port()
        if ctx.has_apptrust:
            pcp()
    else:
        table = [("help", None), ("ethtype-prio", ethtype), ("dscp-prio", dscp),
                 ("stream-port-prio", stream), ("dgram-port-prio", dgram), ("port-prio", port),
                 ("default-prio", default)]
        for word in args:
            fn = False
            for name, f in table:
                if _is(word, name):
                    fn = f
                    break
            if fn is False and ctx.has_apptrust and word == "pcp-prio":
                fn = pcp
            if fn is None:
                _help_app_show(ctx)
                break
            if fn is False:
                ctx.eprint('What is "%s"?\n' % word)
                _help_app_show(ctx)
                rc = 1
                break
            fn()
    out.close_object()
    return rc


def _cmd_app(ctx, args):
    if not args or _is(args[0], "help"):
        _help_app(ctx)
        return 0
    for name, fn, helpf in (("show", _app_show, _help_app_show),
                            ("flush", _app_flush, _help_app_show),
                            ("add", _app_add, _help_app_add),
                            ("del", _app_del, _help_app_add),
                            ("replace", _app_replace, _help_app_add)):
        if _is(args[0], name):
            return _parse_dev(ctx, args[1:], fn, helpf)
    ctx.eprint('What is "%s"?\n' % args[0])
    _help_app(ctx)
    return 1


# ----------------------------------------------------------------------------------------------
# dcb pfc
# ----------------------------------------------------------------------------------------------

def _print_array_onoff(out, arr):
    for i, v in enumerate(arr):
        out.on_off("json", None, None, v)
        out.uint("fp", None, "%d:", i)
        out.on_off("fp", None, "%s ", v)


def _print_array_u(out, arr):
    for i, v in enumerate(arr):
        out.uint("json", None, None, v)
        out.uint("fp", None, "%d:", i)
        out.uint("fp", None, "%d ", v)


def _named_array(out, json_name, fp_name, arr, printer):
    out.open_array(json_name)
    out.string("fp", None, "%s ", fp_name)
    printer(out, arr)
    out.close_array()


def _pfc_show(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        pfc = k.pfc_get()
    out = ctx.out
    bits = [bool(pfc["pfc_en"] & (1 << i)) for i in range(8)]

    def cap():
        out.uint("any", "pfc_cap", "pfc-cap %d ", pfc["pfc_cap"])

    def mbc():
        out.on_off("any", "macsec_bypass", "macsec-bypass %s ", pfc["mbc"])

    def delay():
        out.uint("any", "delay", "delay %d ", pfc["delay"])

    def prio():
        _named_array(out, "prio_pfc", "prio-pfc", bits, _print_array_onoff)

    def requests():
        out.open_array("requests")
        out.string("fp", None, "requests ", None)
        _print_array_u(out, pfc["requests"])
        out.close_array()

    def indications():
        out.open_array("indications")
        out.string("fp", None, "indications ", None)
        _print_array_u(out, pfc["indications"])
        out.close_array()

    out.open_object()
    if not args:
        cap()
        mbc()
        delay()
        out.nl()
        prio()
        out.nl()
        if ctx.stats:
            requests()
            out.nl()
            indications()
            out.nl()
        out.close_object()
        return 0
    table = [("help", None), ("prio-pfc", prio), ("pfc-cap", cap), ("macsec-bypass", mbc),
             ("delay", delay), ("requests", requests), ("indications", indications)]
    for word in args:
        fn = False
        for name, f in table:
            if _is(word, name):
                fn = f
                break
        if fn is None:
            _help_pfc_show(ctx)
            _drop_open_json(ctx)
            return 0
        if fn is False:
            ctx.eprint('What is "%s"?\n' % word)
            _help_pfc_show(ctx)
            _drop_open_json(ctx)
            return 1
        fn()
        out.nl()
    out.close_object()
    return 0


def _drop_open_json(ctx):
    """iproute2 returns from inside an open JSON object; its writer then asserts on exit.

    The real binary aborts in that case (assert in jsonw_destroy) after the object has been
    partly written; we emit what it had written so far and close nothing.
    """
    ctx.out.depth = 0


def _pfc_set(ctx, dev, args):
    if not args:
        _help_pfc_set(ctx)
        return 0
    with _Kernel(ctx, dev) as k:
        cur = k.pfc_get()
        pfc = {"pfc_en": cur["pfc_en"], "mbc": cur["mbc"], "delay": cur["delay"]}
        i = 0
        while i < len(args):
            word = args[i]
            if _is(word, "help"):
                _help_pfc_set(ctx)
                return 0
            if _is(word, "prio-pfc"):
                if i + 1 >= len(args):
                    _incomplete(ctx)
                i += 1

                def cb(key, value):
                    en = _parse_one_of(ctx, "PFC", value, ["off", "on"])
                    if en is None:
                        return False
                    arr = [bool(pfc["pfc_en"] & (1 << b)) for b in range(8)]

                    def setter(kk, vv):
                        arr[kk] = bool(vv)
                    if not _dcb_parse_mapping(ctx, "PRIO", key, 7, "PFC", en, 0xFFFFFFFF, setter):
                        return False
                    pfc["pfc_en"] = sum(1 << b for b in range(8) if arr[b])
                    return True
                i, ok, bad = _parse_mapping(ctx, args, i, _num_all, cb)
                if not ok:
                    ctx.eprint("Invalid pfc mapping %s\n" % bad)
                    return 1
                continue
            elif _is(word, "macsec-bypass"):
                if i + 1 >= len(args):
                    _incomplete(ctx)
                i += 1
                v = _parse_one_of(ctx, "macsec-bypass", args[i], ["off", "on"])
                if v is None:
                    return 1
                pfc["mbc"] = bool(v)
            elif _is(word, "delay"):
                if i + 1 >= len(args):
                    _incomplete(ctx)
                i += 1
                v = _get_unsigned(args[i], 0xFFFF)
                if v is None:
                    ctx.eprint("Invalid delay `%s', expected an integer 0..65535\n" % args[i])
                    return 1
                pfc["delay"] = v
            else:
                ctx.eprint('What is "%s"?\n' % word)
                _help_pfc_set(ctx)
                return 1
            i += 1
        k.pfc_set(pfc)
    return 0


def _cmd_pfc(ctx, args):
    if not args or _is(args[0], "help"):
        _help_pfc(ctx)
        return 0
    if _is(args[0], "show"):
        return _parse_dev(ctx, args[1:], _pfc_show, _help_pfc_show)
    if _is(args[0], "set"):
        return _parse_dev(ctx, args[1:], _pfc_set, _help_pfc_set)
    ctx.eprint('What is "%s"?\n' % args[0])
    _help_pfc(ctx)
    return 1


# ----------------------------------------------------------------------------------------------
# dcb ets
# ----------------------------------------------------------------------------------------------

def _tsa_name(v):
    if v == TSA_VENDOR:
        return "vendor"
    if 0 <= v < len(TSA_NAMES):
        return TSA_NAMES[v]
    return "???"


def _print_array_tsa(out, arr):
    for i, v in enumerate(arr):
        out.string("json", None, None, _tsa_name(v))
        out.uint("fp", None, "%d:", i)
        out.string("fp", None, "%s ", _tsa_name(v))


ETS_ARRAYS = [  # (json, fp, key in state, printer)
    ("tc_bw", "tc-bw", "tc_bw", _print_array_u),
    ("pg_bw", "pg-bw", "pg_bw", _print_array_u),
    ("tc_tsa", "tc-tsa", "tc_tsa", _print_array_tsa),
    ("prio_tc", "prio-tc", "prio_tc", _print_array_u),
    ("reco_tc_bw", "reco-tc-bw", "reco_tc_bw", _print_array_u),
    ("reco_tc_tsa", "reco-tc-tsa", "reco_tc_tsa", _print_array_tsa),
    ("reco_prio_tc", "reco-prio-tc", "reco_prio_tc", _print_array_u),
]


def _ets_show(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        ets = k.ets_get()
    out = ctx.out
    printers = {
        "willing": lambda: out.on_off("any", "willing", "willing %s ", ets["willing"]),
        "ets-cap": lambda: out.uint("any", "ets_cap", "ets-cap %d ", ets["ets_cap"]),
        "cbs": lambda: out.on_off("any", "cbs", "cbs %s ", ets["cbs"]),
    }
    for jn, fp, key, pr in ETS_ARRAYS:
        printers[fp] = (lambda jn=jn, fp=fp, key=key, pr=pr:
                        _named_array(out, jn, fp, ets[key], pr))
    out.open_object()
    if not args:
        printers["willing"]()
        printers["ets-cap"]()
        printers["cbs"]()
        out.nl()
        for jn, fp, key, pr in ETS_ARRAYS:
            printers[fp]()
            out.nl()
        out.close_object()
        return 0
    order = ["help", "willing", "ets-cap", "cbs", "tc-tsa", "reco-tc-tsa", "pg-bw", "tc-bw",
             "reco-tc-bw", "prio-tc", "reco-prio-tc"]
    for word in args:
        name = next((n for n in order if _is(word, n)), None)
        if name == "help":
            _help_ets_show(ctx)
            _drop_open_json(ctx)
            return 0
        if name is None:
            ctx.eprint('What is "%s"?\n' % word)
            _help_ets_show(ctx)
            _drop_open_json(ctx)
            return 1
        printers[name]()
        out.nl()
    out.close_object()
    return 0


def _validate_bw(ctx, bw, tsa, what):
    has_ets = any(t == 2 for t in tsa)
    for tc, b in enumerate(bw):
        if b > 100:
            ctx.eprint("%d%% for TC %d of %s is not a valid bandwidth percentage, expected "
                       "0..100%%\n" % (b, tc, what))
            return False
    total = sum(bw)
    if total == 100 or (not has_ets and total == 0):
        return True
    ctx.eprint("Bandwidth percentages in %s sum to %d%%, expected %d%%\n"
               % (what, total, 100 if has_ets else 0))
    return False


def _ets_set(ctx, dev, args):
    if not args:
        _help_ets_set(ctx)
        return 1
    tsa_list = ["strict", "cbs", "ets"] + [None] * 252 + ["vendor"]
    with _Kernel(ctx, dev) as k:
        ets = k.ets_get()
        ets = dict((key, list(v) if isinstance(v, list) else v) for key, v in ets.items())
        i = 0
        while i < len(args):
            word = args[i]
            if _is(word, "help"):
                _help_ets_set(ctx)
                return 0
            if _is(word, "willing"):
                if i + 1 >= len(args):
                    _incomplete(ctx)
                i += 1
                v = _parse_one_of(ctx, "willing", args[i], ["off", "on"])
                if v is None:
                    return 1
                ets["willing"] = bool(v)
                i += 1
                continue
            spec = None
            for name, key, kind in (("tc-tsa", "tc_tsa", "tsa"),
                                    ("reco-tc-tsa", "reco_tc_tsa", "tsa"),
                                    ("tc-bw", "tc_bw", "bw"), ("pg-bw", "pg_bw", "bw"),
                                    ("reco-tc-bw", "reco_tc_bw", "bw"),
                                    ("prio-tc", "prio_tc", "prio"),
                                    ("reco-prio-tc", "reco_prio_tc", "prio")):
                if _is(word, name):
                    spec = (name, key, kind)
                    break
            if spec is None:
                ctx.eprint('What is "%s"?\n' % word)
                _help_ets_set(ctx)
                return 1
            if i + 1 >= len(args):
                _incomplete(ctx)
            i += 1
            name, key, kind = spec
            arr = ets[key]

            def setter(kk, vv, arr=arr):
                arr[kk] = vv

            def cb(kk, value, kind=kind, setter=setter):
                if kind == "tsa":
                    t = _parse_one_of(ctx, "TSA", value, tsa_list)
                    if t is None:
                        return False
                    return _dcb_parse_mapping(ctx, "TC", kk, 7, "TSA", t, 0xFFFFFFFF, setter)
                v = _get_unsigned(value, 255)
                if v is None:
                    return False
                if kind == "bw":
                    return _dcb_parse_mapping(ctx, "TC", kk, 7, "BW", v, 100, setter)
                return _dcb_parse_mapping(ctx, "PRIO", kk, 7, "TC", v, 7, setter)
            i, ok, bad = _parse_mapping(ctx, args, i, _num_all, cb)
            if not ok:
                ctx.eprint("Invalid %s mapping %s\n" % (name, bad))
                return 1
        if not (_validate_bw(ctx, ets["tc_bw"], ets["tc_tsa"], "tc-bw")
                and _validate_bw(ctx, ets["reco_tc_bw"], ets["reco_tc_tsa"], "reco-tc-bw")):
            return 1
        k.ets_set(ets)
    return 0


def _cmd_ets(ctx, args):
    if not args or _is(args[0], "help"):
        _help_ets(ctx)
        return 0
    if _is(args[0], "show"):
        return _parse_dev(ctx, args[1:], _ets_show, _help_ets_show)
    if _is(args[0], "set"):
        return _parse_dev(ctx, args[1:], _ets_set, _help_ets_set)
    ctx.eprint('What is "%s"?\n' % args[0])
    _help_ets(ctx)
    return 1


# ----------------------------------------------------------------------------------------------
# dcb apptrust (iproute2 >= 6.2)
# ----------------------------------------------------------------------------------------------

def _apptrust_print_order(ctx, order):
    out = ctx.out
    out.open_array("order")
    out.string("fp", None, "order: ", None)
    for name in order:
        out.string("any", None, "%s ", name)
    out.nl()
    out.close_array()


def _apptrust_show(ctx, dev, args):
    with _Kernel(ctx, dev) as k:
        order = k.apptrust_get()
    ctx.out.open_object()
    if not args:
        _apptrust_print_order(ctx, order)
        ctx.out.nl()
        ctx.out.close_object()
        return 0
    for word in args:
        if word == "help":
            _help_apptrust_show(ctx)
            _drop_open_json(ctx)
            return 0
        if word == "order":
            _apptrust_print_order(ctx, order)
            continue
        ctx.eprint('What is "%s"?\n' % word)
        _help_apptrust_show(ctx)
        _drop_open_json(ctx)
        return 1
    ctx.out.close_object()
    return 0


def _apptrust_set(ctx, dev, args):
    if not args:
        _help_apptrust_set(ctx)
        return 0
    names = {v: k for k, v in SELECTOR_NAMES.items()}
    order = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "help":
            _help_apptrust_set(ctx)
            return 0
        if word != "order":
            ctx.eprint('What is "%s"?\n' % word)
            _help_apptrust_set(ctx)
            return 1
        i += 1
        while i < len(args) and args[i] in names:
            if args[i] in order:
                ctx.eprint("Duplicate selector: %s\n" % args[i])
                ctx.eprint("Invalid list of selectors\n")
                return 1
            order.append(args[i])
            i += 1
    with _Kernel(ctx, dev) as k:
        k.apptrust_set(order)
    return 0


def _cmd_apptrust(ctx, args):
    if not args or args[0] == "help":
        _help_apptrust(ctx)
        return 0
    if args[0] == "show":
        return _parse_dev(ctx, args[1:], _apptrust_show, _help_apptrust_show)
    if args[0] == "set":
        return _parse_dev(ctx, args[1:], _apptrust_set, _help_apptrust_set)
    ctx.eprint('What is "%s"?\n' % args[0])
    _help_apptrust(ctx)
    return 1


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------

LONG_OPTS = {"--Version": "V", "--force": "f", "--batch": "b", "--iec": "i", "--json": "j",
             "--Numeric": "N", "--pretty": "p", "--statistics": "s", "--netns": "n",
             "--help": "h", "--verbose": "v"}


class _ProcessExit(Exception):
    """exit(n) in the middle of a batch (makeargs() on a bad line): stdout so far, no JSON teardown."""

    def __init__(self, rc):
        Exception.__init__(self, rc)
        self.rc = rc


def _makeargs(line, ctx):
    """lib/utils.c makeargs(): whitespace-separated words, '...' or "..." quoting, no escapes."""
    ws = " \t\r\n"
    args = []
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] in ws:
            i += 1
        if i >= n:
            break
        if line[i] in "'\"":
            quote = line[i]
            end = line.find(quote, i + 1)
            if end < 0:
                ctx.eprint("Unterminated quoted string\n")
                raise _ProcessExit(1)
            args.append(line[i + 1:end])
            i = end + 1
        else:
            j = i
            while j < n and line[j] not in ws:
                j += 1
            args.append(line[i:j])
            i = j + 1
    return args


def _batch(ctx, name, force, stdin):
    """lib/utils.c do_batch() + getcmdline(): one JSON writer for the whole batch (dcb_init), so the
    top-level objects of successive show commands come out comma-separated: ``{...},{...}``.
    Stops at the first failing command unless -f; returns EXIT_FAILURE when any failed."""
    if name != "-":
        try:
            with open(name) as f:
                text = f.read()
        except (IOError, OSError) as e:
            ctx.eprint('Cannot open file "%s" for reading: %s\n' % (name, os.strerror(e.errno)))
            return 1
    else:
        text = (stdin if stdin is not None else sys.stdin).read()
    lines = text.splitlines(True)
    ret = 0
    ran = 0
    lineno = 0
    i = 0
    while i < len(lines):
        line = lines[i].split("#", 1)[0]
        i += 1
        lineno += 1
        while "\\\n" in line:
            if i >= len(lines):
                ctx.eprint("Missing continuation line\n")
                return ret
            nxt = lines[i].split("#", 1)[0]
            i += 1
            lineno += 1
            line = line[:line.index("\\\n")] + nxt
        args = _makeargs(line, ctx)
        if not args:
            continue
        if ran and (6, 1, 0) <= ctx.vt < (6, 2, 0):
            # iproute2 6.1's batch defect (dcb.c, 84c03697 in v6.1.0: requests carry NLM_F_ACK, but the reply
            # callback stops at the attribute and leaves the ACK in the socket; the next command of the process
            # reads that ACK, seq = time(NULL) matching within the second, finds no attribute and fails with
            # perror("Attribute not found"). Fixed by d0e02f35 in v6.2.0; 5.11-6.0 sent no NLM_F_ACK)
            ctx.eprint("Attribute not found: Success\n")
            rc = 1
        else:
            try:
                rc = _dispatch(ctx, args)
            except _Exit as e:
                if e.rc == 255:
                    raise
                rc = e.rc
        ran += 1
        if rc:
            ctx.eprint("Command failed %s:%d\n" % (name, lineno))
            ret = 1
            if not force:
                break
    return ret


def run(argv, root=None, stdin=None):
    """Run one dcb command line (or a batch: -b FILE, -b - reads ``stdin``); returns (rc, stdout, stderr)."""
    if root is None:
        root = os.environ.get(SYSROOT_ENV) or "/"
    version = node_version(root)
    opts = {"j": False, "p": False, "N": False, "s": False, "f": False}
    batch = None
    # getopt_long() permutes: options may appear anywhere before a "--"; -b and -n take an argument.
    args = []
    rest = list(argv)
    err = []
    while rest:
        a = rest.pop(0)
        if a == "--":
            args.extend(rest)
            break
        if not a.startswith("-") or a == "-":
            args.append(a)
            continue
        if a.startswith("--"):
            long_name, eq, value = a.partition("=")
            letters = [LONG_OPTS.get(long_name)]
            bad = a
            inline = value if eq else None
        else:
            letters = list(a[1:])
            bad = None
            inline = None
        for pos, ch in enumerate(letters):
            if ch == "V":
                return 0, "dcb utility, iproute2-%s\n" % version, ""
            if ch == "h":
                ctx = _Ctx(root, version, False, False, False, False)
                _help_main(ctx)
                return 0, "", "".join(ctx.err)
            if ch in ("b", "n"):
                if bad is None and pos + 1 < len(letters):
                    value = "".join(letters[pos + 1:])
                elif inline is not None:
                    value = inline
                elif rest:
                    value = rest.pop(0)
                else:
                    ctx = _Ctx(root, version, False, False, False, False)
                    if bad is not None:
                        err.append("dcb: option '%s' requires an argument\n" % bad)
                    else:
                        err.append("dcb: option requires an argument -- '%s'\n" % ch)
                    err.append("Unknown option.\n")
                    _help_main(ctx)
                    return 1, "", "".join(err + ctx.err)
                if ch == "n":
                    err.append("dcb: netns mode is not emulated\n")
                    return 1, "", "".join(err)
                batch = value
                break
            if ch in opts:
                opts[ch] = True
            elif ch in ("i", "v"):
                continue
            else:
                ctx = _Ctx(root, version, False, False, False, False)
                if bad is not None:
                    err.append("dcb: unrecognized option '%s'\n" % bad)
                else:
                    err.append("dcb: invalid option -- '%s'\n" % ch)
                err.append("Unknown option.\n")
                _help_main(ctx)
                return 1, "", "".join(err + ctx.err)
    ctx = _Ctx(root, version, opts["j"], opts["p"], opts["N"], opts["s"])
    try:
        if batch is not None:
            rc = _batch(ctx, batch, opts["f"], stdin)
        else:
            rc = _dispatch(ctx, args)
    except _Exit as e:
        rc = e.rc
        if rc == 255:
            # exit(-1) from incomplete_command()/invarg(): no JSON writer teardown.
            return 255, ctx.out.text(), "".join(ctx.err)
    except _ProcessExit as e:
        return e.rc, ctx.out.text(), "".join(ctx.err)
    stdout = ctx.out.text()
    if ctx.json:
        stdout += "\n"
    return (0 if rc == 0 else 1), stdout, "".join(ctx.err)


def _dispatch(ctx, args):
    if not args or _is(args[0], "help"):
        _help_main(ctx)
        return 0
    word = args[0]
    # dcb came with iproute2 5.11 (ets, pfc, buffer, dcbx, maxrate); "dcb app" with 5.12.
    if ctx.has_app and _is(word, "app"):
        return _cmd_app(ctx, args[1:])
    if ctx.has_apptrust and word == "apptrust":
        return _cmd_apptrust(ctx, args[1:])
    if _is(word, "ets"):
        return _cmd_ets(ctx, args[1:])
    if _is(word, "pfc"):
        return _cmd_pfc(ctx, args[1:])
    if _is(word, "dcbx"):
        from gpufabric_sim.emulators import dcb_dcbx
        return dcb_dcbx.cmd(ctx, args[1:])
    for name in ("buffer", "maxrate"):
        if _is(word, name):
            ctx.eprint("dcb %s: not emulated by gpufabric_sim\n" % name)
            return 1
    ctx.eprint('Object "%s" is unknown\n' % word)
    return 1


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    rc, out, err = run(argv)
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    if err:
        sys.stderr.write(err)
        sys.stderr.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
