# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark callback: per task and host, the wall time from the worker's start to its result.

Enabled by the benchmark runner only (ANSIBLE_CALLBACKS_ENABLED=bench_timer, ANSIBLE_CALLBACK_PLUGINS=<this dir>).
Writes JSON to $BENCH_TIMER_OUT at the end of the run:
{"tasks": [{"task", "action", "host", "seconds", "status", "items"}], "wall_s"}.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: bench_timer
    type: aggregate
    short_description: per task and host durations for the benchmark runner
    description:
      - Records how long each task took on each host and writes them as JSON to $BENCH_TIMER_OUT.
    requirements:
      - enable in the callbacks_enabled setting
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._t0 = time.time()
        self._start = {}
        self._records = []

    def v2_runner_on_start(self, host, task):
        self._start[(host.get_name(), task._uuid)] = time.time()

    def _done(self, result, status):
        host = result._host.get_name()
        task = result._task
        t0 = self._start.pop((host, task._uuid), None)
        if t0 is None:
            return
        items = result._result.get("results")
        self._records.append({
            "task": task.get_name(), "action": task.action, "host": host,
            "seconds": round(time.time() - t0, 4), "status": status,
            "items": len(items) if isinstance(items, list) else None,
        })

    def v2_runner_on_ok(self, result):
        self._done(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._done(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._done(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        out = os.environ.get("BENCH_TIMER_OUT")
        if not out:
            return
        with open(out, "w") as f:
            json.dump({"tasks": self._records, "wall_s": round(time.time() - self._t0, 3)}, f)
