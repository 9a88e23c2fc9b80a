"""Page 17's (performance) "Recorded results on a GPU" section and page 21's (the Triton kernel)
"On a GPU: recorded measurements", each run on its own: with no recorded results it prints one
line and draws nothing; with a results file written by the benchmarks' own writer it plots the
newest file. The sections' code is taken from the pages, not copied."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from docbuild import pages  # noqa: E402
from sphinx_gallery.py_source_parser import split_code_and_text_blocks  # noqa: E402

from benchmarks import flash_triton, gpu  # noqa: E402
from benchmarks.report import CsvWriter  # noqa: E402

PAGE = pages.find("17_performance")
TRITON_PAGE = pages.find("21_flash_triton")


def gpu_section_code(page=PAGE, heading="Recorded results on a GPU") -> str:
    """The code cell that follows the page's ``heading``."""
    _, blocks = split_code_and_text_blocks(str(page))[:2]
    for i, (label, content, _) in enumerate(blocks):
        if label == "text" and heading in content:
            following = [b for b in blocks[i + 1 :] if b[0] == "code"]
            return following[0][1]
    raise AssertionError(f"{page.name} has no {heading!r} section")


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


def run_section(tmp_path, monkeypatch, capsys, page=PAGE, **heading) -> tuple[str, list]:
    monkeypatch.chdir(tmp_path)
    plt.close("all")
    code = gpu_section_code(page, **heading)
    exec(compile(code, str(page), "exec"), {"plt": plt, "__name__": "page"})
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


TRITON_HEADING = {"heading": "On a GPU: recorded measurements"}


def record_triton(path, device: str) -> None:
    """A results file as ``python -m benchmarks --triton`` writes it: its fields, its writer."""
    provenance = {"device": device, "torch": "2.13.0", "date": "2026-11-30T12:00:00+00:00",
                  "triton": "3.9.0", "driver": "570.1"}  # fmt: skip
    writer = CsvWriter(path, flash_triton.FIELDS, provenance)
    for impl in flash_triton.PATHS:
        for mode in ("fwd", "fwd+bwd"):
            for L in (1024, 4096, 16384):
                row = dict.fromkeys(flash_triton.FIELDS, "")
                row.update(suite="triton", case="c", impl=impl, mode=mode, dtype="bfloat16",
                           N=1, L=L, S=L, E=2048, H=16, D=128, causal=True, status="ok",
                           tflops=100.0 + L / 1024, frac_peak=0.1)  # fmt: skip
                writer.write(row)
    writer.write({**row, "causal": False, "tflops": 1.0})  # a row the section leaves out
    writer.close()


def test_without_recorded_kernel_results_page_21_prints_one_line(tmp_path, monkeypatch, capsys):
    out, figures = run_section(tmp_path, monkeypatch, capsys, TRITON_PAGE, **TRITON_HEADING)
    assert figures == []
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("No GPU measurements of the kernel")


def test_recorded_kernel_results_are_plotted_from_the_newest_file(tmp_path, monkeypatch, capsys):
    results = tmp_path / "benchmarks" / "results"
    record_triton(results / "triton-2026-01-05.csv", "NVIDIA Older GPU")
    record_triton(results / "triton-2026-11-30.csv", "NVIDIA Newer GPU")
    out, figures = run_section(tmp_path, monkeypatch, capsys, TRITON_PAGE, **TRITON_HEADING)
    assert "triton-2026-11-30.csv" in out and "NVIDIA Newer GPU" in out and "Older" not in out
    assert "of the GPU's peak" in out
    (fig,) = figures
    title = fig._suptitle.get_text()
    assert "NVIDIA Newer GPU" in title and "triton 3.9.0" in title and "driver 570.1" in title
    for ax in fig.axes:  # forward, forward + backward: one curve per path, through the lengths
        assert len(ax.lines) == 3
        assert all(list(line.get_xdata()) == [1024, 4096, 16384] for line in ax.lines)
    plt.close("all")
