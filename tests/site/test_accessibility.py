"""Every built page passes axe-core's WCAG 2 A and AA rules, in a light or dark colour scheme
at a desktop or a phone width (the representative pages in all four); scrolling code can be
reached and scrolled with the keyboard.

axe-core is the engine behind the browsers' own accessibility audits. Its script comes from the
pinned ``axe-playwright-python`` package (requirements.txt), which ships it as a local file, and
is injected into each page through Playwright: nothing is fetched. Besides the WCAG 2.0 and 2.1
A/AA rules, a few of axe's structure rules run too: one ``h1`` per page, headings in order, one
``main`` landmark.

A failure lists, for each page, colour scheme and width, the rule, what it asks for and the
elements that break it (a CSS selector and the start of their HTML).
"""

from __future__ import annotations

import contextlib
import functools
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
import sitecheck

#: The tags of the WCAG 2.0 and 2.1 rules, levels A and AA.
WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
#: axe's "best-practice" rules about the structure of a page, run in addition to the WCAG ones.
STRUCTURE_RULES = (
    "page-has-heading-one",
    "heading-order",
    "landmark-one-main",
    "landmark-no-duplicate-main",
    "landmark-main-is-top-level",
)
COLOR_SCHEMES = ("light", "dark")
#: A desktop window and a phone (the width of most phones held upright), in CSS pixels.
VIEWPORTS = {1280: {"width": 1280, "height": 900}, 390: {"width": 390, "height": 844}}
#: Elements listed per rule in a failure message (the count is always given).
MAX_ELEMENTS_SHOWN = 8
#: The attributes a figure's <img> may have; any other is the remains of a broken attribute.
FIGURE_ATTRIBUTES = {"src", "srcset", "alt", "class", "width", "height", "loading", "style"}
#: Tab presses allowed before the keyboard reaches the first scrolling code block.
MAX_TABS = 300

pytestmark = pytest.mark.timeout(120)

# Resolves when the page is ready to be audited: fonts loaded, math typeset, then two frames
# so that scripts that react to the layout (the scrolling regions) have run.
_SETTLE_JS = """
async () => {
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  return true;
}
"""

# The relative luminance of the page's ground, to check that the colour scheme took effect.
_GROUND_LUMINANCE_JS = """
() => {
  const m = /rgba?\\(([^)]*)\\)/.exec(getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
}
"""

# The focused element, if it scrolls sideways: its name, outline and how far it is scrolled.
# A region's name is its aria-label; a figure's link (which scrolls on a phone) is named by the
# alt text of its image.
_FOCUSED_SCROLLER_JS = """
() => {
  const el = document.activeElement;
  if (!el || el === document.body || el.scrollWidth <= el.clientWidth + 1) return null;
  const style = getComputedStyle(el);
  const img = el.matches("a") ? el.querySelector("img") : null;
  return {
    tag: el.tagName.toLowerCase(),
    label: el.getAttribute("aria-label") || (img && img.getAttribute("alt")) || "",
    outlineStyle: style.outlineStyle,
    outlineWidth: parseFloat(style.outlineWidth) || 0,
    scrollLeft: el.scrollLeft,
  };
}
"""


@functools.cache
def _axe_script() -> str:
    from axe_playwright_python.base import AXE_SCRIPT

    return AXE_SCRIPT


def _axe_options() -> dict:
    return {
        "runOnly": {"type": "tag", "values": list(WCAG_TAGS)},
        "rules": {rule: {"enabled": True} for rule in STRUCTURE_RULES},
        "resultTypes": ["violations"],
    }


