"""The Chinese edition (简体中文): the same pages, translated through Sphinx's own gettext
catalogues. Loaded by ``conf.py`` as a Sphinx extension.

- ``ATTENTION_LANGUAGE`` picks the build's language (:func:`build_language`): ``en``, the
  default, or ``zh_CN``. ``make html`` builds English into ``build/html``, running the examples,
  then Chinese into ``build/html/zh_CN`` (:data:`SUBDIR`), which runs none: sphinx-gallery finds
  every script unchanged since the English build and reuses the pages, outputs and figures that
  build wrote into ``docs/tutorials`` (:func:`gallery_overrides`).
- The catalogues: ``locale/zh_CN/LC_MESSAGES/<page>.po``, one per page (``make gettext``
  updates them from the sources). Translated: every page's prose, headings, captions,
  exercises and solutions. Not translated, by design: code, code comments, printed output,
  figure labels, the API reference (its docstrings) and the build's table of computation
  times; their pages are built in the Chinese site too, in English (:data:`UNTRANSLATED`).
- Every page carries a language switch (``docs/_templates/sidebar/language.html``) to the same
  page in the other language (:func:`language_links`), and declares its language in BCP 47
  (``<html lang="zh-CN">``). Its head names the page in every language, at the site's address,
  for search engines (``<link rel="alternate" hreflang="...">``, :func:`alternate_links`), the
  English one as the default for a reader of any other language.
- A Chinese page's notebook carries the translated prose in its Markdown cells
  (:func:`rst_translator`, used by ``attention_downloads``); its code cells are the English
  page's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

#: The languages of the site: Sphinx's language code and the name its switch shows.
LANGUAGES = {"en": "English", "zh_CN": "简体中文"}
#: Where each language sits under the English site's root.
SUBDIR = {"en": "", "zh_CN": "zh_CN/"}
#: The glossary of the translation's terms: English, 中文, and whether the tests check that a
#: message naming the English term uses the Chinese one.
GLOSSARY = "locale/zh_CN/glossary.csv"
#: The documents whose catalogues are not kept: the API reference (docstrings stay in English)
#: and the build's table of computation times (numbers that change with every build).
UNTRANSLATED = re.compile(r"^(api|generated/.*)$|(^|/)sg_execution_times$")


def build_language(environ: Mapping[str, str] = os.environ) -> str:
    """The language of this build: ``ATTENTION_LANGUAGE``, ``en`` when it is not set."""
    language = environ.get("ATTENTION_LANGUAGE") or "en"
    if language not in LANGUAGES:
        raise ValueError(
            f"ATTENTION_LANGUAGE: expected one of {', '.join(LANGUAGES)}, got {language!r}"
        )
    return language


def bcp47(language: str) -> str:
    """``zh_CN`` -> ``zh-CN``: the form of an HTML ``lang`` attribute."""
    return language.replace("_", "-")


def read_the_docs_roots(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """On Read the Docs, the address of each language's site, else None.

    There the Chinese edition is a project of its own, a translation of the English one, served
    beside it under its language code: ``https://<project>.readthedocs.io/zh-cn/latest/`` next
    to ``.../en/latest/``. Each build knows its own address (``READTHEDOCS_CANONICAL_URL``) and
    language (``READTHEDOCS_LANGUAGE``); the other address swaps the language code.
    """
    url = environ.get("READTHEDOCS_CANONICAL_URL")
    language = (environ.get("READTHEDOCS_LANGUAGE") or "").lower().replace("_", "-")
    codes = {code: code.lower().replace("_", "-") for code in LANGUAGES}
    if not url or language not in codes.values():
        return None
    head, sep, tail = url.rstrip("/").partition(f"/{language}/")
    if not sep:
        return None
    return {code: f"{head}/{rtd}/{tail}/" for code, rtd in codes.items()}


def site_root(language: str, english_root: str, environ: Mapping[str, str] = os.environ) -> str:
    """The address of the ``language`` site: on Read the Docs its own project's, elsewhere
    ``english_root`` (the English site's address) and the language's folder under it."""
    roots = read_the_docs_roots(environ)
    return roots[language] if roots else english_root + SUBDIR[language]


def language_links(
    pagename: str, language: str, environ: Mapping[str, str] = os.environ
) -> list[tuple[str, str, str, bool]]:
    """``(code, name, url, current)`` of every language, each ``url`` to ``pagename`` in that
    language: relative to the page ``pagename`` of the ``language`` build, or on Read the
    Docs the other project's address."""
    roots = read_the_docs_roots(environ)
    up = "../" * (pagename.count("/") + SUBDIR[language].count("/"))
    return [
        (
            bcp47(code),
            name,
            f"{roots[code] if roots else up + SUBDIR[code]}{pagename}.html",
            code == language,
        )
        for code, name in LANGUAGES.items()
    ]


def alternate_links(
    pagename: str, english_root: str, environ: Mapping[str, str] = os.environ
) -> list[tuple[str, str]]:
    """``(hreflang, url)`` of ``pagename`` in every language, and ``x-default`` (the English
    page), each at its site's address: ``english_root`` and the language's folder under it, or
    on Read the Docs each language's project.

    >>> alternate_links("tutorials/a", "https://h/", environ={})
    [('en', 'https://h/tutorials/a.html'), ('zh-CN', 'https://h/zh_CN/tutorials/a.html'), \
('x-default', 'https://h/tutorials/a.html')]
    """
    roots = read_the_docs_roots(environ) or {
        code: english_root + SUBDIR[code] for code in LANGUAGES
    }
    links = [(bcp47(code), f"{roots[code]}{pagename}.html") for code in LANGUAGES]
    return [*links, ("x-default", f"{roots['en']}{pagename}.html")]


def _english_root(app) -> str:
    """The English site's address, from this build's (``html_baseurl``, conf.py's
    ``attention_site_url``: the English one and this language's folder under it)."""
    root = app.config.html_baseurl
    folder = SUBDIR[app.config.language]
    return root[: -len(folder)] if folder and root.endswith(folder) else root


def gallery_overrides(language: str, environ: Mapping[str, str] = os.environ) -> dict:
    """sphinx-gallery settings for a build that runs no example: a translated build, which
    reuses the pages the English build left in ``docs/tutorials``, and the extraction of the
    messages (``ATTENTION_RUN_EXAMPLES=0``, ``make gettext``), which needs only their prose.
    Neither writes the English build's JUnit report."""
    if language == "en" and environ.get("ATTENTION_RUN_EXAMPLES", "1") != "0":
        return {}
    return {"filename_pattern": r"^$", "run_stale_examples": False, "junit": ""}


# -- Translating reST text (the notebooks) ---------------------------------------------------

_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+<>:._])\1+\s*$")
_ITEM = re.compile(r"^(?P<bullet>[-*+]\s+|\d+\.\s+|#\.\s+)")


