"""Figures the pages share: attention heatmaps, annotated matrices and masks.

matplotlib is imported only when a picture is drawn. Every function draws into a given axes or
a new figure and returns the figure.
"""

import math
from collections.abc import Sequence

from ._checks import check_bool, check_float, check_has_values

__all__ = ["plot_attention", "plot_matrix", "plot_mask", "mask_legend", "plot_blocks"]

# A panel grows by 0.32 in per token up to MAX_CELL inches, and a grid of heads up to MAX_WIDTH
# inches wide, so that a long sequence never asks for a figure larger than memory. A page shows
# a figure in a column 7.36 in wide (736 px at 100 dpi) and shrinks a wider one: at 8 in, text
# drawn at matplotlib's 10 pt still shows at 9.2 pt.
MIN_CELL, CELL_PER_TOKEN, MAX_CELL, MAX_WIDTH = 3.2, 0.32, 8.0, 8.0
# Tick labels at 10 pt need about this much room each (inches); more tokens than fit are thinned.
LABEL_ROOM = 0.16
# A grid puts this many heads side by side, and two when each has more tokens than this.
MAX_COLS, FEW_TOKENS = 4, 8


def _to_array(values, name: str, ndims: tuple[int, ...]):
    """``values`` (tensor or array of real numbers, all finite) as a float numpy array of one
    of ``ndims`` dimensions."""
    import numpy as np
    import torch

    if isinstance(values, torch.Tensor):
        check_has_values(values, name)
        if values.is_complex():
            raise TypeError(f"{name} must be real; got {values.dtype} - draw .real or .abs()")
        values = values.detach().cpu().double().numpy()
    try:
        array = np.asarray(values)
    except ValueError:  # a ragged list
        array = np.asarray(None)
    if array.dtype.kind == "c":
        raise TypeError(f"{name} must be real; got {array.dtype} - draw .real or .abs()")
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a tensor or array of numbers; got {type(values).__name__}")
    array = array.astype(float)
    if array.ndim not in ndims:
        shapes = " or ".join(
            {2: "(L, S)", 3: "(H, L, S)", 4: "(layers, H, L, S)"}[n] for n in ndims
        )
        raise ValueError(f"{name} must be {shapes}; got shape {array.shape}")
    if 0 in array.shape:
        raise ValueError(f"{name} has nothing to draw; got shape {array.shape}")
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).sum())
        raise ValueError(f"{name} must be finite; got {bad} NaN or infinite entries")
    return array


def _check_labels(labels, name: str, n: int) -> None:
    """``labels`` is None or a sequence (list, tuple, range, 1-D array) of ``n`` labels."""
    import numpy as np

    if labels is None:
        return
    sequence = isinstance(labels, Sequence) and not isinstance(labels, (str, bytes))
    if not (sequence or isinstance(labels, np.ndarray) and labels.ndim == 1):
        hint = " - use .tolist()" if hasattr(labels, "tolist") else ""
        raise TypeError(
            f"{name} must be a sequence of {n} labels, such as a list of str; "
            f"got {type(labels).__name__}{hint}"
        )
    if len(labels) != n:
        raise ValueError(f"{name} must have {n} labels; got {len(labels)}")


def _vmax(vmax, **bounds):
    """``vmax`` as a float (a 0-d tensor is read), checked by ``check_float``; None passes."""
    import torch

    if isinstance(vmax, torch.Tensor) and vmax.dim() == 0:
        check_has_values(vmax, "vmax")
        vmax = vmax.item()
    if vmax is not None:
        check_float(vmax, "vmax", **bounds)
    return vmax


def _check_ax(ax) -> None:
    from matplotlib.axes import Axes

    if ax is not None and not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")


def _check_title(title) -> None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None; got {type(title).__name__}")


def _label_axis(ax, axis: str, labels, room: float, name: str) -> None:
    """Put ``labels`` on the x or y axis of ``ax`` (``room`` inches long); when more labels
    than fit, keep one in ``step`` and say so in the axis label."""
    n = len(labels)
    step = max(1, math.ceil(n * LABEL_ROOM / room))
    where = range(0, n, step)
    shown = [str(labels[i]) for i in where]
    if axis == "x":
        ax.set_xticks(where, shown, rotation=90)
    else:
        ax.set_yticks(where, shown)
    if step > 1:
        name = f"{name} (1 label in {step} of {n} shown)"
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(name)


