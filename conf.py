"""Sphinx configuration for the attention site.

Layout: this file sits at the repository root, the hand-written reST lives in ``docs/`` (the
source directory), the tutorial scripts in ``gallery/``. Build with ``make html``, which runs
``sphinx-build -b html -W --keep-going -c . docs build/html``.

Paths below that Sphinx resolves against the source directory (``docs/``) are written relative
to it; paths that it resolves against this file's directory are made absolute, so both readings
agree.

Environment variables:

``ATTENTION_GALLERY_PATTERN``
    A regular expression: only gallery scripts whose path matches it are executed
    (default: every script). ``ATTENTION_GALLERY_PATTERN='04_' make html`` iterates on one page.
``ATTENTION_RUN_STALE=1``
    Re-run every selected script even when its source has not changed (``make test`` sets it).
``ATTENTION_INTERSPHINX=1``
    Link to the PyTorch, Python, NumPy and Matplotlib documentation. Off by default (it needs
    the network); on by itself on Read the Docs (``READTHEDOCS=True``), where
    ``.readthedocs.yaml`` also sets it. An inventory that cannot be fetched leaves its names
    unlinked and does not fail the build (see docs/_ext/attention_site.py).
``ATTENTION_SITE_URL``
    The address the site will be served from. The downloaded notebooks install the package's
    wheel from there, and link to the API pages there; the link previews (Open Graph) and the
    sitemap name it too. On Read the Docs the build's ``READTHEDOCS_CANONICAL_URL`` is used when
    this is not set; otherwise it is ``make serve``'s ``http://127.0.0.1:8000/``.
``ATTENTION_LANGUAGE``
    The language of the build: ``en`` (the default) or ``zh_CN``, the Chinese edition, which
    ``make html`` builds after the English one into ``build/html/zh_CN`` from the catalogues in
    ``locale/zh_CN/LC_MESSAGES`` (see docs/_ext/attention_i18n.py). It runs no example: it reuses
    the pages, outputs and figures that the English build wrote into ``docs/tutorials``.
``ATTENTION_RUN_EXAMPLES=0``
    Run no example (``make gettext`` extracts the messages so): see
    ``attention_i18n.gallery_overrides``.
``ATTENTION_REPOSITORY_URL`` (and ``ATTENTION_REPOSITORY_BRANCH``, default ``main``)
    The project's repository, for a fork's own build: every page links to its source file
    there (furo's view and edit buttons) and the footer to the repository. On Read the Docs the
    repository the build cloned is used when this is not set (``READTHEDOCS_GIT_CLONE_URL``);
    otherwise the site names no repository.
"""

import os
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"
# The package from this checkout (also installed editable by `make`), and the build helpers.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

# Without a GPU, page 21 runs attention.flash_triton's kernels in Triton's interpreter, which
# must be on before anything imports triton.language (page 19's torch.compile does).
if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

import attention_downloads  # noqa: E402  (docs/_ext, just put on the path)
import attention_i18n  # noqa: E402
import attention_site  # noqa: E402


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _project() -> dict:
    """pyproject.toml's [project] table, for a checkout that was not `pip install -e .`-ed."""
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _attention_version() -> str:
    try:
        return metadata.version(attention_downloads.DIST_NAME)
    except metadata.PackageNotFoundError:
        return _project()["version"]


def _torch_requirement() -> str:
    """The package's own requirement on torch (``torch>=2.4``)."""
    try:
        requirements = metadata.requires(attention_downloads.DIST_NAME) or []
    except metadata.PackageNotFoundError:
        requirements = _project()["dependencies"]
    (torch,) = [r for r in requirements if re.match(r"torch\b(?!-)", r.replace(" ", ""))]
    return torch.replace(" ", "")


# -- Project -----------------------------------------------------------------------------------

project = "Attention in PyTorch"
author = "The attention project authors"
copyright = "the attention project authors"
release = _attention_version()
version = ".".join(release.split(".")[:2])

VERSIONS = {
    "torch": _version("torch"),
    attention_downloads.DIST_NAME: release,
    "numpy": _version("numpy"),
    "matplotlib": _version("matplotlib"),
}

