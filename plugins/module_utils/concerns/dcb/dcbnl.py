# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DCB of the rails read in-process over rtnetlink (``RTM_GETDCB``): the kernel interface iproute2's ``dcb``
reads, without a ``dcb`` process per object.

One ``DCB_CMD_IEEE_GET`` request per rail answers what ``dcb -j ets|pfc|app|apptrust|dcbx show dev X`` would print,
each in the shape ``manage.parse_*`` and ``dcbx.parse`` give for that output (a unit test replays replies recorded
on the VM lab's dcbnl driver against ``dcb -j`` of the same state; the VM lab compares both on the live kernel). What
the kernel does not answer (no such device, a driver without dcbnl ops, an object the reply lacks) is left to ``dcb``,
whose message names the failure precisely; nothing here decides a rail's state on its own.

What the kernel answers, read in its source (``net/dcb/dcbnl.c``, ``include/uapi/linux/dcbnl.h``; the first release
with it):
  2.6.38  ``DCB_CMD_IEEE_GET`` (``dcbnl_ieee_get``/``dcbnl_ieee_fill``): ``DCB_ATTR_IFNAME``, then the nest
          ``DCB_ATTR_IEEE`` holding ``DCB_ATTR_IEEE_ETS`` (struct ieee_ets, when the driver has ``ieee_getets``),
          ``DCB_ATTR_IEEE_PFC`` (struct ieee_pfc, with ``ieee_getpfc``) and ``DCB_ATTR_IEEE_APP_TABLE`` (the kernel's
          own APP list for the device, one ``DCB_ATTR_IEEE_APP`` struct dcb_app per entry); a device without dcbnl
          ops answers ``-EOPNOTSUPP``, an unknown name ``-ENODEV`` (older: ``-EINVAL``)
  3.2     ``DCB_ATTR_DCBX`` (u8, the driver's ``getdcbx``) after that nest in the same reply ("dcbnl: Add DCBX
          capabilities bitmask to the get_ieee response"); before it, or where it is missing, ``DCB_CMD_GDCBX``
          answers it alone (``dcbnl_getdcbx``: ``-EOPNOTSUPP`` without ``getdcbx``)
  6.1     ``DCB_ATTR_DCB_APP`` entries in the APP table for the PCP selector 255 ("net: dcb: add new pcp selector to
          app object") and the nest ``DCB_ATTR_DCB_APP_TRUST_TABLE`` of u8 selectors, each under the attribute type
          of its selector, when the driver has ``dcbnl_getapptrust`` (6182d5875c33, "net: dcb: add new apptrust
          attribute"); mlx5 has none, so its reply carries no trust table and ``apptrust`` is not answered
Only reads (``RTM_GETDCB``) are sent: every change still goes through ``dcb``. The request is the one ``dcb`` sends
(``NLM_F_REQUEST | NLM_F_ACK``, dcb/dcb.c ``dcb_prepare``); the reply is read up to its ACK with a receive timeout
and a bounded number of datagrams, so a stale answer never reaches the next request (the defect of iproute2 6.1's
batch, batch.py).

Plain Python, standard library only; the socket is injectable. Private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import struct

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb import dcbx as dcbx_mode
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.dcb.plan import OTHER_SELECTORS

NETLINK_ROUTE = 0
RTM_GETDCB = 78
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLA_TYPE_MASK = 0x3fff   # without NLA_F_NESTED and NLA_F_NET_BYTEORDER

DCB_CMD_IEEE_GET = 21
DCB_CMD_GDCBX = 22
DCB_ATTR_IFNAME = 1
DCB_ATTR_IEEE = 13
DCB_ATTR_DCBX = 14
DCB_ATTR_IEEE_ETS = 1
DCB_ATTR_IEEE_PFC = 2
DCB_ATTR_IEEE_APP_TABLE = 3
DCB_ATTR_DCB_APP_TRUST_TABLE = 11
DCB_ATTR_IEEE_APP = 1
DCB_ATTR_DCB_APP = 2

SEL_ETHERTYPE, SEL_STREAM, SEL_DGRAM, SEL_ANY, SEL_DSCP, SEL_PCP = 1, 2, 3, 4, 5, 255
_IEEE_SELECTORS = (SEL_ETHERTYPE, SEL_STREAM, SEL_DGRAM, SEL_ANY, SEL_DSCP)

_NLMSGHDR = struct.Struct("=IHHII")     # len, type, flags, seq, pid
_DCBMSG = struct.Struct("=BBH")         # dcb_family, cmd, dcb_pad
_NLATTR = struct.Struct("=HH")          # len, type
_ETS = struct.Struct("@BBB8s8s8s8s8s8s8s")   # struct ieee_ets: 59 bytes
_PFC = struct.Struct("@BBBH8Q8Q")       # struct ieee_pfc: 136 bytes on every Linux ABI (u64 aligned to 8)
_APP = struct.Struct("@BBH")            # struct dcb_app: selector, priority, protocol
_ERR = struct.Struct("=i")

# the names iproute2's dcb prints (dcb/dcb_ets.c tsa_names, dcb/dcb_app.c pcp_names, dcb/dcb_apptrust.c)
TSA_NAMES = {0: "strict", 1: "cbs", 2: "ets", 255: "vendor"}
PCP_NAMES = ["%dnd" % i for i in range(8)] + ["%dde" % i for i in range(8)]
TRUST_NAMES = {SEL_ETHERTYPE: "ethtype", SEL_STREAM: "stream-port", SEL_DGRAM: "dgram-port", SEL_ANY: "port",
               SEL_DSCP: "dscp", SEL_PCP: "pcp"}
_APP_KEYS = {SEL_STREAM: "stream_port_prio", SEL_DGRAM: "dgram_port_prio", SEL_ANY: "port_prio",
             SEL_PCP: "pcp_prio"}

RECV_TIMEOUT_S = 2.0
MAX_DATAGRAMS = 16
RECV_BYTES = 65536
IFNAMSIZ = 16


class DcbnlError(Exception):
    """The kernel answered a request with an error (``errno`` set), or its answer could not be read."""

    def __init__(self, msg, err=None):
        Exception.__init__(self, msg)
        self.errno = err


class Parsed(object):
    """One object of a rail as the kernel answered it, already in the shape ``manage.parse_*`` gives."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "Parsed(%r)" % (self.value,)

    def __eq__(self, other):
        return isinstance(other, Parsed) and other.value == self.value

    def __ne__(self, other):
        return not self == other

    __hash__ = None


# ----------------------------------------------------------------------------------------------
# messages


def _align(n):
    return (n + 3) & ~3


def _attr(kind, payload):
    return _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload + b"\0" * (_align(len(payload)) - len(payload))


def request(cmd, netdev, seq):
    """The bytes of one ``RTM_GETDCB`` request ``cmd`` for ``netdev`` (as dcb/dcb.c ``dcb_prepare`` builds it)."""
    name = netdev.encode("ascii") if not isinstance(netdev, bytes) else netdev
    # the kernel's dev_valid_name (net/core/dev.c): 1..15 bytes, not . or .., no /, : or whitespace; and printable
    if not 0 < len(name) < IFNAMSIZ or name in (b".", b"..") or \
            any(c in b"/:" or not 0x21 <= c <= 0x7e for c in bytearray(name)):
        raise DcbnlError("not an interface name: %r" % (netdev,), errno.EINVAL)
    body = _DCBMSG.pack(0, cmd, 0) + _attr(DCB_ATTR_IFNAME, name + b"\0")
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), RTM_GETDCB, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body


def attributes(buf, start=0, end=None):
    """[(type, payload bytes)] of the netlink attributes in ``buf[start:end]``; DcbnlError when one overruns."""
    end = len(buf) if end is None else end
    out, off = [], start
    while off + _NLATTR.size <= end:
        length, kind = _NLATTR.unpack_from(buf, off)
        if length < _NLATTR.size or off + length > end:
            raise DcbnlError("malformed netlink attribute at offset %d" % off)
        out.append((kind & NLA_TYPE_MASK, bytes(buf[off + _NLATTR.size:off + length])))
        off += _align(length)
    return out


def messages(buf):
    """[(type, flags, seq, payload bytes)] of the netlink messages of one datagram."""
    out, off = [], 0
    while off + _NLMSGHDR.size <= len(buf):
        length, kind, flags, seq, _pid = _NLMSGHDR.unpack_from(buf, off)
        if length < _NLMSGHDR.size or off + length > len(buf):
            raise DcbnlError("malformed netlink message at offset %d" % off)
        out.append((kind, flags, seq, bytes(buf[off + _NLMSGHDR.size:off + length])))
        off += _align(length)
    return out


def reply_attributes(payload):
    """{type: payload} of an ``RTM_GETDCB`` reply's payload (after its struct dcbmsg), nests kept as bytes."""
    if len(payload) < _DCBMSG.size:
        raise DcbnlError("short RTM_GETDCB reply")
    return dict(attributes(payload, _DCBMSG.size))


# ----------------------------------------------------------------------------------------------
# objects, in the shapes of manage.parse_* and dcbx.parse


def ets_state(data):
    """struct ieee_ets -> what ``manage.parse_ets`` gives for ``dcb -j ets show``."""
    willing, _cap, _cbs, tx_bw, _rx_bw, tsa, prio_tc = _ETS.unpack(data)[:7]
    return {"tc_tsa": [TSA_NAMES.get(t, t) for t in bytearray(tsa)], "tc_bw": list(bytearray(tx_bw)),
            "prio_tc": list(bytearray(prio_tc)), "willing": bool(willing)}


def pfc_state(data):
    """struct ieee_pfc -> what ``manage.parse_pfc`` gives for ``dcb -j pfc show`` (no ``-s``: no counters)."""
    cap, pfc_en, mbc, delay = _PFC.unpack(data)[:4]
    prio_pfc = [bool(pfc_en >> i & 1) for i in range(8)]
    return {"pfc_cap": cap, "delay": delay, "macsec_bypass": bool(mbc), "prio_pfc": prio_pfc,
            "enabled": [i for i, v in enumerate(prio_pfc) if v], "requests": None, "indications": None}


def _carries(kind, selector):
    """True when an entry of attribute type ``kind`` may carry ``selector`` (dcb/dcb_app.c
    ``dcb_app_selector_validate``: the IEEE selectors under DCB_ATTR_IEEE_APP, PCP under DCB_ATTR_DCB_APP)."""
    return (kind == DCB_ATTR_IEEE_APP and selector in _IEEE_SELECTORS) or \
        (kind == DCB_ATTR_DCB_APP and selector == SEL_PCP)


def app_entries(table):
    """[(selector, priority, protocol)] of a ``DCB_ATTR_IEEE_APP_TABLE`` nest, skipping what dcb skips (an entry
    whose attribute type does not match its selector, or too short: dcb/dcb_app.c
    ``dcb_app_get_table_attr_cb``)."""
    out = []
    for kind, data in attributes(table):
        if len(data) < _APP.size:
            continue
        selector, prio, protocol = _APP.unpack_from(data)
        if _carries(kind, selector):
            out.append((selector, prio, protocol))
    return out


def app_state(entries):
    """APP entries -> what ``manage.parse_app`` gives for ``dcb -j app show``."""
    dscp, other = {}, {}
    for selector, prio, protocol in entries:
        if selector == SEL_DSCP:
            dscp.setdefault(protocol, []).append(prio)
            continue
        if selector == SEL_ETHERTYPE:
            key, pid = ("ethtype_prio", protocol) if protocol else ("default_prio", None)
        else:
            key = _APP_KEYS[selector]
            pid = (PCP_NAMES[protocol] if protocol < len(PCP_NAMES) else str(protocol)) \
                if selector == SEL_PCP else protocol
        other.setdefault(key, {}).setdefault(pid, []).append(prio)
    for table in [dscp] + list(other.values()):
        for v in table.values():
            v.sort()
    other = dict((k, other[k]) for k, _w in OTHER_SELECTORS if k in other)
    return {"dscp": dscp, "pcp": dict(other.get("pcp_prio", {})), "other": other,
            "count": sum(len(v) for v in dscp.values())}


def trust_order(table):
    """The selector names of a ``DCB_ATTR_DCB_APP_TRUST_TABLE`` nest (``manage.parse_apptrust``)."""
    out = []
    for kind, data in attributes(table):
        if data and _carries(kind, bytearray(data)[0]):
            selector = bytearray(data)[0]
            out.append(TRUST_NAMES.get(selector, str(selector)))
    return out


def dcbx_state(value):
    """The DCBX byte -> what ``dcbx.parse`` gives for ``dcb -j dcbx show`` (unknown bits are not printed)."""
    return dcbx_mode.describe([word for word, _j, bit in dcbx_mode.FLAGS if value & bit])


def rail_objects(attrs, dcbx_attrs=None):
    """{object: Parsed} for what one IEEE_GET reply's attributes (``reply_attributes``) answer; ``dcbx_attrs``: a
    GDCBX reply's, where the IEEE reply had no DCBX byte."""
    out = {}
    ieee = dict(attributes(attrs[DCB_ATTR_IEEE])) if DCB_ATTR_IEEE in attrs else {}
    if len(ieee.get(DCB_ATTR_IEEE_ETS, b"")) == _ETS.size:
        out["ets"] = Parsed(ets_state(ieee[DCB_ATTR_IEEE_ETS]))
    if len(ieee.get(DCB_ATTR_IEEE_PFC, b"")) == _PFC.size:
        out["pfc"] = Parsed(pfc_state(ieee[DCB_ATTR_IEEE_PFC]))
    if DCB_ATTR_IEEE_APP_TABLE in ieee:
        out["app"] = Parsed(app_state(app_entries(ieee[DCB_ATTR_IEEE_APP_TABLE])))
    if DCB_ATTR_DCB_APP_TRUST_TABLE in ieee:
        out["apptrust"] = Parsed(trust_order(ieee[DCB_ATTR_DCB_APP_TRUST_TABLE]))
    for source in (attrs, dcbx_attrs or {}):
        if len(source.get(DCB_ATTR_DCBX, b"")) == 1 and "dcbx" not in out:
            out["dcbx"] = Parsed(dcbx_state(bytearray(source[DCB_ATTR_DCBX])[0]))
    return out


# ----------------------------------------------------------------------------------------------
# the socket


def netlink_socket():
    """A bound NETLINK_ROUTE socket with the receive timeout."""
    import socket   # not imported by every node-side start (the evaluation's other readers need no socket)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | getattr(socket, "SOCK_CLOEXEC", 0), NETLINK_ROUTE)
    try:
        sock.bind((0, 0))
        sock.settimeout(RECV_TIMEOUT_S)
    except Exception:
        sock.close()
        raise
    return sock


def talk(sock, cmd, netdev, seq):
    """Send one request; the attributes of its ``RTM_GETDCB`` reply, read up to the request's ACK. DcbnlError with
    the kernel's errno when it refused, or when the answer does not come or cannot be read."""
    sock.send(request(cmd, netdev, seq))
    reply = None
    for _datagram in range(MAX_DATAGRAMS):
        try:
            data = sock.recv(RECV_BYTES)
        except OSError as e:   # socket.timeout is an OSError
            raise DcbnlError("no answer from the kernel to RTM_GETDCB for %s: %s" % (netdev, e), e.errno)
        for kind, _flags, mseq, payload in messages(data):
            if mseq != seq:
                continue   # not this request's: never taken as its answer
            if kind == NLMSG_ERROR:
                code = -_ERR.unpack_from(payload)[0] if len(payload) >= _ERR.size else errno.EPROTO
                if code:
                    raise DcbnlError("RTM_GETDCB for %s: %s" % (netdev, os.strerror(code)), code)
                if reply is None:
                    raise DcbnlError("RTM_GETDCB for %s was acknowledged without an answer" % netdev)
                return reply
            if kind == NLMSG_DONE:
                continue
            if kind == RTM_GETDCB and reply is None:
                reply = reply_attributes(payload)
    raise DcbnlError("RTM_GETDCB for %s: no acknowledgement in %d datagrams" % (netdev, MAX_DATAGRAMS))


class KernelDcb(object):
    """Reads the rails' DCB from the running kernel. ``connect()`` returns a socket (``netlink_socket``; a test
    passes its own). Each ``answers`` call opens one socket and asks each rail once, so a read after a change sees
    the change."""

    def __init__(self, connect=None):
        self._connect = connect or netlink_socket
        self._seq = 0
        self.errors = {}   # netdev -> why the kernel did not answer (the dcb fallback reports its own)

    def answers(self, lines):
        """{(object, netdev): Parsed} for the (object, netdev) ``lines`` the kernel answered; the rest are left out
        (the caller reads them with dcb)."""
        wanted, order = {}, []
        for obj, dev in lines:
            if dev not in wanted:
                order.append(dev)
            wanted.setdefault(dev, set()).add(obj)
        if not wanted:
            return {}
        try:
            sock = self._connect()
        except (OSError, ValueError, AttributeError) as e:
            self.errors = dict((dev, "no rtnetlink socket: %s" % e) for dev in wanted)
            return {}
        out = {}
        try:
            for dev in order:
                try:
                    objs = self._rail(sock, dev, "dcbx" in wanted[dev])
                except DcbnlError as e:
                    self.errors[dev] = str(e)
                    if e.errno in (None, errno.EAGAIN, errno.ETIMEDOUT):
                        break   # a socket that stopped answering answers nothing more: dcb reads the rest
                    continue
                out.update(((obj, dev), objs[obj]) for obj in wanted[dev] if obj in objs)
        finally:
            sock.close()
        return out

    def _rail(self, sock, dev, with_dcbx):
        self._seq += 1
        attrs = talk(sock, DCB_CMD_IEEE_GET, dev, self._seq)
        dcbx_attrs = None
        if with_dcbx and DCB_ATTR_DCBX not in attrs:
            self._seq += 1
            try:
                dcbx_attrs = talk(sock, DCB_CMD_GDCBX, dev, self._seq)
            except DcbnlError as e:   # the rest of the IEEE reply stands; dcb reads the DCBX mode
                self.errors[dev] = str(e)
        return rail_objects(attrs, dcbx_attrs)


def for_sysroot(sysroot):
    """A KernelDcb where ``sysroot`` is the running host's root (``/``), else None: a simulated or test tree is not
    the kernel this process talks to, so its DCB is read with its own ``dcb``."""
    return KernelDcb() if getattr(sysroot, "is_host", False) else None
