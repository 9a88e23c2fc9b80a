"""The course as a whole: its parts, its pages in order, what each one is about and how long it
takes. Loaded by ``conf.py`` as a Sphinx extension, after ``attention_prerequisites``.

The course is read from the gallery itself (:func:`course`), never typed twice: a part is a
folder ``gallery/<n>_<name>/`` whose ``GALLERY_HEADER.rst`` gives its title and one paragraph;
a page is a script ``NN_name.py`` in it, numbered by its file name. A page's one-line summary
is the ``:summary:`` option of its ``.. prerequisites::`` line, else the first sentence of its
introduction; its reading time is the one under its title
(:func:`attention_prerequisites.reading_minutes`).

- ``.. course-outline::`` writes the whole course on the landing page: each part with its
  paragraph and its pages, each page with its number, its title (linked), its summary and its
  minutes, and the total.
- ``.. course-start::`` writes the "Start here" link to the first page.
- ``:course:`pages``, ``:course:`parts`` and ``:course:`time`` are the number of pages, of
  parts, and the total reading time ("6 hours 50 minutes").
- ``:pages:`01_qkv_analogy 02_scaled_dot_product``` is "pages 1 and 2", linked.
- The cards of the gallery's index pages (``tutorials/index`` and each part's) carry the page's
  number, its summary and its minutes (:func:`annotate_cards`), instead of a tooltip that
  shows the whole introduction.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from attention_prerequisites import plain_text
from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

#: A page of the course: ``NN_name.py``.
PAGE_NAME = re.compile(r"^(?P<number>\d+)_\w+\.py$")
#: A part of the course: a folder ``<n>_<name>`` of the gallery.
PART_NAME = re.compile(r"^\d+_\w+$")
#: The class of the outline's container, and of the start link's paragraph.
OUTLINE_CLASS = "attention-course"
START_CLASS = "attention-start"


@dataclass
class Page:
    """One page of the course."""

    number: int
    path: Path  # the gallery script
    part: str  # its folder in the gallery ("" at the gallery's top)
    title: str
    summary: str  # reST inline text
    minutes: int

    @property
    def stem(self) -> str:
        return self.path.stem

    def docname(self, gallery_dir: str = "tutorials") -> str:
        return "/".join(p for p in (gallery_dir, self.part, self.stem) if p)

    def label(self, gallery_dir: str = "tutorials") -> str:
        """sphinx-gallery's label of the page."""
        return f"sphx_glr_{self.docname(gallery_dir).replace('/', '_')}.py"


@dataclass
class Part:
    """One part of the course: a folder of the gallery."""

    folder: str
    title: str
    description: str  # reST
    pages: list[Page] = field(default_factory=list)

    @property
    def minutes(self) -> int:
        return sum(page.minutes for page in self.pages)


# -- Reading the gallery ---------------------------------------------------------------------------


def _header(path: Path) -> tuple[str, str]:
    """The title and the first paragraph of a ``GALLERY_HEADER.rst``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    title, paragraphs, current = "", [], []
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and re.fullmatch(r"([=\-~^\"'`#*+])\1{2,}", lines[i + 1])
        if not title and line.strip() and underline:
            title = line.strip()
            continue
        if not title or re.fullmatch(r"([=\-~^\"'`#*+])\1{2,}", line) or line.startswith(".."):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return title, (paragraphs[0] if paragraphs else "")


def _docstring(path: Path) -> str:
    import ast

    module = ast.parse(path.read_text(encoding="utf-8"))
    return ast.get_docstring(module, clean=True) or ""


def title_and_summary(path: Path) -> tuple[str, str]:
    """The title of a gallery page and its one-line summary (reST): the ``:summary:`` option of
    its ``.. prerequisites::`` line, else the first sentence of its introduction."""
    from attention_prerequisites import directive_options

    lines = _docstring(path).split("\n")
    title = ""
    for i, line in enumerate(lines[:-1]):
        if line.strip() and re.fullmatch(r"([=\-~^\"'`#*+])\1{2,}", lines[i + 1].strip()):
            title = line.strip()
            body = lines[i + 2 :]
            break
    else:
        body = lines
    summary = directive_options("\n".join(body), "prerequisites").get("summary", "")
    if not summary:
        summary = first_sentence(_first_paragraph(body))
    return title, summary


def _first_paragraph(lines: list[str]) -> str:
    """The first paragraph of ``lines`` that is no directive, comment or title."""
    paragraph: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith(".."):
            skipping = True
            continue
        if skipping and (not line.strip() or line[:1].isspace()):
            continue
        skipping = False
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    return " ".join(paragraph)


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to the first full stop, question or exclamation mark
    followed by a space and a capital letter (or the end).

    >>> first_sentence("A mask decides which keys a query sees. Two masks do the work.")
    'A mask decides which keys a query sees.'
    >>> first_sentence("Attention, e.g. this. And more")
    'Attention, e.g. this.'
    """
    match = re.search(r"[.?!](?=\s+[A-Z(*`:]|\s*$)", text)
    return text[: match.end()] if match else text


