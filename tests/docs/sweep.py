"""Run gallery pages as plain scripts under other seeds, CPU capabilities and thread counts.

A page's claims must hold for the model, not for one run: the site is built on machines nobody
here chooses, whose vector instructions round differently, and a trained model follows the
rounding. This module runs a page the way a reader runs its download (``python page.py``), with
``ATTENTION_SEED``, ``ATEN_CPU_CAPABILITY`` and the thread count set, and collects what
:func:`attention.repro.claim` records.

``make robust`` runs every page over seeds 0-9 and every capability this CPU has, and writes the
weakest margin of each claim to ``tests/docs/claims.md``::

    python tests/docs/sweep.py [--pages REGEX] [--seeds 0-9] [--jobs 2] [--log runs.jsonl]

Each finished run is appended to the ``--log`` file as it ends (one JSON line: the run and its
claims), so an interrupted sweep keeps what it did, and sweeps of different pages, made at
different times, combine into one table::

    python tests/docs/sweep.py --from-logs a.jsonl b.jsonl --out tests/docs/claims.md

A page that appears in several logs is taken from the newest log that has it, whole, so a page
changed and swept again replaces its older runs. ``--carry old.md`` keeps the rows of an earlier
table for the pages that no log's tuning runs cover, marked as carried, with the sweep they came
from. A claim whose bound changed between runs (its value computed as before) is judged in every
run against the bound of its newest run, the one the page has now; a claim the page no longer makes
(removed or renamed since) is left out, of the logs and of the carried rows alike, and so is a
carried row whose bound differs from the one this sweep's runs recorded for the claim.

**Held out.** Bounds are set from the tuning seeds 0-9, so those runs cannot also test them: a
new run falls outside the range of n earlier ones with probability about 2 / (n + 1) per claim.
``--held-out`` also runs every page that trains or samples on :data:`HELD_OUT_SEEDS`, twenty seeds
drawn once at random from a wide range and never used to set a bound, under every capability;
the table then shows the tuning runs and, in a second table, the weakest held-out margin of every
claim. ``make robust`` runs both.

``tests/docs/test_claims_hold.py`` runs half the pages that train or sample, each under one of these
settings in every ``make test``.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# tests/pages.py finds and runs the pages (the one home of that code).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pages as gallery_pages  # noqa: E402

ROOT = gallery_pages.ROOT
GALLERY = gallery_pages.GALLERY
CLAIMS_MD = Path(__file__).with_name("claims.md")

#: What marks a page that trains or samples a model: its claims depend on the rounding.
TRAINS = re.compile(r"\boptim\.|\btrain_\w*\(|\bfit_\w*\(|\.generate\(")
#: The CPU capabilities PyTorch dispatches to on x86; a CPU runs those it supports.
CAPABILITIES = ("default", "avx2", "avx512")
#: Seconds one page may take as a script before the run counts as failed.
PAGE_TIMEOUT = 300
#: The seeds that check the bounds and never set them: drawn once, by
#: ``sorted(random.Random(20261205).sample(range(10, 1_000_000), 20))``, kept as they came out.
HELD_OUT_SEEDS = (
    15173, 19911, 23810, 79486, 111164, 193385, 412553, 427667, 464339, 549755,
    583228, 594446, 653523, 667377, 687856, 716805, 761067, 860377, 862050, 960685,
)  # fmt: skip


def pages(pattern: str = "") -> list[Path]:
    """The gallery scripts whose file name matches ``pattern``, in learning-path order."""
    return gallery_pages.pages(pattern)


def trains(page: Path) -> bool:
    """Whether the page trains or samples a model (so its numbers follow the rounding)."""
    return bool(TRAINS.search(page.read_text()))


def supported_capabilities() -> list[str]:
    """The capabilities of :data:`CAPABILITIES` that this CPU runs.

    PyTorch accepts ``ATEN_CPU_CAPABILITY=avx512`` on any CPU and then dies with an illegal
    instruction where AVX-512 is missing, so each one is probed in a subprocess.
    """
    probe = "import torch; torch.randn(64, 64).softmax(-1).exp().sum().item()"
    found = []
    for capability in CAPABILITIES:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, timeout=120
        )
        if done.returncode == 0:
            found.append(capability)
    return found


@dataclass
class Run:
    """One page run as a script, and what came of it."""

    page: str
    seed: int
    capability: str
    threads: int
    returncode: int | None = None
    seconds: float = 0.0
    output: str = ""
    claims: list[dict] | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        return (
            f"{self.page} with ATTENTION_SEED={self.seed} "
            f"ATEN_CPU_CAPABILITY={self.capability} and {self.threads} thread(s)"
        )


def run_page(
    page: Path, *, seed: int, capability: str, threads: int, timeout: float = PAGE_TIMEOUT
) -> Run:
    """Run ``page`` as a reader would run its download, and collect its claims."""
    run = Run(page.name, seed, capability, threads)
    with tempfile.TemporaryDirectory() as tmp:
        claims_file = Path(tmp) / "claims.jsonl"
        env = gallery_pages.reader_env(
            ATTENTION_SEED=str(seed),
            ATEN_CPU_CAPABILITY=capability,
            ATTENTION_CLAIMS=str(claims_file),
            OMP_NUM_THREADS=str(threads),
            MKL_NUM_THREADS=str(threads),
        )
        done = gallery_pages.run_script(page, cwd=Path(tmp), env=env, timeout=timeout)
        run.returncode, run.output, run.seconds = done.returncode, done.output, done.seconds
        text = claims_file.read_text() if claims_file.exists() else ""
        run.claims = [json.loads(line) for line in text.splitlines() if line.strip()]
    return run


def write_log(log: Path, run: Run, lock: threading.Lock) -> None:
    """Append ``run`` to the JSON-lines file ``log``."""
    record = {
        "page": run.page,
        "seed": run.seed,
        "capability": run.capability,
        "threads": run.threads,
        "returncode": run.returncode,
        "seconds": round(run.seconds, 2),
        "output_tail": run.output[-3000:],
        "claims": run.claims or [],
    }
    with lock, log.open("a") as f:
        f.write(json.dumps(record) + "\n")


def read_logs(logs: list[Path]) -> list[Run]:
    """The runs of ``logs`` (oldest first); each page comes whole from the last log with it."""
    by_log = []
    for log in logs:
        runs = []
        for line in log.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                run = Run(r["page"], r["seed"], r["capability"], r["threads"], r["returncode"])
                run.seconds, run.output, run.claims = r["seconds"], r["output_tail"], r["claims"]
                runs.append(run)
        by_log.append(runs)
    newest: dict[str, int] = {}
    for i, runs in enumerate(by_log):
        for run in runs:
            newest[run.page] = i
    return [run for i, runs in enumerate(by_log) for run in runs if newest[run.page] == i]


def made_claims(source: str) -> re.Pattern:
    """What the names of the claims that ``source`` makes look like, as one regular expression.

    Each ``claim(name, ...)`` call gives its name: a string as it stands, an f-string with
    ``.+`` for each of its fields, any other expression ``.*`` (the name is known only when it
    runs). A ``|`` in a name is written ``¦``, as the table writes it.
    """

    def pattern(node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return re.escape(node.value.replace("|", "¦"))
        if isinstance(node, ast.JoinedStr):
            return "".join(
                pattern(part) if isinstance(part, ast.Constant) else ".+" for part in node.values
            )
        return ".*"

    names = [
        pattern(node.args[0])
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "claim" and node.args
    ]
    return re.compile("|".join(f"(?:{name})" for name in names) or "(?!)")


@functools.cache
def _claims_of(page: str) -> re.Pattern | None:
    found = [p for p in pages() if p.name == page]
    return made_claims(found[0].read_text()) if found else None


def still_made(page: str, name: str) -> bool:
    """Whether the gallery page named ``page`` (a file name) still makes the claim ``name``: a
    claim removed or renamed since a run was logged or a table written is left out of the new
    table. A name that is no page of the gallery's is kept: nothing says what it claims."""
    made = _claims_of(page)
    return made is None or bool(made.fullmatch(name.replace("|", "¦")))


