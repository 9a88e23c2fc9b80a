"""The build's figure checks (docs/_ext/attention_figures.py): text that shows under 8 pt in
the page's column, and red next to green, are found; a figure that fits passes."""

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
