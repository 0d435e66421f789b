# -*- coding: utf-8 -*-
"""pytest plugin `make mutation` loads (-p): the judges' hypothesis properties replay a fixed, smaller set of
examples for every mutant, so a mutant's verdict is the same on every run and the run stays short."""
from __future__ import absolute_import, division, print_function

from hypothesis import HealthCheck, settings

__metaclass__ = type

settings.register_profile("mutation", max_examples=30, derandomize=True, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("mutation")
