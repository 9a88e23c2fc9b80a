"""The GPU suite: attention paths in bf16 and fp16 up to L = 16384, and the four modules.

Run on a machine with a CUDA GPU (one call, a few minutes)::

    python -m benchmarks --gpu                 # writes benchmarks/results/gpu-<date>.csv

What it measures, every figure from CUDA events after a warm-up
(:func:`attention.measure.time_it` on the GPU):

- ``matmul``: a square (8192, 8192) product in each dtype, the roof the other rows are read
  against (``frac_matmul``).
- ``attention``: for bf16 and fp16, head dims 64 and 128, causal or not, L = S from 512 to
  16384 with N * L = 16384 tokens and H * D = 2048 (so every row does comparable work), each
  path of :mod:`benchmarks.paths`: forward (``fwd``) and forward + backward (``fwd+bwd``, SDPA's
  backends only). TFLOP/s use FlashAttention-2's count: forward ``4 N H L S D``, halved when
  causal; forward + backward 3.5 times that. ``peak_extra_mib`` is
  :func:`attention.measure.peak_memory`: ``torch.cuda.max_memory_allocated`` during one call
  minus the memory allocated before it.
- ``module``: the CPU suite's four modules in bf16, inference and a training step.

A path that cannot run a case is recorded, not skipped silently: ``status`` is ``unsupported``
(no kernel for this dtype, head dim or device), ``oom``, or ``budget`` when the run's time budget
(``--budget-s``) was spent before it; the rest of the row is then empty. Paths run in order of
importance (torch's own kernels first, then ours, then the quadratic paths), so a short budget
drops the least useful rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from attention.measure import peak_memory, time_it

from .cpu import modules
from .paths import attention_path, qkv
from .report import timing_cells
from .workload import attention_flops, attention_step, matmul_case, mha_flops, module_step

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128)
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS, WIDTH = 16384, 2048  # N * L and H * D of every attention case
FORWARD_PATHS = ("sdpa", "flash", "efficient", "cudnn", "tiled", "math", "reference")
BACKWARD_PATHS = ("sdpa", "flash", "efficient", "cudnn", "math")
MODULE_SHAPES = [(4, 128, 512, 8), (4, 512, 512, 8), (2, 2048, 512, 8)]  # (N, L, E, H)
MATMUL_N = 8192
SUMMARY_COLUMNS = [
    ("suite", "suite"),
    ("case", "case"),
    ("impl", "path"),
    ("mode", "mode"),
    ("dtype", "dtype"),
    ("median_ms", "ms"),
    ("tflops", "TFLOP/s"),
    ("frac_matmul", "of matmul"),
    ("peak_extra_mib", "extra MiB"),
]

FIELDS = [
    "suite",
    "case",
    "impl",
    "mode",
    "dtype",
    *"NLSEHD",
    "causal",
    "status",
    "median_ms",
    "iqr_ms",
    "runs",
    "tflop",
    "tflops",
    "matmul_tflops",
    "frac_matmul",
    "peak_extra_mib",
]


def summarised(row: dict) -> bool:
    """Rows worth printing at the end of a run (the CSV has them all)."""
    if row["suite"] != "attention":
        return True
    return (row["impl"], row["mode"]) in {("sdpa", "fwd"), ("sdpa", "fwd+bwd"), ("tiled", "fwd")}


class Runner:
    """Times cases on one device, records their status, and keeps to the time budget."""

    def __init__(self, device: torch.device, budget_s: float, write, log):
        self.device, self.deadline = device, time.monotonic() + budget_s
        self.write, self.log = write, log
        self.roofs: dict[str, float] = {}  # matmul TFLOP/s per dtype, measured first

    def measure(self, row: dict, fn: Callable[[], object], flops: float, roof: float | None):
        """Time ``fn`` (FLOPs ``flops``) and write ``row`` completed with the results."""
        if time.monotonic() > self.deadline:
            return self.write({**row, "status": "budget"})
        try:
            extra = peak_memory(fn, device=self.device)  # also the first warm-up call
            t = self.time(fn)
        except torch.OutOfMemoryError:
            return self.write({**row, "status": "oom"})
        except RuntimeError as exc:  # no kernel for this backend, dtype or head dim
            self.log(f"    {row['impl']} {row['mode']}: {str(exc).splitlines()[0][:120]}")
            return self.write({**row, "status": "unsupported"})
        finally:
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        tflops = flops / t.median / 1e12
        self.write(
            {
                **row,
                "status": "ok",
                **timing_cells(t),
                "tflop": flops / 1e12,
                "tflops": tflops,
                "matmul_tflops": roof,
                "frac_matmul": roof and tflops / roof,
                "peak_extra_mib": None if extra is None else extra / 2**20,
            }
        )

    def time(self, fn: Callable[[], object]):
        """One round of the package's timer: on the GPU, CUDA events around 20 calls after a
        warm-up of 3, synchronised once; on the CPU (the dry run), a short blocked_autorange."""
        return time_it(fn, rounds=1, min_run_time=0.01, device=self.device)


def run_gpu(device: torch.device, *, budget_s: float, quick: bool, write, log=print) -> None:
    """Measure every case on ``device`` and ``write`` one row per (case, path, mode)."""
    runner = Runner(device, budget_s, write, log)
    lengths, tokens, width, matmul_n = LENGTHS, TOKENS, WIDTH, MATMUL_N
    if quick:  # the dry run: the same loops, tiny sizes
        lengths, tokens, width, matmul_n = (64, 128), 256, 64, 256

    roofs = runner.roofs
    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        fn, flops = matmul_case(matmul_n, device=device, dtype=dtype)
        t = runner.time(fn)
        roofs[dtype_name] = flops / t.median / 1e12
        runner.write(
            {
                "suite": "matmul",
                "case": f"{matmul_n}^3",
                "impl": "matmul",
                "mode": "fwd",
                "dtype": dtype_name,
                "status": "ok",
                **timing_cells(t),
                "tflop": flops / 1e12,
                "tflops": roofs[dtype_name],
            }
        )
        log(f"  matmul {dtype_name}: {roofs[dtype_name]:.1f} TFLOP/s")

    # Most useful first: torch's kernels forward, then backward, then ours and the quadratic ones.
    plan = [(p, "fwd") for p in FORWARD_PATHS[:4]] + [(p, "fwd+bwd") for p in BACKWARD_PATHS[:4]]
    plan += [(p, "fwd") for p in FORWARD_PATHS[4:]] + [(p, "fwd+bwd") for p in BACKWARD_PATHS[4:]]
    for path, mode in plan:
        for dtype_name in DTYPES:
            for D in HEAD_DIMS if not quick else (16, 32):
                for causal in (False, True):
                    for L in lengths:
                        attention_case(runner, path, mode, dtype_name, D, causal, L, tokens, width)
        log(f"  {path} {mode} done")

    for N, L, E, H in MODULE_SHAPES if not quick else [(2, 32, 64, 4)]:
        for mode in ("inference", "training"):
            module_case(runner, N, L, E, H, mode, roofs["bfloat16"])
    log("  modules done")


def attention_case(runner, path, mode, dtype_name, D, causal, L, tokens, width) -> None:
    """One row: ``path`` on (N, H, L, L, D) with N * L = tokens and H * D = width."""
    N, H = max(1, tokens // L), max(1, width // D)
    row = {
        "suite": "attention",
        "case": f"N={N} H={H} L={L} D={D}" + (" causal" if causal else ""),
        "impl": path,
        "mode": mode,
        "dtype": dtype_name,
        **dict(N=N, L=L, S=L, E=H * D, H=H, D=D),
        "causal": causal,
    }
    dtype = getattr(torch, dtype_name)
    fn_path = attention_path(path, causal=causal)
    q, k, v = qkv(N, H, L, L, D, device=runner.device, dtype=dtype)
    flops = attention_flops(N, H, L, L, D, causal=causal)
    step = attention_step(fn_path, q, k, v, "inference" if mode == "fwd" else "training")
    work = flops if mode == "fwd" else 3.5 * flops
    runner.measure(row, step, work, runner.roofs[dtype_name])


def module_case(runner, N, L, E, H, mode, roof) -> None:
    """The four modules in bf16 on (N, L, E): TFLOP/s of an inference call or a training step."""
    x = torch.randn(N, L, E, device=runner.device, dtype=torch.bfloat16)  # (N, L, E)
    flops = mha_flops(N, L, L, E, H, training=mode == "training")
    for name, (m, call) in modules(E, H).items():
        m.to(runner.device, torch.bfloat16)
        row = {
            "suite": "module",
            "case": f"N={N} L={L} E={E} H={H}",
            "impl": name,
            "mode": mode,
            "dtype": "bfloat16",
            **dict(N=N, L=L, S=L, E=E, H=H, D=E // H),
            "causal": False,
        }
        runner.measure(row, module_step(m, call, x, mode), flops, roof)
