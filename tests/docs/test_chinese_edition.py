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
from docbuild import GALLERY_DIR, ROOT

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
