"""Figures and code that fit: what the built site shows at desktop and phone widths.

- Every figure a tutorial draws is offered at twice its resolution (``srcset``), and the 2x
  file exists with twice the pixels.
- At 1280 px no code block of a tutorial scrolls sideways, and no display formula of an API
  page is cut off or needs a scroll bar.
- At 390 px (a phone) every figure links to its full-size image, so a reader can open it.

The figures' own text sizes and colours are checked when they are drawn, in the build
(docs/_ext/attention_figures.py).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
import sitecheck

pytestmark = pytest.mark.timeout(300)

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
#: The API pages whose docstrings carry display maths.
MATH_API_PAGES = ("generated/attention.MultiHeadAttention.html",)

_IMG = re.compile(r"<img\b[^>]*>")
# sphinx-gallery writes some attributes with spaces around "=" (class = "sphx-glr-...").
_ATTR = re.compile(r'(\w[\w-]*)\s*=\s*"([^"]*)"')


def _figure_tags(path: Path) -> list[dict[str, str]]:
    tags = [dict(_ATTR.findall(tag)) for tag in _IMG.findall(path.read_text(encoding="utf-8"))]
    figure_classes = {"sphx-glr-single-img", "sphx-glr-multi-img"}
    return [t for t in tags if figure_classes & set(t.get("class", "").split())]


def _png_size(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        header = f.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_every_figure_has_a_2x_source(site_dir: Path) -> None:
    pages = [p for p in sitecheck.tutorial_pages(site_dir) if sitecheck.parse_page(site_dir / p)]
    problems, checked = [], 0
    for rel in pages:
        page = site_dir / rel
        for tag in _figure_tags(page):
            checked += 1
            src = tag.get("src", "")
            sources = dict(
                reversed(part.strip().split()) if " " in part.strip() else ("1x", part.strip())
                for part in tag.get("srcset", "").split(",")
                if part.strip()
            )
            double = sources.get("2x") or sources.get("2.00x")
            if double is None:
                problems.append(f"{rel}: {src} has no 2x source (srcset={tag.get('srcset')!r})")
                continue
            one, two = (page.parent / src).resolve(), (page.parent / double).resolve()
            if not two.is_file():
                problems.append(f"{rel}: the 2x source {double} does not exist")
                continue
            (w1, h1), (w2, h2) = _png_size(one), _png_size(two)
            if abs(w2 - 2 * w1) > 2 or abs(h2 - 2 * h1) > 2:
                problems.append(f"{rel}: {double} is {w2}x{h2}, not twice {src}'s {w1}x{h1}")
    assert checked, "no tutorial figure found"
    assert not problems, "\n".join(problems)


# Code blocks (not printed output) that are wider than their box.
_WIDE_CODE_JS = """
() => Array.from(document.querySelectorAll("article div[class*='highlight-'] pre"))
  .filter(pre => !pre.closest(".sphx-glr-script-out"))
  .filter(pre => pre.scrollWidth > pre.clientWidth)
  .map(pre => ({width: pre.scrollWidth, box: pre.clientWidth,
                line: pre.textContent.split("\\n").reduce((a, b) => b.length > a.length ? b : a)}))
"""

# Display formulas that are wider than their box (cut off, or scrolled), or that reach past
# the text column.
_CLIPPED_MATH_JS = """
async () => {
  await MathJax.startup.promise;
  const column = document.querySelector("article").getBoundingClientRect();
  return Array.from(document.querySelectorAll("mjx-container[display='true']"))
    .filter(m => m.scrollWidth > m.clientWidth + 1
                 || m.getBoundingClientRect().right > column.right + 1
                 || m.firstElementChild.getBoundingClientRect().right
                    > m.getBoundingClientRect().right + 1)
    .map(m => ({tex: (m.parentElement.textContent || "").trim().slice(0, 80),
                width: m.scrollWidth, box: m.clientWidth}));
}
"""


def _open(browser, site_url: str, rel: str, viewport: dict):
    context = browser.new_context(viewport=viewport, color_scheme="light")
    context.route(sitecheck.NOT_LOCAL_URL, lambda route: route.abort("blockedbyclient"))
    page = context.new_page()
    page.goto(site_url + rel, wait_until="load")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    return context, page


def test_code_blocks_fit_at_desktop_width(site_dir: Path, site_url: str, browser) -> None:
    problems = []
    for rel in sitecheck.tutorial_pages(site_dir):
        context, page = _open(browser, site_url, rel, DESKTOP)
        try:
            wide = page.evaluate(_WIDE_CODE_JS)
        finally:
            context.close()
        problems += [f"{rel}: {w['width']} px in a {w['box']} px box: {w['line']!r}" for w in wide]
    assert not problems, "code blocks scroll sideways at 1280 px:\n" + "\n".join(problems)


@pytest.mark.parametrize("rel", MATH_API_PAGES)
def test_display_maths_fits_on_api_pages(site_dir: Path, site_url: str, browser, rel) -> None:
    assert (site_dir / rel).is_file(), f"{rel} was not built"
    context, page = _open(browser, site_url, rel, DESKTOP)
    try:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000
        )
        clipped = page.evaluate(_CLIPPED_MATH_JS)
        count = page.evaluate("() => document.querySelectorAll('mjx-container').length")
    finally:
        context.close()
    assert count, f"{rel} has no typeset maths"
    assert not clipped, f"{rel}: display maths wider than its box at 1280 px: {clipped}"


# Every figure, with the link around it (if any) and the width it is shown at.
_FIGURE_LINKS_JS = """
() => Array.from(document.querySelectorAll(
  "img.sphx-glr-single-img, img.sphx-glr-multi-img")).map(img => {
    const link = img.closest("a");
    return {src: img.getAttribute("src"), href: link ? link.href : null,
            natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
            right: img.getBoundingClientRect().right};
  })
"""


def test_figures_link_to_full_size_on_a_phone(site_dir: Path, site_url: str, browser) -> None:
    problems, checked = [], 0
    for rel in sitecheck.tutorial_pages(site_dir):
        if not sitecheck.parse_page(site_dir / rel).figures:
            continue
        context, page = _open(browser, site_url, rel, PHONE)
        try:
            figures = page.evaluate(_FIGURE_LINKS_JS)
        finally:
            context.close()
        for fig in figures:
            checked += 1
            name = fig["src"].rsplit("/", 1)[-1]
            if fig["right"] > PHONE["width"] + 1:
                problems.append(f"{rel}: {name} reaches past the screen ({fig['right']:.0f} px)")
            if not fig["href"] or Path(fig["href"]).stem.split("_2_00x")[0] != Path(name).stem:
                problems.append(f"{rel}: {name} does not link to its full-size image")
    assert checked, "no figure found"
    assert not problems, "\n".join(problems)
