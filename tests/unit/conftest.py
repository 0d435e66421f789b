# -*- coding: utf-8 -*-
"""Fixtures shared by the unit tests."""
from __future__ import absolute_import, division, print_function

import pytest

__metaclass__ = type


@pytest.fixture
def nvfs_lifetime(monkeypatch):
    """nvidia-fs's modules file lists storage modules only while a dev/nvidia-fs* of the tree is held open
    (nvfs_kernel.py); returns the helper module (``load_driver``)."""
    import nvfs_kernel
    nvfs_kernel.install(monkeypatch)
    return nvfs_kernel
