r"""The command ``python -m attention.distributed``: one strategy on several processes, checked.

Without ``torchrun`` it spawns ``--nproc`` local CPU processes (gloo, :func:`spawn`); under
``torchrun`` it joins the launcher's processes (NCCL on GPUs, gloo on CPUs). Every rank runs
:func:`~attention.distributed.cases.command_worker`; rank 0 prints the check against
single-device attention and, per rank, the time, the bytes sent next to :func:`bytes_formula`,
the extra peak memory and the forward FLOPs.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from .._checks import check_divisible
from .cases import STRATEGIES, command_worker
from .cost import bytes_formula
from .launch import spawn

#: The largest difference from single-device attention that passes the check. Both sides round
#: to the dtype, in a different order: float64 and float32 differ by a few ulps of sums over L
#: keys; bfloat16 (eps 2**-7) by one or two roundings of outputs of order 1, which 1e-4 (the
#: tolerance it used to get) failed every time.
TOLERANCES = {"float64": 1e-10, "float32": 1e-4, "bfloat16": 5e-2}


def _report(options: dict, results: list[dict], world_size: int, backend: str) -> int:
    """Print the check and the measurements; return the exit status."""
    o = options
    layout = "zigzag" if o["zigzag"] else "contiguous"
    print(
        f"{o['strategy']} attention, {'causal' if o['causal'] else 'not causal'}, {layout} layout: "
        f"N={o['batch']} H={o['heads']} L={o['seq_len']} D={o['head_dim']} {o['dtype']}, "
        f"{'forward and backward' if o['backward'] else 'forward'}, on {world_size} processes "
        f"({backend}, {o['device']}), torch {torch.__version__}"
    )
    status = 0
    errors = [r["error"] for r in results]
    if not o["check"]:
        print("check against single-device attention: skipped (--no-check)")
    elif any(e is None for e in errors):
        print("check against single-device attention: skipped (the whole sequence does not fit)")
    else:
        tolerance = TOLERANCES[o["dtype"]]
        ok = max(errors) < tolerance
        status = 0 if ok else 1
        print(
            f"check against single-device attention: largest difference {max(errors):.1e} "
            f"(tolerance {tolerance:.0e}): {'ok' if ok else 'FAILED'}"
        )
    MiB = 2**20
    print("rank  time (s)  sent (MiB)  formula (MiB)  peak memory (MiB)  forward GFLOP")
    for r in results:
        forward, backward = bytes_formula(o["strategy"], world_size, r["shard_bytes"])
        formula = forward + (backward if o["backward"] else 0)
        peak = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / MiB:.1f}"
        print(
            f"{r['rank']:>4}  {r['seconds']:8.3f}  {r['bytes'] / MiB:10.2f}  {formula / MiB:13.2f}"
            f"  {peak:>17}  {r['flops'] / 1e9:13.2f}"
        )
    return status


def main(argv: list[str] | None = None) -> int:
    """Run one strategy on local processes, or on the processes ``torchrun`` started."""
    parser = argparse.ArgumentParser(
        prog="python -m attention.distributed",
        description="Context-parallel attention on several processes, checked against "
        "single-device attention. Without torchrun it spawns --nproc local CPU processes (gloo); "
        "under torchrun it joins the launcher's processes (NCCL on GPUs, gloo on CPUs).",
    )
    parser.add_argument("--nproc", type=int, default=4, help="local processes (default: 4)")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="ring")
    parser.add_argument("--seq-len", type=int, default=8192, help="whole sequence length L")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--zigzag", action="store_true", help="the zigzag layout")
    parser.add_argument("--backward", action="store_true", help="time the backward pass too")
    parser.add_argument("--dtype", choices=["float32", "float64", "bfloat16"], default="float32")
    parser.add_argument("--no-check", dest="check", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the run")
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("nproc", "timeout")}
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            options["device"], backend = "cuda", "nccl"
        else:
            options["device"], backend = "cpu", "gloo"
        dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
        try:
            rank, world_size = dist.get_rank(), dist.get_world_size()
            _check_run(args, world_size)
            results = [None] * world_size
            dist.all_gather_object(results, command_worker(rank, world_size, options))
        finally:
            dist.destroy_process_group()
        return _report(options, results, world_size, backend) if rank == 0 else 0
    _check_run(args, args.nproc)
    options["device"] = "cpu"
    results = spawn(command_worker, options, nproc=args.nproc, timeout=args.timeout)
    return _report(options, results, args.nproc, "gloo")


def _check_run(args, world_size: int) -> None:
    parts = 2 * world_size if args.zigzag else world_size
    check_divisible(args.seq_len, "--seq-len", parts, "the number of chunks")
    if args.strategy == "ulysses":
        check_divisible(args.heads, "--heads", world_size, "the number of processes")


if __name__ == "__main__":
    sys.exit(main())
