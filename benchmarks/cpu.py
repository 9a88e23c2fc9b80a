"""The CPU suite: four multi-head attention modules, the matmul roof, and tiled attention.

1. Modules, for each (N, L, E, H): the textbook module (:mod:`benchmarks.textbook`),
   :class:`attention.MultiHeadAttention`, :class:`attention.FusedMultiHeadAttention`
   (``need_weights=False``) and ``nn.MultiheadAttention(need_weights=False)``, all holding the
   same weights, for inference (``eval()`` under ``torch.inference_mode()``) and for a training
   step (``train()``, forward and backward to the input and every parameter). A square fp32
   matmul is timed in the same rounds, so each module's GFLOP/s reads as a fraction of what this
   machine's matmul reaches under the same load.
2. :func:`attention.tiled_attention` against ``F.scaled_dot_product_attention``: time in the same
   rounds, and the extra peak memory of each path measured in a fresh process
   (:mod:`benchmarks.memory`).
3. Generation with :class:`attention.DecoderLM`: new tokens after a prompt, greedy, with and
   without the :class:`attention.KVCache`, for ``H_kv`` in ``{H, H/4, 1}``; tokens per second
   and the cache's bytes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

import attention

from .memory import peak_extra_bytes
from .paths import attention_path, qkv
from .textbook import TextbookMultiHeadAttention
from .timing import (
    attention_flops,
    interleaved,
    matmul_case,
    mha_flops,
    module_step,
    round_ratios,
)

SHAPES = [(4, 128, 512, 8), (4, 512, 512, 8), (2, 2048, 512, 8)]  # (N, L, E, H)
TILED_CASE = (1, 8, 4096, 4096, 64)  # (N, H, L, S, D)
QUICK_SHAPES = [(2, 32, 64, 4)]
QUICK_TILED_CASE = (1, 2, 256, 256, 16)
# (prompt, new tokens, V, E, H, layers) and the key/value heads compared.
GENERATION_CASE = (512, 256, 256, 128, 8, 2)
QUICK_GENERATION_CASE = (16, 8, 32, 32, 8, 1)
TORCH = "nn.MultiheadAttention"
FUSED = "FusedMultiHeadAttention"
MATMUL_N = 2048


def modules(E: int, H: int) -> dict[str, tuple[nn.Module, Callable]]:
    """The four modules with nn.MultiheadAttention's weights, and how each is called."""
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True)
    return {
        "textbook": (TextbookMultiHeadAttention.from_torch(torch_mha), lambda m, x: m(x)),
        "MultiHeadAttention": (
            attention.MultiHeadAttention.from_torch(torch_mha),
            lambda m, x: m(x, need_weights=False)[0],
        ),
        FUSED: (
            attention.FusedMultiHeadAttention.from_torch(torch_mha),
            lambda m, x: m(x, need_weights=False)[0],
        ),
        TORCH: (torch_mha, lambda m, x: m(x, x, x, need_weights=False)[0]),
    }


def module_cases(N: int, L: int, E: int, H: int, mode: str) -> dict[str, Callable]:
    """One zero-argument callable per module: an inference call or a training step."""
    x = torch.randn(N, L, E)  # (N, L, E)
    mods = modules(E, H)
    with torch.no_grad():  # every module computes the same function before it is timed
        expected = mods[TORCH][1](mods[TORCH][0].eval(), x)
        for m, call in mods.values():
            torch.testing.assert_close(call(m.eval(), x), expected, atol=1e-4, rtol=1e-4)

    return {name: module_step(m, call, x, mode) for name, (m, call) in mods.items()}


