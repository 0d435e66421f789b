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


def _hypothesis_profiles():
    """CI replays the same examples every run (derandomize): a property that fails there fails on every run and
    on the developer's machine with CI=true, never as a one-off. Locally the search stays random, to find more."""
    import os
    from hypothesis import settings
    settings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


_hypothesis_profiles()
