"""FlexAttention on this CPU: a sliding window, compiled and eager, against SDPA.

For each sequence length L, at N = 1, H = 4, D = 64, float32, a causal sliding window of
``WINDOW`` keys computed four ways, timed in the same interleaved rounds
(:func:`attention.measure.compare`):

- ``sdpa mask``: ``F.scaled_dot_product_attention`` with the equivalent bool mask
  (:func:`attention.sliding_window_mask`), PyTorch's own kernel and the baseline of every ratio;
- ``flex compiled``: ``torch.compile(flex_attention, dynamic=False)`` with the block mask of
  :func:`attention.flex.sliding_window`, which skips the tiles outside the band;
- ``flex eager``: the same call without ``torch.compile`` (unfused: every score is built);
- ``sdpa causal``: ``is_causal=True``, full causal attention, for the cost of the whole triangle.

The compile (one per L, since ``dynamic=False`` specialises the kernel to the shapes) is timed
too, with whether inductor's FX graph cache already held the kernel. All four outputs are checked
against the bool-mask SDPA before timing.
"""

from __future__ import annotations

import time
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attention import flex, sliding_window_mask
from attention.measure import compare

from .report import timing_cells
from .workload import attention_flops

LENGTHS = (1024, 2048, 4096)
QUICK_LENGTHS = (256,)
SHAPE = (1, 4, 64)  # (N, H, D)
QUICK_SHAPE = (1, 2, 16)
WINDOW = 128
QUICK_WINDOW = 64
BASELINE = "sdpa mask"
UNFUSED = r"flex_attention called without torch.compile"


def cache_hits() -> int:
    """Kernels inductor has found in its FX graph cache so far in this process."""
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"]


def compile_window(q: Tensor, k: Tensor, v: Tensor, window: int):
    """Compile ``flex_attention`` for a causal sliding window on these inputs' shapes.

    The first call compiles; it is timed, with whether inductor's FX graph cache held the
    kernel already. Returns the compiled call (no arguments) and ``{"compile_s", "cache_hit"}``.
    """
    L = q.shape[-2]
    block_mask = create_block_mask(flex.sliding_window(window), None, None, L, L, device="cpu")
    kernel = torch.compile(flex_attention, dynamic=False)  # for these shapes only
    hits = cache_hits()
    start = time.perf_counter()
    with torch.no_grad():
        kernel(q, k, v, block_mask=block_mask)  # the first call compiles
    info = {"compile_s": time.perf_counter() - start, "cache_hit": cache_hits() > hits}
    return (lambda: kernel(q, k, v, block_mask=block_mask)), info


def window_cases(
    N: int, H: int, L: int, D: int, window: int, *, compiled: bool = True
) -> tuple[dict, dict]:
    """The callables of one length, checked equal, and what the compile took.

    Returns the cases (name -> zero-argument callable) and ``{"compile_s", "cache_hit"}`` (empty
    when ``compiled=False``)."""
    q, k, v = (torch.randn(N, H, L, D) for _ in range(3))  # (N, H, L, D)
    mask = sliding_window_mask(L, window)  # (L, L)
    block_mask = create_block_mask(flex.sliding_window(window), None, None, L, L, device="cpu")
    cases = {
        BASELINE: lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "flex eager": lambda: flex_attention(q, k, v, block_mask=block_mask),
        "sdpa causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    info = {}
    if compiled:
        cases["flex compiled"], info = compile_window(q, k, v, window)
    expected = cases[BASELINE]()
    for name, fn in cases.items():
        if name != "sdpa causal":
            torch.testing.assert_close(fn(), expected, atol=1e-5, rtol=1e-5)
    return cases, info | {"sparsity": block_mask.sparsity()}


def run_flex(
    lengths, shape, window, *, rounds: int, min_run_time: float, compiled: bool = True, log=print
) -> list[dict]:
    """One row per (L, candidate): median time, ratio to the bool-mask SDPA, the compile."""
    N, H, D = shape
    rows = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=UNFUSED)
        for L in lengths:
            torch.manual_seed(0)
            cases, info = window_cases(N, H, L, D, window, compiled=compiled)
            timings = compare(cases, rounds=rounds, min_run_time=min_run_time)
            window_pairs = sum(min(i + 1, window) for i in range(L))
            for name, t in timings.items():
                causal = name == "sdpa causal"
                pairs = L * (L + 1) // 2 if causal else window_pairs
                flops = 4 * N * H * pairs * D  # 2 D for the score, 2 D for the weighted value
                rows.append(
                    {
                        "suite": "flex",
                        "case": f"N={N} H={H} L={L} D={D} window={window}",
                        "impl": name,
                        "mode": "inference",
                        "dtype": "float32",
                        **dict(N=N, L=L, S=L, E=H * D, H=H, D=D),
                        **timing_cells(t),
                        "gflop": flops / 1e9,
                        "dense_gflop": attention_flops(N, H, L, L, D) / 1e9,
                        "ratio_to_sdpa": t.median / timings[BASELINE].median,
                        "sparsity": info["sparsity"] if name.startswith("flex") else None,
                        "compile_s": info.get("compile_s") if name == "flex compiled" else None,
                        "cache_hit": info.get("cache_hit") if name == "flex compiled" else None,
                    }
                )
            log(f"  timed flex at L={L}")
    return rows


COLUMNS = [
    ("case", "case"),
    ("impl", "path"),
    ("median_ms", "ms"),
    ("gflop", "GFLOP"),
    ("sparsity", "tiles skipped %"),
    ("ratio_to_sdpa", "time / sdpa mask"),
    ("compile_s", "compile s"),
    ("cache_hit", "cache hit"),
]
FIELDS = ["dense_gflop", "sparsity", "compile_s", "cache_hit"]