def load_messages(po_path: Path) -> dict[str, str]:
    """The translated, non-fuzzy messages of the catalogue ``po_path`` (empty when missing)."""
    import polib

    if not po_path.is_file():
        return {}
    return {
        entry.msgid: entry.msgstr
        for entry in polib.pofile(str(po_path))
        if entry.msgstr and not entry.fuzzy and not entry.obsolete
    }


def translate_rst(text: str, messages: Mapping[str, str]) -> str:
    """The reST ``text`` with each paragraph, list item and title that ``messages`` translates
    replaced by its translation, the way Sphinx matches them: a paragraph's lines joined by
    spaces. Directives, code and anything without a translation stay as they are."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        out.extend(_translate_run(lines[i:j], messages))
        i = j
    return "\n".join(out)


def _translate_run(run: list[str], messages: Mapping[str, str]) -> list[str]:
    indent = min(len(line) - len(line.lstrip()) for line in run)
    body = [line[indent:] for line in run]
    pad = " " * indent
    if len(body) == 2 and _UNDERLINE.match(body[1]) and len(body[1].strip()) >= len(body[0]):
        title = messages.get(body[0].strip())
        if title is None:
            return run
        # A title's underline at least as wide as its text (CJK characters count twice).
        width = max(len(body[1].strip()), 2 * len(title))
        return [pad + title, pad + body[1].strip()[0] * width]
    if body[0].startswith(".. ") or body[0].startswith("::"):
        return run
    starts = [k for k, line in enumerate(body) if _ITEM.match(line)]
    if starts and starts[0] == 0 and len(starts) > 1:
        # A list without blank lines between its items: Sphinx's messages are the items, each
        # its lines joined (an item goes on on lines indented under its text).
        out = []
        for a, b in zip(starts, [*starts[1:], len(body)], strict=True):
            out.extend(_translate_run([pad + line for line in body[a:b]], messages))
        return out
    item = _ITEM.match(body[0])
    prefix = item.group(0) if item else ""
    msgid = " ".join([body[0][len(prefix) :].strip(), *(line.strip() for line in body[1:])])
    translation = messages.get(msgid.strip())
    if translation is None:
        return run
    return [pad + prefix + translation]


#: A reading time in minutes, in each language (the gallery's cards).
MINUTES = {"en": "{} min", "zh_CN": "{} 分钟"}


def page_messages(app, docname: str) -> dict[str, str]:
    """The translated messages of the page ``docname`` in this build's language."""
    (locale_dir,) = app.config.locale_dirs
    po = Path(app.confdir, locale_dir) / app.config.language / "LC_MESSAGES" / f"{docname}.po"
    return load_messages(po)


