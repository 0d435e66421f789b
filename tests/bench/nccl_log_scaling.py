# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the NCCL log parser's time grows with hostile input (issue 21 item 16): not a test, a measurement.

usage: PYTHONPATH=.build python tests/bench/nccl_log_scaling.py
Parses logs of 1, 4 and 16 MiB made of the lines that were quadratic before (a channel line and a network line
padded with spaces; one single line of the whole size; many NCCL-sized lines) and prints the seconds per size and
the ratio of each size's time to the 1 MiB time. A linear parser gives ratios near 4 and 16.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.gpufabric.node.plugins.module_utils.validate import nccl_log

MIB = 1024 * 1024
CHANNEL = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
NETWORK = "h:1:1 [0] NCCL INFO Using network IB"


def shapes(size):
    pad = 1000 - len(CHANNEL)
    return {
        "one_line_of_spaces": CHANNEL + " " * (size - len(CHANNEL) - 1) + "x",
        "channel_lines_1000_chars": "\n".join([CHANNEL + " " * pad + "x"] * (size // 1002)),
        "network_lines_1000_chars": "\n".join([NETWORK + " " * (1000 - len(NETWORK)) + "x"] * (size // 1002)),
    }


def main():
    out = {}
    for size in (1, 4, 16):
        for name, text in shapes(size * MIB).items():
            t0 = time.perf_counter()
            nccl_log.parse(text)
            out.setdefault(name, {})["%d_MiB_s" % size] = round(time.perf_counter() - t0, 4)
    for name, row in out.items():
        base = max(row["1_MiB_s"], 1e-6)
        row["ratio_4_to_1"] = round(row["4_MiB_s"] / base, 1)
        row["ratio_16_to_1"] = round(row["16_MiB_s"] / base, 1)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
