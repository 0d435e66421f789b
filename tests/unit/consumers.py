# -*- coding: utf-8 -*-
"""Helpers of the test_consumers_*.py tests: each generated file is read by the program that reads it on a node.

A consumer that is missing skips its tests with the reason, except where the environment variable ``CI`` is set:
there the packages of tests/lab/apt-packages.txt are installed, so a missing one fails instead of hiding a check.
"""
from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess

import pytest

__metaclass__ = type

# Debian's unit directory (/lib is a link to /usr/lib on bookworm); copied into each private root so that the
# targets and services the collection's units name (network-online.target, remote-fs.target ...) exist there
HOST_UNITS = "/usr/lib/systemd/system"


def unavailable(reason):
    """Skip with ``reason``, or fail where CI is set (the consumer is installed there by tests/lab/sysdeps.sh)."""
    if os.environ.get("CI"):
        pytest.fail("%s (CI is set: tests/lab/apt-packages.txt must install it)" % reason)
    pytest.skip(reason)


def need(*programs):
    """Absolute paths of ``programs``; unavailable() when one is missing."""
    out = []
    for p in programs:
        path = p if os.path.isabs(p) and os.access(p, os.X_OK) else shutil.which(p, path=os.environ.get(
            "PATH", "") + ":/usr/sbin:/sbin:/usr/lib/systemd:/lib/systemd")
        if not path:
            unavailable("%s is not installed" % p)
        out.append(path)
    return out


def need_root(what):
    if os.geteuid() != 0:
        unavailable("%s needs root (a private mount or network namespace)" % what)


def run(argv, **kw):
    """(rc, stdout, stderr) of argv, never raising on a non-zero exit; 60 s at most."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60, check=False, **kw)
    return p.returncode, p.stdout, p.stderr


def write(root, path, content, mode=0o644):
    real = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "w") as f:
        f.write(content)
    os.chmod(real, mode)
    return real


def systemd_root(root):
    """A private root for ``systemd-analyze verify --root``: the host's unit files, /lib and /bin as on Debian."""
    root = str(root)
    os.makedirs(os.path.join(root, "usr/lib/systemd"), exist_ok=True)
    shutil.copytree(HOST_UNITS, os.path.join(root, "usr/lib/systemd/system"), symlinks=True)
    for link, target in (("lib", "usr/lib"), ("bin", "usr/bin"), ("sbin", "usr/sbin")):
        os.symlink(target, os.path.join(root, link))
    os.makedirs(os.path.join(root, "etc/systemd/system"), exist_ok=True)
    return root


def verify_units(root, units):
    """``systemd-analyze verify --man=no UNIT`` for each unit of the private ``root``: (highest rc, diagnostics).

    verify exits 0 on a setting it ignores ("Unknown key", "Failed to parse ..., ignoring"), so a unit is
    accepted only with rc 0 and no diagnostic at all; the man pages of Documentation= are not the node's
    business (--man=no). A unit is read from the root by name (``--root``: ExecStart= programs are looked up
    there), except a name with ':' (``data-vast\\x40ai:1.mount``): verify reads ``FILE:NAME`` as "FILE under the
    name NAME", and with --root it silently checks nothing of that form, so such a unit is given as a colon-free
    copy of its file under its own name, without --root (a mount unit runs no program of the root)."""
    analyze, = need("systemd-analyze")
    worst, diags = 0, []
    for unit in units:
        if ":" in unit:
            path = os.path.join(str(root), "etc/systemd/system", unit)
            copy = os.path.join(str(root), "verify-copy" + os.path.splitext(unit)[1])
            shutil.copyfile(path, copy)
            argv = [analyze, "verify", "--man=no", "%s:%s" % (copy, unit)]
        else:
            argv = [analyze, "verify", "--root=%s" % root, "--man=no", unit]
        rc, out, err = run(argv)
        worst = max(worst, rc)
        diags.append((out + err).strip())
    return worst, "\n".join(d for d in diags if d)
