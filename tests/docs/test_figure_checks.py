"""The build's figure checks (docs/_ext/attention_figures.py): text that shows under 8 pt in
the page's column, red next to green, colour bars that repeat a scale or outgrow their plots,
and an empty band above the title are found; a figure that fits passes."""

from __future__ import annotations

import importlib
import sys

import matplotlib
import pytest
from docbuild import ROOT, load_conf

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def checks():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        yield importlib.import_module("attention_figures")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_the_build_scrapes_through_the_checks_and_saves_2x_images():
    conf = load_conf()["sphinx_gallery_conf"]
    assert conf["image_scrapers"] == ("attention_figures.scraper",)
    assert 2 in [float(str(m).rstrip("x")) for m in conf["image_srcset"]]


def test_a_column_wide_figure_with_default_text_passes(checks):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot([0, 1], [0, 1], color="#0072b2", label="a")
    ax.plot([0, 1], [1, 0], color="#e69f00", label="b")
    ax.set(title="title", xlabel="x", ylabel="y")
    ax.legend()
    assert checks.figure_problems(fig) == []


def test_a_wide_figure_shrinks_its_text_under_8_pt(checks):
    # 12 in at 100 dpi is 1200 px, shown in 736: 10 pt text shows at 10 * 736 / 1200.
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.set_xlabel("key")
    small = dict(checks.small_text(fig))
    assert small["key"] == pytest.approx(10 * 736 / 1200, abs=0.01)
    (problem,) = checks.figure_problems(fig)
    assert "under 8 pt" in problem and "'key'" in problem


def test_small_text_in_a_narrow_figure_is_found_and_hidden_text_is_not(checks):
    fig, (ax, hidden) = plt.subplots(1, 2, figsize=(6, 3))
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    ax.text(0.5, 0.2, "blank ", fontsize=6, visible=False)
    hidden.set_title("in a hidden axes", fontsize=5)
    hidden.set_visible(False)
    assert checks.small_text(fig) == [("tiny", 6.0)]


def test_a_cell_with_several_figures_shows_each_smaller(checks):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.set_xlabel("key")
    assert checks.small_text(fig) == []
    assert checks.small_text(fig, display_px=checks.MULTI_SHARE * checks.COLUMN_PX)


def test_red_and_green_marks_are_refused_and_blue_orange_are_not(checks):
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([0, 1], [1, 2], color=["tab:green", "tab:red"])
    assert checks.red_green_pairs(fig) == [("#d62728", "#2ca02c")]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([0, 1], [1, 2], color=["#0072b2", "#e69f00"])
    ax.plot([0, 1], [2, 1], color="#009e73")
    ax.plot([0, 1], [1, 1], color="#d55e00")
    assert checks.red_green_pairs(fig) == []


def test_the_scraper_refuses_an_unreadable_figure_before_saving_it(checks, tmp_path):
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.set_title("too wide")
    paths = iter([str(tmp_path / "image.png")])
    block_vars = {"image_path_iterator": paths, "example_globals": {}}
    with pytest.raises(ValueError, match=r"figure 'too wide': text under 8 pt"):
        checks.scraper(None, block_vars, {"image_srcset": [], "matplotlib_animations": (False,)})
    assert not (tmp_path / "image.png").exists()
    assert plt.get_fignums() == []


def test_a_red_and_a_green_of_different_lightness_pass(checks):
    # Dark red arrows over pale green boxes: told apart by lightness alone.
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([0], [1], color="#a6d8a6")
    ax.plot([0, 1], [0, 1], color="#b3401a")
    assert checks.red_green_pairs(fig) == []


def _heatmap(ax, colour_bar: bool = True):
    import numpy as np

    image = ax.imshow(np.linspace(0, 1, 25).reshape(5, 5), vmin=0, vmax=1)
    if colour_bar:
        ax.figure.colorbar(image, ax=ax)
    return image


