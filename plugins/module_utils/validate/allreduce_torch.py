# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's all-reduce program over ``torch.distributed`` (NCCL backend), for nodes without nccl-tests.

``fabric_validate`` writes this file into a private temporary directory and runs it as a separate process with the
node's Python (the one that has PyTorch), so a crash inside CUDA or NCCL cannot take the module down and NCCL's
``NCCL_DEBUG=INFO`` lines land on the captured output. Only the standard library is imported at the top: the module
that ships this text imports it without PyTorch.

Usage::

    python allreduce_torch.py --gpus N --size BYTES [--iters I] [--warmup W] --store DIR

One process per GPU (``torch.multiprocessing.spawn`` for N > 1), rank r on ``cuda:r``, a file store under DIR. Each
rank first checks the reduction (rank r contributes r + 1; every element must equal N(N+1)/2), then times ``iters``
all-reduces of ``size`` bytes of float32 after ``warmup`` untimed ones. Rank 0 prints one line::

    GPUFABRIC_ALLREDUCE {"ranks": N, "size": B, "iters": I, "time_us": t, "algbw": a, "busbw": b, "correct": true,
                         "torch": "2.11.0", "nccl": "2.28.9", "error": null}

``time_us`` is the slowest rank's mean time of one all-reduce; ``algbw`` is size / time in bytes per second and
``busbw`` is ``algbw * 2 (N - 1) / N``, nccl-tests' bus bandwidth of an all-reduce (src/all_reduce.cu
``AllReduceGetBw``): 0 for one rank, which moves nothing between GPUs. Exit status 0 when the reduction was
correct, 1 otherwise (the line's ``error`` says why), 2 on bad arguments.

This file is private to the collection: no stable API is promised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys
import time

MARK = "GPUFABRIC_ALLREDUCE "


def emit(doc):
    sys.stdout.write(MARK + json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def bus_factor(ranks):
    """nccl-tests' all-reduce bus bandwidth factor, 2 (n - 1) / n."""
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


def _worker(rank, args):  # pragma: no cover - runs on a GPU node only
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="file://%s" % os.path.join(args.store, "store"), rank=rank,
                            world_size=args.gpus)
    try:
        n = args.size // 4
        check = torch.full((max(n // 16, 1),), float(rank + 1), dtype=torch.float32, device="cuda:%d" % rank)
        dist.all_reduce(check)
        want = args.gpus * (args.gpus + 1) / 2.0
        correct = bool(torch.all(check == want).item())
        buf = torch.ones((n,), dtype=torch.float32, device="cuda:%d" % rank)
        for _i in range(args.warmup):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.time()
        for _i in range(args.iters):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        elapsed = torch.tensor([time.time() - t0], dtype=torch.float64, device="cuda:%d" % rank)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if rank == 0:
            per = float(elapsed.item()) / args.iters
            algbw = (n * 4) / per if per > 0 else None
            nccl = getattr(torch.cuda, "nccl", None)
            version = ".".join(str(v) for v in nccl.version()) if nccl is not None else None
            emit({"ranks": args.gpus, "size": n * 4, "iters": args.iters, "time_us": per * 1e6, "algbw": algbw,
                  "busbw": algbw * bus_factor(args.gpus) if algbw is not None else None, "correct": correct,
                  "torch": torch.__version__, "nccl": version,
                  "error": None if correct else "the all-reduce result is wrong (expected %g)" % want})
        if not correct:
            raise SystemExit(1)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description="single-node all-reduce through torch.distributed")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--store", required=True)
    args = ap.parse_args(argv)
    if args.gpus < 1 or args.size < 64 or args.iters < 1 or args.warmup < 0 or not os.path.isdir(args.store):
        emit({"error": "bad arguments: --gpus >= 1, --size >= 64, --iters >= 1, --store an existing directory"})
        return 2
    try:
        import torch
        if not torch.cuda.is_available() or torch.cuda.device_count() < args.gpus:
            emit({"error": "CUDA sees %d GPU(s), %d asked" % (torch.cuda.device_count(), args.gpus)})
            return 1
        if args.gpus == 1:
            _worker(0, args)
        else:
            import torch.multiprocessing as mp
            mp.spawn(_worker, args=(args,), nprocs=args.gpus, join=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except Exception as e:  # noqa: BLE001 - the caller reads the reason from the line  # pylint: disable=broad-except
        emit({"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")})
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
