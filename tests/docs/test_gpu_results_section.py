"""Page 17's (performance) "Recorded results on a GPU" section, run on its own: with no recorded
results it prints one line and draws nothing; with a results file written by the benchmarks' own
writer it plots the newest file. The section's code is taken from the page, not copied."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from docbuild import pages  # noqa: E402
from sphinx_gallery.py_source_parser import split_code_and_text_blocks  # noqa: E402

from benchmarks import gpu  # noqa: E402
from benchmarks.report import CsvWriter  # noqa: E402

PAGE = pages.find("17_performance")


def gpu_section_code() -> str:
    """The code cell that follows the page's "Recorded results on a GPU" heading."""
    _, blocks = split_code_and_text_blocks(str(PAGE))[:2]
    for i, (label, content, _) in enumerate(blocks):
        if label == "text" and "Recorded results on a GPU" in content:
            following = [b for b in blocks[i + 1 :] if b[0] == "code"]
            return following[0][1]
    raise AssertionError("page 17 has no 'Recorded results on a GPU' section")


def record(path, device: str) -> None:
    """A results file as ``python -m benchmarks --gpu`` writes it: its fields, its writer."""
    provenance = {"device": device, "torch": "2.13.0", "date": "2026-11-30T12:00:00+00:00"}
    writer = CsvWriter(path, gpu.FIELDS, provenance)
    for dtype in ("bfloat16", "float16"):
        for causal in (False, True):
            for L in (1024, 4096, 16384):
                row = dict.fromkeys(gpu.FIELDS, "")
                row.update(
                    suite="attention",
                    case="sdpa",
                    impl="sdpa",
                    mode="fwd",
                    dtype=dtype,
                    N=1,
                    L=L,
                    S=L,
                    E=2048,
                    H=16,
                    D=128,
                    causal=causal,
                    status="ok",
                    tflops=100.0 + L / 1024,
                )
                writer.write(row)
    # A row the section leaves out: another implementation.
    writer.write({**row, "impl": "reference", "tflops": 1.0})
    writer.close()


def run_section(tmp_path, monkeypatch, capsys) -> tuple[str, list]:
    monkeypatch.chdir(tmp_path)
    plt.close("all")
    exec(compile(gpu_section_code(), str(PAGE), "exec"), {"plt": plt, "__name__": "page17"})
    return capsys.readouterr().out, [plt.figure(n) for n in plt.get_fignums()]


def test_without_recorded_results_the_section_prints_one_line(tmp_path, monkeypatch, capsys):
    out, figures = run_section(tmp_path, monkeypatch, capsys)
    assert figures == []
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("No GPU results are recorded")


@pytest.mark.parametrize("folder", ["benchmarks/results", "../benchmarks/results"])
def test_recorded_results_are_plotted_from_the_newest_file(tmp_path, monkeypatch, capsys, folder):
    cwd = tmp_path / "gallery"
    cwd.mkdir()
    results = (cwd / folder).resolve()
    record(results / "gpu-2026-01-05.csv", "NVIDIA Older GPU")
    record(results / "gpu-2026-11-30.csv", "NVIDIA Newer GPU")
    out, figures = run_section(cwd, monkeypatch, capsys)
    assert "gpu-2026-11-30.csv" in out and "NVIDIA Newer GPU" in out
    assert "Older" not in out
    (fig,) = figures
    (ax,) = fig.axes
    assert "NVIDIA Newer GPU" in ax.get_title() and "torch 2.13.0" in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel()
    # One curve per dtype and causality, each through the three lengths.
    assert len(ax.lines) == 4
    assert all(list(line.get_xdata()) == [1024, 4096, 16384] for line in ax.lines)
    labels = sorted(text.get_text() for text in ax.get_legend().get_texts())
    assert labels == sorted(
        f"{dtype}, D = 128{causal}"
        for dtype in ("bfloat16", "float16")
        for causal in ("", ", causal")
    )
    plt.close("all")