def course(gallery: Path, minutes: Callable[[Path], int] = lambda path: 0) -> list[Part]:
    """The course in ``gallery`` (the ``gallery/`` folder): its parts in folder order, each
    with its pages in file-name order; pages at the top of the gallery come last, in a part
    of their own. ``minutes(path)`` is a page's reading time."""
    parts = []
    folders = sorted(p for p in gallery.iterdir() if p.is_dir() and PART_NAME.match(p.name))
    for folder in [*folders, gallery]:
        scripts = sorted(p for p in folder.glob("*.py") if PAGE_NAME.match(p.name))
        if not scripts:
            continue
        header = folder / "GALLERY_HEADER.rst"
        if folder == gallery:
            title, description = "More tutorials", ""
        else:
            title, description = _header(header) if header.is_file() else (folder.name, "")
        part = Part("" if folder == gallery else folder.name, title, description)
        for script in scripts:
            page_title, summary = title_and_summary(script)
            part.pages.append(
                Page(
                    number=int(PAGE_NAME.match(script.name).group("number")),
                    path=script,
                    part=part.folder,
                    title=page_title,
                    summary=summary,
                    minutes=minutes(script),
                )
            )
        parts.append(part)
    return parts


def pages_of(parts: list[Part]) -> list[Page]:
    return [page for part in parts for page in part.pages]


def duration(minutes: int, language: str = "en") -> str:
    """A reading time in words, in English or in Chinese (the Chinese edition).

    >>> duration(45), duration(60), duration(412)
    ('45 minutes', '1 hour', '6 hours 52 minutes')
    >>> duration(412, "zh_CN")
    '6 小时 52 分钟'
    """
    hours, rest = divmod(minutes, 60)
    words = []
    if language == "zh_CN":
        hours_text = [f"{hours} 小时"] if hours else []
        return " ".join([*hours_text, *([f"{rest} 分钟"] if rest or not hours else [])])
    if hours:
        words.append(f"{hours} hour{'s' if hours > 1 else ''}")
    if rest or not hours:
        words.append(f"{rest} minute{'s' if rest != 1 else ''}")
    return " ".join(words)


_NUMBERS = "zero one two three four five six seven eight nine ten".split()


def in_words(n: int, language: str = "en") -> str:
    """A count in words, as English writes a small one ("five"); Chinese writes "5"."""
    if language != "en":
        return str(n)
    return _NUMBERS[n] if 0 <= n < len(_NUMBERS) else str(n)


#: How :func:`pages_role` joins page numbers: (one page, several pages, "," , "and", after).
PAGE_WORDS = {
    "en": ("page ", "pages ", ", ", " and ", ""),
    "zh_CN": ("第 ", "第 ", "、", " 和 ", " 页"),
}


# -- The course of this build ----------------------------------------------------------------------


def _gallery_dirs(config) -> tuple[Path, str]:
    conf = config.sphinx_gallery_conf
    examples = conf["examples_dirs"]
    gallery = conf["gallery_dirs"]
    examples = examples[0] if isinstance(examples, list) else examples
    gallery = gallery[0] if isinstance(gallery, list) else gallery
    return Path(examples), gallery


