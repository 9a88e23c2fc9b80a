"""The line under a page's title: what to read first, and how long the page takes to read.
Loaded by ``conf.py`` as a Sphinx extension.

A gallery page declares the pages it assumes in its docstring, just under the title::

    .. prerequisites:: 03_self_attention 04_multi_head

and the page shows "Prerequisites: <the pages' titles, linked> · Reading time: about N min".
Arguments are gallery file names without ``.py``; the option ``:assumes:`` says in words what
is not a page (the first page has ``:assumes: a PyTorch tensor and a matrix product``). An
option, not content: sphinx-gallery takes the docstring's first paragraph that is not a
directive as the page's summary, and the option stays in the directive's paragraph. The option
``:summary:`` is the page's one line in the course's outline on the landing page and on its card
in the gallery (``attention_course``); the line under the title does not show it.

The reading time is computed from the page's own script, never typed (:func:`reading_minutes`):
prose words at :data:`WORDS_PER_MINUTE` plus non-blank code lines, those of the code cells and
those a ``literalinclude`` shows, at :data:`CODE_LINES_PER_MINUTE`; hidden lines
(``sphinx_gallery_start_ignore`` ... ``end_ignore``) and configuration comments are not read
and not counted. The rule is stated in ``docs/conventions.rst``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives

#: Prose reading speed.
WORDS_PER_MINUTE = 200
#: Code reading speed: a line every three seconds.
CODE_LINES_PER_MINUTE = 20
#: Between the parts of the line.
SEPARATOR = " · "
#: The class of the line's paragraph, for the site's stylesheet.
LINE_CLASS = "attention-prerequisites"

_LITERALINCLUDE = re.compile(r"^(?P<indent>[ \t]*)\.\. literalinclude::[ \t]*(?P<arg>\S+)[ \t]*$")
_OPTION = re.compile(r"^[ \t]+:(?P<name>[^:\s][^:]*):(?P<value>.*)$")
_DIRECTIVE_OR_COMMENT = re.compile(r"^[ \t]*\.\.([ \t]|$)")
_ROLE = re.compile(r":[\w:-]+:`(?P<content>[^`]*)`")
# A word: letters and digits, with apostrophes, dots and underscores inside (``It's``, ``e.g``,
# ``attention.causal_mask`` are one word each).
_WORD = re.compile(r"\w+(?:['’.\-]\w+)*")


def script_blocks(path: str | Path, gallery_conf: Mapping, *, hidden: bool = False) -> list:
    """The blocks of a gallery script as a reader gets them: sphinx-gallery's blocks without
    hidden lines (with them, between their markers, when ``hidden``), and without
    configuration comments when the gallery removes them."""
    from sphinx_gallery import py_source_parser
    from sphinx_gallery.py_source_parser import Block

    _, blocks = py_source_parser.split_code_and_text_blocks(str(path))
    if hidden:
        blocks = [
            Block(kind, piece, lineno + offset)
            for label, content, lineno in blocks
            for kind, piece, offset in (
                hidden_pieces(content) if label == "code" else [(label, content, 0)]
            )
        ]
    else:
        blocks = [
            Block(label, py_source_parser.remove_ignore_blocks(content), lineno)
            for label, content, lineno in blocks
        ]
    if gallery_conf.get("remove_config_comments"):
        blocks = [
            Block(label, py_source_parser.remove_config_comments(content), lineno)
            for label, content, lineno in blocks
        ]
    if blocks and blocks[-1].content.isspace():
        blocks = blocks[:-1]
    return blocks


_START_HIDDEN = re.compile(r"^(?P<indent>[ \t]*)#\s*sphinx_gallery_start_ignore\s*$")
_END_HIDDEN = re.compile(r"^[ \t]*#\s*sphinx_gallery_end_ignore\s*$")


def hidden_pieces(code: str) -> list[tuple[str, str, int]]:
    r"""``code`` cut at its hidden lines: ``("code", piece, line offset)`` for what the page
    shows and ``("hidden", piece, line offset)`` for each hidden block, without its markers. A
    hidden block inside an indented one (a loop's body) cannot stand alone: it stays in its
    piece, unmarked.

    >>> code = "a = 1\n# sphinx_gallery_start_ignore\nassert a\n# sphinx_gallery_end_ignore\n"
    >>> hidden_pieces(code)
    [('code', 'a = 1\n', 0), ('hidden', 'assert a\n', 2)]
    """
    pieces: list[tuple[str, str, int]] = []
    current: list[str] = []
    kind, start = "code", 0
    for i, line in enumerate(code.splitlines(keepends=True)):
        opening = _START_HIDDEN.match(line)
        if opening and not opening.group("indent") and kind == "code":
            if "".join(current).strip():
                pieces.append((kind, "".join(current), start))
            current, kind, start = [], "hidden", i + 1
        elif _END_HIDDEN.match(line) and kind == "hidden":
            if "".join(current).strip():
                pieces.append((kind, "".join(current), start))
            current, kind, start = [], "code", i + 1
        elif not (opening or _END_HIDDEN.match(line)):
            current.append(line)
    if "".join(current).strip():
        pieces.append((kind, "".join(current), start))
    return pieces


def _literalincludes(text: str) -> tuple[list[tuple[str, dict[str, str]]], str]:
    """The ``(argument, options)`` of each literalinclude in ``text``, and ``text`` without
    the directives' own lines."""
    includes = []
    kept = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _LITERALINCLUDE.match(lines[i])
        if not match:
            kept.append(lines[i])
            i += 1
            continue
        options = {}
        i += 1
        while i < len(lines) and (option := _OPTION.match(lines[i])):
            options[option.group("name").strip()] = option.group("value").strip()
            i += 1
        includes.append((match.group("arg"), options))
    return includes, "\n".join(kept)


def prose_words(text: str) -> int:
    """The words a reader reads in the reST ``text``: roles count as their content, and the
    lines of directives and comments (``.. name::``, ``.. note``) not at all."""
    lines = [line for line in text.split("\n") if not _DIRECTIVE_OR_COMMENT.match(line)]
    prose = _ROLE.sub(lambda m: m.group("content"), "\n".join(lines))
    return len(_WORD.findall(prose))


def code_lines(code: str) -> int:
    """The non-blank lines of ``code``."""
    return sum(1 for line in code.split("\n") if line.strip())


def reading_minutes(
    blocks: Iterable[tuple[str, str, int]], include: Callable[[str, Mapping[str, str]], str]
) -> int:
    """The minutes a page takes to read, rounded, at least 1.

    ``blocks`` are ``(label, content, lineno)`` with label ``"text"`` or ``"code"``
    (:func:`script_blocks`); ``include(argument, options)`` returns the text a
    ``literalinclude`` shows. Prose words count at :data:`WORDS_PER_MINUTE`, code lines at
    :data:`CODE_LINES_PER_MINUTE`.
    """
    words = 0
    lines = 0
    for label, content, _ in blocks:
        if label == "code":
            lines += code_lines(content)
            continue
        includes, prose = _literalincludes(content)
        words += prose_words(prose)
        lines += sum(code_lines(include(arg, options)) for arg, options in includes)
    minutes = words / WORDS_PER_MINUTE + lines / CODE_LINES_PER_MINUTE
    return max(1, math.floor(minutes + 0.5))


def page_label(docname: str, page: str, srcdir: str | Path | None = None) -> str:
    """sphinx-gallery's label of the gallery page ``page``: the page of that name in the same
    gallery as the document ``docname`` (in any part of it when ``srcdir``, the source
    directory, is given), else next to ``docname``."""
    parts = docname.split("/")
    if srcdir is not None and len(parts) > 1:
        found = sorted((Path(srcdir) / parts[0]).rglob(f"{page}.py"))
        if found:
            relative = found[0].relative_to(srcdir).with_suffix("")
            return f"sphx_glr_{'_'.join(relative.parts)}.py"
    folder = docname.rsplit("/", 1)[0] if "/" in docname else ""
    return f"sphx_glr_{folder.replace('/', '_')}_{page}.py"


def directive_options(text: str, name: str) -> dict[str, str]:
    r"""The options of the first ``.. name::`` directive in the reST ``text``, each value on one
    line (an option may continue on the lines below it, indented deeper).

    >>> text = ".. prerequisites:: 01_a\n   :summary: One line,\n      two.\n"
    >>> directive_options(text, "prerequisites")
    {'summary': 'One line, two.'}
    """
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(f".. {name}::")), None)
    if start is None:
        return {}
    options: dict[str, str] = {}
    current = None
    for line in lines[start + 1 :]:
        if not line.strip() or not line[:1].isspace():
            break
        option = _OPTION.match(line)
        if option and (current is None or _indent(line) <= current[1]):
            current = (option.group("name").strip(), _indent(line))
            options[current[0]] = option.group("value").strip()
        elif current is not None:
            options[current[0]] = f"{options[current[0]]} {line.strip()}".strip()
    return options


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def plain_text(rst: str) -> str:
    """reST inline text as plain text: roles as their content (a ``:ref:`` as its title or its
    label's page), a parenthetical citation left out, literals and emphasis unmarked.

    >>> plain_text("Layer norm :cite:p:`ba2016`, and ``x`` of :mod:`attention.data`.")
    'Layer norm, and x of attention.data.'
    >>> plain_text("As on :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py`.")
    'As on page 12.'
    """
    text = re.sub(r"\s*:cite:p:`[^`]*`", "", rst)
    # A page's own label, which a card cannot resolve, as "page N".
    text = re.sub(r":ref:`sphx_glr_\w*_(\d+)_[a-z]\w*\.py`", lambda m: f"page {int(m[1])}", text)
    role = r":[\w:-]+:`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`"
    text = re.sub(role, lambda m: m.group(1) or m.group(2), text)
    return " ".join(re.sub(r"``|\*\*?", "", text).split())