def test_panels_of_one_scale_with_a_bar_each_are_refused(checks):
    # Three square heatmaps in a wide, tall figure, each with its own bar: the bars repeat one
    # scale and stand twice as tall as the panels.
    fig, axes = plt.subplots(1, 3, figsize=(9, 4.8), layout="constrained")
    for ax in axes:
        _heatmap(ax)
    problems = checks.colour_bar_problems(fig)
    assert any("3 colour bars of one colour scale for panels side by side" in p for p in problems)
    assert any("times as tall as the plots" in p for p in problems), problems


def test_one_bar_for_panels_that_share_a_scale_passes(checks):
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), layout="compressed")
    images = [_heatmap(ax, colour_bar=False) for ax in axes]
    fig.colorbar(images[-1], ax=axes, shrink=0.9)
    assert checks.colour_bar_problems(fig) == []
    # Panels stacked, each with its bar beside it: each bar reads with its panel.
    fig, axes = plt.subplots(3, 1, figsize=(6, 9), layout="constrained")
    for ax in axes:
        _heatmap(ax)
    assert checks.colour_bar_problems(fig) == []
    # One heatmap with its bar, as plot_attention draws it.
    fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
    _heatmap(ax)
    assert checks.figure_problems(fig) == []


def test_an_empty_band_above_the_title_is_refused(checks):
    # A square heatmap in a tall figure: the image keeps its aspect, the height is left empty.
    fig, ax = plt.subplots(figsize=(7.5, 9))
    _heatmap(ax)
    ax.set_title("Layer 2, head 0")
    assert checks.top_gap_px(fig) > checks.MAX_TOP_GAP_PX
    assert any("empty space above the title" in p for p in checks.figure_problems(fig))
    fig, ax = plt.subplots(figsize=(7.5, 6), layout="constrained")
    _heatmap(ax)
    ax.set_title("Layer 2, head 0")
    assert checks.top_gap_px(fig) < 10


def _scrape_cell(checks, tmp_path, cell):
    """Run ``cell`` as sphinx-gallery runs a page's cell (its output captured), then scrape its
    figure; returns the reST the scraper wrote and what stays printed below the figure."""
    from sphinx_gallery.gen_rst import _LoggingTee

    checks.record_show()
    tee = _LoggingTee(str(tmp_path / "page.py"))  # now sys.stdout, as while a cell runs
    try:
        cell()
    finally:
        tee.restore_std()
    paths = iter([str(tmp_path / "image_001.png")])
    block_vars = {"image_path_iterator": paths, "example_globals": {}}
    conf = {"image_srcset": [], "matplotlib_animations": (False,), "src_dir": str(tmp_path)}
    conf.update(compress_images=(), compress_images_args=())
    return checks.scraper(None, block_vars, conf), tee.output.getvalue()


def test_what_a_cell_prints_before_showing_its_figure_goes_above_it(checks, tmp_path):
    """sphinx-gallery shows a cell's figures, then all it printed; the scraper moves what was
    printed before ``plt.show()`` above the figures, as a notebook shows it."""

    def cell():
        print("the period is 7, so the stripe is 6 back")
        fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
        ax.plot([0, 1], [1, 0], color="#0072b2")
        plt.show()
        print("after the figure")

    rst, shown_below = _scrape_cell(checks, tmp_path, cell)
    above, _, figure = rst.partition(".. image")
    assert "sphx-glr-script-out" in above and "the stripe is 6 back" in above, rst
    assert "image_001.png" in figure or "image_001" in rst
    assert shown_below == "after the figure\n"  # still shown below the figure


def test_a_cell_that_prints_only_after_its_figure_is_left_alone(checks, tmp_path):
    def cell():
        fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
        ax.plot([0, 1], [1, 0], color="#0072b2")
        plt.show()
        print("the numbers the figure drew")

    rst, shown_below = _scrape_cell(checks, tmp_path, cell)
    assert "sphx-glr-script-out" not in rst
    assert shown_below == "the numbers the figure drew\n"