def run_modules(shapes, *, rounds: int, min_run_time: float, log=print) -> list[dict]:
    """Time the four modules and the matmul for every shape and mode; one row per module."""
    matmul, matmul_flops = matmul_case(MATMUL_N)
    rows = []
    for N, L, E, H in shapes:
        for mode in ("inference", "training"):
            torch.manual_seed(0)
            cases = {**module_cases(N, L, E, H, mode), "matmul": matmul}
            timings = interleaved(cases, rounds=rounds, min_run_time=min_run_time)
            matmul_time = timings.pop("matmul")
            roof = matmul_flops / matmul_time.median / 1e9  # GFLOP/s
            flops = mha_flops(N, L, L, E, H, training=mode == "training")
            for name, t in timings.items():
                gflops = flops / t.median / 1e9
                to_torch = round_ratios(t, timings[TORCH])
                # Per round, (flops / t) / (matmul_flops / matmul time), then the median.
                to_matmul = statistics.median(round_ratios(t, matmul_time))
                rows.append(
                    {
                        "suite": "module",
                        "case": f"N={N} L={L} E={E} H={H}",
                        "impl": name,
                        "mode": mode,
                        "dtype": "float32",
                        **dict(N=N, L=L, S=L, E=E, H=H, D=E // H),
                        **t.cells(),
                        "gflop": flops / 1e9,
                        "gflops": gflops,
                        "matmul_gflops": roof,
                        "frac_matmul": flops / matmul_flops / to_matmul,
                        "ratio_to_torch": t.median / timings[TORCH].median,
                        "ratio_round_min": min(to_torch),
                        "ratio_round_max": max(to_torch),
                    }
                )
            log(f"  timed N={N} L={L} E={E} H={H} {mode}")
    return rows


def run_tiled(case, *, rounds: int, min_run_time: float, log=print) -> list[dict]:
    """Time tiled_attention against SDPA (and the reference), then measure each one's memory."""
    N, H, L, S, D = case
    q, k, v = qkv(N, H, L, S, D)
    names = ("sdpa", "tiled", "reference")
    paths = {name: attention_path(name) for name in names}
    with torch.inference_mode():
        # Whether the paths compute the same function is checked in float64. In float32 the
        # check also measures torch's own rounding, and in some processes of this harness the
        # first float32 torch.exp after SDPA came out up to 1.5e-4 off (relative) on one thread.
        q64, k64, v64 = (x.double() for x in (q, k, v))
        torch.testing.assert_close(paths["tiled"](q64, k64, v64), paths["sdpa"](q64, k64, v64))

        def call(fn):
            return lambda: fn(q, k, v)

        timings = interleaved(
            {n: call(f) for n, f in paths.items()}, rounds=rounds, min_run_time=min_run_time
        )
    log(f"  timed N={N} H={H} L={L} S={S} D={D}")
    flops = attention_flops(N, H, L, S, D)
    memory = {n: peak_extra_bytes(n, N, H, L, S, D) for n in ("sdpa", "math", "reference", "tiled")}
    log("  measured peak memory")
    rows = []
    for name in ("sdpa", "math", "reference", "tiled"):
        t = timings.get(name)
        rows.append(
            {
                "suite": "tiled",
                "case": f"N={N} H={H} L={L} S={S} D={D}",
                "impl": name,
                "mode": "inference",
                "dtype": "float32",
                **dict(N=N, L=L, S=S, E=H * D, H=H, D=D),
                **(t.cells() if t else {}),  # the math path is measured for memory only
                "gflop": flops / 1e9,
                "gflops": t and flops / t.median / 1e9,
                "ratio_to_sdpa": t and t.median / timings["sdpa"].median,
                "peak_extra_mib": memory[name] / 2**20,
                "memory_vs_reference": memory[name] / memory["reference"],
            }
        )
    return rows


def run_generation(case, *, rounds: int, log=print) -> list[dict]:
    """Greedy generation with and without the cache, for H_kv in {H, H/4, 1}: tokens/s and the
    cache's bytes. Each round times one full generation of each candidate, in turn; the
    medians are kept. The tokens are checked equal before timing."""
    prompt_len, new, V, E, H, layers = case
    rows = []
    for kv_heads in sorted({H, max(1, H // 4), 1}, reverse=True):
        torch.manual_seed(0)
        model = attention.DecoderLM(
            V, embed_dim=E, num_heads=H, num_layers=layers, max_len=prompt_len + new,
            num_kv_heads=kv_heads,
        ).eval()  # fmt: skip
        prompt = torch.randint(V, (1, prompt_len))
        cached = model.generate(prompt, new)
        assert torch.equal(cached, model.generate(prompt, new, use_cache=False))
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for r in range(rounds):
            for use_cache in (True, False) if r % 2 == 0 else (False, True):
                start = time.perf_counter()
                model.generate(prompt, new, use_cache=use_cache)
                seconds[use_cache].append(time.perf_counter() - start)
        median = {k: statistics.median(v) for k, v in seconds.items()}
        cache_bytes = model.new_cache(1).nbytes
        for use_cache in (True, False):
            rows.append(
                {
                    "suite": "generation",
                    "case": f"prompt={prompt_len} new={new} E={E} H={H} layers={layers}",
                    "impl": f"H_kv={kv_heads} {'cache' if use_cache else 'no cache'}",
                    "mode": "inference",
                    "dtype": "float32",
                    **dict(N=1, L=new, S=prompt_len + new, E=E, H=H, D=E // H),
                    "median_ms": median[use_cache] * 1e3,
                    "runs": rounds,
                    "tokens_per_s": new / median[use_cache],
                    "cache_bytes": cache_bytes if use_cache else 0,
                    "speedup": median[False] / median[use_cache],
                }
            )
        log(f"  timed generation, H_kv={kv_heads}")
    return rows


def per_round(row: dict) -> str:
    """The lowest and highest per-round time ratio to nn.MultiheadAttention, as ``lo-hi``."""
    return f"{row['ratio_round_min']:.2f}-{row['ratio_round_max']:.2f}"


MODULE_COLUMNS = [
    ("case", "case"),
    ("mode", "mode"),
    ("impl", "module"),
    ("median_ms", "ms"),
    ("iqr_ms", "IQR ms"),
    ("gflops", "GFLOP/s"),
    ("frac_matmul", "of matmul"),
    ("ratio_to_torch", "time / nn.MHA"),
    (per_round, "per round"),
]
TILED_COLUMNS = [
    ("case", "case"),
    ("impl", "path"),
    ("median_ms", "ms"),
    ("gflops", "GFLOP/s"),
    ("ratio_to_sdpa", "time / sdpa"),
    ("peak_extra_mib", "extra peak MiB"),
    ("memory_vs_reference", "memory / reference"),
]
GENERATION_COLUMNS = [
    ("case", "case"),
    ("impl", "generation"),
    ("median_ms", "ms"),
    ("tokens_per_s", "tokens/s"),
    ("cache_bytes", "cache bytes"),
    ("speedup", "cache speed-up"),
]
FIELDS = [
    "suite",
    "case",
    "impl",
    "mode",
    "dtype",
    *"NLSEHD",
    "median_ms",
    "iqr_ms",
    "runs",
    "gflop",
    "gflops",
    "matmul_gflops",
    "frac_matmul",
    "ratio_to_torch",
    "ratio_round_min",
    "ratio_round_max",
    "ratio_to_sdpa",
    "peak_extra_mib",
    "memory_vs_reference",
    "tokens_per_s",
    "cache_bytes",
    "speedup",
]


def recomputed(row: dict) -> str:
    """For a training row: its fraction of the matmul if the backward's recomputation of
    Q K^T is counted, as FlashAttention-2 counts its kernels' work."""
    if row["mode"] != "training":
        return ""
    N, L, E, H = (row[k] for k in "NLEH")
    counted = mha_flops(N, L, L, E, H, training=True, recompute=True)
    frac = row["frac_matmul"] * counted / mha_flops(N, L, L, E, H, training=True)
    return f" ({frac:.0%} counting the backward's recomputation of Q K^T)"


def goals(
    module_rows: list[dict], tiled_rows: list[dict], generation_rows: list[dict] | None = None
) -> list[tuple[str, bool, str]]:
    """The issue's goals, each with whether this run met it and the numbers that decide it."""
    fused = [r for r in module_rows if r["impl"] == FUSED]
    worst = max(fused, key=lambda r: r["ratio_to_torch"])
    longest = max(r["L"] for r in fused)
    at_longest = [r for r in fused if r["L"] == longest]
    tiled = next(r for r in tiled_rows if r["impl"] == "tiled")
    return [
        (
            f"{FUSED} no slower than {TORCH}, every row",
            worst["ratio_to_torch"] <= 1.0,
            f"worst time ratio {worst['ratio_to_torch']:.2f}, {per_round(worst)} over the "
            f"rounds ({worst['case']}, {worst['mode']})",
        ),
        (
            f"{FUSED} at L={longest}: at least 70% of the matmul GFLOP/s",
            min(r["frac_matmul"] for r in at_longest) >= 0.7,
            "; ".join(f"{r['mode']} {r['frac_matmul']:.0%}{recomputed(r)}" for r in at_longest),
        ),
        (
            "tiled_attention at most 1.5x the time of F.scaled_dot_product_attention",
            tiled["ratio_to_sdpa"] <= 1.5,
            f"{tiled['ratio_to_sdpa']:.2f}x ({tiled['case']})",
        ),
        (
            "tiled_attention extra peak memory under 15% of the reference path's",
            tiled["memory_vs_reference"] < 0.15,
            f"{tiled['memory_vs_reference']:.1%} ({tiled['peak_extra_mib']:.0f} MiB of "
            f"{tiled['peak_extra_mib'] / tiled['memory_vs_reference']:.0f} MiB)",
        ),
        *generation_goals(generation_rows or []),
    ]


def generation_goals(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """Generation: the cache at least 5x faster than re-encoding, for every H_kv."""
    cached = [r for r in rows if r["impl"].endswith(" cache") and "no cache" not in r["impl"]]
    if not cached:
        return []
    worst = min(cached, key=lambda r: r["speedup"])
    return [
        (
            "generation with the KV cache at least 5x faster than re-encoding, every H_kv",
            worst["speedup"] >= 5.0,
            "; ".join(f"{r['impl'].split()[0]} {r['speedup']:.1f}x" for r in cached)
            + f" ({worst['case']})",
        )
    ]
