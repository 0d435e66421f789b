# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcb dcbx show|set`` for the dcb emulator (dcb.py dispatches here), after iproute2 dcb/dcb_dcbx.c.

Output: one word per set DCB_CAP_DCBX bit, lowest first, each followed by a space, then a newline (``host ieee ``);
with ``-j`` every set bit is ``true`` under its name, ``lld-managed`` as ``lld_managed``. ``set`` ORs the words given
(abbreviations as iproute2's ``matches``), no word prints the help and exits 0, an unknown word prints
``What is "X"?`` and the help and exits 1.

The "kernel": ``st["dcbx"] = {"mode": "host" | "auto", "cap": int}``.

* ``mlx5_core`` (drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c): ``getdcbx`` returns ``cap``; driver init
  (and every reload, :func:`reload_caps`) sets CEE|IEEE, plus HOST when the firmware's DCBX mode is host.
  ``setdcbx`` refuses LLD_MANAGED and any mode without HOST (returns 1: dcb prints ``Attribute write: Unknown error
  -1``, exit 1); with HOST it switches the firmware to host mode and caches the mode as given.
  :func:`firmware_takes_over` models the NIC firmware's LLDP agent owning DCBX (``setdcbx(0)``, or mlxconfig
  LLDP_NB_DCBX plus a firmware reset): mode ``auto``, HOST cleared.
* ``other``: a driver whose ``setdcbx`` takes any mode (the caps read back as set), e.g. ``lld-managed cee``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

HOST, LLD, CEE, IEEE, STATIC = 0x01, 0x02, 0x04, 0x08, 0x10
FLAGS = ((HOST, "host", "host"), (LLD, "lld-managed", "lld_managed"), (CEE, "cee", "cee"), (IEEE, "ieee", "ieee"),
         (STATIC, "static", "static"))


def default_state(driver):
    if driver == "mlx5_core":
        return {"mode": "host", "cap": CEE | IEEE | HOST}
    return {"mode": "host", "cap": HOST | IEEE}


def reload_caps(st):
    """Driver (re)load: mlx5 recomputes the caps from the firmware's mode, which survives the reload."""
    d = st.setdefault("dcbx", default_state(st["driver"]))
    if st["driver"] == "mlx5_core":
        d["cap"] = CEE | IEEE | (HOST if d["mode"] == "host" else 0)
    return st


def firmware_takes_over(root, netdev, cap=None):
    """Drift as a switch or the firmware's LLDP agent makes it: mlx5 leaves host mode (``cee ieee``); another
    driver gets ``cap`` (default LLD_MANAGED|CEE)."""
    from gpufabric_sim.emulators import dcb
    st = dcb.state(root, netdev)
    d = st.setdefault("dcbx", default_state(st["driver"]))
    if st["driver"] == "mlx5_core":
        d["mode"] = "auto"
        d["cap"] = d["cap"] & ~HOST if cap is None else cap
    else:
        d["mode"] = "lld"
        d["cap"] = LLD | CEE if cap is None else cap
    dcb.write_state(root, netdev, st)
    return st


def _help_set(ctx):
    ctx.eprint("Usage: dcb dcbx set dev STRING\n"
               "           [ host | lld-managed ]\n"
               "           [ cee | ieee ] [ static ]\n"
               "\n")


def _help_show(ctx):
    ctx.eprint("Usage: dcb dcbx show dev STRING\n"
               "\n")


def _help(ctx):
    ctx.eprint("Usage: dcb dcbx help\n\n")
    _help_show(ctx)
    _help_set(ctx)


def _show(ctx, dev, args):
    from gpufabric_sim.emulators import dcb
    with dcb._Kernel(ctx, dev) as k:
        st = k.read()
        cap = (st.get("dcbx") or default_state(st["driver"]))["cap"]
    for word in args:
        if word == "help" or not dcb._matches(word, "help"):
            _help_show(ctx)
            return 0
        ctx.eprint('What is "%s"?\n' % word)
        _help_show(ctx)
        return 1
    out = ctx.out
    out.open_object()
    for bit, fp, key in FLAGS:
        if cap & bit:
            out.on_off("json", key, None, True)
            out.string("fp", None, "%s ", fp)
    out.nl()
    out.close_object()
    return 0


def _set(ctx, dev, args):
    from gpufabric_sim.emulators import dcb
    if not args:
        _help_set(ctx)
        return 0
    mode = 0
    for word in args:
        if not dcb._matches(word, "help"):
            _help_set(ctx)
            return 0
        for bit, fp, _key in FLAGS:
            if not dcb._matches(word, fp):
                mode |= bit
                break
        else:
            ctx.eprint('What is "%s"?\n' % word)
            _help_set(ctx)
            return 1
    with dcb._Kernel(ctx, dev) as k:
        st = k.write_begin()
        st["counters"]["dcbx_set_calls"] = st["counters"].get("dcbx_set_calls", 0) + 1
        k._injected("dcbx")
        d = st.setdefault("dcbx", default_state(st["driver"]))
        if k.mlx5:
            if mode & LLD or not mode & HOST:
                k.save()
                # setdcbx returned 1: the reply's DCB_ATTR_DCBX is 1, dcb sets errno = -1 and perror()s it
                ctx.eprint("Attribute write: Unknown error -1\n")
                raise dcb._Exit(1)
            d["mode"] = "host"
        else:
            d["mode"] = "host" if mode & HOST else "lld"
        d["cap"] = mode
        k.save()
    return 0


def cmd(ctx, args):
    from gpufabric_sim.emulators import dcb
    if not args or not dcb._matches(args[0], "help"):
        _help(ctx)
        return 0
    if not dcb._matches(args[0], "show"):
        return dcb._parse_dev(ctx, args[1:], _show, _help_show)
    if not dcb._matches(args[0], "set"):
        return dcb._parse_dev(ctx, args[1:], _set, _help_set)
    ctx.eprint('What is "%s"?\n' % args[0])
    _help(ctx)
    return 1
