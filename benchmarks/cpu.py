"""The CPU suite: four multi-head attention modules, the matmul roof, and tiled attention.

Every time comes from :func:`attention.measure.compare` (interleaved rounds, medians) and every
ratio between two candidates from the same call; every memory figure from
:func:`attention.measure.peak_memory` in a fresh process (:mod:`benchmarks.memory`).

1. Modules, for each (N, L, E, H): the textbook module (:mod:`benchmarks.textbook`),
   :class:`attention.MultiHeadAttention`, :class:`attention.FusedMultiHeadAttention`
   (``need_weights=False``) and ``nn.MultiheadAttention(need_weights=False)``, all holding the
   same weights, for inference (``eval()`` under ``torch.inference_mode()``) and for a training
   step (``train()``, forward and backward to the input and every parameter). A square fp32
   matmul is timed in the same rounds, so each module's GFLOP/s reads as a fraction of what this
   machine's matmul reaches under the same load.
2. :func:`attention.tiled_attention` against ``F.scaled_dot_product_attention`` and the
   package's reference path: inference at L = 4096 (:func:`run_tiled`), and a training step,
   forward and backward to the queries, keys and values, at L = 1024, 2048 and 4096
   (:func:`run_tiled_training`): time in the same rounds, and the extra peak memory of each
   path measured in a fresh process.
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
from attention.measure import compare, round_ratios

from .memory import peak_extra_bytes
from .paths import attention_path, qkv
from .report import timing_cells
from .textbook import TextbookMultiHeadAttention
from .workload import attention_flops, attention_step, matmul_case, mha_flops, module_step

SHAPES = [(4, 128, 512, 8), (4, 512, 512, 8), (2, 2048, 512, 8)]  # (N, L, E, H)
TILED_CASE = (1, 8, 4096, 4096, 64)  # (N, H, L, S, D)
# A training step of tiled attention: (N, H, D) and the lengths L = S (issue 28). The time goal
# is judged at TRAINING_TIME_L, the memory goal at the longest length.
TRAINING_SHAPE, TRAINING_LENGTHS, TRAINING_TIME_L = (1, 8, 64), (1024, 2048, 4096), 2048
QUICK_TRAINING_SHAPE, QUICK_TRAINING_LENGTHS = (1, 2, 16), (128,)
TILED_PATHS = ("sdpa", "tiled", "reference")  # timed, in this order; the first is the baseline
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
            timings = compare(cases, rounds=rounds, min_run_time=min_run_time)
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
                        **timing_cells(t),
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


def check_paths(paths: dict, N: int, H: int, L: int, S: int, D: int) -> None:
    """The paths compute the same function, forward and backward, checked in float64.

    In float32 the check would also measure torch's own rounding: in some processes of this
    harness the first float32 torch.exp after SDPA came out up to 1.5e-4 off (relative) on one
    thread."""
    q, k, v = (x.double().requires_grad_() for x in qkv(N, H, L, S, D))
    grad = torch.randn(N, H, L, D, dtype=torch.float64)
    expected = paths["sdpa"](q, k, v)
    expected_grads = torch.autograd.grad(expected, (q, k, v), grad)
    for name, fn in paths.items():
        out = fn(q, k, v)
        torch.testing.assert_close(out, expected, msg=lambda m, name=name: f"{name}: {m}")
        for g, e in zip(torch.autograd.grad(out, (q, k, v), grad), expected_grads, strict=True):
            torch.testing.assert_close(g, e, msg=lambda m, name=name: f"{name} gradient: {m}")


def tiled_rows(case, mode: str, timings: dict, memory: dict, flops: float) -> list[dict]:
    """One row per path of one case: time and ratio to SDPA (per round too), extra peak
    memory and its fraction of the reference path's."""
    N, H, L, S, D = case
    sdpa = timings["sdpa"]
    rows = []
    for name, extra in memory.items():
        t = timings.get(name)  # the math path is measured for memory only
        per_round = round_ratios(t, sdpa) if t else []
        known = extra is not None and memory["reference"]
        rows.append(
            {
                "suite": "tiled",
                "case": f"N={N} H={H} L={L} S={S} D={D}",
                "impl": name,
                "mode": mode,
                "dtype": "float32",
                **dict(N=N, L=L, S=S, E=H * D, H=H, D=D),
                **(timing_cells(t) if t else {}),
                "gflop": flops / 1e9,
                "gflops": t and flops / t.median / 1e9,
                "ratio_to_sdpa": t and t.median / sdpa.median,
                "ratio_round_min": min(per_round, default=None),
                "ratio_round_max": max(per_round, default=None),
                "peak_extra_mib": None if extra is None else extra / 2**20,
                "memory_vs_reference": extra / memory["reference"] if known else None,
            }
        )
    return rows


