"""plot_attention: one heatmap for (L, S), a grid of titled heads for (H, L, S)."""

import matplotlib.pyplot as plt
import pytest
import torch

from attention import plot_attention


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_one_heatmap_with_token_labels_and_a_title():
    fig = plot_attention(torch.eye(3), x_tokens=["a", "b", "c"], title="identity")
    heatmap, colorbar = fig.axes
    assert [t.get_text() for t in heatmap.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in heatmap.get_yticklabels()] == ["a", "b", "c"]
    assert heatmap.get_xlabel() == "key" and heatmap.get_ylabel() == "query"
    assert "identity" in (fig.get_suptitle(), heatmap.get_title())


def test_vmax_fixes_the_colour_scale():
    fig = plot_attention(torch.full((2, 2), 0.25), vmax=1.0)
    assert fig.axes[0].images[0].get_clim() == (0.0, 1.0)


def test_a_grid_with_one_titled_panel_per_head():
    fig = plot_attention(torch.rand(6, 2, 3).softmax(-1), x_tokens=["x", "y", "z"])
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in visible] == [f"head {h}" for h in range(6)]
    assert [t.get_text() for t in visible[0].get_xticklabels()] == ["x", "y", "z"]
    # One colour scale shared by every head, so the panels can be compared.
    assert len({ax.images[0].get_clim() for ax in visible}) == 1


def test_draws_into_a_given_axes():
    fig, ax = plt.subplots()
    assert plot_attention(torch.rand(2, 4), ax=ax, title="one") is fig
    assert ax.get_title() == "one"


@pytest.mark.parametrize(
    "weights, kwargs, match",
    [
        (torch.rand(4), {}, r"weights must be \(L, S\) or \(H, L, S\); got shape \(4,\)"),
        (torch.rand(2, 3), {"x_tokens": ["a"]}, r"x_tokens must have 3 labels; got 1"),
        (torch.rand(2, 3), {"y_tokens": ["a"]}, r"y_tokens must have 2 labels; got 1"),
    ],
)
def test_rejects_bad_input(weights, kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot_attention(weights, **kwargs)


def test_rejects_a_grid_for_one_axes():
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match=r"ax draws one heatmap"):
        plot_attention(torch.rand(2, 3, 3), ax=ax)
