"""Figures and code that fit: what the built site shows at desktop and phone widths.

- Every figure a tutorial draws is offered at twice its resolution (``srcset``), and the 2x
  file exists with twice the pixels.
- At 1280 px no code block of a tutorial scrolls sideways, and no display formula of an API
  page is cut off or needs a scroll bar.
- At 390 px (a phone) every figure links to its full-size image, so a reader can open it.
- A figure never shows smaller than in the desktop column, where the build checked that its
  text is at least 8 pt: at 390 px each keeps its desktop width and scrolls sideways inside
  its link (the page itself never gets wider than the screen), with a line under it saying
  so; at 1280 px each shows as it always did, with nothing to scroll. The figures of a cell
  that draws several sit side by side at 42% of the column on a desktop and are stacked on
  a phone.

The figures' own text sizes and colours are checked when they are drawn, in the build
(docs/_ext/attention_figures.py).
"""

from __future__ import annotations

import importlib.util
import re
import struct
from pathlib import Path

import pytest
import sitecheck


def _figure_checks():
    """docs/_ext/attention_figures.py, the build's figure checks (not an importable package)."""
    path = sitecheck.REPO_ROOT / "docs" / "_ext" / "attention_figures.py"
    spec = importlib.util.spec_from_file_location("attention_figures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The width (CSS px) of the desktop column, at which the build checks every figure's text, and
#: the share of it each figure of a several-figure cell gets.
COLUMN_PX, MULTI_SHARE = _figure_checks().COLUMN_PX, _figure_checks().MULTI_SHARE

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
            linkRight: (link || img).getBoundingClientRect().right};
  })
