"""The Chinese edition as a Chinese reader meets it first: the gallery's cards, the page chrome
around the prose (furo's and Sphinx's strings, the site's name, the sidebar), the notebooks and
scripts a page offers, and the search index (docs/_ext/attention_i18n.py, issue 40).

The tests of built pages read what ``make html`` left in ``build/html/zh_CN``; the others test
the extension's functions on their own.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from docbuild import GALLERY_DIR, ROOT, gallery_scripts

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_course as course  # noqa: E402
import attention_i18n  # noqa: E402

PARTS = course.course(GALLERY_DIR)
PAGES = course.pages_of(PARTS)
#: A CJK ideograph.
CJK = re.compile(r"[\u3400-\u9fff]")


def _text(fragment: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", fragment).split())


# -- The gallery's cards -----------------------------------------------------------------------


def test_a_translated_card_shows_the_translated_title():
    card = (
        '<div class="sphx-glr-thumbcontainer" tooltip="A long introduction.">\n\n'
        ".. only:: html\n\n  :doc:`/tutorials/1_first/07_x`\n\n.. raw:: html\n\n"
        '      <div class="sphx-glr-thumbnail-title">Seven &amp; more</div>\n    </div>\n'
    )
    page = course.Page(7, GALLERY_DIR / "07_x.py", "1_first", "Seven & more", "Uses a.", 4)
    messages = {"Seven & more": "第七 & ``x``", "Uses a.": "用到 a。"}
    out = course.annotate_cards(
        card, {"tutorials/1_first/07_x": page}, lambda _, text: messages.get(text, text)
    )
    assert '<span class="attention-card-number">7</span> 第七 &amp; x</div>' in out
    assert "Seven" not in out
    assert '<div class="attention-card-summary">用到 a。</div>' in out


def _card_titles(index: str) -> list[str]:
    titles = re.findall(
        r'<div class="sphx-glr-thumbnail-title">(.*?)</div>', index, flags=re.DOTALL
    )
    # The visible title, after the card's number.
    return [_text(re.sub(r'<span class="attention-card-number">\d+</span>', "", t)) for t in titles]


@pytest.mark.parametrize("part", ["", *(p.folder for p in PARTS if p.folder)])
def test_the_chinese_indexes_show_chinese_card_titles(zh_html_dir: Path, part: str):
    index = (zh_html_dir / "tutorials" / part / "index.html").read_text(encoding="utf-8")
    titles = _card_titles(index)
    pages = [p for p in PAGES if not part or p.part == part]
    assert len(titles) == len(pages), titles
    english = [t for t in titles if not CJK.search(t)]
    assert not english, f"English card titles on the Chinese {part or 'tutorials'} index: {english}"
    for page, title in zip(pages, titles, strict=True):
        assert page.title not in title, title


# -- The page chrome ---------------------------------------------------------------------------

#: What furo and Sphinx write around a page in English, and where: visible text or a label.
ENGLISH_CHROME = (
    "Skip to content",
    "Back to top",
    "On this page",
    "Made with",
    ">Next<",
    ">Previous<",
    "Toggle Light / Dark / Auto color theme",
    "Toggle site navigation sidebar",
    "Light mode",
    "Dark mode",
    "Auto light/dark",
    "Toggle navigation of",
    "Attention in PyTorch",
    "Copyright",
)


@pytest.mark.parametrize(
    "page",
    [
        "index.html",
        "tutorials/index.html",
        "tutorials/1_foundations/01_qkv_analogy.html",
        "glossary.html",
        "search.html",
    ],
)
def test_a_chinese_page_has_no_english_chrome(zh_html_dir: Path, page: str):
    html = (zh_html_dir / page).read_text(encoding="utf-8")
    found = [words for words in ENGLISH_CHROME if words in html]
    assert not found, f"{page}: English chrome {found}"
    assert "PyTorch 中的注意力" in re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert '<span class="sidebar-brand-text">PyTorch 中的注意力</span>' in html
    # The sidebar's entry of the API reference (the reference itself stays in English).
    entry = r'<li class="toctree-l1[^"]*"><a class="reference internal" href="[./]*api.html">'
    assert re.search(entry + "API 参考</a>", html)


def test_the_chinese_search_page_asks_for_javascript_in_chinese(zh_html_dir: Path):
    html = (zh_html_dir / "search.html").read_text(encoding="utf-8")
    assert "Please activate JavaScript" not in html
    assert "请启用 JavaScript" in html


def test_the_english_chrome_stays_english(html_dir: Path):
    html = (html_dir / "tutorials/1_foundations/01_qkv_analogy.html").read_text(encoding="utf-8")
    for words in ("Skip to content", "On this page", "Toggle Light / Dark / Auto color theme"):
        assert words in html, words
    assert '<span class="sidebar-brand-text">Attention in PyTorch</span>' in html


def test_unmarked_chrome_is_translated_in_labels_and_icon_titles_only():
    html = (
        '<button aria-label="Toggle Light / Dark / Auto color theme">'
        "<svg><title>Light mode</title></svg></button><p>Light mode, Menu</p>"
    )
    out = attention_i18n.translate_chrome(html, {"Light mode": "浅色", "Menu": "菜单"}.get)
    # A label without a translation stays as it is; text outside labels is never touched.
    assert out == (
        '<button aria-label="Toggle Light / Dark / Auto color theme">'
        "<svg><title>浅色</title></svg></button><p>Light mode, Menu</p>"
    )


def test_the_sidebars_toggles_name_their_part_in_the_translation():
    html = '<input aria-label="Toggle navigation of 第 1 部分 &amp; x" class="toctree-checkbox">'
    messages = {attention_i18n.TOGGLE_NAVIGATION: "展开或收起“%(title)s”的导航"}
    out = attention_i18n.translate_chrome(html, messages.get)
    assert (
        out == '<input aria-label="展开或收起“第 1 部分 &amp; x”的导航" class="toctree-checkbox">'
    )


def test_every_unmarked_label_has_its_translation():
    import polib

    po = ROOT / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.po"
    translated = {e.msgid for e in polib.pofile(str(po)) if e.msgstr and not e.fuzzy}
    labels = [*attention_i18n.UNMARKED_CHROME, attention_i18n.TOGGLE_NAVIGATION]
    missing = [label for label in labels if label not in translated]
    assert not missing


# -- Notebooks and scripts ---------------------------------------------------------------------

ZH_PAGE = '''\
"""
A page
======

