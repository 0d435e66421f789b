# -*- coding: utf-8 -*-
"""Lay out a real host's snapshot (tests/device/host_snapshot.py) as a sysroot tree for tests."""
from __future__ import absolute_import, division, print_function

import binascii
import json
import os

__metaclass__ = type

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hosts")


def load(name_or_path):
    path = name_or_path if os.sep in name_or_path else os.path.join(FIXTURES, name_or_path + ".json")
    with open(path) as f:
        return json.load(f)


def materialize(snap, root):
    """Create every recorded directory, file and link below root; returns root."""
    if isinstance(snap, str):
        snap = load(snap)
    entries = snap["entries"]
    for path in sorted(p for p, e in entries.items() if e["type"] == "dir"):
        os.makedirs(root + path, exist_ok=True)
    for path, e in sorted(entries.items()):
        dest = root + path
        if e["type"] == "dir":
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if e["type"] == "link":
            if os.path.lexists(dest):
                os.unlink(dest)
            os.symlink(e["target"], dest)
        elif e["type"] == "hex":
            with open(dest, "wb") as f:
                f.write(binascii.unhexlify(e["data"]))
        else:
            with open(dest, "w") as f:
                f.write(e["data"])
    for d, names in (snap.get("listing") or {}).items():
        os.makedirs(root + d, exist_ok=True)
    return root