def build_course(env) -> tuple[list[Part], str]:
    """The course of this build, its reading times computed as each page's line computes
    them; and the gallery's output folder (``tutorials``)."""
    # attention_root: the checkout (conf.py), whose package the excerpts show.
    from attention_downloads import read_literalinclude
    from attention_prerequisites import reading_minutes, script_blocks

    examples, gallery_dir = _gallery_dirs(env.config)
    gallery = (Path(env.srcdir) / examples).resolve()
    # Computed once per build (the outline, the roles and every card ask for it), again when a
    # page or the package changed; each document that asks depends on every page.
    package = Path(env.config.attention_root or env.srcdir) / "attention"
    files = sorted([*gallery.rglob("*.py"), *gallery.rglob("*.rst"), *package.rglob("*.py")])
    key = tuple((str(f), f.stat().st_mtime_ns) for f in files)
    for script in gallery.rglob("*.py"):
        env.note_dependency(str(script))
    cached = getattr(env, "_attention_course", None)
    if cached is not None and cached[0] == key:
        return cached[1], gallery_dir

    def minutes(script: Path) -> int:
        # literalinclude paths are relative to the rendered page, docs/<gallery_dir>/<part>/.
        rendered = Path(env.srcdir) / gallery_dir / script.parent.relative_to(gallery)

        def include(arg, options):
            path = (rendered / arg).resolve()
            return read_literalinclude(path, options, env.config)

        # The copy sphinx-gallery ran and renders, from which the page's own line reads its
        # time (attention_prerequisites), so that both say the same while a page is edited.
        copy = rendered / script.name
        source = copy if copy.is_file() else script
        try:
            return reading_minutes(script_blocks(source, env.config.sphinx_gallery_conf), include)
        except (OSError, ValueError):
            return 0  # the page's own line says why (attention_prerequisites)

    parts = course(gallery, minutes)
    env._attention_course = (key, parts)
    return parts, gallery_dir


# -- Directives and role ---------------------------------------------------------------------------


def outline_rst(parts: list[Part], gallery_dir: str) -> list[str]:
    """The reST of the outline: per part, its title and paragraph, then its pages."""
    lines: list[str] = []
    for part in parts:
        count = len(part.pages)
        anchor = f"sphx_glr_{gallery_dir}_{part.folder}" if part.folder else None
        heading = f":ref:`{part.title} <{anchor}>`" if anchor else part.title
        lines += [
            f".. rubric:: {heading}",
            "   :class: attention-part-title",
            "",
            f"{part.description} ({count} page{'s' if count != 1 else ''}, about "
            f"{duration(part.minutes)})".strip(),
            "",
            ".. rst-class:: attention-course-pages",
            "",
        ]
        # A list whose items carry their page's number (a page's number is its file name's,
        # whatever the list's order), not an enumerated list that counts.
        for page in part.pages:
            lines.append(
                f"- {page.number}\\. :ref:`{page.label(gallery_dir)}`: {page.summary} "
                f"*({page.minutes}\u00a0min)*"  # a no-break space: "(29 min)" on one line
            )
        lines.append("")
    return lines


class CourseOutline(Directive):
    """``.. course-outline::``: the parts and pages of the course, with their times."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        parts, gallery_dir = build_course(env)
        total = sum(part.minutes for part in parts)
        pages = pages_of(parts)
        text = [
            f"{len(pages)} pages in {in_words(len([p for p in parts if p.folder]))} parts, "
            f"about {duration(total)} of reading in all; each page says its own time under "
            "its title.",
            "",
            *outline_rst(parts, gallery_dir),
        ]
        container = nodes.container(classes=[OUTLINE_CLASS])
        self.state.nested_parse(StringList(text, source="course-outline"), 0, container)
        return [container]


class CourseStart(Directive):
    """``.. course-start::``: "Start here" and a link to the course's first page."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        parts, gallery_dir = build_course(env)
        pages = pages_of(parts)
        if not pages:
            raise self.error("course-start: the gallery has no page NN_name.py")
        first = pages[0]
        text = [
            f":ref:`Start here: {first.number}. {first.title} "
            f"<{first.label(gallery_dir)}>` *({first.minutes} min)*"
        ]
        # Its reST as its raw source: the message a translation replaces, link included.
        paragraph = nodes.paragraph(text[0], classes=[START_CLASS])
        inline, messages = self.state.inline_text(text[0], self.lineno)
        paragraph += inline
        return [paragraph, *messages]