.. prerequisites::

The introduction.
"""

# %%
# Summary
# -------
#
# - Attention is a lookup: a **query** meets every
#   **key**.
# - It is soft.
#
# 1. **One.** A question
#    on two lines.
# 2. **Two.** Another.
#
# .. solution 1
#
# What to notice.

x = 1  # a code comment stays as it is
# sphinx_gallery_start_ignore
assert x == 1
# sphinx_gallery_end_ignore

# %%
# .. solution 2

print(x)
'''
ZH_MESSAGES = {
    "A page": "一页",
    "The introduction.": "引言。",
    "Summary": "小结",
    "Attention is a lookup: a **query** meets every **key**.": (
        "注意力是一次查找：**查询** 与每个 **键** 相比。"
    ),
    "It is soft.": "它是软的。",
    "**One.** A question on two lines.": "**一。** 一个问题。",
    "**Two.** Another.": "**二。** 另一个。",
    "What to notice.": "要注意的。",
    "Solution to exercise 1": "练习 1 的解答",
    "Solution to exercise 2": "练习 2 的解答",
}


def _zh(text: str) -> str:
    return attention_i18n.translate_rst(text, ZH_MESSAGES)


def test_translate_rst_translates_each_item_of_a_list_without_blank_lines():
    text = "- an item\n  that goes on\n- another\n\n1. first\n   goes on\n2. second\n#. third"
    messages = {
        "an item that goes on": "一项",
        "another": "另一项",
        "first goes on": "第一",
        "second": "第二",
    }
    # An item without a translation stays as it is.
    assert attention_i18n.translate_rst(text, messages) == (
        "- 一项\n- 另一项\n\n1. 第一\n2. 第二\n#. third"
    )


def _notebook(tmp_path: Path, language: str):
    import attention_downloads as dl

    page = tmp_path / "99_page.py"
    page.write_text(ZH_PAGE, encoding="utf-8")
    gallery_conf = {"first_notebook_cell": None, "last_notebook_cell": None}
    gallery_conf |= {"notebook_images": False, "pypandoc": False}
    gallery_conf |= {"promote_jupyter_magic": False, "remove_config_comments": True}
    notebook, _ = dl.convert_notebook(
        page,
        gallery_conf,
        include=None,
        links=dl.Links(),
        docname="tutorials/99_page",
        translate=_zh if language == "zh_CN" else None,
        language=language,
    )
    cells = notebook["cells"]
    sources = ["".join(c["source"]) for c in cells]
    folded = [bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in cells]
    return cells, sources, folded


def test_a_chinese_notebook_has_its_lists_in_chinese_and_folds_as_the_english_one(tmp_path):
    import attention_downloads as dl

    en_cells, en, en_folded = _notebook(tmp_path, "en")
    zh_cells, zh, zh_folded = _notebook(tmp_path, "zh_CN")
    markdown = "\n".join(s for c, s in zip(zh_cells, zh, strict=True) if c["cell_type"] != "code")
    for words in (
        "- 注意力是一次查找：**查询** 与每个 **键** 相比。",
        "- 它是软的。",
        "1. **一。** 一个问题。",
    ):
        assert words in markdown, markdown
    for words in ("Attention is", "It is soft", "A question", "Another", "Solution", "folded"):
        assert words not in markdown, words
    # The same cells, folded alike: two solutions and one block of hidden lines.
    assert [c["cell_type"] for c in zh_cells] == [c["cell_type"] for c in en_cells]
    assert zh_folded == en_folded and sum(en_folded) == 4
    note = dl.FOLDED_NOTE["zh_CN"]
    assert sum(s.startswith(("**练习 1 的解答**", "**练习 2 的解答**")) for s in zh) == 2
    assert sum(s.endswith(note) for s in zh) == 2
    assert sum(s.endswith(dl.FOLDED_NOTE["en"]) for s in en) == 2
    assert sum(s.startswith(dl.HIDDEN_CODE_NOTE["zh_CN"]) for s in zh) == 1
    code = [s for c, s in zip(zh_cells, zh, strict=True) if c["cell_type"] == "code"]
    en_code = [s for c, s in zip(en_cells, en, strict=True) if c["cell_type"] == "code"]
    assert [s.split("\n", 1)[-1] for s in code] == [s.split("\n", 1)[-1] for s in en_code]


def test_a_chinese_script_is_the_pages_program_with_its_chinese_prose():
    import ast

    import attention_downloads as dl

    english, _ = dl.convert_script(ZH_PAGE, include=None, header="", links=dl.Links())
    chinese, _ = dl.convert_script(
        ZH_PAGE, include=None, header="", links=dl.Links(), translate=_zh, language="zh_CN"
    )
    for words in (
        "一页\n====",
        "# 小结",
        "# - 注意力是一次查找",
        "# 1. **一。** 一个问题。",
        "# 练习 1 的解答：",
    ):
        assert words in chinese, chinese
    for words in ("A page", "Summary", "Attention is", "A question", "Solution", "Reading time"):
        assert words not in chinese, words
    assert "阅读时间" in chinese

    # The same program: only the docstring and the comments differ.
    def program(text):
        return [ast.dump(statement) for statement in ast.parse(text).body[1:]]

    assert program(chinese) == program(english)
    assert "x = 1  # a code comment stays as it is" in chinese


def test_an_escaped_space_shows_nothing_in_a_notebook_or_a_script(tmp_path, monkeypatch):
    """reST's escaped space between Chinese and markup (tests/docs/zh_fixes.py) is no text: the
    notebook's Markdown and the script's comments do not show it."""
    import attention_downloads as dl

    monkeypatch.setitem(ZH_MESSAGES, "It is soft.", "它是\\ **软**\\ 的，见\\ ``x``。")
    _, sources, _ = _notebook(tmp_path, "zh_CN")
    assert "- 它是**软**的，见``x``。" in "\n".join(sources)
    script, _ = dl.convert_script(
        ZH_PAGE, include=None, header="", links=dl.Links(), translate=_zh, language="zh_CN"
    )
    assert "# - 它是**软**的，见`x`。" in script
    assert "\\ " not in "\n".join(sources) + script


def test_a_chinese_scripts_header_is_in_chinese():
    import attention_downloads as dl

    words = dict(site="https://s/", version="0.1", torch_requirement="torch>=2.4")
    header = dl.script_header(
        **words, versions={"torch": "2.9"}, page="https://s/p.html", language="zh_CN"
    )
    assert header.startswith("# 下载自 https://s/p.html\n")
    assert not re.search(r"\b(Built|install the same|Set ATTENTION_SEED)\b", header)
    assert dl.install_command("https://s/", "0.1", "torch>=2.4") in header


def _latin_words(text: str) -> int:
    """The Latin words of Markdown or plain text, without its code, maths and link targets."""
    text = re.sub(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)", " ", text)
    return len(re.findall(r"[A-Za-z]{2,}", text))


def _downloads(site: Path, stem: str, suffix: str) -> Path:
    (path,) = (site / "_downloads").rglob(f"{stem}{suffix}")
    return path


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_built_chinese_notebook_has_chinese_lists_and_folds_as_the_english_one(
    html_dir, zh_html_dir, script
):
    import json

    import attention_downloads as dl

    stem = Path(script).stem
    en, zh = (
        json.loads(_downloads(site, stem, ".ipynb").read_text(encoding="utf-8"))["cells"]
        for site in (html_dir, zh_html_dir)
    )

    def folded(cells):
        return [bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in cells]

    assert folded(zh) == folded(en)
    markdown = ["".join(c["source"]) for c in zh if c["cell_type"] == "markdown"]
    # The list items of the prose: not the lines of code (fenced) or formulas ($$).
    prose = re.sub(r"```.*?```|\$\$.*?\$\$", "", "\n".join(markdown), flags=re.DOTALL)
    items = [line for line in prose.split("\n") if re.match(r" {0,3}(?:[-*+]|\d+\.)\s", line)]
    english = [item for item in items if _latin_words(item) >= 3 and not CJK.search(item)]
    assert not english, english
    en_markdown = "".join("".join(c["source"]) for c in en if c["cell_type"] == "markdown")
    notes = "".join(markdown).count(dl.FOLDED_NOTE["zh_CN"])
    assert notes == en_markdown.count(dl.FOLDED_NOTE["en"])
    assert dl.FOLDED_NOTE["en"] not in "".join(markdown)


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_built_chinese_script_is_the_program_with_its_chinese_prose(
    html_dir, zh_html_dir, script
):
    import ast

    import attention_downloads as dl

    stem = Path(script).stem
    en, zh = (
        _downloads(site, stem, ".py").read_text(encoding="utf-8")
        for site in (html_dir, zh_html_dir)
    )

    def program(text):
        return [ast.dump(statement) for statement in ast.parse(text).body[1:]]

    assert program(zh) == program(en)
    assert CJK.search(ast.get_docstring(ast.parse(zh)))
    lines = zh.split("\n")
    paragraphs = []
    for start, end in dl._text_blocks(lines):
        block = "\n".join(re.sub(r"^# ?", "", line) for line in lines[start:end])
        # Prose starts at the margin; code and formulas are indented.
        pieces = [p.strip("\n") for p in block.split("\n\n") if p.strip()]
        paragraphs += [p for p in pieces if not p[0].isspace()]
    prose = [p for p in paragraphs if _latin_words(p) >= 3 or CJK.search(p)]
    english = [p for p in prose if not CJK.search(p)]
    assert len(english) <= 0.1 * len(prose), english
    assert zh.startswith("# 下载自 ")


# -- Search ------------------------------------------------------------------------------------


def _search_terms(zh_html_dir: Path) -> dict:
    import json

    text = (zh_html_dir / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])["terms"]


def test_the_chinese_index_holds_the_glossarys_terms_whole_and_one_character_terms(zh_html_dir):
    terms = _search_terms(zh_html_dir)
    for word in (
        "键值缓存",
        "层归一化",
        "残差连接",
        "滑动窗口",
        "束搜索",
        "归纳头",
        "旋转位置编码",
    ):
        assert word in terms, word
    for word in ("键", "值"):
        assert word in terms, word
    # Only the dictionary's one-character words: no flood of single characters.
    single = [t for t in terms if len(t) == 1 and CJK.match(t)]
    assert sorted(single) == sorted(w for w in attention_i18n.search_words(ROOT) if len(w) == 1), (
        single
    )


def test_the_chinese_search_splits_a_query_into_the_dictionarys_words(zh_html_dir):
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (zh_html_dir / "_static" / "language_data.js").read_text(encoding="utf-8")
    assert "var splitQuery" in script
    queries = ["键值缓存", "梯度检查", "键", "自注意力机制 KV cache", "旋转位置编码"]
    # language_data.js holds the scorer too, which reads `Search` only when it is defined, and
    # exports the stop words to `window`.
    run = (
        "var window = globalThis;\n"
        + script
        + f"\nconsole.log(JSON.stringify({json.dumps(queries)}.map(splitQuery)));"
    )
    out = subprocess.run([node, "-e", run], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [
        ["键值缓存"],
        ["梯度", "检查"],
        ["键"],
        ["自注意力", "机制", "KV", "cache"],
        ["旋转位置编码"],
    ]


def test_make_gettext_keeps_every_chrome_translation():
    """``make gettext`` updates sphinx.po from the strings of the project's own templates
    (build/gettext/sphinx.pot): a translation of a string no template names would go
    obsolete, so every one is named in docs/_templates."""
    import jinja2
    import polib

    environment = jinja2.Environment(extensions=["jinja2.ext.i18n"])
    named = {
        message
        for template in (ROOT / "docs" / "_templates").rglob("*.html")
        for *_, message in environment.extract_translations(template.read_text(encoding="utf-8"))
    }
    po = ROOT / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.po"
    kept = {e.msgid for e in polib.pofile(str(po)) if not e.obsolete}
    assert kept <= named, kept - named


# -- Typography, glosses and terms (tests/docs/zh_fixes.py fixes what these find) ---------------

#: The catalogues that tests/docs/zh_fixes.py has not fixed yet, their English being rewritten:
#: run it on them (``python tests/docs/zh_fixes.py <their .po files>``) and empty this.
NOT_YET_FIXED: tuple[str, ...] = ()
#: The stray spaces the Chinese tutorials may keep: reST leaves a few where a role that shows
#: code ends a line of a list.
MAX_STRAY_SPACES = 10


def _prose_text(path: Path) -> list[str]:
    """The text of each prose block of a built page as a reader sees it, with each piece of code
    and each formula as one Latin letter (a space beside it is wanted)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    for tag in soup.find_all(["code", "kbd"]) + soup.find_all(class_="math"):
        tag.replace_with("x")
    skip = ("highlight", "sphx-glr-script-out", "attention-excerpt", "headerlink")
    for tag in soup.find_all(["pre", "script", "style"]):
        tag.decompose()
    for tag in soup.find_all(class_=lambda c: c and any(n in c.split() for n in skip)):
        tag.decompose()
    blocks = ["p", "li", "h1", "h2", "h3", "h4", "figcaption", "dt", "caption"]
    article = soup.find("article")
    return [b.get_text() for b in article.find_all(blocks) if not b.find_parent(blocks)]


