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


@pytest.mark.parametrize("flags", [["--quick"], ["--gpu", "--quick"]], ids=["cpu", "gpu-dry-run"])
def test_quick_run_writes_a_csv_with_provenance(tmp_path, flags):
    _run_benchmarks(*flags, "--out", str(tmp_path))
    (table,) = tmp_path.glob("*.csv")
    rows = list(csv.DictReader(table.open()))
    assert rows, f"{table.name} has no rows"
    for column in PROVENANCE:
        assert all(row[column] for row in rows), f"{table.name}: empty {column!r} in some row"
    if "--gpu" not in flags:  # the CPU suite also runs context parallelism on 1, 2, 4 processes
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


def test_round_ratios_pair_the_rounds():
    from benchmarks.timing import Timing, round_ratios

    candidate = Timing(0.0, 0.0, 3, round_medians=(2.0, 3.0, 5.0))
    baseline = Timing(0.0, 0.0, 3, round_medians=(1.0, 4.0, 5.0))
    assert round_ratios(candidate, baseline) == [2.0, 0.75, 1.0]
    with pytest.raises(ValueError):  # rounds of two different runs cannot be paired
        round_ratios(candidate, Timing(0.0, 0.0, 1, round_medians=(1.0,)))


def test_mha_flops_counts_projections_attention_and_recomputation():
    from benchmarks.timing import mha_flops

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
    tiled_rows = [
        {
            "impl": "tiled",
            "case": "L=4096",
            "ratio_to_sdpa": 1.4,
            "memory_vs_reference": 0.02,
            "peak_extra_mib": 20.0,
        }
    ]
    (speed, speed_ok, speed_numbers), (roof, roof_ok, roof_numbers), *tiled = cpu.goals(
        module_rows, tiled_rows
    )
    assert not speed_ok and "1.08, 1.03-1.13 over the rounds (L=128, inference)" in speed_numbers
    assert not roof_ok and roof_numbers.startswith("inference 75%; training 66% (")
    assert [ok for _, ok, _ in tiled] == [True, True]


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