def bound_text(above: float | None, below: float | None) -> str:
    """A claim's bounds as the table writes them, e.g. ``> 0.5 and < 2.5``."""
    parts = (None if above is None else f"> {above:g}", None if below is None else f"< {below:g}")
    return " and ".join(part for part in parts if part)


def carried_rows(
    tables: list[Path], covered: set[str], bounds: dict[tuple[str, str], str] | None = None
) -> list[str]:
    """The table rows of ``tables`` for pages not in ``covered``, marked with their source.

    ``bounds`` maps ``(page, claim)`` to the bound the page has now, where a run of this sweep
    recorded it: a carried row with another bound was judged against a bound the page no longer
    has, and is left out (the runs of this sweep show the claim).
    """
    bounds = bounds or {}
    rows = []
    for table in tables:
        for line in table.read_text().splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) != 7 or not re.match(r"\d\d_\w+\.py$", cells[0]):
                continue
            if cells[0] in covered or not still_made(cells[0], cells[1]):
                continue
            if bounds.get((cells[0], cells[1]), cells[2]) != cells[2]:
                continue
            cells[-1] = f"{cells[-1]} (carried from {table.name})"
            rows.append("| " + " | ".join(cells) + " |")
            # a page's rows come from the first table that has it
        covered = covered | {r.split("|")[1].strip() for r in rows}
    return rows


