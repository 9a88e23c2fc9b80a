"""Serving on this CPU: a paged cache and continuous batching against preallocation and a
static batcher, on page 16's character model.

One run measures, for a mix of requests with long-tailed prompt and output lengths
(:func:`attention.serving.request_mix`, its own fixed seed):

- memory: averaged over the steps of the continuous run, the positions holding tokens against those
  reserved by preallocating ``max_len`` per running request and by the paged cache's blocks
  (:func:`attention.serving.memory_use`); counted, exact;
- throughput: generated tokens per second, continuous and static batching over the same pool
  of blocks (the same memory budget), timed in turn in the same rounds
  (:func:`attention.measure.compare`), the ratio per round; with the forward calls and token
  positions each computes (counted);
- prefix sharing: the blocks held by ``n`` samples of one prompt, with and without sharing.
"""

from __future__ import annotations

import torch

from attention import DecoderLM
from attention.measure import compare, round_ratios
from attention.recipes import fit_char_lm
from attention.repro import num_threads
from attention.serving import memory_use, request_mix, sample_many, serve

from .report import timing_cells

# (requests, blocks in the pool, block size, samples, sample prompt, sample tokens)
CASE = (24, 32, 16, 8, 40, 24)
QUICK_CASE = (6, 8, 4, 3, 6, 4)


def model_and_text(quick: bool):
    """Page 16's character model (its recipe, 400 steps), or a small untrained one."""
    if quick:
        torch.manual_seed(0)
        model = DecoderLM(32, embed_dim=16, num_heads=4, num_kv_heads=1, num_layers=1,
                          max_len=32, positions="rotary")  # fmt: skip
        return model.eval(), torch.randint(32, (200,))
    model, _, (_, val_ids) = fit_char_lm()
    return model, val_ids


def run_serving(case, *, quick: bool = False, rounds: int, log=print) -> list[dict]:
    """The memory, throughput and sharing rows; one thread, float32."""
    n_requests, num_blocks, block, n_samples, prompt_len, new = case
    model, text = model_and_text(quick)
    requests = request_mix(text, n_requests, max_len=model.max_len, seed=0)
    generated = sum(r.max_new_tokens for r in requests)
    attn = model.blocks[0].self_attn
    token_bytes = 2 * len(model.blocks) * attn.num_kv_heads * attn.head_dim * 4
    label = f"{n_requests} requests, {num_blocks} blocks of {block}, max_len={model.max_len}"
    rows = []
    with num_threads(1):
        runs = {
            p: serve(model, requests, num_blocks=num_blocks, block_size=block, policy=p)
            for p in ("continuous", "static")
        }
        for out_c, out_s in zip(runs["continuous"][0], runs["static"][0], strict=True):
            assert torch.equal(out_c, out_s)
        use = memory_use(runs["continuous"][1], block_size=block, max_len=model.max_len)
        for scheme in ("preallocated", "paged"):
            rows.append(
                {
                    "suite": "serving",
                    "case": label,
                    "impl": f"memory: {scheme}",
                    "mode": "inference",
                    "dtype": "float32",
                    "reserved_bytes": round(use[scheme] * token_bytes),
                    "token_bytes": round(use["tokens"] * token_bytes),
                    "utilisation": use["tokens"] / use[scheme],
                    "waste_per_seq": use["waste"] if scheme == "paged" else "",
                }
            )
        log("  counted serving memory")
        timings = compare(
            {p: (lambda p=p: serve(model, requests, num_blocks=num_blocks, block_size=block,
                                   policy=p)) for p in ("continuous", "static")},
            rounds=rounds, min_run_time=0.01,
        )  # fmt: skip
        ratios = [1 / r for r in round_ratios(timings["continuous"], timings["static"])]
        for policy, t in timings.items():
            stats = runs[policy][1]
            rows.append(
                {
                    "suite": "serving",
                    "case": label,
                    "impl": f"throughput: {policy}",
                    "mode": "inference",
                    "dtype": "float32",
                    **timing_cells(t),
                    "tokens_per_s": generated / t.median,
                    "steps": stats.steps,
                    "positions": stats.positions,
                    "peak_blocks": stats.peak_blocks,
                    "speedup": timings["static"].median / t.median,
                    "ratio_round_min": min(ratios) if policy == "continuous" else "",
                    "ratio_round_max": max(ratios) if policy == "continuous" else "",
                }
            )
        log("  timed continuous and static batching")
        prompt = text[:prompt_len]
        for share in (True, False):
            _, blocks = sample_many(
                model,
                prompt,
                n_samples,
                new,
                block_size=block,
                share=share,
                generator=torch.Generator().manual_seed(0),
            )
            rows.append(
                {
                    "suite": "serving",
                    "case": f"{n_samples} samples, prompt {prompt_len}, {new} new, B={block}",
                    "impl": f"sharing: {'shared' if share else 'apart'}",
                    "mode": "inference",
                    "dtype": "float32",
                    "blocks": blocks,
                }
            )
    return rows


def per_round(row: dict) -> str:
    """The lowest and highest continuous / static throughput ratio over the rounds."""
    if row.get("ratio_round_min", "") == "":
        return ""
    return f"{row['ratio_round_min']:.2f}-{row['ratio_round_max']:.2f}"


MEMORY_COLUMNS = [
    ("case", "case"),
    ("impl", "scheme"),
    ("reserved_bytes", "reserved bytes"),
    ("token_bytes", "token bytes"),
    ("utilisation", "holding tokens"),
    ("waste_per_seq", "unused per sequence"),
]
THROUGHPUT_COLUMNS = [
    ("case", "case"),
    ("impl", "scheduler"),
    ("median_ms", "ms a run"),
    ("tokens_per_s", "tokens/s"),
    ("speedup", "static time / time"),
    (per_round, "per round"),
    ("steps", "forward calls"),
    ("positions", "positions computed"),
    ("peak_blocks", "peak blocks"),
]
SHARING_COLUMNS = [("case", "case"), ("impl", "prompt blocks"), ("blocks", "blocks held")]
FIELDS = ["reserved_bytes", "token_bytes", "utilisation", "waste_per_seq", "steps",
          "positions", "peak_blocks", "blocks"]  # fmt: skip


def section(rows: list[dict], report_table) -> list[str]:
    """The Markdown section of the serving rows; ``report_table`` is report.table."""
    kind = {k: [r for r in rows if r["impl"].startswith(k)] for k in
            ("memory", "throughput", "sharing")}  # fmt: skip
    return [
        "## Serving: paged cache and continuous batching",
        "",
        "Page 16's character model (float32, one thread) serving a fixed long-tailed mix of "
        "requests (attention.serving.request_mix, seed 0), greedily. Memory: averaged over the "
        "steps of the continuous run, the bytes reserved by preallocating max_len for each "
        "running request and by the paged cache's blocks, against the bytes holding tokens. "
        "Throughput: continuous and static batching in the same pool (the same memory), timed "
        "in turn in the same rounds; `per round`: the lowest and highest continuous/static "
        "throughput ratio. Sharing: blocks held by samples of one prompt.",
        "",
        report_table(kind["memory"], MEMORY_COLUMNS, markdown=True),
        "",
        report_table(kind["throughput"], THROUGHPUT_COLUMNS, markdown=True),
        "",
        report_table(kind["sharing"], SHARING_COLUMNS, markdown=True),
        "",
    ]
