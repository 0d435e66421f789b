# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the emulators share: reading one attribute file of the node's sysroot."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def read_attr(path, default=None):
    """The file's text without surrounding white space (a sysfs attribute), or ``default`` when it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except (IOError, OSError):
        return default
