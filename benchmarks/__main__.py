"""Run the benchmarks: ``python -m benchmarks`` (``make bench``) from the repository root.

    python -m benchmarks              the CPU suite (several minutes on 2 idle cores, more
                                      when FlexAttention compiles on a cold cache); writes
                                      benchmarks/results/cpu-<date>.csv and cpu-<date>.md
    python -m benchmarks --tiled      only the tiled_attention rows of the CPU suite (inference,
                                      and forward + backward at L = 1024, 2048, 4096) and their
                                      goals; writes benchmarks/results/tiled-<date>.csv and .md
    python -m benchmarks --gpu        the GPU suite (needs CUDA; a few minutes); writes
                                      benchmarks/results/gpu-<date>.csv
    python -m benchmarks --triton     the Triton kernel (attention.flash_triton) against SDPA's
                                      flash backend and tiled_attention on a CUDA GPU; writes
                                      benchmarks/results/triton-<date>.csv (with --quick: its
                                      loops on the CPU, in Triton's interpreter)
    python -m benchmarks --serving    only the serving rows of the CPU suite (paged cache,
                                      continuous against static batching, prefix sharing, on
                                      page 16's character model); writes
                                      benchmarks/results/serving-<date>.csv and .md
    python -m benchmarks --flex       only the FlexAttention rows of the CPU suite (compiles
                                      flex_attention once per length: minutes on a cold cache);
                                      writes benchmarks/results/flex-<date>.csv and .md
    python -m benchmarks --decoding   only the decoding-step rows: one new token after S held
                                      tokens, for every attention variant's decoding state;
                                      writes benchmarks/results/decoding-<date>.csv and .md
    python -m benchmarks --quick      the same code on tiny sizes in seconds, to check that the
                                      harness runs (with --gpu on a CPU-only machine: the GPU
                                      suite's loops on the CPU); writes nothing without --out.
                                      Its FlexAttention rows run eagerly, without compiling.
    python -m benchmarks --threads 1  any suite on that many CPU threads (default: torch's, one
                                      per core); the results record the thread count

Timings are medians of :func:`attention.measure.compare`'s interleaved rounds; ratios between
candidates come from the same call. Peak memory is :func:`attention.measure.peak_memory` in a
fresh process per case (:mod:`benchmarks.memory`). Nothing here asserts a timing: the goals are
reported, met or not.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from . import context_parallel, cpu, decoding, flash_triton, gpu
from . import flex as flex_suite
from . import serving as serving_suite
from .memory import METHOD
from .report import CsvWriter, provenance, results_path, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--gpu", action="store_true", help="run the GPU suite (needs CUDA)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the harness")
    parser.add_argument("--flex", action="store_true", help="only the FlexAttention rows")
    parser.add_argument(
        "--generation", action="store_true", help="only the generation (KV cache) rows"
    )
    parser.add_argument("--tiled", action="store_true", help="only the tiled_attention rows")
    parser.add_argument(
        "--triton", action="store_true", help="the Triton kernel's rows (needs CUDA)"
    )
    parser.add_argument("--serving", action="store_true", help="only the serving rows")
    parser.add_argument(
        "--decoding", action="store_true", help="only the decoding-step rows (every variant)"
    )
    parser.add_argument("--out", type=Path, help="results folder (default: benchmarks/results)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's, all the cores)")
    parser.add_argument("--rounds", type=int, default=7, help="CPU: interleaved rounds")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="CPU: s per round")
    parser.add_argument("--budget-s", type=float, default=420.0, help="GPU: time budget in s")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)  # the provenance and the memory children follow
    if args.gpu or args.triton:
        return run_gpu(args)
    if args.generation:
        return run_generation(args)
    if args.decoding:
        return run_decoding(args)
    if args.tiled:
        return run_tiled(args)
    if args.serving:
        return run_serving(args)
    return run_flex(args) if args.flex else run_cpu(args)


def run_cpu(args) -> int:
    prov = cpu_provenance("CPU suite")
    shapes = cpu.QUICK_SHAPES if args.quick else cpu.SHAPES
    rounds, min_run_time = (1, 0.05) if args.quick else (args.rounds, args.min_run_time)
    start = time.monotonic()
    module_rows = cpu.run_modules(shapes, rounds=rounds, min_run_time=min_run_time)
    tiled_rows = tiled_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    cp_case = context_parallel.QUICK_CASE if args.quick else context_parallel.CASE
    cp_rows = context_parallel.run_context_parallel(cp_case)
    generation_case = cpu.QUICK_GENERATION_CASE if args.quick else cpu.GENERATION_CASE
    generation_rows = cpu.run_generation(generation_case, rounds=1 if args.quick else 3)
    decoding_rows = decoding_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    flex_rows = flex_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    serving_rows = serving_rows_of(args)
    elapsed = time.monotonic() - start

    matmul = [r["matmul_gflops"] for r in module_rows]
    text = [
        *heading("CPU", prov, f"{rounds} interleaved rounds", elapsed),
        "## Multi-head attention modules",
        "",
        f"Square fp32 matmul ({cpu.MATMUL_N}^3), timed in the same rounds as each row: "
        f"{min(matmul):.0f} to {max(matmul):.0f} GFLOP/s. FLOPs: 8 N L E^2 for the projections "
        "plus 4 N H L S D for attention; a training step counts 3 forward passes. "
        "`of matmul`: the module's GFLOP/s over the matmul's in the same round, median over the "
        "rounds. `per round`: the lowest and highest time ratio to nn.MHA over the rounds; a "
        "range on one side of 1 is a real difference, one that straddles 1 is noise.",
        "",
        table(module_rows, cpu.MODULE_COLUMNS, markdown=True),
        "",
        *tiled_section(tiled_rows),
        "## Context parallelism",
        "",
        f"Every strategy of attention.distributed on 1, 2 and 4 local gloo processes, "
        f"{cp_rows[0]['case']}, float32, contiguous layout, not causal. Bytes sent by one rank "
        "(the largest over the ranks), counted from the tensors passed to the collectives, next "
        "to the formula (b = one rank's shard of K: ring 2(P-1)b forward and 2(P-1)b + 2Pb "
        "backward, all-gather 2(P-1)b each way, Ulysses 4(P-1)b/P each way); extra peak memory "
        "of one forward pass on one rank; forward time on one rank, with P processes sharing "
        f"this machine's {prov['cpu_count']} CPUs; output against single-process SDPA.",
        "",
        table(cp_rows, context_parallel.COLUMNS, markdown=True),
        "",
        *generation_section(generation_rows),
        *decoding.section(decoding_rows),
        *flex_section(flex_rows, args),
        *serving_suite.section(serving_rows, table),
        *goals_section(args, lambda: cpu.goals(module_rows, tiled_rows, generation_rows)),
    ]
    print("\n".join(text[2:]))
    record(
        args, "cpu",
        cpu.FIELDS + context_parallel.FIELDS + flex_suite.FIELDS + decoding.FIELDS
        + serving_suite.FIELDS, prov,
        module_rows + tiled_rows + generation_rows + decoding_rows + cp_rows + flex_rows
        + serving_rows, text,
    )  # fmt: skip
    return 0


def record(args, prefix: str, fields, prov: dict, rows: list[dict], text: list[str]) -> None:
    """Write ``rows`` to ``<prefix>-<date>.csv`` and the printed ``text`` beside it as ``.md``
    (in ``--out``, else benchmarks/results); a ``--quick`` run without ``--out`` keeps
    nothing."""
    if args.quick and not args.out:
        return
    writer = CsvWriter(results_path(prefix, args.out), fields, prov)
    for row in rows:
        writer.write(row)
    csv_path = writer.close()
    md_path = csv_path.with_suffix(".md")
    md_path.write_text("\n".join(text) + "\n")
    print(f"\nwrote {csv_path} and {md_path}")


def flex_rows_of(args, *, rounds: int, min_run_time: float) -> list[dict]:
    """The FlexAttention rows: compiled at the full sizes, eager only with --quick."""
    return flex_suite.run_flex(
        flex_suite.QUICK_LENGTHS if args.quick else flex_suite.LENGTHS,
        flex_suite.QUICK_SHAPE if args.quick else flex_suite.SHAPE,
        flex_suite.QUICK_WINDOW if args.quick else flex_suite.WINDOW,
        rounds=rounds,
        min_run_time=min_run_time,
        compiled=not args.quick,
    )


def flex_section(rows: list[dict], args) -> list[str]:
    """The Markdown section of the FlexAttention rows."""
    window = flex_suite.QUICK_WINDOW if args.quick else flex_suite.WINDOW
    return [
        "## FlexAttention: a sliding window",
        "",
        f"A causal sliding window of {window} keys, float32, timed in the same rounds: SDPA "
        "with the equivalent bool mask (`sdpa mask`, the baseline of `time / sdpa mask`), "
        "`torch.compile(flex_attention, dynamic=False)` with the window's block mask, the same "
        "call uncompiled (unfused), and SDPA's full causal attention. `GFLOP`: 4 D per "
        "(query, key) pair the mask allows (the whole triangle for `sdpa causal`); SDPA with a "
        "mask computes every pair anyway. `compile s`: the first call of the compiled function, "
        "and whether inductor's FX graph cache already held the kernel."
        + (" (--quick: not compiled.)" if args.quick else ""),
        "",
        table(rows, flex_suite.COLUMNS, markdown=True),
        "",
    ]


def tiled_rows_of(args, *, rounds: int, min_run_time: float) -> list[dict]:
    """tiled_attention against SDPA and the reference: inference, then training steps."""
    quick = args.quick
    rows = cpu.run_tiled(
        cpu.QUICK_TILED_CASE if quick else cpu.TILED_CASE, rounds=rounds, min_run_time=min_run_time
    )
    return rows + cpu.run_tiled_training(
        cpu.QUICK_TRAINING_SHAPE if quick else cpu.TRAINING_SHAPE,
        cpu.QUICK_TRAINING_LENGTHS if quick else cpu.TRAINING_LENGTHS,
        rounds=rounds,
        min_run_time=min_run_time,
    )


def tiled_section(rows: list[dict]) -> list[str]:
    """The Markdown section of the tiled_attention rows."""
    return [
        "## tiled_attention",
        "",
        "float32. `inference`: one call under `torch.inference_mode()`; `training`: one forward "
        "and backward pass to the queries, keys and values (a fixed random gradient of the "
        "output). The three paths are timed in the same rounds; `time / sdpa` is the ratio of "
        "the medians, `per round` the lowest and highest ratio over the rounds. GFLOP/s: "
        "4 N H L S D for a forward pass, 3.5 times that for a training step (FlashAttention-2's "
        "count). `math` (SDPA's math backend) is measured for memory only. "
        f"Extra peak memory: {METHOD}; for a training step it includes the three gradients "
        "returned.",
        "",
        table(rows, cpu.TILED_COLUMNS, markdown=True),
        "",
    ]


def run_tiled(args) -> int:
    """Only the tiled_attention rows and their goals: ``python -m benchmarks --tiled``."""
    prov = cpu_provenance("tiled_attention rows")
    rounds, min_run_time = (1, 0.05) if args.quick else (args.rounds, args.min_run_time)
    start = time.monotonic()
    rows = tiled_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    elapsed = time.monotonic() - start
    text = [
        *heading("tiled_attention", prov, f"{rounds} interleaved rounds", elapsed),
        *tiled_section(rows),
        *goals_section(args, lambda: cpu.tiled_goals(rows)),
    ]
    print("\n".join(text[2:]))
    record(args, "tiled", cpu.FIELDS, prov, rows, text)
    return 0


def cpu_provenance(what: str) -> dict:
    """The CPU run's provenance, printed in one line that names ``what`` runs."""
    prov = provenance(torch.device("cpu"))
    print(
        f"{what} on {prov['device']}: {prov['threads']} threads, torch {prov['torch']}, "
        f"{prov['date']}, load average {prov['load_1min']}"
    )
    return prov


