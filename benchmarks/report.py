"""Provenance, tables and CSV files for the benchmark results.

Every row of a results CSV carries its provenance (device, torch version, thread count, date),
so a file read on its own says where and when it was measured.
"""

from __future__ import annotations

import csv
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

import attention

RESULTS = Path(__file__).resolve().parent / "results"


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name as the operating system reports it."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(device: torch.device) -> dict[str, str]:
    """Where and when: the columns every results row carries."""
    return {
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "attention": attention.__version__,
        "python": platform.python_version(),
        "threads": str(torch.get_num_threads()),
        "cpu_count": str(os.cpu_count()),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # Other programs' load when the run started: context for noisy absolute times.
        "load_1min": f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "",
    }


def timing_cells(t) -> dict[str, float | int]:
    """The columns every results row gives an :class:`attention.measure.Timing`: median and IQR
    in ms, and the number of runs."""
    return {"median_ms": t.median * 1e3, "iqr_ms": t.iqr * 1e3, "runs": t.runs}


def fmt(value, digits: int = 2) -> str:
    """A table cell: floats rounded, ``None`` as a dash."""
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(rows: list[dict], columns: list[tuple], *, markdown: bool = False) -> str:
    """Rows as a fixed-width text table (or a Markdown table); ``columns`` = (key, header),
    where a key is a row's key or a function of the row that returns the cell's text."""
    cells = [
        [fmt(key(row) if callable(key) else row.get(key)) for key, _ in columns] for row in rows
    ]
    headers = [header for _, header in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]

    def line(values):
        pairs = enumerate(zip(values, widths, strict=True))
        padded = [v.rjust(w) if i else v.ljust(w) for i, (v, w) in pairs]
        return ("| " + " | ".join(padded) + " |") if markdown else "  ".join(padded)

    rule = (
        "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        if markdown
        else "  ".join("-" * w for w in widths)
    )
    return "\n".join([line(headers), rule, *(line(c) for c in cells)])


class CsvWriter:
    """Append rows to a CSV as they are measured, so an interrupted run keeps what it had.

    Rows go to ``<path>.tmp``; :meth:`close` renames it to ``path``. Every row has the same
    columns: ``fields``, then the provenance.
    """

    def __init__(self, path: Path, fields: list[str], provenance: dict[str, str]):
        self.path, self.provenance = Path(path), provenance
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.file = open(self.tmp, "w", newline="")
        self.writer = csv.DictWriter(self.file, [*fields, *provenance], extrasaction="raise")
        self.writer.writeheader()

    def write(self, row: dict) -> None:
        cells = {k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
        self.writer.writerow({**cells, **self.provenance})
        self.file.flush()

    def close(self) -> Path:
        self.file.close()
        os.replace(self.tmp, self.path)
        return self.path


def results_path(prefix: str, out_dir: Path | None = None, suffix: str = ".csv") -> Path:
    """``<out_dir>/<prefix>-<YYYY-MM-DD>.csv`` (today's date, UTC)."""
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return Path(out_dir or RESULTS) / f"{prefix}-{day}{suffix}"
