"""The built site in a real browser, offline: every page loads cleanly, math renders, images
load, search works, and the dark theme keeps the figures and the text readable.

Every request for anything other than 127.0.0.1 is aborted and recorded; the goal is none.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import sitecheck

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
except ImportError:  # the browser fixture skips (or fails in CI) with the explanation
    PlaywrightTimeoutError = Exception

VIEWPORT = {"width": 1280, "height": 900}
#: WCAG AA contrast for body text.
MIN_CONTRAST = 4.5
#: A figure may have a few antialiased transparent pixels at most, never a transparent ground.
MAX_TRANSPARENT_FRACTION = 0.01
#: Preferred page for the tutorial screenshots (the heatmaps); else the first page with figures.
SCREENSHOT_TUTORIAL = "11_visualising_attention"

FIGURE_SELECTOR = "img.sphx-glr-single-img, img.sphx-glr-multi-img"

pytestmark = pytest.mark.timeout(120)

# Waits until every image has loaded or failed (lazy images are made eager first); returns the
# ones that show nothing.
_BROKEN_IMAGES_JS = """
async () => {
  const images = Array.from(document.images);
  for (const img of images) if (img.loading === "lazy") img.loading = "eager";
  const settle = img => img.complete ? null : new Promise(done => {
    img.addEventListener("load", done, {once: true});
    img.addEventListener("error", done, {once: true});
  });
  await Promise.race([
    Promise.all(images.map(settle)),
    new Promise(done => setTimeout(done, 15000)),
  ]);
  return images.filter(img => !(img.complete && img.naturalWidth > 0))
               .map(img => img.getAttribute("src"));
}
"""

_MATH_JS = """
async () => {
  await MathJax.startup.promise;
  const maths = Array.from(document.querySelectorAll(".math"));
  return {
    count: maths.length,
    rendered: document.querySelectorAll(".math mjx-container").length,
    unrendered: maths.filter(m => !m.querySelector("mjx-container"))
                     .map(m => m.textContent.trim().slice(0, 80)),
    errors: Array.from(document.querySelectorAll("mjx-merror"))
                 .map(e => e.getAttribute("data-mjx-error") || e.textContent.slice(0, 80)),
  };
}
"""

# Contrast ratio (WCAG) of the text of a few kinds of element against the colour behind them.
_CONTRAST_JS = """
() => {
  const parse = c => {
    const m = /rgba?\\(([^)]*)\\)/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const behind = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) return c;
    }
    return [255, 255, 255, 1];
  };
  const lum = c => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const out = [{selector: "body", backgroundLuminance: lum(behind(document.body)),
                color: "", background: "", ratio: 21, parsed: true}];
  const selectors = ["article section > p", "article h1", ".sphx-glr-script-out pre",
                     "article div.highlight pre", ".sidebar-tree a"];
  for (const sel of selectors) {
    const el = document.querySelector(sel);
    if (!el) continue;
    const fg = parse(getComputedStyle(el).color), bg = behind(el);
    const [a, b] = [lum(fg || [0, 0, 0]), lum(bg)];
    out.push({selector: sel, color: getComputedStyle(el).color,
              background: `rgb(${bg.slice(0, 3).join(", ")})`,
              ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
              backgroundLuminance: b, parsed: fg !== null});
  }
  return out;
}
"""

# For every figure of a tutorial, read back through a canvas: the fraction of (nearly) transparent
# pixels inside the box that holds its opaque pixels (margins are harmless). A figure saved
# without a facecolor is transparent between its opaque parts (around the axes, behind the
# labels) and loses its text on a dark ground. The gallery thumbnails are made from these
# figures (or are sphinx-gallery's placeholder), so checking the figures covers them.
_FIGURE_ALPHA_JS = """
async () => {
  const images = Array.from(document.querySelectorAll(
    "img.sphx-glr-single-img, img.sphx-glr-multi-img"));
  const out = [];
  for (const img of images) {
    if (img.loading === "lazy") img.loading = "eager";
    if (!img.complete) await new Promise(done => { img.onload = img.onerror = done; });
    const [w, h] = [img.naturalWidth, img.naturalHeight];
    if (!w || !h) { out.push({src: img.getAttribute("src"), transparent: null}); continue; }
    const canvas = document.createElement("canvas");
    canvas.width = w; canvas.height = h;
    const ctx = canvas.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const data = ctx.getImageData(0, 0, w, h).data;
    let [x0, y0, x1, y1] = [w, h, -1, -1];
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
      if (data[4 * (y * w + x) + 3] >= 250) {
        if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
      }
    }
    if (x1 < 0) { out.push({src: img.getAttribute("src"), transparent: 1}); continue; }
    let clear = 0;
    for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++)
      if (data[4 * (y * w + x) + 3] < 250) clear++;
    out.push({src: img.getAttribute("src"),
              transparent: clear / ((x1 - x0 + 1) * (y1 - y0 + 1))});
  }
  return out;
}
"""


class Visit:
    """One page on the local site that records what goes wrong while it loads.

    Requests for anything but 127.0.0.1 are aborted and recorded (only those are intercepted:
    local files load directly). ``context`` is a Playwright browser context.
    """

    def __init__(self, context, site_url: str):
        self.site_url = site_url
        self.external: list[str] = []
        self.console_errors: list[str] = []
        self.failed: list[str] = []
        self.page = context.new_page()
        self.page.set_default_timeout(30_000)
        self.page.route(sitecheck.NOT_LOCAL_URL, self._route)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.console_errors.append(f"uncaught: {exc}"))
        self.page.on("requestfailed", self._request_failed)
        self.page.on("response", self._response)

    def _route(self, route) -> None:
        url = route.request.url
        if sitecheck.is_local_url(url):
            route.continue_()
        else:
            self.external.append(url)
            route.abort("blockedbyclient")

    def _console(self, message) -> None:
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            self.console_errors.append(f"{message.text} ({where})" if where else message.text)

    def _request_failed(self, request) -> None:
        if sitecheck.is_local_url(request.url):
            self.failed.append(f"{request.url}: {request.failure}")

    def _response(self, response) -> None:
        if response.status >= 400 and sitecheck.is_local_url(response.url):
            self.failed.append(f"{response.url}: HTTP {response.status}")

    def goto(self, rel: str):
        response = self.page.goto(self.site_url + rel, wait_until="load")
        assert response is not None and response.ok, f"{rel}: HTTP {response and response.status}"
        return self.page

    def network_problems(self) -> list[str]:
        problems = [f"request left 127.0.0.1 (blocked): {url}" for url in self.external]
        problems += [f"failed local request: {entry}" for entry in self.failed]
        problems += [f"console error: {entry}" for entry in self.console_errors]
        return problems


def new_context(browser, theme: str | None = None):
    """A browser context whose system preference is light; ``theme`` is furo's stored choice."""
    context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
    if theme is not None:
        context.add_init_script(f"localStorage.setItem('theme', '{theme}')")
    return context


