"""Downloads that run anywhere: the package on the site, and notebooks and scripts that carry
the code they show. Loaded by ``conf.py`` as a Sphinx extension.

- The package is built into a wheel at the end of every HTML build and published inside the
  site at ``packages/<wheel>`` (:func:`wheel_url`). Its distribution name is
  ``attention-in-pytorch`` (the name ``attention`` on PyPI belongs to another project); the
  import name stays ``attention``. The wheel is built offline, from a copy of the package, with
  ``pip wheel --no-index --no-build-isolation``.
- Every notebook starts with :func:`install_cell`: a ``%pip install`` of torch, Matplotlib and
  that wheel, skipped where the same version is already installed, followed by the versions the
  page was built with. Every script starts with :func:`script_header`, which says the same. A
  page that imports ``attention.flash_triton`` (:func:`needs_triton`) also needs Triton, which
  has wheels for Linux only: its first cell starts with :func:`triton_cell`, which stops with a
  clear message elsewhere and installs Triton where it is missing, and its script says so.
- The ``.ipynb`` and ``.py`` that sphinx-gallery wrote are rewritten in the built site (and in
  the zip files that hold them) once every page is written, when the labels and API pages are
  known: each ``.. literalinclude::`` becomes the source it shows, dedented and headed by its
  file and object, resolved by Sphinx's own reader, so the code a page walks through travels
  with it. In a notebook, roles become Markdown links to the page they point at on the site
  (``:class:``, ``:func:``, ``:ref:``, ``:doc:``, ...), citations (``:cite:t:``,
  ``:cite:p:``) become "Vaswani et al. (2017)" and "(Vaswani et al., 2017)" linked to the
  site's bibliography, ``:math:`` becomes ``$...$``, and admonitions and other directives
  become plain Markdown, so no reST reaches a reader. A script's docstring and comments become
  plain text the same way, without links (:func:`convert_script`); its code is untouched. The
  sources in ``docs/`` are left as sphinx-gallery wrote them.
- In a notebook, the ``.. solution N`` marker of an exercise's solution (folded into a dropdown
  on the page by ``attention_exercises``) becomes a "Solution to exercise N" heading, and the
  cells of the solution after it are folded (``jupyter.source_hidden``); the
  ``.. prerequisites::`` line (``attention_prerequisites``) becomes Markdown with the same links
  and reading time as the page. A script says both in plain words.
- Hidden lines (``sphinx_gallery_start_ignore``: checks and figure details the page does not
  show) stay in the notebook, each block a folded cell of its own that says so
  (:data:`HIDDEN_CODE_NOTE`); the script keeps them as they are.
- ``.. attention-install::`` writes the one ``pip install matplotlib <wheel url>`` line on a
  page.

The site's address, which the downloads name, is :func:`site_url`: ``ATTENTION_SITE_URL``, else
Read the Docs' ``READTHEDOCS_CANONICAL_URL``, else ``make serve``'s ``http://127.0.0.1:8000/``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from attention_exercises import SOLUTION_MARKER, SOLUTION_TITLE
from attention_i18n import rst_translator
from attention_prerequisites import markdown_line, page_label, reading_minutes, script_blocks
from docutils import nodes
from docutils.parsers.rst import Directive

#: The distribution's name on an index; the import name is ``attention``.
DIST_NAME = "attention-in-pytorch"
#: The package's import name, and its folder in the checkout.
IMPORT_NAME = "attention"
#: Where the wheel lies inside the built site.
PACKAGES_DIR = "packages"
#: ``make serve``'s address, the site's address when nothing else names one.
DEFAULT_SITE_URL = "http://127.0.0.1:8000/"

# -- Names and addresses -----------------------------------------------------------------------


def site_url(environ: Mapping[str, str] = os.environ) -> str:
    """The address the site is served from, ending in ``/``."""
    url = (
        environ.get("ATTENTION_SITE_URL")
        or environ.get("READTHEDOCS_CANONICAL_URL")
        or DEFAULT_SITE_URL
    )
    return url.rstrip("/") + "/"


def wheel_name(version: str, dist: str = DIST_NAME) -> str:
    """The file name of the package's wheel (PEP 427: ``-`` in the name becomes ``_``)."""
    return f"{re.sub(r'[-_.]+', '_', dist).lower()}-{version}-py3-none-any.whl"


def wheel_url(site: str, version: str) -> str:
    """The address of the wheel inside the site at ``site``."""
    return f"{site}{PACKAGES_DIR}/{wheel_name(version)}"


def install_command(site: str, version: str, torch_requirement: str) -> str:
    """The ``pip install`` arguments a notebook or script needs: torch, Matplotlib, the wheel."""
    return f'pip install "{torch_requirement}" matplotlib {wheel_url(site, version)}'


