# -*- coding: utf-8 -*-
"""Every test tier imports the collection as ansible_collections.gpufabric.node (through the .build link) and the
simulator as gpufabric_sim; unit helpers (modrunner) and integration helpers (fleet) are importable by name."""
from __future__ import absolute_import, division, print_function

import os
import sys

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
BUILD = os.path.join(REPO, ".build")
LINK = os.path.join(BUILD, "ansible_collections", "gpufabric", "node")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)
for p in (BUILD, os.path.join(HERE, "lab"), os.path.join(HERE, "unit"), os.path.join(HERE, "integration")):
    if p not in sys.path:
        sys.path.insert(0, p)