"""


def _link_problems(rel: str, figures: list[dict]) -> list[str]:
    problems = []
    for fig in figures:
        name = fig["src"].rsplit("/", 1)[-1]
        if fig["linkRight"] > PHONE["width"] + 1:
            problems.append(
                f"{rel}: {name}'s link reaches past the screen ({fig['linkRight']:.0f} px)"
            )
        if not fig["href"] or Path(fig["href"]).stem.split("_2_00x")[0] != Path(name).stem:
            problems.append(f"{rel}: {name} does not link to its full-size image")
    return problems


# Every figure as the page shows it, once every image has loaded: its own width, the width it
# is shown at, its link (the scrolling region) and the line under it, and the page's width.
_FIGURE_SIZES_JS = """
async () => {
  // A figure in an exercise's solution is seen with the solution open.
  document.querySelectorAll("details").forEach(details => { details.open = true; });
  const images = Array.from(document.querySelectorAll(
    "img.sphx-glr-single-img, img.sphx-glr-multi-img"));
  for (const img of images) {
    if (img.loading === "lazy") img.loading = "eager";
    if (!img.complete) await new Promise(done => { img.onload = img.onerror = done; });
  }
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const figures = images.map(img => {
    const link = img.closest("a");
    const box = img.getBoundingClientRect();
    const hint = link && link.nextElementSibling;
    return {
      src: img.getAttribute("src"),
      multi: img.classList.contains("sphx-glr-multi-img"),
      natural: img.naturalWidth,
      shown: box.width,
      box: {left: box.left, right: box.right, top: box.top + window.scrollY,
            bottom: box.bottom + window.scrollY},
      column: document.querySelector("article").clientWidth,
      link: link ? {
        width: link.clientWidth,
        scrollWidth: link.scrollWidth,
        overflowX: getComputedStyle(link).overflowX,
        focusable: link.tabIndex >= 0,
        right: link.getBoundingClientRect().right,
      } : null,
      hint: hint && hint.classList.contains("figure-scroll-hint")
        ? {shown: hint.checkVisibility(), text: hint.textContent} : null,
    };
  });
  return {figures, pageWidth: document.documentElement.scrollWidth,
          viewport: window.innerWidth};
}
"""


def _desktop_width(fig: dict, column: float = COLUMN_PX) -> float:
    """The width the build checked ``fig``'s text at: at most the desktop column, or its
    share of it for a figure of a several-figure cell."""
    share = MULTI_SHARE if fig["multi"] else 1.0
    return min(fig["natural"], share * column)


def _phone_problems(rel: str, measured: dict) -> list[str]:
    problems = []
    if measured["pageWidth"] > measured["viewport"]:
        problems.append(
            f"{rel}: the page is {measured['pageWidth']} px wide on a "
            f"{measured['viewport']} px screen"
        )
    for fig in measured["figures"]:
        name, link = fig["src"].rsplit("/", 1)[-1], fig["link"]
        least = _desktop_width(fig)
        if fig["shown"] < least - 0.5:
            problems.append(
                f"{rel}: {name} shows {fig['shown']:.0f} px wide, under its desktop width "
                f"{least:.0f} px (its text would show under 8 pt)"
            )
        if link is None:
            problems.append(f"{rel}: {name} has no link around it")
            continue
        overflows = link["scrollWidth"] > link["width"] + 1
        if overflows and link["overflowX"] not in ("auto", "scroll"):
            problems.append(f"{rel}: {name} is wider than its link, which does not scroll")
        if overflows and not link["focusable"]:
            problems.append(f"{rel}: {name} scrolls in a link the keyboard cannot reach")
        if link["right"] > measured["viewport"] + 1:
            problems.append(f"{rel}: {name}'s link reaches past the screen")
        if fig["hint"] is None or fig["hint"]["shown"] != overflows:
            problems.append(
                f"{rel}: {name} {'overflows' if overflows else 'fits'} but the line that says "
                f"it scrolls is {fig['hint'] and ('shown' if fig['hint']['shown'] else 'hidden')}"
            )
    return problems


def _desktop_problems(rel: str, measured: dict) -> list[str]:
    problems = []
    for fig in measured["figures"]:
        name, link = fig["src"].rsplit("/", 1)[-1], fig["link"]
        expected = _desktop_width(fig, fig["column"])
        if abs(fig["shown"] - expected) > 0.5:
            problems.append(
                f"{rel}: {name} shows {fig['shown']:.1f} px wide at 1280 px, not "
                f"min({fig['natural']}, column share) = {expected:.1f} px"
            )
        if link and link["scrollWidth"] > link["width"] + 1:
            problems.append(f"{rel}: {name} scrolls inside its link at 1280 px")
        if fig["hint"] and fig["hint"]["shown"]:
            problems.append(f"{rel}: {name} says it scrolls at 1280 px")
    return problems


def test_a_tutorial_at_a_phones_and_a_desktops_width(
    tutorial_page: str, site_dir: Path, site_url: str, browser
) -> None:
    """One visit per width. At 390 px every figure links to its full-size image, and shows at
    least as wide as in the desktop column, min(its width, 736 px), so its text keeps the 8 pt
    the build checked; a wider figure scrolls sideways inside its link, which the keyboard
    reaches, and the page stays as wide as the screen. At 1280 px no code block scrolls
    sideways, and every figure shows as it always did: min(its width, the column), nothing
    scrolls and no line says it does."""
    rel = tutorial_page
    has_figures = bool(sitecheck.parse_page(site_dir / rel).figures)
    problems = []
    if has_figures:
        context, page = _open(browser, site_url, rel, PHONE)
        try:
            links = page.evaluate(_FIGURE_LINKS_JS)
            measured = page.evaluate(_FIGURE_SIZES_JS)  # opens the solutions: after the links
        finally:
            context.close()
        assert links and measured["figures"], f"{rel}: no figure found in the browser"
        problems += _link_problems(rel, links) + _phone_problems(rel, measured)
    context, page = _open(browser, site_url, rel, DESKTOP)
    try:
        wide = page.evaluate(_WIDE_CODE_JS)  # before the solutions are opened
        measured = page.evaluate(_FIGURE_SIZES_JS) if has_figures else None
    finally:
        context.close()
    problems += [f"{rel}: a code block is {w['width']} px in a {w['box']} px box at 1280 px: "
                 f"{w['line']!r}" for w in wide]  # fmt: skip
    if measured is not None:
        problems += _desktop_problems(rel, measured)
    assert not problems, "\n".join(problems)


def _as_one_cell_of_figures(html: str, count: int = 2) -> str:
    """``html`` with its first ``count`` figures moved into one list, as sphinx-gallery writes
    the figures of a cell that draws several (a ``ul.sphx-glr-horizontal`` of
    ``img.sphx-glr-multi-img``, sphinx_gallery.scrapers.HLIST_SG_TEMPLATE)."""
    tags = [t for t in _IMG.findall(html) if "sphx-glr-single-img" in t][:count]
    assert len(tags) == count, f"the page has fewer than {count} figures"
    for tag in tags[1:]:
        html = html.replace(tag, "", 1)
    items = "".join(
        "<li>" + t.replace("sphx-glr-single-img", "sphx-glr-multi-img") + "</li>" for t in tags
    )
    return html.replace(tags[0], f'<ul class="sphx-glr-horizontal">{items}</ul>', 1)


#: A page with two figures 800 px wide, wider than a phone's column.
MULTI_PAGE = sitecheck.tutorial("04_multi_head")


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390px", "1280px"])
def test_figures_of_one_cell_side_by_side_or_stacked(
    site_dir: Path, site_url: str, browser, viewport: dict
) -> None:
    """The figures of a cell that draws several (no page has one yet, so a page's first two
    figures are made into one): side by side at 42% of the column on a desktop, stacked on a
    phone and each at least as wide as on a desktop."""
    source = (site_dir / MULTI_PAGE).read_text(encoding="utf-8")
    context = browser.new_context(viewport=viewport, color_scheme="light")
    context.route(sitecheck.NOT_LOCAL_URL, lambda route: route.abort("blockedbyclient"))
    context.route(
        site_url + MULTI_PAGE,
        lambda route: route.fulfill(
            content_type="text/html; charset=utf-8", body=_as_one_cell_of_figures(source)
        ),
    )
    try:
        page = context.new_page()
        page.goto(site_url + MULTI_PAGE, wait_until="load")
        measured = page.evaluate(_FIGURE_SIZES_JS)
    finally:
        context.close()
    multi = [fig for fig in measured["figures"] if fig["multi"]]
    assert len(multi) == 2, f"expected two figures of one cell, found {len(multi)}"
    first, second = multi[0]["box"], multi[1]["box"]
    if viewport is PHONE:
        problems = _phone_problems(MULTI_PAGE, measured)
        assert second["top"] >= first["bottom"], f"not stacked on a phone: {first}, {second}"
    else:
        problems = _desktop_problems(MULTI_PAGE, measured)
        side_by_side = second["left"] >= first["right"] - 0.5 and (
            second["top"] < first["bottom"] and first["top"] < second["bottom"]
        )
        assert side_by_side, f"not side by side at 1280 px: {first}, {second}"
    assert not problems, "\n".join(problems)
