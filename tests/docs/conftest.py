"""Helpers for the build-behaviour tests.

Two kinds of test live here. Some build a throwaway copy of the site (conf.py, docs/, gallery/,
the package, the Makefile) with one extra gallery script and run ``make html`` on it, executing
only that script, so each takes seconds. The others read what the real build left in ``build/``
(``make test`` builds before running them); without a build they skip, and in CI they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from docbuild import BUILD_DIR, HTML_DIR, ROOT


def _require_build(path: Path) -> Path:
    if path.exists():
        return path
    message = f"{path.relative_to(ROOT)} is missing: run `make html` (or `make test`) first"
    if os.environ.get("CI") or os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def html_dir() -> Path:
    """build/html from the real build."""
    return _require_build(HTML_DIR / "index.html").parent


@pytest.fixture(scope="session")
def junit_report() -> Path:
    """sphinx-gallery's JUnit report of the real build."""
    return _require_build(BUILD_DIR / "junit-gallery.xml")


@pytest.fixture(scope="session")
def zh_html_dir() -> Path:
    """build/html/zh_CN: the Chinese edition from the real build."""
    return _require_build(HTML_DIR / "zh_CN" / "index.html").parent
