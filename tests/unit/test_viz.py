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


# --- hardening: every bad input gets a clear error before anything is drawn ----------------

_W = torch.rand(3, 3)
_MASK = torch.ones(3, 3, dtype=torch.bool)


@pytest.mark.parametrize(
    "vmax, error, match",
    [
        ("1", TypeError, r"vmax must be a float; got str"),
        (True, TypeError, r"vmax must be a float; got bool"),
        (torch.ones(2), TypeError, r"vmax must be a float; got Tensor"),
        (float("nan"), ValueError, r"vmax must be finite; got nan"),
        (float("inf"), ValueError, r"vmax must be finite; got inf"),
        (0.0, ValueError, r"vmax must be positive; got 0.0"),
        (-1, ValueError, r"vmax must be positive; got -1"),
    ],
)
def test_plot_attention_refuses_a_vmax_that_is_not_a_positive_number(vmax, error, match):
    # vmax="1" used to draw (float("1")), and NaN drew a blank figure.
    with pytest.raises(error, match=match):
        plot_attention(_W, vmax=vmax)


@pytest.mark.parametrize(
    "vmax, error, match",
    [
        ("2", TypeError, r"vmax must be a float; got str"),
        (float("nan"), ValueError, r"vmax must be finite; got nan"),
        (-1.0, ValueError, r"vmax must be greater than -0.5; got -1.0"),
    ],
)
def test_plot_matrix_refuses_a_bad_vmax(vmax, error, match):
    with pytest.raises(error, match=match):
        plot_matrix(torch.tensor([[-0.5, 1.0]]), vmax=vmax)


def test_vmax_may_be_a_number_of_any_kind_or_a_0d_tensor():
    import numpy as np

    for vmax in (1, np.float32(1.0), torch.tensor(1.0)):
        assert plot_attention(_W, vmax=vmax).axes[0].images[0].get_clim() == (0.0, 1.0)
        assert plot_matrix(_W, vmax=vmax).axes[0].images[0].get_clim() == (0.0, 1.0)


_NOT_LABELS = [3, 3.0, "abc", torch.arange(3), {"a", "b", "c"}, {0: "a", 1: "b", 2: "c"}]
_NOT_LABELS_IDS = ["int", "float", "str", "tensor", "set", "dict"]
_LABELLED = {
    "plot_attention-x_tokens": lambda v: plot_attention(_W, x_tokens=v),
    "plot_attention-y_tokens": lambda v: plot_attention(_W, y_tokens=v),
    "plot_matrix-x_labels": lambda v: plot_matrix(_W, x_labels=v),
    "plot_matrix-y_labels": lambda v: plot_matrix(_W, y_labels=v),
    "plot_mask-x_labels": lambda v: plot_mask(_MASK, x_labels=v),
    "plot_mask-y_labels": lambda v: plot_mask(_MASK, y_labels=v),
}


@pytest.mark.parametrize("labels", _NOT_LABELS, ids=_NOT_LABELS_IDS)
@pytest.mark.parametrize("draw", _LABELLED.values(), ids=_LABELLED.keys())
def test_labels_must_be_a_sequence_of_labels(draw, labels):
    # x_tokens=3 used to fail in len(), "abc" drew one letter per key, a tensor drew
    # "tensor(0)", a set drew in no particular order.
    with pytest.raises(TypeError, match=r"(x|y)_(tokens|labels) must be a sequence of 3 labels"):
        draw(labels)


@pytest.mark.parametrize("labels", [("a", "b", "c"), range(3), [1, 2, 3]], ids=str)
def test_labels_may_be_any_sequence(labels):
    # range(S) labels the keys by position on the masks page.
    shown = plot_mask(_MASK, x_labels=labels).axes[0].get_xticklabels()
    assert [t.get_text() for t in shown] == [str(label) for label in labels]


