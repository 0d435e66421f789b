# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns DCB on a rail: DCBX mode through ``dcb dcbx``, and the NIC firmware's LLDP/DCBX settings (mlxconfig).

Facts this code relies on:

* iproute2 dcb/dcb_dcbx.c: ``dcb dcbx show dev X`` reads DCB_ATTR_DCBX (one byte, the driver's ``getdcbx``) and
  prints one word per set bit, lowest bit first, each followed by a space: ``host`` (DCB_CAP_DCBX_HOST 0x01),
  ``lld-managed`` (0x02), ``cee`` (0x04), ``ieee`` (0x08), ``static`` (0x10). With ``-j`` every set bit is a JSON
  ``true`` under the same name, except ``lld-managed``, whose key is ``lld_managed``: ``{"host":true,"ieee":true}``.
  ``dcb dcbx set dev X host ieee`` sends those bits (DCB_CMD_SDCBX); a driver that refuses returns a nonzero status,
  dcb prints ``Attribute write: ...`` and exits 1. ``dcb dcbx set dev X`` with no flags prints the help: the tool
  cannot send mode 0.
* upstream mlx5 (drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c): ``getdcbx`` returns the cached caps, at
  driver init CEE|IEEE plus HOST when the firmware's DCBX mode is host (else the firmware's LLDP agent negotiates
  DCBX with the switch: "auto"). ``setdcbx`` refuses LLD_MANAGED and any mode without HOST; with HOST it switches
  the firmware to host mode and caches the mode as given. So on mlx5 a rail the host does not own shows
  ``cee ieee`` (no ``host``), and ``host ieee`` is what the fix leaves.
* The host owns DCB when ``host`` is set and ``lld-managed`` is not, and ``ieee`` is set (the collection drives the
  IEEE objects: ets, pfc, app). A ``cee`` bit beside them is the host agent's capability and is left alone (mlx5
  reports it after every driver load).
