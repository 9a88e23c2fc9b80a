"""Every tutorial's downloads run on their own, as a reader runs them, copied into an empty
folder outside the repository.

Every notebook runs in full with a Jupyter kernel: its first cell installs the package, and its
code cells carry the package code that the page includes, so it is the download most likely to
break. A script is the page's own source with comments added, so it is checked to be the same
program as the gallery script (the build ran that program, and ``tests/docs`` runs the pages that
train as scripts outside the repository); :data:`SCRIPTS_RUN` also run in full with ``python``,
one of them in a fresh environment in ``test_stranger.py``.

One test per file (``pytest -n 2`` spreads them over the cores). A failure names the tutorial
and the cell (or the ``# %%`` section of the script) that raised.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sitecheck

#: Seconds one script may run; the tutorials are written to finish well within it on a CPU.
SCRIPT_TIMEOUT = 120
#: Seconds one notebook cell may run, and the whole notebook.
CELL_TIMEOUT = 120
NOTEBOOK_TIMEOUT = 240

RUN_NOTEBOOK = Path(__file__).with_name("run_notebook.py")
#: Scripts that run in full as well: the first page, and one that draws many figures.
SCRIPTS_RUN = ("01_qkv_analogy", "08_visualising_attention")


def reader_env() -> dict[str, str]:
    """The environment of a reader's shell: nothing pointing into the checkout, no display."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    env.update(
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    """Run ``cmd``; on timeout kill its whole process group (a notebook's kernel included)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=reader_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def section_of_line(source: str, lineno: int) -> str:
    """Describe the ``# %%`` section of a gallery script that holds line ``lineno``."""
    lines = source.splitlines()
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith("# %%")]
    before = [s for s in starts if s <= lineno]
    if not before:
        return f"line {lineno}, before the first cell (the docstring or imports)"
    start = before[-1]
    heading = next(
        (ln.lstrip("# ").strip() for ln in lines[start : start + 3] if ln.strip("# ").strip()),
        "",
    )
    return f"line {lineno}, in cell {len(before)} (the `# %%` at line {start}: {heading!r})"


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def tail(text: str, n: int = 40) -> str:
    """The last ``n`` lines of ``text``, without terminal colours (Jupyter's tracebacks)."""
    return "\n".join(ANSI_ESCAPE.sub("", text).strip().splitlines()[-n:])


def check_script(download: sitecheck.Download, work: Path) -> None:
    script = work / download.path.name
    code, out, err = run([sys.executable, script.name], work, SCRIPT_TIMEOUT)
    name = f"{download.tutorial}.py"
    if code is None:
        pytest.fail(f"{name} ran longer than {SCRIPT_TIMEOUT} s\n{tail(out + err)}")
    if code != 0:
        frames = re.findall(rf'File "[^"]*{re.escape(script.name)}", line (\d+)', err)
        where = section_of_line(script.read_text(), int(frames[-1])) if frames else "unknown"
        pytest.fail(
            f"{name} failed (exit {code}) at {where}, run as `python {script.name}` "
            f"from an empty folder:\n{tail(err)}"
        )


def program(source: str) -> str:
    """The statements of ``source``, without comments and without the module docstring."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def check_same_program(download: sitecheck.Download) -> None:
    source = sitecheck.REPO_ROOT / "gallery" / f"{download.tutorial}.py"
    assert source.exists(), f"{download.tutorial}.py: no gallery script of that name"
    assert program(download.path.read_text()) == program(source.read_text()), (
        f"{download.tutorial}.py: the download is not the program of gallery/{source.name}"
    )


def check_notebook(download: sitecheck.Download, work: Path) -> None:
    notebook = work / download.path.name
    cmd = [sys.executable, str(RUN_NOTEBOOK), notebook.name, str(CELL_TIMEOUT)]
    code, out, err = run(cmd, work, NOTEBOOK_TIMEOUT)
    name = f"{download.tutorial}.ipynb"
    if code is None:
        pytest.fail(f"{name} ran longer than {NOTEBOOK_TIMEOUT} s\n{tail(out + err)}")
    if code != 0:
        try:
            report = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pytest.fail(f"{name}: the notebook runner failed (exit {code}):\n{tail(out + err)}")
        if report["cell"] is None:
            where = "the environment check"
        else:
            where = f"cell {report['cell'] + 1} of {report['cells']}"
        source = "\n    ".join(report["source"].splitlines()[:8])
        pytest.fail(
            f"{name} failed at {where} ({report['error']}):\n    {source}\n"
            f"{tail(report['message'])}"
        )


@pytest.mark.timeout(NOTEBOOK_TIMEOUT + 60)
def test_download_runs_on_its_own(download, site_dir: Path, tmp_path: Path) -> None:
    assert download is not None, "the tutorial pages offer no .py or .ipynb downloads"
    work = tmp_path / "reader"
    work.mkdir()
    assert sitecheck.REPO_ROOT not in work.resolve().parents, "scratch folder inside the repo"
    shutil.copy2(download.path, work / download.path.name)
    if download.kind == "py":
        check_same_program(download)
        if download.tutorial in SCRIPTS_RUN:
            check_script(download, work)
    else:
        check_notebook(download, work)