def course_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:course:`pages``` (how many), ``:course:`parts``` (how many, in words),
    ``:course:`time``` (the total reading time)."""
    env = inliner.document.settings.env
    language = env.config.language
    parts, _ = build_course(env)
    values = {
        "pages": str(len(pages_of(parts))),
        "parts": in_words(len([p for p in parts if p.folder]), language),
        "time": duration(sum(part.minutes for part in parts), language),
    }
    if text not in values:
        message = inliner.reporter.error(
            f"course: unknown value {text!r}; use one of {sorted(values)}", line=lineno
        )
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    return [nodes.Text(values[text])], []


def pages_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:pages:`01_qkv_analogy 02_scaled_dot_product``` is "pages 1 and 2", each number a
    link to its page (titled with the page's title). A name that is no page of the gallery yet
    shows as "page NN (coming)", unlinked, and the build log says so."""
    from sphinx import addnodes
    from sphinx.util import logging

    env = inliner.document.settings.env
    parts, gallery_dir = build_course(env)
    by_stem = {page.stem: page for page in pages_of(parts)}
    stems = text.split()
    one, several, comma, last, after = PAGE_WORDS.get(env.config.language, PAGE_WORDS["en"])
    out: list[nodes.Node] = [nodes.Text(one if len(stems) == 1 else several)]
    for k, stem in enumerate(stems):
        if k:
            out.append(nodes.Text(last if k == len(stems) - 1 else comma))
        page = by_stem.get(stem)
        if page is None:
            number = re.match(r"\d+", stem)
            logging.getLogger(__name__).info(
                f"pages: {stem} is no page of the gallery yet", location=(env.docname, lineno)
            )
            out.append(nodes.Text(f"{int(number.group()) if number else stem} (coming)"))
            continue
        xref = addnodes.pending_xref(
            "",
            refdomain="std",
            reftype="ref",
            reftarget=page.label(gallery_dir).lower(),
            refexplicit=True,
            refwarn=True,
        )
        xref += nodes.inline(str(page.number), str(page.number), classes=["attention-page-number"])
        xref["reftitle"] = page.title
        out.append(xref)
    if after:
        out.append(nodes.Text(after))
    return out, []


# -- The gallery's cards ---------------------------------------------------------------------------

_CARD = re.compile(
    r'(?P<open><div class="sphx-glr-thumbcontainer" (?P<tags>[^>]*?)tooltip="[^"]*">)'
    r"(?P<middle>.*?:doc:`/(?P<doc>[^`]+)`.*?)"
    r'(?P<title><div class="sphx-glr-thumbnail-title">)(?P<text>.*?)(?P<close></div>)',
    flags=re.DOTALL,
)


def annotate_cards(
    text: str,
    pages: dict[str, Page],
    translate: Callable[[Page, str], str] | None = None,
    minutes: str = "{} min",
) -> str:
    """The reST of a gallery index with each card of a course page numbered and summarised:
    ``pages`` maps a page's docname to it. The tooltip, the page's whole introduction shown
    over the card, gives way to the summary shown on it. In a translated build,
    ``translate(page, text)`` gives a message of the page (its summary, its title) in the
    build's language, and ``minutes`` the reading time's words: the card's visible title is
    the translated one (sphinx-gallery writes the English title there, as raw HTML that no
    catalogue reaches)."""

    def card(match: re.Match) -> str:
        page = pages.get(match.group("doc"))
        if page is None:
            return match.group(0)
        summary = plain_text(page.summary)
        summary = html.escape(translate(page, summary) if translate else summary, quote=True)
        title = match.group("text")
        if translate:
            title = html.escape(plain_text(translate(page, page.title)), quote=False)
        return (
            f'<div class="sphx-glr-thumbcontainer attention-card" {match.group("tags")}>'
            f"{match.group('middle')}{match.group('title')}"
            f'<span class="attention-card-number">{page.number}</span> {title}'
            f"{match.group('close')}\n"
            f'      <div class="attention-card-summary">{summary}</div>\n'
            f'      <div class="attention-card-time">{minutes.format(page.minutes)}</div>'
        )

    return _CARD.sub(card, text)


def _on_source_read(app, docname, source) -> None:
    examples, gallery_dir = _gallery_dirs(app.config)
    index = docname == f"{gallery_dir}/index"
    if not (index or re.fullmatch(rf"{gallery_dir}/[^/]+/index", docname)):
        return
    parts, _ = build_course(app.env)
    pages = {page.docname(gallery_dir): page for page in pages_of(parts)}
    language = app.config.language
    if language == "en":
        source[0] = annotate_cards(source[0], pages)
        return
    import attention_i18n

    def translate(page: Page, text: str) -> str:
        # The page's catalogue has its title and its summary (the description it gives itself).
        return attention_i18n.page_messages(app, page.docname(gallery_dir)).get(text, text)

    source[0] = annotate_cards(source[0], pages, translate, attention_i18n.MINUTES[language])


def setup(app):
    app.setup_extension("attention_prerequisites")
    app.setup_extension("attention_tutorials")  # its attention_root: the checkout
    app.add_directive("course-outline", CourseOutline)
    app.add_directive("course-start", CourseStart)
    app.add_role("course", course_role)
    app.add_role("pages", pages_role)
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "Page",
    "Part",
    "annotate_cards",
    "course",
    "duration",
    "first_sentence",
    "outline_rst",
    "title_and_summary",
]