def _built_with(versions: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {ver}" for name, ver in versions.items())


def install_cell(
    *, site: str, version: str, torch_requirement: str, versions: Mapping[str, str]
) -> str:
    """The first cell of every notebook: install what the page needs, print what it used.

    ``versions`` maps distribution names to the versions the page was built with.
    """
    return f"""\
# Installs what this page needs, then prints the versions it was built with.
# - torch: an installed torch that satisfies "{torch_requirement}" is kept (Colab's, a GPU
#   build), so torch is installed only where it is missing.
# - attention: the wheel of {DIST_NAME} from the site this notebook comes from (it
#   is imported as `attention`; the PyPI project called "attention" is another one).
# Where this version of it is installed already (the project's own environment), the cell
# installs nothing.
from importlib import invalidate_caches, metadata

try:
    installed = metadata.version("{DIST_NAME}")
except metadata.PackageNotFoundError:
    installed = None
if installed != "{version}":
    %{install_command(site, version, torch_requirement)}
    invalidate_caches()
print("This page was built with {_built_with(versions)}.")"""


#: A page whose code imports ``attention.flash_triton`` needs Triton, which the package does not
#: require (the rest of it works without) and which has wheels for Linux only.
_IMPORTS_TRITON = re.compile(
    r"^\s*(?:from|import)\s+attention\.flash_triton\b"
    r"|^\s*from\s+attention\s+import\s+.*\bflash_triton\b",
    re.MULTILINE,
)


def needs_triton(source: str) -> bool:
    """Whether the page's code ``source`` imports ``attention.flash_triton``."""
    return _IMPORTS_TRITON.search(source) is not None


def triton_requirement() -> str:
    """The Triton this build ran, pinned (``triton==3.9.0``), or ``triton`` if none is installed."""
    try:
        return f"triton=={metadata.version('triton')}"
    except metadata.PackageNotFoundError:
        return "triton"


def triton_cell(requirement: str) -> str:
    """What the first cell of a page that needs Triton starts with: a clear stop where Triton has
    no wheel, then Triton installed where it is missing."""
    return f"""\
# This page runs Triton kernels (attention.flash_triton): it needs {requirement}, which has
# wheels for Linux only. Without a GPU, Triton's interpreter runs them on the CPU.
import sys
from importlib import invalidate_caches, util

if not sys.platform.startswith("linux"):
    raise RuntimeError(
        "This page needs Triton, which has wheels for Linux only: run it on Linux "
        "(or in WSL, or in a hosted notebook such as Colab)."
    )
if util.find_spec("triton") is None:
    %pip install "{requirement}"
    invalidate_caches()
"""


#: The words of a script's header (:func:`script_header`), by language.
SCRIPT_HEADER = {
    "en": (
        "# Downloaded from {page}",
        "# Built with {versions}.",
        "# To run it, install the same things first (an installed torch that satisfies",
        '# "{torch}" is kept), then run it with python:',
        "#",
        "#     {install}",
        "#",
        "# The wheel is the attention package of this site ({dist}, imported as",
        "# `attention`). Set ATTENTION_SEED to draw other random numbers than the page's.",
    ),
    "zh_CN": (
        "# 下载自 {page}",
        "# 构建时使用 {versions}。",
        "# 运行之前先装好同样的依赖（已安装且满足",
        '# "{torch}" 的 torch 会保留），再用 python 运行：',
        "#",
        "#     {install}",
        "#",
        "# 这个 wheel 是本站的 attention 包（{dist}，导入名为",
        "# `attention`）。设置 ATTENTION_SEED 可以抽取与网页不同的随机数。",
    ),
}


def script_header(
    *,
    site: str,
    version: str,
    torch_requirement: str,
    versions: Mapping[str, str],
    page: str,
    language: str = "en",
) -> str:
    """The comment that starts every downloaded script, in ``language``: the address of its
    ``page``, what it needs and how to install it."""
    words = {
        "page": page,
        "versions": _built_with(versions),
        "torch": torch_requirement,
        "install": install_command(site, version, torch_requirement),
        "dist": DIST_NAME,
    }
    lines = SCRIPT_HEADER.get(language, SCRIPT_HEADER["en"])
    return "\n".join(line.format(**words) for line in lines) + "\n"


# -- reST blocks -------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. (?P<name>[\w:-]+)::(?P<arg>.*)$")
_OPTION = re.compile(r"^[ \t]+:(?P<name>[^:\s][^:]*):(?P<value>.*)$")
_COMMENT = re.compile(r"^(?P<indent>[ \t]*)\.\.(?:[ \t]+(?![_|\[]|\S+::)|$)")
_ADMONITIONS = {
    "note": "Note",
    "warning": "Warning",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
}
_CODE_DIRECTIVES = ("code-block", "code", "sourcecode")


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the indented block that follows line ``start`` (trailing blanks excluded)."""
    end = start + 1
    last = start
    while end < len(lines):
        line = lines[end]
        if line.strip():
            if _indent_of(line) <= indent:
                break
            last = end
        end += 1
    return last + 1


def parse_directive(lines: list[str], start: int) -> tuple[dict, int] | None:
    """Parse the directive whose first line is ``lines[start]``.

    Returns ``({"name", "arg", "indent", "options", "body"}, end)`` where ``end`` is the index
    after its last line, or None when the line starts no directive.
    """
    match = _DIRECTIVE.match(lines[start])
    if not match:
        return None
    indent = len(match.group("indent").expandtabs())
    end = _block_end(lines, start, indent)
    options: dict[str, str] = {}
    i = start + 1
    while i < end and (m := _OPTION.match(lines[i])):
        name, value, depth = m.group("name").strip(), m.group("value").strip(), _indent_of(lines[i])
        i += 1
        # A value goes on over the lines below it that are indented deeper than its name (a
        # two-line :summary: before :assumes:).
        while i < end and lines[i].strip() and _indent_of(lines[i]) > depth:
            value = f"{value} {lines[i].strip()}".strip()
            i += 1
        options[name] = value
    body = textwrap.dedent("\n".join(lines[i:end])).strip("\n")
    directive = {
        "name": match.group("name"),
        "arg": match.group("arg").strip(),
        "indent": match.group("indent"),
        "options": options,
        "body": body,
    }
    return directive, end


def read_literalinclude(path: str | Path, options: Mapping[str, str], config) -> str:
    """The text ``.. literalinclude:: path`` with ``options`` shows, read as Sphinx reads it.

    ``options`` are the directive's option strings; they are converted by the directive's own
    option specification, then handed to Sphinx's ``LiteralIncludeReader``.
    """
    from sphinx.directives.code import LiteralInclude, LiteralIncludeReader

    converted = {}
    for name, value in options.items():
        if name == NO_DOCSTRING:
            continue
        convert = LiteralInclude.option_spec.get(name)
        if convert is None:
            raise ValueError(f"literalinclude has no option {name!r}")
        converted[name] = convert(value if value else None)
    text, _ = LiteralIncludeReader(str(path), converted, config).read()
    return without_docstring(text) if NO_DOCSTRING in options else text


#: The option of ``literalinclude`` (attention_tutorials.ExcerptInclude) that shows a function
#: or class without its docstring: the code from its signature on, whose docstring the API
#: page shows.
NO_DOCSTRING = "no-docstring"


def without_docstring(code: str) -> str:
    r"""``code``, one function or class, without its docstring's lines.

    >>> print(without_docstring('def f(x):\n    "Twice x."\n    return 2 * x\n'), end="")
    def f(x):
        return 2 * x
    """
    import ast

    tree = ast.parse(textwrap.dedent(code))
    if not tree.body or not isinstance(
        tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        raise ValueError("no-docstring: the excerpt is not one function or class")
    body = tree.body[0].body
    if not (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        raise ValueError("no-docstring: the excerpt has no docstring")
    lines = code.splitlines(keepends=True)
    return "".join(lines[: body[0].lineno - 1] + lines[body[0].end_lineno :])


def _fence(code: str, language: str = "") -> str:
    """A Markdown fenced code block holding ``code`` (the fence outgrows any run inside)."""
    longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{code.rstrip()}\n{fence}"


def _indented(code: str, spaces: int = 4) -> str:
    """``code`` dedented, then indented by ``spaces`` (a code block in plain text)."""
    return textwrap.indent(textwrap.dedent(code).rstrip("\n"), " " * spaces)


def excerpt_caption(arg: str, options: Mapping[str, str]) -> str:
    """What a package excerpt shows: its file from the checkout's root, and its object.

    >>> excerpt_caption("../../../attention/multi_head.py", {"pyobject": "MultiHeadAttention"})
    'From `attention/multi_head.py`: `MultiHeadAttention`'
    >>> excerpt_caption("../../attention/masks.py", {"lines": "3-9"})
    'From `attention/masks.py`, lines 3-9'
    """
    path = re.sub(r"^(?:\.\./|\./)+", "", arg)
    if options.get("pyobject"):
        return f"From `{path}`: `{options['pyobject']}`"
    if options.get("lines"):
        return f"From `{path}`, lines {options['lines']}"
    return f"From `{path}`"


_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]+\)")


def _markdown_to_plain(text: str) -> str:
    """Markdown links and bold as plain text: ``**A:** [B](u)`` is ``A: B``."""
    return _MARKDOWN_LINK.sub(r"\1", text).replace("**", "")


# -- reST to Markdown --------------------------------------------------------------------------

_INLINE_LITERAL = re.compile(r"``(?!\s)(?:[^`]|`(?!`))+?(?<!\s)``")
_ROLE = re.compile(
    r"(?<![\w`\\]):(?:(?P<domain>[\w-]+):)?(?P<role>[\w-]+):`(?P<content>(?:[^`\\]|\\.)+?)`(?!`)"
)
_EXPLICIT = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
_PY_ROLES = {"class", "func", "meth", "attr", "mod", "data", "exc", "obj", "const", "type"}
_PAREN_ROLES = {"func", "meth"}
_LITERAL_BLOCK_INTRO = re.compile(r"::[ \t]*$")
_HYPERLINK = re.compile(r"`([^`<]+?)\s*<([^<>`]+)>`__?")
_ESCAPED_SPACE = re.compile(r"(?<!\\)\\ ")


class Links:
    """Where the names a page cross-references live: a base URL and lookups from a Sphinx env.

    ``python(role, target)`` and ``label(name)`` return ``(title or None, url)`` or None;
    ``document(name, from_doc)`` the same for ``:doc:``. The default knows nothing (every role
    becomes plain text).
    """

    def python(self, role: str, target: str, from_doc: str) -> tuple[str | None, str] | None:
        return None

    def label(self, name: str, from_doc: str) -> tuple[str | None, str] | None:
        return None

    def document(self, name: str, from_doc: str) -> tuple[str | None, str] | None:
        return None

    def citation(self, key: str, from_doc: str) -> tuple[str, str, str | None] | None:
        """``(authors, year, url of the entry or None)`` for a bibliography key."""
        return None


def cite_authors(last_names: list[str]) -> str:
    """How a citation names the authors: "A", "A and B", or "A et al." for three or more.

    >>> cite_authors(["Vaswani", "Shazeer", "Parmar"]), cite_authors(["Press", "Smith"])
    ('Vaswani et al.', 'Press and Smith')
    """
    if len(last_names) >= 3:
        return f"{last_names[0]} et al."
    return " and ".join(last_names)


class SphinxLinks(Links):
    """Links into the built site at ``base``, resolved as Sphinx resolved the page's own."""

    def __init__(self, app, base: str) -> None:
        self.app = app
        self.env = app.env
        self.base = base
        self.srcdir = app.srcdir  # where the gallery's parts are, to find a page by its name

    def url(self, docname: str, anchor: str = "") -> str:
        uri = self.app.builder.get_target_uri(docname)
        return self.base + uri + (f"#{anchor}" if anchor else "")

    def python(self, role, target, from_doc):
        objects = self.env.domains["py"].objects
        candidates = [target]
        parts = target.split(".")
        # attention.<module>.<Name> is documented as attention.<Name> (see attention_docs).
        for i in range(2, len(parts)):
            candidates.append(".".join([parts[0], *parts[i:]]))
        for name in candidates:
            entry = objects.get(name)
            if entry is not None:
                return None, self.url(entry.docname, entry.node_id)
        return None

    def label(self, name, from_doc):
        std = self.env.domains["std"]
        name = name.lower()
        if name in std.labels:
            docname, labelid, sectname = std.labels[name]
            return sectname, self.url(docname, labelid)
        if name in std.anonlabels:
            docname, labelid = std.anonlabels[name]
            return None, self.url(docname, labelid)
        return None

    def document(self, name, from_doc):
        from posixpath import dirname, join, normpath

        docname = name.lstrip("/") if name.startswith("/") else join(dirname(from_doc), name)
        docname = normpath(docname)
        if docname not in self.env.all_docs:
            return None
        title = self.env.titles.get(docname)
        return (title.astext() if title is not None else None), self.url(docname)

    def citation(self, key, from_doc):
        from pybtex.richtext import Text

        domain = self.env.get_domain("cite")
        entry = domain.bibdata.data.entries.get(key)
        if entry is None:
            return None
        names = [
            Text.from_latex(" ".join(p.prelast_names + p.last_names)).render_as("text")
            for p in entry.persons.get("author", [])
        ]
        url = None
        for cited in domain.citations:
            if cited.key == key:
                url = self.url(cited.bibliography_key.docname, cited.citation_id)
                break
        return cite_authors(names), entry.fields.get("year", ""), url


#: What a download says where its page holds a widget (``.. widget::``), by language.
WIDGET_WORDS = {
    "en": "The site's copy of this page runs this model in your browser",
    "zh_CN": "本页在网站上的版本可以在你的浏览器中运行这个模型",
}


class _Converter:
    """Turns the reST of one notebook's text blocks into Markdown, through placeholders.

    :meth:`prepare` replaces what sphinx-gallery's own ``rst2md`` does not convert (directives,
    roles, literal blocks) by placeholder words; sphinx-gallery converts the rest (headings,
    hyperlinks); :meth:`finish` puts the Markdown in place of the placeholders.
    """

    def __init__(
        self,
        *,
        include: Callable[[str, Mapping[str, str]], str],
        links: Links,
        docname: str,
        plain: bool = False,
        language: str = "en",
        translate: Callable[[str], str] | None = None,
    ) -> None:
        self.include = include
        #: The notebook's language, and the translation of a line of reST into it (the
        #: prerequisites line and the solutions' headings are not in the text blocks).
        self.language = language
        self.translate = translate or (lambda text: text)
        self.links = links
        self.docname = docname
        #: Plain text for a script's comments instead of Markdown for a notebook's cells: roles
        #: become their text, with no link, and code is indented instead of fenced.
        self.plain = plain
        self.pieces: dict[str, str] = {}
        self.includes: list[str] = []
        #: The page's reading time, for its prerequisites line.
        self.reading_minutes = 1
        #: The headings the solutions' markers became, in order (a notebook folds what follows
        #: each).
        self.solution_headings: list[str] = []

    def _hold(self, markdown: str) -> str:
        key = f"QQATTNDL{len(self.pieces):05d}QQ"
        self.pieces[key] = markdown
        return key

    def _hold_block(self, indent: str, markdown: str) -> str:
        text = textwrap.indent(markdown, indent)
        # The block's own indentation on its first line stays (an indented code block's).
        return indent + self._hold(text[len(indent) :] if text.startswith(indent) else text)

    # Blocks: directives, comments, literal blocks.

    def _directive(self, d: dict) -> str:
        name, arg, indent, options, body = (
            d["name"],
            d["arg"],
            d["indent"],
            d["options"],
            d["body"],
        )
        if name == "literalinclude":
            # Dedented: a method's body shows from the margin, not 8 spaces in.
            code = textwrap.dedent(self.include(arg, options))
            self.includes.append(code)
            language = options.get("language", "python" if arg.endswith(".py") else "")
            caption = excerpt_caption(arg, options)
            if self.plain:
                return self._hold_block(indent, f"{caption}:\n\n{_indented(code)}")
            return self._hold_block(indent, f"*{caption}:*\n\n{_fence(code, language)}")
        if name in _CODE_DIRECTIVES:
            if self.plain:
                return self._hold_block(indent, _indented(body))
            return self._hold_block(indent, _fence(body, arg.split()[0] if arg else ""))
        if name == "math":
            math = "\n".join(part for part in (arg, body) if part)
            if self.plain:
                return self._hold_block(indent, _indented(math))
            return self._hold_block(indent, f"$$\n{math}\n$$")
        if name in _ADMONITIONS or name == "admonition":
            title = arg if name == "admonition" else _ADMONITIONS[name]
            if name.startswith(("version", "deprecated")):
                title, arg = f"{title} {arg}", ""
            text = self.prepare_text("\n".join(p for p in (arg, body) if p).strip())
            if self.plain:
                return self._hold_block(indent, f"{title}: {text}" if text else title)
            quoted = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
            head = f"> **{title}**"
            return self._hold_block(indent, f"{head}\n>\n{quoted}" if quoted else head)
        if name == "prerequisites":
            note = self.prepare_text(options.get("assumes", "")).strip()
            line = markdown_line(
                arg.split(),
                note,
                self.reading_minutes,
                lambda page: self.links.label(
                    page_label(self.docname, page, getattr(self.links, "srcdir", None)),
                    self.docname,
                ),
                self.language,
            )
            if self.plain:
                line = _markdown_to_plain(line)
            return f"{indent}{self._hold(line)}"
        if name == "widget":  # a model in the site's page (attention_widgets); a link here
            found = self.links.document("/" + self.docname, self.docname)
            words = WIDGET_WORDS[self.language]
            if found is None or self.plain:
                where = f": {found[1]}" if found else ""
                line = f"({words}{where})" if self.plain else f"*{words}.*"
            else:
                line = f"*[{words}]({found[1]}).*"
            return f"{indent}{self._hold(line)}"
        if name == "head-view":  # the site's view of the figure above (attention_headviews)
            return ""
        if name == "rubric":
            return f"{indent}{arg}" if self.plain else f"{indent}**{arg}**"
        if name in ("image", "figure"):
            alt = options.get("alt", "")
            caption = self.prepare_text(body) if name == "figure" and body else ""
            target = options.get("target", "")
            line = f"*{alt or 'A figure'}: see it on the page.*"
            if self.plain:
                line = f"({alt or 'A figure'}: see it on the page.)"
            elif target:
                line = f"[{alt or 'A figure'}]({target}) (on the page)"
            return textwrap.indent("\n\n".join(p for p in (line, caption) if p), indent)
        # Any other directive: its content, as text.
        text = self.prepare_text("\n".join(p for p in (arg, body) if p).strip())
        return textwrap.indent(text, indent)

    def prepare_text(self, text: str) -> str:
        lines = text.split("\n")
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            parsed = parse_directive(lines, i)
            if parsed is not None:
                directive, end = parsed
                out.append(self._directive(directive))
                i = end
                continue
            solution = SOLUTION_MARKER.match(line)
            if solution:
                # A notebook folds the solution's cells (convert_notebook); its heading stays.
                title = self.translate(SOLUTION_TITLE.format(number=solution.group("number")))
                colon = "：" if self.language.startswith("zh") else ":"
                heading = f"{title}{colon}" if self.plain else f"**{title}**"
                self.solution_headings.append(heading)
                out.append(f"{line[: _indent_of(line)]}{heading}")
                i += 1
                continue
            comment = _COMMENT.match(line)
            if comment and not line.strip().startswith((".. _", ".. |")):
                i = _block_end(lines, i, len(comment.group("indent")))
                continue
            if _LITERAL_BLOCK_INTRO.search(line) and line.strip():
                # A paragraph ending in "::" introduces an indented literal block.
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j < len(lines) and _indent_of(lines[j]) > _indent_of(line):
                    end = _block_end(lines, j - 1, _indent_of(line))
                    code = textwrap.dedent("\n".join(lines[j:end]))
                    intro = line.rstrip()[:-2].rstrip()
                    if intro.strip():
                        out.append(intro + ("" if intro.endswith(":") else ":"))
                    out.append("")
                    block = _indented(code) if self.plain else _fence(code)
                    out.append(self._hold_block(" " * _indent_of(line), block))
                    i = end
                    continue
            out.append(re.sub(r"^(\s*)#\.(\s)", r"\g<1>1.\2", line))
            i += 1
        return self.inline("\n".join(out))

    # Inline markup: literals stay, roles become Markdown.

    def inline(self, text: str) -> str:
        if self.plain:
            # ``code`` reads as `code`; `text <url>`_ as text (url).
            text = _INLINE_LITERAL.sub(lambda m: self._hold(f"`{m.group(0)[2:-2]}`"), text)
            text = _HYPERLINK.sub(lambda m: self._hold(f"{m.group(1)} ({m.group(2)})"), text)
        else:
            text = _INLINE_LITERAL.sub(lambda m: self._hold(m.group(0)), text)
        text = _ROLE.sub(self._role, text)
        # reST's escaped space, which separates markup from a Chinese character, shows nothing.
        return _ESCAPED_SPACE.sub("", text)

    def _role(self, match: re.Match) -> str:
        role = match.group("role")
        domain = match.group("domain")
        content = re.sub(r"\s+", " ", match.group("content").replace("\\`", "`"))
        if role == "math" and domain in (None, "math"):
            return self._hold(f"${content}$")
        explicit = _EXPLICIT.match(content)
        title, target = (
            (explicit.group("title"), explicit.group("target")) if explicit else (None, content)
        )
        nolink = target.startswith("!")
        target = target.lstrip("!")
        found = None
        if domain in (None, "py") and role in _PY_ROLES:
            shown = target.lstrip("~")
            if target.startswith("~"):
                shown = shown.rsplit(".", 1)[-1]
            shown = title or shown + ("()" if role in _PAREN_ROLES else "")
            found = None if nolink else self.links.python(role, target.lstrip("~."), self.docname)
            text = f"`{shown}`"
        elif role in ("ref", "numref") and domain in (None, "std"):
            found = None if nolink else self.links.label(target, self.docname)
            text = title or (found[0] if found and found[0] else target)
        elif role == "doc" and domain in (None, "std"):
            found = None if nolink else self.links.document(target, self.docname)
            text = title or (found[0] if found and found[0] else target)
        elif domain == "cite" and role in ("p", "t"):
            return self._cite(content, textual=role == "t")
        elif role == "abbr":
            text = title or content
        else:
            text = f"`{title or target}`"
        if found is not None and not self.plain:
            return self._hold(f"[{text}]({found[1]})")
        return self._hold(text)

    def _cite(self, keys: str, *, textual: bool) -> str:
        """``:cite:t:`` as "Vaswani et al. (2017)", ``:cite:p:`` as "(Vaswani et al., 2017)"."""
        parts = []
        for key in (k.strip() for k in keys.split(",")):
            found = self.links.citation(key, self.docname)
            if found is None:
                parts.append(key)
                continue
            authors, year, url = found
            text = f"{authors} ({year})" if textual else f"{authors}, {year}"
            parts.append(f"[{text}]({url})" if url and not self.plain else text)
        return self._hold(", ".join(parts) if textual else "(" + "; ".join(parts) + ")")

    def finish(self, markdown: str) -> str:
        previous = None
        while previous != markdown:  # held pieces may hold others (an admonition's roles)
            previous = markdown
            markdown = re.sub(
                r"QQATTNDL\d{5}QQ", lambda m: self.pieces.get(m.group(0), m.group(0)), markdown
            )
        return markdown


# -- The downloads -----------------------------------------------------------------------------


#: Starts the text of a solution (its prose) in the blocks handed to sphinx-gallery, so that
#: its cell can be found and folded; removed from the cell.
_HIDDEN = "QQATTNHIDDENQQ"
#: What follows a solution's heading in a notebook, where its cells are folded, by language.
FOLDED_NOTE = {
    "en": " (folded: open the cells below to see it)",
    "zh_CN": "（已折叠：展开下面的单元格即可看到）",
}


#: The first line of a notebook cell that holds lines the page hides (its checks, a figure's
#: details): the cell is folded, and runs as the build runs it.
HIDDEN_CODE_NOTE = {
    "en": "# Hidden on the page: the build runs it too.",
    "zh_CN": "# 网页上隐藏的代码：网站构建时同样运行。",
}


def _split_solutions(blocks: list) -> list:
    """Text blocks cut at each solution marker: the text before it, the marker on its own,
    and the solution's text, which starts with :data:`_HIDDEN`."""
    from sphinx_gallery.py_source_parser import Block

    out = []
    for label, content, lineno in blocks:
        if label != "text":
            out.append(Block(label, content, lineno))
            continue
        lines = content.split("\n")
        markers = [i for i, line in enumerate(lines) if SOLUTION_MARKER.match(line)]
        if not markers:
            out.append(Block(label, content, lineno))
            continue
        cuts = sorted({0, *markers, len(lines)})
        for a, b in zip(cuts, cuts[1:], strict=False):
            piece = lines[a:b]
            if a in markers:
                out.append(Block("text", piece[0].strip(), lineno + a))
                piece = piece[1:]
                if "\n".join(piece).strip():
                    out.append(Block("text", _HIDDEN + "\n\n" + "\n".join(piece), lineno + a))
            elif "\n".join(piece).strip():
                out.append(Block("text", "\n".join(piece), lineno + a))
    return out


def fold_solution_cells(cells: list[dict], headings: list[str], language: str = "en") -> None:
    """Fold each exercise's solution: its heading (one of ``headings``, as the converter wrote
    them, in the notebook's language) stays, followed by :data:`FOLDED_NOTE`, and the cells
    after it (its text and its code, up to the next other text) get
    ``jupyter.source_hidden``, which JupyterLab, Notebook 7, VS Code and Colab honour."""
    note = FOLDED_NOTE.get(language, FOLDED_NOTE["en"])
    inside = False
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            if source.strip().startswith(tuple(headings)) and headings:
                inside = True
                cell["source"] = [f"{source.strip()}{note}"]
                continue
            if _HIDDEN in source:
                cell["source"] = [source.replace(_HIDDEN, "").strip() + "\n"]
            else:
                inside = False
                continue
        if inside:
            cell.setdefault("metadata", {})["jupyter"] = {"source_hidden": True}


def convert_notebook(
    path: Path,
    gallery_conf: Mapping,
    *,
    include: Callable[[str, Mapping[str, str]], str],
    links: Links,
    docname: str,
    translate: Callable[[str], str] | None = None,
    language: str = "en",
) -> tuple[dict, list[str]]:
    """The notebook of the gallery script ``path``, in Markdown with the code it includes and
    each exercise's solution folded; ``translate``, when given, translates the reST of each
    text block first (the Chinese edition's notebooks: attention_i18n.rst_translator).

    Returns the notebook and the texts of its literalincludes.
    """
    from sphinx_gallery.notebook import jupyter_notebook
    from sphinx_gallery.py_source_parser import Block

    converter = _Converter(
        include=include, links=links, docname=docname, language=language, translate=translate
    )
    converter.reading_minutes = reading_minutes(script_blocks(path, gallery_conf), include)
    # The page's hidden lines (checks, figure details) are kept, each block as a folded cell.
    blocks = script_blocks(path, gallery_conf, hidden=True)
    if translate is not None:
        blocks = [
            Block(label, translate(content) if label == "text" else content, lineno)
            for label, content, lineno in blocks
        ]
    blocks = [b for b in _split_solutions(blocks) if b.type == "text" or b.content.strip()]
    note = HIDDEN_CODE_NOTE.get(language, HIDDEN_CODE_NOTE["en"])
    blocks = [
        Block("code", f"{note}\n{content}", lineno)
        if label == "hidden"
        else Block(label, converter.prepare_text(content) if label == "text" else content, lineno)
        for label, content, lineno in blocks
    ]
    notebook = jupyter_notebook(blocks, dict(gallery_conf), str(path.parent))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = [converter.finish("".join(cell["source"]))]
        elif "".join(cell["source"]).startswith(note):
            cell.setdefault("metadata", {})["jupyter"] = {"source_hidden": True}
    fold_solution_cells(notebook["cells"], converter.solution_headings, language)
    if needs_triton(path.read_text(encoding="utf-8")):  # its first cell installs Triton first
        first = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
        first["source"] = [triton_cell(triton_requirement()) + "\n" + "".join(first["source"])]
    return notebook, converter.includes


_DOCSTRING_QUOTES = re.compile(r"^(?P<prefix>[rRuU]{0,2})(?P<quote>\"\"\"|\'\'\')")


def _text_blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """The comment blocks that sphinx-gallery reads as text: ``(start, end, prefix)`` line
    ranges of the comment lines right after each ``# %%``."""
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("# %%"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("#") and not lines[j].startswith("# %%"):
                j += 1
            if j > i + 1:
                blocks.append((i + 1, j))
            i = j
            continue
        i += 1
    return blocks


def convert_script(
    text: str,
    *,
    include: Callable[[str, Mapping[str, str]], str],
    header: str,
    links: Links | None = None,
    docname: str = "",
    minutes: int = 1,
    translate: Callable[[str], str] | None = None,
    language: str = "en",
) -> tuple[str, list[str]]:
    """The downloadable script: ``header``, then ``text`` with its docstring and its text
    blocks (the comments after each ``# %%``) in plain text: each literalinclude is the code it
    shows, indented under the file and the object it comes from, roles are their text
    (``:class:`attention.X``` is `` `attention.X` ``, a citation "(Vaswani et al., 2017)"),
    the prerequisites line reads as a line, and a solution's marker as its heading. The code is
    untouched: the script is the page's program. ``translate``, when given, translates the reST
    of the docstring and of each text block first, and ``language`` is the words' language
    (the Chinese edition's scripts: attention_i18n.rst_translator).

    Returns the script and the texts of its literalincludes.
    """
    import ast

    converter = _Converter(
        include=include,
        links=links or Links(),
        docname=docname,
        plain=True,
        language=language,
        translate=translate,
    )
    converter.reading_minutes = minutes
    translated = translate or (lambda block: block)

    def plain(block: str) -> str:
        return converter.finish(converter.prepare_text(translated(block)))

    lines = text.split("\n")
    replacements: list[tuple[int, int, list[str]]] = []
    module = ast.parse(text)
    first = module.body[0] if module.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        start, end = first.lineno - 1, first.end_lineno
        quotes = _DOCSTRING_QUOTES.match(lines[start])
        if quotes:
            quote = quotes.group("quote")
            # The docstring's value (escapes resolved), written back as a raw string.
            converted = plain(first.value.value)
            if quote in converted or converted.endswith("\\"):
                raise ValueError(
                    "a literalinclude in the docstring shows a triple quote, which would end "
                    "the docstring: move it to a '# %%' text block"
                )
            body = f"r{quote}{converted}{quote}".split("\n")
            replacements.append((start, end, body))
    for start, end in _text_blocks(lines):
        comment = "\n".join(re.sub(r"^# ?", "", line) for line in lines[start:end])
        converted = plain(comment).split("\n")
        replacements.append((start, end, [f"# {line}".rstrip() for line in converted]))
    for start, end, body in sorted(replacements, reverse=True):
        lines[start:end] = body
    return header + "\n".join(lines), converter.includes


def _rewrite_zip(path: Path, replacements: Mapping[str, bytes]) -> None:
    """Replace the members of the zip file ``path`` whose base name is in ``replacements``."""
    with zipfile.ZipFile(path) as old:
        members = [(info, old.read(info)) for info in old.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as new:
        for info, data in members:
            data = replacements.get(Path(info.filename).name, data)
            new.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    path.write_bytes(buffer.getvalue())


def _gallery_dirs(gallery_conf: Mapping) -> list[str]:
    dirs = gallery_conf.get("gallery_dirs") or []
    return [dirs] if isinstance(dirs, str) else list(dirs)


def rewrite_downloads(app) -> int:
    """Rewrite every gallery page's downloads in the built site; returns how many pages."""
    config = app.config
    gallery_conf = config.sphinx_gallery_conf
    srcdir = Path(app.srcdir)
    downloads = Path(app.outdir) / "_downloads"
    dlfiles = {Path(src).as_posix(): dest for src, (_, dest) in app.env.dlfiles.items()}
    links = SphinxLinks(app, config.attention_site_url)
    language = config.language or "en"
    replacements: dict[str, bytes] = {}
    zips: list[Path] = []
    pages = 0
    for gallery in _gallery_dirs(gallery_conf):
        for src, dest in dlfiles.items():
            # The gallery's pages, in its parts too (tutorials/1_foundations/01_x.py).
            if not src.startswith(gallery.rstrip("/") + "/"):
                continue
            if src.endswith(".zip"):
                zips.append(downloads / dest)
                continue
            if not src.endswith(".py"):
                continue
            docname = src[: -len(".py")]
            script = srcdir / src

            def include(arg, options, docname=docname):
                _, path = app.env.relfn2path(arg, docname)
                return read_literalinclude(path, options, config)

            header = script_header(
                site=config.attention_site_url,
                version=config.release,
                torch_requirement=config.attention_torch_requirement,
                versions=config.attention_versions,
                page=links.url(docname),
                language=language,
            )
            if needs_triton(script.read_text(encoding="utf-8")):
                header += (
                    f"# This page also needs {triton_requirement()}, which has wheels for Linux "
                    f'only:\n#\n#     pip install "{triton_requirement()}"\n'
                )
            minutes = reading_minutes(script_blocks(script, gallery_conf), include)
            # A translated build's downloads carry the page's translated prose.
            translate = rst_translator(app, docname)
            text, _ = convert_script(
                script.read_text(encoding="utf-8"),
                include=include,
                header=header,
                links=links,
                docname=docname,
                minutes=minutes,
                translate=translate,
                language=language,
            )
            replacements[script.name] = text.encode("utf-8")
            (downloads / dest).write_text(text, encoding="utf-8")
            notebook_src = src[: -len(".py")] + ".ipynb"
            if notebook_src in dlfiles:
                notebook, _ = convert_notebook(
                    script,
                    gallery_conf,
                    include=include,
                    links=links,
                    docname=docname,
                    translate=translate,
                    language=language,
                )
                data = json.dumps(notebook, indent=2).encode("utf-8")
                replacements[Path(notebook_src).name] = data
                (downloads / dlfiles[notebook_src]).write_bytes(data)
            pages += 1
    for path in zips:
        _rewrite_zip(path, replacements)
    return pages


# -- The wheel ---------------------------------------------------------------------------------


def build_wheel(root: Path, dest: Path, expected: str) -> Path:
    """Build the package's wheel from a copy of ``root`` into ``dest`` (offline) and return it.

    The copy keeps setuptools' ``build/`` and ``*.egg-info`` out of the checkout. ``expected``
    is the wheel's file name that the notebooks name; any other name is an error.
    """
    with tempfile.TemporaryDirectory(prefix="attention-wheel-") as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        for path in [root / "pyproject.toml", *root.glob("README*"), *root.glob("LICEN[CS]E*")]:
            shutil.copy2(path, source / path.name)
        shutil.copytree(root / IMPORT_NAME, source / IMPORT_NAME, ignore=ignore)
        out = Path(tmp) / "dist"
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index"]
        cmd += ["--no-build-isolation", "--quiet", "-w", str(out), str(source)]
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
        if proc.returncode != 0:
            raise RuntimeError(f"building the wheel failed:\n{proc.stdout}\n{proc.stderr}")
        built = sorted(out.glob("*.whl"))
        if [w.name for w in built] != [expected]:
            raise RuntimeError(f"expected the wheel {expected}, built {[w.name for w in built]}")
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.glob("*.whl"):
            old.unlink()
        return Path(shutil.copy2(built[0], dest / expected))


# -- Sphinx ------------------------------------------------------------------------------------


class InstallDirective(Directive):
    """``.. attention-install::``: the ``pip install`` line of Matplotlib and this site's
    wheel."""

    has_content = False

    def run(self):
        config = self.state.document.settings.env.config
        # Matplotlib too: the pages' figures need it.
        line = f"pip install matplotlib {wheel_url(config.attention_site_url, config.release)}"
        block = nodes.literal_block(line, line, language="bash")
        return [block]


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.errors import ExtensionError
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    root = Path(app.confdir)
    expected = wheel_name(app.config.release)
    try:
        wheel = build_wheel(root, Path(app.outdir) / PACKAGES_DIR, expected)
        pages = rewrite_downloads(app)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ExtensionError(f"attention_downloads: {exc}") from exc
    logger.info(
        f"attention_downloads: {wheel.relative_to(app.outdir)}; downloads of {pages} pages "
        f"name {app.config.attention_site_url}"
    )


def setup(app):
    app.add_config_value("attention_site_url", DEFAULT_SITE_URL, "env", str)
    app.add_config_value("attention_torch_requirement", "torch", "env", str)
    app.add_config_value("attention_versions", {}, "env", dict)
    app.add_directive("attention-install", InstallDirective)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "DIST_NAME",
    "Links",
    "SphinxLinks",
    "build_wheel",
    "convert_notebook",
    "convert_script",
    "install_cell",
    "needs_triton",
    "read_literalinclude",
    "rewrite_downloads",
    "script_header",
    "site_url",
    "triton_cell",
    "triton_requirement",
    "wheel_name",
    "wheel_url",
]
