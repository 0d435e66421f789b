# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``performance`` concern's spec: whether the node's data paths are as fast as its profile's baseline and on
the intended path. Judging it moves data (``validate.yml``'s suite, judged on the controller by
``validate/judge.py``), which the read-only check cannot do: it reports the status ``validate.yml`` recorded on the
node, with its age (``record.py``), and not_checked "run validate.yml" without one.

``recorded(sysroot)``: whether the node holds a record, so the one-call check reports the concern without being
asked for it (``node_check.evaluate``). No role runs it (``concern_model.CONCERNS``: role None): a drifted
performance is not something a role corrects. Plain Python, no Ansible imports (the evidence timer runs it on the
node). Private to the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils.concerns.performance import record

NAME = "performance"
KEYS = ()


def recorded(sysroot):
    return sysroot.read_raw(record.RECORD_FILE) is not None


def evaluate(ctx):
    return {NAME: record.from_node(ctx.sysroot)}