def coverage(runs: list[Run], page: str) -> str:
    """Which seeds ran ``page`` under each capability, e.g. ``default: seeds 0-9``."""
    seeds: dict[str, set[int]] = {}
    for run in runs:
        if run.page == page:
            seeds.setdefault(run.capability, set()).add(run.seed)
    parts = []
    for capability, found in sorted(seeds.items(), key=lambda item: CAPABILITIES.index(item[0])):
        ordered = sorted(found)
        if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
            text = f"{ordered[0]}-{ordered[-1]}"
        else:
            text = ", ".join(map(str, ordered))
        parts.append(f"{capability}: seeds {text}")
    return "; ".join(parts)


def margin(value: float, above: float | None, below: float | None) -> float:
    """A value's distance to its bounds as a fraction of the bound, as
    :func:`attention.repro.claim` measures it (negative: the claim fails)."""
    margins = []
    if above is not None:
        margins.append((value - above) / (abs(above) or 1.0))
    if below is not None:
        margins.append((below - value) / (abs(below) or 1.0))
    return min(margins) if math.isfinite(value) else -math.inf


def rejudged(records: list[dict]) -> list[dict]:
    """The records of one claim (oldest first), each judged against the newest one's bounds.

    A claim's bound may change while its value does not (loosened or tightened after a sweep
    showed its margin): every recorded value is then measured against the bound the page has
    now. A page whose computation changed must be swept again instead, and its new log then
    replaces the old runs (:func:`read_logs`).
    """
    above, below = records[-1]["above"], records[-1]["below"]
    return [
        dict(r, above=above, below=below, margin=margin(r["value"], above, below)) for r in records
    ]


def margins_table(
    runs: list[Run],
    *,
    seeds: list[int],
    capabilities: list[str],
    carried: list[str] = (),
) -> str:
    """The Markdown table of the weakest margin of every claim over the tuning ``runs``, then,
    when there are runs on :data:`HELD_OUT_SEEDS`, the same over those alone."""
    import torch

    tuning = [run for run in runs if run.seed not in HELD_OUT_SEEDS]
    held_out = [run for run in runs if run.seed in HELD_OUT_SEEDS]
    lines = [
        "# Claims and their margins",
        "",
        "Generated by `make robust` (`tests/docs/sweep.py`); do not edit by hand. Each page ran",
        "as a script with the `ATTENTION_SEED` values and `ATEN_CPU_CAPABILITY` listed below",
        f"(capabilities of this CPU: {', '.join(capabilities)}), with 1 thread for even seeds",
        "and 2 for odd ones. A claim's margin is its distance to the",
        "bound as a fraction of the bound (`attention.repro.claim`); the table gives the weakest",
        "margin over all runs, against the bound the page has now, and the run that had it.",
        "Rerun `make robust` after changing a page whose claims depend on a trained or random",
        "model.",
        "",
        f"torch {torch.__version__}, {datetime.date.today().isoformat()}, "
        f"{len(tuning)} runs, {sum(not r.ok for r in tuning)} failed. Runs per page:",
        "",
        *_runs_per_page(tuning),
        "",
        *_claims_rows(tuning),
    ]
    if carried:
        lines += sorted(carried)
        lines += [
            "",
            "Rows marked *carried* come from an earlier sweep of a page whose tuning runs no",
            "log of this one covers, for the claims the page still makes.",
        ]
    if held_out:
        lines += [
            "",
            "## Held out",
            "",
            "The bounds above were set from the tuning runs; these runs only test them. Every page",
            "that trains or samples ran on the held-out seeds "
            f"{', '.join(map(str, HELD_OUT_SEEDS))}",
            "(drawn once at random, `sweep.HELD_OUT_SEEDS`), never used to set a bound: "
            f"{len(held_out)} runs, {sum(not r.ok for r in held_out)} failed. Runs per page:",
            "",
            *_runs_per_page(held_out),
            "",
            *_claims_rows(held_out),
        ]
    failed = [run for run in runs if not run.ok]
    if failed:
        lines += ["", "## Failed runs", ""]
        for run in failed:
            last = run.output.strip().splitlines()[-1:] or ["(no output)"]
            lines.append(f"- {run.describe()}: `{last[0][:200]}`")
    return "\n".join(lines) + "\n"


def _runs_per_page(runs: list[Run]) -> list[str]:
    return [
        f"- {page}: {count} ({coverage(runs, page)})"
        for page, count in sorted(Counter(run.page for run in runs).items())
    ]