# Runs axe in two passes and merges their violations: every rule but colour contrast on the
# whole page, then colour contrast on a sample. Contrast is the slow rule, one check per element
# that holds text (thousands on a tutorial page: every token of highlighted code is one), and
# almost all of them repeat a few combinations. So the sample is the first visible element of
# each distinct combination of text colour, size, weight and everything an ancestor adds to the
# ground (background colour and image, opacity, blending): every colour pair on the page is
# checked, once, in its real context.
_AXE_RUN_JS = """
async options => {
  const grounds = new Map();
  const ground = el => {
    if (!el || el === document.documentElement) return "";
    if (!grounds.has(el)) {
      const s = getComputedStyle(el);
      grounds.set(el, [s.backgroundColor, s.backgroundImage, s.opacity, s.mixBlendMode,
                       s.filter, ground(el.parentElement)].join("/"));
    }
    return grounds.get(el);
  };
  const holders = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (el && walker.currentNode.textContent.trim() && !el.closest("script, style, noscript"))
      holders.add(el);
  }
  for (const el of document.querySelectorAll("input, select, textarea, button")) holders.add(el);
  // Text scrolled out of sight inside a code block is judged "cannot tell", not failed: an
  // element in sight is preferred.
  const inSight = (el, box) => {
    const block = el.closest("pre");
    if (!block) return true;
    const frame = block.getBoundingClientRect();
    return box.left >= frame.left && box.right <= frame.right;
  };
  const chosen = new Map();
  for (const el of holders) {
    const box = el.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1 || !el.checkVisibility({visibilityProperty: true}))
      continue;
    const s = getComputedStyle(el);
    const key = [s.color, s.fontSize, s.fontWeight, s.textShadow, ground(el)].join("|");
    const best = chosen.get(key);
    if (!best || (!best.seen && inSight(el, box))) chosen.set(key, {el, seen: inSight(el, box)});
  }
  const sample = Array.from(chosen.values(), c => c.el);
  const rules = Object.assign({}, options.rules, {"color-contrast": {enabled: false}});
  const runs = [await axe.run(document, Object.assign({}, options, {rules}))];
  if (sample.length) {
    runs.push(await axe.run(sample, {runOnly: {type: "rule", values: ["color-contrast"]},
                                     resultTypes: options.resultTypes}));
  }
  const merged = new Map();
  for (const run of runs) for (const v of run.violations) {
    if (merged.has(v.id)) merged.get(v.id).nodes.push(...v.nodes);
    else merged.set(v.id, v);
  }
  return Array.from(merged.values());
}
"""


