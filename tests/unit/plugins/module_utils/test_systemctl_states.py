# -*- coding: utf-8 -*-
"""files.systemctl_states: several units' unit file states with one ``systemctl is-enabled UNIT...``, and the units a
systemctl that stops at its first unknown unit did not answer for asked one by one."""
from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufabric.node.plugins.module_utils.host import files

__metaclass__ = type

A, T = "gpufabric-apply.service", "gpufabric-evidence.timer"


def fake(answers):
    """A systemctl: ``answers`` maps the argv tail (tuple of units) to (rc, stdout, stderr); calls are recorded."""
    calls = []

    def run(argv):
        assert argv[:2] == ["/usr/bin/systemctl", "is-enabled"]
        calls.append(tuple(argv[2:]))
        return answers[tuple(argv[2:])]
    return run, calls


CASES = [
    # systemd >= 249: one word per unit, also "not-found"
    ("both answered", {(A, T): (0, "enabled\nenabled\n", "")}, {A: "enabled", T: "enabled"}, [(A, T)]),
    ("not-found printed", {(A, T): (0, "enabled\nnot-found\n", "")}, {A: "enabled", T: "not-found"}, [(A, T)]),
    # before 249 systemctl stops at the first unit it cannot find, with an error on stderr
    ("stops at the second", {(A, T): (1, "masked\n", "Failed to get unit file state for %s: No such file" % T),
                             (T,): (1, "", "Failed to get unit file state for %s: No such file or directory" % T)},
     {A: "masked", T: "not-found"}, [(A, T), (T,)]),
    ("stops at the first", {(A, T): (1, "", "Failed to get unit file state for %s: No such file" % A),
                            (A,): (1, "", "Failed to get unit file state for %s: No such file or directory" % A),
                            (T,): (0, "disabled\n", "")},
     {A: "not-found", T: "disabled"}, [(A, T), (A,), (T,)]),
]


@pytest.mark.parametrize("answers,want,want_calls", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_states_of_several_units(answers, want, want_calls):
    run, calls = fake(answers)
    assert files.systemctl_states(run, "/usr/bin/systemctl", (A, T)) == want
    assert calls == want_calls


def test_a_failure_that_is_not_a_missing_unit_is_raised():
    run, _calls = fake({(A, T): (1, "", "Failed to connect to bus"), (A,): (1, "", "Failed to connect to bus")})
    with pytest.raises(files.PersistError, match="is-enabled gpufabric-apply.service failed"):
        files.systemctl_states(run, "/usr/bin/systemctl", (A, T))