def plot_attention(
    weights, *, x_tokens=None, y_tokens=None, ax=None, title=None, vmax=None, colorbar=True
):
    r"""Draw attention weights as a heatmap: queries down the side, keys along the bottom.

    One :math:`(L, S)` matrix draws one heatmap; an :math:`(H, L, S)` stack draws a grid with one
    titled panel per head and a shared colour scale: four heads to a row, or two when they have
    more than 8 tokens. A panel grows with the number of tokens, and the figure up to 8 in wide
    (shown in a page's column, its text stays at 8 pt or more); beyond the labels that fit, one
    token label in every few is shown, and the axis label says which.

    Args:
        weights (Tensor or array): :math:`(L, S)` or :math:`(H, L, S)`, values in [0, 1].
        x_tokens (list[str], optional): labels of the :math:`S` keys. Default: ``None``.
        y_tokens (list[str], optional): labels of the :math:`L` queries. Default: ``None``
            (``x_tokens`` when it has :math:`L` entries).
        ax (matplotlib.axes.Axes, optional): draw a single heatmap into this axes.
            Default: ``None`` (a new figure).
        title (str, optional): the figure's title, wrapped to the figure's width.
            Default: ``None``.
        vmax (float, optional): the weight drawn brightest, to compare several figures on one
            scale (e.g. ``1.0``). Default: ``None`` (the largest weight drawn).
        colorbar (bool): draw the colour bar. Panels drawn into several ``ax`` on one scale
            (the same ``vmax``) want one bar between them, drawn by the caller:
            ``fig.colorbar(axes[0].images[0], ax=axes)``. Default: ``True``.

    Returns:
        matplotlib.figure.Figure: the figure drawn on.

    Examples::

        >>> fig = plot_attention(torch.eye(3), x_tokens=["a", "b", "c"], title="identity")
        >>> len(fig.axes)  # the heatmap and its colour bar
        2
        >>> fig = plot_attention(torch.rand(512, 512), x_tokens=[str(i) for i in range(512)])
        >>> bool(fig.get_size_inches().max() <= 8), fig.axes[0].get_xlabel()
        (True, 'key (1 label in 13 of 512 shown)')
    """
    import textwrap

    import matplotlib.pyplot as plt

    weights = _to_array(weights, "weights", (2, 3))
    if weights.min() < 0:
        raise ValueError(
            f"weights must be non-negative (attention weights lie in [0, 1]); got min "
            f"{weights.min():g} - draw signed values with plot_matrix"
        )
    _check_title(title)
    _check_ax(ax)
    check_bool(colorbar, "colorbar")
    vmax = _vmax(vmax, positive=True)
    L, S = weights.shape[-2:]
    _check_labels(x_tokens, "x_tokens", S)
    if y_tokens is None and x_tokens is not None and len(x_tokens) == L:
        y_tokens = x_tokens
    _check_labels(y_tokens, "y_tokens", L)
    if weights.ndim == 3 and ax is not None:
        raise ValueError("ax draws one heatmap; pass (L, S) weights or leave ax=None for a grid")

    panels = weights[None] if weights.ndim == 2 else weights  # (H, L, S)
    H = len(panels)
    if ax is not None:
        fig, axes = ax.figure, [ax]
        width, height = ax.get_window_extent().transformed(fig.dpi_scale_trans.inverted()).size
    else:
        cols = min(H, MAX_COLS if max(L, S) <= FEW_TOKENS else 2)
        rows = -(-H // cols)
        cell = max(MIN_CELL, CELL_PER_TOKEN * max(L, S))
        cell = min(cell, MAX_CELL, (MAX_WIDTH - 1.2) / cols)
        fig, grid = plt.subplots(
            rows, cols, figsize=(cell * cols + 1.2, cell * rows + 0.4), squeeze=False,
            layout="constrained",
        )  # fmt: skip
        axes = list(grid.flat)
        for extra in axes[H:]:
            extra.set_visible(False)
        width = height = cell
    top = float(weights.max()) if vmax is None else float(vmax)
    for h, (panel, axis) in enumerate(zip(panels, axes, strict=False)):
        image = axis.imshow(panel, vmin=0.0, vmax=max(1e-12, top), cmap="viridis")
        axis.set_xlabel("key")
        axis.set_ylabel("query")
        if x_tokens is not None:
            _label_axis(axis, "x", x_tokens, width, "key")
        if y_tokens is not None:
            _label_axis(axis, "y", y_tokens, height, "query")
        if H > 1:
            axis.set_title(f"head {h}")
    if colorbar:
        fig.colorbar(image, ax=axes[:H], shrink=0.8, label="attention weight")
    if title is not None:
        width = max(20, int(8 * fig.get_figwidth()))
        title = "\n".join(textwrap.fill(line, width) for line in title.splitlines())
        if H > 1:
            fig.suptitle(title)
        else:
            axes[0].set_title(title)
    return fig


def plot_matrix(
    matrix, *, x_labels=None, y_labels=None, ax=None, title=None, cmap="Blues", vmax=None
):
    r"""Draw a small matrix as a heatmap with its numbers written in the cells.

    For the few rows and columns a page works through by hand (embeddings, :math:`Q`, :math:`K`,
    :math:`V`, scores, weights): each cell shows its value to two decimals, in white on dark
    cells and black on light ones.

    Args:
        matrix (Tensor or array): :math:`(R, C)`.
        x_labels (list[str], optional): labels of the :math:`C` columns. Default: ``None``.
        y_labels (list[str], optional): labels of the :math:`R` rows. Default: ``None``.
        ax (matplotlib.axes.Axes, optional): draw into this axes. Default: ``None`` (a new
            figure).
        title (str, optional): the axes' title. Default: ``None``.
        cmap (str): a matplotlib colour map. Default: ``"Blues"``.
        vmax (float, optional): the value drawn darkest. Default: ``None`` (the largest value).
            The lightest is the smallest value, or 0 if that is lower.

    Shape:
        - matrix: :math:`(R, C)`, any rows :math:`R` and columns :math:`C`

    Returns:
        matplotlib.figure.Figure: the figure drawn on.

    Examples::

        >>> fig = plot_matrix(torch.tensor([[0.5, 1.0], [2.0, 0.0]]), x_labels=["a", "b"])
        >>> [t.get_text() for t in fig.axes[0].texts]
        ['0.5', '1', '2', '0']
    """
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    m = _to_array(matrix, "matrix", (2,))
    _check_title(title)
    _check_ax(ax)
    _check_labels(x_labels, "x_labels", m.shape[1])
    _check_labels(y_labels, "y_labels", m.shape[0])
    bottom = min(0.0, float(m.min()))
    vmax = _vmax(vmax, greater_than=bottom)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * m.shape[1], 0.8 + 0.6 * m.shape[0]))
    top = max(float(m.max()), 1e-9) if vmax is None else float(vmax)
    norm = mcolors.Normalize(vmin=bottom, vmax=top)
    ax.imshow(m, cmap=cmap, norm=norm)
    for (i, j), value in _cells(m):
        colour = "white" if norm(value) > 0.6 else "black"
        text = f"{value:.2f}".rstrip("0").rstrip(".")
        ax.text(j, i, "0" if text == "-0" else text, ha="center", va="center", color=colour)
    if x_labels is not None:
        long = max(len(str(label)) for label in x_labels) > 3
        ax.set_xticks(range(len(x_labels)), x_labels, rotation=45 if long else 0,
                      ha="right" if long else "center")  # fmt: skip
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), y_labels)
    if title is not None:
        ax.set_title(title)
    return ax.figure


