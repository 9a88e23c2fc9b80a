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
