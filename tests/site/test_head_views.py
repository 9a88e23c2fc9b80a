"""The head views in a real browser: under a trained model's heatmap, the page's own example in
every layer and head, read from the JSON the build wrote (docs/_ext/attention_headviews.py,
web/src/head-view.js). The view shows the JSON's weights, is worked with the keyboard, passes
axe in both colour schemes, speaks the page's language, and loads no model and no wasm."""

from __future__ import annotations

import json

import pytest
from test_accessibility import axe_violations, describe
from test_widgets import HEAVY, _open

from attention.head_view import DECIMALS

#: Each page with a head view (tests/docs/test_head_views.py checks that every page drawing a
#: trained heatmap has one) and its view.
VIEWS = {
    "11-sentiment": "tutorials/3_training_and_reading/11_visualising_attention.html",
    "12-induction": "tutorials/4_generation/12_decoder_induction_heads.html",
    "15-dates": "tutorials/4_generation/15_encoder_decoder.html",
    "16-methods": "tutorials/4_generation/16_language_model.html",
}


def _selector(name: str) -> str:
    return f".attention-head-view[data-view='{name}']"


def _data(site_dir, name: str) -> dict:
    path = site_dir / "_static" / "head-views" / f"{name}.json"
    assert path.is_file(), f"the build writes the head view's example: {path} is missing"
    return json.loads(path.read_text(encoding="utf-8"))


def _page(site_dir, name: str) -> str:
    path = VIEWS[name]
    if not (site_dir / path).is_file():
        pytest.skip(f"{path} is not built")
    return path


def _loaded(page, name: str) -> None:
    page.wait_for_function(
        f'() => document.querySelector("{_selector(name)}")?.attentionHeadView !== undefined'
    )


def _shown(page, name: str, *, cross: bool) -> list[float]:
    """The weights the view shows on its keys (the second row of tokens in cross-attention,
    the queries' own row in self-attention) for the query in focus."""
    rows = page.locator(f"{_selector(name)} .attention-widget-tokens")
    keys = rows.last if cross else rows.first
    values = keys.locator(".attention-widget-token").evaluate_all(
        "tokens => tokens.map(token => token.dataset.weight)"
    )
    return [float(v) for v in values]


@pytest.mark.parametrize("name", VIEWS)
def test_the_view_shows_the_jsons_weights_and_loads_no_model(browser, site_url, site_dir, name):
    data = _data(site_dir, name)
    path = _page(site_dir, name)
    layers, H, L, S = data["layers"], data["heads"], len(data["queries"]), len(data["keys"])
    cross = data["keys"] != data["queries"]
    context, page, requests, errors, outside = _open(browser, site_url + path)
    try:
        _loaded(page, name)
        root = page.locator(_selector(name))
        assert root.locator(".attention-widget-title").count() == 1
        layer, head, query = layers - 1, H - 1, min(3, L - 1)  # the last layer and head
        root.locator("select").nth(0).select_option(index=layer)
        root.locator("select").nth(1).select_option(index=head)
        queries = root.locator(".attention-widget-tokens").first.locator(".attention-widget-token")
        assert queries.count() == L
        queries.nth(query).focus()
        saved = data["weights"][layer][head][query]
        expected = saved + [0.0] * (S - len(saved))
        shown = _shown(page, name, cross=cross)
        assert len(shown) == S
        assert max(abs(a - b) for a, b in zip(shown, expected, strict=True)) <= 10**-DECIMALS / 2
        status = root.locator("[role=status]").inner_text()
        assert f"position {query}" in status, status
        assert not [url for url in requests if HEAVY.search(url)], "a head view loads no model"
        assert any(url.endswith(f"_static/head-views/{name}.json") for url in requests)
        assert not errors and not outside, (errors, outside)
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", VIEWS)
def test_the_view_is_keyboard_operable_and_accessible(browser, site_url, site_dir, name, scheme):
    path = _page(site_dir, name)
    context, page, _, errors, _ = _open(browser, site_url + path, scheme=scheme)
    try:
        _loaded(page, name)
        root = page.locator(_selector(name))
        layer = root.locator("select").nth(0)
        layer.focus()
        page.keyboard.press("ArrowDown")  # the next layer, from the keyboard
        assert layer.input_value() == "1"
        page.keyboard.press("Tab")  # the head
        page.keyboard.press("Tab")  # the first query
        assert page.evaluate("() => document.activeElement.dataset.position") == "0"
        page.keyboard.press("ArrowRight")
        assert page.evaluate("() => document.activeElement.dataset.position") == "1"
        status = root.locator("[role=status]").inner_text()
        assert "position 1" in status, status
        violations = axe_violations(page)
        assert not violations, "\n".join(describe(violations))
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("name", VIEWS)
def test_the_chinese_view_speaks_chinese(browser, site_url, site_dir, name):
    path = VIEWS[name]
    if not (site_dir / "zh_CN" / path).is_file():
        pytest.skip("the Chinese edition is not built")
    context, page, *_ = _open(browser, site_url + "zh_CN/" + path)
    try:
        _loaded(page, name)
        root = page.locator(_selector(name))
        assert "每一层" in root.locator(".attention-widget-title").inner_text()
        root.locator(".attention-widget-token").first.focus()
        assert "位置 0" in root.locator("[role=status]").inner_text()
    finally:
        context.close()