#: The line's words in a downloaded notebook, by the site's language: its label, its reading
#: time and what separates the pages (on a page, the catalogues translate the line).
LINE_WORDS = {
    "en": ("**Prerequisites:**", "Reading time: about {} min", ", "),
    "zh_CN": ("**前置知识：**", "阅读时间：约 {} 分钟", "、"),
}


class PrerequisitesDirective(Directive):
    """``.. prerequisites:: 03_self_attention 04_multi_head``: the line under a page's title."""

    optional_arguments = 20
    has_content = False
    # summary: the page's one line on the landing page and on its card (attention_course).
    option_spec = {"assumes": directives.unchanged, "summary": directives.unchanged}

    def run(self):
        env = self.state.document.settings.env
        script = Path(env.srcdir) / f"{env.docname}.py"
        if not script.is_file():
            raise self.error(
                f"prerequisites: only a gallery page can have this line; {env.docname} has no "
                f"script {script.name} next to it"
            )
        from attention_downloads import read_literalinclude

        def include(arg, options):
            _, path = env.relfn2path(arg, env.docname)
            env.note_dependency(path)
            return read_literalinclude(path, options, env.config)

        blocks = script_blocks(script, env.config.sphinx_gallery_conf)
        try:
            minutes = reading_minutes(blocks, include)
        except (OSError, ValueError) as exc:
            # A literalinclude of the page that Sphinx cannot read: said here with the page's
            # name (Sphinx says it again, with the line, where it renders the include).
            raise self.error(f"prerequisites: a literalinclude of this page fails: {exc}") from exc

        refs = [f":ref:`{page_label(env.docname, page, env.srcdir)}`" for page in self.arguments]
        note = self.options.get("assumes", "").strip()
        assumed = ", ".join([*refs, *([note] if note else [])])
        if not assumed:
            raise self.error(
                "prerequisites: name the pages this page assumes (file names without .py), "
                "or say in its option :assumes: what it assumes"
            )
        label, reading_time, _ = LINE_WORDS["en"]  # the catalogues translate the page's line
        text = f"{label} {assumed}{SEPARATOR}{reading_time.format(minutes)}"
        inline, messages = self.state.inline_text(text, self.lineno)
        paragraph = nodes.paragraph(text, "", *inline, classes=[LINE_CLASS])
        summary = self.options.get("summary", "").strip()
        if not summary:
            return [paragraph, *messages]
        # The summary as the page's description: search engines and link previews show it,
        # and a translation translates it with the page (the gallery card shows it).
        meta = nodes.meta(name="description", content=plain_text(summary))
        return [meta, paragraph, *messages]


