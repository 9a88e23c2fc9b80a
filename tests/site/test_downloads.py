"""Every tutorial's downloads, as a reader gets them, copied into an empty folder outside the
repository.

Every download is checked to be the page's program: a script is the gallery script with its
comments made plain (the build ran that program); a notebook is valid, its first cell installs
the package, and its code cells, in order, are the page's code cells (its hidden build checks
aside). A sample of them also runs in full, as a reader runs it: :data:`NOTEBOOKS_RUN` with a
Jupyter kernel, whose first cell installs the package and whose cells carry the package code
the page includes, and :data:`SCRIPTS_RUN` with ``python``: the first page, and a page that
draws many figures. ``tests/site/test_stranger.py`` runs one more notebook and one more script
in a fresh environment that installs the wheel from the served site, and
``tests/docs/test_claims_hold.py`` runs the pages that train as scripts.

``ATTENTION_DOWNLOADS=all`` runs every notebook and every script in full (``make robust``
does). One test per file (``pytest -n 2`` spreads them over the cores). A failure names the
tutorial and the cell (or the ``# %%`` section of the script) that raised.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import sitecheck

sys.path.insert(0, str(sitecheck.REPO_ROOT / "tests"))
import pages  # noqa: E402

#: Seconds one script may run; the tutorials are written to finish well within it on a CPU.
SCRIPT_TIMEOUT = 120
#: Seconds one notebook cell may run, and the whole notebook.
CELL_TIMEOUT = 120
NOTEBOOK_TIMEOUT = 240

#: Notebooks and scripts that run in full in ``make test``: the first page, and a page that
#: draws many figures (the stranger runs the notebook of page 3 and the script of page 2).
NOTEBOOKS_RUN = ("01_qkv_analogy",)
SCRIPTS_RUN = ("01_qkv_analogy", "03_self_attention")
#: Every download runs in full when this is "all".
RUN_ALL = os.environ.get("ATTENTION_DOWNLOADS") == "all"


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
    env = pages.reader_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = pages.run_script(script, cwd=work, env=env, timeout=SCRIPT_TIMEOUT)
    name = f"{download.tutorial}.py"
    if done.returncode is None:
        pytest.fail(f"{name} ran longer than {SCRIPT_TIMEOUT} s\n{tail(done.output)}")
    if done.returncode != 0:
        frames = re.findall(rf'File "[^"]*{re.escape(script.name)}", line (\d+)', done.stderr)
        where = section_of_line(script.read_text(), int(frames[-1])) if frames else "unknown"
        pytest.fail(
            f"{name} failed (exit {done.returncode}) at {where}, run as `python {script.name}` "
            f"from an empty folder:\n{tail(done.stderr)}"
        )


def program(source: str) -> str:
    """The statements of ``source``, without comments and without the module docstring."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def check_same_program(download: sitecheck.Download) -> None:
    source = pages.find(download.tutorial)
    assert program(download.path.read_text()) == program(source.read_text()), (
        f"{download.tutorial}.py: the download is not the program of {source.name}"
    )


def _code_without_magics(source: str) -> str:
    """A notebook cell's code as Python: IPython's ``%`` and ``!`` lines become ``pass``."""
    return re.sub(r"^(\s*)[%!].*$", r"\1pass", source, flags=re.MULTILINE)


def check_notebook_structure(download: sitecheck.Download) -> None:
    """The notebook is valid, installs the package first, and its code cells are the page's
    code cells in order, the lines the page hides (its checks, a figure's details) included."""
    import nbformat

    sys.path.insert(0, str(sitecheck.REPO_ROOT / "docs" / "_ext"))
    from attention_prerequisites import script_blocks

    notebook = nbformat.read(download.path, as_version=4)
    nbformat.validate(notebook)
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    name = f"{download.tutorial}.ipynb"
    assert code and "%pip install" in code[0], f"{name}: its first cell installs nothing"
    for i, source in enumerate(code):
        try:
            compile(_code_without_magics(source), f"{name} cell {i}", "exec")
        except SyntaxError as exc:
            pytest.fail(f"{name}: code cell {i} is not Python: {exc}")
    conf = {"remove_config_comments": True}
    page_code = [
        block.content
        for block in script_blocks(pages.find(download.tutorial), conf, hidden=True)
        if block.type in ("code", "hidden") and block.content.strip()
    ]
    shown = "\n".join(code[1:])
    assert ast.dump(ast.parse(shown)) == ast.dump(ast.parse("\n".join(page_code))), (
        f"{name}: its code cells are not the page's code"
    )


def check_notebook(download: sitecheck.Download, work: Path) -> None:
    notebook = work / download.path.name
    done = pages.run_notebook(
        notebook, cwd=work, cell_timeout=CELL_TIMEOUT, timeout=NOTEBOOK_TIMEOUT
    )
    name = f"{download.tutorial}.ipynb"
    if done.returncode is None:
        pytest.fail(f"{name} ran longer than {NOTEBOOK_TIMEOUT} s\n{tail(done.output)}")
    if done.returncode != 0:
        try:
            report = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pytest.fail(f"{name}: the notebook runner failed:\n{tail(done.output)}")
        if report["cell"] is None:
            where = "the environment check"
        else:
            where = f"cell {report['cell'] + 1} of {report['cells']}"
        source = "\n    ".join(report["source"].splitlines()[:8])
        pytest.fail(
            f"{name} failed at {where} ({report['error']}):\n    {source}\n"
            f"{tail(report['message'])}"
        )


def test_the_sample_is_of_pages_that_exist():
    for stem in (*NOTEBOOKS_RUN, *SCRIPTS_RUN):
        assert pages.find(stem)


@pytest.mark.timeout(NOTEBOOK_TIMEOUT + 60)
def test_download_is_the_page_and_runs_on_its_own(download, site_dir: Path, tmp_path: Path):
    assert download is not None, "the tutorial pages offer no .py or .ipynb downloads"
    work = tmp_path / "reader"
    work.mkdir()
    assert sitecheck.REPO_ROOT not in work.resolve().parents, "scratch folder inside the repo"
    shutil.copy2(download.path, work / download.path.name)
    if download.kind == "py":
        check_same_program(download)
        if RUN_ALL or download.tutorial in SCRIPTS_RUN:
            check_script(download, work)
    else:
        check_notebook_structure(download)
        if RUN_ALL or download.tutorial in NOTEBOOKS_RUN:
            check_notebook(download, work)
