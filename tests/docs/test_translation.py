"""The Chinese edition: complete catalogues, translations that keep their markup and the
glossary's terms, and a built site in Chinese (docs/_ext/attention_i18n.py).

``make test`` builds the Chinese site (``build/html/zh_CN``) before these tests run. A page whose
English prose changed fails that build (a message without its translation is a warning) until
its catalogue is updated (``make gettext``) and translated.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import polib
import pytest
from docbuild import ROOT, gallery_scripts

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_downloads  # noqa: E402
import attention_i18n  # noqa: E402
import attention_prerequisites  # noqa: E402

LOCALE = ROOT / "locale" / "zh_CN"
CATALOGUES = LOCALE / "LC_MESSAGES"
GLOSSARY = LOCALE / "glossary.csv"
ZH = "zh_CN"
#: A CJK ideograph: a paragraph with one is in Chinese.
CJK = re.compile(r"[\u3400-\u9fff]")
#: The share of a tutorial's prose paragraphs that must be in Chinese.
MIN_CHINESE_SHARE = 0.9


def catalogues() -> list[Path]:
    return sorted(CATALOGUES.rglob("*.po"))


def entries():
    for path in catalogues():
        for entry in polib.pofile(str(path)):
            if not entry.obsolete:
                yield path.relative_to(CATALOGUES).as_posix(), entry


@pytest.fixture(scope="session")
def zh_dir(zh_html_dir) -> Path:
    return zh_html_dir


# -- The catalogues ----------------------------------------------------------------------------


def test_every_message_of_every_translated_page_was_translated(zh_dir):
    """The Chinese build refuses a message without its translation (a warning, so -W fails
    it); what it translated, it counted in build/translation-zh_CN.json."""
    report = zh_dir.parent.parent / attention_i18n.REPORT.format(language=ZH)
    counts = json.loads(report.read_text(encoding="utf-8"))
    missing = {doc: c["untranslated"] for doc, c in counts.items() if c["untranslated"]}
    assert not missing, missing
    total = sum(c["messages"] for c in counts.values())
    assert total > 1000, f"only {total} messages in the Chinese build"
    tutorials = [doc for doc in counts if doc.startswith("tutorials/") and "/index" not in doc]
    assert len(tutorials) == len(gallery_scripts()), tutorials
    assert not any(attention_i18n.UNTRANSLATED.search(doc) for doc in counts)


def test_no_catalogue_for_a_page_that_is_not_translated():
    kept = [
        p
        for p in catalogues()
        if attention_i18n.UNTRANSLATED.search(p.relative_to(CATALOGUES).with_suffix("").as_posix())
    ]
    assert not kept


def test_translations_keep_their_markup_and_are_chinese():
    problems = [
        f"{path}: {problem}: {entry.msgid[:80]!r}"
        for path, entry in entries()
        if entry.msgstr and not entry.fuzzy
        for problem in attention_i18n.check_translation(entry.msgid, entry.msgstr)
    ]
    assert not problems, "\n".join(problems[:40])


def glossary() -> list[dict[str, str]]:
    with GLOSSARY.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_notebooks_prerequisites_line_reads_as_the_pages():
    """The notebook writes the prerequisites line from LINE_WORDS, the page from its catalogue:
    both must use the same words."""
    label, reading_time, between = attention_prerequisites.LINE_WORDS[ZH]
    en_label, en_time, _ = attention_prerequisites.LINE_WORDS["en"]
    lines = [e for _, e in entries() if e.msgid.startswith(en_label)]
    assert len(lines) == len(gallery_scripts())
    time = re.escape(reading_time).replace(r"\{\}", r"\d+")
    for entry in lines:
        # The label, then a space: reST's escaped one where a Chinese title follows, which shows
        # none (tests/docs/zh_fixes.py), or a plain one (a catalogue not fixed yet).
        assert entry.msgstr.startswith((label + "\\ ", label + " ")), entry.msgstr[:40]
        assert re.search(time + "$", entry.msgstr), entry.msgstr[-40:]
        if ", :ref:" in entry.msgid:
            assert between + ":ref:" in entry.msgstr, entry.msgstr


def test_glossary_terms_are_translated_alike():
    """A term of the glossary marked ``checked`` is rendered by its Chinese term wherever the
    English prose (outside code and roles) names it."""
    rows = [row for row in glossary() if row["checked"] == "yes"]
    assert len(rows) >= 20
    markup = re.compile(r":[\w:+.-]+:`[^`]+`|``.+?``|`[^`]*<[^>]+>`_+")
    unmatched = []
    for path, entry in entries():
        if not entry.msgstr or entry.fuzzy:
            continue  # test_every_message_of_the_sources_is_translated reports those
        prose = markup.sub(" ", entry.msgid)
        for row in rows:
            term = re.escape(row["English"]).replace(r"\ ", r"[\s-]")
            if re.search(rf"(?<![\w-]){term}s?(?![\w-])", prose, re.IGNORECASE) and (
                row["中文"] not in entry.msgstr
            ):
                unmatched.append(f"{path}: {row['English']} -> {row['中文']}: {entry.msgid[:70]!r}")
    assert not unmatched, f"{len(unmatched)} messages:\n" + "\n".join(unmatched[:40])


def test_glossary_page_is_built_from_the_glossary(zh_dir):
    html = (zh_dir / "glossary.html").read_text(encoding="utf-8")
    for row in glossary():
        assert row["中文"] in html


# -- The Chinese site --------------------------------------------------------------------------


def _pages(site: Path) -> set[str]:
    skip = ("_static/", "_sources/", "_downloads/", "_images/", f"{ZH}/")
    return {
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if not p.relative_to(site).as_posix().startswith(skip)
    }


def test_every_english_page_has_a_chinese_page(html_dir, zh_dir):
    english, chinese = _pages(html_dir), _pages(zh_dir)
    assert len(english) > 40
    assert english == chinese


#: The blocks of prose: paragraphs, list items, headings, captions.
PROSE_BLOCKS = ["p", "li", "h1", "h2", "h3", "h4", "figcaption", "dt", "caption"]
#: What is not prose: code, printed output, formulas, the download box, package excerpts.
NOT_PROSE = ("highlight", "sphx-glr-script-out", "math", "sphx-glr-download", "attention-excerpt")


def prose_of(path: Path) -> tuple[str | None, list[str]]:
    """The ``lang`` of a page and the texts of the prose blocks of its article (a block inside
    another counts once, with the outer one)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    for tag in soup.find_all(["pre", "script", "style"]):
        tag.decompose()
    for tag in soup.find_all(class_=lambda c: c and any(n in c for n in NOT_PROSE)):
        tag.decompose()
    article = soup.find("article")
    blocks = [b for b in article.find_all(PROSE_BLOCKS) if not b.find_parent(PROSE_BLOCKS)]
    texts = [" ".join(b.get_text(" ").split()) for b in blocks]
    return soup.html.get("lang"), texts


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_chinese_tutorial_is_in_chinese(zh_dir, script):
    page = zh_dir / "tutorials" / script.replace(".py", ".html")
    lang, texts = prose_of(page)
    assert lang == "zh-CN"
    prose = [t for t in texts if len(re.findall(r"[A-Za-z]{2,}", t)) >= 3 or CJK.search(t)]
    assert len(prose) >= 20, prose
    english = [t for t in prose if not CJK.search(t)]
    share = 1 - len(english) / len(prose)
    assert share >= MIN_CHINESE_SHARE, (
        f"{share:.0%} of {len(prose)} paragraphs in Chinese; in English:\n" + "\n".join(english)
    )


