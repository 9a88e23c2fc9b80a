"""Context parallelism on this CPU: bytes sent and peak memory per rank, for P = 1, 2 and 4.

One start of four local gloo processes (:func:`attention.distributed.spawn`) runs every strategy
of :mod:`attention.distributed` on groups of the first 1, 2 and 4 ranks, in float32. Each rank
counts the bytes it passes to the collectives (forward and backward) and measures the extra peak
memory of one forward pass (its resident memory's high-water mark, reset just before the call);
the table reports the largest value over the ranks, next to the bytes the formula of
:func:`attention.distributed.bytes_formula` predicts, and the output's largest difference from
single-process ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

from attention.distributed import STRATEGIES, bytes_formula, run_cases, spawn

CASE = (1, 8, 1024, 64)  # (N, H, L, D)
QUICK_CASE = (1, 4, 64, 8)  # H divisible by every P (Ulysses)
WORLD_SIZES = (1, 2, 4)
TIMEOUT_S = 900


def run_context_parallel(case, *, log=print) -> list[dict]:
    """One row per (strategy, P): bytes per rank, their formula, peak memory, time, error."""
    N, H, L, D = case
    runs = [(s, p) for s in STRATEGIES for p in WORLD_SIZES]
    base = {"causal": False, "zigzag": False, "shape": case, "dtype": "float32"}
    # Checked: the output and the gradients against SDPA, and the bytes of both passes.
    # Measured: the forward pass alone, without autograd (its time and its peak memory).
    checked = [base | {"strategy": s, "group_size": p} for s, p in runs]
    measured = [c | {"check": False, "memory": True} for c in checked]
    per_rank = spawn(run_cases, checked + measured, nproc=max(WORLD_SIZES), timeout=TIMEOUT_S)
    log(f"  ran {len(checked + measured)} context-parallel cases on {max(WORLD_SIZES)} processes")
    by_case = [[r for r in results if r is not None] for results in zip(*per_rank, strict=True)]
    rows = []
    for (strategy, P), ranks, timed in zip(
        runs, by_case[: len(runs)], by_case[len(runs) :], strict=True
    ):
        b = ranks[0]["shard_bytes"]
        forward, backward = bytes_formula(strategy, P, b)
        peaks = [r["peak_bytes"] for r in timed]
        rows.append(
            {
                "suite": "context_parallel",
                "case": f"N={N} H={H} L={L} D={D}",
                "impl": strategy,
                "mode": "training",
                "dtype": "float32",
                **dict(N=N, L=L, S=L, E=H * D, H=H, D=D),
                "P": P,
                "sent_forward_mib": max(r["bytes_forward"] for r in ranks) / 2**20,
                "sent_backward_mib": max(r["bytes_backward"] for r in ranks) / 2**20,
                "formula_forward_mib": forward / 2**20,
                "formula_backward_mib": backward / 2**20,
                "peak_extra_mib": None if None in peaks else max(peaks) / 2**20,
                "forward_ms": max(r["seconds"] for r in timed) * 1e3,
                "max_error": max(r["error_out"] for r in ranks),
            }
        )
    return rows


COLUMNS = [
    ("impl", "strategy"),
    ("P", "P"),
    ("sent_forward_mib", "sent fwd MiB"),
    ("formula_forward_mib", "formula"),
    ("sent_backward_mib", "sent bwd MiB"),
    ("formula_backward_mib", "formula"),
    ("peak_extra_mib", "peak fwd MiB"),
    ("forward_ms", "fwd ms"),
    (lambda row: f"{row['max_error']:.1e}", "error vs SDPA"),
]
FIELDS = [
    "P",
    "sent_forward_mib",
    "sent_backward_mib",
    "formula_forward_mib",
    "formula_backward_mib",
    "forward_ms",
    "max_error",
]
