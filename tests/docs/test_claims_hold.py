"""The pages that train or sample keep their claims under another seed, CPU and thread count.

The build runs every page once, with the seed 0 and this CPU's own vector instructions. Here
pages whose numbers follow the rounding (they train or sample a model) run once more as separate
scripts, as a reader runs a download, each under ONE other setting: another ``ATTENTION_SEED``,
another CPU capability and 1 or 2 threads. The capabilities rotate over the pages, so that every
capability this machine has is covered by some page in every run, and each page gets another
seed. Any failing claim fails the test with the page's output.

To keep ``make test`` short, a run takes half of those pages (``tests/pages.py``'s
:func:`sample`): the pages in even places of the list one day, the odd ones the next (the day
of the year decides), so two days of runs cover them all. ``ATTENTION_CLAIMS_SAMPLE=all`` runs
every one, ``ATTENTION_CLAIMS_SAMPLE=0`` or ``1`` one half. ``make robust`` runs the full sweep
(every page, seeds 0-9, every capability; then the pages that train on the held-out seeds) and
tabulates the margins in ``tests/docs/claims.md``; this file checks that table too: no margin
used up, no failed run, and every page that trains run on every held-out seed under every
capability.
"""

from __future__ import annotations

import os

import pytest
import sweep
from pages import sample

TRAINING_PAGES = [page for page in sweep.pages() if sweep.trains(page)]


SAMPLED_PAGES = sample(TRAINING_PAGES, 2, os.environ.get("ATTENTION_CLAIMS_SAMPLE"))


def settings(n_pages: int, capabilities: list[str]) -> list[tuple[int, str, int]]:
    """(seed, capability, threads) for each of ``n_pages`` pages: the capabilities in turn,
    the lowest first (never the one a modern CPU's build ran with), seeds 1-9 in turn (never
    the build's 0), and 1 and 2 threads in turn."""
    return [
        (1 + (i * 4) % 9, capabilities[i % len(capabilities)], 1 + i % 2) for i in range(n_pages)
    ]


CAPABILITIES = sweep.supported_capabilities()
SETTINGS = dict(zip(SAMPLED_PAGES, settings(len(SAMPLED_PAGES), CAPABILITIES), strict=True))


def test_the_pages_that_train_are_found():
    names = [page.name for page in TRAINING_PAGES]
    assert any(name.startswith("10_classifier") for name in names), names
    assert any(name.startswith("12_decoder") for name in names), names


def test_every_capability_is_covered_and_no_run_repeats_the_build():
    chosen = list(SETTINGS.values())
    assert {capability for _, capability, _ in chosen} == set(CAPABILITIES)
    assert all(seed != 0 for seed, _, _ in chosen)
    assert {threads for _, _, threads in chosen} == {1, 2}


def test_the_margins_table_covers_every_page_that_trains():
    table = sweep.CLAIMS_MD.read_text()
    missing = [page.name for page in TRAINING_PAGES if f"| {page.name} |" not in table]
    assert not missing, f"run `make robust`: {sweep.CLAIMS_MD.name} has no claims of {missing}"
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 0")]
    rows += [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 1")]
    rows += [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 2")]
    weak = [(page.strip(), claim.strip()) for page, claim, *_, margin, _ in rows
            if float(margin) <= 0]  # fmt: skip
    assert rows and not weak, f"claims with no margin left in {sweep.CLAIMS_MD.name}: {weak}"
    assert "## Failed runs" not in table, f"{sweep.CLAIMS_MD.name} records failed runs"


def test_every_page_that_trains_passed_the_held_out_seeds_on_every_capability():
    table = sweep.CLAIMS_MD.read_text()
    assert "## Held out" in table, f"{sweep.CLAIMS_MD.name} has no held-out runs"
    held_out = table.split("## Held out", 1)[1]
    assert "failed. Runs per page" in held_out and ", 0 failed." in held_out
    seeds_run = {}
    for line in held_out.splitlines():
        if line.startswith("- ") and ".py: " in line:
            page, coverage = line[2:].split(": ", 1)
            for part in coverage[coverage.index("(") + 1 : -1].split("; "):
                capability, seeds = part.split(": seeds ")
                seeds_run[page, capability] = {int(seed) for seed in seeds.split(", ")}
    short = [
        (page.name, capability)
        for page in TRAINING_PAGES
        for capability in sweep.CAPABILITIES
        if seeds_run.get((page.name, capability)) != set(sweep.HELD_OUT_SEEDS)
    ]
    assert not short, f"pages not run on every held-out seed (rerun with --held-out): {short}"


@pytest.mark.timeout(sweep.PAGE_TIMEOUT + 60)
def test_the_two_halves_take_every_page_once():
    halves = sample(TRAINING_PAGES, 2, "0") + sample(TRAINING_PAGES, 2, "1")
    assert sorted(halves) == sorted(TRAINING_PAGES)
    assert len(SAMPLED_PAGES) >= len(CAPABILITIES), "too few pages to cover every capability"


@pytest.mark.parametrize("page", SAMPLED_PAGES, ids=lambda p: p.stem)
def test_claims_hold(page):
    seed, capability, threads = SETTINGS[page]
    run = sweep.run_page(page, seed=seed, capability=capability, threads=threads)
    assert run.ok, f"{run.describe()} failed:\n{run.output[-4000:]}"
    assert run.claims, f"{page.name} trains but checks no claim with attention.repro.claim"