# -- General -----------------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx.ext.doctest",
    "sphinx_copybutton",
    "sphinx_gallery.gen_gallery",
    # MathJax served from _static/mathjax, not from a CDN.
    "sphinx-mathjax-offline",
    # docs/_ext/attention_docs.py: example seeding, re-exported names, no CDN assets.
    "attention_docs",
    # docs/_ext/attention_downloads.py: the package's wheel in the site, and notebooks and
    # scripts that install it and carry the code they show.
    "attention_downloads",
    # docs/_ext/attention_site.py: maths out of the search index and its snippets.
    "attention_site",
    # docs/_ext/attention_widgets.py: the trained models in the reader's browser (ONNX Runtime
    # Web, served by the site; web/ holds the widgets' JavaScript).
    "attention_widgets",
    # docs/_ext/attention_headviews.py: under a trained model's heatmap, the page's own example
    # in every layer and head, from a small JSON (web/src/head-view.js; no model, no runtime).
    "attention_headviews",
    # The bibliography (docs/references.bib) and the :cite:p: / :cite:t: roles.
    "sphinxcontrib.bibtex",
    # sphinx-design's dropdowns, and docs/_ext/attention_exercises.py: each exercise's solution
    # folded into a collapsed "Solution to exercise N".
    "sphinx_design",
    "attention_exercises",
    # docs/_ext/attention_prerequisites.py: the line under a tutorial's title, with the pages
    # it assumes and its reading time.
    "attention_prerequisites",
    # docs/_ext/attention_api.py: module pages without the names that have their own page,
    # with the tutorials that use them, and API sections that wait for their module.
    "attention_api",
    # docs/_ext/attention_course.py: the course's parts and pages on the landing page, with
    # their reading times, and the gallery's cards numbered and summarised.
    "attention_course",
    # docs/_ext/attention_landing.py: the landing page's figure, drawn at build time.
    "attention_landing",
    # docs/_ext/attention_tutorials.py: captions on the package excerpts, no empty code boxes,
    # "view source" opening a tutorial's script, names that break at a dot in the sidebar.
    "attention_tutorials",
    # docs/_ext/attention_i18n.py: the language switch on every page, the Chinese edition's
    # notebooks, and its build that reuses the English one's pages.
    "attention_i18n",
    # Link previews when a page is shared (Open Graph), and a sitemap for search engines.
    "sphinxext.opengraph",
    "sphinx_sitemap",
]

templates_path = [str(DOCS / "_templates")]
# The checkout's root: the package excerpts are captioned with their path from it.
attention_root = str(ROOT)
exclude_patterns = ["_templates", "_ext", "_static", "generated/backreferences"]
root_doc = "index"

# -- Languages (docs/_ext/attention_i18n.py) ---------------------------------------------------

# English, or the Chinese edition translated through Sphinx's own gettext catalogues: one
# catalogue per page (gettext_compact), without line numbers, so that a change to one page's
# prose changes that page's catalogue and nothing else.
language = attention_i18n.build_language()
locale_dirs = [str(ROOT / "locale")]
gettext_compact = False
gettext_location = False
gettext_uuid = False
if language == "zh_CN":
    # Chinese search splits words with jieba (sphinx.search.zh).
    html_search_language = "zh"
    # The course's words kept whole, in the index and in the query (a jieba user dictionary
    # made from the glossary and locale/zh_CN/search_words.txt; attention_i18n.ChineseSearch).
    html_search_options = {
        "dict": attention_i18n.search_dictionary(ROOT, ROOT / "build" / "search-words-zh_CN.txt")
    }
    # The footer's holder, after "版权所有 ©" (locale/zh_CN/LC_MESSAGES/sphinx.po).
    copyright = "attention 项目的作者们"

# A broken cross-reference is a bug: references to this package must resolve. References to
# other projects (torch.Tensor, int, ...) resolve only with intersphinx, which needs the network,
# so they are not checked.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!attention(\.|$)).*")]

if attention_site.intersphinx_enabled():
    extensions.append("sphinx.ext.intersphinx")
    # Each project's inventory online, else an empty one: an unreachable site leaves its names
    # unlinked (logged) instead of failing the build under -W.
    intersphinx_mapping = attention_site.intersphinx_mapping(
        attention_site.INTERSPHINX_PROJECTS,
        attention_site.empty_inventory(ROOT / "build" / "empty-objects.inv"),
    )
    intersphinx_timeout = 30

# -- Bibliography (sphinxcontrib-bibtex) -------------------------------------------------------

# Absolute: sphinxcontrib-bibtex reads the path against this file's directory, not docs/.
bibtex_bibfiles = [str(DOCS / "references.bib")]
bibtex_default_style = "plain"
# "Vaswani et al. (2017)" for :cite:t:, "(Vaswani et al., 2017)" for :cite:p:.
bibtex_reference_style = attention_site.register_citation_style()

# -- API reference (autodoc, autosummary, napoleon) --------------------------------------------

autosummary_generate = True
autosummary_imported_members = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# nn.Module's own docstrings (forward, extra_repr, ...) would otherwise fill every class page.
autodoc_inherit_docstrings = False
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# PyTorch's docstring layout has a "Shape:" section next to "Args:" and "Returns:".
napoleon_custom_sections = ["Shape"]

# -- sphinx-gallery ----------------------------------------------------------------------------

# -- Downloads (docs/_ext/attention_downloads.py) ---------------------------------------------

# Where the site is served: the notebooks install the wheel from there and link to its pages.
# The Chinese edition is served under the English site (zh_CN/), or on Read the Docs as a project
# of its own (attention_i18n.site_root).
attention_site_url = attention_i18n.site_root(language, attention_downloads.site_url())
# The package's own requirement on torch: the notebooks keep any torch that satisfies it.
attention_torch_requirement = _torch_requirement()
attention_versions = VERSIONS

_FIRST_CELL = attention_downloads.install_cell(
    site=attention_site_url,
    version=release,
    torch_requirement=attention_torch_requirement,
    versions=VERSIONS,
)

