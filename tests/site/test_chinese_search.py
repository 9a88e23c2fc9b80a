"""The Chinese edition's search in Chromium: a term typed into the Chinese search box finds the
page that teaches it, as the index was split (jieba with the course's dictionary) and the query
is split in the browser the same way (docs/_ext/attention_i18n.py, ChineseSearch)."""

from __future__ import annotations

import pytest
from test_browser import visit

pytestmark = pytest.mark.timeout(180)

#: Each term, and the page that teaches it. 梯度检查 (gradient checking) is not a term of the
#: dictionary: it is split into 梯度 and 检查, the words of page 8's title 「检查梯度」.
TERMS = [
    ("键值缓存", "13_kv_cache_gqa"),
    ("层归一化", "07_transformer_block"),
    ("残差连接", "07_transformer_block"),
    ("滑动窗口", "19_flex_attention"),
    ("束搜索", "15_encoder_decoder"),
    ("归纳头", "12_decoder_induction_heads"),
    ("旋转位置编码", "14_positions"),
    ("梯度检查", "08_checking_gradients"),
]


def _typed(browser, site_url: str, query: str, start: str = "zh_CN/index.html") -> list[str]:
    """The result links, in order, of ``query`` typed into the search box of a Chinese page."""
    with visit(browser, site_url) as v:
        page = v.goto(start)
        box = page.locator("input.sidebar-search").first
        box.fill(query)
        box.press("Enter")
        page.wait_for_url("**/zh_CN/search.html?q=*", timeout=30_000)
        page.locator("#search-results ul.search li").first.wait_for(
            state="attached", timeout=30_000
        )
        page.wait_for_function(
            "() => !document.querySelector('#search-progress')?.textContent.includes('Preparing')",
            timeout=30_000,
        )
        return page.evaluate(
            """() => Array.from(document.querySelectorAll("#search-results ul.search li a"))
                 .map(a => a.getAttribute("href"))"""
        )


@pytest.mark.parametrize(("term", "page"), TERMS)
def test_a_chinese_term_finds_the_page_that_teaches_it(site_url: str, browser, term, page):
    results = _typed(browser, site_url, term)
    assert any(page in href for href in results[:3]), f"{term}: {results[:5]}"


@pytest.mark.parametrize("word", ["键", "值"])
def test_a_one_character_term_is_found(site_url: str, browser, word: str):
    results = _typed(browser, site_url, word)
    assert any("tutorials/" in href for href in results), results[:5]
