"""Helpers for the built-site tests: where the site is, what it contains, how to read a page.

Page parsing and serving use the standard library (Playwright is imported only by
``chromium()``), so the link checks and the downloads run on a machine without a browser.
Also used by screenshot.py, which takes the README's screenshot.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import http.server
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

#: The built HTML site. ``make html`` writes it to build/html; ATTENTION_SITE_DIR points the
#: tests at another build (a scratch copy, an unzipped offline download).
SITE_DIR = Path(os.environ.get("ATTENTION_SITE_DIR", REPO_ROOT / "build" / "html")).resolve()

#: Screenshots and other files a person looks at after a run (git-ignored).
ARTIFACTS_DIR = REPO_ROOT / "test-artifacts" / "site"

#: The browser the site is checked in. Playwright drives the system's Chromium: it cannot
#: download its own browser here.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")

#: Set by .ci/run: in CI a missing browser or a missing build is a failure, not a skip.
REQUIRE_BROWSER = os.environ.get("REQUIRE_BROWSER", "") == "1"

# tests/pages.py finds the gallery's pages, in its parts and at its top.
sys.path.insert(0, str(REPO_ROOT / "tests"))
import pages  # noqa: E402

#: The learning path, in order: each page's place under ``tutorials/`` (``1_foundations/
#: 01_qkv_analogy``). Every one must be a page of the built site with its downloads.
TUTORIALS = tuple(pages.relative(page) for page in pages.pages())


def tutorial(stem: str) -> str:
    """The site path of the tutorial named ``stem``: ``tutorials/<part>/<stem>.html``."""
    return f"{TUTORIALS_DIR}/{pages.relative(pages.find(stem))}.html"


#: sphinx-gallery writes its rendered pages here (relative to the site root).
TUTORIALS_DIR = "tutorials"

#: Site folders that hold assets rather than pages.
ASSET_DIRS = ("_static", "_sources", "_downloads", "_images")

#: ``<link rel=...>`` values that make the browser fetch the target.
FETCHING_LINK_RELS = {
    "stylesheet",
    "icon",
    "shortcut",
    "apple-touch-icon",
    "preload",
    "modulepreload",
    "prefetch",
    "preconnect",
    "dns-prefetch",
    "manifest",
}

#: Tags and attributes whose URL the browser loads as part of the page.
RESOURCE_ATTRS = {
    "img": ("src",),
    "script": ("src",),
    "source": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "iframe": ("src",),
    "embed": ("src",),
    "object": ("data",),
}


#: Chromium's switches for the tests: no sandbox (containers), and no traffic of the browser's
#: own (updates, sync, safe browsing, metrics, translation); a host name other than 127.0.0.1
#: does not resolve, so the site is seen as a reader with no network sees it.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-pings",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)


def missing_browser_message() -> str:
    return (
        f"Chromium not found at {CHROMIUM}: install it with `apt-get install chromium` (Debian) "
        "to run the browser tests, or set CHROMIUM_PATH to a Chromium binary."
    )


def missing_site_message() -> str:
    return (
        f"No built site at {SITE_DIR} (no index.html): run `make html` first, "
        "or point ATTENTION_SITE_DIR at a build."
    )


def site_available() -> bool:
    return (SITE_DIR / "index.html").is_file()


def require_site() -> Path:
    """The site directory; skip (fail in CI) when nothing has been built."""
    if not site_available():
        if REQUIRE_BROWSER:
            pytest.fail(missing_site_message())
        pytest.skip(missing_site_message())
    return SITE_DIR


#: Requests the browser must not make: anything that is not served on 127.0.0.1 (a JavaScript
#: regular expression, so Playwright intercepts only those and local files load directly).
NOT_LOCAL_URL = re.compile(r"^(?!http://127\.0\.0\.1[:/]|data:|blob:|about:)")


def is_local_url(url: str) -> bool:
    """True for URLs served by the test's own server (or needing no network at all)."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "javascript"):
        return True
    return parts.hostname in ("127.0.0.1",)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves a page's many files

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A browser that closes a connection mid-transfer (a page closed, a request aborted)
        # is not an error of the site.
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError):
            super().handle_error(request, client_address)


class _LoggingHandler(_QuietHandler):
    #: Set per server: a list that receives "GET /path" for every request answered.
    requests: list[str]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.requests.append(f"{self.command} {self.path} {code}")