def rst_translator(app, docname: str) -> Callable[[str], str] | None:
    """A function that translates the reST of the page ``docname`` for this build's language,
    or None in the English build."""
    language = app.config.language
    if language == "en" or not language:
        return None
    messages = page_messages(app, docname)
    return lambda text: translate_rst(text, messages)


# -- The catalogues ----------------------------------------------------------------------------


def prune(pot_dir: Path) -> list[Path]:
    """Remove the templates (``.pot``) of the documents in :data:`UNTRANSLATED` from
    ``pot_dir``, the gettext builder's output, before ``sphinx-intl update`` makes catalogues
    of the rest; returns what it removed."""
    removed = []
    for pot in sorted(pot_dir.rglob("*.pot")):
        if UNTRANSLATED.search(pot.relative_to(pot_dir).with_suffix("").as_posix()):
            pot.unlink()
            removed.append(pot)
    return removed


#: Inline reST markup whose content a translation keeps as it is: roles (``:func:`x```, the
#: target of ``:ref:`text <label>```), inline literals and hyperlink targets.
_ROLE = re.compile(r":(?P<name>[\w.+-]+(?::[\w.+-]+)*):`(?P<content>[^`]+)`")
_LITERAL = re.compile(r"``(?P<content>.+?)``")
_LINK = re.compile(r"`[^`<]*<(?P<target>[^>]+)>`__?")
#: Any inline markup, for the spaces around it: a role, a literal, a strong or emphasised
#: span, a link.
_MARKUP = re.compile(
    r":[\w.+-]+(?::[\w.+-]+)*:`[^`]+`|``.+?``|`[^`]+`__?|\*\*[^*]+\*\*|(?<![\w*])\*[^*\s][^*]*\*"
)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _kept(text: str) -> list[str]:
    """What a translation of ``text`` must keep: its roles (a cross-reference's target, not its
    text), inline literals and link targets, sorted."""
    kept = []
    for m in _ROLE.finditer(text):
        content = m["content"]
        target = re.search(r"<([^>]+)>\s*$", content)
        kept.append(f":{m['name']}:{target.group(1) if target else content}")
    without_roles = _ROLE.sub(" ", text)
    kept += [f"``{m['content']}``" for m in _LITERAL.finditer(without_roles)]
    kept += [f"<{m['target']}>" for m in _LINK.finditer(_LITERAL.sub(" ", without_roles))]
    return sorted(kept)


def _delimited(text: str, start: int, end: int) -> bool:
    """Whether the markup at ``text[start:end]`` is delimited as reST needs: before it a space,
    the text's edge or an opening, dash or other punctuation mark (Unicode Ps, Pi, Pf, Pd, Po:
    not a closing one, such as "）"); after it a space, the edge or a closing, dash or other
    mark (Pe, Pi, Pf, Pd, Po: not an opening one, such as "（"). A CJK character is neither.
    """
    import unicodedata

    def ok(char: str, allowed: tuple[str, ...]) -> bool:
        return char.isspace() or unicodedata.category(char) in allowed or char == "\\"

    before = ("Ps", "Pi", "Pf", "Pd", "Po")
    after = ("Pe", "Pi", "Pf", "Pd", "Po")
    return (start == 0 or ok(text[start - 1], before)) and (
        end == len(text) or ok(text[end], after)
    )


