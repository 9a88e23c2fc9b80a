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
  above what it held when the page started, measured by the package's own meter
  (:func:`attention.measure.peak_memory`).
- :func:`repository` and :func:`repository_options`: the link to the project's repository
  (furo's edit and view buttons, and an icon in the footer), from ``ATTENTION_REPOSITORY_URL``
  for a fork's own build, or from Read the Docs' clone of it.
- Maths is left out of the search index: its LaTeX (``\\sqrt{D}``, ``\\mathbf{q}``) is no word
  a reader searches for, and ``search-text.js`` removes the ``\\(...\\)`` markup from the
  snippets that the search page shows under each result.
"""

from __future__ import annotations

import os
import re
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


class PeakMemory:
    """sphinx-gallery's ``show_memory`` hook: ``PeakMemory()(func)`` runs ``func`` and returns
    (MiB of memory it added at its peak, its return value).

    The package's one meter measures it, :func:`attention.measure.peak_memory`: the peak
    resident memory of the process while ``func`` ran, above what it held before (VmHWM after a
    reset, on Linux). A page that measures memory itself runs its measurement inside this one,
    and the meter keeps both right. Where the meter cannot measure (not Linux) the column says
    0. An instance, not a function, so that Sphinx can cache the configuration that holds it;
    all instances compare equal, so a rebuild does not see a changed configuration.
    """

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __call__(self, func: Callable[[], Any]) -> tuple[float, Any]:
        from attention.measure import peak_memory

        out = []
        extra = peak_memory(lambda: out.append(func()))
        return (extra or 0) / 2**20, out[0]


# -- The project's repository --------------------------------------------------------------------

#: The environment variables that name the project's repository for a fork's own build.
REPOSITORY_ENV = "ATTENTION_REPOSITORY_URL"
BRANCH_ENV = "ATTENTION_REPOSITORY_BRANCH"


def repository(environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """The project's repository as ``(https URL, branch)``: ``ATTENTION_REPOSITORY_URL`` (and
    ``ATTENTION_REPOSITORY_BRANCH``, default ``main``), else, on Read the Docs, the repository
    the build cloned (``READTHEDOCS_GIT_CLONE_URL`` at ``READTHEDOCS_GIT_IDENTIFIER``), else
    None (no link).

    >>> repository({"ATTENTION_REPOSITORY_URL": "https://github.com/me/attention/"})
    ('https://github.com/me/attention', 'main')
    >>> repository({"READTHEDOCS_GIT_CLONE_URL": "git@github.com:org/attention.git",
    ...             "READTHEDOCS_GIT_IDENTIFIER": "v0.2"})
    ('https://github.com/org/attention', 'v0.2')
    >>> repository({}) is None
    True
    """
    url = environ.get(REPOSITORY_ENV, "").strip()
    branch = environ.get(BRANCH_ENV, "").strip()
    if not url:  # on Read the Docs: the repository this build cloned, at what it built
        url = environ.get("READTHEDOCS_GIT_CLONE_URL", "").strip()
        branch = branch or environ.get("READTHEDOCS_GIT_IDENTIFIER", "").strip()
    if not url:
        return None
    # git@host:owner/name.git and https://host/owner/name.git both become https://host/owner/name
    ssh = re.fullmatch(r"(?:ssh://)?git@([^:/]+)[:/](.+)", url)
    if ssh:
        url = f"https://{ssh.group(1)}/{ssh.group(2)}"
    url = re.sub(r"\.git$", "", url.rstrip("/"))
    return url, branch or "main"


#: GitHub's mark (the octicon "mark-github"), for the footer's link to the repository.
_GITHUB_SVG = (
    '<svg stroke="currentColor" fill="currentColor" stroke-width="0" viewBox="0 0 16 16">'
    '<path fill-rule="evenodd" d="M8 0C3.58 0 0 3.58 0 8c0 3.54 2.29 6.53 5.47 7.59.4.07.55-.17'
    ".55-.38 0-.19-.01-.82-.01-1.49-2.01.37-2.53-.49-2.69-.94-.09-.23-.48-.94-.82-1.13-.28-.15"
    "-.68-.52-.01-.53.63-.01 1.08.58 1.23.82.72 1.21 1.87.87 2.33.66.07-.52.28-.87.51-1.07-1.78"
    "-.2-3.64-.89-3.64-3.95 0-.87.31-1.59.82-2.15-.08-.2-.36-1.02.08-2.12 0 0 .67-.21 2.2.82.64"
    "-.18 1.32-.27 2-.27.68 0 1.36.09 2 .27 1.53-1.04 2.2-.82 2.2-.82.44 1.1.16 1.92.08 2.12.51"
    ".56.82 1.27.82 2.15 0 3.07-1.87 3.75-3.65 3.95.29.25.54.73.54 1.48 0 1.07-.01 1.93-.01 2.2"
    ' 0 .21.15.46.55.38A8.013 8.013 0 0016 8c0-4.42-3.58-8-8-8z"></path></svg>'
)
#: A generic mark for a repository elsewhere (a folder of code).
_REPOSITORY_SVG = (
    '<svg stroke="currentColor" fill="none" stroke-width="1.5" viewBox="0 0 16 16">'
    '<path d="M2 2.5h4l1.5 1.5H14v9.5H2z"></path><path d="M6 8.5 4.5 10 6 11.5M10 8.5'
    ' 11.5 10 10 11.5"></path></svg>'
)


def repository_options(repo: tuple[str, str] | None) -> dict[str, Any]:
    """furo's options for a link to the repository: the "edit" and "view" buttons of each page
    (``source_repository``, ``source_branch``, ``source_directory``) and a footer icon."""
    if repo is None:
        return {}
    url, branch = repo
    github = url.startswith("https://github.com/")
    return {
        "source_repository": url + "/",
        "source_branch": branch,
        "source_directory": "docs/",
        "footer_icons": [
            {
                "name": "GitHub" if github else "Repository",
                "url": url,
                "html": _GITHUB_SVG if github else _REPOSITORY_SVG,
                "class": "",
            }
        ],
    }


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
