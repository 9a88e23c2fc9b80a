"""The layout a reader sees, in Chromium: "Start here" above the fold on a desktop and a phone,
the landing figure in the colour scheme in use, an opened solution inside its card, the search's
ranking and snippets. Screenshots of the landing page (1280 and 390 px, light and dark), the
gallery's index and a tutorial's top are kept in test-artifacts/site/ for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sitecheck
from test_browser import _luminance, visit

pytestmark = pytest.mark.timeout(180)

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def _context(browser, viewport: dict, theme: str):
    context = browser.new_context(viewport=viewport, color_scheme=theme)
    context.add_init_script(f"localStorage.setItem('theme', '{theme}')")
    return context


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "390px"])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_start_here_is_above_the_fold(
    site_url: str, browser, artifacts_dir: Path, viewport: dict, theme: str
) -> None:
    context = _context(browser, viewport, theme)
    try:
        with visit(context, site_url) as v:
            page = v.goto("index.html")
            page.evaluate("() => document.fonts.ready.then(() => true)")
            start = page.locator("p.attention-start a").first
            box = start.bounding_box()
            text = start.inner_text()
            href = start.get_attribute("href")
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            shot = artifacts_dir / f"landing-{viewport['width']}-{theme}.png"
            page.screenshot(path=shot)
            problems = v.network_problems()
    finally:
        context.close()
    assert box is not None, "no 'Start here' link on the landing page"
    assert text.startswith("Start here"), text
    assert box["y"] + box["height"] <= viewport["height"], (
        f"'Start here' ends at {box['y'] + box['height']:.0f} px, below the fold "
        f"({viewport['height']} px)"
    )
    assert re.search(r"tutorials/.*01_\w+\.html", href or ""), href
    assert overflow <= 1, f"the landing page scrolls sideways by {overflow} px"
    assert not problems, problems


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_landing_figure_follows_the_colour_scheme(site_url: str, browser, theme: str):
    context = _context(browser, DESKTOP, theme)
    try:
        with visit(context, site_url) as v:
            page = v.goto("index.html")
            shown = page.evaluate(
                """() => Array.from(document.querySelectorAll(
                     "div.attention-landing-figure img"))
                   .filter(img => img.offsetParent !== null && img.naturalWidth > 0)
                   .map(img => ({src: img.getAttribute("src"),
                                 width: img.getBoundingClientRect().width}))"""
            )
            figure = page.locator("div.attention-landing-figure img:visible").first
            figure.scroll_into_view_if_needed()
            shot = figure.screenshot()
    finally:
        context.close()
    assert len(shown) == 2, shown
    assert all(theme in s["src"] for s in shown), shown
    assert all(s["width"] >= 300 for s in shown), shown
    from io import BytesIO

    from PIL import Image, ImageStat

    with Image.open(BytesIO(shot)) as image:
        luminance = ImageStat.Stat(image.convert("L")).mean[0] / 255
    if theme == "dark":
        assert luminance < 0.35, f"the dark figure is light ({luminance:.2f})"
    else:
        assert luminance > 0.65, f"the light figure is dark ({luminance:.2f})"


def test_screenshots_of_the_gallery_index_and_a_tutorials_top(
    site_url: str, browser, artifacts_dir: Path
) -> None:
    context = _context(browser, DESKTOP, "light")
    try:
        with visit(context, site_url) as v:
            page = v.goto(f"{sitecheck.TUTORIALS_DIR}/index.html")
            page.screenshot(path=artifacts_dir / "gallery-index.png")
            cards = page.locator(".attention-card").count()
            page = v.goto(sitecheck.tutorial("04_multi_head"))
            page.screenshot(path=artifacts_dir / "tutorial-top.png")
            problems = v.network_problems()
    finally:
        context.close()
    assert cards == len(sitecheck.TUTORIALS), f"{cards} numbered cards"
    assert _luminance(artifacts_dir / "gallery-index.png") > 0.5
    assert not problems, problems


# -- Exercises ------------------------------------------------------------------------------------

_SOLUTION_OVERFLOW_JS = """
() => Array.from(document.querySelectorAll("details.attention-solution")).map(details => {
  details.open = true;
  const card = details.getBoundingClientRect();
  const boxes = Array.from(details.querySelectorAll("div.highlight"))
    .map(box => box.getBoundingClientRect());
  return {
    summary: details.querySelector("summary").textContent.trim(),
    left: Math.min(...boxes.map(b => b.left - card.left)),
    right: Math.max(...boxes.map(b => b.right - card.right)),
    boxes: boxes.length,
  };
})
"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "390px"])
def test_an_opened_solutions_code_stays_inside_its_card(
    site_url: str, browser, site_dir: Path, viewport: dict
) -> None:
    with_solutions = [
        rel
        for rel in sitecheck.tutorial_pages(site_dir)
        if "attention-solution" in (site_dir / rel).read_text(encoding="utf-8")
    ]
    assert with_solutions, "no tutorial has an exercise's solution"
    context = _context(browser, viewport, "light")
    problems = []
    try:
        for rel in with_solutions[:3]:
            with visit(context, site_url) as v:
                page = v.goto(rel)
                for found in page.evaluate(_SOLUTION_OVERFLOW_JS):
                    if found["boxes"] and (found["left"] < -1 or found["right"] > 1):
                        problems.append(
                            f"{rel}: {found['summary']}: the code sticks out by "
                            f"{max(-found['left'], found['right']):.0f} px"
                        )
    finally:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "390px"])
