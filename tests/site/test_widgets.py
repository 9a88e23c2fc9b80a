"""The reader's widgets in a real browser: the models the pages trained, run by ONNX Runtime Web,
give the build's PyTorch numbers; the runtime loads only when a reader starts a widget; a widget
is reached with the keyboard, passes axe in both colour schemes, speaks the page's language, and
makes no request outside the site."""

from __future__ import annotations

import json
import re

import pytest
import sitecheck
import torch
from test_accessibility import axe_violations, describe

from attention.language_model import sampling_distribution

#: Each widget: its page and its model.
WIDGETS = {
    "language-model": ("tutorials/4_generation/16_language_model.html", "char-lm"),
    "classifier": ("tutorials/3_training_and_reading/11_visualising_attention.html", "sentiment"),
    "dates": ("tutorials/4_generation/15_encoder_decoder.html", "dates"),
}
#: What each widget's last run holds (``attentionWidget.last``), and the name of the same in
#: the build's reference: the ids equal, the numbers to 1e-4.
COMPARED = {
    "language-model": {"ids": "ids", "logits": "logits", "weights": "weights"},
    "classifier": {"ids": "ids", "logits": "logits", "weights": "weights"},
    # the source, the greedy output (bos to eos), every step's logits, the last run's
    # cross-attention (layers, H, T, S)
    "dates": {"src": "src", "tgt": "output", "logits": "logits", "cross": "cross"},
}
IDS = ("ids", "src", "tgt")
#: The element that takes the focus in each widget's attention view, and the key that moves it.
KEYBOARD = {
    "language-model": (".attention-widget-token", "ArrowRight"),
    "classifier": (".attention-widget-token", "ArrowRight"),
    "dates": (".attention-widget-written", "ArrowDown"),  # the rows of the grid
}
#: Loaded only after the reader starts a widget.
HEAVY = re.compile(r"\.(wasm|onnx)(\?|$)|/_static/ort/|/_static/models/")


def _selector(kind: str) -> str:
    return f".attention-widget[data-widget='{kind}']"


def _reference(site_dir, model: str) -> dict:
    path = site_dir / "_static" / "models" / f"{model}.reference.json"
    assert path.is_file(), f"the build exports the widget's model: {path} is missing"
    return json.loads(path.read_text())


def _open(browser, url: str, *, scheme: str = "light"):
    """A page of the site in a fresh tab that records requests and console errors, and refuses
    any request that leaves the site."""
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    outside = []

    def route(route):
        outside.append(route.request.url)
        route.abort("blockedbyclient")

    context.route(sitecheck.NOT_LOCAL_URL, route)
    page = context.new_page()
    page.set_default_timeout(120_000)
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url, wait_until="load")
    return context, page, requests, errors, outside


def _started(page, kind: str) -> None:
    page.wait_for_function(
        f'() => document.querySelector("{_selector(kind)}").attentionWidget.last !== null'
    )