def markdown_line(
    pages: Iterable[str],
    note: str,
    minutes: int,
    link: Callable[[str], tuple[str | None, str] | None],
    language: str = "en",
) -> str:
    """The line in Markdown, in ``language``: ``link(page)`` returns ``(title, url)`` of a
    page, or None. A page that names nothing it assumes gets its reading time alone.

    >>> markdown_line([], "", 7, lambda page: None)
    'Reading time: about 7 min'
    >>> markdown_line(["01_a"], "a matrix product", 7, lambda page: ("A", "a.html"))
    '**Prerequisites:** [A](a.html), a matrix product · Reading time: about 7 min'
    """
    parts = []
    for page in pages:
        found = link(page)
        if found is None:
            parts.append(page)
        else:
            parts.append(f"[{found[0] or page}]({found[1]})")
    if note:
        parts.append(note)
    label, reading_time, between = LINE_WORDS[language]
    if not parts:
        # Nothing to name: the reading time alone, not a label followed by nothing.
        return reading_time.format(minutes)
    return f"{label} {between.join(parts)}{SEPARATOR}{reading_time.format(minutes)}"


def setup(app):
    app.add_directive("prerequisites", PrerequisitesDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "LINE_WORDS",
    "plain_text",
    "CODE_LINES_PER_MINUTE",
    "directive_options",
    "WORDS_PER_MINUTE",
    "markdown_line",
    "page_label",
    "prose_words",
    "reading_minutes",
    "script_blocks",
]