def heading(suite: str, prov: dict, medians_of: str, elapsed: float, note: str = "") -> list[str]:
    """The title and provenance lines of a suite's Markdown results (written after the run:
    the load average of its end is read here)."""
    spent = f"{elapsed:.0f} s in all" + (f", {note}" if note else "")
    ended = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "-"
    return [
        f"# {suite} benchmark, {prov['date']}",
        "",
        f"{prov['device']}, {prov['threads']} threads of {prov['cpu_count']} CPUs, torch "
        f"{prov['torch']}, attention {prov['attention']}, Python {prov['python']}, float32. "
        f"Medians of {medians_of}; {spent}; 1-minute load average {prov['load_1min']} when "
        f"the run started, {ended} when it ended.",
        "",
    ]


def goals_section(args, goals) -> list[str]:
    """The Markdown section of the goals that ``goals()`` judges, or why --quick judges none."""
    if args.quick:
        return ["## Goals", "", "(not judged: the goals are about the full sizes, not --quick's)"]
    return ["## Goals", ""] + [
        f"- {'met' if ok else 'MISSED'}: {goal} ({numbers})" for goal, ok, numbers in goals()
    ]


def run_flex(args) -> int:
    """Only the FlexAttention rows: ``python -m benchmarks --flex``."""
    prov = cpu_provenance("FlexAttention rows")
    rounds, min_run_time = (1, 0.05) if args.quick else (args.rounds, args.min_run_time)
    start = time.monotonic()
    rows = flex_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    elapsed = time.monotonic() - start
    text = [
        *heading(
            "FlexAttention", prov, f"{rounds} interleaved rounds", elapsed, "compiles included"
        ),
        *flex_section(rows, args),
    ]
    print("\n".join(text[2:]))
    record(args, "flex", cpu.FIELDS + flex_suite.FIELDS, prov, rows, text)
    return 0