def check_translation(msgid: str, msgstr: str) -> list[str]:
    """What is wrong with ``msgstr`` as the translation of ``msgid``: markup lost or changed,
    markup glued to a CJK character (reST then shows it as plain text), a prose message left
    without any Chinese. Empty when nothing is."""
    problems = []
    if _kept(msgid) != _kept(msgstr):
        lost = sorted(set(_kept(msgid)) - set(_kept(msgstr)))
        added = sorted(set(_kept(msgstr)) - set(_kept(msgid)))
        problems.append(f"markup changed: lost {lost}, added {added}")
    for m in _MARKUP.finditer(msgstr):
        if not _delimited(msgstr, m.start(), m.end()):
            problems.append(f"markup {m.group(0)!r} needs a space or punctuation on each side")
    # A display formula (a ``.. math::`` block's body) has no prose: it stays as it is.
    formula = msgstr == msgid and re.search(r"\\[A-Za-z]+", msgid)
    prose = _MARKUP.sub(" ", msgid)
    if len(re.findall(r"[A-Za-z]{2,}", prose)) >= 3 and not _CJK.search(msgstr) and not formula:
        problems.append("no Chinese in the translation of a sentence")
    return problems


# -- Sphinx ------------------------------------------------------------------------------------


class GlossaryDirective(Directive):
    """``.. language-glossary::``: the table of :data:`GLOSSARY`, English and Chinese. Its cells
    are data, not prose: they are not messages to translate."""

    has_content = False

    def run(self):
        import csv

        path = Path(self.state.document.settings.env.app.confdir) / GLOSSARY
        self.state.document.settings.env.note_dependency(str(path))
        with path.open(encoding="utf-8") as f:
            rows = [(row["English"], row["中文"]) for row in csv.DictReader(f)]
        table = nodes.table(classes=["attention-glossary"])
        group = nodes.tgroup(cols=2)
        table += group
        group += [nodes.colspec(colwidth=1), nodes.colspec(colwidth=1)]

        def row_of(cells, lang=("en", "zh-CN")):
            row = nodes.row()
            for text, code in zip(cells, lang, strict=True):
                paragraph = nodes.paragraph(text, text, translatable=False)
                row += nodes.entry("", paragraph, lang=code)
            return row

        group += nodes.thead("", row_of(("English", "中文")))
        group += nodes.tbody("", *(row_of(row) for row in rows))
        return [table]


#: The lines sphinx-gallery writes under a page's output, which change with every build: they
#: are no messages (a catalogue could never hold them), and the Chinese build writes them in
#: Chinese itself. Each: (pattern of the English line, its label and value in Chinese).
BUILD_NOTES = (
    (
        re.compile(r"^Total running time of the script: ?\((\d+) minutes ([\d.]+) seconds\)$"),
        "脚本总运行时间：",
        "{0} 分 {1} 秒",
    ),
    (re.compile(r"^Estimated memory usage: +(\d+) MB$"), "估计内存用量：", "{0} MB"),
)


def _build_notes_transform():
    from sphinx.transforms import SphinxTransform

    class BuildNotes(SphinxTransform):
        """Take sphinx-gallery's per-build lines out of the messages (before Sphinx's Locale
        transform, 20, looks for their translation), in Chinese in that build."""

        default_priority = 15

        def apply(self, **kwargs) -> None:
            for paragraph in self.document.findall(nodes.paragraph):
                text = " ".join(paragraph.astext().split())
                for pattern, label, value in BUILD_NOTES:
                    match = pattern.match(text)
                    if not match:
                        continue
                    paragraph["translatable"] = False
                    if self.config.language == "zh_CN":
                        paragraph.children = []
                        value = value.format(*match.groups())
                        paragraph += [nodes.strong(label, label), nodes.Text(value)]

    return BuildNotes


def _toctree_translated(toctree) -> bool:
    """Whether Sphinx's Locale transform translated each explicit title of ``toctree`` and its
    caption (each is a message: ``API reference <api>``)."""
    titles = {title for title, _ in toctree["entries"] if title}
    caption = toctree.get("rawcaption")
    return not any(raw in titles for raw in toctree.get("rawentries", [])) and (
        not caption or toctree.get("caption") != caption
    )


