"""The claims sweep's table: margins as attention.repro.claim measures them, judged against the
bound each claim has now."""

from __future__ import annotations

import json

import pytest
import sweep

from attention.repro import claim


@pytest.mark.parametrize(
    "value, above, below", [(0.97, 0.9, None), (0.05, None, 0.1), (0.5, 0.2, 0.6), (-2.0, -3.0, 0)]
)
def test_margin_is_the_one_claim_records(tmp_path, monkeypatch, value, above, below):
    path = tmp_path / "claims.jsonl"
    monkeypatch.setenv("ATTENTION_CLAIMS", str(path))
    claim("some claim", value, above=above, below=below)
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert sweep.margin(value, above, below) == pytest.approx(record["margin"], abs=1e-15)


def _record(value, above, seed):
    return {"page": "99_page.py", "claim": "accuracy", "value": value, "above": above,
            "below": None, "margin": sweep.margin(value, above, None), "seed": seed,
            "capability": "AVX2", "threads": 1}  # fmt: skip


def test_older_runs_are_judged_against_the_newest_bound():
    # the bound was loosened from 0.9 to 0.8 after the first two runs; the values did not move
    records = [_record(0.88, 0.9, 0), _record(0.95, 0.9, 1), _record(0.93, 0.8, 2)]
    judged = sweep.rejudged(records)
    assert [r["above"] for r in judged] == [0.8, 0.8, 0.8]
    assert [r["margin"] for r in judged] == pytest.approx([0.1, 0.1875, 0.1625])
    runs = [sweep.Run("99_page.py", r["seed"], "avx2", 1, 0, claims=[r]) for r in records]
    table = sweep.margins_table(runs, seeds=[0, 1, 2], capabilities=["avx2"])
    (row,) = [line for line in table.splitlines() if line.startswith("| 99_page.py")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2:] == ["> 0.8", "0.88 to 0.95", "3", "0.100", "seed 0, avx2, 1 thr"]


def test_held_out_runs_are_tabulated_apart_from_the_tuning_runs():
    # the tuning runs set the bound; a held-out seed that crosses it shows in its own table
    tuning = [_record(0.95, 0.9, 0), _record(0.97, 0.9, 1)]
    held = [_record(0.85, 0.9, sweep.HELD_OUT_SEEDS[0])]
    runs = [sweep.Run("99_page.py", r["seed"], "avx2", 1, 0, claims=[r]) for r in tuning + held]
    table = sweep.margins_table(runs, seeds=[0, 1], capabilities=["avx2"])
    head, held_out = table.split("## Held out")
    rows = [line for line in head.splitlines() if line.startswith("| 99_page.py")]
    assert [cell.strip() for cell in rows[0].strip("|").split("|")][3:5] == ["0.95 to 0.97", "2"]
    (row,) = [line for line in held_out.splitlines() if line.startswith("| 99_page.py")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:6] == ["0.85 to 0.85", "1", "-0.056"]
    assert str(sweep.HELD_OUT_SEEDS[0]) in held_out and "2 runs, 0 failed" in head


def test_the_held_out_seeds_never_set_a_bound():
    assert len(set(sweep.HELD_OUT_SEEDS)) == 20 and min(sweep.HELD_OUT_SEEDS) > 9
    with pytest.raises(SystemExit):
        sweep.main(["--seeds", f"{sweep.HELD_OUT_SEEDS[0]}", "--pages", "^$"])


def test_a_claim_the_page_no_longer_makes_is_left_out():
    source = (
        'claim("held-out accuracy", acc, above=0.9)\n'
        'claim(f"layer {layer}: share on the field", share, above=0.5)\n'
        "claim(name, value, below=1)\n"
    )
    made = sweep.made_claims(source)
    assert made.fullmatch("held-out accuracy") and made.fullmatch("layer 2: share on the field")
    assert not sweep.made_claims(source.replace("claim(name", "print(name")).fullmatch("other")
    assert not sweep.made_claims("print(1)\n").fullmatch("held-out accuracy")
    page = sweep.pages("^08_")[0]
    assert sweep.still_made(page.name, "float32: smallest error")
    assert not sweep.still_made(page.name, "largest / smallest other gradient")  # removed
    assert sweep.still_made("99_page.py", "accuracy")  # not a page: nothing to judge by


def test_a_carried_row_judged_against_a_bound_the_page_no_longer_has_is_left_out(tmp_path):
    old = tmp_path / "old.md"
    old.write_text(
        "| 99_page.py | accuracy | > 0.9 | 0.95 to 0.97 | 30 | 0.056 | seed 0, avx2, 1 thr |\n"
        "| 99_page.py | loss | < 0.5 | 0.1 to 0.2 | 30 | 0.600 | seed 1, avx2, 1 thr |\n"
    )
    rows = sweep.carried_rows([old], set(), {("99_page.py", "loss"): sweep.bound_text(None, 3.5)})
    assert len(rows) == 1 and "| accuracy |" in rows[0] and "(carried from old.md)" in rows[0]
    assert (
        sweep.bound_text(0.5, 2.5) == "> 0.5 and < 2.5"
        and sweep.bound_text(None, 1e-12) == "< 1e-12"
    )
