"""Site-wide build settings that are code rather than values: links to other projects'
documentation, the citation style, the memory column of the computation-times page, and the text
the search indexes.

- :func:`intersphinx_enabled` and :func:`intersphinx_mapping`: links to the documentation of
  PyTorch, Python, NumPy and Matplotlib, only on Read the Docs (or on request). Each project's
  inventory is looked for online first and then in an empty local inventory
  (:func:`empty_inventory`). Sphinx reports an inventory that it cannot reach as a *warning*
  (which ``-W`` turns into a failed build) only when every location of that project fails; when
  a later location works it logs the failures as information. So an offline build, or a project
  whose site is down, builds with those names unlinked and says so in the log, while every
  other warning (a broken reference to this package, a bad directive) still fails the build.
  Filtering the message instead would hide it for good, and ``suppress_warnings`` cannot select
  it (Sphinx logs it without a warning type).
- :func:`round_author_year`: citations read "Vaswani et al. (2017)" (``:cite:t:``) and
  "(Vaswani et al., 2017)" (``:cite:p:``), registered as the reference style
  ``author_year_round`` of sphinxcontrib-bibtex.
- :class:`PeakMemory`: sphinx-gallery's ``show_memory`` hook. The memory column of the
  computation-times page is the peak resident memory of the build process while the page ran,
  above what it held when the page started (sampled every few milliseconds).
- Maths is left out of the search index: its LaTeX (``\\sqrt{D}``, ``\\mathbf{q}``) is no word
  a reader searches for, and ``search-text.js`` removes the ``\\(...\\)`` markup from the
  snippets that the search page shows under each result.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from docutils import nodes

#: The projects whose names the pages link to, and where their documentation lives.
INTERSPHINX_PROJECTS = {
    "python": "https://docs.python.org/3",
    "torch": "https://docs.pytorch.org/docs/stable",
    "numpy": "https://numpy.org/doc/stable",
    "matplotlib": "https://matplotlib.org/stable",
}


def intersphinx_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to link to other projects: on Read the Docs, or when ``ATTENTION_INTERSPHINX=1``.

    >>> intersphinx_enabled({"READTHEDOCS": "True"}), intersphinx_enabled({})
    (True, False)
    """
    return environ.get("READTHEDOCS") == "True" or environ.get("ATTENTION_INTERSPHINX") == "1"


def empty_inventory(path: str | Path) -> Path:
    """Write an inventory that names nothing at ``path`` (a valid ``objects.inv``); return it."""
    path = Path(path)
    header = (
        b"# Sphinx inventory version 2\n"
        b"# Project: none\n"
        b"# Version: \n"
        b"# The remainder of this file is compressed using zlib.\n"
    )
    data = header + zlib.compress(b"")
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def intersphinx_mapping(
    projects: Mapping[str, str], fallback: str | Path
) -> dict[str, tuple[str, tuple[str | None, str]]]:
    """Sphinx's ``intersphinx_mapping``: each project's own inventory, then ``fallback``.

    >>> intersphinx_mapping({"python": "https://docs.python.org/3"}, "/tmp/empty.inv")
    {'python': ('https://docs.python.org/3', (None, '/tmp/empty.inv'))}
    """
    return {name: (url, (None, str(fallback))) for name, url in projects.items()}


def round_author_year():
    """sphinxcontrib-bibtex's author-year style with round brackets, as the pages write it."""
    import dataclasses

    from sphinxcontrib.bibtex.style.referencing import BracketStyle
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle

    def round_brackets() -> BracketStyle:
        return BracketStyle(left="(", right=")")

    @dataclasses.dataclass
    class RoundAuthorYearReferenceStyle(AuthorYearReferenceStyle):
        bracket_parenthetical: BracketStyle = dataclasses.field(default_factory=round_brackets)
        bracket_textual: BracketStyle = dataclasses.field(default_factory=round_brackets)
        bracket_author: BracketStyle = dataclasses.field(default_factory=round_brackets)
        bracket_label: BracketStyle = dataclasses.field(default_factory=round_brackets)
        bracket_year: BracketStyle = dataclasses.field(default_factory=round_brackets)

    return RoundAuthorYearReferenceStyle


def register_citation_style(name: str = "author_year_round") -> str:
    """Register :func:`round_author_year` with sphinxcontrib-bibtex under ``name``."""
    from sphinxcontrib.bibtex.plugin import register_plugin

    register_plugin("sphinxcontrib.bibtex.style.referencing", name, round_author_year(), force=True)
    return name


# -- Memory of each page -------------------------------------------------------------------------


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class PeakMemory:
    """sphinx-gallery's ``show_memory`` hook: ``PeakMemory()(func)`` runs ``func`` and returns
    (MiB of resident memory it added at its peak, its return value).

    The resident memory is sampled every ``interval`` seconds on Linux; elsewhere the growth of
    the process's peak (``ru_maxrss``) is used, which misses a page that stays under an earlier
    page's peak. An instance, not a function, so that Sphinx can cache the configuration that
    holds it; instances with the same interval compare equal, so a rebuild does not see a
    changed configuration.
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.interval == self.interval

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.interval))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(interval={self.interval})"

    def __call__(self, func: Callable[[], Any]) -> tuple[float, Any]:
        start = _resident_bytes()
        if start is None:
            unit = 1 if sys.platform == "darwin" else 1024
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
            out = func()
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
            return (after - before) / 2**20, out
        peak = [start]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _resident_bytes() or 0)
                time.sleep(self.interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            out = func()
        finally:
            done.set()
            sampler.join()
        peak[0] = max(peak[0], _resident_bytes() or 0)
        return (peak[0] - start) / 2**20, out


# -- Search --------------------------------------------------------------------------------------


def _no_search_in_math(app, doctree) -> None:
    """Mark every formula ``no-search``: Sphinx's indexer then skips its LaTeX."""
    for node in doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        if "no-search" not in node["classes"]:
            node["classes"].append("no-search")


def _add_static(app, config) -> None:
    static = str(Path(__file__).resolve().parent / "static")
    if static not in config.html_static_path:
        config.html_static_path.append(static)


#: docutils writes a bibliography as ``<div role="list">`` holding ``role="doc-biblioentry"``
#: entries, a role ARIA 1.2 deprecates; assistive technology then finds a list with no items
#: (axe: aria-deprecated-role, aria-required-children). Each entry is a list item instead.
_BIBLIOENTRY = 'role="doc-biblioentry"'


def _list_items_for_citations(app, exception) -> None:
    """Rewrite the citation entries of the written pages as ARIA list items."""
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        if _BIBLIOENTRY in text:
            path.write_text(text.replace(_BIBLIOENTRY, 'role="listitem"'), encoding="utf-8")


def setup(app):
    app.connect("build-finished", _list_items_for_citations)
    app.connect("config-inited", _add_static)
    app.connect("doctree-read", _no_search_in_math)
    app.add_js_file("search-text.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
