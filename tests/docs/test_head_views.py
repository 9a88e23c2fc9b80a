"""Every page that draws a trained model's heatmap shows its example as a head view.

A page that trains a model (a recipe of :mod:`attention.recipes`, or the loop of
:mod:`attention.training`) and draws weights with ``plot_attention`` saves the example it draws
with ``save_head_view(name, ...)`` in its code and places ``.. head-view:: name`` in its text
(docs/_ext/attention_headviews.py), so that a new page cannot forget it: read from the sources.
A one-page project shows what the extension does with a saved example, and without one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys

import pytest
from docbuild import GALLERY_DIR, ROOT

from attention.head_view import NAME, head_view_data

PAGES = sorted(GALLERY_DIR.glob("*/[0-9][0-9]_*.py"))
DIRECTIVE = re.compile(r"^#\s*\.\. head-view::\s*(\S+)\s*$", re.MULTILINE)


def _calls(tree: ast.AST, function: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            getattr(node.func, "id", None) == function
            or getattr(node.func, "attr", None) == function
        )
    ]


def _trains(tree: ast.AST) -> bool:
    """The page imports the recipes or the training loop, which every trained model uses."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in (
            "attention.recipes",
            "attention.training",
        ):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "attention":
            if {alias.name for alias in node.names} & {"recipes", "training"}:
                return True
    return False


def _views(path) -> tuple[list[str], list[str]]:
    """The names the page saves (save_head_view's first argument) and the names it shows."""
    source = path.read_text(encoding="utf-8")
    saved = [
        call.args[0].value
        for call in _calls(ast.parse(source), "save_head_view")
        if call.args and isinstance(call.args[0], ast.Constant)
    ]
    return saved, DIRECTIVE.findall(source)


def _draws_a_trained_heatmap(path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return _trains(tree) and bool(_calls(tree, "plot_attention"))


def test_the_pages_that_draw_a_trained_heatmap_are_found():
    found = {path.name[:2] for path in PAGES if _draws_a_trained_heatmap(path)}
    assert {"11", "12", "15", "16"} <= found, found  # the classifier, induction, dates, text
    assert not found & {f"{n:02d}" for n in range(1, 10)}, found  # random weights only there


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.stem)
def test_a_page_that_draws_a_trained_heatmap_has_a_head_view(path):
    saved, shown = _views(path)
    if _draws_a_trained_heatmap(path):
        assert shown, f"{path.name} draws a trained model's heatmap: add a head view"
    assert sorted(saved) == sorted(shown), (
        f"{path.name}: every save_head_view(name, ...) needs `.. head-view:: name` and back; "
        f"saved {saved}, shown {shown}"
    )
    assert all(NAME.fullmatch(name) for name in shown), shown


def test_each_view_name_is_one_pages():
    names = [name for path in PAGES for name in _views(path)[1]]
    assert len(names) == len(set(names)), names


def test_a_page_without_the_directive_is_caught(tmp_path):
    page = tmp_path / "99_new.py"
    page.write_text(
        "from attention.recipes import fit_char_lm\nfrom attention import plot_attention\n"
        "model, _, _ = fit_char_lm()\nplot_attention(weights)\n",
        encoding="utf-8",
    )
    assert _draws_a_trained_heatmap(page) and _views(page) == ([], [])


CONF = """
import os, sys
sys.path.insert(0, {ext!r})
extensions = ["attention_headviews"]
if os.environ.get("SAVE_VIEW") == "1":  # as a page that ran in this process
    from attention.head_view import save_head_view
    save_head_view("t-view", ["a", "b"], [[[[1.0, 0.0], [0.25, 0.75]]]])
"""


def _build(src, out, *, save: bool, pattern: str = ""):
    env = {**os.environ, "NO_COLOR": "1", "SAVE_VIEW": "1" if save else "0"}
    env["ATTENTION_GALLERY_PATTERN"] = pattern
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", str(src), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )


def test_the_build_serves_the_saved_example_and_keeps_it_for_a_build_that_runs_nothing(tmp_path):
    src = tmp_path / "src"
    (src / "tutorials").mkdir(parents=True)
    (src / "conf.py").write_text(CONF.format(ext=str(ROOT / "docs" / "_ext")), encoding="utf-8")
    (src / "index.rst").write_text(
        "Page\n====\n\nA figure.\n\n.. head-view:: t-view\n\nAfter.\n", encoding="utf-8"
    )
    expected = head_view_data(["a", "b"], [[[[1.0, 0.0], [0.25, 0.75]]]])
    for out, save in ((tmp_path / "ran", True), (tmp_path / "reused", False)):
        proc = _build(src, out, save=save)
        assert proc.returncode == 0, proc.stdout[-3000:]
        served = out / "_static" / "head-views" / "t-view.json"
        assert json.loads(served.read_text(encoding="utf-8")) == expected
        html = (out / "index.html").read_text(encoding="utf-8")
        assert '<div class="attention-head-view" data-view="t-view"></div>' in html
        assert "widgets/head-view.js" in html and 'type="module"' in html
    assert (src / "tutorials" / "_head_views" / "t-view.json").is_file()


def test_a_view_that_no_page_saved_fails_the_build(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(ext=str(ROOT / "docs" / "_ext")), encoding="utf-8")
    (src / "index.rst").write_text("Page\n====\n\n.. head-view:: t-missing\n", encoding="utf-8")
    proc = _build(src, tmp_path / "out", save=False)
    assert proc.returncode != 0
    assert "head view 't-missing' has no example" in proc.stdout, proc.stdout[-3000:]


def test_a_partial_build_leaves_out_a_view_whose_page_did_not_run(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(ext=str(ROOT / "docs" / "_ext")), encoding="utf-8")
    (src / "index.rst").write_text("Page\n====\n\n.. head-view:: t-missing\n", encoding="utf-8")
    proc = _build(src, tmp_path / "out", save=False, pattern="13_")
    assert proc.returncode == 0, proc.stdout[-3000:]
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "attention-head-view" not in html
