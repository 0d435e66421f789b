"""tests/compat/smoke.py's verdict on a step: the compat tier's smoke must be able to fail."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "compat"))
import smoke  # noqa: E402 pylint: disable=wrong-import-position

RECAP = """PLAY RECAP *********
c1                         : ok=120  changed=%d    unreachable=%d    failed=%d    skipped=40   rescued=0    ignored=0
"""


def recap(changed=0, unreachable=0, failed=0):
    return dict((m.group(1), [int(m.group(i)) for i in range(2, 6)])
                for m in smoke.RECAP.finditer(RECAP % (changed, unreachable, failed)))


@pytest.mark.parametrize("step,rc,rec,unchanged,want", [
    ("provision", 0, recap(changed=30), False, None),
    ("idempotence", 0, recap(), True, None),
    ("idempotence", 0, recap(changed=1), True, "idempotence: c1 changed=1 on the second run (not idempotent)"),
    ("provision", 2, recap(failed=1), False, "provision: rc=2"),
    ("provision", 0, recap(failed=1), False, "provision: c1 unreachable=0 failed=1"),
    ("provision", 0, recap(unreachable=1), False, "provision: c1 unreachable=1 failed=0"),
    ("drift check", 0, {}, False, "drift check: no PLAY RECAP"),
])
def test_judge(step, rc, rec, unchanged, want):
    assert smoke.judge(step, rc, rec, unchanged) == want