def axe_violations(page) -> list[dict]:
    """Run axe-core (from the local package) on ``page``; its list of violations."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(_axe_script())
    return page.evaluate(_AXE_RUN_JS, _axe_options())


def describe(violations: list[dict]) -> list[str]:
    """One block of lines per violated rule: the rule, its impact, its help and the elements."""
    lines = []
    for v in violations:
        nodes = v["nodes"]
        lines.append(f"{v['id']} ({v['impact']}, {len(nodes)} elements): {v['help']}")
        for node in nodes[:MAX_ELEMENTS_SHOWN]:
            target = " ".join(str(t) for t in node["target"])
            html = " ".join(node["html"].split())[:160]
            summary = " ".join((node.get("failureSummary") or "").split())[:240]
            lines.append(f"    {target}: {html}")
            if summary:
                lines.append(f"        {summary}")
        if len(nodes) > MAX_ELEMENTS_SHOWN:
            lines.append(f"    ... and {len(nodes) - MAX_ELEMENTS_SHOWN} more")
    return lines


def _block_external(route) -> None:
    if sitecheck.is_local_url(route.request.url):
        route.continue_()
    else:
        route.abort("blockedbyclient")


@pytest.fixture(scope="module")
def tabs(browser):
    """One browser tab per (colour scheme, width), made when first asked for and reused by
    every page of this worker."""
    made: dict[tuple[str, int], object] = {}
    contexts = []

    def get(scheme: str, width: int):
        if (scheme, width) not in made:
            context = browser.new_context(viewport=VIEWPORTS[width], color_scheme=scheme)
            context.route(sitecheck.NOT_LOCAL_URL, _block_external)
            contexts.append(context)
            page = context.new_page()
            page.set_default_timeout(30_000)
            made[(scheme, width)] = page
        return made[(scheme, width)]

    yield get
    for context in contexts:
        context.close()


def _open(page, url: str) -> None:
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response and response.status}"
    page.evaluate(_SETTLE_JS)


#: Pages checked in every colour scheme at every width (and opened in every run); every
#: other page is checked in one of the four, in turn, so that each configuration sees a quarter
#: of the site.
EVERY_CONFIGURATION = sitecheck.EVERY_CONFIGURATION
CONFIGURATIONS = [(scheme, width) for scheme in COLOR_SCHEMES for width in VIEWPORTS]


def configurations(html_page: str, site_dir: Path) -> list[tuple[str, int]]:
    """The (scheme, width) pairs ``html_page`` is checked in."""
    if html_page in EVERY_CONFIGURATION:
        return CONFIGURATIONS
    index = sitecheck.html_pages(site_dir).index(html_page)
    return [CONFIGURATIONS[index % len(CONFIGURATIONS)]]


def test_every_configuration_pages_exist(site_dir: Path) -> None:
    pages = sitecheck.html_pages(site_dir)
    missing = [page for page in EVERY_CONFIGURATION if page not in pages]
    assert not missing, f"pages checked in every configuration are not in the build: {missing}"


def test_six_runs_open_every_page(site_dir: Path) -> None:
    """The shares of the templated pages and of the tutorials that runs on different days open
    cover the site, and every run opens the hand-written pages and the pages of every
    configuration."""
    every = sitecheck.browser_pages(site_dir, "all")
    runs = sitecheck.TEMPLATED_SHARE * sitecheck.TUTORIAL_SHARE
    shares = [sitecheck.browser_pages(site_dir, str(i)) for i in range(runs)]
    assert set().union(*shares) == set(every)
    sampled = {p for p in every if sitecheck.TEMPLATED_PAGES.match(p)}
    sampled |= {p for p in every if sitecheck.TUTORIAL_PAGES.match(p)}
    always = {p for p in every if p not in sampled} | set(EVERY_CONFIGURATION)
    tutorials = sorted(p for p in every if sitecheck.TUTORIAL_PAGES.match(p))
    assert len(tutorials) >= 20, tutorials
    for share in shares:
        assert always <= set(share)
        assert len(share) < 0.6 * len(every), "the share is most of the site"
    # Today's run, with no share chosen, is one of the six.
    if "ATTENTION_PAGES_SAMPLE" not in os.environ:
        assert sitecheck.browser_pages(site_dir) in shares


def test_page_passes_axe(html_page: str, site_url: str, site_dir: Path, tabs) -> None:
    """axe-core finds no WCAG 2 A/AA violation (and no structure problem) on the page."""
    for scheme, width in configurations(html_page, site_dir):
        page = tabs(scheme, width)
        _open(page, site_url + html_page)
        ground = page.evaluate(_GROUND_LUMINANCE_JS)
        where = f"{html_page} ({scheme}, {width}px)"
        if scheme == "dark":
            assert ground < 0.1, f"{where}: the dark colour scheme has a light ground ({ground})"
        else:
            assert ground > 0.5, f"{where}: the light colour scheme has a dark ground ({ground})"
        violations = axe_violations(page)
        if violations:
            pytest.fail(f"{where}:\n  " + "\n  ".join(describe(violations)))


def _first_tutorial_with_code(site_dir: Path) -> str:
    tutorials = sitecheck.tutorial_pages(site_dir)
    assert tutorials, "no tutorial page in the build"
    preferred = sitecheck.tutorial("01_qkv_analogy")
    return preferred if preferred in tutorials else tutorials[0]


def test_scrolling_code_is_reached_and_scrolled_with_the_keyboard(
    site_dir: Path, site_url: str, browser
) -> None:
    """On a phone, Tab reaches a code block that scrolls sideways; it has a name and a visible
    outline, and the arrow keys scroll it."""
    rel = _first_tutorial_with_code(site_dir)
    context = browser.new_context(viewport=VIEWPORTS[390], color_scheme="light")
    context.route(sitecheck.NOT_LOCAL_URL, _block_external)
    try:
        page = context.new_page()
        _open(page, site_url + rel)
        scroller = None
        for _ in range(MAX_TABS):
            page.keyboard.press("Tab")
            scroller = page.evaluate(_FOCUSED_SCROLLER_JS)
            if scroller:
                break
        assert scroller, f"{rel} at 390px: {MAX_TABS} Tabs never reached a scrolling region"
        assert scroller["label"].strip(), f"{rel}: the scrolling {scroller['tag']} has no name"
        assert scroller["outlineStyle"] != "none" and scroller["outlineWidth"] >= 2, (
            f"{rel}: the focused scrolling {scroller['tag']} shows no outline: {scroller}"
        )
        after = _press_arrow_right(page, scroller)
        assert after and after["scrollLeft"] > scroller["scrollLeft"], (
            f"{rel}: the arrow keys did not scroll the focused code block ({scroller} -> {after})"
        )
    finally:
        context.close()


def _press_arrow_right(page, scroller: dict) -> dict | None:
    """Press ArrowRight five times on the focused ``scroller`` and return it as it is then.

    Chromium scrolls smoothly: the region moves over the next frames, not at once, so this
    waits (up to 2 s) for its scrollLeft to grow before reading it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(5):
        page.keyboard.press("ArrowRight")
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(
            f"() => document.activeElement.scrollLeft > {scroller['scrollLeft']}",
            timeout=2_000,
        )
    return page.evaluate(_FOCUSED_SCROLLER_JS)