def _untranslated_transform():
    from sphinx import addnodes
    from sphinx.transforms import SphinxTransform
    from sphinx.util import logging

    logger = logging.getLogger(__name__)

    class RefuseUntranslated(SphinxTransform):
        """In a translated build, every message of a translated page has its translation: one
        without (new, changed, or only fuzzy in the catalogue) is a warning, which fails the
        build (-W). Runs after Sphinx's Locale transform (20), which marks each message node
        ``translated`` or not, and counts them for :data:`REPORT`."""

        default_priority = 26

        def apply(self, **kwargs) -> None:
            if self.config.language == "en" or UNTRANSLATED.search(self.env.docname):
                return
            total, missing = 0, []
            for node in self.document.findall(nodes.Element):
                if "translated" not in node:
                    continue
                if isinstance(node, nodes.image):
                    # Sphinx marks a translated image untranslated (its picture is kept):
                    # its alternative text says whether it was.
                    node["translated"] = bool(_CJK.search(node.get("alt", "")))
                if isinstance(node, addnodes.toctree):
                    # Sphinx translates a toctree's titles and caption but never marks it
                    # translated: its entries say whether each title was.
                    node["translated"] = _toctree_translated(node)
                total += 1
                if not node["translated"]:
                    missing.append(" ".join(node.astext().split())[:120])
                    logger.warning(
                        f"untranslated message (run `make gettext`, then translate it in "
                        f"locale/{self.config.language}/LC_MESSAGES/{self.env.docname}.po): "
                        f"{missing[-1]!r}",
                        location=node,
                        type="attention",
                        subtype="untranslated",
                    )
            counts = getattr(self.env, "attention_translation", {})
            counts[self.env.docname] = {"messages": total, "untranslated": missing}
            self.env.attention_translation = counts

    return RefuseUntranslated


#: Where a translated build writes how many messages each page has and which are untranslated:
#: in the build folder, beside the site (``build/translation-zh_CN.json``).
REPORT = "translation-{language}.json"


def _write_report(app, exception) -> None:
    if exception is not None or app.config.language == "en":
        return
    import json

    counts = getattr(app.env, "attention_translation", {})
    # build/html/zh_CN -> build/
    path = Path(app.outdir).parent.parent / REPORT.format(language=app.config.language)
    path.write_text(json.dumps(dict(sorted(counts.items())), indent=1, ensure_ascii=False))


# -- Chinese search ----------------------------------------------------------------------------

#: The course's words that the Chinese search keeps whole besides the glossary's terms, one a
#: line (the glossary page does not list them: they are no translation of a term).
SEARCH_WORDS = "locale/zh_CN/search_words.txt"
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def search_words(confdir: Path) -> list[str]:
    """The words the Chinese search indexes whole and finds in a query: each Chinese term of
    the glossary (both sides of one written with a hyphen or a slash, 编码器-解码器) and each
    line of :data:`SEARCH_WORDS`. Terms with other characters (在线 softmax, 查询、键和值)
    are not words: their Chinese words are there on their own."""
    import csv

    with (confdir / GLOSSARY).open(encoding="utf-8") as f:
        terms = [row["中文"] for row in csv.DictReader(f)]
    extra = (confdir / SEARCH_WORDS).read_text(encoding="utf-8").split("\n")
    words = {
        piece
        for term in [*terms, *extra]
        for piece in re.split(r"[-/\s]+", term.strip())
        if _HAN.fullmatch(piece)
    }
    return sorted(words, key=lambda w: (-len(w), w))


def search_dictionary(confdir: Path, path: Path) -> str:
    """Write :func:`search_words` to ``path`` as a jieba user dictionary (one word a line:
    jieba gives each the frequency that keeps it whole) for ``html_search_options``; returns
    the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(search_words(confdir)) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return str(path)


#: The browser's splitter of a query (Sphinx's ``splitQuery``), for the Chinese search: the
#: Latin words as Sphinx splits them, and each run of Chinese characters cut into the longest
#: words of the search's dictionary, the rest of a run kept as one word.
SPLITTER_JS = """\
/* The Chinese search's query splitter (docs/_ext/attention_i18n.py): a query is cut into the
   words the index holds, the dictionary's longest first. */
