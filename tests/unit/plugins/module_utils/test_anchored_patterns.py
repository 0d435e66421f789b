# -*- coding: utf-8 -*-
"""Validation patterns end at the end of the string (\\Z), never at a trailing newline ($ lets "x\\n" through)."""
from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.vendor_nfs import common as kmod_common
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.nccl import manage as nccl
from ansible_collections.gpufabric.node.plugins.module_utils.discovery import pci
from ansible_collections.gpufabric.node.plugins.module_utils.report import prom
from ansible_collections.gpufabric.node.plugins.module_utils.concerns import boot_record

__metaclass__ = type


@pytest.mark.parametrize("pattern,good", [
    (kmod_common._KVER_RE, "6.1.0-57-amd64"),
    (kmod_common._VERSION_RE, "4.0.35-gf1"),
    (kmod_common._SHA256_RE, "0" * 64),
    (kmod_common.MODULE_NAME_RE, "rpcrdma"),
    (nccl._VAR, "NCCL_DEBUG"),
    (boot_record._IBDEV_RE, "mlx5_0"),
    (pci._BDF_RE, "0000:17:00.0"),
    (prom._METRIC_NAME, "gpufabric_concern_status"),
])
def test_a_trailing_newline_never_matches(pattern, good):
    assert pattern.match(good)
    assert not pattern.match(good + "\n")