def _claims_rows(runs: list[Run]) -> list[str]:
    """The table of the weakest margin of every claim of ``runs``."""
    claims: dict[tuple[str, str], list[dict]] = {}
    for run in runs:
        for record in run.claims or ():
            if still_made(record["page"], record["claim"]):
                claims.setdefault((record["page"], record["claim"]), []).append(record)
    lines = [
        "| page | claim | bound | values seen | runs | weakest margin | at |",
        "|---|---|---|---|---|---|---|",
    ]
    for (page, name), records in sorted(claims.items()):
        records = rejudged(records)
        weakest = min(records, key=lambda r: r["margin"])
        bound = bound_text(weakest["above"], weakest["below"])
        values = [r["value"] for r in records]
        lines.append(
            f"| {page} | {name.replace('|', '¦')} | {bound} "
            f"| {min(values):.4g} to {max(values):.4g} "
            f"| {len(records)} | {weakest['margin']:.3f} | seed {weakest['seed']}, "
            f"{weakest['capability'].lower()}, {weakest['threads']} thr |"
        )
    return lines


def _int_range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(part) for part in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="", help="regular expression on file names")
    parser.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,7")
    parser.add_argument("--capabilities", default="", help="comma-separated; default: all")
    parser.add_argument("--training-only", action="store_true", help="pages that train only")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also run the pages that train on the held-out seeds (sweep.HELD_OUT_SEEDS)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="pages run at once")
    parser.add_argument("--out", type=Path, default=CLAIMS_MD)
    parser.add_argument(
        "--timeout", type=float, default=PAGE_TIMEOUT, help="seconds a page may run (loaded CPU)"
    )
    parser.add_argument("--log", type=Path, help="append each finished run here (JSON lines)")
    parser.add_argument(
        "--from-logs", type=Path, nargs="+", help="write the table from these logs; run nothing"
    )
    parser.add_argument(
        "--carry", type=Path, nargs="+", default=[], help="earlier tables, for pages no log has"
    )
    args = parser.parse_args(argv)

    if args.from_logs:
        runs = read_logs(args.from_logs)
        seeds = sorted({run.seed for run in runs})
        capabilities = sorted({run.capability for run in runs}, key=CAPABILITIES.index)
        tuned = {run.page for run in runs if run.seed not in HELD_OUT_SEEDS}
        newest = {}  # (page, claim) -> the bound of its newest record
        for run in runs:
            for r in run.claims or ():
                newest[r["page"], r["claim"].replace("|", "¦")] = bound_text(r["above"], r["below"])
        carried = carried_rows(args.carry, tuned, newest)
        table = margins_table(runs, seeds=seeds, capabilities=capabilities, carried=carried)
        args.out.write_text(table)
        print(f"wrote {args.out} from {len(runs)} runs and {len(carried)} carried rows")
        return 0 if all(run.ok for run in runs) else 1

    seeds = _int_range(args.seeds)
    if set(seeds) & set(HELD_OUT_SEEDS):
        parser.error("--seeds are tuning seeds; the held-out ones run with --held-out only")
    capabilities = args.capabilities.split(",") if args.capabilities else supported_capabilities()
    selected = [p for p in pages(args.pages) if trains(p) or not args.training_only]
    # Seed by seed, so that an interrupted sweep has covered every page.
    jobs = [
        (page, seed, capability)
        for seed in seeds
        for capability in capabilities
        for page in selected
    ]
    if args.held_out:  # after the tuning runs: the pages that train, on seeds that set nothing
        jobs += [
            (page, seed, capability)
            for seed in HELD_OUT_SEEDS
            for capability in capabilities
            for page in selected
            if trains(page)
        ]
    print(
        f"{len(selected)} pages x {len(seeds)} seeds x {len(capabilities)} capabilities "
        f"({', '.join(capabilities)}){' and the held-out seeds' * args.held_out}: "
        f"{len(jobs)} runs, {args.jobs} at a time",
        flush=True,
    )

    lock = threading.Lock()

    def one(job):
        page, seed, capability = job
        run = run_page(
            page, seed=seed, capability=capability, threads=1 + seed % 2, timeout=args.timeout
        )
        if args.log:
            write_log(args.log, run, lock)
        status = "ok" if run.ok else "FAILED"
        print(f"{status:6} {run.seconds:5.1f} s  {run.describe()}", flush=True)
        return run

    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(one, jobs))
    args.out.write_text(margins_table(runs, seeds=seeds, capabilities=capabilities))
    print(f"wrote {args.out}")
    for run in runs:
        if not run.ok:
            print(f"\n--- {run.describe()} ---\n{run.output[-3000:]}")
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