def test_wide_figures_are_reached_and_scrolled_with_the_keyboard(
    site_dir: Path, site_url: str, browser
) -> None:
    """On a phone a figure wider than the column scrolls inside its link: Tab reaches the
    link, which is named by the figure's alt text and shows an outline, and the arrow keys
    scroll the figure rather than turn the page."""
    rel = sitecheck.tutorial("04_multi_head")
    if not (site_dir / rel).is_file():
        rel = sitecheck.pages_with_figures(site_dir)[0]
    context = browser.new_context(viewport=VIEWPORTS[390], color_scheme="light")
    context.route(sitecheck.NOT_LOCAL_URL, _block_external)
    try:
        page = context.new_page()
        _open(page, site_url + rel)
        figure = page.locator("a.figure-full-size").first
        scroller = None
        for _ in range(MAX_TABS):
            page.keyboard.press("Tab")
            if page.evaluate("() => document.activeElement.matches('a.figure-full-size')"):
                scroller = page.evaluate(_FOCUSED_SCROLLER_JS)
                break
        assert scroller and scroller["tag"] == "a", (
            f"{rel} at 390px: Tab did not reach a figure that scrolls sideways ({scroller})"
        )
        alt = figure.locator("img").get_attribute("alt") or ""
        assert alt.strip() and scroller["label"] == alt, f"{rel}: the figure's link is not named"
        assert scroller["outlineStyle"] != "none" and scroller["outlineWidth"] >= 2, (
            f"{rel}: the focused figure shows no outline: {scroller}"
        )
        before = page.url
        after = _press_arrow_right(page, scroller)
        assert page.url == before, f"{rel}: the arrow keys turned the page to {page.url}"
        assert after and after["scrollLeft"] > scroller["scrollLeft"], (
            f"{rel}: the arrow keys did not scroll the focused figure ({scroller} -> {after})"
        )
    finally:
        context.close()


class _FigureParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.figures: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: value or "" for name, value in attrs}
        if tag == "img" and {"sphx-glr-single-img", "sphx-glr-multi-img"} & set(
            a.get("class", "").split()
        ):
            self.figures.append(a)

    handle_startendtag = handle_starttag


def test_figures_are_named_by_their_titles(figure_page: str, site_dir: Path) -> None:
    """Every figure's alt text is its title, whole: not empty, not the file name, and not cut
    short by a quote in the title (which leaves stray attributes behind)."""
    parser = _FigureParser()
    parser.feed((site_dir / figure_page).read_text(encoding="utf-8"))
    problems = []
    for fig in parser.figures:
        alt, src = fig.get("alt", "").strip(), fig.get("src", "")
        stray = sorted(set(fig) - FIGURE_ATTRIBUTES)
        if not alt or alt.startswith("sphx_glr") or Path(src).stem in alt:
            problems.append(f"{src}: alt text {alt!r} does not name the figure")
        if stray:
            problems.append(f"{src}: alt text {alt!r} is cut short (stray attributes {stray})")
    assert parser.figures, f"{figure_page}: no figure found"
    assert not problems, f"{figure_page}:\n  " + "\n  ".join(problems)
