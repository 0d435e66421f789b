# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``udevadm`` of the simulated node: the rules files as udev orders them, the RUN commands of an RDMA device's
event (bootsim's rule parser), and the verbs control (--reload), trigger (runs RUN of matching rules for
infiniband devices with --action, default "change") and settle.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import subprocess
import sys

from gpufabric_sim import bootsim
from gpufabric_sim.units import journal, sysroot


RULE_DIRS = ("etc/udev/rules.d", "run/udev/rules.d", "usr/lib/udev/rules.d", "lib/udev/rules.d")


def rules_files(root, pattern="*.rules"):
    chosen = {}
    for d in RULE_DIRS:
        for p in glob.glob(os.path.join(root, d, pattern)):
            chosen.setdefault(os.path.basename(p), p)
    return [chosen[k] for k in sorted(chosen)]


def infiniband_event(root, ibdev, action):
    """The udev event dict of an RDMA device (``SUBSYSTEM=="infiniband"``)."""
    cls = os.path.join(root, "sys", "class", "infiniband", ibdev)
    real = os.path.realpath(cls)
    devpath = "/" + os.path.relpath(real, os.path.join(root, "sys")) if real.startswith(root) else \
        "/class/infiniband/" + ibdev
    return {"ACTION": action, "SUBSYSTEM": "infiniband", "KERNEL": ibdev, "DEVPATH": devpath, "ENV": {}}


def udev_commands(root, event, pattern="*.rules"):
    """argv lists that udev would RUN for an event, from the node's rules files."""
    cls = os.path.join(root, "sys", "class", "infiniband", event["KERNEL"])

    def attr(name):
        try:
            with open(os.path.join(cls, name)) as f:
                return f.read()
        except OSError:
            return None

    rules = []
    for path in rules_files(root, pattern):
        with open(path) as f:
            rules.extend(bootsim.parse_udev_rules(f.read()))
    cmds = bootsim.udev_run_commands(rules, event, attr)
    return [[bootsim.resolve_executable(root, argv[0])] + argv[1:] for argv in cmds if argv]


def udevadm_main(argv=None):
    argv = list(sys.argv if argv is None else argv)[1:]
    root = sysroot()
    if not argv:
        sys.stderr.write("udevadm (gpufabric-sim): a command is required\n")
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "control":
        if any(a in ("--reload", "-R", "--reload-rules") for a in args):
            journal(root, "udevadm control --reload")
        return 0
    if cmd == "settle":
        return 0
    if cmd == "trigger":
        action = "change"
        subsystems = []
        names = []
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("--action="):
                action = a.split("=", 1)[1]
            elif a in ("-c", "--action"):
                i += 1
                action = args[i]
            elif a.startswith("--subsystem-match="):
                subsystems.append(a.split("=", 1)[1])
            elif a in ("-s", "--subsystem-match"):
                i += 1
                subsystems.append(args[i])
            elif a.startswith("--sysname-match="):
                names.append(a.split("=", 1)[1])
            elif a in ("-y", "--sysname-match"):
                i += 1
                names.append(args[i])
            i += 1
        journal(root, "udevadm trigger %s" % " ".join(args))
        if subsystems and "infiniband" not in subsystems:
            return 0
        ibdevs = sorted(os.listdir(os.path.join(root, "sys", "class", "infiniband"))) \
            if os.path.isdir(os.path.join(root, "sys", "class", "infiniband")) else []
        for ibdev in ibdevs:
            if names and not any(bootsim._udev_glob(n, ibdev) for n in names):
                continue
            for cmd_argv in udev_commands(root, infiniband_event(root, ibdev, action)):
                journal(root, "udev RUN %s" % " ".join(cmd_argv))
                subprocess.call(cmd_argv, cwd="/", stdin=subprocess.DEVNULL)
        return 0
    sys.stderr.write("udevadm (gpufabric-sim): command %r is not emulated\n" % cmd)
    return 2
