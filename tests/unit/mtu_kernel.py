# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for the kernel's netdev MTU handling, reached the way the collection reaches it: ``ip -d -j link show``
(iproute2's JSON keys), ``ip link set dev X mtu N``, ``ibv_devinfo`` (all devices, or ``-d DEV -i PORT``) and
``nmcli``.

Modelled on the kernel: ``dev_set_mtu`` refuses below ``min_mtu`` / above ``max_mtu`` (``Error: mtu greater than
device maximum.``) and does nothing for the MTU a device already has; ``bond_change_mtu`` sets every slave and
rolls back when one refuses; a bond's own ``max_mtu`` is ETH_MAX_MTU. A RoCE port's active MTU is
``min(iboe_get_mtu(netdev mtu), port max_mtu)``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

IB_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def iboe(mtu):
    fits = [m for m in sorted(IB_ENUM) if m <= mtu - 96]
    return fits[-1] if fits else 256


class Kernel(object):
    def __init__(self, links, ports=None, nm=None, fail_set=(), networkctl_rc=None):
        """links: {name: {"mtu", "max_mtu", "min_mtu", "kind", "master"}}; ports: {(ibdev, port): (netdev,
        max_mtu)}; nm: {"devices": {rail: uuid}, "files": {uuid: keyfile}, "mtu": {uuid: value}} or None (no
        nmcli; ``nmcli device reapply`` copies the profile's MTU into ``nm["applied"]`` {rail: value}); fail_set:
        netdevs whose MTU cannot be set (a driver that refuses); networkctl_rc: what ``networkctl reload`` exits
        with (None: networkctl is not installed)."""
        self.networkctl_rc = networkctl_rc
        self.links = {}
        for i, (name, spec) in enumerate(sorted(links.items())):
            link = {"ifindex": i + 2, "mtu": 1500, "min_mtu": 68, "max_mtu": 9978, "kind": None, "master": None,
                    "lower": None}
            if spec.get("kind") == "bond":
                link["max_mtu"] = 65535
            link.update(spec)
            self.links[name] = link
        self.ports = dict(ports or {})
        self.nm = nm
        self.fail_set = set(fail_set)
        self.calls = []

    # -- the kernel ----------------------------------------------------------------------------------
    def set_mtu(self, name, mtu):
        link = self.links[name]
        if mtu == link["mtu"]:
            return None
        if mtu > link["max_mtu"]:
            return "Error: mtu greater than device maximum."
        if mtu < link["min_mtu"]:
            return "Error: mtu less than device minimum."
        if link["kind"] == "vlan" and mtu > self.links[link["lower"]]["mtu"]:
            return "RTNETLINK answers: Numerical result out of range"
        if name in self.fail_set:
            return "RTNETLINK answers: Operation not supported"
        if link["kind"] == "bond":
            done = []
            for s in sorted(n for n, l in self.links.items() if l["master"] == name):
                old = self.links[s]["mtu"]
                err = self.set_mtu(s, mtu)
                if err:
                    for d, prev in done:
                        self.links[d]["mtu"] = prev
                    return err
                done.append((s, old))
        link["mtu"] = mtu
        return None

    # -- the commands ----------------------------------------------------------------------------------
    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[0] == "ip":
            return self.ip(argv[1:])
        if argv[0] == "ibv_devinfo":
            return self.devinfo(argv[1:])
        if argv[0] == "nmcli" and self.nm is not None:
            return self.nmcli(argv[1:])
        if argv == ["networkctl", "reload"] and self.networkctl_rc is not None:
            return self.networkctl_rc, "", "" if self.networkctl_rc == 0 else "Failed to reload network settings"
        return 127, "", "%s: not found" % argv[0]

    def ip(self, args):
        if args == ["-d", "-j", "link", "show"]:
            out = []
            for name, l in sorted(self.links.items(), key=lambda x: x[1]["ifindex"]):
                e = {"ifindex": l["ifindex"], "ifname": name, "flags": ["UP"], "mtu": l["mtu"],
                     "min_mtu": l["min_mtu"], "max_mtu": l["max_mtu"], "link_type": "ether"}
                if l["master"]:
                    e["master"] = l["master"]
                if l["lower"]:
                    e["link"] = l["lower"]
                info = {}
                if l["kind"]:
                    info["info_kind"] = l["kind"]
                if l["master"]:
                    info["info_slave_kind"] = "bond"
                if info:
                    e["linkinfo"] = info
                out.append(e)
            return 0, json.dumps(out), ""
        if len(args) == 6 and args[:3] == ["link", "set", "dev"] and args[4] == "mtu":
            if args[3] not in self.links:
                return 1, "", 'Cannot find device "%s"' % args[3]
            err = self.set_mtu(args[3], int(args[5]))
            return (2, "", err) if err else (0, "", "")
        return 1, "", "unexpected ip %s" % " ".join(args)

    def devinfo(self, args):
        """``ibv_devinfo -d DEV -i PORT``, or with no arguments every device and port, one hca_id block each."""
        if not args:
            return 0, "\n".join(self._devinfo_block(d, p) for d, p in sorted(self.ports)), ""
        dev, port = args[1], int(args[3])
        if (dev, port) not in self.ports:
            return 255, "", "IB device '%s' wasn't found" % dev
        return 0, self._devinfo_block(dev, port), ""

    def _devinfo_block(self, dev, port):
        netdev, max_mtu = self.ports[(dev, port)]
        active = min(iboe(self.links[netdev]["mtu"]), max_mtu)
        return ("hca_id:\t%s\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t%d\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
                "\t\t\tmax_mtu:\t\t%d (%d)\n\t\t\tactive_mtu:\t\t%d (%d)\n\t\t\tlink_layer:\t\tEthernet\n"
                % (dev, port, max_mtu, IB_ENUM[max_mtu], active, IB_ENUM[active]))

    def nmcli(self, args):
        nm = self.nm
        if args[:4] == ["-t", "-g", "GENERAL.CON-UUID", "device"]:
            return 0, nm["devices"].get(args[5], "") + "\n", ""
        if args == ["-t", "-f", "UUID,FILENAME", "connection", "show"]:
            return 0, "".join("%s:%s\n" % (u, f.replace(":", "\\:")) for u, f in sorted(nm["files"].items())), ""
        if args[:2] == ["-g", "802-3-ethernet.mtu"] and args[2:4] == ["connection", "show"]:
            return 0, nm["mtu"].get(args[5], "auto") + "\n", ""
        if args[:3] == ["connection", "modify", "uuid"] and args[4] == "802-3-ethernet.mtu":
            nm["mtu"][args[3]] = args[5]
            return 0, "", ""
        if args[:2] == ["device", "reapply"] and args[2] in nm["devices"]:
            nm.setdefault("applied", {})[args[2]] = nm["mtu"].get(nm["devices"][args[2]], "auto")
            return 0, "", ""
        return 1, "", "unexpected nmcli %s" % " ".join(args)
