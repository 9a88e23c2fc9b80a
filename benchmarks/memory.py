"""Peak memory of one attention call, measured in a fresh process.

Method (printed with the results): a new Python process imports torch, sets the same thread
count, runs the path once on small inputs (so that library start-up buffers are not counted),
allocates the inputs, then resets the kernel's high-water mark of its resident memory (writing
``5`` to ``/proc/self/clear_refs``), runs the call once and reads ``VmHWM`` from
``/proc/self/status``. The extra peak is that high-water mark minus the resident memory just
before the call: every byte the call touched, whoever allocated it (PyTorch, MKL, oneDNN).

The process starts with ``MALLOC_MMAP_THRESHOLD_=65536``: glibc then gives every block of
64 KiB or more its own mapping and returns it on free, instead of keeping freed blocks in its heap
where they would hide later allocations from the resident-memory count. Where ``/proc`` is
missing the fallback is ``getrusage``'s ``ru_maxrss`` (peak since the process started) minus its
value before the call.

Run as a child: ``python -m benchmarks.memory PATH N H L S D DTYPE [BLOCK_SIZE] [--causal]``; it
prints one line of JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch

from .paths import PATHS, attention_path, qkv

METHOD = (
    "peak resident memory of a fresh process during one call (VmHWM after a reset through "
    "/proc/self/clear_refs) minus its resident memory just before the call, inputs already "
    "allocated; glibc mmap threshold fixed at 64 KiB so freed blocks leave the process"
)
ROOT = Path(__file__).resolve().parent.parent


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def _maxrss_bytes() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes; Linux: KiB


def _measure(fn, args) -> tuple[int, str]:
    """Run ``fn(*args)`` once; return its extra peak resident bytes and how they were read."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident size
    except OSError:  # no /proc: the peak since the process started
        before = _maxrss_bytes()
        fn(*args)
        return _maxrss_bytes() - before, "ru_maxrss"
    before = _status_bytes("VmRSS")
    fn(*args)
    return _status_bytes("VmHWM") - before, "VmHWM"


def child(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    parser.add_argument("path", choices=PATHS)
    for dim in "NHLSD":
        parser.add_argument(dim, type=int)
    parser.add_argument("dtype", choices=["float32", "float64", "bfloat16"])
    parser.add_argument("block_size", type=int, nargs="?")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--threads", type=int)
    a = parser.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    fn = attention_path(a.path, causal=a.causal, block_size=a.block_size)
    with torch.inference_mode():
        fn(*qkv(a.N, a.H, 64, 64, a.D, dtype=dtype))  # start-up buffers are not the case's
        inputs = qkv(a.N, a.H, a.L, a.S, a.D, dtype=dtype)
        extra, how = _measure(fn, inputs)
    return {"extra_bytes": extra, "how": how}


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
) -> int:
    """Extra peak resident bytes of one call of ``path``, measured in a fresh process."""
    cmd = [sys.executable, "-m", "benchmarks.memory", path, *map(str, (N, H, L, S, D)), dtype]
    cmd += [str(block_size)] if block_size else []
    cmd += ["--causal"] if causal else []
    cmd += ["--threads", str(torch.get_num_threads())]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["extra_bytes"]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1:])))