@pytest.fixture(scope="module")
def context(browser):
    """One context for the page-by-page checks (a reader browsing from page to page)."""
    ctx = new_context(browser)
    yield ctx
    ctx.close()


@contextlib.contextmanager
def visit(browser_or_context, site_url: str, *, theme: str | None = None):
    """A Visit in a fresh context (given a browser) or in the given context."""
    fresh = hasattr(browser_or_context, "new_context")  # a Browser, not a BrowserContext
    context = new_context(browser_or_context, theme) if fresh else browser_or_context
    v = Visit(context, site_url)
    try:
        yield v
    finally:
        v.page.close()
        if fresh:
            context.close()


def _math_problems(page) -> list[str]:
    try:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000
        )
    except PlaywrightTimeoutError:
        return ["the page has math but MathJax never started (not bundled with the site?)"]
    math = page.evaluate(_MATH_JS)
    problems = [f"math not rendered: {text!r}" for text in math["unrendered"]]
    problems += [f"MathJax error: {text!r}" for text in math["errors"]]
    if math["rendered"] == 0:
        problems.append("the page has math but MathJax produced no mjx-container")
    return problems


def test_page_works_offline(html_page: str, site_url: str, context, site_dir: Path) -> None:
    """The page loads with no console error, no failed or external request, every image
    showing and every formula typeset."""
    parsed = sitecheck.parse_page(site_dir / html_page)
    with visit(context, site_url) as v:
        page = v.goto(html_page)
        problems = []
        if parsed.has_math:
            problems += _math_problems(page)
        page.evaluate("() => document.fonts.ready.then(() => true)")
        problems += [f"image did not load: {src}" for src in page.evaluate(_BROKEN_IMAGES_JS)]
        problems = v.network_problems() + problems
    assert not problems, f"{html_page}:\n  " + "\n  ".join(problems)