def _cells(m):
    """((row, column), value) for every cell of the 2-D array ``m``, row by row."""
    return (((i, j), float(m[i, j])) for i in range(m.shape[0]) for j in range(m.shape[1]))


# Blocked, may attend: grey and green, told apart with any colour vision by their lightness.
MASK_COLOURS = ("#d0d0d0", "#2ca02c")


def plot_mask(mask, *, x_labels=None, y_labels=None, ax=None, title=None, text=None):
    r"""Draw a bool mask: green where a query may attend, grey where it is blocked.

    Args:
        mask (Tensor or array): :math:`(L, S)`, ``True`` = may attend.
        x_labels (list[str], optional): labels of the :math:`S` keys. Default: ``None``.
        y_labels (list[str], optional): labels of the :math:`L` queries. Default: ``None``.
        ax (matplotlib.axes.Axes, optional): draw into this axes. Default: ``None`` (a new
            figure).
        title (str, optional): the axes' title. Default: ``None``.
        text (list[str], optional): :math:`L \cdot S` strings written in the cells, row by
            row (e.g. the values a mask stores). Default: ``None``.

    Shape:
        - mask: :math:`(L, S)`, bool

    Returns:
        matplotlib.figure.Figure: the figure drawn on; :func:`mask_legend` gives the legend.

    Examples::

        >>> fig = plot_mask(causal_mask(3), x_labels=["a", "b", "c"], title="causal")
        >>> fig.axes[0].images[0].get_array().tolist()
        [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    allowed = _to_array(mask, "mask", (2,))
    if not ((allowed == 0) | (allowed == 1)).all():
        raise ValueError(
            f"mask must hold only True and False (or 1 and 0); got values such as "
            f"{allowed[(allowed != 0) & (allowed != 1)][0]:g} - use mask.bool() or mask > 0"
        )
    allowed = allowed.astype(int)
    _check_title(title)
    _check_ax(ax)
    L, S = allowed.shape
    _check_labels(x_labels, "x_labels", S)
    _check_labels(y_labels, "y_labels", L)
    _check_labels(text, "text", L * S)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 0.4 * S, 1.0 + 0.4 * L))
    ax.imshow(allowed, cmap=ListedColormap(MASK_COLOURS), vmin=0, vmax=1)
    if x_labels is not None:
        ax.set_xticks(range(S), x_labels, rotation=90)
    if y_labels is not None:
        ax.set_yticks(range(L), y_labels)
    ax.set_xticks([i - 0.5 for i in range(1, S)], minor=True)
    ax.set_yticks([i - 0.5 for i in range(1, L)], minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    if title is not None:
        ax.set_title(title, fontsize=10)
    for ((i, j), _), value in zip(_cells(allowed), text or (), strict=False):
        ax.text(j, i, value, ha="center", va="center")
    return ax.figure


def mask_legend():
    """The legend entries of :func:`plot_mask`'s two colours, for ``fig.legend(handles=...)``.

    Returns:
        list[matplotlib.patches.Patch]: "may attend" and "blocked".

    Examples::

        >>> [patch.get_label() for patch in mask_legend()]
        ['may attend', 'blocked']
    """
    from matplotlib.patches import Patch

    blocked, allowed = MASK_COLOURS
    return [Patch(color=allowed, label="may attend"), Patch(color=blocked, label="blocked")]


def plot_blocks(owners, *, ax=None, title=None):
    r"""Draw which sequence holds each block of a paged cache's pool, step after step: one
    column per step, one row per block, one colour per sequence, white where a block is free.

    Args:
        owners (Tensor or array): :math:`(T, B)` integers, the sequence holding block
            :math:`b` after step :math:`t`, ``-1`` when it is free
            (the ``trace`` of :class:`attention.serving.ServeStats`).
        ax (matplotlib.axes.Axes, optional): draw into this axes. Default: ``None`` (a new
            figure).
        title (str, optional): the axes' title. Default: ``None``.

    Shape:
        - owners: :math:`(T, B)`, :math:`T` steps and :math:`B` blocks

    Returns:
        matplotlib.figure.Figure: the figure drawn on.

    Examples::

        >>> fig = plot_blocks([[0, -1], [0, 1], [-1, 1]], title="two sequences")
        >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
        ('step', 'block')
    """
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt
    import numpy as np

    m = _to_array(owners, "owners", (2,))
    _check_title(title)
    _check_ax(ax)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.0, min(6.0, 1.5 + 0.12 * m.shape[1])))
    palette = plt.get_cmap("tab20").colors
    colours = ["white", *(palette[i % len(palette)] for i in range(max(int(m.max()) + 1, 1)))]
    cells = np.asarray(m, dtype=np.int64).T + 1  # (B, T): 0 free, s + 1 sequence s
    ax.imshow(cells, cmap=mcolors.ListedColormap(colours), vmin=0, vmax=len(colours) - 1,
              aspect="auto", interpolation="nearest", origin="lower")  # fmt: skip
    ax.set_xlabel("step")
    ax.set_ylabel("block")
    if title is not None:
        ax.set_title(title)
    return ax.figure
