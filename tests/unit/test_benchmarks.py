"""The benchmark harness's code paths run and record provenance; timings are never judged here."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROVENANCE = ("device", "torch", "threads", "date")


def _run_benchmarks(*args: str) -> None:
    """``python -m benchmarks *args`` in the repository; fails the test on a non-zero exit."""
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


@pytest.mark.parametrize(
    "flags",
    [["--quick"], ["--gpu", "--quick"], ["--triton", "--quick"]],
    ids=["cpu", "gpu-dry-run", "triton-dry-run"],
)
def test_quick_run_writes_a_csv_with_provenance(tmp_path, flags):
    _run_benchmarks(*flags, "--out", str(tmp_path))
    (table,) = tmp_path.glob("*.csv")
    rows = list(csv.DictReader(table.open()))
    assert rows, f"{table.name} has no rows"
    for column in PROVENANCE:
        assert all(row[column] for row in rows), f"{table.name}: empty {column!r} in some row"
    if "--triton" in flags:  # the kernel, SDPA's flash backend and tiled_attention, checked equal
        assert {row["impl"] for row in rows} == {"matmul", "triton", "flash", "tiled"}
        assert all(row["triton"] and float(row["max_error"]) < 1e-2 for row in rows[1:])
    elif "--gpu" not in flags:  # the CPU suite also runs context parallelism on 1, 2, 4 processes
        parallel = [row for row in rows if row["suite"] == "context_parallel"]
        assert {(row["impl"], row["P"]) for row in parallel} == {
            (s, p) for s in ("ring", "all_gather", "ulysses") for p in ("1", "2", "4")
        }
        for row in parallel:
            for direction in ("forward", "backward"):
                sent, formula = row[f"sent_{direction}_mib"], row[f"formula_{direction}_mib"]
                assert float(sent) == float(formula), row
            assert float(row["max_error"]) < 1e-5, row
        flex_rows = [row for row in rows if row["suite"] == "flex"]  # eager only with --quick
        assert {row["impl"] for row in flex_rows} == {"sdpa mask", "flex eager", "sdpa causal"}
        assert all(float(row["ratio_to_sdpa"]) == 1.0 for row in flex_rows if "mask" in row["impl"])


def test_generation_alone_writes_its_rows_and_table(tmp_path):
    _run_benchmarks("--generation", "--quick", "--out", str(tmp_path))
    (table,) = tmp_path.glob("generation-*.csv")
    rows = list(csv.DictReader(table.open()))
    assert {row["suite"] for row in rows} == {"generation"}
    assert {row["impl"] for row in rows} == {
        f"H_kv={h} {kind}" for h in (8, 2, 1) for kind in ("cache", "no cache")
    }
    for column in PROVENANCE:
        assert all(row[column] for row in rows), f"{table.name}: empty {column!r} in some row"
    text = table.with_suffix(".md").read_text()
    assert "## Generation with and without the KV cache" in text and "not judged" in text


def test_serving_alone_writes_memory_throughput_and_sharing_rows(tmp_path):
    _run_benchmarks("--serving", "--quick", "--out", str(tmp_path))
    (table,) = tmp_path.glob("serving-*.csv")
    rows = {row["impl"]: row for row in csv.DictReader(table.open())}
    assert set(rows) == {
        "memory: preallocated", "memory: paged", "throughput: continuous",
        "throughput: static", "sharing: shared", "sharing: apart",
    }  # fmt: skip
    paged, preallocated = rows["memory: paged"], rows["memory: preallocated"]
    assert paged["token_bytes"] == preallocated["token_bytes"]
    assert int(paged["token_bytes"]) <= int(paged["reserved_bytes"])
    assert int(paged["reserved_bytes"]) < int(preallocated["reserved_bytes"])
    assert int(rows["sharing: shared"]["blocks"]) < int(rows["sharing: apart"]["blocks"])
    assert "## Serving: paged cache and continuous batching" in table.with_suffix(".md").read_text()


def test_tiled_alone_writes_inference_and_training_rows_with_memory(tmp_path):
    from benchmarks import cpu

    _run_benchmarks("--tiled", "--quick", "--out", str(tmp_path))
    (table,) = tmp_path.glob("tiled-*.csv")
    rows = list(csv.DictReader(table.open()))
    assert {row["suite"] for row in rows} == {"tiled"}
    (L,) = cpu.QUICK_TRAINING_LENGTHS
    training = [row for row in rows if row["mode"] == "training"]
    assert {(row["impl"], row["L"]) for row in training} == {
        (path, str(L)) for path in ("sdpa", "tiled", "reference")
    }
    inference = {row["impl"] for row in rows if row["mode"] == "inference"}
    assert inference == {"sdpa", "math", "tiled", "reference"}
    for row in rows:
        assert float(row["peak_extra_mib"]) > 0, row
        for column in PROVENANCE:
            assert row[column], f"{table.name}: empty {column!r}"
        if row["impl"] != "math":  # measured for memory only
            assert float(row["median_ms"]) > 0 and row["ratio_round_min"], row
    reference = [row for row in rows if row["impl"] == "reference"]
    assert all(float(row["memory_vs_reference"]) == 1.0 for row in reference)
    text = table.with_suffix(".md").read_text()
    assert "## tiled_attention" in text and "not judged" in text


def test_memory_child_measures_a_training_step_with_the_package_meter():
    from benchmarks.memory import peak_extra_bytes

    inference = peak_extra_bytes("reference", 1, 2, 512, 512, 16)
    training = peak_extra_bytes("reference", 1, 2, 512, 512, 16, backward=True)
    weights = 2 * 512 * 512 * 4  # one (H, L, S) float32 tensor: 2 MiB
    # Inference holds the scores and the weights at most; a training step keeps the weights
    # for the backward and builds their gradient too.
    assert inference >= weights and training > inference


def test_round_ratios_pair_the_rounds():
    from attention.measure import Timing, round_ratios

    candidate = Timing(0.0, 0.0, 3, round_medians=(2.0, 3.0, 5.0))
    baseline = Timing(0.0, 0.0, 3, round_medians=(1.0, 4.0, 5.0))
    assert round_ratios(candidate, baseline) == [2.0, 0.75, 1.0]
    with pytest.raises(ValueError):  # rounds of two different runs cannot be paired
        round_ratios(candidate, Timing(0.0, 0.0, 1, round_medians=(1.0,)))


def test_mha_flops_counts_projections_attention_and_recomputation():
    from benchmarks.workload import mha_flops

    N, L, E, H = 2, 16, 8, 2
    projections = 4 * 2 * N * L * E * E  # four (E, E) matmuls on N L rows
    attention = 4 * N * H * L * L * (E // H)  # Q K^T and P V
    assert mha_flops(N, L, L, E, H) == projections + attention
    assert mha_flops(N, L, L, E, H, training=True) == 3 * (projections + attention)
    recomputing = mha_flops(N, L, L, E, H, training=True, recompute=True)
    assert recomputing == 3 * projections + 3.5 * attention


def test_goals_are_judged_from_the_rows():
    from benchmarks import cpu

    def fused(L, mode, ratio, frac):
        return {
            "impl": cpu.FUSED,
            **dict(N=2, L=L, E=64, H=4),
            "case": f"L={L}",
            "mode": mode,
            "ratio_to_torch": ratio,
            "ratio_round_min": ratio - 0.05,
            "ratio_round_max": ratio + 0.05,
            "frac_matmul": frac,
        }

    module_rows = [fused(128, "inference", 1.08, 0.7), fused(2048, "inference", 0.5, 0.75)]
    module_rows.append(fused(2048, "training", 0.9, 0.66))

    def tiled(L, mode, ratio, memory):
        return {
            "impl": "tiled",
            "case": f"L={L}",
            "L": L,
            "mode": mode,
            "ratio_to_sdpa": ratio,
            "ratio_round_min": ratio - 0.1,
            "ratio_round_max": ratio + 0.1,
            "memory_vs_reference": memory,
            "peak_extra_mib": None if memory is None else 1000 * memory,
        }

    tiled_rows = [tiled(4096, "inference", 1.4, 0.02), tiled(1024, "training", 3.0, 0.3)]
    tiled_rows += [tiled(2048, "training", 2.1, 0.2), tiled(4096, "training", 1.9, 0.05)]
    tiled_rows.append({**tiled(4096, "training", 1.0, 1.0), "impl": "reference"})
    (speed, speed_ok, speed_numbers), (roof, roof_ok, roof_numbers), *tiled_goals = cpu.goals(
        module_rows, tiled_rows
    )
    assert not speed_ok and "1.08, 1.03-1.13 over the rounds (L=128, inference)" in speed_numbers
    assert not roof_ok and roof_numbers.startswith("inference 75%; training 66% (")
    # Inference time and memory met; training time judged at L = 2048 (missed), training
    # memory at the longest L (met), each with its numbers.
    assert [ok for _, ok, _ in tiled_goals] == [True, True, False, True]
    assert "2.10x, 2.00-2.20 over the rounds (L=2048)" in tiled_goals[2][2]
    assert tiled_goals[3][2] == "5.0%: 50 MiB of 1000 MiB (L=4096)"
    # A memory that could not be measured is reported, never counted as met.
    unmeasured = tiled(4096, "inference", 1.0, None)
    (_, time_ok, _), (_, memory_ok, numbers) = cpu.tiled_goals([unmeasured])
    assert time_ok and not memory_ok and numbers.startswith("not measured")


@pytest.mark.cpu_only("runs a page as a script on the CPU")
def test_run_pages_keeps_a_pages_output_and_figures(tmp_path):
    page = tmp_path / "01_tiny.py"
    page.write_text(
        "import matplotlib.pyplot as plt\n"
        "from attention.repro import default_device\n"
        "print('device', default_device())\n"
        "plt.plot([0, 1])\nplt.show()\nplt.plot([1, 0])\nplt.show()\n"
    )
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_pages", "--device", "cpu", "--out", str(out),
         str(page)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    text = (out / "01_tiny.txt").read_text()
    assert text.startswith("# 01_tiny.py on cpu") and "device cpu" in text
    assert sorted(p.name for p in out.glob("*.png")) == ["01_tiny-1.png", "01_tiny-2.png"]


def test_a_failing_page_is_reported_and_counted(tmp_path):
    page = tmp_path / "02_fails.py"
    page.write_text("raise RuntimeError('this page fails')\n")
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_pages", "--device", "cpu", "--out", str(tmp_path),
         str(page)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1 and "FAILED" in run.stdout
    assert "this page fails" in (tmp_path / "02_fails.txt").read_text()


def test_the_gpu_session_script_parses():
    run = subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_session.sh")])
    assert run.returncode == 0


def test_generation_rows_report_tokens_per_second_and_cache_bytes():
    from benchmarks import cpu

    prompt, new, V, E, H, layers = cpu.QUICK_GENERATION_CASE
    rows = cpu.run_generation(cpu.QUICK_GENERATION_CASE, rounds=1, log=lambda line: None)
    assert [r["impl"] for r in rows] == [
        f"H_kv={h} {kind}" for h in (H, H // 4, 1) for kind in ("cache", "no cache")
    ]
    for row in rows:
        assert row["tokens_per_s"] > 0 and row["speedup"] > 0
        if "no cache" not in row["impl"]:
            kv_heads = int(row["impl"].split()[0].removeprefix("H_kv="))
            # 2 (keys and values) x layers x N x H_kv x max_len x D x 4 bytes (float32)
            assert row["cache_bytes"] == 2 * layers * 1 * kv_heads * (prompt + new) * (E // H) * 4


def test_generation_goal_is_judged_on_the_slowest_cache_speed_up():
    from benchmarks import cpu

    def row(impl, speedup):
        return {"impl": impl, "speedup": speedup, "case": "prompt=512"}

    rows = [row("H_kv=8 cache", 7.0), row("H_kv=8 no cache", 7.0), row("H_kv=1 cache", 4.5)]
    ((goal, ok, numbers),) = cpu.generation_goals(rows)
    assert not ok and numbers.startswith("H_kv=8 7.0x; H_kv=1 4.5x")
    assert cpu.generation_goals([row("H_kv=8 cache", 6.0)])[0][1]


def test_decoding_alone_writes_a_row_per_variant_and_length_with_counted_bytes(tmp_path):
    from benchmarks import decoding

    _run_benchmarks("--decoding", "--quick", "--out", str(tmp_path))
    (table,) = tmp_path.glob("decoding-*.csv")
    rows = list(csv.DictReader(table.open()))
    lengths, E, H, layers = decoding.QUICK_CASE
    assert {(row["impl"], row["S"]) for row in rows} == {
        (name, str(S)) for name in decoding.VARIANTS for S in lengths
    }
    D = E // H
    per_token = {"multi-head": 2 * E, "grouped-query 2": 4 * D, "grouped-query 1": 2 * D,
                 "latent": 4 * D + D // 2}  # fmt: skip
    for row in rows:  # counted bytes: the state of S + 1 positions, 4 bytes an element
        S = int(row["S"])
        if row["impl"] == "linear":
            assert int(row["state_bytes"]) == (D * D + D) * H * layers * 4, row
        else:
            expected = per_token[row["impl"]] * layers * (S + 1) * 4
            assert int(row["state_bytes"]) == expected, row
        for column in PROVENANCE:
            assert row[column], f"{table.name}: empty {column!r}"