def run_tiled(case, *, rounds: int, min_run_time: float, log=print) -> list[dict]:
    """Inference: time tiled_attention against SDPA (and the reference) in the same rounds,
    then measure each one's extra peak memory (and SDPA's math backend's) in a fresh process."""
    N, H, L, S, D = case
    paths = {name: attention_path(name) for name in TILED_PATHS}
    check_paths(paths, N, H, min(L, 300), min(S, 300), D)
    q, k, v = qkv(N, H, L, S, D)
    steps = {n: attention_step(f, q, k, v, "inference") for n, f in paths.items()}
    timings = compare(steps, rounds=rounds, min_run_time=min_run_time)
    log(f"  timed N={N} H={H} L={L} S={S} D={D} inference")
    memory = {n: peak_extra_bytes(n, N, H, L, S, D) for n in ("sdpa", "math", "reference", "tiled")}
    log("  measured peak memory")
    return tiled_rows(case, "inference", timings, memory, attention_flops(N, H, L, S, D))


def run_tiled_training(
    shape, lengths, *, rounds: int, min_run_time: float, log=print
) -> list[dict]:
    """A training step (forward, then the gradients of the queries, keys and values) of
    tiled_attention, SDPA and the reference path, for each L = S: time in the same rounds,
    extra peak memory each in a fresh process. FLOPs: the forward plus a backward of 2.5
    forwards (FlashAttention-2's count)."""
    N, H, D = shape
    paths = {name: attention_path(name) for name in TILED_PATHS}
    check_paths(paths, N, H, 300, 300, D)
    rows = []
    for L in lengths:
        q, k, v = qkv(N, H, L, L, D)
        steps = {n: attention_step(f, q, k, v, "training") for n, f in paths.items()}
        timings = compare(steps, rounds=rounds, min_run_time=min_run_time)
        del steps, q, k, v
        log(f"  timed N={N} H={H} L={L} D={D} training")
        memory = {n: peak_extra_bytes(n, N, H, L, L, D, backward=True) for n in TILED_PATHS}
        log(f"  measured peak memory at L={L}")
        flops = 3.5 * attention_flops(N, H, L, L, D)
        rows += tiled_rows((N, H, L, L, D), "training", timings, memory, flops)
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


def sdpa_per_round(row: dict) -> str:
    """The lowest and highest per-round time ratio to SDPA, as ``lo-hi`` (empty if untimed)."""
    if row.get("ratio_round_min") is None:
        return ""
    return f"{row['ratio_round_min']:.2f}-{row['ratio_round_max']:.2f}"


TILED_COLUMNS = [
    ("case", "case"),
    ("mode", "mode"),
    ("impl", "path"),
    ("median_ms", "ms"),
    ("gflops", "GFLOP/s"),
    ("ratio_to_sdpa", "time / sdpa"),
    (sdpa_per_round, "per round"),
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
        *tiled_goals(tiled_rows),
        *generation_goals(generation_rows or []),
    ]


def _time_goal(row: dict, most: float, what: str) -> tuple[str, bool, str]:
    return (
        f"tiled_attention {what} at most {most}x the time of F.scaled_dot_product_attention "
        "in the same rounds",
        row["ratio_to_sdpa"] <= most,
        f"{row['ratio_to_sdpa']:.2f}x, {sdpa_per_round(row)} over the rounds ({row['case']})",
    )


def _memory_goal(row: dict, most: float, what: str) -> tuple[str, bool, str]:
    goal = f"tiled_attention {what} extra peak memory at most {most:.0%} of the reference path's"
    if row["memory_vs_reference"] is None:
        return goal, False, f"not measured here ({row['case']})"
    reference_mib = row["peak_extra_mib"] / row["memory_vs_reference"]
    return (
        goal,
        row["memory_vs_reference"] <= most,
        f"{row['memory_vs_reference']:.1%}: {row['peak_extra_mib']:.0f} MiB of "
        f"{reference_mib:.0f} MiB ({row['case']})",
    )


def tiled_goals(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """tiled_attention's goals (issues 6 and 28): inference at most 1.5x SDPA's time and under
    15% of the reference's memory; a training step at L = 2048 at most 2.0x SDPA's time, and at
    the longest L at most 10% of the reference's memory."""
    tiled = [r for r in rows if r["impl"] == "tiled"]
    inference = [r for r in tiled if r["mode"] == "inference"]
    training = [r for r in tiled if r["mode"] == "training"]
    found = []
    for row in inference:
        found += [
            _time_goal(row, 1.5, "inference"),
            _memory_goal(row, 0.15, "inference"),
        ]
    timed = [r for r in training if r["L"] == TRAINING_TIME_L]
    if timed:
        found.append(_time_goal(timed[0], 2.0, "forward + backward"))
    if training:
        longest = max(training, key=lambda r: r["L"])
        found.append(_memory_goal(longest, 0.10, "forward + backward"))
    return found


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
