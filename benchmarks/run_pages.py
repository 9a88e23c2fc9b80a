"""Run gallery pages as scripts on a chosen device, keeping their printed output and figures.

    python -m benchmarks.run_pages --device cuda --out OUT gallery/12_performance.py ...

Each page runs in its own process with ``ATTENTION_DEVICE`` set (pages take their device from
:func:`attention.repro.default_device`) and matplotlib's ``plt.show`` replaced by a save, so a
GPU session brings back what each page printed (``OUT/<page>.txt``, with its provenance on top)
and drew (``OUT/<page>-<n>.png``). The exit status is the number of pages that failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

#: Run inside the page's process: save every figure that the page shows, then run the page.
_BOOTSTRAP = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
page, prefix = sys.argv[1], sys.argv[2]
shown = []
def show(*args, **kwargs):
    for number in plt.get_fignums():
        shown.append(number)
        plt.figure(number).savefig(f"{prefix}-{len(shown)}.png", dpi=100)
    plt.close("all")
plt.show = show
sys.argv = [page]
runpy.run_path(page, run_name="__main__")
"""


def run_page(page: Path, out: Path, *, device: str, timeout: float) -> tuple[bool, float]:
    """Run one page on ``device``; write its output and figures under ``out``."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ATTENTION_DEVICE=device, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BOOTSTRAP, str(page.resolve()), str(out / page.stem)],
            cwd=page.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        ok, text = done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        ok, text = False, f"{expired.stdout or ''}\ntimed out after {timeout:.0f} s"
    seconds = time.perf_counter() - start
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    header = (
        f"# {page.name} on {device} ({name}), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{seconds:.1f} s, {'ok' if ok else 'FAILED'}\n"
    )
    (out / f"{page.stem}.txt").write_text(header + text)
    return ok, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_pages", description=__doc__)
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per page")
    args = parser.parse_args(argv)
    failed = 0
    for page in args.pages:
        ok, seconds = run_page(page, args.out, device=args.device, timeout=args.timeout)
        failed += not ok
        print(f"{'ok' if ok else 'FAILED':6} {seconds:6.1f} s  {page.name} on {args.device}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
