"""The pages that train or sample keep their claims under other seeds, CPUs and thread counts.

The build runs every page once, with the seed 0 and this CPU's own vector instructions. Here each
page whose numbers follow the rounding (it trains or samples a model) runs again as a separate
script, as a reader runs its download, under other ``ATTENTION_SEED`` values, each other CPU
capability this machine has, and 1 or 2 threads. Any failing claim fails the test with the page's
output. ``make robust`` runs the full sweep (seeds 0-9, every capability) and tabulates margins.
"""

from __future__ import annotations

import pytest
import sweep

TRAINING_PAGES = [page for page in sweep.pages() if sweep.trains(page)]


def _settings() -> list[tuple[int, str, int]]:
    """(seed, capability, threads): two seeds other than the build's, on every capability."""
    capabilities = sweep.supported_capabilities()
    # The lowest capability first: it is never the one the build ran with on a modern CPU.
    settings = [(3, capabilities[0], 1), (7, capabilities[-1], 2)]
    settings += [(5, capability, 1) for capability in capabilities[1:-1]]
    return settings


SETTINGS = _settings()


def test_the_pages_that_train_are_found():
    names = [page.name for page in TRAINING_PAGES]
    assert any(name.startswith("08_") for name in names), names
    assert any(name.startswith("11_") for name in names), names


def test_the_margins_table_covers_every_page_that_trains():
    table = sweep.CLAIMS_MD.read_text()
    missing = [page.name for page in TRAINING_PAGES if f"| {page.name} |" not in table]
    assert not missing, f"run `make robust`: {sweep.CLAIMS_MD.name} has no claims of {missing}"
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 0")]
    rows += [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 1")]
    weak = [(page.strip(), claim.strip()) for page, claim, *_, margin, _ in rows
            if float(margin) <= 0]  # fmt: skip
    assert rows and not weak, f"claims with no margin left in {sweep.CLAIMS_MD.name}: {weak}"
    assert "## Failed runs" not in table, f"{sweep.CLAIMS_MD.name} records failed runs"


@pytest.mark.timeout(sweep.PAGE_TIMEOUT + 60)
@pytest.mark.parametrize("seed, capability, threads", SETTINGS, ids=lambda v: str(v))
@pytest.mark.parametrize("page", TRAINING_PAGES, ids=lambda p: p.stem)
def test_claims_hold(page, seed, capability, threads):
    run = sweep.run_page(page, seed=seed, capability=capability, threads=threads)
    assert run.ok, f"{run.describe()} failed:\n{run.output[-4000:]}"
    assert run.claims, f"{page.name} trains but checks no claim with attention.repro.claim"
