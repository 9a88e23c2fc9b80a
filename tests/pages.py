"""The one home of the code that finds the gallery's pages and runs them outside the build.

Three callers run pages, each for its own reason, and all through this module:

- ``tests/docs/sweep.py`` (``make robust``, and ``tests/docs/test_claims_hold.py`` in
  ``make test``) runs a page as a script under other seeds, CPU capabilities and thread counts;
- ``benchmarks/run_pages.py`` runs pages on a GPU and keeps what they printed and drew;
- ``tests/site/test_downloads.py`` runs a page's downloaded script and notebook as a reader
  does, from an empty folder.

:func:`pages` and :func:`find` find pages in the gallery's parts (``gallery/<part>/NN_name.py``)
and at its top; :func:`run_script` runs one as ``python page.py``; :func:`run_notebook` runs a
notebook cell by cell with a Jupyter kernel, in a process of its own
(``python tests/pages.py notebook NOTEBOOK CELL_TIMEOUT``, which prints one line of JSON naming
the failing cell and exits 1 on a failure).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "gallery"
#: A page: ``NN_name.py``, in a part of the gallery or at its top.
PAGE_NAME = re.compile(r"^\d+_\w+\.py$")


def pages(pattern: str = "", gallery: Path = GALLERY) -> list[Path]:
    """The gallery's pages whose file name matches the regular expression ``pattern``, in
    learning-path order (the file names' order, whatever their part)."""
    found = [p for p in gallery.rglob("*.py") if PAGE_NAME.match(p.name)]
    return sorted((p for p in found if re.search(pattern, p.name)), key=lambda p: p.name)


def find(stem: str, gallery: Path = GALLERY) -> Path:
    """The page named ``stem`` (``04_multi_head``), in whatever part it is."""
    found = [p for p in pages(gallery=gallery) if p.stem == stem]
    if len(found) != 1:
        raise LookupError(f"{len(found)} pages named {stem}.py under {gallery}: {found}")
    return found[0]


def sample(items: list, parts: int = 2, choice: str | None = None, day: int | None = None) -> list:
    """The share of ``items`` that one run of ``make test`` checks: all of them for ``choice``
    "all", else every ``parts``-th item, starting at ``choice`` (``"0"`` to ``parts - 1``) or at
    the day of the year (``day``, today's by default) modulo ``parts``, so that ``parts`` days
    of runs cover every item.

    >>> sample(list("abcde"), 2, "all"), sample(list("abcde"), 2, "1")
    (['a', 'b', 'c', 'd', 'e'], ['b', 'd'])
    >>> sample(list("abcde"), day=34)
    ['a', 'c', 'e']
    >>> sample(list("abcdefg"), 3, day=5)
    ['c', 'f']
    """
    if choice == "all":
        return list(items)
    if choice is not None and choice.isdigit() and int(choice) < parts:
        start = int(choice)
    else:
        import datetime

        start = (day if day is not None else datetime.date.today().timetuple().tm_yday) % parts
    return list(items[start::parts])


def relative(page: Path, gallery: Path = GALLERY) -> str:
    """A page's path in the gallery without ``.py`` (``1_foundations/04_multi_head``): its
    place in the built site under ``tutorials/``."""
    return page.relative_to(gallery).with_suffix("").as_posix()


def reader_env(**overrides: str) -> dict[str, str]:
    """The environment of a reader's shell: nothing from pytest or pointing into a checkout's
    Python, no display; ``overrides`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    env.update(MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env.update(overrides)
    return env


@dataclass
class Finished:
    """A finished (or timed-out) run: ``returncode`` is None after a timeout."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Finished:
    """Run ``cmd``; on timeout kill its whole process group (a notebook's kernel included)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
        err += f"\ntimed out after {timeout:.0f} s"
    return Finished(code, out, err, time.perf_counter() - start)


#: Run inside the page's process by :func:`run_script` with ``save_figures``: every figure the
#: page shows is saved as ``<prefix>-<n>.png``, then the page runs.
_SAVE_FIGURES = """
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


def run_script(
    page: Path,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    save_figures: Path | None = None,
) -> Finished:
    """Run ``page`` as ``python page.py`` from ``cwd``; with ``save_figures`` (a path prefix),
    every figure it shows is saved as ``<prefix>-<n>.png``."""
    if save_figures is None:
        cmd = [sys.executable, str(page)]
    else:
        cmd = [sys.executable, "-c", _SAVE_FIGURES, str(page.resolve()), str(save_figures)]
    return run(cmd, cwd=cwd, env=env, timeout=timeout)


def run_notebook(notebook: Path, *, cwd: Path, cell_timeout: int, timeout: float) -> Finished:
    """Run ``notebook`` cell by cell with a Jupyter kernel of this environment, from ``cwd``,
    in a process of its own (the kernel, its event loop and a timeout never share a process
    with the caller). On a failure the output's last line is JSON: the failing cell's index
    (None for the environment check), the number of cells, its source, the error and its
    message."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "notebook", str(notebook)]
    cmd.append(str(cell_timeout))
    return run(cmd, cwd=cwd, env=reader_env(), timeout=timeout)


# The kernel must run in this environment: "python3" resolves to the kernelspec whose argv
# starts with "python", which jupyter_client replaces with sys.executable. A last, added cell
# checks it (a kernel from another environment would not have the project's packages).
_CHECK_KERNEL = "import sys; print(sys.prefix)"


def _notebook_main(path: str, cell_timeout: int) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_CHECK_KERNEL))
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={"metadata": {"path": os.getcwd()}},
    )
    index = -1

    def report(cell, error: str, message: str) -> None:
        source = cell.source if cell is not None else _CHECK_KERNEL
        failure = {"cell": index if cell is not None else None, "cells": len(nb.cells) - 1}
        failure.update(source=source, error=error, message=message[-4000:])
        print(json.dumps(failure))

    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        cell = nb.cells[index] if 0 <= index < len(nb.cells) else None
        report(cell, type(exc).__name__, str(exc))
        return 1
    outputs = nb.cells[-1].get("outputs", [])
    kernel_prefix = "".join(o.get("text", "") for o in outputs).strip()
    if os.path.realpath(kernel_prefix) != os.path.realpath(sys.prefix):
        message = f"the kernel ran in {kernel_prefix!r}, not in {sys.prefix!r}"
        report(None, "WrongKernel", message)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "notebook":
        sys.exit(_notebook_main(sys.argv[2], int(sys.argv[3])))
    print(__doc__.split("\n\n")[0])
    for page in pages():
        print(relative(page))