var ZH_SEARCH_WORDS = new Set(%(words)s);
var ZH_SEARCH_LONGEST = %(longest)d;
var splitQuery = (query) => {
  const terms = [];
  const tokens = query.split(/[^\\p{Letter}\\p{Number}_\\p{Emoji_Presentation}]+/gu);
  for (const token of tokens.filter((t) => t)) {
    for (const run of token.match(/\\p{Script=Han}+|\\P{Script=Han}+/gu)) {
      if (!/\\p{Script=Han}/u.test(run)) {
        terms.push(run);
        continue;
      }
      let rest = "";
      for (let i = 0; i < run.length; ) {
        let n = Math.min(ZH_SEARCH_LONGEST, run.length - i);
        while (n > 0 && !ZH_SEARCH_WORDS.has(run.substr(i, n))) n--;
        if (n === 0) {
          rest += run[i];
          i += 1;
          continue;
        }
        if (rest) terms.push(rest);
        rest = "";
        terms.push(run.substr(i, n));
        i += n;
      }
      if (rest) terms.push(rest);
    }
  }
  return terms;
};
"""


def splitter_js(words: list[str]) -> str:
    """:data:`SPLITTER_JS` with the dictionary ``words``."""
    import json

    longest = max((len(w) for w in words), default=1)
    return SPLITTER_JS % {
        "words": json.dumps(sorted(words), ensure_ascii=False),
        "longest": longest,
    }


def _chinese_search():
    from sphinx.search.zh import SearchChinese, cut_for_search

    class ChineseSearch(SearchChinese):
        """Sphinx's Chinese search (jieba splits the words), with

        - the course's words kept whole: ``html_search_options["dict"]``, a jieba user
          dictionary (:func:`search_dictionary`), and only the dictionaries' words (no word
          guessed by jieba's HMM, which cut fragments such as 件夹 out of sentences);
        - the one-character words of that dictionary (键, 值, 头) in the index, which Sphinx's
          ``word_filter`` keeps only from two characters on;
        - the query cut in the browser as the index was: Sphinx's zh search leaves the
          default ``splitQuery``, which keeps a run of Chinese characters whole (键值缓存 is
          then one word that the index, cut by jieba, never has); :func:`splitter_js` cuts it
          into the dictionary's words;
        - the name of the stemmer its JavaScript defines: the Latin words of a Chinese page are
          stemmed by the English stemmer, which Sphinx 9.0 ships as ``EnglishStemmer`` but
          names ``ChineseStemmer`` in the language data, so the search page stopped on a
          ReferenceError.
        """

        language_name = "English"

        def __init__(self, options: dict[str, str]) -> None:
            super().__init__(options)  # loads options["dict"] into jieba
            path = Path(options.get("dict") or "")
            words = path.read_text(encoding="utf-8").split() if path.is_file() else []
            self.one_character_words = frozenset(w for w in words if len(w) == 1)
            self.js_splitter_code = splitter_js(words) if words else ""

        def split(self, input: str) -> list[str]:
            chinese = list(cut_for_search(input, HMM=False))
            latin1 = [term.strip() for term in self.latin1_letters.findall(input)]
            self.latin_terms.update(latin1)
            return chinese + latin1

        def word_filter(self, stemmed_word: str) -> bool:
            return len(stemmed_word) > 1 or stemmed_word in self.one_character_words

    return ChineseSearch


#: The page chrome that furo writes in English without marking it for translation: the labels
#: of its buttons and toggles and the titles of its icons. The Chinese build looks each up in
#: the catalogue of the theme's strings, ``locale/<language>/LC_MESSAGES/sphinx.po``, with the
#: strings furo does mark ("On this page", "Back to top", ...) and those Sphinx's own
#: catalogue lacks; Sphinx's catalogue gives the rest ("Search", "Contents").
UNMARKED_CHROME = (
    "Toggle site navigation sidebar",
    "Toggle table of contents sidebar",
    "Toggle Light / Dark / Auto color theme",
    "Contents",
    "Menu",
    "Expand",
    "Light mode",
    "Dark mode",
    "Auto light/dark, in light mode",
    "Auto light/dark, in dark mode",
    "On Read the Docs",
    "On GitHub",
)
#: The label of the button that opens a part of the sidebar's navigation (furo writes it for
#: each part, with the part's title).
TOGGLE_NAVIGATION = "Toggle navigation of %(title)s"
_TOGGLE_NAVIGATION = re.compile(r'aria-label="Toggle navigation of (?P<title>[^"]*)"')
_UNMARKED = re.compile(
    r'(?P<open>aria-label="|<title>)(?P<text>'
    + "|".join(re.escape(text) for text in UNMARKED_CHROME)
    + r')(?P<close>"|</title>)'
)


def translate_chrome(html: str, gettext: Callable[[str], str]) -> str:
    """``html`` with each label of :data:`UNMARKED_CHROME` (an ``aria-label`` or an icon's
    ``<title>``) replaced by ``gettext(label)``, and each "Toggle navigation of <title>" by
    ``gettext(`` :data:`TOGGLE_NAVIGATION` ``)`` with the title in its place.

    >>> translate_chrome('<button aria-label="Menu"><title>Menu</title>', {"Menu": "菜单"}.get)
    '<button aria-label="菜单"><title>菜单</title>'
    """
    from html import escape

    def label(match: re.Match) -> str:
        text = gettext(match["text"]) or match["text"]
        return f"{match['open']}{escape(text, quote=True)}{match['close']}"

    def navigation(match: re.Match) -> str:
        # The title is already escaped in the page; the translation puts it in its place.
        words = gettext(TOGGLE_NAVIGATION) or TOGGLE_NAVIGATION
        return f'aria-label="{escape(words, quote=True) % {"title": match["title"]}}"'

    return _TOGGLE_NAVIGATION.sub(navigation, _UNMARKED.sub(label, html))


def site_title(language: str, title: str, confdir: Path) -> str:
    """The site's name in ``language``: ``title``, translated as the landing page's catalogue
    translates it (the landing page's own title)."""
    if language == "en":
        return title
    po = confdir / "locale" / language / "LC_MESSAGES" / "index.po"
    return load_messages(po).get(title, title)


def _on_builder_inited(app) -> None:
    templates = getattr(app.builder, "templates", None)
    if templates is None or not hasattr(templates, "environment"):
        return
    # docs/_templates/page.html passes every page through this filter.
    templates.environment.filters["attention_chrome"] = lambda html: translate_chrome(
        str(html), app.translator.gettext
    )


def _on_html_page_context(app, pagename, templatename, context, doctree) -> None:
    language = app.config.language
    context["attention_languages"] = language_links(pagename, language)
    alternates = alternate_links(pagename, _english_root(app))
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{code}" href="{url}" />' for code, url in alternates
    )
    # furo writes <html lang="{{ language }}">: zh-CN, not Sphinx's zh_CN.
    context["language"] = bcp47(language)