def test_plot_mask_text_must_be_a_sequence_of_strings():
    with pytest.raises(TypeError, match=r"text must be a sequence of 2 labels.*got str"):
        plot_mask(torch.ones(1, 2, dtype=torch.bool), text="ab")


_DRAWN = {
    "plot_attention": (plot_attention, "weights"),
    "plot_matrix": (plot_matrix, "matrix"),
    "plot_mask": (plot_mask, "mask"),
}
_BAD_VALUES = [
    (torch.rand(2, 2, device="meta"), ValueError, r"{} must hold values; got .*meta"),
    (torch.rand(2, 2, dtype=torch.complex64), TypeError, r"{} must be real; got torch.complex64"),
    (torch.ones(2, 2) + 0j, TypeError, r"{} must be real; got torch.complex64"),
    (torch.ones(2, 2).numpy() + 0j, TypeError, r"{} must be real; got complex\d+"),
    ([["a", "b"]], TypeError, r"{} must be a tensor or array of numbers; got list"),
    ([[1.0, 2.0], [1.0]], TypeError, r"{} must be a tensor or array of numbers; got list"),
    (None, TypeError, r"{} must be a tensor or array of numbers; got NoneType"),
    (torch.full((2, 2), float("nan")), ValueError, r"{} must be finite; got 4 NaN or infinite"),
    (torch.tensor([[0.0, float("inf")]]), ValueError, r"{} must be finite; got 1 NaN or infinite"),
]


@pytest.mark.parametrize(
    "values, error, match", _BAD_VALUES,
    ids=["meta", "complex", "complex-sum", "complex-numpy", "strings", "ragged", "none", "nan",
         "inf"],
)  # fmt: skip
@pytest.mark.parametrize("draw, name", _DRAWN.values(), ids=_DRAWN.keys())
def test_values_that_cannot_be_drawn_are_refused(draw, name, values, error, match):
    # complex weights used to draw their real part (with a warning), NaN a blank heatmap,
    # meta tensors failed inside torch.
    with pytest.raises(error, match=match.format(name)):
        draw(values)


def test_plot_attention_refuses_negative_weights():
    with pytest.raises(
        ValueError, match=r"weights must be non-negative.*got min -0.5.*plot_matrix"
    ):
        plot_attention(torch.tensor([[1.0, -0.5]]))


@pytest.mark.parametrize("mask", [torch.full((2, 2), 0.5), torch.full((2, 2), 2)], ids=str)
def test_plot_mask_refuses_values_other_than_true_and_false(mask):
    # 0.5 used to be drawn as blocked, 2 as may attend.
    with pytest.raises(ValueError, match=r"mask must hold only True and False \(or 1 and 0\)"):
        plot_mask(mask)


@pytest.mark.parametrize("draw", [plot_attention, plot_matrix, plot_mask])
@pytest.mark.parametrize("ax", ["ax", 1, "figure"])
def test_ax_must_be_matplotlib_axes(draw, ax):
    ax = plt.figure() if ax == "figure" else ax
    with pytest.raises(TypeError, match=r"ax must be a matplotlib Axes or None; got"):
        draw(_MASK, ax=ax)


@pytest.mark.parametrize("dtype", [torch.bool, torch.long, torch.bfloat16, torch.float16])
def test_real_dtypes_are_drawn(dtype):
    eye = torch.eye(2, dtype=dtype)
    for draw in (plot_attention, plot_matrix, plot_mask):
        assert draw(eye).axes


def test_plot_attention_leaves_the_colour_bar_to_the_caller_when_asked():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        plot_attention(torch.eye(3), ax=ax, vmax=1.0, colorbar=False)
    assert len(fig.axes) == 2  # the two heatmaps, no bar
    fig.colorbar(axes[0].images[0], ax=axes)
    assert len(fig.axes) == 3
    with pytest.raises(TypeError, match="colorbar"):
        plot_attention(torch.eye(3), colorbar="no")
    plt.close("all")