def test_math_is_typeset_offline(site_dir: Path, site_url: str, browser) -> None:
    """At least one page has math, and MathJax (bundled with the site) typesets it."""
    with_math = [
        rel
        for rel in sitecheck.html_pages(site_dir)
        if sitecheck.parse_page(site_dir / rel).has_math
    ]
    assert with_math, "no page has math: the API pages and tutorial 02 should"
    preferred = sitecheck.tutorial("02_scaled_dot_product")
    rel = preferred if preferred in with_math else with_math[0]
    with visit(browser, site_url) as v:
        page = v.goto(rel)
        problems = _math_problems(page) + v.network_problems()
        containers = page.locator("mjx-container").count()
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)
    assert containers > 0


def test_search_finds_multiheadattention(site_url: str, browser) -> None:
    with visit(browser, site_url) as v:
        page = v.goto("search.html?q=MultiHeadAttention")
        results = page.locator("#search-results ul.search li")
        try:
            results.first.wait_for(state="attached", timeout=20_000)
            found = True
        except PlaywrightTimeoutError:
            found = False
        if not found:
            summary = page.locator("#search-results").inner_text()
            pytest.fail(f"search for MultiHeadAttention found nothing: {summary!r}")
        texts = results.all_inner_texts()
        hrefs = [
            results.nth(i).locator("a").first.get_attribute("href") for i in range(results.count())
        ]
        problems = v.network_problems()
    assert any("MultiHeadAttention" in text for text in texts), texts
    assert any("MultiHeadAttention" in (href or "") for href in hrefs), hrefs
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("word", "page"),
    [("注意力", "01_qkv_analogy"), ("掩码", "05_masks")],
)
def test_chinese_search_finds_chinese_words(word: str, page: str, site_url: str, browser) -> None:
    """The Chinese edition's search splits Chinese text into words (jieba), so a word inside a
    sentence is found, and it leads to the Chinese pages."""
    with visit(browser, site_url) as v:
        found = v.goto(f"zh_CN/search.html?q={word}")
        results = found.locator("#search-results ul.search li")
        try:
            results.first.wait_for(state="attached", timeout=20_000)
        except PlaywrightTimeoutError:
            summary = found.locator("#search-results").inner_text()
            pytest.fail(f"the Chinese search for {word} found nothing: {summary!r}")
        hrefs = [
            results.nth(i).locator("a").first.get_attribute("href") for i in range(results.count())
        ]
        problems = v.network_problems()
    assert any(page in (href or "") for href in hrefs), hrefs
    assert not problems, "\n".join(problems)


def _switch_to_dark(page) -> None:
    """Click the theme toggle (as a reader does) until furo shows the dark theme."""
    toggle = page.locator("button.theme-toggle:visible").first
    for _ in range(3):
        if page.evaluate("() => document.body.dataset.theme") == "dark":
            break
        toggle.click()
    assert page.evaluate("() => document.body.dataset.theme") == "dark", (
        "the theme toggle never reached the dark theme"
    )
    assert page.evaluate("() => localStorage.getItem('theme')") == "dark"


