"""Fixtures for the built-site tests: a local web server over build/html and a real Chromium.

Tests are parametrised over what the built site contains (its pages, its figure pages, its
tutorials' downloads), discovered when the tests are collected, so a new page is checked without
editing a list. Without a build the tests skip, and in CI (REQUIRE_BROWSER=1) they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sitecheck


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    site = sitecheck.SITE_DIR
    available = sitecheck.site_available()
    sources = {
        "html_page": lambda: sitecheck.browser_pages(site),
        "figure_page": lambda: sitecheck.pages_with_figures(site),
        "tutorial_page": lambda: sitecheck.tutorial_pages(site),
        "download": lambda: sitecheck.tutorial_downloads(site),
    }
    for name, discover in sources.items():
        if name not in metafunc.fixturenames:
            continue
        if not available:
            # One placeholder: the test asks for site_dir, which skips (fails in CI).
            metafunc.parametrize(name, [pytest.param(None, id="no-site")])
            continue
        values = discover()
        if not values:
            metafunc.parametrize(name, [pytest.param(None, id="none-found")])
            continue
        ids = [v.id if isinstance(v, sitecheck.Download) else v for v in values]
        metafunc.parametrize(name, values, ids=ids)


@pytest.fixture(scope="session")
def site_dir() -> Path:
    return sitecheck.require_site()


@pytest.fixture(scope="session")
def site_url(site_dir: Path):
    """Base URL (ending in /) of the built site, served on 127.0.0.1 for this session."""
    with sitecheck.serve(site_dir) as url:
        yield url


def _unavailable(message: str) -> None:
    if sitecheck.REQUIRE_BROWSER:
        pytest.fail(f"{message} (REQUIRE_BROWSER=1: the browser tests are required here)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright; skipped (failed in CI) when it is missing."""
    if not os.access(sitecheck.CHROMIUM, os.X_OK):
        _unavailable(sitecheck.missing_browser_message())
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        _unavailable(f"Playwright is not importable ({exc}): `pip install -r requirements.txt`")
    with sitecheck.chromium() as browser:
        yield browser


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    sitecheck.ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return sitecheck.ARTIFACTS_DIR