def test_the_chinese_tutorials_set_no_space_between_two_chinese_characters(zh_html_dir: Path):
    import zh_fixes

    found = []
    for page in PAGES:
        if page.path.stem in NOT_YET_FIXED:
            continue
        html = zh_html_dir / "tutorials" / page.part / f"{page.path.stem}.html"
        found += [
            f"{page.path.stem}: {s!r}" for t in _prose_text(html) for s in zh_fixes.stray_spaces(t)
        ]
    assert len(found) <= MAX_STRAY_SPACES, "\n".join(found)


def test_stray_spaces_are_counted_in_what_the_reader_sees(tmp_path: Path):
    import zh_fixes

    page = tmp_path / "p.html"
    page.write_text(
        "<article><p>整门课程 <a href='x'>分为</a> 五部分，用 <code>x</code> 算。</p>"
        "<li>键 <em>值</em>：<span class='math'>\\(q\\)</span> 与 <code>k</code></li></article>",
        encoding="utf-8",
    )
    texts = _prose_text(page)
    assert [len(zh_fixes.stray_spaces(t)) for t in texts] == [2, 1]


@pytest.mark.parametrize(
    ("msgstr", "fixed"),
    [
        ("整门课程 :ref:`分为 <x>` 五部分", "整门课程\\ :ref:`分为 <x>`\\ 五部分"),
        (
            "与每个 **键** 比较，见 :ref:`sphx_glr_x` 。",
            "与每个\\ **键**\\ 比较，见\\ :ref:`sphx_glr_x`。",
        ),
        ("**前置知识：** :ref:`a`、:ref:`b`", "**前置知识：**\\ :ref:`a`、:ref:`b`"),
        # Code, formulas and Latin text keep their space.
        ("用 ``x`` 和 :math:`q` 算，见 :ref:`api` 与 `PyTorch <u>`__ 。", None),
        ("a **b** c", None),
    ],
)
def test_fix_spaces_escapes_a_space_only_between_chinese_and_chinese(msgstr, fixed):
    import zh_fixes

    out = zh_fixes.fix_spaces(msgstr)
    assert out == (fixed or msgstr)
    assert attention_i18n.check_translation(msgstr, out) == []