def generation_section(rows: list[dict]) -> list[str]:
    """The Markdown section of the generation rows."""
    return [
        "## Generation with and without the KV cache",
        "",
        "Greedy, one sequence; the median of the rounds for one whole generation, the two "
        "candidates timed in turn in every round. `cache bytes`: what the preallocated KVCache "
        "holds (float32).",
        "",
        table(rows, cpu.GENERATION_COLUMNS, markdown=True),
        "",
    ]


def run_generation(args) -> int:
    """Only the generation rows and their goal: ``python -m benchmarks --generation``."""
    prov = cpu_provenance("Generation rows")
    case = cpu.QUICK_GENERATION_CASE if args.quick else cpu.GENERATION_CASE
    rounds = 1 if args.quick else max(3, args.rounds)
    start = time.monotonic()
    rows = cpu.run_generation(case, rounds=rounds)
    elapsed = time.monotonic() - start
    text = [
        *heading("Generation", prov, f"{rounds} rounds", elapsed),
        *generation_section(rows),
        *goals_section(args, lambda: cpu.generation_goals(rows)),
    ]
    print("\n".join(text[2:]))
    record(args, "generation", cpu.FIELDS, prov, rows, text)
    return 0


def serving_rows_of(args) -> list[dict]:
    """The serving rows: page 16's model, or a tiny untrained one with --quick."""
    quick = args.quick
    case = serving_suite.QUICK_CASE if quick else serving_suite.CASE
    return serving_suite.run_serving(case, quick=quick, rounds=1 if quick else max(3, args.rounds))


