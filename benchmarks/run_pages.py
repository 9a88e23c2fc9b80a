"""Run gallery pages as scripts on a chosen device, keeping their printed output and figures.

    python -m benchmarks.run_pages --device cuda --out OUT 17_performance 13_kv_cache_gqa ...

A page is named by its file name (found in whatever part of the gallery it is) or by its path.
Each page runs in its own process (through ``tests/pages.py``, the one home of the code that
runs pages) with ``ATTENTION_DEVICE`` set (pages take their device from
:func:`attention.repro.default_device`) and matplotlib's ``plt.show`` replaced by a save, so a
GPU session brings back what each page printed (``OUT/<page>.txt``, with its provenance on top)
and drew (``OUT/<page>-<n>.png``). The exit status is the number of pages that failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

# tests/pages.py is the one home of the code that runs pages.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import pages  # noqa: E402


def run_page(page: Path, out: Path, *, device: str, timeout: float) -> tuple[bool, float]:
    """Run one page on ``device``; write its output and figures under ``out``."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ATTENTION_DEVICE=device, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    done = pages.run_script(
        page, cwd=page.parent, env=env, timeout=timeout, save_figures=out / page.stem
    )
    ok = done.returncode == 0
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    header = (
        f"# {page.name} on {device} ({name}), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{done.seconds:.1f} s, {'ok' if ok else 'FAILED'}\n"
    )
    (out / f"{page.stem}.txt").write_text(header + done.output)
    return ok, done.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_pages", description=__doc__)
    parser.add_argument("pages", nargs="+", help="page paths, or names such as 17_performance")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per page")
    args = parser.parse_args(argv)
    failed = 0
    for given in args.pages:
        page = Path(given) if given.endswith(".py") else pages.find(given)
        ok, seconds = run_page(page, args.out, device=args.device, timeout=args.timeout)
        failed += not ok
        print(f"{'ok' if ok else 'FAILED':6} {seconds:6.1f} s  {page.name} on {args.device}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
