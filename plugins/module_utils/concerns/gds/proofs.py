# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status documents (module_utils/concern_model.py) of the two proofs: ``gds`` from ``gds_verify`` and
``vendor_client`` from ``vendor_nfs_proof``.

``gds_status(result, items, check_mode)``: ``ok`` when the counted transfer proved GDS; ``drift`` when it did not or a
precondition fails (``items``: the failed preconditions and the verdict); in check mode, where no transfer is made,
``not_checked`` when every precondition holds.
``vendor_client_status(result, items)``: ``ok`` when every check of the stage held, else ``drift`` with the problems.
``failed(concern, message)``: ``error`` when the proof could not be made (bad input, unreadable state).

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufabric.node.plugins.module_utils import concern_model as concerns


def gds_status(result, items, check_mode):
    if result.get("gds_active"):
        return concerns.status(concerns.OK, "a %d MiB test transfer with compat mode off moved through nvidia-fs "
                               "and its data matched" % (result["size"] >> 20))
    failed = [p for p in result.get("preconditions") or [] if p["status"] == "fail"]
    if check_mode:
        if not failed:
            return concerns.status(concerns.NOT_CHECKED, "check mode: every precondition holds, but no test transfer "
                                   "was made, so GDS is not proven")
        return concerns.status(concerns.DRIFT, "check mode: %d precondition(s) fail: %s" % (
            len(failed), "; ".join("%s: %s" % (p["name"], p["reason"]) for p in failed)), items)
    return concerns.status(concerns.DRIFT, "GDS is not active: %s" % " ".join(result.get("reasons") or
                                                                              ["the test transfer proved nothing."]),
                           items)


def vendor_client_status(result, items):
    stage = "installed for %s" % result["kernel_release"] if result["stage"] == "installed" else \
        "running on %s" % result["kernel_release"]
    if result.get("proven"):
        return concerns.status(concerns.OK, "the vendor NFS client is proven %s" % stage)
    return concerns.status(concerns.DRIFT, "the vendor NFS client is not proven %s: %s" % (
        stage, "; ".join(result.get("problems") or ["no check held"])), items)


def failed(concern, message):
    return concerns.error(concern, message)