sphinx_gallery_conf = {
    # Relative to the source directory (docs/), not to this file.
    "examples_dirs": "../gallery",
    "gallery_dirs": "tutorials",
    # Every script runs, whatever its name; the variable selects a subset while iterating.
    "filename_pattern": os.environ.get("ATTENTION_GALLERY_PATTERN") or r"\.py$",
    "ignore_pattern": r"__init__\.py",
    # The learning path: the parts in the sorted order of their folders (gallery/1_foundations,
    # gallery/2_...), and within a part the file-name order (01_..., 02_..., ...).
    "within_subsection_order": "FileNameSortKey",
    "run_stale_examples": os.environ.get("ATTENTION_RUN_STALE") == "1",
    # Any exception in any example fails the build (after all examples have run).
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    # "Examples using ..." mini-galleries on the API pages.
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("attention",),
    # Same numbers on every build: matplotlib's state and every seed are reset before each script.
    "reset_modules": ("matplotlib", "attention_docs.reset_seeds"),
    "reset_modules_order": "before",
    # Relative to the HTML output directory: build/junit-gallery.xml.
    "junit": "../junit-gallery.xml",
    "first_notebook_cell": _FIRST_CELL,
    "download_all_examples": True,
    "matplotlib_animations": False,
    # Every figure also at twice its resolution, which high-density screens pick (srcset).
    "image_srcset": ["2x"],
    # docs/_ext/attention_figures.py: a figure whose text shows under 8 pt in the page's
    # column, or that draws a red and a green of one lightness, fails the build; then the
    # matplotlib scraper of sphinx-gallery saves it.
    "image_scrapers": ("attention_figures.scraper",),
    # The Mem (MB) column of the computation-times page: each page's peak resident memory
    # above what the build held when it started.
    "show_memory": attention_site.PeakMemory(),
    "remove_config_comments": True,
    "min_reported_time": 0,
    # A cell that ends in a call returning a Figure, Axes or Text (plot_attention, ax.set_title)
    # prints nothing, so pages need no `_ = ` in front of such calls.
    "ignore_repr_types": r"matplotlib\.(figure|axes|text)",
    # The Chinese build runs nothing: it reuses the English build's pages (attention_i18n).
    **attention_i18n.gallery_overrides(language),
}

# -- HTML --------------------------------------------------------------------------------------

html_theme = "furo"
# furo's sidebar with the language switch under the site's name (docs/_templates/sidebar).
html_sidebars = {
    "**": [
        "sidebar/scroll-start.html",
        "sidebar/brand.html",
        "sidebar/language.html",
        "sidebar/search.html",
        "sidebar/navigation.html",
        "sidebar/scroll-end.html",
    ]
}
# The site's name above every page and in its tab, in the build's language (the landing page's
# title, as its catalogue translates it).
html_title = attention_i18n.site_title(language, project, ROOT)
html_static_path = [str(DOCS / "_static")]
html_css_files = ["custom.css"]
html_favicon = str(DOCS / "_static" / "favicon.svg")
# The site's address: the canonical link of every page, the sitemap's and the previews' URLs.
html_baseurl = attention_site_url
# The tutorials rank above the API entries that merely mention a word (docs/_ext/static).
html_search_scorer = str(DOCS / "_ext" / "static" / "scorer.js")
# Keyboard access to code, outputs and formulas that scroll sideways (docs/_static).
html_js_files = ["scroll-regions.js", "figure-links.js"]
html_last_updated_fmt = None
html_show_sphinx = False
# Code colours with at least 4.5:1 contrast against their ground (WCAG AA), in both schemes
# (accessible-pygments, installed with furo).
pygments_style = "a11y-light"
pygments_dark_style = "a11y-dark"
html_theme_options = {
    # A link to the project's repository, when there is one to name (docs/_ext/attention_site.py).
    **attention_site.repository_options(attention_site.repository()),
    "navigation_with_keys": True,
    "light_css_variables": {
        "color-brand-primary": "#b3401a",
        "color-brand-content": "#b3401a",
    },
    "dark_css_variables": {
        "color-brand-primary": "#ff9a6b",
        "color-brand-content": "#ff9a6b",
    },
}

# sphinx-copybutton: copy code without the ">>> " and "... " prompts.
copybutton_prompt_text = r">>> |\.\.\. "
copybutton_prompt_is_regexp = True

# -- Sharing and finding -----------------------------------------------------------------------

# sphinxext-opengraph: the title, description and picture a chat or a social site shows for a
# shared link. The picture is the landing page's figure, rendered at build time; no social card
# is drawn (it would need fonts and time for every page).
ogp_site_url = attention_site_url
ogp_site_name = html_title
ogp_image = "_static/attention-preview.png"  # docs/_ext/attention_landing.py
ogp_image_alt = "The attention weights one query gives every word of a sentence."
ogp_description_length = 200
ogp_enable_meta_description = True
ogp_social_cards = {"enable": False}

# sphinx-sitemap: build/html/sitemap.xml, every page's address under the site's address.
sitemap_url_scheme = "{link}"
sitemap_excludes = ["search.html", "genindex.html", "py-modindex.html"]
sitemap_show_lastmod = False