def test_dark_theme_keeps_figure_pages_readable(
    figure_page: str, site_url: str, browser, site_dir: Path
) -> None:
    """After switching to dark, the text still contrasts with the ground and no figure is a
    transparent image that would vanish into the dark background."""
    with visit(browser, site_url) as v:
        page = v.goto(figure_page)
        _switch_to_dark(page)
        contrast = page.evaluate(_CONTRAST_JS)
        figures = page.evaluate(_FIGURE_ALPHA_JS)
        problems = v.network_problems()

    body = contrast[0]
    assert body["backgroundLuminance"] < 0.1, f"dark theme has a light ground: {body}"
    for c in contrast:
        if not c["parsed"]:
            problems.append(f"could not read the colour of {c['selector']}: {c['color']}")
        elif c["ratio"] < MIN_CONTRAST:
            problems.append(
                f"{c['selector']}: text {c['color']} on {c['background']} has contrast "
                f"{c['ratio']:.2f} < {MIN_CONTRAST}"
            )
    expected = len(sitecheck.parse_page(site_dir / figure_page).figures)
    assert len(figures) == expected, f"{figure_page}: {len(figures)} figures, expected {expected}"
    for fig in figures:
        if fig["transparent"] is None:
            problems.append(f"figure did not load: {fig['src']}")
        elif fig["transparent"] > MAX_TRANSPARENT_FRACTION:
            problems.append(
                f"figure {fig['src']} is {fig['transparent']:.0%} transparent: it vanishes on "
                "the dark background (save figures with an opaque facecolor)"
            )
    assert not problems, f"{figure_page} in the dark theme:\n  " + "\n  ".join(problems)


def _luminance(path: Path) -> float:
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        return ImageStat.Stat(image.convert("L")).mean[0] / 255


def test_screenshots_light_and_dark(
    site_dir: Path, site_url: str, browser, artifacts_dir: Path
) -> None:
    """Screenshots of the landing page and one tutorial in both themes, kept in
    test-artifacts/site/ for a person to look at; the dark ones must be dark."""
    figure_tutorials = [
        rel
        for rel in sitecheck.tutorial_pages(site_dir)
        if sitecheck.parse_page(site_dir / rel).figures
    ]
    preferred = sitecheck.tutorial(SCREENSHOT_TUTORIAL)
    tutorial = preferred if preferred in figure_tutorials else (figure_tutorials or [None])[0]
    assert tutorial, "no tutorial page with a figure to photograph"

    shots: dict[str, Path] = {}
    problems: list[str] = []
    for theme in ("light", "dark"):
        with visit(browser, site_url, theme=theme) as v:
            page = v.goto("index.html")
            page.evaluate("() => document.fonts.ready.then(() => true)")
            shots[f"landing-{theme}"] = artifacts_dir / f"landing-{theme}.png"
            page.screenshot(path=shots[f"landing-{theme}"])

            page = v.goto(tutorial)
            if sitecheck.parse_page(site_dir / tutorial).has_math:
                problems += _math_problems(page)
            page.evaluate("() => document.fonts.ready.then(() => true)")
            shots[f"tutorial-{theme}"] = artifacts_dir / f"tutorial-{theme}.png"
            page.screenshot(path=shots[f"tutorial-{theme}"])
            page.locator(FIGURE_SELECTOR).first.evaluate(
                "el => el.scrollIntoView({block: 'center', behavior: 'instant'})"
            )
            shots[f"tutorial-figure-{theme}"] = artifacts_dir / f"tutorial-figure-{theme}.png"
            page.screenshot(path=shots[f"tutorial-figure-{theme}"])
            problems += [f"{theme}: {p}" for p in v.network_problems()]

    (artifacts_dir / "tutorial.txt").write_text(f"tutorial screenshots: {tutorial}\n")
    for name in ("landing", "tutorial"):
        light, dark = _luminance(shots[f"{name}-light"]), _luminance(shots[f"{name}-dark"])
        assert dark < 0.5 * light, f"{name}: the dark screenshot is not darker ({dark} vs {light})"
    assert not problems, "\n".join(problems)