@pytest.mark.parametrize("kind", WIDGETS)
def test_the_browser_gives_the_pytorch_models_numbers(browser, site_url, site_dir, kind):
    path, model = WIDGETS[kind]
    reference = _reference(site_dir, model)
    context, page, requests, errors, outside = _open(browser, site_url + path)
    try:
        assert not [url for url in requests if HEAVY.search(url)], "loaded before the start"
        page.locator(f"{_selector(kind)} .attention-widget-start").click()
        _started(page, kind)
        last = page.evaluate(
            f"""() => {{
                const last = document.querySelector("{_selector(kind)}").attentionWidget.last;
                return Object.fromEntries(Object.entries(last).map(([k, v]) => [k, Array.from(v)]));
            }}"""
        )
        for name, reference_name in COMPARED[kind].items():
            if name in IDS:
                assert last[name] == reference[reference_name], name
            else:
                expected = torch.tensor(reference[reference_name]).flatten()
                assert len(last[name]) == len(expected), name
                assert (torch.tensor(last[name]) - expected).abs().max() <= 1e-4, name
        if "answer" in reference:  # what the widget says it wrote
            answer = page.locator(f"{_selector(kind)} .attention-widget-prediction").inner_text()
            assert reference["answer"] in answer, (answer, reference["answer"])
        assert [url for url in requests if HEAVY.search(url)], "the runtime and model loaded"
        assert not errors and not outside, (errors, outside)
    finally:
        context.close()


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 1.0, "topK": None, "topP": None},
        {"temperature": 0.7, "topK": 5, "topP": None},
        {"temperature": 1.3, "topK": None, "topP": 0.9},
        {"temperature": 0.5, "topK": 20, "topP": 0.5},
    ],
)
def test_the_sampling_rule_is_the_packages(browser, site_url, site_dir, options):
    logits = torch.tensor(_reference(site_dir, "char-lm")["logits"], dtype=torch.float64)[-1]
    context, page, *_ = _open(browser, site_url + WIDGETS["language-model"][0])
    try:
        got = page.evaluate(
            """async ([url, logits, options]) => {
                const { samplingDistribution } = await import(url);
                return Array.from(samplingDistribution(logits, options));
            }""",
            [site_url + "_static/widgets/sampling.js", logits.tolist(), options],
        )
    finally:
        context.close()
    expected = sampling_distribution(
        logits, temperature=options["temperature"], top_k=options["topK"], top_p=options["topP"]
    )
    assert (torch.tensor(got, dtype=torch.float64) - expected).abs().max() <= 1e-6


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("kind", WIDGETS)
def test_the_open_widget_is_accessible_and_keyboard_operable(browser, site_url, kind, scheme):
    widget = _selector(kind)
    focusable, key = KEYBOARD[kind]
    context, page, _, errors, _ = _open(browser, site_url + WIDGETS[kind][0], scheme=scheme)
    try:
        page.locator(f"{widget} .attention-widget-start").focus()
        page.keyboard.press("Enter")  # started from the keyboard
        _started(page, kind)
        page.locator(f"{widget} {focusable}").first.focus()
        page.keyboard.press(key)
        assert page.evaluate("() => document.activeElement.dataset.position") == "1"
        status = page.locator(f"{widget} [role=status]").inner_text()
        assert "position 1" in status, status
        violations = axe_violations(page)
        assert not violations, "\n".join(describe(violations))
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("kind", WIDGETS)
def test_the_chinese_widget_speaks_chinese(browser, site_url, site_dir, kind):
    path = WIDGETS[kind][0]
    if not (site_dir / "zh_CN" / path).is_file():
        pytest.skip("the Chinese edition is not built")
    context, page, *_ = _open(browser, site_url + "zh_CN/" + path)
    try:
        text = page.locator(f"{_selector(kind)} .attention-widget-start").inner_text()
        assert "启动模型" in text, text
    finally:
        context.close()


def test_the_date_widget_reads_a_typed_date_and_says_what_it_left_out(browser, site_url):
    """A date typed and sent with Enter is written anew; a character outside the task's
    vocabulary is named and left out; another layer and head redraw the grid."""
    widget = _selector("dates")
    context, page, _, errors, outside = _open(browser, site_url + WIDGETS["dates"][0])
    try:
        page.locator(f"{widget} .attention-widget-start").click()
        _started(page, "dates")
        date = page.locator(f"{widget} input.attention-widget-date")
        date.fill("Wed 03/03/2021 ♥")
        date.press("Enter")
        status = page.locator(f"{widget} [role=status]")
        page.wait_for_function(
            f'() => document.querySelector("{widget}").attentionWidget.last.src.length === 14'
        )
        assert "left out: ♥" in status.inner_text(), status.inner_text()
        assert "Answer:" in status.inner_text()
        rows = page.locator(f"{widget} .attention-widget-written")
        columns = page.locator(f"{widget} thead th")
        assert columns.count() == len("Wed 03/03/2021")
        assert rows.count() == len(page.evaluate(
            f'() => document.querySelector("{widget}").attentionWidget.last.tgt'
        )) - 1  # fmt: skip
        page.locator(f"{widget} select").nth(1).select_option("mean")
        assert "mean of the heads" in page.locator(f"{widget} caption").inner_text()
        date.fill("♥")
        date.press("Enter")
        page.wait_for_function(
            f'() => document.querySelector("{widget} [role=status]").textContent'
            '.startsWith("No character it knows")'
        )
        assert not errors and not outside, (errors, outside)
    finally:
        context.close()
