"""Helpers shared by the build-behaviour tests (see conftest.py for what they test)."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "build"
HTML_DIR = BUILD_DIR / "html"
GALLERY_DIR = ROOT / "gallery"

# tests/pages.py finds the pages, in the gallery's parts and at its top.
sys.path.insert(0, str(ROOT / "tests"))
import pages  # noqa: E402

# What a site copy needs; generated output is left behind so the copy builds from scratch.
_COPIED_DIRS = ("docs", "gallery", "attention", "benchmarks", "locale")
_COPIED_FILES = ("conf.py", "Makefile", "pyproject.toml", "requirements.txt", "README.md")
_GENERATED = shutil.ignore_patterns(
    "tutorials", "generated", "sg_execution_times.rst", "__pycache__", "*.egg-info"
)


def gallery_scripts() -> list[str]:
    """The gallery scripts, as paths in the gallery (``1_foundations/01_qkv_analogy.py``), in
    learning-path order. A page's rendered HTML is ``tutorials/<path>.html``."""
    return [page.relative_to(GALLERY_DIR).as_posix() for page in pages.pages()]


def gallery_script(stem: str) -> str:
    """The path in the gallery of the page named ``stem``, in whatever part it is."""
    return pages.find(stem).relative_to(GALLERY_DIR).as_posix()


def load_conf(**env: str) -> dict:
    """The namespace of conf.py, read with the given environment variables set."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return runpy.run_path(str(ROOT / "conf.py"))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def build_site_copy(tmp_path: Path, scripts: dict[str, str], pattern: str):
    """Copy the site to ``tmp_path``, add ``scripts`` to its gallery and run ``make html``.

    ``scripts`` maps a path in the gallery (``98_page.py``, or ``1_foundations/98_page.py``
    for a page in a part) to its text. Only the gallery scripts matching ``pattern`` are
    executed. The environment is this one's (``make -o`` keeps make from reinstalling it).
    Returns the finished process, whose ``output`` attribute holds stdout and stderr together.
    """
    site = tmp_path / "site"
    for name in _COPIED_DIRS:
        shutil.copytree(ROOT / name, site / name, ignore=_GENERATED)
    for name in _COPIED_FILES:
        shutil.copy2(ROOT / name, site / name)
    # The widgets' JavaScript and its installed runtime (npm ci ran in the repository), shared.
    (site / "web").symlink_to(ROOT / "web", target_is_directory=True)
    for name, text in scripts.items():
        path = site / "gallery" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    venv = Path(sys.prefix)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    # TMPDIR: Sphinx saves the traceback of a failed build in a file there.
    env.update(ATTENTION_GALLERY_PATTERN=pattern, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    # Plain text to search: Sphinx colours its messages when CI=true, splitting them with escapes.
    env["NO_COLOR"] = "1"
    env.pop("ATTENTION_RUN_STALE", None)
    cmd = ["make", "-C", str(site), "-o", str(venv / ".installed"), "html", f"VENV={venv}"]
    # English alone: the Chinese edition has its own tests against the real build.
    cmd.append("LANGUAGES=en")
    proc = subprocess.run(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600
    )
    proc.output = proc.stdout
    return proc