def setup(app):
    app.add_directive("language-glossary", GlossaryDirective)
    from sphinx import search

    search.languages["zh"] = _chinese_search()
    app.add_transform(_untranslated_transform())
    app.connect("build-finished", _write_report)
    app.add_transform(_build_notes_transform())
    app.connect("html-page-context", _on_html_page_context)
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # make gettext: python docs/_ext/attention_i18n.py prune build/gettext
    import sys

    if sys.argv[1:2] != ["prune"] or len(sys.argv) != 3:
        sys.exit("usage: python docs/_ext/attention_i18n.py prune POT_DIR")
    for path in prune(Path(sys.argv[2])):
        print(f"not translated: {path}")

__all__ = [
    "LANGUAGES",
    "MINUTES",
    "REPORT",
    "SEARCH_WORDS",
    "SUBDIR",
    "BUILD_NOTES",
    "UNMARKED_CHROME",
    "UNTRANSLATED",
    "bcp47",
    "check_translation",
    "build_language",
    "gallery_overrides",
    "language_links",
    "load_messages",
    "page_messages",
    "prune",
    "read_the_docs_roots",
    "search_dictionary",
    "search_words",
    "site_root",
    "site_title",
    "splitter_js",
    "translate_chrome",
    "rst_translator",
    "translate_rst",
]