def test_english_pages_declare_english(html_dir):
    assert prose_of(html_dir / "index.html")[0] == "en"


def _switch(path: Path) -> dict[str, str]:
    html = path.read_text(encoding="utf-8")
    nav = re.search(r'<nav class="attention-language".*?</nav>', html, re.S)
    assert nav, f"{path}: no language switch"
    return dict(re.findall(r'href="([^"]+)" hreflang="([^"]+)"', nav.group(0))[0:1]) | {
        "current": re.search(r'aria-current="page">([^<]+)<', nav.group(0)).group(1)
    }


@pytest.mark.parametrize("page", ["index.html", "tutorials/4_generation/13_kv_cache_gqa.html"])
def test_the_language_switch_leads_to_the_same_page(html_dir, zh_dir, page):
    english = _switch(html_dir / page)
    (href,) = [h for h in english if h != "current"]
    assert english["current"] == "English"
    assert (html_dir / page).parent.joinpath(href).resolve() == (zh_dir / page).resolve()
    chinese = _switch(zh_dir / page)
    (back,) = [h for h in chinese if h != "current"]
    assert chinese["current"] == "简体中文"
    assert (zh_dir / page).parent.joinpath(back).resolve() == (html_dir / page).resolve()


def test_chinese_search_index_has_chinese_words(zh_dir):
    text = (zh_dir / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    terms = index["terms"]
    for word in ("注意力", "掩码", "查询"):
        assert word in terms, word


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_chinese_notebook_has_the_chinese_prose_and_the_english_code(html_dir, zh_dir, script):
    stem = Path(script).stem
    (english,) = (html_dir / "_downloads").rglob(f"{stem}.ipynb")
    (chinese,) = (zh_dir / "_downloads").rglob(f"{stem}.ipynb")
    en, zh = (json.loads(p.read_text(encoding="utf-8"))["cells"] for p in (english, chinese))

    def code(cells, language):
        # The first cell installs the package from the site the notebook comes from; a cell of
        # the lines the page hides starts with a note in the notebook's language.
        note = attention_downloads.HIDDEN_CODE_NOTE[language] + "\n"
        sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"][1:]
        return [s.removeprefix(note) for s in sources]

    assert code(en, "en") == code(zh, ZH)
    markdown = ["".join(c["source"]) for c in zh if c["cell_type"] == "markdown"]
    chinese_cells = [m for m in markdown if CJK.search(m)]
    english = [m[:80] for m in markdown if not CJK.search(m)]
    assert len(chinese_cells) >= 0.8 * len(markdown), english
    # The lines the build writes, not the catalogues: the prerequisites and the solutions.
    text = "\n".join(markdown)
    assert "**前置知识：**" in text and "阅读时间：约" in text
    for words in ("Prerequisites", "Reading time", "Solution to exercise"):
        assert words not in text, words
    solutions = sum("**Solution to exercise" in m for m in ("".join(c["source"]) for c in en))
    assert text.count("的解答**") == solutions


@pytest.mark.parametrize(
    ("language", "environ"), [(ZH, {}), ("en", {"ATTENTION_RUN_EXAMPLES": "0"})]
)
def test_the_chinese_build_and_the_extraction_run_no_example(language, environ):
    assert attention_i18n.gallery_overrides("en", {}) == {}
    overrides = attention_i18n.gallery_overrides(language, environ)
    pattern = re.compile(overrides["filename_pattern"])
    assert not any(pattern.search(f"gallery/{script}") for script in gallery_scripts())
    assert overrides["run_stale_examples"] is False and overrides["junit"] == ""


# -- The extension on its own ------------------------------------------------------------------


def test_translate_rst_replaces_titles_paragraphs_and_items_and_keeps_the_rest():
    text = (
        "Setup\n-----\n\nA paragraph\non two lines.\n\n- an item\n  that goes on\n\n"
        ".. note::\n\n   Inside a note.\n\n.. code-block:: python\n\n   x = 1\n\nNot in it."
    )
    messages = {
        "Setup": "准备",
        "A paragraph on two lines.": "两行的一段。",
        "an item that goes on": "一个条目",
        "Inside a note.": "注释里。",
    }
    assert attention_i18n.translate_rst(text, messages) == (
        "准备\n-----\n\n两行的一段。\n\n- 一个条目\n\n.. note::\n\n   注释里。\n\n"
        ".. code-block:: python\n\n   x = 1\n\nNot in it."
    )


@pytest.mark.parametrize(
    ("msgstr", "problem"),
    [
        ("用 ``x`` 和 :func:`~attention.f`，见 :ref:`该页 <lbl>`。", None),
        ("用 ``x`` 和 :func:`~attention.g`，见 :ref:`该页 <lbl>`。", "markup changed"),
        ("用``x``和 :func:`~attention.f`，见 :ref:`该页 <lbl>`。", "needs a space"),
        ("Use ``x`` and :func:`~attention.f` with :ref:`the page <lbl>`.", "no Chinese"),
    ],
)
def test_check_translation_finds_lost_markup_glued_markup_and_english(msgstr, problem):
    msgid = "Use ``x`` and :func:`~attention.f` with :ref:`the page <lbl>`."
    problems = attention_i18n.check_translation(msgid, msgstr)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_language_links_point_at_the_same_page_here_and_on_read_the_docs():
    local = attention_i18n.language_links("tutorials/a/b", "zh_CN", environ={})
    assert [(code, url, current) for code, _, url, current in local] == [
        ("en", "../../../tutorials/a/b.html", False),
        ("zh-CN", "../../../zh_CN/tutorials/a/b.html", True),
    ]
    english = attention_i18n.language_links("index", "en", environ={})
    assert [url for _, _, url, _ in english] == ["index.html", "zh_CN/index.html"]
    rtd = {
        "READTHEDOCS_CANONICAL_URL": "https://x.readthedocs.io/zh-cn/latest/",
        "READTHEDOCS_LANGUAGE": "zh-cn",
    }
    assert [url for _, _, url, _ in attention_i18n.language_links("index", "zh_CN", rtd)] == [
        "https://x.readthedocs.io/en/latest/index.html",
        "https://x.readthedocs.io/zh-cn/latest/index.html",
    ]
    assert attention_i18n.site_root("zh_CN", "http://h/", environ={}) == "http://h/zh_CN/"


def test_alternate_links_name_the_page_in_every_language_at_the_sites_address():
    rtd = {
        "READTHEDOCS_CANONICAL_URL": "https://x.readthedocs.io/en/latest/",
        "READTHEDOCS_LANGUAGE": "en",
    }
    assert attention_i18n.alternate_links("tutorials/a/b", "https://ignored/", rtd) == [
        ("en", "https://x.readthedocs.io/en/latest/tutorials/a/b.html"),
        ("zh-CN", "https://x.readthedocs.io/zh-cn/latest/tutorials/a/b.html"),
        ("x-default", "https://x.readthedocs.io/en/latest/tutorials/a/b.html"),
    ]


_ALTERNATE = re.compile(r'<link rel="alternate" hreflang="([^"]+)" href="([^"]+)" />')


def _wrong_alternates(site: Path, english_root: str) -> list[str]:
    """The pages of ``site`` whose head does not name them in English (also the default) and in
    Chinese at the site's address."""
    wrong = []
    for rel in sorted(_pages(site)):
        head = (site / rel).read_text(encoding="utf-8").split("</head>")[0]
        found = _ALTERNATE.findall(head)
        expected = [
            ("en", english_root + rel),
            ("zh-CN", f"{english_root}{ZH}/{rel}"),
            ("x-default", english_root + rel),
        ]
        if found != expected:
            wrong.append(f"{rel}: {found}")
    return wrong


def test_every_english_page_names_its_chinese_page_for_search_engines(html_dir):
    from docbuild import load_conf

    wrong = _wrong_alternates(html_dir, load_conf()["attention_site_url"])
    assert not wrong, "\n".join(wrong[:10])


def test_every_chinese_page_names_its_english_page_for_search_engines(zh_dir):
    from docbuild import load_conf

    wrong = _wrong_alternates(zh_dir, load_conf()["attention_site_url"])
    assert not wrong, "\n".join(wrong[:10])


def test_build_language_refuses_a_language_the_site_has_not():
    assert attention_i18n.build_language({}) == "en"
    with pytest.raises(ValueError, match="ATTENTION_LANGUAGE"):
        attention_i18n.build_language({"ATTENTION_LANGUAGE": "fr"})
