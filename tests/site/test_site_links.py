"""The built site's structure, read from its HTML files: the agreed pages exist, every internal
link and anchor resolves, and no page needs the network.

These checks parse the HTML with the standard library and ask the local server for each target,
so they cover every link on every page in a few seconds without a browser.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import sitecheck

MAX_LISTED = 40


def _listing(problems: list[str]) -> str:
    shown = "\n  ".join(problems[:MAX_LISTED])
    more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    return f"\n  {shown}{more}"


@pytest.mark.parametrize("tutorial", sitecheck.TUTORIALS)
def test_agreed_tutorial_is_a_page_with_downloads(site_dir: Path, tutorial: str) -> None:
    rel = f"{sitecheck.TUTORIALS_DIR}/{tutorial}.html"
    page = site_dir / rel
    assert page.is_file(), f"tutorial page {rel} is missing from the built site"
    parsed = sitecheck.parse_page(page)
    assert parsed.is_gallery_example, f"{rel} is not a rendered sphinx-gallery example"
    stem = Path(tutorial).name
    kinds = {d.kind: d for d in sitecheck.tutorial_downloads(site_dir) if d.tutorial == stem}
    for kind in ("py", "ipynb"):
        assert kind in kinds, f"{rel} offers no .{kind} download"
        assert kinds[kind].path.is_file(), f"{rel} links a .{kind} that is not in the site"

    # The gallery's index and the index of the page's part link it.
    indexes = [f"{sitecheck.TUTORIALS_DIR}/index.html"]
    if "/" in tutorial:
        indexes.append(f"{sitecheck.TUTORIALS_DIR}/{Path(tutorial).parent}/index.html")
    for index_rel in indexes:
        index = sitecheck.parse_page(site_dir / index_rel)
        linked = {sitecheck.resolve(index_rel, h) for h in index.links}
        assert any(t and t[0] == rel for t in linked), f"{index_rel} does not link {rel}"


def test_internal_links_and_anchors_resolve(site_dir: Path, site_url: str) -> None:
    pages = sitecheck.html_pages(site_dir)
    assert pages, f"no HTML pages under {site_dir}"
    status: dict[str, int | str] = {}

    def fetch_status(path: str) -> int | str:
        if path not in status:
            request = urllib.request.Request(site_url + urllib.parse.quote(path), method="HEAD")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    status[path] = response.status
            except urllib.error.HTTPError as exc:
                status[path] = exc.code
            except OSError as exc:
                status[path] = str(exc)
        return status[path]

    problems: list[str] = []
    checked = 0
    for rel in pages:
        parsed = sitecheck.parse_page(site_dir / rel)
        targets = [("link", href) for href in parsed.links]
        targets += [(f"<{tag}>", url) for tag, url in parsed.resources]
        for what, href in targets:
            resolved = sitecheck.resolve(rel, href)
            if resolved is None:
                continue  # leaves the site
            path, fragment = resolved
            checked += 1
            code = fetch_status(path)
            if code != 200:
                problems.append(f"{rel}: {what} {href!r} -> {path} gives {code}")
                continue
            if what == "link" and fragment and path.endswith(".html"):
                if fragment not in sitecheck.parse_page(site_dir / path).ids:
                    problems.append(f"{rel}: {what} {href!r} -> no id {fragment!r} in {path}")
    assert checked, "no internal links found at all"
    assert not problems, (
        f"{len(problems)} broken internal links or anchors "
        f"(of {checked} checked on {len(pages)} pages):{_listing(problems)}"
    )


def test_no_page_loads_anything_from_the_network(site_dir: Path) -> None:
    """Scripts, styles, images and frames all come from the site itself (readers offline)."""
    problems = []
    for rel in sitecheck.html_pages(site_dir):
        for tag, url in sitecheck.parse_page(site_dir / rel).resources:
            if sitecheck.resolve(rel, url) is None and not url.startswith("data:"):
                problems.append(f"{rel}: <{tag}> {url}")
    assert not problems, f"pages that need the network:{_listing(problems)}"
