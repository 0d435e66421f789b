# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The integration tier's files, longest first.

`make integration` runs pytest-xdist with ``--dist loadfile``: a file's tests stay on one worker (their simulated
fleet is a module fixture), and each free worker takes the next file of the queue. xdist's default queue puts the
files with the most tests first, which put the longest ones last: test_check_equivalence_sim (2 tests, about 8
minutes on a loaded CI machine) and test_mtu_sim (1 test, 3 minutes) could run alone at the end while the other
worker sat idle. The Makefile turns that off (``--no-loadscope-reorder``) and this hook orders the files longest
first (LPT), so the short ones fill the other worker around the long ones. The ranks are the files' test time in the
last timed CI run (docs/benchmarks.md); a file not listed runs after them, in its usual order. Tests inside a file
keep their order.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# seconds of test time per file, clean-clone `.ci/run` of 2026-12-03 (ci-12), minus the runs removed since
LONGEST_FIRST = {
    "test_kernel_upgrade_k8s.py": 900,
    "test_check_equivalence_sim.py": 510,
    "test_os_profiles_sim.py": 310,
    "test_gds_cluster_policy.py": 220,
    "test_evidence_timer_sim.py": 170,
    "test_mtu_sim.py": 170,
    "test_fabric_sim.py": 140,
    "test_concerns_sim.py": 130,
    "test_fabric_health_sim.py": 90,
    "test_fabric_acceptance_sim.py": 70,
    "test_kernel_upgrade_canary_sim.py": 70,
}


def pytest_collection_modifyitems(items):
    rank = dict((name, n) for n, name in enumerate(sorted(LONGEST_FIRST, key=lambda f: -LONGEST_FIRST[f])))
    order = dict((id(item), n) for n, item in enumerate(items))
    items.sort(key=lambda item: (rank.get(os.path.basename(item.nodeid.split("::", 1)[0]), len(rank)), order[id(item)]))
