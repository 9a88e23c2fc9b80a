"""plot_attention: one heatmap for (L, S), a grid of titled heads for (H, L, S)."""

import matplotlib.pyplot as plt
import pytest
import torch

from attention import causal_mask, mask_legend, plot_attention, plot_mask, plot_matrix


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


# --- size: a long sequence never asks for a figure larger than memory ----------------------


def test_a_long_sequence_gives_a_capped_figure_with_thinned_labels():
    # 512 tokens used to ask for 16504 x 16424 pixels (MemoryError on savefig).
    tokens = [str(i) for i in range(512)]
    fig = plot_attention(torch.rand(512, 512), x_tokens=tokens)
    assert max(fig.get_size_inches()) <= 8
    heatmap = fig.axes[0]
    shown = [t.get_text() for t in heatmap.get_xticklabels()]
    step = int(shown[1]) - int(shown[0])
    assert step > 1 and shown == tokens[::step]
    assert heatmap.get_xlabel() == f"key (1 label in {step} of 512 shown)"
    assert heatmap.get_ylabel() == f"query (1 label in {step} of 512 shown)"


def test_many_heads_of_a_long_sequence_fit_in_a_capped_grid():
    # 8 heads of L = 700 used to get the process killed for memory.
    fig = plot_attention(torch.rand(8, 700, 700))
    width, height = fig.get_size_inches()
    assert width <= 8 and height <= 24


@pytest.mark.parametrize(
    ("heads", "tokens", "cols"), [(4, 5, 4), (8, 8, 4), (8, 12, 2), (3, 12, 2)]
)
def test_a_grid_fits_a_page_column_with_text_of_8_pt_or_more(heads, tokens, cols):
    # A page shows figures in a 7.36 in column: a figure up to 8 in wide is shrunk by at most
    # 0.92, so its text, all 10 pt or more, still shows at 8 pt or more.
    from matplotlib.text import Text

    labels = [f"t{i}" for i in range(tokens)]
    fig = plot_attention(torch.rand(heads, tokens, tokens), x_tokens=labels, title="t")
    fig.canvas.draw()
    assert fig.get_figwidth() <= 8
    assert len({round(ax.get_position().x0, 3) for ax in fig.axes[:heads]}) == cols
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert sizes and min(sizes) >= 10


def test_a_short_sequence_keeps_every_label():
    tokens = [f"t{i}" for i in range(20)]
    heatmap = plot_attention(torch.rand(20, 20), x_tokens=tokens).axes[0]
    assert [t.get_text() for t in heatmap.get_xticklabels()] == tokens
    assert heatmap.get_xlabel() == "key"


# --- plot_matrix and plot_mask -------------------------------------------------------------


def test_plot_matrix_writes_every_value_in_its_cell():
    matrix = torch.tensor([[0.25, 1.0, 0.0], [2.0, -0.5, 0.123]])
    fig = plot_matrix(matrix, x_labels=["a", "b", "c"], y_labels=["r0", "r1"], title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["0.25", "1", "0", "2", "-0.5", "0.12"]
    assert [t.get_position() for t in ax.texts][4] == (1, 1)  # column 1, row 1
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["r0", "r1"]
    assert ax.get_title() == "t"
    # The colour scale starts at 0, or lower when a value is negative; vmax fixes its top.
    assert ax.images[0].get_clim() == (-0.5, 2.0)
    assert plot_matrix(matrix.abs(), vmax=4.0).axes[0].images[0].get_clim() == (0.0, 4.0)


def test_plot_matrix_draws_into_a_given_axes():
    fig, ax = plt.subplots()
    assert plot_matrix(torch.eye(2), ax=ax) is fig and len(ax.texts) == 4


def test_plot_mask_colours_allowed_and_blocked_cells_and_writes_text():
    mask = causal_mask(2, 3)
    fig = plot_mask(mask, x_labels=["a", "b", "c"], y_labels=["q0", "q1"], text=list("123456"))
    ax = fig.axes[0]
    assert ax.images[0].get_array().tolist() == mask.int().tolist()
    assert [t.get_text() for t in ax.texts] == list("123456")
    assert [t.get_position() for t in ax.texts][5] == (2, 1)
    blocked, allowed = (ax.images[0].cmap(v) for v in (0.0, 1.0))
    assert [p.get_facecolor() for p in mask_legend()] == [allowed, blocked]
    assert [p.get_label() for p in mask_legend()] == ["may attend", "blocked"]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: plot_matrix(torch.rand(2, 3, 4)), ValueError, r"matrix must be \(L, S\)"),
        (lambda: plot_matrix(torch.rand(0, 3)), ValueError, r"matrix has nothing to draw"),
        (
            lambda: plot_matrix(torch.rand(2, 3), x_labels=["a"]),
            ValueError,
            r"x_labels must have 3",
        ),
        (lambda: plot_matrix(torch.rand(2, 3), title=1), TypeError, r"title must be a str"),
        (lambda: plot_mask(torch.ones(2, 2), text=["a"]), ValueError, r"text must have 4 labels"),
        (lambda: plot_mask(torch.ones(2)), ValueError, r"mask must be \(L, S\)"),
    ],
)
def test_plot_matrix_and_plot_mask_reject_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
