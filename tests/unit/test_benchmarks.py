"""The benchmark harness's code paths run and record provenance; timings are never judged here."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROVENANCE = ("device", "torch", "threads", "date")


@pytest.mark.parametrize("flags", [["--quick"], ["--gpu", "--quick"]], ids=["cpu", "gpu-dry-run"])
def test_quick_run_writes_a_csv_with_provenance(tmp_path, flags):
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", *flags, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (table,) = tmp_path.glob("*.csv")
    rows = list(csv.DictReader(table.open()))
    assert rows, f"{table.name} has no rows"
    for column in PROVENANCE:
        assert all(row[column] for row in rows), f"{table.name}: empty {column!r} in some row"