def run_serving(args) -> int:
    """Only the serving rows: ``python -m benchmarks --serving``."""
    prov = cpu_provenance("Serving rows")
    start = time.monotonic()
    rows = serving_rows_of(args)
    elapsed = time.monotonic() - start
    rounds = 1 if args.quick else max(3, args.rounds)
    text = [
        *heading("Serving", prov, f"{rounds} interleaved rounds", elapsed),
        *serving_suite.section(rows, table),
    ]
    print("\n".join(text[2:]))
    record(args, "serving", cpu.FIELDS + serving_suite.FIELDS, prov, rows, text)
    return 0


def decoding_rows_of(args, *, rounds: int, min_run_time: float) -> list[dict]:
    case = decoding.QUICK_CASE if args.quick else decoding.CASE
    return decoding.run_decoding(case, rounds=rounds, min_run_time=min_run_time)


def run_decoding(args) -> int:
    """Only the decoding-step rows: ``python -m benchmarks --decoding``."""
    prov = cpu_provenance("Decoding-step rows")
    rounds, min_run_time = (1, 0.05) if args.quick else (args.rounds, args.min_run_time)
    start = time.monotonic()
    rows = decoding_rows_of(args, rounds=rounds, min_run_time=min_run_time)
    elapsed = time.monotonic() - start
    text = [
        *heading("Decoding", prov, f"{rounds} interleaved rounds", elapsed),
        *decoding.section(rows),
    ]
    print("\n".join(text[2:]))
    record(args, "decoding", cpu.FIELDS + decoding.FIELDS, prov, rows, text)
    return 0


def run_gpu(args) -> int:
    """The GPU suite (``--gpu``) or the Triton kernel's rows (``--triton``)."""
    suite = "Triton kernel rows" if args.triton else "GPU suite"
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif args.quick:
        device = torch.device("cpu")
        print(f"no CUDA device: the {suite}' loops run on the CPU at tiny sizes (a dry run)")
    else:
        print(
            f"The {suite} needs a CUDA device, and this torch ({torch.__version__}) sees none.\n"
            "Run `python -m benchmarks` for the CPU suite, or add `--quick` to check the "
            f"{suite}' code on the CPU.",
            file=sys.stderr,
        )
        return 2
    prov = provenance(device)
    if args.triton:
        import attention.flash_triton  # noqa: F401  (first: without a GPU it turns the interpreter on)

        prov |= flash_triton.versions()
    print(f"{suite} on {prov['device']}: torch {prov['torch']}, CUDA {prov['cuda']}")
    # Rows are written as they come, so a run cut short keeps what it measured.
    out = args.out or (Path(tempfile.gettempdir()) if args.quick else None)
    prefix = "triton" if args.triton else "gpu"
    path = results_path(prefix if device.type == "cuda" else f"{prefix}-dry-run", out)
    module = flash_triton if args.triton else gpu
    writer = CsvWriter(path, module.FIELDS, prov)
    rows = []

    def write(row):
        rows.append(row)
        writer.write(row)

    run = flash_triton.run_triton if args.triton else gpu.run_gpu
    run(device, budget_s=args.budget_s, quick=args.quick, write=write)
    writer.close()
    shown = [r for r in rows if r.get("status") == "ok" and (args.triton or gpu.summarised(r))]
    print(table(shown, module.SUMMARY_COLUMNS))
    statuses = sorted({r["status"] for r in rows})
    print(", ".join(f"{s}: {sum(r['status'] == s for r in rows)}" for s in statuses) + " rows")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
