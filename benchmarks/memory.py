"""Peak memory of one attention call, measured in a fresh process.

Method (printed with the results): a new Python process imports torch, sets the same thread
count, runs the path once on small inputs (so that library start-up buffers are not counted),
allocates the inputs (and, for a training step, the output's gradient), then measures one call
with :func:`attention.measure.peak_memory`: the kernel's high-water mark of the process's
resident memory (``VmHWM``, reset through ``/proc/self/clear_refs``) during the call, minus its
resident memory just before. That is every byte the call touched, whoever allocated it
(PyTorch, MKL, oneDNN). A training step is the forward and the backward pass to the queries,
keys and values: its peak holds what autograd saved, the recomputation of the backward, and the
three gradients it returns.

A fresh process per case, because a process remembers: the allocator's free lists and the
libraries' buffers of an earlier case would hide part of the next one's peak. It starts with
``MALLOC_MMAP_THRESHOLD_=65536``: glibc then gives every block of 64 KiB or more its own mapping
and returns it on free, instead of keeping freed blocks in its heap where they would hide later
allocations from the resident-memory count. Where ``/proc`` is missing nothing is measured.

Run as a child: ``python -m benchmarks.memory PATH N H L S D DTYPE [BLOCK_SIZE] [--causal]
[--backward]``; it prints one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from attention.measure import peak_memory

from .paths import PATHS, attention_path, qkv
from .workload import attention_step

METHOD = (
    "peak resident memory of a fresh process during one call (attention.measure.peak_memory: "
    "VmHWM after a reset through /proc/self/clear_refs) minus its resident memory just before "
    "the call, inputs already allocated; glibc mmap threshold fixed at 64 KiB so freed blocks "
    "leave the process"
)
ROOT = Path(__file__).resolve().parent.parent


def child(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    parser.add_argument("path", choices=PATHS)
    for dim in "NHLSD":
        parser.add_argument(dim, type=int)
    parser.add_argument("dtype", choices=["float32", "float64", "bfloat16"])
    parser.add_argument("block_size", type=int, nargs="?")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--backward", action="store_true", help="forward and backward pass")
    parser.add_argument("--threads", type=int)
    a = parser.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    fn = attention_path(a.path, causal=a.causal, block_size=a.block_size)
    mode = "training" if a.backward else "inference"
    attention_step(fn, *qkv(a.N, a.H, 64, 64, a.D, dtype=dtype), mode)()  # start-up buffers
    step = attention_step(fn, *qkv(a.N, a.H, a.L, a.S, a.D, dtype=dtype), mode)
    return {"extra_bytes": peak_memory(step)}


def peak_extra_bytes(
    path: str,
    N: int,
    H: int,
    L: int,
    S: int,
    D: int,
    dtype: str = "float32",
    *,
    block_size: int | None = None,
    causal: bool = False,
    backward: bool = False,
) -> int | None:
    """Extra peak resident bytes of one call of ``path`` (with ``backward=True``: one forward
    and backward pass), measured in a fresh process; ``None`` where it cannot be measured."""
    cmd = [sys.executable, "-m", "benchmarks.memory", path, *map(str, (N, H, L, S, D)), dtype]
    cmd += [str(block_size)] if block_size else []
    cmd += ["--causal"] if causal else []
    cmd += ["--backward"] if backward else []
    cmd += ["--threads", str(torch.get_num_threads())]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["extra_bytes"]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1:])))