def test_chinese_emphasis_is_not_slanted():
    css = (ROOT / "docs" / "_static" / "custom.css").read_text(encoding="utf-8")
    rule = re.search(r":lang\(zh\) em \{([^}]*)\}", css)
    assert rule, "no rule for emphasis in Chinese"
    assert "font-style: normal" in rule.group(1)


def test_the_built_chinese_site_carries_the_emphasis_rule(zh_html_dir: Path):
    css = (zh_html_dir / "_static" / "custom.css").read_text(encoding="utf-8")
    assert re.search(r":lang\(zh\) em \{[^}]*font-style: normal", css)


def _glossary_rows() -> list[dict[str, str]]:
    import csv

    with (ROOT / "locale" / "zh_CN" / "glossary.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _glosses_by_page() -> dict[str, dict[tuple[str, str], str]]:
    """For each tutorial's catalogue, in the course's order: the concepts it glosses in English
    in brackets (:func:`zh_fixes.gloss_concept`), each with the words around its gloss. The
    glossary's terms are looked for as the glossary writes them, whatever precedes them
    (「在线 softmax（online softmax）」)."""
    import polib
    import zh_fixes

    terms = [
        (
            row["中文"],
            re.compile(
                re.escape(row["中文"]) + "（" + re.escape(row["English"]) + "s?）", re.IGNORECASE
            ),
        )
        for row in _glossary_rows()
    ]
    found = {}
    for path in zh_fixes.course_catalogues():
        page = {}
        for entry in polib.pofile(str(path)):
            if entry.obsolete:
                continue
            text = entry.msgstr
            for m in zh_fixes.glosses(text):
                page[zh_fixes.gloss_concept(m)] = text[max(0, m.start() - 4) : m.end()]
            for chinese, pattern in terms:
                for m in pattern.finditer(text):
                    english = zh_fixes.gloss_key(m.group(0)[len(chinese) + 1 : -1])
                    page[(english, chinese)] = m.group(0)
        found[path.stem] = page
    return found


def test_a_term_is_glossed_in_english_on_one_page_only():
    """An English gloss in brackets, 「注意力（attention）」, at a term's first use in the course
    and in the glossary, not on every page (d2l-zh's way)."""
    pages: dict[str, list[str]] = {}
    for stem, glossed in _glosses_by_page().items():
        for key, where in glossed.items():
            pages.setdefault(key, []).append(f"{stem[:2]} {where}")
    fixed = {stem[:2] for stem in NOT_YET_FIXED}
    repeated = {
        key: where
        for key, where in pages.items()
        if len([w for w in where[1:] if w[:2] not in fixed]) > 0
    }
    assert not repeated, "\n".join(f"{key}: {where}" for key, where in repeated.items())


def test_the_glosses_are_found_as_the_glossary_writes_them():
    import zh_fixes

    text = "查询（query）、键（keys）和值（value）；旋转（RoPE）与键值缓存（KV cache）"
    assert [zh_fixes.gloss_key(m["english"]) for m in zh_fixes.glosses(text)] == [
        "query",
        "key",
        "value",
        "kv cache",
    ]


def test_one_term_per_concept_and_each_in_the_glossary():
    """dropout, key/value head, the package, tile and attention sink: one Chinese term each
    (issue 40), in the glossary, and none of the terms that drifted (zh_fixes.TERMS)."""
    import polib
    import zh_fixes

    glossary = {row["English"]: row["中文"] for row in _glossary_rows()}
    assert glossary["dropout"] == "dropout"
    assert glossary["key/value head"] == "键值头"
    assert glossary["the package"] == "本包"
    assert glossary["tile"] == "块"
    assert glossary["attention sink"] == "注意力锚点"
    drifted = []
    for path in sorted((ROOT / "locale" / "zh_CN" / "LC_MESSAGES").rglob("*.po")):
        if path.stem in NOT_YET_FIXED:
            continue
        for entry in polib.pofile(str(path)):
            if entry.obsolete:
                continue
            drifted += [
                f"{path.stem}: {old}" for old, _ in zh_fixes.TERMS if old in entry.msgstr
            ] + [f"{path.stem}: 暂退法" for _ in range(entry.msgstr.count("暂退法"))]
    assert not drifted, drifted
