# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The performance concern in the one-call check: not_checked "run validate.yml" without a record, the recorded
status with its age with one, and a record that does not follow its schema never taken for a status."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as C
from ansible_collections.gpufabric.node.plugins.module_utils.check import node_check
from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import record, spec
from ansible_collections.gpufabric.node.plugins.module_utils.host.sysroot import Sysroot

T0 = 1764583200.0   # 2025-12-01T10:00:00Z
DRIFTED = C.status(C.DRIFT, "nccl.configured.busbw 26.88 GB/s is 30 % below the fleet median 38.40 GB/s",
                   [{"concern": "performance", "object": "gpu-a01", "key": "nccl.configured.busbw",
                     "current": 26.88e9, "desired": ">= 34.56 GB/s"}])


class Ctx(object):
    def __init__(self, sysroot):
        self.sysroot = sysroot


def _write(root, text):
    sr = Sysroot(str(root))
    sr.makedirs("/var/lib/gpufabric")
    sr.write_file_atomic(record.RECORD_FILE, text)
    return sr


@pytest.mark.parametrize("text, now, want, words", [
    (None, T0, C.NOT_CHECKED, ["moves no data: run validate.yml"]),
    (json.dumps(record.document(DRIFTED, T0, "0123456789abcdef")), T0 + 2 * 3600 + 300, C.DRIFT,
     ["26.88 GB/s is 30 % below", "judged by validate.yml 2 h 5 min ago (2025-12-01T10:00:00Z)"]),
    (json.dumps(record.document(C.status(C.OK), T0)), T0 + 3 * 86400, C.OK, ["3 d 0 h ago"]),
    (json.dumps(record.document(DRIFTED, T0)), T0 - 60, C.DRIFT, ["later than this node's clock"]),
    ("{not json", T0, C.NOT_CHECKED, ["run validate.yml", "is not JSON"]),
    (json.dumps({"schema": "other", "time": T0, "status": "ok"}), T0, C.NOT_CHECKED, ["is not a"]),
    (json.dumps(dict(record.document(DRIFTED, T0), status="great")), T0, C.NOT_CHECKED, ["status 'great'"]),
])
def test_status_from_the_record(tmp_path, monkeypatch, text, now, want, words):
    sr = _write(tmp_path, text) if text is not None else Sysroot(str(tmp_path))
    monkeypatch.setattr(record.time, "time", lambda: now)
    got = spec.evaluate(Ctx(sr))["performance"]
    assert got["status"] == want
    for w in words:
        assert w in got["reason"]
    if want == C.DRIFT:
        assert got["items"] == DRIFTED["items"]
    assert node_check.recorded(sr) == (("performance",) if text is not None else ())


def test_no_role_runs_it():
    """A drifted performance is not something a role corrects: it has no role, fix mode runs none for it, and the
    concern list's role mapping is unchanged."""
    from ansible_collections.gpufabric.node.plugins.module_utils.check import results
    assert None not in C.roles() and C.of_role(None) == ["performance"]
    assert "performance" not in C.CORE
    assert results.fix_roles({"concerns": {"performance": DRIFTED, "dcb": C.status(C.DRIFT, "pfc")}}) == ["roce_qos"]