@pytest.mark.parametrize("language", ["", "zh_CN/"], ids=["en", "zh_CN"])
def test_a_tutorials_downloads_are_above_the_fold(
    site_url: str, site_dir: Path, browser, viewport: dict, language: str
) -> None:
    """The notebook and the script of a tutorial are buttons at the top of its page, as in the
    PyTorch tutorials, in both languages; no note sends the reader to the end for them."""
    rel = sitecheck.tutorial("05_masks")
    if language and not (site_dir / language / rel).is_file():
        pytest.skip("the Chinese edition is not built")
    context = _context(browser, viewport, "light")
    try:
        with visit(context, site_url) as v:
            page = v.goto(language + rel)
            links = page.locator(".attention-downloads a")
            hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
            boxes = [links.nth(i).bounding_box() for i in range(links.count())]
            note = page.locator(".sphx-glr-download-link-note").count()
    finally:
        context.close()
    assert [Path(h or "").suffix for h in hrefs] == [".ipynb", ".py"], hrefs
    assert all(Path(h).stem == "05_masks" for h in hrefs), hrefs
    for href, box in zip(hrefs, boxes, strict=True):
        assert box is not None and box["y"] + box["height"] <= viewport["height"], (
            f"{href} ends at {box and box['y'] + box['height']:.0f} px, below the fold "
            f"({viewport['height']} px)"
        )
    assert note == 0, "the page still says 'Go to the end' to download it"


# -- Search ---------------------------------------------------------------------------------------


def _search(browser, site_url: str, query: str) -> list[dict]:
    with visit(browser, site_url) as v:
        page = v.goto(f"search.html?q={query}")
        page.locator("#search-results ul.search li").first.wait_for(
            state="attached", timeout=30_000
        )
        page.wait_for_function(
            "() => !document.querySelector('#search-progress')?.textContent.includes('Preparing')",
            timeout=30_000,
        )
        page.wait_for_timeout(1500)  # the snippets load page by page
        return page.evaluate(
            """() => Array.from(document.querySelectorAll("#search-results ul.search li"))
                 .map(li => ({href: li.querySelector("a").getAttribute("href"),
                              title: li.querySelector("a").textContent,
                              snippet: li.querySelector("p.context")?.textContent ?? ""}))"""
        )


@pytest.mark.parametrize(
    "query, page",
    [
        ("KV cache", "13_kv_cache_gqa"),
        ("gradcheck", "08_checking_gradients"),
        # Pages 6, 12, 19 and 20 speak of it too, some under a heading; page 5 teaches it: its
        # title names masks and a heading of it names the causal mask.
        ("causal mask", "05_masks"),
    ],
)
def test_search_ranks_the_tutorial_first(site_url: str, browser, query: str, page: str):
    results = _search(browser, site_url, query)
    assert results, f"nothing found for {query!r}"
    first = results[0]["href"]
    assert first.startswith("tutorials/") and page in first, (
        f"{query!r}: first result {first}, not the tutorial {page}: "
        f"{[r['href'] for r in results[:5]]}"
    )


@pytest.mark.parametrize(
    "query, page", [("computation times", "sg_execution_times"), ("references", "references")]
)
def test_search_ranks_a_page_titled_by_the_query_first(
    site_url: str, browser, query: str, page: str
):
    """The tutorials' boost does not bury a page whose own title is the query."""
    results = _search(browser, site_url, query)
    assert results, f"nothing found for {query!r}"
    first = results[0]["href"].split("#")[0].split("?")[0]
    assert first == f"{page}.html", [r["href"] for r in results[:5]]


@pytest.mark.parametrize("query", ["RotaryEmbedding", "KVCache", "computation times"])
def test_search_shows_each_entry_once(site_url: str, browser, query: str):
    """An API entry once (its object, not its page's title again), the computation times once;
    the class's own entry first for its own name."""
    results = _search(browser, site_url, query)
    pages = [r["href"].split("?")[0] for r in results]
    api_pages = [p.split("#")[0] for p in pages if p.startswith("generated/")]
    whole = [p for p in pages if p.startswith("generated/") and "#" not in p]
    again = [p for p in whole if api_pages.count(p) > 1]
    assert not again, f"{query!r} shows these API pages twice (as a title and an object): {again}"
    assert len(pages) == len(set(pages)), f"{query!r} shows an entry twice: {pages}"
    timings = [p for p in pages if p.split("#")[0].endswith("sg_execution_times.html")]
    assert len(timings) <= 1, timings
    if query != "computation times":
        assert pages[0] == f"generated/attention.{query}.html#attention.{query}", pages[:5]


def test_search_snippets_read_as_text(site_url: str, browser):
    results = _search(browser, site_url, "attention")
    snippets = [r["snippet"] for r in results if r["snippet"]]
    assert snippets, "no snippet under the results"
    assert not [s for s in snippets if "Go to the end" in s], "a snippet shows the download note"
    alibi = _search(browser, site_url, "alibi_bias")
    for result in alibi:
        if "alibi_bias" in result["href"]:
            assert "\\" not in result["snippet"] and "{" not in result["snippet"], result
