"""Every tutorial's downloads run on their own, as a reader runs them: the .py with ``python``
and the .ipynb with a Jupyter kernel, each copied into an empty folder outside the repository.

One test per file (``pytest -n 2`` spreads them over the cores). A failure names the tutorial
and the cell (or the ``# %%`` section of the script) that raised.
"""

from __future__ import annotations

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
        check_script(download, work)
    else:
        check_notebook(download, work)