* A host DCBX agent, ``lldpad`` (open-lldp), sets ETS, PFC and APP through the same dcbnl calls from what it
  negotiates with the switch or was told with ``lldptool``, whenever it likes: it and dcb_qos would rewrite each
  other. :func:`lldpad` finds it (a process whose ``/proc/<pid>/comm`` is ``lldpad``, or its systemd unit enabled
  below ``/etc/systemd/system/*.wants``) so that the dcb concern reports it instead of fighting it.

Plain Python; the runner ``run(argv) -> (rc, out, err)`` is injected. Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

FLAGS = (("host", "host", 0x01), ("lld-managed", "lld_managed", 0x02), ("cee", "cee", 0x04),
         ("ieee", "ieee", 0x08), ("static", "static", 0x10))
DESIRED_FLAGS = ["host", "ieee"]
HOST = "host"
KEEP = "keep"
CHOICES = (HOST, KEEP)
MLXCONFIG_KEYS = ("LLDP_NB_DCBX_P1", "LLDP_NB_RX_MODE_P1", "LLDP_NB_TX_MODE_P1", "DCBX_IEEE_P1", "DCBX_CEE_P1",
                  "DCBX_WILLING_P1")
_WORD = dict((fp, fp) for fp, _j, _b in FLAGS)
_JSON = dict((j, fp) for fp, j, _b in FLAGS)


class DcbxError(ValueError):
    """Output of dcb dcbx that cannot be read."""


def parse(text):
    """``dcb [-j] dcbx show`` output -> {"flags": [words in bit order], "owner": host|lld-managed, "versions"}."""
    text = (text or "").strip()
    words = []
    if text.startswith("{") or text.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise DcbxError("cannot parse the JSON of dcb dcbx show: %s" % e)
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict):
            raise DcbxError("unexpected JSON from dcb dcbx show: %r" % (data,))
        for key, value in data.items():
            if key not in _JSON or value is not True:
                raise DcbxError("unexpected key %r in dcb dcbx show" % key)
            words.append(_JSON[key])
    else:
        for w in text.split():
            if w not in _WORD:
                raise DcbxError("unexpected word %r in dcb dcbx show" % w)
            words.append(w)
    order = [fp for fp, _j, _b in FLAGS]
    words = sorted(set(words), key=order.index)
    return describe(words)


def describe(words):
    return {"flags": list(words), "owner": HOST if "host" in words and "lld-managed" not in words else "lld-managed",
            "versions": [w for w in words if w in ("cee", "ieee")], "static": "static" in words}


def host_owned(state):
    """True when the host owns DCB in IEEE mode (see the module docstring)."""
    return state is not None and state["owner"] == HOST and "ieee" in state["flags"]


def plan(netdev, state, want):
    """([argv], drift items) for the DCBX mode of a rail (concern dcb, key ``dcbx``); nothing when ``want`` is
    keep or the mode could not be read (``state`` None)."""
    if want != HOST or state is None or host_owned(state):
        return [], []
    item = {"concern": "dcb", "object": netdev, "key": "dcbx", "current": " ".join(state["flags"]) or "none",
            "desired": " ".join(DESIRED_FLAGS)}
    return [["dcb", "dcbx", "set", "dev", netdev] + DESIRED_FLAGS], [item]


def read(run, netdev):
    """(state or None, error or None) of one rail; a driver without getdcbx makes dcb fail: not readable."""
    try:
        rc, out, err = run(["dcb", "-j", "dcbx", "show", "dev", netdev])
    except OSError as e:
        return None, "cannot run dcb: %s" % e
    if rc != 0:
        return None, "dcb dcbx show dev %s failed (rc=%s): %s" % (netdev, rc, (err or out or "").strip())
    return from_output(out)


def from_output(out):
    """(state or None, error or None) from the output of a ``dcb -j dcbx show`` that succeeded."""
    try:
        return parse(out), None
    except DcbxError as e:
        return None, str(e)


# ----------------------------------------------------------------------------------------------
# a host DCBX agent (lldpad)

LLDPAD = "lldpad"
LLDPAD_UNITS = ("lldpad.service", "lldpad.socket")
SYSTEMD_ETC = "/etc/systemd/system"


def lldpad(sysroot):
    """{"pids": [running lldpad processes], "enabled": [enabled unit links]}, or None when there is neither."""
    pids = sorted(int(n) for n in sysroot.listdir("/proc")
                  if n.isdigit() and sysroot.read("/proc/%s/comm" % n) == LLDPAD)
    enabled = []
    for wants in sysroot.listdir(SYSTEMD_ETC):
        if wants.endswith(".wants"):
            for unit in LLDPAD_UNITS:
                link = "%s/%s/%s" % (SYSTEMD_ETC, wants, unit)
                if sysroot.islink(link) or sysroot.exists(link):
                    enabled.append(link)
    if not pids and not enabled:
        return None
    return {"pids": pids, "enabled": enabled}


def lldpad_item(agent):
    """The dcb drift item (object and key ``lldpad``) for a found lldpad: dcb_qos does not stop it."""
    what = []
    if agent["pids"]:
        what.append("running (pid %s)" % ", ".join(str(p) for p in agent["pids"]))
    if agent["enabled"]:
        what.append("enabled (%s)" % ", ".join(agent["enabled"]))
    return {"concern": "dcb", "object": LLDPAD, "key": LLDPAD, "current": " and ".join(what),
            "desired": "not running, not enabled"}


def lldpad_reason(agent):
    return ("lldpad is %s: this host DCBX agent can rewrite ETS, PFC and APP behind dcb_qos, which does not stop it; "
            "stop it (systemctl disable --now lldpad.service lldpad.socket) or leave DCB to lldptool; check: "
            "systemctl status lldpad" % lldpad_item(agent)["current"])


# ----------------------------------------------------------------------------------------------
# firmware LLDP/DCBX settings (mlxconfig of MFT or mstflint)

_CONF_LINE = re.compile(r"^\s+([A-Z0-9_]+)\s+(\S.*?)\s*\Z")


def parse_mlxconfig(text, keys=MLXCONFIG_KEYS):
    """``mlxconfig -d <bdf> query KEY...`` -> {KEY: value as printed in the first value column (``False(0)``)}."""
    out = {}
    in_conf = False
    for line in (text or "").splitlines():
        if line.strip().startswith("Configurations:"):
            in_conf = True
            continue
        if not in_conf:
            continue
        m = _CONF_LINE.match(line)
        if m and m.group(1) in keys:
            out[m.group(1)] = m.group(2).split()[0]
    return out


def firmware_facts(run, which, bdf):
    """{"status": ok|not_checked, "reason", "settings"} of the NIC firmware's LLDP/DCBX settings."""
    if not bdf:
        return {"status": "not_checked", "reason": "no PCI function behind the rail", "settings": None}
    binary = which("mlxconfig")
    if not binary:
        return {"status": "not_checked", "settings": None,
                "reason": "mlxconfig (NVIDIA MFT or mstflint) is not installed: the firmware LLDP/DCBX settings "
                          "could not be read"}
    try:
        rc, out, err = run([binary, "-d", bdf, "query"] + list(MLXCONFIG_KEYS))
    except OSError as e:
        return {"status": "not_checked", "settings": None, "reason": "cannot run mlxconfig: %s" % e}
    settings = parse_mlxconfig(out) if rc == 0 else {}
    if rc != 0 or not settings:
        return {"status": "not_checked", "settings": None,
                "reason": "mlxconfig -d %s query failed (rc=%s): %s"
                % (bdf, rc, (err or out or "").strip()[:300] or "no output")}
    return {"status": "ok", "reason": None, "settings": settings}