@contextlib.contextmanager
def serve(site: Path = SITE_DIR, *, port: int = 0, requests: list[str] | None = None):
    """Serve ``site`` on 127.0.0.1 in a thread; yields the base URL, ending in /.

    ``port`` 0 takes a free port. ``requests``, when given, receives one ``"GET /path 200"``
    line for every request answered.
    """
    handler_class = _QuietHandler
    if requests is not None:
        handler_class = type("_Handler", (_LoggingHandler,), {"requests": requests})
    handler = functools.partial(handler_class, directory=str(site))
    server = _Server(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium():
    """Launch the system Chromium through Playwright (imported here: optional for other tests)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as manager:
        browser = manager.chromium.launch(
            executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


def html_pages(site: Path = SITE_DIR) -> list[str]:
    """Every HTML page of the site, as posix paths relative to the site root, sorted."""
    if not site.is_dir():
        return []
    pages = []
    for path in site.rglob("*.html"):
        rel = path.relative_to(site).as_posix()
        if rel.split("/", 1)[0] in ASSET_DIRS:
            continue
        pages.append(rel)
    return sorted(pages)


#: The Chinese edition's folder in the site (docs/_ext/attention_i18n.py).
TRANSLATION_DIR = "zh_CN"
#: Pages the Chinese edition keeps in English, as they are on the English site: the API
#: reference and the highlighted sources. Their text is the English pages' own, so the browser
#: checks each of them once, on the English site (the link checks read them in both).
UNTRANSLATED_PAGES = re.compile(rf"^{TRANSLATION_DIR}/(generated|_modules)/")


#: Pages made from a few templates, which the browser opens a share of in each run
#: (:func:`browser_pages`): the API reference, the highlighted sources and the Chinese edition.
TEMPLATED_PAGES = re.compile(rf"^(generated|_modules|{TRANSLATION_DIR})/")
#: How many runs of ``make test`` share those pages: each run opens every third one.
TEMPLATED_SHARE = 3
#: The tutorials themselves (``tutorials/<part>/NN_name.html``), the longest pages to check:
#: each run opens every other one, so two days of runs open them all.
TUTORIAL_PAGES = re.compile(r"^tutorials/[^/]+/\d\d_\w+\.html$")
TUTORIAL_SHARE = 2
#: Pages the accessibility checks open in every colour scheme at every width, in every run.
#: The pages share one theme and few templates, so a page type broken in one configuration
#: shows here.
EVERY_CONFIGURATION = (
    "index.html",
    "api.html",
    "search.html",
    "generated/attention.MultiHeadAttention.html",
    tutorial("01_qkv_analogy"),
    # The Chinese edition's landing page: its chrome (the language switch) in every scheme.
    f"{TRANSLATION_DIR}/index.html",
)


def browser_pages(site: Path = SITE_DIR, choice: str | None = None) -> list[str]:
    """The pages the browser opens one by one (the accessibility and offline checks).

    Every hand-written page of the English site, every other tutorial (:data:`TUTORIAL_PAGES`),
    and a third of the pages made from the same few templates (:data:`TEMPLATED_PAGES`: the API
    reference, the highlighted sources, the translated pages of the Chinese edition), a
    different share each day (``tests/pages.py``'s :func:`sample`), so that six days of runs
    open every page and two open every tutorial. ``choice`` (by default
    ``ATTENTION_PAGES_SAMPLE``): ``"all"`` for every page, as ``make robust`` runs them, or
    ``"0"``-``"5"`` for one share. The pages the Chinese edition keeps in English
    (:data:`UNTRANSLATED_PAGES`) are opened on the English site only.
    """
    if choice is None:
        choice = os.environ.get("ATTENTION_PAGES_SAMPLE")
    if choice is None:
        choice = str(datetime.date.today().timetuple().tm_yday % (TEMPLATED_SHARE * TUTORIAL_SHARE))
    found = [rel for rel in html_pages(site) if not UNTRANSLATED_PAGES.match(rel)]
    templated = [rel for rel in found if TEMPLATED_PAGES.match(rel)]
    tutorials = [rel for rel in found if TUTORIAL_PAGES.match(rel)]
    share = int(choice) if choice.isdigit() else None
    chosen = {
        *pages.sample(templated, TEMPLATED_SHARE, choice if share is None else str(share % 3)),
        *pages.sample(tutorials, TUTORIAL_SHARE, choice if share is None else str(share % 2)),
        *EVERY_CONFIGURATION,
    }
    sampled = {*templated, *tutorials}
    return [rel for rel in found if rel in chosen or rel not in sampled]


def english_pages(site: Path = SITE_DIR) -> list[str]:
    """The pages of the English site only."""
    return [rel for rel in html_pages(site) if not rel.startswith(TRANSLATION_DIR + "/")]


@dataclass
class ParsedPage:
    """What the link and download checks need from one HTML file."""

    ids: set[str] = field(default_factory=set)
    #: ``<a href>`` values, in document order.
    links: list[str] = field(default_factory=list)
    #: URLs the browser loads with the page: (tag, url).
    resources: list[tuple[str, str]] = field(default_factory=list)
    #: ``<a class="... download ...">`` targets.
    downloads: list[str] = field(default_factory=list)
    #: ``src`` of the figures a tutorial's code drew.
    figures: list[str] = field(default_factory=list)
    has_math: bool = False
    is_gallery_example: bool = False


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: (value or "") for name, value in attrs}
        page = self.page
        if "id" in a:
            page.ids.add(a["id"])
        if tag == "a" and "name" in a:
            page.ids.add(a["name"])
        classes = a.get("class", "").split()
        if "math" in classes:
            page.has_math = True
        if "sphx-glr-footer-example" in classes:
            page.is_gallery_example = True
        if tag == "a" and "href" in a:
            page.links.append(a["href"])
            if "download" in classes:
                page.downloads.append(a["href"])
        if tag == "link" and a.get("href"):
            rels = set(a.get("rel", "").lower().split())
            if rels & FETCHING_LINK_RELS:
                page.resources.append((tag, a["href"]))
        for attr in RESOURCE_ATTRS.get(tag, ()):
            if a.get(attr):
                page.resources.append((tag, a[attr]))
        if tag == "img" and {"sphx-glr-single-img", "sphx-glr-multi-img"} & set(classes):
            page.figures.append(a.get("src", ""))

    handle_startendtag = handle_starttag


@functools.cache
def parse_page(path: Path) -> ParsedPage:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.page


def tutorial_pages(site: Path = SITE_DIR) -> list[str]:
    """The rendered gallery examples (pages with a sphinx-gallery download footer)."""
    return [
        rel
        for rel in html_pages(site)
        if rel.startswith(TUTORIALS_DIR + "/") and parse_page(site / rel).is_gallery_example
    ]


def pages_with_figures(site: Path = SITE_DIR) -> list[str]:
    """Pages that show figures drawn by a tutorial's code (the heatmap pages)."""
    return [rel for rel in english_pages(site) if parse_page(site / rel).figures]


def resolve(page_rel: str, href: str) -> tuple[str, str] | None:
    """Resolve ``href`` found on ``page_rel`` to (site-relative path, fragment).

    None when the link leaves the site (another scheme or host) or has no target.
    """
    base = "http://site.invalid/" + page_rel
    url = urljoin(base, href)
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.netloc != "site.invalid":
        return None
    path = unquote(parts.path.lstrip("/"))
    if path == "" or path.endswith("/"):
        path += "index.html"
    return path, unquote(parts.fragment)


# --------------------------------------------------------------------------------------------
# Downloads
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    tutorial: str  # e.g. "04_multi_head"
    kind: str  # "py" or "ipynb"
    path: Path  # absolute path of the file in the built site

    @property
    def id(self) -> str:
        return f"{self.tutorial}.{self.kind}"


_DOWNLOAD_RE = re.compile(r"\.(py|ipynb)$")


def tutorial_downloads(site: Path = SITE_DIR) -> list[Download]:
    """The .py and .ipynb every tutorial page offers, found through the pages' own links."""
    found: dict[tuple[str, str], Download] = {}
    for rel in tutorial_pages(site):
        tutorial = Path(rel).stem
        for href in parse_page(site / rel).downloads:
            target = resolve(rel, href)
            if target is None:
                continue
            match = _DOWNLOAD_RE.search(target[0])
            if match:
                kind = match.group(1)
                found[(tutorial, kind)] = Download(tutorial, kind, site / target[0])
    return [found[key] for key in sorted(found)]
